"""An ELMoForManyLangs model (interop/manylangs.py's `ManyLangsModel`) as elmo-jax's biLM: its
fields, its params and each token's input ids (`pretrained.bilm_from_manylangs` assembles them).

The token encoder is model/manylangs_encoder.py's (`model.token_encoder='manylangs'`), the LSTMs the
project's (`BiLSTMLayer`), so the conversion maps ELMoForManyLangs' conventions onto them:
- Conv1d weights `[n, char_dim, width]` -> `W_cnn_i` `[width, char_dim, n]`;
- highway Linear(F, 2F), rows [transform A; gate B]: `y = g x + (1 - g) relu(A x + a)`, g = sigmoid(B x + b),
  is bilm-tf's `t relu(x W_transform + b_transform) + (1 - t) x`, t = sigmoid(x W_carry + b_carry), with
  t = 1 - g: W_carry = -B^T, b_carry = -b, W_transform = A^T, b_transform = a;
- char.dic id k -> char table row k + 1 (row 0: no token), a token's word.dic id k -> k + 1 in its
  input row (the word table as it is: the encoder subtracts the 1); the projection `[P, word_dim + F]` transposed;
- LSTM gates i, f, g, o (rows of input_linearity / state_linearity) -> the project's i, j, f, o, and the
  forget gate's bias less `FORGET_BIAS` (the project's cell adds it; ELMoForManyLangs' adds none);
  input_linearity^T -> W_input, state_linearity^T -> W_hidden (its bias -> B), state_projection^T -> W_P.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from elmo_jax.data.manylangs_inputs import ManyLangsInputs
from elmo_jax.interop.manylangs import ManyLangsError, ManyLangsModel
from elmo_jax.model.lstm import has_projection
from elmo_jax.model.lstm_recurrence import FORGET_BIAS

# ELMoForManyLangs' gate blocks in the project's order i, j (= its g), f, o.
_GATE_ORDER = (0, 2, 1, 3)


def check_convertible(model: ManyLangsModel) -> None:
    """ManyLangsError where the project's LSTM cannot hold the model: it projects only when
    projection_dim != dim (ELMoForManyLangs always does)."""
    c = model.config
    if not has_projection(c.cell_dim, c.projection_dim):
        raise ManyLangsError(
            f"{model.config_path}: projection_dim {c.projection_dim} == dim {c.cell_dim}: elmo-jax's LSTM has no "
            "projection then, ELMoForManyLangs' always one"
        )


def bilm_fields(model: ManyLangsModel) -> dict[str, Any]:
    """The `BiLM` keyword arguments of the model (float32, no dropout, its LSTM stack)."""
    check_convertible(model)
    c = model.config
    n_chars = len(model.chars or ()) + 1  # + the "no token" row 0.
    n_words = len(model.words or ()) or 1
    char_cnn = {
        "embed_dim": c.char_dim or 1, "filters": c.filters or ((1, 1),), "activation": c.activation,
        "n_highway": c.n_highway, "projection": True,  # The token embedding is projected (to P).
    }
    return {
        "vocab_size": 1,  # No softmax is used.
        "token_encoder": "manylangs",
        "char_cnn": char_cnn,
        "width": c.projection_dim,
        "dropout": 0.0,
        "contextualizer": "lstm",
        "contextualizer_fields": {
            "dim": c.cell_dim, "n_layers": c.n_layers, "cell_clip": c.cell_clip or None,
            "proj_clip": c.proj_clip or None, "use_skip_connections": True,
        },
        "token_encoder_fields": {
            "n_words": n_words, "word_dim": c.word_dim, "chars": c.char_dim > 0, "n_characters": n_chars,
        },
        "n_characters": max(n_chars, n_words + 1),  # Every id of a token's row is below it (distinct_rows).
    }


def config_keys(model: ManyLangsModel) -> dict[str, Any]:
    """The dotted config keys of the model's shape and token encoder (`config.init.manylangs`,
    training/init_from.py): the config of a run continuing it builds `bilm_fields`' biLM."""
    fields = bilm_fields(model)
    cnn, lstm = fields["char_cnn"], fields["contextualizer_fields"]
    return {
        "model.token_encoder": fields["token_encoder"], "model.width": fields["width"],
        **{f"model.char_cnn.{k}": [list(f) for f in v] if k == "filters" else v for k, v in cnn.items()},
        "model.contextualizer": fields["contextualizer"],
        **{f"model.lstm.{k}": 0.0 if k.endswith("clip") and v is None else v for k, v in lstm.items()},
        **{f"model.manylangs.{k}": v for k, v in fields["token_encoder_fields"].items()},
        "data.max_chars_per_token": model.config.max_chars,
    }


def manylangs_inputs(model: ManyLangsModel) -> ManyLangsInputs:
    """The model's char.dic, word.dic and max_characters_per_token as a run's token inputs."""
    return ManyLangsInputs(model.chars, model.words, model.config.max_chars)


def _gates(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """ELMoForManyLangs' 4 gate blocks along `axis` in the project's order."""
    return np.concatenate([np.split(x, 4, axis=axis)[k] for k in _GATE_ORDER], axis=axis)


def manylangs_params(model: ManyLangsModel) -> dict:
    """The biLM's params (no softmax) from the model's two state dicts, float32."""
    check_convertible(model)
    c, te = model.config, model.token_embedder
    encoder: dict[str, Any] = {}
    if c.word_dim > 0:
        encoder["word_embed"] = te["word_emb_layer.embedding.weight"]
    if c.char_dim > 0:
        table = te["char_emb_layer.embedding.weight"]
        cnn: dict[str, Any] = {"char_embed": np.concatenate([np.zeros((1, table.shape[1]), np.float32), table])}
        for i in range(len(c.filters)):
            cnn[f"W_cnn_{i}"] = np.ascontiguousarray(te[f"convolutions.{i}.weight"].transpose(2, 1, 0))
            cnn[f"b_cnn_{i}"] = te[f"convolutions.{i}.bias"]
        highway: dict[str, np.ndarray] = {}
        n = c.n_filters
        for k in range(c.n_highway):
            w, b = te[f"highways._layers.{k}.weight"], te[f"highways._layers.{k}.bias"]
            highway[f"W_carry_{k}"], highway[f"b_carry_{k}"] = np.ascontiguousarray(-w[n:].T), -b[n:]
            highway[f"W_transform_{k}"], highway[f"b_transform_{k}"] = np.ascontiguousarray(w[:n].T), b[:n]
        if highway:
            cnn["highway"] = highway
        encoder["char_cnn"] = cnn
    encoder["W_proj"] = np.ascontiguousarray(te["projection.weight"].T)
    encoder["b_proj"] = te["projection.bias"]
    params: dict[str, Any] = {"encoder": encoder}
    forget = slice(2 * c.cell_dim, 3 * c.cell_dim)  # The project's f block.
    for layer in range(c.n_layers):
        directions = [{name: model.encoder[f"{d}_layer_{layer}.{name}"] for name in (
            "input_linearity.weight", "state_linearity.weight", "state_linearity.bias", "state_projection.weight")}
            for d in ("forward", "backward")]
        biases = np.stack([_gates(d["state_linearity.bias"]) for d in directions])
        biases[:, forget] -= FORGET_BIAS
        params[f"lstm_{layer}"] = {
            "W_input": np.stack([_gates(d["input_linearity.weight"]).T for d in directions]),
            "W_hidden": np.stack([_gates(d["state_linearity.weight"]).T for d in directions]),
            "B": biases.astype(np.float32),
            "W_P": np.stack([d["state_projection.weight"].T for d in directions]),
        }
    return params

