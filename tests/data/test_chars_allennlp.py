"""AllenNLP's `tests/data/token_indexers/elmo_indexer_test.py`, ported call for call to
`elmo_jax.batch_to_ids` (names kept).

Differences of design: elmo-jax has no token indexer; `batch_to_ids` (AllenNLP's function over
the same indexer) makes the char ids of a batch, int32 (AllenNLP: int64), so each test indexes a
batch of one sentence where AllenNLP indexes a token list. `tokens_to_add` (an option of
AllenNLP's indexer, not of its `batch_to_ids`) does not exist: only `<S>` and `</S>` are special.
"""

from __future__ import annotations

import numpy as np

from elmo_jax import batch_to_ids

PAD = [261] * 50  # AllenNLP's padding character (260) + 1, as every id.


def padded(*ids: int) -> list[int]:
    """AllenNLP's expected ids of one token: `ids`, then padding characters up to 50."""
    return list(ids) + PAD[len(ids) :]


def test_bos_to_char_ids():
    indices = batch_to_ids([["<S>"]])
    expected_indices = padded(259, 257, 260)
    assert indices.dtype == np.int32
    assert indices.tolist() == [[expected_indices]]


def test_eos_to_char_ids():
    indices = batch_to_ids([["</S>"]])
    expected_indices = padded(259, 258, 260)
    assert indices.tolist() == [[expected_indices]]


def test_unicode_to_char_ids():
    indices = batch_to_ids([[chr(256) + "t"]])
    expected_indices = padded(259, 197, 129, 117, 260)
    assert indices.tolist() == [[expected_indices]]


def test_elmo_as_array_produces_token_sequence():
    # AllenNLP pads one sentence to 3 tokens; batch_to_ids pads to the longest sentence of the batch.
    padded_tokens = batch_to_ids([["Second", "."], ["a", "b", "c"]])[0]
    expected_padded_tokens = [
        padded(259, 84, 102, 100, 112, 111, 101, 260),
        padded(259, 47, 260),
        [0] * 50,
    ]
    assert padded_tokens.tolist() == expected_padded_tokens


def test_elmo_indexer_with_additional_tokens():
    # No tokens_to_add: "<first>" is its own bytes (AllenNLP with tokens_to_add={"<first>": 1}: 259, 2, 260).
    indices = batch_to_ids([["<first>"]])
    expected_indices = [padded(259, *(byte + 1 for byte in b"<first>"), 260)]
    assert indices[0].tolist() == expected_indices


def test_elmo_empty_token_list():
    # An empty sentence: no tokens, so all zeros once padded to the batch's length.
    assert batch_to_ids([[]]).shape == (1, 0, 50)
    targets = [batch_to_ids([["Apple"], []]), batch_to_ids([["Screen"], ["Device"]])]
    empty_target = targets[0][1]
    np.testing.assert_array_equal(np.zeros((1, 50)), empty_target)
    non_empty_targets = [targets[0][0], targets[1][0], targets[1][1]]
    for non_empty_target in non_empty_targets:
        assert np.any(non_empty_target != 0)
