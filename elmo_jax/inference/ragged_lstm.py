"""The biLM's LSTM stacks over token streams of different lengths (the XLA path of
docs/embedding_performance.md): time cut into chunks of CHUNK steps, each running only the rows that
reach into it, the first layer's x W_input once per distinct word; or one C++ call (`cpu_stack`)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.inference.cpu_kernels import CpuLstmStack
from elmo_jax.model.bilm import BiLM
from elmo_jax.model.lstm import LSTMState
from elmo_jax.inference.token_cache import MIN_WORDS, bucket

CHUNK = 8  # Time steps per call.
MIN_ROWS = 8  # Chunks run at least this many rows (`row_bucket`), unless a run has fewer streams.


def row_bucket(running: int, n: int) -> int:
    """The rows a chunk of `running` running streams (of a run of n) runs: a power of two, at least
    MIN_ROWS, at most n's power of two. Few shapes (each compiles once), under 2x padding."""
    return min(bucket(max(running, MIN_ROWS), 1), bucket(n, 1))


def take_rows(state: Any, rows: np.ndarray) -> Any:
    """Rows `rows` of each leaf `[2, B, ...]` of a carried state, as host arrays `[2, len(rows), ...]`."""
    return jax.tree.map(lambda s: np.asarray(s)[:, rows], state)


def put_rows(state: Any, rows: np.ndarray, new_rows: Any) -> Any:
    """A copy of `state` (leaves `[2, B, ...]`) on the host with rows `rows` replaced by `new_rows`."""

    def put(old: Any, new: Any) -> np.ndarray:
        out = np.array(old)
        out[:, rows] = np.asarray(new)
        return out

    return jax.tree.map(put, state, new_rows)


def _zero_padded_rows(state: Any, n_rows: int) -> Any:
    """Each leaf `[2, n, ...]` on the host with zero rows after its n, `[2, n_rows, ...]` (new arrays)."""
    return jax.tree.map(lambda s: np.pad(s, [(0, 0), (0, n_rows - s.shape[1])] + [(0, 0)] * (s.ndim - 2)), state)


def _set_rows(state: Any, new: Any, start: int, stop: int) -> None:
    """Rows [start, stop) of each host leaf `[2, R, ...]` of `state` from `new`'s (host leaves)."""
    for leaf, new_leaf in zip(jax.tree.leaves(state), jax.tree.leaves(new)):
        leaf[:, start:stop] = new_leaf[:, start:stop]


@functools.partial(jax.jit, static_argnums=0)
def _first_layer_gates(model: BiLM, params: Any, words: jax.Array) -> jax.Array:
    """Token embeddings `[W, F]` -> the first LSTM layer's x W_input `[2, W, 4 dim]`."""
    return model.apply({"params": params}, words, method=BiLM.first_layer_gates)


@functools.partial(jax.jit, static_argnums=0)
def _run_chunk(
    model: BiLM, params: Any, gates: jax.Array, ids: jax.Array, mask: jax.Array, reset: jax.Array,
    reset_state: list[LSTMState], state: list[LSTMState],
) -> tuple[jax.Array, list[LSTMState]]:
    """The LSTM stacks over one chunk of R rows: gates `[2, W, 4 dim]` (`_first_layer_gates`), ids
    `[2, R, CHUNK]` (rows of gates), mask and reset `[R, CHUNK]`, state `[2, R, .]` per layer ->
    (`[L, 2, R, CHUNK, P]`, state). The gather is in here: it compiles no program of its own."""
    first_gates = jax.vmap(lambda table, rows: jnp.take(table, rows, axis=0))(gates, ids)
    mask, reset = (jnp.broadcast_to(a, (2, *a.shape)) for a in (mask, reset))
    layers, new_state = model.apply(
        {"params": params}, first_gates, mask, state, reset, reset_state, method=BiLM.contextualize_from_gates,
    )
    return jnp.stack(layers), new_state


def check_stream_lengths(lengths: np.ndarray) -> None:
    """ValueError unless the streams' lengths `[n]` are >= 1 and sorted longest first."""
    if np.any(np.diff(lengths) > 0) or lengths[-1] < 1:
        raise ValueError("lengths must be >= 1 and sorted longest first")


