"""FP8 matmul with block scales: ``y = dequant(a) @ dequant(b).T``, accumulated in fp32 (forward only).

``quantize_fp8(x, block=(1, 128))`` splits a float matrix into blocks of
``block`` = (rows, columns) and stores it as fp8 codes (``torch.float8_e4m3fn``
by default) and one float32 scale per block, ``x ≈ code · scale``. Each
block's scale maps its largest magnitude to the format's largest finite value
(448 for e4m3), so every block uses the whole fp8 range; an all-zero block gets
the scale 1. ``None`` in ``block`` means the whole dimension: ``(1, None)`` is
one scale per row, ``(None, None)`` one scale for the tensor.

``fp8_matmul(a, a_scale, b, b_scale, out_dtype=torch.bfloat16)`` multiplies
``a`` (M, K) by ``b`` (N, K), an ``nn.Linear`` weight, and returns
``dequant(a) @ dequant(b).T`` (M, N). The scale layout of each operand is read
from its scale tensor's shape (:func:`scale_layout`):

=========  ===============================  ===============================
layout     ``a_scale`` (a is M × K)         ``b_scale`` (b is N × K)
=========  ===============================  ===============================
block      (M, ⌈K/128⌉): 1 × 128 blocks     (⌈N/128⌉, ⌈K/128⌉): 128 × 128
row        (M, 1): one scale per row        (N, 1): one scale per row
tensor     (1, 1) or (): one scale          (1, 1) or (): one scale
=========  ===============================  ===============================

The two operands' layouts are independent (block-scaled activations times a
per-row weight is allowed). Where two layouts give the same shape (K ≤ 128,
or a single row) they are the same numbers, and either reading is right.

The kernel multiplies fp8 tiles on the tensor cores, one K-block of 128 (or
a divisor of it) at a time, and applies the two scales to each fp32 partial
sum before adding it to the fp32 accumulator: the scheme of the DeepSeek-V3
Technical Report, which also bounds how long a sum runs in the tensor cores'
own accumulator. Every layout goes through the same kernel: the launcher
turns a row or tensor scale into a block scale view with zero strides.

Stages, each a public function: :func:`fp8_matmul_upcast` (stage 1:
dequantise tiles in registers, then a 16-bit ``tl.dot``) and
:func:`fp8_matmul` (the op: fp8 ``tl.dot`` per K-block, scaled partial sums,
grouped program order). Run this file (``python -m examples.fp8_matmul.kernel``)
for a quick check.
"""

from __future__ import annotations

import math

from academy import DEVICE, INTERPRETED
from academy.validation import check_config, check_disjoint, check_forward_only, check_no_overlap, check_tensor

import torch
import triton
import triton.language as tl

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
SOURCE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SCALE_K = 128
"""Columns of K per scale in the block layout (both operands), and the longest run of K the tensor cores
sum before the kernel promotes the partial sum to its fp32 accumulator."""
SCALE_N = 128
"""Rows of ``b`` per scale in the block layout."""
MAX_COORD = 2**31 - 1
"""Rows, columns and program ids are int32 in the kernels; element offsets are int64."""


# --8<-- [start:formats]
def fp8_max(dtype: torch.dtype = torch.float8_e4m3fn) -> float:
    """The largest finite value of an fp8 format: 448 for e4m3, 57344 for e5m2."""
    return torch.finfo(dtype).max


def unit_roundoff(dtype: torch.dtype) -> float:
    """The largest relative error of rounding a normal value to ``dtype``: 2⁻⁴ for e4m3, 2⁻³ for e5m2."""
    return torch.finfo(dtype).eps / 2


# --8<-- [end:formats]


