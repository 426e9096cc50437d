"""`visit_each_page_once`: the xdist workers split the page visits and share the results.

Two processes stand in for two pytest-xdist workers: each gets its own base temp folder under
one shared parent, as xdist's workers do, and its own PYTEST_XDIST_WORKER name."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from academy.site.pytest_site import visit_each_page_once

PAGES = [f"/page-{i}/" for i in range(12)]


class _TempFactory:
    """What visit_each_page_once uses of pytest's tmp_path_factory."""

    def __init__(self, base: Path):
        self.base = base

    def getbasetemp(self) -> Path:
        return self.base


def _worker(name: str, run_dir: str, log_dir: str, fail_on: str | None, wait: bool, queue) -> None:
    os.environ["PYTEST_XDIST_WORKER"] = name
    base = Path(run_dir) / f"popen-{name}"
    base.mkdir()

    def visit(path: str) -> str:
        if path == fail_on:
            raise ValueError(f"{path} would not load")
        (Path(log_dir) / f"{name}{path.replace('/', '_')}").touch()  # who visited what
        time.sleep(0.02)
        return f"report of {path}"

    try:
        queue.put((name, visit_each_page_once(_TempFactory(base), "light", PAGES, visit, wait=wait)))
    except Exception as exc:  # sent back to the test
        queue.put((name, exc))


def _run_two_workers(tmp_path: Path, fail_on: str | None = None, waits: tuple[bool, bool] = (True, True)) -> dict:
    run_dir, log_dir = tmp_path / "run", tmp_path / "log"
    run_dir.mkdir(), log_dir.mkdir()
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [
        context.Process(target=_worker, args=(name, str(run_dir), str(log_dir), fail_on, wait, queue))
        for name, wait in zip(("gw0", "gw1"), waits)
    ]
    for worker in workers:
        worker.start()
    results = dict(queue.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    results["visits"] = sorted(p.name for p in log_dir.iterdir())
    return results


def test_two_workers_visit_each_page_once_and_both_get_every_report(tmp_path):
    results = _run_two_workers(tmp_path)
    expected = {path: f"report of {path}" for path in PAGES}
    assert results["gw0"] == expected and list(results["gw0"]) == PAGES  # every page, in order
    assert results["gw1"] == expected and list(results["gw1"]) == PAGES
    visited = [name[3:] for name in results["visits"]]  # drop the worker's name
    assert sorted(visited) == sorted(path.replace("/", "_") for path in PAGES)  # each page exactly once


def test_a_page_the_other_worker_failed_on_is_an_error_naming_it(tmp_path):
    results = _run_two_workers(tmp_path, fail_on=PAGES[5])
    errors = [r for r in (results["gw0"], results["gw1"]) if isinstance(r, Exception)]
    assert len(errors) == 2, "the worker that failed and the one waiting for that page both fail"
    for error in errors:
        assert PAGES[5] in str(error)


def test_alone_visits_every_page_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    seen = []
    reports = visit_each_page_once(_TempFactory(tmp_path), "light", PAGES, lambda p: seen.append(p) or p.upper())
    assert seen == PAGES and reports == {p: p.upper() for p in PAGES}
    assert list(tmp_path.iterdir()) == []


def test_a_helper_takes_a_share_and_the_waiting_worker_gets_every_report(tmp_path):
    results = _run_two_workers(tmp_path, waits=(True, False))  # gw1 only helps, as a worker with no dark test
    expected = {path: f"report of {path}" for path in PAGES}
    assert results["gw0"] == expected and list(results["gw0"]) == PAGES
    helped = [name[3:] for name in results["visits"] if name.startswith("gw1")]
    assert sorted(results["gw1"]) == sorted(path for path in PAGES if path.replace("/", "_") in helped)
    visited = [name[3:] for name in results["visits"]]
    assert sorted(visited) == sorted(path.replace("/", "_") for path in PAGES)  # each page exactly once


def test_a_page_a_helper_failed_on_is_the_waiting_workers_error(tmp_path):
    results = _run_two_workers(tmp_path, fail_on=PAGES[5], waits=(True, False))
    assert isinstance(results["gw0"], Exception) and PAGES[5] in str(results["gw0"])
    assert PAGES[5] not in results["gw1"], "a helper that meets the failing page stops, without raising"


def test_a_helper_alone_visits_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    seen = []
    assert visit_each_page_once(_TempFactory(tmp_path), "dark-axe", PAGES, seen.append, wait=False) == {}
    assert seen == [] and list(tmp_path.iterdir()) == []
