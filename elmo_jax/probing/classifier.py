"""Probes: classifiers trained on frozen token representations `[N, K, D]` (K = n_layers + 1).

Heads, each a stack of probes with a leading probe axis in all its params: `linear`, a softmax
classifier on each layer (Liu et al. 2019); `mix`, one on ELMo's scalar mix of all layers
(`ScalarMix`, Peters et al. 2018, eq. 1); `mlp` (optional), one hidden ReLU layer on each layer.
Each layer is standardised by its mean and std over the training tokens (so the mix weighs layers
of one scale, as ELMo's `do_layer_norm`); a layer narrower than D (`layer_dims`) keeps zero padding.

All probes train at once: minibatch Adam on the sum of their losses (disjoint params: each gets its
own gradient), one compiled scan an epoch; each keeps its best dev epoch's params, and training
stops once none improved for `patience` epochs. Labels are ints; -1 (a label training never had)
always counts as an error. Groups (`label_groups` `[n_labels]`, `groups` `[N]`) make one classifier
per group (e.g. per ambiguous word): a token's softmax ranges over its group's labels only.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from elmo_jax.model.scalar_mix import ScalarMix

Params = dict[str, dict[str, jax.Array]]  # head name -> param name -> `[n_probes, ...]`.


@dataclasses.dataclass(frozen=True)
class ProbeConfig:
    """How the probes train; `mlp_hidden` > 0 adds the MLP probes of that width; `eval_chunk` tokens
    are scored per step of an evaluation."""

    learning_rate: float = 1e-3
    batch_size: int = 256
    max_epochs: int = 50
    patience: int = 3
    mlp_hidden: int = 0
    seed: int = 0
    eval_chunk: int = 4096


# The training of probes on a few thousand examples (word senses, WiC) rather than a treebank's
# tens of thousands of tokens: minibatches of 32 for enough steps per epoch.
SMALL_TASK_CONFIG = ProbeConfig(batch_size=32)


@dataclasses.dataclass
class TrainedProbes:
    """The best params of each probe, the standardisation they read features through (`mean`, `std`
    `[K, D]`), each probe's dev accuracy and 1-based epoch at its best (head -> `[n_probes]`)."""

    params: Params
    mean: np.ndarray
    std: np.ndarray
    dev_accuracy: dict[str, np.ndarray]
    best_epoch: dict[str, np.ndarray]
    epochs: int
    label_groups: np.ndarray | None = None  # `[n_labels]` int, each label's group; None: one group.


def training_record(trained: TrainedProbes, config: ProbeConfig) -> dict[str, Any]:
    """What a probe result records of its training, the same for every task."""
    mix = trained.params["mix"]
    return {
        "mix_weights": np.asarray(jax.nn.softmax(mix["scalar_parameters"][0])).tolist(),
        "mix_gamma": float(mix["gamma"][0]),
        "dev_layers": trained.dev_accuracy["linear"].tolist(),
        "dev_mix": float(trained.dev_accuracy["mix"][0]),
        "epochs": trained.epochs,
        "best_epoch": {name: epochs.tolist() for name, epochs in trained.best_epoch.items()},
        "probe_config": dataclasses.asdict(config),
    }


