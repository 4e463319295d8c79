"""Contextual nearest neighbours of a word in a sentence (Peters et al. 2018, Table 4), its nearest
words by token embedding (Kim et al. 2016, Table 6) and by static word vectors, as `elmo-neighbors`
prints them (docs/embeddings.md); in bounded memory: a running top-k and the word counts.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from typing import Container, Iterable, Iterator, NamedTuple, Sequence

import numpy as np
from tqdm import tqdm

from elmo_jax.data.sources import numbered_sentences
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.static.lookup import StaticVectors

WORD_CHUNK = 4096  # Words per char-CNN call for the token-embedding list (memory: WORD_CHUNK x P).
MARK = "[[{}]]"  # How the matched token is shown in its sentence.


class CorpusLine(NamedTuple):
    """One corpus line: its whitespace tokens and where it is (`path:line`, 1-based)."""

    tokens: list[str]
    source: str


class ContextHit(NamedTuple):
    """A corpus token near the query word: its cosine similarity, the 0-based index of its line in
    the corpus stream (sorted files, every line counted), its 0-based index in that line, and the line."""

    similarity: float
    sentence: int
    token: int
    line: CorpusLine


class WordHit(NamedTuple):
    """A corpus word near the query word by token embedding: cosine similarity, the word, its count."""

    similarity: float
    word: str
    count: int


class StaticList(NamedTuple):
    """A static vector file's words nearest to the query word (None: the file lacks it), by its `name`."""

    name: str
    hits: list[WordHit] | None
    n_words: int


class ScanResult(NamedTuple):
    """The contextual top-k (best first), the corpus word counts, and the lines and tokens read."""

    hits: list[ContextHit]
    word_counts: collections.Counter
    n_sentences: int
    n_tokens: int


class TopK:
    """The k best items offered so far (a min-heap), by higher similarity, then smaller `position`
    (e.g. (line, token)): ties resolve to corpus order whatever the offer order."""

    def __init__(self, k: int):
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self._heap: list[tuple] = []  # (similarity, negated position, payload): the root is the worst.

    def __len__(self) -> int:
        return len(self._heap)

    def threshold(self) -> float:
        """The similarity an item must exceed to get in once the heap is full (-inf before)."""
        return self._heap[0][0] if len(self._heap) == self.k else -np.inf

    def offer(self, similarity: float, position: tuple[int, ...], payload: object = None) -> None:
        item = (float(similarity), tuple(-p for p in position), payload)
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, item)
        elif item[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, item)

    def best(self) -> list[tuple[float, tuple[int, ...], object]]:
        """(similarity, position, payload) of the kept items, best first."""
        ranked = sorted(self._heap, key=lambda item: item[:2], reverse=True)
        return [(s, tuple(-p for p in negated), payload) for s, negated, payload in ranked]


