"""Intrinsic evaluation of word vectors (`elmo-vectors`, docs/static_vectors.md, "Analogies and word
similarity"): analogy questions `a : b :: c : d` answered by 3CosAdd and 3CosMul (Levy & Goldberg
2014), and Spearman's rho between the vectors' cosines and human similarity scores.

Conventions, gensim's `evaluate_word_analogies` / `evaluate_word_pairs` where it has one:

- Vectors are unit-normalised; a zero vector stays zero (cosine 0 with every word).
- Words are looked up case-insensitively: the file's and the set's words lower-cased (gensim
  upper-cases; the same on ASCII). A lower-cased form stands for the first row that has it, the
  most frequent of its spellings in a file sorted by frequency, as gensim takes the first.
- Analogies see the file's first `restrict` rows only (gensim's `restrict_vocab`): the question
  words are looked up there and the answer is searched there. A question with a word (the
  expected one included) outside them is unknown: counted apart, never answered, outside the
  accuracy. Accuracy = correct / answered questions; coverage = answered / all questions.
- The answer is the row of the highest score, every row of the three question words' forms
  excluded (each spelling: `King` too when `king` is asked); it is correct when its form is the
  expected word's (as gensim, another spelling of it counts). Ties go to the earlier row.
- 3CosAdd: cos(x, b) - cos(x, a) + cos(x, c). 3CosMul: cos'(x, b) cos'(x, c) / (cos'(x, a) + 0.001),
  cos' = (cos + 1) / 2 in [0, 1] (Levy & Goldberg's shift and epsilon; gensim's `most_similar_cosmul`
  takes 1e-6).
- Similarity looks the pairs up in the whole file (no restriction: no answer is searched); a pair
  with a word it lacks is counted apart. rho: Spearman's, average ranks for ties, NaN under 2 pairs
  or when either side is constant.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
from typing import Iterator, NamedTuple, Sequence

import numpy as np

from elmo_jax.data.line_files import numbered_lines
from elmo_jax.static.lookup import NO_ROW, StaticVectors
from elmo_jax.static.word2vec import INSTALL_HINT

ADD, MUL = "3CosAdd", "3CosMul"
METHODS = (ADD, MUL)
EPSILON = 0.001  # 3CosMul's, Levy & Goldberg 2014.
DEFAULT_RESTRICT = 30_000  # Rows an analogy's words are looked up in and answered from.
# The evaluation files of gensim's wheel (gensim/test/test_data/), by the names the command takes.
BUNDLED = {"google": "questions-words.txt", "wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}
# Elements of the [words, rows] float32 cosines held at once (256 MiB), and of a [questions, rows]
# block of scores (1 MiB: the passes over it run in a core's cache, several times faster than in memory).
_COSINE_ELEMENTS = 1 << 26
_BLOCK_ELEMENTS = 1 << 18


# ----------------------------------------------------------------------------------------------
# Files.


def bundled_file(name: str) -> str:
    """The path of one of gensim's evaluation files, by its BUNDLED name or file name; found in the
    installed package without importing it (gensim's import takes seconds), never downloaded.
    FileNotFoundError (one line) when gensim is not installed or lacks the file."""
    file_name = BUNDLED.get(name, name)
    if file_name not in BUNDLED.values():
        raise ValueError(f"{name!r} is not a bundled set (choose from {', '.join(BUNDLED)})")
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"{name}: gensim's test data holds {file_name}, and gensim, an optional extra, is not installed "
            f"({INSTALL_HINT}); or give the file's path"
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data", file_name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{name}: the installed gensim has no {path}; give the file's path")
    return path


def _lines(path: str) -> Iterator[tuple[str, str]]:
    """(`file:line`, the line without surrounding whitespace) for each line of `path`
    (`data.line_files.numbered_lines`: no byte order mark, ValueError at `file:line` for invalid UTF-8)."""
    for number, line in numbered_lines(path):
        yield f"{path}:{number}", line.strip()


class AnalogySet(NamedTuple):
    """An analogy file's `questions` (a, b, c, expected d: `a : b :: c : d`), each in the section
    `section_ids[i]` of `sections` (in the file's order)."""

    name: str
    path: str
    sections: tuple[str, ...]
    questions: tuple[tuple[str, str, str, str], ...]
    section_ids: np.ndarray  # [n_questions] int64


def read_analogies(path: str, name: str | None = None) -> AnalogySet:
    """The format of word2vec's `questions-words.txt` (and CA8's Chinese sets): `: section` lines,
    each followed by its questions, four words a line; blank lines skipped. ValueError at
    `file:line` for a question of other than 4 words, a question before any section, a section
    without a name or named twice, bytes that are not UTF-8; at `file` for a file of no question."""
    sections: dict[str, int] = {}
    questions: list[tuple[str, str, str, str]] = []
    section_ids: list[int] = []
    for where, line in _lines(path):
        if not line:
            continue
        if line.startswith(":"):
            section = line[1:].strip()
            if not section:
                raise ValueError(f"{where}: a `:` line without a section name")
            if section in sections:
                raise ValueError(f"{where}: section {section!r} again")
            sections[section] = len(sections)
            continue
        words = line.split()
        if len(words) != 4:
            raise ValueError(f"{where}: expected 4 words `a b c d` (or a `: section` line), got {len(words)}: {line!r}")
        if not sections:
            raise ValueError(f"{where}: a question before any `: section` line")
        questions.append((words[0], words[1], words[2], words[3]))
        section_ids.append(len(sections) - 1)
    if not questions:
        raise ValueError(f"{path}: no analogy questions")
    name = name or os.path.basename(path)
    return AnalogySet(name, path, tuple(sections), tuple(questions), np.array(section_ids, np.int64))


class SimilaritySet(NamedTuple):
    """A similarity file's word `pairs` and their human `scores` `[n_pairs]` float64."""

    name: str
    path: str
    pairs: tuple[tuple[str, str], ...]
    scores: np.ndarray


# The header column holding the score, where a header names it (SimLex-999.txt: `word1 word2 POS SimLex999 ...`).
SCORE_COLUMNS = ("simlex999",)


def _fields(line: str) -> list[str]:
    """A similarity line's fields: tab-separated when it has a tab (a word may hold a space), else
    whitespace-separated."""
    return [field.strip() for field in line.split("\t")] if "\t" in line else line.split()


def _is_header(fields: Sequence[str]) -> bool:
    """A header line names its first two columns word1 and word2 (SimLex-999's `word1 word2 ...`)."""
    names = [field.lower().replace(" ", "") for field in fields[:2]]
    return names == ["word1", "word2"]


def _score(field: str, where: str) -> float:
    try:
        score = float(field)
    except ValueError:
        raise ValueError(f"{where}: the score {field!r} is not a number") from None
    if not math.isfinite(score):
        raise ValueError(f"{where}: the score {field!r} is not a finite number")
    return score


def read_similarity(path: str, name: str | None = None) -> SimilaritySet:
    """`word1 word2 score` lines, tab- or whitespace-separated, as gensim's `evaluate_word_pairs`
    reads wordsim353.tsv and simlex999.txt: `#` lines are comments, blank lines skipped. A first line
    `word1 word2 ...` is a header (SimLex-999.txt's own), whose `SimLex999` column is the score;
    otherwise the third column is. Every line has the first line's number of columns. ValueError at
    `file:line` for a line of fewer columns, a score that is not a finite number, bytes that are not
    UTF-8; at `file` for a file of no pair."""
    pairs: list[tuple[str, str]] = []
    scores: list[float] = []
    column, width, first = 2, None, None
    for where, line in _lines(path):
        if not line or line.startswith("#"):
            continue
        fields = _fields(line)
        if width is None:
            width, first = len(fields), where.rsplit(":", 1)[1]
            if width < 3:
                raise ValueError(f"{where}: expected `word1 word2 score`, got {line!r}")
            if _is_header(fields):
                lowered = [field.lower() for field in fields]
                column = next((lowered.index(c) for c in SCORE_COLUMNS if c in lowered), 2)
                continue
        if len(fields) != width:
            raise ValueError(f"{where}: {len(fields)} columns, expected line {first}'s {width}: {line!r}")
        pairs.append((fields[0], fields[1]))
        scores.append(_score(fields[column], where))
    if not pairs:
        raise ValueError(f"{path}: no word pairs")
    return SimilaritySet(name or os.path.basename(path), path, tuple(pairs), np.array(scores, np.float64))


# ----------------------------------------------------------------------------------------------
# Looking words up.


def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """`vectors` `[n, dim]` scaled to unit length, float32; a zero row stays zero."""
    vectors = np.asarray(vectors, np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1).astype(np.float32)


class Forms(NamedTuple):
    """The lower-cased forms of a file's first n rows: `form` `[n]` int64, each row's form as the
    first row that has it; `first_row`, a form's first row by the form."""

    form: np.ndarray
    first_row: dict[str, int]

    @classmethod
    def of(cls, words: Sequence[str]) -> Forms:
        first_row: dict[str, int] = {}
        form = np.array([first_row.setdefault(word.lower(), i) for i, word in enumerate(words)], np.int64)
        return cls(form, first_row)

    def rows(self, words: Sequence[str]) -> np.ndarray:
        """`[len(words)]` the first row of each word's form, NO_ROW for a form the rows lack."""
        return np.array([self.first_row.get(word.lower(), NO_ROW) for word in words], np.int64)

    def spellings(self) -> dict[int, np.ndarray]:
        """Each form that more than one row spells (`King`, `king`) -> all its rows."""
        order = np.argsort(self.form, kind="stable")
        forms, starts, counts = np.unique(self.form[order], return_index=True, return_counts=True)
        return {int(f): order[s:s + c] for f, s, c in zip(forms, starts, counts) if c > 1}


# ----------------------------------------------------------------------------------------------
# Analogies.


@dataclasses.dataclass(frozen=True)
class SectionScore:
    """One section's `questions`, those `answered` (every word known) and each method's correct answers."""

    name: str
    questions: int
    answered: int
    correct: dict[str, int]


@dataclasses.dataclass(frozen=True)
class AnalogyResult:
    """An analogy set answered by one vector file: per section and overall (module docstring).
    `answers[method]` `[n_questions]`: the row answered, NO_ROW for an unknown question (or one whose
    every candidate is excluded: a file of three words)."""

    name: str
    restrict: int  # The rows searched: min(restrict, the file's words).
    sections: tuple[SectionScore, ...]
    unknown_words: tuple[str, ...]  # The set's distinct words (as lower-cased) outside those rows.
    answers: dict[str, np.ndarray]

    @property
    def questions(self) -> int:
        return sum(s.questions for s in self.sections)

    @property
    def answered(self) -> int:
        return sum(s.answered for s in self.sections)

    @property
    def unknown(self) -> int:
        """Questions with a word outside the restricted vocabulary: not answered, not in the accuracy."""
        return self.questions - self.answered

    @property
    def coverage(self) -> float:
        return self.answered / self.questions

    def correct(self, method: str) -> int:
        return sum(s.correct[method] for s in self.sections)

    def accuracy(self, method: str) -> float:
        """Correct / answered questions; NaN when none is answered."""
        return _ratio(self.correct(method), self.answered)

    def to_json(self) -> dict:
        """The result as JSON values (no answers; NaN as null)."""
        return {
            "set": self.name, "restrict": self.restrict, "questions": self.questions, "answered": self.answered,
            "unknown": self.unknown, "coverage": self.coverage, "unknown_words": len(self.unknown_words),
            "accuracy": {m: _json_float(self.accuracy(m)) for m in METHODS},
            "correct": {m: self.correct(m) for m in METHODS},
            "sections": [
                {"section": s.name, "questions": s.questions, "answered": s.answered, "correct": s.correct,
                 "accuracy": {m: _json_float(_ratio(s.correct[m], s.answered)) for m in METHODS}}
                for s in self.sections
            ],
        }


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else math.nan


def _json_float(value: float) -> float | None:
    return None if math.isnan(value) else value


def _excluded(questions: np.ndarray, spellings: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(question index, row) of every row the questions `[q, 4]` (forms' first rows) exclude: the
    rows of the forms of their a, b and c, each spelling of them."""
    index, rows = [np.repeat(np.arange(len(questions)), 3)], [questions[:, :3].ravel()]
    for i, form in enumerate(questions[:, :3].ravel()):
        if int(form) in spellings:
            others = spellings[int(form)]
            index.append(np.full(len(others), i // 3))
            rows.append(others)
    return np.concatenate(index), np.concatenate(rows)


def _groups(questions: np.ndarray, most_words: int) -> Iterator[slice]:
    """Consecutive slices of `questions` `[q, 4]` whose a, b and c are at most `most_words`
    distinct rows (a question's own three always fit): the words whose cosines are held at once."""
    start, seen = 0, set()
    for i, words in enumerate(questions[:, :3].tolist()):
        seen.update(words)
        if len(seen) > most_words and i > start:
            yield slice(start, i)
            start, seen = i, set(words)
    if start < len(questions):
        yield slice(start, len(questions))


def _answers_of_block(
    shifted: np.ndarray, inverse: np.ndarray, excluded: tuple[np.ndarray, np.ndarray], buffers: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The 3CosAdd and 3CosMul answers `[b]` of b questions from `shifted` `[u, n]`, the cosines + 1
    of their u distinct words with every row, `inverse` `[b, 3]` (a, b, c as rows of `shifted`) and
    `excluded` (question, row) pairs. With s = cos + 1 = 2 cos', 3CosAdd's s_b - s_a + s_c and
    3CosMul's s_b s_c / (s_a + 2 epsilon) = 2 cos'_b cos'_c / (cos'_a + epsilon) rank the rows as
    the methods' own scores do. `buffers` `[4, >= b, n]` float32 hold the scores (arrays of a MiB
    allocated anew would each be mapped and faulted in page by page)."""
    s_a, s_b, s_c, add = (buffer[:len(inverse)] for buffer in buffers)
    for k, out in enumerate((s_a, s_b, s_c)):
        np.take(shifted, inverse[:, k], axis=0, out=out)
    np.subtract(s_b, s_a, out=add)
    add += s_c
    add[excluded] = -np.inf
    s_b *= s_c
    s_a += np.float32(2 * EPSILON)
    s_b /= s_a
    s_b[excluded] = -np.inf
    return _best(add), _best(s_b)


def _best(scores: np.ndarray) -> np.ndarray:
    """`[b]` each row's first highest column of `scores` `[b, n]`; NO_ROW where all are excluded (-inf)."""
    best = np.argmax(scores, axis=1)
    best[np.isneginf(scores[np.arange(len(best)), best])] = NO_ROW
    return best


def answer_rows(
    unit: np.ndarray, forms: Forms, questions: np.ndarray, block: int | None = None
) -> dict[str, np.ndarray]:
    """Each method's answer `[q]` to `questions` `[q, 4]` (forms' first rows of `unit` `[n, dim]`,
    all known), `block` questions at a time (default: a `[block, n]` block of scores of
    _BLOCK_ELEMENTS, in a core's cache).

    Both methods' scores are sums and products of cosines with the question words (on unit vectors
    x . (b - a + c) = cos(x, b) - cos(x, a) + cos(x, c)): the cosines of a group's distinct words
    with every row are one matrix product `[u, dim] x [dim, n]` (u <= _COSINE_ELEMENTS / n), so no
    question costs a product of its own, and the scores are a few passes over cached blocks."""
    block = block or max(1, _BLOCK_ELEMENTS // max(1, len(unit)))
    spellings = forms.spellings()
    answers = {m: np.zeros(len(questions), np.int64) for m in METHODS}
    buffers = np.empty((4, min(block, len(questions)), len(unit)), np.float32)
    for group in _groups(questions, max(3, _COSINE_ELEMENTS // max(1, len(unit)))):
        words, inverse = np.unique(questions[group, :3], return_inverse=True)
        inverse = inverse.reshape(-1, 3)
        shifted = unit[words] @ unit.T  # [u, n]
        shifted += 1
        for start in range(group.start, group.stop, block):
            part = slice(start, min(start + block, group.stop))
            excluded = _excluded(questions[part], spellings)
            rows = inverse[part.start - group.start:part.stop - group.start]
            answers[ADD][part], answers[MUL][part] = _answers_of_block(shifted, rows, excluded, buffers)
    return answers


def _section_scores(
    analogies: AnalogySet, known: np.ndarray, correct: dict[str, np.ndarray]
) -> tuple[SectionScore, ...]:
    """Each section's questions, those answered (`known` `[n_questions]`) and correct (`correct[method]`
    `[n_questions]`)."""
    scores = []
    for i, name in enumerate(analogies.sections):
        in_section = analogies.section_ids == i
        scores.append(SectionScore(name, int(in_section.sum()), int(np.sum(known & in_section)),
                                   {m: int(np.sum(correct[m] & in_section)) for m in METHODS}))
    return tuple(scores)


def evaluate_analogies(
    vectors: StaticVectors, analogies: AnalogySet, restrict: int = DEFAULT_RESTRICT, block: int | None = None
) -> AnalogyResult:
    """`analogies` answered by 3CosAdd and 3CosMul among `vectors`' first `restrict` rows (module
    docstring: lookup, exclusions, the unknown questions)."""
    if restrict < 1:
        raise ValueError(f"restrict must be >= 1, got {restrict}")
    n = min(restrict, len(vectors.words))
    forms = Forms.of(vectors.words[:n])
    flat = [word for question in analogies.questions for word in question]
    rows = forms.rows(flat).reshape(-1, 4)
    known = np.all(rows != NO_ROW, axis=1)
    answers = {m: np.full(len(rows), NO_ROW, np.int64) for m in METHODS}
    found = answer_rows(unit_vectors(vectors.vectors[:n]), forms, rows[known], block)
    for method in METHODS:
        answers[method][known] = found[method]
    correct = {m: (answers[m] != NO_ROW) & (forms.form[answers[m]] == rows[:, 3]) for m in METHODS}
    unknown_words = tuple(sorted({word.lower() for word, row in zip(flat, rows.ravel()) if row == NO_ROW}))
    return AnalogyResult(analogies.name, n, _section_scores(analogies, known, correct), unknown_words, answers)


def nearest_answers(
    vectors: StaticVectors, a: str, b: str, c: str, k: int = 5, restrict: int | None = None
) -> list[tuple[str, float]]:
    """The `k` best 3CosAdd answers to `a : b :: c : ?` (`man woman king` -> queen, ...) among the
    first `restrict` rows (default: all), a, b and c's forms excluded, with their cosines to the unit
    vector of b - a + c (gensim's `most_similar` values). ValueError for a word outside those rows."""
    n = len(vectors.words) if restrict is None else min(restrict, len(vectors.words))
    forms = Forms.of(vectors.words[:n])
    rows = forms.rows([a, b, c])
    if np.any(rows == NO_ROW):
        missing = [w for w, row in zip((a, b, c), rows) if row == NO_ROW]
        raise ValueError(f"{', '.join(map(repr, missing))} not among the first {n:,} words")
    unit = unit_vectors(vectors.vectors[:n])
    scores = unit @ unit_vectors((unit[rows[1]] - unit[rows[0]] + unit[rows[2]])[None])[0]
    scores[np.isin(forms.form, rows)] = -np.inf
    k = min(k, int(np.sum(np.isfinite(scores))))
    best = np.argsort(-scores, kind="stable")[:k]
    return [(vectors.words[i], float(scores[i])) for i in best]


# ----------------------------------------------------------------------------------------------
# Similarity.


def average_ranks(values: np.ndarray) -> np.ndarray:
    """`[n]` float64 ranks 1..n of `values` `[n]`, tied values sharing the mean of their ranks
    (scipy.stats.rankdata's 'average'): what Spearman's rho correlates."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_group = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    starts = np.flatnonzero(starts_group)
    ends = np.append(starts[1:], len(values))
    ranks = np.empty(len(values), np.float64)
    ranks[order] = ((starts + 1 + ends) / 2)[np.cumsum(starts_group) - 1]
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho of `x` and `y` `[n]`: the Pearson correlation of their average ranks; NaN for
    n < 2 or a constant side. NumPy's own: scipy is only installed as JAX's dependency."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} and {len(y)} values")
    if len(x) < 2:
        return math.nan
    rx, ry = (average_ranks(v) - (len(x) + 1) / 2 for v in (x, y))
    norm = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry) / norm if norm > 0 else math.nan


@dataclasses.dataclass(frozen=True)
class SimilarityResult:
    """A similarity set scored by one vector file: `rho` over the `found` pairs (both words in the
    file) of `pairs`; `cosines` `[found]`."""

    name: str
    pairs: int
    found: int
    rho: float
    cosines: np.ndarray

    @property
    def unknown(self) -> int:
        """Pairs with a word the file lacks: counted, outside rho."""
        return self.pairs - self.found

    @property
    def coverage(self) -> float:
        return self.found / self.pairs

    def to_json(self) -> dict:
        return {"set": self.name, "pairs": self.pairs, "found": self.found, "unknown": self.unknown,
                "coverage": self.coverage, "spearman": _json_float(self.rho)}


def evaluate_similarity(vectors: StaticVectors, similarity: SimilaritySet) -> SimilarityResult:
    """Spearman's rho between `vectors`' cosines of `similarity`'s pairs and its scores, over the
    pairs whose words the file has (module docstring)."""
    forms = Forms.of(vectors.words)
    rows = forms.rows([word for pair in similarity.pairs for word in pair]).reshape(-1, 2)
    found = np.all(rows != NO_ROW, axis=1)
    unit = unit_vectors(vectors.vectors[rows[found].ravel()]).reshape(-1, 2, vectors.dim)
    cosines = np.einsum("pd,pd->p", unit[:, 0], unit[:, 1]).astype(np.float64)
    rho = spearman(cosines, similarity.scores[found])
    return SimilarityResult(similarity.name, len(rows), int(found.sum()), rho, cosines)
