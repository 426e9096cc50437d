"""Loaders for the peers every chapter is measured against.

A loader returns the op to time, or ``None`` when the peer is not installed,
so a results file records "not installed" rather than a run failing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch


def eager(op: Callable) -> Callable[[], Callable]:
    """PyTorch as written: one kernel launch per operator."""
    return lambda: op


def compiled(op: Callable) -> Callable[[], Callable | None]:
    """``torch.compile`` of the same function (Inductor emits Triton itself)."""

    def load() -> Callable | None:
        if not torch.cuda.is_available():
            return None
        return torch.compile(op, dynamic=False)

    return load


def liger(function_name: str, adapt: Callable[[Callable], Callable] = lambda apply: apply) -> Callable[[], Callable | None]:
    """A Liger-Kernel autograd Function from ``liger_kernel.ops``, if importable.

    ``adapt`` turns its ``apply`` into the chapter's call signature (Liger's
    functions take extra positional options).
    """

    def load() -> Callable | None:
        try:
            ops = importlib.import_module("liger_kernel.ops")
        except ImportError:
            return None
        function = getattr(ops, function_name, None)
        return None if function is None else adapt(function.apply)

    return load
