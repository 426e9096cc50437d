"""Input checks every launcher makes, with one wording everywhere.

A kernel handed the wrong tensor does not fail politely: it reads the wrong
memory, or crashes the process. Launchers therefore check what the kernel
assumes and raise ``TypeError``/``ValueError`` that say what was expected.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Mapping, Sequence

from academy import DEVICE

import numpy as np
import torch


def check_tensor(name: str, t: object, dtypes: Sequence[torch.dtype]) -> None:
    """``t`` is a tensor on the kernel device with one of ``dtypes``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != DEVICE:
        raise ValueError(f"{name} is on {t.device}, but kernels run on {DEVICE!r} here")
    if t.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {t.dtype}; supported: {tuple(dtypes)}")


def check_same(x: torch.Tensor, y: torch.Tensor, names: tuple[str, str] = ("x", "y")) -> None:
    """Two inputs of one element-wise op: same shape (no broadcasting), dtype and device."""
    a, b = names
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {a} {tuple(x.shape)} vs {b} {tuple(y.shape)} (no broadcasting)")
    if x.dtype != y.dtype:
        raise TypeError(f"dtypes differ: {a} {x.dtype} vs {b} {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"devices differ: {a} on {x.device}, {b} on {y.device}")


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) bytes a tensor's elements reach (strides are never negative in PyTorch)."""
    extent = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1
    return t.data_ptr(), t.data_ptr() + extent * t.element_size()


def check_disjoint(name: str, out: torch.Tensor, **inputs: torch.Tensor) -> None:
    """``out`` shares no memory with any of ``inputs``: a kernel that writes ``out`` while it still
    reads an input would read its own results. Spans, not elements, are compared, so two interleaved
    views that never share an element are refused too (a rare, safe refusal)."""
    if out.numel() == 0:
        return
    first, end = _byte_span(out)
    for other, t in inputs.items():
        if t.numel() and t.device == out.device:
            start, stop = _byte_span(t)
            if first < stop and start < end:
                raise ValueError(f"{name} overlaps {other} in memory: pass an output that shares no memory with it")


def check_no_overlap(name: str, out: torch.Tensor) -> None:
    """``out``'s elements are distinct memory locations: a kernel that writes an element twice
    (a stride-0 row, an ``expand``-ed view) leaves whichever write came last, a silent wrong result.

    A sufficient test on the strides: sorted by stride, each dimension steps past everything the
    smaller ones span. A layout that interleaves its dimensions without sharing an element fails it
    too (a rare, safe refusal), as in ``check_disjoint``.
    """
    if out.numel() == 0:
        return
    span = 1  # elements spanned by the dimensions checked so far
    for stride, size in sorted((s, n) for n, s in zip(out.shape, out.stride()) if n > 1):
        if stride < span:
            raise ValueError(
                f"{name} has elements that share memory (shape {tuple(out.shape)}, strides {out.stride()}), "
                f"so one would be written twice: pass a tensor with distinct elements, such as {name}.clone()"
            )
        span += stride * (size - 1)


def _type_name(value: object) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def as_bool(name: str, value: object) -> bool:
    """``value`` as a Python bool: a Python or NumPy bool, nothing else (not 0 or 1)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {_type_name(value)}")


def as_int(name: str, value: object) -> int:
    """``value`` as a Python int: a Python or NumPy integer, not a bool and not a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {_type_name(value)}")
    return int(value)


def as_real(name: str, value: object) -> float:
    """``value`` as a Python float: a Python or NumPy int or float, not a bool (nor a tensor)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_type_name(value)}")
    return float(value)


def check_forward_only(op: str, **inputs: object) -> None:
    """Refuse inputs that require grad while autograd records: ``op`` has no backward, so its
    result would carry no gradient, and whatever is computed from it would silently get none."""
    if not torch.is_grad_enabled():
        return
    for name, t in inputs.items():
        if isinstance(t, torch.Tensor) and t.requires_grad:
            raise ValueError(
                f"{op} is forward only (no backward), but {name} requires grad: "
                f"call it under torch.no_grad(), or pass {name}.detach()"
            )


def check_config(config: object, defaults: Mapping[str, object], *, min_block: int = 1, auto: Sequence[str] = ()):
    """``config`` (``None`` or a dict) overrides entries of a launch config like ``defaults``: only
    keys of ``defaults``, each of its default's type; every ``BLOCK_*`` and ``num_warps`` a power of
    two, the blocks at least ``min_block``, and 0 allowed for the keys in ``auto`` (chosen per call).
    Returns the overrides as a dict."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict or None, got {_type_name(config)}")
    unknown = sorted(str(key) for key in config if key not in defaults)
    if unknown:
        raise ValueError(f"config has unknown keys {unknown}; known: {sorted(defaults)}")
    checked = {}
    for key, value in config.items():
        if isinstance(defaults[key], bool):
            checked[key] = as_bool(f"config[{key!r}]", value)
            continue
        value = as_int(f"config[{key!r}]", value)
        if value == 0 and key in auto:
            pass
        elif key.startswith("BLOCK_") or key == "num_warps":
            least = min_block if key.startswith("BLOCK_") else 1
            if value < least or value & (value - 1):
                raise ValueError(f"config[{key!r}] must be a power of two >= {least}, got {value}")
        elif value < 1:
            raise ValueError(f"config[{key!r}] must be a positive int, got {value}")
        checked[key] = value
    return checked


def once_differentiable(op: str):
    """Decorate a custom autograd Function's ``backward`` whose kernels have no backward of their own.

    A gradient of its gradient (``torch.autograd.grad(..., create_graph=True)`` then a backward
    through the result: a gradient penalty, a Hessian-vector product) then raises a RuntimeError that
    names ``op``, instead of silently leaving out every term that goes through this op. PyTorch's
    ``torch.autograd.function.once_differentiable`` does so only where the incoming gradient requires
    grad; this one also where an input saved for the backward does.
    """

    def decorate(backward):
        @functools.wraps(backward)
        def wrapper(ctx, *grads):
            with torch.no_grad():
                results = backward(ctx, *grads)
            if not torch.is_grad_enabled():  # the usual backward (create_graph=False)
                return results
            anchors = [t for t in (*grads, *ctx.saved_tensors) if isinstance(t, torch.Tensor) and t.requires_grad]
            single = not isinstance(results, tuple)
            results = (results,) if single else results
            present = [i for i, r in enumerate(results) if isinstance(r, torch.Tensor)]
            if not anchors or not present:  # nothing depends on a tensor that requires grad, or no gradient
                return results[0] if single else results
            guarded = _NoSecondDerivative.apply(op, len(anchors), *anchors, *(results[i] for i in present))
            guarded = (guarded,) if isinstance(guarded, torch.Tensor) else guarded
            results = list(results)
            for i, g in zip(present, guarded):
                results[i] = g
            return results[0] if single else tuple(results)

        return wrapper

    return decorate


class _NoSecondDerivative(torch.autograd.Function):
    """Passes first-order gradients through unchanged; differentiating them raises."""

    @staticmethod
    def forward(ctx, op, n_anchors, *tensors):
        ctx.op = op
        outputs = tuple(t.detach() for t in tensors[n_anchors:])
        return outputs[0] if len(outputs) == 1 else outputs

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            f"{ctx.op} has no second derivative: its backward kernels have no backward of their own, "
            "so a gradient of its gradient (create_graph=True, then a backward through the result) "
            "is not supported. Use the chapter's PyTorch reference where you need one."
        )
