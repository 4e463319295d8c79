"""The biLM's LSTM stacks over token streams on CPUs (inference): what `BiLM.contextualize_from_gates`
computes for float32 biLMs, to float32 rounding, in one call of lstm_stack.cc for every layer and step,
each (direction, block of rows) on a thread of its own."""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Mapping

import numpy as np

from elmo_jax.inference.cpu_kernels.arrays import F32, I32, cpu_threads, f32, packed_model, pointer
from elmo_jax.inference.cpu_kernels.build import load_library
from elmo_jax.model.lstm import LSTMState, has_projection


class _ModelArgs(ctypes.Structure):
    """lstm_stack.cc's `LstmModelArgs`."""

    _fields_ = [
        *((name, ctypes.c_int32) for name in ("n_layers", "dim", "proj", "residual")),
        ("cell_clip", ctypes.c_float),
        ("proj_clip", ctypes.c_float),
        *((name, F32) for name in ("bias", "w_input", "w_hidden", "w_proj")),
    ]


class _Args(ctypes.Structure):
    """lstm_stack.cc's `LstmStackArgs`."""

    _fields_ = [
        *((name, ctypes.c_int32) for name in ("rows", "steps", "words", "n_threads")),
        ("embeddings", F32),
        ("ids", I32),
        ("lengths", I32),
        ("reset", ctypes.POINTER(ctypes.c_uint8)),
        *((name, F32) for name in ("reset_c", "reset_h", "c", "h", "out", "table")),
    ]


class CpuLstmStack:
    """The LSTM stacks of a float32 biLM, ready for `run`; KernelUnavailable when the kernels cannot
    be built (`load_library`)."""

    def __init__(self, model: Any, params: Mapping, n_threads: int | None = None):
        library = load_library()
        library.elmo_lstm_stack.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Args)]
        library.elmo_lstm_table_floats.restype = ctypes.c_int64
        self._library = library
        self._table = np.empty(0, np.float32)  # Scratch kept between calls: its pages are mapped once.
        self._lock = threading.Lock()  # One call at a time: each uses every core (and the scratch).
        lstm = model.stack_spec  # The biLM's LSTMContextualizer.
        self.n_layers, self.dim, self.proj = lstm.n_layers, lstm.dim, model.width
        self.n_threads = n_threads or cpu_threads()
        layers = [params[f"lstm_{i}"] for i in range(model.n_layers)]
        projected = has_projection(self.dim, self.proj)
        weights = {
            name: f32(np.stack([layer[key] for layer in layers]))
            for name, key in (("bias", "B"), ("w_input", "W_input"), ("w_hidden", "W_hidden"))
        }
        weights["w_proj"] = f32(np.stack([layer["W_P"] for layer in layers])) if projected else None
        args = _ModelArgs(
            self.n_layers, self.dim, self.proj, int(bool(lstm.use_skip_connections)),
            float(lstm.cell_clip or 0.0), float(lstm.proj_clip or 0.0) if projected else 0.0,
            *(pointer(weights[name], F32) for name in ("bias", "w_input", "w_hidden", "w_proj")),
        )
        self._model = packed_model(self, library, "lstm", args)

    def run(
        self, embeddings: np.ndarray, ids: np.ndarray, lengths: np.ndarray, state: list[LSTMState],
        reset: np.ndarray | None = None, reset_state: list[LSTMState] | None = None,
    ) -> tuple[np.ndarray, list[LSTMState]]:
        """`run_lstms` (`ragged_lstm`) over n token streams: embeddings `[W, P]`, ids `[2, n, T]`, lengths
        `[n]`, state (each layer's `[2, n, .]`), reset `[n, T]` and reset_state as there. Returns the
        layers `[L, 2, n, T, P]` (zeros past a row's length) and the final states."""
        n_rows, n_steps = ids.shape[1:]
        embeddings = f32(embeddings)
        if embeddings.ndim != 2 or embeddings.shape[1] != self.proj:
            raise ValueError(f"embeddings must be [words, {self.proj}], got {list(embeddings.shape)}")
        ids = np.ascontiguousarray(ids, np.int32)
        if ids.size and (ids.min() < 0 or ids.max() >= len(embeddings)):
            raise ValueError(f"word ids must index the {len(embeddings)} rows of embeddings")
        lengths = np.ascontiguousarray(np.minimum(lengths, n_steps), np.int32)
        reset = None if reset is None else np.ascontiguousarray(reset, np.uint8)
        if reset_state is None:
            reset_state = [LSTMState(np.zeros((2, 1, self.dim)), np.zeros((2, 1, self.proj)))] * self.n_layers
        reset_c = f32(np.stack([np.broadcast_to(s.c, (2, 1, self.dim))[:, 0] for s in reset_state]))
        reset_h = f32(np.stack([np.broadcast_to(s.h, (2, 1, self.proj))[:, 0] for s in reset_state]))
        c = np.array(np.stack([s.c for s in state]), np.float32, order="C")  # Copies: updated in place.
        h = np.array(np.stack([s.h for s in state]), np.float32, order="C")
        out = np.zeros((self.n_layers, 2, n_rows, n_steps, self.proj), np.float32)
        args = _Args(
            n_rows, n_steps, len(embeddings), self.n_threads, pointer(embeddings, F32), pointer(ids, I32),
            pointer(lengths, I32), pointer(reset, ctypes.POINTER(ctypes.c_uint8)),
            *(pointer(a, F32) for a in (reset_c, reset_h, c, h, out)),
        )
        with self._lock:
            needed = self._library.elmo_lstm_table_floats(len(embeddings), self.dim)
            if self._table.size < needed:
                self._table = np.empty(int(needed * 1.25), np.float32)
            args.table = pointer(self._table, F32)
            self._library.elmo_lstm_stack(self._model, ctypes.byref(args))
        return out, [LSTMState(c[i], h[i]) for i in range(self.n_layers)]
