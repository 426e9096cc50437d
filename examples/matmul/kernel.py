"""Matrix multiplication at cuBLAS speed: ``C = act(A @ B)`` (forward only).

``matmul(a, b, activation=None)`` equals ``act(a @ b)`` for 2-D fp16, bf16
and fp32 inputs of any shape (ragged edges are masked) and any strides
(row-major, column-major, sliced). fp32 inputs are multiplied in true fp32
unless ``allow_tf32=True`` is passed explicitly. ``activation`` is ``None``,
``"relu"``, ``"leaky_relu"`` (slope 0.01) or ``"gelu"`` (the exact, erf
form), fused into the epilogue. There is no backward: this chapter is about
the forward GEMM (a backward is two more GEMMs, ``dA = dC·Bᵀ`` and
``dB = Aᵀ·dC``, which this same op computes on transposed views).

Four kernels, one launcher that picks among them by shape:

* :func:`matmul_tma_kernel`: persistent (one program per SM, each walking
  many tiles in grouped order), operands read by TMA through tensor
  descriptors. The path for large problems on Hopper.
* :func:`matmul_pointer_kernel`: the same loop nest with pointer arithmetic
  and masks; persistent or one tile per program depending on the grid. The
  path where TMA is absent (pre-Hopper GPUs) or cannot take the strides.
* :func:`matmul_split_k_kernel` + :func:`split_k_reduce_kernel`: K cut into
  ``SPLIT_K`` slices computed by different programs, fp32 partial sums
  added by a second pass. The path for small M (decode), where the weight
  read is the whole cost and one program per output tile leaves SMs idle.
* :func:`matmul_gemv_kernel`: CUDA cores instead of tensor cores, for a
  single row, where ``tl.dot``'s 16-row minimum pads 15 of every 16 rows;
  its K slices share split-K's second pass. The dispatch sends it no shape
  (``GEMV_MAX_M``): the padded split-K reads the same bytes and measured as
  fast or faster.

Run this file (``python -m examples.matmul.kernel``) for a quick check.
"""

from __future__ import annotations

from academy import DEVICE, INTERPRETED
from academy.grid import sm_count
from academy.tma import TensorDescriptor, tma_available
from academy.validation import as_bool, check_config, check_disjoint, check_forward_only, check_no_overlap, check_tensor

import torch
import triton
import triton.language as tl

from examples.matmul.dependent_launch import dependent_launch_prologue, pdl_available
from examples.tiled_matmul.kernel import grouped_tile

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = (None, "relu", "leaky_relu", "gelu")
PATHS = ("auto", "tma", "pointer", "split_k", "gemv")
LEAKY_SLOPE = 0.01
_LEAKY_SLOPE = tl.constexpr(LEAKY_SLOPE)
_SQRT1_2 = tl.constexpr(0.7071067811865476)
MAX_COORD = 2**31 - 1
"""Tile coordinates and sizes are int32 in every kernel; offsets are int64."""


# --8<-- [start:reference]
def apply_activation(c: torch.Tensor, activation: str | None) -> torch.Tensor:
    if activation == "relu":
        return torch.relu(c)
    if activation == "leaky_relu":
        return torch.nn.functional.leaky_relu(c, LEAKY_SLOPE)
    if activation == "gelu":
        return torch.nn.functional.gelu(c)  # the exact form: x·Φ(x)
    return c


