"""Hopper's Tensor Memory Accelerator seen from the host: the descriptor class, and whether a launch can use it.

The matmul and attention chapters launch TMA kernels where tensor descriptors
exist and fall back to pointer kernels everywhere else; both ask here.
"""

from __future__ import annotations

import functools

from academy import INTERPRETED

import torch

try:  # host-side tensor descriptors (Triton ≥ 3.4); the pointer paths run without them
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton
    TensorDescriptor = None


# --8<-- [start:tma_available]
@functools.cache
def tma_available() -> bool:
    """Tensor descriptors exist in this Triton and the GPU has TMA (Hopper, sm_90, or newer)."""
    if TensorDescriptor is None:
        return False
    if INTERPRETED:
        return True  # the interpreter emulates descriptors: the CPU tests run the TMA kernels too
    return torch.cuda.get_device_capability()[0] >= 9


# --8<-- [end:tma_available]
