"""Reading CoarseWSD-20's layout: a root or one word's directory, line ends, and one error naming
file:line for each kind of bad input."""

from __future__ import annotations

import os

import pytest

from elmo_jax.data.coarsewsd import read_coarsewsd
from tests.data.coarsewsd_helpers import write_made_up_dataset, write_word

TRAIN = [(1, "the bank of the river", "0"), (0, "bank  loans", "1")]
TEST = [(2, "a big bank", "1")]


def test_a_root_and_a_words_directory(tmp_path):
    write_word(str(tmp_path), "bank", ["river", "money"], TRAIN, TEST)
    write_made_up_dataset(str(tmp_path / "more"))
    os.makedirs(tmp_path / "notes")  # Neither a word (no classes_map.txt) nor is "more" (its words are one level down).
    (bank,) = read_coarsewsd(str(tmp_path))
    assert bank.word == "bank"
    assert bank.senses == {"0": "bank_river", "1": "bank_money"}
    assert [(e.tokens, e.position, e.sense) for e in bank.train] == [
        (["the", "bank", "of", "the", "river"], 1, "0"), (["bank", "loans"], 0, "1")
    ]
    assert bank.test[0].where == (str(tmp_path / "bank" / "test.data.txt"), 1)
    assert read_coarsewsd(str(tmp_path / "bank")) == [bank]
    assert [w.word for w in read_coarsewsd(str(tmp_path / "more"))] == ["bank", "bass"]


def test_a_last_line_without_its_line_end(tmp_path):
    directory = write_word(str(tmp_path), "bank", ["river", "money"], TRAIN, TEST)
    with open(os.path.join(directory, "train.gold.txt"), "w") as f:
        f.write("0\r\n1")
    assert [e.sense for e in read_coarsewsd(directory)[0].train] == ["0", "1"]


def test_byte_order_marks_and_leading_zeros(tmp_path):
    """A byte order mark opening any of a word's files, classes_map.txt's too (it was refused there
    alone), and a position of ASCII digits however many leading zeros it has, are read as without."""
    directory = write_word(str(tmp_path), "bank", ["river", "money"], TRAIN, TEST)
    (bank,) = read_coarsewsd(directory)
    for name in ("classes_map.txt", "train.data.txt", "train.gold.txt"):
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8-sig") as f:
            f.write(text.replace("1\tthe bank", f"{'0' * 5000}1\tthe bank"))
    assert read_coarsewsd(directory) == [bank]


@pytest.mark.parametrize(
    "file, text, message",
    [
        ("train.data.txt", "1\tthe bank\nbank of\n", "train.data.txt:2: expected '<position><TAB><sentence>'"),
        ("train.data.txt", "1\tthe bank\n-1\tbank of\n", "train.data.txt:2: the position '-1' is not a non-negative"),
        ("train.data.txt", "1\tthe bank\n2\tbank of\n", "train.data.txt:2: position 2 is past the sentence's 2 tokens"),
        ("train.data.txt", "1\tthe bank\n0\t \n", "train.data.txt:2: an empty sentence"),
        ("train.data.txt", "1\tthe bank\n\u00b2\tbank of\n", "train.data.txt:2: the position '\u00b2' is not a non-negative"),
        ("train.data.txt", "1\tthe bank\n\u0661\tbank of\n", "train.data.txt:2: the position '\u0661' is not a non-negative"),
        ("train.data.txt", f"1\tthe bank\n{'1' * 4301}\tbank of\n",
         "train.data.txt:2: position of 4301 digits is past the sentence's 2 tokens"),
        ("test.data.txt", "", "test.data.txt: no sentences (an empty file)"),
        ("train.gold.txt", "0\n", "train.gold.txt:2: no sense for line 2 of"),
        ("train.gold.txt", "0\n1\n1\n", "train.gold.txt:3: a sense past the last line (2) of"),
        ("test.gold.txt", "7\n", "test.gold.txt:1: sense '7' is not in classes_map.txt (0, 1)"),
        ("test.data.txt", b"0\tbank \xff\n", "test.data.txt:1: invalid UTF-8"),
        ("classes_map.txt", "[0, 1]", "classes_map.txt: not a JSON object of sense id -> sense name"),
    ],
    ids=["no-tab", "negative", "out-of-range", "empty", "superscript-digit", "arabic-indic-digit", "4301-digits",
         "empty-split", "fewer-senses", "more-senses", "unknown-sense", "utf8", "classes"],
)
def test_bad_input_is_one_error_naming_file_and_line(tmp_path, file, text, message):
    directory = write_word(str(tmp_path), "bank", ["river", "money"], TRAIN, TEST)
    path = os.path.join(directory, file)
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as error:
        read_coarsewsd(str(tmp_path))
    assert len(str(error.value).splitlines()) == 1 and message in str(error.value)
    assert str(error.value).startswith(path)


def test_a_directory_without_words(tmp_path):
    with pytest.raises(ValueError, match="no classes_map.txt, nor directories with one"):
        read_coarsewsd(str(tmp_path))
    with pytest.raises(ValueError, match="not a directory"):
        read_coarsewsd(str(tmp_path / "missing"))
