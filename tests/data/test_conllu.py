"""CoNLL-U reading: sentences, comments, multiword tokens and empty nodes skipped, errors naming file:line."""

from __future__ import annotations

import pytest

from elmo_jax.data.conllu import is_conllu_file, parse_conllu, read_conllu


def row(token_id: str, form: str, upos: str = "NOUN", deprel: str = "dep") -> str:
    return "\t".join([token_id, form, form.lower(), upos, "NN", "_", "0", deprel, "_", "_"])


TEXT = "\n".join([
    "# newdoc id = d1",
    "# sent_id = 1",
    "# text = I don't know.",
    row("1", "I", "PRON"),
    row("2-3", "don't", "_", "_"),
    row("2", "do", "AUX"),
    row("3", "n't", "PART"),
    row("4", "know", "VERB"),
    row("4.1", "knows", "VERB"),
    row("5", ".", "PUNCT", "punct"),
    "",
    "",  # Two blank lines: still one boundary.
    "# sent_id = 2",
    row("1", "Yes", "INTJ", "discourse:emph"),
])  # No final newline.


def write(tmp_path, text, name="x.conllu"):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8")
    return str(path)


def test_sentences_words_and_lines(tmp_path):
    path = write(tmp_path, TEXT)
    sentences = read_conllu(path)
    assert [[t.form for t in s.tokens] for s in sentences] == [["I", "do", "n't", "know", "."], ["Yes"]]
    assert [t.upos for t in sentences[0].tokens] == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert sentences[1].tokens[0].deprel == "discourse:emph"
    assert [t.line for t in sentences[0].tokens] == [4, 6, 7, 8, 10]
    assert sentences[1].tokens[0].line == 14 and sentences[1].path == path


def test_crlf_line_ends_and_a_comment_block_without_tokens(tmp_path):
    text = TEXT.replace("\n", "\r\n") + "\r\n\r\n# a trailing comment\r\n"
    sentences = read_conllu(write(tmp_path, text))
    assert [len(s.tokens) for s in sentences] == [5, 1]
    assert sentences[0].tokens[-1].misc == "_"


@pytest.mark.parametrize("start", ["comment", "token"])
def test_a_byte_order_mark_at_the_start_is_not_part_of_the_first_line(tmp_path, start):
    text = TEXT if start == "comment" else TEXT[TEXT.index(row("1", "I", "PRON")):]
    with_bom = read_conllu(write(tmp_path, "\ufeff" + text, "bom.conllu"))
    assert [s.tokens for s in with_bom] == [s.tokens for s in read_conllu(write(tmp_path, text))]


@pytest.mark.parametrize(
    "text, message",
    [
        (row("1", "a") + "\n" + "1\ta\tb\n", ":2: expected 10 tab-separated columns, got 3"),
        (row("1", "a").replace("NOUN", "") + "\n", ":1: empty UPOS column"),
        (row("x", "a") + "\n", ":1: ID 'x' is not a word"),
        (row("1", "a") + "\n" + row("3", "b") + "\n", ":2: word ID 3 out of order (expected 2"),
        (row("1", "a") + "\n" + row("2", "b") + "\n" + row("1", "c") + "\n", ":3: word ID 1 out of order"),
        (row("1", "a") + "\n\n" + row("1-2", "ab") + "\n\n", "the sentence ending at line 4 has no word lines"),
        ("", "no sentences"),
        ("# only a comment\n\n", "no sentences"),
    ],
    ids=["columns", "empty-column", "bad-id", "gap", "restart", "no-words", "empty-file", "comments-only"],
)
def test_malformed_input_names_file_and_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as e:
        read_conllu(path)
    assert str(e.value).startswith(path) and message in str(e.value), str(e.value)


def test_invalid_utf8_names_the_line(tmp_path):
    path = write(tmp_path, (row("1", "a") + "\n").encode() + row("2", "b").encode().replace(b"b", b"\xff", 1))
    with pytest.raises(ValueError, match=r"x\.conllu:2: invalid UTF-8"):
        read_conllu(path)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_conllu(str(tmp_path / "none.conllu"))


def test_lines_of_a_file_from_its_middle_are_numbered_from_first_line():
    lines = [row("1", "a"), "9\tb", ""]
    with pytest.raises(ValueError, match=r"^x\.conllu:41: expected 10 tab-separated columns"):
        parse_conllu(lines, "x.conllu", first_line=40)
    (sentence,) = parse_conllu(["# c", row("1", "a") + "\r\n", "\r\n"], "x.conllu", first_line=7)
    assert [(t.form, t.line) for t in sentence.tokens] == [("a", 8)]


def test_conllu_files_are_named_by_their_suffix():
    assert is_conllu_file("ud/zh_gsdsimp-ud-dev.conllu") and is_conllu_file("train.conllu.gz")
    assert not is_conllu_file("train.txt") and not is_conllu_file("train.conllu.txt")
