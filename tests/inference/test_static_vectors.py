"""ELMo's layers as static vectors (inference/static_vectors.py) on configs/tests/tiny.py's biLM
with random params: layer 0 is `token_embeddings`, an LSTM layer the mean of the embedder's own
layers over each word's first occurrences (computed here sentence by sentence), the cap and
min_count respected, the files read back."""

from __future__ import annotations

import re

import numpy as np
import pytest

from elmo_jax.inference import static_vectors
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.static.lookup import StaticVectors
from tests.probing.helpers import tiny_bilm

SENTENCES = [
    "the cat sat on the mat".split(),
    "a dog sat".split(),
    [],
    "the dog saw the cat".split(),
    "nothing listed here".split(),
    "the bird sat on a cat".split(),
]
WORDS = ["the", "cat", "sat", "dog", "bird", "absent", "zebra-unlisted-ever"]


@pytest.fixture(scope="module")
def embedder() -> ElmoEmbedder:
    return ElmoEmbedder.from_pretrained(tiny_bilm(projection=True), stateful=False, batch_size=2)


def _by_hand(embedder: ElmoEmbedder, word: str, contexts: int) -> np.ndarray:
    """`[n_layers, 2P]`: the mean of the LSTM layers of the first `contexts` occurrences of `word`,
    each sentence embedded alone."""
    found = []
    for sentence in SENTENCES:
        if word in sentence:
            (layers,) = embedder.embed_sentence_layers([sentence])
            found += [layers.lstm[:, i] for i, w in enumerate(sentence) if w == word]
    return np.mean(found[:contexts], axis=0)


def test_the_lstm_layers_are_the_means_of_the_embedders_layers_over_the_occurrences(embedder) -> None:
    pooled = static_vectors.pool_layers(embedder, iter(SENTENCES), WORDS, [1, 2], contexts=100)
    assert pooled.words == ["the", "cat", "sat", "dog", "bird"]  # The list's order; unseen words left out.
    assert pooled.seen.tolist() == pooled.contexts.tolist() == [5, 3, 3, 2, 1]  # `the` twice in sentences 1, 4.
    assert pooled.vectors.shape == (2, 5, 16) and pooled.vectors.dtype == np.float32
    assert pooled.omitted == 2 and pooled.sentences == 6 and pooled.embedded == 4  # Nothing listed: not embedded.
    for row, word in enumerate(pooled.words):
        expected = _by_hand(embedder, word, 100)
        np.testing.assert_allclose(pooled.layer(1)[row], expected[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pooled.layer(2)[row], expected[1], rtol=1e-5, atol=1e-6)


def test_at_most_contexts_occurrences_the_first_in_order_and_min_count(embedder) -> None:
    pooled = static_vectors.pool_layers(embedder, SENTENCES, WORDS, [2], contexts=2, min_count=2)
    assert pooled.words == ["the", "cat", "sat", "dog"]  # bird: seen once.
    assert pooled.seen.tolist() == [5, 3, 3, 2] and pooled.contexts.tolist() == [2, 2, 2, 2]
    assert pooled.embedded == 4  # Sentence 6 for bird's occurrence: min_count is known once the corpus is read.
    for row, word in enumerate(pooled.words):
        np.testing.assert_allclose(pooled.layer(2)[row], _by_hand(embedder, word, 2)[1], rtol=1e-5, atol=1e-6)
    the = _by_hand(embedder, "the", 2)[1]
    assert not np.allclose(the, _by_hand(embedder, "the", 5)[1])  # The cap changes the mean.
    first = static_vectors.pool_layers(embedder, SENTENCES, WORDS, [2], contexts=1)
    assert first.contexts.tolist() == [1] * 5 and first.embedded == 3  # Sentence 4 holds none still wanted.
    for row, word in enumerate(first.words):
        np.testing.assert_allclose(first.layer(2)[row], _by_hand(embedder, word, 1)[1], rtol=1e-5, atol=1e-6)


def test_layer_0_is_the_token_embedding_of_any_word(embedder) -> None:
    words = [*WORDS, "unseen-anywhere", "<S>"]
    vectors = static_vectors.token_layer(embedder, words)
    assert vectors.shape == (len(words), 8)
    np.testing.assert_array_equal(vectors, embedder.token_embeddings(words))
    chunked = static_vectors.WORD_CHUNK
    try:
        static_vectors.WORD_CHUNK = 3  # Chunks of 3 words give the same rows.
        np.testing.assert_allclose(static_vectors.token_layer(embedder, words), vectors, rtol=1e-6, atol=1e-7)
    finally:
        static_vectors.WORD_CHUNK = chunked


def test_the_written_files_read_back(embedder, tmp_path) -> None:
    prefix = str(tmp_path / "out" / "elmo")
    pooled = static_vectors.pool_layers(embedder, SENTENCES, WORDS, [1], contexts=3)
    paths = [static_vectors.write_layer(prefix, 0, WORDS, static_vectors.token_layer(embedder, WORDS)),
             static_vectors.write_layer(prefix, 1, pooled.words, pooled.layer(1))]
    assert paths == [f"{prefix}.layer0.txt", f"{prefix}.layer1.txt"]
    layer0, layer1 = (StaticVectors.read(path) for path in paths)
    assert layer0.words == WORDS and np.array_equal(layer0.vectors, embedder.token_embeddings(WORDS))
    assert layer1.words == pooled.words and np.array_equal(layer1.vectors, pooled.layer(1))


@pytest.mark.parametrize("words, layers, message", [
    (["a", "a"], [1], "word 'a' is in the word list twice"),
    (["a b"], [1], "empty or holds whitespace"),
    ([], [1], "the word list is empty"),
    (["a"], [0], "layer 0 is context-independent"),
    (["a"], [3], "layer 3: the biLM has layers 0 (token embeddings) to 2"),
    (["a"], [1, 1], "a layer given twice"),
])
def test_bad_words_and_layers_are_refused(embedder, words, layers, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        static_vectors.pool_layers(embedder, SENTENCES, words, layers, contexts=1)


def test_a_stateful_embedder_is_refused() -> None:
    stateful = ElmoEmbedder.from_pretrained(tiny_bilm(projection=True))
    with pytest.raises(ValueError, match="needs a stateless embedder"):
        static_vectors.pool_layers(stateful, SENTENCES, WORDS, [1], contexts=1)
