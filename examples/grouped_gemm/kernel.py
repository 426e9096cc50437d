"""Grouped GEMM for mixture-of-experts layers: ``y[rows of e] = x[rows of e] @ w[e]`` in one launch.

``grouped_matmul(x, w, group_sizes)`` takes the routed tokens ``x`` (T, K),
their rows sorted by expert, the experts' weights ``w`` (E, K, N) and
``group_sizes`` (E,), an int32 or int64 tensor on ``x``'s device holding
how many rows each expert owns (zeros allowed). It returns ``y`` (T, N),
where rows ``[start_e, start_e + group_sizes[e])`` are multiplied by
``w[e]``. fp16, bf16 and fp32 (true fp32, no TF32). Differentiable in
``x`` and ``w``: the input gradient ``dX_e = dY_e · w[e]ᵀ`` is the same
grouped kernel on a transposed view of ``w``, the weight gradient
``dW[e] = X_eᵀ · dY_e`` a second grouped kernel whose reduction runs over
each group's rows.

**No host synchronisation.** The group sizes are read on the device: every
program loads them and computes the groups' offsets with a prefix sum, and
the grid is sized from an upper bound on the number of tiles that depends
only on T, E and the tile shape, never on the sizes themselves. So a call
can be captured in a CUDA graph and replayed with other group sizes.

The caller guarantees ``group_sizes.sum() == T`` (checking it would need the
sum on the host, a synchronisation). A violation never makes the kernels
read or write out of bounds: negative sizes count as empty, groups are cut
at row T, and rows past the last group are left unwritten.

Kernels: :func:`grouped_rows_kernel` (pointer loads, persistent or one tile
per program), :func:`grouped_rows_tma_kernel` (TMA loads through tensor
descriptors, Hopper) and :func:`grouped_weight_grad_kernel` (the weight
gradient). Run this file (``python -m examples.grouped_gemm.kernel``) for a
quick check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from academy import DEVICE, INTERPRETED
from academy.grid import sm_count
from academy.tma import TensorDescriptor, tma_available
from academy.validation import check_config, check_tensor, once_differentiable

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
SIZE_DTYPES = (torch.int32, torch.int64)
PATHS = ("auto", "tma", "pointer")
MAX_EXPERTS = 1024
"""Every program holds the experts' offsets in registers, one vector of next_power_of_2(E) entries."""
MAX_COORD = 2**31 - 1
"""Rows, columns, tile indices and grid sizes are int32 in the kernels; element offsets are int64."""


