"""What machine and software this is: for ``academy env`` and for results files."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess

from academy import DEVICE, INTERPRETED, __version__
from academy.chapters import REPO_ROOT

import torch
import triton


def _run(*command: str) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20, cwd=REPO_ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> tuple[str, bool]:
    """(commit, dirty). ``ACADEMY_GIT_COMMIT`` / ``ACADEMY_GIT_DIRTY`` override what git says: a copy
    of the tree whose ``.git`` is missing or older than the tree (as on a lent GPU machine) is told by
    the caller which commit it is."""
    commit = os.environ.get("ACADEMY_GIT_COMMIT") or _run("git", "rev-parse", "HEAD") or "unknown"
    if "ACADEMY_GIT_DIRTY" in os.environ:
        return commit, os.environ["ACADEMY_GIT_DIRTY"] == "1"
    status = _run("git", "status", "--porcelain", "--untracked-files=no")
    return commit, bool(status) if status is not None else True


def gpu_driver() -> str:
    out = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    return out.splitlines()[0] if out else "unknown"


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def describe() -> dict[str, str]:
    """Everything ``academy env`` prints."""
    info = {
        "academy": __version__,
        "device": DEVICE,
        "interpreter": "on (TRITON_INTERPRET=1: kernels run on the CPU)" if INTERPRETED else "off (compiled)",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            compute_capability=f"sm_{props.major}{props.minor}",
            sm_count=str(props.multi_processor_count),
            memory=f"{props.total_memory / 2**30:.0f} GiB",
            driver=gpu_driver(),
            cuda=str(torch.version.cuda),
        )
    return info
