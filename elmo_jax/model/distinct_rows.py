"""The distinct rows of an integer array with static shapes, for encoding each distinct word once.

Rows are packed into a few int32 keys and sorted; each run of equal rows is one distinct row.
`capacity` fixes the result's shape; the caller falls back to every row when `count > capacity`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

ID_BITS = 9  # Character ids are < 2**9 (elmo_jax.data.chars: 262 of them).
IDS_PER_KEY = 31 // ID_BITS  # 3 ids per non-negative int32 key.


def _packed_keys(ids: jax.Array) -> list[jax.Array]:
    """ids `[N, C]` (each in [0, 2**ID_BITS)) -> ceil(C / 3) int32 keys `[N]`, equal iff the rows are."""
    keys = []
    for start in range(0, ids.shape[1], IDS_PER_KEY):
        key = jnp.zeros(ids.shape[0], jnp.int32)
        for offset, column in enumerate(range(start, min(start + IDS_PER_KEY, ids.shape[1]))):
            key = key | (ids[:, column].astype(jnp.int32) << (ID_BITS * offset))
        keys.append(key)
    return keys


def distinct_rows(ids: jax.Array, capacity: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The distinct rows of ids `[N, C]` (values in [0, 512)) -> (rows `[capacity, C]`, index `[N]`
    int32, count: the number of distinct rows): `ids[i] == rows[index[i]]` when count <= capacity."""
    ids = jnp.asarray(ids)
    n_rows = ids.shape[0]
    keys = _packed_keys(ids)
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
