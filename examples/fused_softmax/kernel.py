"""Fused softmax over the last dimension, forward and backward.

``softmax(x)`` equals ``torch.softmax(x, dim=-1)`` for fp32, fp16 and bf16
inputs of any shape, and is differentiable. Rows that fit in registers take
one trip through memory (read once, write once); wider rows take the online
path, which reads them twice and never spills.

Run this file (``python -m examples.fused_softmax.kernel``) for a quick check.
"""

from __future__ import annotations

import functools

from academy import DEVICE

import torch
import triton
import triton.language as tl


# --8<-- [start:reference]
def reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, computed by PyTorch in fp32."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """The unfused version: five kernels, each a full trip through memory."""
    row_max = x.max(dim=-1, keepdim=True).values  # read x, write M values
    shifted = x - row_max  # read x and the maxima, write x.numel() values
    numerator = torch.exp(shifted)  # read and write x.numel() values
    denominator = numerator.sum(dim=-1, keepdim=True)  # read x.numel(), write M
    return numerator / denominator  # read x.numel() and M, write x.numel()


# --8<-- [end:reference]


# --8<-- [start:row_span]
@triton.jit
def row_span(start, n_cols, VEC: tl.constexpr):
    """Where the whole 16-byte vectors (``VEC`` values each) of a row that starts ``start`` elements
    from the base lie: the first one's offset (``aligned``), the columns before it (the ``head``,
    fewer than ``VEC``) and the columns of whole vectors from there on (the ``body``, a multiple of
    ``VEC``). What is left after the body is the tail, fewer than ``VEC`` columns too."""
    aligned = (start + VEC - 1) // VEC * VEC  # (1)!
    head = tl.minimum(aligned - start, n_cols)
    body = (n_cols - head) // VEC * VEC  # (2)!
    return aligned, head, body


@triton.jit
def edge_columns(head, body, n_cols, VEC: tl.constexpr):
    """The columns outside the body as one small block: lanes [0, VEC) hold the head's columns,
    lanes [VEC, 2·VEC) the tail's; the mask keeps those that exist."""
    lanes = tl.arange(0, 2 * VEC)
    in_head = lanes < VEC
    cols = tl.where(in_head, lanes, head + body + lanes - VEC)
    return cols, (in_head & (lanes < head)) | (~in_head & (cols < n_cols))  # (3)!


# --8<-- [end:row_span]


