"""Tiled matrix multiplication ``C = act(A @ B)``: the teaching version.

``matmul(a, b)`` equals ``a @ b`` for 2-D fp32, fp16 and bf16 inputs of any
shape and any strides (transposed, sliced). Each program computes one
``BLOCK_M × BLOCK_N`` tile of ``C``, walking the K dimension in steps of
``BLOCK_K`` and accumulating in fp32; programs are ordered in groups of
``GROUP_SIZE_M`` tile rows so that tiles running together share panels of
``A`` and ``B`` in L2. An optional ReLU or leaky ReLU is fused into the
epilogue, before the single store.

The pure-Python :func:`tile_coordinates` is the same program-id → tile map
as the kernel's :func:`grouped_tile`; the tests check that they agree.

Run this file (``python -m examples.tiled_matmul.kernel``) for a quick check.
"""

from __future__ import annotations

import html

from academy import DEVICE, INTERPRETED
from academy.validation import as_int, check_config, check_forward_only, check_tensor

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = (None, "relu", "leaky_relu")
LEAKY_SLOPE = 0.01
"""Slope of leaky ReLU for negative inputs (PyTorch's default)."""
_LEAKY_SLOPE = tl.constexpr(LEAKY_SLOPE)  # kernels may read only constexpr globals
INPUT_PRECISIONS = ("ieee", "tf32", "tf32x3")
MAX_OFFSET = 2**31 - 1
"""The kernel computes element offsets in int32; every operand must fit."""


# --8<-- [start:reference]
def reference(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    """``act(a @ b)`` computed by PyTorch in fp32, returned in the inputs' dtype."""
    c = torch.matmul(a.float(), b.float())
    return apply_activation(c, activation).to(a.dtype)


def apply_activation(c: torch.Tensor, activation: str | None) -> torch.Tensor:
    if activation == "relu":
        return torch.relu(c)
    if activation == "leaky_relu":
        return torch.nn.functional.leaky_relu(c, LEAKY_SLOPE)
    return c


# --8<-- [end:reference]


# --8<-- [start:tf32]
def to_tf32(x: torch.Tensor, rounding: str = "nearest") -> torch.Tensor:
    """Round fp32 values to TF32: keep 10 of the 23 mantissa bits (same 8-bit exponent).

    ``"nearest"`` rounds half away from zero, as the GPU's fp32 → tf32
    conversion does; ``"truncate"`` simply drops the 13 low bits.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"to_tf32 takes fp32 values, got {x.dtype}")
    if rounding not in ("nearest", "truncate"):
        raise ValueError(f"rounding must be 'nearest' or 'truncate', got {rounding!r}")
    bits = x.contiguous().view(torch.int32)
    if rounding == "nearest":
        bits = bits + (1 << 12)  # half of the lowest kept bit: carries into it when the dropped part ≥ half
    return (bits & ~((1 << 13) - 1)).view(torch.float32)


# --8<-- [end:tf32]


# --8<-- [start:tile_coordinates_py]
def tile_coordinates(pid: int, num_pid_m: int, num_pid_n: int, group_size_m: int) -> tuple[int, int]:
    """Which tile ``(pid_m, pid_n)`` of C program ``pid`` computes: plain Python.

    Programs are dealt out a group at a time. A group is ``group_size_m``
    tile rows tall and spans every tile column; inside a group, consecutive
    programs go *down* a column before moving to the next column. With
    ``group_size_m = 1`` this is plain row-major order.
    """
    programs_per_group = group_size_m * num_pid_n
    group = pid // programs_per_group
    first_row = group * group_size_m
    rows_in_group = min(num_pid_m - first_row, group_size_m)  # the last group may be shorter
    index_in_group = pid % programs_per_group
    return first_row + index_in_group % rows_in_group, index_in_group // rows_in_group


# --8<-- [end:tile_coordinates_py]


# --8<-- [start:grouped_tile]
@triton.jit
def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """The kernel's copy of :func:`tile_coordinates`, line for line."""
    programs_per_group = GROUP_SIZE_M * num_pid_n
    group = pid // programs_per_group
    first_row = group * GROUP_SIZE_M
    rows_in_group = tl.minimum(num_pid_m - first_row, GROUP_SIZE_M)
    index_in_group = pid % programs_per_group
    return first_row + index_in_group % rows_in_group, index_in_group // rows_in_group


# --8<-- [end:grouped_tile]


@triton.jit
def tile_map_kernel(out_ptr, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Writes ``(pid_m, pid_n)`` of every program: lets tests read the kernel's own map."""
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def kernel_tile_map(num_pid_m: int, num_pid_n: int, group_size_m: int) -> list[tuple[int, int]]:
    """``[(pid_m, pid_n) for every pid]`` as computed by :func:`grouped_tile` inside a kernel."""
    n_programs = num_pid_m * num_pid_n
    out = torch.full((n_programs, 2), -1, dtype=torch.int32, device=DEVICE)
    tile_map_kernel[(n_programs,)](out, num_pid_m, num_pid_n, GROUP_SIZE_M=group_size_m)
    return [tuple(row) for row in out.cpu().tolist()]


# --8<-- [start:matmul_kernel]
@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, _LEAKY_SLOPE * x)


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,  # strides in elements, not bytes
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,  # 1 = row-major order of the tiles
    ACTIVATION: tl.constexpr,  # "", "relu" or "leaky_relu"
    INPUT_PRECISION: tl.constexpr,  # fp32 only: "ieee", "tf32" (Triton's default) or "tf32x3"
    UPCAST: tl.constexpr,  # the interpreter's bf16 arithmetic is wrong: multiply in fp32 there
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)  # (1)!

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak  # (2)!
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # (3)!
    for k_start in range(0, K, BLOCK_K):  # (4)!
        k_left = K - k_start
        a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)  # (5)!
        b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)  # (6)!
        a_ptrs += BLOCK_K * stride_ak  # (7)!
        b_ptrs += BLOCK_K * stride_bk

    if ACTIVATION == "relu":  # (8)!
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)

    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    c_mask = (rows < M)[:, None] & (cols < N)[None, :]  # (9)!
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


