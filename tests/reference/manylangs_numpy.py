"""An independent NumPy (float64) reference of ELMoForManyLangs' (HIT-SCIR) biLM, of a model directory read by
elmo_jax/interop/manylangs.py (`read_model`).

`manylangs_layers` computes what `Embedder.sents2elmo(sentences, output_layer=-2)` returns when each sentence
starts from a zero LSTM state (ELMoForManyLangs' first batch of a freshly loaded Embedder; later batches start
from the states the previous batch left, its encoder being stateful: modules/elmo.py:20,
modules/encoder_base.py:117-278), and `select_output_layer` the other output_layers. Written from
ELMoForManyLangs' code at b3de5f1 (file:line references are into its elmoformanylangs/), not from
elmo-jax's biLM, one sentence at a time without padding; it matches ELMoForManyLangs to 1e-5 on
tests/interop/manylangs/ (made by tools/make_manylangs_fixtures.py with ELMoForManyLangs itself).
"""

from __future__ import annotations

import numpy as np

from elmo_jax.interop.manylangs import ManyLangsModel

BOUNDARIES = ("<bos>", "<eos>")  # sentence boundary tokens, elmo.py:32,39
ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0), "tanh": np.tanh}  # token_embedder.py:104-109


def sentence_tokens(sentence: list[str], max_chars: int) -> list[str]:
    """'<bos>', the words, '<eos>' (elmo.py:19-42): a word longer than max_chars - 2 characters (code points)
    is cut to its first max_chars - 2, for its word id as for its characters."""
    return ["<bos>", *(w[:max_chars - 2] if len(w) + 2 > max_chars else w for w in sentence), "<eos>"]


def word_ids(words: dict[str, int], tokens: list[str]) -> np.ndarray:
    """[n_tokens] word.dic ids, <oov>'s for the others ('<bos>'/'<eos>' too when absent), frontend.py:39-45."""
    oov = words["<oov>"]
    return np.array([words.get(t, oov) for t in tokens], np.int64)


def char_ids(chars: dict[str, int], tokens: list[str], max_chars: int) -> np.ndarray:
    """[n_tokens, max_chars] char.dic ids (frontend.py:49-75): '<eow>''s id, then the characters (<oov>'s
    for unknown ones) or, for a token '<bos>'/'<eos>' (a word spelled so too), the entry of that name, then
    '<bow>''s id, then '<pad>''s. The marks are swapped in ELMoForManyLangs (frontend.py:51 reads
    `bow_id, eow_id = char2id['<eow>'], char2id['<bow>']`), which its models were trained with."""
    ids = np.full((len(tokens), max_chars), chars["<pad>"], np.int64)
    for i, token in enumerate(tokens):
        inner = [chars[token]] if token in BOUNDARIES else [chars.get(c, chars["<oov>"]) for c in token]
        ids[i, :len(inner) + 2] = [chars["<eow>"], *inner, chars["<bow>"]]
    return ids


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # = 1 / (1 + e^-x), without overflow


