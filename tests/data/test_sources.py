"""Sentence sources: determinism, epochs, exact resumption, text files, PTB."""

import functools
import gzip
import itertools
import json
import logging
import os

import pytest

from elmo_jax.data.sources import (
    DataError,
    InMemorySource,
    TextFileSource,
    expand_globs,
    ptb_sentences,
    read_lines,
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


def _write_text_files(root):
    """Four files under `root` (plain, gzip, empty, invalid UTF-8 without a final newline) and
    their sentences in file order."""
    (root / "a.txt").write_bytes(b"the cat sat\n\n  on   the mat  \n\t\nend of a\n")
    with gzip.open(root / "b.txt.gz", "wb") as f:
        f.write(b"gz one\ngz two words\n\ngz three\n")
    (root / "c.txt").write_bytes(b"")
    (root / "d.txt").write_bytes(b"caf\xe9 ok\nlast line without newline")
    return [
        ["the", "cat", "sat"],
        ["on", "the", "mat"],
        ["end", "of", "a"],
        ["gz", "one"],
        ["gz", "two", "words"],
        ["gz", "three"],
        ["caf\ufffd", "ok"],
        ["last", "line", "without", "newline"],
    ]


@pytest.fixture
def text_files(tmp_path):
    return tmp_path, _write_text_files(tmp_path)


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


def test_text_source_resume_mid_file_uses_offset(text_files):
    root, expected = text_files
    src = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    assert _take(src, 4) == expected[:4]
    state = src.state_dict()
    # Mid gzip file: file index 1 (b.txt.gz), past "gz one\n" (7 uncompressed bytes, line 1, record 1).
    assert state == {"files": 4, "epoch": 0, "block": 4, "start": [1, 7, 1, 0, 1], "end": [1, 7, 1, 0, 1], "size": 0,
                     "taken": 0}
    fresh = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    fresh.load_state_dict(state)
    assert list(fresh) == expected[4:]
    # A position saved without its record number (a text line's is its line number) resumes the same.
    fresh = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    fresh.load_state_dict({**state, "start": [1, 7, 1, 0], "end": [1, 7, 1, 0]})
    assert list(fresh) == expected[4:]

    src = TextFileSource(str(root / "*"), shuffle=False, num_epochs=1)
    _take(src, 2)
    state = src.state_dict()
    assert state["start"] == [0, len(b"the cat sat\n\n  on   the mat  \n"), 3, 0, 3]
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


@pytest.mark.parametrize(
    "files, options, message",
    [
        pytest.param({"e1.txt": b"", "e2.txt": b"\n \n\t\n"}, {"num_epochs": None}, "no sentences", id="all-empty"),
        pytest.param({"a.txt": b"only line\n"}, {"line_shard": (1, 2)}, r"lines 1::2", id="empty-line-shard"),
    ],
)
def test_a_source_without_sentences_is_an_error_naming_why(tmp_path, files, options, message):
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    with pytest.raises(DataError, match=message):
        next(TextFileSource(str(tmp_path / "*.txt"), **options))


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


# ---------------------------------------------------------------- text files: shuffle buffer


def _write_shards(root, n_files=4, lines_per_file=23, blank_every=5):
    """Shards of unique numbered sentences `s<file>_<line> ...`, with some blank lines."""
    expected = []
    for f in range(n_files):
        lines = []
        for i in range(lines_per_file):
            words = [f"s{f}_{i}"] + [f"w{(f * 7 + i * 3 + k) % 11}" for k in range(1 + (f + i) % 5)]
            lines.append(" ".join(words))
            expected.append(words)
            if i % blank_every == 0:
                lines.append("")
        (root / f"shard-{f}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root / "shard-*.txt"), expected


def _key(sentence):
    return " ".join(sentence)


def test_shuffle_buffer_permutes_within_blocks_of_the_file_stream(tmp_path):
    pattern, expected = _write_shards(tmp_path)
    n, K = len(expected), 10
    files_only = list(TextFileSource(pattern, shuffle=True, seed=4, num_epochs=3, shuffle_buffer=0))
    buffered = list(TextFileSource(pattern, shuffle=True, seed=4, num_epochs=3, shuffle_buffer=K))
    assert len(buffered) == len(files_only) == 3 * n
    for e in range(3):
        plain, mixed = files_only[e * n:(e + 1) * n], buffered[e * n:(e + 1) * n]
        assert sorted(map(_key, mixed)) == sorted(map(_key, expected))
        assert mixed != plain  # Sentences really move...
        for b in range(0, n, K):  # ...but only within consecutive blocks of K of the file stream.
            assert sorted(map(_key, mixed[b:b + K])) == sorted(map(_key, plain[b:b + K]))
    epochs = [tuple(map(_key, buffered[e * n:(e + 1) * n])) for e in range(3)]
    assert len(set(epochs)) == 3
    again = list(TextFileSource(pattern, shuffle=True, seed=4, num_epochs=3, shuffle_buffer=K))
    assert again == buffered
    other_seed = list(TextFileSource(pattern, shuffle=True, seed=5, num_epochs=3, shuffle_buffer=K))
    assert other_seed != buffered


def test_shuffle_off_ignores_buffer(tmp_path):
    pattern, expected = _write_shards(tmp_path)
    assert list(TextFileSource(pattern, shuffle=False, shuffle_buffer=50)) == expected


def test_state_is_small_and_restore_rereads_one_block(tmp_path):
    pattern, expected = _write_shards(tmp_path)
    src = TextFileSource(pattern, shuffle=True, seed=1, num_epochs=1, shuffle_buffer=30)
    _take(src, 45)  # Mid second block.
    state = src.state_dict()
    assert state["size"] == 30 and state["taken"] == 15 and state["block"] == 1
    assert len(json.dumps(state)) < 200
    fresh = TextFileSource(pattern, shuffle=True, seed=1, num_epochs=1, shuffle_buffer=30)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state


def test_restore_against_changed_files_is_an_error(tmp_path):
    pattern, _ = _write_shards(tmp_path)
    src = TextFileSource(pattern, shuffle=True, seed=1, shuffle_buffer=30)
    _take(src, 10)
    state = src.state_dict()
    (tmp_path / "shard-4.txt").write_text("new file\n")
    with pytest.raises(DataError, match="5"):
        TextFileSource(pattern, shuffle=True, seed=1, shuffle_buffer=30).load_state_dict(state)
    (tmp_path / "shard-4.txt").unlink()
    for f in range(4):
        (tmp_path / f"shard-{f}.txt").write_text("short\n")
    with pytest.raises(DataError, match="does not match"):
        TextFileSource(pattern, shuffle=True, seed=1, shuffle_buffer=30).load_state_dict(state)


def test_epochs_at_counts_bytes_through_blocks(tmp_path):
    pattern, expected = _write_shards(tmp_path, n_files=3, lines_per_file=40)
    src = TextFileSource(pattern, shuffle=True, seed=2, num_epochs=2, shuffle_buffer=16)
    assert src.epochs_at(src.state_dict()) == 0.0
    seen = []
    for _ in src:
        seen.append(src.epochs_at(json.loads(json.dumps(src.state_dict()))))
    assert all(b >= a for a, b in zip(seen, seen[1:]))
    n = len(expected)
    assert seen[n - 1] == pytest.approx(1.0) and seen[-1] == pytest.approx(2.0)
    # Fractional by bytes: a third of the way (equal-sized files, uniform lines), roughly.
    assert seen[n // 3] == pytest.approx(1 / 3, abs=0.08)
    assert seen[n + n // 2] == pytest.approx(1.5, abs=0.08)


def test_epochs_at_inside_gzip_file(tmp_path):
    with gzip.open(tmp_path / "a.txt.gz", "wb") as f:
        f.write(b"".join(b"word%03d more words here\n" % i for i in range(100)))
    src = TextFileSource(str(tmp_path / "a.txt.gz"), shuffle=False)
    _take(src, 25)
    assert src.epochs_at(src.state_dict()) == pytest.approx(0.25)


# ---------------------------------------------------------------- text files: bad input


def test_empty_files_skipped_with_one_warning_each(tmp_path, caplog):
    (tmp_path / "a.txt").write_text("one two\n")
    (tmp_path / "b.txt").write_bytes(b"")
    with gzip.open(tmp_path / "c.txt.gz", "wb"):
        pass
    with caplog.at_level(logging.WARNING):
        out = list(TextFileSource(str(tmp_path / "*"), shuffle=True, num_epochs=3))
    assert out == [["one", "two"]] * 3
    messages = [r.getMessage() for r in caplog.records]
    for name in ("b.txt", "c.txt.gz"):
        assert sum(name in m and "empty file" in m for m in messages) == 1, messages
    # Each pass ends with a one-line summary of what was skipped.
    assert sum("2 empty files skipped" in m for m in messages) == 3


def test_invalid_utf8_replaced_counted_and_warned_once_per_file(tmp_path, caplog):
    (tmp_path / "a.txt").write_bytes(b"ok line\nbad \xff here\n\nalso \xc3 bad\nreal \xef\xbf\xbd char\n")
    (tmp_path / "b.txt").write_bytes("fine \ufffd\n".encode())  # A real U+FFFD is valid UTF-8.
    src = TextFileSource(str(tmp_path / "*.txt"), shuffle=False)
    with caplog.at_level(logging.WARNING):
        out = list(src)
    assert out == [["ok", "line"], ["bad", "\ufffd", "here"], ["also", "\ufffd", "bad"], ["real", "\ufffd", "char"],
                   ["fine", "\ufffd"]]
    warnings = [r.getMessage() for r in caplog.records if "invalid UTF-8" in r.getMessage() and "pass 1" not in r.getMessage()]
    assert len(warnings) == 1 and f"{tmp_path / 'a.txt'}:2:" in warnings[0]
    assert any("2 lines with invalid UTF-8" in r.getMessage() for r in caplog.records)


def test_long_lines_split_counted_and_warned_once_per_file(tmp_path, caplog):
    long1 = [f"t{i}" for i in range(10)]
    long2 = [f"u{i}" for i in range(7)]
    (tmp_path / "a.txt").write_text(" ".join(long1) + "\nshort one\n" + " ".join(long2) + "\n")
    with caplog.at_level(logging.WARNING):
        out = list(TextFileSource(str(tmp_path / "a.txt"), shuffle=False, max_sentence_tokens=4))
    assert out == [long1[:4], long1[4:8], long1[8:], ["short", "one"], long2[:4], long2[4:]]
    warnings = [r.getMessage() for r in caplog.records if "split" in r.getMessage() and "a.txt:" in r.getMessage()]
    assert len(warnings) == 1 and "a.txt:1:" in warnings[0] and "10 tokens" in warnings[0]
    assert any("2 lines split" in r.getMessage() for r in caplog.records)
    # No limit: lines stay whole.
    assert list(TextFileSource(str(tmp_path / "a.txt"), shuffle=False))[0] == long1


def test_line_over_byte_limit_is_an_error_naming_file_and_line(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"fine\n" + b"x " * 60 + b"\nmore\n")
    with pytest.raises(DataError, match=r"a\.txt:2: line longer than 100 bytes"):
        list(TextFileSource(str(tmp_path / "a.txt"), shuffle=False, max_line_bytes=100))
    # A line of exactly the limit (newline excluded) is fine, with or without a final newline.
    (tmp_path / "b.txt").write_bytes(b"y" * 100 + b"\n" + b"z" * 100)
    assert list(TextFileSource(str(tmp_path / "b.txt"), max_line_bytes=100)) == [["y" * 100], ["z" * 100]]


def test_corrupt_gzip_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "a.txt.gz").write_bytes(b"not gzip at all\n")
    with pytest.raises(DataError, match=r"a\.txt\.gz"):
        list(TextFileSource(str(tmp_path / "a.txt.gz")))


def test_glob_matching_only_directories_is_an_error(tmp_path):
    (tmp_path / "dir.txt").mkdir()
    with pytest.raises(DataError, match="no file matches"):
        TextFileSource(str(tmp_path / "*.txt"))


# ---------------------------------------------------------------- text files: line shards


@pytest.mark.parametrize("n", [2, 3, 5])
def test_line_shards_partition_the_corpus(tmp_path, n):
    pattern, expected = _write_shards(tmp_path, n_files=2)
    parts = [list(TextFileSource(pattern, shuffle=True, seed=3, shuffle_buffer=8, line_shard=(k, n))) for k in range(n)]
    keys = [set(map(_key, p)) for p in parts]
    assert sum(len(p) for p in parts) == len(expected)
    assert set().union(*keys) == set(map(_key, expected))
    for i in range(n):
        for j in range(i + 1, n):
            assert not keys[i] & keys[j]


# ---------------------------------------------------------------- text files: streaming


def test_large_file_is_streamed_not_loaded(tmp_path):
    import tracemalloc

    line = b" ".join(b"%d" % i + b"x" * 45 for i in range(20)) + b"\n"
    (tmp_path / "big.txt").write_bytes(line * 8000)  # 7.6 MB
    src = TextFileSource(str(tmp_path / "big.txt"), shuffle=True, shuffle_buffer=100)
    tracemalloc.start()
    count = sum(1 for _ in src)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 8000
    assert peak < 3_000_000, peak  # The 1 MiB read buffer and one block of 100 sentences.


def test_read_lines_bounds_a_line_before_its_newline(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"abcde\n\nab c\r\nabcdef\nab\n")
    lines = read_lines(str(path), max_line_bytes=5)
    assert [next(lines) for _ in range(3)] == [["abcde"], [], ["ab", "c"]]  # "ab c\r": 5 bytes before "\n".
    with pytest.raises(DataError, match=rf"^{path}:4: line longer than 5 bytes \(text files hold one sentence per line\)$"):
        next(lines)
    path.write_bytes(b"ab\n" + b"x" * 100)  # The last line has no newline.
    with pytest.raises(DataError, match=rf"^{path}:2: line longer than 4 bytes"):
        list(read_lines(str(path), max_line_bytes=4))


def test_a_byte_order_mark_opening_a_file_is_not_part_of_its_first_word(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffthe cat\nsat \ufeffhere\n".encode())
    assert list(read_lines(str(path))) == [["the", "cat"], ["sat", "\ufeffhere"]]
    assert read_sentences(str(path)) == [["the", "cat"], ["sat", "\ufeffhere"]]


# ---------------------------------------------------------------- CoNLL-U files


def _row(token_id, form):
    return "\t".join([token_id, form, "_", "X", "_", "_", "0", "dep", "_", "_"])


def _conllu(sentences, first_comment=True):
    """CoNLL-U text of `sentences` (lists of FORMs), each with a comment, a multiword token over its
    first two words and an empty node after its first word."""
    blocks = []
    for n, forms in enumerate(sentences):
        lines = [f"# sent_id = {n}"] if first_comment or n else []
        for i, form in enumerate(forms, 1):
            if i == 1 and len(forms) > 1:
                lines.append(_row("1-2", forms[0] + forms[1]))
            lines.append(_row(str(i), form))
            if i == 1:
                lines.append(_row("1.1", "empty"))
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


CONLLU_SENTENCES = [["我", "爱", "北京"], ["１９９７年", "。"], ["好"], ["他", "来到", "了", "网易", "杭研", "大厦"]]


def test_conllu_files_give_their_forms_a_sentence_each(tmp_path):
    (tmp_path / "a.conllu").write_text(_conllu(CONLLU_SENTENCES[:2]), encoding="utf-8")
    with gzip.open(tmp_path / "b.conllu.gz", "wt", encoding="utf-8") as f:
        f.write("\n\n# only a comment\n\n" + _conllu(CONLLU_SENTENCES[2:]) + "\n\n")
    (tmp_path / "c.txt").write_text("plain text line\n", encoding="utf-8")
    out = list(TextFileSource(str(tmp_path / "*"), shuffle=False))
    assert out == [*CONLLU_SENTENCES, ["plain", "text", "line"]]
    assert read_sentences(str(tmp_path / "*.conllu*")) == CONLLU_SENTENCES


def _write_ten_conllu_sentences(root):
    """`root`/a.conllu of ten two-word sentences `s<i> x`: its path and the sentences."""
    sentences = [[f"s{i}", "x"] for i in range(10)]
    (root / "a.conllu").write_text(_conllu(sentences), encoding="utf-8")
    return str(root / "a.conllu"), sentences


@pytest.mark.parametrize("n", [2, 3])
def test_conllu_line_shards_deal_out_sentences(tmp_path, n):
    path, sentences = _write_ten_conllu_sentences(tmp_path)
    parts = [list(TextFileSource(path, shuffle=False, line_shard=(k, n))) for k in range(n)]
    assert parts == [sentences[k::n] for k in range(n)]


def test_malformed_conllu_is_an_error_naming_file_and_line(tmp_path):
    good = _conllu([["a", "b"]])
    path = tmp_path / "bad.conllu"
    path.write_text(good + "\n" + "# sent_id = 2\n" + _row("1", "c") + "\n" + "3\tonly three\tcolumns\n")
    src = TextFileSource(str(path), shuffle=False)
    assert next(src) == ["a", "b"]
    state = src.state_dict()
    with pytest.raises(DataError, match=rf"^{path}:9: expected 10 tab-separated columns, got 3$"):
        next(src)
    resumed = TextFileSource(str(path), shuffle=False)
    resumed.load_state_dict(state)  # After the first sentence: lines still counted from the file's start.
    with pytest.raises(DataError, match=rf"^{path}:9: expected 10 tab-separated columns"):
        next(resumed)
    path.write_text(good + "\n" + _row("2", "c") + "\n")
    with pytest.raises(DataError, match=rf"^{path}:7: word ID 2 out of order"):
        list(TextFileSource(str(path), shuffle=False))
    path.write_text(_row("1", "New York") + "\n")
    with pytest.raises(DataError, match=rf"^{path}:1: FORM 'New York' holds whitespace"):
        list(TextFileSource(str(path), shuffle=False))


# ---------------------------------------------------------------- text files: resuming after any sentence
# Each stream below writes its files under `root` and returns a factory of fresh sources, first
# checking what the stream is there to exercise.


def _text_files_stream(root):
    """The four text files (plain, gzip, empty, invalid UTF-8), files shuffled, 3 epochs."""
    _write_text_files(root)
    pattern = [str(root / "a.txt"), str(root / "*.gz"), str(root / "c.txt"), str(root / "d.txt")]
    make = lambda: TextFileSource(pattern, shuffle=True, seed=9, num_epochs=3)
    assert len(list(make())) == 24
    return make


def _buffered_shards_stream(root, buffer):
    """Four shards through a shuffle buffer of `buffer` sentences, long lines split, 2 epochs."""
    pattern, expected = _write_shards(root)
    make = lambda: TextFileSource(pattern, shuffle=True, seed=9, num_epochs=2, shuffle_buffer=buffer,
                                  max_sentence_tokens=3)
    assert len(list(make())) > 2 * len(expected)  # Some lines were split into pieces of 3 tokens.
    return make


def _line_shard_stream(root):
    """Line shard 1 of 3 of two shards, shuffle buffer 5, 2 epochs."""
    pattern, _ = _write_shards(root, n_files=2)
    return lambda: TextFileSource(pattern, shuffle=True, seed=3, num_epochs=2, shuffle_buffer=5, line_shard=(1, 3))


def _conllu_stream(root):
    """CoNLL-U files (plain and gzip) beside a text file, shuffle buffer 5, long sentences split, 2 epochs."""
    sentences = [[f"s{i}"] + [f"w{(i * 3 + k) % 7}" for k in range(i % 5)] for i in range(23)]
    (root / "a.conllu").write_text(_conllu(sentences[:12]), encoding="utf-8")
    with gzip.open(root / "b.conllu.gz", "wt", encoding="utf-8") as f:
        f.write(_conllu(sentences[12:]))
    (root / "c.txt").write_text("text one\ntext two three four\n", encoding="utf-8")
    make = lambda: TextFileSource(str(root / "*"), shuffle=True, seed=4, num_epochs=2, shuffle_buffer=5,
                                  max_sentence_tokens=3)
    assert len(list(make())) > 2 * 25  # Sentences of more than 3 words were split.
    return make


def _conllu_line_shard_stream(root, n):
    """Line shard 1 of `n` of a CoNLL-U file (its sentences dealt out), shuffle buffer 2."""
    path, _ = _write_ten_conllu_sentences(root)
    return lambda: TextFileSource(path, shuffle=True, seed=2, shuffle_buffer=2, line_shard=(1, n))


@pytest.mark.parametrize(
    "stream, every",
    [
        pytest.param(_text_files_stream, 1, id="text-files"),
        *(
            pytest.param(functools.partial(_buffered_shards_stream, buffer=K), every, id=f"shuffle-buffer-{K}")
            for K, every in [(1, 11), (7, 1), (40, 1), (1000, 11)]
        ),
        pytest.param(_line_shard_stream, 3, id="line-shard"),
        pytest.param(_conllu_stream, 1, id="conllu"),
        *(
            pytest.param(functools.partial(_conllu_line_shard_stream, n=n), 1, id=f"conllu-line-shard-{n}")
            for n in (2, 3)
        ),
    ],
)
def test_text_source_resumes_exactly_after_any_sentence(tmp_path, stream, every):
    """The state after every `every`-th sentence, through JSON, resumes a fresh source to the
    same stream; the source that gave it goes on unchanged."""
    make = stream(tmp_path)
    full = list(make())
    for stop in range(0, len(full) + 1, every):
        src = make()
        head = _take(src, stop)
        fresh = make()
        fresh.load_state_dict(json.loads(json.dumps(src.state_dict())))
        assert head + list(fresh) == full, f"resume after {stop} sentences"
        assert head + list(src) == full


# ---------------------------------------------------------------- CRLF line ends, full-width digits


def test_crlf_files_with_full_width_digits_read_the_words_of_their_lf_twins(tmp_path):
    text = "１９９７年 ， 中国 经济\n\n迈向 充满 希望 的 新 世纪\n"
    conllu = _conllu(CONLLU_SENTENCES)
    for name, content in [("lf.txt", text), ("lf.conllu", conllu)]:
        (tmp_path / name).write_bytes(content.encode())
        (tmp_path / f"crlf{name.removeprefix('lf')}").write_bytes(content.replace("\n", "\r\n").encode())
    for suffix in ("txt", "conllu"):
        lf, crlf = (read_sentences(str(tmp_path / f"{twin}.{suffix}")) for twin in ("lf", "crlf"))
        assert crlf == lf
        assert not any("\r" in word for sentence in crlf for word in sentence)
    assert read_sentences(str(tmp_path / "crlf.txt"))[0] == ["１９９７年", "，", "中国", "经济"]  # Digits as written.
    assert list(read_lines(str(tmp_path / "crlf.txt"))) == [["１９９７年", "，", "中国", "经济"], [],
                                                            ["迈向", "充满", "希望", "的", "新", "世纪"]]
    shuffled = TextFileSource(str(tmp_path / "crlf.*"), shuffle=True, seed=1, shuffle_buffer=3, num_epochs=2)
    assert not any("\r" in word for sentence in shuffled for word in sentence)


# ---------------------------------------------------------------- segmenter


def test_the_segmenter_cuts_text_lines_not_conllu_words(tmp_path):
    pytest.importorskip("jieba", reason="segmenter 'jieba' needs the jieba package (pip install 'elmo-jax[zh]')")
    (tmp_path / "a.txt").write_text("我爱北京天安门\n", encoding="utf-8")
    (tmp_path / "b.conllu").write_text(_conllu([["北京天安门"]]), encoding="utf-8")
    assert read_sentences(str(tmp_path / "*"), "jieba") == [["我", "爱", "北京", "天安门"], ["北京天安门"]]
    assert read_sentences(str(tmp_path / "*")) == [["我爱北京天安门"], ["北京天安门"]]
    assert list(read_lines(str(tmp_path / "a.txt"), segmenter="jieba")) == [["我", "爱", "北京", "天安门"]]


def test_an_unknown_segmenter_is_an_error_before_reading(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(ValueError, match="unknown segmenter 'mecab'"):
        TextFileSource(str(tmp_path / "a.txt"), segmenter="mecab")


def test_a_corpus_pattern_naming_a_pipe_is_one_error_saying_why(tmp_path):
    """Corpus files are read more than once (vocabulary, epochs, resume): a FIFO is refused up front."""
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match=r"corpus.fifo is not a regular file \(a pipe\?\): corpus files are read more "
                                        "than once"):
        expand_globs(str(fifo))
    with pytest.raises(DataError, match="no file matches"):
        expand_globs(str(tmp_path / "*.txt"))


def test_an_input_conllu_file_gives_its_sentences_words_not_its_lines(tmp_path):
    """elmo-embed and elmo-neighbors read `*.conllu` as CoNLL-U: comments and ten columns were embedded as words."""
    from elmo_jax.data.sources import numbered_sentences

    path = tmp_path / "in.conllu"
    path.write_text("# sent_id = 1\n1\tThe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
                    "# sent_id = 2\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\t_\tAUX\t_\t_\t0\troot\t_\t_\n"
                    "2\tn't\t_\tPART\t_\t_\t1\tadvmod\t_\t_\n\n", encoding="utf-8")
    assert list(numbered_sentences(str(path))) == [(2, ["The", "cat"]), (7, ["do", "n't"])]
    (tmp_path / "in.txt").write_text("the cat\n\nsat\n", encoding="utf-8")
    assert list(numbered_sentences(str(tmp_path / "in.txt"))) == [(1, ["the", "cat"]), (2, []), (3, ["sat"])]
