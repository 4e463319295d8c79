"""distinct_rows against NumPy's unique rows."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from elmo_jax.model.distinct_rows import distinct_rows


def repeated_rows(seed: int, n_rows: int, n_distinct: int, width: int, n_ids: int = 512) -> np.ndarray:
    """n_rows rows drawn from n_distinct random rows of ids in [0, n_ids) (rows differing in one id too)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, n_ids, (n_distinct, width))
    words[1] = words[0]
    words[1, -1] = (words[0, -1] + 1) % n_ids  # Differs from row 0 in the last id only.
    return words[rng.integers(0, n_distinct, n_rows)].astype(np.int32)


# bilm-tf's 262 char ids (9 bits, 3 a key), a character vocabulary's 2,930 (12 bits, 2 a key) and
# the most char ids there can be (16 bits, 1 a key).
@pytest.mark.parametrize("n_ids", [262, 2930, 2**16])
@pytest.mark.parametrize("width", [1, 3, 7, 50])
def test_rows_index_and_count_match_numpy(width, n_ids):
    ids = repeated_rows(0, 60, 9, width, n_ids)
    rows, index, count = jax.jit(distinct_rows, static_argnums=(1, 2))(ids, 20, n_ids)
    rows, index = np.asarray(rows), np.asarray(index)
    assert int(count) == len(np.unique(ids, axis=0))
    np.testing.assert_array_equal(rows[index], ids)
    assert len(np.unique(rows[: int(count)], axis=0)) == int(count)  # No row twice among the first count.
    assert rows.shape == (20, width)


def test_count_beyond_capacity_is_reported():
    ids = repeated_rows(1, 40, 30, 5)
    _, _, count = distinct_rows(ids, 8, 512)
    assert int(count) == len(np.unique(ids, axis=0)) > 8


@pytest.mark.parametrize("n_ids", [512, 4096])
def test_extreme_ids_are_told_apart(n_ids):
    top = n_ids - 1
    ids = np.array([[top, 0, top], [top, 0, top - 1], [0, top, top], [top, 0, top]], np.int32)
    rows, index, count = distinct_rows(ids, 4, n_ids)
    assert int(count) == 3
    np.testing.assert_array_equal(np.asarray(rows)[np.asarray(index)], ids)


def test_ids_wider_than_a_key_are_refused():
    with pytest.raises(ValueError, match="32 bits"):
        distinct_rows(np.zeros((2, 3), np.int32), 2, 2**32)
