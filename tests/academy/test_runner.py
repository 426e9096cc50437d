"""The runner's CPU-testable parts: verification, the gradient it feeds backward, the order of replays."""

from collections import Counter

from academy.bench import peers, runner

import pytest
import torch


def test_verification_gives_the_reference_its_own_inputs():
    """A peer that overwrites its input (as Liger's cross entropy writes the logits'
    gradient over the logits) must not change what the reference then reads."""

    def destructive_double(x):
        out = 2 * x
        x.data.zero_()
        return out

    x = torch.randn(64, dtype=torch.float64)
    assert runner._verify(destructive_double, lambda t: 2 * t, (x,), None, torch.float32) == 0
    assert x.abs().sum() > 0, "the caller's inputs are untouched too"


def test_verification_compares_gradients_and_fails_when_wrong():
    x = torch.randn(64, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(64, dtype=torch.float64)
    assert runner._verify(lambda t: t * t, lambda t: t.square(), (x,), grad, torch.float32) == 0

    def wrong_grad(t):  # right value, gradient 1 instead of 2x
        return t.detach() * t.detach() + (t - t.detach())

    with pytest.raises(runner.WrongResult, match="relative L2 error"):
        runner._verify(wrong_grad, lambda t: t.square(), (x,), grad, torch.float32)


def test_host_synchronising_ops_are_marked_for_host_timing():
    op = peers.host_synchronising(lambda x: x + 1)
    assert op(1) == 2 and op.graph_safe is False
    assert getattr(lambda x: x, "graph_safe", True) is True


class _FakeClock:
    """Stands in for the GPU: replays advance a clock, events read it, and every replay is logged."""

    def __init__(self):
        self.now, self.log = 0.0, []

    def event(self, enable_timing=True):
        clock = self

        class Event:
            def record(self):
                self.t = clock.now

            def elapsed_time(self, other):
                return other.t - self.t

        return Event()

    def graph(self, name, ms_per_replay):
        clock = self

        class Graph:
            def replay(self):
                clock.now += ms_per_replay
                clock.log.append(name)

        return Graph()


@pytest.fixture
def clock(monkeypatch):
    """The fake GPU in place of CUDA's events and the L2 clean read (logged as "clean"); 30 ms per graph."""
    fake = _FakeClock()
    monkeypatch.setattr(torch.cuda, "Event", fake.event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(runner, "MIN_TIMED_MS", 30.0)
    monkeypatch.setattr(runner, "l2_cleaner", lambda: lambda: fake.log.append("clean"))
    return fake


def test_interleaved_timing_alternates_graphs_and_times_each_alone(clock):
    graphs = {"fast": (clock.graph("fast", 0.5), 2), "slow": (clock.graph("slow", 6.0), 3)}

    timings = runner.time_graphs_ms(graphs)

    timed = clock.log[10:]  # after the five calibration replays of each
    assert timed[0::2] == ["clean"] * (len(timed) // 2), "every timed replay follows an L2 clean"
    timed = timed[1::2]
    assert all(sorted(timed[i : i + 2]) == ["fast", "slow"] for i in range(0, 20, 2)), "one replay of each per round"
    assert timed.count("slow") == 10 and timed.count("fast") == 60  # 10 replays at least, and 30 ms of them
    assert timings["fast"] == pytest.approx((0.25, 0.25, 0.25)) and timings["slow"] == pytest.approx((2.0, 2.0, 2.0))


def test_interleaved_rounds_vary_which_graph_follows_which(clock):
    names = ("a", "b", "c")

    runner.time_graphs_ms({name: (clock.graph(name, 0.5), 1) for name in names})

    timed = [name for name in clock.log[15:] if name != "clean"]  # 60 rounds of three
    for name in names:
        successors = Counter(after for before, after in zip(timed, timed[1:]) if before == name and after != name)
        # a fixed order gives one successor 100% of the time, a rotated cyclic order 67%
        assert max(successors.values()) / sum(successors.values()) < 0.6, (name, successors)


def test_a_lone_graph_runs_back_to_back_without_clean_reads(clock):

    timings = runner.time_graphs_ms({"only": (clock.graph("only", 3.0), 3)})

    assert "clean" not in clock.log, "each replay pays for the last one's dirty lines, as in a stream of calls"
    assert clock.log.count("only") == 5 + 10 and timings["only"] == pytest.approx((1.0, 1.0, 1.0))
