"""README.md: the quick start, its size, and what a user meets there first."""

from __future__ import annotations

import os


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


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
