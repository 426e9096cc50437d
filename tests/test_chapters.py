"""The chapter registry and the code hash that ties results to kernels."""

import pytest

from academy.chapters import all_chapters, chapter, code_hash

CODE = "def f(x):\n    return x + 1\n"


def test_hash_ignores_comments_and_blank_lines():
    annotated = "def f(x):\n    # why, not what\n\n    return x + 1  # (1)!\n"
    assert code_hash(annotated) == code_hash(CODE)


@pytest.mark.parametrize("changed", ["def f(x):\n    return x + 2\n", "def f(y):\n    return y + 1\n",
                                     'def f(x):\n    """Doc."""\n    return x + 1\n'])
def test_hash_sees_code_changes(changed):
    assert code_hash(changed) != code_hash(CODE)


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
