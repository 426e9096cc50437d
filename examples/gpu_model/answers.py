"""Answers to the exercises of "The GPU you are programming" (docs/tutorials/gpu_model.py).

Pure Python on top of the tutorial's models in this folder;
``tests/gpu_model/test_answers.py`` checks each answer.
"""

from __future__ import annotations

from examples.gpu_model.occupancy import occupancy
from examples.gpu_model.roofline import attainable, ridge_point
from examples.gpu_model.shared_memory import column_read_ways
from examples.gpu_model.specs import GPUS


# --8<-- [start:register_cap]
def register_cap(threads_per_block: int, target_fraction: float, gpu: str = "H100") -> int:
    """The most registers per thread that still reaches ``target_fraction`` occupancy."""
    best = 0
    for registers in range(1, GPUS[gpu].max_registers_per_thread + 1):
        if occupancy(registers, threads_per_block, gpu=gpu).fraction >= target_fraction:
            best = registers  # occupancy only falls as registers grow, so keep the last that passes
    return best


# 96 registers with 128-thread blocks: 3,072 registers per warp, so 21 warps fit,
# which is 5 blocks of 4 warps = 20 warps, 31.25% occupancy, limited by registers.
# For 50% (32 warps) each warp may hold 65,536 / 32 = 2,048 registers: 64 per thread.
# In Triton the cap is a launch option: kernel[grid](..., maxnreg=64).
# --8<-- [end:register_cap]


# --8<-- [start:padding]
def smallest_conflict_free_padding(max_padding: int = 8) -> int:
    """Words of padding per 32-word row that make reading a column conflict-free."""
    for padding in range(max_padding + 1):
        if column_read_ways(row_words=32 + padding) == 1:
            return padding
    raise ValueError(f"no padding up to {max_padding} words works")


# Row length 32: every element of a column sits in the same bank, 32-way.
# Row length 33: row r's element lands in bank (r * 33) % 32 = r, all different.
# Row length 34: bank (2r) % 32 repeats every 16 rows, still 2-way.
# Any odd row length works; an XOR swizzle gets the same result with no wasted words.
# --8<-- [end:padding]


# --8<-- [start:matmul_roofline]
def matmul_intensity(m: int, n: int, k: int, element_bytes: int = 2) -> float:
    """FLOP per byte of C = A @ B if A, B and C cross HBM exactly once."""
    flops = 2 * m * n * k  # a multiply and an add per (i, j, l)
    bytes_moved = element_bytes * (m * k + k * n + m * n)
    return flops / bytes_moved


def matmul_time_bound_ms(m: int, n: int, k: int, peak_tflops: float, bandwidth_gbps: float) -> float:
    """The roofline's lower bound on the time of one bf16 matmul."""
    flops = 2 * m * n * k
    best_tflops = attainable(matmul_intensity(m, n, k), peak_tflops, bandwidth_gbps)
    return flops / (best_tflops * 1e12) * 1e3


def is_compute_bound(m: int, n: int, k: int, peak_tflops: float, bandwidth_gbps: float) -> bool:
    return matmul_intensity(m, n, k) >= ridge_point(peak_tflops, bandwidth_gbps)


# 4096 × 4096 × 4096 in bf16: 2·4096³ FLOP over 2·3·4096² bytes = 4096 / 3 ≈ 1,365 FLOP/B,
# far right of the ridge: compute bound. A skinny 16 × 4096 × 4096 (a decode step)
# has about 16 FLOP/B: memory bound, however good the tensor cores.
# --8<-- [end:matmul_roofline]
