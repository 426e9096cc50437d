"""Provenance: which commit a results file names."""

import subprocess

from academy.env import REPO_ROOT, git_commit


def test_the_caller_can_name_the_commit(monkeypatch):
    """A lent GPU machine's .git is the session's starting one: the caller's variables win over it."""
    monkeypatch.setenv("ACADEMY_GIT_COMMIT", "f" * 40)
    monkeypatch.setenv("ACADEMY_GIT_DIRTY", "0")
    assert git_commit() == ("f" * 40, False)
    monkeypatch.setenv("ACADEMY_GIT_DIRTY", "1")
    assert git_commit() == ("f" * 40, True)


def test_without_the_variables_git_answers(monkeypatch):
    monkeypatch.delenv("ACADEMY_GIT_COMMIT", raising=False)
    monkeypatch.delenv("ACADEMY_GIT_DIRTY", raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    assert git_commit()[0] == (head or "unknown")