def reference(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """``act(a @ b)`` computed by PyTorch in fp32 (no TF32), returned in the inputs' dtype."""
    c = torch.matmul(a.float(), b.float())
    return apply_activation(c, activation).to(a.dtype)


# --8<-- [end:reference]


# --8<-- [start:epilogue]
@triton.jit
def activate(x, ACTIVATION: tl.constexpr):
    """The fused epilogue, applied to the fp32 accumulator before the one store."""
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    elif ACTIVATION == "leaky_relu":
        x = tl.where(x >= 0, x, _LEAKY_SLOPE * x)
    elif ACTIVATION == "gelu":
        x = 0.5 * x * (1.0 + tl.math.erf(x * _SQRT1_2))  # (1)!
    return x


# --8<-- [end:epilogue]


# --8<-- [start:tma_kernel]
@triton.jit
def matmul_tma_kernel(
    a_desc,
    b_desc,
    c_desc,  # (1)!
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    A_COLUMN_MAJOR: tl.constexpr,
    B_COLUMN_MAJOR: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr,
    ACTIVATION: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    FLATTEN: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(
        tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE
    ):  # (2)!
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            if A_COLUMN_MAJOR:  # (3)!
                a = a_desc.load([off_k, off_m]).T
            else:
                a = a_desc.load([off_m, off_k])  # (4)!
            if B_COLUMN_MAJOR:
                b = b_desc.load([off_n, off_k]).T
            else:
                b = b_desc.load([off_k, off_n])
            if UPCAST:  # the interpreter's bf16 arithmetic is wrong: compute in fp32 there
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        acc = activate(acc, ACTIVATION)
        if EPILOGUE_SUBTILE:  # (5)!
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([off_m, off_n], left.to(c_desc.dtype))
            c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_desc.dtype))
        else:
            c_desc.store([off_m, off_n], acc.to(c_desc.dtype))  # (6)!


# --8<-- [end:tma_kernel]


# --8<-- [start:pointer_kernel]
@triton.jit
def matmul_pointer_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    ACTIVATION: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0)):  # (1)!
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_SIZE_M)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        a_ptrs = a_ptr + (rows % M).to(tl.int64)[:, None] * stride_am + ks[None, :] * stride_ak  # (2)!
        b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N).to(tl.int64)[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k_start in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs, mask=ks[None, :] < K - k_start, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < K - k_start, other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        acc = activate(acc, ACTIVATION)
        c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & (cols < N)[None, :])


# --8<-- [end:pointer_kernel]


