"""The ``academy`` command line, on a machine without a GPU."""

from academy import DEVICE
from academy.cli import main

import pytest


def test_env_reports_device_and_interpreter(capsys):
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert f"device       {DEVICE}" in out and "triton" in out and "interpreter" in out


def test_unknown_chapter_is_a_clear_error(capsys):
    assert main(["bench", "no_such_chapter"]) == 2
    assert "no chapter 'no_such_chapter'" in capsys.readouterr().err


@pytest.mark.skipif(DEVICE == "cuda", reason="on a GPU this would start a real benchmark")
def test_bench_without_gpu_says_why(capsys):
    assert main(["bench", "vector_add"]) == 2
    assert "need a CUDA GPU" in capsys.readouterr().err


def test_results_lists_every_chapter(capsys):
    code = main(["results"])
    out = capsys.readouterr().out
    assert "vector_add" in out and "fused_softmax" in out
    assert code == (1 if "STALE" in out else 0)


def test_check_runs_the_chapter_tests():
    assert main(["check", "vector_add"]) == 0