# --8<-- [start:forward_kernel]
@triton.jit
def softmax_forward_kernel(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    x_row_stride,  # in elements
    y_shift,  # y's row stride minus x's
    BLOCK_M: tl.constexpr,  # rows per program
    BLOCK_N: tl.constexpr,  # next power of two ≥ the widest body: the whole row but its edges
    VEC: tl.constexpr,  # values in 16 bytes
    EDGES: tl.constexpr,  # some row starts or ends inside a 16-byte vector
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # (1)!
    in_rows = (rows < n_rows)[:, None]  # (2)!
    starts = rows * x_row_stride
    aligned, head, body = row_span(starts, n_cols, VEC)
    cols = tl.arange(0, BLOCK_N)
    mask = in_rows & (cols[None, :] < body[:, None])
    body_offsets = aligned[:, None] + cols[None, :]
    edge_cols, edge_mask = edge_columns(head[:, None], body[:, None], n_cols, VEC)
    edge_mask = in_rows & edge_mask
    edge_offsets = starts[:, None] + edge_cols
    y_moved = (rows * y_shift)[:, None]

    x = tl.load(
        x_ptr + body_offsets,
        mask=mask,
        other=-float("inf"),  # (3)!
    ).to(tl.float32)  # (4)!
    if EDGES:  # loaded with the body, before the reductions wait on it
        x_edge = tl.load(x_ptr + edge_offsets, mask=edge_mask, other=-float("inf")).to(tl.float32)
    row_max = _per_row(tl.max(x, axis=1), BLOCK_M)  # (5)!
    if EDGES:
        row_max = tl.maximum(row_max, _per_row(tl.max(x_edge, axis=1), BLOCK_M))
    numerator = tl.exp(x - row_max)  # (6)!
    denominator = _per_row(tl.sum(numerator, axis=1), BLOCK_M)  # (7)!
    if EDGES:
        edge_numerator = tl.exp(x_edge - row_max)
        denominator += _per_row(tl.sum(edge_numerator, axis=1), BLOCK_M)
    y = numerator / denominator  # (8)!

    tl.store(
        y_ptr + y_moved + body_offsets,
        y.to(y_ptr.dtype.element_ty),
        mask=mask,  # (9)!
    )
    if EDGES:
        y_edge = edge_numerator / denominator
        tl.store(y_ptr + y_moved + edge_offsets, y_edge.to(y_ptr.dtype.element_ty), mask=edge_mask)


@triton.jit
def _per_row(v, BLOCK_M: tl.constexpr):
    """A per-row statistic, shaped to broadcast against a tile: a column, or a scalar when the tile
    is one row. The scalar has no layout, so the edge block (its own small layout) takes it without
    a round trip through shared memory: with a column, the compiler converted the edge block to the
    body's layout, two more barriers per row, which a one-row program holding a whole SM cannot hide."""
    if BLOCK_M == 1:
        return tl.sum(v, axis=0)
    else:
        return v[:, None]


# --8<-- [end:forward_kernel]


# --8<-- [start:online_forward_kernel]
@triton.jit
def softmax_online_forward_kernel(
    x_ptr,
    y_ptr,
    n_cols,
    x_row_stride,
    y_shift,
    BLOCK_N: tl.constexpr,  # a chunk of the row; the row is wider
    VEC: tl.constexpr,
    EDGES: tl.constexpr,
    KEEP: tl.constexpr,
    STREAM: tl.constexpr,  # eviction hints: keep pass 1's reads in L2 for pass 2, stream pass 2's traffic
):
    row = tl.program_id(0).to(tl.int64)  # (1)!
    start = row * x_row_stride
    aligned, head, body = row_span(start, n_cols, VEC)
    x_body = x_ptr + aligned
    y_body = y_ptr + aligned + row * y_shift
    edge_cols, edge_mask = edge_columns(head, body, n_cols, VEC)
    if EDGES:
        x_edge = tl.load(x_ptr + start + edge_cols, mask=edge_mask, other=-float("inf")).to(tl.float32)

    # Pass 1: every lane keeps its own running maximum and running sum over the body.
    running_max = tl.full([BLOCK_N], -float("inf"), tl.float32)  # (2)!
    running_sum = tl.zeros([BLOCK_N], tl.float32)
    for chunk in range(0, body, BLOCK_N):
        cols = chunk + tl.arange(0, BLOCK_N)
        x = tl.load(x_body + cols, mask=cols < body, other=-float("inf"), eviction_policy=KEEP).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)  # (3)!
        running_sum = running_sum * tl.exp(running_max - safe_max) + tl.exp(x - safe_max)  # (4)!
        running_max = new_max

    # Combine the lanes and the edges: rescale each lane's sum to the row's maximum.
    row_max = tl.max(running_max, axis=0)  # (5)!
    if EDGES:
        row_max = tl.maximum(row_max, tl.max(x_edge, axis=0))
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)  # (6)!

    # Pass 2: write the edges, read the body again and write the normalised values.
    if EDGES:
        edge_numerator = tl.exp(x_edge - row_max)
        row_sum += tl.sum(edge_numerator, axis=0)
        y_edge = edge_numerator / row_sum
        tl.store(y_ptr + start + row * y_shift + edge_cols, y_edge.to(y_ptr.dtype.element_ty), mask=edge_mask)
    for chunk in range(0, body, BLOCK_N):
        cols = chunk + tl.arange(0, BLOCK_N)
        mask = cols < body
        x = tl.load(x_body + cols, mask=mask, other=-float("inf"), eviction_policy=STREAM).to(tl.float32)  # (7)!
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_body + cols, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy=STREAM)


