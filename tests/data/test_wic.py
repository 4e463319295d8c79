"""Reading WiC's layout: splits in their own directories or side by side, an optional dev split,
and one error naming file:line for each kind of bad input."""

from __future__ import annotations

import os

import pytest

from elmo_jax.data.wic import read_wic
from tests.data.wic_helpers import write_made_up_wic, write_split

LINES = ["bank\tN\t1-0\tthe bank of the river\tbank  loans", "carry\tV\t0-2\tcarried it\twe always carry"]
GOLD = ["F", "T\r"]  # The last line's end is "\r\n".


@pytest.mark.parametrize("nested", [True, False], ids=["wic-layout", "side-by-side"])
def test_both_layouts_and_an_optional_dev_split(tmp_path, nested):
    for split in ("train", "test"):
        write_split(str(tmp_path), split, LINES, GOLD, nested)
    data = read_wic(str(tmp_path))
    assert data.dev is None and len(data.test) == 2
    first, second = data.train
    assert (first.word, first.pos, first.positions, first.same) == ("bank", "N", (1, 0), False)
    assert first.tokens == (["the", "bank", "of", "the", "river"], ["bank", "loans"])
    assert (second.word, second.pos, second.positions, second.same) == ("carry", "V", (0, 2), True)
    folder = tmp_path / "train" if nested else tmp_path
    assert second.where == (str(folder / "train.data.txt"), 2)
    write_split(str(tmp_path), "dev", LINES[:1], GOLD[:1], nested)
    assert [p.same for p in read_wic(str(tmp_path)).dev] == [False]


def test_a_byte_order_mark_opening_a_file_is_read_as_without(tmp_path):
    for split in ("train", "test"):
        write_split(str(tmp_path), split, LINES, GOLD)
    data = read_wic(str(tmp_path))
    for name in ("train.data.txt", "train.gold.txt"):
        path = tmp_path / "train" / name
        path.write_text(path.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert read_wic(str(tmp_path)) == data


def test_a_made_up_dataset_reads_back(tmp_path):
    data = read_wic(write_made_up_wic(str(tmp_path), train=20, dev=5, test=10))
    assert [len(s) for s in data] == [20, 5, 10]
    assert all(p.tokens[i][p.positions[i]] == p.word for s in data for p in s for i in (0, 1))


@pytest.mark.parametrize(
    "file, text, message",
    [
        ("train.data.txt", "", "train.data.txt: no pairs (an empty file)"),
        ("train.data.txt", "bank\tN\t1-0\tthe bank\n", "train.data.txt:1: expected 5 tab-separated columns"),
        ("train.data.txt", f"{LINES[0]}\tmore\n", "train.data.txt:1: expected 5 tab-separated columns"),
        ("train.data.txt", "bank\tN\t1\tthe bank\tbank\n", "train.data.txt:1: the indices '1' are not 'i-j'"),
        ("train.data.txt", "bank\tN\t1--1\tthe bank\tbank\n", "train.data.txt:1: the indices '1--1' are not 'i-j'"),
        ("train.data.txt", f"{LINES[0]}\nbank\tN\t2-0\tthe bank\tbank\n",
         "train.data.txt:2: index 2 is past sentence 1's 2 tokens"),
        ("train.data.txt", f"{LINES[0]}\nbank\tN\t0-1\tbank\tbank\n",
         "train.data.txt:2: index 1 is past sentence 2's 1 tokens"),
        ("train.data.txt", f"{LINES[0]}\nbank\tN\t0-0\tbank\t \n", "train.data.txt:2: index 0 is past sentence 2's 0"),
        ("train.data.txt", "bank\tN\t\u0661-0\tthe bank\tbank\n", "train.data.txt:1: the indices '\u0661-0' are not 'i-j'"),
        ("train.data.txt", f"bank\tN\t0-{'1' * 4301}\tthe bank\tbank\n",
         "train.data.txt:1: index of 4301 digits is past sentence 2's 1 tokens"),
        ("train.gold.txt", "T\n", "train.gold.txt:2: no label for line 2 of"),
        ("train.gold.txt", "T\nF\nT\n", "train.gold.txt:3: a label past the last line (2) of"),
        ("test.gold.txt", "T\nyes\n", "test.gold.txt:2: label 'yes' is not T or F"),
        ("test.data.txt", b"bank\tN\t0-0\tbank \xff\tbank\n", "test.data.txt:1: invalid UTF-8"),
    ],
    ids=["empty", "few-columns", "many-columns", "one-index", "negative-index", "past-sentence-1", "past-sentence-2",
         "empty-sentence", "arabic-indic-digit", "4301-digits", "fewer-labels", "more-labels", "bad-label", "utf8"],
)
def test_bad_input_is_one_error_naming_file_and_line(tmp_path, file, text, message):
    for split in ("train", "test"):
        write_split(str(tmp_path), split, LINES, GOLD)
    with open(tmp_path / file.split(".")[0] / file, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as error:
        read_wic(str(tmp_path))
    assert str(error.value).startswith(str(tmp_path / file.split(".")[0] / file)) and message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_missing_split_or_directory(tmp_path):
    write_split(str(tmp_path), "train", LINES, GOLD)
    with pytest.raises(ValueError, match=r": no test.data.txt \(WiC's layout"):
        read_wic(str(tmp_path))
    with pytest.raises(ValueError, match="train.data.txt: not a directory"):
        read_wic(os.path.join(tmp_path, "train", "train.data.txt"))
