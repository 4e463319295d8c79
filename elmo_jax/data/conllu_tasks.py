"""CoNLL-U for task models (a UPOS tagger, a dependency parser): a file read once into its lines and its
sentences, the gold labels of a column, checked dependency trees, and the file written back with predicted
columns in place of the gold ones (so that a prediction file keeps the input's comments, multiword tokens
and empty nodes). Errors are ValueErrors naming `file:line`.
"""

from __future__ import annotations

import numbers
import re
from typing import NamedTuple, Sequence, TextIO

from elmo_jax.data.conllu import COLUMNS, Sentence, Token, parse_conllu
from elmo_jax.data.line_files import numbered_lines

_HEAD = re.compile(r"0|[1-9][0-9]*")
_NO_VALUE = "_"


class ConlluDocument(NamedTuple):
    """A CoNLL-U file: its lines (without their line ends, the first without a byte order mark) and its
    sentences (a word's `token.line` is its 1-based number in `lines`)."""

    path: str
    lines: list[str]
    sentences: list[Sentence]


class Tree(NamedTuple):
    """The basic dependency tree of a sentence of n words: `heads[i]` is the ID (1..n) of the head of word
    i + 1, 0 for the root; `relations[i]` its DEPREL."""

    heads: list[int]
    relations: list[str]


def read_conllu_document(path: str) -> ConlluDocument:
    """The CoNLL-U file at `path`, read once (a pipe works); ValueError naming `path:line` for bad input."""
    lines = [line for _, line in numbered_lines(path)]
    sentences = parse_conllu(lines, path)
    if not sentences:
        raise ValueError(f"{path}: no sentences (an empty file, or comments only)")
    return ConlluDocument(path, lines, sentences)


def column_labels(document: ConlluDocument, column: str, unlabelled: bool = False) -> list[list[str]]:
    """The values of `column` (a name of COLUMNS, any case: "upos", "XPOS") of each word of each sentence.
    A `_` (no value) is a ValueError naming the word's `file:line` (an unannotated file given for training
    or scoring) unless `unlabelled`: a file to predict for, whose `_` values are returned as they are."""
    name = column.lower()
    if name not in COLUMNS:
        raise ValueError(f"unknown CoNLL-U column {column!r} (one of {', '.join(c.upper() for c in COLUMNS)})")
    labels = [[getattr(token, name) for token in sentence.tokens] for sentence in document.sentences]
    if not unlabelled:
        for sentence, values in zip(document.sentences, labels):
            for token, value in zip(sentence.tokens, values):
                if value == _NO_VALUE:
                    raise ValueError(f"{document.path}:{token.line}: word {token.id} has no {name.upper()} ('_'): "
                                     "an unannotated file? (unlabelled=True reads one to predict for)")
    return labels


def tree_of(sentence: Sentence) -> Tree:
    """The dependency tree of `sentence`, checked: each HEAD 0 (the root) or a word ID of the sentence,
    each DEPREL a value (not `_`), one word with HEAD 0, and every word reaching it (no cycle)."""
    path, tokens = sentence.path, sentence.tokens
    size = len(tokens)
    heads: list[int] = []
    for token in tokens:
        head = token.head
        if not _HEAD.fullmatch(head) or len(head) > len(str(size)) or int(head) > size:
            raise ValueError(f"{path}:{token.line}: HEAD {head[:40]!r} of word {token.id} is neither 0 (the root) "
                             f"nor a word ID of its sentence of {size} words (1..{size})")
        if token.deprel == _NO_VALUE:
            raise ValueError(f"{path}:{token.line}: word {token.id} has no DEPREL ('_'): a dependency tree needs "
                             "each word's relation")
        heads.append(int(head))
    roots = [token.id for token, head in zip(tokens, heads) if head == 0]
    if len(roots) != 1:
        found = "no word" if not roots else f"{len(roots)} words ({', '.join(roots)})"
        raise ValueError(f"{path}:{tokens[0].line}: the sentence whose first word is here has {found} with HEAD 0; "
                         "a tree has one root")
    cycle = _cycle(heads)
    if cycle:
        raise ValueError(f"{path}:{tokens[cycle[0] - 1].line}: word {cycle[0]} is on a cycle of heads "
                         f"({' -> '.join(map(str, [*cycle, cycle[0]]))}): its words never reach the root")
    return Tree(heads, [token.deprel for token in tokens])


def document_trees(document: ConlluDocument) -> list[Tree]:
    """The tree of each sentence of `document` (tree_of); the first sentence's error that fails is raised."""
    return [tree_of(sentence) for sentence in document.sentences]


