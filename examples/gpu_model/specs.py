"""The GPU as a programmer sees it: spec-sheet numbers and small models.

Used by the Learn tutorial "The GPU you are programming"
(``docs/tutorials/gpu_model.py``). Everything here is plain Python that runs
anywhere, so the models can be tested on a CPU:

* :data:`GPUS`: per-GPU spec-sheet numbers, each GPU with the documents they
  come from (:attr:`GPU.source`). Measured numbers never live here: they come
  from the committed results files (:func:`measured_ceilings`).
* :func:`occupancy`: how many warps an SM keeps resident for a kernel, given
  its registers per thread, threads per block and shared memory per block,
  and which resource runs out first.
* :func:`bank_conflict_ways` and :func:`shared_access_ways`: how many serial
  passes a warp's shared-memory access needs (32 banks of 4 bytes).
* :func:`transactions_per_warp`: how many 128-byte memory segments a warp's
  load touches (coalescing).
* :func:`waves`: how a grid of blocks falls into waves over the SMs.
* :func:`ridge_point`, :func:`attainable` and :func:`roofline_svg`: the
  roofline model and its plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from academy.bench.render import SERIES_COLORS, fmt

WARP_SIZE = 32
SHARED_BANKS = 32
BANK_BYTES = 4
SEGMENT_BYTES = 128
"""A warp's global-memory request is served in 128-byte lines (four 32-byte sectors)."""

KB = 1024

# ----------------------------------------------------------------------------- spec sheets


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


# ----------------------------------------------------------------------------- occupancy

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


# ----------------------------------------------------------------------------- shared memory banks


def shared_access_ways(byte_addresses: Sequence[int]) -> int:
    """Serial passes one warp's shared-memory access needs (1 means conflict-free).

    Each 4-byte word lives in bank ``(address // 4) % 32``. Threads that read
    the *same* word share one broadcast; *different* words in one bank are
    served one after another. The answer is the largest number of distinct
    words any bank is asked for.
    """
    if not byte_addresses:
        return 0
    words_per_bank: dict[int, set[int]] = {}
    for address in byte_addresses:
        word = address // BANK_BYTES
        words_per_bank.setdefault(word % SHARED_BANKS, set()).add(word)
    return max(len(words) for words in words_per_bank.values())


def bank_conflict_ways(stride_words: int) -> int:
    """Ways of the conflict when thread ``t`` of a warp reads 4-byte word ``t * stride_words``."""
    return shared_access_ways([t * stride_words * BANK_BYTES for t in range(WARP_SIZE)])


def swizzle(row: int, col: int) -> int:
    """Column where element ``(row, col)`` of a 32-word-wide tile is stored: ``col XOR row``."""
    return col ^ (row % SHARED_BANKS)


def column_read_ways(row_words: int = SHARED_BANKS, swizzled: bool = False, col: int = 0) -> int:
    """Ways of the conflict when a warp reads column ``col`` of a row-major fp32 tile.

    ``row_words`` is the stored row length in 4-byte words (32, or 33 with one
    word of padding); ``swizzled`` stores ``(r, c)`` at column ``c XOR r``.
    """
    cols = [swizzle(r, col) if swizzled else col for r in range(WARP_SIZE)]
    return shared_access_ways([(r * row_words + c) * BANK_BYTES for r, c in zip(range(WARP_SIZE), cols)])


# ----------------------------------------------------------------------------- coalescing


