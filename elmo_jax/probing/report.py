"""Probe results on disk and on screen: `probe_<task>.json` (a control's:
`probe_<task>_<control>.json`, written atomically), Markdown tables and `probe_<task>.png`, the
score by layer with a line per result, the mix as a point, the baseline as a dashed level and each
static vector file's rows (`static`) as levels of their own. The figure needs matplotlib (`pip
install 'elmo-jax[report]'`); without it only the JSON is written.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Sequence

from elmo_jax.evaluation.report import DEFAULT_MEASURE, baseline_name, plot_scores_by_layer, static_rows
from elmo_jax.runtime.atomic_write import write_atomic, write_json_atomic
from elmo_jax.runtime import workdir_files

Result = dict[str, Any]


def result_path(output_dir: str, task: str, control: str = "none") -> str:
    """Where a result of `task` (of the model, or of `control`) is written."""
    return os.path.join(output_dir, workdir_files.probe_file(task, control=control))


def figure_path(output_dir: str, task: str) -> str:
    return os.path.join(output_dir, workdir_files.probe_figure(task))


def read_results(output_dir: str, task: str) -> list[Result]:
    """The results of `task` in `output_dir`: the model's, then each control's, those present;
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


def _static_value(result: Result, name: str, scores: Callable[[Result], Any], row: str) -> Any:
    """`row`'s value of `scores` (a result's -> {row: value}) of the vector file `name` of `result`, or None."""
    entry = result.get("static", {}).get(name)
    return None if entry is None else scores(entry)[row]


def markdown_table(results: Sequence[Result]) -> str:
    """The test accuracy of each probe and baseline, one column per result; each static vector
    file's rows and OOV rate."""
    n_layers = max(len(r["layers"]) for r in results)
    rows: list[tuple[str, Callable[[Result], Any]]] = [
        (f"layer {k}", lambda r, k=k: r["layers"][k] if k < len(r["layers"]) else None) for k in range(n_layers)
    ]
    rows.append(("mix", lambda r: r["mix"]))
    if any("mlp" in r for r in results):
        rows += [(f"MLP layer {k}", lambda r, k=k: (r.get("mlp") or [None] * n_layers)[k]) for k in range(n_layers)]
    for name, file_rows in static_rows(results).items():
        rows += [(f"{name}: {row}", lambda r, name=name, row=row: _static_value(r, name, lambda e: e["rows"], row))
                 for row in file_rows]
        rows.append((f"{name}: OOV rate", lambda r, name=name: _static_value(r, name, lambda e: e["oov"], "oov_rate")))
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


def _by_layer(results: Sequence[Result], title: str,
              columns: Sequence[tuple[str, Callable[[Result], dict[str, Any]]]]) -> list[str]:
    """A table's lines, a row per layer, the mix and each static vector file's rows: for each
    result, a column per (label, the result's scores {`layers`, `mix`}, which read from a result's
    `static` entry give its scores by row)."""
    n_layers = max(len(r["layers"]) for r in results)

    def cell(scores: dict[str, Any], k: int | None) -> str:
        value = scores["mix"] if k is None else scores["layers"][k] if k < len(scores["layers"]) else None
        return "" if value is None else f"{value:.3f}"

    names = [f"{result_name(r)} {label}" for r in results for label, _ in columns]
    lines = [f"| {title} | {' | '.join(names)} |", "| --- |" + " ---: |" * len(names)]
    for k in [*range(n_layers), None]:
        label = "mix" if k is None else "layer 0 (static)" if k == 0 else f"layer {k}"
        lines.append(f"| {label} | {' | '.join(cell(scores(r), k) for r in results for _, scores in columns)} |")
    for name, rows in static_rows(results).items():
        for row in rows:
            values = [_static_value(r, name, scores, row) for r in results for _, scores in columns]
            lines.append(f"| {name}: {row} | {' | '.join('' if v is None else f'{v:.3f}' for v in values)} |")
        oov = [_oov_cell(r.get("static", {}).get(name)) if i == 0 else ""
               for r in results for i in range(len(columns))]
        lines.append(f"| {name}: OOV rate (tokens / targets) | {' | '.join(oov)} |")
    return lines


