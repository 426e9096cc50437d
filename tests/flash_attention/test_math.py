"""The attention chapter's derivations in float64: the online softmax, exp2, the saved log-sum-exp,
the backward formulas against autograd, the causal loop bounds and the FLOP count."""

import math

import pytest
import torch

from examples.flash_attention.kernel import attention_flops, causal_mask


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def online_softmax_attention(s, v, block):
    """The forward recurrence of the page, one row block at a time: running max m, running sum l,
    rescale α = exp(m_old − m_new), normalisation deferred to the end."""
    m = torch.full((s.shape[0],), -math.inf, dtype=s.dtype)
    l = torch.zeros(s.shape[0], dtype=s.dtype)
    acc = torch.zeros(s.shape[0], v.shape[1], dtype=s.dtype)
    for j in range(0, s.shape[1], block):
        s_j = s[:, j : j + block]
        m_new = torch.maximum(m, s_j.max(dim=1).values)
        p = torch.exp(s_j - m_new[:, None])
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(dim=1)
        acc = alpha[:, None] * acc + p @ v[j : j + block]
        m = m_new
    return acc / l[:, None], m + torch.log(l)


@pytest.mark.parametrize("block", [1, 7, 16, 100])
def test_online_softmax_equals_softmax(block):
    s, v = rand(9, 50) * 4, rand(50, 5)
    out, lse = online_softmax_attention(s, v, block)
    torch.testing.assert_close(out, torch.softmax(s, dim=1) @ v)
    torch.testing.assert_close(lse, torch.logsumexp(s, dim=1))


def guarded_online_softmax(s, v, block):
    """The kernel's masked-loop form: masked scores are −inf, and a running max that is still −inf
    is replaced by 0 before subtracting (annotation 5), so an all-masked block gives p = 0 and α = 0,
    not NaN; the final division is by 1 where l = 0 (a row that saw no key returns 0)."""
    m = torch.full((s.shape[0],), -math.inf, dtype=s.dtype)
    l = torch.zeros(s.shape[0], dtype=s.dtype)
    acc = torch.zeros(s.shape[0], v.shape[1], dtype=s.dtype)
    for j in range(0, s.shape[1], block):
        s_j = s[:, j : j + block]
        m_new = torch.maximum(m, s_j.max(dim=1).values)
        m_sub = torch.where(m_new == -math.inf, 0.0, m_new)
        p = torch.exp(s_j - m_sub[:, None])
        alpha = torch.exp(m - m_sub)
        l = alpha * l + p.sum(dim=1)
        acc = alpha[:, None] * acc + p @ v[j : j + block]
        m = m_new
    return acc / torch.where(l == 0, 1.0, l)[:, None], l


@pytest.mark.parametrize("block", [1, 5, 16])
def test_guarded_recurrence_survives_masked_blocks_and_empty_rows(block):
    """Rows whose first blocks are fully masked (−inf − −inf would be NaN without the guard),
    and a row that sees no key at all: 0, with l = 0 marking it."""
    s_q, s_k = 6, 23
    s, v = rand(s_q, s_k) * 4, rand(s_k, 3)
    keep = torch.zeros(s_q, s_k, dtype=torch.bool)
    keep[0, 15:] = True  # the first 15 keys (several whole blocks) masked
    keep[1, :] = True
    keep[2, ::3] = True
    keep[3, 22] = True  # only the last key
    keep[4, :1] = True
    # row 5 sees nothing
    masked = s.masked_fill(~keep, -math.inf)
    out, l = guarded_online_softmax(masked, v, block)
    assert torch.isfinite(out).all()
    expected = torch.softmax(masked[:5], dim=1) @ v
    torch.testing.assert_close(out[:5], expected)
    assert l[5] == 0 and torch.equal(out[5], torch.zeros(3, dtype=torch.float64))
    assert (l[:5] >= 1).all(), "l includes the max term 1 for every row that sees a key"


def test_exp2_with_the_log2e_factor_is_exp():
    """exp(x·scale) = 2^(x·scale·log2 e): folding log2 e into the scale costs nothing."""
    x, scale = rand(1000) * 10, 0.125
    torch.testing.assert_close(torch.exp2(x * (scale / math.log(2))), torch.exp(x * scale))


def test_saved_lse_rebuilds_p_without_a_row_sum():
    s = rand(6, 40) * 3
    lse = torch.logsumexp(s, dim=1)
    torch.testing.assert_close(torch.exp(s - lse[:, None]), torch.softmax(s, dim=1))
    lse2 = lse / math.log(2)  # the kernel stores it in log2 units, next to exp2
    torch.testing.assert_close(torch.exp2(s / math.log(2) - lse2[:, None]), torch.softmax(s, dim=1))


