"""Read and write ELMo weights in the bilm-tf format (`options.json` + hdf5), also read by AllenNLP.

The keys and datasets are listed in docs/embeddings.md. LSTM projection: bilm-tf's cells project
only when projection_dim < dim; with projection_dim == dim elmo-jax's `BiLSTMLayer` has no `W_P`
either and the file no `W_P_0` (bilm-tf loads it, AllenNLP cannot). With projection_dim > dim
bilm-tf builds no usable biLM; elmo-jax keeps a `W_P`, stored as `W_P_0` as AllenNLP reads it.

elmo-jax shifts char ids by +1 (0 = no token): its `char_embed` is a zero row 0 and the file's 261.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Mapping, Sequence

import h5py
import ml_collections
import numpy as np

from elmo_jax.config import schema
from elmo_jax.config.validation import validate
from elmo_jax.config.overrides import apply_overrides, get_key
from elmo_jax.workdir.saved_config import saved_config
from elmo_jax.runtime.atomic_write import check_not_inputs, json_writer, write_atomic, write_files_atomic
from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.interop.export_sets import (
    EXPORT_ID, WeightFileError, checkpoint_export_id, open_hdf5, params_digest, read_finite, write_hdf5,
)
from elmo_jax.interop.manylangs import read_model
from elmo_jax.interop.manylangs_export import bilm_tf_model
from elmo_jax.interop.manylangs_params import config_keys, manylangs_inputs, manylangs_params
from elmo_jax.interop.softmax_hdf5 import softmax_writer
from elmo_jax.model.char_cnn import CharCNNTokens
from elmo_jax.model.contextualizer_registry import contextualizer_class
from elmo_jax.model.lstm import has_projection
from elmo_jax.model.token_encoder_registry import token_encoder_class

_LSTM_REQUIRED = ("dim", "projection_dim", "use_skip_connections")
_LSTM_OPTIONAL = ("n_layers", "cell_clip", "proj_clip")
_CNN_REQUIRED = ("embedding", "filters", "activation", "n_characters", "max_characters_per_token")
_CNN_OPTIONAL = ("n_highway",)
# Written by bilm-tf's training script; they do not change the representations.
_TRAINING_KEYS = (
    "bidirectional", "dropout", "all_clip_norm_val", "n_epochs", "n_train_tokens", "batch_size",
    "n_tokens_vocab", "unroll_steps", "n_negative_samples_batch", "learning_rate",
    "share_embedding_softmax", "sample_softmax",
)
_ACTIVATIONS = ("relu", "tanh")
_HIGHWAY = ("W_carry", "b_carry", "W_transform", "b_transform")


class OptionsError(ValueError):
    """An options.json that elmo-jax cannot use."""


def _check_keys(section: Any, required: Sequence[str], optional: Sequence[str], prefix: str, path: str) -> None:
    if not isinstance(section, dict):
        raise OptionsError(f"{path}: '{prefix.rstrip('.') or 'options'}' must be a JSON object")
    for key in section:
        if key not in required and key not in optional:
            raise OptionsError(f"{path}: unknown key '{prefix}{key}'")
    for key in required:
        if key not in section:
            raise OptionsError(f"{path}: missing key '{prefix}{key}'")


def _int(value: Any, key: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OptionsError(f"{path}: '{key}' must be a positive integer, got {value!r}")
    return value


def _clip(value: Any, key: str, path: str) -> float:
    """bilm-tf: null (or absent) = no clipping, which elmo-jax spells 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise OptionsError(f"{path}: '{key}' must be a positive number or null, got {value!r}")
    return float(value)


# The keys an options.json decides (`load_options`): the biLM's shape. Everything else of a config
# that runs it (evaluation's batches, continued training's optimizer) is the run's own.
SHAPE_KEYS = (
    "model.token_encoder", "model.contextualizer", "model.width",
    "model.char_cnn.embed_dim", "model.char_cnn.filters", "model.char_cnn.activation", "model.char_cnn.n_highway",
    "model.char_cnn.projection",
    "model.lstm.dim", "model.lstm.n_layers", "model.lstm.cell_clip", "model.lstm.proj_clip",
    "model.lstm.use_skip_connections",
    "data.max_chars_per_token",
)


def options_shape(path: str) -> dict[str, Any]:
    """{dotted key: value} of the `SHAPE_KEYS` that the options.json at `path` decides."""
    described = load_options(path)
    return {key: get_key(described, key) for key in SHAPE_KEYS}