# --8<-- [end:matmul_kernel]


# --8<-- [start:launch_config]
def launch_config(dtype: torch.dtype) -> dict[str, int]:
    """Tile shape, warps and pipeline stages: one fixed choice per dtype.

    On a GPU: 128×128 tiles of fp16/bf16 with 64-wide K steps fill the tensor
    cores; fp32 tiles are twice as heavy per element, so they are smaller.
    Under the interpreter every program costs ~0.5 ms, so tiles are just
    large enough to keep grids small. Tutorial 11 (autotuning) replaces this
    table with a search.
    """
    if INTERPRETED:
        return {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1}
    if dtype == torch.float32:
        return {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}
    return {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}


# --8<-- [end:launch_config]


# --8<-- [start:launcher]
def check_inputs(a, b, activation, group_size_m, input_precision) -> None:
    check_tensor("a", a, SUPPORTED_DTYPES)
    check_tensor("b", b, SUPPORTED_DTYPES)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D matrices, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)} (a.shape[1] must equal b.shape[0])"
        )
    if a.dtype != b.dtype:
        raise TypeError(f"dtypes differ: a {a.dtype} vs b {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"devices differ: a on {a.device}, b on {b.device}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if as_int("group_size_m", group_size_m) < 1:
        raise ValueError(f"group_size_m must be a positive int (1 = row-major), got {group_size_m!r}")
    if input_precision not in INPUT_PRECISIONS:
        raise ValueError(f"input_precision must be one of {INPUT_PRECISIONS}, got {input_precision!r}")
    for name, t in (("a", a), ("b", b)):
        span = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        if span > MAX_OFFSET:  # (1)!
            raise ValueError(f"{name} spans {span + 1} elements; this kernel's int32 offsets reach 2**31 - 1")


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    activation: str | None = None,
    group_size_m: int = 8,
    *,
    input_precision: str = "ieee",
    config: dict[str, int] | None = None,
) -> torch.Tensor:
    """``act(a @ b)`` for 2-D ``a`` (M, K) and ``b`` (K, N) of one dtype; returns a new (M, N) matrix.

    ``activation``: ``None``, ``"relu"`` or ``"leaky_relu"`` (slope 0.01), fused
    into the store. ``group_size_m``: tile rows per group of programs
    (1 = row-major order). ``input_precision`` is passed to ``tl.dot`` for
    fp32 inputs: ``"ieee"`` (our default, like ``torch.matmul``'s) multiplies
    in true fp32; ``"tf32"`` (Triton's own default) rounds the inputs to 10
    mantissa bits for the tensor cores: faster on a GPU, about 1e-3 relative
    error. fp16/bf16 inputs ignore it. ``config`` overrides the
    tile shape (``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``; each a power of two
    of at least 16: ``tl.dot`` needs K ≥ 16 in Triton 3.6 and this launcher
    asks the same of every side) and ``num_warps``/``num_stages``. Forward only: with autograd
    recording, an input that requires grad is refused (the result would carry no gradient).
    """
    check_inputs(a, b, activation, group_size_m, input_precision)
    check_forward_only("matmul", a=a, b=b)
    (M, K), N = a.shape, b.shape[1]
    if M * N > MAX_OFFSET:
        raise ValueError(f"the output has {M * N} elements; this kernel's int32 offsets reach 2**31 - 1")
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:  # an empty sum: every element is act(0) = 0
        return c.zero_()
    meta = launch_config(a.dtype)
    meta.update(check_config(config, meta, min_block=16))  # tl.dot needs K ≥ 16; we ask it of every side
    grid = (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # (2)!
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),  # (3)!
        GROUP_SIZE_M=int(group_size_m),
        ACTIVATION=activation or "",
        INPUT_PRECISION="ieee" if INTERPRETED else input_precision if a.dtype == torch.float32 else None,
        UPCAST=INTERPRETED,
        **meta,
    )
    return c