def layer_statistics(
    x: np.ndarray, chunk: int = 8192, layer_dims: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation `[K]` of each layer of `x` `[N, K, D]` over tokens and its first
    `layer_dims[k]` columns (default all D; padding zeros add nothing to the sums), in float64 chunk
    by chunk (no copy of `x`); a constant layer gets std 1."""
    total = np.zeros(x.shape[1])
    squares = np.zeros(x.shape[1])
    for start in range(0, x.shape[0], chunk):
        part = x[start : start + chunk].astype(np.float64)
        total += part.sum(axis=(0, 2))
        squares += np.square(part).sum(axis=(0, 2))
    dims = np.full(x.shape[1], x.shape[2]) if layer_dims is None else np.asarray(layer_dims)
    count = x.shape[0] * dims
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
    return mean.astype(np.float32), np.where(std > 0, std, 1.0).astype(np.float32)


def column_statistics(
    mean: np.ndarray, std: np.ndarray, layer_dims: Sequence[int], dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """The per-layer `mean`, `std` `[K]` as `[K, dim]` columns: layer k's own columns take its
    statistics, its padding columns mean 0 and std 1 (they stay zero through `standardize`)."""
    own = np.arange(dim) < np.asarray(layer_dims)[:, None]
    return np.where(own, mean[:, None], 0.0).astype(np.float32), np.where(own, std[:, None], 1.0).astype(np.float32)


def standardize(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    """`[B, K, D]` with each layer k as (x - mean_k) / std_k; mean and std `[K]` or `[K, D]`."""
    k = mean.shape[0]
    return (x - mean.reshape(k, -1)) / std.reshape(k, -1)


def init_params(key: jax.Array, n_layers: int, dim: int, n_labels: int, mlp_hidden: int = 0) -> Params:
    """Zero linear classifiers, an equal mix (s = 0, gamma = 1) and, with `mlp_hidden`, Glorot-uniform
    MLPs; `n_layers` counts the token layer (K)."""
    k = n_layers
    params = {
        "linear": {"w": jnp.zeros((k, dim, n_labels)), "b": jnp.zeros((k, n_labels))},
        "mix": {
            "scalar_parameters": jnp.zeros((1, k)), "gamma": jnp.ones((1,)),
            "w": jnp.zeros((1, dim, n_labels)), "b": jnp.zeros((1, n_labels)),
        },
    }
    if mlp_hidden:
        glorot = jax.nn.initializers.glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=0)
        hidden_key, out_key = jax.random.split(key)
        params["mlp"] = {
            "w1": glorot(hidden_key, (k, dim, mlp_hidden)), "b1": jnp.zeros((k, mlp_hidden)),
            "w2": glorot(out_key, (k, mlp_hidden, n_labels)), "b2": jnp.zeros((k, n_labels)),
        }
    return params


def mixed_layers(params: Params, x: jax.Array) -> jax.Array:
    """What the mix probe reads: gamma * sum_k softmax(s)_k x_k `[B, D]` of standardised x `[B, K, D]`."""
    mix = params["mix"]
    weights = {"scalar_parameters": mix["scalar_parameters"][0], "gamma": mix["gamma"][0]}
    return ScalarMix(x.shape[1]).apply({"params": weights}, x.transpose(1, 0, 2))


_EXCLUDED = -1e30  # The logit of a label outside a token's group: no probability, never the argmax.


def allowed_labels(groups: jax.Array, label_groups: jax.Array) -> jax.Array:
    """`[B, n_labels]` bool: which labels are in the group of each token (`groups` `[B]`)."""
    return groups[:, None] == label_groups[None, :]


def head_logits(params: Params, x: jax.Array, allowed: jax.Array | None = None) -> dict[str, jax.Array]:
    """Each head's logits `[n_probes, B, n_labels]` on standardised x `[B, K, D]`; `allowed` `[B,
    n_labels]` (`allowed_labels`): the other labels' logits set to a large negative number."""
    linear = params["linear"]
    logits = {"linear": jnp.einsum("bkd,kdc->kbc", x, linear["w"]) + linear["b"][:, None]}
    mix = params["mix"]
    logits["mix"] = (mixed_layers(params, x) @ mix["w"][0] + mix["b"][0])[None]
    if "mlp" in params:
        mlp = params["mlp"]
        hidden = jax.nn.relu(jnp.einsum("bkd,kdh->kbh", x, mlp["w1"]) + mlp["b1"][:, None])
        logits["mlp"] = jnp.einsum("kbh,khc->kbc", hidden, mlp["w2"]) + mlp["b2"][:, None]
    if allowed is None:
        return logits
    return {name: jnp.where(allowed[None], v, _EXCLUDED) for name, v in logits.items()}


def probe_losses(
    params: Params, x: jax.Array, labels: jax.Array, allowed: jax.Array | None = None
) -> dict[str, jax.Array]:
    """Each probe's mean softmax cross-entropy `[n_probes]` on standardised x `[B, K, D]`, labels `[B]`
    (`allowed`: as `head_logits`)."""
    return {
        name: optax.softmax_cross_entropy_with_integer_labels(logits, labels[None]).mean(axis=-1)
        for name, logits in head_logits(params, x, allowed).items()
    }


def _total_loss(params: Params, x: jax.Array, labels: jax.Array, allowed: jax.Array) -> jax.Array:
    return sum(jnp.sum(loss) for loss in probe_losses(params, x, labels, allowed).values())


def _epoch_fn(tx: optax.GradientTransformation, batch_size: int) -> Callable:
    """A compiled epoch of Adam steps over the minibatches of a permutation of the tokens by `key`
    (the last partial one left out), returning (params, opt_state)."""

    @jax.jit
    def epoch(params: Params, opt_state: Any, x: jax.Array, labels: jax.Array, groups: jax.Array,
              label_groups: jax.Array, mean: jax.Array, std: jax.Array, key: jax.Array):
        def step(carry: tuple, indices: jax.Array) -> tuple[tuple, None]:
            params, opt_state = carry
            allowed = allowed_labels(groups[indices], label_groups)
            grads = jax.grad(_total_loss)(params, standardize(x[indices], mean, std), labels[indices], allowed)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        steps = x.shape[0] // batch_size
        order = jax.random.permutation(key, x.shape[0])[: steps * batch_size].reshape(steps, batch_size)
        return jax.lax.scan(step, (params, opt_state), order)[0]

    return epoch


@functools.partial(jax.jit, static_argnames="chunk")
def _predict(params: Params, x: jax.Array, groups: jax.Array, label_groups: jax.Array, mean: jax.Array,
             std: jax.Array, chunk: int) -> dict[str, jax.Array]:
    """Each probe's predicted labels `[n_probes, N]` over x `[N, K, D]`, `chunk` tokens at a time
    (the last chunk ends at N; of it only the tokens no earlier chunk had are kept)."""
    n = x.shape[0]
    chunk = min(chunk, n)
    n_chunks = -(-n // chunk)

    def predict(i: jax.Array) -> dict[str, jax.Array]:
        start = jnp.minimum(i * chunk, n - chunk)
        xs = standardize(jax.lax.dynamic_slice_in_dim(x, start, chunk), mean, std)
        allowed = allowed_labels(jax.lax.dynamic_slice_in_dim(groups, start, chunk), label_groups)
        return {name: jnp.argmax(v, axis=-1) for name, v in head_logits(params, xs, allowed).items()}

    def in_order(chunks: jax.Array) -> jax.Array:  # [n_chunks, n_probes, chunk] -> [n_probes, N]
        whole = chunks[:-1].transpose(1, 0, 2).reshape(chunks.shape[1], -1)
        return jnp.concatenate([whole, chunks[-1][:, (n_chunks - 1) * chunk - (n - chunk) :]], axis=1)

    return jax.tree.map(in_order, jax.lax.map(predict, jnp.arange(n_chunks)))


def predictions(
    probes: TrainedProbes, x: np.ndarray | jax.Array, groups: np.ndarray | None = None, chunk: int = 4096
) -> dict[str, np.ndarray]:
    """Each probe's predicted label of each token `[n_probes, N]` int (head name -> NumPy array) on x
    `[N, K, D]`; `groups` `[N]`: each token's group (the module's docstring; default all 0)."""
    if len(x) == 0:
        raise ValueError("no tokens to score")
    n_labels = probes.params["linear"]["b"].shape[-1]
    label_groups = np.zeros(n_labels, np.int32) if probes.label_groups is None else probes.label_groups
    groups = np.zeros(len(x), np.int32) if groups is None else groups
    predicted = _predict(probes.params, x, jnp.asarray(groups), jnp.asarray(label_groups), probes.mean, probes.std,
                         chunk)
    return {name: np.asarray(p) for name, p in predicted.items()}


def accuracies(
    probes: TrainedProbes, x: np.ndarray | jax.Array, labels: np.ndarray, chunk: int = 4096,
    groups: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Each probe's accuracy `[n_probes]` (head name -> NumPy array) on x `[N, K, D]`; label -1: an
    error; `groups`: as `predictions`."""
    predicted = predictions(probes, x, groups, chunk)
    return {name: np.mean(p == np.asarray(labels)[None], axis=1) for name, p in predicted.items()}


@jax.jit
def _keep_best(best: Params, params: Params, improved: dict[str, jax.Array]) -> Params:
    """`best` with each probe whose dev accuracy `improved` replaced by its `params`."""
    return {
        head: jax.tree.map(
            lambda b, p: jnp.where(improved[head].reshape((-1,) + (1,) * (p.ndim - 1)), p, b), best[head], params[head]
        )
        for head in best
    }


def train_probes(
    train_x: np.ndarray, train_labels: np.ndarray, dev_x: np.ndarray, dev_labels: np.ndarray, n_labels: int,
    config: ProbeConfig = ProbeConfig(), progress: bool = True, layer_dims: Sequence[int] | None = None, *,
    label_groups: np.ndarray | None = None, train_groups: np.ndarray | None = None,
    dev_groups: np.ndarray | None = None,
) -> TrainedProbes:
    """Trains every probe on `train_x` `[N, K, D]` with int labels in [0, n_labels), early-stopped
    on the dev accuracy (`dev_labels` may hold -1). `layer_dims`: each layer's own width (default:
    all D). `label_groups` `[n_labels]`, `train_groups` `[N]`, `dev_groups`: all three or none."""
    if len(train_labels) == 0 or len(dev_labels) == 0:
        raise ValueError("probes need training and dev tokens")
    given = [a is not None for a in (label_groups, train_groups, dev_groups)]
    if any(given) and not all(given):
        raise ValueError("label_groups, train_groups and dev_groups go together")
    if label_groups is None:
        label_groups = np.zeros(n_labels, np.int32)
        train_groups, dev_groups = np.zeros(len(train_labels), np.int32), np.zeros(len(dev_labels), np.int32)
    if len(label_groups) != n_labels:
        raise ValueError(f"label_groups must have n_labels={n_labels} entries, got {len(label_groups)}")
    _, k, dim = train_x.shape
    layer_dims = [dim] * k if layer_dims is None else list(layer_dims)
    if len(layer_dims) != k or not all(0 < d <= dim for d in layer_dims):
        raise ValueError(f"layer_dims must be {k} widths in [1, {dim}], got {layer_dims}")
    mean, std = column_statistics(*layer_statistics(train_x, layer_dims=layer_dims), layer_dims, dim)
    key = jax.random.key(config.seed)
    params = init_params(jax.random.fold_in(key, 0), k, dim, n_labels, config.mlp_hidden)
    tx = optax.adam(config.learning_rate)
    opt_state = tx.init(params)
    epoch = _epoch_fn(tx, min(config.batch_size, len(train_labels)))
    x, labels, dev = jnp.asarray(train_x), jnp.asarray(train_labels), jnp.asarray(dev_x)
    groups, label_groups = jnp.asarray(train_groups), np.asarray(label_groups, np.int32)
    best = TrainedProbes(params, mean, std, {}, {}, 0, label_groups)
    best.dev_accuracy = accuracies(best, dev, dev_labels, config.eval_chunk, dev_groups)
    best.best_epoch = {name: np.zeros(len(a), int) for name, a in best.dev_accuracy.items()}
    stale = 0
    bar = tqdm(range(1, config.max_epochs + 1), unit=" epochs", desc="probes", disable=not progress)
    for n in bar:
        params, opt_state = epoch(
            params, opt_state, x, labels, groups, label_groups, mean, std, jax.random.fold_in(key, n)
        )
        current = accuracies(dataclasses.replace(best, params=params), dev, dev_labels, config.eval_chunk, dev_groups)
        improved = {name: current[name] > best.dev_accuracy[name] for name in current}
        best.params = _keep_best(best.params, params, improved)
        for name, better in improved.items():
            best.dev_accuracy[name] = np.where(better, current[name], best.dev_accuracy[name])
            best.best_epoch[name] = np.where(better, n, best.best_epoch[name])
        best.epochs = n
        stale = 0 if any(better.any() for better in improved.values()) else stale + 1
        bar.set_postfix(dev=f"{max(a.max() for a in best.dev_accuracy.values()):.4f}")
        if stale >= config.patience:
            break
    bar.close()
    return best
