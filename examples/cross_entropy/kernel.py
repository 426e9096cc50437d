"""Cross-entropy loss over a vocabulary, with its gradient produced in the forward pass.

``cross_entropy(logits, target)`` equals ``F.cross_entropy`` for fp32, fp16 and
bf16 logits of shape ``(T, V)`` and int64 targets of shape ``(T,)``, with
PyTorch's ``ignore_index``, ``reduction`` and ``label_smoothing``, plus two
transforms of the logits used by real models: ``logit_scale`` (multiply, as
Cohere does) and ``softcap`` (``t·tanh(z/t)``, as Gemma 2 does); when both are
given the scale is applied first.

One program streams one row in chunks of ``BLOCK_V`` values, each chunk's
load issued before the arithmetic on the previous one: a first sweep keeps an
online max and sum of exponentials (the row may be 262,144 wide), a second
sweep walks back over the row and writes the gradient ``softmax − one-hot``
through the chain rule of the transforms (the softmax part value by value,
the one-hot once per row). The gradient is therefore ready when the forward returns;
``backward`` only multiplies by ``grad_output`` and skips even that when
``grad_output`` is 1 (the ``loss.backward()`` case), deciding on the device.

Run this file (``python -m examples.cross_entropy.kernel``) for a quick check.
"""

from __future__ import annotations

import math
import numbers

import academy  # noqa: F401  (sets up the interpreter before triton is imported)
from academy import INTERPRETED
from academy.grid import sm_count
from academy.validation import check_tensor

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

REDUCTIONS = ("mean", "sum", "none")


# --8<-- [start:reference]
def transform_logits(z: torch.Tensor, softcap: float | None, logit_scale: float | None) -> torch.Tensor:
    """The logits the loss sees: scaled first, then soft-capped."""
    if logit_scale is not None:
        z = z * logit_scale
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    return z


def reference(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    softcap: float | None = None,
    logit_scale: float | None = None,
) -> torch.Tensor:
    """PyTorch's cross entropy on the transformed logits, computed in fp32 (float64 stays float64).

    ``logits`` is ``(..., V)`` and ``target`` is ``(...)``: the leading dimensions are tokens.
    """
    z = logits if logits.dtype == torch.float64 else logits.float()
    z = transform_logits(z.reshape(-1, z.shape[-1]), softcap, logit_scale)
    loss = F.cross_entropy(
        z, target.reshape(-1), ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing
    )
    return loss.reshape(target.shape).to(logits.dtype) if reduction == "none" else loss.to(logits.dtype)


# --8<-- [end:reference]


# --8<-- [start:helpers]
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
"""e^u is computed as 2^(u·LOG2E) (LOG2E = 1 / ln 2), the hardware's exp2 instruction."""


@triton.jit
def _tanh(u):
    return 2.0 * tl.sigmoid(2.0 * u) - 1.0  # libdevice's tanh is unavailable in the interpreter


@triton.jit
def _transform(x, softcap, logit_scale, HAS_SOFTCAP: tl.constexpr, HAS_SCALE: tl.constexpr):
    z = x
    if HAS_SCALE:
        z = _mul_rounded(z, logit_scale)
    if HAS_SOFTCAP:
        z = _mul_rounded(_tanh(z / softcap), softcap)
    return z


_INTERPRETED = tl.constexpr(INTERPRETED)


@triton.jit
def _mul_rounded(a, b):
    """a·b, rounded to fp32 before anything uses it. Left to itself the compiler fuses a product into
    the subtraction after it (a fused multiply-add, whose product is exact): sweep 2's z − lse then
    sees a z that differs from the rounded one sweep 1 took the maximum of by up to half an fp32
    step of z, hundreds at |z| ~ 1e10, and 2^that overflows. ``mul.rn`` is never fused."""
    if _INTERPRETED:
        return a * b
    else:
        return tl.inline_asm_elementwise(
            "mul.rn.f32 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.float32, is_pure=True, pack=1
        )


# --8<-- [end:helpers]


# --8<-- [start:row_span]
@triton.jit
def row_span(row, n_cols, x_row_stride, VEC: tl.constexpr):
    """Where a row's whole 16-byte vectors (``VEC`` values each) lie, counted in elements from the base.

    Returns the row's first column, the first whole vector's offset (``aligned``), the ``head``
    (the fewer than ``VEC`` columns before it) and the ``body`` (the columns of whole vectors
    from ``aligned`` on, a multiple of ``VEC``). The columns after the body are the tail."""
    start = row * x_row_stride
    aligned = (start + VEC - 1) // VEC * VEC  # (1)!
    head = tl.minimum(aligned - start, n_cols).to(tl.int32)
    body = (n_cols - head) // VEC * VEC  # (2)!
    return start, aligned, head, body


@triton.jit
def edge_columns(head, body, n_cols, VEC: tl.constexpr):
    """The columns outside the body, as one small block: lanes [0, VEC) are the head's columns,
    lanes [VEC, 2·VEC) the tail's; the mask keeps the ones that exist."""
    lanes = tl.arange(0, 2 * VEC)
    cols = tl.where(lanes < VEC, lanes, head + body + lanes - VEC)
    in_head = lanes < VEC
    return cols, (in_head & (lanes < head)) | (~in_head & (cols < n_cols))  # (3)!


# --8<-- [end:row_span]


