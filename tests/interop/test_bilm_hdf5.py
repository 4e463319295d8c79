"""bilm-tf/AllenNLP options.json + hdf5 weights: parsing, layout, exact round trips, clear errors."""

from __future__ import annotations

import copy
import json
import os
import re

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.config import schema
from elmo_jax.config.recipes import recipe_module
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.interop.bilm_hdf5 import (
    OptionsError, WeightFileError, load_options, load_weights, options_dict, save_options, save_weights,
)
from elmo_jax.cli.export import allennlp_width_note, main as export_main
from elmo_jax.interop.export_sets import check_one_export, read_export_id, write_hdf5
from elmo_jax.model.bilm import bilm_from_config
from tests.reference.bilm_numpy import ReferenceBiLM, random_bilm_weights, write_bilm_files
from tests.training.helpers import make_checkpoint_workdir

no_projection = recipe_module("tests/no_projection")
tiny = recipe_module("tests/tiny")

# bilm-tf inference options (n_characters 262), tiny shapes.
OPTIONS = {
    "lstm": {
        "dim": 12, "projection_dim": 6, "n_layers": 2, "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True,
    },
    "char_cnn": {
        "activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 6], [3, 8]],
        "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2,
    },
}


def bilm_tf_training_options() -> dict:
    """As written by bilm-tf's train_elmo.py: n_characters 261 and training-only keys."""
    options = copy.deepcopy(OPTIONS)
    options["char_cnn"]["n_characters"] = 261
    options["lstm"]["cell_clip"] = None
    options.update({
        "bidirectional": True, "dropout": 0.1, "all_clip_norm_val": 10.0, "n_epochs": 10, "n_train_tokens": 1000,
        "batch_size": 128, "n_tokens_vocab": 4229, "unroll_steps": 20, "n_negative_samples_batch": 8192,
    })
    return options


def write_json(path, obj) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


def write_model(tmp_path, options=OPTIONS, seed=0, with_proj=True) -> tuple[str, str, dict]:
    weights = random_bilm_weights(options, seed, with_proj)
    options_path, weights_path = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    write_bilm_files(options, weights, options_path, weights_path)
    return options_path, weights_path, weights


def read_datasets(path) -> dict[str, np.ndarray]:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
    return out


def test_load_options_maps_every_key(tmp_path):
    """The keys options.json describes, and the schema's defaults for the rest (a complete config)."""
    config = load_options(write_json(tmp_path / "o.json", OPTIONS))
    described = {
        "token_encoder": "char_cnn",
        "width": 6,
        "char_cnn": {
            "embed_dim": 4, "filters": [[1, 4], [2, 6], [3, 8]], "activation": "relu", "n_highway": 2, "projection": True
        },
        "lstm": {"dim": 12, "n_layers": 2, "cell_clip": 3.0, "proj_clip": 3.0, "use_skip_connections": True},
        "dropout": 0.0,
        "dtype": "float32",
    }
    expected = schema.with_defaults({"model": described, "data": {"max_chars_per_token": 50}})
    assert config.to_dict() == expected.to_dict()
    assert config.model.lstm.initializer == schema.get_config().model.lstm.initializer  # A default.


def test_load_options_accepts_bilm_tf_training_options(tmp_path):
    config = load_options(write_json(tmp_path / "o.json", bilm_tf_training_options()))
    assert config.model.lstm.cell_clip == 0.0  # null: no clipping
    assert config.model.lstm.proj_clip == 3.0


def test_options_round_trip(tmp_path):
    original = load_options(write_json(tmp_path / "o.json", bilm_tf_training_options()))
    save_options(original, str(tmp_path / "saved.json"))
    saved = json.loads((tmp_path / "saved.json").read_text())
    assert saved["char_cnn"]["n_characters"] == 262  # what bilm-tf's inference graph expects
    assert saved["lstm"]["cell_clip"] is None
    assert load_options(str(tmp_path / "saved.json")).to_dict() == original.to_dict()