# --8<-- [start:reference]
def reference(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """A loop over the experts in fp32, returned in ``x``'s dtype. It reads the sizes on the host
    (``tolist``: a synchronisation) and fails unless they sum to T."""
    pieces = [rows.float() @ w[e].float() for e, rows in enumerate(x.split(group_sizes.tolist()))]
    if not pieces:  # no experts (then T = 0)
        return x.new_zeros((x.shape[0], w.shape[2]))
    return torch.cat(pieces).to(x.dtype)


# --8<-- [end:reference]


# --8<-- [start:schedule]
@triton.jit
def group_rows(sizes_ptr, stride_s, E, T, E_POW2: tl.constexpr):
    """Every group's first row and one past its last: a prefix sum of the sizes, on the device."""
    experts = tl.arange(0, E_POW2)
    sizes = tl.load(sizes_ptr + experts * stride_s, mask=experts < E, other=0)  # (1)!
    sizes = tl.maximum(sizes.to(tl.int64), 0)  # (2)!
    ends = tl.cumsum(sizes, axis=0)
    return tl.minimum(ends - sizes, T).to(tl.int32), tl.minimum(ends, T).to(tl.int32)  # (3)!


@triton.jit
def group_span(sizes_ptr, stride_s, T, starts, group, E_POW2: tl.constexpr):
    """One group's rows [row_start, row_end): its start picked out of the vector, its size read again."""
    row_start = tl.sum(tl.where(tl.arange(0, E_POW2) == group, starts, 0), axis=0)  # (4)!
    size = tl.maximum(tl.load(sizes_ptr + group * stride_s).to(tl.int64), 0)
    return row_start, tl.minimum(row_start + size, T).to(tl.int32)


@triton.jit
def tile_table(sizes_ptr, stride_s, E, T, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, E_POW2: tl.constexpr):
    """Every group's first row, the global index one past its last tile, and the number of tiles."""
    starts, ends = group_rows(sizes_ptr, stride_s, E, T, E_POW2)
    tiles = tl.cdiv(ends - starts, BLOCK_M) * tl.cdiv(N, BLOCK_N)  # (5)!
    tile_ends = tl.cumsum(tiles, axis=0)
    return starts, tile_ends, tl.max(tile_ends, axis=0)


@triton.jit
def find_tile(tile, sizes_ptr, stride_s, T, starts, tile_ends, num_n, BLOCK_M: tl.constexpr, E_POW2: tl.constexpr):
    """The group that global tile ``tile`` belongs to, the group's rows, and the tile's place in its grid."""
    group = tl.sum((tile_ends <= tile).to(tl.int32), axis=0)  # (6)!
    row_start, row_end = group_span(sizes_ptr, stride_s, T, starts, group, E_POW2)
    m_count = tl.cdiv(row_end - row_start, BLOCK_M)
    first = tl.sum(tl.where(tl.arange(0, E_POW2) == group, tile_ends, 0), axis=0) - m_count * num_n
    return group, row_start, row_end, (tile - first) % m_count, (tile - first) // m_count  # (7)!


# --8<-- [end:schedule]


# --8<-- [start:schedule_py]
def tile_schedule(sizes: list[int], T: int, block_m: int, num_n: int) -> list[tuple[int, int, int, int]]:
    """What the kernels' ``find_tile`` computes, in plain Python: for each global tile in order, its
    ``(group, first row of the tile, pid_m, pid_n)``. Groups in order; inside a group, the tiles down
    the rows first, then the next column block, so tiles that run together share a weight panel."""
    schedule, seen = [], 0
    for group, size in enumerate(sizes):
        row_start = min(seen, T)
        seen += max(size, 0)
        m_tiles = -(-(min(seen, T) - row_start) // block_m)
        for local in range(m_tiles * num_n):
            pid_m, pid_n = local % m_tiles, local // m_tiles
            schedule.append((group, row_start + pid_m * block_m, pid_m, pid_n))
    return schedule


# --8<-- [end:schedule_py]


# --8<-- [start:tile]
@triton.jit
def tile_product(
    a_ptr,
    b_ptr,
    c_ptr,
    group,
    row_start,
    row_end,
    pid_m,
    pid_n,
    N,
    K,
    stride_am,
    stride_ak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """One BLOCK_M × BLOCK_N tile of a group's product: rows of ``a`` in the group times ``b[group]``."""
    rows = row_start + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    in_group = rows < row_end  # (1)!
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = (
        b_ptr
        + tl.cast(group, tl.int64) * stride_be  # (2)!
        + ks[:, None] * stride_bk
        + (cols % N).to(tl.int64)[None, :] * stride_bn
    )
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=in_group[:, None] & (ks[None, :] < K - k_start), other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k_start, other=0.0)
        if UPCAST:  # the interpreter's bf16 arithmetic is wrong: compute in fp32 there
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=in_group[:, None] & (cols < N)[None, :])  # (3)!


# --8<-- [end:tile]


# --8<-- [start:rows_kernel]
@triton.jit
def grouped_rows_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    sizes_ptr,
    T,
    N,
    K,
    E,
    stride_am,
    stride_ak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    stride_s,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    E_POW2: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    num_n = tl.cdiv(N, BLOCK_N)
    starts, tile_ends, total = tile_table(sizes_ptr, stride_s, E, T, N, BLOCK_M, BLOCK_N, E_POW2)  # (1)!
    for tile in tl.range(tl.program_id(0), total, tl.num_programs(0)):  # (2)!
        group, row_start, row_end, pid_m, pid_n = find_tile(
            tile, sizes_ptr, stride_s, T, starts, tile_ends, num_n, BLOCK_M, E_POW2
        )
        tile_product(
            a_ptr,
            b_ptr,
            c_ptr,
            group,
            row_start,
            row_end,
            pid_m,
            pid_n,
            N,
            K,
            stride_am,
            stride_ak,
            stride_be,
            stride_bk,
            stride_bn,
            stride_cm,
            stride_cn,
            BLOCK_M,
            BLOCK_N,
            BLOCK_K,
            INPUT_PRECISION,
            UPCAST,
        )


# --8<-- [end:rows_kernel]


# --8<-- [start:tma_kernel]
@triton.jit
def grouped_rows_tma_kernel(
    a_desc,
    b_desc,
    c_ptr,
    sizes_ptr,
    T,
    N,
    K,
    E,
    stride_cm,
    stride_cn,
    stride_s,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    E_POW2: tl.constexpr,
    B_COLUMN_MAJOR: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    num_n = tl.cdiv(N, BLOCK_N)
    starts, tile_ends, total = tile_table(sizes_ptr, stride_s, E, T, N, BLOCK_M, BLOCK_N, E_POW2)
    for tile in tl.range(tl.program_id(0), total, tl.num_programs(0)):
        group, row_start, row_end, pid_m, pid_n = find_tile(
            tile, sizes_ptr, stride_s, T, starts, tile_ends, num_n, BLOCK_M, E_POW2
        )
        off_m = row_start + pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([off_m, ki * BLOCK_K])  # (1)!
            if B_COLUMN_MAJOR:  # (2)!
                b = tl.reshape(b_desc.load([group, off_n, ki * BLOCK_K]), (BLOCK_N, BLOCK_K)).T
            else:
                b = tl.reshape(b_desc.load([group, ki * BLOCK_K, off_n]), (BLOCK_K, BLOCK_N))  # (3)!
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        rows = off_m + tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows < row_end)[:, None] & (cols < N)[None, :])  # (4)!