# --8<-- [start:kernel]
@triton.jit
def fetch_row_start(
    row,
    x_ptr,
    target_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    BLOCK_V: tl.constexpr,
    VEC: tl.constexpr,
    EDGES: tl.constexpr,
    KEEP: tl.constexpr,
):
    """A row's target, the first chunk of its body and its edges (head and tail columns).
    A row past the end (the last row's "next") fetches no logits."""
    lanes = tl.arange(0, BLOCK_V)
    valid = row < n_rows
    row = tl.minimum(row, n_rows - 1)  # a valid address for the target
    start, aligned, head, body = row_span(row, n_cols, x_row_stride, VEC)
    width = tl.where(valid, n_cols, 0)
    head, body = tl.where(valid, head, 0), tl.where(valid, body, 0)
    edge_cols, edge_mask = edge_columns(head, body, width, VEC)
    x_first = tl.load(x_ptr + aligned + lanes, mask=lanes < body, other=0.0, eviction_policy=KEEP)
    if EDGES:
        x_edge = tl.load(x_ptr + start + edge_cols, mask=edge_mask, other=0.0)
    else:  # every row starts and ends on a whole vector: no edges to read
        x_edge = tl.zeros([2 * VEC], x_ptr.dtype.element_ty)
    return tl.load(target_ptr + row), x_first, x_edge