# --8<-- [start:split_k_kernel]
@triton.jit
def matmul_split_k_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_os,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    ACTIVATION: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch_prologue(PDL)  # (6)!
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = tl.program_id(0) // num_pid_n  # (1)!
    pid_n = tl.program_id(0) % num_pid_n
    split = tl.program_id(1)  # (2)!
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    k_begin = split * K_PER_SPLIT
    k_end = tl.minimum(K, k_begin + K_PER_SPLIT)
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + (k_begin + ks).to(tl.int64)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_begin + ks).to(tl.int64)[:, None] * stride_bk + (cols % N).to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(k_begin, k_end, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rows < M)[:, None] & (ks[None, :] < k_end - k_start), other=0.0)  # (3)!
        b = tl.load(b_ptrs, mask=ks[:, None] < k_end - k_start, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    out_ptrs = (
        out_ptr
        + split.to(tl.int64) * stride_os
        + rows.to(tl.int64)[:, None] * stride_om
        + cols.to(tl.int64)[None, :] * stride_on
    )
    if SPLIT_K == 1:  # one slice: the partial sum is the answer
        tl.store(out_ptrs, activate(acc, ACTIVATION).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(out_ptrs, acc, mask=mask)  # (4)!


@triton.jit
def split_k_reduce_kernel(
    partials_ptr,
    c_ptr,
    numel,
    N,
    stride_cm,
    stride_cn,
    SPLIT_K: tl.constexpr,
    ACTIVATION: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch_prologue(PDL)
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in tl.static_range(SPLIT_K):  # (5)!
        total += tl.load(partials_ptr + split * numel + offsets, mask=mask, other=0.0)
    c_ptrs = c_ptr + offsets // N * stride_cm + offsets % N * stride_cn  # c may be a view of a wider matrix
    tl.store(c_ptrs, activate(total, ACTIVATION).to(c_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:split_k_kernel]


# --8<-- [start:gemv_kernel]
@triton.jit
def matmul_gemv_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_os,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    ACTIVATION: tl.constexpr,
):
    pid_n = tl.program_id(0)  # (1)!
    split = tl.program_id(1)
    rows = tl.program_id(2) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    k_begin = split * K_PER_SPLIT
    k_end = tl.minimum(K, k_begin + K_PER_SPLIT)
    a_rows = a_ptr + rows.to(tl.int64)[:, None] * stride_am
    b_cols = b_ptr + cols.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(k_begin, k_end, BLOCK_K):
        kk = k_start + ks
        a = tl.load(a_rows + kk[None, :] * stride_ak, mask=(rows < M)[:, None] & (kk < k_end)[None, :], other=0.0)
        w = tl.load(
            b_cols + kk.to(tl.int64)[:, None] * stride_bk,  # (2)!
            mask=(kk < k_end)[:, None] & (cols < N)[None, :],
            other=0.0,
        )
        acc += tl.sum(a.to(tl.float32)[:, :, None] * w.to(tl.float32)[None, :, :], axis=1)  # (3)!
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    out_ptrs = (
        out_ptr
        + split.to(tl.int64) * stride_os
        + rows.to(tl.int64)[:, None] * stride_om
        + cols.to(tl.int64)[None, :] * stride_on
    )
    if SPLIT_K == 1:
        tl.store(out_ptrs, activate(acc, ACTIVATION).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(out_ptrs, acc, mask=mask)  # the same fp32 partials and reduction pass as split-K


# --8<-- [end:gemv_kernel]


# --8<-- [start:configs]
SMALL_M = 16
"""At or below this many rows the launcher uses split-K (the weight read dominates)."""


# The tuned tables: one row per shape class, so a tuning result is a one-line edit. Keys are the kernels'
# meta-parameters.
TILE_CONFIGS = {
    "large": dict(
        BLOCK_M=128,
        BLOCK_N=256,
        BLOCK_K=64,
        GROUP_SIZE_M=8,
        num_warps=8,
        num_stages=3,
        EPILOGUE_SUBTILE=True,
        FLATTEN=True,
        WARP_SPECIALIZE=False,
    ),  # >= one 128x256 tile per SM
    "medium": dict(
        BLOCK_M=128,
        BLOCK_N=128,
        BLOCK_K=64,
        GROUP_SIZE_M=8,
        num_warps=8,
        num_stages=4,
        EPILOGUE_SUBTILE=False,
        FLATTEN=False,
        WARP_SPECIALIZE=False,
    ),
    "narrow": dict(
        BLOCK_M=64,
        BLOCK_N=128,
        BLOCK_K=128,
        GROUP_SIZE_M=8,
        num_warps=4,
        num_stages=4,
        EPILOGUE_SUBTILE=False,
        FLATTEN=False,
        WARP_SPECIALIZE=False,
    ),
    "few": dict(
        BLOCK_M=64,
        BLOCK_N=64,
        BLOCK_K=128,
        GROUP_SIZE_M=8,
        num_warps=4,
        num_stages=5,
        EPILOGUE_SUBTILE=False,
        FLATTEN=False,
        WARP_SPECIALIZE=False,
    ),
    "fp32": dict(
        BLOCK_M=128,
        BLOCK_N=128,
        BLOCK_K=32,
        GROUP_SIZE_M=8,
        num_warps=8,
        num_stages=3,
        EPILOGUE_SUBTILE=False,
        FLATTEN=False,
        WARP_SPECIALIZE=False,
    ),
}
SPLIT_K_CONFIGS = {  # BLOCK_N and SPLIT_K = 0: the launcher picks them (see split_k_config)
    "decode": dict(BLOCK_M=16, BLOCK_N=0, BLOCK_K=128, SPLIT_K=0, num_warps=4, num_stages=4, PDL=True),
    "prefill": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, SPLIT_K=0, num_warps=4, num_stages=4, PDL=True),
}
"""PDL: programmatic dependent launch where the GPU has it (see examples.dependent_launch), which hides
the launch gap between one decode kernel and the next."""
WAVE_COSTS = {"few": 2, "narrow": 3, "medium": 5}
"""Relative time of one wave of each row's tiles, every SM busy: a 64×128 tile takes 1.5 times as long as
a 64×64 one (twice the work at a higher rate), a 128×128 tile 2.5 times. Fitted to an H200 sweep at
M = 128, 256 and 512 over 16 model-zoo weights, where they pick the fastest of the three rows at all 42
shapes; the cheapest count of waves × cost wins, the smaller tile on a tie."""
PREFILL_SPLIT_MIN_K = 4096
"""Shortest K that a short prefill splits (splits_short_prefill); shorter sums are over before a split pays."""
DECODE_SPLIT_MIN_K = 4096
"""Shortest K slice worth a second (reduction) launch while the decode column block can still narrow."""
DECODE_NARROW_STAGES = 6
"""Pipeline depth of 32-column decode blocks: half the bytes per stage of a 64-column block, so more stages
keep as many loads in flight (the H100 sweep at N = K = 4096, M = 16: 6 stages beat 3, 4 and 5)."""
GEMV_CONFIGS = {  # the CUDA-core path for very few rows: no tensor-core padding of M up to 16
    "row": dict(BLOCK_M=1, BLOCK_N=64, BLOCK_K=128, SPLIT_K=0, num_warps=4, num_stages=4),  # b (K, N) row-major
    "col": dict(BLOCK_M=1, BLOCK_N=16, BLOCK_K=512, SPLIT_K=0, num_warps=4, num_stages=3),  # b = W.T, W (N, K)
}
GEMV_MAX_M = 0
"""Largest M that the dispatch sends to the GEMV kernel: none. On the H100, split-K (its padding rows masked)
matched or beat it at M = 1 on every decode weight row-major, and it lost at M = 16."""


def tile_config(M: int, N: int, K: int, dtype: torch.dtype) -> dict:
    """Tile shape, warps, stages, grouping for the TMA and pointer kernels."""
    if INTERPRETED:  # (1)!
        return {
            "BLOCK_M": 32,
            "BLOCK_N": 32,
            "BLOCK_K": 32,
            "GROUP_SIZE_M": 2,
            "num_warps": 4,
            "num_stages": 1,
            "EPILOGUE_SUBTILE": True,
            "FLATTEN": False,
            "WARP_SPECIALIZE": False,
        }
    return dict(TILE_CONFIGS[tile_class(M, N, dtype)])


def tile_class(M: int, N: int, dtype: torch.dtype) -> str:
    """Which row of TILE_CONFIGS a shape uses: 128×256 tiles if they give every SM one, else the
    row whose tiles finish soonest, counted in waves over the SMs (see WAVE_COSTS)."""
    if dtype == torch.float32:
        return "fp32"
    if triton.cdiv(M, 128) * triton.cdiv(N, 256) >= sm_count():  # (2)!
        return "large"

    def waves(name: str) -> int:
        config = TILE_CONFIGS[name]
        return triton.cdiv(triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]), sm_count())

    return min(WAVE_COSTS, key=lambda name: waves(name) * WAVE_COSTS[name])


def splits_short_prefill(M: int, N: int, K: int) -> bool:
    """A short prefill over a weight too narrow for the tiles to fill half the SMs, even at 64×64,
    whose K is long enough to slice: split-K, as decode does."""
    return triton.cdiv(M, 64) * triton.cdiv(N, 64) < sm_count() // 2 and K >= PREFILL_SPLIT_MIN_K


def decode_blocks(N: int, K: int, block_k: int, narrow_stages: int, sms: int) -> tuple[int, int]:
    """(BLOCK_N, SPLIT_K) of the decode rule on a GPU of ``sms`` SMs (see :func:`split_k_config`).

    A program keeps at most its pipeline's loads in flight, so a decode call's bandwidth grows with its
    number of programs. Past the narrowest block, short slices fill the grid up to every SM, not half:
    the reduction launch is paid from the second slice on, each further slice adds only M·N fp32
    partials (under 2·sms·32·M in all), and a grid under 2·sms programs of 32 columns runs as one wave.
    A slice shorter than ``narrow_stages`` K steps would end before its pipeline is full.
    """
    block_n, split = 128, 1  # (3)!
    while triton.cdiv(N, block_n) * split < sms // 2 and block_n > 32:
        if block_n > 64:
            block_n //= 2
        elif K // (2 * split) >= DECODE_SPLIT_MIN_K:
            split *= 2
        else:
            block_n //= 2
    if triton.cdiv(N, block_n) * split < sms // 2:  # (4)!
        while triton.cdiv(N, block_n) * split < sms and K // (2 * split) >= narrow_stages * block_k:
            split *= 2
    return block_n, split


def split_k_config(M: int, N: int, K: int, dtype: torch.dtype, overrides: dict | None = None) -> dict:
    """Block shape and number of K slices for the split-K kernel.

    Prefill shapes (forced onto this path): enough slices to cover the SMs,
    each at least four K steps long so the pipeline fills. Decode shapes
    (M ≤ SMALL_M), where every program streams its own columns of the
    weight, by shape class (S = the SM count):

    * wide weights (N / 128 ≥ S/2): 128-column blocks, K whole;
    * otherwise, until the programs fill half the SMs: first narrow the
      column block to 64, then split K into slices of at least
      DECODE_SPLIT_MIN_K, then narrow to 32 columns (with a deeper pipeline);
    * narrow weights, still under S/2 programs at 32 columns (N < 16·S):
      keep doubling the K slices, each at least one pipeline long
      (num_stages K steps), until the programs cover every SM.
    """
    if INTERPRETED:
        cfg = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, SPLIT_K=0, num_warps=4, num_stages=1, PDL=False)
    else:
        cfg = dict(SPLIT_K_CONFIGS["decode" if M <= SMALL_M else "prefill"])
    if dtype == torch.float32:
        cfg["BLOCK_K"] //= 2
    cfg.update(overrides or {})
    if cfg["BLOCK_N"] == 0:  # the decode rule picks both
        narrow_stages = (overrides or {}).get("num_stages", DECODE_NARROW_STAGES)
        block_n, split = decode_blocks(N, K, cfg["BLOCK_K"], narrow_stages, sm_count())
        cfg["BLOCK_N"], cfg["SPLIT_K"] = block_n, cfg["SPLIT_K"] or split
        if block_n < 64 and "num_stages" not in (overrides or {}):
            cfg["num_stages"] = DECODE_NARROW_STAGES
    if cfg["SPLIT_K"] == 0:
        tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
        split = 1
        while tiles * split < sm_count() and K // (2 * split) >= 4 * cfg["BLOCK_K"]:
            split *= 2
        cfg["SPLIT_K"] = split
    return cfg


