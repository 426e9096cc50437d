"""Programmatic dependent launch (PDL): a kernel that may start before the one ahead of it in the stream ends.

Launched with PDL, a kernel's programs can become resident while the previous
kernel is still running; each waits (``griddepcontrol.wait``) until every
write of that kernel is visible, and then lets the next kernel launch in its
turn. A stream of short kernels (decode GEMMs of a few microseconds each)
hides the launch gap between them. The matmul chapter's split-K kernels start
with :func:`dependent_launch_prologue` and launch with ``launch_pdl``.

Whether it pays is a measurement per kernel: the low-bit chapter's decode
kernels ran slower with it at most of their shapes (see that page), so they
launch without it.
"""

from __future__ import annotations

import functools

from academy import INTERPRETED

import torch
import triton
import triton.language as tl


# --8<-- [start:pdl]
@functools.cache
def pdl_available() -> bool:
    """This Triton has grid dependency control and the GPU runs it (Hopper, sm_90, or newer).

    Never under the interpreter: it runs one program at a time, with no grid to overlap.
    """
    if INTERPRETED or not hasattr(tl.extra, "cuda") or not hasattr(tl.extra.cuda, "gdc_wait"):
        return False
    return torch.cuda.get_device_capability()[0] >= 9


@triton.jit
def dependent_launch_prologue(PDL: tl.constexpr):
    """The first thing a PDL kernel does, before it touches memory."""
    if PDL:
        tl.extra.cuda.gdc_wait()  # the previous kernel's writes are all visible past this line
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may launch now, and wait in its turn


# --8<-- [end:pdl]
