"""Row-sparse softmax updates: a step reads, differentiates and updates only the softmax rows it
touches (targets and sampled negatives), as bilm-tf's IndexedSlices. For Adagrad and SGD (not
Adam) a zero gradient leaves a row and its optimizer state unchanged: this is then the dense step,
without the dense `[V, P]` gradient and its all-reduce.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

EXACT_FOR_OPTIMIZERS = ("adagrad", "sgd")
SOFTMAX_LEAVES = ("W", "b")


def _is_softmax_leaf(path: tuple) -> bool:
    """Whether a pytree path ends in ['softmax']['W'] or ['softmax']['b']."""
    keys = [getattr(k, "key", None) for k in path[-2:]]
    return len(keys) == 2 and keys[0] == "softmax" and keys[1] in SOFTMAX_LEAVES


def touched_rows(ids: jax.Array, vocab_size: int) -> jax.Array:
    """The distinct ids of `ids` `[M]` in ascending order, padded to `[M]` with `vocab_size` (out of
    range on purpose: it gathers a clipped row and scatters nowhere)."""
    return jnp.unique(ids, size=ids.shape[0], fill_value=vocab_size)


class RowView:
    """The touched rows `rows` `[R]` (ascending, padded with V) of every softmax leaf of a pytree."""

    def __init__(self, rows: jax.Array, vocab_size: int):
        self.rows = rows
        self.vocab_size = vocab_size

    def positions(self, ids: jax.Array) -> jax.Array:
        """Where each id (any shape, all among the rows) sits in the view: an index into `[R]`."""
        return jnp.searchsorted(self.rows, ids).astype(jnp.int32)

    def gather(self, tree: Any) -> Any:
        """`tree` with each softmax leaf `[V, ...]` replaced by its rows `[R, ...]`."""
        def take(path: tuple, leaf: Any) -> Any:
            if not _is_softmax_leaf(path):
                return leaf
            if getattr(leaf, "ndim", 0) < 1 or leaf.shape[0] != self.vocab_size:
                raise ValueError(
                    f"softmax leaf {jax.tree_util.keystr(path)} has shape {getattr(leaf, 'shape', None)}, "
                    f"expected [{self.vocab_size}, ...]"
                )
            return jnp.take(leaf, self.rows, axis=0, mode="clip")

        return jax.tree_util.tree_map_with_path(take, tree)

    def scatter(self, full: Any, view: Any) -> Any:
        """`view`'s leaves, with each softmax leaf written back into its rows of `full`'s."""
        def put(path: tuple, full_leaf: Any, view_leaf: Any) -> Any:
            if not _is_softmax_leaf(path):
                return view_leaf
            return full_leaf.at[self.rows].set(view_leaf.astype(full_leaf.dtype), mode="drop")

        return jax.tree_util.tree_map_with_path(put, full, view)
