"""Sentence sources: determinism, epochs, exact resumption, text files, PTB."""

import gzip
import itertools
import json
import logging

import pytest

from elmo_jax.data.sources import (
    DataError,
    InMemorySource,
    TextFileSource,
    expand_globs,
    ptb_sentences,
    read_sentences,
)

SENTENCES = [[f"w{i}", f"x{i % 3}"] for i in range(40)]


def _take(it, n):
    return list(itertools.islice(it, n))


def _indices(sentences):
    return [int(s[0][1:]) for s in sentences]


# ---------------------------------------------------------------- InMemorySource


def test_in_memory_epoch_is_permutation_and_epochs_differ():
    src = InMemorySource(SENTENCES, shuffle=True, seed=3, num_epochs=3)
    out = list(src)
    assert len(out) == 3 * len(SENTENCES)
    epochs = [_indices(out[i * 40:(i + 1) * 40]) for i in range(3)]
    for order in epochs:
        assert sorted(order) == list(range(40))
    assert epochs[0] != list(range(40))  # actually shuffled
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2] and epochs[0] != epochs[2]


def test_in_memory_deterministic_for_seed():
    a = _indices(InMemorySource(SENTENCES, seed=7, num_epochs=2))
    b = _indices(InMemorySource(SENTENCES, seed=7, num_epochs=2))
    c = _indices(InMemorySource(SENTENCES, seed=8, num_epochs=2))
    assert a == b
    assert a != c


def test_in_memory_no_shuffle_and_stops():
    src = InMemorySource(SENTENCES, shuffle=False, num_epochs=2)
    out = _indices(src)
    assert out == list(range(40)) * 2
    with pytest.raises(StopIteration):
        next(src)
    with pytest.raises(StopIteration):
        next(src)


def test_in_memory_stops_after_num_epochs_and_epochs_completed():
    src = InMemorySource(SENTENCES, num_epochs=1)
    assert src.epochs_at(src.state_dict()) == 0
    _take(src, 10)
    assert src.epochs_at(src.state_dict()) == pytest.approx(0.25)
    assert len(list(src)) == 30
    assert src.epochs_at(src.state_dict()) == pytest.approx(1.0)
    with pytest.raises(StopIteration):
        next(src)


def test_in_memory_infinite():
    src = InMemorySource(SENTENCES, num_epochs=None)
    assert len(_take(src, 40 * 5 + 3)) == 40 * 5 + 3
    assert src.state_dict() == {"epoch": 5, "index": 3}
    assert src.epochs_at(src.state_dict()) == pytest.approx(5 + 3 / 40)


def test_in_memory_empty_is_error():
    with pytest.raises(DataError):
        InMemorySource([])


@pytest.mark.parametrize("stop", [0, 1, 17, 39, 40, 41, 80, 95])
def test_in_memory_resume_exactly(stop):
    # 40 and 80 are epoch boundaries; the others are mid-epoch.
    full = _indices(InMemorySource(SENTENCES, seed=5, num_epochs=3))
    src = InMemorySource(SENTENCES, seed=5, num_epochs=3)
    head = _indices(_take(src, stop))
    state = json.loads(json.dumps(src.state_dict()))
    fresh = InMemorySource(SENTENCES, seed=5, num_epochs=3)
    fresh.load_state_dict(state)
    tail = _indices(fresh)
    assert head + tail == full
    assert len(tail) == 120 - stop


def test_in_memory_state_at_epoch_boundary_values():
    src = InMemorySource(SENTENCES, seed=1, num_epochs=2)
    _take(src, 40)
    assert src.state_dict() == {"epoch": 0, "index": 40}
    next(src)
    assert src.state_dict() == {"epoch": 1, "index": 1}


# ---------------------------------------------------------------- text files


@pytest.fixture
def text_files(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"the cat sat\n\n  on   the mat  \n\t\nend of a\n")
    with gzip.open(tmp_path / "b.txt.gz", "wb") as f:
        f.write(b"gz one\ngz two words\n\ngz three\n")
    (tmp_path / "c.txt").write_bytes(b"")
    (tmp_path / "d.txt").write_bytes(b"caf\xe9 ok\nlast line without newline")
    expected = [
        ["the", "cat", "sat"],
        ["on", "the", "mat"],
        ["end", "of", "a"],
        ["gz", "one"],
        ["gz", "two", "words"],
        ["gz", "three"],
        ["caf\ufffd", "ok"],
        ["last", "line", "without", "newline"],
    ]
    return tmp_path, expected


def test_text_source_reads_all_files_in_order(text_files, caplog):
    root, expected = text_files
    with caplog.at_level(logging.WARNING):
        out = list(TextFileSource(str(root / "*"), shuffle=False, num_epochs=1))
    assert out == expected
    assert any("d.txt" in r.getMessage() and "invalid UTF-8" in r.getMessage() for r in caplog.records)
    assert read_sentences(str(root / "*")) == expected


