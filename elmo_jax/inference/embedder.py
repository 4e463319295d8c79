"""ELMo representations of sentences: `ElmoEmbedder` and the file formats of `elmo-embed`
(elmo_jax/cli/embed.py).

Input: one whitespace-tokenized sentence per line, UTF-8; invalid bytes are replaced by U+FFFD
(with a warning). `<S>`/`</S>` are added internally. Tokens longer than
max_characters_per_token - 2 UTF-8 bytes (48 for released models) are truncated, as in bilm-tf.

Output: one float32 dataset per input line, named by its 0-based line number, shape
`(n_layers + 1, n_tokens, 2 * projection_dim)` (= 2 * dim for a biLM whose LSTM has no projection,
projection_dim == dim, as configs/ptb_*.py): layer 0 = `[token embedding; token embedding]`,
layer j = `[forward_j; backward_j]`, `<S>`/`</S>` removed. An empty line gives shape
`(n_layers + 1, 0, 2 * projection_dim)` and leaves its row's LSTM states untouched (bilm-tf
would run `<S> </S>` through them). `--layers top` (the top LSTM layer) or `--layers average` (the
mean of the n_layers + 1 layers) write `(n_tokens, 2 * projection_dim)` instead, as AllenNLP's
`allennlp elmo --top/--average`; `--layers all` (the default) is the above.

Stateful, as bilm-tf and AllenNLP: lines are taken in batches of N consecutive lines and the LSTM
states of batch row r carry over to row r of the next batch (zeros at the start; a shorter last
batch leaves the other rows' states untouched); `--stateless` resets them every batch. The forward
LSTM reads `<S> w1 .. wn </S>`, the backward LSTM its reverse; a row's states freeze after its
last token, so padding never changes a real token's output.

Word-input biLMs (`model.token_encoder='word'`, e.g. configs/ptb_word_small.py) embed from their
workdir (`--workdir`; bilm-tf files hold char-CNN biLMs only) with the same layout: each word's
token embedding is the row of its id in the workdir's vocab.txt, and a word outside that
vocabulary takes `<UNK>`'s row, as in training (so all unknown words share one layer 0). There
is no char CNN to skip: `--vocab_to_cache` is refused; `--token_embeddings` writes the table's rows.

Consecutive batches (up to GROUP_POSITIONS token positions) run the LSTMs together: their distinct
words go through the char CNN once (or none of them, for the words of `--vocab_to_cache VOCAB`,
whose token embeddings are computed up front), the first LSTM layer's input matmul is done once
per distinct word, and the sentences run as token streams, one per row: stateful, row r's
sentences of all the batches one after another (exactly what running the batches in turn does);
stateless, the sentences packed longest first into `batch_size` streams of about equal length,
each starting from the state after `<S>` (forward) or `</S>` (backward), which is the same for
every sentence, so a sentence of n words runs n steps, not n + 2. The streams run in chunks of
time steps, only the rows still running (`ragged_lstm`), so almost no position is padding. On
CPUs (`--engine auto`, the default) C++ kernels built for the machine on first use
(`elmo_jax.inference.cpu_kernels`) compute instead: the char CNN of a group's new words in one call, and
all of a group's LSTM steps in another, each direction on its own core; nothing is compiled by
XLA. With `--engine xla`, compilations: one char-CNN shape and one first-layer input matmul per
padded word count (64 x 1, 1.5, 2, 3, 4, 6, ...) and one LSTM chunk per running-row count (1, 2,
3, 4, 6, 8, then multiples of 8) met; a corpus of batches of 32 sentences meets a handful of each.

`--token_embeddings VOCAB` writes the dataset `embedding` `(n_vocab, projection_dim)`: the
context-independent token embedding of each vocabulary line (first tab-separated field), as
bilm-tf's `dump_token_embeddings` (a word-input biLM: the embedding row of each word, `<UNK>`'s
for words outside its vocabulary).
"""

from __future__ import annotations

import functools
import heapq
import logging
import os
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

