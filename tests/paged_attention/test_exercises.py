"""The paged-attention chapter's exercise answers against the float64 reference."""

from academy.testing import assert_close, random_tensor

import pytest
import torch

from examples.paged_attention.cache import random_paged_cache
from examples.paged_attention.exercises import append_token, fork_sequence
from examples.paged_attention.kernel import paged_decode_attention, reference


def expected(q, k_cache, v_cache, table, seq_lens):
    return reference(q.double(), k_cache.double(), v_cache.double(), table, seq_lens)


@pytest.mark.parametrize("page", [16, 32])
def test_append_token_then_attend_over_the_longer_sequences(page):
    """Lengths 5, page − 1 and page: the last one's new token opens a new page (the spare block)."""
    lengths = [5, page - 1, page]
    k_cache, v_cache, table, seq_lens = random_paged_cache(lengths, 2, 64, page, spare_blocks=3, max_blocks=2)
    used = {table[b, 0].item() for b in range(3)} | {table[1, 1].item()}
    table[2, 1] = next(b for b in range(k_cache.shape[0]) if b not in used)  # sequence 2's new page
    before_k = k_cache.clone()
    k_new, v_new = random_tensor((3, 2, 64)), random_tensor((3, 2, 64))
    grown = append_token(k_cache, v_cache, table, seq_lens, k_new, v_new)
    assert grown.tolist() == [6, page, page + 1] and grown.dtype == torch.int32
    for b, n in enumerate(lengths):  # the new token sits where the block table says position n lives
        torch.testing.assert_close(k_cache[table[b, n // page].long(), n % page], k_new[b])
        torch.testing.assert_close(v_cache[table[b, n // page].long(), n % page], v_new[b])
    changed = (k_cache != before_k).flatten(2).any(-1).sum().item()
    assert changed == 3, "exactly one row per sequence is written"
    q = random_tensor((3, 4, 64))
    assert_close(paged_decode_attention(q, k_cache, v_cache, table, grown), expected(q, k_cache, v_cache, table, grown))


@pytest.mark.parametrize("seq_len", [40, 48])
def test_forked_sequence_shares_full_pages_and_diverges_after(seq_len):
    """A fork sees the same keys as its parent; after each appends a different token, each sees its own."""
    page = 16
    k_cache, v_cache, table, seq_lens = random_paged_cache([seq_len], 2, 64, page, spare_blocks=3, max_blocks=4)
    used = set(table[0, : -(-seq_len // page)].tolist())
    free = [b for b in range(k_cache.shape[0]) if b not in used]
    child = fork_sequence(k_cache, v_cache, table[0], seq_len, free[0])
    shared = seq_len // page
    if seq_len % page:
        assert torch.equal(child[:shared], table[0, :shared]) and child[shared] == free[0]
    else:
        assert torch.equal(child, table[0])
    tables = torch.stack([table[0], child])
    if seq_len % page == 0:  # the next token opens a page: give each sequence its own
        tables[0, shared], tables[1, shared] = free[1], free[2]
    lens = torch.tensor([seq_len, seq_len], dtype=torch.int32, device=seq_lens.device)
    q = random_tensor((1, 4, 64)).expand(2, 4, 64)
    out = paged_decode_attention(q, k_cache, v_cache, tables, lens)
    torch.testing.assert_close(out[0], out[1])
    grown = append_token(k_cache, v_cache, tables, lens, random_tensor((2, 2, 64)), random_tensor((2, 2, 64)))
    out = paged_decode_attention(q, k_cache, v_cache, tables, grown)
    assert_close(out, expected(q, k_cache, v_cache, tables, grown))
    assert not torch.allclose(out[0], out[1])