def load_options(path: str) -> ml_collections.ConfigDict:
    """A bilm-tf/AllenNLP `options.json` as a complete, validated elmo-jax config (float32, no
    dropout, the schema's defaults beside what the file describes). OptionsError names a bad key."""
    if not os.path.exists(path):
        raise OptionsError(f"{path}: options file not found")
    try:
        with open(path, encoding="utf-8") as f:
            options = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise OptionsError(f"{path}: not valid JSON ({e})") from None
    if isinstance(options, dict) and "char_cnn" not in options:
        raise OptionsError(
            f"{path}: missing key 'char_cnn' (bilm-tf/AllenNLP files hold char-CNN biLMs; embed a word-input "
            "biLM from its workdir)"
        )
    _check_keys(options, ("lstm", "char_cnn"), (*_TRAINING_KEYS, EXPORT_ID), "", path)
    lstm, cnn = options["lstm"], options["char_cnn"]
    _check_keys(lstm, _LSTM_REQUIRED, _LSTM_OPTIONAL, "lstm.", path)
    _check_keys(cnn, _CNN_REQUIRED, _CNN_OPTIONAL, "char_cnn.", path)
    _check_keys(cnn["embedding"], ("dim",), (), "char_cnn.embedding.", path)

    max_chars = _int(cnn["max_characters_per_token"], "char_cnn.max_characters_per_token", path)
    filters = cnn["filters"]
    if not isinstance(filters, list) or not filters:
        raise OptionsError(f"{path}: 'char_cnn.filters' must be a non-empty list of [width, channels]")
    for i, pair in enumerate(filters):
        if not isinstance(pair, list) or len(pair) != 2:
            raise OptionsError(f"{path}: 'char_cnn.filters[{i}]' must be [width, channels], got {pair!r}")
        width = _int(pair[0], f"char_cnn.filters[{i}][0]", path)
        _int(pair[1], f"char_cnn.filters[{i}][1]", path)
        if width > max_chars:
            raise OptionsError(f"{path}: 'char_cnn.filters[{i}]' is wider than max_characters_per_token={max_chars}")
    if cnn["activation"] not in _ACTIVATIONS:
        raise OptionsError(f"{path}: 'char_cnn.activation' must be one of {_ACTIVATIONS}, got {cnn['activation']!r}")
    if cnn["n_characters"] not in (N_CHARACTERS - 1, N_CHARACTERS):
        raise OptionsError(
            f"{path}: 'char_cnn.n_characters' must be {N_CHARACTERS - 1} or {N_CHARACTERS}, got {cnn['n_characters']!r}"
        )
    n_highway = cnn.get("n_highway") or 0
    if n_highway:
        _int(n_highway, "char_cnn.n_highway", path)
    if not isinstance(lstm["use_skip_connections"], bool):
        raise OptionsError(f"{path}: 'lstm.use_skip_connections' must be true or false")

    config = schema.with_defaults({
        "model": {
            "token_encoder": CharCNNTokens.config_name,
            "width": _int(lstm["projection_dim"], "lstm.projection_dim", path),
            "char_cnn": {
                "embed_dim": _int(cnn["embedding"]["dim"], "char_cnn.embedding.dim", path),
                "filters": [[pair[0], pair[1]] for pair in filters],
                "activation": cnn["activation"],
                "n_highway": n_highway,
                "projection": True,  # bilm-tf always projects the char CNN's output (CNN_proj).
            },
            "lstm": {
                "dim": _int(lstm["dim"], "lstm.dim", path),
                "n_layers": _int(lstm.get("n_layers", 1), "lstm.n_layers", path),
                "cell_clip": _clip(lstm.get("cell_clip"), "lstm.cell_clip", path),
                "proj_clip": _clip(lstm.get("proj_clip"), "lstm.proj_clip", path),
                "use_skip_connections": lstm["use_skip_connections"],
            },
            "dropout": 0.0,
            "dtype": "float32",
        },
        "data": {"max_chars_per_token": max_chars},
    })
    validate(config)
    return config


