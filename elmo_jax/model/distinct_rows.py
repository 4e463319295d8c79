"""The distinct rows of an integer array with static shapes, for encoding each distinct word once.

Rows are packed into a few int32 keys and sorted; each run of equal rows is one distinct row.
`capacity` fixes the result's shape; the caller falls back to every row when `count > capacity`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

KEY_BITS = 31  # The bits of a non-negative int32 key.


def id_bits(n_ids: int) -> int:
    """The bits an id in [0, n_ids) takes: 9 for bilm-tf's 262 char ids (3 ids a key), more with a
    character vocabulary (data/char_vocab.py)."""
    return max(1, (n_ids - 1).bit_length())


def _packed_keys(ids: jax.Array, n_ids: int) -> list[jax.Array]:
    """ids `[N, C]` (each in [0, n_ids)) -> int32 keys `[N]`, as many ids a key as fit in 31 bits,
    equal iff the rows are."""
    bits = id_bits(n_ids)
    if bits > KEY_BITS:
        raise ValueError(f"ids of {bits} bits do not fit a key of {KEY_BITS}")
    per_key = KEY_BITS // bits
    keys = []
    for start in range(0, ids.shape[1], per_key):
        key = jnp.zeros(ids.shape[0], jnp.int32)
        for offset, column in enumerate(range(start, min(start + per_key, ids.shape[1]))):
            key = key | (ids[:, column].astype(jnp.int32) << (bits * offset))
        keys.append(key)
    return keys


def distinct_rows(ids: jax.Array, capacity: int, n_ids: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The distinct rows of ids `[N, C]` (values in [0, n_ids)) -> (rows `[capacity, C]`, index `[N]`
    int32, count: the number of distinct rows): `ids[i] == rows[index[i]]` when count <= capacity."""
    ids = jnp.asarray(ids)
    n_rows = ids.shape[0]
    keys = _packed_keys(ids, n_ids)
    order = jnp.lexsort(keys[::-1])  # Any total order of the rows will do: equal rows end up adjacent.
    sorted_keys = [k[order] for k in keys]
    starts = jnp.concatenate(
        [jnp.ones(1, bool), jnp.any(jnp.stack([k[1:] != k[:-1] for k in sorted_keys]), axis=0)]
    )
    group = jnp.cumsum(starts, dtype=jnp.int32) - 1  # The distinct row of each sorted row.
    first = jnp.nonzero(starts, size=capacity, fill_value=0)[0]
    rows = ids[order[first]]
    index = jnp.zeros(n_rows, jnp.int32).at[order].set(group)
    return rows, index, group[-1] + 1