# --8<-- [end:online_forward_kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def softmax_backward_kernel(
    y_ptr,
    dy_ptr,
    dx_ptr,
    n_rows,
    n_cols,
    y_row_stride,
    dy_shift,
    dx_shift,  # dy's and dx's row strides minus y's
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,
    EDGES: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    in_rows = (rows < n_rows)[:, None]
    starts = rows * y_row_stride
    aligned, head, body = row_span(starts, n_cols, VEC)
    cols = tl.arange(0, BLOCK_N)
    mask = in_rows & (cols[None, :] < body[:, None])
    body_offsets = aligned[:, None] + cols[None, :]
    edge_cols, edge_mask = edge_columns(head[:, None], body[:, None], n_cols, VEC)
    edge_mask = in_rows & edge_mask
    edge_offsets = starts[:, None] + edge_cols
    dy_moved, dx_moved = (rows * dy_shift)[:, None], (rows * dx_shift)[:, None]

    y = tl.load(y_ptr + body_offsets, mask=mask, other=0.0).to(tl.float32)  # (1)!
    dy = tl.load(dy_ptr + dy_moved + body_offsets, mask=mask, other=0.0).to(tl.float32)
    if EDGES:
        y_edge = tl.load(y_ptr + edge_offsets, mask=edge_mask, other=0.0).to(tl.float32)
        dy_edge = tl.load(dy_ptr + dy_moved + edge_offsets, mask=edge_mask, other=0.0).to(tl.float32)
    dot = _per_row(tl.sum(y * dy, axis=1), BLOCK_M)  # (2)!
    if EDGES:
        dot += _per_row(tl.sum(y_edge * dy_edge, axis=1), BLOCK_M)
    dx = y * (dy - dot)  # (3)!
    tl.store(dx_ptr + dx_moved + body_offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    if EDGES:
        dx_edge = y_edge * (dy_edge - dot)
        tl.store(dx_ptr + dx_moved + edge_offsets, dx_edge.to(dx_ptr.dtype.element_ty), mask=edge_mask)


# --8<-- [end:backward_kernel]


# --8<-- [start:online_backward_kernel]
@triton.jit
def softmax_online_backward_kernel(
    y_ptr,
    dy_ptr,
    dx_ptr,
    n_cols,
    y_row_stride,
    dy_shift,
    dx_shift,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,
    EDGES: tl.constexpr,
    KEEP: tl.constexpr,
    STREAM: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    start = row * y_row_stride
    aligned, head, body = row_span(start, n_cols, VEC)
    edge_cols, edge_mask = edge_columns(head, body, n_cols, VEC)
    y_body, dy_body, dx_body = y_ptr + aligned, dy_ptr + aligned + row * dy_shift, dx_ptr + aligned + row * dx_shift
    if EDGES:
        y_edge = tl.load(y_ptr + start + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
        dy_edge = tl.load(dy_ptr + start + row * dy_shift + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)

    partial_dot = tl.zeros([BLOCK_N], tl.float32)  # (1)!
    for chunk in range(0, body, BLOCK_N):
        cols = chunk + tl.arange(0, BLOCK_N)
        mask = cols < body
        y = tl.load(y_body + cols, mask=mask, other=0.0, eviction_policy=KEEP).to(tl.float32)
        dy = tl.load(dy_body + cols, mask=mask, other=0.0, eviction_policy=KEEP).to(tl.float32)
        partial_dot += y * dy
    dot = tl.sum(partial_dot, axis=0)  # (2)!
    if EDGES:
        dot += tl.sum(y_edge * dy_edge, axis=0)
        dx_edge = y_edge * (dy_edge - dot)
        tl.store(dx_ptr + start + row * dx_shift + edge_cols, dx_edge.to(dx_ptr.dtype.element_ty), mask=edge_mask)
    for chunk in range(0, body, BLOCK_N):
        cols = chunk + tl.arange(0, BLOCK_N)
        mask = cols < body
        y = tl.load(y_body + cols, mask=mask, other=0.0, eviction_policy=STREAM).to(tl.float32)
        dy = tl.load(dy_body + cols, mask=mask, other=0.0, eviction_policy=STREAM).to(tl.float32)
        dx = y * (dy - dot)
        tl.store(dx_body + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask, eviction_policy=STREAM)  # (3)!


# --8<-- [end:online_backward_kernel]


# --8<-- [start:launch_config]
MAX_FUSED_COLS = 32768
"""Widest row held in registers at once; wider rows take the online kernels."""
ONLINE_BLOCK_N = 16384
"""Chunk width of the online kernels (a 16K chunk with 32 warps measured best at N = 65536)."""
ONLINE_NUM_WARPS = 32
ONLINE_KEEP, ONLINE_STREAM = "evict_last", "evict_first"
"""Eviction hints of the online kernels: pass 1's reads stay in L2 for pass 2's re-read, pass 2's
reads and writes are never used again. A scratch H100 run timed them a fifth faster at N = 128,256."""


@functools.cache
def launch_config(n_cols: int) -> dict[str, int]:
    """Block shape and warps for the one-pass kernels (forward and backward).

    Two rules, read off a sweep of (BLOCK_M, num_warps) pairs on an H100,
    timed as the benchmarks are:

    * a program owns at least ``MIN_ELEMENTS_PER_PROGRAM`` values, or it ends
      before its loads have hidden the memory latency: narrow rows are packed
      several to a program;
    * a thread holds 16 values (two 16-byte loads of bf16), which sets
      ``num_warps``; at the 32-warp cap (rows above 16K) a thread holds more.
    """
    block_n = triton.next_power_of_2(n_cols)
    block_m = max(1, MIN_ELEMENTS_PER_PROGRAM // block_n)  # (1)!
    num_warps = min(32, max(1, block_m * block_n // (32 * VALUES_PER_THREAD)))  # (2)!
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": num_warps}


MIN_ELEMENTS_PER_PROGRAM = 2048
VALUES_PER_THREAD = 16


def dispatch(n_cols: int, element_size: int) -> tuple[str, dict[str, int]]:
    """Which kernel a row of ``n_cols`` values takes, and its meta-parameters.

    Every kernel reads a row as its body (whole 16-byte vectors, ``VEC`` values
    each) plus at most ``2·(VEC − 1)`` edge columns, so the rule looks at the
    widest body a row can have, ``n_cols`` rounded down to a multiple of ``VEC``:
    a row of 4097 bf16 values gets the tile of a row of 4096, not one twice as
    wide, and any row stride gets the same kernel as an aligned one.
    """
    vec = 16 // element_size
    body = n_cols // vec * vec
    if body <= MAX_FUSED_COLS:
        return "one-pass", {**launch_config(max(body, 2 * vec)), "VEC": vec}  # (3)!
    return "online", {
        "BLOCK_N": ONLINE_BLOCK_N,
        "num_warps": ONLINE_NUM_WARPS,
        "VEC": vec,
        "KEEP": ONLINE_KEEP,
        "STREAM": ONLINE_STREAM,
    }


# --8<-- [end:launch_config]


# --8<-- [start:launcher]
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """View ``t`` as (rows, n_cols) with unit column stride, copying only if needed."""
    rows = t.reshape(-1, t.shape[-1])  # (1)!
    return rows if rows.stride(-1) == 1 else rows.contiguous()  # (2)!


def has_edges(rows: torch.Tensor, vec: int) -> bool:
    """Whether some row starts or ends inside a 16-byte vector: only then are the head and tail
    columns compiled in (a width and row stride that are multiples of ``VEC`` have none)."""
    return rows.shape[1] % vec != 0 or (rows.shape[0] > 1 and rows.stride(0) % vec != 0)


def _forward(x: torch.Tensor) -> torch.Tensor:
    x_rows = _as_rows(x)
    n_rows, n_cols = x_rows.shape
    y_rows = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return y_rows.view(x.shape)
    strides = (x_rows.stride(0), y_rows.stride(0) - x_rows.stride(0))
    kind, config = dispatch(n_cols, x.element_size())  # (3)!
    config["EDGES"] = has_edges(x_rows, config["VEC"])
    if kind == "one-pass":
        grid = (triton.cdiv(n_rows, config["BLOCK_M"]),)  # (4)!
        softmax_forward_kernel[grid](x_rows, y_rows, n_rows, n_cols, *strides, **config)
    else:
        softmax_online_forward_kernel[(n_rows,)](x_rows, y_rows, n_cols, *strides, **config)  # (5)!
    return y_rows.view(x.shape)


def _backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y_rows, dy_rows = _as_rows(y), _as_rows(dy)
    n_rows, n_cols = y_rows.shape
    dx_rows = torch.empty((n_rows, n_cols), dtype=y.dtype, device=y.device)
    if n_rows == 0:
        return dx_rows.view(y.shape)
    strides = (y_rows.stride(0), dy_rows.stride(0) - y_rows.stride(0), dx_rows.stride(0) - y_rows.stride(0))
    kind, config = dispatch(n_cols, y.element_size())
    config["EDGES"] = has_edges(y_rows, config["VEC"])
    if kind == "one-pass":
        grid = (triton.cdiv(n_rows, config["BLOCK_M"]),)
        softmax_backward_kernel[grid](y_rows, dy_rows, dx_rows, n_rows, n_cols, *strides, **config)
    else:
        softmax_online_backward_kernel[(n_rows,)](y_rows, dy_rows, dx_rows, n_cols, *strides, **config)
    return dx_rows.view(y.shape)


def check_inputs(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != DEVICE:
        raise ValueError(f"x is on {x.device}, but kernels run on {DEVICE!r} here")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; supported: {SUPPORTED_DTYPES}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (softmax runs over the last)")
    if x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: softmax over an empty last dimension is undefined")
    if x.numel() // x.shape[-1] > 2**31 - 1:  # (6)!
        raise ValueError(f"x has {x.numel() // x.shape[-1]} rows; at most 2**31 - 1 are supported")


# --8<-- [end:launcher]


# --8<-- [start:autograd]
class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = _forward(x)
        ctx.save_for_backward(y)  # (1)!
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # (2)!
            y32, dy32 = y.float(), dy.float()
            return (y32 * (dy32 - (y32 * dy32).sum(-1, keepdim=True))).to(y.dtype)
        return _backward(y, dy)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension; differentiable with respect to ``x``, twice."""
    check_inputs(x)
    if x.requires_grad and torch.is_grad_enabled():
        return _Softmax.apply(x)
    return _forward(x)  # (3)!


# --8<-- [end:autograd]


if __name__ == "__main__":
    for n_cols in (1000, MAX_FUSED_COLS + 3001):  # the one-pass path, then the online path
        x = torch.randn(5, n_cols, device=DEVICE, requires_grad=True)
        dy = torch.randn(5, n_cols, device=DEVICE)
        y = softmax(x)
        y.backward(dy)
        x_ref = x.detach().double().requires_grad_()
        y_ref = torch.softmax(x_ref, dim=-1)
        y_ref.backward(dy.double())
        fwd_error = ((y - y_ref).norm() / y_ref.norm()).item()
        bwd_error = ((x.grad - x_ref.grad).norm() / x_ref.grad.norm()).item()
        print(f"softmax on {DEVICE}, 5×{n_cols}: forward error {fwd_error:.1e}, backward error {bwd_error:.1e}")
        assert fwd_error < 1e-5 and bwd_error < 1e-5
