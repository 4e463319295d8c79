"""The table of benchmarks/tasks_grid.sh's cells: each (task, input, training share)'s test score, the
mean over its seeds with their range, and the dev score's mean.

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

CELL = re.compile(r"(?P<task>\w+?_(?:ewt|zh))_(?P<input>\w+)_f(?P<share>[\d.]+)_s(?P<seed>\d+)")
METRICS = {"tag": "accuracy", "ner": "span F1", "parse": "LAS"}


def main(root: str) -> None:
    groups = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(root, "*", "results.json"))):
        match = CELL.fullmatch(os.path.basename(os.path.dirname(path)))
        if match is None:
            continue
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
        groups[match["task"], match["input"], float(match["share"])].append(results)
    print("| task | input | training share | seeds | test (mean) | test (range) | dev (mean) |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    for (task, name, share), runs in sorted(groups.items()):
        test = [r["test"]["score"] for r in runs]
        dev = statistics.mean(r["dev"]["score"] for r in runs)
        metric = METRICS[runs[0]["task"]]
        print(f"| {task} ({metric}) | {name} | {share:g} | {len(runs)} | {statistics.mean(test):.4f} | "
              f"{min(test):.4f}-{max(test):.4f} | {dev:.4f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/tasks")
