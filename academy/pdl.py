"""Programmatic dependent launch (PDL) seen from the host: whether a launch can use it.

With PDL a kernel may launch while the one before it in the stream is still
running: its programs become resident and wait (``griddepcontrol.wait``) until
every write of the previous kernel is visible, so the launch gap between two
short kernels is hidden. The matmul chapter's decode kernel asks here.
"""

from __future__ import annotations

import functools

import torch
import triton.language as tl

from academy import INTERPRETED


# --8<-- [start:pdl_available]
@functools.cache
def pdl_available() -> bool:
    """This Triton has grid dependency control and the GPU runs it (Hopper, sm_90, or newer).

    Never under the interpreter: it runs one program at a time, with no grid to overlap.
    """
    if INTERPRETED or not hasattr(tl.extra, "cuda") or not hasattr(tl.extra.cuda, "gdc_wait"):
        return False
    return torch.cuda.get_device_capability()[0] >= 9
# --8<-- [end:pdl_available]
