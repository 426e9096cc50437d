"""The GPUs this handbook talks about, as their spec sheets describe them.

Part of the Learn tutorial "The GPU you are programming"
(``docs/tutorials/gpu_model.py``); plain Python, tested on a CPU in
``tests/gpu_model/``.

* :data:`GPUS`: per-GPU spec-sheet numbers, each GPU with the documents they
  come from (:attr:`GPU.source`). Measured numbers never live here: they come
  from the committed results files (:mod:`examples.gpu_model.measured`).
* :func:`hardware_table_markdown`: the table the tutorial prints.

The tutorial's models are in the modules next to this one:
:mod:`~examples.gpu_model.occupancy`, :mod:`~examples.gpu_model.shared_memory`,
:mod:`~examples.gpu_model.coalescing`, :mod:`~examples.gpu_model.waves` and
:mod:`~examples.gpu_model.roofline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from academy.bench.render import fmt

from examples.gpu_model.roofline import ridge_point

WARP_SIZE = 32
SHARED_BANKS = 32
BANK_BYTES = 4
KB = 1024


@dataclass(frozen=True)
class GPU:
    """One GPU's published numbers (SXM parts; dense tensor-core rates, no sparsity).

    Per-SM limits are those of the compute capability (CUDA C++ Programming
    Guide, "Compute Capabilities" table); whole-chip numbers are the vendor's.
    """

    name: str
    compute_capability: str
    sms: int
    registers_per_sm: int  # 32-bit registers
    max_registers_per_thread: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    l1_smem_per_sm_kb: int  # L1 and shared memory together, one SRAM per SM
    max_smem_per_sm_kb: int  # the largest carve-out of that SRAM as shared memory
    max_smem_per_block_kb: int  # with the opt-in attribute
    l2_mb: int
    hbm_gb: int
    hbm_tbps: float
    bf16_dense_tflops: float
    fp32_tflops: float | None  # non-tensor FP32 FMA rate; None where the cited documents give none
    fp32_lanes_per_sm: int
    boost_clock_mhz: int | None  # None where the cited documents give none
    tensor_memory_per_sm_kb: int  # Blackwell's TMEM for tensor-core accumulators; 0 before it
    clusters: bool  # thread-block clusters with distributed shared memory (Hopper on)
    source: str

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // WARP_SIZE

    @property
    def register_file_kb(self) -> int:
        return self.registers_per_sm * 4 // KB

    @property
    def smem_tbps(self) -> float | None:
        """Peak shared-memory bandwidth: 32 banks × 4 B per clock per SM, all SMs at boost clock."""
        if self.boost_clock_mhz is None:
            return None
        return SHARED_BANKS * BANK_BYTES * self.sms * self.boost_clock_mhz * 1e6 / 1e12

    @property
    def register_tbps(self) -> float | None:
        """Register operand bandwidth the FP32 units consume at peak: 3 operands of 4 B per FMA lane per clock."""
        if self.boost_clock_mhz is None:
            return None
        return self.fp32_lanes_per_sm * 3 * 4 * self.sms * self.boost_clock_mhz * 1e6 / 1e12

    @property
    def ridge_point(self) -> float:
        """Spec-sheet ridge point, bf16 tensor cores over HBM: FLOP per byte."""
        return ridge_point(self.bf16_dense_tflops, self.hbm_tbps * 1000)


_AMPERE_HOPPER_LIMITS = dict(
    registers_per_sm=65536,
    max_registers_per_thread=255,
    max_threads_per_sm=2048,
    max_blocks_per_sm=32,
)

GPUS: dict[str, GPU] = {
    "A100": GPU(
        name="A100 SXM4 80 GB",
        compute_capability="8.0",
        sms=108,
        **_AMPERE_HOPPER_LIMITS,
        l1_smem_per_sm_kb=192,
        max_smem_per_sm_kb=164,
        max_smem_per_block_kb=163,
        l2_mb=40,
        hbm_gb=80,
        hbm_tbps=2.039,
        bf16_dense_tflops=312,
        fp32_tflops=19.5,
        fp32_lanes_per_sm=64,
        boost_clock_mhz=1410,
        tensor_memory_per_sm_kb=0,
        clusters=False,
        source=(
            "NVIDIA A100 Tensor Core GPU Architecture whitepaper (SMs, caches, clock, rates); "
            "NVIDIA A100 Tensor Core GPU datasheet (80 GB SXM: HBM2e capacity and bandwidth)"
        ),
    ),
    "H100": GPU(
        name="H100 SXM5 80 GB",
        compute_capability="9.0",
        sms=132,
        **_AMPERE_HOPPER_LIMITS,
        l1_smem_per_sm_kb=256,
        max_smem_per_sm_kb=228,
        max_smem_per_block_kb=227,
        l2_mb=50,
        hbm_gb=80,
        hbm_tbps=3.35,
        bf16_dense_tflops=989,
        fp32_tflops=67,
        fp32_lanes_per_sm=128,
        boost_clock_mhz=1980,
        tensor_memory_per_sm_kb=0,
        clusters=True,
        source=(
            "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SMs, caches, clusters); "
            "NVIDIA H100 Tensor Core GPU datasheet (SXM: HBM3, rates; the FP32 rate implies the boost clock)"
        ),
    ),
    "H200": GPU(
        name="H200 SXM 141 GB",
        compute_capability="9.0",
        sms=132,
        **_AMPERE_HOPPER_LIMITS,
        l1_smem_per_sm_kb=256,
        max_smem_per_sm_kb=228,
        max_smem_per_block_kb=227,
        l2_mb=50,
        hbm_gb=141,
        hbm_tbps=4.8,
        bf16_dense_tflops=989,
        fp32_tflops=67,
        fp32_lanes_per_sm=128,
        boost_clock_mhz=1980,
        tensor_memory_per_sm_kb=0,
        clusters=True,
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet (HBM3e capacity and bandwidth, rates); "
            "the chip is the H100's GH100 in the same configuration: NVIDIA H100 Tensor Core GPU "
            "Architecture whitepaper for SMs and caches"
        ),
    ),
    "B200": GPU(
        name="B200 192 GB",
        compute_capability="10.0",
        sms=148,
        **_AMPERE_HOPPER_LIMITS,
        l1_smem_per_sm_kb=256,
        max_smem_per_sm_kb=228,
        max_smem_per_block_kb=227,
        l2_mb=126,
        hbm_gb=192,
        hbm_tbps=8.0,
        bf16_dense_tflops=2250,
        fp32_tflops=None,
        fp32_lanes_per_sm=128,
        boost_clock_mhz=None,
        tensor_memory_per_sm_kb=256,
        clusters=True,
        source=(
            "NVIDIA Blackwell Architecture Technical Brief (HBM3e 192 GB at 8 TB/s; "
            "HGX B200 systems ship 180 GB at 7.7 TB/s per GPU); NVIDIA HGX B200 datasheet "
            "(BF16 tensor rate, halved to remove sparsity); CUDA C++ Programming Guide, compute "
            "capability 10.0 (per-SM limits); PTX ISA, tcgen05 (tensor memory: 128 lanes × 512 "
            "columns × 4 B); SM count and L2 size as the CUDA runtime reports them "
            "(cudaDeviceProp.multiProcessorCount, l2CacheSize)"
        ),
    ),
}
"""Spec-sheet numbers for the GPUs this handbook talks about, keyed by short name."""


def gpu_for(name: str) -> GPU:
    """The :data:`GPUS` entry for a device name such as ``"NVIDIA H100 80GB HBM3"``."""
    upper = name.upper()
    for key, gpu in GPUS.items():
        if key in upper:
            return gpu
    raise KeyError(f"no spec sheet for {name!r}; known: {', '.join(GPUS)}")


def _cell(value, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{fmt(value) if isinstance(value, float) else value}{unit}"


def hardware_table_markdown(names: Sequence[str] | None = None) -> str:
    """A Markdown table of :data:`GPUS` (one column per GPU) and the numbered sources under it."""
    keys = list(names or GPUS)
    gpus = [GPUS[k] for k in keys]
    rows = [
        ("Compute capability", lambda g: g.compute_capability),
        ("SMs", lambda g: g.sms),
        ("Register file per SM", lambda g: f"{g.register_file_kb} KB ({g.registers_per_sm:,} × 32-bit)"),
        ("Max registers per thread", lambda g: g.max_registers_per_thread),
        ("Max resident warps per SM", lambda g: g.max_warps_per_sm),
        ("Max resident blocks per SM", lambda g: g.max_blocks_per_sm),
        ("L1 + shared memory per SM", lambda g: f"{g.l1_smem_per_sm_kb} KB"),
        ("Max shared memory per SM / per block", lambda g: f"{g.max_smem_per_sm_kb} / {g.max_smem_per_block_kb} KB"),
        (
            "Tensor memory (TMEM) per SM",
            lambda g: f"{g.tensor_memory_per_sm_kb} KB" if g.tensor_memory_per_sm_kb else "—",
        ),
        ("Thread-block clusters", lambda g: "yes" if g.clusters else "no"),
        ("L2 cache", lambda g: f"{g.l2_mb} MB"),
        ("HBM capacity", lambda g: f"{g.hbm_gb} GB"),
        ("HBM bandwidth", lambda g: _cell(g.hbm_tbps, " TB/s")),
        ("BF16 tensor cores, dense", lambda g: _cell(float(g.bf16_dense_tflops), " TFLOP/s")),
        ("FP32 (no tensor cores)", lambda g: _cell(g.fp32_tflops and float(g.fp32_tflops), " TFLOP/s")),
        ("Boost clock", lambda g: _cell(g.boost_clock_mhz, " MHz")),
        ("Shared-memory bandwidth (derived)", lambda g: _cell(g.smem_tbps, " TB/s")),
        ("Register bandwidth to FP32 units (derived)", lambda g: _cell(g.register_tbps, " TB/s")),
        ("Ridge point, BF16 over HBM (derived)", lambda g: f"{fmt(g.ridge_point)} FLOP/B"),
    ]
    head = "| | " + " | ".join(f"{g.name} [{i + 1}]" for i, g in enumerate(gpus)) + " |"
    sep = "|---|" + "---|" * len(gpus)
    body = [f"| {label} | " + " | ".join(str(get(g)) for g in gpus) + " |" for label, get in rows]
    notes = [f"[{i + 1}] {g.name}: {g.source}." for i, g in enumerate(gpus)]
    return "\n".join([head, sep, *body]) + "\n\n" + "\n\n".join(notes)
