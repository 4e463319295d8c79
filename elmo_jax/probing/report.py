"""Probe results on disk and on screen: `probe_<task>.json` (a control's:
`probe_<task>_<control>.json`), a Markdown table and `probe_<task>.png`, the accuracy by layer
with one line per result (a model and its control side by side), the mix as a point of its own
and the word-type baseline as a dashed level. Each file is written atomically
(elmo_jax/runtime/atomic_write.py): complete or not at all. The figure needs matplotlib (`pip install
'elmo-jax[report]'`); without it only the JSON is written, with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Sequence

from elmo_jax.runtime.atomic_write import write_atomic, write_json_atomic
from elmo_jax.runtime import workdir_files

Result = dict[str, Any]


def result_path(output_dir: str, task: str, control: str = "none") -> str:
    """Where a result of `task` (of the model, or of `control`) is written."""
    return os.path.join(output_dir, workdir_files.probe_file(task, control=control))


def figure_path(output_dir: str, task: str) -> str:
    return os.path.join(output_dir, workdir_files.probe_figure(task))


def read_results(output_dir: str, task: str) -> list[Result]:
    """The results of `task` in `output_dir`: the model's, then each control's, those present.
    ValueError naming a file that is not a result."""
    results = []
    for control in workdir_files.PROBE_CONTROLS:
        path = result_path(output_dir, task, control)
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not a probe result ({e})") from e
        if not isinstance(result, dict) or not isinstance(result.get("layers"), list) or "mix" not in result:
            raise ValueError(f"{path}: not a probe result (no 'layers' list and 'mix')")
        results.append(result)
    return results


def result_name(result: Result) -> str:
    """How a result is labelled: its model, and its control when it has one."""
    name = str(result.get("model", "model"))
    control = result.get("control", "none")
    return name if control == "none" else f"{name} ({control})"


def markdown_table(results: Sequence[Result]) -> str:
    """The test accuracy of each probe and baseline, one column per result."""
    n_layers = max(len(r["layers"]) for r in results)
    rows: list[tuple[str, Callable[[Result], Any]]] = [
        (f"layer {k}", lambda r, k=k: r["layers"][k] if k < len(r["layers"]) else None) for k in range(n_layers)
    ]
    rows.append(("mix", lambda r: r["mix"]))
    if any("mlp" in r for r in results):
        rows += [(f"MLP layer {k}", lambda r, k=k: (r.get("mlp") or [None] * n_layers)[k]) for k in range(n_layers)]
    rows += [("word baseline", lambda r: r.get("word_baseline")), ("majority", lambda r: r.get("majority_baseline"))]
    lines = [
        "| probe | " + " | ".join(result_name(r) for r in results) + " |",
        "| --- |" + " ---: |" * len(results),
    ]
    for label, value in rows:
        cells = [value(r) for r in results]
        lines.append(f"| {label} | " + " | ".join("" if v is None else f"{v:.4f}" for v in cells) + " |")
    lines.append("| test tokens | " + " | ".join(str(r.get("test_tokens", "")) for r in results) + " |")
    return "\n".join(lines)


def figure(results: Sequence[Result]) -> Any:
    """A matplotlib Figure of accuracy by layer, one line per result; ModuleNotFoundError without matplotlib."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    n_layers = max(len(r["layers"]) for r in results)
    baselines = set()
    for i, result in enumerate(results):
        layers = result["layers"]
        ax.plot(range(len(layers)), layers, color=f"C{i}", marker="o", label=result_name(result))
        ax.plot([n_layers], [result["mix"]], color=f"C{i}", marker="*", markersize=12, linestyle="none")
        if "word_baseline" in result:
            baselines.add(result["word_baseline"])
    for j, level in enumerate(sorted(baselines)):
        ax.axhline(level, color="gray", linestyle="--", linewidth=1, label="word-type baseline" if j == 0 else None)
    ax.set_xticks(range(n_layers + 1), [*map(str, range(n_layers)), "mix"])
    task = "/".join(sorted({str(r.get("task")) for r in results}))
    ax.set(xlabel="layer (0: token embeddings)", ylabel="test accuracy", title=f"{task} probes by layer")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def write_outputs(output_dir: str, result: Result) -> list[Result]:
    """Writes `result`'s JSON and the figure of it with the other results of its task in
    `output_dir`; returns those results (the figure's lines), `result` among them."""
    json_path = result_path(output_dir, result["task"], result.get("control", "none"))
    others = [r for r in read_results(output_dir, result["task"]) if r.get("control") != result.get("control")]
    results = sorted([result, *others], key=lambda r: r.get("control", "none") != "none")  # The model first.
    write_json_atomic(json_path, result)
    try:
        fig = figure(results)
    except ModuleNotFoundError as e:
        logging.warning("no figure (%s): pip install 'elmo-jax[report]'", e)
        return results
    write_atomic(figure_path(output_dir, result["task"]), lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    return results
