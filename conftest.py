"""Run the pages' ```python blocks from real files (an adapter for pytest-codeblocks).

pytest-codeblocks (0.18) runs a python block with ``exec(code, {...})``. Two
things go wrong for this handbook:

* compiled Triton reads a kernel's source from its file, so a block that
  defines an ``@triton.jit`` function fails with "@jit functions should be
  defined in a Python file";
* ``__name__`` is not ``"__main__"``, so a block written as a script with an
  ``if __name__ == "__main__":`` guard silently does nothing.

The plugin looks ``exec`` up in its own module globals before the builtins, so
we give it one that writes the block to a real ``.py`` file (named after the
page and line, so tracebacks point somewhere readable) and runs it with
``runpy.run_path(path, run_name="__main__")``. Everything else -- collection,
``importorskip``, marks, stdout capture, expected-output checks and the
plugin's error report -- stays the plugin's own.

The repository root is put on ``sys.path`` so blocks can ``import examples...``
and ``import academy`` even without an editable install.
"""

from __future__ import annotations

import atexit
import re
import runpy
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Before any test module imports triton: academy decides TRITON_INTERPRET, and
# triton's own jit helpers must be created after that decision (see the
# toolchain traps in docs/contributing.md).
import academy  # noqa: E402,F401

# Verified-with records (examples/<slug>/verified/*.json), written only when
# ACADEMY_RECORD_VERIFIED=1: see academy/site/pytest_verified.py. The site tests share
# one build, one browser and one visit of every page: academy/site/pytest_site.py.
pytest_plugins = ["academy.site.pytest_verified", "academy.site.pytest_site"]

try:
    from pytest_codeblocks import plugin as _codeblocks
except ImportError:  # plugin not installed: nothing to adapt
    _codeblocks = None


class CodeBlockError(Exception):
    """A block failed; the message is the traceback, trimmed to the block's own frames."""


_BLOCK_DIR = Path(tempfile.mkdtemp(prefix="academy-codeblocks-"))
atexit.register(shutil.rmtree, _BLOCK_DIR, ignore_errors=True)
_current_block_name = "block"


def _exec_from_file(code: str, _globals: dict | None = None) -> None:
    path = _BLOCK_DIR / f"{_current_block_name}.py"
    path.write_text(code)
    try:
        runpy.run_path(str(path), run_name="__main__")
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        # Drop runpy's own frames: start at the first frame of the block file.
        start = next((i for i, f in enumerate(frames) if f.filename == str(path)), 0)
        tb = "".join(traceback.format_list(frames[start:]))
        raise CodeBlockError(f"Traceback (block file {path}):\n{tb}{type(exc).__name__}: {exc}") from exc


if _codeblocks is not None:

    class FileBackedTestBlock(_codeblocks.TestBlock):
        def runtest(self):
            global _current_block_name
            page = self.path.relative_to(REPO_ROOT) if self.path.is_relative_to(REPO_ROOT) else self.path
            _current_block_name = re.sub(r"\W+", "_", f"{page.with_suffix('')}_{self.name}")  # docs_index_line_12
            super().runtest()

    _codeblocks.exec = _exec_from_file  # shadows the builtin inside the plugin module only
    _codeblocks.TestBlock = FileBackedTestBlock  # MarkdownFile.collect looks the class up at call time
