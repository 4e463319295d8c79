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
from elmo_jax.inference.token_cache import MIN_WORDS, padded_count

CHUNK = 8  # Time steps per call.
ROW_STEP = 8  # Above 8 rows, chunks run a multiple of this many rows.


def row_bucket(n: int) -> int:
    """The row count a chunk of n running rows is padded to: 1, 2, 3, 4, 6, 8, then multiples of ROW_STEP."""
    if n <= 8:
        return padded_count(n, 1)
    return -(-n // ROW_STEP) * ROW_STEP


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


@jax.jit
def _gather_rows(state: list[LSTMState], order: jax.Array) -> list[LSTMState]:
    """The states of all rows `[2, B, .]` in `order` (a permutation of the B rows)."""
    return jax.tree.map(lambda s: jnp.take(s, order, axis=1), state)


@jax.jit
def _scatter_rows(state: list[LSTMState], sorted_state: list[LSTMState], order: jax.Array) -> list[LSTMState]:
    """`state` with row `order[i]` replaced by row i of `sorted_state` (the inverse of `_gather_rows`)."""
    return jax.tree.map(lambda s, new: s.at[:, order].set(new), state, sorted_state)


@functools.partial(jax.jit, static_argnums=0)
def _first_layer_gates(model: BiLM, params: Any, words: jax.Array) -> jax.Array:
    """Token embeddings `[W, F]` -> the first LSTM layer's x W_input `[2, W, 4 dim]`."""
    return model.apply({"params": params}, words, method=BiLM.first_layer_gates)


@jax.jit
def _gather_gates(gates: jax.Array, ids: jax.Array) -> jax.Array:
    """gates `[2, W, G]`, ids `[2, R, T]` (rows of gates) -> `[2, R, T, G]`."""
    return jax.vmap(lambda table, rows: jnp.take(table, rows, axis=0))(gates, ids)


@functools.partial(jax.jit, static_argnums=0)
def _run_chunk(
    model: BiLM, params: Any, first_gates: jax.Array, mask: jax.Array, reset: jax.Array,
    reset_state: list[LSTMState], state: list[LSTMState],
) -> tuple[jax.Array, list[LSTMState]]:
    """The LSTM stacks over one chunk of rows [0, R) of state (every row's `[2, B, .]`, sorted):
    first_gates `[2, R, CHUNK, 4 dim]`, mask and reset `[R, CHUNK]` -> (`[L, 2, R, CHUNK, P]`, state)."""
    n_rows = first_gates.shape[1]
    rows_state = jax.tree.map(lambda s: s[:, :n_rows], state)
    mask, reset = (jnp.broadcast_to(a, (2, *a.shape)) for a in (mask, reset))
    layers, new_rows = model.apply(
        {"params": params}, first_gates, mask, rows_state, reset, reset_state,
        method=BiLM.contextualize_from_gates,
    )
    state = jax.tree.map(lambda s, new: s.at[:, :n_rows].set(new), state, new_rows)
    return jnp.stack(layers), state


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
    batch_size = state[0].c.shape[1]
    n_chunks = -(-int(lengths[0]) // CHUNK)
    steps = min(word_ids.shape[2], n_chunks * CHUNK)
    padded_rows = min(row_bucket(n), batch_size)
    padded_words = np.zeros((padded_count(len(words) + 1, MIN_WORDS), words.shape[1]), np.float32)
    padded_words[: len(words)] = words  # Row len(words) (zeros) fills the padding positions.
    gates = _first_layer_gates(model, params, padded_words)
    ids = np.full((2, padded_rows, n_chunks * CHUNK), len(words), np.int32)
    ids[:, :n, :steps] = word_ids[:, :, :steps]
    mask = np.zeros((padded_rows, n_chunks * CHUNK), bool)
    mask[:n] = np.arange(n_chunks * CHUNK) < lengths[:, None]
    resets = np.zeros((padded_rows, n_chunks * CHUNK), bool)
    if reset is not None:
        resets[:n, :steps] = reset[:, :steps]
    order = np.concatenate([rows, np.setdiff1d(np.arange(batch_size), rows)]).astype(np.int32)
    sorted_state = _gather_rows(state, order)
    if reset_state is None:
        reset_state = jax.tree.map(lambda s: jnp.zeros_like(s[:, :1]), state)
    chunks = []
    for k in range(n_chunks):
        running = int(np.sum(lengths > k * CHUNK))
        n_rows = min(row_bucket(running), padded_rows)
        time = slice(k * CHUNK, (k + 1) * CHUNK)
        first_gates = _gather_gates(gates, ids[:, :n_rows, time])
        out, sorted_state = _run_chunk(
            model, params, first_gates, mask[:n_rows, time], resets[:n_rows, time], reset_state, sorted_state
        )
        chunks.append((n_rows, out))
    layers = np.zeros((model.n_layers, 2, n, n_chunks * CHUNK, model.width), np.float32)
    for k, (n_rows, out) in enumerate(chunks):
        kept = min(n_rows, n)
        layers[:, :, :kept, k * CHUNK : (k + 1) * CHUNK] = np.asarray(out)[:, :, :kept]
    return layers, _scatter_rows(state, sorted_state, order)
