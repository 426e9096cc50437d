"""The layer-norm tutorial's exercise answers: the RMSNorm VJP and the lock race simulation."""

from academy.testing import assert_close, random_tensor

import torch

from examples.layer_norm_locks.exercises import race, rms_norm_vjp


def test_rms_norm_vjp_equals_autograd_float64():
    x = random_tensor((6, 29), torch.float64, requires_grad=True)
    gamma = random_tensor((29,), torch.float64, requires_grad=True)
    dy = random_tensor((6, 29), torch.float64)
    (gamma * x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)).backward(dy)
    dx, dgamma = rms_norm_vjp(x.detach(), gamma.detach(), dy, 1e-6)
    assert_close(dx, x.grad, name="dx")
    assert_close(dgamma, gamma.grad, name="dγ")


def test_race_loses_an_update_only_without_the_barrier():
    assert race(barrier=True) == [11.0] * 4
    assert race(barrier=False) == [11.0, 11.0, 1.0, 11.0]