@pytest.mark.parametrize("causal", [False, True])
def test_backward_formulas_equal_autograd(causal):
    S_q, S_k, D, scale = 11, 17, 8, 0.3
    q, k, v = (rand(n, D).requires_grad_() for n in (S_q, S_k, S_k))
    s = q @ k.T * scale
    if causal:
        s = s.masked_fill(~causal_mask(S_q, S_k), -math.inf)
    p = torch.softmax(s, dim=1)
    o = p @ v
    do = rand(S_q, D)
    o.backward(do)
    p, o = p.detach(), o.detach()
    dv = p.T @ do
    dp = do @ v.detach().T
    delta = (do * o).sum(dim=1)
    torch.testing.assert_close(delta, (p * dp).sum(dim=1))  # rowsum(dO∘O) = rowsum(P∘dP)
    ds = p * (dp - delta[:, None])
    dq = ds @ k.detach() * scale
    dk = ds.T @ q.detach() * scale
    torch.testing.assert_close(dv, v.grad)
    torch.testing.assert_close(dq, q.grad)
    torch.testing.assert_close(dk, k.grad)


CAUSAL_SHAPES = pytest.mark.parametrize("s_q, s_k", [(64, 64), (40, 100), (100, 40), (37, 53), (130, 130)])
BLOCKS = pytest.mark.parametrize("block_m, block_n", [(16, 16), (32, 16), (16, 32)])


def forward_ranges(m0, block_m, block_n, s_q, s_k, causal):
    """The forward kernel's loop bounds: unmasked keys [0, lo), masked [lo, hi), skipped [hi, S_k)."""
    if not causal:
        return s_k // block_n * block_n, s_k
    shift = s_k - s_q
    lo = max(m0 + shift + 1, 0) // block_n * block_n
    hi = min(max(m0 + block_m + shift, 0), s_k)
    return lo, hi


@CAUSAL_SHAPES
@BLOCKS
def test_causal_loop_bounds_visit_every_visible_key_and_mask_only_where_needed(s_q, s_k, block_m, block_n):
    mask = causal_mask(s_q, s_k)
    for m0 in range(0, s_q, block_m):
        rows = mask[m0 : m0 + block_m]
        lo, hi = forward_ranges(m0, block_m, block_n, s_q, s_k, True)
        assert lo % block_n == 0 and lo <= hi <= s_k
        assert rows[:, :lo].all(), "the unmasked loop must see only keys every row sees"
        assert not rows[:, hi:].any(), "skipped blocks must be invisible to every row"
        assert hi - lo <= block_m + block_n - 2, "the masked band is one diagonal, not the whole row"


def dkdv_ranges(n0, block_m, block_n, s_q, s_k):
    """The causal dK/dV kernel's bounds for the key block at n0: query rows [0, lo) skipped,
    [lo, mid) masked, [mid, ...) unmasked (mirrors attn_bwd_dkdv_kernel)."""
    shift = s_k - s_q
    lo = max(n0 - shift, 0) // block_m * block_m
    mid = min(-(-max(n0 + block_n - 1 - shift, 0) // block_m) * block_m, -(-s_q // block_m) * block_m)
    return lo, mid


@CAUSAL_SHAPES
@BLOCKS
def test_backward_causal_bounds_skip_only_invisible_rows_and_mask_only_the_band(s_q, s_k, block_m, block_n):
    mask = causal_mask(s_q, s_k)
    for n0 in range(0, s_k, block_n):
        cols = mask[:, n0 : n0 + block_n]  # which query rows see which keys of this block
        lo, mid = dkdv_ranges(n0, block_m, block_n, s_q, s_k)
        assert lo % block_m == 0 and mid % block_m == 0 and lo <= mid
        assert not cols[:lo].any(), "skipped query rows must see no key of the block"
        assert cols[mid:].all(), "the unmasked loop must hold only rows that see every key of the block"
        assert mid - lo <= 2 * block_m + block_n - 3, "the masked rows are one diagonal band"
    # The dQ kernel walks keys with the forward's bounds: the forward test above covers it.


def test_flop_count():
    B, H, S_q, S_k, D = 2, 3, 5, 7, 4
    multiply_adds = B * H * (S_q * S_k * D + S_q * S_k * D)  # QKᵀ, then P·V
    assert attention_flops(B, H, S_q, S_k, D) == 2 * multiply_adds
    assert attention_flops(B, H, S_q, S_k, D, mode="bwd") == 5 / 2 * 2 * multiply_adds  # dV, dP, dQ, dK, + QKᵀ again
    n = 64
    visible = causal_mask(n, n).sum().item()
    assert visible / (n * n) == pytest.approx(0.5, abs=1 / n)  # why causal counts half
