"""Task labels and word normalisation."""

from __future__ import annotations

import pytest

from elmo_jax.data.conllu import read_conllu
from elmo_jax.probing.tasks import labelled_tokens, normalize_word
from tests.probing.helpers import write_conllu


@pytest.mark.parametrize(
    "word, lower, ptb",
    [
        ("The", "the", "the"), ("3.5", "3.5", "N"), ("1,000", "1,000", "N"), ("1/2", "1/2", "N"),
        ("-20", "-20", "N"), ("1980s", "1980s", "1980s"), ("F-14", "f-14", "f-14"), ("I.B.M.", "i.b.m.", "i.b.m."),
        ("٣", "٣", "N"), ("...", "...", "..."), ("Ünïcode", "ünïcode", "ünïcode"),
    ],
)
def test_normalize_word(word, lower, ptb):
    assert normalize_word(word, "none") == word
    assert normalize_word(word, "lower") == lower
    assert normalize_word(word, "ptb") == ptb


def test_labels_of_each_task_and_where_they_come_from(tmp_path):
    path = write_conllu(tmp_path / "a.conllu", [[("The", "DET"), ("3", "NUM")], [("Cat", "NOUN")]])
    sentences = read_conllu(path)
    tokens = labelled_tokens(sentences, "upos", "ptb")
    assert tokens.sentences == [["the", "N"], ["cat"]]
    assert tokens.words == ["the", "N", "cat"]
    assert tokens.labels == ["DET", "NUM", "NOUN"]
    assert tokens.where == [(path, 2), (path, 3), (path, 6)]
    assert labelled_tokens(sentences, "xpos", "none").labels == ["XDET", "XNUM", "XNOUN"]
    assert labelled_tokens(sentences, "deprel", "none").labels == ["dep:det", "dep:num", "dep:noun"]  # With subtype.


def test_a_token_without_a_label_or_a_bad_task_is_an_error(tmp_path):
    path = write_conllu(tmp_path / "a.conllu", [[("a", "DET"), ("b", "_")]])
    with pytest.raises(ValueError, match=r"a\.conllu:3: no upos label"):
        labelled_tokens(read_conllu(path), "upos", "none")
    with pytest.raises(ValueError, match="task must be one of"):
        labelled_tokens(read_conllu(path), "lemma", "none")
    with pytest.raises(ValueError, match="normalize must be one of"):
        labelled_tokens(read_conllu(path), "upos", "upper")