# --8<-- [end:tma_kernel]


# --8<-- [start:weight_grad_kernel]
@triton.jit
def grouped_weight_grad_kernel(
    x_ptr,
    dy_ptr,
    dw_ptr,
    sizes_ptr,
    T,
    K,
    N,
    E,
    stride_xm,
    stride_xk,
    stride_dym,
    stride_dyn,
    stride_we,
    stride_wk,
    stride_wn,
    stride_s,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_R: tl.constexpr,
    E_POW2: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    num_k = tl.cdiv(K, BLOCK_K)
    num_n = tl.cdiv(N, BLOCK_N)
    group = tl.program_id(0) // (num_k * num_n)  # (1)!
    pid_k = tl.program_id(0) % (num_k * num_n) // num_n
    pid_n = tl.program_id(0) % num_n
    starts, _ = group_rows(sizes_ptr, stride_s, E, T, E_POW2)
    row_start, row_end = group_span(sizes_ptr, stride_s, T, starts, group, E_POW2)
    ks = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    ns = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rs = tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for r_start in range(row_start, row_end, BLOCK_R):  # (2)!
        rows = r_start + rs
        in_group = rows < row_end
        xt = tl.load(  # (3)!
            x_ptr + rows.to(tl.int64)[None, :] * stride_xm + ks.to(tl.int64)[:, None] * stride_xk,
            mask=in_group[None, :] & (ks < K)[:, None],
            other=0.0,
        )
        dy = tl.load(
            dy_ptr + rows.to(tl.int64)[:, None] * stride_dym + ns.to(tl.int64)[None, :] * stride_dyn,
            mask=in_group[:, None] & (ns < N)[None, :],
            other=0.0,
        )
        if UPCAST:
            xt = xt.to(tl.float32)
            dy = dy.to(tl.float32)
        acc = tl.dot(xt, dy, acc, input_precision=INPUT_PRECISION)
    dw_ptrs = (
        dw_ptr
        + group.to(tl.int64) * stride_we
        + ks.to(tl.int64)[:, None] * stride_wk
        + ns.to(tl.int64)[None, :] * stride_wn
    )
    tl.store(dw_ptrs, acc.to(dw_ptr.dtype.element_ty), mask=(ks < K)[:, None] & (ns < N)[None, :])  # (4)!


# --8<-- [end:weight_grad_kernel]


# --8<-- [start:configs]
# One row per regime, chosen by the average rows per expert, T / E. Untuned starting points: the GPU sweep
# replaces them (keys are the kernels' meta-parameters).
# PROGRAMS_PER_SM: the persistent grid's programs per SM (two 4-warp programs keep more loads in flight).
TILE_CONFIGS = {
    "large": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3, PROGRAMS_PER_SM=1),  # >= 512 rows
    "medium": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4, PROGRAMS_PER_SM=1),  # 192 to 511
    "small": dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4, PROGRAMS_PER_SM=2),  # fine-grained
    "fp32": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=3, PROGRAMS_PER_SM=2),
}
WEIGHT_GRAD_CONFIGS = {
    "half": dict(BLOCK_K=128, BLOCK_N=128, BLOCK_R=64, num_warps=8, num_stages=3),
    "fp32": dict(BLOCK_K=64, BLOCK_N=64, BLOCK_R=32, num_warps=4, num_stages=3),
}
INTERPRETER_TILE = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=1, PROGRAMS_PER_SM=1)  # (1)!
INTERPRETER_WEIGHT_GRAD_TILE = dict(BLOCK_K=32, BLOCK_N=32, BLOCK_R=16, num_warps=4, num_stages=1)