def test_save_options_of_a_training_config(tmp_path):
    config = tiny.get_config()
    save_options(config, str(tmp_path / "o.json"))
    loaded = load_options(str(tmp_path / "o.json"))
    # Training-only keys (e.g. lstm.initializer) have no options.json counterpart.
    assert loaded.model.lstm.to_dict() == {key: config.model.lstm[key] for key in loaded.model.lstm}
    assert loaded.model.char_cnn.to_dict() == config.model.char_cnn.to_dict()
    assert loaded.data.max_chars_per_token == config.data.max_chars_per_token


def _without(section: str, key: str):
    def mutate(o):
        del o[section][key]
    return mutate


def _with(section: str | None, key: str, value):
    def mutate(o):
        (o[section] if section else o)[key] = value
    return mutate


@pytest.mark.parametrize("mutate, key", [
    (_without("lstm", "dim"), "'lstm.dim'"),
    (_without("char_cnn", "max_characters_per_token"), "'char_cnn.max_characters_per_token'"),
    (lambda o: o["char_cnn"]["embedding"].clear(), "'char_cnn.embedding.dim'"),
    (lambda o: o.pop("char_cnn"), "'char_cnn'"),
    (_with("lstm", "peepholes", True), "'lstm.peepholes'"),
    (_with(None, "vocab", "x"), "'vocab'"),
    (_with("char_cnn", "n_characters", 300), "'char_cnn.n_characters'"),
    (_with("char_cnn", "activation", "gelu"), "'char_cnn.activation'"),
    (_with("lstm", "projection_dim", "6"), "'lstm.projection_dim'"),
    (_with("char_cnn", "filters", [[1, 4], [60, 2]]), "'char_cnn.filters[1]'"),
])
def test_bad_options_name_the_key(tmp_path, mutate, key):
    options = copy.deepcopy(OPTIONS)
    mutate(options)
    with pytest.raises(OptionsError, match=re.escape(key)):
        load_options(write_json(tmp_path / "o.json", options))


def test_options_missing_or_invalid_file(tmp_path):
    with pytest.raises(OptionsError, match="options file not found"):
        load_options(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(OptionsError, match="bad.json: not valid JSON"):
        load_options(str(tmp_path / "bad.json"))


def no_projection_options(proj_clip: float | None = 3) -> dict:
    """OPTIONS with projection_dim == dim: bilm-tf's LSTMCell without num_proj (proj_clip unused)."""
    options = copy.deepcopy(OPTIONS)
    options["lstm"].update(dim=6, proj_clip=proj_clip)
    return options


@pytest.mark.parametrize("n_highway, dim", [(2, 12), (0, 12), (2, 6)], ids=["highway", "no_highway", "no_projection"])
def test_loaded_params_have_the_model_param_tree(tmp_path, n_highway, dim):
    options = copy.deepcopy(OPTIONS)
    options["char_cnn"]["n_highway"] = n_highway
    options["lstm"]["dim"] = dim
    options_path, weights_path, _ = write_model(tmp_path, options)
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    model = bilm_from_config(config.model, vocab_size=3)
    inputs = {"char_ids": jnp.zeros((2, 1, 1, 50), jnp.int32), "mask": jnp.ones((2, 1, 1), bool)}
    expected = jax.eval_shape(lambda: model.init(jax.random.key(0), inputs, model.initial_state(1))["params"])
    del expected["softmax"]
    assert jax.tree.map(lambda x: (x.shape, x.dtype), params) == jax.tree.map(lambda x: (x.shape, x.dtype), expected)


@pytest.mark.parametrize("options", [OPTIONS, no_projection_options()], ids=["projection", "no_projection"])
def test_file_round_trip_is_bitwise(tmp_path, options):
    options_path, weights_path, _ = write_model(tmp_path, options)
    config = load_options(options_path)
    save_weights(load_weights(config, weights_path), config, str(tmp_path / "again.hdf5"))
    original, again = read_datasets(weights_path), read_datasets(tmp_path / "again.hdf5")
    assert sorted(original) == sorted(again)
    for name in original:
        assert again[name].dtype == np.float32 and again[name].tobytes() == original[name].tobytes(), name


def test_params_round_trip_is_bitwise(tmp_path):
    config = load_options(write_json(tmp_path / "o.json", OPTIONS))
    model = bilm_from_config(config.model, vocab_size=3)
    inputs = {"char_ids": jnp.zeros((2, 1, 1, 50), jnp.int32), "mask": jnp.ones((2, 1, 1), bool)}
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(1), inputs, model.initial_state(1))["params"])
    rng = np.random.default_rng(2)
    params = jax.tree.map(lambda x: jnp.asarray(rng.standard_normal(x.shape), x.dtype), shapes)
    save_weights(params, config, str(tmp_path / "w.hdf5"))
    loaded = load_weights(config, str(tmp_path / "w.hdf5"))
    expected = jax.tree.map(np.array, {k: v for k, v in params.items() if k != "softmax"})
    expected["encoder"]["char_embed"][0] = 0.0  # the "no token" row is never used nor stored
    assert jax.tree.structure(loaded) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(loaded), jax.tree.leaves(expected)):
        assert got.tobytes() == np.asarray(want).tobytes()