import h5py
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from tqdm import tqdm

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN
from elmo_jax.data.sources import read_lines
from elmo_jax.data.vocab import Vocabulary, read_words
from elmo_jax.runtime.atomic_write import write_atomic
from elmo_jax.inference.cpu_kernels import CpuCharCnn, CpuLstmStack, KernelUnavailable
from elmo_jax.interop.bilm_hdf5 import load_options, load_weights
from elmo_jax.interop.export_sets import check_one_export
from elmo_jax.model.bilm import BiLM, bilm_from_config
from elmo_jax.model.lstm import LSTMState
from elmo_jax.inference.ragged_lstm import run_lstms
from elmo_jax.inference.token_cache import TokenEmbeddingCache, WordTokenEmbeddings

GROUP_POSITIONS = 8192  # `embed_sentences` runs the LSTMs over consecutive batches of about this many positions.
LAYER_MODES = ("all", "top", "average")  # What `embed_file` writes per sentence (`select_layers`).
ENGINES = ("auto", "cpu", "xla")  # What computes the char CNN and the LSTMs (`cpu_kernels`).


class PretrainedBiLM(NamedTuple):
    """A biLM read for inference: the module (float32, no dropout), its params (no softmax), the
    characters per token its char ids have and, for a word-input biLM, its vocabulary (word ids)."""

    model: BiLM
    params: dict
    max_chars: int
    vocab: Vocabulary | None = None


@functools.partial(jax.jit, static_argnums=0)
def _embed_tokens(model: BiLM, params: Any, char_ids: jax.Array) -> jax.Array:
    """char_ids `[N, C]` -> token embeddings `[N, P]`."""
    return model.apply({"params": params}, {"char_ids": char_ids}, method=BiLM.embed_tokens)


@functools.partial(jax.jit, static_argnums=0)
def _embed_word_ids(model: BiLM, params: Any, token_ids: jax.Array) -> jax.Array:
    """token_ids `[N]` -> token embeddings `[N, P]` (a word-input biLM's table rows)."""
    return model.apply({"params": params}, {"token_ids": token_ids}, method=BiLM.embed_tokens)


def check_embeddable(model: BiLM) -> None:
    """Raises ValueError unless ELMo layers of `model` exist: a word-input biLM, or a char-CNN biLM
    whose token embeddings are as wide as its LSTM layers."""
    if model.token_encoder not in ("char_cnn", "word"):
        raise ValueError(
            f"embedding needs a char-CNN or word-input biLM, got model.token_encoder={model.token_encoder!r}"
        )
    if model.token_encoder == "char_cnn" and not model.token_projection:
        raise ValueError(
            "model.char_cnn.projection=False makes the token embeddings wider than the LSTM layers; "
            "ELMo layers need one width"
        )


class CpuKernels(NamedTuple):
    """The C++ kernels an embedder computes with (`cpu_kernels`); None: XLA computes that part."""

    char_cnn: CpuCharCnn | None
    lstm_stack: CpuLstmStack | None


def cpu_kernels(model: BiLM, params: Mapping, engine: str) -> CpuKernels:
    """The C++ kernels that compute a char-CNN biLM's token embeddings and its LSTMs, or Nones for
    XLA (jitted char CNN, `ragged_lstm.run_lstms`'s chunks).

    engine: 'cpu' (the kernels; KernelUnavailable if they cannot be built here), 'xla' (Nones) or
    'auto': the kernels when JAX computes on the CPU and the biLM is float32, unless they cannot
    be built (then Nones, with a warning). A word-input biLM has no char CNN to compute.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "xla" or (engine == "auto" and (jax.default_backend() != "cpu" or model.dtype != jnp.float32)):
        return CpuKernels(None, None)
    try:
        char_cnn = CpuCharCnn(model, params) if model.token_encoder == "char_cnn" else None
        return CpuKernels(char_cnn, CpuLstmStack(model, params))
    except KernelUnavailable as e:
        if engine == "cpu":
            raise
        logging.warning("computing with XLA: %s", e)
        return CpuKernels(None, None)


def select_layers(layers: np.ndarray, mode: str) -> np.ndarray:
    """One sentence's ELMo layers `[n_layers + 1, n_tokens, 2P]` as `mode` asks: 'all' (as they are),
    'top' (the top LSTM layer, `[n_tokens, 2P]`) or 'average' (the mean over layers, `[n_tokens, 2P]`),
    as AllenNLP's `allennlp elmo --all/--top/--average`."""
    if mode == "all":
        return layers
    if mode == "top":
        return layers[-1]
    if mode == "average":
        return layers.mean(axis=0)
    raise ValueError(f"layers must be one of {LAYER_MODES}, got {mode!r}")


