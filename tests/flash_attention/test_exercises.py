"""The attention chapter's exercise answers against float64 PyTorch."""

import math

from academy.testing import assert_close, poison_allocations, random_tensor

import pytest
import torch

from examples.flash_attention import kernel as fa
from examples.flash_attention.exercises import attention_with_lse, merge_partials, unsafe_mask_output
from examples.flash_attention.kernel import causal_mask, reference


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, fa)  # the output and the LSE the answers read come from the kernel's launcher


def qkv(h, s_q, s_k, dtype=torch.float16):
    return (random_tensor((1, h, n, 64), dtype) for n in (s_q, s_k, s_k))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_lse(causal):
    q, k, v = qkv(2, 30, 20)
    o, lse = attention_with_lse(q, k, v, causal)
    scores = q.double() @ k.double().transpose(-1, -2) / 8
    if causal:
        scores = scores.masked_fill(~causal_mask(30, 20, q.device), -math.inf)
    expected = torch.logsumexp(scores, dim=-1)
    assert torch.equal(torch.isinf(lse), torch.isinf(expected))  # the first 10 causal rows see no key
    finite = torch.isfinite(expected)
    torch.testing.assert_close(lse[finite].double(), expected[finite], atol=2e-3, rtol=0)
    assert_close(o, reference(q.double(), k.double(), v.double(), causal), dtype=torch.float16)


def test_merge_partials_is_attention_over_all_keys():
    q, k, v = qkv(2, 25, 50)
    o1, lse1 = attention_with_lse(q, k[:, :, :19], v[:, :, :19])
    o2, lse2 = attention_with_lse(q, k[:, :, 19:], v[:, :, 19:])
    o, lse = merge_partials(o1, lse1, o2, lse2)
    assert_close(o, reference(q.double(), k.double(), v.double()), dtype=torch.float16)
    o_all, lse_all = attention_with_lse(q, k, v)
    torch.testing.assert_close(lse, lse_all, atol=2e-3, rtol=0)


def test_merge_partials_with_an_empty_half_stays_finite():
    o = random_tensor((1, 1, 4, 64), torch.float16)
    empty = torch.full((1, 1, 4), -math.inf, device=o.device)  # the lse tensors live with o (GPU or CPU)
    merged, lse = merge_partials(o, torch.zeros_like(empty), torch.zeros_like(o), empty)
    assert_close(merged, o.double(), dtype=torch.float16)
    both_empty, _ = merge_partials(o, empty, o, empty)
    assert torch.equal(both_empty, torch.zeros_like(o))


def test_the_tutorial_mask_constant_leaks_on_rows_that_see_no_key():
    s, v = torch.randn(4, 8, dtype=torch.float64), torch.randn(8, 3, dtype=torch.float64)
    keep = torch.ones(4, 8, dtype=torch.bool)
    keep[0] = False  # row 0 sees no key
    keep[1, 5:] = False
    with_constant, with_guard = unsafe_mask_output(s, v, keep)
    torch.testing.assert_close(with_constant[0], v.mean(dim=0))  # uniform over keys it must not see
    assert torch.equal(with_guard[0], torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(with_constant[1:], with_guard[1:])
    torch.testing.assert_close(with_guard[1], torch.softmax(s[1, :5], 0) @ v[:5])


def _grad(t):
    return t.requires_grad_()


@pytest.mark.parametrize(
    "answer, make",
    [
        (
            attention_with_lse,
            lambda: (
                _grad(random_tensor((1, 1, 8, 64), torch.float16)),
                random_tensor((1, 1, 8, 64), torch.float16),
                random_tensor((1, 1, 8, 64), torch.float16),
            ),
        ),
    ],
    ids=["attention_with_lse"],
)
def test_forward_only_answers_refuse_inputs_that_require_grad(answer, make):
    """These answers have no backward: a result without gradients would cut the graph silently."""
    with pytest.raises(ValueError, match=f"{answer.__name__} is forward only"):
        answer(*make())