def _rewrite(path, name, value=None):
    with h5py.File(path, "a") as f:
        del f[name]
        if value is not None:
            f.create_dataset(name, data=value)


def test_wrong_dataset_shape_names_the_dataset(tmp_path):
    options_path, weights_path, _ = write_model(tmp_path)
    _rewrite(weights_path, "CNN/W_cnn_1", np.zeros((1, 3, 4, 6), np.float32))
    message = "'CNN/W_cnn_1' has shape (1, 3, 4, 6), the options imply (1, 2, 4, 6)"
    with pytest.raises(WeightFileError, match=re.escape(message)):
        load_weights(load_options(options_path), weights_path)


def test_missing_dataset_is_named(tmp_path):
    options_path, weights_path, _ = write_model(tmp_path)
    _rewrite(weights_path, "CNN_high_1/b_carry")
    with pytest.raises(WeightFileError, match="missing dataset 'CNN_high_1/b_carry'"):
        load_weights(load_options(options_path), weights_path)


def test_options_weights_mismatch(tmp_path):
    options_path, weights_path, _ = write_model(tmp_path)
    fewer_layers = copy.deepcopy(OPTIONS)
    fewer_layers["lstm"]["n_layers"] = 1
    with pytest.raises(WeightFileError, match=r"'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B' is not described.*mismatch"):
        load_weights(load_options(write_json(tmp_path / "o1.json", fewer_layers)), weights_path)
    other_dim = copy.deepcopy(OPTIONS)
    other_dim["lstm"]["dim"] = 10
    with pytest.raises(WeightFileError, match=r"'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape \(12, 48\)"):
        load_weights(load_options(write_json(tmp_path / "o2.json", other_dim)), weights_path)


@pytest.mark.parametrize(
    "name, index, value",
    [("RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", (3, 17), np.nan), ("CNN_proj/b_proj", (2,), np.inf),
     ("char_embed", (0, 0), -np.inf)],
    ids=["nan_in_an_lstm", "inf_in_the_token_projection", "minus_inf_in_the_char_embeddings"],
)
def test_non_finite_values_name_the_file_and_the_dataset(tmp_path, name, index, value):
    """As a checkpoint's: the biLM would compute NaN, or finite but wrong layers (the C++ engine),
    with them. The embedder reads its weights through `load_weights` too."""
    options_path, weights_path, _ = write_model(tmp_path)
    with h5py.File(weights_path, "a") as f:
        f[name][index] = value
        size = f[name].size
    message = f"{weights_path}: dataset '{name}' holds non-finite values (1 of {size}, the first {value} at {list(index)})"
    with pytest.raises(WeightFileError, match=re.escape(message)):
        load_weights(load_options(options_path), weights_path)
    with pytest.raises(ValueError, match=re.escape(message)):
        ElmoEmbedder(options_path, weights_path)


