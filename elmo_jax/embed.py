"""ELMo representations of sentences: library API and CLI.

  python -m elmo_jax.embed --options options.json --weights weights.hdf5 \\
      --input sentences.txt --output elmo.hdf5 [--batch_size 32] [--stateless]
  python -m elmo_jax.embed --workdir runs/demo [--step N] --input sentences.txt --output elmo.hdf5
  python -m elmo_jax.embed --options options.json --weights weights.hdf5 \\
      --token_embeddings vocab.txt --output tokens.hdf5

Input: one whitespace-tokenized sentence per line, UTF-8; invalid bytes are replaced by U+FFFD
(with a warning). `<S>`/`</S>` are added internally. Tokens longer than
max_characters_per_token - 2 UTF-8 bytes (48 for released models) are truncated, as in bilm-tf.

Output: one float32 dataset per input line, named by its 0-based line number, shape
`(n_layers + 1, n_tokens, 2 * projection_dim)` (= 2 * dim for a biLM whose LSTM has no projection,
projection_dim == dim): layer 0 = `[token embedding; token embedding]`,
layer j = `[forward_j; backward_j]`, `<S>`/`</S>` removed. An empty line gives shape
`(n_layers + 1, 0, 2 * projection_dim)` and leaves its row's LSTM states untouched (bilm-tf
would run `<S> </S>` through them).

Stateful, as bilm-tf and AllenNLP: lines are taken in batches of N consecutive lines and the LSTM
states of batch row r carry over to row r of the next batch (zeros at the start; a shorter last
batch leaves the other rows' states untouched); `--stateless` resets them every batch. The forward
LSTM reads `<S> w1 .. wn </S>`, the backward LSTM its reverse; a row's states freeze after its
last token, so padding never changes a real token's output.

`--token_embeddings VOCAB` writes the dataset `embedding` `(n_vocab, projection_dim)`: the
context-independent token embedding of each vocabulary line (first tab-separated field), as
bilm-tf's `dump_token_embeddings`.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from typing import Any, Iterable, Iterator, Mapping, Sequence

import h5py
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from elmo_jax import host_memory
from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, CharIdCache, word_to_char_ids
from elmo_jax.interop.bilm_hdf5 import load_options, load_weights, write_atomic
from elmo_jax.model.bilm import BiLM, bilm_from_config
from elmo_jax.model.lstm import LSTMState

BUCKET = 16  # Sequence lengths are padded to a multiple of this: one compilation per bucket.
TOKEN_CHUNK = 256  # Words per token-embedding call (a fixed shape: one compilation).


@functools.partial(jax.jit, static_argnums=0)
def _run_bilm(
    model: BiLM, params: Any, char_ids: jax.Array, mask: jax.Array, state: list[LSTMState]
) -> tuple[jax.Array, list[LSTMState]]:
    """char_ids `[2, B, T, C]`, mask `[2, B, T]` -> (layers `[L + 1, 2, B, T, P]`, new state)."""
    layers, _, new_state = model.apply({"params": params}, {"char_ids": char_ids, "mask": mask}, state)
    return jnp.stack(layers), new_state


@functools.partial(jax.jit, static_argnums=0)
def _embed_tokens(model: BiLM, params: Any, char_ids: jax.Array) -> jax.Array:
    """char_ids `[N, C]` -> token embeddings `[N, P]`."""
    return model.apply({"params": params}, {"char_ids": char_ids}, method=BiLM.embed_tokens)


class ElmoEmbedder:
    """Stateful ELMo representations from a char-CNN biLM and its params.

    `embed_batch` takes up to `batch_size` sentences (token lists); the LSTM states of row r carry
    over to row r of the next call unless `stateful=False`.
    """

    def __init__(self, model: BiLM, params: Mapping, max_chars: int, batch_size: int = 1, stateful: bool = True):
        if model.token_encoder != "char_cnn":
            raise ValueError(f"embedding needs a char-CNN biLM, got model.token_encoder={model.token_encoder!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        # The softmax is not used (and bilm-tf weight files do not have one).
        self.params = jax.device_put({k: v for k, v in params.items() if k != "softmax"})
        self.max_chars = max_chars
        self.chars = CharIdCache(max_chars)
        self.batch_size = batch_size
        self.stateful = stateful
        self.reset_states()

    @property
    def n_outputs(self) -> int:
        """Representation layers per token: the token embedding plus one per LSTM layer."""
        return self.model.n_layers + 1

    def reset_states(self) -> None:
        """Zero LSTM states for every row."""
        self._state = self.model.initial_state(self.batch_size)

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """ELMo layers of up to `batch_size` sentences, each `[n_layers + 1, n_tokens, 2 * P]` float32."""
        if len(sentences) > self.batch_size:
            raise ValueError(f"{len(sentences)} sentences in a batch of {self.batch_size} rows")
        if not self.stateful:
            self.reset_states()
        p = self.model.projection_dim
        lengths = [len(s) + 2 if s else 0 for s in sentences]  # An empty sentence leaves its row untouched.
        steps = -(-max(lengths, default=0) // BUCKET) * BUCKET
        if steps == 0:
            return [np.zeros((self.n_outputs, 0, 2 * p), np.float32) for _ in sentences]
        char_ids = np.zeros((2, self.batch_size, steps, self.max_chars), np.int32)
        mask = np.zeros((2, self.batch_size, steps), bool)
        for row, (tokens, length) in enumerate(zip(sentences, lengths)):
            if length:
                ids = self.chars.encode([BOS_TOKEN, *tokens, EOS_TOKEN])
                char_ids[0, row, :length] = ids
                char_ids[1, row, :length] = ids[::-1]  # The backward LM reads the reversed sentence.
                mask[:, row, :length] = True
        layers, self._state = _run_bilm(self.model, self.params, char_ids, mask, self._state)
        layers = np.asarray(layers)
        out = []
        for row, tokens in enumerate(sentences):
            n = len(tokens)
            forward = layers[:, 0, row, 1 : n + 1]
            backward = layers[:, 1, row, n:0:-1]  # Reversed positions n..1 are tokens 1..n.
            both = np.concatenate([forward, backward], axis=-1)
            both[0, :, p:] = forward[0]  # Layer 0 is [x; x], as bilm-tf.
            out.append(both)
        return out

    def embed_sentences(self, sentences: Iterable[Sequence[str]]) -> Iterator[np.ndarray]:
        """ELMo layers of each sentence, in order, computed in batches of `batch_size` consecutive sentences."""
        batch: list[Sequence[str]] = []
        for sentence in sentences:
            batch.append(sentence)
            if len(batch) == self.batch_size:
                yield from self.embed_batch(batch)
                batch = []
        if batch:
            yield from self.embed_batch(batch)

    def token_embeddings(self, words: Sequence[str]) -> np.ndarray:
        """Context-independent embeddings `[len(words), P]` (`<S>`/`</S>` use their special chars)."""
        out = [np.zeros((0, self.model.projection_dim), np.float32)]
        for start in range(0, len(words), TOKEN_CHUNK):
            part = words[start : start + TOKEN_CHUNK]
            char_ids = np.zeros((TOKEN_CHUNK, self.max_chars), np.int32)
            char_ids[: len(part)] = [word_to_char_ids(w, self.max_chars) for w in part]
            out.append(np.asarray(_embed_tokens(self.model, self.params, char_ids))[: len(part)])
        return np.concatenate(out)


def embedder_from_bilm_files(
    options_path: str, weights_path: str, batch_size: int = 1, stateful: bool = True
) -> ElmoEmbedder:
    """An embedder for a bilm-tf/AllenNLP model (`options.json` + hdf5 weights)."""
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    model = bilm_from_config(config.model, vocab_size=1)  # No softmax is used: any vocabulary size.
    return ElmoEmbedder(model, params, config.data.max_chars_per_token, batch_size, stateful)


def embedder_from_workdir(
    workdir: str, step: int | None = None, batch_size: int = 1, stateful: bool = True
) -> ElmoEmbedder:
    """An embedder for an elmo-jax training checkpoint, computing in float32 whatever model.dtype is."""
    from elmo_jax.evaluation_job import restore_checkpoint  # Imported here: only this path needs orbax.

    config, params = restore_checkpoint(workdir, step)
    model_config = ml_collections.ConfigDict(config.model.to_dict())
    model_config.dtype, model_config.dropout = "float32", 0.0
    model = bilm_from_config(model_config, vocab_size=1)
    return ElmoEmbedder(model, params, config.data.max_chars_per_token, batch_size, stateful)


def read_sentences(path: str) -> Iterator[list[str]]:
    """Whitespace-split lines of a UTF-8 file (an empty line gives []); invalid bytes become U+FFFD."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: input file not found")
    warned = False
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):  # Binary lines split on b"\n" only.
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
                if not warned:
                    logging.warning("%s:%d: invalid UTF-8 replaced by U+FFFD (first such line)", path, line_no)
                    warned = True
            yield text.split()