# --8<-- [end:configs]


# --8<-- [start:tma_check]
def _tma_layout(t: torch.Tensor) -> str | None:
    """``"row"`` or ``"column"`` when TMA can read ``t`` (2-D), else ``None``.

    A tensor descriptor needs a unit stride on its last dimension, the other
    stride and the base address 16-byte aligned. A column-major matrix is a
    row-major one transposed: its descriptor is built on ``t.T``.
    """
    size = t.element_size()
    if t.data_ptr() % 16:
        return None
    if t.stride(1) == 1 and (t.stride(0) * size) % 16 == 0:
        return "row"
    if t.stride(0) == 1 and (t.stride(1) * size) % 16 == 0:
        return "column"
    return None


# --8<-- [end:tma_check]


# --8<-- [start:launcher]
def check_inputs(a, b, activation, path, out=None) -> None:
    """Operands, options and (if given) ``out``: what every path of :func:`matmul` assumes."""
    check_tensor("a", a, SUPPORTED_DTYPES)
    check_tensor("b", b, SUPPORTED_DTYPES)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D matrices, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"dtypes differ: a {a.dtype} vs b {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"devices differ: a on {a.device}, b on {b.device}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if max(*a.shape, b.shape[1]) > MAX_COORD:
        raise ValueError(f"a dimension exceeds 2**31 - 1 ({tuple(a.shape)} @ {tuple(b.shape)}): tile indices are int32")
    if out is None:
        return
    check_tensor("out", out, SUPPORTED_DTYPES)
    if out.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"out must be {(a.shape[0], b.shape[1])}, got {tuple(out.shape)}")
    if out.dtype != a.dtype or out.device != a.device:
        raise ValueError(f"out must be {a.dtype} on {a.device}, got {out.dtype} on {out.device}")
    check_no_overlap("out", out)
    check_disjoint("out", out, a=a, b=b)


