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

import academy  # noqa: F401  (sets up the interpreter before triton is imported)
from academy import INTERPRETED
from academy.grid import sm_count
from academy.validation import check_tensor

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
        z = z * logit_scale
    if HAS_SOFTCAP:
        z = softcap * _tanh(z / softcap)
    return z


# --8<-- [end:helpers]


# --8<-- [start:kernel]
@triton.jit
def fetch_row_start(row, x_ptr, target_ptr, n_rows, n_cols, x_row_stride, BLOCK_V: tl.constexpr, KEEP: tl.constexpr):
    """A row's target and first chunk. A row past the end (the last row's "next") fetches no logits."""
    lanes = tl.arange(0, BLOCK_V)
    width = tl.where(row < n_rows, n_cols, 0)
    row = tl.minimum(row, n_rows - 1)  # a valid address for the target
    return tl.load(target_ptr + row), tl.load(
        x_ptr + row * x_row_stride + lanes, mask=lanes < width, other=0.0, eviction_policy=KEEP
    )


@triton.jit
def cross_entropy_row(
    row,
    y,
    x_first,
    next_row,  # int64 rows; this row's target and first chunk, already fetched
    x_ptr,
    target_ptr,
    loss_ptr,
    grad_ptr,
    log2_weight,
    smooth_weight,
    n_rows,
    n_cols,
    x_row_stride,
    grad_row_stride,  # strides in elements
    ignore_index,
    label_smoothing,
    softcap,
    logit_scale,
    HAS_SOFTCAP: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    WRITE_GRAD: tl.constexpr,
    BLOCK_V: tl.constexpr,
    PER_LANE: tl.constexpr,
    KEEP: tl.constexpr,
    STREAM: tl.constexpr,  # eviction hints ("" for none)
):
    x_row = x_ptr + row * x_row_stride  # (1)!
    grad_row = grad_ptr + row * grad_row_stride
    lanes = tl.arange(0, BLOCK_V)
    full_end = n_cols // BLOCK_V * BLOCK_V  # the row's whole chunks end here; a partial one may follow

    if y == ignore_index:  # (2)!
        y_next, x_first_next = fetch_row_start(next_row, x_ptr, target_ptr, n_rows, n_cols, x_row_stride, BLOCK_V, KEEP)
        tl.store(loss_ptr + row, 0.0)
        if WRITE_GRAD:
            for start in range(0, n_cols, BLOCK_V):
                cols = start + lanes
                tl.store(
                    grad_row + cols, tl.zeros([BLOCK_V], tl.float32).to(grad_ptr.dtype.element_ty), mask=cols < n_cols
                )
    else:
        # Sweep 1: online log-sum-exp (a running max and a running sum of exp).
        if PER_LANE:
            running_max = tl.full([BLOCK_V], -float("inf"), tl.float32)
        else:
            running_max = tl.full([], -float("inf"), tl.float32)
        running_max2 = running_max * LOG2E
        running_sum = tl.zeros([BLOCK_V], tl.float32)
        sum_z = tl.zeros([BLOCK_V], tl.float32)  # Σ z_j, for label smoothing
        x_next = x_first
        for start in range(0, n_cols, BLOCK_V):
            cols = start + lanes
            x = x_next
            x_next = tl.load(
                x_row + BLOCK_V + cols,
                mask=BLOCK_V + cols < n_cols,
                other=0.0,  # (3)!
                eviction_policy=KEEP,
            )
            z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
            if start < full_end:  # (4)!
                if HAS_SMOOTHING:
                    sum_z += z
            else:
                z = tl.where(cols < n_cols, z, -float("inf"))  # (5)!
                if HAS_SMOOTHING:
                    sum_z += tl.where(cols < n_cols, z, 0.0)
            running_max, running_max2, running_sum = _online_lse_step(
                z, running_max, running_max2, running_sum, PER_LANE
            )
        in_range = (y >= 0) & (y < n_cols)
        x_y = tl.load(x_row + tl.where(in_range, y, 0)).to(tl.float32)  # (6)!
        if WRITE_GRAD:  # sweep 2 starts at the row's last chunk: that load flies while the loss is computed
            last = (tl.cdiv(n_cols, BLOCK_V) - 1) * BLOCK_V
            x_last = tl.load(x_row + last + lanes, mask=last + lanes < n_cols, other=0.0, eviction_policy=STREAM)
        lse = _log_sum_exp(running_max, running_max2, running_sum, PER_LANE)  # (7)!
        y_next, x_first_next = fetch_row_start(
            next_row,
            x_ptr,
            target_ptr,
            n_rows,
            n_cols,
            x_row_stride,  # (8)!
            BLOCK_V,
            KEEP,
        )

        z_y = tl.where(in_range, _transform(x_y, softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE), float("nan"))
        if HAS_SMOOTHING:
            mean_z = tl.sum(sum_z, axis=0) / n_cols
            loss = lse - (1.0 - label_smoothing) * z_y - label_smoothing * mean_z  # (9)!
        else:
            loss = lse - z_y
        tl.store(loss_ptr + row, loss)

        if WRITE_GRAD:
            # Sweep 2, backwards from the last chunk: the chunks sweep 1 read last are the likeliest in L2.
            x_next = x_last
            if full_end < n_cols:  # the partial chunk first, masked
                cols = full_end + lanes
                x = x_next
                x_next = tl.load(x_row + cols - BLOCK_V, mask=cols >= BLOCK_V, other=0.0, eviction_policy=STREAM)
                z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
                dz = _dlogits(z, lse, log2_weight, smooth_weight, softcap, HAS_SOFTCAP, HAS_SMOOTHING)
                tl.store(grad_row + cols, dz.to(grad_ptr.dtype.element_ty), mask=cols < n_cols, eviction_policy=STREAM)
            for i in range(0, full_end // BLOCK_V):  # then the whole chunks, unmasked
                cols = full_end - (i + 1) * BLOCK_V + lanes
                x = x_next
                x_next = tl.load(
                    x_row + cols - BLOCK_V,
                    mask=cols >= BLOCK_V,
                    other=0.0,  # (10)!
                    eviction_policy=STREAM,
                )
                z = _transform(x.to(tl.float32), softcap, logit_scale, HAS_SOFTCAP, HAS_SCALE)
                dz = _dlogits(z, lse, log2_weight, smooth_weight, softcap, HAS_SOFTCAP, HAS_SMOOTHING)  # (11)!
                tl.store(grad_row + cols, dz.to(grad_ptr.dtype.element_ty), eviction_policy=STREAM)
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
    return y_next, x_first_next


@triton.jit
def _online_lse_step(z, running_max, running_max2, running_sum, PER_LANE: tl.constexpr):
    """Fold one chunk of transformed logits into the running log-sum-exp (sweep 1's recurrence).

    ``running_max`` is one value per lane (``PER_LANE``: no reduction in the loop, but two exp per
    value) or one for the row (a reduction per chunk, one exp per value). The sum is kept as
    Σ 2^(z·log2e − m2), with m2 = ``running_max2``, the max times log2(e) rounded to fp32: each term
    is then one fused multiply-add and one exp2, and :func:`_log_sum_exp` adds the rounding back."""
    if PER_LANE:
        new_max = tl.maximum(running_max, z)
    else:
        new_max = tl.maximum(running_max, tl.max(z, axis=0))
    new_max2 = new_max * LOG2E  # rounded once, and used as rounded by every term and rescale
    safe_max2 = tl.where(new_max2 == -float("inf"), 0.0, new_max2)
    running_sum = (
        running_sum * tl.math.exp2(running_max2 - safe_max2)  # (13)!
        + tl.math.exp2(tl.fma(z, LOG2E, -safe_max2))
    )
    return new_max, new_max2, running_sum


@triton.jit
def _log_sum_exp(running_max, running_max2, running_sum, PER_LANE: tl.constexpr):
    """lse from sweep 1's state: m + ln 2 · (log2 s − (m·log2e − m2)), where the residual m·log2e − m2
    (exact, from a fused multiply-add) is what rounding m2 took away from every term."""
    if PER_LANE:  # rescale each lane's sum to the row's maximum
        row_max = tl.max(running_max, axis=0)
        row_max2 = tl.max(running_max2, axis=0)  # rounding is monotonic: the max of the rounded values
        total = tl.sum(running_sum * tl.math.exp2(running_max2 - row_max2), axis=0)
    else:
        row_max = running_max
        row_max2 = running_max2
        total = tl.sum(running_sum, axis=0)
    residual = tl.where(row_max == -float("inf"), 0.0, tl.fma(row_max, LOG2E, -row_max2))
    return row_max + LN2 * (tl.log2(total) - residual)


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
    grad_row_stride,
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
    y, x_first = fetch_row_start(first, x_ptr, target_ptr, n_rows, n_cols, x_row_stride, BLOCK_V, KEEP)
    step = tl.num_programs(0) if PERSISTENT else n_rows  # one program per row: nothing to fetch ahead
    for row in range(first, n_rows, step):
        y, x_first = cross_entropy_row(
            row,
            y,
            x_first,
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
            grad_row_stride,
            ignore_index,
            label_smoothing,
            softcap,
            logit_scale,
            HAS_SOFTCAP,
            HAS_SCALE,
            HAS_SMOOTHING,
            WRITE_GRAD,
            BLOCK_V,
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


def check_options(ignore_index, reduction, label_smoothing, softcap, logit_scale) -> None:
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index must be an int, got {type(ignore_index).__name__}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
    for name, value in (("softcap", softcap), ("logit_scale", logit_scale)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a Python number or None, got {type(value).__name__}")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive and finite, got {value}")


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
    if target.numel() > 2**31 - 1 or logits.shape[-1] > 2**31 - 1:  # (1)!
        raise ValueError(f"logits of shape {tuple(logits.shape)}: at most 2**31 - 1 tokens and vocabulary entries")


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
        grad.stride(0) if write_grad else 0,
        *options,
        WRITE_GRAD=write_grad,
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


# --8<-- [start:autograd]
class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction, label_smoothing, softcap, logit_scale, grad_in_logits):
        if grad_in_logits:
            grad = logits  # (1)!
        else:
            grad = torch.empty((logits.shape[0], logits.shape[1]), dtype=logits.dtype, device=logits.device)
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
    check_options(ignore_index, reduction, label_smoothing, softcap, logit_scale)
    check_inputs(logits, target)
    if grad_in_logits and not (logits.is_contiguous() or (logits.dim() == 2 and logits.stride(1) == 1)):
        raise ValueError(
            "grad_in_logits=True needs contiguous logits (or 2-D with unit column stride): "
            "they are overwritten in place"
        )
    out_shape = target.shape
    logits, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1).contiguous()  # (B, S, V) -> (B·S, V)
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    if logits.shape[0] == 0:
        loss = reduce_losses(logits.new_zeros(0, dtype=torch.float32), count_valid(target, ignore_index), reduction)
        return loss.reshape(out_shape if reduction == "none" else ()).to(logits.dtype)
    args = (ignore_index, reduction, float(label_smoothing), softcap, logit_scale)
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
        logits, target, n_valid = ctx.saved_tensors
        grad = torch.empty_like(logits)
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
