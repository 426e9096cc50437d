"""The performance dashboard: every kernel × shape × GPU, from the results files only."""

from __future__ import annotations

import dataclasses
import math

from academy.bench import render
from academy.bench.results import Ceilings
from academy.site import dashboard

from tests.results_fixtures import make_results, make_row


def entry(results, current_hash="aaaa", slug="fixture_op"):
    return dashboard.ChapterResults(slug, "Fixture op", "kernels/fixture_op.md", results, current_hash)


def body_lines(md):
    return [line for line in md.splitlines() if line.startswith("| H100") or line.startswith("| A100")]


def test_one_line_per_gpu_and_case_with_ceiling_and_best_peer():
    h100 = make_results(
        [
            make_row("academy", 1024, 1.0),
            make_row("academy:naive", 1024, 0.5),  # our own stage: faster, but never a peer
            make_row("eager", 1024, 2.0),
            make_row("compile", 1024, 1.5),
            make_row("academy", 4096, 4.0),
            make_row("eager", 4096, 3.0),
        ]
    )
    a100 = make_results([make_row("academy", 1024, 2.0), make_row("eager", 1024, 2.0)], gpu="NVIDIA A100-SXM4-80GB")
    md = dashboard.render_dashboard([entry([h100, a100])])
    lines = body_lines(md)
    assert len(lines) == 3  # A100 one case, H100 two cases
    first_h100 = next(line for line in lines if line.startswith("| H100") and "N=1024" in line)
    assert "| **1.50×** torch.compile |" in first_h100
    assert "% copy" in first_h100
    assert "| 0.75× eager |" in next(line for line in lines if "N=4096" in line)
    assert "[Fixture op](kernels/fixture_op.md)" in md
    assert "stale" not in md


def test_compute_rows_use_the_matmul_ceiling():
    row = dataclasses.replace(make_row("academy", 1024, 1.0), metric="compute", rate=500.0, fraction_of_ceiling=0.5)
    res = make_results([row, make_row("academy", 4096, 1.0)])
    res.ceilings = Ceilings(copy_gbps=3000.0, matmul_tflops=1000.0, copy_bytes=1, matmul_size=8192)
    lines = body_lines(dashboard.render_dashboard([entry([res])]))
    assert "500 TFLOP/s | 50.0% matmul |" in lines[0]
    assert "GB/s" in lines[1] and "% copy" in lines[1]


def test_stale_files_are_marked_and_unmeasured_chapters_listed():
    res = make_results([make_row("academy", 1024, 1.0)], kernel_hash="old")
    md = dashboard.render_dashboard([entry([res], current_hash="new"), entry([], slug="other")])
    assert all("⚠ stale" in line for line in body_lines(md))
    assert "## Not measured yet" in md


def test_nothing_measured():
    assert "Nothing measured yet" in dashboard.render_dashboard([entry([])])


def test_real_dashboard_covers_every_measured_chapter():
    from academy.chapters import all_chapters

    md = dashboard.dashboard()
    for ch in all_chapters():
        if ch.results_files() and ch.page.is_file():
            assert f"]({ch.nav_path})" in md, ch.slug


def test_summary_at_a_glance_one_line_per_chapter_and_gpu():
    h100 = make_results(
        [
            make_row("academy", 1024, 1.0),
            make_row("eager", 1024, 2.0),  # 2.00x
            make_row("academy", 4096, 4.0),
            make_row("eager", 4096, 2.0),  # 0.50x: the worst case
            make_row("academy", 1024, 1.0, mode="fwd+bwd"),
            make_row("eager", 1024, 1.0, mode="fwd+bwd"),  # 1.00x
        ]
    )
    a100 = make_results([make_row("academy", 1024, 2.0), make_row("eager", 1024, 3.0)], gpu="NVIDIA A100-SXM4-80GB")
    md = dashboard.render_dashboard([entry([h100, a100], current_hash="aaaa")])
    summary = md[md.index("## At a glance") : md.index("## Fixture op")]
    lines = [line for line in summary.splitlines() if line.startswith("| [Fixture op]")]
    assert len(lines) == 2 and lines[0].startswith("| [Fixture op](#chapter-fixture-op) | A100 |")
    h100_line = lines[1]
    assert "fwd **1.00×** · fwd+bwd **1.00×**" in h100_line  # geometric mean of 2.00x and 0.50x
    assert "fwd 0.50× · fwd+bwd **1.00×**" in h100_line
    assert "fwd M=8192, N=4096, bfloat16: 0.50× eager" in h100_line
    assert "2025-01-02 `0123456`" in h100_line
    assert "## Fixture op {#chapter-fixture-op}" in md


def test_model_zoo_table_summarises_the_zoo_sweeps_only():
    rows = [
        make_row("academy", 1024, 1.0),
        make_row("eager", 1024, 4.0),  # 4.00x, outside the zoo
        make_row("academy", 2048, 2.0, sweep="models M=8192"),
        make_row("eager", 2048, 1.5, sweep="models M=8192"),  # 0.75x, the zoo's only case
    ]
    md = dashboard.render_dashboard([entry([make_results(rows)], current_hash="aaaa")])
    zoo = md[md.index("## Over the model zoo") : md.index("## Fixture op")]
    (line,) = [line for line in zoo.splitlines() if line.startswith("| [Fixture op]")]
    assert "| fwd 0.75× | fwd 0.75× | fwd M=8192, N=2048, bfloat16: 0.75× eager |" in line
    glance = md[md.index("## At a glance") : md.index("## Over the model zoo")]
    assert f"fwd **{render.fmt_ratio(math.sqrt(4.0 * 0.75))}**" in glance  # every case: 4.00x and 0.75x
    without_zoo = dashboard.render_dashboard([entry([make_results(rows[:2])])])
    assert "## Over the model zoo" not in without_zoo
