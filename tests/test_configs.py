"""Every shipped config builds a model, on at most one base recipe; ablation presets change what
they say and train."""


import ast

import jax
import numpy as np
import pytest

from elmo_jax.config.overrides import apply_overrides
from elmo_jax.config.recipes import recipe_module, recipe_names, recipes_dir
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel
from elmo_jax.training import state as state_lib
from elmo_jax.model.initial_params import param_shapes
from elmo_jax.training.trainer import build_trainer
from tests.training.helpers import random_batch

ablations = recipe_module("ablations")

# Shrinks a preset to seconds of compilation; none of these keys is one a preset changes.
TINY_SHAPES = {
    "data.max_chars_per_token": 12,
    "model.char_cnn.embed_dim": 4,
    "model.char_cnn.filters": [[1, 4], [2, 8]],
    "model.lstm.dim": 16,
    "model.width": 8,
    "model.softmax.n_negative_samples": 16,
    "model.softmax.chunk_size": 64,
    "train.batch_size": 4,
    "train.unroll_steps": 5,
}
CONFIGS = [
    "default", "demo", "elmo_small", "elmo_medium", "elmo_original", "tests/tiny",
    "ptb_char_small", "ptb_char_small_cpu", "ptb_char_large", "ptb_word_small", "ptb_word_medium",
    "ptb_char_small_gated_cnn", "ptb_char_small_transformer", "demo_zh",
]


def _n_params(config, vocab_size=1000):
    model = bilm_from_config(config.model, vocab_size)
    shapes = param_shapes(model, config.data.max_chars_per_token)
    return sum(x.size for k, v in shapes.items() if k != "softmax" for x in jax.tree.leaves(v))


@pytest.mark.parametrize("name", CONFIGS)
def test_config_builds(name):
    config = recipe_module(name).get_config()
    assert _n_params(config) > 0


def _bases(name: str) -> list[str]:
    """The recipes `name` builds on: the names its file passes to `recipe_module`."""
    tree = ast.parse((recipes_dir() / f"{name}.py").read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "id", getattr(node.func, "attr", None)) == "recipe_module"]
    assert all(isinstance(call.args[0], ast.Constant) for call in calls), f"{name}: a recipe named by a constant"
    return sorted({call.args[0].value for call in calls})


def test_recipes_are_at_most_two_deep():
    """A recipe builds on at most one base recipe, which builds on the schema's defaults alone: every
    value of a config is in its recipe, its base or schema.py (`--print_config` shows the result)."""
    names = recipe_names()
    assert len(names) >= 18 and "ptb_char_small_transformer" in names
    for name in names:
        bases = _bases(name)
        assert len(bases) <= 1, f"{name} builds on {bases}"
        for base in bases:
            assert _bases(base) == [], f"{name} builds on {base}, which builds on {_bases(base)}"


def test_ptb_char_small_cpu_differs_from_ptb_char_small_in_epochs_and_dropout_only():
    small = recipe_module("ptb_char_small").get_config().to_dict()
    cpu = recipe_module("ptb_char_small_cpu").get_config().to_dict()
    assert (cpu["train"].pop("num_epochs"), small["train"].pop("num_epochs")) == (15, 18)
    assert (cpu["model"].pop("dropout"), small["model"].pop("dropout")) == (0.25, 0.3)
    assert cpu == small


def test_ptb_char_small_gated_cnn_swaps_the_contextualizer_only_and_keeps_the_parameter_count():
    """The counts its docstring prints (10,001-word PTB vocabulary) are the model's."""
    small = recipe_module("ptb_char_small_cpu").get_config()
    gated = recipe_module("ptb_char_small_gated_cnn").get_config()
    for config in (small, gated):
        model = bilm_from_config(config.model, 10001)
        shapes = param_shapes(model, config.data.max_chars_per_token)
        assert sum(x.size for x in jax.tree.leaves(shapes)) == 7_025_981
    small, gated = small.to_dict(), gated.to_dict()
    assert (gated["model"].pop("contextualizer"), small["model"].pop("contextualizer")) == ("gated_cnn", "lstm")
    assert gated["model"].pop("gated_cnn") == {"kernel_width": 2, "n_layers": 4, "residual": True, "dilation_base": 2}
    small["model"].pop("gated_cnn")
    optimizers = gated["train"].pop("optimizer"), small["train"].pop("optimizer")
    assert [(o["name"], o["learning_rate"], o["warmup_steps"], o["schedule"]) for o in optimizers] == [
        ("adam", 1e-3, 400, "cosine"), ("sgd", 1.0, 0, "cosine")
    ]
    assert gated == small
    assert "7,025,981" in recipe_module("ptb_char_small_gated_cnn").__doc__


