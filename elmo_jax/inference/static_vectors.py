"""ELMo's layers as static word vectors, one word2vec text file per layer (`elmo-static --method
elmo_layers`, docs/static_vectors.md), so every reader of vector files (`elmo-vectors`, the probes'
`--static`, the task models) takes them as it takes GloVe's or word2vec's.

Layer 0 is context-independent: each word's token embedding (the char CNN's, of any word, in the
biLM's vocabulary or not; a word-input biLM's table row). An LSTM layer j has a vector per
occurrence, so a word's static vector is the mean of its layer-j vectors over its occurrences in a
corpus (Bommasani et al., ACL 2020's mean pooling): at most `contexts` occurrences a word, the first
in the corpus' order, each in its own sentence embedded alone (a stateless embedder: a context does
not depend on the sentences before it, so sentences holding no occurrence still wanted are skipped,
not embedded). Words the corpus holds fewer than `min_count` times get no vector.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, Iterator, Sequence

import numpy as np

from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.static.vector_files import write_text

WORD_CHUNK = 4096  # Words per char-CNN call for layer 0 (memory: WORD_CHUNK x P).


@dataclasses.dataclass(frozen=True)
class PooledLayers:
    """Each LSTM layer's mean over a corpus' occurrences of each kept word.

    layers: the ELMo layers pooled (1 .. n_layers); words: the kept words (seen >= min_count times),
    in the word list's order; vectors: `[len(layers), len(words), 2 * P]` float32, row i the mean
    over `contexts[i]` occurrences; contexts, seen: `[len(words)]` int64, the occurrences pooled
    (min(seen, the cap)) and those the corpus holds; omitted: the listed words seen fewer than
    min_count times; sentences: the corpus' sentences read; embedded: those run through the biLM."""

    layers: tuple[int, ...]
    words: list[str]
    vectors: np.ndarray
    contexts: np.ndarray
    seen: np.ndarray
    omitted: int
    sentences: int
    embedded: int

    def layer(self, layer: int) -> np.ndarray:
        """`[len(words), 2 * P]`: the mean vectors of ELMo layer `layer`."""
        return self.vectors[self.layers.index(layer)]


def check_words(words: Sequence[str]) -> None:
    """ValueError for a word list a vector file cannot hold: empty, a word empty or holding
    whitespace (its line would not read back), a word twice. Checked before any work."""
    if not words:
        raise ValueError("the word list is empty")
    seen: set[str] = set()
    for word in words:
        if not word or any(c.isspace() for c in word):
            raise ValueError(f"word {word!r} is empty or holds whitespace: a vector file cannot hold it")
        if word in seen:
            raise ValueError(f"word {word!r} is in the word list twice")
        seen.add(word)


def check_layers(layers: Sequence[int], n_layers: int) -> None:
    """ValueError unless `layers` are distinct ELMo layers of a biLM of `n_layers` LSTM layers (0 .. n_layers)."""
    if not layers:
        raise ValueError("no layers given")
    if len(set(layers)) != len(layers):
        raise ValueError(f"layers {list(layers)}: a layer given twice")
    bad = [layer for layer in layers if not 0 <= layer <= n_layers]
    if bad:
        raise ValueError(f"layer {bad[0]}: the biLM has layers 0 (token embeddings) to {n_layers}")


def token_layer(embedder: ElmoEmbedder, words: Sequence[str]) -> np.ndarray:
    """Layer 0 of `words`: `[len(words), F]` float32, `ElmoEmbedder.token_embeddings` (F = P with a
    token projection), in chunks of WORD_CHUNK words so a large list needs little memory at once.
    ELMo's layer 0 is `[t; t]`, twice as wide: the file holds t, whose cosines are the same."""
    chunks = [embedder.token_embeddings(list(words[start:start + WORD_CHUNK]))
              for start in range(0, len(words), WORD_CHUNK)]
    return np.concatenate(chunks).astype(np.float32, copy=False)


