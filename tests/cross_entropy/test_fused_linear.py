"""Fused linear cross entropy: loss, d hidden and d weight against float64 autograd.

Small shapes with several chunks (the last one partial) run on CPU; the
bf16 Llama-size memory check runs on a GPU only.
"""

import math

from academy import DEVICE, INTERPRETED
from academy.testing import assert_close, poison_allocations, random_tensor

import numpy as np
import pytest
import torch

from examples.cross_entropy import fused_linear as fl_module
from examples.cross_entropy import kernel as ce_module
from examples.cross_entropy.fused_linear import fused_linear_cross_entropy, reference, unfused_linear_cross_entropy


@pytest.fixture(autouse=True)
def _poison_outputs(monkeypatch):
    poison_allocations(monkeypatch, ce_module)
    poison_allocations(monkeypatch, fl_module)


def make_case(n_rows=200, hidden_size=48, n_cols=1000, dtype=torch.float32):
    hidden = random_tensor((n_rows, hidden_size), dtype)
    weight = random_tensor((n_cols, hidden_size), dtype, scale=0.3)
    target = torch.randint(0, n_cols, (n_rows,), device=DEVICE)
    target[::7] = -100
    return hidden, weight, target


def run(op, hidden, weight, target, grad_output, **options):
    h = hidden.detach().clone().requires_grad_()
    w = weight.detach().clone().requires_grad_()
    loss = op(h, w, target, **options)
    loss.backward(grad_output if grad_output is not None else torch.ones_like(loss))
    return loss.detach(), h.grad, w.grad


@pytest.mark.parametrize(
    "options",
    [
        dict(chunk=128),
        dict(chunk=128, reduction="sum"),
        dict(chunk=72, label_smoothing=0.1, softcap=4.0, logit_scale=1.3),
        dict(),  # the default chunk: one chunk here
    ],
)
def test_matches_float64_autograd(options):
    hidden, weight, target = make_case()
    grad_output = torch.tensor(0.6 if options.get("reduction") == "sum" else 1.0)
    loss, dh, dw = run(fused_linear_cross_entropy, hidden, weight, target, grad_output, **options)
    ref_options = {k: v for k, v in options.items() if k != "chunk"}
    loss_ref, dh_ref, dw_ref = run(
        reference, hidden.double(), weight.double(), target, grad_output.double(), **ref_options
    )
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(dh, dh_ref, dtype=torch.float32, name="d hidden")
    assert_close(dw, dw_ref, dtype=torch.float32, name="d weight")


def test_bf16_and_unfused_baseline():
    hidden, weight, target = make_case(dtype=torch.bfloat16)
    go = torch.tensor(1.0)
    got = run(fused_linear_cross_entropy, hidden, weight, target, go, chunk=128)
    base = run(unfused_linear_cross_entropy, hidden, weight, target, go)
    want = run(reference, hidden.double(), weight.double(), target, go.double())
    for name, g, b, w in zip(("loss", "d hidden", "d weight"), got, base, want):
        assert_close(g, w, dtype=torch.bfloat16, baseline=b, name=name)


def test_frozen_weight_gets_no_gradient_work():
    hidden, weight, target = make_case(n_rows=130)
    h = hidden.clone().requires_grad_()
    fused_linear_cross_entropy(h, weight, target, chunk=64).backward()
    h64 = hidden.double().requires_grad_()
    reference(h64, weight.double(), target).backward()
    assert weight.grad is None
    assert_close(h.grad, h64.grad, dtype=torch.float32, name="d hidden")


def test_no_grad_and_all_ignored():
    hidden, weight, target = make_case(n_rows=200)
    with torch.no_grad():
        assert_close(fused_linear_cross_entropy(hidden, weight, target, chunk=64), reference(hidden, weight, target))
    target[:] = -100
    assert math.isnan(fused_linear_cross_entropy(hidden, weight, target, chunk=64).item())


def test_strided_target():
    hidden, weight, target = make_case(n_rows=200)
    every_other = torch.stack([target, target.flip(0)], dim=1)[:, 1]  # stride 2
    with torch.no_grad():
        assert_close(
            fused_linear_cross_entropy(hidden, weight, every_other, chunk=64), reference(hidden, weight, every_other)
        )


