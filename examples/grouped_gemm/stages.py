"""The chapter's stages, each a runnable, differentiable ``grouped_matmul(x, w, group_sizes)``.

==============  =====================================================================
``loop``        one launch of the matmul chapter's op per expert; reads the sizes on the
                host (a synchronisation) to slice the rows
``static``      one launch, one program per tile of a bound that no routing exceeds; each
                program finds its group and tile from a prefix sum done on the device
``persistent``  one program per SM, each walking the global tile index group by group (the
                Triton tutorial's grouped GEMM): no prefix sum, a scalar walk
``tma``         the final op: persistent, the prefix-sum lookup, TMA loads through tensor
                descriptors (Hopper; the interpreter emulates them)
==============  =====================================================================

All four share the weight gradient's kernel except ``loop``, which computes it
with one matmul per expert too. The benchmark also times the final op forced
onto pointer loads (``academy:pointer``): what TMA adds.
"""

from __future__ import annotations

import functools

from academy import INTERPRETED
from academy.grid import sm_count

import torch
import triton
import triton.language as tl

from examples.grouped_gemm.kernel import (
    GroupedKernels,
    GroupedMatmul,
    check_inputs,
    grouped_matmul,
    grouped_rows,
    grouped_weight_grad,
    max_m_tiles,
    rows_config,
    tile_product,
)
from examples.matmul.kernel import matmul


# --8<-- [start:loop]
def host_sizes(group_sizes: torch.Tensor, T: int) -> list[int]:
    """The group sizes as Python ints: ``tolist`` waits for the GPU (the synchronisation)."""
    sizes = group_sizes.tolist()
    if sum(sizes) != T or min(sizes, default=0) < 0:
        raise ValueError(f"group sizes must be non-negative and sum to {T}, got {sizes}")
    return sizes


def loop_rows(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor, out: torch.Tensor) -> None:
    start = 0
    for group, size in enumerate(host_sizes(group_sizes, a.shape[0])):
        if size:  # (1)!
            matmul(a[start : start + size], b[group], out=out[start : start + size])
        start += size


def loop_weight_grad(x: torch.Tensor, dy: torch.Tensor, group_sizes: torch.Tensor, dw: torch.Tensor) -> None:
    start = 0
    for group, size in enumerate(host_sizes(group_sizes, x.shape[0])):
        if size:
            matmul(x[start : start + size].T, dy[start : start + size], out=dw[group])  # (2)!
        else:
            dw[group].zero_()  # (3)!
        start += size


def grouped_matmul_loop(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Stage 1: one matmul launch per non-empty expert, after reading the sizes on the host."""
    check_inputs(x, w, group_sizes)
    return GroupedMatmul.apply(x, w, group_sizes, GroupedKernels(loop_rows, loop_weight_grad))


# --8<-- [end:loop]


# --8<-- [start:static]
def grouped_matmul_static(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Stage 2: one launch whose grid is the tile bound; programs past the real tiles exit at once."""
    check_inputs(x, w, group_sizes)
    rows = functools.partial(grouped_rows, path="pointer", persistent=False)
    return GroupedMatmul.apply(x, w, group_sizes, GroupedKernels(rows, grouped_weight_grad))


# --8<-- [end:static]


# --8<-- [start:walk]
@triton.jit
def grouped_rows_walk_kernel(
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
    INPUT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    num_n = tl.cdiv(N, BLOCK_N)
    tile = tl.program_id(0)  # this program's next global tile
    first = 0  # global index of the current group's first tile
    seen = tl.zeros([], dtype=tl.int64)  # rows of the groups walked so far
    for group in range(E):  # (1)!
        size = tl.maximum(tl.load(sizes_ptr + group * stride_s).to(tl.int64), 0)
        row_start = tl.minimum(seen, T).to(tl.int32)
        seen += size
        row_end = tl.minimum(seen, T).to(tl.int32)
        m_tiles = tl.cdiv(row_end - row_start, BLOCK_M)
        while tile < first + m_tiles * num_n:  # (2)!
            local = tile - first
            tile_product(
                a_ptr,
                b_ptr,
                c_ptr,
                group,
                row_start,
                row_end,
                local % m_tiles,
                local // m_tiles,
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
            tile += tl.num_programs(0)  # (3)!
        first += m_tiles * num_n


def walk_rows(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor, out: torch.Tensor) -> None:
    (T, K), (E, N) = a.shape, (b.shape[0], b.shape[2])
    if out.numel() == 0:
        return
    if K == 0:
        out.zero_()
        return
    cfg = rows_config(T, E, a.dtype)
    bound = max_m_tiles(T, E, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    grouped_rows_walk_kernel[(min(cfg["PROGRAMS_PER_SM"] * sm_count(), bound),)](
        a,
        b,
        out,
        group_sizes,
        T,
        N,
        K,
        E,
        *a.stride(),
        *b.stride(),
        *out.stride(),
        group_sizes.stride(0),
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_K=cfg["BLOCK_K"],
        INPUT_PRECISION="ieee" if INTERPRETED or a.dtype == torch.float32 else None,
        UPCAST=INTERPRETED,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )


def grouped_matmul_persistent(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Stage 3: one program per SM, each walking the groups' tiles in order (the Triton tutorial's way)."""
    check_inputs(x, w, group_sizes)
    return GroupedMatmul.apply(x, w, group_sizes, GroupedKernels(walk_rows, grouped_weight_grad))


# --8<-- [end:walk]


def grouped_matmul_tma(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Stage 4: the final op with TMA loads (raises where tensor descriptors or the strides rule them out)."""
    return grouped_matmul(x, w, group_sizes, path="tma")


STAGES = {
    "loop": grouped_matmul_loop,
    "static": grouped_matmul_static,
    "persistent": grouped_matmul_persistent,
    "tma": grouped_matmul_tma,
}
"""Every stage by name, in the chapter's order (the benchmark times each as ``academy:<name>``)."""