def choose_path(M: int, N: int, K: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> str:
    """The dispatch rule: GEMV for at most ``GEMV_MAX_M`` rows, split-K for a few, TMA where it can read
    both operands (and store a row-major ``c``), else pointers."""
    if M <= GEMV_MAX_M and K >= 256:
        return "gemv"
    if (M <= SMALL_M and K >= 256) or (a.dtype != torch.float32 and splits_short_prefill(M, N, K)):  # (1)!
        return "split_k"
    if _tma_fits(a, b, c):
        return "tma"
    return "pointer"


def _tma_fits(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None) -> bool:
    """TMA reads both operands and stores the result (a new ``c`` is always row-major)."""
    return bool(tma_available() and _tma_layout(a) and _tma_layout(b) and (c is None or _tma_layout(c) == "row"))


def _launch_tma(a, b, c, activation, precision, cfg) -> None:
    (M, K), N = a.shape, b.shape[1]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    a_col, b_col = _tma_layout(a) == "column", _tma_layout(b) == "column"
    a_desc = TensorDescriptor.from_tensor(a.T, [bk, bm]) if a_col else TensorDescriptor.from_tensor(a, [bm, bk])  # (2)!
    b_desc = TensorDescriptor.from_tensor(b.T, [bn, bk]) if b_col else TensorDescriptor.from_tensor(b, [bk, bn])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn // 2 if cfg["EPILOGUE_SUBTILE"] else bn])
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    matmul_tma_kernel[(min(sm_count(), tiles),)](  # (3)!
        a_desc,
        b_desc,
        c_desc,
        M,
        N,
        K,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_SIZE_M=cfg["GROUP_SIZE_M"],
        A_COLUMN_MAJOR=a_col,
        B_COLUMN_MAJOR=b_col,
        EPILOGUE_SUBTILE=cfg["EPILOGUE_SUBTILE"],
        ACTIVATION=activation or "",
        INPUT_PRECISION=precision,
        UPCAST=INTERPRETED,
        FLATTEN=cfg["FLATTEN"],
        WARP_SPECIALIZE=cfg.get("WARP_SPECIALIZE", False),
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )


def _launch_pointer(a, b, c, activation, precision, cfg, persistent: bool = True) -> None:
    (M, K), N = a.shape, b.shape[1]
    tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    grid = (min(sm_count(), tiles) if persistent else tiles,)
    matmul_pointer_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        *a.stride(),
        *b.stride(),
        *c.stride(),
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=cfg["BLOCK_K"],
        GROUP_SIZE_M=cfg["GROUP_SIZE_M"],
        ACTIVATION=activation or "",
        INPUT_PRECISION=precision,
        UPCAST=INTERPRETED,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )


