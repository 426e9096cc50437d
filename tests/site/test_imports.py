"""The academy package's import graph: no cycles, and ``mkdocs serve`` rebuilds with edited modules.

The graph is read from the source (:mod:`academy.site.reloading`), imports at
module level and inside functions both; the helpers are also fed a planted
package, so the checks are known to be able to fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

from academy.chapters import REPO_ROOT
from academy.site import reloading

import pytest


def test_academy_has_no_import_cycle():
    graph = reloading.import_graph()
    assert {"academy", "academy.chapters", "academy.bench.render", "academy.site.pages"} <= graph.keys()
    assert "academy.chapters" in graph["academy.site.dashboard"]  # imported inside a function only
    cycle = reloading.find_cycle(graph)
    assert cycle is None, "import cycle among academy modules: " + " -> ".join(cycle)


def write_package(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_helper_graph_and_cycles(tmp_path):
    pkg = write_package(
        tmp_path / "planted",
        {
            "__init__.py": "",
            "a.py": "from planted import b\n",
            "b.py": "import os\n\ndef later():\n    from planted.a import x\n",
            "sub/__init__.py": "from . import c\n",
            "sub/c.py": "from .. import a\nimport planted.sub\nfrom planted import VERSION\n",
        },
    )
    graph = reloading.import_graph("planted", pkg)
    assert graph == {
        "planted": set(),
        "planted.a": {"planted.b"},
        "planted.b": {"planted.a"},
        "planted.sub": {"planted.sub.c"},
        "planted.sub.c": {"planted.a", "planted.sub", "planted"},
    }
    ab, sub = ["planted.a", "planted.b"], ["planted.sub", "planted.sub.c"]
    cycle = reloading.find_cycle(graph)
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) in (ab, sub)
    graph["planted.b"] = set()
    cycle = reloading.find_cycle(graph)
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == sub
    graph["planted.sub.c"] = {"planted.a"}
    assert reloading.find_cycle(graph) is None


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A package ``fakepkg`` on sys.path whose ``high`` imports a name from ``low``; forgotten afterwards."""
    pkg = write_package(
        tmp_path / "fakepkg",
        {
            "__init__.py": "",
            "low.py": "VALUE = 1\n",
            "high.py": "from fakepkg.low import VALUE\n\n\ndef get():\n    return VALUE\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [n for n in sys.modules if n == "fakepkg" or n.startswith("fakepkg.")]:
        del sys.modules[name]


def test_reload_modules_takes_edits_in_dependency_order(fake_package):
    import fakepkg.high

    assert fakepkg.high.get() == 1
    (fake_package / "low.py").write_text("VALUE = 222\n")  # another size: the cached bytecode is stale
    order = reloading.reload_modules(prefixes=("fakepkg",), skip=(), package="fakepkg", package_dir=fake_package)
    assert order.index("fakepkg.low") < order.index("fakepkg.high")  # alphabetical would get it wrong
    assert fakepkg.high.get() == 222


BUILD_TWICE = """
from academy.site import hooks

assert hooks.__file__.startswith({root!r}), hooks.__file__
page = "<!-- bench:table vector_add -->"
config = {{"nav": []}}
hooks.on_config(config)
before = hooks.on_page_markdown(page, config=config)
with open({render!r}, "a") as f:  # a contributor's edit, as `mkdocs serve` rebuilds after it
    f.write("\\n_table = table\\n\\n\\ndef table(*args, **kwargs):\\n    return 'EDITED ' + _table(*args, **kwargs)\\n")
config = {{"nav": []}}
hooks.on_config(config)
after = hooks.on_page_markdown(page, config=config)
assert "EDITED" not in before and "EDITED" in after, after
print("rebuilt with the edit")
"""


def test_a_new_build_takes_an_edit_to_an_academy_module(tmp_path):
    """In a fresh interpreter over a copy of academy/ (the real examples/): edit render.py between two builds."""
    shutil.copytree(REPO_ROOT / "academy", tmp_path / "academy", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "examples").symlink_to(REPO_ROOT / "examples")
    (tmp_path / "docs").symlink_to(REPO_ROOT / "docs")
    script = BUILD_TWICE.format(root=str(tmp_path), render=str(tmp_path / "academy" / "bench" / "render.py"))
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and "rebuilt with the edit" in proc.stdout, proc.stdout + proc.stderr
