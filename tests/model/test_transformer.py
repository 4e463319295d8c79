"""Transformer contextualizer vs independent NumPy references (float64): attention, blocks, the
stack with its memory and positions; causality by gradients, memory equivalence, padding, FLOPs."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.transformer import (
    SelfAttention,
    TransformerBlock,
    TransformerStack,
    TransformerState,
    attention_positions,
    transformer_flops_per_token,
)

B, T, F, P, HEADS, FF, L = 2, 4, 6, 8, 2, 12, 2
EPS = 1e-6  # LayerNorm epsilon
NORMS = ("pre", "post")
POSITIONS = ("learned", "sinusoidal", "none")


# ----------------------------------------------------------------------------- NumPy references


def np_layer_norm(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * scale + bias over the last axis."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * p["scale"] + p["bias"]


def np_allowed(valid: np.ndarray, n_queries: int) -> np.ndarray:
    """valid [S] -> [T, S]: query t (slot S - T + t) sees itself and the valid slots up to it."""
    n_keys = len(valid)
    allowed = np.zeros((n_queries, n_keys), bool)
    for t in range(n_queries):
        me = n_keys - n_queries + t
        for j in range(me + 1):
            allowed[t, j] = valid[j] or j == me
    return allowed


def np_attention(
    x: np.ndarray, context: np.ndarray, position: np.ndarray | None, allowed: np.ndarray, p: dict, n_heads: int
) -> np.ndarray:
    """One row: x [T, P], context [S, P], position [S, P] (on queries and keys), allowed [T, S]."""
    qk_context = context if position is None else context + position
    qx = x if position is None else x + position[len(context) - len(x) :]
    q = qx @ p["W_query"] + p["b_query"]
    k = qk_context @ p["W_key"] + p["b_key"]
    v = context @ p["W_value"] + p["b_value"]
    d = x.shape[-1] // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        scores = q[:, cols] @ k[:, cols].T / math.sqrt(d)
        scores = np.where(allowed, scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        heads.append(weights @ v[:, cols])
    return np.concatenate(heads, -1) @ p["W_output"] + p["b_output"]


def np_feed_forward(x: np.ndarray, p: dict) -> np.ndarray:
    """relu(x W1 + b1) W2 + b2."""
    return np.maximum(x @ p["W_1"] + p["b_1"], 0.0) @ p["W_2"] + p["b_2"]


def np_block(
    h: np.ndarray, memory: np.ndarray, position: np.ndarray | None, allowed: np.ndarray, p: dict, norm: str
) -> np.ndarray:
    """One row of one layer: h [T, P], memory [M, P]."""
    context = np.concatenate([memory, h])
    if norm == "pre":
        context = np_layer_norm(context, p["attention_norm"])
        h = h + np_attention(context[len(memory) :], context, position, allowed, p["attention"], HEADS)
        return h + np_feed_forward(np_layer_norm(h, p["feed_forward_norm"]), p["feed_forward"])
    h = np_layer_norm(h + np_attention(h, context, position, allowed, p["attention"], HEADS), p["attention_norm"])
    return np_layer_norm(h + np_feed_forward(h, p["feed_forward"]), p["feed_forward_norm"])


def np_sinusoid(position: int, dim: int) -> np.ndarray:
    """Vaswani et al.: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same)."""
    out = np.zeros(dim)
    for i in range(dim):
        angle = position / 10000 ** ((i - i % 2) / dim)
        out[i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    return out


def np_direction(
    x: np.ndarray, mask: np.ndarray, memory: np.ndarray, memory_mask: np.ndarray, p: dict, norm: str, positions: str
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """One direction: x [B, T, F], mask [B, T], memory [B, L, M, P], memory_mask [B, M] -> (L outputs
    [B, T, P], next memory, next mask), row by row: the window's first valid slot numbered M, the
    other valid slots by their count from it (forward in the window, back into the memory), the
    next memory the last M valid slots of [memory; window] (zeros, mask false, in front)."""
    n_rows, n_steps, _ = x.shape
    n_layers, n_memory = memory.shape[1], memory.shape[2]
    outputs = [np.zeros((n_rows, n_steps, P)) for _ in range(n_layers)]
    next_mem, next_mask = np.zeros_like(memory), np.zeros_like(memory_mask)
    for b in range(n_rows):
        h = x[b] @ p["W_input"] + p["b_input"] if "W_input" in p else x[b]
        valid = np.concatenate([memory_mask[b], mask[b]])
        count = np.cumsum(valid)
        empty_memory_slots = n_memory - int(memory_mask[b].sum())
        slot_position = [int(c) - 1 + empty_memory_slots if v else 0 for c, v in zip(count, valid)]
        position = None
        if positions == "sinusoidal":
            position = np.stack([np_sinusoid(s, P) for s in slot_position])
        elif positions == "learned":
            position = p["positions"][slot_position]
        allowed = np_allowed(valid, n_steps)
        layer_inputs = []
        for i in range(n_layers):
            layer_inputs.append(h)
            h = np_block(h, memory[b, i], position, allowed, p[f"block_{i}"], norm)
            outputs[i][b] = h
        if norm == "pre":
            outputs[-1][b] = np_layer_norm(h, p["final_norm"])
        kept = [j for j in range(len(valid)) if valid[j]][-n_memory:] if n_memory else []
        for i in range(n_layers):
            slots = np.concatenate([memory[b, i], layer_inputs[i]])
            for k, j in enumerate(kept):
                next_mem[b, i, n_memory - len(kept) + k] = slots[j]
        next_mask[b, n_memory - len(kept) :] = True
    return outputs, next_mem, next_mask


# ----------------------------------------------------------------------------- helpers


def randomize(params: Any, seed: int, scale: float = 0.5) -> Any:
    """Same tree, every leaf float32 N(0, scale^2) (LayerNorm scales around 1)."""
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    out = []
    for path, leaf in leaves:
        value = rng.normal(0.0, scale, leaf.shape)
        if "scale" in jax.tree_util.keystr(path):
            value = 1.0 + value
        out.append(jnp.asarray(value, jnp.float32))
    return jax.tree_util.tree_unflatten(treedef, out)


def to_f64(tree: Any) -> Any:
    """NumPy float64 copy of a tree of arrays."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), tree)