def options_dict(config: ml_collections.ConfigDict) -> dict:
    """The bilm-tf `options.json` content of an elmo-jax config (`model` and `data` sections)."""
    model = config.model
    if not contextualizer_class(model.contextualizer).bilm_tf_format:
        raise OptionsError(
            "the bilm-tf/AllenNLP format holds LSTM biLMs only; this one's contextualizer is "
            f"model.contextualizer={model.contextualizer!r}"
        )
    if not token_encoder_class(model.token_encoder).bilm_tf_format:
        raise OptionsError(
            f"only char-CNN biLMs have a bilm-tf/AllenNLP format (model.token_encoder={model.token_encoder!r})"
        )
    if config.data.char_vocab_file or config.data.char_vocab_min_count:
        raise OptionsError(
            "bilm-tf/AllenNLP files spell words as UTF-8 bytes; this biLM reads a character vocabulary "
            f"(data.char_vocab_file={config.data.char_vocab_file!r}, data.char_vocab_min_count="
            f"{config.data.char_vocab_min_count}): embed, probe and evaluate it with elmo-jax"
        )
    if not model.char_cnn.projection:
        raise OptionsError(
            "bilm-tf/AllenNLP models always project the char CNN's output (model.char_cnn.projection=False)"
        )
    return {
        "lstm": {
            "dim": model.lstm.dim,
            "projection_dim": model.width,
            "n_layers": model.lstm.n_layers,
            "cell_clip": schema.option(config, "model.lstm.cell_clip"),
            "proj_clip": schema.option(config, "model.lstm.proj_clip"),
            "use_skip_connections": model.lstm.use_skip_connections,
        },
        "char_cnn": {
            "activation": model.char_cnn.activation,
            "embedding": {"dim": model.char_cnn.embed_dim},
            "filters": [[int(w), int(n)] for w, n in model.char_cnn.filters],
            "max_characters_per_token": config.data.max_chars_per_token,
            "n_characters": N_CHARACTERS,
            "n_highway": model.char_cnn.n_highway,
        },
    }


def save_options(config: ml_collections.ConfigDict, path: str) -> None:
    """Writes the `options.json` of an elmo-jax config."""
    write_atomic(path, options_writer(config, path))


def options_writer(config: ml_collections.ConfigDict, path: str, export_id: str | None = None) -> Callable[[str], None]:
    """The function writing `config`'s options.json (with `export_id` when given), after warning
    of what bilm-tf or AllenNLP cannot load."""
    options = options_dict(config)
    if export_id:
        options[EXPORT_ID] = export_id
    lstm, n_filters = options["lstm"], sum(n for _, n in options["char_cnn"]["filters"])
    if not lstm["use_skip_connections"]:
        logging.warning("%s: AllenNLP's Elmo only loads biLMs with use_skip_connections=true (bilm-tf loads any)", path)
    if n_filters == lstm["projection_dim"]:
        logging.warning("%s: bilm-tf skips CNN_proj when sum(filters) == projection_dim (AllenNLP applies it)", path)
    if lstm["projection_dim"] == lstm["dim"]:
        logging.warning(
            "%s: no LSTM projection (W_P_0) when projection_dim == dim: bilm-tf loads it, AllenNLP cannot", path
        )
    elif lstm["projection_dim"] > lstm["dim"]:
        logging.warning("%s: bilm-tf builds no biLM with projection_dim > dim (AllenNLP applies W_P_0)", path)
    return json_writer(options, sort_keys=False)


def _encoder_layout(config: ml_collections.ConfigDict) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """(dataset, its path in the params' `encoder`, its shape) of each char CNN dataset after
    `char_embed`, in the file's order; a file's `W_cnn_i` has a leading 1 that the params lack."""
    cnn, p = config.model.char_cnn, config.model.width
    n_filters = sum(n for _, n in cnn.filters)
    layout = []
    for i, (width, channels) in enumerate(cnn.filters):
        layout.append((f"CNN/W_cnn_{i}", (f"W_cnn_{i}",), (1, width, cnn.embed_dim, channels)))
        layout.append((f"CNN/b_cnn_{i}", (f"b_cnn_{i}",), (channels,)))
    for k in range(cnn.n_highway):
        for name in _HIGHWAY:
            shape = (n_filters, n_filters) if name[0] == "W" else (n_filters,)
            layout.append((f"CNN_high_{k}/{name}", ("highway", f"{name}_{k}"), shape))
    return layout + [("CNN_proj/W_proj", ("W_proj",), (n_filters, p)), ("CNN_proj/b_proj", ("b_proj",), (p,))]


