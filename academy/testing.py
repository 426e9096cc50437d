"""Helpers that make kernel tests honest.

* [`assert_close`][academy.testing.assert_close] compares against a reference by relative L2 error,
  ``‖out − ref‖ / ‖ref‖`` computed in float64, with a report that says where
  and how badly a result is wrong. NaN never passes.
* [`TOLERANCES`][academy.testing.TOLERANCES] holds one bar per dtype, so every chapter uses the same;
  [`cancellation_tolerance`][academy.testing.cancellation_tolerance] and
  [`underflow_tolerance`][academy.testing.underflow_tolerance] widen it, by derived amounts,
  where the kernel's terms cancel or its result is subnormal.
* [`random_tensor`][academy.testing.random_tensor] makes fresh random inputs (never zeros);
  [`IRREGULAR_SIZES`][academy.testing.IRREGULAR_SIZES] lists sizes that are not powers of two, so masks
  are exercised.
* [`poisoned`][academy.testing.poisoned] makes output buffers full of NaN, so an element a kernel
  forgot to write fails the comparison instead of passing as a stale zero.
"""

from __future__ import annotations

import math

from academy import DEVICE

import torch

TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-12,
    torch.float32: 1e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
}
"""Largest accepted relative L2 error, by the dtype the kernel computes in or returns."""

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

IRREGULAR_SIZES = (1, 7, 127, 1000, 1025, 3001)
"""Sizes that leave a partly filled last block for any power-of-two block."""


def tolerance(dtype: torch.dtype) -> float:
    try:
        return TOLERANCES[dtype]
    except KeyError:
        raise ValueError(f"no tolerance defined for {dtype}") from None


def cancellation_tolerance(dtype: torch.dtype, terms: torch.Tensor, result: torch.Tensor) -> float:
    """The bar for a result the kernel sums in fp32 from terms that can cancel, stored in ``dtype``.

    fp32 roundings are relative to the terms, not to their sum, so a result that is a small remainder
    (a softmax backward on a one-hot row, silu' near its root) carries more relative error than the fp32
    bar. The bar is the dtype's (the final rounding) plus the fp32 bar times ``‖terms‖ / ‖result‖ − 1``;
    pass both in float64, ``terms`` as the same sum with every summand made non-negative. Where the
    terms do not cancel the ratio is 1 and the bar is the dtype's.
    """
    result_norm = torch.linalg.vector_norm(result.double()).item()
    ratio = torch.linalg.vector_norm(terms.double()).item() / result_norm if result_norm > 0 else 1.0
    return tolerance(dtype) + tolerance(torch.float32) * (ratio - 1 if math.isfinite(ratio) else 0.0)


def unit_roundoff(dtype: torch.dtype) -> float:
    """The largest relative error of one round-to-nearest to ``dtype``: 2⁻²⁴ for fp32."""
    return torch.finfo(dtype).eps / 2


def half_smallest_subnormal(dtype: torch.dtype) -> float:
    """The largest absolute error of one rounding to ``dtype`` where the result is subnormal."""
    return torch.finfo(dtype).tiny * unit_roundoff(dtype)


def underflow_tolerance(dtype: torch.dtype, expected: torch.Tensor) -> float:
    """The bar for a result rounded once to ``dtype``, some of it subnormal.

    Below the normal range one rounding is absolute (up to half the smallest subnormal), not
    relative: a lone fp16 2⁻²⁴·1.5 lands on a tie and comes out 1/3 off. The bar is the dtype's plus
    that absolute error on every element, relative to ``‖expected‖``.
    """
    norm = torch.linalg.vector_norm(expected.double()).item()
    return tolerance(dtype) + (half_smallest_subnormal(dtype) * expected.numel() ** 0.5 / norm if norm else 0.0)


