"""Loaders for the peers every chapter is measured against.

A loader returns the op to time, or ``None`` when the peer is not installed,
so a results file records "not installed" rather than a run failing.
"""

from __future__ import annotations

import importlib
import importlib.metadata
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


def liger(
    function_name: str,
    adapt: Callable[[Callable], Callable] = lambda apply: apply,
    *,
    graph_safe: bool = True,
) -> Callable[[], Callable | None]:
    """A Liger-Kernel autograd Function from ``liger_kernel.ops``, if importable.

    ``adapt`` turns its ``apply`` into the chapter's call signature (Liger's
    functions take extra positional options). ``graph_safe=False`` marks a function
    that synchronises with the host (a ``.item()`` or ``torch.equal`` on a GPU
    tensor): the runner then times it from the host instead of in a CUDA graph,
    whose capture such a call would break.
    """

    def load() -> Callable | None:
        try:
            ops = importlib.import_module("liger_kernel.ops")
        except ImportError:
            return None
        function = getattr(ops, function_name, None)
        if function is None:
            return None
        op = adapt(function.apply)
        if not graph_safe:
            op = host_synchronising(op)
        return op

    return load


PEER_DISTRIBUTIONS = ("liger-kernel", "gemlite")
"""The peer libraries whose versions every results file records."""


def peer_versions() -> dict[str, str]:
    """The installed version of each peer library, by distribution name; absent ones are left out."""
    found = {}
    for name in PEER_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def host_synchronising(op: Callable) -> Callable:
    """Mark ``op`` as synchronising with the host (see [`liger`][academy.bench.peers.liger])."""

    def call(*args, **kwargs):
        return op(*args, **kwargs)

    call.graph_safe = False
    return call
