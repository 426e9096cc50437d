"""Answers to the paged-attention chapter's exercises.

* ``append_token``: the other half of a decode step, writing each sequence's new K and V into its
  pages, on the device, without a host synchronisation.
* ``fork_sequence``: parallel sampling or beam search: a new sequence that shares its parent's full
  pages and gets its own copy of the partly filled last one.

``tests/paged_attention/test_exercises.py`` checks them against the float64 reference.
"""

from __future__ import annotations

import torch


# --8<-- [start:append_token]
def append_token(k_cache, v_cache, block_table, seq_lens, k_new, v_new) -> torch.Tensor:
    """Write k_new, v_new (B, H_kv, D) at position seq_lens[b] of each sequence; return seq_lens + 1.

    The caller has already put a page in the table for that position (a new one when the length is a
    multiple of the block size). Everything stays on the device: no ``.item()``, no ``.tolist()``.
    """
    page_size = k_cache.shape[1]
    rows = torch.arange(block_table.shape[0], device=block_table.device)
    pos = seq_lens.long()
    page = block_table[rows, pos // page_size].long()
    k_cache[page, pos % page_size] = k_new
    v_cache[page, pos % page_size] = v_new
    return seq_lens + 1


# --8<-- [end:append_token]


# --8<-- [start:fork_sequence]
def fork_sequence(k_cache, v_cache, table_row, seq_len: int, free_block: int) -> torch.Tensor:
    """A block-table row for a copy of a sequence of ``seq_len`` tokens (``table_row`` is its parent's):
    the full pages are shared, the partly filled last page is copied to ``free_block``, since both
    sequences will write their next tokens into it. Page allocation is host-side bookkeeping in a
    serving engine, so ``seq_len`` and ``free_block`` are Python ints here."""
    page_size = k_cache.shape[1]
    child = table_row.clone()
    if seq_len % page_size:  # a full last page is never written again: share it too
        last = seq_len // page_size
        parent_page = int(table_row[last])
        k_cache[free_block] = k_cache[parent_page]
        v_cache[free_block] = v_cache[parent_page]
        child[last] = free_block
    return child


# --8<-- [end:fork_sequence]
