"""The notebook cache (`academy.site.notebook_cache`): a tutorial re-runs when, and only when, what it read changed.

Most tests stand a stub in for mkdocs-jupyter's ``nb2html`` that writes the
trace a kernel would and counts its runs, over a small planted repository; one
executes a real notebook in a real kernel, to show that the kernel records the
modules it imports (by ``import`` and by a name built at run time) and the
files it reads, and nothing it did not touch.
"""

from __future__ import annotations

import os
import textwrap

from academy.site import notebook_cache, reloading

import pytest


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def edit(path, text):
    path.write_text(text)


@pytest.fixture
def repo(tmp_path):
    return write(
        tmp_path / "repo",
        {
            "docs/tutorials/first.py": "# %%\nimport examples.first.kernel\n",
            "docs/tutorials/second.py": "# %%\nimport examples.second.kernel\n",
            "docs/index.md": "# Home\n",
            "examples/first/kernel.py": "from examples.shared import helper\n",
            "examples/first/results/h100.json": "{}\n",
            "examples/second/kernel.py": "VALUE = 2\n",
            "examples/shared/helper.py": "VALUE = 1\n",
        },
    )


class StubKernel:
    """mkdocs-jupyter's ``nb2html`` as the cache sees it: writes what a kernel would have read into the trace."""

    def __init__(self, reads):
        self.reads, self.runs = reads, []

    def __call__(self, nb_path, **options):
        if notebook_cache.TRACE_FILE in os.environ:  # not when the cache is bypassed
            with open(os.environ[notebook_cache.TRACE_FILE], "a") as trace:
                trace.writelines(f"{line}\n" for line in self.reads)
        self.runs.append(nb_path)
        return f"<p>run {len(self.runs)}</p>"


FIRST_READS = [
    "f examples/first/kernel.py",
    "f examples/shared/__pycache__/helper.cpython-311.pyc",  # an import served from bytecode
    "f examples/first/results/h100.json",
    "d examples/first/results",
]


def build(repo, kernel, notebook="first"):
    return notebook_cache.cached_convert(
        kernel,
        str(repo / "docs" / "tutorials" / f"{notebook}.py"),
        env="python 3.11, torch 2.x",
        cache_dir=repo / ".cache" / "notebooks",
        root=repo,
        execute=True,
        kernel_name="python3",
    )


def test_a_second_build_serves_the_stored_output_without_executing(repo):
    kernel = StubKernel(FIRST_READS)
    assert build(repo, kernel) == "<p>run 1</p>"
    assert build(repo, kernel) == "<p>run 1</p>"
    assert len(kernel.runs) == 1
    where = notebook_cache.entry_path(repo / "docs/tutorials/first.py", repo / ".cache/notebooks", repo)
    entry = notebook_cache.load(where)
    assert set(entry.deps) == {
        "f docs/tutorials/first.py",
        "f examples/first/kernel.py",
        "f examples/shared/helper.py",  # the source of the bytecode read
        "f examples/first/results/h100.json",
        "d examples/first/results",
    }


@pytest.mark.parametrize(
    "change",
    [
        "docs/tutorials/first.py",  # the notebook
        "examples/first/kernel.py",  # a module it imports
        "examples/shared/helper.py",  # a module that one imports
        "examples/first/results/h100.json",  # a file it reads
    ],
)
def test_an_edit_to_what_the_notebook_read_runs_it_again(repo, change):
    kernel = StubKernel(FIRST_READS)
    build(repo, kernel)
    edit(repo / change, (repo / change).read_text() + "# edited\n")
    assert build(repo, kernel) == "<p>run 2</p>"
    assert build(repo, kernel) == "<p>run 2</p>"  # and stored again


def test_a_new_file_in_a_folder_it_listed_runs_it_again(repo):
    kernel = StubKernel(FIRST_READS)
    build(repo, kernel)
    write(repo, {"examples/first/results/h200.json": "{}\n"})
    assert build(repo, kernel) == "<p>run 2</p>"


def test_a_file_it_looked_for_and_missed_runs_it_again_once_it_appears(repo):
    kernel = StubKernel([*FIRST_READS, "f examples/first/results/b200.json"])
    build(repo, kernel)
    assert build(repo, kernel) == "<p>run 1</p>"
    write(repo, {"examples/first/results/b200.json": "{}\n"})
    assert build(repo, kernel) == "<p>run 2</p>"


@pytest.mark.parametrize(
    "change",
    [
        "examples/second/kernel.py",  # another notebook's module
        "docs/index.md",  # a Markdown page
        "docs/tutorials/second.py",  # another notebook
    ],
)
def test_an_unrelated_edit_serves_the_stored_output(repo, change):
    kernel = StubKernel(FIRST_READS)
    build(repo, kernel)
    edit(repo / change, (repo / change).read_text() + "# edited\n")
    assert build(repo, kernel) == "<p>run 1</p>"
    assert len(kernel.runs) == 1


def test_the_key_holds_the_notebook_the_options_and_the_environment(repo):
    notebook = repo / "docs/tutorials/first.py"
    key = notebook_cache.notebook_key(notebook, {"execute": True}, "torch 2.9")
    assert key == notebook_cache.notebook_key(notebook, {"execute": True}, "torch 2.9")
    assert key != notebook_cache.notebook_key(notebook, {"execute": True}, "torch 2.10")
    assert key != notebook_cache.notebook_key(notebook, {"execute": True, "no_input": True}, "torch 2.9")
    edit(notebook, notebook.read_text() + "x = 1\n")
    assert key != notebook_cache.notebook_key(notebook, {"execute": True}, "torch 2.9")
    env = notebook_cache.environment()
    assert "torch==" in env and "triton==" in env and "device=" in env