def test_ptb_char_small_transformer_swaps_the_contextualizer_only_and_has_about_its_parameter_count():
    """The counts its docstring prints (10,001-word PTB vocabulary) are the models'."""
    small = recipe_module("ptb_char_small_cpu").get_config()
    transformer = recipe_module("ptb_char_small_transformer").get_config()
    counts = []
    for config in (small, transformer):
        model = bilm_from_config(config.model, 10001)
        shapes = param_shapes(model, config.data.max_chars_per_token)
        counts.append(sum(x.size for x in jax.tree.leaves(shapes)))
    assert counts == [7_025_981, 7_027_541]
    assert "7,027,541" in recipe_module("ptb_char_small_transformer").__doc__
    small, transformer = small.to_dict(), transformer.to_dict()
    assert (transformer["model"].pop("contextualizer"), small["model"].pop("contextualizer")) == ("transformer", "lstm")
    assert transformer["model"].pop("transformer") == {
        "n_layers": 2, "ff_dim": 690, "n_heads": 6, "norm": "pre", "positions": "sinusoidal",
        "shared_directions": False, "memory_length": 35, "max_window": 35,
    }
    small["model"].pop("transformer")
    optimizers = transformer["train"].pop("optimizer"), small["train"].pop("optimizer")
    assert [(o["name"], o["learning_rate"], o["warmup_steps"], o["schedule"]) for o in optimizers] == [
        ("adam", 1e-3, 400, "cosine"), ("sgd", 1.0, 0, "cosine")
    ]
    assert transformer == small


@pytest.mark.parametrize(
    "name,millions",
    # Kim et al. 2016, table 2 (rounded to the million); Zaremba et al. 2014's medium model.
    [("ptb_char_small", 5), ("ptb_char_large", 19), ("ptb_word_small", 5), ("ptb_word_medium", 20)],
)
def test_ptb_configs_have_published_parameter_counts(name, millions):
    """One direction of the biLM (the shared encoder and softmax, the forward LSTMs) is the
    published unidirectional model (the char models feed the highway output to the LSTM directly)."""
    config = recipe_module(name).get_config()
    model = bilm_from_config(config.model, 10002)
    shapes = param_shapes(model, config.data.max_chars_per_token)
    total = sum(x.size for x in jax.tree.leaves(shapes))
    backward_lstm = sum(x.size // 2 for k, v in shapes.items() if k.startswith("lstm_") for x in jax.tree.leaves(v))
    assert "W_P" not in shapes["lstm_0"]
    assert abs((total - backward_lstm) / 1e6 - millions) < 0.5
    assert "W_proj" not in shapes.get("encoder", {})


@pytest.mark.parametrize("name,millions", [("elmo_small", 13.6), ("elmo_medium", 28.0), ("elmo_original", 93.6)])
def test_released_shapes_have_allennlp_parameter_counts(name, millions):
    config = recipe_module(name).get_config()
    assert _n_params(config) / 1e6 == pytest.approx(millions, abs=0.05)


@pytest.mark.parametrize("preset", sorted(ablations.PRESETS))
def test_ablation_presets(preset):
    config = ablations.get_config(preset)
    base = ablations.get_config("baseline")
    assert _n_params(config) > 0
    changed = {k for k in ablations.PRESETS[preset]}
    for key in changed:
        node_c, node_b = config, base
        for part in key.split("."):
            node_c, node_b = node_c[part], node_b[part]
        assert node_c == ablations.PRESETS[preset][key]


def test_adagrad_ablation_is_bilm_tf_s_optimizer_step():
    """bilm-tf's Adagrad differentiates unroll_steps x the mean loss and clips the norm at 10: with
    the mean loss alone its steps would be unroll_steps times smaller."""
    config = ablations.get_config("adagrad")
    assert config.train.loss_scale == config.train.unroll_steps == ablations.demo.get_config().train.unroll_steps
    assert (config.train.clip_norm, config.train.optimizer.initial_accumulator_value) == (10.0, 1.0)


def test_unknown_ablation_is_an_error():
    with pytest.raises(ValueError, match="unknown ablation 'no_such'"):
        ablations.get_config("no_such")


_init_params = state_lib.init_params


def _random_params(model, rng, max_chars):
    """Random parameters of init's shapes, without compiling init (half of a tiny run's compile time)."""
    shapes = jax.eval_shape(lambda: _init_params(model, rng, max_chars))
    keys = jax.random.split(rng, len(jax.tree.leaves(shapes)))
    leaves = [0.1 * jax.random.normal(k, s.shape, s.dtype) for k, s in zip(keys, jax.tree.leaves(shapes))]
    return jax.tree.unflatten(jax.tree.structure(shapes), leaves)


@pytest.mark.parametrize("preset", sorted(ablations.PRESETS))
def test_ablation_preset_trains_two_steps(preset, monkeypatch):
    monkeypatch.setattr(state_lib, "init_params", _random_params)
    assert not set(TINY_SHAPES) & set(ablations.PRESETS[preset])
    config = ablations.get_config(preset)
    apply_overrides(config, TINY_SHAPES, "TINY_SHAPES")
    vocab_size = 40
    model = bilm_from_config(config.model, vocab_size)
    mesh = data_parallel.make_mesh(jax.devices()[:1])
    state, step, _ = build_trainer(model, config, mesh, config.train.num_steps)
    initial = jax.device_get(state.params)
    rng = np.random.default_rng(0)
    for _ in range(2):
        batch = random_batch(rng, vocab_size, config.train.batch_size, config.train.unroll_steps, config.data.max_chars_per_token)
        state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
        assert np.isfinite(float(metrics["train_loss"]))
    assert int(state.step) == 2
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), initial, jax.device_get(state.params))
    assert any(jax.tree.leaves(changed))


