"""``academy bench SLUG --sweep NAME``: new rows of some sweeps merged into a results file, on synthetic results.

Every number is a planted fixture value; none of it is a published measurement.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from academy.bench import render
from academy.bench.results import Ceilings, load, merge_sweeps, save
from academy.chapters import chapter
from academy.cli import main

import pytest
import torch

from tests.results_fixtures import make_results, make_row


def _old():
    return make_results(
        [
            make_row("academy", 1024, 1.0, sweep="M=8192"),
            make_row("eager", 1024, 2.0, sweep="M=8192"),
            make_row("academy", 4096, 4.0, sweep="models"),
            make_row("academy", 512, 0.5, sweep="M=65536"),
        ],
        skipped={"liger": "not installed"},
    )


def _new(sweeps=("models",), kernel_hash="aaaa", gpu="NVIDIA H100 80GB HBM3"):
    rows = [
        dataclasses.replace(make_row("academy", n, 3.0, sweep=sweep, ceiling=3100.0), label="Llama, Mistral")
        for sweep in sweeps
        for n in (2048, 4096)
    ]
    new = make_results(rows, kernel_hash=kernel_hash, gpu=gpu, skipped={"compile": "does not take V"})
    new.ceilings = Ceilings(copy_gbps=3100.0, matmul_tflops=760.0, copy_bytes=4 * 2**30, matmul_size=8192)
    new.provenance = dataclasses.replace(new.provenance, date="2025-02-03T04:05:06Z")
    return new


def test_merge_replaces_the_named_sweeps_rows_in_place_and_keeps_the_rest():
    merged = merge_sweeps(_old(), _new(), ["models"])
    assert [(r.sweep, r.params["N"]) for r in merged.rows] == [
        ("M=8192", 1024),
        ("M=8192", 1024),
        ("models", 2048),
        ("models", 4096),
        ("M=65536", 512),
    ]
    assert merged.provenance == _old().provenance and merged.ceilings == _old().ceilings
    assert merged.skipped == {"liger": "not installed", "compile": "does not take V"}
    [run] = merged.merged
    assert run.sweeps == ["models"] and run.provenance.date == "2025-02-03T04:05:06Z"
    assert merged.ceiling_of("bandwidth", "models") == 3100.0 and merged.ceiling_of("bandwidth", "M=8192") == 3000.0


def test_a_new_sweep_follows_and_a_second_merge_takes_over_the_first():
    once = merge_sweeps(_old(), _new(("models", "models T=4096")), ["models", "models T=4096"])
    assert [r.sweep for r in once.rows][-2:] == ["models T=4096", "models T=4096"]
    twice = merge_sweeps(once, _new(("models T=4096",)), ["models T=4096"])
    assert [run.sweeps for run in twice.merged] == [["models"], ["models T=4096"]]
    assert sum(r.sweep == "models T=4096" for r in twice.rows) == 2


@pytest.mark.parametrize(
    "new, message",
    [
        (_new(kernel_hash="bbbb"), "kernel code aaaa, and the code is now bbbb"),
        (_new(gpu="NVIDIA H100 PCIe"), "not on this NVIDIA H100 PCIe"),
    ],
)
def test_merge_refuses_other_kernel_code_or_another_gpu(new, message):
    with pytest.raises(ValueError, match=message):
        merge_sweeps(_old(), new, ["models"])


def test_merge_refuses_rows_of_sweeps_it_was_not_told_of():
    with pytest.raises(ValueError, match="not named"):
        merge_sweeps(_old(), _new(("models", "other")), ["models"])


def test_merged_file_round_trips_and_files_without_labels_or_merges_load(tmp_path):
    path = save(merge_sweeps(_old(), _new(), ["models"]), tmp_path)
    data = json.loads(path.read_text())
    assert "label" not in data["rows"][0] and data["rows"][2]["label"] == "Llama, Mistral"
    back = load(path)
    assert back.rows[2].label == "Llama, Mistral" and back.merged[0].ceilings.copy_gbps == 3100.0
    plain = save(_old(), tmp_path / "plain")
    assert "merged" not in json.loads(plain.read_text())
    assert load(plain).merged == [] and all(row.label == "" for row in load(plain).rows)


def test_the_table_shows_the_models_and_the_sweeps_own_ceiling():
    merged = merge_sweeps(_old(), _new(), ["models"])
    text = render.table(merged, sweep="models")
    assert text.splitlines()[0].startswith("| M×<wbr>N | models | ours<br>")
    assert "| Llama, Mistral |" in text and "3,100 GB/s" in text
    assert "models" not in render.table(merged, sweep="M=8192").splitlines()[0]


@pytest.fixture
def fake_gpu(monkeypatch):
    """A machine that says it has an H100, and a runner that returns planted rows for the named sweeps."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _: SimpleNamespace(name="NVIDIA H100 80GB HBM3"))
    calls = []

    def run(slug, *, quick=False, progress=True, sweeps=None, **options):
        calls.append(sweeps)
        new = _new(tuple(sweeps), kernel_hash=chapter(slug).code_hash())
        new.slug = slug
        return new

    monkeypatch.setattr("academy.bench.runner.run", run)
    return calls


def _existing(tmp_path, kernel_hash):
    old = _old()
    old.slug = "rms_norm"
    old.provenance = dataclasses.replace(old.provenance, kernel_hash=kernel_hash)
    return save(old, tmp_path / "rms_norm")


def test_cli_merges_the_named_sweeps_into_this_gpus_file(tmp_path, fake_gpu, capsys):
    path = _existing(tmp_path, chapter("rms_norm").code_hash())
    assert main(["bench", "rms_norm", "--sweep", "M=65536", "--out", str(tmp_path)]) == 0
    assert fake_gpu == [["M=65536"]]
    merged = load(path)
    assert [r.sweep for r in merged.rows] == ["M=8192", "M=8192", "models", "M=65536", "M=65536"]
    assert [r.params["N"] for r in merged.rows if r.sweep == "M=65536"] == [2048, 4096], "the new rows replaced the old"
    assert "merged into 5 rows" in capsys.readouterr().out


def test_cli_refuses_to_merge_into_a_file_of_other_kernel_code(tmp_path, fake_gpu, capsys):
    path = _existing(tmp_path, "0000")
    before = path.read_text()
    assert main(["bench", "rms_norm", "--sweep", "M=65536", "--out", str(tmp_path)]) == 2
    assert "run the whole benchmark" in capsys.readouterr().err
    assert fake_gpu == [] and path.read_text() == before, "refused before any measurement"


def test_cli_rejects_an_unknown_sweep_before_measuring(tmp_path, fake_gpu, capsys):
    assert main(["bench", "rms_norm", "--sweep", "nope", "--out", str(tmp_path)]) == 2
    assert "has no sweep 'nope'" in capsys.readouterr().err and fake_gpu == []


def test_cli_writes_a_new_file_only_under_out(tmp_path, fake_gpu):
    assert main(["bench", "rms_norm", "--sweep", "M=8192", "--out", str(tmp_path)]) == 0
    assert [r.sweep for r in load(tmp_path / "rms_norm" / "h100.json").rows] == ["M=8192"] * 2
