"""The buggy kernels of the Debugging tutorial, their fixes, and the exercise answers.

Triton needs a kernel's source in a real file, so every kernel the tutorial
(``docs/tutorials/debugging.py``) shows lives here, in named sections. Each
bug comes with the smallest launcher that triggers it. The exercise answers
at the end are checked by ``tests/debugging/test_answers.py``.
"""

from __future__ import annotations

from academy import DEVICE
from academy.testing import poisoned, random_tensor

import torch
import triton
import triton.language as tl

BLOCK = 64  # small, so the CPU interpreter runs a handful of programs


# --8<-- [start:guard_band]
def guarded(n: int, guard: int, *, fill: str = "poison") -> tuple[torch.Tensor, torch.Tensor]:
    """A buffer of ``n + guard`` elements and the view of its first ``n``.

    The kernel gets the view; the ``guard`` elements after it are a tripwire.
    With ``fill="poison"`` everything starts as NaN (an output); with
    ``fill="random"`` it holds random values (an input whose overrun reads
    stay inside memory we own).
    """
    if fill == "poison":
        whole = poisoned((n + guard,), torch.float32)
    else:
        whole = random_tensor(n + guard)
    return whole, whole[:n]


def guard_writes(whole: torch.Tensor, n: int) -> int:
    """How many guard elements after the first ``n`` are no longer NaN."""
    return int((~whole[n:].isnan()).sum())


# --8<-- [end:guard_band]


# --8<-- [start:unmasked_copy]
@triton.jit
def unmasked_copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)  # BUG: no mask, the last block reads past n
    tl.store(out_ptr + offsets, x)  # BUG: ... and writes past n


# --8<-- [end:unmasked_copy]


# --8<-- [start:masked_copy]
@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)


def launch_copy(kernel, x: torch.Tensor, out: torch.Tensor, block: int = BLOCK) -> None:
    n = x.numel()
    kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)


# --8<-- [end:masked_copy]


# --8<-- [start:floor_grid]
def copy_floor_grid(x: torch.Tensor, out: torch.Tensor, block: int = BLOCK) -> None:
    n = x.numel()
    grid = (n // block,)  # BUG: rounds down, so the ragged tail gets no program
    copy_kernel[grid](x, out, n, BLOCK=block)


# --8<-- [end:floor_grid]


# --8<-- [start:row_max_wrong_other]
@triton.jit
def row_max_wrong_other_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)  # BUG: 0 can win a max
    tl.store(out_ptr + row, tl.max(x, axis=0))


# --8<-- [end:row_max_wrong_other]


# --8<-- [start:row_max]
@triton.jit
def row_max_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


def row_max(x: torch.Tensor, kernel=row_max_kernel) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(cols)  # the whole row in one block
    kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=block)
    return out


# --8<-- [end:row_max]


# --8<-- [start:static_checks]
@triton.jit
def static_checks_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    tl.static_print("compiling static_checks_kernel with BLOCK =", BLOCK)
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


# --8<-- [end:static_checks]


# --8<-- [start:device_print]
@triton.jit
def block_sums_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    total = tl.sum(x, axis=0)
    tl.device_print("block sum", total)
    tl.store(out_ptr + pid, total)


# --8<-- [end:device_print]


# --8<-- [start:runtime_arange]
@triton.jit
def runtime_arange_kernel(x_ptr, out_ptr, n):
    offsets = tl.arange(0, n)  # BUG: n is a runtime argument, not a tl.constexpr
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


# --8<-- [end:runtime_arange]


# --8<-- [start:aliasing]
@triton.jit
def diff_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[i] - x[i-1], with x[-1] taken as 0."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    here = tl.load(x_ptr + offsets, mask=mask)
    before = tl.load(x_ptr + offsets - 1, mask=mask & (offsets > 0), other=0.0)  # reads the block before
    tl.store(out_ptr + offsets, here - before, mask=mask)


def diff(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    out = torch.empty_like(x) if out is None else out  # out=x is the aliasing bug
    n = x.numel()
    diff_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


# --8<-- [end:aliasing]


# --8<-- [start:small_dot]
@triton.jit
def small_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(
        c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b)
    )  # Triton 3.6 compiles only K >= 16 (3.9: K = 8 for fp32)


# --8<-- [end:small_dot]


# ---------------------------------------------------------------- exercise answers


# --8<-- [start:answer_scale]
@triton.jit
def scale_kernel(x_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK  # int64: no wrap past 2**31 elements
    offsets = start + tl.arange(0, BLOCK)
    mask = offsets < n  # the last block is ragged
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, (a * x.to(tl.float32)).to(out_ptr.dtype.element_ty), mask=mask)


def scale(x: torch.Tensor, a: float, *, block: int = 256) -> torch.Tensor:
    """``a * x`` for a tensor of any shape and strides."""
    if not isinstance(x, torch.Tensor):  # a data_ptr() int would be read as a scalar
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    x = x.contiguous()  # the kernel walks memory in order: strides would be ignored
    out = torch.empty_like(x)  # never x itself
    n = x.numel()
    if n:
        scale_kernel[(triton.cdiv(n, block),)](x, out, a, n, BLOCK=block)  # cdiv, not //
    return out


# --8<-- [end:answer_scale]


# --8<-- [start:answer_row_min]
@triton.jit
def row_min_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=float("inf"))  # +inf never wins a min
    tl.store(out_ptr + row, tl.min(x, axis=0))


def row_min(x: torch.Tensor) -> torch.Tensor:
    """The minimum of each row of a 2-D float32 tensor (rows may be strided)."""
    if x.dim() != 2 or x.shape[1] == 0:
        raise ValueError(f"expected a 2-D tensor with at least one column, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    row_min_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
    return out


# --8<-- [end:answer_row_min]


# --8<-- [start:answer_out_of_bounds]
def out_of_bounds_writes(launch, n: int, *, guard: int = BLOCK) -> int:
    """Run ``launch(x, out)`` on guard-banded buffers; count writes past ``n``.

    ``x`` is ``n`` random values followed by ``guard`` more, so reads past the
    end stay inside our own allocation; ``out`` is followed by ``guard``
    NaNs, so any element written past the end shows up.
    """
    _, x = guarded(n, guard, fill="random")
    out_whole, out = guarded(n, guard)
    launch(x, out)
    return guard_writes(out_whole, n)


# --8<-- [end:answer_out_of_bounds]


if __name__ == "__main__":
    x = random_tensor(1000)
    assert torch.equal(scale(x, 2.0), 2.0 * x)
    assert out_of_bounds_writes(lambda a, b: launch_copy(unmasked_copy_kernel, a, b), 1000) > 0
    assert out_of_bounds_writes(lambda a, b: launch_copy(copy_kernel, a, b), 1000) == 0
    print("debugging examples OK on", DEVICE)
