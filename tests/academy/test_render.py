"""academy.bench.render on small synthetic results.

Every number below is a planted fixture value chosen so the expected output can
be worked out by hand; none of it is a published measurement.
"""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET

from academy.bench import render
from academy.bench.results import Results
from academy.bench.summary import is_models_sweep, summarize

import pytest

from tests.results_fixtures import make_results, make_row

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def results():
    # N=1024: ours 1.0 ms, eager 2.0 ms, compile 1.5 ms  -> best peer compile, 1.50x
    # N=4096: ours 4.0 ms, eager 3.0 ms, no compile      -> best peer eager, 0.75x
    # N=16384: ours only                                 -> no ratio
    return make_results(
        [
            make_row("academy", 1024, 1.0),
            make_row("eager", 1024, 2.0),
            make_row("compile", 1024, 1.5),
            make_row("eager", 4096, 3.0),
            make_row("academy", 4096, 4.0),
            make_row("academy", 16384, 10.0),
        ],
        skipped={"liger": "not installed"},
    )


def table_cells(markdown):
    lines = [l for l in markdown.splitlines() if l.startswith("|")]

    def split(line):
        return [c.strip() for c in line.strip("|").split("|")]

    return split(lines[0]), [split(line) for line in lines[2:]]


def names(header):
    """A header row's names, without the units line under them and the places to wrap."""
    return [cell.split("<br>")[0].replace("<wbr>", "") for cell in header]


# --------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    "value, text",
    [
        (2950.4, "2,950"),
        (0.012345, "0.0123"),
        (1.0, "1.00"),
        (9.996, "10.0"),
        (123456, "123,000"),
        (87.25, "87.2"),
        (0, "0"),
    ],
)
def test_fmt_three_significant_figures(value, text):
    assert render.fmt(value) == text


def test_provider_order_ours_first_then_known_peers_then_sorted():
    assert render.order_providers(["zeta", "liger", "eager", "academy", "compile", "alpha"]) == [
        "academy",
        "eager",
        "compile",
        "liger",
        "alpha",
        "zeta",
    ]


# --------------------------------------------------------------------------- table


def test_table_columns_and_ratios(results):
    header, rows = table_cells(render.table(results))
    assert names(header) == ["M×N", "ours", "eager", "torch.compile", "% of copy", "vs best peer"]
    assert header[0] == "M×<wbr>N" and header[1] == "ours<br><small>ms, GB/s</small>"  # units once, in the header
    assert [r[0] for r in rows] == ["8192×<wbr>1024", "8192×<wbr>4096", "8192×<wbr>16384"]
    first, second, third = rows
    # rate = 2*8192*1024*2 B / 1 ms = 33.6 GB/s; p20/p80 = 0.99/1.02 ms -> ±1.5%
    assert first[1] == "1.00 <small>±1.5%</small><br>33.6"
    assert first[2].startswith("2.00 <small>")
    assert first[-1] == "**1.50×** <small>torch.<wbr>compile</small>"  # 1.5 ms / 1.0 ms, bold: ours faster
    assert second[-1] == "0.75× <small>eager</small>"  # 3.0 / 4.0, not bold
    assert third[-1] == "—"
    assert first[-2] == "1.12%"  # 33.55 / 3000


def test_table_missing_provider_is_a_dash(results):
    _, rows = table_cells(render.table(results))
    assert rows[1][3] == "—"  # no torch.compile at N=4096
    assert rows[2][2:4] == ["—", "—"]  # ours alone at N=16384


def test_table_two_to_one_and_tie():
    res = make_results([make_row("academy", 512, 1.0), make_row("eager", 512, 2.0)])
    _, rows = table_cells(render.table(res))
    assert rows[0][-1].startswith("**2.00×**")
    tie = make_results([make_row("academy", 512, 1.0), make_row("eager", 512, 1.0)])
    assert table_cells(render.table(tie))[1][0][-1].startswith("**1.00×**")  # a tie is bold too


def test_table_mentions_skipped_providers_and_ceiling(results):
    text = render.table(results)
    assert "Liger (not installed)" in text
    assert "3,000 GB/s" in text


