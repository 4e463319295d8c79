"""The char CNN token encoder on CPUs (inference): what `CharCNNEncoder` computes for float32 biLMs,
to float32 rounding, in one call of char_cnn.cc for words of any length."""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Mapping

import numpy as np

from elmo_jax.inference.cpu_kernels.arrays import F32, I32, cpu_threads, f32, packed_model, pointer
from elmo_jax.inference.cpu_kernels.build import load_library
from elmo_jax.data.chars import ID_SHIFT, PAD_CHAR

ACTIVATIONS = ("relu", "tanh")
_SIZES = ("n_widths", "embed_dim", "n_highway", "out_dim", "n_char_ids", "pad_id", "relu")
_WEIGHTS = ("char_embed", "w_cnn", "b_cnn", "w_highway", "b_highway", "w_proj", "b_proj")


class _ModelArgs(ctypes.Structure):
    """char_cnn.cc's `CharCnnModelArgs`."""

    _fields_ = [
        *((name, ctypes.c_int32) for name in _SIZES),
        ("widths", I32),
        ("channels", I32),
        *((name, F32) for name in _WEIGHTS),
    ]


class _Args(ctypes.Structure):
    """char_cnn.cc's `CharCnnArgs`."""

    _fields_ = [
        *((name, ctypes.c_int32) for name in ("words", "max_chars", "n_threads")),
        ("char_ids", I32),
        ("out", F32),
    ]


class CpuCharCnn:
    """The char CNN of a float32 biLM with a token projection, ready for `encode`; KernelUnavailable
    when the kernels cannot be built (`load_library`)."""

    def __init__(self, model: Any, params: Mapping, n_threads: int | None = None):
        cnn = model.char_cnn
        if cnn["activation"] not in ACTIVATIONS:
            raise ValueError(f"model.char_cnn.activation must be one of {ACTIVATIONS}, got {cnn['activation']!r}")
        if not cnn["projection"]:
            raise ValueError("the CPU char CNN needs a token projection (model.char_cnn.projection=True)")
        library = load_library()
        library.elmo_char_cnn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Args)]
        self._library = library
        self._lock = threading.Lock()  # One call at a time: each uses every core.
        self.n_threads = n_threads or cpu_threads()
        self.out_dim = model.width
        self.widest_filter = max(width for width, _ in cnn["filters"])
        encoder = params["encoder"]
        highway = encoder.get("highway", {})
        n_highway = cnn["n_highway"]

        def side_by_side(carry: str, transform: str) -> np.ndarray:  # [n_highway, ..., 2 F]
            layers = [np.concatenate([highway[f"{carry}_{k}"], highway[f"{transform}_{k}"]], axis=-1)
                      for k in range(n_highway)]
            return f32(np.stack(layers) if layers else np.zeros(0))

        char_embed = np.array(encoder["char_embed"], np.float32)
        self.n_characters = len(char_embed)  # bilm-tf's 262, or a character vocabulary's (data/char_vocab.py).
        char_embed[0] = 0.0  # "No token": the model fixes this row at zero.
        weights = {
            "char_embed": char_embed,
            "w_cnn": f32(np.concatenate([np.ravel(encoder[f"W_cnn_{i}"]) for i in range(len(cnn["filters"]))])),
            "b_cnn": f32(np.concatenate([encoder[f"b_cnn_{i}"] for i in range(len(cnn["filters"]))])),
            "w_highway": side_by_side("W_carry", "W_transform"),
            "b_highway": side_by_side("b_carry", "b_transform"),
            "w_proj": f32(encoder["W_proj"]),
            "b_proj": f32(encoder["b_proj"]),
        }
        widths = np.array([width for width, _ in cnn["filters"]], np.int32)
        channels = np.array([channels for _, channels in cnn["filters"]], np.int32)
        args = _ModelArgs(
            len(widths), cnn["embed_dim"], n_highway, self.out_dim, self.n_characters, PAD_CHAR + ID_SHIFT,
            int(cnn["activation"] == "relu"), pointer(widths, I32), pointer(channels, I32),
            *(pointer(weights[name], F32) for name in _WEIGHTS),
        )
        self._model = packed_model(self, library, "char_cnn", args)

    def encode(self, char_ids: np.ndarray) -> np.ndarray:
        """char_ids `[N, C]` (+1 shifted, as `words_to_char_ids`; C >= the widest filter) -> token
        embeddings `[N, P]` float32."""
        char_ids = np.ascontiguousarray(char_ids, np.int32)
        n_words, n_chars = char_ids.shape
        if n_chars < self.widest_filter:
            raise ValueError(
                f"words of {n_chars} characters are narrower than the widest filter ({self.widest_filter})"
            )
        if char_ids.size and (char_ids.min() < 0 or char_ids.max() >= self.n_characters):
            raise ValueError(f"character ids must lie in [0, {self.n_characters})")
        out = np.empty((n_words, self.out_dim), np.float32)
        if n_words:
            args = _Args(n_words, n_chars, self.n_threads, pointer(char_ids, I32), pointer(out, F32))
            with self._lock:
                self._library.elmo_char_cnn(self._model, ctypes.byref(args))
        return out