def gemv_config(M: int, N: int, K: int, b_column_major: bool, overrides: dict | None = None) -> dict:
    """Slab shape and K slices of the GEMV kernel (SPLIT_K = 0: as many slices as fill the SMs twice)."""
    cfg = dict(GEMV_CONFIGS["col" if b_column_major else "row"])
    if INTERPRETED:  # 16-row blocks keep interpreter grids short
        cfg.update(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32)
    cfg.update(overrides or {})
    cfg["BLOCK_M"] = min(cfg["BLOCK_M"], triton.next_power_of_2(M))
    if cfg["SPLIT_K"] == 0:
        programs = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
        split = 1
        while programs * split < 2 * sm_count() and K // (2 * split) >= 4 * cfg["BLOCK_K"]:
            split *= 2
        cfg["SPLIT_K"] = split
    return cfg


def _sum_slices(partials: torch.Tensor, c: torch.Tensor, activation, pdl: bool = False) -> None:
    """c = act(Σ partials): the second pass of split-K and of the GEMV's K slices."""
    split, M, N = partials.shape
    block = 1024
    split_k_reduce_kernel[(triton.cdiv(M * N, block),)](
        partials,
        c,
        M * N,
        N,
        *c.stride(),
        SPLIT_K=split,
        ACTIVATION=activation or "",
        BLOCK=block,
        PDL=pdl,
        launch_pdl=pdl,
    )


