"""The loss and the per-device train step (collectives over the 'data' axis): sums and token counts
are `psum`-ed, so the loss and gradients are the global batch's whatever the device count.
Negative samples come from the replicated step RNG, one draw for the global batch or, with
`model.softmax.streams_per_draw`, one per group of streams (bilm-tf's towers).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import optax

from elmo_jax.config import schema
from elmo_jax.data.batching import Batch
from elmo_jax.model.bilm import BiLM
from elmo_jax.model import softmax as softmax_lib
from elmo_jax.training import softmax_rows
from elmo_jax.runtime.data_parallel import AXIS
from elmo_jax.training.state import TrainState


class NegativeSampler:
    """The negatives of one step and their log expected counts, from the keys of `model.softmax`.

    One draw per negative set: `streams_per_draw` S < B splits the global batch of B streams into
    G = B / S groups (bilm-tf's towers), `negatives_per_direction` gives each direction its own
    (bilm-tf's two `sampled_softmax_loss` calls); by default one set for the whole batch. Sets belong
    to the global batch, so the loss does not depend on the device count; every device draws all.
    """

    def __init__(
        self, vocab_size: int, batch_size: int, n_negative_samples: int, unique_samples: bool,
        streams_per_draw: int, negatives_per_direction: bool, **_: Any,
    ):
        self.vocab_size = vocab_size
        self.num_sampled = n_negative_samples
        self.unique = unique_samples
        self.num_tries = softmax_lib.unique_sampling_tries(vocab_size, n_negative_samples) if unique_samples else None
        self.groups = draw_groups(streams_per_draw, batch_size)
        self.directions = 2 if negatives_per_direction else 1

    def draw(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Every set's negative ids and their log expected counts, `[D, G, K]` each (D directions): one
        set draws from `rng` itself (a single-set run's draw is unchanged), several from `fold_in(rng, i)`."""
        n_sets = self.directions * self.groups
        keys = rng[None] if n_sets == 1 else jax.vmap(lambda i: jax.random.fold_in(rng, i))(jnp.arange(n_sets))

        def sample(key: jax.Array) -> tuple[jax.Array, jax.Array]:
            return softmax_lib.sample_log_uniform(key, self.vocab_size, self.num_sampled, self.unique, self.num_tries)

        ids, log_expected = jax.vmap(sample)(keys)
        shape = (self.directions, self.groups, self.num_sampled)
        return ids.reshape(shape), log_expected.reshape(shape)

    def target_log_expected(self, targets: jax.Array) -> jax.Array:
        """The targets' (any shape) log expected counts in a set's draw."""
        p_target = softmax_lib.log_uniform_probs(targets, self.vocab_size)
        if self.unique:
            return jnp.log(-jnp.expm1(self.num_tries * jnp.log1p(-p_target)))
        return jnp.log(self.num_sampled * p_target)


def draw_groups(streams_per_draw: int, batch_size: int) -> int:
    """The number G of groups of streams drawing their own negatives (1: one draw per step)."""
    if streams_per_draw == 0 or streams_per_draw >= batch_size:
        return 1
    if batch_size % streams_per_draw:
        raise ValueError(
            f"train.batch_size={batch_size} must be a multiple of model.softmax.streams_per_draw={streams_per_draw}"
        )
    return batch_size // streams_per_draw


class NegativeSetLayout:
    """This device's tokens `[2, b, T, ...]` arranged by negative set, `[S, M, ...]`, and back.

    The device holds whole groups `first` .. `first + n_local - 1` (G a multiple of the device
    count) or part of group `first` (the device count a multiple of G). A set is one direction of
    a group (S = 2 n_local) with negatives per direction, else both (S = n_local).
    """

    def __init__(self, sampler: NegativeSampler, local_rows: int):
        n_devices, groups = jax.lax.axis_size(AXIS), sampler.groups
        if groups % n_devices and n_devices % groups:
            raise ValueError(
                f"model.softmax.streams_per_draw gives {groups} groups of streams: that and the device "
                f"count {n_devices} must divide one another"
            )
        self.n_local = max(groups // n_devices, 1)
        self.first = jax.lax.axis_index(AXIS) * groups // n_devices
        self.per_direction = sampler.directions == 2

    def local_sets(self, x: jax.Array) -> jax.Array:
        """Every set's `[D, G, K]` -> this device's sets `[S, K]`."""
        return jax.lax.dynamic_slice_in_dim(x, self.first, self.n_local, axis=1).reshape(-1, x.shape[-1])

    def to_sets(self, x: jax.Array) -> jax.Array:
        """`[2, b, T, ...]` -> `[S, M, ...]`, each set's tokens contiguous."""
        x = x.reshape(2, self.n_local, -1, *x.shape[3:])  # [2, L, b T / L, ...]
        if self.per_direction:
            return x.reshape(-1, *x.shape[2:])
        return jnp.moveaxis(x, 0, 1).reshape(self.n_local, -1, *x.shape[3:])

    def from_sets(self, y: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        """`[S, M]` -> `shape` `[2, b, T]`: the inverse of `to_sets`."""
        if self.per_direction:
            return y.reshape(shape)
        return jnp.moveaxis(y.reshape(self.n_local, 2, -1), 1, 0).reshape(shape)


def uses_row_updates(config: ml_collections.ConfigDict) -> bool:
    """Whether the train step updates only the touched softmax rows (see softmax_rows)."""
    return (
        config.train.softmax_row_updates
        and config.model.softmax.sampled
        and config.train.optimizer.name in softmax_rows.EXACT_FOR_OPTIMIZERS
    )


class Scored(NamedTuple):
    """What the loss scores, in the rows of the softmax it is given: the targets `[2, b, T]` and, for
    the sampled softmax, this device's negative sets (rows `[S, K]`, log expected counts `[S, K]`),
    the targets' log expected counts `[S, M]` and the layout of tokens by set."""

    target_rows: jax.Array
    sampled_rows: jax.Array | None = None
    sampled_log_expected: jax.Array | None = None
    target_log_expected: jax.Array | None = None
    layout: NegativeSetLayout | None = None


def training_loss(
    model: BiLM, chunk_size: int, loss_scale: float, params: Any, inputs: dict[str, jax.Array],
    carried_state: list[Any], scored: Scored, dropout_rng: jax.Array, global_count: jax.Array,
) -> tuple[jax.Array, tuple[list[Any], jax.Array]]:
    """`loss_scale` x this device's share of the global batch's loss, and (the new carried state, the
    directions' shares of the mean NLL `[2]`); what `jax.value_and_grad` differentiates.

    The loss is the mean over the directions of each one's mean NLL over the global batch's
    `global_count` `[2]` tokens (bilm-tf's mean of tower means, its batches being always full).
    """
    _, top, new_state = model.apply(
        {"params": params}, inputs, carried_state, train=True, rngs={"dropout": dropout_rng}
    )
    w, b = params["softmax"]["W"], params["softmax"]["b"]  # All rows, or the touched ones.
    mask = inputs["mask"].astype(jnp.float32)  # [2, b, T]
    if scored.layout is not None:
        layout = scored.layout
        nll = softmax_lib.grouped_sampled_softmax_nll(
            w, b, layout.to_sets(top), layout.to_sets(scored.target_rows), scored.sampled_rows,
            scored.sampled_log_expected, scored.target_log_expected, model.dtype,
        )
        nll = layout.from_sets(nll, mask.shape)
    else:
        hidden = top.reshape(-1, top.shape[-1])
        nll = softmax_lib.full_softmax_nll(w, b, hidden, scored.target_rows.reshape(-1), chunk_size)
        nll = nll.reshape(mask.shape)
    direction_nll = (nll * mask).sum(axis=(1, 2)) / global_count  # [2]
    return loss_scale * 0.5 * direction_nll.sum(), (new_state, direction_nll)


def make_train_step(
    model: BiLM, config: ml_collections.ConfigDict
) -> Callable[[TrainState, Batch], tuple[TrainState, dict]]:
    """The per-device train step `(state, batch) -> (state, metrics)`; run under shard_map.

    metrics['nonfinite'] is 1.0 when the loss or the gradient norm is NaN or infinite; with
    `train.nonfinite_policy='skip'` such a step changes only the step counter (the next step sees
    new data and negatives).
    """
    skip_nonfinite = config.train.nonfinite_policy == "skip"
    softmax = schema.section_options(config.model.softmax, "model.softmax")
    sampler = NegativeSampler(model.vocab_size, config.train.batch_size, **softmax) if softmax["sampled"] else None
    row_updates = uses_row_updates(config)
    stateful, loss_scale = config.train.stateful, config.train.loss_scale
    loss_fn = functools.partial(training_loss, model, softmax["chunk_size"], loss_scale)

    def train_step(state: TrainState, inputs: Batch) -> tuple[TrainState, dict]:
        # The negatives' RNG is the same on every device, the dropout RNG this device's own.
        sample_rng, dropout_rng = jax.random.split(jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step))
        dropout_rng = jax.random.fold_in(dropout_rng, jax.lax.axis_index(AXIS))
        carried_state = state.carried_state if stateful else jax.tree.map(jnp.zeros_like, state.carried_state)
        global_count = jnp.maximum(jax.lax.psum(inputs["mask"].astype(jnp.float32).sum(axis=(1, 2)), AXIS), 1.0)
        targets = inputs["targets"]  # [2, b, T]
        scored, all_ids = Scored(targets), None
        if sampler is not None:
            layout = NegativeSetLayout(sampler, targets.shape[1])
            all_ids, all_log_expected = sampler.draw(sample_rng)  # [D, G, K]: every device draws all sets
            scored = Scored(
                targets, layout.local_sets(all_ids), layout.local_sets(all_log_expected),
                layout.to_sets(sampler.target_log_expected(targets)), layout,
            )
        params, opt_state, view = state.params, state.opt_state, None
        if row_updates:
            # The rows of every device's targets and of every set's negatives: the same on all devices.
            all_targets = jax.lax.all_gather(targets.reshape(-1), AXIS, tiled=True)
            rows = softmax_rows.touched_rows(jnp.concatenate([all_targets, all_ids.reshape(-1)]), model.vocab_size)
            view = softmax_rows.RowView(rows, model.vocab_size)
            params, opt_state = view.gather(params), view.gather(opt_state)
            scored = scored._replace(
                target_rows=view.positions(targets), sampled_rows=view.positions(scored.sampled_rows)
            )

        (scaled_loss, (new_carried_state, direction_nll)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, inputs, carried_state, scored, dropout_rng, global_count
        )
        grads = jax.lax.psum(grads, AXIS)
        loss = jax.lax.psum(scaled_loss, AXIS) / loss_scale
        direction_nll = jax.lax.psum(direction_nll, AXIS)
        grad_norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)  # Equal on every device (psum-ed).
        new_state = _apply_gradients(state, params, opt_state, grads, new_carried_state, finite, skip_nonfinite, view)
        metrics = {
            "train_loss": loss,
            "train_forward_loss": direction_nll[0],
            "train_backward_loss": direction_nll[1],
            "grad_norm": grad_norm,
            "tokens": global_count.sum() / 2,
            "nonfinite": 1.0 - finite.astype(jnp.float32),
        }
        return new_state, metrics

    return train_step


def _apply_gradients(
    state: TrainState, params: Any, opt_state: Any, grads: Any, new_carried_state: list[Any], finite: jax.Array,
    skip_nonfinite: bool, view: softmax_rows.RowView | None,
) -> TrainState:
    """The next state: the optimizer's update of `params` (all of them, or the softmax rows of
    `view` written back into the full tables), the new carried state, the step + 1; with
    `skip_nonfinite`, a non-finite step keeps the old params, optimizer and carried state."""
    updates, new_opt_state = state.tx.update(grads, opt_state, params)
    updated = (optax.apply_updates(params, updates), new_opt_state, jax.lax.stop_gradient(new_carried_state))
    if skip_nonfinite:
        kept = (params, opt_state, state.carried_state)
        updated = jax.tree.map(lambda new, old: jnp.where(finite, new, old), updated, kept)
    new_params, new_opt_state, new_carried_state = updated
    if view is not None:
        new_params = view.scatter(state.params, new_params)
        new_opt_state = view.scatter(state.opt_state, new_opt_state)
    return state.replace(
        step=state.step + 1, params=new_params, opt_state=new_opt_state, carried_state=new_carried_state
    )
