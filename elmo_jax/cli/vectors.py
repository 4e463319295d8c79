"""Analogies and word similarity of word-vector files (`elmo-vectors`, or `python -m elmo_jax.cli.vectors`).

  elmo-vectors --vectors runs/static/glove_demo.txt
  elmo-vectors --vectors a.txt,b.bin --analogies google --similarity wordsim353 --similarity simlex999 \\
      [--restrict 30000] [--example "man woman king"] [--output results.json]

Each file (word2vec text or binary, GloVe text) answers the analogy questions by 3CosAdd and
3CosMul among its first --restrict rows, and its cosines of each similarity set's pairs are
correlated with the human scores (Spearman's rho); words are looked up in lower case.
`google`, `wordsim353` and `simlex999` are the files in gensim's package (`questions-words.txt`,
`wordsim353.tsv`, `simlex999.txt`; `pip install -e .[static]`), read where gensim is installed,
never downloaded; with neither --analogies nor --similarity, all three. Prints a Markdown table
(a row per file: accuracies over the answered questions, their share, each set's rho and the share
of its pairs found), the example's 5 best 3CosAdd answers per file, and writes --output's JSON
(per-section accuracies too). Conventions: docs/static_vectors.md, "Analogies and word similarity".
"""

from __future__ import annotations

import os
import sys
import time
from typing import Sequence

from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.runtime.atomic_write import check_not_inputs, write_json_atomic
from elmo_jax.static import intrinsic
from elmo_jax.static.lookup import StaticVectors

TOP = 5  # The example's answers shown per file.
DEFAULT_SETS = ("google", ("wordsim353", "simlex999"))  # (--analogies, --similarity) when neither is given.

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
flags.DEFINE_list(
    "vectors", None, "comma-separated word-vector files (word2vec text or binary, GloVe text)", flag_values=_FLAGS
)
flags.DEFINE_string(
    "analogies", None, "an analogy file (`: section` lines, then `a b c d` lines), or `google` (gensim's "
    "questions-words.txt); default: google when no --similarity is given", flag_values=_FLAGS,
)
flags.DEFINE_multi_string(
    "similarity", [], "a file of `word1 word2 score` lines, or wordsim353 / simlex999 (gensim's); repeatable or "
    "comma-separated; default: both when no --analogies is given", flag_values=_FLAGS,
)
flags.DEFINE_integer(
    "restrict", intrinsic.DEFAULT_RESTRICT, "analogies: look the words up in, and answer from, each file's first N "
    "rows (its N most frequent words in a file sorted by frequency)", flag_values=_FLAGS,
)
flags.DEFINE_string(
    "example", "man woman king", "`a b c`: the 5 best 3CosAdd answers to a : b :: c : ? among each file's first "
    "--restrict rows ('' for none)",
    flag_values=_FLAGS,
)
flags.DEFINE_string("output", None, "the JSON of every result to write (default: none)", flag_values=_FLAGS)


def _path(name: str, bundled: Sequence[str]) -> str:
    """A set's file: one of gensim's by its name in `bundled`, else the path given (which must exist)."""
    if name in bundled:
        return intrinsic.bundled_file(name)
    if not os.path.isfile(name):
        raise tool_flags.UsageError(f"{name}: no such file (or one of {', '.join(bundled)})")
    return name


def _sets() -> tuple[intrinsic.AnalogySet | None, list[intrinsic.SimilaritySet]]:
    """The analogy set and the similarity sets the flags name, read (their errors before any vectors
    are); each named as the flag names it, a file by its base name (its path where two share one)."""
    analogies, similarity = _FLAGS.analogies, [s for value in _FLAGS.similarity for s in value.split(",") if s]
    if analogies is None and not similarity:
        analogies, similarity = DEFAULT_SETS[0], list(DEFAULT_SETS[1])
    analogy_set = None
    if analogies is not None:
        analogy_set = intrinsic.read_analogies(_path(analogies, ["google"]), name=_names([analogies])[0])
    if len(set(similarity)) != len(similarity):
        raise tool_flags.UsageError(f"--similarity names a set twice: {', '.join(similarity)}")
    paths = [_path(s, ["wordsim353", "simlex999"]) for s in similarity]
    return analogy_set, [intrinsic.read_similarity(p, name=n) for p, n in zip(paths, _names(similarity))]


def _example() -> tuple[str, str, str] | None:
    words = _FLAGS.example.split()
    if not words:
        return None
    if len(words) != 3:
        raise tool_flags.UsageError(f"--example takes three words `a b c` (a : b :: c : ?), got {_FLAGS.example!r}")
    return words[0], words[1], words[2]