def run_lstms(
    model: BiLM, params: Any, words: np.ndarray, word_ids: np.ndarray, lengths: np.ndarray, rows: np.ndarray,
    state: list[LSTMState], reset: np.ndarray | None = None, reset_state: list[LSTMState] | None = None,
    cpu_stack: CpuLstmStack | None = None,
) -> tuple[np.ndarray, list[LSTMState]]:
    """The LSTM layers `[L, 2, n, T', P]` of n token streams (T' >= the longest length; past a row's
    length unspecified) and `state` with their rows advanced. words `[W, F]`: the distinct words'
    token embeddings; word_ids `[2, n, T]`: each position's row of `words`, forward and backward;
    lengths `[n]`, non-increasing; rows `[n]`: distinct rows of `state` (`[2, B, .]` per layer);
    reset `[n, T]`: where true, the state first becomes `reset_state` (`[2, 1, .]`; default zeros)."""
    n = len(lengths)
    check_stream_lengths(lengths)
    if cpu_stack is not None:
        steps = int(lengths[0])
        reset = None if reset is None else reset[:, :steps]
        row_state = take_rows(state, rows)
        layers, new_rows = cpu_stack.run(words, word_ids[:, :, :steps], lengths, row_state, reset, reset_state)
        return layers, put_rows(state, rows, new_rows)
    n_chunks = -(-int(lengths[0]) // CHUNK)
    steps = min(word_ids.shape[2], n_chunks * CHUNK)
    padded_rows = row_bucket(n, n)
    padded_words = np.zeros((bucket(len(words) + 1, MIN_WORDS), words.shape[1]), np.float32)
    padded_words[: len(words)] = words  # Row len(words) (zeros) fills the padding positions.
    gates = _first_layer_gates(model, params, padded_words)
    ids = np.full((2, padded_rows, n_chunks * CHUNK), len(words), np.int32)
    ids[:, :n, :steps] = word_ids[:, :, :steps]
    mask = np.zeros((padded_rows, n_chunks * CHUNK), bool)
    mask[:n] = np.arange(n_chunks * CHUNK) < lengths[:, None]
    resets = np.zeros((padded_rows, n_chunks * CHUNK), bool)
    if reset is not None:
        resets[:n, :steps] = reset[:, :steps]
    if reset_state is None:
        reset_state = jax.tree.map(lambda s: np.zeros_like(s[:, :1]), take_rows(state, rows[:1]))
    reset_state = jax.device_put(reset_state)  # Once, not at every chunk.
    new_rows = _zero_padded_rows(take_rows(state, rows), padded_rows)  # The streams' rows, then padding.
    carry, held = jax.device_put(new_rows), padded_rows  # Device arrays in every call: one jit cache entry.
    chunks = []
    for k in range(n_chunks):
        n_rows = row_bucket(int(np.sum(lengths > k * CHUNK)), n)
        if n_rows < held:  # Rows [n_rows, held) have finished: their states are final.
            carry = jax.tree.map(np.asarray, carry)
            _set_rows(new_rows, carry, n_rows, held)
            carry, held = jax.device_put(jax.tree.map(lambda s: s[:, :n_rows], carry)), n_rows
        time = slice(k * CHUNK, (k + 1) * CHUNK)
        out, carry = _run_chunk(
            model, params, gates, ids[:, :held, time], mask[:held, time], resets[:held, time], reset_state, carry
        )
        chunks.append(out)
    _set_rows(new_rows, jax.tree.map(np.asarray, carry), 0, held)
    layers = np.zeros((model.n_layers, 2, n, n_chunks * CHUNK, model.width), np.float32)
    for k, out in enumerate(chunks):
        kept = min(out.shape[2], n)
        layers[:, :, :kept, k * CHUNK : (k + 1) * CHUNK] = np.asarray(out)[:, :, :kept]
    return layers, put_rows(state, rows, jax.tree.map(lambda s: s[:, :n], new_rows))
