"""The config section `model`: the biLM's own keys, with the sections its parts declare.

Each registered token encoder and contextualizer declares its section in its class
(`model.char_cnn`, `model.lstm`, ...); the softmax declares `model.softmax`. `section()` puts them
together, so the names `model.token_encoder` and `model.contextualizer` allow are the registries'.
"""

from __future__ import annotations

from typing import Any

from elmo_jax.model import softmax
from elmo_jax.model.conv_pool import CONV_KERNELS
from elmo_jax.model.contextualizer_registry import CONTEXTUALIZERS
from elmo_jax.model.precision import DTYPES
from elmo_jax.model.token_encoder_registry import IMPORTED_ENCODERS, TOKEN_ENCODERS
from elmo_jax.sections import Key, Section
from elmo_jax.sections.checks import BOOLEAN, dropout_rate, integer, number, one_of

# The parts a config names when it names none: bilm-tf's (BiLM's field defaults too).
DEFAULT_TOKEN_ENCODER = "char_cnn"
DEFAULT_CONTEXTUALIZER = "lstm"

_WIDTH = Key(512, integer(1),
             "P: the token embeddings' size, each layer's output size per direction and the softmax's input size "
             "(bilm-tf's lstm.projection_dim).")
# The keys after the contextualizers' sections, in the order docs/config.md lists them.
_SHARED = {
    "init_range": Key(0.0, number(0.0),
                      "> 0: every weight matrix and embedding from U(-init_range, init_range) (Kim et al. 2016, "
                      "Zaremba et al. 2014: 0.05); 0: bilm-tf's initializer of each (see docs/).", how_computed=True),
    "dropout": Key(0.1, dropout_rate(), "Dropout on each layer's input after the first and on the softmax input.",
                   how_computed=True),
    "token_dropout": Key(-1.0, dropout_rate(-1.0, "= model.dropout"),
                         "Dropout on the token embeddings, the first layer's input (-1 = model.dropout; Kim et "
                         "al. 2016 leave it out: 0).", off=-1.0, how_computed=True),
    "dtype": Key("float32", one_of(*DTYPES), "Compute dtype (parameters stay float32).", how_computed=True),
    "remat": Key(False, BOOLEAN,
                 "Recompute each contextual layer's forward pass in the backward pass instead of keeping its "
                 "activations (an LSTM layer, a gated-CNN layer, a Transformer block): less memory on long "
                 "windows and large batches, about a third more compute.", how_computed=True),
    "conv_block": Key(0, integer(-1),
                      "Tokens per block of the char convolutions, forward and reverse (0 = automatic: 16 on CPU, "
                      "whole batch on GPU/TPU; -1 = whole batch). See model/conv_pool.py.", how_computed=True),
    "conv_kernel": Key("auto", one_of(*CONV_KERNELS),
                       "The char convolutions' forward pass: 'xla' | 'pallas' (model/pallas_conv_pool.py: the max "
                       "over positions in the kernel; Triton on GPU, the slow interpreter elsewhere) | 'auto': "
                       "pallas on GPU, where it is measured faster, else xla (also on GPU in a JAX without "
                       "Pallas's Triton backend, saying so once). The reverse pass follows conv_block.",
                       how_computed=True),
    "distinct_fraction": Key(0.0, number(0.0, 1.0),
                             "> 0: the char CNN encodes each distinct word of a batch once when at most this "
                             "fraction of its tokens are distinct, else every token (configs/ptb.py: 0.5).",
                             how_computed=True),
}


def _named(parts: dict[str, Any]) -> str:
    """"'a' (its summary) | 'b' (...)": each registered part's name and summary."""
    return " | ".join(f"'{name}' ({cls.summary})" for name, cls in parts.items())


def section() -> Section:
    """`model`: token_encoder, width, the token encoders' sections, contextualizer, the
    contextualizers' sections, the shared keys, softmax; from the registries as they are now."""
    keys: dict[str, Key | Section] = {
        "token_encoder": Key(DEFAULT_TOKEN_ENCODER, one_of(*TOKEN_ENCODERS, *IMPORTED_ENCODERS),
                             f"What each token's embedding is made from: {_named(TOKEN_ENCODERS)}; "
                             f"imported: {_named(IMPORTED_ENCODERS)}."),
        "width": _WIDTH,
    }
    encoders = {**TOKEN_ENCODERS, **IMPORTED_ENCODERS}
    keys |= {name: cls.section for name, cls in encoders.items() if cls.section is not None}
    keys["contextualizer"] = Key(
        DEFAULT_CONTEXTUALIZER, one_of(*CONTEXTUALIZERS),
        "What reads the token embeddings in context, one stack per direction, each seeing only its side "
        f"(docs/contextualizers.md): {_named(CONTEXTUALIZERS)}; each is a section of its own.")
    keys |= {name: cls.section for name, cls in CONTEXTUALIZERS.items()}
    return Section("The biLM: token encoder, contextualizer, softmax.", {**keys, **_SHARED, "softmax": softmax.SECTION})
