"""Triton Academy: the package behind the handbook.

Importing [`academy`][] decides where kernels run, once, before any kernel is
defined:

* on a machine with a CUDA GPU, kernels are compiled and run on it;
* everywhere else (a laptop, CI), ``TRITON_INTERPRET=1`` is set so the same
  ``@triton.jit`` functions run on the CPU through Triton's interpreter.

Triton reads ``TRITON_INTERPRET`` when a function is decorated, so this module
must be imported before any kernel module; ``examples/__init__.py`` does that.
"""

from __future__ import annotations

import os

import torch

__version__ = "0.1.0"


def _choose_device() -> str:
    forced_interpreter = os.environ.get("TRITON_INTERPRET") == "1"
    if torch.cuda.is_available() and not forced_interpreter:
        return "cuda"
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu"


DEVICE: str = _choose_device()
"""``"cuda"`` when kernels compile for a GPU, ``"cpu"`` when they are interpreted."""

INTERPRETED: bool = os.environ.get("TRITON_INTERPRET") == "1"
"""True when ``@triton.jit`` functions run through the Triton interpreter."""

__all__ = ["DEVICE", "INTERPRETED", "__version__"]