def test_another_environment_runs_it_again(repo):
    kernel = StubKernel(FIRST_READS)
    build(repo, kernel)
    notebook_cache.cached_convert(
        kernel,
        str(repo / "docs/tutorials/first.py"),
        env="python 3.12, torch 2.x",
        cache_dir=repo / ".cache" / "notebooks",
        root=repo,
        execute=True,
        kernel_name="python3",
    )
    assert len(kernel.runs) == 2


def test_an_edit_while_it_runs_is_not_stored(repo):
    class EditingKernel(StubKernel):
        def __call__(self, nb_path, **options):
            html = super().__call__(nb_path, **options)
            edit(repo / "examples/shared/helper.py", "VALUE = 3\n")  # saved in the editor mid-run
            return html

    kernel = EditingKernel(FIRST_READS)
    build(repo, kernel)
    assert not (repo / ".cache" / "notebooks").exists() or not any((repo / ".cache" / "notebooks").iterdir())


def test_a_conversion_without_execution_depends_on_the_notebook_alone(repo):
    """``nb2md`` (the table of contents) runs no kernel: no trace, and only the notebook's text counts."""
    kernel = StubKernel(FIRST_READS)

    def convert():
        return notebook_cache.cached_convert(
            kernel, str(repo / "docs/tutorials/first.py"), env="", cache_dir=repo / ".cache/notebooks", root=repo
        )

    assert convert() == "<p>run 1</p>"
    assert notebook_cache.TRACE_FILE not in os.environ
    edit(repo / "examples/shared/helper.py", "VALUE = 3\n")
    assert convert() == "<p>run 1</p>"
    edit(repo / "docs/tutorials/first.py", "# %%\nimport examples.second.kernel\n")
    assert convert() == "<p>run 2</p>"


def test_the_switch():
    assert notebook_cache.enabled({}) and notebook_cache.enabled({"ACADEMY_NB_CACHE": "1"})
    assert not notebook_cache.enabled({"ACADEMY_NB_CACHE": "0"})
    assert not notebook_cache.enabled({"ACADEMY_NB_CACHE": "false"})


def test_install_wraps_mkdocs_jupyter_once_and_undoes(monkeypatch):
    from mkdocs_jupyter import convert

    original = convert.nb2html
    monkeypatch.setattr(convert, "nb2html", original)  # put back whatever the test does
    notebook_cache.install(True)
    notebook_cache.install(True)  # every build installs it again: still one layer
    assert convert.nb2html is not original and convert.nb2html.__wrapped__ is original
    assert convert.nb2html.func is notebook_cache.cached_convert and convert.nb2html.args == (original,)
    notebook_cache.install(False)
    assert convert.nb2html is original


# ---------------------------------------------------------------- a real kernel

NOTEBOOK = """\
# %% [markdown]
# # A planted notebook

# %%
import sys

sys.path.insert(0, {root!r})
from planted.lesson import named, table

print("named", named("runtime"), "table", table())
"""


def test_a_real_kernel_records_imports_and_reads(tmp_path):
    """The kernel's own trace: imports (also one by a name built at run time), a data file; no unrelated module."""
    from mkdocs_jupyter import convert

    original = getattr(convert.nb2html, "__wrapped__", convert.nb2html)
    root = write(
        tmp_path / "repo",
        {
            "planted/__init__.py": "",
            "planted/lesson.py": """\
                import importlib
                import json
                from pathlib import Path

                from planted import base

                def named(name):
                    return importlib.import_module(f"planted.{name}").VALUE

                def table():
                    return json.loads((Path(__file__).parent / "table.json").read_text())["rows"] + base.OFFSET
            """,
            "planted/base.py": "OFFSET = 100\n",
            "planted/runtime.py": "VALUE = 7\n",
            "planted/unrelated.py": "VALUE = 0\n",
            "planted/table.json": '{"rows": 3}\n',
        },
    )
    notebook = write(root, {"docs/nb.py": NOTEBOOK.format(root=str(root))}) / "docs/nb.py"
    cache_dir = root / ".cache" / "notebooks"

    def run():
        return notebook_cache.cached_convert(
            original, str(notebook), env="test", cache_dir=cache_dir, root=root, execute=True, kernel_name="python3"
        )

    html = run()
    assert "named 7 table 103" in html
    deps = set(notebook_cache.load(notebook_cache.entry_path(notebook, cache_dir, root)).deps)
    # at least what the import graph read from the source finds ...
    graph = reloading.import_graph("planted", root / "planted")
    assert {f"f planted/{m.rpartition('.')[2]}.py" for m in graph["planted.lesson"]} <= deps
    # ... and what it cannot: a name built at run time, a data file
    assert {"f planted/lesson.py", "f planted/runtime.py", "f planted/table.json", "f docs/nb.py"} <= deps
    assert "f planted/unrelated.py" not in deps
    assert not any(dep.startswith("f .") or "__pycache__" in dep for dep in deps)

    edit(root / "planted/unrelated.py", "VALUE = 1\n")
    assert run() == html  # served: nothing it read changed
    edit(root / "planted/table.json", '{"rows": 4}\n')
    assert "named 7 table 104" in run()
