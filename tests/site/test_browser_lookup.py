"""Which Chromium the site tests drive (``find_chromium``), and that the Makefile looks the same way."""

from __future__ import annotations

import os
import re
import subprocess

from academy.chapters import REPO_ROOT
from academy.site.pytest_site import CHROMIUM_NAMES, find_chromium


def _fake_browser(folder, name):
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_environment_names_the_browser(monkeypatch, tmp_path):
    monkeypatch.setenv("ACADEMY_CHROMIUM", str(tmp_path / "my-chromium"))
    assert find_chromium() == tmp_path / "my-chromium"  # even missing: the fixture then says so


def test_path_is_searched_in_order(monkeypatch, tmp_path):
    monkeypatch.setenv("ACADEMY_CHROMIUM", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_chromium() is None
    chrome = _fake_browser(tmp_path, "google-chrome")
    assert find_chromium() == chrome
    chromium = _fake_browser(tmp_path, "chromium-browser")
    assert find_chromium() == chromium


def _makefile_chromium(env) -> str:
    """The ACADEMY_CHROMIUM that `make test` would hand to pytest (a dry run)."""
    dry = subprocess.run(
        ["make", "-n", "test", "ACADEMY_SKIP_BROWSER=1"], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr
    found = re.search(r'ACADEMY_CHROMIUM="([^"]*)" ', dry.stdout)
    assert found, dry.stdout
    return found.group(1)


def test_makefile_finds_what_the_fixture_finds(monkeypatch, tmp_path):
    _fake_browser(tmp_path, CHROMIUM_NAMES[1])
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("ACADEMY_CHROMIUM", "")
    assert _makefile_chromium(dict(os.environ)) == str(find_chromium())
    monkeypatch.setenv("ACADEMY_CHROMIUM", "/opt/some/chromium")
    assert _makefile_chromium(dict(os.environ)) == "/opt/some/chromium"
