"""The chapter registry and the code hash that ties results to kernels."""

from academy import chapters
from academy.chapters import all_chapters, chapter, code_hash

import pytest

CODE = "def f(x):\n    return x + 1\n"


def test_hash_ignores_comments_and_blank_lines():
    annotated = "def f(x):\n    # why, not what\n\n    return x + 1  # (1)!\n"
    assert code_hash(annotated) == code_hash(CODE)


@pytest.mark.parametrize(
    "changed",
    ["def f(x):\n    return x + 2\n", "def f(y):\n    return y + 1\n", 'def f(x):\n    """Doc."""\n    return x + 1\n'],
)
def test_hash_sees_code_changes(changed):
    assert code_hash(changed) != code_hash(CODE)


def test_hash_ignores_layout_quotes_and_docstring_indentation():
    reformatted = "def f( x ):\n    return (x +\n            1)\n"
    assert code_hash(reformatted) == code_hash(CODE)
    documented = 'def f(x):\n    """Doc,\n    two lines."""\n    return x + 1\n'
    requoted = documented.replace('"""', "'''").replace("\n    two", "\n        two")
    assert code_hash(requoted) == code_hash(documented)


def test_hash_is_stable_across_fstring_tokenization():
    # Python 3.12 tokenizes f-strings into pieces; the concatenation is unchanged.
    assert code_hash('x = f"a {b} c"\n') == code_hash('x = f"a {b} c"  # note\n')


def test_registry_finds_the_chapters():
    slugs = [c.slug for c in all_chapters()]
    assert {"vector_add", "fused_softmax"} <= set(slugs)
    assert chapter("fused_softmax").kernel_file.is_file()


def test_unknown_chapter_is_a_clear_error():
    with pytest.raises(ValueError, match="no chapter 'nope'"):
        chapter("nope")


def test_code_hash_covers_every_example_module_the_bench_imports_transitively(tmp_path, monkeypatch):
    """Results measured code beyond kernel.py (a stage file, another chapter's kernel
    used as a baseline): a change there must make them stale too."""
    examples = tmp_path / "examples"
    for name in ("op", "other"):
        (examples / name).mkdir(parents=True)
        (examples / name / "kernel.py").write_text(CODE)
    (examples / "op" / "stages.py").write_text("from examples.other.kernel import f\n" + CODE)
    (examples / "op" / "bench.py").write_text(
        "from examples.op.kernel import f\n"
        "def load():\n    import examples.op.stages  # which imports the other chapter's kernel\n"
    )
    monkeypatch.setattr(chapters, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(chapters, "EXAMPLES_DIR", examples)
    op = chapters.Chapter("op")
    assert [p.relative_to(tmp_path).as_posix() for p in op.code_files()] == [
        "examples/op/kernel.py",
        "examples/op/stages.py",
        "examples/other/kernel.py",
    ]
    before = op.code_hash()
    (examples / "other" / "kernel.py").write_text(CODE + "# a comment changes nothing\n")
    assert op.code_hash() == before
    (examples / "other" / "kernel.py").write_text(CODE.replace("1", "2"))
    assert op.code_hash() != before


def test_a_kernel_only_chapter_keeps_the_single_file_hash():
    ch = chapter("vector_add")
    assert ch.code_files() == [ch.kernel_file]
    assert ch.code_hash() == code_hash(ch.kernel_file.read_text())


def test_hash_ignores_the_order_of_a_run_of_imports_but_not_code_between():
    assert code_hash("import b\nimport a\nx = 1\n") == code_hash("import a\nimport b\nx = 1\n")
    assert code_hash("import a\nx = 1\nimport b\n") != code_hash("import a\nimport b\nx = 1\n")