def _check_flags() -> tuple[str, ...]:
    """The vector files, checked with the other flags before anything is read."""
    paths = tuple(p for p in _FLAGS.vectors if p)
    if not paths:
        raise tool_flags.UsageError("--vectors is empty: name one or more vector files")
    for path in paths:
        if not os.path.isfile(path):
            raise tool_flags.UsageError(f"--vectors {path}: no such file")
    tool_flags.check_positive(_FLAGS, "restrict")
    if _FLAGS.output is not None and (not _FLAGS.output or os.path.isdir(_FLAGS.output)):
        raise tool_flags.UsageError(f"--output {_FLAGS.output!r} is not a file name")
    return paths


def _names(paths: Sequence[str]) -> list[str]:
    """Each file's name in the table: its base name, its path where two share one."""
    bases = [os.path.basename(p) for p in paths]
    return [b if bases.count(b) == 1 else p for b, p in zip(bases, paths)]


def _evaluate(
    vectors: StaticVectors, analogies: intrinsic.AnalogySet | None, similarity: Sequence[intrinsic.SimilaritySet],
    example: tuple[str, str, str] | None,
) -> dict:
    """One file's results as JSON values."""
    result: dict = {"name": vectors.name, "path": vectors.path, "words": len(vectors.words), "dim": vectors.dim}
    if analogies is not None:
        start = time.perf_counter()
        result["analogies"] = intrinsic.evaluate_analogies(vectors, analogies, _FLAGS.restrict).to_json()
        result["analogies"]["seconds"] = round(time.perf_counter() - start, 3)
    result["similarity"] = {s.name: intrinsic.evaluate_similarity(vectors, s).to_json() for s in similarity}
    if example is not None:
        try:
            answers = intrinsic.nearest_answers(vectors, *example, k=TOP, restrict=_FLAGS.restrict)
            result["example"] = [{"word": word, "cosine": cosine} for word, cosine in answers]
        except ValueError as e:
            result["example"] = {"error": str(e)}
    return result


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def table(results: Sequence[dict], analogies: str | None, similarity: Sequence[str]) -> str:
    """The Markdown table of `results` (one `_evaluate` dict a file)."""
    header = ["vectors", "words"]
    if analogies is not None:
        header += [f"{analogies} {intrinsic.ADD}", f"{analogies} {intrinsic.MUL}", f"{analogies} coverage"]
    for name in similarity:
        header += [f"{name} rho", f"{name} coverage"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for r in results:
        cells = [r["name"], f"{r['words']:,}"]
        if analogies is not None:
            a = r["analogies"]
            cells += [_number(a["accuracy"][intrinsic.ADD]), _number(a["accuracy"][intrinsic.MUL]),
                      f"{a['coverage']:.3f} ({a['answered']:,}/{a['questions']:,})"]
        for name in similarity:
            s = r["similarity"][name]
            cells += [_number(s["spearman"]), f"{s['coverage']:.3f} ({s['found']:,}/{s['pairs']:,})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _example_lines(results: Sequence[dict], example: tuple[str, str, str]) -> list[str]:
    a, b, c = example
    lines = [f"{a} : {b} :: {c} : ? ({intrinsic.ADD}, cosine to b - a + c)"]
    for r in results:
        found = r["example"]
        shown = found["error"] if isinstance(found, dict) else ", ".join(
            f"{x['word']} {x['cosine']:.3f}" for x in found
        )
        lines.append(f"  {r['name']}: {shown}")
    return lines


def _vectors() -> None:
    """The CLI: the table, the example's answers, the JSON."""
    paths = _check_flags()
    example = _example()
    analogies, similarity = _sets()
    inputs = [("--vectors", path) for path in paths] + [("--similarity", s.path) for s in similarity]
    check_not_inputs([("--output", _FLAGS.output)], inputs + [("--analogies", analogies and analogies.path)])
    results = []
    for path, name in zip(paths, _names(paths)):
        results.append(_evaluate(StaticVectors.read(path, name), analogies, similarity, example))
    analogy_name = analogies.name if analogies is not None else None
    print(table(results, analogy_name, [s.name for s in similarity]))
    if analogies is not None:
        print(f"\nanalogies: {analogies.name}, {len(analogies.questions):,} questions, answered among each file's "
              f"first {_FLAGS.restrict:,} rows; accuracy over the answered ones")
    if example is not None:
        print("\n" + "\n".join(_example_lines(results, example)))
    if _FLAGS.output:
        sets = {"analogies": None if analogies is None else {"name": analogies.name, "path": analogies.path},
                "similarity": [{"name": s.name, "path": s.path} for s in similarity]}
        write_json_atomic(_FLAGS.output, {"restrict": _FLAGS.restrict, "sets": sets,
                                          "example": list(example) if example else None, "vectors": results})
        print(f"\nwrote {_FLAGS.output}")


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-vectors` / `python -m elmo_jax.cli.vectors`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _vectors, doc=__doc__, required=["vectors"], errors=tool_flags.ERRORS)


if __name__ == "__main__":
    sys.exit(main())