def _oov_cell(entry: Result | None) -> str:
    """A static vector file's OOV rates of all tokens read and of the target words."""
    return "" if entry is None else f"{entry['oov']['oov_rate']:.3f} / {entry['target_oov']['oov_rate']:.3f}"


def wsd_markdown_tables(results: Sequence[Result], per_word: Result) -> str:
    """Word senses: mean accuracy and macro-F1 over the words of each classifier by layer, a group
    of columns per result; then `per_word`'s macro-F1 of each word."""
    columns = [("centroid F1", "centroid", "macro_f1"), ("linear F1", "linear", "macro_f1"),
               ("centroid acc", "centroid", "accuracy"), ("linear acc", "linear", "accuracy")]
    lines = _by_layer(results, "mean over words", [
        (label, lambda r, method=method, metric=metric: r["mean"][method][metric]) for label, method, metric in columns
    ])
    baseline = [f"{r['mean']['most_frequent_sense'][metric]:.3f}" if method == "centroid" else ""
                for r in results for _, method, metric in columns]
    lines.append(f"| most frequent sense | {' | '.join(baseline)} |")
    lines.append(f"| test sentences | {' | '.join(str(r['test_sentences']) for r in results for _ in columns)} |")
    k_range = range(len(per_word["layers"]))
    header = ["word", "senses", "test", "MFS", *(f"centroid {k}" for k in k_range), "centroid mix",
              *(f"linear {k}" for k in k_range), "linear mix"]
    lines += ["", f"macro-F1 of each word: {result_name(per_word)}", "",
              f"| {' | '.join(header)} |", "| --- |" + " ---: |" * (len(header) - 1)]
    for word, scores in per_word["words"].items():
        f1 = [scores[method]["macro_f1"] for method in ("centroid", "linear")]
        values = [scores["most_frequent_sense"]["macro_f1"], *(v for s in f1 for v in [*s["layers"], s["mix"]])]
        lines.append(f"| {word} | {scores['senses']} | {scores['test_sentences']} | "
                     + " | ".join(f"{v:.3f}" for v in values) + " |")
    return "\n".join(lines)


def wsd_prediction_tables(result: Result, mark: str = "[[{}]]") -> str:
    """The nearest sense centroid of each test sentence at each layer and the mix (`probe_wsd`'s
    `per_sentence`), a table per word, the target word marked `mark`."""
    lines: list[str] = []
    for word, scores in result["words"].items():
        rows = scores["predictions"]
        k_range = range(len(rows[0]["centroid"]["layers"])) if rows else range(0)
        header = ["test sentence", "sense", *(f"layer {k}" for k in k_range), "mix"]
        lines += [f"nearest sense centroid: {word}", "", f"| {' | '.join(header)} |",
                  "| --- |" + " --- |" * (len(header) - 1)]
        for row in rows:
            tokens = list(row["tokens"])
            tokens[row["position"]] = mark.format(tokens[row["position"]])
            lines.append(f"| {' '.join(tokens)} | {row['gold']} | " + " | ".join(
                [*row["centroid"]["layers"], row["centroid"]["mix"]]) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def wic_markdown_table(results: Sequence[Result]) -> str:
    """Word in Context: test accuracy of the cosine threshold and of the linear probe by layer, a
    pair of columns per result."""
    methods = ("cosine", "linear")
    lines = _by_layer(results, "accuracy", [(method, lambda r, m=method: r[m]) for method in methods])
    majority = [f"{r['majority_baseline']:.3f}" for r in results for _ in methods]
    lines.append(f"| majority class | {' | '.join(majority)} |")
    lines.append(f"| test pairs | {' | '.join(str(r['test_pairs']) for r in results for _ in methods)} |")
    return "\n".join(lines)


def figure(results: Sequence[Result]) -> Any:
    """A matplotlib Figure of accuracy (the results' `metric`) by layer, one line per result;
    ModuleNotFoundError without matplotlib."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    task = "/".join(sorted({str(r.get("task")) for r in results}))
    plot_scores_by_layer(
        fig.subplots(), task, results[0].get("metric", DEFAULT_MEASURE),
        [(result, i, result_name(result), False) for i, result in enumerate(results)],
        (baseline_name(task), "--"),
    )
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