def test_missing_or_invalid_weight_file(tmp_path):
    config = load_options(write_json(tmp_path / "o.json", OPTIONS))
    with pytest.raises(WeightFileError, match="nope.hdf5: weight file not found"):
        load_weights(config, str(tmp_path / "nope.hdf5"))
    (tmp_path / "text.hdf5").write_text("not hdf5")
    with pytest.raises(WeightFileError, match="text.hdf5: not a readable HDF5 file"):
        load_weights(config, str(tmp_path / "text.hdf5"))


def test_save_weights_rejects_params_that_do_not_match(tmp_path):
    options_path, weights_path, _ = write_model(tmp_path)
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    del params["encoder"]["highway"]["W_carry_1"]
    with pytest.raises(WeightFileError, match="params lack 'encoder/highway/W_carry_1'"):
        save_weights(params, config, str(tmp_path / "out.hdf5"))
    params = load_weights(config, weights_path)
    params["encoder"]["W_proj"] = params["encoder"]["W_proj"][:, :5]
    with pytest.raises(WeightFileError, match="dataset 'CNN_proj/W_proj' would have shape"):
        save_weights(params, config, str(tmp_path / "out.hdf5"))
    assert not (tmp_path / "out.hdf5").exists()


def test_word_input_models_have_no_bilm_tf_format():
    config = tiny.get_config()
    config.model.token_encoder = "word"
    with pytest.raises(OptionsError, match="only char-CNN"):
        options_dict(config)


@pytest.mark.parametrize("contextualizer", ["gated_cnn", "transformer"])
def test_non_lstm_models_have_no_bilm_tf_format(contextualizer):
    config = tiny.get_config()
    config.model.contextualizer = contextualizer
    with pytest.raises(OptionsError, match=f"^the bilm-tf/AllenNLP format holds LSTM biLMs only; .*'{contextualizer}'$"):
        options_dict(config)