class _Stream(list):
    """One row of an LSTM run: (sentence index, start position) of each sentence in it, and its length."""

    length = 0

    def add(self, index: int, positions: int) -> None:
        self.append((index, self.length))
        self.length += positions


class ElmoEmbedder:
    """Stateful ELMo representations from a biLM and its params.

    `embed_batch` takes up to `batch_size` sentences (token lists); the LSTM states of row r carry
    over to row r of the next call unless `stateful=False`. Only rows holding a sentence run the
    LSTMs. Token embeddings of a char-CNN biLM come from a `TokenEmbeddingCache` (each distinct
    word through the char CNN once, up to `token_cache_size` words; the words of `vocab_to_cache`
    up front). A word-input biLM (`model.token_encoder='word'`) needs `vocab`, its training
    vocabulary: a word's token embedding is the table row of its id there, `<UNK>`'s for a word
    outside it (as in training); `vocab_to_cache` is refused and `token_cache_size` unused.
    `engine`: what computes the char CNN and the LSTMs, 'auto' | 'cpu' | 'xla' (`cpu_kernels`);
    the outputs agree to float32 rounding.
    """

    def __init__(
        self,
        model: BiLM,
        params: Mapping,
        max_chars: int,
        batch_size: int = 1,
        stateful: bool = True,
        vocab_to_cache: Sequence[str] | None = None,
        token_cache_size: int = 100_000,
        vocab: Vocabulary | None = None,
        engine: str = "auto",
    ):
        check_embeddable(model)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        # The softmax is not used (and bilm-tf weight files do not have one).
        self.params = jax.device_put({k: v for k, v in params.items() if k != "softmax"})
        self.batch_size = batch_size
        self.stateful = stateful
        self.kernels = cpu_kernels(model, self.params, engine)
        self._boundary_state: list[LSTMState] | None = None  # See `_sentence_start_state`.
        self.reset_states()
        if model.token_encoder == "word":
            self.tokens = self._word_tokens(vocab, vocab_to_cache)
            return
        widest_filter = max(width for width, _ in model.filters)
        if self.kernels.char_cnn is not None:  # It takes every word at once and skips their padding itself.
            encode, by_length = self.kernels.char_cnn.encode, False
        else:
            encoder = model.clone(distinct_fraction=0.0)  # The cache sends it distinct words only.
            encode, by_length = functools.partial(_embed_tokens, encoder, self.params), True
        self.tokens = TokenEmbeddingCache(
            encode, model.projection_dim, max_chars, widest_filter, token_cache_size, by_length=by_length
        )
        self.tokens.add(vocab_to_cache or [])

    def _word_tokens(self, vocab: Vocabulary | None, vocab_to_cache: Sequence[str] | None) -> WordTokenEmbeddings:
        """The token embeddings of a word-input biLM: rows of its table by `vocab` id."""
        if vocab_to_cache:
            raise ValueError(
                "vocab_to_cache (--vocab_to_cache) caches char-CNN token embeddings; a word-input biLM "
                "(model.token_encoder='word') looks them up in its embedding table: leave it out"
            )
        if vocab is None:
            raise ValueError("a word-input biLM (model.token_encoder='word') needs vocab: its training vocabulary")
        table = self.params.get("encoder", {}).get("embedding")
        if table is not None and table.shape[0] != len(vocab):
            raise ValueError(f"the vocabulary has {len(vocab)} words, the biLM's embedding table {table.shape[0]} rows")
        return WordTokenEmbeddings(lambda ids: _embed_word_ids(self.model, self.params, ids), vocab)

    @property
    def n_outputs(self) -> int:
        """Layers per token: the token embedding and one per LSTM layer."""
        return self.model.n_layers + 1

    def reset_states(self) -> None:
        """Zero LSTM states for every row."""
        self._state = self._zero_state(self.batch_size)

    def _zero_state(self, rows: int) -> list[LSTMState]:
        """Zero LSTM states of `rows` rows per direction, on the host (nothing for XLA to compile)."""
        shapes = (2, rows, self.model.dim), (2, rows, self.model.projection_dim)
        return [LSTMState(*(np.zeros(shape, np.float32) for shape in shapes)) for _ in range(self.model.n_layers)]

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """ELMo layers of up to `batch_size` sentences, each `[n_layers + 1, n_tokens, 2 * P]` float32."""
        if len(sentences) > self.batch_size:
            raise ValueError(f"{len(sentences)} sentences in a batch of {self.batch_size} rows")
        return self._embed_batches([sentences])

    def embed_sentences(self, sentences: Iterable[Sequence[str]]) -> Iterator[np.ndarray]:
        """ELMo layers of each sentence, in order, computed in batches of `batch_size` consecutive
        sentences; consecutive batches run the LSTMs together, up to GROUP_POSITIONS positions."""
        group: list[list[Sequence[str]]] = []
        batch: list[Sequence[str]] = []
        positions = 0
        for sentence in sentences:
            batch.append(sentence)
            positions += len(sentence) + 2
            if len(batch) == self.batch_size:
                group.append(batch)
                batch = []
                if positions >= GROUP_POSITIONS:
                    yield from self._embed_batches(group)
                    group, positions = [], 0
        if batch:
            group.append(batch)
        if group:
            yield from self._embed_batches(group)

    def _embed_batches(self, batches: Sequence[Sequence[Sequence[str]]]) -> list[np.ndarray]:
        """ELMo layers of the sentences of consecutive batches, in order, in one run of the LSTMs.

        Stateful, row r's sentences of all the batches form one token stream that continues from
        row r's state (as running the batches one after another does); stateless, the sentences
        are packed into `batch_size` streams of about equal length, each sentence's state set at
        its start to the state after the boundary token (`_sentence_start_state`), so a sentence
        takes only its n tokens' positions. Stateful, each sentence is `<S> w1 .. wn </S>` in the
        forward stream (the state after `</S>` carries on to the row's next sentence). The backward
        stream holds each sentence reversed in place. Only the streams' last chunks run fewer than
        all rows.
        """
        sentences = [sentence for batch in batches for sentence in batch]
        p = self.model.projection_dim
        out = [np.zeros((self.n_outputs, 0, 2 * p), np.float32) for _ in sentences]
        edge = 1 if self.stateful else 0  # Boundary tokens at each end of a sentence's positions.
        streams = self._stateful_streams(batches) if self.stateful else self._packed_streams(sentences)
        active = sorted((row for row, segments in enumerate(streams) if segments), key=lambda r: -streams[r].length)
        if not active:
            return out
        lengths = np.array([streams[row].length for row in active])
        word_ids = np.zeros((2, len(active), lengths[0]), np.int64)  # Each position's index in `words`.
        starts = np.zeros((len(active), lengths[0]), bool)
        words: dict[str, int] = {}
        for i, row in enumerate(active):
            for index, start in streams[row]:
                read = (BOS_TOKEN, *sentences[index], EOS_TOKEN) if edge else sentences[index]
                ids = [words.setdefault(w, len(words)) for w in read]
                word_ids[0, i, start : start + len(ids)] = ids
                word_ids[1, i, start : start + len(ids)] = ids[::-1]  # The backward LM reads it reversed.
                starts[i, start] = True
        embeddings = self.tokens.lookup(list(words))  # [n_words, P]
        state = self._state if self.stateful else self._zero_state(self.batch_size)
        lstm_layers, state = run_lstms(
            self.model, self.params, embeddings, word_ids, lengths, np.array(active), state,
            reset=None if self.stateful else starts,
            reset_state=None if self.stateful else self._sentence_start_state(), cpu_stack=self.kernels.lstm_stack,
        )
        if self.stateful:
            self._state = state
        for i, row in enumerate(active):
            for index, start in streams[row]:
                n = len(sentences[index])
                tokens = slice(start + edge, start + edge + n)
                forward = np.concatenate([embeddings[None, word_ids[0, i, tokens]], lstm_layers[:, 0, i, tokens]])
                backward = lstm_layers[:, 1, i, tokens][:, ::-1]  # The backward stream holds w_n .. w_1.
                both = np.empty((self.n_outputs, n, 2 * p), np.float32)
                both[:, :, :p] = forward
                both[0, :, p:] = forward[0]  # Layer 0 is [x; x], as bilm-tf.
                both[1:, :, p:] = backward
                out[index] = both
        return out

    def _sentence_start_state(self) -> list[LSTMState]:
        """Each layer's state `[2, 1, .]` after reading a sentence's first token from zeros: `<S>`
        in the forward direction, `</S>` in the backward one. Stateless sentences start from it: the
        boundary tokens' own outputs are not returned, so their steps need not run."""
        if self._boundary_state is None:
            embeddings = self.tokens.lookup([BOS_TOKEN, EOS_TOKEN])
            word_ids = np.array([0, 1]).reshape(2, 1, 1)  # Forward reads <S>, backward </S>.
            _, self._boundary_state = run_lstms(
                self.model, self.params, embeddings, word_ids, np.array([1]), np.array([0]),
                self._zero_state(1), cpu_stack=self.kernels.lstm_stack,
            )
        return self._boundary_state

    def _stateful_streams(self, batches: Sequence[Sequence[Sequence[str]]]) -> list["_Stream"]:
        """Row r's stream: the non-empty sentences in row r of each batch, one after another."""
        streams = [_Stream() for _ in range(self.batch_size)]
        offset = 0
        for batch in batches:
            for row, sentence in enumerate(batch):
                if sentence:
                    streams[row].add(offset + row, len(sentence) + 2)
            offset += len(batch)
        return streams

    def _packed_streams(self, sentences: Sequence[Sequence[str]]) -> list["_Stream"]:
        """The non-empty sentences in `batch_size` streams, longest first into the shortest stream."""
        streams = [_Stream() for _ in range(self.batch_size)]
        shortest = [(0, row) for row in range(self.batch_size)]  # A heap of (length, row).
        for index in sorted((i for i, s in enumerate(sentences) if s), key=lambda i: -len(sentences[i])):
            _, row = heapq.heappop(shortest)
            streams[row].add(index, len(sentences[index]))
            heapq.heappush(shortest, (streams[row].length, row))
        return streams

    def token_embeddings(self, words: Sequence[str]) -> np.ndarray:
        """Context-independent embeddings `[len(words), P]` (`<S>`/`</S>` use their special chars;
        a word-input biLM: the table rows of the words' vocabulary ids, `<UNK>` for unknown words)."""
        return self.tokens.encode(words)