# --8<-- [end:launcher]


# --8<-- [start:grouping_svg]
def grouping_svg(
    num_pid_m: int, num_pid_n: int, group_size_m: int, wave: int, *, cell: int = 26, title: str | None = None
) -> str:
    """An SVG of C's tile grid: each tile labelled with the pid that computes it.

    The first ``wave`` programs (those that run at the same time) are shaded,
    and the panels of A (tile rows, drawn left of C) and of B (tile columns,
    drawn above C) that they read are shaded too. Pure: returns the markup.
    """
    order = [tile_coordinates(pid, num_pid_m, num_pid_n, group_size_m) for pid in range(num_pid_m * num_pid_n)]
    pid_of = {tile: pid for pid, tile in enumerate(order)}
    running = set(order[:wave])
    rows_read = {m for m, _ in running}
    cols_read = {n for _, n in running}
    gap, strip = 8, cell // 2
    x0, y0 = strip + gap, strip + gap + 34  # room for two lines of caption above
    head = title if title is not None else f"GROUP_SIZE_M = {group_size_m}"
    reads = f"reads {len(rows_read)} A + {len(cols_read)} B panels"
    text_width = 7 * max(len(head), len(reads))  # about 7 px per character at 12 px
    width, height = max(x0 + num_pid_n * cell + 2, text_width), y0 + num_pid_m * cell + 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" role="img">',
        f"<title>{html.escape(head)}: {wave} programs read {len(rows_read)} A panels "
        f"and {len(cols_read)} B panels</title>",
        f'<text x="0" y="12" font-size="12">{html.escape(head)}</text>',
        f'<text x="0" y="27" font-size="12">{reads}</text>',
    ]
    for m in range(num_pid_m):  # A's row panels
        fill = "#f4a261" if m in rows_read else "#eeeeee"
        parts.append(f'<rect x="0" y="{y0 + m * cell}" width="{strip}" height="{cell - 2}" fill="{fill}"/>')
    for n in range(num_pid_n):  # B's column panels
        fill = "#2a9d8f" if n in cols_read else "#eeeeee"
        parts.append(
            f'<rect x="{x0 + n * cell}" y="{y0 - gap - strip}" width="{cell - 2}" height="{strip}" fill="{fill}"/>'
        )
    for (m, n), pid in sorted(pid_of.items()):
        fill = "#e9c46a" if (m, n) in running else "#ffffff"
        x, y = x0 + n * cell, y0 + m * cell
        parts.append(
            f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" stroke="#555555"/>'
            f'<text x="{x + (cell - 2) / 2}" y="{y + cell / 2 + 2}" font-size="{cell // 3}" '
            f'text-anchor="middle">{pid}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


# --8<-- [end:grouping_svg]


def panels_read(num_pid_m: int, num_pid_n: int, group_size_m: int, wave: int) -> tuple[int, int]:
    """How many distinct A row panels and B column panels the first ``wave`` programs read."""
    tiles = [
        tile_coordinates(pid, num_pid_m, num_pid_n, group_size_m) for pid in range(min(wave, num_pid_m * num_pid_n))
    ]
    return len({m for m, _ in tiles}), len({n for _, n in tiles})


if __name__ == "__main__":
    torch.manual_seed(0)
    for dtype, shape in ((torch.float32, (33, 47, 70)), (torch.float16, (64, 80, 96))):
        M, N, K = shape
        a = torch.randn(M, K, device=DEVICE).to(dtype)
        b = torch.randn(N, K, device=DEVICE).to(dtype).t()  # a transposed operand: strides (1, K)
        expected = apply_activation(a.double() @ b.double(), "leaky_relu")
        c = matmul(a, b, activation="leaky_relu")
        error = ((c.double() - expected).norm() / expected.norm()).item()
        print(f"matmul on {DEVICE}, {dtype}, M×N×K = {M}×{N}×{K}, leaky_relu: relative error {error:.1e}")
        assert error < (1e-5 if dtype == torch.float32 else 1e-2)
    assert kernel_tile_map(8, 4, 3) == [tile_coordinates(pid, 8, 4, 3) for pid in range(32)]
    print("the kernel's tile map agrees with tile_coordinates (8×4 tiles, GROUP_SIZE_M = 3)")
