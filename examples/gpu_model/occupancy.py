"""Occupancy: how many warps an SM keeps resident for a kernel, and which resource runs out first.

Given a kernel's registers per thread, threads per block and shared memory per
block, :func:`occupancy` counts resident blocks and warps per SM the way
CUDA's occupancy calculator does (Learn tutorial "The GPU you are programming").
"""

from __future__ import annotations

from dataclasses import dataclass

from examples.gpu_model.specs import GPU, GPUS, KB, WARP_SIZE

REGISTER_ALLOCATION_UNIT = 256
"""Registers are handed to a warp in chunks of 256 (8 per thread)."""
SHARED_ALLOCATION_UNIT = 128
"""Shared memory is handed to a block in chunks of 128 bytes."""
SHARED_RESERVED_PER_BLOCK = 1024
"""Compute capability 8.0 and later keep 1 KB of each block's shared memory for the system."""


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limiter: str  # "warps", "blocks", "registers" or "shared memory": the resource that ran out first
    limits: dict[str, int]  # blocks per SM each resource alone would allow

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(
    registers_per_thread: int,
    threads_per_block: int,
    shared_mem_per_block: int = 0,
    gpu: GPU | str = "H100",
) -> Occupancy:
    """Resident blocks and warps per SM, the way CUDA's occupancy calculator counts them.

    ``shared_mem_per_block`` is in bytes. Each resource gives a cap on the
    blocks an SM can hold: the warp slots, the block slots, the register file
    (allocated per warp, rounded up to 256 registers) and the shared memory
    (allocated per block, plus 1 KB reserved, rounded up to 128 bytes, out of
    the largest shared-memory carve-out). The smallest cap wins.
    """
    gpu = GPUS[gpu] if isinstance(gpu, str) else gpu
    if not 1 <= registers_per_thread <= gpu.max_registers_per_thread:
        raise ValueError(f"registers_per_thread must be 1..{gpu.max_registers_per_thread}, got {registers_per_thread}")
    if not 1 <= threads_per_block <= 1024:
        raise ValueError(f"threads_per_block must be 1..1024, got {threads_per_block}")
    if not 0 <= shared_mem_per_block <= gpu.max_smem_per_block_kb * KB:
        raise ValueError(
            f"shared_mem_per_block must be 0..{gpu.max_smem_per_block_kb * KB} bytes on {gpu.name}, "
            f"got {shared_mem_per_block}"
        )
    warps_per_block = -(-threads_per_block // WARP_SIZE)
    registers_per_warp = _round_up(registers_per_thread * WARP_SIZE, REGISTER_ALLOCATION_UNIT)
    smem_per_block = _round_up(shared_mem_per_block + SHARED_RESERVED_PER_BLOCK, SHARED_ALLOCATION_UNIT)
    limits = {
        "warps": gpu.max_warps_per_sm // warps_per_block,
        "blocks": gpu.max_blocks_per_sm,
        "registers": (gpu.registers_per_sm // registers_per_warp) // warps_per_block,
        "shared memory": (gpu.max_smem_per_sm_kb * KB) // smem_per_block,
    }
    limiter = min(limits, key=lambda k: limits[k])  # ties: the first listed
    blocks = limits[limiter]
    return Occupancy(blocks, blocks * warps_per_block, gpu.max_warps_per_sm, limiter, limits)