def _lstm_layout(config: ml_collections.ConfigDict) -> list[tuple[str, str, int, tuple[str, ...], tuple[int, ...]]]:
    """(dataset, its layer in the params, direction, the leaves it holds, its shape) of each LSTM
    dataset, in the file's order; a file's `W_0` is `W_input` over `W_hidden`, a direction of each."""
    lstm, p = config.model.lstm, config.model.width
    leaves = [("W_0", ("W_input", "W_hidden"), (p + p, 4 * lstm.dim)), ("B", ("B",), (4 * lstm.dim,))]
    if has_projection(lstm.dim, p):
        leaves.append(("W_P_0", ("W_P",), (lstm.dim, p)))
    return [
        (f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{name}", f"lstm_{layer}", d, keys, shape)
        for layer in range(lstm.n_layers) for d in (0, 1) for name, keys, shape in leaves
    ]


def dataset_shapes(config: ml_collections.ConfigDict) -> dict[str, tuple[int, ...]]:
    """Every dataset of the weight file described by `config`, with its shape."""
    shapes = {"char_embed": (N_CHARACTERS - 1, config.model.char_cnn.embed_dim)}
    shapes.update((name, shape) for name, _, shape in _encoder_layout(config))
    shapes.update((name, shape) for name, *_, shape in _lstm_layout(config))
    return shapes


def _param(params: Mapping, *keys: str) -> np.ndarray:
    node: Any = params
    for i, key in enumerate(keys):
        if not isinstance(node, Mapping) or key not in node:
            raise WeightFileError(f"params lack '{'/'.join(keys[: i + 1])}' (do they match the options?)")
        node = node[key]
    return np.asarray(node, dtype=np.float32)


def params_to_datasets(params: Mapping, config: ml_collections.ConfigDict) -> dict[str, np.ndarray]:
    """Flax params (softmax ignored) -> the weight file's datasets."""
    out = {"char_embed": _param(params, "encoder", "char_embed")[1:]}  # Drop the "no token" row.
    for name, path, _ in _encoder_layout(config):
        value = _param(params, "encoder", *path)
        out[name] = value[None] if name.startswith("CNN/W") else value
    lstm = config.model.lstm
    for layer in range(lstm.n_layers):
        if not has_projection(lstm.dim, config.model.width) and "W_P" in params.get(f"lstm_{layer}", {}):
            raise WeightFileError(f"params have 'lstm_{layer}/W_P', but projection_dim == dim means no LSTM projection")
    for name, layer, direction, keys, shape in _lstm_layout(config):
        parts = [_param(params, layer, key) for key in keys]
        for key, part in zip(keys, parts):
            if part.shape != (2, shape[0] // len(keys), *shape[1:]):
                raise WeightFileError(f"params '{layer}/{key}' have shape {part.shape}, not the stacked [2, ...]")
        out[name] = np.concatenate([part[direction] for part in parts])
    return out


def datasets_to_params(data: Mapping[str, np.ndarray], config: ml_collections.ConfigDict) -> dict:
    """The weight file's datasets -> Flax params (no softmax); the inverse of `params_to_datasets`."""
    zero_row = np.zeros((1, data["char_embed"].shape[1]), np.float32)
    encoder: dict[str, Any] = {"char_embed": np.concatenate([zero_row, data["char_embed"]])}
    for name, (*parents, leaf), _ in _encoder_layout(config):
        node = encoder.setdefault(parents[0], {}) if parents else encoder
        node[leaf] = data[name][0] if name.startswith("CNN/W") else data[name]
    lstm: dict[str, dict[str, list[np.ndarray]]] = {}
    for name, layer, _, keys, _ in _lstm_layout(config):
        for key, part in zip(keys, np.split(data[name], len(keys))):
            lstm.setdefault(layer, {}).setdefault(key, []).append(part)
    return {"encoder": encoder, **{layer: {k: np.stack(v) for k, v in ls.items()} for layer, ls in lstm.items()}}


def _dataset_names(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def _mismatch(name: str, shapes: Mapping[str, tuple[int, ...]], model: ml_collections.ConfigDict) -> str:
    """Why dataset `name` is missing from, or unexpected in, a file whose options imply `shapes`."""
    shape = shapes.get(name)
    lstm_projection = name.endswith("/LSTMCell/W_P_0")
    if shape is None and lstm_projection and not has_projection(model.lstm.dim, model.width):
        return f"projection_dim == dim == {model.lstm.dim}: no LSTM projection, as in bilm-tf"
    if shape is None:
        return "options/weights mismatch: check n_layers, filters, n_highway"
    if lstm_projection:
        return f"projection_dim {model.width} != dim {model.lstm.dim}: an LSTM projection of shape {shape}"
    return f"the options imply shape {shape}"


def load_weights(config: ml_collections.ConfigDict, path: str) -> dict:
    """A bilm-tf/AllenNLP hdf5 weight file as elmo-jax Flax params (float32, no softmax), `config`
    the shape its options.json gives (`options_shape`).

    Every dataset must exist with the shape `config` implies and hold finite values, and the file
    nothing else; errors name the dataset. An absent `CNN_proj` (bilm-tf's when sum(filters) ==
    projection_dim) is the identity.
    """
    shapes = dataset_shapes(config)
    with open_hdf5(path, "weight") as f:
        present = _dataset_names(f)
        unexpected = [name for name in present if name not in shapes]
        if unexpected:
            why = _mismatch(unexpected[0], shapes, config.model)
            raise WeightFileError(f"{path}: dataset '{unexpected[0]}' is not described by the options ({why})")
        p, n_filters = config.model.width, sum(n for _, n in config.model.char_cnn.filters)
        data: dict[str, np.ndarray] = {}
        if n_filters == p and "CNN_proj/W_proj" not in present and "CNN_proj/b_proj" not in present:
            data["CNN_proj/W_proj"], data["CNN_proj/b_proj"] = np.eye(p, dtype=np.float32), np.zeros(p, np.float32)
        for name, shape in shapes.items():
            if name in data:
                continue
            if name not in present:
                raise WeightFileError(f"{path}: missing dataset '{name}' ({_mismatch(name, shapes, config.model)})")
            dataset = f[name]
            if dataset.shape != shape:
                raise WeightFileError(f"{path}: dataset '{name}' has shape {dataset.shape}, the options imply {shape}")
            if dataset.dtype.kind != "f":
                raise WeightFileError(f"{path}: dataset '{name}' has dtype {dataset.dtype}, expected float")
            data[name] = read_finite(f, name, path)
    return datasets_to_params(data, config)


def save_weights(params: Mapping, config: ml_collections.ConfigDict, path: str) -> None:
    """Writes Flax params (but the softmax and char row 0) as a weight file: `load_weights`' inverse."""
    write_atomic(path, weights_writer(params, config))


def weights_writer(
    params: Mapping, config: ml_collections.ConfigDict, export_id: str | None = None
) -> Callable[[str], None]:
    """Checks `params` against `config`; the function writing their weight file, with `export_id`."""
    data = params_to_datasets(params, config)
    for name, shape in dataset_shapes(config).items():
        if data[name].shape != shape:
            raise WeightFileError(
                f"params do not match the options: dataset '{name}' would have shape {data[name].shape}, "
                f"expected {shape}"
            )
    return lambda path: write_hdf5(path, data, export_id)


def export_checkpoint(
    workdir: str,
    options_path: str,
    weights_path: str,
    step: int | None = None,
    softmax_path: str | None = None,
    vocab_path: str | None = None,
) -> None:
    """Writes `options.json` and the weights of a training checkpoint, and with `softmax_path` /
    `vocab_path` its softmax and vocabulary (line i: softmax row i), as the original ELMo comes.

    All the files are written or none, each with the same export id; overwriting an input is refused.
    """
    # Imported here: reading and writing weight files needs no orbax.
    from elmo_jax.workdir.runs import load_run, workdir_inputs

    outputs = {"--options": options_path, "--weights": weights_path, "--softmax_weights": softmax_path,
               "--vocab": vocab_path}
    check_not_inputs(outputs.items(), workdir_inputs(workdir))
    saved = saved_config(workdir)
    manylangs = saved.init.manylangs
    if not manylangs:
        options_dict(saved)  # Fail before reading the checkpoint for a model bilm-tf cannot hold.
    run = load_run(workdir, step, with_vocab=bool(vocab_path))
    config, params, step, vocab = run.config, run.params, run.step, run.vocab
    this_export = checkpoint_export_id(workdir, step, params)
    if manylangs:
        config, params = bilm_tf_model(config, params, run.characters, f"{workdir} (continuing {manylangs})")
    writers = {
        options_path: options_writer(config, options_path, this_export),
        weights_path: weights_writer(params, config, this_export),
    }
    if softmax_path:
        w, b = params["softmax"]["W"], params["softmax"]["b"]
        writers[softmax_path] = softmax_writer(w, b, softmax_path, this_export)
    if vocab_path:
        writers[vocab_path] = lambda path: vocab.write(path, with_counts=False)
    write_files_atomic(writers)


def export_manylangs(directory: str, options_path: str, weights_path: str) -> None:
    """Writes an ELMoForManyLangs model directory as bilm-tf's `options.json` and weights, one export,
    where they hold it exactly (`bilm_tf_model`; ManyLangsError naming the directory and why not)."""
    check_not_inputs([("--options", options_path), ("--weights", weights_path)], [("--manylangs", directory)])
    model = read_model(directory)
    config = schema.with_defaults(ml_collections.ConfigDict())
    apply_overrides(config, config_keys(model), source=directory)
    params = manylangs_params(model)
    config, params = bilm_tf_model(config, params, manylangs_inputs(model), directory)
    this_export = f"{os.path.realpath(directory)} (params {params_digest(params)})"
    write_files_atomic({
        options_path: options_writer(config, options_path, this_export),
        weights_path: weights_writer(params, config, this_export),
    })
