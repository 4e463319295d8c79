"""The table of benchmarks/chinese.sh's runs: each variant's mean (and range) over its seeds.

  python benchmarks/chinese_table.py benchmarks/results/chinese

Per variant (`<variant>_s<seed>` directories): test perplexity (biLM), UPOS accuracy of each layer
and of the scalar mix, the random-init control's (where probed), and the median training tokens/s
of each run's records after the first (the first holds the compilation).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import statistics
import sys


def _run(directory: str) -> dict:
    """One run's numbers: perplexity, UPOS layers and mix, the control's, tokens/s."""
    (evaluation,) = glob.glob(os.path.join(directory, "eval_files_*.json"))
    with open(evaluation, encoding="utf-8") as f:
        perplexity = json.load(f)["perplexity"]
    with open(os.path.join(directory, "probe_upos.json"), encoding="utf-8") as f:
        probe = json.load(f)
    control = None
    control_path = os.path.join(directory, "probe_upos_random_init.json")
    if os.path.exists(control_path):
        with open(control_path, encoding="utf-8") as f:
            control = json.load(f)
    with open(os.path.join(directory, "metrics.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    speeds = [r["tokens_per_sec"] for r in records if "tokens_per_sec" in r][1:]
    return {
        "perplexity": perplexity, "layers": probe["layers"], "mix": probe["mix"],
        "word_baseline": probe["word_baseline"], "control": control, "tokens_per_sec": statistics.median(speeds),
    }


def _cell(values: list[float], digits: int) -> str:
    """`mean (min-max)` of `values`, or the value alone."""
    mean = f"{statistics.mean(values):.{digits}f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(results: str) -> str:
    """The Markdown table of the runs under `results`."""
    runs: dict[str, list[dict]] = collections.defaultdict(list)
    for evaluation in sorted(glob.glob(os.path.join(results, "*_s*", "eval_files_*.json"))):  # A run's, not senses'.
        directory = os.path.dirname(evaluation)
        variant = re.sub(r"_s[0-9]+$", "", os.path.basename(directory))
        runs[variant].append(_run(directory))
    n_layers = max(len(r["layers"]) for group in runs.values() for r in group)
    header = ["variant (seeds)", "test perplexity"] + [f"UPOS layer {k}" for k in range(n_layers)]
    header += ["UPOS mix", "tokens/s"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for variant, group in runs.items():
        cells = [f"{variant} ({len(group)})", _cell([r["perplexity"] for r in group], 2)]
        cells += [_cell([r["layers"][k] for r in group], 3) for k in range(n_layers)]
        cells += [_cell([r["mix"] for r in group], 3), _cell([r["tokens_per_sec"] for r in group], 0)]
        lines.append("| " + " | ".join(cells) + " |")
        controls = [r["control"] for r in group if r["control"]]
        if controls:
            cells = [f"{variant}, random-init control ({len(controls)})", ""]
            cells += [_cell([c["layers"][k] for c in controls], 3) for k in range(n_layers)]
            cells += [_cell([c["mix"] for c in controls], 3), ""]
            lines.append("| " + " | ".join(cells) + " |")
    baseline = statistics.mean(r["word_baseline"] for group in runs.values() for r in group)
    lines.append(f"\nMost frequent tag of each word (the probes' training file): {baseline:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/chinese"))