@pytest.mark.parametrize("contextualizer", ["gated_cnn", "transformer"])
def test_export_of_a_non_lstm_workdir_is_a_one_line_error(checkpoint_workdir, tmp_path, capsys, contextualizer):
    """The reason comes from the saved config, before the checkpoint is read; nothing is written."""
    workdir = tmp_path / contextualizer
    workdir.mkdir()
    config = json.loads(open(os.path.join(checkpoint_workdir, "config.json")).read())
    config["model"]["contextualizer"] = contextualizer
    (workdir / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    out.mkdir()
    assert export_main([arg for pair in _export_flags(str(workdir), out).items() for arg in pair]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and f"contextualizer={contextualizer!r}" in err
    assert os.listdir(out) == []


def test_export_of_a_character_vocabulary_workdir_is_a_one_line_error(checkpoint_workdir, tmp_path, capsys):
    """bilm-tf's files spell bytes only: refused from the saved config, before the checkpoint is read."""
    workdir = tmp_path / "characters"
    workdir.mkdir()
    config = json.loads(open(os.path.join(checkpoint_workdir, "config.json")).read())
    config["data"]["char_vocab_file"] = "corpus/chars.txt"
    (workdir / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    out.mkdir()
    assert export_main([arg for pair in _export_flags(str(workdir), out).items() for arg in pair]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: bilm-tf/AllenNLP files spell words as UTF-8 bytes") and err.count("\n") == 1
    assert "data.char_vocab_file='corpus/chars.txt'" in err
    assert os.listdir(out) == []


def test_models_without_token_projection_have_no_bilm_tf_format():
    config = tiny.get_config()
    config.model.char_cnn.projection = False
    with pytest.raises(OptionsError, match="projection=False"):
        options_dict(config)


def test_file_without_cnn_proj_uses_the_identity(tmp_path):
    """bilm-tf writes no CNN_proj when sum(filters) == projection_dim."""
    options = copy.deepcopy(OPTIONS)
    options["char_cnn"]["filters"] = [[1, 2], [2, 4]]  # 6 == projection_dim
    options_path, weights_path, _ = write_model(tmp_path, options, with_proj=False)
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    np.testing.assert_array_equal(params["encoder"]["W_proj"], np.eye(6))
    model = bilm_from_config(config.model, vocab_size=1)
    embedder = ElmoEmbedder.from_pretrained(PretrainedBiLM(model, params, max_chars=50))
    words = ["<S>", "</S>", "cat", "naïve"]
    reference = ReferenceBiLM.from_files(options_path, weights_path)
    np.testing.assert_allclose(
        embedder.token_embeddings(words), [reference.token_embedding(w) for w in words], rtol=1e-5, atol=1e-6
    )


# ----------------------------------------------------------------------------- LSTM projection


def lstm_projection_datasets(path) -> list[str]:
    return [name for name in read_datasets(path) if name.endswith("/LSTMCell/W_P_0")]


def test_bilm_tf_file_without_w_p_0_matches_numpy_reference(tmp_path):
    """projection_dim == dim: bilm-tf writes no W_P_0; h = sigmoid(o) tanh(c) and proj_clip is unused."""
    options_path, weights_path, _ = write_model(tmp_path, no_projection_options(proj_clip=0.05), seed=3)
    assert lstm_projection_datasets(weights_path) == []
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    assert all("W_P" not in params[f"lstm_{layer}"] for layer in range(2))
    pretrained = PretrainedBiLM(bilm_from_config(config.model, vocab_size=1), params, max_chars=50)
    embedder = ElmoEmbedder.from_pretrained(pretrained, batch_size=2)
    sentences = [["the", "cat", "sat"], ["naïve", "café"], ["a"], ["end", "of", "story", "."]]
    got = list(embedder.embed_sentences(sentences))
    want = ReferenceBiLM.from_files(options_path, weights_path).embed_batches(sentences, batch_size=2)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape == (3, w.shape[1], 2 * 6)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert max(np.abs(w[1]).max() for w in want) > 0.2  # layer 1 (no skip): proj_clip 0.05 was not applied


def random_params(config, seed: int) -> dict:
    """Random params (softmax included) of the biLM of an elmo-jax config."""
    model = bilm_from_config(config.model, vocab_size=3)
    chars = config.data.max_chars_per_token
    inputs = {"char_ids": jnp.zeros((2, 1, 1, chars), jnp.int32), "mask": jnp.ones((2, 1, 1), bool)}
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), inputs, model.initial_state(1))["params"])
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: rng.normal(0.0, 0.5, x.shape).astype(x.dtype), shapes)


@pytest.mark.parametrize("dim, warning", [(8, "bilm-tf loads it, AllenNLP cannot"), (6, "bilm-tf builds no biLM")],
                         ids=["no_projection", "up_projection"])
