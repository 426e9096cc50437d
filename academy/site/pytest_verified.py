"""Pytest plugin: record which chapters' tests all passed, and with what (``ACADEMY_RECORD_VERIFIED=1``).

Registered by the root ``conftest.py``; it does nothing unless the environment
variable ``ACADEMY_RECORD_VERIFIED`` is ``1``. Then, at the end of the session,
for every chapter whose test files ([`academy.site.verified.test_files_of`][]: the
files under ``tests/<slug>/``) were *all* collected, with no test deselected, every collected test reported, and none
failed or errored, it writes ``examples/<slug>/verified/<key>.json``
(`academy.site.verified.save`). Skipped tests are allowed (bf16 end-to-end
checks are GPU-only) and counted. A chapter with any failure, or only part of
whose tests ran (``-k``, ``-x``, a single file), is not recorded, and an older
record of it is left as it was.

Typical use::

    ACADEMY_RECORD_VERIFIED=1 python -m pytest tests/<slug>
    ACADEMY_RECORD_VERIFIED=1 python -m pytest -m "not slow" tests   # every chapter at once
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

ENV = "ACADEMY_RECORD_VERIFIED"


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


class VerifiedRecorder:
    def __init__(self):
        self.files: dict[str, Path] = {}  # nodeid -> its test file
        self.collected: dict[Path, set[str]] = defaultdict(set)  # test file -> nodeids
        self.outcomes: dict[Path, dict[str, str]] = defaultdict(dict)  # test file -> nodeid -> outcome
        self.deselected: set[Path] = set()  # test files with a deselected test
        self.written: list[Path] = []
        self.refused: dict[str, str] = {}

    def pytest_collection_modifyitems(self, items):
        for item in items:
            self.files[item.nodeid] = Path(item.path).resolve()
            self.collected[self.files[item.nodeid]].add(item.nodeid)

    def pytest_deselected(self, items):
        for item in items:
            self.deselected.add(Path(item.path).resolve())

    def pytest_runtest_logreport(self, report):
        if report.nodeid not in self.files:
            return
        per_file = self.outcomes[self.files[report.nodeid]]
        if report.failed:
            per_file[report.nodeid] = "failed"
        elif report.skipped and per_file.get(report.nodeid) != "failed":
            per_file[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed and report.nodeid not in per_file:
            per_file[report.nodeid] = "passed"

    def pytest_sessionfinish(self, session, exitstatus):
        from academy.chapters import all_chapters
        from academy.site import verified

        for ch in all_chapters():
            files = [p.resolve() for p in verified.test_files_of(ch.slug)]
            if not files or not any(f in self.collected for f in files):
                continue
            why = None
            for f in files:
                name = f.relative_to(ch.tests_dir.resolve()).as_posix()
                nodeids = self.collected.get(f, set())
                outcomes = self.outcomes.get(f, {})
                if not nodeids:
                    why = f"{name} was not collected"
                elif f in self.deselected:
                    why = f"{name}: some tests were deselected"
                elif set(outcomes) != nodeids:
                    why = f"{name}: {len(nodeids - set(outcomes))} tests did not run"
                elif "failed" in outcomes.values():
                    why = f"{name}: a test failed"
                if why:
                    break
            if why:
                self.refused[ch.slug] = why
                continue
            outcomes = [o for f in files for o in self.outcomes[f].values()]
            names = [f.relative_to(ch.tests_dir.resolve()).as_posix() for f in files]
            record = verified.make_record(
                ch.slug, passed=outcomes.count("passed"), skipped=outcomes.count("skipped"), test_files=names
            )
            self.written.append(verified.save(record))

    def pytest_terminal_summary(self, terminalreporter):
        if not (self.written or self.refused):
            return
        terminalreporter.section("verified-with records")
        for path in self.written:
            terminalreporter.write_line(f"recorded {path}")
        for slug, why in sorted(self.refused.items()):
            terminalreporter.write_line(f"not recorded {slug}: {why}")


def pytest_configure(config):
    if enabled() and not config.pluginmanager.has_plugin("academy-verified"):
        config.pluginmanager.register(VerifiedRecorder(), "academy-verified")


__all__ = ["ENV", "VerifiedRecorder", "enabled", "pytest_configure"]
