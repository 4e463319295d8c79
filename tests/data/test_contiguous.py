import numpy as np
import pytest

from elmo_jax.data.chars import word_to_char_ids
from elmo_jax.data.contiguous import ContiguousBatcher
from elmo_jax.data.sources import DataError
from tests.data.test_batching import BOS, EOS, SENTENCES, VOCAB, by_direction


def reference_streams(sentences, B):
    """Per row, the (input, target) tokens of the forward text and of the reversed text, built
    word by word: the text `<S> w1 .. wn </S>` per sentence, cut into B parts of ceil(P / B)."""
    forward = [(i, t) for s in sentences for i, t in zip([BOS] + s, s + [EOS])]
    backward = [(i, t) for s in sentences[::-1] for i, t in zip([EOS] + s[::-1], s[::-1] + [BOS])]
    per_row = -(-len(forward) // B)
    return [
        {"forward": forward[r * per_row:(r + 1) * per_row], "backward": backward[r * per_row:(r + 1) * per_row]}
        for r in range(B)
    ]


def _read_rows(batches, direction, B, with_chars=True):
    """Concatenates each row's real positions over `batches`: [(input id, target id, char ids)]."""
    rows = [[] for _ in range(B)]
    for batch in batches:
        d = batch[direction]
        for r in range(B):
            for t in np.flatnonzero(d["mask"][r]):
                chars = d["char_ids"][r, t] if with_chars else None
                rows[r].append((int(d["token_ids"][r, t]), int(d["targets"][r, t]), chars))
    return rows


@pytest.mark.parametrize("B,T", [(1, 4), (2, 3), (3, 5), (4, 50)])
def test_rows_are_the_text_in_order_and_reversed(B, T):
    batches = [by_direction(b) for b in ContiguousBatcher(SENTENCES, VOCAB, B, T, max_chars=50)]
    want = reference_streams(SENTENCES, B)
    for direction in ("forward", "backward"):
        got = _read_rows(batches, direction, B)
        for r in range(B):
            expected = [(VOCAB.word_to_id(i), VOCAB.word_to_id(t)) for i, t in want[r][direction]]
            assert [(i, t) for i, t, _ in got[r]] == expected, (direction, r)
            for (_, _, chars), (word, _) in zip(got[r], want[r][direction]):
                np.testing.assert_array_equal(chars, word_to_char_ids(word, 50))
    for batch in batches:
        for d in batch.values():
            assert d["token_ids"].shape == d["targets"].shape == d["mask"].shape == (B, T)
            assert d["char_ids"].shape == (B, T, 50)


def test_every_target_once_per_pass_and_passes_repeat():
    B, T = 3, 4
    batcher = ContiguousBatcher(SENTENCES, VOCAB, B, T, max_chars=None, num_epochs=2)
    batches = list(batcher)
    positions = sum(len(s) + 1 for s in SENTENCES)
    assert sum(int(b["mask"][0].sum()) for b in batches) == 2 * positions
    half = len(batches) // 2
    for a, b in zip(batches[:half], batches[half:]):
        np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
    assert "char_ids" not in batches[0]


def test_state_dict_resumes_exactly():
    B, T = 2, 3
    whole = list(ContiguousBatcher(SENTENCES, VOCAB, B, T, num_epochs=3))
    first = ContiguousBatcher(SENTENCES, VOCAB, B, T, num_epochs=3)
    for _ in range(7):
        next(first)
    second = ContiguousBatcher(SENTENCES, VOCAB, B, T, num_epochs=3)
    second.load_state_dict(first.state_dict())
    rest = list(second)
    assert len(rest) == len(whole) - 7
    for a, b in zip(rest, whole[7:]):
        assert set(a) == set(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert second.epochs_at({"epoch": 1, "window": second.windows // 2}) == pytest.approx(
        1 + (second.windows // 2) / second.windows
    )


def test_processes_read_disjoint_rows_of_one_layout():
    whole = list(ContiguousBatcher(SENTENCES, VOCAB, 4, 3))
    parts = [list(ContiguousBatcher(SENTENCES, VOCAB, 4, 3, process_index=i, process_count=2)) for i in range(2)]
    for k, batch in enumerate(whole):
        for key in batch:
            np.testing.assert_array_equal(batch[key], np.concatenate([parts[0][k][key], parts[1][k][key]], axis=1))


def test_state_of_sentence_batching_is_refused():
    batcher = ContiguousBatcher(SENTENCES, VOCAB, 2, 3)
    with pytest.raises(ValueError, match="data.streams='sentences'"):
        batcher.load_state_dict({"source": {"epoch": 0, "index": 3}, "rows": [None, None]})
    with pytest.raises(DataError, match="no sentences"):
        ContiguousBatcher([], VOCAB, 2, 3)
