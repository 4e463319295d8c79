"""Named-entity files: Universal NER's (`ID WORD TAG ann1 ann2`, tab-separated, `#` comments) and
CoNLL-2003's (`WORD POS CHUNK TAG`, space-separated, `-DOCSTART-` lines), one word a line and a blank line
between sentences, read once (pipes work; `*.gz` is gunzipped) into words and IOB2 tags, and written back
line for line with predicted tags in the tag column, for users' own scorers (conlleval, seqeval). Errors
are ValueErrors naming `file:line`.
"""

from __future__ import annotations

import gzip
import re
from typing import Iterable, Iterator, NamedTuple, TextIO

from elmo_jax.data.line_files import numbered_lines

LAYOUTS = ("uner", "conll2003")
SCHEMES = ("iob2", "iob1")  # iob1: CoNLL-2003's original tags, converted to IOB2 on reading.
UNER_COLUMNS = ("ID", "WORD", "TAG", "annotation 1", "annotation 2")
DOCSTART = "-DOCSTART-"
_TAG = re.compile(r"O|[BI]-\S+")
_LAST_FIELD = re.compile(r"\S+(?=\s*$)")  # A CoNLL-2003 line's tag: replaced in place, its spacing kept.


class EntitySentence(NamedTuple):
    """One sentence: its words, their IOB2 tags and the 1-based file lines of their token lines (three
    lists of one length)."""

    words: list[str]
    tags: list[str]
    lines: list[int]


class EntityFile(NamedTuple):
    """A named-entity file as read: its sentences, and what `write_entity_file` needs to write it back."""

    path: str
    layout: str  # One of LAYOUTS.
    scheme: str  # One of SCHEMES: the file's tags; `sentences` hold IOB2 ones either way.
    sentences: list[EntitySentence]
    text_lines: list[str]  # Every line of the file without its line end (the first without a byte order mark).


def read_entity_file(path: str, scheme: str = "iob2", layout: str | None = None, strict: bool = True) -> EntityFile:
    """The sentences of the named-entity file at `path`, read once (a pipe works; a name ending in `.gz` is
    gunzipped), and its lines for writing back. `layout` (one of LAYOUTS; None: a tab
    in the first token line means "uner", else "conll2003"); `scheme`: the file's tags (one of SCHEMES),
    IOB2 in the result. `strict`: a tag the scheme forbids where it stands (IOB2's I-X after O, after
    another type or first in a sentence; IOB1's B-X not after an X) is an error, else read as starting an
    entity (what conlleval does). ValueError naming `path:line` for bad input."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r} (expected one of {', '.join(SCHEMES)})")
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"unknown entity file layout {layout!r} (expected one of {', '.join(LAYOUTS)})")
    text_lines = [line for _, line in _numbered_lines(path)]
    if layout is None:
        layout = _detect_layout(text_lines)
    columns = _column_count(text_lines, layout)
    sentences = []
    for numbered in _sentence_blocks(text_lines, layout):
        numbers = [number for number, _ in numbered]
        words, tags = _token_columns(path, numbered, columns)
        sentences.append(EntitySentence(words, _to_iob2(path, numbers, tags, scheme, strict), numbers))
    if not sentences:
        raise ValueError(f"{path}: no sentences (an empty file, or comments and -DOCSTART- lines only)")
    return EntityFile(path, layout, scheme, sentences, text_lines)


def write_entity_file(entity_file: EntityFile, predicted_tags: list[list[str]], out: TextIO) -> None:
    """Write `entity_file` back to `out` line for line (comments, -DOCSTART- and blank lines as they were,
    `\\n` line ends) with each token line's tag column replaced by its predicted tag: `predicted_tags`, one
    list of IOB2 tags per sentence, one tag per word, written in the file's scheme (an IOB1 file gets IOB1
    tags) so that the output lines up with the gold file. Only the tag column changes: UNER's annotation
    columns, CoNLL-2003's POS and chunk columns stay as read. ValueError before writing anything when the
    predictions' sentence count or lengths disagree with the file, or a tag is not O, B-<type> or I-<type>."""
    path, sentences = entity_file.path, entity_file.sentences
    if len(predicted_tags) != len(sentences):
        raise ValueError(f"{len(predicted_tags)} sentences of predicted tags for the {len(sentences)} of {path}")
    text_lines = list(entity_file.text_lines)
    for index, (sentence, tags) in enumerate(zip(sentences, predicted_tags)):
        where = f"{path}:{sentence.lines[0]}: sentence {index + 1}"
        if len(tags) != len(sentence.words):
            raise ValueError(f"{where}: {len(tags)} predicted tags for its {len(sentence.words)} words")
        for tag in tags:
            if not isinstance(tag, str) or not _TAG.fullmatch(tag):
                raise ValueError(f"{where}: predicted tag {tag!r} is not O, B-<type> or I-<type>")
        if entity_file.scheme == "iob1":
            tags = iob2_to_iob1(tags)
        for number, tag in zip(sentence.lines, tags):
            text_lines[number - 1] = _with_tag(text_lines[number - 1], tag, entity_file.layout)
    for line in text_lines:
        out.write(line + "\n")


