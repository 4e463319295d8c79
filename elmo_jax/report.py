"""Compare training runs: curves of training loss and evaluation perplexity, and a Markdown table
of each run's final metrics.

  python -m elmo_jax.report runs/a runs/b --output report.png

Reads each workdir's `metrics.jsonl` (training and evaluation records by step) and `config.json`
(tokens per step = train.batch_size x train.unroll_steps). Draws train loss and eval perplexity
against steps and against tokens (2 x 2 plots, one line per run) and prints the table to stdout.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
from typing import Any, Sequence

from absl import flags
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from elmo_jax.cli import tool_flags


class ReportError(ValueError):
    """A run directory cannot be read."""


@dataclasses.dataclass
class Run:
    """One workdir's records: `train` and `evals` by increasing step, one record per step."""

    name: str
    tokens_per_step: int
    eval_split: str
    train: list[dict[str, Any]]
    evals: list[dict[str, Any]]

    @property
    def steps(self) -> int:
        return max((r["step"] for r in self.train + self.evals), default=0)


# The numbers the report uses; metrics.jsonl writes non-finite ones as 'nan' / 'inf' strings.
NUMERIC_KEYS = (
    "train_loss", "tokens_per_sec", "eval_perplexity", "eval_forward_perplexity", "eval_backward_perplexity"
)


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl, NUMERIC_KEYS as floats; each must be a JSON object with an
    integer `step`.

    A last line cut short (no final newline: the writer was killed mid-line) is skipped with a
    warning; any other bad line is an error naming the file and line.
    """
    with open(path) as f:
        lines = f.readlines()
    records = []
    for number, line in enumerate(lines, 1):
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as e:
            if number == len(lines) and not line.endswith("\n"):
                print(f"warning: {where}: incomplete last line ignored", file=sys.stderr)
                continue
            raise ReportError(f"{where}: malformed JSON ({e})") from e
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ReportError(f"{where}: expected a JSON object with an integer 'step'")
        for key in NUMERIC_KEYS:
            if key in record:
                try:
                    record[key] = float(record[key])
                except (TypeError, ValueError):
                    raise ReportError(f"{where}: {key} is not a number: {record[key]!r}") from None
        records.append(record)
    return records


def latest_attempt(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records by increasing step: a record whose step is not above the previous one's starts a
    resumed attempt, whose records replace the earlier ones from that step on."""
    kept: list[dict[str, Any]] = []
    for record in records:
        while kept and kept[-1]["step"] >= record["step"]:
            kept.pop()
        kept.append(record)
    return kept


def _read_config(run_dir: str) -> dict[str, Any]:
    path = os.path.join(run_dir, "config.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ReportError(f"{run_dir}: no config.json (needed for tokens per step)") from None
    except ValueError as e:
        raise ReportError(f"{path}: malformed JSON ({e})") from e


def load_run(run_dir: str, name: str | None = None) -> Run:
    """Reads `run_dir`'s metrics.jsonl and config.json."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise ReportError(f"{run_dir}: no metrics.jsonl (not a training workdir?)")
    config = _read_config(run_dir)
    try:
        tokens_per_step = int(config["train"]["batch_size"]) * int(config["train"]["unroll_steps"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReportError(f"{run_dir}/config.json: no train.batch_size / train.unroll_steps ({e!r})") from e
    records = read_jsonl(path)
    return Run(
        name=name or os.path.basename(os.path.normpath(run_dir)),
        tokens_per_step=tokens_per_step,
        eval_split=str(config.get("data", {}).get("eval_split", "eval")),
        train=latest_attempt([r for r in records if "train_loss" in r]),
        evals=latest_attempt([r for r in records if "eval_perplexity" in r]),
    )


def _value(record: dict[str, Any] | None, key: str) -> float:
    return math.nan if record is None else record.get(key, math.nan)


def summary(run: Run) -> dict[str, Any]:
    """Final metrics of a run; tokens/s is the median over logged windows (the first includes compilation)."""
    last_train = run.train[-1] if run.train else None
    last_eval = run.evals[-1] if run.evals else None
    speeds = [r["tokens_per_sec"] for r in run.train if "tokens_per_sec" in r]
    return {
        "run": run.name,
        "steps": run.steps,
        "tokens": run.steps * run.tokens_per_step,
        "train_loss": _value(last_train, "train_loss"),
        "eval_split": run.eval_split,
        "forward_perplexity": _value(last_eval, "eval_forward_perplexity"),
        "backward_perplexity": _value(last_eval, "eval_backward_perplexity"),
        "perplexity": _value(last_eval, "eval_perplexity"),
        "tokens_per_sec": statistics.median(speeds) if speeds else math.nan,
    }


def _fmt(value: float, digits: int) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def markdown_table(runs: Sequence[Run]) -> str:
    """One row per run: steps, tokens, final train loss, final eval perplexities, tokens/s."""
    lines = [
        "| run | steps | tokens | train loss | eval split | forward ppl | backward ppl | biLM ppl | tokens/s |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        s = summary(run)
        cells = [
            s["run"], f"{s['steps']:,}", f"{s['tokens']:,}", _fmt(s["train_loss"], 4), s["eval_split"],
            _fmt(s["forward_perplexity"], 2), _fmt(s["backward_perplexity"], 2), _fmt(s["perplexity"], 2),
            _fmt(s["tokens_per_sec"], 0),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: Sequence[Run], output: str) -> None:
    """2 x 2 figure: train loss and eval perplexity (log scale) against steps and against tokens."""
    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    splits = "/".join(sorted({run.eval_split for run in runs}))
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for i, run in enumerate(runs):
        style = {"color": f"C{i}", "label": run.name}
        for col, scale in enumerate((1, run.tokens_per_step)):
            steps = [r["step"] * scale for r in run.train]
            axes[0, col].plot(steps, [r["train_loss"] for r in run.train], **style)
            steps = [r["step"] * scale for r in run.evals]
            axes[1, col].plot(steps, [r["eval_perplexity"] for r in run.evals], marker="o", **style)
    for col, xlabel in enumerate(("step", "tokens")):
        axes[0, col].set(xlabel=xlabel, ylabel="train loss", title=f"train loss vs {xlabel}")
        axes[1, col].set(
            xlabel=xlabel, ylabel=f"{splits} perplexity", title=f"eval perplexity vs {xlabel}", yscale="log"
        )
        for axis in (axes[1, col].yaxis.set_major_formatter, axes[1, col].yaxis.set_minor_formatter):
            axis(plain)  # 150, 200, 300 rather than 2 x 10^2.
        for row in range(2):
            axes[row, col].grid(True, alpha=0.3)
    axes[0, 0].legend()
    fig.savefig(output, dpi=100)


def run_names(run_dirs: Sequence[str]) -> list[str]:
    """Directory names, or the paths as given when two runs share a name."""
    names = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    return names if len(set(names)) == len(names) else list(run_dirs)


_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
flags.DEFINE_string("output", "report.png", "figure to write (PNG)", flag_values=_FLAGS)


def _report(*run_dirs: str) -> None:
    """The CLI: the table of the runs on stdout, their figure in --output."""
    runs = [load_run(d, name) for d, name in zip(run_dirs, run_names(run_dirs))]
    print(markdown_table(runs))
    plot(runs, _FLAGS.output)
    print(f"wrote {_FLAGS.output}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m elmo_jax.report RUN_DIR...` / `elmo-report`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _report, doc=__doc__, positional="RUN_DIR", errors=(ReportError, OSError))


if __name__ == "__main__":
    sys.exit(main())
