"""distinct_rows against NumPy's unique rows."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from elmo_jax.model.distinct_rows import distinct_rows


def repeated_rows(seed: int, n_rows: int, n_distinct: int, width: int) -> np.ndarray:
    """n_rows rows drawn from n_distinct random rows of ids in [0, 512) (rows differing in one id too)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 512, (n_distinct, width))
    words[1] = words[0]
    words[1, -1] = (words[0, -1] + 1) % 512  # Differs from row 0 in the last id only.
    return words[rng.integers(0, n_distinct, n_rows)].astype(np.int32)


@pytest.mark.parametrize("width", [1, 3, 7, 50])
def test_rows_index_and_count_match_numpy(width):
    ids = repeated_rows(0, 60, 9, width)
    rows, index, count = jax.jit(distinct_rows, static_argnums=1)(ids, 20)
    rows, index = np.asarray(rows), np.asarray(index)
    assert int(count) == len(np.unique(ids, axis=0))
    np.testing.assert_array_equal(rows[index], ids)
    assert len(np.unique(rows[: int(count)], axis=0)) == int(count)  # No row twice among the first count.
    assert rows.shape == (20, width)


def test_count_beyond_capacity_is_reported():
    ids = repeated_rows(1, 40, 30, 5)
    _, _, count = distinct_rows(ids, 8)
    assert int(count) == len(np.unique(ids, axis=0)) > 8


def test_extreme_ids_are_told_apart():
    ids = np.array([[511, 0, 511], [511, 0, 510], [0, 511, 511], [511, 0, 511]], np.int32)
    rows, index, count = distinct_rows(ids, 4)
    assert int(count) == 3
    np.testing.assert_array_equal(np.asarray(rows)[np.asarray(index)], ids)