def _cycle(heads: list[int]) -> list[int]:
    """The word IDs of a cycle of `heads` (1-based IDs, 0 the root), its smallest first, each followed by its
    head; [] when every word reaches 0."""
    reaches_root = [True] + [False] * len(heads)  # Indexed by word ID, 0 the root.
    for start in range(1, len(heads) + 1):
        walk: dict[int, None] = {}  # The words walked from `start`, in order.
        word = start
        while not reaches_root[word] and word not in walk:
            walk[word] = None
            word = heads[word - 1]
        if not reaches_root[word]:  # The walk came back to `word`: a cycle.
            order = list(walk)
            cycle = order[order.index(word):]
            smallest = cycle.index(min(cycle))
            return cycle[smallest:] + cycle[:smallest]
        for seen in walk:
            reaches_root[seen] = True
    return []


def write_conllu(document: ConlluDocument, out: TextIO, upos: Sequence[Sequence[str]] | None = None,
                 heads: Sequence[Sequence[int]] | None = None,
                 relations: Sequence[Sequence[str]] | None = None, xpos: Sequence[Sequence[str]] | None = None) -> None:
    """Write `document`'s lines to `out`, each followed by "\\n" (so a CRLF file's line ends are out's, a
    missing final line end is added, a byte order mark is not written), unchanged but for the given
    columns of its word lines: `upos` (UPOS), `xpos` (XPOS), `heads` (HEAD: 0 for the root, else a word
    ID of the sentence) and `relations` (DEPREL), each a list (one per sentence) of lists (one value per
    word). Predicted heads need not make a tree (a greedy parser's may not). Comments, multiword-token
    lines, empty nodes and blank lines are kept as they are.

    Replacing `heads` or `relations` sets the DEPS column (the enhanced graph, which the basic tree's heads
    and relations are part of) of every word to `_`, since it no longer matches; empty-node lines keep
    theirs. ValueError, before anything is written, for a value that is not a CoNLL-U value or a list whose
    length disagrees with the document, naming the sentence's or the word's `file:line`."""
    replaced: dict[int, list[list[str]]] = {}  # Column index -> the new text of each word of each sentence.
    for argument, column, values in (("upos", "upos", upos), ("xpos", "xpos", xpos), ("heads", "head", heads),
                                     ("relations", "deprel", relations)):
        if values is not None:
            replaced[COLUMNS.index(column)] = _column_texts(document, argument, values)
    if heads is not None or relations is not None:
        replaced[COLUMNS.index("deps")] = [[_NO_VALUE] * len(s.tokens) for s in document.sentences]
    word_lines: dict[int, str] = {}  # 1-based line number -> its new text.
    for s, sentence in enumerate(document.sentences):
        for w, token in enumerate(sentence.tokens):
            columns = list(token[:len(COLUMNS)])
            for index, texts in replaced.items():
                columns[index] = texts[s][w]
            word_lines[token.line] = "\t".join(columns)
    for number, line in enumerate(document.lines, 1):
        out.write(word_lines.get(number, line) + "\n")


def _column_texts(document: ConlluDocument, argument: str, values: Sequence[Sequence[object]]) -> list[list[str]]:
    """`values` (the argument `argument` of write_conllu) as column texts, checked against `document`."""
    path, sentences = document.path, document.sentences
    if len(values) > len(sentences):
        raise ValueError(f"{path}: {argument} has values for {len(values)} sentences, the file has {len(sentences)}")
    if len(values) < len(sentences):
        raise ValueError(f"{path}:{sentences[len(values)].tokens[0].line}: {argument} has no values for sentence "
                         f"{len(values) + 1} (its first word here), the file has {len(sentences)} sentences")
    texts = []
    for s, (sentence, sentence_values) in enumerate(zip(sentences, values)):
        size = len(sentence.tokens)
        if len(sentence_values) != size:
            raise ValueError(f"{path}:{sentence.tokens[0].line}: {argument}[{s}] has {len(sentence_values)} values "
                             f"for sentence {s + 1} (its first word here) of {size} words")
        texts.append([_column_text(path, argument, s, w, token, value, size)
                      for w, (token, value) in enumerate(zip(sentence.tokens, sentence_values))])
    return texts


def _column_text(path: str, argument: str, s: int, w: int, token: Token, value: object, size: int) -> str:
    """The text of `value`, `argument`[s][w] of write_conllu, for `token` of a sentence of `size` words."""
    where = f"{path}:{token.line}: {argument}[{s}][{w}] = {value!r} for word {token.id}"
    if argument == "heads":
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value <= size:
            raise ValueError(f"{where} is neither 0 (the root) nor a word ID of its sentence of {size} words")
        return str(int(value))
    if not isinstance(value, str) or not value or any(c in value for c in "\t\n\r"):
        raise ValueError(f"{where} is not a CoNLL-U value (a non-empty string without tabs or line breaks; "
                         "'_' for none)")
    return value
