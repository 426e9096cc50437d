"""The chapter's math against brute force and autograd, in float64: the two gradients as grouped GEMMs,
the tile bound the grid is sized from, the device-side schedule, and the FLOP and byte counts."""

import itertools

from academy import DEVICE
from academy.testing import assert_close, random_tensor

import pytest
import torch
import triton
import triton.language as tl

from examples.grouped_gemm.kernel import (
    arithmetic_intensity,
    find_tile,
    flops,
    max_m_tiles,
    min_bytes,
    tile_schedule,
    tile_table,
)


def test_gradients_are_grouped_gemms():
    """dX_e = dY_e · W_eᵀ and dW_e = X_eᵀ · dY_e (zero for an empty group) equal autograd's gradients."""
    sizes = [5, 0, 1, 9]
    x = random_tensor((15, 7), torch.float64, requires_grad=True)
    w = random_tensor((4, 7, 6), torch.float64, requires_grad=True)
    dy = random_tensor((15, 6), torch.float64)
    torch.cat([rows @ w[e] for e, rows in enumerate(x.split(sizes))]).backward(dy)
    dx = torch.cat([dy_e @ w[e].T for e, dy_e in enumerate(dy.split(sizes))])
    dw = torch.stack([x_e.T @ dy_e for x_e, dy_e in zip(x.detach().split(sizes), dy.split(sizes))])
    assert_close(dx, x.grad, tol=1e-12)
    assert_close(dw, w.grad, tol=1e-12)
    assert not dw[1].count_nonzero()


def compositions(T, E):
    """Every way of splitting T rows over E groups (zeros allowed)."""
    for cuts in itertools.combinations_with_replacement(range(T + 1), E - 1):
        bounds = (0, *cuts, T)
        yield [b - a for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("block_m", [1, 2, 3, 4])
def test_tile_bound_is_the_worst_routing(block_m):
    """max_m_tiles(T, E, BM) is exactly the most row tiles any routing needs: a bound, and attained."""
    for T, E in itertools.product(range(0, 10), range(1, 5)):
        worst = max(sum(-(-s // block_m) for s in sizes) for sizes in compositions(T, E))
        assert max_m_tiles(T, E, block_m) == worst, (T, E, block_m)


def test_tile_bound_is_below_the_simple_one():
    """The bound the issue states, ceil(T / BM) + E, is never smaller."""
    for T, E, bm in itertools.product(range(0, 300, 7), (1, 8, 64), (16, 64, 128)):
        assert max_m_tiles(T, E, bm) <= triton.cdiv(T, bm) + E


@triton.jit
def schedule_probe_kernel(
    sizes_ptr, out_ptr, E, T, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, E_POW2: tl.constexpr
):
    """Writes (group, first row of the tile, pid_m, pid_n) of tile program_id(0); past the last tile, nothing."""
    starts, tile_ends, total = tile_table(sizes_ptr, 1, E, T, N, BLOCK_M, BLOCK_N, E_POW2)
    tile = tl.program_id(0)
    if tile < total:  # the kernels' loops never look a tile up past the last one
        group, row_start, row_end, pid_m, pid_n = find_tile(
            tile, sizes_ptr, 1, T, starts, tile_ends, tl.cdiv(N, BLOCK_N), BLOCK_M, E_POW2
        )
        column = tl.arange(0, 4)
        values = tl.where(column == 0, group, tl.where(column == 1, row_start + pid_m * BLOCK_M, 0))
        values = tl.where(column == 2, pid_m, tl.where(column == 3, pid_n, values))
        tl.store(out_ptr + tile * 4 + column, values)


@pytest.mark.parametrize(
    "sizes",
    [[5, 0, 1, 30], [0, 0, 17], [40], [3, -2, 50, 9], [1, 1, 1, 1, 1, 1, 1, 0]],
    ids=["mixed", "leading empty", "one group", "negative and past T", "ones"],
)
def test_kernel_schedule_is_the_python_schedule(sizes):
    """The device-side prefix sum and lookup give each tile the group and place the Python mirror does,
    and the programs of the grid's bound past the last tile find none, for T = 37 rows, BLOCK_M = 16 and
    two column blocks."""
    T, N, bm, bn = 37, 40, 16, 32
    E = len(sizes)
    bound = max_m_tiles(T, E, bm) * triton.cdiv(N, bn)
    out = torch.full((bound, 4), -1, dtype=torch.int32, device=DEVICE)
    sizes_t = torch.tensor(sizes, dtype=torch.int64, device=DEVICE)
    schedule_probe_kernel[(bound,)](sizes_t, out, E, T, N, BLOCK_M=bm, BLOCK_N=bn, E_POW2=triton.next_power_of_2(E))
    want = tile_schedule(sizes, T, bm, triton.cdiv(N, bn))
    got = [tuple(row) for row in out.tolist()]
    assert got[: len(want)] == want
    assert all(row == (-1, -1, -1, -1) for row in got[len(want) :])


def test_schedule_covers_every_row_and_column_once():
    sizes, T, bm, num_n = [5, 0, 1, 30, 16, 17], 69, 16, 3
    covered = [[0] * num_n for _ in range(T)]
    for group, first_row, _, pid_n in tile_schedule(sizes, T, bm, num_n):
        end = sum(sizes[: group + 1])
        for row in range(first_row, min(first_row + bm, end)):
            covered[row][pid_n] += 1
    assert all(count == 1 for row in covered for count in row)


def test_flops_and_bytes_count_every_term():
    T, E, K, N = 6, 3, 5, 4
    assert flops(T, K, N) == sum(2 for _ in itertools.product(range(T), range(K), range(N)))
    assert min_bytes(T, E, K, N, 2) == 2 * (T * K + E * K * N + T * N)


def test_intensity_is_about_the_rows_per_expert():
    """When the weights dominate the bytes, FLOPs per byte ≈ T / E (bf16): Mixtral-8x7B's ~1000 rows per
    expert sit above an H100's ridge (about 295 FLOP/byte from its datasheet's 989 TFLOP/s and 3.35 TB/s),
    DeepSeek-V3's ~128 below it."""
    ridge = 989e12 / 3.35e12
    mixtral = arithmetic_intensity(8192, 8, 4096, 14336)
    deepseek = arithmetic_intensity(32768, 256, 7168, 2048)
    assert deepseek < ridge < mixtral
    assert deepseek == pytest.approx(32768 / 256, rel=0.1)
    assert mixtral == pytest.approx(8192 / 8, rel=0.3)  # x and y are a larger share of the bytes here