def test_text_source_epochs_shuffle_files(text_files):
    root, expected = text_files
    src = TextFileSource(str(root / "*"), shuffle=True, seed=2, num_epochs=4)
    out = list(src)
    assert len(out) == 4 * len(expected)
    key = lambda s: " ".join(s)
    epochs = [out[i * 8:(i + 1) * 8] for i in range(4)]
    for ep in epochs:
        assert sorted(map(key, ep)) == sorted(map(key, expected))
        # Files are visited whole: each file's sentences stay contiguous and in order.
        i = ep.index(["gz", "one"])
        assert ep[i:i + 3] == expected[3:6]
    assert len({tuple(map(key, ep)) for ep in epochs}) > 1
    with pytest.raises(StopIteration):
        next(src)
    # Deterministic for a seed.
    assert list(TextFileSource(str(root / "*"), shuffle=True, seed=2, num_epochs=4)) == out


def test_text_source_resume_everywhere(text_files):
    root, expected = text_files
    pattern = [str(root / "a.txt"), str(root / "*.gz"), str(root / "c.txt"), str(root / "d.txt")]
    full = list(TextFileSource(pattern, shuffle=True, seed=9, num_epochs=3))
    assert len(full) == 24
    for stop in range(len(full) + 1):
        src = TextFileSource(pattern, shuffle=True, seed=9, num_epochs=3)
        head = _take(src, stop)
        state = json.loads(json.dumps(src.state_dict()))
        fresh = TextFileSource(pattern, shuffle=True, seed=9, num_epochs=3)
        fresh.load_state_dict(state)
        assert head + list(fresh) == full, f"resume after {stop} sentences"


def test_text_source_resume_mid_file_uses_offset(text_files):
    root, expected = text_files
    src = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    assert _take(src, 4) == expected[:4]
    state = src.state_dict()
    # Mid gzip file: file index 1 (b.txt.gz), past "gz one\n" (7 uncompressed bytes).
    assert state == {"epoch": 0, "file_index": 1, "offset": 7}
    fresh = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    fresh.load_state_dict(state)
    assert list(fresh) == expected[4:]

    src = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    _take(src, 2)
    state = src.state_dict()
    assert state["file_index"] == 0 and state["offset"] == len(b"the cat sat\n\n  on   the mat  \n")
    fresh = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    fresh.load_state_dict(state)
    assert list(fresh) == expected[2:]


def test_text_source_load_state_while_open(text_files):
    root, expected = text_files
    src = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    _take(src, 2)
    state = src.state_dict()
    _take(src, 3)  # moves on to the gzip file, leaving a handle open
    src.load_state_dict(state)
    assert list(src) == expected[2:]


def test_text_source_all_empty_is_error(tmp_path):
    (tmp_path / "e1.txt").write_bytes(b"")
    (tmp_path / "e2.txt").write_bytes(b"\n \n\t\n")
    with pytest.raises(DataError, match="no sentences"):
        next(TextFileSource(str(tmp_path / "*.txt"), num_epochs=None))


def test_expand_globs(tmp_path):
    for name in ["b.txt", "a.txt", "c.dat"]:
        (tmp_path / name).write_text("x\n")
    assert expand_globs(str(tmp_path / "*.txt")) == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    both = expand_globs(f"{tmp_path}/*.dat, {tmp_path}/a.txt")
    assert both == [str(tmp_path / "c.dat"), str(tmp_path / "a.txt")]
    assert expand_globs([str(tmp_path / "c.dat")]) == [str(tmp_path / "c.dat")]


def test_expand_globs_no_match_names_pattern(tmp_path):
    pattern = str(tmp_path / "missing-*.txt")
    with pytest.raises(DataError) as e:
        expand_globs(pattern)
    assert pattern in str(e.value)
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(DataError, match="nothing_here"):
        expand_globs(f"{tmp_path}/a.txt,{tmp_path}/nothing_here*")
    with pytest.raises(DataError, match="missing-"):
        TextFileSource(pattern)


# ---------------------------------------------------------------- PTB


def test_ptb_test_split():
    sentences = ptb_sentences("test")
    assert len(sentences) == 3761
    assert sum(len(s) for s in sentences) == 78669
    words = {w for s in sentences for w in s}
    assert "<UNK>" in words
    assert "<unk>" not in words
    assert all(s for s in sentences)
    assert all(" " not in w and w for s in sentences for w in s)


def test_ptb_bad_split():
    with pytest.raises(DataError, match="dev"):
        ptb_sentences("dev")
