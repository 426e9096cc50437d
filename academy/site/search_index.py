"""The search index without code blocks.

Material's search worker downloads the whole index with the first page a
reader opens, and the listings of kernel source were about 40% of it: the
landing page's weight grew with every chapter towards the 1.5 MB bar
(``tests/site/test_site_weight.py``). Prose, headings and inline code stay
searchable (the reader-question test, ``tests/site/test_site_search.py``, runs
on this index); the listings are on the pages and in ``examples/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

PRE_RE = re.compile(r"<pre>.*?</pre>", re.S)


def drop_code_blocks(site_dir: str | Path) -> None:
    """Rewrite ``search/search_index.json`` under a built site with every ``<pre>`` block removed."""
    path = Path(site_dir) / "search" / "search_index.json"
    if not path.is_file():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    for doc in data.get("docs", []):
        doc["text"] = PRE_RE.sub(" ", doc.get("text", ""))
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