def make_stack(norm: str = "pre", positions: str = "learned", shared: bool = False, **kw: Any) -> TransformerStack:
    """The small stack used throughout: memory of T slots, no dropout unless asked."""
    fields = dict(n_layers=L, dim=P, ff_dim=FF, n_heads=HEADS, dropout=0.0, norm=norm, positions=positions,
                  shared_directions=shared, memory_length=T, max_window=T)
    return TransformerStack(**{**fields, **kw})


def stack_params(stack: TransformerStack, n_in: int = F, seed: int = 0) -> Any:
    """Random params of `stack` for inputs n_in wide."""
    shapes = jax.eval_shape(
        stack.init, jax.random.key(0), jnp.zeros((2, B, T, n_in)), jnp.ones((2, B, T), bool), stack.initial_state(B)
    )["params"]
    return randomize(shapes, seed)


def window_inputs(seed: int, n_in: int = F, n_steps: int = T) -> np.ndarray:
    """x [2, B, T, n_in] float32."""
    return np.random.default_rng(seed).normal(size=(2, B, n_steps, n_in)).astype(np.float32)


def some_state(seed: int) -> TransformerState:
    """A carried memory: direction 0 row 0 full, row 1 half; direction 1 row 0 one slot, row 1 empty."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((2, B, T), bool)
    mask[0, 0, :] = True
    mask[0, 1, T // 2 :] = True
    mask[1, 0, -1] = True
    inputs = rng.normal(size=(2, B, L, T, P)).astype(np.float32) * mask[:, :, None, :, None]
    return TransformerState(jnp.asarray(inputs), jnp.asarray(mask))


def padded_mask() -> np.ndarray:
    """[2, B, T]: direction 0 row 1 ends after 1 step, direction 1 row 0 after 3; the rest full."""
    mask = np.ones((2, B, T), bool)
    mask[0, 1, 1:] = False
    mask[1, 0, 3:] = False
    return mask


def direction_params(params: Any, d: int, shared: bool) -> Any:
    """Direction d's params (float64) of the stack's tree."""
    tree = params["directions"]
    return to_f64(tree if shared else jax.tree_util.tree_map(lambda a: a[d], tree))


def finite_difference_check(loss: Any, ref_loss: Any, primal: Any, seed: int) -> None:
    """Per leaf of `primal`: <jax.grad(loss), v> vs a float64 central difference of `ref_loss` (the
    key bias has none: it adds the same score to every key of a query)."""
    grads = jax.grad(loss)(primal)
    flat, treedef = jax.tree_util.tree_flatten(to_f64(primal))
    np.testing.assert_allclose(float(loss(primal)), ref_loss(treedef.unflatten(flat)), rtol=1e-5)
    rng, eps = np.random.default_rng(seed), 1e-6
    for k, (leaf, g) in enumerate(zip(flat, jax.tree_util.tree_leaves(grads))):
        v = rng.normal(size=leaf.shape)
        plus = treedef.unflatten([f + eps * v if i == k else f for i, f in enumerate(flat)])
        minus = treedef.unflatten([f - eps * v if i == k else f for i, f in enumerate(flat)])
        fd = (ref_loss(plus) - ref_loss(minus)) / (2 * eps)
        analytic = float(np.sum(np.asarray(g, np.float64) * v))
        np.testing.assert_allclose(analytic, fd, rtol=2e-4, atol=1e-5, err_msg=f"leaf {k}")


# ----------------------------------------------------------------------------- attention and blocks


def block_case(seed: int) -> dict[str, Any]:
    """One layer's inputs: h [B, T, P], memory [B, M, P] (row 1: half empty), positions, allowed."""
    rng = np.random.default_rng(seed)
    valid = np.ones((B, 2 * T), bool)
    valid[1, : T // 2] = False  # row 1: memory half empty
    valid[1, -1] = False  # and its last step padding
    allowed = np.stack([np_allowed(v, T) for v in valid])
    return {
        "h": rng.normal(size=(B, T, P)).astype(np.float32),
        "memory": rng.normal(size=(B, T, P)).astype(np.float32),
        "position": rng.normal(size=(B, 2 * T, P)).astype(np.float32),
        "allowed": allowed,
    }


def test_attention_matches_numpy_values_and_gradients() -> None:
    case = block_case(0)
    module = SelfAttention(HEADS)
    context = np.concatenate([case["memory"], case["h"]], axis=1)
    args = (case["h"], context, case["position"], case["allowed"])
    params = randomize(jax.eval_shape(module.init, jax.random.key(0), *args)["params"], 1)
    weights = np.random.default_rng(2).normal(size=(B, T, P))

    def loss(primal: Any) -> jax.Array:
        p, x, ctx, pos = primal
        return jnp.sum(module.apply({"params": p}, x, ctx, pos, case["allowed"]) * weights)

    def ref_loss(primal: Any) -> float:
        p, x, ctx, pos = primal
        out = [np_attention(x[b], ctx[b], pos[b], case["allowed"][b], p, HEADS) for b in range(B)]
        return float(np.sum(np.stack(out) * weights))

    finite_difference_check(loss, ref_loss, (params, *args[:3]), seed=3)


@pytest.mark.parametrize("norm", NORMS)
def test_block_matches_numpy_values_and_gradients(norm: str) -> None:
    case = block_case(1)
    module = TransformerBlock(HEADS, FF, dropout=0.0, norm=norm)
    args = (case["h"], case["memory"], case["position"], case["allowed"])
    params = randomize(jax.eval_shape(module.init, jax.random.key(0), *args)["params"], 4)
    weights = np.random.default_rng(5).normal(size=(B, T, P))
    out = module.apply({"params": params}, *args)
    ref = [np_block(*to_f64((case["h"][b], case["memory"][b], case["position"][b])), case["allowed"][b],
                    to_f64(params), norm) for b in range(B)]
    np.testing.assert_allclose(out, np.stack(ref), rtol=1e-5, atol=1e-5)

    def loss(primal: Any) -> jax.Array:
        p, h, memory, pos = primal
        return jnp.sum(module.apply({"params": p}, h, memory, pos, case["allowed"]) * weights)

    def ref_loss(primal: Any) -> float:
        p, h, memory, pos = primal
        out = [np_block(h[b], memory[b], pos[b], case["allowed"][b], p, norm) for b in range(B)]
        return float(np.sum(np.stack(out) * weights))

    finite_difference_check(loss, ref_loss, (params, *args[:3]), seed=6)


# ----------------------------------------------------------------------------- the stack


@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("norm", NORMS)
def test_stack_matches_numpy_with_memory_and_padding(norm: str, positions: str, shared: bool) -> None:
    """Outputs at valid steps (zero at padding) and the next memory of both directions vs `np_direction`."""
    stack = make_stack(norm, positions, shared)
    params = stack_params(stack, seed=7)
    x, mask, state = window_inputs(8), padded_mask(), some_state(9)
    outputs, new_state = stack.apply({"params": params}, x, mask, state)
    assert len(outputs) == L and all(o.shape == (2, B, T, P) for o in outputs)
    for d in range(2):
        ref_out, ref_mem, ref_mask = np_direction(
            *to_f64((x[d], mask[d], state.inputs[d])), np.asarray(state.mask[d]),
            direction_params(params, d, shared), norm, positions,
        )
        for got, want in zip(outputs, ref_out):
            np.testing.assert_allclose(np.asarray(got[d])[mask[d]], want[mask[d]], rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(np.asarray(got[d])[~mask[d]], 0.0)
        np.testing.assert_array_equal(new_state.mask[d], ref_mask)
        kept = np.broadcast_to(ref_mask[:, None, :], ref_mem.shape[:3])
        np.testing.assert_allclose(np.asarray(new_state.inputs[d])[kept], ref_mem[kept], rtol=1e-5, atol=1e-5)


def test_stack_without_memory_and_with_inputs_of_its_width() -> None:
    """memory_length 0 and F == dim (no W_input): each window alone, as the reference without memory."""
    stack = make_stack("post", "sinusoidal", memory_length=0)
    params = stack_params(stack, n_in=P, seed=10)
    assert "W_input" not in params["directions"]
    x, mask = window_inputs(11, n_in=P), padded_mask()
    state = stack.initial_state(B)
    assert state.inputs.shape == (2, B, L, 0, P)
    outputs, new_state = stack.apply({"params": params}, x, mask, state)
    assert new_state.inputs.shape == (2, B, L, 0, P) and new_state.mask.shape == (2, B, 0)
    ref_out, _, _ = np_direction(*to_f64((x[1], mask[1], state.inputs[1])), np.asarray(state.mask[1]),
                                 direction_params(params, 1, False), "post", "sinusoidal")
    np.testing.assert_allclose(np.asarray(outputs[-1][1])[mask[1]], ref_out[-1][mask[1]], rtol=1e-5, atol=1e-5)


def test_initial_state_is_an_empty_memory_of_zeros() -> None:
    """zeros_like of any state is the initial one (training without carried state zeroes it)."""
    initial = make_stack().initial_state(B)
    assert initial.inputs.shape == (2, B, L, T, P) and initial.mask.shape == (2, B, T)
    assert initial.mask.dtype == jnp.bool_ and not np.any(initial.mask)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, some_state(0))
    for a, b in zip(zeros, initial):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- causality


@pytest.mark.parametrize("with_memory", [False, True], ids=["no_memory", "memory"])
@pytest.mark.parametrize("norm", NORMS)
def test_no_leak_from_later_steps_or_the_other_direction(norm: str, with_memory: bool) -> None:
    """d out_l[d, b, t] / d x[d', b', s] == 0 for every layer l unless (d', b') == (d, b) and s <= t;
    and the gradients for s <= t are not all zero (the test can fail)."""
    stack = make_stack(norm, "learned")
    params = stack_params(stack, seed=12)
    state = some_state(13) if with_memory else stack.initial_state(B)
    mask = np.ones((2, B, T), bool)
    x = jnp.asarray(window_inputs(14))
    jac = jax.jacrev(lambda x: stack.apply({"params": params}, x, mask, state)[0])(x)
    allowed = np.zeros((2, B, T, 2, B, T), bool)
    for d in range(2):
        for b in range(B):
            allowed[d, b, :, d, b, :] = np.tril(np.ones((T, T), bool))
    for layer in jac:  # [2, B, T, P, 2, B, T, F]
        reaches = np.abs(np.asarray(layer)).sum(axis=(3, 7)) > 0  # [2, B, T, 2, B, T]
        np.testing.assert_array_equal(reaches[~allowed], False)
        assert np.all(reaches[allowed])


def test_padding_is_never_attended_nor_kept() -> None:
    """Valid outputs depend neither on padding inputs (at the end, in front or between valid steps)
    nor on empty memory slots; padding never enters the memory; a window of padding leaves the
    state as it was."""
    stack = make_stack("pre", "learned")
    params = stack_params(stack, seed=15)
    state, mask = some_state(16), padded_mask()
    mask[0, 0] = [False, True, False, True]
    x = jnp.asarray(window_inputs(17))
    jac = jax.jacrev(lambda x: stack.apply({"params": params}, x, mask, state)[0][-1])(x)
    reaches = np.abs(np.asarray(jac)).sum(axis=(3, 7)) > 0  # [2, B, T, 2, B, T]
    assert not np.any(reaches[mask][:, ~mask])
    empty_slots = ~np.asarray(state.mask)[:, :, None, :, None]
    noisy = TransformerState(state.inputs + 100.0 * empty_slots, state.mask)
    outputs, new_state = stack.apply({"params": params}, x, mask, state)
    noisy_outputs, _ = stack.apply({"params": params}, x, mask, noisy)
    for a, b in zip(outputs, noisy_outputs):
        np.testing.assert_allclose(np.asarray(a)[mask], np.asarray(b)[mask], rtol=1e-6, atol=1e-6)
    kept = np.asarray(state.mask).sum(-1) + mask.sum(-1)
    np.testing.assert_array_equal(np.asarray(new_state.mask).sum(-1), np.minimum(kept, T))
    _, same = stack.apply({"params": params}, x, np.zeros_like(mask), state)
    np.testing.assert_array_equal(same.mask, state.mask)
    held = np.broadcast_to(~empty_slots, state.inputs.shape)
    np.testing.assert_array_equal(np.asarray(same.inputs)[held], np.asarray(state.inputs)[held])


@pytest.mark.parametrize("norm", NORMS)
def test_two_windows_with_memory_equal_one_pass_over_both(norm: str) -> None:
    """With M = T and no positions, windows [0, T) then [T, 2T) carrying the memory give the outputs
    of one causal pass over the 2T steps (a stack whose memory and window are 2T, from an empty
    memory), and the memory after them is the last T steps' layer inputs of that pass. (Positions
    number a window from M, so with them the two see the second window's tokens at other positions.)"""
    stack = make_stack(norm, "none")
    params = stack_params(stack, seed=18)
    one_pass = make_stack(norm, "none", memory_length=2 * T, max_window=2 * T)
    x = window_inputs(19, n_steps=2 * T)
    mask = np.ones((2, B, 2 * T), bool)
    whole, whole_state = one_pass.apply({"params": params}, x, mask, one_pass.initial_state(B))
    state = stack.initial_state(B)
    first, state = stack.apply({"params": params}, x[:, :, :T], mask[:, :, :T], state)
    second, state = stack.apply({"params": params}, x[:, :, T:], mask[:, :, T:], state)
    for layer_whole, a, b in zip(whole, first, second):
        np.testing.assert_allclose(np.concatenate([a, b], axis=2), layer_whole, rtol=2e-5, atol=2e-5)
    assert np.all(state.mask)
    np.testing.assert_allclose(state.inputs, whole_state.inputs[:, :, :, T:], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("valid,expected", [
    ([1, 1, 1, 1, 1, 1], [0, 1, 2, 3, 4, 5]),  # A full memory: the steady state of training.
    ([0, 0, 0, 1, 1, 1], [0, 0, 0, 3, 4, 5]),  # An empty one (a lone sentence): the window still from M.
    ([0, 1, 1, 1, 0, 1], [0, 1, 2, 3, 0, 4]),  # Partly filled memory, padding inside the window.
    ([0, 0, 1, 0, 0, 1], [0, 0, 2, 0, 0, 3]),  # Padding before the window's first token.
])
def test_a_window_is_numbered_from_the_memory_length_however_full_the_memory(valid, expected) -> None:
    """M = 3 memory slots, then 3 window slots: the window's first valid token is position 3."""
    positions = attention_positions(jnp.asarray([valid], bool), n_memory=3)
    np.testing.assert_array_equal(np.asarray(positions), [expected])


# ----------------------------------------------------------------------------- params, precision, FLOPs


def count(tree: Any) -> int:
    """Number of scalars in a tree."""
    return sum(int(np.prod(a.shape)) for a in jax.tree_util.tree_leaves(tree))


@pytest.mark.parametrize("norm", NORMS)
def test_shared_directions_halve_the_params(norm: str) -> None:
    per_block = 4 * (P * P + P) + (P * FF + FF + FF * P + P) + 2 * 2 * P
    per_direction = L * per_block + (F * P + P) + 2 * T * P + (2 * P if norm == "pre" else 0)
    separate = count(stack_params(make_stack(norm, "learned", shared=False)))
    shared = count(stack_params(make_stack(norm, "learned", shared=True)))
    assert shared == per_direction and separate == 2 * per_direction


def test_shared_directions_are_one_stack_on_both_streams() -> None:
    """Shared: both directions' outputs are one stack's, each on its own stream (same input -> same output)."""
    stack = make_stack("pre", "sinusoidal", shared=True)
    params = stack_params(stack, seed=20)
    x = window_inputs(21)
    x[1] = x[0]
    outputs, _ = stack.apply({"params": params}, x, np.ones((2, B, T), bool), stack.initial_state(B))
    np.testing.assert_array_equal(outputs[-1][0], outputs[-1][1])


def test_bfloat16_runs_close_to_float32() -> None:
    stack = make_stack("pre", "learned")
    params = stack_params(stack, seed=22)
    x, mask, state = window_inputs(23), padded_mask(), some_state(24)
    want, _ = stack.apply({"params": params}, x, mask, state)
    bf16 = make_stack("pre", "learned", dtype=jnp.bfloat16, dropout=0.1)

    def loss(p: Any) -> tuple[jax.Array, Any]:
        outputs, new_state = bf16.apply({"params": p}, x, mask, state, train=True, rngs={"dropout": jax.random.key(0)})
        return jnp.sum(outputs[-1]), new_state

    grads, new_state = jax.jit(jax.grad(loss, has_aux=True))(params)
    assert new_state.inputs.dtype == jnp.float32 and new_state.mask.dtype == jnp.bool_
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
    got, _ = jax.jit(bf16.apply)({"params": params}, x, mask, state)
    for g, w in zip(got, want):
        assert g.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(g)[mask], np.asarray(w)[mask], rtol=0.1, atol=0.1)


def test_dropout_only_in_training_and_per_direction() -> None:
    stack = make_stack("post", "none", shared=True, dropout=0.5)
    params = stack_params(stack, seed=25)
    x = window_inputs(26)
    x[1] = x[0]
    mask, state = np.ones((2, B, T), bool), stack.initial_state(B)
    plain, _ = stack.apply({"params": params}, x, mask, state)
    plain_again, _ = stack.apply({"params": params}, x, mask, state, train=False)
    dropped, _ = stack.apply({"params": params}, x, mask, state, train=True, rngs={"dropout": jax.random.key(1)})
    np.testing.assert_array_equal(plain[-1], plain_again[-1])
    assert not np.allclose(dropped[-1], plain[-1])
    assert not np.allclose(dropped[-1][0], dropped[-1][1])  # Each direction its own dropout masks.


def test_remat_same_outputs_and_gradients() -> None:
    x, mask, state = window_inputs(27), padded_mask(), some_state(28)
    params = stack_params(make_stack(), seed=29)

    def grads(stack: TransformerStack) -> Any:
        return jax.jit(jax.grad(lambda p: jnp.sum(stack.apply({"params": p}, x, mask, state)[0][-1] ** 2)))(params)

    # Gradients of order 1, the recomputed forward fused apart from the kept one: rounding to 1e-5.
    for a, b in zip(jax.tree_util.tree_leaves(grads(make_stack())), jax.tree_util.tree_leaves(grads(make_stack(remat=True)))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "fields, n_steps, message",
    [
        ({"norm": "sandwich"}, T, "norm"),
        ({"positions": "rotary"}, T, "positions"),
        ({"n_heads": 3}, T, "n_heads"),
        ({}, T + 1, "max_window"),
    ],
)
def test_refuses_bad_fields(fields: dict, n_steps: int, message: str) -> None:
    stack = make_stack(**fields)
    with pytest.raises(ValueError, match=message):
        stack.init(jax.random.key(0), jnp.zeros((2, B, n_steps, F)), jnp.ones((2, B, n_steps), bool),
                   stack.initial_state(B))


def dot_flops(jaxpr: Any) -> int:
    """FLOPs of every dot_general in a jaxpr and its sub-jaxprs (2 x output size x contracted size)."""
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            contracted = int(np.prod([eqn.invars[0].aval.shape[i] for i in lhs_contract]))
            total += 2 * int(np.prod(eqn.outvars[0].aval.shape)) * contracted
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            total += dot_flops(sub)
    return total


@pytest.mark.parametrize("n_in", [F, P])
def test_flops_per_token_count_the_forward_matmuls(n_in: int) -> None:
    """The formula vs the dot_generals of the traced forward pass, per token and direction."""
    stack = make_stack("pre", "learned")
    params = stack_params(stack, n_in=n_in)
    x, mask = jnp.zeros((2, B, T, n_in)), jnp.ones((2, B, T), bool)
    jaxpr = jax.make_jaxpr(lambda p: stack.apply({"params": p}, x, mask, stack.initial_state(B)))(params)
    traced = dot_flops(jaxpr.jaxpr) / (2 * B * T)
    assert transformer_flops_per_token(L, P, FF, T, T, n_in) == traced
