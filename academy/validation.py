"""Input checks every launcher makes, with one wording everywhere.

A kernel handed the wrong tensor does not fail politely: it reads the wrong
memory, or crashes the process. Launchers therefore check what the kernel
assumes and raise ``TypeError``/``ValueError`` that say what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence

from academy import DEVICE

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
