"""Task models beside each other (`elmo-report` given `elmo-task` workdirs): a table of each run's
task, inputs, training sentences and dev/test scores, and learning curves: each task's test score
against its training sentences, one line per input (the mean over the seeds of a point, their range
as error bars), the figure ELMo's claim is read from (ahead most where labelled data is scarce).

A task workdir is read as JSON only (its config.json and results.json), so this layer needs nothing
of the task models' code.
"""

from __future__ import annotations

import collections
import json
import os
import statistics
from typing import Any, NamedTuple, Sequence

from elmo_jax.evaluation.report import ReportError
from elmo_jax.runtime import workdir_files

METRICS = {"tag": "accuracy", "ner": "span F1", "parse": "LAS"}


class TaskRun(NamedTuple):
    """One task workdir: its name, task (`tag`, `ner`, `parse` and the recipe's files), inputs, seed
    and results.json."""

    name: str
    task: str
    inputs: str
    seed: int
    results: dict[str, Any]


def is_task_workdir(run_dir: str) -> bool:
    """Whether `run_dir` is an `elmo-task` workdir (its config.json has a `task` section)."""
    try:
        with open(os.path.join(run_dir, workdir_files.CONFIG), encoding="utf-8") as f:
            return "task" in json.load(f)
    except (OSError, ValueError):
        return False


def inputs_name(config: dict[str, Any]) -> str:
    """The inputs of a task config, as a legend names them: elmo, static:<file>, words, char_cnn."""
    inputs, names = config["inputs"], []
    elmo = inputs["elmo"]
    if elmo["workdir"] or elmo["options"]:
        top = " (top)" if elmo["mix"] == "top" else ""
        names.append(f"elmo:{os.path.basename(os.path.normpath(elmo['workdir'] or elmo['options']))}{top}")
    if inputs["static"]["file"]:
        names.append(f"static:{os.path.splitext(os.path.basename(inputs['static']['file']))[0]}")
    if inputs["word"]["dim"]:
        names.append("words")
    if inputs["char_cnn"]["dim"]:
        names.append("char_cnn")
    return " + ".join(names)


def load_task_run(run_dir: str, name: str | None = None) -> TaskRun:
    """The task workdir `run_dir`; ReportError when it has no results.json yet."""
    try:
        with open(os.path.join(run_dir, workdir_files.CONFIG), encoding="utf-8") as f:
            config = json.load(f)
        with open(os.path.join(run_dir, workdir_files.TASK_RESULTS), encoding="utf-8") as f:
            results = json.load(f)
    except FileNotFoundError as e:
        raise ReportError(f"{run_dir}: no {os.path.basename(e.filename)} (a task run not finished?)") from None
    train = os.path.basename(config["data"]["train_file"])
    return TaskRun(name or os.path.basename(os.path.normpath(run_dir)), f"{config['task']['kind']} ({train})",
                   inputs_name(config), int(config["seed"]), results)


def task_table(runs: Sequence[TaskRun]) -> str:
    """A row per run: task, inputs, seed, training sentences, best epoch, dev and test scores."""
    lines = ["| run | task | inputs | seed | training sentences | best epoch | dev | test |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for run in runs:
        r = run.results
        test = f"{r['test']['score']:.4f}" if "test" in r else ""
        lines.append(f"| {run.name} | {run.task}: {METRICS[r['task']]} | {run.inputs} | {run.seed} | "
                     f"{r['train_sentences']:,} | {r['best_epoch']} | {r['dev']['score']:.4f} | {test} |")
    return "\n".join(lines)


def learning_curves(runs: Sequence[TaskRun]) -> Any:
    """One panel per task: the test score (dev where a run has no test file) against the training
    sentences (log scale), a line per input with markers, error bars over seeds."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ReportError("elmo-report needs matplotlib: pip install 'elmo-jax[report]'") from None
    tasks = sorted({run.task for run in runs})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        points = collections.defaultdict(lambda: collections.defaultdict(list))
        for run in runs:
            if run.task == task:
                split = "test" if "test" in run.results else "dev"
                points[run.inputs][run.results["train_sentences"]].append(run.results[split]["score"])
        for inputs, by_size in sorted(points.items()):
            sizes = sorted(by_size)
            means = [statistics.mean(by_size[n]) for n in sizes]
            low = [m - min(by_size[n]) for m, n in zip(means, sizes)]
            high = [max(by_size[n]) - m for m, n in zip(means, sizes)]
            ax.errorbar(sizes, means, yerr=[low, high], marker="o", capsize=3, label=inputs)
        metric = METRICS[next(run.results["task"] for run in runs if run.task == task)]
        ax.set(xscale="log", xlabel="training sentences", ylabel=metric, title=task)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