def tile_class(T: int, E: int, dtype: torch.dtype) -> str:
    """The row of TILE_CONFIGS for a problem: by the rows an expert gets on average."""
    if dtype == torch.float32:
        return "fp32"
    per_expert = T / max(E, 1)
    return "large" if per_expert >= 512 else "medium" if per_expert >= 192 else "small"


def rows_config(T: int, E: int, dtype: torch.dtype, overrides: dict | None = None) -> dict:
    """Tile and launch options of the row-grouped kernels (forward and input gradient)."""
    cfg = dict(INTERPRETER_TILE if INTERPRETED else TILE_CONFIGS[tile_class(T, E, dtype)])
    return {**cfg, **check_config(overrides, cfg, min_block=16)}


def weight_grad_config(dtype: torch.dtype, overrides: dict | None = None) -> dict:
    """Tile and launch options of the weight-gradient kernel."""
    cfg = dict(
        INTERPRETER_WEIGHT_GRAD_TILE
        if INTERPRETED
        else WEIGHT_GRAD_CONFIGS["fp32" if dtype == torch.float32 else "half"]
    )
    return {**cfg, **check_config(overrides, cfg, min_block=16)}


def max_m_tiles(T: int, E: int, block_m: int) -> int:
    """The most row tiles any routing of T rows over E groups can need.

    n non-empty groups waste at most ``block_m - 1`` rows of padding each: their tiles number at most
    n + (T - n) // block_m, which grows with n, and n <= min(E, T). The grid is sized from this bound,
    which depends on no group size (tests/grouped_gemm/test_math.py checks it by brute force).
    """
    groups = min(E, T)
    return groups + (T - groups) // block_m  # (2)!


# --8<-- [end:configs]


# --8<-- [start:tma_check]
def _tma_rows(t: torch.Tensor) -> bool:
    """A 2-D operand TMA can read: unit last stride, 16-byte aligned base and row stride."""
    return t.data_ptr() % 16 == 0 and t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0


def _tma_weight_layout(b: torch.Tensor) -> str | None:
    """``"row"`` or ``"column"`` when TMA can read the (E, K, N) operand ``b`` per expert, else None.

    A column-major ``b[e]`` (the input gradient multiplies by ``w[e]ᵀ``, a view) gets its descriptor
    on ``b.transpose(1, 2)``, whose last stride is then 1.
    """
    size = b.element_size()
    if b.data_ptr() % 16 or (b.stride(0) * size) % 16:
        return None
    if b.stride(2) == 1 and (b.stride(1) * size) % 16 == 0:
        return "row"
    if b.stride(1) == 1 and (b.stride(2) * size) % 16 == 0:
        return "column"
    return None


# --8<-- [end:tma_check]


# --8<-- [start:launcher]
def check_inputs(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor, path: str = "auto") -> None:
    check_tensor("x", x, SUPPORTED_DTYPES)
    check_tensor("w", w, SUPPORTED_DTYPES)
    check_tensor("group_sizes", group_sizes, SIZE_DTYPES)
    if x.dim() != 2 or w.dim() != 3:
        raise ValueError(f"x must be (T, K) and w (E, K, N), got shapes {tuple(x.shape)} and {tuple(w.shape)}")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"inner dimensions differ: x is {tuple(x.shape)}, w is {tuple(w.shape)}")
    if x.dtype != w.dtype:
        raise TypeError(f"dtypes differ: x {x.dtype} vs w {w.dtype}")
    if w.device != x.device or group_sizes.device != x.device:
        raise ValueError(f"devices differ: x on {x.device}, w on {w.device}, group_sizes on {group_sizes.device}")
    if group_sizes.shape != (w.shape[0],):
        raise ValueError(
            f"group_sizes must be ({w.shape[0]},), one row count per expert, got {tuple(group_sizes.shape)}"
        )
    (T, K), (E, N) = x.shape, (w.shape[0], w.shape[2])
    if E == 0 and T > 0:
        raise ValueError(f"{T} rows but no experts: group sizes must sum to T")
    if E > MAX_EXPERTS:
        raise ValueError(f"{E} experts: at most {MAX_EXPERTS} (each program holds every expert's offsets)")
    tiles = max(max_m_tiles(T, E, 16) * triton.cdiv(max(N, K), 16), E * triton.cdiv(K, 16) * triton.cdiv(N, 16))
    if max(T, K, N) > MAX_COORD or tiles > MAX_COORD:
        raise ValueError(f"x {tuple(x.shape)} and w {tuple(w.shape)}: too many rows, columns or tiles for int32")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")


