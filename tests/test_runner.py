"""The runner's CPU-testable parts: verification and the gradient it feeds backward."""

import pytest
import torch

from academy.bench import peers, runner


def test_verification_gives_the_reference_its_own_inputs():
    """A peer that overwrites its input (as Liger's cross entropy writes the logits'
    gradient over the logits) must not change what the reference then reads."""
    def destructive_double(x):
        out = 2 * x
        x.data.zero_()
        return out

    x = torch.randn(64, dtype=torch.float64)
    assert runner._verify(destructive_double, lambda t: 2 * t, (x,), None, torch.float32) == 0
    assert x.abs().sum() > 0, "the caller's inputs are untouched too"


def test_verification_compares_gradients_and_fails_when_wrong():
    x = torch.randn(64, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(64, dtype=torch.float64)
    assert runner._verify(lambda t: t * t, lambda t: t.square(), (x,), grad, torch.float32) == 0
    wrong_grad = lambda t: t.detach() * t.detach() + (t - t.detach())  # right value, gradient 1 instead of 2x
    with pytest.raises(runner.WrongResult, match="relative L2 error"):
        runner._verify(wrong_grad, lambda t: t.square(), (x,), grad, torch.float32)


def test_host_synchronising_ops_are_marked_for_host_timing():
    op = peers.host_synchronising(lambda x: x + 1)
    assert op(1) == 2 and op.graph_safe is False
    assert getattr(lambda x: x, "graph_safe", True) is True