def rel_l2_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``‖out − ref‖₂ / ‖ref‖₂`` in float64 (NaN if either holds NaN or inf)."""
    out64 = out.detach().to("cpu", torch.float64)
    ref64 = ref.detach().to("cpu", torch.float64)
    if not (torch.isfinite(out64).all() and torch.isfinite(ref64).all()):
        return math.nan
    diff = torch.linalg.vector_norm(out64 - ref64).item()
    scale = torch.linalg.vector_norm(ref64).item()
    return diff / scale if scale > 0 else diff


def assert_close(
    out: torch.Tensor,
    ref: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    tol: float | None = None,
    baseline: torch.Tensor | None = None,
    name: str = "output",
) -> float:
    """Fail with a readable report unless ``out`` matches ``ref``.

    The bar is ``tol`` if given, else the tolerance of ``dtype`` (default:
    ``out.dtype``). With a ``baseline`` -- PyTorch's own result computed in the
    same low precision -- the bar rises to twice the baseline's error when that
    is larger: some results (a gradient through a rounded saved output, a tiny
    tensor whose norm is one element) are inexact for every implementation,
    and a kernel should be held to "no worse than PyTorch", not to luck.
    Returns the relative L2 error so a caller can log it.
    """
    if out.shape != ref.shape:
        raise AssertionError(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    bar = tol if tol is not None else tolerance(dtype or out.dtype)
    if baseline is not None:
        bar = max(bar, 2 * rel_l2_error(baseline, ref))
    error = rel_l2_error(out, ref)
    if error <= bar:  # False for NaN, by design
        return error
    raise AssertionError(_report(out, ref, error, bar, name))


def _report(out: torch.Tensor, ref: torch.Tensor, error: float, bar: float, name: str) -> str:
    out64 = out.detach().to("cpu", torch.float64)
    ref64 = ref.detach().to("cpu", torch.float64)
    lines = [
        f"{name} differs from the reference: relative L2 error {error:.3e} > tolerance {bar:.1e}",
        f"  shape {tuple(out.shape)}, dtype {out.dtype} (reference {ref.dtype})",
    ]
    nonfinite = (~torch.isfinite(out64)).sum().item()
    if nonfinite:
        first = tuple(torch.nonzero(~torch.isfinite(out64))[0].tolist())
        lines.append(
            f"  {nonfinite} of {out.numel()} elements are NaN/inf (first at index {first}); "
            "NaN in a poisoned buffer means an element was never written"
        )
    finite = torch.isfinite(out64) & torch.isfinite(ref64)
    if finite.any():
        abs_err = torch.where(finite, (out64 - ref64).abs(), torch.zeros_like(out64))
        worst = torch.argmax(abs_err)
        index = tuple(int(i) for i in torch.unravel_index(worst, out.shape))
        lines.append(
            f"  max abs error {abs_err.flatten()[worst].item():.3e} at index {index}: "
            f"got {out64.flatten()[worst].item():.6g}, expected {ref64.flatten()[worst].item():.6g}"
        )
    return "\n".join(lines)


def random_tensor(
    shape: tuple[int, ...] | int,
    dtype: torch.dtype = torch.float32,
    *,
    device: str = DEVICE,
    scale: float = 1.0,
    offset: float = 0.0,
    requires_grad: bool = False,
) -> torch.Tensor:
    """Normal random values ``offset + scale·N(0, 1)``, drawn in fp32 then cast.

    Drawing in fp32 and casting gives the same distribution for every dtype,
    and integer dtypes get small random integers.
    """
    values = torch.randn(shape, dtype=torch.float32, device=device) * scale + offset
    if not dtype.is_floating_point:
        values = values.mul(100).round()
    return values.to(dtype).requires_grad_(requires_grad)


def poisoned(shape: tuple[int, ...], dtype: torch.dtype, *, device: str = DEVICE) -> torch.Tensor:
    """An output buffer whose every element fails a comparison until written."""
    if dtype.is_floating_point:
        return torch.full(shape, math.nan, dtype=dtype, device=device)
    return torch.full(shape, torch.iinfo(dtype).min, dtype=dtype, device=device)


def poison_allocations(monkeypatch, module) -> None:
    """Make ``torch.empty``/``torch.empty_like`` inside ``module`` return poisoned buffers.

    Launchers allocate their outputs with ``torch.empty``; in tests we want
    those buffers full of NaN so that an element the kernel forgot to write
    cannot pass as whatever the allocator happened to leave there.
    """

    class _PoisoningTorch:
        def __getattr__(self, attr):
            return getattr(torch, attr)

        @staticmethod
        def empty(*size, dtype=None, device=None, **kwargs):
            shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
            return poisoned(shape, dtype or torch.get_default_dtype(), device=device or "cpu")

        @staticmethod
        def empty_like(t, *, dtype=None, device=None, **kwargs):
            return poisoned(tuple(t.shape), dtype or t.dtype, device=device or t.device)

    monkeypatch.setattr(module, "torch", _PoisoningTorch())


def assert_no_second_derivative(fn, *inputs: torch.Tensor) -> None:
    """A gradient penalty through ``fn`` must raise a RuntimeError that says so.

    ``fn``'s backward runs kernels that have no backward of their own, so a gradient of its gradient
    (``torch.autograd.grad(..., create_graph=True)``, then a backward through the result) cannot be
    right; before the refusal it came out silently wrong, missing every term through ``fn``. The
    upstream gradient here does not require grad, so only the saved inputs tie the gradient to them.
    """
    differentiable = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    out = fn(*inputs)
    upstream = torch.randn(out.shape, dtype=torch.float32, device=out.device).to(out.dtype)
    grads = torch.autograd.grad(out, differentiable, upstream, create_graph=True)
    penalty = sum(g.float().square().sum() for g in grads)
    try:
        penalty.backward()
    except RuntimeError as error:
        if "no second derivative" in str(error):
            return
        raise AssertionError(f"double backward raised an unclear error: {error}") from error
    raise AssertionError("double backward ran: the second derivative is silently wrong")


def assert_empty_gradients(fn, *inputs: torch.Tensor) -> None:
    """``fn`` on empty inputs stays in the autograd graph: every input that requires grad gets a
    gradient of its own shape, all zeros (as PyTorch's own ops give), not ``None``."""
    out = fn(*inputs)
    if not out.requires_grad or out.grad_fn is None:
        raise AssertionError("an empty input cut the autograd graph: the output has no grad_fn")
    out.sum().backward()
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            if t.grad is None:
                raise AssertionError(f"input {i} got no gradient (None) through an empty input")
            if t.grad.shape != t.shape or t.grad.dtype != t.dtype or t.grad.count_nonzero():
                raise AssertionError(f"input {i}: gradient {tuple(t.grad.shape)} {t.grad.dtype}, not zeros like it")