# --8<-- [start:quantize]
def _block_size(block: object, shape: tuple[int, int]) -> tuple[int, int]:
    """``block`` as two positive ints; ``None`` stands for the whole dimension."""
    if not isinstance(block, (tuple, list)) or len(block) != 2:
        raise TypeError(f"block must be a pair (rows, columns), got {block!r}")
    sizes = []
    for size, dim in zip(block, shape):
        if size is None:
            size = max(dim, 1)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"block entries must be positive ints or None, got {block!r}")
        sizes.append(size)
    return sizes[0], sizes[1]


def scale_shape(shape: tuple[int, int], block: tuple[int | None, int | None]) -> tuple[int, int]:
    """The shape of the scales of a ``shape`` matrix in blocks of ``block``: (⌈M/bm⌉, ⌈K/bk⌉)."""
    bm, bk = _block_size(block, shape)
    return triton.cdiv(shape[0], bm), triton.cdiv(shape[1], bk)


def quantize_fp8(
    x: torch.Tensor, block: tuple[int | None, int | None] = (1, 128), dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(codes, scales)``: ``x`` (M, K) as fp8 ``codes`` (M, K) and float32 ``scales`` of
    :func:`scale_shape`, one per block, such that ``x ≈ codes · scales`` block by block.

    A non-finite value makes its own block's codes non-finite (NaN), and only that block's.
    """
    check_tensor("x", x, SOURCE_DTYPES)
    if x.dim() != 2:
        raise ValueError(f"x must be a matrix (M, K), got shape {tuple(x.shape)}")
    if dtype not in FP8_DTYPES:
        raise TypeError(f"dtype must be one of {FP8_DTYPES}, got {dtype}")
    (M, K), (bm, bk) = x.shape, _block_size(block, tuple(x.shape))
    Mb, Kb = scale_shape((M, K), (bm, bk))
    padded = torch.nn.functional.pad(x.float(), (0, Kb * bk - K, 0, Mb * bm - M))  # (1)!
    blocks = padded.view(Mb, bm, Kb, bk)
    amax = blocks.abs().amax(dim=(1, 3))
    top = fp8_max(dtype)
    scales = torch.where(amax > 0, amax / top, 1.0)  # (2)!
    scales = scales.clamp(min=torch.finfo(torch.float32).tiny)  # (3)!
    codes = (blocks / scales[:, None, :, None]).clamp(-top, top).to(dtype)  # (4)!
    return codes.view(Mb * bm, Kb * bk)[:M, :K].contiguous(), scales


def dequantize_fp8(
    codes: torch.Tensor, scales: torch.Tensor, block: tuple[int | None, int | None] = (1, 128)
) -> torch.Tensor:
    """``codes · scales`` in float64, every code times its block's scale (a reference, not a kernel)."""
    M, K = codes.shape
    bm, bk = _block_size(block, (M, K))
    if tuple(scales.shape) != scale_shape((M, K), (bm, bk)):
        raise ValueError(f"scales {tuple(scales.shape)} do not fit codes {(M, K)} in blocks of {(bm, bk)}")
    full = scales.double().repeat_interleave(bm, dim=0).repeat_interleave(bk, dim=1)
    return codes.double() * full[:M, :K]


# --8<-- [end:quantize]


# --8<-- [start:layouts]
A_BLOCKS = {"block": (1, SCALE_K), "row": (1, None), "tensor": (None, None)}
"""The scale blocks of ``a`` (M × K), by layout name."""
B_BLOCKS = {"block": (SCALE_N, SCALE_K), "row": (1, None), "tensor": (None, None)}
"""The scale blocks of ``b`` (N × K), by layout name."""


def scale_layout(name: str, x: torch.Tensor, scales: torch.Tensor, blocks: dict) -> str:
    """The layout (a key of ``blocks``) whose scale shape ``scales`` has; the first that fits."""
    shape = tuple(scales.shape)
    for layout, block in blocks.items():
        if shape == scale_shape(tuple(x.shape), block) or (layout == "tensor" and shape == ()):
            return layout
    expected = ", ".join(f"{layout} {scale_shape(tuple(x.shape), block)}" for layout, block in blocks.items())
    raise ValueError(f"{name} has shape {shape}, which fits no scale layout of a {tuple(x.shape)} operand: {expected}")


def scale_view(scales: torch.Tensor, block: tuple[int | None, int | None], rows: int, k_blocks: int):
    """Any layout as a block layout: ``(view, group)``, a (⌈rows/group⌉, k_blocks) view of ``scales`` and
    the operand's rows per scale row. A row or tensor scale is repeated along K (and a tensor scale along
    the rows) by zero strides, so the kernel reads every layout with the same two strides."""
    group, columns = block
    if group is None:  # one scale for the whole tensor
        return scales.reshape(1, 1).expand(max(rows, 1), k_blocks), 1  # (1)!
    if columns is None:  # one scale per row (group = 1) for every K block
        return scales.reshape(-1, 1).expand(-1, k_blocks), group
    return scales, group  # (2)!


# --8<-- [end:layouts]


# --8<-- [start:reference]
def dequantize_operand(x: torch.Tensor, scales: torch.Tensor, blocks: dict, name: str = "scales") -> torch.Tensor:
    """An operand of :func:`fp8_matmul` dequantised in float64, its layout read from the scales' shape."""
    layout = scale_layout(name, x, scales, blocks)
    return dequantize_fp8(x, scales.reshape(scale_shape(tuple(x.shape), blocks[layout])), blocks[layout])


def reference(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """``dequant(a) @ dequant(b).T`` in float64, rounded once to ``out_dtype``."""
    exact = dequantize_operand(a, a_scale, A_BLOCKS, "a_scale") @ dequantize_operand(b, b_scale, B_BLOCKS, "b_scale").T
    return exact.to(out_dtype)


# --8<-- [end:reference]


# --8<-- [start:kernel]
@triton.jit
def fp8_matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    a_scale_ptr,
    b_scale_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    stride_asm,
    stride_ask,
    stride_bsn,
    stride_bsk,
    B_GROUP: tl.constexpr,
    SCALE_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    ONE_B_SCALE: tl.constexpr,  # every column of the tile shares one b scale per K block
):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    band = pid // (GROUP_M * num_n)  # (1)!
    first_m = band * GROUP_M
    height = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % height
    pid_n = (pid % (GROUP_M * num_n)) // height
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M  # (2)!
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + cols.to(tl.int64)[None, :] * stride_bn + ks[:, None] * stride_bk  # (3)!
    a_scale_ptrs = a_scale_ptr + rows.to(tl.int64) * stride_asm
    b_scale_ptrs = b_scale_ptr + (cols // B_GROUP).to(tl.int64) * stride_bsn  # (4)!
    b_scale_tile = b_scale_ptr + ((pid_n * BLOCK_N) // B_GROUP).to(tl.int64) * stride_bsn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)  # (5)!
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        kb = k0 // SCALE_K  # (6)!
        a_scale = tl.load(a_scale_ptrs + kb * stride_ask)
        if ONE_B_SCALE:  # (7)!
            a_scale *= tl.load(b_scale_tile + kb * stride_bsk)
        else:
            b_scale = tl.load(b_scale_ptrs + kb * stride_bsk)
        partial = tl.dot(a, b)  # (8)!
        if ONE_B_SCALE:
            acc += partial * a_scale[:, None]  # (9)!
        else:
            acc += partial * a_scale[:, None] * b_scale[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows.to(tl.int64)[:, None] * stride_cm + out_cols.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(out_rows < M)[:, None] & (out_cols < N)[None, :])


# --8<-- [end:kernel]


# --8<-- [start:upcast_kernel]
@triton.jit
def fp8_upcast_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    a_scale_ptr,
    b_scale_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    stride_asm,
    stride_ask,
    stride_bsn,
    stride_bsk,
    B_GROUP: tl.constexpr,
    SCALE_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(
            a_ptr + rows.to(tl.int64)[:, None] * stride_am + (k0 + ks)[None, :] * stride_ak,
            mask=(rows < M)[:, None] & (k0 + ks < K)[None, :],
            other=0.0,
        )
        b = tl.load(
            b_ptr + cols.to(tl.int64)[None, :] * stride_bn + (k0 + ks)[:, None] * stride_bk,
            mask=(cols < N)[None, :] & (k0 + ks < K)[:, None],
            other=0.0,
        )
        a_scale = tl.load(a_scale_ptr + rows * stride_asm + (k0 // SCALE_K) * stride_ask, mask=rows < M, other=0.0)
        b_scale = tl.load(
            b_scale_ptr + (cols // B_GROUP) * stride_bsn + (k0 // SCALE_K) * stride_bsk, mask=cols < N, other=0.0
        )
        a = (a.to(tl.float32) * a_scale[:, None]).to(DOT_DTYPE)  # (1)!
        b = (b.to(tl.float32) * b_scale[None, :]).to(DOT_DTYPE)
        acc = tl.dot(a, b, acc)  # (2)!
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & (cols < N)[None, :])


# --8<-- [end:upcast_kernel]


# --8<-- [start:configs]
TILE_CONFIG = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=4, num_stages=3)  # (1)!
UPCAST_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
INTERPRETER_TILE = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, num_warps=4, num_stages=1)  # (2)!
INTERPRETER_UPCAST_TILE = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=1)


def tile_config(overrides: dict | None = None, *, upcast: bool = False) -> dict:
    """The launch options: the table's row (the interpreter's small tile on the CPU) with ``overrides``."""
    if upcast:
        cfg = dict(INTERPRETER_UPCAST_TILE if INTERPRETED else UPCAST_CONFIG)
    else:
        cfg = dict(INTERPRETER_TILE if INTERPRETED else TILE_CONFIG)
    cfg.update(check_config(overrides, cfg, min_block=16))
    if SCALE_K % cfg["BLOCK_K"]:
        raise ValueError(f"BLOCK_K must divide {SCALE_K}, so that a K step never spans two scale blocks")  # (3)!
    return cfg


# --8<-- [end:configs]


# --8<-- [start:launcher]
def check_inputs(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype,
    out: torch.Tensor | None = None,
) -> tuple[str, str]:
    """Refuse what the kernel cannot take; return the two scale layouts (:func:`scale_layout`)."""
    check_tensor("a", a, FP8_DTYPES)
    check_tensor("b", b, FP8_DTYPES)
    check_tensor("a_scale", a_scale, (torch.float32,))
    check_tensor("b_scale", b_scale, (torch.float32,))
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a must be (M, K) and b (N, K), got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)} (b is N × K)")
    if len({t.device for t in (a, a_scale, b, b_scale)}) != 1:
        where = ", ".join(
            f"{n} on {t.device}" for n, t in (("a", a), ("a_scale", a_scale), ("b", b), ("b_scale", b_scale))
        )
        raise ValueError(f"devices differ: {where}")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"out_dtype must be one of {OUT_DTYPES}, got {out_dtype}")
    (M, K), N = a.shape, b.shape[0]
    if max(M, N, K) > MAX_COORD or triton.cdiv(M, 16) * triton.cdiv(N, 16) > MAX_COORD:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)}: too many rows, columns or tiles for int32")
    check_forward_only("fp8_matmul", a_scale=a_scale, b_scale=b_scale)
    layouts = scale_layout("a_scale", a, a_scale, A_BLOCKS), scale_layout("b_scale", b, b_scale, B_BLOCKS)
    if out is not None:
        check_tensor("out", out, OUT_DTYPES)
        if out.shape != (M, N) or out.dtype != out_dtype or out.device != a.device:
            raise ValueError(
                f"out must be ({M}, {N}) {out_dtype} on {a.device}, got {tuple(out.shape)} {out.dtype} on {out.device}"
            )
        check_no_overlap("out", out)
        check_disjoint("out", out, a=a, b=b, a_scale=a_scale, b_scale=b_scale)
    return layouts