def _precision(dtype: torch.dtype) -> str | None:
    """fp32 multiplies in true fp32 (never TF32); the interpreter upcasts 16-bit tiles to fp32 first."""
    return "ieee" if INTERPRETED or dtype == torch.float32 else None


def grouped_rows(
    a: torch.Tensor,
    b: torch.Tensor,
    group_sizes: torch.Tensor,
    out: torch.Tensor,
    *,
    path: str = "auto",
    config: dict | None = None,
    persistent: bool = True,
) -> torch.Tensor:
    """``out[rows of g] = a[rows of g] @ b[g]`` for every group g; ``b`` is (E, K, N), any strides.

    The forward pass (``b = w``) and the input gradient (``b = w.transpose(1, 2)``, a view) alike.
    ``persistent=False`` launches one program per tile of the bound instead of PROGRAMS_PER_SM per SM.
    """
    (T, K), (E, N) = a.shape, (b.shape[0], b.shape[2])
    if out.numel() == 0:
        return out
    if K == 0:  # an empty sum (rows past the groups are zeroed too)
        return out.zero_()
    cfg = rows_config(T, E, a.dtype, config)
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    bound = max_m_tiles(T, E, bm) * triton.cdiv(N, bn)  # (1)!
    grid = (min(cfg["PROGRAMS_PER_SM"] * sm_count(), bound) if persistent else bound,)
    layout = _tma_weight_layout(b)
    tma = bool(tma_available() and persistent and _tma_rows(a) and layout)
    if path == "tma" and not tma:
        raise ValueError("path='tma' needs tensor descriptors (Hopper or the interpreter) and TMA-compatible strides")
    common = dict(
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=cfg["BLOCK_K"],
        E_POW2=triton.next_power_of_2(E),
        INPUT_PRECISION=_precision(a.dtype),
        UPCAST=INTERPRETED,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    if tma and path != "pointer":
        bk = cfg["BLOCK_K"]
        a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
        b_desc = (  # (2)!
            TensorDescriptor.from_tensor(b.transpose(1, 2), [1, bn, bk])
            if layout == "column"
            else TensorDescriptor.from_tensor(b, [1, bk, bn])
        )
        grouped_rows_tma_kernel[grid](
            a_desc,
            b_desc,
            out,
            group_sizes,
            T,
            N,
            K,
            E,
            *out.stride(),
            group_sizes.stride(0),
            B_COLUMN_MAJOR=layout == "column",
            **common,
        )
    else:
        grouped_rows_kernel[grid](
            a, b, out, group_sizes, T, N, K, E, *a.stride(), *b.stride(), *out.stride(), group_sizes.stride(0), **common
        )
    return out


def grouped_weight_grad(
    x: torch.Tensor, dy: torch.Tensor, group_sizes: torch.Tensor, dw: torch.Tensor, *, config: dict | None = None
) -> torch.Tensor:
    """``dw[g] = x[rows of g]ᵀ @ dy[rows of g]`` for every group g; an empty group's is zero."""
    (T, K), (E, N) = x.shape, (dw.shape[0], dw.shape[2])
    if dw.numel() == 0:
        return dw
    if T == 0:  # no rows: every group's gradient is an empty sum
        return dw.zero_()
    cfg = weight_grad_config(x.dtype, config)
    bk, bn = cfg["BLOCK_K"], cfg["BLOCK_N"]
    grid = (E * triton.cdiv(K, bk) * triton.cdiv(N, bn),)  # (3)!
    grouped_weight_grad_kernel[grid](
        x,
        dy,
        dw,
        group_sizes,
        T,
        K,
        N,
        E,
        *x.stride(),
        *dy.stride(),
        *dw.stride(),
        group_sizes.stride(0),
        BLOCK_K=bk,
        BLOCK_N=bn,
        BLOCK_R=cfg["BLOCK_R"],
        E_POW2=triton.next_power_of_2(E),
        INPUT_PRECISION=_precision(x.dtype),
        UPCAST=INTERPRETED,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    return dw


# --8<-- [end:launcher]


# --8<-- [start:autograd]
@dataclass(frozen=True)
class GroupedKernels:
    """How a version of the op computes its two grouped products (each fills its last argument)."""

    rows: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], object]
    """``out[rows of g] = a[rows of g] @ b[g]``: the forward and the input gradient."""
    weight_grad: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], object]
    """``dw[g] = x[rows of g]ᵀ @ dy[rows of g]``."""


class GroupedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, group_sizes, kernels: GroupedKernels):
        ctx.save_for_backward(x, w, group_sizes)
        ctx.kernels = kernels
        y = torch.empty((x.shape[0], w.shape[2]), dtype=x.dtype, device=x.device)
        kernels.rows(x, w, group_sizes, y)
        return y

    @staticmethod
    @once_differentiable("grouped_matmul")
    def backward(ctx, dy):
        x, w, group_sizes = ctx.saved_tensors
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            ctx.kernels.rows(dy, w.transpose(1, 2), group_sizes, dx)  # (1)!
        if ctx.needs_input_grad[1]:
            dw = torch.empty(w.shape, dtype=w.dtype, device=w.device)
            ctx.kernels.weight_grad(x, dy, group_sizes, dw)  # (2)!
        return dx, dw, None, None


def grouped_matmul(
    x: torch.Tensor,
    w: torch.Tensor,
    group_sizes: torch.Tensor,
    *,
    path: str = "auto",
    config: dict | None = None,
    grad_config: dict | None = None,
) -> torch.Tensor:
    """``y[rows of e] = x[rows of e] @ w[e]`` for x (T, K) sorted by expert, w (E, K, N) and group_sizes (E,).

    ``group_sizes`` (int32 or int64, on x's device) must sum to T: the caller guarantees it, since
    checking would synchronise with the host (a violation stays in bounds; see the module docstring).
    ``path``: ``"auto"`` (TMA where the GPU and strides allow it, else pointers), ``"tma"`` or
    ``"pointer"``; ``config`` overrides entries of the row kernels' tile config (:func:`rows_config`),
    ``grad_config`` those of the weight gradient's (:func:`weight_grad_config`).
    """
    check_inputs(x, w, group_sizes, path)
    rows_config(x.shape[0], w.shape[0], x.dtype, config)  # a bad override fails here, not in the backward
    weight_grad_config(x.dtype, grad_config)
    kernels = GroupedKernels(
        rows=functools.partial(grouped_rows, path=path, config=config),
        weight_grad=functools.partial(grouped_weight_grad, config=grad_config),
    )
    return GroupedMatmul.apply(x, w, group_sizes, kernels)


# --8<-- [end:autograd]


# --8<-- [start:roofline]
def flops(T: int, K: int, N: int) -> int:
    """2·T·K·N: a multiply and an add per term, however the T rows are split between experts."""
    return 2 * T * K * N


def min_bytes(T: int, E: int, K: int, N: int, element_size: int = 2) -> int:
    """The least traffic of a forward call: x and y once, and every expert's weight once."""
    return (T * K + E * K * N + T * N) * element_size


def arithmetic_intensity(T: int, E: int, K: int, N: int, element_size: int = 2) -> float:
    """FLOPs per byte of the minimal traffic; about T / E, the rows per expert, when the weights dominate."""
    return flops(T, K, N) / min_bytes(T, E, K, N, element_size)


# --8<-- [end:roofline]


if __name__ == "__main__":
    torch.manual_seed(0)
    for sizes, K, N, dtype in (
        ([5, 0, 1, 30], 40, 24, torch.float32),
        ([17, 3, 0], 72, 48, torch.float16),
    ):
        group_sizes = torch.tensor(sizes, device=DEVICE)
        x = torch.randn(sum(sizes), K, device=DEVICE).to(dtype).requires_grad_()
        w = torch.randn(len(sizes), K, N, device=DEVICE).to(dtype).requires_grad_()
        y = grouped_matmul(x, w, group_sizes)
        dy = torch.randn_like(y)
        y.backward(dy)
        x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        ref = torch.cat([rows @ w64[e] for e, rows in enumerate(x64.split(sizes))])
        ref.backward(dy.double())
        errors = [
            ((got.double() - want).norm() / want.norm()).item()
            for got, want in ((y, ref), (x.grad, x64.grad), (w.grad, w64.grad))
        ]
        print(
            f"grouped_matmul sizes {sizes}, K={K}, N={N}, {dtype}: errors y/dx/dw "
            + " ".join(f"{e:.1e}" for e in errors)
        )
        assert max(errors) < (1e-5 if dtype == torch.float32 else 1e-2)
