"""The scorers and losses of the biaffine dependency parser (Dozat & Manning 2017, "Deep Biaffine
Attention for Neural Dependency Parsing"): arc scores of every (dependent, head) pair, label scores
of each dependent given its head, and their cross-entropies over the real words.

Position 0 of `encoded` is the root (a learned vector the parser prepends). The MLPs are Dense +
leaky ReLU (slope 0.1), the activation of Dozat & Manning's released parser and of SuPar (unlike ReLU,
never a zero gradient). The biaffine weights start at zero (as the paper's code and
SuPar): every score starts at 0 (uniform attention over the heads), and the MLPs learn once they move.
Scores follow `tree_decoding.decode_tree`: `scores[b, d, h]` scores word h as the head of word d.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

LEAKY_RELU_SLOPE = 0.1
MASKED_SCORE = -1e9  # The score of a head that is not a candidate: no weight after the softmax.


class _MLP(nn.Module):
    """Dense + leaky ReLU + dropout: `[..., dim]` -> `[..., features]`."""

    features: int
    dropout: float

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool) -> jax.Array:
        hidden = nn.leaky_relu(nn.Dense(self.features)(x), negative_slope=LEAKY_RELU_SLOPE)
        return nn.Dropout(self.dropout)(hidden, deterministic=deterministic)


class BiaffineArcScorer(nn.Module):
    """Arc scores `s[b, d, h] = dep_d @ U @ head_h + head_h @ u` (paper eq. 3-6) of the dependent and
    head MLPs' `[batch, time + 1, arc_dim]` outputs; `head_h @ u` is the prior of word h being a head.
    Params: `dep_mlp`, `head_mlp` (Dense), `weight` U `[arc_dim, arc_dim]`, `head_bias` u `[arc_dim]`."""

    arc_dim: int  # 500 in the paper.
    dropout: float = 0.0  # On the MLPs' outputs (0.33 in the paper); needs the "dropout" rng when not deterministic.

    @nn.compact
    def __call__(self, encoded: jax.Array, deterministic: bool = True) -> jax.Array:
        """encoded `[batch, time + 1, dim]` (position 0: the root) -> scores `[batch, time + 1, time + 1]`."""
        dep = _MLP(self.arc_dim, self.dropout, name="dep_mlp")(encoded, deterministic)
        head = _MLP(self.arc_dim, self.dropout, name="head_mlp")(encoded, deterministic)
        weight = self.param("weight", nn.initializers.zeros, (self.arc_dim, self.arc_dim), dep.dtype)
        head_bias = self.param("head_bias", nn.initializers.zeros, (self.arc_dim,), dep.dtype)
        return jnp.einsum("bda,ae,bhe->bdh", dep, weight, head) + (head @ head_bias)[:, None, :]


class BiaffineLabelScorer(nn.Module):
    """Label scores of each dependent d given its head h = heads[b, d] (paper eq. 7):
    `s[b, d, l] = dep_d @ U_l @ head_h + W_l @ [dep_d; head_h] + b_l`. The head rows are gathered
    first, so the scores take `[batch, time + 1, labels]`, not `[batch, time + 1, time + 1, labels]`.
    Params: `dep_mlp`, `head_mlp` (Dense), `weight` U `[labels, label_dim, label_dim]`, `linear` W
    `[2 * label_dim, labels]`, `bias` b `[labels]`."""

    label_dim: int  # 100 in the paper.
    num_labels: int
    dropout: float = 0.0  # On the MLPs' outputs (0.33 in the paper); needs the "dropout" rng when not deterministic.

    @nn.compact
    def __call__(self, encoded: jax.Array, heads: jax.Array, deterministic: bool = True) -> jax.Array:
        """encoded `[batch, time + 1, dim]` (position 0: the root), heads `[batch, time + 1]` int, all in
        0..time (the gold heads in training, the decoded ones at test; at position 0 and padding e.g. 0)
        -> scores `[batch, time + 1, num_labels]`."""
        dep = _MLP(self.label_dim, self.dropout, name="dep_mlp")(encoded, deterministic)
        head = _MLP(self.label_dim, self.dropout, name="head_mlp")(encoded, deterministic)
        head = jnp.take_along_axis(head, heads[..., None].astype(jnp.int32), axis=1)  # [batch, time + 1, label_dim]
        shape = (self.num_labels, self.label_dim, self.label_dim)
        weight = self.param("weight", nn.initializers.zeros, shape, dep.dtype)
        linear = self.param("linear", nn.initializers.zeros, (2 * self.label_dim, self.num_labels), dep.dtype)
        bias = self.param("bias", nn.initializers.zeros, (self.num_labels,), dep.dtype)
        bilinear = jnp.einsum("bdk,lkj,bdj->bdl", dep, weight, head)
        return bilinear + jnp.concatenate([dep, head], axis=-1) @ linear + bias


def arc_loss(arc_scores: jax.Array, gold_heads: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean cross-entropy of the gold heads over the real words: arc_scores `[batch, time + 1, time + 1]`,
    gold_heads `[batch, time + 1]` int (padding: any), mask `[batch, time + 1]` bool (True at the real
    words: not at position 0 nor padding) -> `[]`. A word's candidate heads are the root and the real
    words but itself (the others' scores count as MASKED_SCORE)."""
    positions = arc_scores.shape[-1]
    mask = jnp.asarray(mask, bool)
    candidates = mask.at[:, 0].set(True)[:, None, :] & ~jnp.eye(positions, dtype=bool)  # [batch, time + 1, time + 1]
    logits = jnp.where(candidates, arc_scores.astype(jnp.float32), MASKED_SCORE)
    return _masked_cross_entropy(logits, gold_heads, mask)


def label_loss(label_scores: jax.Array, gold_labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean cross-entropy of the gold labels over the real words: label_scores `[batch, time + 1, labels]`,
    gold_labels `[batch, time + 1]` int (padding: any), mask `[batch, time + 1]` bool (as `arc_loss`'s)
    -> `[]`."""
    return _masked_cross_entropy(label_scores.astype(jnp.float32), gold_labels, jnp.asarray(mask, bool))


def _masked_cross_entropy(logits: jax.Array, gold: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean over the True of mask `[batch, time + 1]` of -log softmax(logits `[batch, time + 1, classes]`)
    at gold `[batch, time + 1]`; 0 when mask has none."""
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    gold = jnp.where(mask, gold, 0).astype(jnp.int32)  # Padding's gold (e.g. -1) is never read.
    gold_log_probs = jnp.take_along_axis(log_probs, gold[..., None], axis=-1)[..., 0]
    return -jnp.sum(jnp.where(mask, gold_log_probs, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