def _launch_gemv(a, b, c, activation, cfg) -> None:
    (M, K), N = a.shape, b.shape[1]
    split, bk = cfg["SPLIT_K"], cfg["BLOCK_K"]
    k_per_split = triton.cdiv(triton.cdiv(K, split), bk) * bk
    split = triton.cdiv(K, k_per_split)
    out = c if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=a.device)
    out_strides = (0, *c.stride()) if split == 1 else out.stride()
    grid = (triton.cdiv(N, cfg["BLOCK_N"]), split, triton.cdiv(M, cfg["BLOCK_M"]))
    matmul_gemv_kernel[grid](
        a,
        b,
        out,
        M,
        N,
        K,
        k_per_split,
        *a.stride(),
        *b.stride(),
        *out_strides,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=bk,
        SPLIT_K=split,
        ACTIVATION=activation or "",
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    if split > 1:
        _sum_slices(out, c, activation)


def _launch_split_k(a, b, c, activation, precision, cfg) -> None:
    (M, K), N = a.shape, b.shape[1]
    split, bk = cfg["SPLIT_K"], cfg["BLOCK_K"]
    k_per_split = triton.cdiv(triton.cdiv(K, split), bk) * bk  # (4)!
    split = triton.cdiv(K, k_per_split)  # rounding up the slice may leave fewer slices
    out = c if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=a.device)
    out_strides = (0, *c.stride()) if split == 1 else out.stride()
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]), split)
    pdl = bool(cfg["PDL"]) and pdl_available()
    matmul_split_k_kernel[grid](
        a,
        b,
        out,
        M,
        N,
        K,
        k_per_split,
        *a.stride(),
        *b.stride(),
        *out_strides,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=bk,
        SPLIT_K=split,
        ACTIVATION=activation or "",
        INPUT_PRECISION=precision,
        UPCAST=INTERPRETED,
        PDL=pdl,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
        launch_pdl=pdl,
    )
    if split > 1:  # (5)!
        _sum_slices(out, c, activation, pdl)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    activation: str | None = None,
    *,
    allow_tf32: bool = False,
    path: str = "auto",
    config: dict | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``act(a @ b)`` for ``a`` (M, K) and ``b`` (K, N) of one dtype; a new row-major (M, N) result,
    or ``out`` filled and returned.

    ``activation``: ``None``, ``"relu"``, ``"leaky_relu"`` or ``"gelu"``.
    ``allow_tf32``: fp32 inputs only; ``False`` (the default) multiplies in
    true fp32, ``True`` lets the tensor cores round the inputs to TF32.
    ``path``: ``"auto"`` (the dispatch rule of :func:`choose_path`),
    ``"tma"``, ``"pointer"``, ``"split_k"`` or ``"gemv"``, to force one kernel;
    ``config`` overrides entries of the chosen path's config (the tuning
    sweep uses both). ``out``: an (M, N) tensor of ``a``'s dtype and device,
    any strides, sharing no memory with ``a`` or ``b``; a view writes that block of a
    larger matrix (the low-bit chapter fills its output slab by slab), whose elements are
    distinct (a stride-0 view is refused). Forward only: with autograd recording, an operand
    that requires grad is refused (the result would carry no gradient).
    """
    check_inputs(a, b, activation, path, out)
    check_forward_only("matmul", a=a, b=b)
    allow_tf32 = as_bool("allow_tf32", allow_tf32)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device) if out is None else out
    if M == 0 or N == 0:
        return c
    if K == 0:  # an empty sum is 0, and every activation maps 0 to 0
        return c.zero_()
    precision = ("tf32" if allow_tf32 else "ieee") if a.dtype == torch.float32 else None
    if INTERPRETED:
        precision = "ieee"  # the interpreter upcasts fp16/bf16 tiles to fp32 before tl.dot
    if path == "auto":
        path = choose_path(M, N, K, a, b, c)
    if path == "tma" and not _tma_fits(a, b, c):
        raise ValueError("path='tma' needs tensor descriptors (Hopper or the interpreter) and TMA-compatible strides")
    if path == "gemv":  # every path takes "PDL", the op's documented switch, used only by split-K's kernels
        overrides = check_config(config, {**GEMV_CONFIGS["row"], "PDL": False}, auto=("SPLIT_K",))
        _launch_gemv(a, b, c, activation, gemv_config(M, N, K, b.stride(0) == 1 and b.stride(1) != 1, overrides))
    elif path == "split_k":
        overrides = check_config(config, SPLIT_K_CONFIGS["decode"], min_block=16, auto=("BLOCK_N", "SPLIT_K"))
        _launch_split_k(a, b, c, activation, precision, split_k_config(M, N, K, a.dtype, overrides))
    else:
        known = {**TILE_CONFIGS["large"], "PDL": False}
        cfg = {**tile_config(M, N, K, a.dtype), **check_config(config, known, min_block=16)}
        (_launch_tma if path == "tma" else _launch_pointer)(a, b, c, activation, precision, cfg)
    return c


# --8<-- [end:launcher]


# --8<-- [start:roofline]
def arithmetic_intensity(M: int, N: int, K: int, element_size: int = 2) -> float:
    """FLOPs per byte of the minimal traffic: 2·M·N·K over (M·K + K·N + M·N) elements."""
    return 2 * M * N * K / ((M * K + K * N + M * N) * element_size)


def roofline_tflops(M: int, N: int, K: int, peak_tflops: float, bandwidth_gbps: float, element_size: int = 2) -> float:
    """The roofline bound: min(compute peak, intensity × bandwidth), in TFLOP/s."""
    return min(peak_tflops, arithmetic_intensity(M, N, K, element_size) * bandwidth_gbps / 1000)


def tile_intensity(block_m: int, block_n: int, element_size: int = 2) -> float:
    """FLOPs per byte a tile loads from memory per K step: 2·BM·BN·BK / ((BM + BN)·BK·size)."""
    return 2 * block_m * block_n / ((block_m + block_n) * element_size)


# --8<-- [end:roofline]


if __name__ == "__main__":
    torch.manual_seed(0)
    cases = [
        ((70, 48, 96), torch.float16, "row", "gelu"),  # TMA (or pointer) path, ragged M
        ((3, 40, 300), torch.float16, "column", "relu"),  # split-K, column-major weight
        ((50, 24, 40), torch.float32, "row", "leaky_relu"),
    ]
    for (M, N, K), dtype, b_layout, act in cases:
        a = torch.randn(M, K, device=DEVICE).to(dtype)
        b = (
            torch.randn(K, N, device=DEVICE).to(dtype)
            if b_layout == "row"
            else torch.randn(N, K, device=DEVICE).to(dtype).T
        )
        expected = apply_activation(a.double() @ b.double(), act)
        c = matmul(a, b, act)
        error = ((c.double() - expected).norm() / expected.norm()).item()
        print(
            f"matmul {M}×{N}×{K} {dtype} b {b_layout}-major {act} via {choose_path(M, N, K, a, b)}: error {error:.1e}"
        )
        assert error < (1e-5 if dtype == torch.float32 else 1e-2)