def test_table_filters_and_extra_columns():
    res = make_results([make_row("academy", 1024, 1.0, mode="fwd"), make_row("academy", 1024, 3.0, mode="fwd+bwd")])
    header, rows = table_cells(render.table(res))
    # The mode varies: it goes under the shape, not in a column of its own.
    assert header[0] == "M×<wbr>N<br><small>mode</small>" and len(header) == 4 and len(rows) == 2
    assert [r[0] for r in rows] == ["8192×<wbr>1024<br><small>fwd</small>", "8192×<wbr>1024<br><small>fwd+bwd</small>"]
    header, rows = table_cells(render.table(res, mode="fwd+bwd"))
    assert "mode" not in header[0] and len(rows) == 1 and rows[0][1].startswith("3.00 <small>")
    with pytest.raises(ValueError, match="mode='bwd'"):
        render.table(res, mode="bwd")


# --------------------------------------------------------------------------- fitting the column


def test_times_under_a_millisecond_read_in_microseconds():
    fast = make_results([make_row("academy", 1024, 0.0131), make_row("eager", 1024, 0.5)])
    header, rows = table_cells(render.table(fast))
    assert header[1] == "ours<br><small>µs, GB/s</small>" and rows[0][1].startswith("13.1 <small>")
    # One slow provider: 3,710 µs is still shorter than 0.00331 ms.
    mixed = make_results([make_row("academy", 1024, 0.00331), make_row("eager", 1024, 3.71)])
    assert table_cells(render.table(mixed))[1][0][2].startswith("3,710 <small>")
    # 137 ms would be 137,000 µs: the table stays in ms.
    slow = make_results([make_row("academy", 1024, 0.0122), make_row("eager", 1024, 137.0)])
    assert table_cells(render.table(slow))[0][1] == "ours<br><small>ms, GB/s</small>"


def test_names_and_shapes_get_places_to_wrap():
    assert render.breakable("torch.compile") == "torch.<wbr>compile"
    assert render.breakable("sdpa_pregathered") == "sdpa_<wbr>pregathered"
    assert render.breakable("FlashAttention") == "Flash<wbr>Attention"
    for name in ("cuBLAS", "PyTorch", "ours (k loop)"):  # short or already breakable: as they are
        assert render.breakable(name) == name
    assert render.shape_cell([8, 4096, 128]) == "8×<wbr>4096×<wbr>128"


def test_text_em_is_the_longest_run_that_cannot_wrap():
    assert render.text_em("8×<wbr>4096×<wbr>128") == render.text_em("4096×")
    assert render.text_em("ours<br><small>ms, TFLOP/s</small>") == render.text_em("<small>TFLOP/s</small>")
    assert render.text_em("<small>TFLOP/s</small>") < render.text_em("TFLOP/s") < render.text_em("**TFLOP/s**")
    assert render.text_em("Mistral-Nemo-12B") == render.text_em("Mistral-")


def many_providers():
    peers = ["eager", "compile", "liger", "flash", "cublas"]
    stages = ["academy:naive", "academy:k_loop", "academy:grouped", "academy:pipelined"]
    rows = [make_row(p, n, 1.0 + i / 10) for n in (1024, 4096) for i, p in enumerate(["academy", *stages, *peers])]
    return make_results(rows)


def test_a_table_too_wide_for_its_column_is_split():
    res = many_providers()
    assert render.table(res, width_em=1000).count("|:--|") == 1
    text = render.table(res, width_em=30)
    tables = [t for t in text.split("\n\n") if t.startswith("|")]
    assert len(tables) >= 3
    seen = []
    for i, table in enumerate(tables):
        header, rows = table_cells(table)
        # Every table: the case, then ours; the ceiling and the best peer only in the first.
        assert names(header)[:2] == ["M×N", "ours"] and [r[0] for r in rows] == ["8192×<wbr>1024", "8192×<wbr>4096"]
        assert (names(header)[-2:] == ["% of copy", "vs best peer"]) == (i == 0)
        seen += [h for h in names(header)[2:] if h not in ("% of copy", "vs best peer")]
        columns = zip(header, *rows)
        assert sum(max(map(render.text_em, column)) + render.CELL_PADDING_EM for column in columns) <= 30
    # Every provider once: the peers first, then our own stages.
    peers = ["eager", "torch.compile", "cuBLAS", "FlashAttention", "Liger"]
    assert seen == [*peers, "ours (naive)", "ours (k loop)", "ours (grouped)", "ours (pipelined)"]
    assert "*The same cases: ours against its own earlier stages.*" in text
    assert text.count("median time per call") == 1  # one note for all of them


