"""Split-K for decode-sized calls: slices of K in separate programs, summed by a second, deterministic pass.

A call with few rows has few output tiles: 64 tiles of 128 outputs for an
8192-row weight, half a program per SM of an H100. Cutting K into slices
multiplies the programs, and with them the loads in flight, which is what a
memory-bound kernel needs. Each slice writes fp32 partial sums; a second
kernel adds them in a fixed order and rounds once, so the result does not
depend on which slice finishes first (atomics would: see the exercises).
"""

from __future__ import annotations

from academy.grid import sm_count

import torch
import triton
import triton.language as tl

MIN_STEPS_PER_SLICE = 4
"""A slice shorter than this spends more on its start and its partial sums than it saves."""


# --8<-- [start:pick_split]
def pick_split(cfg: dict, tiles: int, K: int) -> dict:
    """``SPLIT_K = 0`` in a config: the number of slices that brings the programs nearest to
    ``PROGRAMS_PER_SM`` per SM, at least one and each slice at least ``MIN_STEPS_PER_SLICE`` K steps."""
    if cfg["SPLIT_K"] == 0:
        wanted = int(cfg["PROGRAMS_PER_SM"] * sm_count() / tiles + 0.5)  # nearest, halves up
        cfg["SPLIT_K"] = max(1, min(wanted, K // (MIN_STEPS_PER_SLICE * cfg["BLOCK_K"])))
    return cfg


def k_slices(K: int, block_k: int, split: int) -> tuple[int, int]:
    """(K per slice, number of slices): slices are whole K steps, so only the last one is ragged
    (and there may be fewer than asked: 4 slices of K = 5 steps are 3 of 2 steps)."""
    k_per_split = triton.cdiv(triton.cdiv(K, split), block_k) * block_k
    return k_per_split, triton.cdiv(K, k_per_split)


def slice_outputs(out: torch.Tensor, split: int) -> torch.Tensor:
    """Where the slices write: ``out`` itself for one slice, else fp32 partials (split, M, N)."""
    if split == 1:
        return out
    return torch.empty((split, *out.shape), dtype=torch.float32, device=out.device)


# --8<-- [end:pick_split]


# --8<-- [start:sum_slices]
@triton.jit
def split_k_sum_kernel(partials_ptr, out_ptr, numel, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """The second pass of split-K: add the fp32 partial sums in a fixed order, round once."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    ptrs = partials_ptr + offsets
    for _ in tl.static_range(SPLIT_K):  # (1)!
        total += tl.load(ptrs, mask=mask, other=0.0)
        ptrs += numel  # a pointer step, not split * numel: that product overflows int32 first
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


def sum_slices(partials: torch.Tensor, out: torch.Tensor, block: int = 1024) -> None:
    """``out = partials.sum(0)`` in a fixed order; nothing to do when the slices wrote ``out`` directly."""
    if partials is out:
        return
    split, numel = partials.shape[0], out.numel()
    split_k_sum_kernel[(triton.cdiv(numel, block),)](partials, out, numel, SPLIT_K=split, BLOCK=block)


# --8<-- [end:sum_slices]