def _conllu(sentences: list[str]) -> str:
    """CoNLL-U of whitespace-segmented sentences (FORM and a dummy UPOS)."""
    blocks = []
    for number, sentence in enumerate(sentences, 1):
        words = sentence.split()
        rows = [f"{i}\t{w}\t{w}\tNOUN\t_\t_\t{i - 1}\t{'root' if i == 1 else 'dep'}\t_\t_" for i, w in enumerate(words, 1)]
        blocks.append(f"# sent_id = {number}\n# text = {''.join(words)}\n" + "\n".join(rows) + "\n")
    return "\n".join(blocks) + "\n"


@pytest.mark.slow
def test_the_chinese_recipe_trains_a_few_steps_on_the_files_it_names(tmp_path):
    """configs/demo_zh.py as it ships (its shapes, its character vocabulary built from the text) on
    files the test writes under the names it reads: CoNLL-U, and CRLF text with full-width digits."""
    from elmo_jax.data.char_vocab import CharVocabulary
    from elmo_jax.training.loop import train_and_evaluate

    sentences = ["我 爱 北京 天安门", "苹果 公司 发布 了 新 手机", "他 每天 吃 一 个 苹果", "北京 是 中国 的 首都",
                 "我们 周末 去 打 篮球", "１９９７年 香港 回归"] * 4
    recipe = recipe_module("demo_zh")
    gsd_train, msr, pku = recipe.TRAIN_FILES
    (tmp_path / gsd_train).write_text(_conllu(sentences), encoding="utf-8")
    for name in (msr, pku):
        (tmp_path / name).write_bytes("\r\n".join(sentences).encode("utf-8") + b"\r\n")
    (tmp_path / recipe.TEST_FILE).write_text(_conllu(sentences[:6]), encoding="utf-8")
    config = recipe.get_config(str(tmp_path))
    apply_overrides(config, {
        "train.num_steps": 2, "train.batch_size": 8, "eval.batch_size": 8, "train.log_every_steps": 1,
        "train.checkpoint_every_steps": 2, "model.softmax.n_negative_samples": 8,
    })
    result = train_and_evaluate(config, str(tmp_path / "run"))
    assert np.isfinite(result["perplexity"])
    characters = CharVocabulary.load(str(tmp_path / "run" / "chars.txt"))
    assert {"北", "京", "苹", "果", "１"} <= set(characters.characters)  # Each seen twice or more.
