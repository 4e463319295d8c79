"""word2vec (Mikolov et al. 2013): skip-gram or CBOW with negative sampling or hierarchical softmax,
trained by gensim on the text a biLM trains on, as the biLM sees it.

The vocabulary is the biLM's `Vocabulary`, given: a word outside it is `<UNK>`, as in the biLM and
in GloVe's counts (static/cooccurrence.py), so `<UNK>` gets a vector of its own learned from every
rare word, and the vectors have one row per vocabulary word, in its order. Words of the vocabulary
that the corpus never holds (`<S>` and `</S>` always) keep an initial vector, drawn as gensim draws
them (uniform in [-1, 1) / dim).

gensim is an optional extra (`pip install -e .[static]`), imported when training starts. Its
defaults (gensim 4's `Word2Vec`) are kept: window 5, 5 negative samples drawn by count^0.75 (or,
objective 'hierarchical', gensim's `hs=1, negative=0`: a Huffman tree over the words' counts, each
word's probability a product of sigmoids along its path, no negatives), words downsampled above a
frequency of 1e-3, 5 epochs, learning rate 0.025 decaying linearly to 0.0001 (CBOW too:
word2vec.c's CBOW starts at 0.05), the context window of each word drawn from [1, window], CBOW
averaging its context. One worker thread and a seed make the vectors deterministic:
gensim 4 draws the initial vectors from NumPy's generator seeded with `seed` and the windows and
samples from its own seeded generators, so the same seed gives the same vectors in every process on
one machine and installation, whatever PYTHONHASHSEED (gensim's docstring asks for it: its
`hashfxn` seeded gensim 3's initial vectors and is unused now).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from elmo_jax.data.vocab import Vocabulary

METHODS = ("skipgram", "cbow")
# What each (word, context) pair's output is trained by: gensim's `negative=k, hs=0` or `hs=1, negative=0`.
NEGATIVE, HIERARCHICAL = "negative", "hierarchical"
OBJECTIVES = (NEGATIVE, HIERARCHICAL)
OBJECTIVE_NAMES = {NEGATIVE: "negative sampling", HIERARCHICAL: "hierarchical softmax"}
MAX_SENTENCE_WORDS = 10_000  # gensim's compiled loop reads no further into a sentence: longer ones are cut.
INSTALL_HINT = "pip install -e .[static]"

Corpus = Callable[[], Iterable[Sequence[str]]]  # A fresh pass over the sentences each call.


class GensimMissing(ImportError):
    """gensim, the optional extra word2vec trains with, is not installed."""


@dataclasses.dataclass(frozen=True)
class Word2VecConfig:
    """gensim's defaults (its `Word2Vec` signature) but the seed, 0 as GloVe's. `objective`: NEGATIVE
    (`negative` samples per pair) or HIERARCHICAL (the Huffman tree's softmax; `negative` unused)."""

    method: str = "skipgram"
    objective: str = NEGATIVE
    dim: int = 100
    window: int = 5
    negative: int = 5
    sample: float = 1e-3
    alpha: float = 0.025
    min_alpha: float = 0.0001
    epochs: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"word2vec method {self.method!r} is not one of {', '.join(METHODS)}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"word2vec objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")


@dataclasses.dataclass(frozen=True)
class Word2VecResult:
    """vectors: `[n_words, dim]` float32, row i the vocabulary's word i; counts: `[n_words]` each
    word's tokens in one pass (`<UNK>` those of every word outside the vocabulary); unseen: the
    words of count 0, their vectors as initialized; seconds: each epoch's."""

    vectors: np.ndarray
    counts: np.ndarray
    unseen: list[str]
    seconds: list[float]


class _Sentences:
    """The sentences as gensim reads them, a fresh pass of `corpus` per iteration: words outside the
    vocabulary as `<UNK>`, sentences cut into pieces of at most MAX_SENTENCE_WORDS."""

    def __init__(self, corpus: Corpus, vocab: Vocabulary):
        self._corpus = corpus
        self._known = frozenset(vocab.words)
        self._unk = vocab.words[vocab.unk_id]

    def __iter__(self) -> Iterator[list[str]]:
        known, unk = self._known, self._unk
        for sentence in self._corpus():
            words = [w if w in known else unk for w in sentence]
            for start in range(0, len(words), MAX_SENTENCE_WORDS):
                yield words[start:start + MAX_SENTENCE_WORDS]


class _EpochLog:
    """A gensim callback timing each epoch; `log` gets a line per epoch."""

    def __init__(self, epochs: int, tokens: int, log: Callable[[str], None] | None):
        self.epochs, self.tokens, self.log = epochs, tokens, log
        self.seconds: list[float] = []
        self._start = 0.0

    def on_train_begin(self, model) -> None:  # gensim calls all four.
        pass

    def on_train_end(self, model) -> None:
        pass

    def on_epoch_begin(self, model) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, model) -> None:
        self.seconds.append(time.perf_counter() - self._start)
        if self.log:
            self.log(f"epoch {len(self.seconds)}/{self.epochs}: {self.seconds[-1]:.1f} s, "
                     f"{self.tokens / self.seconds[-1]:,.0f} words/s")