def char_cnn(model: ManyLangsModel, ids: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """[n_tokens, max_chars] char ids -> [n_tokens, n_filters]: each Conv1d (valid, over every position,
    pads included) + bias, its max over positions, then the activation (token_embedder.py:96-118), then the
    highway layers, y = g * x + (1 - g) * relu(A x + a) with g = sigmoid(B x + b), relu whatever the
    configuration's activation (token_embedder.py:83, highway.py:47-59)."""
    w = {k: v.astype(dtype) for k, v in model.token_embedder.items()}
    embedded = w["char_emb_layer.embedding.weight"][ids]  # [n_tokens, max_chars, char_dim]
    activation = ACTIVATIONS[model.config.activation]
    pooled = []
    for i, (width, _) in enumerate(model.config.filters):
        windows = np.lib.stride_tricks.sliding_window_view(embedded, width, axis=1)  # [n, L - w + 1, dim, w]
        convolved = np.einsum("tldw,fdw->tlf", windows, w[f"convolutions.{i}.weight"]) + w[f"convolutions.{i}.bias"]
        pooled.append(activation(convolved.max(axis=1)))
    x = np.concatenate(pooled, axis=-1)
    n = model.config.n_filters
    for i in range(model.config.n_highway):
        projected = x @ w[f"highways._layers.{i}.weight"].T + w[f"highways._layers.{i}.bias"]
        gate = _sigmoid(projected[:, n:])
        x = gate * x + (1 - gate) * np.maximum(projected[:, :n], 0)
    return x


def token_embeddings(model: ManyLangsModel, tokens: list[str], dtype: type = np.float64) -> np.ndarray:
    """[n_tokens, projection_dim]: Linear(concat(word embedding, char CNN)), token_embedder.py:88-125 (the
    word embedding first; a projection even where the widths agree)."""
    parts = []
    if model.words is not None:
        parts.append(model.token_embedder["word_emb_layer.embedding.weight"].astype(dtype)[word_ids(model.words,
                                                                                                    tokens)])
    if model.chars is not None:
        parts.append(char_cnn(model, char_ids(model.chars, tokens, model.config.max_chars), dtype))
    weight, bias = (model.token_embedder[k].astype(dtype) for k in ("projection.weight", "projection.bias"))
    return np.concatenate(parts, axis=-1) @ weight.T + bias


def lstm_direction(model: ManyLangsModel, prefix: str, inputs: np.ndarray, reverse: bool,
                   dtype: type = np.float64) -> np.ndarray:
    """[n_tokens, projection_dim] -> [n_tokens, projection_dim]: one LstmCellWithProjection from a zero state
    (lstm_cell_with_projection.py:90-231): gates i, f, g, o in that order of the 4 * cell rows, from
    input_linearity (no bias) + state_linearity (its bias, no forget bias added), c = i g + f c', clipped to
    +-cell_clip, h = state_projection(o tanh(c)) clipped to +-proj_clip; backward runs from the last token."""
    w_in, w_state, b, w_proj = (model.encoder[prefix + k].astype(dtype) for k in (
        "input_linearity.weight", "state_linearity.weight", "state_linearity.bias", "state_projection.weight"))
    c_dim, clips = model.config.cell_dim, (model.config.cell_clip, model.config.proj_clip)
    projected = inputs @ w_in.T  # [n_tokens, 4 * cell]
    h, c = np.zeros(w_proj.shape[0], dtype), np.zeros(c_dim, dtype)
    out = np.zeros((len(inputs), w_proj.shape[0]), dtype)
    for t in (reversed(range(len(inputs))) if reverse else range(len(inputs))):
        gates = projected[t] + w_state @ h + b
        i, f, o = (_sigmoid(gates[k * c_dim:(k + 1) * c_dim]) for k in (0, 1, 3))
        c = i * np.tanh(gates[2 * c_dim:3 * c_dim]) + f * c
        c = np.clip(c, -clips[0], clips[0]) if clips[0] else c
        h = w_proj @ (o * np.tanh(c))
        out[t] = h = np.clip(h, -clips[1], clips[1]) if clips[1] else h
    return out


def bilm_layers(model: ManyLangsModel, tokens: list[str], dtype: type = np.float64) -> np.ndarray:
    """[n_layers + 1, n_tokens, 2 * projection_dim] of '<bos>' words '<eos>': layer 0 the token embedding
    twice (frontend.py:193-197); layer l the forward and backward outputs concatenated, each direction fed its
    own previous layer's output and adding it to its own from the second layer on (modules/elmo.py:148-176)."""
    embedded = token_embeddings(model, tokens, dtype)
    layers = [np.concatenate([embedded, embedded], axis=-1)]
    forward = backward = embedded
    for layer in range(model.config.n_layers):
        new_forward = lstm_direction(model, f"forward_layer_{layer}.", forward, False, dtype)
        new_backward = lstm_direction(model, f"backward_layer_{layer}.", backward, True, dtype)
        if layer > 0:
            new_forward, new_backward = new_forward + forward, new_backward + backward
        forward, backward = new_forward, new_backward
        layers.append(np.concatenate([forward, backward], axis=-1))
    return np.stack(layers)


def manylangs_layers(model: ManyLangsModel, sentences: list[list[str]], dtype: type = np.float64) -> list[np.ndarray]:
    """Each sentence's [n_layers + 1, n_words, 2 * projection_dim]: sents2elmo's output_layer=-2 from a
    zero state, '<bos>' and '<eos>' dropped (elmo.py:215); an empty sentence gives [n_layers + 1, 0, dim]."""
    return [bilm_layers(model, sentence_tokens(s, model.config.max_chars), dtype)[:, 1:-1] for s in sentences]


def select_output_layer(layers: np.ndarray, output_layer: int) -> np.ndarray:
    """sents2elmo's `output_layer` of one sentence's [n_layers + 1, n_words, dim] (elmo.py:220-225): -1 the
    layers' average [n_words, dim], -2 all of them, any other int that layer (NumPy's indexing, as there).
    An empty sentence's average is [0, dim] here (ELMoForManyLangs' np.average raises ZeroDivisionError)."""
    if output_layer == -1:
        return layers.mean(axis=0)
    if output_layer == -2:
        return layers
    if not -len(layers) <= output_layer < len(layers):
        raise ValueError(f"output_layer {output_layer}: the model has layers 0..{len(layers) - 1} "
                         "(-1 their average, -2 all)")
    return layers[output_layer]