def bilm_from_files(options_path: str, weights_path: str) -> PretrainedBiLM:
    """The biLM of bilm-tf/AllenNLP files (`options.json` + hdf5 weights), of one export when
    elmo-jax wrote them (`check_one_export`)."""
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    check_one_export([options_path, weights_path])
    model = bilm_from_config(config.model, vocab_size=1)  # No softmax is used: any vocabulary size.
    return PretrainedBiLM(model, params, config.data.max_chars_per_token)


def bilm_from_workdir(workdir: str, step: int | None = None) -> PretrainedBiLM:
    """The biLM of an elmo-jax training checkpoint (latest step by default), in float32 whatever
    model.dtype it trained in; a word-input biLM comes with the workdir's vocab.txt, which must have
    a line per row of its tables (`checkpoint_vocabulary`)."""
    from elmo_jax.interop.workdir import load_run, workdir_vocabulary  # Imported here: only this path needs orbax.

    run = load_run(workdir, step, with_vocab=False)
    config, params = run.config, run.params
    model_config = ml_collections.ConfigDict(config.model.to_dict())
    model_config.dtype, model_config.dropout = "float32", 0.0
    vocab = None
    if model_config.token_encoder == "word":  # Its token embeddings are rows by vocabulary id.
        vocab = workdir_vocabulary(workdir, params)
    model = bilm_from_config(model_config, vocab_size=len(vocab) if vocab else 1)
    params = {k: v for k, v in params.items() if k != "softmax"}
    return PretrainedBiLM(model, params, config.data.max_chars_per_token, vocab)