@triton.jit
def cross_entropy_row(
    row,
    y,
    x_first,
    x_edge,
    next_row,  # int64 rows; this row's target, first chunk and edges, already fetched
    x_ptr,
    target_ptr,
    loss_ptr,
    grad_ptr,
    log2_weight,
    smooth_weight,
    n_rows,
    n_cols,
    x_row_stride,
    grad_shift,  # strides in elements; grad's row stride minus x's
    ignore_index,
    label_smoothing,
    softcap,
    logit_scale,
    HAS_SOFTCAP: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    WRITE_GRAD: tl.constexpr,
    BLOCK_V: tl.constexpr,
    VEC: tl.constexpr,
    EDGES: tl.constexpr,
    PER_LANE: tl.constexpr,
    KEEP: tl.constexpr,
    STREAM: tl.constexpr,  # eviction hints ("" for none)
):
    start, aligned, head, body = row_span(row, n_cols, x_row_stride, VEC)  # (1)!
    x_row = x_ptr + start  # column 0
    x_body = x_ptr + aligned  # the body's first column: a whole 16-byte vector
    grad_row = grad_ptr + start + row * grad_shift
    grad_body = grad_ptr + aligned + row * grad_shift
    lanes = tl.arange(0, BLOCK_V)
    full_end = body // BLOCK_V * BLOCK_V  # the body's whole chunks end here; a partial one may follow
    edge_cols, edge_mask = edge_columns(head, body, n_cols, VEC)

    if y == ignore_index:  # (2)!
        y_next, x_first_next, x_edge_next = fetch_row_start(
            next_row, x_ptr, target_ptr, n_rows, n_cols, x_row_stride, BLOCK_V, VEC, EDGES, KEEP
        )
        tl.store(loss_ptr + row, 0.0)
        if WRITE_GRAD:
            zeros = tl.zeros([BLOCK_V], tl.float32).to(grad_ptr.dtype.element_ty)
            for chunk in range(0, body, BLOCK_V):
                tl.store(grad_body + chunk + lanes, zeros, mask=chunk + lanes < body)
            if EDGES:
                tl.store(
                    grad_row + edge_cols, tl.zeros([2 * VEC], tl.float32).to(grad_ptr.dtype.element_ty), mask=edge_mask
                )
    else:
        # Sweep 1: online log-sum-exp (a running max and a running sum of exp) over the body.
        if PER_LANE:
            running_max = tl.full([BLOCK_V], -float("inf"), tl.float32)
        else:
            running_max = tl.full([], -float("inf"), tl.float32)
        running_sum = tl.zeros([BLOCK_V], tl.float32)
        sum_z = tl.zeros([BLOCK_V], tl.float32)  # Σ z_j, for label smoothing
        x_next = x_first
        for chunk in range(0, body, BLOCK_V):
            cols = chunk + lanes
            x = x_next
            x_next = tl.load(
                x_body + BLOCK_V + cols,
                mask=BLOCK_V + cols < body,
                other=0.0,  # (3)!
                eviction_policy=KEEP,
            )
            z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
            if chunk < full_end:  # (4)!
                if HAS_SMOOTHING:
                    sum_z += z
            else:
                z = tl.where(cols < body, z, -float("inf"))  # (5)!
                if HAS_SMOOTHING:
                    sum_z += tl.where(cols < body, z, 0.0)
            running_max, running_sum = _online_lse_step(z, running_max, running_sum, PER_LANE)
        z_edge = _transform(x_edge.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
        z_edge = tl.where(edge_mask, z_edge, -float("inf"))
        in_range = (y >= 0) & (y < n_cols)
        x_y = tl.load(x_row + tl.where(in_range, y, 0)).to(tl.float32)  # (6)!
        if WRITE_GRAD:  # sweep 2 starts at the body's last chunk: that load flies while the loss is computed
            last = tl.maximum(tl.cdiv(body, BLOCK_V) - 1, 0) * BLOCK_V
            x_last = tl.load(x_body + last + lanes, mask=last + lanes < body, other=0.0, eviction_policy=STREAM)
        lse = _log_sum_exp(running_max, running_sum, z_edge, PER_LANE, EDGES)  # (7)!
        y_next, x_first_next, x_edge_next = fetch_row_start(
            next_row,
            x_ptr,
            target_ptr,
            n_rows,
            n_cols,
            x_row_stride,  # (8)!
            BLOCK_V,
            VEC,
            EDGES,
            KEEP,
        )

        z_y = tl.where(in_range, _transform(x_y, softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE), float("nan"))
        if HAS_SMOOTHING:
            sum_all = tl.sum(sum_z, axis=0)
            if EDGES:
                sum_all += tl.sum(tl.where(edge_mask, z_edge, 0.0), axis=0)
            mean_z = sum_all / n_cols
            loss = lse - (1.0 - label_smoothing) * z_y - label_smoothing * mean_z  # (9)!
        else:
            loss = lse - z_y
        tl.store(loss_ptr + row, loss)

        if WRITE_GRAD:
            # Sweep 2: the edges (their values are still in registers), then the body backwards from its
            # last chunk: the chunks sweep 1 read last are the likeliest in L2.
            if EDGES:
                dz_edge = _dlogits(z_edge, lse, log2_weight, smooth_weight, softcap, HAS_SOFTCAP, HAS_SMOOTHING)
                tl.store(grad_row + edge_cols, dz_edge.to(grad_ptr.dtype.element_ty), mask=edge_mask)
            x_next = x_last
            if full_end < body:  # the partial chunk first, masked
                cols = full_end + lanes
                x = x_next
                x_next = tl.load(x_body + cols - BLOCK_V, mask=cols >= BLOCK_V, other=0.0, eviction_policy=STREAM)
                z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
                dz = _dlogits(z, lse, log2_weight, smooth_weight, softcap, HAS_SOFTCAP, HAS_SMOOTHING)
                tl.store(grad_body + cols, dz.to(grad_ptr.dtype.element_ty), mask=cols < body, eviction_policy=STREAM)
            for i in range(0, full_end // BLOCK_V):  # then the whole chunks, unmasked
                cols = full_end - (i + 1) * BLOCK_V + lanes
                x = x_next
                x_next = tl.load(
                    x_body + cols - BLOCK_V,
                    mask=cols >= BLOCK_V,
                    other=0.0,  # (10)!
                    eviction_policy=STREAM,
                )
                z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
                dz = _dlogits(z, lse, log2_weight, smooth_weight, softcap, HAS_SOFTCAP, HAS_SMOOTHING)  # (11)!
                tl.store(grad_body + cols, dz.to(grad_ptr.dtype.element_ty), eviction_policy=STREAM)
            _store_target_gradient(
                grad_row,
                y,
                in_range,
                z_y,
                lse,
                log2_weight,  # (12)!
                smooth_weight,
                label_smoothing,
                softcap,
                HAS_SOFTCAP,
            )
    return y_next, x_first_next, x_edge_next


@triton.jit
def _online_lse_step(z, running_max, running_sum, PER_LANE: tl.constexpr):
    """Fold one chunk of transformed logits into the running log-sum-exp (sweep 1's recurrence).

    ``running_max`` is one value per lane (``PER_LANE``: no reduction in the loop, but two exp per
    value) or one for the row (a reduction per chunk, one exp per value). Each term is
    2^((z − m)·log2e): the subtraction comes first, so no exponent is ever above 0."""
    if PER_LANE:
        new_max = tl.maximum(running_max, z)
    else:
        new_max = tl.maximum(running_max, tl.max(z, axis=0))
    safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
    running_sum = (
        running_sum * tl.math.exp2((running_max - safe_max) * LOG2E)  # (13)!
        + tl.math.exp2((z - safe_max) * LOG2E)
    )
    return new_max, running_sum


@triton.jit
def _log_sum_exp(running_max, running_sum, z_edge, PER_LANE: tl.constexpr, EDGES: tl.constexpr):
    """lse = m + ln 2 · log2 s from sweep 1's state, with the row's edge values folded in last."""
    if PER_LANE:  # rescale each lane's sum to the row's maximum
        row_max = tl.max(running_max, axis=0)
        safe_max = tl.where(row_max == -float("inf"), 0.0, row_max)
        total = tl.sum(running_sum * tl.math.exp2((running_max - safe_max) * LOG2E), axis=0)
    else:
        row_max = running_max
        total = tl.sum(running_sum, axis=0)
    if EDGES:
        new_max = tl.maximum(row_max, tl.max(z_edge, axis=0))
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
        edge_sum = tl.sum(tl.math.exp2((z_edge - safe_max) * LOG2E), axis=0)
        total = total * tl.math.exp2((row_max - safe_max) * LOG2E) + edge_sum
        row_max = new_max
    return row_max + LN2 * tl.log2(total)


@triton.jit
def _row_weight(n_valid_ptr, MEAN: tl.constexpr):
    """d(reduced loss)/d(row loss): 1/N for the mean, read once per program; 1 for the sum.
    N = 0 only when every row is ignored, and then no row uses the weight: 1/max(N, 1) avoids a 1/0."""
    if MEAN:
        return 1.0 / tl.maximum(tl.load(n_valid_ptr), 1).to(tl.float32)
    else:
        return 1.0


@triton.jit
def _gradient_weights(n_valid_ptr, n_cols, label_smoothing, logit_scale, HAS_SCALE: tl.constexpr, MEAN: tl.constexpr):
    """The gradient's per-program constants: log2(w·s), the row weight times the logit scale, which
    every p_j takes in its exponent, and ε/V·w·s, the smoothed target's share of every column."""
    weight = _row_weight(n_valid_ptr, MEAN)
    if HAS_SCALE:
        weight = weight * logit_scale
    return tl.log2(weight), label_smoothing / n_cols * weight


@triton.jit
def _dlogits(z, lse, log2_weight, minus, softcap, HAS_SOFTCAP: tl.constexpr, SUBTRACT: tl.constexpr):
    """The gradient at transformed logits z, times w·s: (p - minus) through the cap's chain rule, with
    p = e^(z - lse). ``minus`` is ε/V·w·s at every column, (ε/V + 1 - ε)·w·s at the target's."""
    dz = tl.math.exp2((z - lse) * LOG2E + log2_weight)  # (14)!
    if SUBTRACT:
        dz = dz - minus
    if HAS_SOFTCAP:
        capped = z / softcap
        dz = dz * (1.0 - capped * capped)  # (15)!
    return dz


@triton.jit
def _store_target_gradient(
    grad_row, y, in_range, z_y, lse, log2_weight, smooth_weight, label_smoothing, softcap, HAS_SOFTCAP: tl.constexpr
):
    """Overwrite the target's column with its full gradient, one-hot included. The barrier orders every
    thread's store of the row (the column's first value among them) before this one."""
    tl.debug_barrier()
    target_weight = smooth_weight + (1.0 - label_smoothing) * tl.math.exp2(log2_weight)
    dz_y = _dlogits(z_y, lse, log2_weight, target_weight, softcap, HAS_SOFTCAP, True)
    tl.store(grad_row + tl.where(in_range, y, 0), dz_y.to(grad_row.dtype.element_ty), mask=in_range)


@triton.jit
def cross_entropy_kernel(
    x_ptr,
    target_ptr,
    loss_ptr,
    grad_ptr,
    n_valid_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    grad_shift,
    ignore_index,
    label_smoothing,
    softcap,
    logit_scale,
    HAS_SOFTCAP: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    WRITE_GRAD: tl.constexpr,
    MEAN: tl.constexpr,
    BLOCK_V: tl.constexpr,
    VEC: tl.constexpr,  # values in 16 bytes
    EDGES: tl.constexpr,  # some row starts or ends inside a 16-byte vector
    PER_LANE: tl.constexpr,
    KEEP: tl.constexpr,
    STREAM: tl.constexpr,
    PERSISTENT: tl.constexpr,  # a fixed grid of programs looping over rows
):
    first = tl.program_id(0).to(tl.int64)  # (16)!
    log2_weight, smooth_weight = _gradient_weights(
        n_valid_ptr,
        n_cols,
        label_smoothing,
        logit_scale,  # (17)!
        HAS_SCALE,
        MEAN,
    )
    y, x_first, x_edge = fetch_row_start(
        first, x_ptr, target_ptr, n_rows, n_cols, x_row_stride, BLOCK_V, VEC, EDGES, KEEP
    )
    step = tl.num_programs(0) if PERSISTENT else n_rows  # one program per row: nothing to fetch ahead
    for row in range(first, n_rows, step):
        y, x_first, x_edge = cross_entropy_row(
            row,
            y,
            x_first,
            x_edge,
            tl.minimum(row + step, n_rows),
            x_ptr,
            target_ptr,
            loss_ptr,
            grad_ptr,
            log2_weight,
            smooth_weight,
            n_rows,
            n_cols,
            x_row_stride,
            grad_shift,
            ignore_index,
            label_smoothing,
            softcap,
            logit_scale,
            HAS_SOFTCAP,
            HAS_SCALE,
            HAS_SMOOTHING,
            WRITE_GRAD,
            BLOCK_V,
            VEC,
            EDGES,
            PER_LANE,
            KEEP,
            STREAM,
        )


# --8<-- [end:kernel]


# --8<-- [start:split_kernel]
@triton.jit
def cross_entropy_split_kernel(
    x_ptr,
    target_ptr,
    loss_ptr,
    grad_ptr,
    n_valid_ptr,
    partial_ptr,
    arrived_ptr,
    n_rows,
    n_cols,
    n_chunks,
    x_row_stride,
    grad_row_stride,
    ignore_index,
    label_smoothing,
    softcap,
    logit_scale,
    HAS_SOFTCAP: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    MEAN: tl.constexpr,
    BLOCK_V: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
    PHASE: tl.constexpr,  # 0: one launch, programs wait for each other; 1 then 2: two launches
    LOAD_HINT: tl.constexpr,
    STORE_HINT: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    chunk = tl.program_id(0) % n_chunks  # (1)!
    cols = chunk * BLOCK_V + tl.arange(0, BLOCK_V)
    mask = cols < n_cols
    slots = tl.arange(0, CHUNKS_P2)
    log2_weight, smooth_weight = _gradient_weights(n_valid_ptr, n_cols, label_smoothing, logit_scale, HAS_SCALE, MEAN)
    first_row = (tl.program_id(0) // n_chunks).to(tl.int64)
    step = tl.num_programs(0) // n_chunks
    if PREFETCH:
        x_next = tl.load(
            x_ptr + first_row * x_row_stride + cols,
            other=0.0,
            eviction_policy=LOAD_HINT,
            mask=cols < tl.where(first_row < n_rows, n_cols, 0),
        )
    for row in range(first_row, n_rows, step):  # (2)!
        if PREFETCH:  # the next row's chunk is on its way while this row waits for its partners
            x = x_next
            x_next = tl.load(
                x_ptr + (row + step) * x_row_stride + cols,
                other=0.0,
                eviction_policy=LOAD_HINT,
                mask=cols < tl.where(row + step < n_rows, n_cols, 0),
            )
        else:
            x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0, eviction_policy=LOAD_HINT)  # (3)!
        y = tl.load(target_ptr + row)
        grad_row = grad_ptr + row * grad_row_stride
        in_range = (y >= 0) & (y < n_cols)
        owner = tl.where(in_range, y // BLOCK_V, 0)  # the program that writes the row's loss
        if y == ignore_index:  # every program of the row sees it: nobody waits
            if PHASE != 1:
                tl.store(grad_row + cols, tl.zeros([BLOCK_V], tl.float32).to(grad_ptr.dtype.element_ty), mask=mask)
                if chunk == 0:
                    tl.store(loss_ptr + row, 0.0)
        else:
            z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
            z = tl.where(mask, z, -float("inf"))
            partials = partial_ptr + row * (3 * CHUNKS_P2)  # per chunk: max, Σ exp(z - max), Σ z
            if PHASE != 2:
                chunk_max = tl.max(z, axis=0)
                safe_max = tl.where(chunk_max == -float("inf"), 0.0, chunk_max)
                tl.store(partials + chunk, chunk_max)
                tl.store(partials + CHUNKS_P2 + chunk, tl.sum(tl.exp(z - safe_max), axis=0))
                if HAS_SMOOTHING:
                    tl.store(partials + 2 * CHUNKS_P2 + chunk, tl.sum(tl.where(mask, z, 0.0), axis=0))
                if PHASE == 0:
                    tl.debug_barrier()  # (4)!
                    tl.atomic_add(arrived_ptr + row, 1, sem="release", scope="gpu")
            if PHASE != 1:
                if PHASE == 0:
                    while tl.atomic_add(arrived_ptr + row, 0, sem="acquire", scope="gpu") < n_chunks:  # (5)!
                        pass
                used = slots < n_chunks
                maxes = tl.load(partials + slots, mask=used, other=-float("inf"), cache_modifier=".cg")
                sums = tl.load(partials + CHUNKS_P2 + slots, mask=used, other=0.0, cache_modifier=".cg")
                row_max = tl.max(maxes, axis=0)
                safe_row_max = tl.where(row_max == -float("inf"), 0.0, row_max)
                lse = safe_row_max + tl.log(tl.sum(sums * tl.exp(maxes - safe_row_max), axis=0))  # (6)!
                dz = _dlogits(z, lse, log2_weight, smooth_weight, softcap, HAS_SOFTCAP, HAS_SMOOTHING)
                tl.store(grad_row + cols, dz.to(grad_ptr.dtype.element_ty), mask=mask, eviction_policy=STORE_HINT)
                if chunk == owner:  # z_y from registers: with grad_in_logits, other chunks may be gradients already
                    z_y = tl.where(in_range, tl.sum(tl.where(cols == y, z, 0.0), axis=0), float("nan"))
                    if HAS_SMOOTHING:
                        mean_z = (
                            tl.sum(
                                tl.load(partials + 2 * CHUNKS_P2 + slots, mask=used, other=0.0, cache_modifier=".cg"),
                                axis=0,
                            )
                            / n_cols
                        )
                        loss = lse - (1.0 - label_smoothing) * z_y - label_smoothing * mean_z
                    else:
                        loss = lse - z_y
                    tl.store(loss_ptr + row, loss)
                    _store_target_gradient(
                        grad_row,
                        y,
                        in_range,
                        z_y,
                        lse,
                        log2_weight,
                        smooth_weight,
                        label_smoothing,
                        softcap,
                        HAS_SOFTCAP,
                    )


# --8<-- [end:split_kernel]


# --8<-- [start:scale_kernel]
@triton.jit
def scale_by_grad_output_kernel(
    g_ptr,
    grad_output_ptr,
    n_rows,
    n_cols,
    row_stride,
    PER_ROW: tl.constexpr,  # reduction="none": one grad_output per row
    BLOCK: tl.constexpr,
):
    go = tl.load(grad_output_ptr).to(tl.float32)  # (1)!
    if PER_ROW or go != 1.0:  # (2)!
        col_blocks = tl.cdiv(n_cols, BLOCK)
        for tile in range(
            tl.program_id(0).to(tl.int64), tl.cast(n_rows, tl.int64) * col_blocks, tl.num_programs(0)
        ):  # (3)!
            row = tile // col_blocks
            if PER_ROW:
                go = tl.load(grad_output_ptr + row).to(tl.float32)
            if go != 1.0:
                cols = (tile % col_blocks) * BLOCK + tl.arange(0, BLOCK)
                mask = cols < n_cols
                g = tl.load(g_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
                tl.store(g_ptr + row * row_stride + cols, (g * go).to(g_ptr.dtype.element_ty), mask=mask)


# --8<-- [end:scale_kernel]


# --8<-- [start:launch_config]
MAX_BLOCK_V = 16384
"""Chunk width of one sweep step (a row wider than this is streamed in chunks)."""
NUM_WARPS = 32
FORWARD_ONLY_SHRINK = 2
"""Without a gradient to write, chunks and warps are this many times smaller: the tuning sweep measured
the smaller programs faster for the forward alone and slower for the forward with its gradient."""
PER_LANE = False
"""Online max per lane (True) or per chunk (False); see the kernel's sweep 1."""
KEEP, STREAM = "evict_last", "evict_first"
"""Eviction hints for sweep 1's loads and sweep 2's loads and stores ("evict_last",
"evict_first" or "" for none)."""
PROGRAMS_PER_SM = 4
"""0: one program per row. k > 0: a persistent grid of k programs per SM looping over
rows, which caps the rows in flight (and so the L2 footprint of sweep 2's re-read)."""
SPLIT_ROWS = False
"""With a gradient to write: the split-row kernel (each row cut into chunks on separate
programs, one read of the logits) instead of the two sweeps of one program per row."""
SPLIT_BLOCK_V = 8192
"""Chunk of a row that one program of the split-row kernel holds in registers."""
SPLIT_WARPS = 16
SPLIT_PROGRAMS_PER_SM = 0
"""Programs per SM of the split-row kernel's grid: 0 for as many as fit at once."""
LOAD_HINT, STORE_HINT = "evict_first", "evict_first"
"""Eviction hints of the split-row kernel's one read and one write of each value."""
PREFETCH = True
"""The split-row kernel loads its chunk of the next row before it waits on this one."""
COOPERATIVE = True
"""Launch the waiting split-row grid as a cooperative grid: CUDA then refuses, rather than
hangs on, a grid that cannot be resident all at once."""


def launch_config(n_cols: int, write_grad: bool = True) -> dict[str, int]:
    """Meta-parameters for a row of ``n_cols`` values (the two-sweep kernel)."""
    shrink = 1 if write_grad else FORWARD_ONLY_SHRINK
    block_v = min(MAX_BLOCK_V // shrink, max(16, triton.next_power_of_2(n_cols)))
    num_warps = max(1, min(NUM_WARPS // shrink, block_v // 256))  # 8 to 16 values per thread and chunk
    return {
        "BLOCK_V": block_v,
        "num_warps": num_warps,
        "PER_LANE": PER_LANE,
        "KEEP": KEEP,
        "STREAM": STREAM,
        "PROGRAMS_PER_SM": PROGRAMS_PER_SM,
    }


def split_config(n_cols: int) -> dict[str, int]:
    """Meta-parameters of the split-row kernel for a row of ``n_cols`` values."""
    block_v = min(SPLIT_BLOCK_V, max(16, triton.next_power_of_2(n_cols)))
    n_chunks = triton.cdiv(n_cols, block_v)
    return {
        "BLOCK_V": block_v,
        "CHUNKS_P2": triton.next_power_of_2(n_chunks),
        "num_warps": max(1, min(SPLIT_WARPS, block_v // 256)),
        "LOAD_HINT": LOAD_HINT,
        "STORE_HINT": STORE_HINT,
        "PREFETCH": PREFETCH,
        "PROGRAMS_PER_SM": SPLIT_PROGRAMS_PER_SM,
    }


def _grid(n_rows: int, programs_per_sm: int) -> tuple[int]:
    if programs_per_sm <= 0:
        return (n_rows,)
    return (min(n_rows, sm_count() * programs_per_sm),)


SCALE_BLOCK = 4096
SCALE_PROGRAMS_PER_SM = 8
"""The scaling kernel's grid: a few programs per SM walking the gradient's tiles, so that the
common case (grad_output = 1, every program returns at once) launches about a thousand programs
on an H100, not one per tile (a quarter of a million at 8192 × 128256)."""
# --8<-- [end:launch_config]


# --8<-- [start:co_residency]
def programs_at_once(compiled) -> int:
    """How many programs of a compiled kernel one SM holds at once (threads, registers, shared memory).

    The split-row kernel's programs wait for each other: its grid must never
    exceed this times the SM count, or a waiting program could hold the SM
    that the program it waits for needs.
    """
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    warps = compiled.metadata.num_warps
    try:
        compiled._init_handles()  # loads the binary and reads its register count
    except AttributeError:  # another Triton: one program per SM always fits
        return 1
    regs_per_warp = triton.cdiv(max(compiled.n_regs, 1) * 32, 256) * 256  # allocated per warp, 256 at a time
    regs_per_quarter = getattr(props, "regs_per_multiprocessor", 65536) // 4  # four schedulers, each its own file
    by_regs = 4 * (regs_per_quarter // regs_per_warp) // warps
    by_threads = props.max_threads_per_multi_processor // (32 * warps)
    by_smem = getattr(props, "shared_memory_per_multiprocessor", 228 * 1024) // (compiled.metadata.shared + 1024)
    return max(1, min(by_regs, by_threads, by_smem, 32))  # (1)!


_AT_ONCE: dict[tuple, int] = {}


def _split_grid(args: tuple, meta: dict, n_rows: int, n_chunks: int, programs_per_sm: int) -> int:
    """Programs of a waiting (PHASE=0) launch: whole rows, all of them resident at once; 0 if none fit."""
    key = (
        tuple(
            a.dtype if isinstance(a, torch.Tensor) else (type(a), a % 16 == 0 if isinstance(a, int) else 0)
            for a in args
        ),
        tuple(sorted(meta.items())),
    )
    if key not in _AT_ONCE:
        compiled = cross_entropy_split_kernel.warmup(
            *args, grid=(1,), PHASE=0, launch_cooperative_grid=COOPERATIVE, **meta
        )
        _AT_ONCE[key] = programs_at_once(compiled)
    per_sm = min(programs_per_sm, _AT_ONCE[key]) if programs_per_sm > 0 else _AT_ONCE[key]
    return min(n_rows, sm_count() * per_sm // n_chunks) * n_chunks  # (2)!


# --8<-- [end:co_residency]


# --8<-- [start:launcher]
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_VOCABULARY = 2**31 - 2**16
"""Column offsets are int32: a chunk's prefetch looks up to two chunks past the row's last column."""


def check_options(ignore_index, reduction, label_smoothing, softcap, logit_scale) -> tuple:
    """Validate the options; returns them as Python numbers (NumPy scalars are accepted and converted)."""
    if isinstance(ignore_index, (bool, np.bool_)) or not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"ignore_index must be an int, got {type(ignore_index).__name__}")
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if (
        isinstance(label_smoothing, (bool, np.bool_))
        or not isinstance(label_smoothing, numbers.Real)
        or not 0.0 <= label_smoothing <= 1.0
    ):
        raise ValueError(f"label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
    transforms = []
    for name, value in (("softcap", softcap), ("logit_scale", logit_scale)):
        if value is not None:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a Python number or None, got {type(value).__name__}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {value}")
            value = float(value)
        transforms.append(value)
    return (int(ignore_index), reduction, float(label_smoothing), *transforms)


def check_inputs(logits: torch.Tensor, target: torch.Tensor) -> None:
    check_tensor("logits", logits, SUPPORTED_DTYPES)
    check_tensor("target", target, (torch.int64,))
    if logits.dim() < 2:
        raise ValueError(f"logits must be (tokens, vocabulary) or (batch, seq, vocabulary), got {tuple(logits.shape)}")
    if target.shape != logits.shape[:-1]:
        raise ValueError(f"target must have shape {tuple(logits.shape[:-1])}, got {tuple(target.shape)}")
    if target.device != logits.device:
        raise ValueError(f"devices differ: logits on {logits.device}, target on {target.device}")
    if logits.shape[-1] == 0:
        raise ValueError("logits has an empty vocabulary dimension")
    if target.numel() > 2**31 - 1 or logits.shape[-1] > MAX_VOCABULARY:  # (1)!
        raise ValueError(
            f"logits of shape {tuple(logits.shape)}: at most 2**31 - 1 tokens and 2**31 - 2**16 vocabulary entries"
        )


def row_layout(logits: torch.Tensor) -> dict[str, int | bool]:
    """The kernel's view of the rows' alignment: ``VEC`` values fill 16 bytes, and ``EDGES`` compiles in the
    head and tail columns, needed unless every row starts and ends on a whole vector (the width and the
    row stride multiples of ``VEC``)."""
    vec = 16 // logits.element_size()
    return {"VEC": vec, "EDGES": logits.shape[1] % vec != 0 or (logits.shape[0] > 1 and logits.stride(0) % vec != 0)}


def _forward(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    reduction: str,
    label_smoothing: float,
    softcap: float | None,
    logit_scale: float | None,
    grad: torch.Tensor | None,
    n_valid: torch.Tensor,
    config: dict[str, int] | None = None,
) -> torch.Tensor:
    """Per-row losses (fp32); when ``grad`` is given, also writes d(reduced loss)/d(logits) into it.

    ``n_valid``: :func:`count_valid` of the whole batch (the fused linear driver calls this per chunk of it).
    """
    n_rows, n_cols = logits.shape
    loss_rows = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    write_grad = grad is not None
    options = (ignore_index, float(label_smoothing), float(softcap or 1.0), float(logit_scale or 1.0))
    flags = dict(
        HAS_SOFTCAP=softcap is not None,
        HAS_SCALE=logit_scale is not None,
        HAS_SMOOTHING=label_smoothing > 0,
        MEAN=reduction == "mean",
    )
    if write_grad and SPLIT_ROWS and config is None:
        _launch_split(logits, target, loss_rows, grad, n_valid, options, flags)
        return loss_rows
    config = dict(config or launch_config(n_cols, write_grad))
    programs_per_sm = config.pop("PROGRAMS_PER_SM", 0)
    cross_entropy_kernel[_grid(n_rows, programs_per_sm)](  # (3)!
        logits,
        target,
        loss_rows,
        grad if write_grad else loss_rows,
        n_valid,
        n_rows,
        n_cols,
        logits.stride(0),
        grad.stride(0) - logits.stride(0) if write_grad else 0,
        *options,
        WRITE_GRAD=write_grad,
        **row_layout(logits),
        PERSISTENT=programs_per_sm > 0,
        **flags,
        **config,
    )
    return loss_rows


def _launch_split(logits, target, loss_rows, grad, n_valid, options, flags) -> None:
    """The split-row kernel: one launch whose programs wait for each other on a GPU;
    two launches (partials, then gradients) under the interpreter, which runs programs
    one after another, so that a program waiting for a later one would wait forever."""
    n_rows, n_cols = logits.shape
    meta = split_config(n_cols)
    programs_per_sm = meta.pop("PROGRAMS_PER_SM")
    n_chunks = triton.cdiv(n_cols, meta["BLOCK_V"])
    partials = torch.empty(n_rows * 3 * meta["CHUNKS_P2"], dtype=torch.float32, device=logits.device)
    arrived = torch.zeros(n_rows, dtype=torch.int32, device=logits.device)
    args = (
        logits,
        target,
        loss_rows,
        grad,
        n_valid,
        partials,
        arrived,
        n_rows,
        n_cols,
        n_chunks,
        logits.stride(0),
        grad.stride(0),
        *options,
    )
    meta.update(flags)
    grid = 0 if INTERPRETED else _split_grid(args, meta, n_rows, n_chunks, programs_per_sm)
    if grid:
        cross_entropy_split_kernel[(grid,)](*args, PHASE=0, launch_cooperative_grid=COOPERATIVE, **meta)
        return
    grid = min(n_rows, 2 * sm_count()) * n_chunks  # no waiting: any grid is safe
    cross_entropy_split_kernel[(grid,)](*args, PHASE=1, **meta)  # (4)!
    cross_entropy_split_kernel[(grid,)](*args, PHASE=2, **meta)


COUNT_BLOCK = 2048


# One block of targets per program; each adds its count of non-ignored rows to the zeroed counter.
@triton.jit
def count_valid_kernel(target_ptr, n_rows, ignore_index, count_ptr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(target_ptr + rows, mask=rows < n_rows, other=ignore_index)
    tl.atomic_add(count_ptr, tl.sum((y != ignore_index).to(tl.int32), axis=0))  # integers: any order, same sum


def count_valid(target: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """N, the tokens that count for the mean, of a contiguous ``target``: an int32 device tensor, so no
    ``.item()`` stalls the host. One small kernel after a memset, where PyTorch's
    ``(target != ignore_index).sum()`` launches three (compare, widen, sum)."""
    count = torch.zeros((), dtype=torch.int32, device=target.device)
    if target.numel():
        count_valid_kernel[(triton.cdiv(target.numel(), COUNT_BLOCK),)](  # (2)!
            target, target.numel(), ignore_index, count, BLOCK=COUNT_BLOCK, num_warps=4
        )
    return count


def reduce_losses(loss_rows: torch.Tensor, n_valid: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return loss_rows
    total = loss_rows.sum()
    if reduction == "sum":
        return total
    return total / n_valid  # (5)!


def scale_by_grad_output(g: torch.Tensor, grad_output: torch.Tensor) -> None:
    """``g *= grad_output`` in place (per row if ``grad_output`` is a vector); a no-op on the device when it is 1."""
    n_rows, n_cols = g.shape
    if n_rows == 0:
        return
    grad_output = grad_output.contiguous()
    tiles = n_rows * triton.cdiv(n_cols, SCALE_BLOCK)
    scale_by_grad_output_kernel[(min(tiles, SCALE_PROGRAMS_PER_SM * sm_count()),)](
        g, grad_output, n_rows, n_cols, g.stride(0), PER_ROW=grad_output.dim() > 0, BLOCK=SCALE_BLOCK, num_warps=8
    )


# --8<-- [end:launcher]


def gradient_buffer(logits: torch.Tensor) -> torch.Tensor:
    """An empty ``(T, V)`` gradient whose rows start where the logits' rows do, modulo 16 elements.

    The kernel finds each row's whole 16-byte vectors from the logits' row offset and writes the
    gradient at the same columns; the compiler can vectorise both only if the two row strides differ
    by a multiple of 16 elements. Contiguous logits get a contiguous buffer; a row-strided view (the
    first V columns of padded logits) gets rows padded by fewer than 16 elements."""
    n_rows, n_cols = logits.shape
    pad = (logits.stride(0) - n_cols) % 16 if n_rows > 1 else 0
    grad = torch.empty((n_rows, n_cols + pad), dtype=logits.dtype, device=logits.device)
    return grad[:, :n_cols] if pad else grad


def refuse_double_backward(op: str) -> None:
    """A backward called with ``create_graph=True`` (a gradient penalty, a Hessian-vector product) must
    return a gradient that is itself differentiable. These ops compute their gradient with a kernel,
    in the forward: it has no derivative, so refuse rather than let the second derivative lose terms."""
    if torch.is_grad_enabled():
        raise RuntimeError(
            f"{op} has no second derivative: its gradient comes from a kernel, not from differentiable "
            "operations, so backward(create_graph=True) is refused (use torch.nn.functional.cross_entropy "
            "for a gradient penalty)"
        )


def check_writable_in_place(logits: torch.Tensor) -> None:
    """``grad_in_logits=True`` writes one gradient value over each logit: every element must have its own memory."""
    rows_apart = (
        logits.dim() == 2 and logits.stride(1) == 1 and (logits.shape[0] <= 1 or logits.stride(0) >= logits.shape[1])
    )
    if not (logits.is_contiguous() or rows_apart):
        raise ValueError(
            "grad_in_logits=True needs contiguous logits (or 2-D with unit column stride and rows that do not "
            f"overlap), got shape {tuple(logits.shape)} and strides {logits.stride()}: they are overwritten in place"
        )


# --8<-- [start:autograd]
class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction, label_smoothing, softcap, logit_scale, grad_in_logits):
        grad = logits if grad_in_logits else gradient_buffer(logits)  # (1)!
        n_valid = count_valid(target, ignore_index)
        loss_rows = _forward(
            logits, target, ignore_index, reduction, label_smoothing, softcap, logit_scale, grad, n_valid
        )
        ctx.save_for_backward(grad)
        ctx.mark_non_differentiable(target)
        ctx.used = False
        return reduce_losses(loss_rows, n_valid, reduction).to(logits.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        refuse_double_backward("cross_entropy")
        if ctx.used:  # (2)!
            raise RuntimeError("cross_entropy's backward scales its saved gradient in place: it can run only once")
        ctx.used = True
        (grad,) = ctx.saved_tensors
        scale_by_grad_output(grad, grad_output)  # (3)!
        return grad, None, None, None, None, None, None, None


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    softcap: float | None = None,
    logit_scale: float | None = None,
    *,
    grad_in_logits: bool = False,
) -> torch.Tensor:
    """Cross-entropy loss of ``(T, V)`` logits against ``(T,)`` int64 targets, differentiable in ``logits``.

    ``(B, S, V)`` logits with ``(B, S)`` targets are flattened to tokens; ``reduction="none"``
    returns the target's shape.

    ``grad_in_logits=True`` writes the gradient over ``logits`` (saving a
    ``(T, V)`` buffer): the caller's logits are destroyed by the forward and
    become ``logits.grad``'s storage. Off by default. Targets outside
    ``[0, V)`` other than ``ignore_index`` give a NaN loss (no host sync checks them).
    """
    args = check_options(ignore_index, reduction, label_smoothing, softcap, logit_scale)
    ignore_index = args[0]
    check_inputs(logits, target)
    if grad_in_logits:
        check_writable_in_place(logits)
    out_shape = target.shape
    logits, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1).contiguous()  # (B, S, V) -> (B·S, V)
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    if logits.shape[0] == 0:  # no tokens: PyTorch's values (NaN for the mean), and a backward that gives zeros
        loss = reduce_losses(logits.float().sum(-1), count_valid(target, ignore_index), reduction)
        return loss.reshape(out_shape if reduction == "none" else ()).to(logits.dtype)
    if logits.requires_grad and torch.is_grad_enabled():
        loss = _CrossEntropy.apply(logits, target, *args, grad_in_logits)
    else:
        n_valid = count_valid(target, ignore_index)
        loss_rows = _forward(logits, target, *args, grad=None, n_valid=n_valid)  # (4)!
        loss = reduce_losses(loss_rows, n_valid, reduction).to(logits.dtype)
    return loss.reshape(out_shape) if reduction == "none" else loss


# --8<-- [end:autograd]


class _CrossEntropyGradInBackward(torch.autograd.Function):
    """An ablation for the benchmarks: the classic split, gradient computed in ``backward``.

    The forward reads the logits once for the loss; the backward reads them
    again, recomputes the log-sum-exp and writes the gradient, then scales.
    """

    @staticmethod
    def forward(ctx, logits, target):
        n_valid = count_valid(target, -100)
        ctx.save_for_backward(logits, target, n_valid)
        return reduce_losses(
            _forward(logits, target, -100, "mean", 0.0, None, None, None, n_valid), n_valid, "mean"
        ).to(logits.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        refuse_double_backward("cross_entropy_grad_in_backward")
        logits, target, n_valid = ctx.saved_tensors
        grad = gradient_buffer(logits)
        _forward(logits, target, -100, "mean", 0.0, None, None, grad, n_valid)
        scale_by_grad_output(grad, grad_output)
        return grad, None


def cross_entropy_grad_in_backward(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    check_inputs(logits, target)
    return _CrossEntropyGradInBackward.apply(logits.contiguous(), target.contiguous())


if __name__ == "__main__":
    from academy import DEVICE

    for n_cols, options in ((1000, {}), (5003, {"softcap": 30.0, "logit_scale": 0.5, "label_smoothing": 0.1})):
        x = torch.randn(6, n_cols, device=DEVICE, requires_grad=True)
        t = torch.randint(0, n_cols, (6,), device=DEVICE)
        t[2] = -100
        loss = cross_entropy(x, t, **options)
        loss.backward()
        x_ref = x.detach().double().requires_grad_()
        loss_ref = reference(x_ref, t, **options)
        loss_ref.backward()
        fwd_error = abs(loss.item() - loss_ref.item()) / abs(loss_ref.item())
        bwd_error = ((x.grad - x_ref.grad).norm() / x_ref.grad.norm()).item()
        print(
            f"cross_entropy on {DEVICE}, 6×{n_cols} {options}: loss error {fwd_error:.1e}, grad error {bwd_error:.1e}"
        )
        assert fwd_error < 1e-5 and bwd_error < 1e-5
