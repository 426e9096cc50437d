"""The RoPE derivations on the page, in float64: each closed form equals the formula or autograd."""

import torch

from examples.rope.kernel import apply_rotary_pos_emb, rope_cos_sin, rotate_half

D, HALF = 16, 8


def _x(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def _rope(x, cos, sin):
    """Hugging Face's formula for one tensor of shape (..., S, D), cos and sin (S, D)."""
    return x * cos + rotate_half(x) * sin


def _angles(positions, head_dim=D, base=10000.0):
    """pos · θ_i, θ_i = base^(-2i/D), i < D/2: one angle per pair."""
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return positions.double()[:, None] * theta


def test_rotate_half_is_a_matrix_whose_transpose_is_minus_itself():
    R = rotate_half(torch.eye(D, dtype=torch.float64)).T  # column j: rotate_half of the j-th basis vector
    x = _x(D)
    torch.testing.assert_close(R @ x, rotate_half(x))
    I, Z = torch.eye(HALF, dtype=torch.float64), torch.zeros(HALF, HALF, dtype=torch.float64)
    torch.testing.assert_close(R, torch.cat((torch.cat((Z, -I), 1), torch.cat((I, Z), 1)), 0))  # [[0, −I], [I, 0]]
    torch.testing.assert_close(R.T, -R)
    torch.testing.assert_close(R.T @ x, torch.cat((x[HALF:], -x[:HALF])))  # rotate_halfᵀ(x) = cat(x2, −x1)
    torch.testing.assert_close(R @ R, -torch.eye(D, dtype=torch.float64))


def test_forward_rotates_each_pair_by_its_angle():
    S = 11
    positions = torch.arange(S) * 37
    cos, sin = rope_cos_sin(positions[None], D, dtype=torch.float64)
    x = _x(S, D)
    y = _rope(x, cos[0], sin[0])
    phi = _angles(positions)  # (S, D/2)
    x1, x2 = x[:, :HALF], x[:, HALF:]
    torch.testing.assert_close(y[:, :HALF], x1 * phi.cos() - x2 * phi.sin())  # [[cos, −sin], [sin, cos]]·(x1, x2)
    torch.testing.assert_close(y[:, HALF:], x2 * phi.cos() + x1 * phi.sin())
    z = torch.complex(x1, x2) * torch.polar(torch.ones_like(phi), phi)  # (x_i + i·x_{i+D/2})·e^{i·pos·θ_i}
    torch.testing.assert_close(torch.cat((z.real, z.imag), -1), y)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps the length


def _rotate_half_t(t):
    """The page's rotate_halfᵀ: (t1, t2) -> (t2, −t1)."""
    return torch.cat((t[..., HALF:], -t[..., :HALF]), -1)


def test_backward_closed_form_equals_autograd():
    """grad = dy ⊙ cos + rotate_halfᵀ(dy ⊙ sin), for any cos and sin (halves not copies of each other)."""
    S = 7
    x = _x(S, D).requires_grad_()
    cos, sin, dy = _x(S, D), _x(S, D), _x(S, D)
    _rope(x, cos, sin).backward(dy)
    torch.testing.assert_close(dy * cos + _rotate_half_t(dy * sin), x.grad)
    # in halves, as the kernel computes it with BACKWARD: sin1 := s2, sin2 := −s1
    c1, c2, s1, s2 = cos[:, :HALF], cos[:, HALF:], sin[:, :HALF], sin[:, HALF:]
    d1, d2 = dy[:, :HALF], dy[:, HALF:]
    torch.testing.assert_close(torch.cat((d1 * c1 + d2 * s2, d2 * c2 - d1 * s1), -1), x.grad)


def test_kernel_sign_rule_is_the_formula():
    """Forward, in halves: y1 = x1·c1 + x2·(−s1), y2 = x2·c2 + x1·s2 (the kernel's sin1 := −s1, sin2 := s2)."""
    x, cos, sin = _x(5, D), _x(5, D), _x(5, D)
    x1, x2 = x[:, :HALF], x[:, HALF:]
    c1, c2, s1, s2 = cos[:, :HALF], cos[:, HALF:], sin[:, :HALF], sin[:, HALF:]
    torch.testing.assert_close(torch.cat((x1 * c1 + x2 * -s1, x2 * c2 + x1 * s2), -1), _rope(x, cos, sin))


def test_backward_is_the_rotation_by_minus_theta():
    """With cos, sin from angles (each half a copy), the gradient is RoPE with −sin: the inverse rotation."""
    S = 9
    cos, sin = rope_cos_sin(torch.arange(S)[None] + 100, D, dtype=torch.float64)
    cos, sin = cos[0], sin[0]
    x, dy = _x(S, D).requires_grad_(), _x(S, D)
    y = _rope(x, cos, sin)
    y.backward(dy)
    torch.testing.assert_close(x.grad, _rope(dy, cos, -sin))
    torch.testing.assert_close(_rope(y.detach(), cos, -sin), x.detach())  # Rᵀ = R⁻¹: the inverse


def test_scores_depend_only_on_the_relative_position():
    q, k = _x(D), _x(D)
    positions = torch.tensor([3, 10, 1003, 1010, 50000, 50007])
    cos, sin = rope_cos_sin(positions[None], D, dtype=torch.float64)
    rq, rk = _rope(q, cos[0], sin[0]), _rope(k, cos[0], sin[0])
    scores = rq @ rk.T  # scores[m, n] = <rope(q, pos_m), rope(k, pos_n)>
    for m, n in ((1, 0), (3, 2), (5, 4)):  # the query 7 positions after the key, anywhere in the sequence
        torch.testing.assert_close(scores[m, n], scores[1, 0])
    assert not torch.isclose(scores[1, 0], scores[0, 1])  # m − n = +7 and −7 differ


def _interleaved(x, positions):
    """GPT-J / Meta's original: pairs (x_2i, x_2i+1) rotated by pos·θ_i, as complex numbers."""
    phi = _angles(positions, x.shape[-1])
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(phi), phi)).flatten(-2)