def entity_spans(tags: list[str]) -> list[tuple[str, int, int]]:
    """The entities of one sentence's IOB2 `tags`: (type, first word, last word + 1) in order; an I-X not
    continuing an X starts one."""
    spans: list[tuple[str, int, int]] = []
    for index, tag in enumerate(tags):
        if tag == "O":
            continue
        kind = tag[2:]
        if tag.startswith("I-") and spans and spans[-1][2] == index and spans[-1][0] == kind:
            spans[-1] = (kind, spans[-1][1], index + 1)
        else:
            spans.append((kind, index, index + 1))
    return spans


def entity_types(sentences: Iterable[EntitySentence]) -> list[str]:
    """The entity types tagged in `sentences`, sorted."""
    return sorted({tag[2:] for sentence in sentences for tag in sentence.tags if tag != "O"})


def entity_counts(sentences: Iterable[EntitySentence]) -> dict[str, int]:
    """Entities per type in `sentences` (types sorted)."""
    counts: dict[str, int] = {}
    for sentence in sentences:
        for kind, _, _ in entity_spans(sentence.tags):
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def tag_vocabulary(types: Iterable[str]) -> list[str]:
    """The IOB2 tags of entity `types`: "O", then B-<type> and I-<type> for each type in sorted order (a
    tagger's output classes, e.g. `tag_vocabulary(entity_types(train.sentences))`)."""
    return ["O", *(f"{prefix}-{kind}" for kind in sorted(set(types)) for prefix in "BI")]


def iob2_to_iob1(tags: list[str]) -> list[str]:
    """One sentence's IOB2 `tags` in IOB1: every entity starts with I- unless it follows one of its type."""
    iob1 = []
    for index, tag in enumerate(tags):
        if tag.startswith("B-") and not (index and tags[index - 1] != "O" and tags[index - 1][2:] == tag[2:]):
            tag = "I-" + tag[2:]
        iob1.append(tag)
    return iob1


def _numbered_lines(path: str) -> Iterator[tuple[int, str]]:
    """line_files.numbered_lines(path), gunzipped first for a name ending in `.gz`."""
    if not path.endswith(".gz"):
        yield from numbered_lines(path)
        return
    number = 0
    try:
        with gzip.open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{path}:{number}: invalid UTF-8 ({e.reason})") from None
    except (gzip.BadGzipFile, EOFError) as e:
        raise ValueError(f"{path}:{number + 1}: bad gzip data ({e})") from None


def _detect_layout(text_lines: list[str]) -> str:
    """"uner" when the first token line (neither blank nor a `#` comment) has a tab, else "conll2003"."""
    for line in text_lines:
        if line.strip() and not line.startswith("#"):
            return "uner" if "\t" in line else "conll2003"
    return "uner"  # Comments or blank lines only: no sentences either way.


