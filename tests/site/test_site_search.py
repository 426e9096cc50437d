"""Search answers the reader's real questions: the real Material search, typed into the real search box.

Each question must bring one of its right pages into the first three results
(Material groups results by page; a page counts once, at its first place).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

QUESTIONS = {
    "how do I write a backward pass": {"tutorials/backward_pass/"},
    "why is my kernel slow": {"tutorials/gpu_model/", "tutorials/measuring/"},
    "what is num_warps": {"tutorials/autotuning/", "tutorials/gpu_model/"},
}

TOP_PAGES = """() => {
  const pages = [];
  for (const item of document.querySelectorAll('.md-search-result__list > .md-search-result__item')) {
    const link = item.querySelector('a.md-search-result__link');
    if (!link) continue;
    const path = new URL(link.href).pathname.replace(/^\\//, '');
    if (!pages.includes(path)) pages.push(path);
  }
  return pages;
}"""


@pytest.fixture(scope="module")
def search_page(base_url, browser):
    context = browser.new_context()
    page = context.new_page()
    yield page
    context.close()


@pytest.mark.parametrize("question", QUESTIONS)
def test_reader_question_finds_the_right_page(search_page, base_url, question):
    page = search_page
    page.goto(base_url + "/", wait_until="networkidle")
    page.keyboard.press("/")  # Material's shortcut: focus the search box
    page.keyboard.type(question)
    page.wait_for_selector(".md-search-result__item", timeout=10_000)
    page.wait_for_timeout(300)  # results settle after the last keystroke
    pages = page.evaluate(TOP_PAGES)
    print(f"{question!r}: {pages[:5]}")
    assert set(pages[:3]) & QUESTIONS[question], (
        f"{question!r}: top 3 are {pages[:3]}, expected one of {sorted(QUESTIONS[question])}"
    )
