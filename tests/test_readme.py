"""README.md: the quick start, its size, and what a user meets there first."""

from __future__ import annotations

import os
import re

from tests.doc_blocks import code_blocks


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt && "
    ".venv/bin/python train.py --config=configs/demo.py --workdir=runs/demo\n",
    "python3 -m venv .venv && .venv/bin/pip install -q -r requirements-dev.txt && .venv/bin/python -m pytest\n",
]


def _text() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def _paragraph(starting: str) -> str:
    """The README's paragraph that starts with `starting`, its lines joined."""
    (paragraph,) = [p for p in _text().split("\n\n") if p.startswith(starting)]
    return " ".join(paragraph.split())


def test_embedding_paragraph_says_embeddings_are_stateful_and_how_to_get_stateless_ones():
    paragraph = _paragraph("Embeddings are stateful")
    assert "`embed_sentence`" in paragraph and "`ElmoEmbedder(..., stateful=False)`" in paragraph
    assert "`--stateless`" in paragraph and "`Elmo`" in paragraph


def test_readme_stays_under_12000_bytes():
    """Detail goes to docs/, linked from the README."""
    assert os.path.getsize(README) < 12_000


def test_quick_start_is_its_two_commands():
    quick_start = _text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^```bash\n(.*?)^```$", quick_start, re.DOTALL | re.MULTILINE) == QUICK_START
    assert code_blocks(README, "bash")[:2] == QUICK_START


def _anchors(path: str) -> set[str]:
    """GitHub's anchors of the headings of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        headings = re.findall(r"^#+ (.*)$", f.read(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_readme_links_to_docs_that_exist():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", _text())
    assert ("docs/reproductions.md", "the-demo") in links
    assert ("docs/training.md", "fine-tune-a-released-elmo-on-your-corpus") in links
    for path, anchor in links:
        assert os.path.isfile(os.path.join(ROOT, path)), path
        assert not anchor or anchor in _anchors(os.path.join(ROOT, path)), f"{path}#{anchor}"
