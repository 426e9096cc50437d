"""Summary numbers of a results file, for the dashboard: how ours fares against the best peer.

For each mode and each set of sweeps (all of them, the model-zoo sweeps, the
others): the geometric mean and the worst of the ratios *best peer's median ÷
ours* over the cases that have both (above 1: ours is faster; the same ratio
as the tables, `academy.bench.render.compare`), the worst case, and the
median of ours as a fraction of its ceiling. Peers are the providers not named
``academy`` or ``academy:*``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from academy.bench.render import compare
from academy.bench.results import OURS, Results, Row

MODELS_PREFIX = "models"
"""Sweeps generated from the model zoo (`academy.bench.models`) are named ``models…``."""


def is_models_sweep(sweep: str) -> bool:
    return sweep == MODELS_PREFIX or sweep.startswith(MODELS_PREFIX + " ")


SWEEP_SETS: Mapping[str, Callable[[str], bool]] = {
    "all": lambda sweep: True,
    "models": is_models_sweep,
    "other": lambda sweep: not is_models_sweep(sweep),
}
"""The default sets of sweeps: a name and which sweeps belong to it."""


@dataclass(frozen=True)
class Summary:
    sweep_set: str
    mode: str
    cases: int
    """Cases where ours was measured."""
    compared: int
    """Of those, cases where a peer was measured too (the ratios' count)."""
    geomean_ratio: float | None
    """Geometric mean of best peer ÷ ours over the compared cases (above 1: ours faster)."""
    worst_ratio: float | None
    worst_ours: Row | None
    """Our row on the worst case (its sweep, shape, dtype and label)."""
    worst_peer: Row | None
    """The best peer's row on the worst case."""
    median_fraction_of_ceiling: float | None
    """Median over the cases of ours ÷ the ceiling of the case's metric."""

    @property
    def worst_shape(self) -> dict[str, int] | None:
        return None if self.worst_ours is None else dict(self.worst_ours.params)


def _cases(rows: list[Row]) -> dict[tuple, dict[str, Row]]:
    cases: dict[tuple, dict[str, Row]] = {}
    for row in rows:
        key = (row.sweep, tuple(row.params.items()), row.dtype, row.mode)
        cases.setdefault(key, {}).setdefault(row.provider, row)
    return cases


def summarize(
    results: Results, sweep_sets: Mapping[str, Callable[[str], bool]] = SWEEP_SETS, *, keep_empty: bool = False
) -> list[Summary]:
    """One `Summary` per (sweep set, mode), in the order of ``sweep_sets`` then the file's modes;
    sets with no case of ours in a mode are left out unless ``keep_empty``."""
    modes = list(dict.fromkeys(row.mode for row in results.rows))
    out = []
    for name, member in sweep_sets.items():
        for mode in modes:
            rows = [row for row in results.rows if row.mode == mode and member(row.sweep)]
            cases = [case for case in _cases(rows).values() if OURS in case]
            if not cases and not keep_empty:
                continue
            comparisons = [(compare(case), case) for case in cases]
            ratios = [(c.ratio, c) for c, _ in comparisons if c.ratio is not None and c.ratio > 0]
            worst = min(ratios, key=lambda pair: pair[0], default=None)
            fractions = [case[OURS].fraction_of_ceiling for case in cases]
            out.append(
                Summary(
                    sweep_set=name,
                    mode=mode,
                    cases=len(cases),
                    compared=len(ratios),
                    geomean_ratio=math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios)) if ratios else None,
                    worst_ratio=worst[0] if worst else None,
                    worst_ours=worst[1].ours if worst else None,
                    worst_peer=worst[1].best_peer if worst else None,
                    median_fraction_of_ceiling=statistics.median(fractions) if fractions else None,
                )
            )
    return out