def test_fit_columns_keeps_a_table_that_fits_whole():
    lead = [render.Column("M×N", ("1×2",), numeric=False)]
    providers = {p: render.Column(p, ("1.00",)) for p in ("academy", "academy:naive", "eager")}
    tail = [render.Column("vs best peer", ("1.00×",))]
    [only] = render.fit_columns(lead, providers, tail, width_em=1000)
    assert [c.header for c in only] == ["M×N", "academy", "academy:naive", "eager", "vs best peer"]
    first, second = render.fit_columns(lead, providers, tail, width_em=sum(c.em for c in [*lead, *tail]) + 8)
    assert [c.header for c in first] == ["M×N", "academy", "eager", "vs best peer"]
    assert [c.header for c in second] == ["M×N", "academy", "academy:naive"]


# --------------------------------------------------------------------------- plot


def parse_svg(text):
    figure = ET.fromstring(text)  # raises on malformed XML
    assert figure.tag == "div"
    (svg,) = list(figure)
    return svg


def test_plot_is_well_formed_svg_with_series_and_ceiling(results):
    svg = parse_svg(render.plot(results, sweep="M=8192", mode="fwd", dtype="bfloat16"))
    assert svg.get("role") == "img" and svg.get("aria-label")
    assert svg.get("width") == "100%" and svg.get("viewBox")
    assert svg.find(f"{SVG}title") is not None
    series = svg.findall(f".//{SVG}g[@class='series']")
    assert [g.get("data-provider") for g in series] == ["academy", "eager", "compile"]
    academy = series[0]
    assert len(academy.findall(f"{SVG}polyline")) == 1
    assert len(academy.findall(f"{SVG}circle")) == 3  # one marker per point
    assert series[2].findall(f"{SVG}polyline") == []  # one point: markers, no line
    ceiling = svg.find(f".//{SVG}g[@class='ceiling']")
    assert ceiling.find(f"{SVG}line").get("stroke-dasharray")
    assert ceiling.find(f"{SVG}text").text == "copy ceiling 3,000 GB/s"
    assert 'stroke="currentColor"' in render.plot(results)


def x_positions(svg, provider="academy"):
    g = svg.find(f".//{SVG}g[@data-provider='{provider}']")
    return [float(c.get("cx")) for c in g.findall(f"{SVG}circle")]


def test_plot_log_scale_when_span_at_least_4x(results):
    svg = parse_svg(render.plot(results))
    xs = x_positions(svg)  # 1024, 4096, 16384: equal steps on a log2 axis
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.2)
    assert "log₂" in ET.tostring(svg, encoding="unicode")


def test_plot_linear_scale_when_span_below_4x():
    res = make_results([make_row("academy", n, 1.0) for n in (2048, 4096, 6144)])
    svg = parse_svg(render.plot(res))
    xs = x_positions(svg)
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.2)  # equal steps on a linear axis
    assert "log₂" not in ET.tostring(svg, encoding="unicode")
    assert render.use_log_scale([1024, 4096]) and not render.use_log_scale([1024, 4095])


def test_plot_needs_a_choice_when_ambiguous():
    res = make_results([make_row("academy", 1024, 1.0, mode="fwd"), make_row("academy", 1024, 2.0, mode="fwd+bwd")])
    with pytest.raises(ValueError, match="mode"):
        render.plot(res)
    parse_svg(render.plot(res, mode="fwd+bwd"))


def test_plot_compute_metric_labels_matmul_ceiling():
    rows = [make_row("academy", n, 1.0) for n in (1024, 2048)]
    svg = parse_svg(render.plot(make_results(rows, metric="compute")))
    assert svg.find(f".//{SVG}g[@class='ceiling']/{SVG}text").text == "matmul ceiling 750 TFLOP/s"


# --------------------------------------------------------------------------- summary


def test_summary_quotes_computed_numbers(results):
    text = render.summary(results, [("fwd", {"M": 8192, "N": 1024}, "bfloat16")])
    assert text.startswith('!!! success "On H100')
    assert "**1.12%** of the copy ceiling" in text
    assert "**1.50×** the speed of the best peer, torch.compile (1.50 ms vs ours 1.00 ms)" in text


