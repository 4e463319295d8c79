"""docs/embeddings.md quotes elmo-neighbors as the run it names printed it: each elmo-neighbors
command of the page, and the output block after it, is a file of benchmarks/results/neighbors
(benchmarks/neighbors_examples.sh: the command on its first line, then what it printed), the
block's lines in the file's order."""

from __future__ import annotations

import glob
import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "embeddings.md")
RESULTS = os.path.join(ROOT, "benchmarks", "results", "neighbors")


def _examples() -> list[tuple[list[str], list[str]]]:
    """(the command's words, the lines of the output block after it) of each elmo-neighbors
    example of the page on the README's run (runs/demo)."""
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    pairs = re.findall(r"^```bash\n(.*?)^```\n```\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    examples = []
    for command, output in pairs:
        lines = command.replace("\\\n", " ").splitlines()
        for line in lines:
            if line.startswith("elmo-neighbors --workdir runs/demo "):
                examples.append((shlex.split(line, comments=True), output.splitlines()))
    return examples


def _results() -> dict[tuple[str, ...], list[str]]:
    results = {}
    for path in glob.glob(os.path.join(RESULTS, "*.txt")):
        with open(path, encoding="utf-8") as f:
            first, *printed = f.read().splitlines()
        results[tuple(shlex.split(first.removeprefix("$ ")))] = printed
    return results


def _in_order(lines: list[str], printed: list[str]) -> bool:
    remaining = iter(printed)
    return all(line in remaining for line in lines)


def test_each_neighbours_example_is_what_its_command_printed():
    examples, results = _examples(), _results()
    assert len(examples) == 5 and len(results) == 5
    for command, lines in examples:
        printed = results.get(tuple(command))
        assert printed is not None, f"no benchmarks/results/neighbors file of: {shlex.join(command)}"
        assert lines and _in_order(lines, printed), shlex.join(command)


def test_the_order_check_can_fail():
    assert _in_order(["b", "d"], ["a", "b", "c", "d"]) and not _in_order(["d", "b"], ["a", "b", "c", "d"])
