"""The bench adapters: the runner's own correctness check sees (q_embed, k_embed) as one output."""

from academy import DEVICE
from academy.bench import runner
from academy.bench.spec import Case
from academy.testing import random_tensor

import pytest
import torch

from examples.rope import bench
from examples.rope.kernel import apply_rotary_pos_emb, rope, rope_cos_sin


def _case(mode, **params):
    shape = {"B": 2, "S": 5, "H_q": 4, "H_kv": 2, "D": 16} | params
    return Case("s", "S", shape, torch.float32, mode)


def _inputs(case):
    inputs = bench.make_inputs(case, DEVICE)
    if case.mode == "fwd+bwd":  # as the runner does: every floating-point input
        inputs = tuple(t.requires_grad_() if t.is_floating_point() else t for t in inputs)
    return inputs


def test_inputs_are_a_projection_view_and_real_angles():
    q, k, bits = bench.make_inputs(_case("fwd"), DEVICE)
    assert q.shape == (2, 4, 5, 16) and q.transpose(1, 2).is_contiguous() and k.shape == (2, 2, 5, 16)
    assert not bits.is_floating_point()
    cos, sin = bits.view(torch.float32)
    expected = rope_cos_sin(torch.arange(5, device=DEVICE).expand(2, 5), 16, bench.ROPE_BASE)
    assert torch.equal(cos, expected[0]) and torch.equal(sin, expected[1])


@pytest.mark.parametrize("mode", ["fwd", "fwd+bwd"])
def test_runner_checks_our_op_through_the_pair(mode):
    case = _case(mode)
    inputs = _inputs(case)
    grad = random_tensor(bench.SPEC.reference(*inputs).shape) if mode == "fwd+bwd" else None
    assert runner._verify(bench.pairwise(rope), bench.SPEC.reference, inputs, grad, torch.float32) < 1e-5
    assert (
        runner._verify(bench.pairwise(apply_rotary_pos_emb), bench.SPEC.reference, inputs, grad, torch.float32) < 1e-5
    )


def test_a_wrong_gradient_fails_the_check():
    def wrong(q, k, cos, sin):
        return apply_rotary_pos_emb(q, k, cos, -sin)

    case = _case("fwd+bwd")
    inputs = _inputs(case)
    grad = random_tensor(bench.SPEC.reference(*inputs).shape)
    with pytest.raises(runner.WrongResult):
        runner._verify(bench.pairwise(wrong), bench.SPEC.reference, inputs, grad, torch.float32)


class _InPlace(torch.autograd.Function):
    """Liger's habits: the forward writes over q and k, the backward over the incoming gradients."""

    @staticmethod
    def forward(ctx, q, k, cos, sin):
        ctx.save_for_backward(cos, sin)
        q_embed, k_embed = apply_rotary_pos_emb(q, k, cos, sin)
        return q.copy_(q_embed), k.copy_(k_embed)

    @staticmethod
    def backward(ctx, dq, dk):
        cos, sin = ctx.saved_tensors
        gq, gk = apply_rotary_pos_emb(dq, dk, cos, -sin)
        return dq.copy_(gq), dk.copy_(gk), None, None


def test_an_in_place_backward_gets_a_private_gradient():
    case = _case("fwd+bwd")
    inputs = _inputs(case)
    grad = random_tensor(bench.SPEC.reference(*inputs).shape)
    before = grad.clone()
    op = bench.pairwise(_InPlace.apply, bench.private_copies())
    assert runner._verify(op, bench.SPEC.reference, inputs, grad, torch.float32) < 1e-5
    assert torch.equal(grad, before)
    with pytest.raises(runner.WrongResult):  # without the copy, the reference sees a rotated gradient
        runner._verify(bench.pairwise(_InPlace.apply), bench.SPEC.reference, inputs, grad, torch.float32)


def test_pair_gradients_are_laid_out_as_the_outputs():
    q = random_tensor((2, 5, 3, 8)).transpose(1, 2)
    flat = random_tensor(q.numel())
    view = bench._laid_out_as(flat, q)
    assert view.shape == q.shape and view.stride() == q.stride() and view.data_ptr() == flat.data_ptr()


def test_bytes_model():
    fwd = Case("s", "S", {"B": 1, "S": 4096, "H_q": 32, "H_kv": 8, "D": 128}, torch.bfloat16, "fwd")
    both = Case("s", "S", dict(fwd.params), torch.bfloat16, "fwd+bwd")
    per_pass = 4096 * 128 * 2  # one (S, D) bf16 tensor
    assert bench.bytes_moved(fwd) == (2 * 40 + 2) * per_pass  # q, k read and written; cos, sin read
    assert bench.bytes_moved(both) == 2 * bench.bytes_moved(fwd)


def test_the_sweeps_stay_small_and_use_rope_models():
    cases = list(bench.SPEC.cases())
    assert len({(c.sweep, tuple(c.params.items())) for c in cases}) <= 12
    assert not any(name in label for c in cases for name in bench.NO_ROPE for label in c.label.split(", "))
    assert all(c.label for c in cases)
