"""The Measuring tutorial's exercise answers and its simulated GPU."""

import numpy as np
import pytest

from examples.measuring.answers import (
    PowerCappedGPU,
    SimulatedGPU,
    copies_to_leave_l2,
    interleaved_medians,
    noisy_timings,
    summarize,
    time_kernel,
)


def test_unsynchronised_timing_measures_the_launch_only():
    gpu = SimulatedGPU(launch_ms=0.01, compile_ms=0.0)
    start = gpu.host_now
    gpu.launch("k", 2.0)
    assert gpu.host_now - start == pytest.approx(0.01)
    gpu.synchronize()
    assert gpu.host_now - start == pytest.approx(2.01)


def test_events_time_the_device_work():
    gpu = SimulatedGPU(launch_ms=0.01, compile_ms=0.0)
    begin = gpu.record_event()
    for _ in range(5):
        gpu.launch("k", 1.0)
    end = gpu.record_event()
    assert (end - begin) / 5 == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("work_ms", [0.001, 0.2, 3.0])
def test_time_kernel_excludes_compilation_and_includes_the_work(work_ms):
    gpu = SimulatedGPU(launch_ms=0.005, compile_ms=80.0)
    times = time_kernel(gpu, "k", work_ms, warmup=2, reps=10)
    assert len(times) == 10
    assert max(times) < 1.0 + work_ms  # no 80 ms compile inside
    assert min(times) == pytest.approx(work_ms + gpu.launch_ms)  # the launch is part of a host-timed call


def test_time_kernel_does_not_inherit_queued_work():
    gpu = SimulatedGPU(launch_ms=0.005, compile_ms=0.0)
    for _ in range(100):  # a backlog, queued by someone else
        gpu.launch("other", 1.0)
    times = time_kernel(gpu, "k", 0.1, warmup=0, reps=3)
    assert max(times) == pytest.approx(0.105)


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1001])
def test_summarize_matches_numpy(n):
    samples = np.random.default_rng(n).exponential(size=n)
    quantiles = (0.5, 0.2, 0.8, 0.0, 1.0)
    assert summarize(samples, quantiles) == pytest.approx(tuple(np.quantile(samples, quantiles)))


def test_summarize_rejects_bad_input():
    with pytest.raises(ValueError, match="no samples"):
        summarize([])
    with pytest.raises(ValueError, match="outside"):
        summarize([1.0], (1.5,))


def test_median_resists_outliers_where_the_mean_does_not():
    times = noisy_timings(2000, 0.05, seed=3)
    median, p20, p80 = summarize(times)
    assert p20 <= median <= p80
    assert abs(median - 0.05) < 0.005
    assert times.mean() > p80  # the stalls pull the mean above most samples


@pytest.mark.parametrize(
    "bytes_per_call, l2, expected",
    [
        (12 * 2**20, 50 * 2**20, 17),  # 4 × 50 MB / 12 MB = 16.7, rounded up
        (2**30, 50 * 2**20, 1),  # far larger than L2: one copy is enough
        (1024, 50 * 2**20, 64),  # tiny calls: capped
        (50 * 2**20, 50 * 2**20, 4),
    ],
)
def test_copies_to_leave_l2(bytes_per_call, l2, expected):
    assert copies_to_leave_l2(bytes_per_call, l2) == expected


def test_copies_to_leave_l2_rejects_nonsense():
    with pytest.raises(ValueError):
        copies_to_leave_l2(0, 2**20)


KERNELS = {"peer": (0.9, True), "ours": (1.0, False), "ours again": (1.0, False)}


def _apart(medians):
    return max(medians["ours"], medians["ours again"]) / min(medians["ours"], medians["ours again"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fixed_order_charges_one_copy_of_a_kernel_for_the_hungry_peer(seed):
    """In a fixed order "ours" always follows the peer, so it reads slower by the whole throttle."""
    throttle = PowerCappedGPU().throttle
    assert _apart(interleaved_medians(KERNELS, "fixed", seed=seed)) == pytest.approx(1 + throttle, abs=0.02)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_random_order_lets_two_copies_of_a_kernel_agree(seed):
    assert _apart(interleaved_medians(KERNELS, "random", seed=seed)) < 1.02
    assert _apart(interleaved_medians(KERNELS, "rotated", seed=seed)) > 1.04  # rotation is not enough


def test_interleaved_medians_rejects_an_unknown_order():
    with pytest.raises(ValueError, match="order"):
        interleaved_medians(KERNELS, "alphabetical")
