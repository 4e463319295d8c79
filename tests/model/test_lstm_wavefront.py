"""The LSTM stack as a wavefront (model.lstm.wavefront) gives the layered stack's numbers: outputs,
final states and gradients, with dropout, skip connections, clips, masked steps, a carried state,
resets and remat; its time loop is one loop of T + L - 1 iterations instead of L loops of T."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.config import ConfigError
from elmo_jax.config.validation import validate
from elmo_jax.model.lstm import LSTMState
from elmo_jax.model.lstm_stack import LSTMContextualizer
from tests.training.helpers import tiny_config

B, T, F, P = 3, 6, 5, 4
RTOL, ATOL = 1e-5, 1e-6


def stack(wavefront: bool, dim: int = 7, **fields) -> LSTMContextualizer:
    """Three layers (two skip connections), clipped, with both dropouts."""
    fields = {"n_layers": 3, "width": P, "input_dim": F, "dim": dim, "cell_clip": 0.8, "proj_clip": 0.5,
              "dropout": 0.3, "token_dropout": 0.2, "use_skip_connections": True, **fields}
    return LSTMContextualizer(wavefront=wavefront, **fields)


def inputs(seed: int = 0, dim: int = 7, n_layers: int = 3) -> tuple[jax.Array, jax.Array, list[LSTMState]]:
    """x `[2, B, T, F]`; a mask with rows of 6, 4 and 1 real steps and a padded step inside row 0;
    a non-zero carried state."""
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(2, B, T, F)), jnp.float32)
    mask = np.ones((2, B, T), bool)
    mask[:, 1, 4:], mask[:, 2, 1:], mask[:, 0, 2] = False, False, False
    state = [LSTMState(jnp.asarray(rng.normal(size=(2, B, dim)) * 0.5, jnp.float32),
                       jnp.asarray(rng.normal(size=(2, B, P)) * 0.5, jnp.float32)) for _ in range(n_layers)]
    return x, jnp.asarray(mask), state


def loss(outputs: list[jax.Array], state: list[LSTMState]) -> jax.Array:
    """A scalar reading every output and final state with different weights."""
    leaves = [*outputs, *jax.tree.leaves(state)]
    return sum(jnp.sum(jnp.sin(jnp.arange(a.size).reshape(a.shape) + i) * a) for i, a in enumerate(leaves))


def run(module: LSTMContextualizer, params, x, mask, state, train: bool):
    return module.apply({"params": params}, x, mask, state, train, rngs={"dropout": jax.random.key(5)})


def assert_trees_close(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(u, v, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("dim, skip, remat", [(7, True, False), (P, False, False), (7, True, True)],
                         ids=["projected", "no_projection_no_skip", "remat"])
def test_the_wavefront_trains_as_the_layers(dim, skip, remat):
    """Same params (init from the same key), outputs, final states and gradients (params, inputs,
    carried state), training with dropout."""
    x, mask, state = inputs(dim=dim)
    layered, wavefront = (stack(w, dim, use_skip_connections=skip, remat=remat) for w in (False, True))
    params = layered.init(jax.random.key(0), x, mask, state)["params"]
    assert_trees_close(params, wavefront.init(jax.random.key(0), x, mask, state)["params"])
    results = []
    for module in (layered, wavefront):
        value, grads = jax.value_and_grad(
            lambda p, x, s: loss(*run(module, p, x, mask, s, train=True)), argnums=(0, 1, 2)
        )(params, x, state)
        results.append((run(module, params, x, mask, state, train=True), value, grads))
    assert_trees_close(results[0], results[1])
    assert [o.shape for o in results[1][0][0]] == [(2, B, T, P)] * 3


def test_the_wavefront_embeds_as_the_layers_from_gates_with_resets():
    """Inference from the first layer's x W_input, packed sentences resetting each layer's state."""
    x, mask, state = inputs(1)
    layered, wavefront = stack(False), stack(True)
    params = layered.init(jax.random.key(0), x, mask, state)["params"]
    reset = np.zeros((2, B, T), bool)
    reset[:, 0, 3], reset[:, 1, 0] = True, True
    reset_state = [LSTMState(jnp.full((2, 1, 7), 0.1), jnp.full((2, 1, P), -0.2)) for _ in range(3)]

    def embed(module, *resets):
        def f(m):
            gates = jnp.stack([m.first_layer_gates(x[d].reshape(B * T, F))[d] for d in range(2)])
            return m.contextualize_from_gates(gates.reshape(2, B, T, -1), mask, state, *resets)
        return module.apply({"params": params}, method=f)

    got = embed(wavefront, jnp.asarray(reset), reset_state)
    assert_trees_close(embed(layered, jnp.asarray(reset), reset_state), got)
    assert not np.allclose(got[0][2], embed(wavefront)[0][2])  # The resets matter.


def loop_lengths(jaxpr) -> list[int]:
    """The trip counts of the time loops (scans) anywhere in a closed jaxpr."""
    lengths = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            lengths.append(eqn.params["length"])
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else [value]:
                if hasattr(inner, "eqns"):
                    lengths += loop_lengths(inner)
                elif hasattr(inner, "jaxpr") and hasattr(inner.jaxpr, "eqns"):
                    lengths += loop_lengths(inner.jaxpr)
    return lengths


def test_the_wavefront_is_one_loop_of_t_plus_l_minus_1_steps():
    x, mask, state = inputs()
    params = stack(False).init(jax.random.key(0), x, mask, state)["params"]
    jaxprs = {w: jax.make_jaxpr(lambda p: run(stack(w), p, x, mask, state, True))(params).jaxpr for w in (False, True)}
    assert loop_lengths(jaxprs[False]) == [T, T, T]
    assert loop_lengths(jaxprs[True]) == [T + 3 - 1]


def test_the_wavefront_needs_the_xla_kernel():
    with pytest.raises(ConfigError, match=r"model.lstm.wavefront=True .* model.lstm.kernel='xla', not 'pallas'"):
        validate(tiny_config(**{"model.lstm.wavefront": True, "model.lstm.kernel": "pallas"}))
    validate(tiny_config(**{"model.lstm.wavefront": True}))
