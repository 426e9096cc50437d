"""The RoPE exercise answers against PyTorch."""

from academy import DEVICE
from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.rope import kernel
from examples.rope.exercises import rope_interleaved_reference, rope_partial, to_half_split
from examples.rope.kernel import apply_rotary_pos_emb, rope, rope_cos_sin


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, kernel)


def test_interleaved_reference_rotates_adjacent_pairs():
    x = random_tensor((5, 8)).double()
    positions = torch.arange(5, device=DEVICE) + 3
    y = rope_interleaved_reference(x, positions)
    angle = positions.double() * 1.0  # pair 0: θ_0 = 1
    torch.testing.assert_close(y[:, 0], x[:, 0] * angle.cos() - x[:, 1] * angle.sin())
    torch.testing.assert_close(y[:, 1], x[:, 1] * angle.cos() + x[:, 0] * angle.sin())


def test_permuted_weights_give_the_interleaved_scores_with_our_kernel():
    """A projection trained with interleaved RoPE, converted by to_half_split, gives the same attention
    scores through ``rope`` (half-split); unconverted, it does not."""
    B, S, hidden, H_q, H_kv, D = 1, 9, 24, 4, 2, 16
    x = random_tensor((B, S, hidden))
    w_q, w_k = random_tensor((H_q * D, hidden)), random_tensor((H_kv * D, hidden))
    positions = torch.arange(S, device=DEVICE)
    cos, sin = rope_cos_sin(positions[None], D)

    def heads(w, n):
        return (x @ w.T).view(B, S, n, D).transpose(1, 2)  # (B, n, S, D), as transformers views a projection

    q_meta = rope_interleaved_reference(heads(w_q, H_q).double(), positions)
    k_meta = rope_interleaved_reference(heads(w_k, H_kv).double(), positions)
    expected = q_meta @ k_meta.repeat_interleave(H_q // H_kv, dim=1).transpose(-1, -2)

    q, k = rope(heads(to_half_split(w_q, H_q), H_q), heads(to_half_split(w_k, H_kv), H_kv), cos, sin)
    assert_close(q @ k.repeat_interleave(H_q // H_kv, dim=1).transpose(-1, -2), expected, tol=1e-5)
    q, k = rope(heads(w_q, H_q), heads(w_k, H_kv), cos, sin)
    assert not torch.allclose(q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-1, -2), expected)


def test_partial_rotary_forward_and_backward():
    """As GPT-NeoX applies it: rotate q[..., :r], pass q[..., r:] through."""
    B, H_q, H_kv, S, D, r = 2, 3, 1, 7, 32, 8
    q = random_tensor((B, H_q, S, D), requires_grad=True)
    k = random_tensor((B, H_kv, S, D), requires_grad=True)
    cos, sin = rope_cos_sin(torch.arange(S, device=DEVICE)[None], r)
    q_embed, k_embed = rope_partial(q, k, cos, sin)
    dq_embed, dk_embed = random_tensor(q_embed.shape), random_tensor(k_embed.shape)
    torch.autograd.backward((q_embed, k_embed), (dq_embed, dk_embed))

    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_rot, k_rot = apply_rotary_pos_emb(q64[..., :r], k64[..., :r], cos.double(), sin.double())
    ref_q, ref_k = torch.cat((q_rot, q64[..., r:]), -1), torch.cat((k_rot, k64[..., r:]), -1)
    torch.autograd.backward((ref_q, ref_k), (dq_embed.double(), dk_embed.double()))
    for got, exp in ((q_embed, ref_q), (k_embed, ref_k), (q.grad, q64.grad), (k.grad, k64.grad)):
        assert_close(got, exp)