def gensim_word2vec() -> type:
    """gensim's `Word2Vec`; GensimMissing saying how to install it."""
    try:
        from gensim.models import Word2Vec
    except ImportError:
        raise GensimMissing(f"word2vec needs gensim, an optional extra: {INSTALL_HINT}") from None
    return Word2Vec


def gensim_parameters(config: Word2VecConfig) -> dict:
    """The keyword arguments of gensim's `Word2Vec` for `config`: the vocabulary is given (min_count
    1), one worker thread (deterministic); the objective is `hs` and `negative` (hierarchical: hs=1,
    negative=0, so gensim builds the Huffman tree and no negative-sampling table)."""
    hierarchical = config.objective == HIERARCHICAL
    return dict(
        vector_size=config.dim, window=config.window, min_count=1, sample=config.sample,
        negative=0 if hierarchical else config.negative, hs=int(hierarchical), alpha=config.alpha,
        min_alpha=config.min_alpha, sg=int(config.method == "skipgram"), epochs=config.epochs, seed=config.seed,
        workers=1,
    )


def word_counts(sentences: Iterable[Sequence[str]], vocab: Vocabulary) -> np.ndarray:
    """`[n_words]` int64: each vocabulary word's tokens in `sentences`, `<UNK>` counting every word
    outside the vocabulary."""
    raw: collections.Counter[str] = collections.Counter()
    for sentence in sentences:
        raw.update(sentence)
    counts = np.zeros(len(vocab), np.int64)
    for word, count in raw.items():
        counts[vocab.word_to_id(word)] += count
    return counts


def train_word2vec(
    corpus: Corpus, vocab: Vocabulary, config: Word2VecConfig = Word2VecConfig(),
    log: Callable[[str], None] | None = None,
) -> Word2VecResult:
    """Vectors of `vocab`'s words trained on `corpus` (called for each pass: one to count the words,
    then one an epoch). `log` gets a line per epoch. ValueError for a corpus without words."""
    word2vec = gensim_word2vec()
    counts = word_counts(corpus(), vocab)
    tokens = int(counts.sum())
    if tokens == 0:
        raise ValueError("no words to train on: the corpus is empty")
    model = word2vec(**gensim_parameters(config))
    model.build_vocab_from_freq({word: int(count) for word, count in zip(vocab.words, counts) if count})
    epochs = _EpochLog(config.epochs, tokens, log)
    model.train(
        corpus_iterable=_Sentences(corpus, vocab), total_words=tokens, epochs=config.epochs, callbacks=[epochs]
    )
    rng = np.random.default_rng(config.seed)
    vectors = (rng.random((len(vocab), config.dim), dtype=np.float32) * 2 - 1) / config.dim  # gensim's draw.
    seen = np.flatnonzero(counts)
    vectors[seen] = model.wv[[vocab.words[i] for i in seen]]
    unseen = [vocab.words[i] for i in np.flatnonzero(counts == 0)]
    return Word2VecResult(vectors=vectors, counts=counts, unseen=unseen, seconds=epochs.seconds)