def read_vocabulary_words(path: str) -> list[str]:
    """The first tab-separated field of each line (bilm-tf / elmo-jax vocabulary files)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: vocabulary file not found")
    words = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            try:
                word = raw.decode("utf-8").split("\t")[0].strip()
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{line_no}: not valid UTF-8 ({e.reason})") from None
            if not word:
                raise ValueError(f"{path}:{line_no}: empty token")
            words.append(word)
    return words


def embed_file(embedder: ElmoEmbedder, input_path: str, output_path: str) -> int:
    """Writes the ELMo layers of every line of `input_path` to `output_path`; returns the line count."""
    count = 0

    def write(tmp: str) -> None:
        nonlocal count
        with h5py.File(tmp, "w") as out:
            for i, layers in enumerate(embedder.embed_sentences(read_sentences(input_path))):
                out.create_dataset(str(i), data=layers)
                count = i + 1

    write_atomic(output_path, write)
    return count


def dump_token_embeddings(embedder: ElmoEmbedder, vocab_path: str, output_path: str) -> int:
    """Writes dataset `embedding` `(n_vocab, P)` for the words of `vocab_path`; returns n_vocab."""
    embeddings = embedder.token_embeddings(read_vocabulary_words(vocab_path))

    def write(tmp: str) -> None:
        with h5py.File(tmp, "w") as out:
            out.create_dataset("embedding", data=embeddings)

    write_atomic(output_path, write)
    return len(embeddings)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m elmo_jax.embed", description="ELMo representations of sentences.")
    parser.add_argument("--options", help="bilm-tf/AllenNLP options.json (with --weights)")
    parser.add_argument("--weights", help="bilm-tf/AllenNLP hdf5 weight file (with --options)")
    parser.add_argument("--workdir", help="elmo-jax training workdir (instead of --options/--weights)")
    parser.add_argument("--step", type=int, default=None, help="with --workdir: checkpoint step (default: latest)")
    parser.add_argument("--input", help="sentences, one whitespace-tokenized sentence per line")
    parser.add_argument("--token_embeddings", metavar="VOCAB", help="write the token embeddings of these words instead")
    parser.add_argument("--output", required=True, help="hdf5 file to write")
    parser.add_argument("--batch_size", type=int, default=1, help="consecutive lines per batch (state rows)")
    parser.add_argument("--stateless", action="store_true", help="reset the LSTM states every batch")
    args = parser.parse_args(argv)
    if (args.workdir is None) == (args.options is None and args.weights is None):
        parser.error("give either --options and --weights, or --workdir")
    if args.workdir is None and (args.options is None or args.weights is None):
        parser.error("--options and --weights go together")
    if (args.input is None) == (args.token_embeddings is None):
        parser.error("give exactly one of --input and --token_embeddings")
    if args.batch_size < 1:
        parser.error(f"--batch_size must be >= 1, got {args.batch_size}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    host_memory.reuse_freed_memory()  # Before JAX starts its CPU backend.
    try:
        if args.workdir is not None:
            embedder = embedder_from_workdir(args.workdir, args.step, args.batch_size, not args.stateless)
        else:
            embedder = embedder_from_bilm_files(args.options, args.weights, args.batch_size, not args.stateless)
        if args.input is not None:
            n = embed_file(embedder, args.input, args.output)
            print(f"wrote {n} sentences to {args.output}")
        else:
            n = dump_token_embeddings(embedder, args.token_embeddings, args.output)
            print(f"wrote {n} token embeddings to {args.output}")
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
