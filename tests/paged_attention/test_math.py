"""The chapter's derivations in float64: the split softmax states and their log-sum-exp merge equal the
one-pass softmax; the merge is order-free; empty splits and empty sequences stay finite; the split
bounds partition the keys; the bytes of the roofline."""

import math

import pytest
import torch

from examples.paged_attention.kernel import decode_bytes, split_ranges

LOG2E = 1 / math.log(2)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def split_state(s, v):
    """What one split's program writes, in the kernel's log2 units: running max m (of s·log2 e), sum
    l = Σ 2^(s·log2 e − m) and the unnormalised output Σ 2^(s·log2 e − m) v. No key: (−inf, 0, 0)."""
    if s.numel() == 0:
        return (
            torch.tensor(-math.inf, dtype=s.dtype),
            torch.tensor(0.0, dtype=s.dtype),
            torch.zeros(v.shape[1], dtype=s.dtype),
        )
    t = s * LOG2E
    m = t.max()
    p = torch.exp2(t - m)
    return m, p.sum(), p @ v


def combine(states):
    """The combine pass: M = max m_s (0 if every split is empty), w_s = 2^(m_s − M),
    o = Σ w_s acc_s / Σ w_s l_s (0 if the sum is 0)."""
    m = torch.stack([st[0] for st in states])
    l = torch.stack([st[1] for st in states])
    acc = torch.stack([st[2] for st in states])
    big = m.max()
    big = torch.zeros_like(big) if big == -math.inf else big
    w = torch.exp2(m - big)
    total = (w * l).sum()
    return (w[:, None] * acc).sum(0) / (total if total != 0 else 1.0), big + torch.log2(total)


@pytest.mark.parametrize("cuts", [[], [7], [1, 2, 3], [0, 0, 10, 10, 37], [20, 49]])
def test_merged_splits_equal_the_one_pass_softmax(cuts):
    """Any cut of the keys, empty pieces included: merged states give softmax(s)·v and the log-sum-exp."""
    s, v = rand(50) * 4, rand(50, 6)
    bounds = [0, *cuts, 50]
    states = [split_state(s[a:b], v[a:b]) for a, b in zip(bounds, bounds[1:])]
    out, lse2 = combine(states)
    torch.testing.assert_close(out, torch.softmax(s, 0) @ v, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse2 * math.log(2), torch.logsumexp(s, 0), rtol=1e-12, atol=1e-12)


def test_merge_is_the_same_in_any_order_and_in_natural_units():
    """The merge is a sum of positive weights: split order does not matter, and e^(x) with natural-log
    maxima gives the same weights as 2^(x·log2 e) (the kernels' exp2 is a change of base, not an approximation)."""
    s, v = rand(40) * 3, rand(40, 4)
    states = [split_state(s[a : a + 8], v[a : a + 8]) for a in range(0, 40, 8)]
    forward, _ = combine(states)
    backward, _ = combine(states[::-1])
    torch.testing.assert_close(forward, backward, rtol=1e-12, atol=1e-14)
    m_nat = torch.stack([s[a : a + 8].max() for a in range(0, 40, 8)])
    w = torch.exp(m_nat - m_nat.max())
    l = torch.stack([torch.exp(s[a : a + 8] - m).sum() for a, m in zip(range(0, 40, 8), m_nat)])
    acc = torch.stack([torch.exp(s[a : a + 8] - m) @ v[a : a + 8] for a, m in zip(range(0, 40, 8), m_nat)])
    torch.testing.assert_close((w[:, None] * acc).sum(0) / (w * l).sum(), forward, rtol=1e-12, atol=1e-14)


def test_rescaling_by_the_global_max_never_overflows():
    """Scores of ±1000 in different splits: each weight 2^(m_s − M) ≤ 1, so nothing overflows; without
    the shared max, e^1000 would be inf."""
    s = torch.cat([rand(10) - 1000, rand(10) + 1000])
    v = rand(20, 3)
    out, _ = combine([split_state(s[:10], v[:10]), split_state(s[10:], v[10:])])
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.softmax(s, 0) @ v, rtol=1e-12, atol=1e-12)
    assert torch.exp(torch.tensor(1000.0, dtype=torch.float64)).isinf()


def test_all_splits_empty_gives_zero_not_nan():
    """seq_len = 0: every split is empty, M is −inf; the guards (M → 0, divide by 1) give 0."""
    empty = split_state(torch.empty(0, dtype=torch.float64), torch.empty(0, 5, dtype=torch.float64))
    out, _ = combine([empty, empty, empty])
    assert torch.equal(out, torch.zeros(5, dtype=torch.float64))
    naive_w = torch.exp2(empty[0] - empty[0])  # −inf − (−inf): what the guard avoids
    assert math.isnan(naive_w)


def test_online_softmax_inside_a_split_equals_its_state():
    """The kernel's loop inside one split (running max, rescale α = 2^(m_old − m_new)) ends in the same
    (m, l, acc) as the split's state computed at once."""
    s, v = rand(45), rand(45, 4)
    m, l, acc = torch.tensor(-math.inf, dtype=torch.float64), 0.0, torch.zeros(4, dtype=torch.float64)
    for a in range(0, 45, 16):
        t = s[a : a + 16] * LOG2E
        m_new = torch.maximum(m, t.max())
        p = torch.exp2(t - m_new)
        alpha = torch.exp2(m - m_new)
        l = l * alpha + p.sum()
        acc = acc * alpha + p @ v[a : a + 16]
        m = m_new
    want = split_state(s, v)
    torch.testing.assert_close(m, want[0])
    torch.testing.assert_close(l, want[1])
    torch.testing.assert_close(acc, want[2])


@pytest.mark.parametrize("seq_len", [0, 1, 255, 256, 257, 4096, 131072])
@pytest.mark.parametrize("splits", [1, 2, 7, 32])
def test_split_ranges_cover_each_key_once_in_at_most_splits_pieces(seq_len, splits):
    ranges = split_ranges(seq_len, splits, 256, 64)
    assert len(ranges) <= splits
    assert sum(hi - lo for lo, hi in ranges) == seq_len
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    if ranges:
        assert ranges[0][0] == 0 and ranges[-1][1] == seq_len


def test_roofline_bytes():
    """Llama-3.1-8B (H_kv = 8, D = 128), bf16, one 32k sequence: 32768 · 8 · 128 · 2 · 2 bytes of K and V,
    a GiB for eight such sequences; q and the output add 2 · H · D · 2 bytes per sequence."""
    assert decode_bytes([32768], 32, 8, 128, 2) == 32768 * 8 * 128 * 2 * 2 + 2 * 32 * 128 * 2
    assert decode_bytes([32768] * 8, 32, 8, 128, 2) - 8 * 2 * 32 * 128 * 2 == 2**30
