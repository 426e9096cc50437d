"""Random paged KV caches for the tests, the benchmark and the page's examples.

A serving engine hands out pages from a free list as sequences grow, so after a while a sequence's
pages are anywhere in the cache and in no particular order. :func:`random_paged_cache` builds that
state directly: every sequence gets ``ceil(len / block_size)`` pages drawn from a random
permutation of the block ids, with a few blocks left free.
"""

from __future__ import annotations

import math

from academy import DEVICE
from academy.testing import random_tensor

import torch


def random_paged_cache(
    seq_lens: list[int],
    kv_heads: int,
    head_dim: int,
    block_size: int,
    dtype: torch.dtype = torch.float32,
    *,
    device: str = DEVICE,
    spare_blocks: int = 2,
    max_blocks: int | None = None,
    poison: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(k_cache, v_cache, block_table, seq_lens) holding ``len(seq_lens)`` sequences in shuffled pages.

    ``block_table`` has ``max_blocks`` columns (default: the longest sequence's page count); entries
    past a sequence's last page name a free block. With ``poison=True`` every cache row that belongs
    to no sequence (the free blocks, block 0 among them, and the rows past the end of each last page)
    is NaN, so a kernel that reads one unmasked fails its test.
    """
    pages = [math.ceil(n / block_size) for n in seq_lens]
    max_blocks = max(pages, default=0) if max_blocks is None else max_blocks
    if max_blocks < max(pages, default=0):
        raise ValueError(f"max_blocks={max_blocks} cannot hold the longest sequence ({max(pages)} pages)")
    if poison and spare_blocks < 1:
        raise ValueError("poison=True needs a spare block for the unused block-table entries")
    num_blocks = sum(pages) + spare_blocks
    order = torch.randperm(num_blocks)
    if poison:  # block 0 free, hence NaN: where a masked page-id load (other=0) would send an unmasked read
        zero = int((order == 0).nonzero())
        order[zero], order[-1] = order[-1].clone(), 0
    free = order[sum(pages) :]
    table = torch.empty(len(seq_lens), max_blocks, dtype=torch.int32)
    used = 0
    for b, n in enumerate(pages):
        table[b, :n] = order[used : used + n]
        table[b, n:] = free[torch.randint(len(free), (max_blocks - n,))] if len(free) else 0
        used += n
    shape = (num_blocks, block_size, kv_heads, head_dim)
    k_cache, v_cache = random_tensor(shape, dtype, device=device), random_tensor(shape, dtype, device=device)
    if poison:
        owned = torch.zeros(num_blocks, block_size, dtype=torch.bool)
        for b, n in enumerate(seq_lens):
            rows = torch.arange(n)
            owned[table[b, rows // block_size].long(), rows % block_size] = True
        for cache in (k_cache, v_cache):
            cache[~owned.to(device)] = math.nan
    lengths = torch.tensor(seq_lens, dtype=torch.int32)
    return k_cache, v_cache, table.to(device), lengths.to(device)