def test_interleaved_is_the_half_split_of_permuted_columns():
    """P x = cat(x[0::2], x[1::2]) takes interleaved pairs to half-split ones: rope_int(x) = P⁻¹ rope_half(P x)."""
    S = 6
    positions = torch.arange(S) * 5
    cos, sin = rope_cos_sin(positions[None], D, dtype=torch.float64)
    x = _x(S, D)
    perm = torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))
    half = _rope(x[:, perm], cos[0], sin[0])
    torch.testing.assert_close(half[:, torch.argsort(perm)], _interleaved(x, positions))
    assert not torch.allclose(_rope(x, cos[0], sin[0]), _interleaved(x, positions))  # same x, other convention


def test_hf_weight_permutation_keeps_the_scores():
    """transformers' Llama conversion permutes the rows of Meta's W_q and W_k head by head; with the
    half-split RoPE the permuted weights give the scores Meta's weights give with the interleaved one."""
    H, S, hidden = 2, 5, 12
    w_q, w_k, x = _x(H * D, hidden), _x(H * D, hidden), _x(S, hidden)

    def permute(w):  # convert_llama_weights_to_hf.py's permute
        return w.view(H, D // 2, 2, hidden).transpose(1, 2).reshape(H * D, hidden)

    positions = torch.arange(S) + 17
    cos, sin = rope_cos_sin(positions[None], D, dtype=torch.float64)

    def heads(w):
        return (x @ w.T).view(S, H, D).transpose(0, 1)  # (H, S, D)

    meta = _interleaved(heads(w_q), positions) @ _interleaved(heads(w_k), positions).transpose(-1, -2)
    q_hf, k_hf = apply_rotary_pos_emb(heads(permute(w_q))[None], heads(permute(w_k))[None], cos, sin)
    torch.testing.assert_close(q_hf @ k_hf.transpose(-1, -2), meta[None])
    q_wrong, k_wrong = apply_rotary_pos_emb(heads(w_q)[None], heads(w_k)[None], cos, sin)
    assert not torch.allclose(q_wrong @ k_wrong.transpose(-1, -2), meta[None])  # unpermuted: other scores