def test_summary_warns_when_slower_or_missing(results):
    text = render.summary(
        results, [("fwd", {"M": 8192, "N": 1024}, "bfloat16"), ("fwd", {"M": 8192, "N": 4096}, "bfloat16")]
    )
    assert text.startswith("!!! warning") and "**0.75×**" in text
    missing = render.summary(results, [("fwd+bwd", {"M": 8192, "N": 1024}, "bfloat16")])
    assert missing.startswith("!!! warning") and "not measured" in missing
    with pytest.raises(ValueError):
        render.summary(results, [])


def test_summary_names_the_model_zoo_geomean_and_worst_case():
    # zoo: ours 1.0 vs compile 2.0 (2.00×) and ours 4.0 vs eager 3.0 (0.75×), one row standing for two models
    rows = [
        make_row("academy", 1024, 1.0, sweep="models M=8192"),
        make_row("compile", 1024, 2.0, sweep="models M=8192"),
        dataclasses.replace(make_row("academy", 4096, 4.0, sweep="models M=8192"), label="Model-A, Model-B"),
        make_row("eager", 4096, 3.0, sweep="models M=8192"),
        make_row("academy", 2048, 1.0),
        make_row("eager", 2048, 1.1),
    ]
    res = make_results(rows)
    headline = [("fwd", {"M": 8192, "N": 2048}, "bfloat16")]
    zoo = summarize(res, {"models": is_models_sweep})
    text = render.summary(res, headline, zoo)
    assert text.startswith("!!! warning"), "a zoo case slower than a peer makes the box a warning"
    expected = f"geometric mean **{render.fmt_ratio(math.sqrt(2.0 * 0.75))}** the best peer"
    assert "Over the model zoo, fwd (2 cases): " + expected in text
    assert "worst M=8192, N=4096 (Model-A, Model-B), bfloat16: 0.75× eager." in text
    assert render.summary(res, headline).startswith("!!! success"), "the headline case alone is faster"


# --------------------------------------------------------------------------- provenance


def test_provenance_collapsed_with_details(results):
    text = render.provenance(results, current_kernel_hash="aaaa")
    assert text.startswith('??? info "Measured on NVIDIA H100 80GB HBM3, 2025-01-02"')
    for needle in ("132 SMs", "570.00", "12.8", "2.11.0", "3.6.0", "0123456789ab", "3,000 GB/s", "750 TFLOP/s"):
        assert needle in text
    assert "!!! warning" not in text
    assert "!!! warning" not in render.provenance(results)


def test_provenance_stale_warning_only_when_hash_differs(results):
    text = render.provenance(results, current_kernel_hash="bbbb")
    assert text.startswith("!!! warning") and "`aaaa`" in text and "`bbbb`" in text
    assert "academy bench fixture_op" in text


# --------------------------------------------------------------------------- overview


def test_overview_one_line_per_file(results):
    other = make_results(
        [make_row("academy", 1024, 0.5), make_row("eager", 1024, 2.0)], gpu="NVIDIA H200", kernel_hash="old"
    )
    text = render.overview(
        [other, results],
        headlines={"fixture_op": [("fwd", {"M": 8192, "N": 1024}, "bfloat16")]},
        current_hashes={"fixture_op": "aaaa"},
    )
    header, rows = table_cells(text)
    assert len(rows) == 2 and [r[1] for r in rows] == ["H100", "H200"]
    assert rows[0][0] == "[Fixture op](kernels/fixture_op.md)"
    assert rows[0][4] == "1.50×" and rows[1][4] == "4.00×"
    # best % of ceiling on H100 is at N=16384: 2*8192*16384*2 B / 10 ms = 53.7 GB/s -> 1.79 %
    assert rows[0][2] == "1.79% copy"
    assert "stale" not in rows[0][5] and "stale" in rows[1][5]


def test_overview_geomean_without_headline_and_empty():
    res = make_results(
        [
            make_row("academy", 1024, 1.0),
            make_row("eager", 1024, 4.0),
            make_row("academy", 2048, 1.0),
            make_row("eager", 2048, 1.0),
        ]
    )
    _, rows = table_cells(render.overview([res]))
    assert rows[0][4].startswith("2.00×")  # sqrt(4 * 1)
    assert render.overview([]).startswith("!!! note")


