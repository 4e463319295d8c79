"""ELMo representations of sentences: `ElmoEmbedder`, what `elmo-embed` computes (docs/embeddings.md;
how, docs/embedding_performance.md). Each sentence's layers: `[n_layers + 1, n_tokens, 2 * P]`,
layer 0 = `[token embedding; token embedding]`, layer j = `[forward_j; backward_j]`. Consecutive
batches (up to GROUP_POSITIONS token positions) run together as token streams (`_run_batches`).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import os
from typing import IO, Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

import h5py
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN
from elmo_jax.data.segmenter import segment
from elmo_jax.data.conllu import is_conllu_file
from elmo_jax.data.sources import count_lines, numbered_sentences
from elmo_jax.data.unsegmented import UnsegmentedWatch
from elmo_jax.data.vocab import Vocabulary, read_words
from elmo_jax.runtime.atomic_write import write_atomic
from elmo_jax.inference.cpu_kernels import CpuCharCnn, CpuLstmStack, KernelUnavailable
from elmo_jax.model.bilm import BiLM
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_files, bilm_from_manylangs, bilm_from_workdir
from elmo_jax.model.lstm import LSTMState
from elmo_jax.inference.hdf5_output import LAYER_MODES, DatasetWriter, select_layers, write_token_embeddings
from elmo_jax.inference.ragged_lstm import check_stream_lengths, put_rows, run_lstms, take_rows
from elmo_jax.inference.token_cache import TokenEmbeddingCache, WordTokenEmbeddings, bucket

GROUP_POSITIONS = 8192  # `embed_sentences` runs the LSTMs over consecutive batches of about this many positions.
ENGINES = ("auto", "cpu", "xla")  # What computes the char CNN and the LSTMs (`cpu_kernels`).
DEFAULT_BATCH_SIZE = 64  # Sentences per batch, as AllenNLP's `ElmoEmbedder` and `allennlp elmo`.
TIME_STEP = 16  # `run_contextualizer`'s shortest padded stream length (`bucket`: 16, 32, 64, ...).
CHUNK_POSITIONS = 4096  # The most positions of one `run_contextualizer` call, padding included.


class SentenceLayers(NamedTuple):
    """One sentence's token embeddings `[n_tokens, F]` (F = P, or the char CNN's channels without a
    token projection) and LSTM layers `[n_layers, n_tokens, 2 * P]`."""

    tokens: np.ndarray
    lstm: np.ndarray

    def elmo_layers(self) -> np.ndarray:
        """ELMo's layers `[n_layers + 1, n_tokens, 2 * P]` (token embeddings of width P only)."""
        n_layers, n_tokens, width = self.lstm.shape
        layers = np.empty((n_layers + 1, n_tokens, width), np.float32)
        layers[0, :, : width // 2] = layers[0, :, width // 2 :] = self.tokens
        layers[1:] = self.lstm
        return layers


@functools.partial(jax.jit, static_argnums=0)
def encode_chars(model: BiLM, params: Any, char_ids: jax.Array) -> jax.Array:
    """char_ids `[N, C]` -> token embeddings `[N, P]` (shared with `Elmo`, so are its compilations)."""
    return model.apply({"params": params}, {"char_ids": char_ids}, method=BiLM.embed_tokens)


@functools.partial(jax.jit, static_argnums=0)
def _contextualize(model: BiLM, params: Any, x: jax.Array, mask: jax.Array, state: Any) -> tuple[jax.Array, Any]:
    """Token embeddings x `[2, n, T, F]`, mask `[2, n, T]` -> the contextual layers `[L, 2, n, T, P]`, state."""
    layers, _, new_state = model.apply({"params": params}, x, mask, state, method=BiLM.contextualize)
    return jnp.stack(layers[1:]), new_state


def run_contextualizer(
    model: BiLM, params: Any, words: np.ndarray, word_ids: np.ndarray, lengths: np.ndarray, rows: np.ndarray, state: Any
) -> tuple[np.ndarray, Any]:
    """`run_lstms` (same arguments and results) for any contextualizer, in XLA calls over the
    streams in order (longest first): a call's T' is `bucket(its first, TIME_STEP)`, and it takes
    the next `CHUNK_POSITIONS // T'` streams, the last call of fewer padded to a power of two
    (copies of its last stream). A short stream is not padded to its group's longest, and each T'
    (a power of two) compiles one shape and a few last ones."""
    check_stream_lengths(lengths)
    longest = int(lengths[0])
    out = np.zeros((model.n_layers, 2, len(lengths), longest, model.width), np.float32)
    new_states = []  # Each call's streams' next state, in order.
    start = 0
    while start < len(lengths):
        t = bucket(int(lengths[start]), TIME_STEP)
        most = max(1, CHUNK_POSITIONS // t)
        stop = min(start + most, len(lengths))
        n = min(most, bucket(stop - start, 1))
        padded = np.minimum(np.arange(start, start + n), stop - 1)
        kept = min(t, longest)
        ids = np.zeros((2, n, t), np.int64)
        ids[:, :, :kept] = word_ids[:, padded, :kept]
        mask = np.broadcast_to(np.arange(t) < lengths[padded, None], ids.shape)
        layers, new_rows = _contextualize(model, params, words[ids], mask, take_rows(state, rows[padded]))
        out[:, :, start:stop, :kept] = np.asarray(layers)[:, :, : stop - start, :kept]
        new_states.append(jax.tree.map(lambda s: np.asarray(s)[:, : stop - start], new_rows))
        start = stop
    return out, put_rows(state, rows, jax.tree.map(lambda *s: np.concatenate(s, axis=1), *new_states))


@functools.partial(jax.jit, static_argnums=0)
def _embed_word_ids(model: BiLM, params: Any, token_ids: jax.Array) -> jax.Array:
    """token_ids `[N]` -> token embeddings `[N, P]` (a word-input biLM's table rows)."""
    return model.apply({"params": params}, {"token_ids": token_ids}, method=BiLM.embed_tokens)


def projects_tokens(model: BiLM) -> bool:
    """Whether `model`'s token embeddings are P wide: a word-input biLM, or a char CNN with a projection."""
    return not model.token_encoder_class.reads_chars or model.char_cnn["projection"]


def check_embeddable(model: BiLM, any_token_width: bool = False) -> None:
    """ValueError unless, or `any_token_width`, `model` has token embeddings as wide as its layers."""
    if not (any_token_width or projects_tokens(model)):
        raise ValueError(
            "model.char_cnn.projection=False makes the token embeddings wider than the LSTM layers; "
            "ELMo layers need one width"
        )


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")


def jax_device(cuda_device: int) -> jax.Device | None:
    """AllenNLP's `cuda_device` as a JAX device: None (the default device) for -1, else that GPU."""
    if cuda_device < 0:
        return None
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # No GPU backend.
        gpus = []
    if cuda_device >= len(gpus):
        raise ValueError(f"cuda_device={cuda_device}, but JAX sees {len(gpus)} GPU(s)")
    return gpus[cuda_device]


class CpuKernels(NamedTuple):
    """The C++ kernels an embedder computes with (`cpu_kernels`); None: XLA computes that part."""

    char_cnn: CpuCharCnn | None
    lstm_stack: CpuLstmStack | None


def cpu_kernels(model: BiLM, params: Mapping, engine: str) -> CpuKernels:
    """The C++ kernels for a biLM's char CNN and LSTMs, Nones for XLA. engine 'cpu': the kernels
    (KernelUnavailable if they cannot be built); 'xla': Nones; 'auto': the kernels for a float32 biLM
    when JAX computes on the CPU and they build. They need a token projection."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "cpu" and not projects_tokens(model):
        raise ValueError(
            "the C++ kernels (engine 'cpu') need a token projection (model.char_cnn.projection=True): "
            "use engine 'auto' or 'xla'"
        )
    float32_on_cpu = jax.default_backend() == "cpu" and model.dtype == jnp.float32
    if engine == "xla" or not projects_tokens(model) or (engine == "auto" and not float32_on_cpu):
        return CpuKernels(None, None)
    encoder = model.token_encoder_class
    try:  # The C++ char CNN is bilm-tf's (`bilm_tf_format`); XLA computes the others.
        char_cnn = CpuCharCnn(model, params) if encoder.reads_chars and encoder.bilm_tf_format else None
        return CpuKernels(char_cnn, CpuLstmStack(model, params) if model.has_lstm_gates else None)
    except KernelUnavailable as e:
        if engine == "cpu":
            raise
        logging.warning("computing with XLA: %s", e)
        return CpuKernels(None, None)


class _Stream(list):
    """One row of an LSTM run: (sentence index, start position) of each sentence in it, and its length."""

    length = 0

    def add(self, index: int, positions: int) -> None:
        self.append((index, self.length))
        self.length += positions


class ElmoEmbedder:
    """ELMo representations of tokenized sentences, as AllenNLP's `ElmoEmbedder`: of bilm-tf/AllenNLP
    files, `from_workdir` an elmo-jax checkpoint, `from_pretrained` a biLM in memory (each takes
    `_load`'s keywords). Stateful by default: row r of a batch continues from the states row r of the
    previous batch left; `stateful=False` starts every sentence from zeros."""

    def __init__(self, options_file: str, weight_file: str, cuda_device: int = -1, **options: Any):
        self._load(bilm_from_files(options_file, weight_file), cuda_device=cuda_device, **options)

    @classmethod
    def from_workdir(cls, workdir: str, step: int | None = None, **options: Any) -> ElmoEmbedder:
        """The embedder of an elmo-jax training checkpoint (latest step by default; `bilm_from_workdir`)."""
        return cls.from_pretrained(bilm_from_workdir(workdir, step), **options)

    @classmethod
    def from_manylangs(cls, directory: str, **options: Any) -> ElmoEmbedder:
        """The embedder of an ELMoForManyLangs model directory (`pretrained.bilm_from_manylangs`). Stateless
        by default: each sentence from zero states, what ELMoForManyLangs' `sents2elmo` gives for the first
        batch of a freshly loaded `Embedder`, whatever the batch (`stateful=True`: carried as bilm-tf does)."""
        return cls.from_pretrained(bilm_from_manylangs(directory), **{"stateful": False, **options})

    @classmethod
    def from_pretrained(cls, pretrained: PretrainedBiLM, **options: Any) -> ElmoEmbedder:
        """The embedder of a biLM in memory (`PretrainedBiLM`)."""
        embedder = cls.__new__(cls)
        embedder._load(pretrained, **options)
        return embedder

    def _load(
        self, pretrained: PretrainedBiLM, *, batch_size: int = DEFAULT_BATCH_SIZE, stateful: bool = True,
        vocab_to_cache: Sequence[str] | None = None, token_cache_size: int = 100_000, engine: str = "auto",
        cuda_device: int = -1, any_token_width: bool = False, watch_unsegmented: bool = True,
    ) -> None:
        """Every constructor's body. `batch_size`: `embed_sentences`' default; `token_cache_size`:
        the distinct words whose char-CNN token embeddings are kept, besides the words of
        `vocab_to_cache` (refused for a word-input biLM); `engine`: 'auto' | 'cpu' | 'xla'
        (`cpu_kernels`); `cuda_device`: -1, JAX's default device, k >= 0 the k-th GPU;
        `any_token_width`: also a biLM without a token projection (`embed_sentence_layers` only);
        `watch_unsegmented`: False where the caller checked its sentences itself (the probes)."""
        model, max_chars = pretrained.model, pretrained.max_chars
        check_embeddable(model, any_token_width)
        check_batch_size(batch_size)
        self.model = model
        # The softmax is not used (and bilm-tf weight files do not have one).
        params = {k: v for k, v in pretrained.params.items() if k != "softmax"}
        self.params = jax.device_put(params, jax_device(cuda_device))
        self.batch_size = batch_size
        self.stateful = stateful
        self._unsegmented = UnsegmentedWatch("the sentences embedded") if watch_unsegmented else None
        self.kernels = cpu_kernels(model, self.params, engine)
        self.reset_states()
        if not model.token_encoder_class.reads_chars:
            self.tokens = self._word_tokens(pretrained.vocab, vocab_to_cache)
            return
        widest_filter = max(width for width, _ in model.char_cnn["filters"])
        if self.kernels.char_cnn is not None:  # It takes every word at once and skips their padding itself.
            encode, by_length = self.kernels.char_cnn.encode, False
        else:
            encoder = model.clone(distinct_fraction=0.0)  # The cache sends it distinct words only.
            encode, by_length = functools.partial(encode_chars, encoder, self.params), True
        self.tokens = TokenEmbeddingCache(
            encode, model.token_dim, max_chars, widest_filter, token_cache_size, by_length=by_length,
            characters=pretrained.characters,
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
        """Zero carried states for `batch_size` rows (more rows are added as batches need them)."""
        self._state = self._zero_state(self.batch_size)

    def _zero_state(self, rows: int) -> Any:
        """The zero carried state of `rows` rows per direction, on the host (nothing to compile)."""
        shapes = jax.eval_shape(lambda: self.model.initial_state(rows))
        return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)

    def _state_rows(self, rows: int) -> int:
        """The carried states' row count once they have at least `rows` rows (new rows: zeros)."""
        have = jax.tree.leaves(self._state)[0].shape[1]
        if rows > have:
            zeros = self._zero_state(rows - have)
            self._state = jax.tree.map(lambda a, b: np.concatenate([np.asarray(a), b], axis=1), self._state, zeros)
        return max(rows, have)

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """ELMo layers `[n_layers + 1, n_tokens, 2 * P]` float32 of one sentence, in row 0. Stateful by
        default, as AllenNLP's; `stateful=False` (the embedder's) gives the sentence alone."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """ELMo layers `[n_layers + 1, n_tokens, 2 * P]` float32 of each sentence, sentence i in row i.
        Stateful by default, as AllenNLP's; `stateful=False` (the embedder's) embeds each alone."""
        check_embeddable(self.model)
        return [layers.elmo_layers() for layers in self._run_batches([batch], max(len(batch), self.batch_size))]

    def batch_to_embeddings(self, batch: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """As AllenNLP's: activations `[B, n_layers + 1, T, 2 * P]` float32 (zeros after each
        sentence's end) and the mask `[B, T]` bool; T: the longest sentence."""
        layers = self.embed_batch(batch)
        longest = max((x.shape[1] for x in layers), default=0)
        activations = np.zeros((len(batch), self.n_outputs, longest, 2 * self.model.width), np.float32)
        mask = np.zeros((len(batch), longest), bool)
        for row, x in enumerate(layers):
            activations[row, :, : x.shape[1]] = x
            mask[row, : x.shape[1]] = True
        return activations, mask

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int | None = None
    ) -> Iterator[np.ndarray]:
        """ELMo layers of each sentence, as `embed_batch` on consecutive batches of `batch_size`."""
        check_embeddable(self.model)
        for layers in self.embed_sentence_layers(sentences, batch_size):
            yield layers.elmo_layers()

    def embed_sentence_layers(
        self, sentences: Iterable[Sequence[str]], batch_size: int | None = None
    ) -> Iterator[SentenceLayers]:
        """`embed_sentences`' outputs as `SentenceLayers` (any biLM, token projection or not)."""
        batch_size = self.batch_size if batch_size is None else batch_size
        check_batch_size(batch_size)
        group: list[list[Sequence[str]]] = []
        positions = 0
        sentences = iter(sentences)
        while batch := list(itertools.islice(sentences, batch_size)):
            group.append(batch)
            positions += sum(len(sentence) + 2 for sentence in batch)
            if positions >= GROUP_POSITIONS:
                yield from self._run_batches(group, batch_size)
                group, positions = [], 0
        if group:
            yield from self._run_batches(group, batch_size)

    def embed_file(
        self, input_file: str | os.PathLike | IO[str], output_file_path: str, output_format: str = "all",
        batch_size: int | None = None, forget_sentences: bool = False, use_sentence_keys: bool = False,
        progress: bool = True, segmenter: str = "none", vocabulary: Vocabulary | None = None,
    ) -> int:
        """Writes the ELMo layers of every line of `input_file` (a path or an open text file) to the
        hdf5 file `output_file_path`, whole or not at all, as AllenNLP's (`hdf5_output`); returns
        the line count. `segmenter` cuts the lines into words (data.segmenter's values: the biLM's
        training text's; or 'jieba_vocabulary', into words of `vocabulary`); with `vocabulary` (the
        biLM's training words), one line says how many
        tokens fall outside it (a segmentation unlike the training text's shows there)."""
        if output_format not in LAYER_MODES:
            raise ValueError(f"output_format must be one of {LAYER_MODES}, got {output_format!r}")
        sentences, total, source = _input_sentences(input_file, segmenter, vocabulary)
        count = 0
        tokens = outside = 0

        def write(tmp: str) -> None:
            nonlocal count, tokens, outside
            with h5py.File(tmp, "w") as out:
                writer = DatasetWriter(out, source, forget_sentences, use_sentence_keys)
                texts, inputs = itertools.tee(sentences)  # tee buffers the lines embed_sentences reads ahead.
                # Counted as written, and closed at the end: a bar wrapping the iterator would stop
                # one short, zip never asking it for the item after the last.
                with tqdm(total=total, unit=" sentences", desc="embed", disable=not progress) as bar:
                    for words, layers in zip(texts, self.embed_sentences(inputs, batch_size)):
                        writer.add(words, select_layers(layers, output_format))
                        if vocabulary is not None:
                            tokens, outside = tokens + len(words), outside + sum(w not in vocabulary for w in words)
                        bar.update()
                count = writer.finish()

        write_atomic(output_file_path, write)
        if vocabulary is not None:
            logging.info("%d of the %d tokens (%.1f%%) are outside the biLM's vocabulary of %d words", outside,
                         tokens, 100 * outside / max(tokens, 1), len(vocabulary))
        return count

    def _run_batches(self, batches: Sequence[Sequence[Sequence[str]]], rows: int) -> list[SentenceLayers]:
        """The sentences of consecutive batches (up to `rows` each), in one run over token streams:
        stateful, row r's sentences one after another, each `<S> w1 .. wn </S>`; stateless LSTMs,
        packed longest first, each `w1 .. wn` from `_sentence_start_state`; else one stream each.
        The backward stream holds each sentence reversed in place."""
        sentences = [sentence for batch in batches for sentence in batch]
        check_token_lists(sentences)
        if self._unsegmented is not None:
            self._unsegmented.see(sentences)
        p = self.model.width
        empty = SentenceLayers(np.zeros((0, self.model.token_dim), np.float32),
                               np.zeros((self.model.n_layers, 0, 2 * p), np.float32))
        out = [empty] * len(sentences)
        lstm = self.model.has_lstm_gates
        edge = 1 if self.stateful or not lstm else 0  # Boundary tokens at each end of a sentence's positions.
        if self.stateful:
            streams, state = self._stateful_streams(batches, self._state_rows(rows)), self._state
        elif lstm:
            streams, state = self._packed_streams(sentences, rows), self._zero_state(rows)
        else:
            streams, state = self._stateful_streams([sentences], len(sentences)), self._zero_state(len(sentences))
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
        streams_in = (self.model, self.params, embeddings, word_ids, lengths, np.array(active), state)
        if not lstm:
            contextual_layers, state = run_contextualizer(*streams_in)
        elif self.stateful:
            contextual_layers, state = run_lstms(*streams_in, cpu_stack=self.kernels.lstm_stack)
        else:
            contextual_layers, state = run_lstms(
                *streams_in, reset=starts, reset_state=self._sentence_start_state, cpu_stack=self.kernels.lstm_stack
            )
        if self.stateful:
            self._state = state
        for i, row in enumerate(active):
            for index, start in streams[row]:
                n = len(sentences[index])
                tokens = slice(start + edge, start + edge + n)
                both = np.empty((self.model.n_layers, n, 2 * p), np.float32)
                both[:, :, :p] = contextual_layers[:, 0, i, tokens]
                both[:, :, p:] = contextual_layers[:, 1, i, tokens][:, ::-1]  # The backward stream holds w_n .. w_1.
                out[index] = SentenceLayers(embeddings[word_ids[0, i, tokens]], both)
        return out

    @functools.cached_property
    def _sentence_start_state(self) -> list[LSTMState]:
        """Each layer's state `[2, 1, .]` after `<S>` forward and `</S>` backward from zeros: where
        stateless sentences start, so the boundary tokens' steps need not run."""
        embeddings = self.tokens.lookup([BOS_TOKEN, EOS_TOKEN])
        word_ids = np.array([0, 1]).reshape(2, 1, 1)  # Forward reads <S>, backward </S>.
        return run_lstms(
            self.model, self.params, embeddings, word_ids, np.array([1]), np.array([0]), self._zero_state(1),
            cpu_stack=self.kernels.lstm_stack,
        )[1]

    @staticmethod
    def _stateful_streams(batches: Sequence[Sequence[Sequence[str]]], rows: int) -> list["_Stream"]:
        """Row r's stream (of `rows`): the non-empty sentences in row r of each batch, one after another."""
        streams = [_Stream() for _ in range(rows)]
        offset = 0
        for batch in batches:
            for row, sentence in enumerate(batch):
                if sentence:
                    streams[row].add(offset + row, len(sentence) + 2)
            offset += len(batch)
        return streams

    @staticmethod
    def _packed_streams(sentences: Sequence[Sequence[str]], rows: int) -> list["_Stream"]:
        """The non-empty sentences in `rows` streams, longest first into the shortest stream."""
        streams = [_Stream() for _ in range(rows)]
        shortest = [(0, row) for row in range(rows)]  # A heap of (length, row).
        for index in sorted((i for i, s in enumerate(sentences) if s), key=lambda i: -len(sentences[i])):
            _, row = heapq.heappop(shortest)
            streams[row].add(index, len(sentences[index]))
            heapq.heappush(shortest, (streams[row].length, row))
        return streams

    def token_embeddings(self, words: Sequence[str]) -> np.ndarray:
        """Context-independent embeddings `[len(words), P]` (a word-input biLM: its table rows)."""
        return self.tokens.encode(words)


def check_token_lists(sentences: Sequence[Sequence[str]]) -> None:
    """TypeError for a sentence given as a str: its characters would be embedded as its words."""
    for index, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(
                f"sentence {index} is a str ({sentence[:20]!r}), not its list of tokens: give a list of words "
                "(sentence.split(), or jieba.lcut(sentence) for Chinese)"
            )


def embedder_from_bilm_files(
    options_path: str, weights_path: str, batch_size: int = 1, stateful: bool = True,
    vocab_to_cache: Sequence[str] | None = None, engine: str = "auto",
) -> ElmoEmbedder:
    """An embedder for a bilm-tf/AllenNLP model (`options.json` + hdf5 weights)."""
    return ElmoEmbedder(options_path, weights_path, batch_size=batch_size, stateful=stateful,
                        vocab_to_cache=vocab_to_cache, engine=engine)


def embedder_from_workdir(
    workdir: str, step: int | None = None, batch_size: int = 1, stateful: bool = True,
    vocab_to_cache: Sequence[str] | None = None, engine: str = "auto",
) -> ElmoEmbedder:
    """An embedder for an elmo-jax training checkpoint (`ElmoEmbedder.from_workdir`)."""
    return ElmoEmbedder.from_workdir(workdir, step, batch_size=batch_size, stateful=stateful,
                                     vocab_to_cache=vocab_to_cache, engine=engine)


def _input_sentences(
    input_file: str | os.PathLike | IO[str], segmenter: str, vocabulary: Vocabulary | None
) -> tuple[Iterator[list[str]], int | None, str]:
    """The tokens of each line of `input_file` as `segmenter` cuts it (of each sentence of a
    `*.conllu` file), its line count when known and its name."""
    if hasattr(input_file, "read"):
        return segment(input_file, segmenter, vocabulary), None, getattr(input_file, "name", "the input")
    path = os.fspath(input_file)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: input file not found")
    sentences = (tokens for _, tokens in numbered_sentences(path, segmenter, vocabulary))
    return sentences, None if is_conllu_file(path) else count_lines(path), path


def dump_token_embeddings(embedder: ElmoEmbedder, vocab_path: str, output_path: str) -> int:
    """Writes dataset `embedding` `(n_vocab, P)` for the words of `vocab_path`; returns n_vocab."""
    embeddings = embedder.token_embeddings(read_words(vocab_path))
    write_token_embeddings(embeddings, output_path)
    return len(embeddings)
