"""The chapter's formulas against brute force: arithmetic intensity, the roofline, the grouped pid map."""

import itertools

import pytest

from examples.matmul.kernel import arithmetic_intensity, roofline_tflops, tile_intensity
from examples.tiled_matmul.kernel import kernel_tile_map, panels_read, tile_coordinates


def test_arithmetic_intensity_counts_every_flop_and_byte():
    M, N, K = 3, 5, 7
    flops = sum(2 for _ in itertools.product(range(M), range(N), range(K)))  # one multiply + one add per term
    elements = M * K + K * N + M * N
    assert arithmetic_intensity(M, N, K, 2) == pytest.approx(flops / (2 * elements))


def test_square_intensity_is_n_over_3_elements():
    for n in (1024, 4096, 8192):  # 2n³ / (3n² · 2 bytes) = n/3 FLOP per byte in fp16
        assert arithmetic_intensity(n, n, n, 2) == pytest.approx(n / 3)


def test_decode_intensity_is_about_one():
    """M = 1: each weight element is used once (2 FLOPs per 2 bytes): memory-bound on every GPU."""
    assert arithmetic_intensity(1, 4096, 4096, 2) == pytest.approx(1.0, rel=1e-3)
    assert arithmetic_intensity(16, 14336, 4096, 2) == pytest.approx(16, rel=0.01)


def test_roofline_switches_at_the_ridge_point():
    peak, bandwidth = 989.0, 3350.0  # H100 SXM dense bf16 TFLOP/s, HBM3 GB/s (datasheet figures)
    ridge = peak * 1000 / bandwidth  # FLOP per byte where both limits meet
    assert roofline_tflops(1, 4096, 4096, peak, bandwidth) == pytest.approx(3.35, rel=1e-2)
    assert roofline_tflops(8192, 8192, 8192, peak, bandwidth) == peak
    assert arithmetic_intensity(128, 4096, 4096) < ridge < arithmetic_intensity(4096, 4096, 4096)


def test_tile_intensity_brute_force():
    """Per K step a BM×BN tile loads BM·BK + BK·BN elements and does 2·BM·BN·BK FLOPs."""
    for bm, bn, bk in ((64, 64, 32), (128, 256, 64)):
        loaded = (bm * bk + bk * bn) * 2
        assert tile_intensity(bm, bn, 2) == pytest.approx(2 * bm * bn * bk / loaded)
    assert tile_intensity(128, 256) > tile_intensity(128, 128) > tile_intensity(64, 64)


def _brute_force_order(num_pid_m, num_pid_n, group):
    """Tiles sorted by (group of tile rows, column, row): the grouped order, by definition."""
    tiles = [(m, n) for m in range(num_pid_m) for n in range(num_pid_n)]
    return sorted(tiles, key=lambda t: (t[0] // group, t[1], t[0]))


@pytest.mark.parametrize("num_pid_m, num_pid_n, group", [(8, 4, 3), (4, 4, 1), (5, 7, 2), (9, 3, 8)])
def test_grouped_map_equals_brute_force(num_pid_m, num_pid_n, group):
    order = [tile_coordinates(pid, num_pid_m, num_pid_n, group) for pid in range(num_pid_m * num_pid_n)]
    assert order == _brute_force_order(num_pid_m, num_pid_n, group)


def test_the_kernels_map_is_the_python_map():
    assert kernel_tile_map(8, 4, 3) == [tile_coordinates(pid, 8, 4, 3) for pid in range(32)]


def test_worked_example_reads_fewer_panels_grouped():
    """The seed's example (M = 16, N = 8 with 2×2 blocks → 8×4 tiles, GROUP 3), a wave of 9 programs."""
    assert panels_read(8, 4, 1, 9) == (3, 4)  # row-major: 3 A panels, all 4 B panels
    assert panels_read(8, 4, 3, 9) == (3, 3)  # grouped: same A panels, one B panel fewer
    assert sum(panels_read(32, 32, 8, 64)) < sum(panels_read(32, 32, 1, 64))  # 16 + 8 vs 2 + 32