def cosine(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine similarities `[N]` of vectors `[N, D]` to query `[D]`, in float64 (0 for a zero vector),
    each row reduced alone (not a matrix product): equal vectors tie bit for bit."""
    vectors = np.asarray(vectors, np.float64)
    query = np.asarray(query, np.float64)
    norms = np.sqrt((vectors * vectors).sum(axis=-1)) * np.sqrt((query * query).sum())
    dots = (vectors * query).sum(axis=-1)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def read_corpus(
    paths: Sequence[str], segmenter: str = "none", vocabulary: Container[str] | None = None
) -> Iterator[CorpusLine]:
    """Every line of the files in order, cut by `segmenter` (with the biLM's `vocabulary` for
    'jieba_vocabulary'; empty lines included, so line numbers stay right); a `*.conllu` file's
    sentences, each at the line it starts."""
    for path in paths:
        for line_no, tokens in numbered_sentences(path, segmenter, vocabulary):
            yield CorpusLine(tokens, f"{path}:{line_no}")


def check_query(query: Sequence[str], word: int) -> None:
    """Raises ValueError unless `word` indexes a token of `query` (no negative indexing)."""
    if not 0 <= word < len(query):
        raise ValueError(
            f"--word {word} is out of range: the query has {len(query)} words (indices 0..{len(query) - 1})"
            if query else f"--word {word} is out of range: the query has no words"
        )


def check_layer(embedder: ElmoEmbedder, layer: int) -> None:
    """Raises ValueError unless `layer` is one of the model's n_layers + 1 ELMo layers."""
    if not 0 <= layer < embedder.n_outputs:
        raise ValueError(
            f"--layer {layer} is out of range: the model has layers 0..{embedder.n_outputs - 1} "
            "(0 = token embeddings)"
        )


def scan_corpus(
    embedder: ElmoEmbedder, lines: Iterable[CorpusLine], query: Sequence[str], word: int, layer: int, k: int,
    same_word: bool = False, progress_total: int | None = None, progress: bool = False,
) -> ScanResult:
    """One pass over the corpus through a stateless `embedder`: the k tokens nearest to `query[word]`
    at `layer`, and the word counts."""
    if embedder.stateful:
        raise ValueError("scan_corpus needs a stateless embedder (stateful=False)")
    check_query(query, word)
    check_layer(embedder, layer)
    target = embedder.embed_batch([list(query)])[0][layer, word]  # The query embedded alone.
    top = TopK(k)
    counts: collections.Counter = collections.Counter()
    n_sentences = n_tokens = 0
    texts, inputs = itertools.tee(lines)  # tee buffers the lines of the group embed_sentences reads ahead.
    layers_of = embedder.embed_sentences(line.tokens for line in inputs)
    bar = tqdm(zip(texts, layers_of), total=progress_total, unit=" lines", desc="scan", disable=not progress)
    for index, (line, layers) in enumerate(bar):
        n_sentences += 1
        n_tokens += len(line.tokens)
        counts.update(line.tokens)
        if not line.tokens:
            continue
        similarities = cosine(layers[layer], target)
        candidate = similarities > top.threshold()
        if same_word:
            candidate &= np.array([t == query[word] for t in line.tokens])
        if list(line.tokens) == list(query):
            candidate[word] = False  # The query itself.
        for token in np.flatnonzero(candidate):
            top.offer(similarities[token], (index, int(token)), line)
    hits = [ContextHit(s, index, token, line) for s, (index, token), line in top.best()]
    return ScanResult(hits, counts, n_sentences, n_tokens)


def nearest_words(
    embedder: ElmoEmbedder, word: str, word_counts: collections.Counter, k: int, max_words: int
) -> list[WordHit]:
    """The k words of the `max_words` most frequent in `word_counts` nearest to `word` (itself
    excluded) by the cosine of their token embeddings."""
    if max_words < 1:
        raise ValueError(f"--max_words must be >= 1, got {max_words}")
    target = embedder.token_embeddings([word])[0]
    candidates = [(w, c) for w, c in word_counts.most_common(max_words) if w != word]  # Ties: first seen first.
    top = TopK(k)
    for start in range(0, len(candidates), WORD_CHUNK):
        chunk = candidates[start : start + WORD_CHUNK]
        similarities = cosine(embedder.token_embeddings([w for w, _ in chunk]), target)
        for rank in np.flatnonzero(similarities > top.threshold()):
            top.offer(similarities[rank], (start + int(rank),), chunk[rank])
    return [WordHit(s, w, c) for s, _, (w, c) in top.best()]


def nearest_static_words(
    vectors: StaticVectors, word: str, word_counts: collections.Counter, k: int
) -> StaticList:
    """The k words of the vector file nearest to `word` by the cosine of their vectors, each with its
    count in `word_counts` (the corpus'); `word` looked up as written, then in lower case, and left
    out with the file's unknown-word entry. Context-free: one list whatever the sentence."""
    lookup = vectors.lookup([(word, word.lower())])
    if lookup.oov[0]:
        return StaticList(vectors.name, None, len(vectors.words))
    target = vectors.vectors[lookup.rows[0]]
    excluded = {int(lookup.rows[0]), vectors.index.get(vectors.unknown_word or "", -1)}
    top = TopK(k)
    for start in range(0, len(vectors.words), WORD_CHUNK):
        similarities = cosine(vectors.vectors[start : start + WORD_CHUNK], target)
        for row in start + np.flatnonzero(similarities > top.threshold()):
            if int(row) not in excluded:
                top.offer(similarities[row - start], (int(row),), vectors.words[row])
    hits = [WordHit(s, w, word_counts[w]) for s, _, w in top.best()]
    return StaticList(vectors.name, hits, len(vectors.words))


def marked(tokens: Sequence[str], index: int) -> str:
    """The tokens joined by spaces with `tokens[index]` shown as [[token]]."""
    return " ".join(MARK.format(t) if i == index else t for i, t in enumerate(tokens))


def format_report(
    query: Sequence[str], word: int, layer: int, n_layers: int, same_word: bool, scan: ScanResult,
    words: list[WordHit], n_words: int, static: Sequence[StaticList] = (),
) -> str:
    """The printed lists: contexts (similarity, `path:line`, the line with its token marked), then
    words by token embedding, then by each static vector file."""
    layer_name = "token embeddings" if layer == 0 else f"LSTM layer {layer} of {n_layers}"
    scope = f"occurrences of {query[word]!r}" if same_word else "all tokens"
    out = [
        f"query: {marked(query, word)}",
        f"nearest contexts ({layer_name}, cosine, {scope} of {scan.n_sentences} lines / {scan.n_tokens} tokens):",
    ]
    contexts = [f"  {h.similarity:.4f}  {h.line.source}  {marked(h.line.tokens, h.token)}" for h in scan.hits]
    out += contexts or ["  (none)"]
    out.append(f"nearest words by token embedding (layer 0, cosine, {n_words} most frequent corpus words):")
    out += _word_lines(words)
    for name, hits, n_static in static:
        out.append(f"nearest words by static vectors ({name}, cosine, {n_static} words of the file):")
        out += _word_lines(hits) if hits is not None else [f"  ({query[word]!r} is not in the file)"]
    return "\n".join(out)


def _word_lines(words: Sequence[WordHit]) -> list[str]:
    """A word list's lines: similarity, word and its corpus count."""
    return [f"  {h.similarity:.4f}  {h.word}  (count {h.count})" for h in words] or ["  (none)"]
