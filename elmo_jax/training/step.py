"""Loss and the per-device train / eval steps (pmap-style: collectives over the 'data' axis).

The per-device functions see their shard of the global batch; sums and token counts are
`psum`-ed so the loss and gradients equal those of the global batch on one device, whatever the
device count. Negative samples come from the replicated step RNG: one draw for the global batch.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import optax

from elmo_jax.model.bilm import BiLM
from elmo_jax.model.lstm import LSTMState
from elmo_jax.model import softmax as softmax_lib
from elmo_jax.training import softmax_rows
from elmo_jax.training.state import TrainState

AXIS = "data"
Batch = dict[str, dict[str, jax.Array]]
NONFINITE_POLICIES = ("stop", "skip")


def stack_directions(batch: Batch) -> dict[str, jax.Array]:
    """{'forward': {k: [B,...]}, 'backward': {...}} -> {k: [2, B, ...]}."""
    return {k: jnp.stack([batch["forward"][k], batch["backward"][k]]) for k in batch["forward"]}


class NegativeSampler:
    """The negatives of one step and the log expected counts, from `config.model.softmax`."""

    def __init__(self, softmax_config: ml_collections.ConfigDict, vocab_size: int):
        self.vocab_size = vocab_size
        self.num_sampled = softmax_config.n_negative_samples
        self.unique = softmax_config.unique_samples
        self.num_tries = (
            softmax_lib.unique_sampling_tries(vocab_size, self.num_sampled) if self.unique else None
        )

    def __call__(self, rng: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """targets `[N]` -> (negative ids `[K]`, their log expected counts `[K]`, the targets' `[N]`)."""
        ids, log_expected = softmax_lib.sample_log_uniform(rng, self.vocab_size, self.num_sampled, self.unique, self.num_tries)
        p_target = softmax_lib.log_uniform_probs(targets, self.vocab_size)
        if self.unique:
            target_log_expected = jnp.log(-jnp.expm1(self.num_tries * jnp.log1p(-p_target)))
        else:
            target_log_expected = jnp.log(self.num_sampled * p_target)
        return ids, log_expected, target_log_expected


def uses_row_updates(config: ml_collections.ConfigDict) -> bool:
    """Whether the train step updates only the touched softmax rows (see softmax_rows)."""
    return (
        config.train.softmax_row_updates
        and config.model.softmax.sampled
        and config.train.optimizer.name in softmax_rows.EXACT_FOR_OPTIMIZERS
    )


def make_train_step(model: BiLM, config: ml_collections.ConfigDict) -> Callable[[TrainState, Batch], tuple[TrainState, dict]]:
    """The per-device train step `(state, batch) -> (state, metrics)`; run under shard_map.

    metrics['nonfinite'] is 1.0 when the loss or the gradient norm is NaN or infinite; with
    `train.nonfinite_policy='skip'` such a step leaves params, optimizer and LSTM states unchanged
    (the step counter still advances, so the next step sees new data and negatives).
    """
    if config.train.nonfinite_policy not in NONFINITE_POLICIES:
        raise ValueError(
            f"train.nonfinite_policy must be one of {NONFINITE_POLICIES}, got {config.train.nonfinite_policy!r}"
        )
    skip_nonfinite = config.train.nonfinite_policy == "skip"
    softmax_config = config.model.softmax
    sampler = NegativeSampler(softmax_config, model.vocab_size) if softmax_config.sampled else None
    row_updates = uses_row_updates(config)
    stateful = config.train.stateful
    loss_scale = float(config.train.get("loss_scale", 1.0))
    if not loss_scale > 0:
        raise ValueError(f"train.loss_scale must be > 0, got {loss_scale}")

    def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, dict]:
        inputs = stack_directions(batch)
        rng = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
        sample_rng, dropout_rng = jax.random.split(rng)
        dropout_rng = jax.random.fold_in(dropout_rng, jax.lax.axis_index(AXIS))
        lstm_state = state.lstm_state
        if not stateful:
            lstm_state = jax.tree.map(jnp.zeros_like, lstm_state)
        mask = inputs["mask"].astype(jnp.float32)  # [2, b, T]
        global_count = jnp.maximum(jax.lax.psum(mask.sum(axis=(1, 2)), AXIS), 1.0)  # [2]
        targets = inputs["targets"].reshape(-1)
        if sampler is not None:
            sampled_ids, sampled_log_expected, target_log_expected = sampler(sample_rng, targets)
        params, opt_state = state.params, state.opt_state
        if row_updates:
            # The rows of every device's targets and the shared negatives: the same on all devices.
            all_targets = jax.lax.all_gather(targets, AXIS, tiled=True)
            view = softmax_rows.RowView(
                softmax_rows.touched_rows(jnp.concatenate([all_targets, sampled_ids]), model.vocab_size),
                model.vocab_size,
            )
            params, opt_state = view.gather(params), view.gather(opt_state)
            target_rows, sampled_rows = view.positions(targets), view.positions(sampled_ids)
        elif sampler is not None:
            target_rows, sampled_rows = targets, sampled_ids

        def loss_fn(params: Any) -> tuple[jax.Array, tuple[list[LSTMState], jax.Array]]:
            _, top, new_state = model.apply(
                {"params": params}, inputs, lstm_state, train=True, rngs={"dropout": dropout_rng}
            )
            w, b = params["softmax"]["W"], params["softmax"]["b"]  # all rows, or the touched ones
            hidden = top.reshape(-1, top.shape[-1])
            if sampler is not None:
                nll = softmax_lib.sampled_softmax_nll(
                    w, b, hidden, target_rows, sampled_rows, sampled_log_expected, target_log_expected, model.dtype
                )
            else:
                nll = softmax_lib.full_softmax_nll(w, b, hidden, targets, softmax_config.chunk_size)
            direction_nll = (nll.reshape(mask.shape) * mask).sum(axis=(1, 2)) / global_count  # [2]
            return loss_scale * 0.5 * direction_nll.sum(), (new_state, direction_nll)

        (scaled_loss, (new_lstm_state, direction_nll)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        grads = jax.lax.psum(grads, AXIS)
        loss = jax.lax.psum(scaled_loss, AXIS) / loss_scale
        direction_nll = jax.lax.psum(direction_nll, AXIS)
        updates, new_opt_state = state.tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        grad_norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)  # Equal on every device (psum-ed).
        updated = (new_params, new_opt_state, jax.lax.stop_gradient(new_lstm_state))
        if skip_nonfinite:
            kept = (params, opt_state, state.lstm_state)
            updated = jax.tree.map(lambda new, old: jnp.where(finite, new, old), updated, kept)
        new_params, new_opt_state, new_lstm_state = updated
        if row_updates:  # Write the touched rows back into the full tables.
            new_params = view.scatter(state.params, new_params)
            new_opt_state = view.scatter(state.opt_state, new_opt_state)
        new_state = state.replace(
            step=state.step + 1, params=new_params, opt_state=new_opt_state, lstm_state=new_lstm_state
        )
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


def make_eval_step(model: BiLM, chunk_size: int) -> Callable[[Any, list[LSTMState], Batch], tuple[list[LSTMState], dict]]:
    """Per-device eval step `(params, lstm_state, batch) -> (lstm_state, sums)`: full softmax.

    Returns summed NLL `[2]` and token counts `[2]` (forward, backward) over the global batch.
    """

    def eval_step(params: Any, lstm_state: list[LSTMState], batch: Batch) -> tuple[list[LSTMState], dict]:
        inputs = stack_directions(batch)
        _, top, new_state = model.apply({"params": params}, inputs, lstm_state, train=False)
        w, b = params["softmax"]["W"], params["softmax"]["b"]
        nll = softmax_lib.full_softmax_nll(w, b, top.reshape(-1, top.shape[-1]), inputs["targets"].reshape(-1), chunk_size)
        mask = inputs["mask"].astype(jnp.float32)
        sums = {
            "nll": jax.lax.psum((nll.reshape(mask.shape) * mask).sum(axis=(1, 2)), AXIS),
            "count": jax.lax.psum(mask.sum(axis=(1, 2)), AXIS),
        }
        return new_state, sums

    return eval_step