def test_overview_links_to_the_page_that_owns_the_chapter(results):
    _, rows = table_cells(render.overview([results], pages={"fixture_op": "tutorials/fixture_op.py"}))
    assert rows[0][0] == "[Fixture op](tutorials/fixture_op.py)"


# --------------------------------------------------------------------------- our own variants, metrics, memory


def test_our_variants_are_never_the_best_peer():
    # The naive stage is slower than ours and faster than eager: still not a peer.
    res = make_results(
        [
            make_row("academy", 4096, 1.0),
            make_row("academy:naive", 4096, 0.5),
            make_row("eager", 4096, 2.0),
        ]
    )
    header, rows = table_cells(render.table(res))
    assert names(header)[1:4] == ["ours", "ours (naive)", "eager"]
    assert rows[0][-1].startswith("**2.00×**") and "eager" in rows[0][-1]
    assert "earlier stages, not peers" in render.table(res)
    case = render.find_case(res, "fwd", {"M": 8192, "N": 4096}, "bfloat16")
    assert render.compare(case).best_peer.provider == "eager"


def test_a_compute_sweep_in_a_bandwidth_file_uses_its_own_unit_and_ceiling():
    gemv = make_row("academy", 4096, 1.0, sweep="M=1")
    gemm = dataclasses.replace(make_row("academy", 4096, 1.0, sweep="M=4096"), metric="compute")
    res = make_results([gemv, gemm])
    assert "TFLOP/s" in render.table(res, sweep="M=4096") and "% of matmul" in render.table(res, sweep="M=4096")
    assert "GB/s" in render.table(res, sweep="M=1") and "% of copy" in render.table(res, sweep="M=1")
    svg = parse_svg(render.plot(res, sweep="M=4096"))
    assert svg.find(f".//{SVG}g[@class='ceiling']/{SVG}text").text == "matmul ceiling 750 TFLOP/s"
    with pytest.raises(ValueError, match="mix metrics"):
        render.table(res)


def test_results_file_without_row_metrics_reads_the_file_metric():
    res = make_results([make_row("academy", 1024, 1.0)], metric="compute")
    data = json.loads(res.to_json())
    del data["rows"][0]["metric"]
    assert Results.from_dict(data).rows[0].metric == "compute"


def test_memory_table_quotes_each_peak_as_a_multiple_of_ours():
    ours, unfused, eager = (
        dataclasses.replace(make_row(p, 4096, 1.0), peak_mib=mib)
        for p, mib in (("academy", 100.0), ("academy:unfused", 250.0), ("eager", 400.0))
    )
    header, rows = table_cells(render.memory(make_results([ours, unfused, eager])))
    assert names(header) == ["M×N", "ours", "ours (unfused)", "eager"] and header[1].endswith("<small>MiB</small>")
    assert rows[0][1:] == ["100", "250 <small>2.50×</small>", "400 <small>4.00×</small>"]


def test_memory_table_needs_recorded_peaks(results):
    with pytest.raises(ValueError, match="no peak memory"):
        render.memory(results)


def test_table_says_which_peers_were_timed_from_the_host():
    res = make_results(
        [make_row("academy", 4096, 1.0), dataclasses.replace(make_row("liger", 4096, 2.0), host_timed=True)]
    )
    assert (
        "Timed from the host with CUDA events" in render.table(res) and "Liger" in render.table(res).split("host")[-1]
    )
    assert "Timed from the host" not in render.table(make_results([make_row("academy", 4096, 1.0)]))


def test_provenance_names_the_peer_libraries_and_old_files_without_them_load(results):
    data = json.loads(results.to_json())
    del data["provenance"]["peers"]  # a file written before the field existed
    assert "| Peer libraries | not recorded |" in render.provenance(Results.from_dict(data))
    data["provenance"]["peers"] = {}
    assert "| Peer libraries | none installed |" in render.provenance(Results.from_dict(data))
    data["provenance"]["peers"] = {"liger-kernel": "0.8.5", "gemlite": "0.6.0"}
    assert "| Peer libraries | gemlite 0.6.0, liger-kernel 0.8.5 |" in render.provenance(Results.from_dict(data))
