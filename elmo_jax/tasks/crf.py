"""A linear-chain conditional random field over per-token tag scores (taggers, named entities): the
log-likelihood of a tag sequence for training, Viterbi decoding, and IOB2 constraints.

Pure functions of the scores (`log_partition`, `sequence_score`, `log_likelihood`, `viterbi_decode`) beside
`LinearChainCRF`, the Flax module that holds the learned transition, start and end scores. Sentences are rows of a
batch padded to one length, each with a prefix mask (its first `length` positions true); a row of length 0 (batch
padding) scores 0 and decodes to all tag 0.

Everything is computed in float32 whatever the emissions' dtype: the forward algorithm's running log-sum-exp grows
with the sentence (hundreds over a long one), where bfloat16's 8-bit mantissa keeps steps of 1 or more and the
differences between paths (the gradient) are lost.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

# Added to a disallowed transition's, start's or end's score: large enough that no allowed path's score comes near
# (for emissions of ordinary size), finite so that gradients stay finite (a gold path through one is penalised, not
# infinitely).
DISALLOWED_SCORE = -1e4

Constraints = tuple[tuple[tuple[bool, ...], ...], tuple[bool, ...], tuple[bool, ...]]


def _float32(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    return tuple(jnp.asarray(a, jnp.float32) for a in arrays)


def log_partition(
    emissions: jax.Array, mask: jax.Array, transitions: jax.Array, start: jax.Array, end: jax.Array
) -> jax.Array:
    """The log of the sum over every tag sequence of exp(its score) (the forward algorithm in log space).

    emissions `[batch, time, tags]`, mask `[batch, time]` bool (a prefix mask), transitions `[tags, tags]`
    (`transitions[i, j]`: tag i followed by tag j), start `[tags]`, end `[tags]` -> `[batch]` float32
    (0 for a row of length 0). Padded positions' emissions are ignored whatever their value."""
    emissions, transitions, start, end = _float32(emissions, transitions, start, end)
    mask = jnp.asarray(mask, bool)
    if emissions.shape[1] == 0:
        return jnp.zeros(emissions.shape[0], jnp.float32)
    # Padded positions' scores are discarded below, but a non-finite one (-inf, NaN) would still make NaN gradients.
    emissions = jnp.where(mask[..., None], emissions, 0.0)

    def step(alpha: jax.Array, inputs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        emission, real = inputs  # [batch, tags], [batch]
        # alpha [batch, i] + transitions [i, j], summed over the previous tag i.
        new = jax.nn.logsumexp(alpha[:, :, None] + transitions[None], axis=1) + emission
        return jnp.where(real[:, None], new, alpha), None

    alpha0 = start[None] + emissions[:, 0]
    alpha, _ = jax.lax.scan(step, alpha0, (jnp.swapaxes(emissions[:, 1:], 0, 1), jnp.swapaxes(mask[:, 1:], 0, 1)))
    return jnp.where(mask[:, 0], jax.nn.logsumexp(alpha + end[None], axis=1), 0.0)


def sequence_score(
    emissions: jax.Array,
    tags: jax.Array,
    mask: jax.Array,
    transitions: jax.Array,
    start: jax.Array,
    end: jax.Array,
) -> jax.Array:
    """The score of each row's tags: start[t_0] + sum_k emissions[k, t_k] + sum_k transitions[t_k, t_k+1] +
    end[t_last], over the row's real positions.

    emissions `[batch, time, tags]`, tags `[batch, time]` int (padded positions' values ignored, even out of range),
    mask `[batch, time]` bool (a prefix mask), transitions `[tags, tags]`, start `[tags]`, end `[tags]` -> `[batch]`
    float32 (0 for a row of length 0)."""
    emissions, transitions, start, end = _float32(emissions, transitions, start, end)
    mask = jnp.asarray(mask, bool)
    tags = jnp.asarray(tags, jnp.int32)
    emitted = jnp.take_along_axis(emissions, tags[..., None], axis=-1)[..., 0]  # [batch, time]
    score = jnp.where(mask, emitted, 0.0).sum(axis=1)
    score += jnp.where(mask[:, 1:], transitions[tags[:, :-1], tags[:, 1:]], 0.0).sum(axis=1)
    lengths = mask.sum(axis=1)
    last = jnp.take_along_axis(tags, jnp.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0]
    return score + jnp.where(lengths > 0, start[tags[:, 0]] + end[last], 0.0)


def log_likelihood(
    emissions: jax.Array,
    tags: jax.Array,
    mask: jax.Array,
    transitions: jax.Array,
    start: jax.Array,
    end: jax.Array,
) -> jax.Array:
    """log p(tags | emissions) = `sequence_score` - `log_partition`: shapes as `sequence_score`, -> `[batch]`
    float32 (0 for a row of length 0)."""
    return sequence_score(emissions, tags, mask, transitions, start, end) - log_partition(
        emissions, mask, transitions, start, end
    )


def viterbi_decode(
    emissions: jax.Array, mask: jax.Array, transitions: jax.Array, start: jax.Array, end: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Each row's highest-scoring tag sequence (ties: the lowest tag) and its score (as `sequence_score`).

    emissions `[batch, time, tags]`, mask `[batch, time]` bool (a prefix mask), transitions `[tags, tags]`, start
    `[tags]`, end `[tags]` -> (tags `[batch, time]` int32, 0 at padded positions; score `[batch]` float32). A row of
    length 0 gets tags 0 and score 0; padded positions' emissions are ignored whatever their value. Jit-able: a scan
    forward keeping backpointers, then one back along them."""
    emissions, transitions, start, end = _float32(emissions, transitions, start, end)
    mask = jnp.asarray(mask, bool)
    batch, time, num_tags = emissions.shape
    if time == 0:
        return jnp.zeros((batch, 0), jnp.int32), jnp.zeros(batch, jnp.float32)
    identity = jnp.broadcast_to(jnp.arange(num_tags, dtype=jnp.int32), (batch, num_tags))

    def forward(best: jax.Array, inputs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        emission, real = inputs  # [batch, tags], [batch]
        candidates = best[:, :, None] + transitions[None]  # [batch, previous tag, tag]
        new = candidates.max(axis=1) + emission
        # A padded position points each tag back to itself, so the walk back passes it unchanged.
        pointers = jnp.where(real[:, None], candidates.argmax(axis=1).astype(jnp.int32), identity)
        return jnp.where(real[:, None], new, best), pointers

    best0 = start[None] + emissions[:, 0]
    best, pointers = jax.lax.scan(
        forward, best0, (jnp.swapaxes(emissions[:, 1:], 0, 1), jnp.swapaxes(mask[:, 1:], 0, 1))
    )  # pointers [time - 1, batch, tags]: position k + 1's tag -> position k's.
    final = best + end[None]
    last = final.argmax(axis=1).astype(jnp.int32)

    def backward(tag: jax.Array, pointer: jax.Array) -> tuple[jax.Array, jax.Array]:
        previous = jnp.take_along_axis(pointer, tag[:, None], axis=1)[:, 0]
        return previous, previous

    _, earlier = jax.lax.scan(backward, last, pointers, reverse=True)  # [time - 1, batch]: positions 0 .. time - 2.
    tags = jnp.concatenate([earlier, last[None]], axis=0).T
    return jnp.where(mask, tags, 0), jnp.where(mask[:, 0], final.max(axis=1), 0.0)


def _parse_iob2(name: str) -> tuple[str, str]:
    """("O", "") for `O`, (prefix, type) for `B-<type>`/`I-<type>`; anything else is a ValueError naming it."""
    if name == "O":
        return "O", ""
    prefix, dash, entity = name.partition("-")
    if prefix not in ("B", "I") or not dash or not entity:
        raise ValueError(f"tag {name!r} is not IOB2: expected 'O', 'B-<type>' or 'I-<type>'")
    return prefix, entity


def allowed_transitions(tag_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The IOB2 constraints of `tag_names` (`O`, `B-X`, `I-X`): `I-X` follows only `B-X` or `I-X` and does not
    start a sentence; everything else is allowed.

    -> (allowed `[tags, tags]` bool, `allowed[i, j]`: tag i may be followed by tag j; allowed_start `[tags]` bool;
    allowed_end `[tags]` bool). A name that is not `O`, `B-<type>` or `I-<type>` is a ValueError naming it."""
    parsed = [_parse_iob2(name) for name in tag_names]
    allowed = np.ones((len(parsed), len(parsed)), bool)
    for j, (prefix, entity) in enumerate(parsed):
        if prefix == "I":
            allowed[:, j] = [p in ("B", "I") and e == entity for p, e in parsed]
    allowed_start = np.array([prefix != "I" for prefix, _ in parsed], bool)
    return allowed, allowed_start, np.ones(len(parsed), bool)


def as_constraints(allowed: np.ndarray, allowed_start: np.ndarray, allowed_end: np.ndarray) -> Constraints:
    """The three boolean arrays (as `allowed_transitions` returns them) as nested tuples, the hashable form of
    `LinearChainCRF.constraints`."""
    return (
        tuple(tuple(bool(a) for a in row) for row in np.asarray(allowed, bool)),
        tuple(bool(a) for a in np.asarray(allowed_start, bool)),
        tuple(bool(a) for a in np.asarray(allowed_end, bool)),
    )


def apply_constraints(
    transitions: jax.Array,
    start: jax.Array,
    end: jax.Array,
    allowed: np.ndarray,
    allowed_start: np.ndarray,
    allowed_end: np.ndarray,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """transitions `[tags, tags]`, start `[tags]`, end `[tags]` with `DISALLOWED_SCORE` added where the boolean
    `allowed` `[tags, tags]`, `allowed_start` `[tags]`, `allowed_end` `[tags]` are false (float32)."""
    masks = (allowed, allowed_start, allowed_end)
    penalties = (np.where(np.asarray(a, bool), 0.0, DISALLOWED_SCORE).astype(np.float32) for a in masks)
    return tuple(x + p for x, p in zip(_float32(transitions, start, end), penalties, strict=True))


class LinearChainCRF(nn.Module):
    """A linear-chain CRF over `num_tags` tags: params `transitions` `[tags, tags]` (`transitions[i, j]`: tag i
    followed by tag j), `start` `[tags]`, `end` `[tags]`, float32, initialised to zeros (at first, a softmax tagger
    of the emissions).

    `constraints`: None (every sequence allowed) or (allowed `[tags, tags]`, allowed_start `[tags]`, allowed_end
    `[tags]`) boolean, as nested tuples (a Flax field must be hashable): `as_constraints(*allowed_transitions(names))`
    for IOB2 tags. Disallowed scores get `DISALLOWED_SCORE` in both the likelihood and decoding."""

    num_tags: int
    constraints: Constraints | None = None

    def __post_init__(self) -> None:
        if self.constraints is not None:
            shapes = tuple(np.shape(np.asarray(c, bool)) for c in self.constraints)
            want = ((self.num_tags, self.num_tags), (self.num_tags,), (self.num_tags,))
            if shapes != want:
                raise ValueError(f"constraints have shapes {shapes}, expected {want} for num_tags={self.num_tags}")
        super().__post_init__()

    def setup(self) -> None:
        zeros = nn.initializers.zeros
        self.transitions = self.param("transitions", zeros, (self.num_tags, self.num_tags), jnp.float32)
        self.start = self.param("start", zeros, (self.num_tags,), jnp.float32)
        self.end = self.param("end", zeros, (self.num_tags,), jnp.float32)

    def _scores(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(transitions, start, end) with the constraints' penalties."""
        if self.constraints is None:
            return self.transitions, self.start, self.end
        return apply_constraints(self.transitions, self.start, self.end, *self.constraints)

    def __call__(self, emissions: jax.Array, tags: jax.Array, mask: jax.Array) -> jax.Array:
        """emissions `[batch, time, tags]`, tags `[batch, time]` int, mask `[batch, time]` bool (a prefix mask) ->
        the log-likelihood of the tags `[batch]` float32 (0 for a row of length 0)."""
        return log_likelihood(emissions, tags, mask, *self._scores())

    def decode(self, emissions: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        """emissions `[batch, time, tags]`, mask `[batch, time]` bool -> (the best allowed tags `[batch, time]`
        int32, 0 at padded positions; their score `[batch]` float32), as `viterbi_decode`."""
        return viterbi_decode(emissions, mask, *self._scores())
