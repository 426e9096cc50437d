"""Sizing persistent grids: how many streaming multiprocessors the GPU has.

A persistent kernel launches about as many programs as the GPU can hold at
once and lets each walk many rows or tiles, so its grid is a multiple of the
SM count. Every chapter with such a grid asks here.
"""

from __future__ import annotations

import functools

from academy import INTERPRETED

import torch

INTERPRETER_SMS = 4
"""The SM count under the interpreter: a small "GPU", so that interpreted grids stay cheap while
each program still walks several rows or tiles, the path the GPU takes."""


def sm_count() -> int:
    """Streaming multiprocessors of the current GPU (the one kernels launch on), or ``INTERPRETER_SMS``."""
    if INTERPRETED:
        return INTERPRETER_SMS
    return _device_sm_count(torch.cuda.current_device())


@functools.cache
def _device_sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count
