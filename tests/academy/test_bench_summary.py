"""academy.bench.summary on synthetic results.

Every number is a planted fixture value chosen so the expected output can be
worked out by hand; none of it is a published measurement.
"""

from __future__ import annotations

import dataclasses
import math

from academy.bench.summary import is_models_sweep, summarize

import pytest

from tests.results_fixtures import make_results, make_row


def _results():
    # "M=8192", fwd:   N=1024 ours 1.0, eager 2.0, compile 1.5 -> 1.5 (compile is best)
    #                  N=4096 ours 4.0, eager 3.0            -> 0.75 (the worst)
    # "models M=16", fwd: N=768 ours 2.0, eager 4.0, academy:naive 1.0 (ours, never a peer) -> 2.0
    #                     N=896 ours only                    -> no ratio, still a case
    # "M=8192", fwd+bwd: N=1024 ours 1.0, eager 1.0          -> 1.0
    return make_results(
        [
            make_row("academy", 1024, 1.0),
            make_row("eager", 1024, 2.0),
            make_row("compile", 1024, 1.5),
            make_row("academy", 4096, 4.0),
            make_row("eager", 4096, 3.0),
            dataclasses.replace(make_row("academy", 768, 2.0, m=16, sweep="models M=16"), label="GPT-2"),
            make_row("eager", 768, 4.0, m=16, sweep="models M=16"),
            make_row("academy:naive", 768, 1.0, m=16, sweep="models M=16"),
            make_row("academy", 896, 1.0, m=16, sweep="models M=16"),
            make_row("academy", 1024, 1.0, mode="fwd+bwd"),
            make_row("eager", 1024, 1.0, mode="fwd+bwd"),
        ]
    )


def _by(summaries):
    return {(s.sweep_set, s.mode): s for s in summaries}


def test_geomean_worst_case_and_median_fraction_per_set_and_mode():
    got = _by(summarize(_results()))
    assert list(got) == [("all", "fwd"), ("all", "fwd+bwd"), ("models", "fwd"), ("other", "fwd"), ("other", "fwd+bwd")]
    every = got["all", "fwd"]
    assert (every.cases, every.compared) == (4, 3)
    assert every.geomean_ratio == pytest.approx((1.5 * 0.75 * 2.0) ** (1 / 3))
    assert every.worst_ratio == pytest.approx(0.75)
    assert every.worst_shape == {"M": 8192, "N": 4096} and every.worst_ours.sweep == "M=8192"
    assert every.worst_peer.provider == "eager"
    fractions = sorted(
        row.fraction_of_ceiling for row in _results().rows if row.provider == "academy" and row.mode == "fwd"
    )
    assert every.median_fraction_of_ceiling == pytest.approx((fractions[1] + fractions[2]) / 2)

    zoo = got["models", "fwd"]
    assert (zoo.cases, zoo.compared) == (2, 1), "our own stage is never the best peer"
    assert zoo.geomean_ratio == zoo.worst_ratio == pytest.approx(2.0) and zoo.worst_ours.label == "GPT-2"

    other = got["other", "fwd"]
    assert other.geomean_ratio == pytest.approx(math.sqrt(1.5 * 0.75)) and other.worst_ratio == pytest.approx(0.75)
    assert got["all", "fwd+bwd"].geomean_ratio == pytest.approx(1.0)


def test_sets_without_cases_are_left_out_unless_asked():
    got = _by(summarize(_results(), keep_empty=True))
    empty = got["models", "fwd+bwd"]
    assert empty.cases == 0 and empty.geomean_ratio is None and empty.worst_ours is None and empty.worst_shape is None
    assert empty.median_fraction_of_ceiling is None


def test_custom_sets_and_cases_without_peers():
    only_ours = make_results([make_row("academy", 1024, 1.5)])
    [summary] = summarize(only_ours, {"everything": lambda sweep: True})
    assert summary.sweep_set == "everything" and summary.compared == 0 and summary.geomean_ratio is None
    assert summary.median_fraction_of_ceiling == pytest.approx(only_ours.rows[0].fraction_of_ceiling)


@pytest.mark.parametrize(
    "sweep, zoo", [("models", True), ("models T=4096", True), ("modelsx", False), ("M=8192", False)]
)
def test_models_sweeps_are_named_models(sweep, zoo):
    assert is_models_sweep(sweep) is zoo
