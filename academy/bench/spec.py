"""What a chapter's ``bench.py`` declares: the cases, the providers, the work model.

A spec is data plus three small functions, so the runner (GPU only) and the
tests (CPU) can share it: the tests check that every case builds valid inputs
and that the work model counts what the page says it counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from academy.bench.results import case_key

import torch

MODES = ("fwd", "fwd+bwd")
METRICS = ("bandwidth", "compute")


@dataclass(frozen=True)
class Case:
    """One measured configuration: a shape, a dtype and what is timed."""

    sweep: str
    x: str
    params: Mapping[str, int]
    dtype: torch.dtype
    mode: str
    metric: str = "bandwidth"
    """What the case is measured against: "bandwidth" (bytes, the copy ceiling) or "compute"."""
    providers: tuple[str, ...] | None = None
    """The providers timed on this case (``None``: all of the spec's)."""
    label: str = ""
    """What the shape stands for, shown beside it (the models that have it); may be empty."""

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def key(self) -> str:
        """Its name in a run's saved progress (`academy.bench.results.case_key`)."""
        return case_key(self.sweep, self.params, self.dtype_name, self.mode)


@dataclass(frozen=True)
class Sweep:
    """A family of shapes along one parameter (the plot's x axis).

    ``Sweep("M=8192", x="N", shapes=[{"M": 8192, "N": n} for n in ...])``
    """

    name: str
    x: str
    shapes: Sequence[Mapping[str, int]]
    providers: Sequence[str] | None = None
    """Only these providers on this sweep (``None``: all): slow earlier stages of a
    chapter, for example, measured on the shapes that tell their story only."""
    metric: str | None = None
    """Overrides the spec's metric for this sweep: one chapter may time a memory-bound
    family of shapes and a compute-bound one (``work`` then returns bytes for the first
    and FLOPs for the second; ``case.metric`` says which)."""
    labels: Sequence[str] | None = None
    """One label per shape (what it stands for: the models that have it), or ``None``."""
    dtypes: Sequence[torch.dtype] | None = None
    """Overrides the spec's dtypes for this sweep (a zoo of shapes measured in one dtype)."""

    def __post_init__(self) -> None:
        if self.labels is not None and len(self.labels) != len(self.shapes):
            raise ValueError(f"sweep {self.name!r}: {len(self.labels)} labels for {len(self.shapes)} shapes")


OpLoader = Callable[[], "Callable | None"]
"""Returns the op to time, or ``None`` when the provider is not installed."""


@dataclass(frozen=True)
class BenchSpec:
    slug: str
    metric: str  # "bandwidth" or "compute"
    sweeps: Sequence[Sweep]
    dtypes: Sequence[torch.dtype]
    modes: Sequence[str]
    make_inputs: Callable[[Case, str], tuple[torch.Tensor, ...]]
    """Fresh random inputs for a case on a device (never zeros)."""
    work: Callable[[Case], float]
    """Minimal bytes moved (bandwidth) or FLOPs (compute) by one timed call."""
    reference: Callable[..., torch.Tensor]
    """The PyTorch reference the outputs are checked against before timing."""
    providers: Mapping[str, OpLoader]
    """Ours first ("academy"), then peers; each loader may return None.

    Names ``"academy:<variant>"`` are our own earlier stages or ablations (a
    naive version, the unfused pair): they are timed and shown, and never
    counted as a peer."""
    quick_shapes: int = 2
    """How many shapes per sweep ``--quick`` keeps (the first ones)."""
    headline: Sequence[tuple[str, Mapping[str, int], str]] = field(default_factory=tuple)
    """(mode, shape, dtype name) cases the page quotes in its summary."""

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        unknown = set(self.modes) - set(MODES)
        if unknown:
            raise ValueError(f"unknown modes {sorted(unknown)}; expected a subset of {MODES}")
        for sweep in self.sweeps:
            if sweep.metric is not None and sweep.metric not in METRICS:
                raise ValueError(f"sweep {sweep.name!r}: metric must be one of {METRICS}, got {sweep.metric!r}")
            unknown = set(sweep.providers or ()) - set(self.providers)
            if unknown:
                raise ValueError(f"sweep {sweep.name!r} names providers the spec does not have: {sorted(unknown)}")
        if "academy" not in self.providers:
            raise ValueError("a spec must time our own kernel under the provider name 'academy'")

    def sweep_names(self, names: Sequence[str]) -> list[str]:
        """The sweeps ``names`` select, in spec order: a name selects the sweep of that name, or
        every sweep whose name starts with it and a space ("models" selects "models T=4096")."""

        def selects(name: str, sweep: str) -> bool:
            return sweep == name or sweep.startswith(name + " ")

        unknown = [name for name in names if not any(selects(name, sweep.name) for sweep in self.sweeps)]
        if unknown:
            raise ValueError(
                f"{self.slug} has no sweep {', '.join(map(repr, unknown))}; "
                f"its sweeps: {', '.join(repr(sweep.name) for sweep in self.sweeps)}"
            )
        return [sweep.name for sweep in self.sweeps if any(selects(name, sweep.name) for name in names)]

    def cases(self, quick: bool = False, sweeps: Sequence[str] | None = None) -> Iterator[Case]:
        """Every case, in sweep order; ``sweeps`` selects sweeps as `sweep_names` does."""
        selected = None if sweeps is None else set(self.sweep_names(sweeps))
        for sweep in self.sweeps:
            if selected is not None and sweep.name not in selected:
                continue
            labels = sweep.labels or [""] * len(sweep.shapes)
            pairs = list(zip(sweep.shapes, labels))
            for shape, label in pairs[: self.quick_shapes] if quick else pairs:
                for dtype in sweep.dtypes or self.dtypes:
                    for mode in self.modes:
                        yield Case(
                            sweep.name,
                            sweep.x,
                            dict(shape),
                            dtype,
                            mode,
                            sweep.metric or self.metric,
                            None if sweep.providers is None else tuple(sweep.providers),
                            label,
                        )