def test_rejects_bad_input():
    hidden, weight, target = make_case(n_rows=8, n_cols=16)
    with pytest.raises(ValueError, match='"none"'):
        fused_linear_cross_entropy(hidden, weight, target, reduction="none")
    with pytest.raises(ValueError, match="weight"):
        fused_linear_cross_entropy(hidden, weight.t(), target)
    with pytest.raises(TypeError, match="dtypes differ"):
        fused_linear_cross_entropy(hidden, weight.half(), target)
    with pytest.raises(ValueError, match="target must have shape"):
        fused_linear_cross_entropy(hidden, weight, target[:-1])
    with pytest.raises(ValueError, match="chunk"):
        fused_linear_cross_entropy(hidden, weight, target, chunk=0)
    with pytest.raises(TypeError, match="dtype"):
        fused_linear_cross_entropy(hidden, weight, target.int())


@pytest.mark.skipif(INTERPRETED, reason="a GPU-size memory measurement")
def test_peak_memory_is_a_fraction_of_the_unfused_pair():
    hidden, weight, target = make_case(n_rows=4096, hidden_size=2048, n_cols=32000, dtype=torch.bfloat16)
    peaks = {}
    fused = lambda h, w, t: fused_linear_cross_entropy(h, w, t, chunk=512)  # noqa: E731
    for name, op in (("fused", fused), ("unfused", unfused_linear_cross_entropy)):
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        op(h, w, target).backward()
        torch.cuda.synchronize()
        peaks[name] = torch.cuda.max_memory_allocated() - before
    # unfused: logits + gradient (2·T·V·2 bytes) then d weight; fused: d weight + d hidden + one chunk
    assert peaks["fused"] * 2 < peaks["unfused"], peaks


# --- Issue 30: extreme scales, no tokens, second derivatives, NumPy arguments ---


def test_huge_logit_scale_gives_finite_loss_and_gradients():
    """logit_scale pushes the logits past 1e9, where rounding max·log2(e) once made the loss ±inf or NaN."""
    hidden, weight, target = make_case(n_rows=40, n_cols=90)
    go = torch.tensor(1.0)
    loss, dh, dw = run(fused_linear_cross_entropy, hidden, weight, target, go, chunk=16, logit_scale=1e9)
    loss_ref, dh_ref, dw_ref = run(reference, hidden.double(), weight.double(), target, go.double(), logit_scale=1e9)
    assert torch.isfinite(loss) and torch.isfinite(dh).all() and torch.isfinite(dw).all()
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(dh, dh_ref, dtype=torch.float32, name="d hidden")
    assert_close(dw, dw_ref, dtype=torch.float32, name="d weight")


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_no_tokens_backward_gives_zero_gradients(reduction):
    hidden, weight, target = make_case(n_rows=0)
    loss, dh, dw = run(fused_linear_cross_entropy, hidden, weight, target, None, reduction=reduction)
    loss_ref = torch.nn.functional.cross_entropy(hidden @ weight.T, target, reduction=reduction)
    torch.testing.assert_close(loss, loss_ref, equal_nan=True)
    assert dh.shape == hidden.shape and torch.equal(dw, torch.zeros_like(weight))


def test_second_derivatives_are_refused():
    hidden, weight, target = make_case(n_rows=20, n_cols=50)
    h = hidden.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="second derivative"):
        torch.autograd.grad(fused_linear_cross_entropy(h, weight, target), h, create_graph=True)


def test_numpy_arguments_are_accepted():
    hidden, weight, target = make_case(n_rows=50, n_cols=70)
    go = torch.tensor(1.0)
    options = dict(ignore_index=np.int32(-100), label_smoothing=np.float32(0.25), logit_scale=np.float64(1.5))
    loss, dh, dw = run(fused_linear_cross_entropy, hidden, weight, target, go, chunk=np.int64(16), **options)
    options = {k: v.item() for k, v in options.items()}
    loss_ref, dh_ref, dw_ref = run(reference, hidden.double(), weight.double(), target, go.double(), **options)
    assert_close(loss, loss_ref, dtype=torch.float32, name="loss")
    assert_close(dh, dh_ref, dtype=torch.float32, name="d hidden")
    assert_close(dw, dw_ref, dtype=torch.float32, name="d weight")
