"""What the LayerNorm and RMSNorm chapters share: input checks, launch rules and
the second stage of the weight-gradient reduction.

Both norms hold whole rows in registers up to a width and take chunked kernels
above it, and both sum their weight gradients in two stages: a partial row per
program in fp32, then one small kernel that adds the partial rows. The tile
shapes, the grids and that second stage are the same for both, so they live
here once; each chapter passes what differs (how many warps its forward may
use, how wide a row its backward holds in registers).
"""

from __future__ import annotations

import academy  # noqa: F401  (sets TRITON_INTERPRET on CPU before triton loads)
from academy.grid import sm_count
from academy.validation import as_real, check_tensor

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_ROWS = 2**31 - 2**16
"""Row indices are int32 in the kernels (offsets are int64); a tile's last row index must not wrap."""


# --8<-- [start:reduce_kernel]
@triton.jit
def sum_partials_kernel(
    partial_ptr,
    out_ptr,  # fp32 (n_partials, n_cols) → (n_cols,) in out's dtype
    n_partials,
    n_cols,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    acc = tl.zeros([BLOCK_P, BLOCK_N], tl.float32)
    for start in range(0, n_partials, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts < n_partials)[:, None] & col_mask[None, :]
        acc += tl.load(partial_ptr + parts.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)  # (1)!


# --8<-- [end:reduce_kernel]


# --8<-- [start:launch_config]
FWD_MAX_FUSED_COLS = 16384
"""Widest row the forward holds in registers; wider rows take the chunked two-pass forward."""
WIDE_BLOCK_N = 4096
"""Chunk width of the chunked (wide-row) kernels."""
WIDE_NUM_WARPS = 16
MIN_ELEMENTS_PER_TILE = 2048
"""Narrow rows are packed several to a tile, so each tile has enough loads in flight."""
VALUES_PER_THREAD = 16
FWD_PROGRAMS_PER_SM = 4
"""Persistent programs per SM of the chunked forward."""
BWD_PROGRAMS_PER_SM = 2
"""Persistent programs per SM of the chunked (one row at a time) backward kernels."""
BWD_TILE_ELEMENTS_PER_SM = 8192
"""The in-register backward's programs per SM: as many as hold this many tile elements in all.
Each program also loads its next tile while it works on this one, so an SM has about twice this
many elements of x and of dy in flight. On an H200 (tools/norm_launch_sweep.py), 8192 was the
fastest launch of RMSNorm's backward, or within 2.6% of it, at each of the six widths timed, 768
to 8192."""
REDUCE = "triton"
"""How the partial rows are summed: "triton" (sum_partials_kernel) or "torch" (partials.sum(0))."""
REDUCE_BLOCK_N = 32
REDUCE_BLOCK_P = 32
WIDE_BACKWARD = "columns"
"""Rows wider than the backward holds: "columns" (row terms, then a (groups × column strips)
grid with the weight gradients in registers) or "rows" (one pass per row, the weight
gradients added into a per-program partial row in memory)."""
COLUMNS_BLOCK_M = 4
COLUMNS_BLOCK_N = 1024
COLUMNS_NUM_WARPS = 4
COLUMNS_PROGRAMS_PER_SM = 4


def tile_config(n_cols: int, max_warps: int = 32) -> dict[str, int]:
    """BLOCK_M × BLOCK_N tile and warps for the kernels that hold whole rows."""
    block_n = triton.next_power_of_2(n_cols)
    block_m = max(1, MIN_ELEMENTS_PER_TILE // block_n)
    num_warps = min(max_warps, max(1, block_m * block_n // (32 * VALUES_PER_THREAD)))  # (1)!
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": num_warps}


def num_programs(n_work: int, num_warps: int, programs_per_sm: int) -> int:
    """A persistent grid: a few programs per SM (as many as fit), never more than the work."""
    resident = max(1, min(programs_per_sm, 64 // num_warps))  # (2)!
    return max(1, min(n_work, sm_count() * resident))


def forward_launch(n_rows: int, n_cols: int, max_warps: int) -> tuple[bool, int, dict[str, int]]:
    """(in registers?, grid size, meta-parameters) of a forward."""
    if n_cols <= FWD_MAX_FUSED_COLS:  # (3)!
        config = tile_config(n_cols, max_warps)
        return True, triton.cdiv(n_rows, config["BLOCK_M"]), config
    grid = num_programs(n_rows, WIDE_NUM_WARPS, FWD_PROGRAMS_PER_SM)
    return False, grid, {"BLOCK_N": WIDE_BLOCK_N, "num_warps": WIDE_NUM_WARPS}


def backward_launch(n_rows: int, n_cols: int, max_fused_cols: int) -> tuple[str, int, dict[str, int]]:
    """(design, programs, meta-parameters) of a backward: "registers" up to
    ``max_fused_cols``, else WIDE_BACKWARD, whose programs and meta-parameters are
    those of its one-row-at-a-time kernel (for "columns", the row terms kernel)."""
    if n_cols <= max_fused_cols:
        config = tile_config(n_cols)
        per_sm = max(1, BWD_TILE_ELEMENTS_PER_SM // (config["BLOCK_M"] * config["BLOCK_N"]))
        programs = num_programs(triton.cdiv(n_rows, config["BLOCK_M"]), config["num_warps"], per_sm)
        return "registers", programs, config
    return (
        WIDE_BACKWARD,
        num_programs(n_rows, WIDE_NUM_WARPS, BWD_PROGRAMS_PER_SM),
        {"BLOCK_N": WIDE_BLOCK_N, "num_warps": WIDE_NUM_WARPS},
    )


def column_split(n_rows: int, n_cols: int) -> tuple[int, int, int, dict[str, int]]:
    """(row groups, column strips, rows per group, meta-parameters) of the column-split
    backward's second kernel: about COLUMNS_PROGRAMS_PER_SM programs per SM in all."""
    strips = triton.cdiv(n_cols, COLUMNS_BLOCK_N)
    groups = max(1, min(n_rows, triton.cdiv(sm_count() * COLUMNS_PROGRAMS_PER_SM, strips)))
    rows_per_group = triton.cdiv(n_rows, groups)
    config = {"BLOCK_M": COLUMNS_BLOCK_M, "BLOCK_N": COLUMNS_BLOCK_N, "num_warps": COLUMNS_NUM_WARPS}
    return triton.cdiv(n_rows, rows_per_group), strips, rows_per_group, config


# --8<-- [end:launch_config]


# --8<-- [start:helpers]
def as_rows(t: torch.Tensor) -> torch.Tensor:
    """View ``t`` as (rows, n_cols) with unit column stride, copying only if needed."""
    rows = t.reshape(-1, t.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def check_inputs(op: str, x: torch.Tensor, eps, **params: torch.Tensor | None) -> None:
    """``x`` of shape (..., N), each named parameter (``None`` allowed) of shape (N,) on
    x's device, a non-negative ``eps``, and few enough rows for int32 row indices."""
    check_tensor("x", x, SUPPORTED_DTYPES)
    for name, t in params.items():
        if t is not None:
            check_tensor(name, t, SUPPORTED_DTYPES)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: {op} needs a non-empty last dimension")
    n = x.shape[-1]
    for name, t in params.items():
        if t is not None and tuple(t.shape) != (n,):
            raise ValueError(f"{name} has shape {tuple(t.shape)}; expected ({n},), the last dimension of x")
        if t is not None and t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if not as_real("eps", eps) >= 0:
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    if x.numel() // n > MAX_ROWS:
        raise ValueError(f"x has {x.numel() // n} rows; at most {MAX_ROWS} are supported")


def sum_partials(partials: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Stage 2: add the per-program partial rows, in fp32, then cast once."""
    n_partials, n_cols = partials.shape
    if REDUCE == "torch":
        return partials.sum(0).to(dtype)
    out = torch.empty(n_cols, dtype=dtype, device=partials.device)
    sum_partials_kernel[(triton.cdiv(n_cols, REDUCE_BLOCK_N),)](
        partials, out, n_partials, n_cols, BLOCK_P=REDUCE_BLOCK_P, BLOCK_N=REDUCE_BLOCK_N, num_warps=4
    )
    return out


# --8<-- [end:helpers]