class _Plan:
    """Which occurrences of which words each sentence contributes, decided as the corpus is read:
    the first `contexts` occurrences of each listed word, in order. `wanted` yields the sentences
    with at least one such occurrence and queues its (positions, rows) for the pooling to take in
    the same order, however far ahead the embedder reads."""

    def __init__(self, words: Sequence[str], contexts: int):
        self.index = {word: i for i, word in enumerate(words)}
        self.contexts = contexts
        self.taken = np.zeros(len(words), np.int64)
        self.seen = np.zeros(len(words), np.int64)
        self.sentences = 0
        self.queue: collections.deque[tuple[np.ndarray, np.ndarray]] = collections.deque()

    def wanted(self, sentences: Iterable[Sequence[str]]) -> Iterator[Sequence[str]]:
        for sentence in sentences:
            self.sentences += 1
            positions, rows = [], []
            for position, word in enumerate(sentence):
                row = self.index.get(word)
                if row is None:
                    continue
                self.seen[row] += 1
                if self.taken[row] < self.contexts:
                    self.taken[row] += 1
                    positions.append(position)
                    rows.append(row)
            if positions:
                self.queue.append((np.array(positions), np.array(rows)))
                yield sentence


def pool_layers(
    embedder: ElmoEmbedder, sentences: Iterable[Sequence[str]], words: Sequence[str], layers: Sequence[int],
    contexts: int, min_count: int = 1, batch_size: int | None = None,
) -> PooledLayers:
    """The mean of each LSTM layer of `layers` (1 .. n_layers) over the first `contexts` occurrences
    of each of `words` in `sentences` (token lists, read once, in order), words seen fewer than
    `min_count` times left out (module docstring). The embedder must be stateless (`stateful=False`):
    then each occurrence's vectors are its sentence's alone, whichever sentences are skipped.
    Memory: sums `[len(layers), len(words), 2 * P]` float64."""
    if embedder.stateful:
        raise ValueError("pool_layers needs a stateless embedder (stateful=False): a context is its sentence alone")
    if contexts < 1 or min_count < 1:
        raise ValueError(f"contexts and min_count must be >= 1, got {contexts} and {min_count}")
    check_words(words)
    check_layers(layers, embedder.n_outputs - 1)
    if 0 in layers:
        raise ValueError("layer 0 is context-independent: token_layer computes it")
    plan = _Plan(words, contexts)
    sums = np.zeros((len(layers), len(words), 2 * embedder.model.width), np.float64)
    lstm_rows = np.array(layers) - 1
    embedded = 0
    for out in embedder.embed_sentence_layers(plan.wanted(sentences), batch_size):
        positions, rows = plan.queue.popleft()
        vectors = out.lstm[lstm_rows][:, positions]  # [len(layers), k, 2P]
        for i in range(len(layers)):
            np.add.at(sums[i], rows, vectors[i])  # A word twice in one sentence: both occurrences added.
        embedded += 1
    kept = np.flatnonzero(plan.seen >= min_count)
    means = sums[:, kept] / plan.taken[kept][None, :, None]
    return PooledLayers(
        layers=tuple(layers), words=[words[i] for i in kept], vectors=means.astype(np.float32),
        contexts=plan.taken[kept], seen=plan.seen[kept], omitted=len(words) - len(kept),
        sentences=plan.sentences, embedded=embedded,
    )


def layer_path(prefix: str, layer: int) -> str:
    """The vector file of ELMo layer `layer` written for `prefix`: `PREFIX.layerJ.txt`."""
    return f"{prefix}.layer{layer}.txt"


def write_layer(prefix: str, layer: int, words: Sequence[str], vectors: np.ndarray) -> str:
    """`vectors` `[len(words), dim]` of one layer as a word2vec text file (`write_text`, atomically); its path."""
    path = layer_path(prefix, layer)
    write_text(path, words, vectors)
    return path