def _column_count(text_lines: list[str], layout: str) -> int | None:
    """The columns of every CoNLL-2003 token line: as many as the first line that is not blank has (a
    -DOCSTART- line has them too); None for UNER, whose columns are fixed (UNER_COLUMNS)."""
    if layout == "uner":
        return None
    return next((len(line.split()) for line in text_lines if line.strip()), 0)


def _sentence_blocks(text_lines: list[str], layout: str) -> Iterator[list[tuple[int, str]]]:
    """The (line number, line) token lines of each sentence: runs of lines between blank lines, without
    UNER's `#` comments; a CoNLL-2003 -DOCSTART- line is no sentence's and ends one."""
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text_lines, 1):
        if layout == "uner" and line.startswith("#"):
            continue
        if not line.strip() or (layout == "conll2003" and line.split()[0] == DOCSTART):
            if block:
                yield block
            block = []
        else:
            block.append((number, line))
    if block:
        yield block


def _token_columns(path: str, numbered: list[tuple[int, str]], columns_expected: int | None,
                   ) -> tuple[list[str], list[str]]:
    """The words and tags (as written) of one sentence's token lines: UNER's (`columns_expected` None) or
    CoNLL-2003's of `columns_expected` columns."""
    words, tags = [], []
    for number, line in numbered:
        if columns_expected is None:
            columns = line.split("\t")
            if len(columns) != len(UNER_COLUMNS):
                raise ValueError(f"{path}:{number}: expected {len(UNER_COLUMNS)} tab-separated columns "
                                 f"({' '.join(UNER_COLUMNS)}), got {len(columns)}")
            if columns[0] != str(len(words) + 1):
                raise ValueError(f"{path}:{number}: word ID {columns[0][:40]!r} out of order (expected "
                                 f"{len(words) + 1}; a missing blank line between sentences?)")
            word, tag = columns[1], columns[2]
            if not word.strip():
                raise ValueError(f"{path}:{number}: empty WORD column")
        else:
            columns = line.split()
            if len(columns) != columns_expected or len(columns) < 2:
                raise ValueError(f"{path}:{number}: expected {max(columns_expected, 2)} space-separated columns "
                                 f"(WORD ... TAG, as many as the file's first line), got {len(columns)}")
            word, tag = columns[0], columns[-1]
        if not _TAG.fullmatch(tag):
            raise ValueError(f"{path}:{number}: tag {tag[:40]!r} is not O, B-<type> or I-<type>")
        words.append(word)
        tags.append(tag)
    return words, tags


def _to_iob2(path: str, numbers: list[int], tags: list[str], scheme: str, strict: bool) -> list[str]:
    """One sentence's `tags` (in `scheme`, on lines `numbers`) in IOB2; under `strict`, a tag the scheme
    forbids where it stands is an error."""
    iob2 = []
    for index, (number, tag) in enumerate(zip(numbers, tags)):
        previous = tags[index - 1] if index else None
        continues = previous is not None and previous != "O" and previous[2:] == tag[2:]
        after = "at the start of the sentence" if previous is None else f"after {previous}"
        if scheme == "iob2" and tag.startswith("I-") and not continues:
            if strict:
                raise ValueError(f"{path}:{number}: {tag} {after} continues no entity: IOB2 starts every "
                                 "entity with B- (an IOB1 file? read it with scheme='iob1')")
            tag = "B-" + tag[2:]
        elif scheme == "iob1" and tag.startswith("I-") and not continues:
            tag = "B-" + tag[2:]
        elif scheme == "iob1" and tag.startswith("B-") and strict and not continues:
            raise ValueError(f"{path}:{number}: {tag} {after}: IOB1 writes B- only between two adjacent "
                             "entities of one type (an IOB2 file? read it with scheme='iob2')")
        iob2.append(tag)
    return iob2


def _with_tag(line: str, tag: str, layout: str) -> str:
    """A token `line` with its tag column replaced by `tag`."""
    if layout == "uner":
        columns = line.split("\t")
        columns[2] = tag
        return "\t".join(columns)
    return _LAST_FIELD.sub(tag, line, count=1)