def transactions_per_warp(stride_bytes: int, element_bytes: int = 4, offset_bytes: int = 0) -> int:
    """128-byte segments touched when thread ``t`` loads ``element_bytes`` at ``offset + t * stride``."""
    segments = set()
    for t in range(WARP_SIZE):
        start = offset_bytes + t * stride_bytes
        segments.update(range(start // SEGMENT_BYTES, (start + element_bytes - 1) // SEGMENT_BYTES + 1))
    return len(segments)


def load_efficiency(stride_bytes: int, element_bytes: int = 4, offset_bytes: int = 0) -> float:
    """Bytes the warp asked for over bytes the memory system moved."""
    moved = transactions_per_warp(stride_bytes, element_bytes, offset_bytes) * SEGMENT_BYTES
    return WARP_SIZE * element_bytes / moved


# ----------------------------------------------------------------------------- waves


@dataclass(frozen=True)
class Waves:
    n_blocks: int
    slots: int  # blocks resident at once: SMs × blocks per SM
    full_waves: int
    tail_blocks: int  # blocks in the last, partial wave (0 when the last wave is full)

    @property
    def count(self) -> int:
        return self.full_waves + (1 if self.tail_blocks else 0)

    @property
    def last_wave_fill(self) -> float:
        return self.tail_blocks / self.slots if self.tail_blocks else 1.0

    @property
    def efficiency(self) -> float:
        """Busy slots over slots paid for, if every block takes the same time."""
        return self.n_blocks / (self.count * self.slots)


def waves(n_blocks: int, n_sms: int, blocks_per_sm: int = 1) -> Waves:
    """How ``n_blocks`` equal blocks fall into waves on ``n_sms`` SMs holding ``blocks_per_sm`` each."""
    if n_blocks < 1 or n_sms < 1 or blocks_per_sm < 1:
        raise ValueError("n_blocks, n_sms and blocks_per_sm must be positive")
    slots = n_sms * blocks_per_sm
    return Waves(n_blocks, slots, n_blocks // slots, n_blocks % slots)


# ----------------------------------------------------------------------------- roofline


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """Arithmetic intensity (FLOP/byte) where the compute roof meets the bandwidth roof."""
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def attainable(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """The roofline: the best TFLOP/s a kernel of this intensity can reach."""
    return min(peak_tflops, intensity * bandwidth_gbps / 1000)


FLOPS_PER_ELEMENT = {
    ("vector_add", "fwd"): 1,  # one add
    # max (one compare), subtract the max, exp, add to the sum, multiply by 1/sum
    ("fused_softmax", "fwd"): 5,
    # plus the backward dx = y * (dy - sum(y * dy)): multiply, add to the sum, subtract, multiply
    ("fused_softmax", "fwd+bwd"): 9,
}
"""Floating-point operations per element of each measured kernel (an exp counts as one)."""


def elements(params: dict[str, int]) -> int:
    return math.prod(params.values())


def intensity(slug: str, mode: str, params: dict[str, int], bytes_moved: float) -> float:
    """FLOP per byte of a measured row: the FLOP count above over the chapter's bytes model."""
    return FLOPS_PER_ELEMENT[(slug, mode)] * elements(params) / bytes_moved


@dataclass(frozen=True)
class MeasuredCeilings:
    gpu: str
    copy_gbps: float
    matmul_tflops: float
    path: Path

    @property
    def ridge_point(self) -> float:
        return ridge_point(self.matmul_tflops, self.copy_gbps)


def measured_ceilings(gpu: str = "h100") -> MeasuredCeilings:
    """The ceilings measured with the first chapter results file for ``gpu`` (a results file stem)."""
    from academy.bench.results import load
    from academy.chapters import all_chapters

    for chapter in all_chapters():
        for path in chapter.results_files():
            if path.stem == gpu:
                results = load(path)
                return MeasuredCeilings(
                    results.provenance.gpu, results.ceilings.copy_gbps, results.ceilings.matmul_tflops, path
                )
    raise FileNotFoundError(f"no chapter has a results file for {gpu!r} (examples/*/results/{gpu}.json)")


@dataclass(frozen=True)
class Roof:
    label: str
    tflops: float
    dashed: bool = False


@dataclass(frozen=True)
class Point:
    label: str
    intensity: float  # FLOP/byte
    tflops: float
    group: str  # points of one group share a colour and a legend entry


def _decade_ticks(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _tick_label(value: float) -> str:
    return f"{value:g}" if 1e-3 <= value < 1e5 else f"1e{round(math.log10(value))}"


def roofline_svg(
    bandwidth_gbps: float,
    roofs: Sequence[Roof],
    points: Sequence[Point] = (),
    title: str = "Roofline",
    bandwidth_label: str = "memory",
) -> str:
    """A log-log roofline as inline SVG: TFLOP/s against FLOP/byte.

    One slanted bandwidth roof, one flat roof per entry of ``roofs`` (the
    first is the main compute ceiling; its ridge point is marked), and the
    measured ``points``. Returns a ``<div>`` holding the ``<svg>``.
    """
    if not roofs:
        raise ValueError("a roofline needs at least one compute roof")
    top_roof = max(r.tflops for r in roofs)
    main = roofs[0]
    ridge = ridge_point(main.tflops, bandwidth_gbps)
    intensities = [p.intensity for p in points] + [ridge]
    x_lo = 10.0 ** math.floor(math.log10(min(intensities) / 2))
    x_hi = 10.0 ** math.ceil(math.log10(max(intensities) * 4))
    rates = [p.tflops for p in points] + [attainable(x_lo, top_roof, bandwidth_gbps)]
    y_lo = 10.0 ** math.floor(math.log10(min(rates)))
    y_hi = 10.0 ** math.ceil(math.log10(top_roof * 1.5))

    width, height = 720, 440
    left, right, top, bottom = 72, 24, 40, 92
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * plot_w

    def py(v: float) -> float:
        return top + plot_h - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * plot_h

    aria = (
        f"{title}. {bandwidth_label} roof {fmt(bandwidth_gbps)} GB/s; "
        + "; ".join(f"{r.label} {fmt(r.tflops)} TFLOP/s" for r in roofs)
        + f"; ridge point {fmt(ridge)} FLOP/byte; "
        + "; ".join(f"{p.label} at {fmt(p.intensity)} FLOP/byte reaches {fmt(p.tflops)} TFLOP/s" for p in points)
    )
    out = [
        '<div class="academy-plot">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label={quoteattr(aria)} font-size="12" style="max-width: 100%; height: auto;">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="22" fill="currentColor" font-size="14" font-weight="bold">{escape(title)}</text>',
        '<g class="axes" fill="currentColor" stroke="currentColor">',
    ]
    for v in _decade_ticks(y_lo, y_hi):
        if y_lo <= v <= y_hi:
            y = py(v)
            out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke-opacity="0.15"/>')
            out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" stroke="none">{_tick_label(v)}</text>')
    base = top + plot_h
    for v in _decade_ticks(x_lo, x_hi):
        if x_lo <= v <= x_hi:
            x = px(v)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{base}" stroke-opacity="0.15"/>')
            out.append(f'<text x="{x:.1f}" y="{base + 18}" text-anchor="middle" stroke="none">{_tick_label(v)}</text>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{base}" y2="{base}"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{base}"/>')
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{base + 40}" text-anchor="middle" stroke="none">'
        "arithmetic intensity, FLOP/byte (log scale)</text>"
    )
    out.append(
        f'<text transform="translate(18 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" stroke="none">'
        "TFLOP/s (log scale)</text>"
    )
    out.append("</g>")
    # roofs: the bandwidth slope up to the highest roof, then each flat roof from its own ridge
    out.append('<g class="roofs" fill="none" stroke="currentColor" stroke-width="2">')
    x_top = min(x_hi, top_roof * 1000 / bandwidth_gbps)
    out.append(
        f'<line x1="{px(x_lo):.1f}" y1="{py(attainable(x_lo, top_roof, bandwidth_gbps)):.1f}" '
        f'x2="{px(x_top):.1f}" y2="{py(attainable(x_top, top_roof, bandwidth_gbps)):.1f}"/>'
    )
    slope_x = x_lo * 3
    out.append(
        f'<text x="{px(slope_x) + 6:.1f}" y="{py(attainable(slope_x, top_roof, bandwidth_gbps)) - 8:.1f}" '
        f'fill="currentColor" stroke="none">{escape(f"{bandwidth_label} {fmt(bandwidth_gbps)} GB/s")}</text>'
    )
    for roof in roofs:
        x_start = max(x_lo, ridge_point(roof.tflops, bandwidth_gbps))
        dash = ' stroke-dasharray="6 4"' if roof.dashed else ""
        y = py(roof.tflops)
        out.append(f'<line x1="{px(x_start):.1f}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}"{dash}/>')
        out.append(
            f'<text x="{left + plot_w - 4}" y="{y - 6:.1f}" text-anchor="end" fill="currentColor" stroke="none">'
            f"{escape(f'{roof.label} {fmt(roof.tflops)} TFLOP/s')}</text>"
        )
    xr = px(ridge)
    out.append(
        f'<line x1="{xr:.1f}" x2="{xr:.1f}" y1="{py(main.tflops):.1f}" y2="{base}" '
        'stroke-dasharray="2 4" stroke-width="1"/>'
    )
    out.append(
        f'<text x="{xr + 4:.1f}" y="{base - 8}" fill="currentColor" stroke="none">'
        f"{escape(f'ridge {fmt(ridge)} FLOP/B')}</text>"
    )
    out.append("</g>")
    # points, one colour per group, with a legend
    groups = list(dict.fromkeys(p.group for p in points))
    out.append('<g class="points">')
    for p in points:
        color = SERIES_COLORS[groups.index(p.group) % len(SERIES_COLORS)]
        tip = f"{p.label}: {fmt(p.intensity)} FLOP/B, {fmt(p.tflops)} TFLOP/s"
        out.append(
            f'<circle cx="{px(p.intensity):.1f}" cy="{py(p.tflops):.1f}" r="4.5" fill="{color}" fill-opacity="0.85">'
            f"<title>{escape(tip)}</title></circle>"
        )
    for i, group in enumerate(groups):
        x = left + 10 + i * 220
        y = height - 14
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        out.append(f'<circle cx="{x}" cy="{y - 4}" r="4.5" fill="{color}"/>')
        out.append(f'<text x="{x + 10}" y="{y}" fill="currentColor">{escape(group)}</text>')
    out.append("</g>")
    out.append("</svg>")
    out.append("</div>")
    return "\n".join(out)


def measured_points(gpu: str = "h100", provider: str = "academy") -> list[Point]:
    """Our kernels' rows from the committed results for ``gpu``, as roofline points.

    Only (chapter, mode) pairs with a FLOP count in :data:`FLOPS_PER_ELEMENT`
    are placed; the achieved FLOP rate is the FLOP count over the measured time.
    """
    from academy.bench.results import load
    from academy.chapters import all_chapters

    points = []
    for chapter in all_chapters():
        for path in chapter.results_files():
            if path.stem != gpu:
                continue
            results = load(path)
            for row in results.rows:
                key = (results.slug, row.mode)
                if row.provider != provider or key not in FLOPS_PER_ELEMENT:
                    continue
                flops = FLOPS_PER_ELEMENT[key] * elements(row.params)
                points.append(
                    Point(
                        label=f"{results.slug} {row.mode} {row.shape_label} {row.dtype}",
                        intensity=flops / row.work,
                        tflops=flops / (row.ms * 1e-3) / 1e12,
                        group=f"{results.slug} ({row.mode})",
                    )
                )
    return points
