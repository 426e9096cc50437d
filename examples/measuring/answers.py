"""A simulated GPU for the Measuring tutorial, and the answers to its exercises.

The tutorial (``docs/tutorials/measuring.py``) is executed on a machine with
no GPU, so the timing pitfalls that need one are shown on ``SimulatedGPU``:
a virtual clock, a host that queues launches and returns at once, and a
device that works through the queue. Nothing sleeps; every time is exact and
reproducible. ``tests/measuring/test_answers.py`` checks the answers.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
from collections.abc import Sequence

import numpy as np


# --8<-- [start:simulated_gpu]
class SimulatedGPU:
    """A host and a device sharing one virtual clock, in milliseconds.

    ``launch(name, work_ms)`` costs the host ``launch_ms`` (plus ``compile_ms``
    the first time a kernel name is seen) and queues ``work_ms`` of device
    work, which starts when both the device is free and the launch happened.
    """

    def __init__(self, launch_ms: float = 0.005, compile_ms: float = 50.0):
        self.launch_ms = launch_ms
        self.compile_ms = compile_ms
        self.host_now = 0.0  # what time.perf_counter() would say
        self.device_free_at = 0.0  # when the queued work will be done
        self.compiled: set[str] = set()

    def launch(self, name: str, work_ms: float) -> None:
        if name not in self.compiled:  # the first call compiles: host time
            self.host_now += self.compile_ms
            self.compiled.add(name)
        self.host_now += self.launch_ms  # the host returns right after queueing
        start = max(self.device_free_at, self.host_now)
        self.device_free_at = start + work_ms

    def synchronize(self) -> None:
        """Block the host until the device has finished everything queued."""
        self.host_now = max(self.host_now, self.device_free_at)

    def record_event(self) -> float:
        """An event is a marker in the queue: it 'fires' when the work before it is done."""
        return max(self.device_free_at, self.host_now)


# --8<-- [end:simulated_gpu]


# --8<-- [start:noisy_timings]
def noisy_timings(n: int, true_ms: float, *, seed: int = 0, outlier_rate: float = 0.03) -> np.ndarray:
    """Timings as a GPU gives them: a floor, a little jitter, and rare long stalls.

    Most samples sit just above ``true_ms`` (clocks, scheduling); a few are
    several times longer (another process, a clock drop, the host
    descheduled), which is what drags a mean away from the typical call.
    """
    rng = np.random.default_rng(seed)
    jitter = true_ms * rng.lognormal(mean=-4.0, sigma=0.5, size=n)
    stalls = rng.random(n) < outlier_rate
    stall_ms = true_ms * rng.uniform(2.0, 10.0, size=n) * stalls
    return true_ms + jitter + stall_ms


# --8<-- [end:noisy_timings]


# --8<-- [start:power_capped]
class PowerCappedGPU:
    """Device time only, for kernels compared side by side on a power-capped GPU.

    A kernel's time stretches by ``throttle`` when the kernel before it was
    power-hungry (it left the clock low), plus a little Gaussian jitter.
    """

    def __init__(self, throttle: float = 0.10, jitter: float = 0.03, seed: int = 0):
        self.throttle, self.jitter = throttle, jitter
        self.rng = np.random.default_rng(seed)
        self.clock_is_low = False

    def run(self, work_ms: float, hungry: bool) -> float:
        ms = work_ms * (1 + self.throttle * self.clock_is_low) * (1 + self.jitter * self.rng.standard_normal())
        self.clock_is_low = hungry
        return ms


def interleaved_medians(
    kernels: dict[str, tuple[float, bool]], order: str, *, rounds: int = 300, seed: int = 0
) -> dict[str, float]:
    """Median time of each ``name: (work_ms, hungry)`` over rounds of one call each, in a
    ``"fixed"`` order, a ``"rotated"`` one (one place further each round) or a ``"random"`` one."""
    gpu = PowerCappedGPU(seed=seed)
    names, shuffle = list(kernels), random.Random(seed).shuffle
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        if order == "fixed":
            this_round = names
        elif order == "rotated":
            this_round = names[r % len(names) :] + names[: r % len(names)]
        elif order == "random":
            this_round = names[:]
            shuffle(this_round)
        else:
            raise ValueError(f"order must be 'fixed', 'rotated' or 'random', not {order!r}")
        for name in this_round:
            times[name].append(gpu.run(*kernels[name]))
    return {name: float(np.median(t)) for name, t in times.items()}


# --8<-- [end:power_capped]


# ---------------------------------------------------------------- exercise answers


# --8<-- [start:answer_time_kernel]
def time_kernel(gpu: SimulatedGPU, name: str, work_ms: float, *, warmup: int = 3, reps: int = 20) -> list[float]:
    """Per-call times (ms) of ``name`` on ``gpu``, host-timed the honest way."""
    for _ in range(warmup):  # compile and warm up outside the timed region
        gpu.launch(name, work_ms)
    times = []
    for _ in range(reps):
        gpu.synchronize()  # nothing queued earlier may leak into this sample
        start = gpu.host_now
        gpu.launch(name, work_ms)
        gpu.synchronize()  # wait for the work itself, not just the launch
        times.append(gpu.host_now - start)
    return times


# --8<-- [end:answer_time_kernel]


# --8<-- [start:answer_summarize]
def summarize(samples: Sequence[float], quantiles: Sequence[float] = (0.5, 0.2, 0.8)) -> tuple[float, ...]:
    """The requested quantiles of ``samples``, by linear interpolation between order statistics.

    Quantile ``q`` of n sorted samples sits at position ``q·(n−1)``; between two
    samples, interpolate. With (0.5, 0.2, 0.8) this is the median and the
    20th/80th percentiles our results files report.
    """
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    result = []
    for q in quantiles:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        position = q * (len(ordered) - 1)
        low, high = math.floor(position), math.ceil(position)
        weight = position - low
        result.append(ordered[low] * (1 - weight) + ordered[high] * weight)
    return tuple(result)


# --8<-- [end:answer_summarize]


# --8<-- [start:answer_copies]
def copies_to_leave_l2(bytes_per_call: int, l2_bytes: int, *, multiple: int = 4, max_copies: int = 64) -> int:
    """How many input copies to rotate through so each call reads from DRAM.

    Cycling through copies whose total is ``multiple`` times the L2 size means
    that by the time a copy comes round again, what it left in L2 has long
    been evicted. Never fewer than 1, never more than ``max_copies``.
    """
    if bytes_per_call <= 0 or l2_bytes <= 0:
        raise ValueError("sizes must be positive")
    needed = -(-multiple * l2_bytes // bytes_per_call)  # ceiling division
    return max(1, min(max_copies, needed))


# --8<-- [end:answer_copies]


def bandwidth_gbps(bytes_moved: float, ms: float) -> float:
    """Bytes per millisecond to GB/s (1 GB = 1e9 bytes)."""
    return bytes_moved / ms / 1e6


# --8<-- [start:quiet_stderr]
@contextlib.contextmanager
def quiet_native_stderr():
    """Silence what C++ code writes straight to file descriptor 2 (the
    profiler's start/stop log lines), which Python's ``sys.stderr`` cannot catch."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# --8<-- [end:quiet_stderr]
