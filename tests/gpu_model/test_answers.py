"""The exercise answers of "The GPU you are programming" (examples/gpu_model/answers.py)."""

import pytest

from examples.gpu_model.answers import (
    is_compute_bound,
    matmul_intensity,
    matmul_time_bound_ms,
    register_cap,
    smallest_conflict_free_padding,
)
from examples.gpu_model.measured import measured_ceilings
from examples.gpu_model.occupancy import occupancy


def test_register_cap_for_half_occupancy():
    assert occupancy(96, 128, gpu="H100").fraction == 20 / 64
    assert register_cap(128, 0.5, "H100") == 64
    assert occupancy(64, 128, gpu="H100").fraction == 0.5
    assert occupancy(65, 128, gpu="H100").fraction < 0.5
    assert register_cap(256, 1.0, "H100") == 32


def test_padding():
    assert smallest_conflict_free_padding() == 1


def test_matmul_roofline_with_measured_ceilings():
    c = measured_ceilings("h100")
    assert matmul_intensity(4096, 4096, 4096) == pytest.approx(4096 / 3)
    assert is_compute_bound(4096, 4096, 4096, c.matmul_tflops, c.copy_gbps)
    assert not is_compute_bound(16, 4096, 4096, c.matmul_tflops, c.copy_gbps)
    # compute bound: the bound is the FLOPs at the matmul ceiling
    assert matmul_time_bound_ms(4096, 4096, 4096, c.matmul_tflops, c.copy_gbps) == pytest.approx(
        2 * 4096**3 / (c.matmul_tflops * 1e12) * 1e3
    )
    # memory bound: the bound is the bytes at the copy ceiling
    skinny_bytes = 2 * (16 * 4096 + 4096 * 4096 + 16 * 4096)
    assert matmul_time_bound_ms(16, 4096, 4096, c.matmul_tflops, c.copy_gbps) == pytest.approx(
        skinny_bytes / (c.copy_gbps * 1e9) * 1e3
    )
