"""What the committed benchmark results say about the GPU: measured ceilings and roofline points.

:func:`measured_ceilings` reads the copy bandwidth and matmul rate a chapter's
results file measured; :func:`measured_points` places our kernels' measured
rows on the roofline, using the FLOP counts of :data:`FLOPS_PER_ELEMENT`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from academy.bench.results import load
from academy.chapters import all_chapters

from examples.gpu_model.roofline import Point, ridge_point

FLOPS_PER_ELEMENT = {
    ("vector_add", "fwd"): 1,  # one add
    # max (one compare), subtract the max, exp, add to the sum, multiply by 1/sum
    ("fused_softmax", "fwd"): 5,
    # plus the backward dx = y * (dy - sum(y * dy)): multiply, add to the sum, subtract, multiply
    ("fused_softmax", "fwd+bwd"): 9,
}
"""Floating-point operations per element of each measured kernel (an exp counts as one)."""


def elements(params: dict[str, int]) -> int:
    return math.prod(params.values())


def intensity(slug: str, mode: str, params: dict[str, int], bytes_moved: float) -> float:
    """FLOP per byte of a measured row: the FLOP count above over the chapter's bytes model."""
    return FLOPS_PER_ELEMENT[(slug, mode)] * elements(params) / bytes_moved


@dataclass(frozen=True)
class MeasuredCeilings:
    gpu: str
    copy_gbps: float
    matmul_tflops: float
    path: Path

    @property
    def ridge_point(self) -> float:
        return ridge_point(self.matmul_tflops, self.copy_gbps)


def measured_ceilings(gpu: str = "h100") -> MeasuredCeilings:
    """The ceilings measured with the first chapter results file for ``gpu`` (a results file stem)."""
    for chapter in all_chapters():
        for path in chapter.results_files():
            if path.stem == gpu:
                results = load(path)
                return MeasuredCeilings(
                    results.provenance.gpu, results.ceilings.copy_gbps, results.ceilings.matmul_tflops, path
                )
    raise FileNotFoundError(f"no chapter has a results file for {gpu!r} (examples/*/results/{gpu}.json)")


def measured_points(gpu: str = "h100", provider: str = "academy") -> list[Point]:
    """Our kernels' rows from the committed results for ``gpu``, as roofline points.

    Only (chapter, mode) pairs with a FLOP count in :data:`FLOPS_PER_ELEMENT`
    are placed; the achieved FLOP rate is the FLOP count over the measured time.
    """
    points = []
    for chapter in all_chapters():
        for path in chapter.results_files():
            if path.stem != gpu:
                continue
            results = load(path)
            for row in results.rows:
                key = (results.slug, row.mode)
                if row.provider != provider or key not in FLOPS_PER_ELEMENT:
                    continue
                flops = FLOPS_PER_ELEMENT[key] * elements(row.params)
                points.append(
                    Point(
                        label=f"{results.slug} {row.mode} {row.shape_label} {row.dtype}",
                        intensity=flops / row.work,
                        tflops=flops / (row.ms * 1e-3) / 1e12,
                        group=f"{results.slug} ({row.mode})",
                    )
                )
    return points