def test_export_import_round_trip_by_projection(tmp_path, caplog, dim, warning):
    """projection_dim (8) == dim: no W_P / W_P_0 (bilm-tf); > dim: W_P_0 kept (AllenNLP's layout).
    Either way params and embeddings come back identical."""
    config = no_projection.get_config()
    config.model.lstm.dim = dim
    params = random_params(config, seed=4)
    projected = dim != config.model.width
    assert all(("W_P" in params[f"lstm_{layer}"]) == projected for layer in range(2))
    options_path, weights_path = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    save_options(config, options_path)
    save_weights(params, config, weights_path)
    assert warning in caplog.text
    assert json.loads((tmp_path / "options.json").read_text())["lstm"]["projection_dim"] == 8
    assert len(lstm_projection_datasets(weights_path)) == (4 if projected else 0)

    loaded_config = load_options(options_path)
    loaded = load_weights(loaded_config, weights_path)
    expected = {k: v.copy() for k, v in params.items() if k != "softmax"}
    expected["encoder"] = dict(expected["encoder"], char_embed=params["encoder"]["char_embed"].copy())
    expected["encoder"]["char_embed"][0] = 0.0  # the "no token" row is never used nor stored
    assert jax.tree.structure(loaded) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(loaded), jax.tree.leaves(expected)):
        assert got.tobytes() == want.tobytes()

    sentences = [["the", "cat"], ["a", "dog", "ran", "past"]]
    chars = config.data.max_chars_per_token
    original = ElmoEmbedder.from_pretrained(PretrainedBiLM(bilm_from_config(config.model, 3), params, chars), batch_size=2)
    again = ElmoEmbedder.from_pretrained(PretrainedBiLM(bilm_from_config(loaded_config.model, 1), loaded, chars), batch_size=2)
    for a, b in zip(original.embed_batch(sentences), again.embed_batch(sentences), strict=True):
        assert a.shape == (3, a.shape[1], 16)
        np.testing.assert_array_equal(a, b)


def test_missing_w_p_0_when_projection_dim_differs_from_dim(tmp_path):
    options_path, weights_path, _ = write_model(tmp_path)
    name = "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"
    _rewrite(weights_path, name)
    why = "projection_dim 6 != dim 12: an LSTM projection of shape (12, 6)"
    message = f"{weights_path}: missing dataset '{name}' ({why})"
    with pytest.raises(WeightFileError, match=re.escape(message) + "$"):
        load_weights(load_options(options_path), weights_path)


def test_w_p_0_when_projection_dim_equals_dim_is_an_error(tmp_path):
    """A W_P_0 would be silently dropped (AllenNLP would apply it): refused."""
    options_path, weights_path, _ = write_model(tmp_path, no_projection_options())
    name = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"
    with h5py.File(weights_path, "a") as f:
        f.create_dataset(name, data=np.eye(6, dtype=np.float32))
    message = f"{weights_path}: dataset '{name}' is not described by the options (projection_dim == dim == 6: no LSTM"
    with pytest.raises(WeightFileError, match=re.escape(message)):
        load_weights(load_options(options_path), weights_path)


def test_save_weights_rejects_w_p_when_projection_dim_equals_dim(tmp_path):
    options_path, weights_path, _ = write_model(tmp_path, no_projection_options())
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    params["lstm_1"]["W_P"] = np.zeros((2, 6, 6), np.float32)
    with pytest.raises(WeightFileError, match="params have 'lstm_1/W_P', but projection_dim == dim"):
        save_weights(params, config, str(tmp_path / "out.hdf5"))
    assert not (tmp_path / "out.hdf5").exists()


# ----------------------------------------------------------------------------- export sets


@pytest.fixture(scope="module")
def checkpoint_workdir(tmp_path_factory) -> str:
    return make_checkpoint_workdir(tmp_path_factory.mktemp("export"))


def _export_flags(workdir: str, out) -> dict[str, str]:
    return {"--workdir": workdir, **{flag: str(out / name) for flag, name in EXPORT_SET.items()}}


EXPORT_SET = {"--options": "options.json", "--weights": "weights.hdf5", "--softmax_weights": "softmax.hdf5",
              "--vocab": "vocab.txt"}


def test_export_records_one_id_in_every_file(checkpoint_workdir, tmp_path):
    flags = _export_flags(checkpoint_workdir, tmp_path)
    assert export_main([arg for pair in flags.items() for arg in pair]) == 0
    ids = {read_export_id(flags[flag]) for flag in ("--options", "--weights", "--softmax_weights")}
    assert len(ids) == 1 and ids.pop().startswith(f"step 2 of {os.path.realpath(checkpoint_workdir)} (params ")
    config = load_options(flags["--options"])  # bilm-tf and AllenNLP read the file as before.
    load_weights(config, flags["--weights"])
    check_one_export([flags["--options"], flags["--weights"], flags["--softmax_weights"]])
    assert sorted(os.listdir(tmp_path)) == sorted(EXPORT_SET.values())  # No temporary left.


