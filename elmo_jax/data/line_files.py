"""UTF-8 text files read line by line (CoNLL-U's), and line-for-line files of labelled examples
(CoarseWSD-20's and WiC's layouts): a data file of one example a line beside a gold file of one
label a line, an example naming its word by an index into its sentence. Errors are ValueErrors
naming `file:line`.
"""

from __future__ import annotations

import re
from typing import Iterator

# Not str.isdigit() nor int(): both take other digits too, int() reads '١' (Arabic-Indic one) as 1.
_ASCII_DIGITS = re.compile(r"[0-9]+")


def utf8_line(raw: bytes, where: str, error: type[ValueError] = ValueError) -> str:
    """A line's bytes `raw` as text; `error` naming `where` (its file:line) if they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not valid UTF-8 ({e.reason})") from None


def numbered_lines(path: str) -> Iterator[tuple[int, str]]:
    """(1-based number, text without its line end) of each line of `path`, the first without a byte
    order mark; ValueError for invalid UTF-8."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{number}: invalid UTF-8 ({e.reason})") from None


def gold_lines(gold_path: str, data_path: str, data_lines: int, what: str = "label") -> Iterator[tuple[int, str]]:
    """(1-based number, stripped text) of each line of `gold_path`, the label of that line of
    `data_path` (`data_lines` lines). ValueError naming the gold file's line where it has a line
    more or fewer than the data file (`what`: the labels' name in the message)."""
    last = 0
    for number, line in numbered_lines(gold_path):
        if number > data_lines:
            raise ValueError(f"{gold_path}:{number}: a {what} past the last line ({data_lines}) of {data_path}")
        last = number
        yield number, line.strip()
    if last < data_lines:
        raise ValueError(f"{gold_path}:{last + 1}: no {what} for line {last + 1} of {data_path} ({data_lines} lines)")


def token_index(path: str, number: int, text: str, tokens: int, what: str, sentence: str = "the sentence") -> int:
    """`text`, the 0-based index of a word among its sentence's `tokens` tokens (`what`, `sentence`:
    their names in the message); ValueError naming `path:number` unless it is ASCII digits below
    `tokens`. Their count is compared before int() reads them: it fails past 4,300 digits."""
    if not _ASCII_DIGITS.fullmatch(text):
        raise ValueError(f"{path}:{number}: the {what} {text[:40]!r} is not a non-negative integer (ASCII digits)")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(tokens)) or int(digits) >= tokens:
        shown = digits if len(digits) <= 40 else f"of {len(digits)} digits"
        raise ValueError(f"{path}:{number}: {what} {shown} is past {sentence}'s {tokens} tokens")
    return int(digits)
