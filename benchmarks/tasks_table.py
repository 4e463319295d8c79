"""The tables of benchmarks/tasks_grid.sh's cells: each (task, input, training share)'s test score, the
mean over its seeds with their range, and the dev score's mean; then, per task and share, ELMo against
no pretraining and the best static input (Peters et al.'s comparison): their test means, ELMo's relative
error reduction against each (Peters et al.'s Table 1: 21% on CoNLL-2003 NER), and whether its seeds'
range lies above the other's.

  python benchmarks/tasks_table.py benchmarks/results/tasks

A cell is a directory `<task>_<input>_f<share>_s<seed>` holding its run's results.json.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import statistics
import sys
from typing import Mapping, Sequence

CELL = re.compile(r"(?P<task>\w+?_(?:ewt|zh))_(?P<input>\w+)_f(?P<share>[\d.]+)_s(?P<seed>\d+)")
METRICS = {"tag": "accuracy", "ner": "span F1", "parse": "LAS"}
NO_PRETRAINING = "words"
STATIC_INPUTS = ("glove", "skipgram")  # Vectors trained by elmo-static on the biLM's own text.
ELMO = "elmo"  # The default scalar mix (the Table 2 ablations are other inputs).

Groups = Mapping[tuple[str, str, float], Sequence[dict]]  # (task, input, share) -> its seeds' results.json


def read_cells(root: str) -> dict[tuple[str, str, float], list[dict]]:
    """(task, input, share) -> the results.json of each of its seeds under `root`."""
    groups = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(root, "*", "results.json"))):
        match = CELL.fullmatch(os.path.basename(os.path.dirname(path)))
        if match is None:
            continue
        with open(path, encoding="utf-8") as f:
            groups[match["task"], match["input"], float(match["share"])].append(json.load(f))
    return dict(groups)


def error_reduction(score: float, baseline: float) -> float:
    """The share of the baseline's errors (1 - score, scores in [0, 1]) that `score` removes."""
    return (score - baseline) / (1.0 - baseline)


def cells_table(groups: Groups) -> list[str]:
    """Markdown rows: every cell's seeds, test mean and range, dev mean."""
    rows = ["| task | input | training share | seeds | test (mean) | test (range) | dev (mean) |",
            "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for (task, name, share), runs in sorted(groups.items()):
        test = [r["test"]["score"] for r in runs]
        dev = statistics.mean(r["dev"]["score"] for r in runs)
        metric = METRICS[runs[0]["task"]]
        rows.append(f"| {task} ({metric}) | {name} | {share:g} | {len(runs)} | {statistics.mean(test):.4f} | "
                    f"{min(test):.4f}-{max(test):.4f} | {dev:.4f} |")
    return rows


def _mean(scores: Sequence[float]) -> str:
    """The seeds' mean test score and their count."""
    return f"{statistics.mean(scores):.4f} ({len(scores)})"


def _versus(elmo: Sequence[float], other: Sequence[float]) -> str:
    """ELMo's relative error reduction against `other`'s mean, with 'above its range' when the
    lowest ELMo seed beats the highest of `other` (both with 2 seeds or more)."""
    reduction = error_reduction(statistics.mean(elmo), statistics.mean(other))
    apart = len(elmo) > 1 and len(other) > 1 and min(elmo) > max(other)
    return f"{reduction:+.1%}{', above its range' if apart else ''}"


def comparison_table(groups: Groups) -> list[str]:
    """Markdown rows, one per (task, share) with ELMo and no pretraining: their test means (seeds),
    the best static input's by mean, and ELMo's relative error reduction against each."""
    rows = ["| task | training share | no pretraining | best static | ELMo | ELMo vs no pretraining | "
            "ELMo vs best static |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    tests = {key: [r["test"]["score"] for r in runs] for key, runs in groups.items()}
    for task, share in sorted({(task, share) for task, _, share in groups}):
        elmo, words = tests.get((task, ELMO, share)), tests.get((task, NO_PRETRAINING, share))
        if elmo is None or words is None:
            continue
        statics = {n: tests[task, n, share] for n in STATIC_INPUTS if (task, n, share) in tests}
        best = max(statics, key=lambda n: statistics.mean(statics[n]), default=None)
        static_cell = f"{best} {_mean(statics[best])}" if best else "-"
        versus_static = _versus(elmo, statics[best]) if best else "-"
        rows.append(f"| {task} | {share:g} | {_mean(words)} | {static_cell} | {_mean(elmo)} | "
                    f"{_versus(elmo, words)} | {versus_static} |")
    return rows


def main(root: str) -> None:
    groups = read_cells(root)
    print("\n".join(cells_table(groups)))
    print()
    print("\n".join(comparison_table(groups)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/tasks")
