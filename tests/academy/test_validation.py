"""academy.validation: the refusals every launcher shares, and the testing helpers that check them."""

from academy.testing import assert_empty_gradients, assert_no_second_derivative, random_tensor
from academy.validation import (
    as_bool,
    as_int,
    as_real,
    check_config,
    check_forward_only,
    check_no_overlap,
    once_differentiable,
)

import numpy as np
import pytest
import torch


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.empty(1, 6).expand(4, 6),  # stride-0 rows
        lambda: torch.empty(6).as_strided((4, 3), (1, 1)),  # sliding windows
        lambda: torch.empty(30).as_strided((3, 4), (4, 2)),  # a column steps inside a row's span
    ],
)
def test_overlapping_elements_are_refused(make):
    with pytest.raises(ValueError, match="out has elements that share memory"):
        check_no_overlap("out", make())


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.empty(4, 6),
        lambda: torch.empty(6, 4).t(),
        lambda: torch.empty(10, 12)[2:6, 3:9],
        lambda: torch.empty(1, 6).expand(1, 6),  # a stride-0 dimension of size 1 is harmless
        lambda: torch.empty(0, 5).expand(3, 0, 5),
        lambda: torch.empty(30).as_strided((2, 3), (3, 1)),
    ],
)
def test_distinct_elements_pass(make):
    check_no_overlap("out", make())


def test_scalars_accept_numpy_and_refuse_the_wrong_kind():
    assert as_bool("causal", np.bool_(True)) is True and as_bool("causal", False) is False
    assert as_int("seed", np.int64(7)) == 7 and type(as_int("seed", np.uint8(3))) is int
    assert as_real("p", np.float32(0.25)) == 0.25 and type(as_real("p", np.float16(0.5))) is float
    assert as_real("eps", 1) == 1.0
    with pytest.raises(TypeError, match=r"causal must be a bool, got int"):
        as_bool("causal", 1)
    with pytest.raises(TypeError, match=r"bits must be an int, got float"):
        as_int("bits", 4.0)
    with pytest.raises(TypeError, match=r"seed must be an int, got numpy.bool"):
        as_int("seed", np.bool_(True))
    with pytest.raises(TypeError, match=r"p must be a real number, got torch.Tensor"):
        as_real("p", torch.tensor(0.5))
    with pytest.raises(TypeError, match=r"p must be a real number, got bool"):
        as_real("p", True)


def test_forward_only_refuses_inputs_that_require_grad():
    x = random_tensor(3, requires_grad=True)
    with pytest.raises(ValueError, match="op is forward only .* x requires grad"):
        check_forward_only("op", x=x, y=random_tensor(3))
    with torch.no_grad():
        check_forward_only("op", x=x)
    check_forward_only("op", x=x.detach())


def test_config_overrides_are_checked():
    defaults = dict(BLOCK_M=64, BLOCK_N=0, SPLIT_K=0, num_warps=4, num_stages=3, FLATTEN=False)
    assert check_config(None, defaults) == {}
    assert check_config({"BLOCK_M": np.int64(32), "BLOCK_N": 0}, defaults, min_block=16, auto=("BLOCK_N",)) == {
        "BLOCK_M": 32,
        "BLOCK_N": 0,
    }
    for config, error, message in [
        ({"BLOCK_M": 48}, ValueError, r"config\['BLOCK_M'\] must be a power of two >= 16, got 48"),
        ({"BLOCK_M": 8}, ValueError, "power of two >= 16"),
        ({"BLOCK_N": 0}, ValueError, "power of two"),  # 0 is "chosen per call" only where allowed
        ({"num_warps": 3}, ValueError, r"config\['num_warps'\] must be a power of two"),
        ({"num_stages": 0}, ValueError, "positive int"),
        ({"BLOCK_X": 16}, ValueError, r"unknown keys \['BLOCK_X'\]"),
        ({"BLOCK_M": 64.0}, TypeError, "must be an int"),
        ({"FLATTEN": 1}, TypeError, "must be a bool"),
        ([("BLOCK_M", 64)], TypeError, "config must be a dict or None"),
    ]:
        with pytest.raises(error, match=message):
            check_config(config, defaults, min_block=16)


class _Cube(torch.autograd.Function):
    """x³ with a hand-written backward that is itself not differentiable (as a kernel's is not)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.detach() ** 3

    @staticmethod
    @once_differentiable("cube")
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return 3 * x.detach() ** 2 * dy.detach()


def test_once_differentiable_keeps_first_order_and_refuses_second():
    x = random_tensor(5, requires_grad=True)
    _Cube.apply(x).sum().backward()
    torch.testing.assert_close(x.grad, 3 * x.detach() ** 2)
    (g,) = torch.autograd.grad(_Cube.apply(x).sum(), x, create_graph=True)
    torch.testing.assert_close(g, 3 * x.detach() ** 2)  # the first derivative is still right
    with pytest.raises(RuntimeError, match="cube has no second derivative"):
        g.sum().backward()
    assert_no_second_derivative(_Cube.apply, x)
    c = random_tensor(5, requires_grad=True)  # an upstream gradient that itself requires grad
    (g,) = torch.autograd.grad((_Cube.apply(x) * c).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="cube has no second derivative"):
        g.square().sum().backward()


def test_the_helpers_catch_what_they_are_for():
    """Without the decorator the penalty runs (silently wrong); an empty leaf output has no graph."""

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.detach() ** 3

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            return 3 * x.detach() ** 2 * dy.detach()

    with pytest.raises(AssertionError, match="double backward"):
        assert_no_second_derivative(lambda x: Plain.apply(x) + x, random_tensor(5, requires_grad=True))
    x = torch.empty(0, 3, requires_grad=True)
    with pytest.raises(AssertionError, match="cut the autograd graph"):
        assert_empty_gradients(lambda t: torch.empty(t.shape).requires_grad_(), x)
    assert_empty_gradients(lambda t: t * 2, x)