def embedder_from_bilm_files(
    options_path: str,
    weights_path: str,
    batch_size: int = 1,
    stateful: bool = True,
    vocab_to_cache: Sequence[str] | None = None,
    engine: str = "auto",
) -> ElmoEmbedder:
    """An embedder for a bilm-tf/AllenNLP model (`options.json` + hdf5 weights)."""
    model, params, max_chars, _ = bilm_from_files(options_path, weights_path)
    return ElmoEmbedder(model, params, max_chars, batch_size, stateful, vocab_to_cache, engine=engine)


def embedder_from_workdir(
    workdir: str,
    step: int | None = None,
    batch_size: int = 1,
    stateful: bool = True,
    vocab_to_cache: Sequence[str] | None = None,
    engine: str = "auto",
) -> ElmoEmbedder:
    """An embedder for an elmo-jax training checkpoint, computing in float32 whatever model.dtype is.

    Char-CNN and word-input biLMs alike; a word-input biLM maps words to ids by the workdir's
    vocab.txt (words outside it -> `<UNK>`, as in training) and takes no `vocab_to_cache`."""
    model, params, max_chars, vocab = bilm_from_workdir(workdir, step)
    return ElmoEmbedder(
        model, params, max_chars, batch_size, stateful, vocab_to_cache, vocab=vocab, engine=engine
    )


