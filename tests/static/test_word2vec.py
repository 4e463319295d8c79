"""word2vec through gensim on toy corpora: the vocabulary's rows and `<UNK>`, counts, the method
and the objective passed through, determinism across processes, words of one topic nearer than
words of two, and the one-line error without gensim."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from elmo_jax.data.vocab import Vocabulary
from elmo_jax.static import word2vec
from elmo_jax.static.word2vec import Word2VecConfig, train_word2vec

pytest.importorskip("gensim")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPIC_A = [f"a{i}" for i in range(5)]
TOPIC_B = [f"b{i}" for i in range(5)]
SMALL = Word2VecConfig(dim=8, epochs=3)


def _topics(n_sentences: int = 200) -> list[list[str]]:
    """Sentences of 6 words of one topic each, the topics alternating: a word of A never meets one of B."""
    rng = np.random.default_rng(0)
    return [list(rng.choice(TOPIC_A if k % 2 else TOPIC_B, 6)) for k in range(n_sentences)]


def _cosine(vectors: np.ndarray, vocab: Vocabulary, x: str, y: str) -> float:
    a, b = vectors[vocab.word_to_id(x)], vectors[vocab.word_to_id(y)]
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_one_row_per_vocabulary_word_outside_words_as_unk_unseen_words_as_initialized() -> None:
    sentences = [["the", "cat", "sat"], ["the", "dog", "sat", "down"], ["a", "cat"]]
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat", "sat", "absent"])  # dog, down, a: <UNK>.
    result = train_word2vec(lambda: sentences, vocab, SMALL)
    assert result.vectors.shape == (7, 8) and result.vectors.dtype == np.float32
    assert result.counts.tolist() == [0, 0, 3, 2, 2, 2, 0]
    assert result.unseen == ["<S>", "</S>", "absent"]
    unseen_rows = result.vectors[[0, 1, 6]]
    assert np.all(np.abs(unseen_rows) <= 1 / 8) and len(np.unique(unseen_rows)) == unseen_rows.size
    assert len(result.seconds) == 3


def test_sentences_longer_than_gensims_limit_are_cut_not_truncated() -> None:
    words = [f"w{i % 50}" for i in range(word2vec.MAX_SENTENCE_WORDS + 7)]
    vocab = Vocabulary.build([words])
    pieces = list(word2vec._Sentences(lambda: [words, ["w1", "unknown"]], vocab))
    assert [len(p) for p in pieces] == [word2vec.MAX_SENTENCE_WORDS, 7, 2]
    assert pieces[0] + pieces[1] == words and pieces[2] == ["w1", "<UNK>"]


def test_the_same_seed_gives_the_same_vectors_another_seed_or_method_others() -> None:
    sentences = _topics(60)
    vocab = Vocabulary.build(sentences)
    first = train_word2vec(lambda: sentences, vocab, SMALL).vectors
    assert np.array_equal(first, train_word2vec(lambda: sentences, vocab, SMALL).vectors)
    other_seed = Word2VecConfig(dim=8, epochs=3, seed=1)
    assert not np.allclose(first, train_word2vec(lambda: sentences, vocab, other_seed).vectors)
    cbow = Word2VecConfig(method="cbow", dim=8, epochs=3)
    assert not np.allclose(first, train_word2vec(lambda: sentences, vocab, cbow).vectors)


def test_the_same_vectors_in_another_process_with_another_pythonhashseed(tmp_path) -> None:
    sentences = _topics(60)
    vocab = Vocabulary.build(sentences)
    here = train_word2vec(lambda: sentences, vocab, SMALL).vectors
    (tmp_path / "sentences.json").write_text(json.dumps(sentences))
    script = textwrap.dedent(f"""
        import json
        import numpy as np
        from elmo_jax.data.vocab import Vocabulary
        from elmo_jax.static.word2vec import Word2VecConfig, train_word2vec
        sentences = json.load(open({str(tmp_path / "sentences.json")!r}))
        config = Word2VecConfig(**{dataclasses.asdict(SMALL)!r})
        vectors = train_word2vec(lambda: sentences, Vocabulary.build(sentences), config).vectors
        np.save({str(tmp_path / "there.npy")!r}, vectors)
    """)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert np.array_equal(here, np.load(tmp_path / "there.npy"))


@pytest.mark.parametrize("objective", word2vec.OBJECTIVES)
@pytest.mark.parametrize("method", word2vec.METHODS)
def test_words_of_one_topic_are_nearer_than_words_of_two(method: str, objective: str) -> None:
    """Every pair within a topic has a higher cosine than every pair across (negative sampling:
    seeds 0-19 of both methods pass with a margin of 0.5 or more, within >= 0.66, across <= 0.14;
    hierarchical softmax: seeds 0-9 with 0.6 or more, within >= 0.78, across <= 0.19)."""
    sentences = _topics()
    vocab = Vocabulary.build(sentences)
    config = Word2VecConfig(method=method, objective=objective, dim=10, epochs=20, sample=0)
    vectors = train_word2vec(lambda: sentences, vocab, config).vectors
    within = min(_cosine(vectors, vocab, x, y) for topic in (TOPIC_A, TOPIC_B) for x in topic for y in topic if x != y)
    across = max(_cosine(vectors, vocab, x, y) for x in TOPIC_A for y in TOPIC_B)
    assert within > across + 0.3, (within, across)


def test_the_objective_is_gensims_hs_and_negative() -> None:
    assert {k: word2vec.gensim_parameters(SMALL)[k] for k in ("hs", "negative")} == {"hs": 0, "negative": 5}
    hierarchical = Word2VecConfig(objective="hierarchical", dim=8, epochs=3)
    assert {k: word2vec.gensim_parameters(hierarchical)[k] for k in ("hs", "negative")} == {"hs": 1, "negative": 0}


@pytest.mark.parametrize("method", word2vec.METHODS)
def test_hierarchical_softmax_trains_the_huffman_trees_rows_not_negatives(method: str, monkeypatch) -> None:
    """The model gensim trains has hs=1 and negative=0: the tree's inner-node vectors (syn1), no
    negative-sampling table (syn1neg); the vectors differ from negative sampling's."""
    models = []
    gensim_class = word2vec.gensim_word2vec()

    class Recorded(gensim_class):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            models.append(self)

    monkeypatch.setattr(word2vec, "gensim_word2vec", lambda: Recorded)
    sentences = _topics(60)  # 360 words.
    vocab = Vocabulary.build(sentences)
    config = Word2VecConfig(method=method, objective="hierarchical", dim=8, epochs=3)
    vectors = train_word2vec(lambda: sentences, vocab, config).vectors
    (model,) = models
    assert model.hs == 1 and model.negative == 0
    assert model.syn1.shape == (len(model.wv), 8) and not hasattr(model, "syn1neg")
    assert np.all(np.isfinite(vectors)) and vectors.shape == (len(vocab), 8)
    negative = train_word2vec(lambda: sentences, vocab, dataclasses.replace(config, objective="negative")).vectors
    assert not np.allclose(vectors, negative)


def test_an_empty_corpus_and_an_unknown_method_are_one_line_errors() -> None:
    vocab = Vocabulary(["<S>", "</S>", "<UNK>"])
    with pytest.raises(ValueError, match="^no words to train on: the corpus is empty$"):
        train_word2vec(lambda: [[], []], vocab, SMALL)
    with pytest.raises(ValueError, match="'glove' is not one of skipgram, cbow"):
        Word2VecConfig(method="glove")
    with pytest.raises(ValueError, match="'softmax' is not one of negative, hierarchical"):
        Word2VecConfig(objective="softmax")


def test_without_gensim_the_error_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gensim.models", None)  # `import` then raises ImportError.
    with pytest.raises(word2vec.GensimMissing, match=r"^word2vec needs gensim, an optional extra: pip install -e \.\[static\]$"):
        train_word2vec(lambda: [["a"]], Vocabulary.build([["a"]]), SMALL)