def test_files_of_different_exports_are_named(tmp_path):
    """bilm-tf/AllenNLP files carry no id and go with any; two ids that differ are an error."""
    paths = [str(tmp_path / name) for name in ("a.hdf5", "b.hdf5", "bilm_tf.hdf5")]
    for path, export_id in zip(paths, ["step 2 of /w (params 1)", "step 3 of /w (params 2)", None]):
        write_hdf5(path, {"x": np.zeros(2, np.float32)}, export_id)
    check_one_export(paths[::2])
    check_one_export(paths[1:])
    message = f"files of different exports: {paths[0]} (step 2 of /w (params 1)), {paths[1]} (step 3 of /w (params 2))"
    with pytest.raises(WeightFileError, match=f"^{re.escape(message)}; export them again together$"):
        check_one_export(paths)


@pytest.mark.parametrize("flag, output, relation, read", [
    ("--vocab", "vocab.txt", "is", "vocab.txt"),
    ("--options", "config.json", "is", "config.json"),
    ("--weights", "checkpoints/2/w.hdf5", "is inside", "checkpoints"),
])
def test_export_refuses_to_overwrite_what_it_reads(checkpoint_workdir, tmp_path, capsys, flag, output, relation, read):
    flags = _export_flags(checkpoint_workdir, tmp_path)
    flags[flag] = os.path.join(checkpoint_workdir, ".", output)
    before = {name: open(os.path.join(checkpoint_workdir, name), "rb").read() for name in ("vocab.txt", "config.json")}
    assert export_main([arg for pair in flags.items() for arg in pair]) == 1
    other = os.path.join(checkpoint_workdir, read)
    assert capsys.readouterr().err == f"error: {flag} {flags[flag]} {relation} --workdir {other}: refusing to overwrite an input\n"
    assert os.listdir(tmp_path) == []
    assert before == {name: open(os.path.join(checkpoint_workdir, name), "rb").read() for name in before}


def test_export_refuses_one_output_twice(checkpoint_workdir, tmp_path, capsys):
    flags = _export_flags(checkpoint_workdir, tmp_path)
    os.symlink(flags["--weights"], tmp_path / "link.hdf5")
    flags["--softmax_weights"] = str(tmp_path / "link.hdf5")
    assert export_main([arg for pair in flags.items() for arg in pair]) == 1
    assert capsys.readouterr().err == (f"error: --softmax_weights {tmp_path / 'link.hdf5'} is --weights "
                                       f"{flags['--weights']}: refusing to write it twice\n")
    assert os.listdir(tmp_path) == ["link.hdf5"]


def test_export_of_a_narrow_biLM_says_allennlp_reads_only_50_chars(checkpoint_workdir, tmp_path, capsys):
    """AllenNLP's Elmo reshapes char ids to 50 whatever options.json says: a narrower export is for
    bilm-tf and elmo-jax, and the tool says so."""
    flags = _export_flags(checkpoint_workdir, tmp_path)
    assert export_main([arg for pair in flags.items() for arg in pair]) == 0
    with open(flags["--options"]) as f:
        max_chars = json.load(f)["char_cnn"]["max_characters_per_token"]
    assert max_chars != 50
    assert capsys.readouterr().out.splitlines()[-1] == allennlp_width_note(max_chars)


def test_export_of_a_50_char_biLM_prints_no_note(tmp_path, capsys):
    workdir = make_checkpoint_workdir(tmp_path / "wide", **{"data.max_chars_per_token": 50})
    flags = _export_flags(workdir, tmp_path)
    assert export_main([arg for pair in flags.items() for arg in pair]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {', '.join(flags[f] for f in EXPORT_SET)}"]