def count_lines(path: str) -> int:
    """Newlines in the file at `path` (a progress bar's total), read in 1 MiB chunks."""
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def embed_file(
    embedder: ElmoEmbedder, input_path: str, output_path: str, progress: bool = True, layers: str = "all"
) -> int:
    """Writes the ELMo layers of every line of `input_path` to `output_path`; returns the line count.

    `layers`: 'all', 'top' or 'average' (`select_layers`). Sentences stream through in batches
    (memory: one batch and the output file's buffers).
    """
    if layers not in LAYER_MODES:
        raise ValueError(f"layers must be one of {LAYER_MODES}, got {layers!r}")
    if not os.path.exists(input_path):
        raise FileNotFoundError(f"{input_path}: input file not found")
    count = 0
    n_lines = count_lines(input_path)

    def write(tmp: str) -> None:
        nonlocal count
        with h5py.File(tmp, "w") as out:
            layers_of = embedder.embed_sentences(read_lines(input_path))
            bar = tqdm(layers_of, total=n_lines, unit=" sentences", desc="embed", disable=not progress)
            for i, sentence_layers in enumerate(bar):
                out.create_dataset(str(i), data=select_layers(sentence_layers, layers))
                count = i + 1

    write_atomic(output_path, write)
    return count


def dump_token_embeddings(embedder: ElmoEmbedder, vocab_path: str, output_path: str) -> int:
    """Writes dataset `embedding` `(n_vocab, P)` for the words of `vocab_path`; returns n_vocab."""
    embeddings = embedder.token_embeddings(read_words(vocab_path))

    def write(tmp: str) -> None:
        with h5py.File(tmp, "w") as out:
            out.create_dataset("embedding", data=embeddings)

    write_atomic(output_path, write)
    return len(embeddings)
