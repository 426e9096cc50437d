"""Answers to the fused softmax exercises.

* ``log_softmax(x)``: ``x − m − log Σ exp(x − m)`` in one pass, without ever
  forming the probabilities (so it never takes ``log`` of an underflowed 0).
* ``softmax_with_temperature(x, t)``: ``softmax(x / t)``, folding the
  division into the exponent.

Both handle rows up to ``MAX_FUSED_COLS`` wide (the one-pass shape of the
chapter's forward kernel) and reuse its launch heuristic.
``tests/fused_softmax/test_exercises.py`` checks them against PyTorch.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import triton
import triton.language as tl

from examples.fused_softmax.kernel import (
    MAX_FUSED_COLS,
    _as_rows,
    check_inputs,
    launch_config,
)


def _check_width(x: torch.Tensor) -> None:
    if x.shape[-1] > MAX_FUSED_COLS:
        raise ValueError(f"rows of {x.shape[-1]} values; this one-pass kernel takes at most {MAX_FUSED_COLS}")


# --8<-- [start:log_softmax]
@triton.jit
def log_softmax_kernel(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,  # in elements
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    row_offsets = rows.to(tl.int64)[:, None]

    x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    shifted = x - tl.max(x, axis=1)[:, None]
    log_denominator = tl.log(tl.sum(tl.exp(shifted), axis=1))  # the sum is ≥ 1: its log is finite
    y = shifted - log_denominator[:, None]
    tl.store(y_ptr + row_offsets * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.log_softmax(x, dim=-1)`` for rows of at most ``MAX_FUSED_COLS`` values (forward only)."""
    check_inputs(x)
    _check_width(x)
    x_rows = _as_rows(x)
    n_rows, n_cols = x_rows.shape
    y_rows = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return y_rows.view(x.shape)
    config = launch_config(n_cols)
    grid = (triton.cdiv(n_rows, config["BLOCK_M"]),)
    log_softmax_kernel[grid](x_rows, y_rows, n_rows, n_cols, x_rows.stride(0), y_rows.stride(0), **config)
    return y_rows.view(x.shape)


# --8<-- [end:log_softmax]


# --8<-- [start:temperature]
@triton.jit
def softmax_temperature_kernel(
    x_ptr,
    y_ptr,
    inv_temperature,  # 1 / t, an fp32 scalar
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    row_offsets = rows.to(tl.int64)[:, None]

    x = tl.load(x_ptr + row_offsets * x_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    row_max = tl.max(x, axis=1)  # max(x / t) = max(x) / t because t > 0
    numerator = tl.exp((x - row_max[:, None]) * inv_temperature)
    y = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(y_ptr + row_offsets * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_with_temperature(x: torch.Tensor, temperature: float) -> torch.Tensor:
    """``torch.softmax(x / temperature, dim=-1)`` in one pass (forward only)."""
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a Python number, got {type(temperature).__name__}")
    temperature = float(temperature)  # a NumPy scalar too
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be positive and finite, got {temperature}")
    if 1.0 / temperature > torch.finfo(torch.float32).max:
        raise ValueError(f"temperature {temperature} is so small that 1/temperature overflows fp32")
    check_inputs(x)
    _check_width(x)
    x_rows = _as_rows(x)
    n_rows, n_cols = x_rows.shape
    y_rows = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return y_rows.view(x.shape)
    config = launch_config(n_cols)
    grid = (triton.cdiv(n_rows, config["BLOCK_M"]),)
    softmax_temperature_kernel[grid](
        x_rows, y_rows, 1.0 / temperature, n_rows, n_cols, x_rows.stride(0), y_rows.stride(0), **config
    )
    return y_rows.view(x.shape)


# --8<-- [end:temperature]
