"""The `Contextualizer` interface is enough for a new contextualizer: a toy one, declaring its name
and config section in its class and registered by one line, builds inside BiLM, contextualizes,
carries its state, trains, is counted by model/flops.py and checked and documented by the
schema, without a change to BiLM or the config layer."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from flax.core import FrozenDict

from elmo_jax.config import ConfigError, schema, validate
from elmo_jax.model.bilm import BiLM, bilm_from_config
from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.contextualizer_registry import (
    CONTEXTUALIZERS,
    contextualizer_class,
    contextualizer_from_config,
    register_contextualizer,
)
from elmo_jax.model.flops import forward_flops_per_direction
from elmo_jax.sections import Key, Section
from elmo_jax.sections.checks import integer
from tests.model.test_bilm import VOCAB, make_inputs
from tests.training.helpers import tiny_config

B, T, P = 2, 4, 5


class RunningMean(Contextualizer):
    """Each layer: the causal mean of its real inputs so far (carried across calls as a sum and a
    count per row), through one Dense layer `running_mean_{l}` to P. State: (sums `[2, B, L, F_l]`
    as one array per layer, counts `[2, B]`)."""

    config_name = "running_mean"
    summary = "a test's toy"
    section = Section("A running mean per layer (a test's toy).", {
        "n_layers": Key(2, integer(1), "Layers per direction."),
    })

    @classmethod
    def check_config(cls, model, input_dim):
        if model["running_mean"]["n_layers"] * input_dim > 10**6:
            raise ConfigError("config key model.running_mean.n_layers is too many for the toy")

    def setup(self) -> None:
        super().setup()
        self.dense = [nn.Dense(self.width, name=f"running_mean_{i}") for i in range(self.n_layers)]

    def initial_state(self, batch_size: int) -> tuple[list[jax.Array], jax.Array]:
        widths = [self.input_dim] + [self.width] * (self.n_layers - 1)
        return [jnp.zeros((2, batch_size, w)) for w in widths], jnp.zeros((2, batch_size))

    def __call__(self, x, mask, state, train=False):
        sums, count = state
        real = mask.astype(x.dtype)[..., None]
        counts = count[..., None, None] + jnp.cumsum(real, axis=2)
        outputs, new_sums = [], []
        for i, dense in enumerate(self.dense):
            x = (self.token_drop if i == 0 else self.drop)(x, deterministic=not train)
            running = sums[i][:, :, None] + jnp.cumsum(x * real, axis=2)
            new_sums.append(running[:, :, -1])
            x = dense(running / jnp.maximum(counts, 1.0)) * real
            outputs.append(x)
        return outputs, (new_sums, counts[:, :, -1, 0])

    def flops_per_token(self) -> int:
        return 2 * self.width * (self.input_dim + (self.n_layers - 1) * self.width)


@pytest.fixture
def running_mean():
    register_contextualizer(RunningMean)
    yield RunningMean
    del CONTEXTUALIZERS["running_mean"]


def toy_config() -> ml_collections.ConfigDict:
    """tests/tiny with word embeddings and the toy contextualizer (its section: the schema's once registered)."""
    config = tiny_config(**{"model.token_encoder": "word"})
    config.model.contextualizer = "running_mean"
    return config


def toy_model() -> BiLM:
    return BiLM(
        vocab_size=VOCAB, token_encoder="word", width=P, dropout=0.0,
        contextualizer="running_mean", contextualizer_fields=FrozenDict(n_layers=2),
    )


def test_a_registered_contextualizer_builds_runs_and_carries_its_state_in_bilm(running_mean) -> None:
    model = toy_model()
    inputs = make_inputs(0, steps=T)
    params = model.init(jax.random.key(0), inputs, model.initial_state(B))["params"]
    assert set(params) == {"encoder", "running_mean_0", "running_mean_1", "softmax"}
    layers, top, state = model.apply({"params": params}, inputs, model.initial_state(B))
    assert len(layers) == 3 == model.n_layers + 1 and top.shape == (2, B, T, P)
    # Two calls of T / 2 positions, the state carried, give the one call's layers.
    first, second = ({k: v[:, :, s] for k, v in inputs.items()} for s in (slice(0, 2), slice(2, T)))
    layers_a, _, carried = model.apply({"params": params}, first, model.initial_state(B))
    layers_b, _, _ = model.apply({"params": params}, second, carried)
    for whole, a, b in zip(layers, layers_a, layers_b):
        np.testing.assert_allclose(np.concatenate([a, b], axis=2), whole, rtol=1e-6, atol=1e-6)
    assert not model.has_lstm_gates


def test_a_registered_contextualizer_trains_one_step(running_mean) -> None:
    """One SGD step on the biLM's next-token loss lowers it."""
    model = toy_model()
    inputs = make_inputs(1, steps=T)
    params = model.init(jax.random.key(0), inputs, model.initial_state(B))["params"]
    targets = jnp.roll(inputs["token_ids"], -1, axis=2)

    def loss(params):
        _, top, _ = model.apply({"params": params}, inputs, model.initial_state(B), train=True,
                                rngs={"dropout": jax.random.key(1)})
        logits = top @ params["softmax"]["W"].T + params["softmax"]["b"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    before, grads = jax.value_and_grad(loss)(params)
    after = loss(jax.tree.map(lambda p, g: p - 0.5 * g, params, grads))
    assert np.all(np.isfinite(jax.tree.leaves(grads)[0])) and after < before


def test_flops_validation_and_bilm_from_config_consult_the_registry(running_mean) -> None:
    config = toy_config()
    assert config.model.running_mean.n_layers == 2  # The declared default: the section is the schema's.
    assert "| `model.running_mean.n_layers` | `2` | an integer >= 1 | Layers per direction. |" in schema.schema_table()
    p = config.model.width
    assert forward_flops_per_direction(config.model, 100, 12)["running_mean"] == 2 * p * 2 * p
    assert isinstance(contextualizer_from_config(config.model, p), RunningMean)
    validate(config)
    model = bilm_from_config(config.model, 100)
    assert model.contextualizer == "running_mean" and model.n_layers == 2
    assert "'running_mean' (a test's toy)" in schema.keys()["model.contextualizer"].meaning
    config.model.running_mean.n_layers = 0
    with pytest.raises(ConfigError, match=r"^config key model.running_mean.n_layers=0 is out of range"):
        validate(config)
    config.model.running_mean.n_layers = 10**6  # Its own check, across keys: layers x input width.
    with pytest.raises(ConfigError, match=r"^config key model.running_mean.n_layers is too many for the toy$"):
        validate(config)


def test_a_name_not_registered_is_refused_by_validation_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^config key model.contextualizer='running_mean' is not one of 'lstm', "):
        validate(toy_config())


def test_the_schema_takes_the_registrys_contextualizers_each_with_the_section_its_class_declares() -> None:
    assert list(CONTEXTUALIZERS) == ["lstm", "gated_cnn", "transformer"]
    assert schema.keys()["model.contextualizer"].check.choices == tuple(CONTEXTUALIZERS)
    assert all(schema.section(f"model.{name}") is cls.section for name, cls in CONTEXTUALIZERS.items())


def test_each_contextualizers_field_defaults_are_its_sections() -> None:
    """No default is written twice: the module's fields default to its section's keys."""
    for cls in CONTEXTUALIZERS.values():
        fields = cls(parent=None)
        assert {name: getattr(fields, name) for name in cls.section.keys} == cls.section.options(
            cls.section.defaults()), cls.config_name


def test_an_unregistered_name_is_one_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^config key model.contextualizer='rnn' is not one of 'lstm', "):
        contextualizer_class("rnn")