def _launch(kernel, grid, a, a_scale, b, b_scale, out, layouts, meta: dict, *, fold: bool = False) -> torch.Tensor:
    """Resolve both scale layouts into block views (:func:`scale_view`) and launch ``kernel``; ``fold``:
    tell it whether each tile's columns share one b scale (``ONE_B_SCALE``)."""
    (M, K), N = a.shape, b.shape[0]
    k_blocks = triton.cdiv(K, SCALE_K)
    a_view, _ = scale_view(a_scale, A_BLOCKS[layouts[0]], M, k_blocks)  # a's groups are single rows
    b_view, b_group = scale_view(b_scale, B_BLOCKS[layouts[1]], N, k_blocks)
    if fold:
        meta = dict(meta, ONE_B_SCALE=b_group % meta["BLOCK_N"] == 0 or b_view.stride(0) == 0)  # (1)!
    kernel[grid](
        a,
        b,
        out,
        a_view,
        b_view,
        M,
        N,
        K,
        *a.stride(),
        *b.stride(),
        *out.stride(),
        *a_view.stride(),
        *b_view.stride(),
        B_GROUP=b_group,
        SCALE_K=SCALE_K,
        **meta,
    )
    return out


def fp8_matmul(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    *,
    out: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """``dequant(a) @ dequant(b).T`` (M, N) in ``out_dtype``, for fp8 ``a`` (M, K) and ``b`` (N, K).

    The scales' shapes select each operand's layout (the module docstring's table). Any strides;
    ``out``, if given, receives the result; ``config`` overrides entries of :func:`tile_config`.
    """
    layouts = check_inputs(a, a_scale, b, b_scale, out_dtype, out)
    cfg = tile_config(config)
    (M, K), N = a.shape, b.shape[0]
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if out.numel() == 0:
        return out
    if K == 0:  # an empty sum
        return out.zero_()
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    return _launch(fp8_matmul_kernel, grid, a, a_scale, b, b_scale, out, layouts, cfg, fold=True)


def fp8_matmul_upcast(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    *,
    config: dict | None = None,
) -> torch.Tensor:
    """Stage 1: every tile dequantised in registers to bf16 (fp32 under the interpreter), then a 16-bit
    ``tl.dot`` accumulated over the whole of K."""
    layouts = check_inputs(a, a_scale, b, b_scale, out_dtype)
    cfg = tile_config(config, upcast=True)
    (M, K), N = a.shape, b.shape[0]
    out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if out.numel() == 0:
        return out
    if K == 0:
        return out.zero_()
    grid = (triton.cdiv(M, cfg["BLOCK_M"]), triton.cdiv(N, cfg["BLOCK_N"]))
    meta = dict(cfg, DOT_DTYPE=tl.float32 if INTERPRETED else tl.bfloat16)  # (2)!
    return _launch(fp8_upcast_kernel, grid, a, a_scale, b, b_scale, out, layouts, meta)


# --8<-- [end:launcher]

STAGES = {"upcast": fp8_matmul_upcast, "fp8_dot": fp8_matmul}
"""Every stage by name, in the chapter's order (the benchmark times each as ``academy:<name>``)."""


# --8<-- [start:error_bound]
FP32_ROUNDOFF = 2.0**-24
GPU_FP8_ACCUMULATOR_ROUNDOFF = 2.0**-12
"""Relative error of one addition in the tensor cores' fp8 accumulator, taken as 2⁻¹²: the DeepSeek-V3
report measured about 14 bits of precision on the H800, whose ulp is 2⁻¹³, and this leaves a factor 2."""


def accumulator_roundoff() -> float:
    """What one addition inside a K-block may lose: fp32 under the interpreter (NumPy float32 matmul),
    the fp8 tensor cores' narrower accumulator on a GPU."""
    return FP32_ROUNDOFF if INTERPRETED else GPU_FP8_ACCUMULATOR_ROUNDOFF


def gamma(n: int, u: float) -> float:
    """γₙ = n·u / (1 − n·u): the relative error bound of n roundings of relative size u, compounded."""
    return n * u / (1 - n * u)


def error_bound(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    out_dtype: torch.dtype,
    *,
    chunk: int = SCALE_K,
    chunk_roundoff: float | None = None,
    operand_roundoff: float = 0.0,
) -> torch.Tensor:
    """The largest |y − exact| the kernel may leave, per element (float64, (M, N)).

    ``exact`` is the float64 product of the dequantised operands; ``terms`` = Σₖ |âₘₖ|·|b̂ₙₖ|. The
    products of fp8 codes are exact in fp32; each sum of ``chunk`` of them loses at most
    γ_chunk(``chunk_roundoff``); the two scale multiplies and the ⌈K/chunk⌉ additions into the fp32
    accumulator γ_{⌈K/chunk⌉+2}(2⁻²⁴); an operand rounded before the dot (stage 1) ``operand_roundoff``
    each; the final rounding to ``out_dtype`` one ulp, eps·|y| (round to nearest needs half of that,
    the interpreter's truncation to bf16 all of it).
    """
    a_hat = dequantize_operand(a, a_scale, A_BLOCKS)
    b_hat = dequantize_operand(b, b_scale, B_BLOCKS)
    exact = a_hat @ b_hat.T
    terms = a_hat.abs() @ b_hat.abs().T
    u_chunk = accumulator_roundoff() if chunk_roundoff is None else chunk_roundoff
    steps = triton.cdiv(a.shape[1], chunk)
    growth = (1 + gamma(chunk, u_chunk)) * (1 + gamma(steps + 2, FP32_ROUNDOFF)) * (1 + operand_roundoff) ** 2 - 1
    ulp = torch.finfo(out_dtype).eps
    return ulp * exact.abs() + (1 + ulp) * growth * terms


# --8<-- [end:error_bound]


# --8<-- [start:roofline]
def flops(M: int, N: int, K: int) -> int:
    """2·M·N·K: a multiply and an add per term."""
    return 2 * M * N * K


def min_bytes(M: int, N: int, K: int, out_size: int = 2) -> int:
    """One byte per fp8 element of a and b, the block scales (4 bytes each) and the output once."""
    scales = M * triton.cdiv(K, SCALE_K) + triton.cdiv(N, SCALE_N) * triton.cdiv(K, SCALE_K)
    return M * K + N * K + 4 * scales + out_size * M * N


def scale_overhead(block: tuple[int, int]) -> float:
    """Bytes of float32 scale per byte of fp8 code: 4 / (rows · columns) of a block."""
    return 4 / math.prod(block)


# --8<-- [end:roofline]


if __name__ == "__main__":
    torch.manual_seed(0)
    for M, N, K in ((40, 72, 200), (3, 130, 256)):
        x = torch.randn(M, K, device=DEVICE)
        w = torch.randn(N, K, device=DEVICE) / K**0.5
        a, a_scale = quantize_fp8(x, (1, 128))
        b, b_scale = quantize_fp8(w, (128, 128))
        for op in (fp8_matmul, fp8_matmul_upcast):
            y = op(a, a_scale, b, b_scale, torch.float32)
            exact = dequantize_operand(a, a_scale, A_BLOCKS) @ dequantize_operand(b, b_scale, B_BLOCKS).T
            error = ((y.double() - exact).norm() / exact.norm()).item()
            quantisation = ((y.double() - x.double() @ w.double().T).norm() / exact.norm()).item()
            print(f"{op.__name__} {M}x{N}x{K}: error {error:.1e} (vs unquantised {quantisation:.1e})")
            assert error < 1e-5
