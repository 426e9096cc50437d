"""The chapter's stages, each a runnable ``act(a @ b)`` that adds one idea to the one before.

==============  =====================================================================
``naive``       one program per tile, rank-1 updates one k at a time (no tensor cores)
``k_loop``      the tiling tutorial's kernel: ``tl.dot`` over BLOCK_K steps, masked edges,
                row-major tile order, a textbook 64×64×32 tile, no pipelining
``grouped``     the same kernel with GROUP_SIZE_M = 8 (tiles that run together share L2)
``autotuned``   the tile shape and warps picked by ``@triton.autotune`` (no pipelining)
``pipelined``   the same search with ``num_stages`` 3–4: loads run ahead of the math
``persistent``  one program per SM walking tiles; TMA through tensor descriptors on Hopper
``split_k``     K cut into slices on separate programs, partial sums added by a second pass
==============  =====================================================================

``k_loop`` and ``grouped`` *are* the tiling tutorial's kernel
(:mod:`examples.tiled_matmul.kernel`), imported, not copied; ``autotuned``
and ``pipelined`` wrap this chapter's pointer kernel; ``persistent`` and
``split_k`` force one path of :func:`examples.matmul.kernel.matmul`.
"""

from __future__ import annotations

from academy import INTERPRETED
from academy.tma import tma_available

import torch
import triton
import triton.language as tl

from examples.matmul.kernel import (
    _tma_layout,
    activate,
    check_inputs,
    matmul,
    matmul_pointer_kernel,
)
from examples.tiled_matmul import kernel as tiled


def _prepare(a, b, activation):
    check_inputs(a, b, activation, "auto")
    (M, K), N = a.shape, b.shape[1]
    return M, N, K, torch.empty((M, N), dtype=a.dtype, device=a.device)


# --8<-- [start:naive]
@triton.jit
def naive_kernel(
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
    ACTIVATION: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K):  # (1)!
        a = tl.load(a_ptr + rows.to(tl.int64) * stride_am + k * stride_ak, mask=rows < M, other=0.0)
        b = tl.load(b_ptr + k * stride_bk + cols.to(tl.int64) * stride_bn, mask=cols < N, other=0.0)
        acc += a.to(tl.float32)[:, None] * b.to(tl.float32)[None, :]  # (2)!
    acc = activate(acc, ACTIVATION)
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & (cols < N)[None, :])


def matmul_naive(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 1: every element of a tile is a sum of K scalar products, on the CUDA cores."""
    M, N, K, c = _prepare(a, b, activation)
    if c.numel():
        block = 32 if INTERPRETED else 64
        grid = (triton.cdiv(M, block), triton.cdiv(N, block))
        naive_kernel[grid](
            a,
            b,
            c,
            M,
            N,
            K,
            *a.stride(),
            *b.stride(),
            *c.stride(),
            BLOCK_M=block,
            BLOCK_N=block,
            ACTIVATION=activation or "",
            num_warps=4,
        )
    return c


# --8<-- [end:naive]


# --8<-- [start:tutorial_stages]
TEXTBOOK_TILE = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1}
"""The tile of the tutorial's seed (64/64/32), without software pipelining."""


def _tutorial(a, b, activation, group_size_m):
    if activation == "gelu":
        raise ValueError("the tutorial kernel has no gelu epilogue; the later stages do")
    config = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32} if INTERPRETED else TEXTBOOK_TILE
    return tiled.matmul(a, b, activation, group_size_m, config=config)


def matmul_k_loop(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 2: tensor-core ``tl.dot`` over BLOCK_K steps, masked edges, row-major tile order."""
    return _tutorial(a, b, activation, group_size_m=1)


def matmul_grouped(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 3: the same kernel, tiles dealt out in groups of 8 tile rows."""
    return _tutorial(a, b, activation, group_size_m=8)


# --8<-- [end:tutorial_stages]


# --8<-- [start:autotuned]
def _configs(stages: tuple[int, ...]) -> list[triton.Config]:
    if INTERPRETED:  # one config: the autotuner launches it without timing anything
        return [
            triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_SIZE_M": 2}, num_warps=4, num_stages=1)
        ]
    shapes = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
        (128, 256, 64, 8),  # (1)!
        (128, 128, 64, 8),
        (64, 128, 64, 4),  # (2)!
        (64, 64, 64, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w in shapes
        for s in stages
    ]


def _fits(configs, named_args, **kwargs):
    """Drop configs whose pipelined A and B tiles overflow shared memory (≈ 227 KiB on an H100)."""
    size = named_args["a_ptr"].element_size()
    kept = [
        c
        for c in configs
        if c.num_stages * (c.kwargs["BLOCK_M"] + c.kwargs["BLOCK_N"]) * c.kwargs["BLOCK_K"] * size <= 200 * 1024
    ]
    return kept or configs[-1:]


autotuned_kernel = triton.autotune(  # (3)!
    configs=_configs(stages=(1,)),
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": _fits},
)(matmul_pointer_kernel)

pipelined_kernel = triton.autotune(
    configs=_configs(stages=(3, 4)),
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": _fits},  # (4)!
)(matmul_pointer_kernel)


def _autotuned(kernel, a, b, activation):
    M, N, K, c = _prepare(a, b, activation)
    if c.numel() == 0:
        return c
    if K == 0:
        return c.zero_()

    def grid(meta):  # one program per tile: not persistent yet
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    precision = "ieee" if (INTERPRETED or a.dtype == torch.float32) else None
    kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        *a.stride(),
        *b.stride(),
        *c.stride(),
        ACTIVATION=activation or "",
        INPUT_PRECISION=precision,
        UPCAST=INTERPRETED,
    )
    return c


def matmul_autotuned(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 4: the tile shape and warps the autotuner finds fastest, one pipeline stage."""
    return _autotuned(autotuned_kernel, a, b, activation)


def matmul_pipelined(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 5: the same search with 3 or 4 stages of loads in flight."""
    return _autotuned(pipelined_kernel, a, b, activation)


# --8<-- [end:autotuned]


# --8<-- [start:late_stages]
def matmul_persistent(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 6: persistent grid; TMA descriptors where available, the persistent pointer kernel elsewhere."""
    check_inputs(a, b, activation, "auto")
    tma = tma_available() and _tma_layout(a) is not None and _tma_layout(b) is not None
    return matmul(a, b, activation, path="tma" if tma else "pointer")


def matmul_split_k(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """Stage 7: split-K, whatever the shape (the final op uses it only for small M)."""
    return matmul(a, b, activation, path="split_k")


# --8<-- [end:late_stages]


STAGES = {
    "naive": matmul_naive,
    "k_loop": matmul_k_loop,
    "grouped": matmul_grouped,
    "autotuned": matmul_autotuned,
    "pipelined": matmul_pipelined,
    "persistent": matmul_persistent,
    "split_k": matmul_split_k,
}
"""Stage name → op, in the chapter's order (the bench's ``academy:<name>`` providers)."""
