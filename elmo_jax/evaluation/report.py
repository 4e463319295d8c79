"""Compare training runs (`elmo-report`, docs/training.md "Comparing runs"): curves of training
loss and evaluation perplexity against steps and tokens, and a Markdown table of each run's final
metrics, latest test evaluation (`eval_test_<step>.json`) and probes (`probe_<task>.json`, else the
latest `probe_<task>_<step>.json`, beside `probe_<task>_random_init.json`), with the rows of the
static vector files probed beside a biLM (`static`, `elmo-probe --static`). The figure needs matplotlib.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
from typing import Any, Sequence

from elmo_jax.data.corpus import eval_set_name
from elmo_jax.runtime import workdir_files


class ReportError(ValueError):
    """A run directory cannot be read."""


@dataclasses.dataclass
class Probe:
    """A run's probe results of one task: the one shown and its random-init control (either may be absent)."""

    result: dict[str, Any] | None = None
    control: dict[str, Any] | None = None


@dataclasses.dataclass
class Run:
    """One workdir's records: `train` and `evals` by increasing step, one record per step."""

    name: str
    tokens_per_step: int
    eval_split: str
    train: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    probes: dict[str, Probe] = dataclasses.field(default_factory=dict)
    test: dict[str, Any] | None = None  # The latest eval_test_<step>.json.

    @property
    def steps(self) -> int:
        return max((r["step"] for r in self.train + self.evals), default=0)

    def evals_by_tokens(self) -> dict[int | None, list[dict[str, Any]]]:
        """The evaluations grouped by `eval_tokens` (None: not recorded), most first: the whole split,
        then evaluations of its first `eval.max_tokens`."""
        groups = _group_by_tokens(self.evals)
        return dict(sorted(groups.items(), key=lambda item: -1 if item[0] is None else -item[0]))


# The numbers the report uses; metrics.jsonl writes non-finite ones as 'nan' / 'inf' strings.
NUMERIC_KEYS = (
    "train_loss", "tokens_per_sec", "eval_perplexity", "eval_forward_perplexity", "eval_backward_perplexity"
)
INTEGER_KEYS = ("eval_tokens",)


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl, NUMERIC_KEYS as floats; each must be a JSON object with an
    integer `step`. A last line cut short (the writer was killed mid-line) is skipped with a warning;
    any other bad line is a ReportError naming the file and line."""
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
        for key in INTEGER_KEYS:
            if key in record and not isinstance(record[key], int):
                raise ReportError(f"{where}: {key} is not an integer: {record[key]!r}")
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


def _read_json(path: str) -> Any:
    """The JSON value of the file at `path`; ReportError naming it when it is malformed."""
    with open(path) as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise ReportError(f"{path}: malformed JSON ({e})") from e


def _read_probe_result(path: str) -> dict[str, Any]:
    """A probe result file: a JSON object with a non-empty list of accuracies `layers` and a `mix`,
    and, when it has `static`, a score of each row of each vector file (`static_rows`)."""
    result = _read_json(path)
    numbers = result.get("layers") if isinstance(result, dict) else None
    if not (isinstance(numbers, list) and numbers and isinstance(result.get("mix"), (int, float))
            and all(isinstance(a, (int, float)) for a in numbers)):
        raise ReportError(f"{path}: not a probe result (expected a list of accuracies 'layers' and a number 'mix')")
    static = result.get("static", {})
    if not (isinstance(static, dict) and all(
        isinstance(entry, dict) and isinstance(entry.get("rows"), dict) and entry["rows"]
        and all(isinstance(a, (int, float)) for a in entry["rows"].values()) for entry in static.values()
    )):
        raise ReportError(f"{path}: not a probe result ('static' holds no number of each row 'rows' of a vector file)")
    return result


# The rows of a static vector file in a probe result (`static`, probing/static_features.py), in
# the order shown (a result's JSON sorts them by name), and their line styles in a figure.
STATIC_ROWS = ("own vector", "context bag")
STATIC_LINE_STYLES = ("-.", (0, (6, 2, 1, 2, 1, 2)))  # Dash-dot, dash-dot-dot.
# A vector file's color, by its place in the results (the runs' lines take C0, C1, ...; these are
# none of the first four): the rows of four files were one color.
STATIC_COLORS = ("tab:brown", "tab:olive", "tab:pink", "tab:cyan", "tab:gray", "tab:purple")
# The gray level of a task's panel: its floor's name (default: the word-type baseline).
BASELINE_NAMES = {"wsd": "most frequent sense", "wic": "majority class"}


def baseline_name(task: str) -> str:
    return BASELINE_NAMES.get(task, "word-type baseline")


def static_rows(results: Sequence[dict[str, Any] | None]) -> dict[str, list[str]]:
    """The static vector files of `results` (`static`: name -> {`rows`: row -> score, ...}) in the
    order the results first give them, and the STATIC_ROWS each one's results have."""
    rows: dict[str, set[str]] = {}
    for result in results:
        for name, entry in (result or {}).get("static", {}).items():
            rows.setdefault(name, set()).update(entry["rows"])
    return {name: [row for row in STATIC_ROWS if row in names] for name, names in rows.items()}


# The perplexities of a test evaluation file, in the order of the table's test columns.
TEST_KEYS = ("forward_perplexity", "backward_perplexity", "perplexity")
TEST_COLUMNS = ("test forward ppl", "test backward ppl", "test biLM ppl")


def read_test_evaluation(run_dir: str) -> dict[str, Any] | None:
    """The latest `eval_test_<step>.json` in `run_dir` (its perplexities), or None."""
    files = map(workdir_files.parse_evaluation_file, os.listdir(run_dir))
    steps = [file.step for file in files if file is not None and file.split == "test" and file.stateful]
    if not steps:
        return None
    path = os.path.join(run_dir, workdir_files.evaluation_file("test", max(steps)))
    result = _read_json(path)
    if not (isinstance(result, dict) and all(isinstance(result.get(key), (int, float)) for key in TEST_KEYS)):
        raise ReportError(f"{path}: not an evaluation result (expected numbers {', '.join(map(repr, TEST_KEYS))})")
    return result


def read_probes(run_dir: str) -> dict[str, Probe]:
    """The probes of each task in `run_dir` (the module's docstring), by task."""
    found: dict[str, dict[int | str, str]] = {}  # task -> {step, 'model' or 'control': path}
    for name in sorted(os.listdir(run_dir)):
        probe = workdir_files.parse_probe_file(name)
        if probe is not None and probe.control in workdir_files.PROBE_CONTROLS:
            key = probe.step if probe.step is not None else "model" if probe.control == "none" else "control"
            found.setdefault(probe.task, {})[key] = os.path.join(run_dir, name)
    probes = {}
    for task, files in sorted(found.items()):
        steps = [key for key in files if isinstance(key, int)]
        shown, control = files.get("model") or (files[max(steps)] if steps else None), files.get("control")
        probes[task] = Probe(_read_probe_result(shown) if shown else None,
                             _read_probe_result(control) if control else None)
    return probes


def load_run(run_dir: str, name: str | None = None) -> Run:
    """Reads `run_dir`'s metrics.jsonl, config.json, test evaluation and probe results."""
    path = os.path.join(run_dir, workdir_files.METRICS)
    if not os.path.isfile(path):
        raise ReportError(f"{run_dir}: no metrics.jsonl (not a training workdir?)")
    try:
        config = _read_json(os.path.join(run_dir, workdir_files.CONFIG))
    except FileNotFoundError:
        raise ReportError(f"{run_dir}: no config.json (needed for tokens per step)") from None
    try:
        tokens_per_step = int(config["train"]["batch_size"]) * int(config["train"]["unroll_steps"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReportError(f"{run_dir}/config.json: no train.batch_size / train.unroll_steps ({e!r})") from e
    records = read_jsonl(path)
    data = config.get("data", {})
    return Run(
        name=name or os.path.basename(os.path.normpath(run_dir)),
        tokens_per_step=tokens_per_step,
        eval_split=eval_set_name(str(data.get("source", "")), str(data.get("eval_split", "eval"))),
        train=latest_attempt([r for r in records if "train_loss" in r]),
        evals=_latest_evaluations([r for r in records if "eval_perplexity" in r]),
        probes=read_probes(run_dir),
        test=read_test_evaluation(run_dir),
    )


def _latest_evaluations(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`latest_attempt` of each size of evaluation (a subset and the whole split may share a step),
    merged by step."""
    groups = _group_by_tokens(records).values()
    return sorted((r for group in groups for r in latest_attempt(group)), key=lambda r: r["step"])


def _group_by_tokens(records: list[dict[str, Any]]) -> dict[int | None, list[dict[str, Any]]]:
    """Evaluation records by `eval_tokens` (None where a record has none), in their order."""
    groups: dict[int | None, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(record.get("eval_tokens"), []).append(record)
    return groups


def _value(record: dict[str, Any] | None, key: str) -> float:
    return math.nan if record is None else record.get(key, math.nan)


def summary(run: Run) -> dict[str, Any]:
    """Final metrics of a run: the last training record, the last evaluation of the most tokens, and
    tokens/s as the median over logged windows (the first includes compilation)."""
    last_train = run.train[-1] if run.train else None
    evals = next(iter(run.evals_by_tokens().values()), [])
    last_eval = evals[-1] if evals else None
    speeds = [r["tokens_per_sec"] for r in run.train if "tokens_per_sec" in r]
    return {
        "run": run.name,
        "steps": run.steps,
        "tokens": run.steps * run.tokens_per_step,
        "train_loss": _value(last_train, "train_loss"),
        "eval_split": run.eval_split,
        "eval_tokens": last_eval.get("eval_tokens") if last_eval else None,
        "forward_perplexity": _value(last_eval, "eval_forward_perplexity"),
        "backward_perplexity": _value(last_eval, "eval_backward_perplexity"),
        "perplexity": _value(last_eval, "eval_perplexity"),
        "tokens_per_sec": statistics.median(speeds) if speeds else math.nan,
    }


def _fmt(value: float, digits: int) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.{digits}f}"


def probe_tasks(runs: Sequence[Run]) -> list[str]:
    """The tasks any of `runs` was probed on."""
    return sorted({task for run in runs for task in run.probes})


# What a probe result's `layers` and `mix` hold when it does not say (`metric`): the token tasks'.
DEFAULT_MEASURE = "test accuracy"


def probe_measure(runs: Sequence[Run], task: str) -> str:
    """What the scores of `task` measure, as its results say (`metric`), else DEFAULT_MEASURE."""
    probes = [run.probes[task] for run in runs if task in run.probes]
    metrics = [result.get("metric") for probe in probes for result in (probe.result, probe.control) if result]
    return next((metric for metric in metrics if isinstance(metric, str)), DEFAULT_MEASURE)


# The table's columns of each probe task, after the task's name.
PROBE_COLUMNS = ("by layer", "best layer", "mix", "word baseline", "random init best")


def _accuracy(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def best_layer(result: dict[str, Any]) -> int:
    """The layer whose probe scored best (the lowest of a tie)."""
    layers = result["layers"]
    return layers.index(max(layers))


def _best_layer_cell(result: dict[str, Any] | None) -> str:
    """`layer: accuracy` of the best layer."""
    if result is None:
        return "n/a"
    best = best_layer(result)
    return f"{best}: {result['layers'][best]:.3f}"


def _probe_cells(probe: Probe) -> list[str]:
    """PROBE_COLUMNS of one run's probe of a task."""
    result = probe.result or {}
    layers = result.get("layers")
    return [
        " / ".join(f"{a:.3f}" for a in layers) if layers else "n/a",
        _best_layer_cell(probe.result),
        _accuracy(result.get("mix")),
        _accuracy(result.get("word_baseline")),
        _best_layer_cell(probe.control),
    ]


def _static_cell(result: dict[str, Any] | None) -> str:
    """Each static vector file's rows of a result, `name: row value / row value`; n/a without."""
    static = (result or {}).get("static")
    if not static:
        return "n/a"
    return "; ".join(f"{name}: " + " / ".join(f"{row} {static[name]['rows'][row]:.3f}" for row in rows)
                     for name, rows in static_rows([result]).items())


def _static_tasks(runs: Sequence[Run]) -> set[str]:
    """The tasks of which some run's result has static vector files' rows."""
    return {task for run in runs for task, probe in run.probes.items() if probe.result and probe.result.get("static")}


def markdown_table(runs: Sequence[Run]) -> str:
    """One row per run: `summary`, TEST_COLUMNS when a run has a test evaluation, PROBE_COLUMNS of
    each probed task (and `<task> static` when a result has static vector files' rows), or for a
    single run one row per column (`| metric | <run> |`); below the table, what a task's scores
    measure when not test accuracy."""
    tasks, with_static = probe_tasks(runs), _static_tasks(runs)
    tested = any(run.test for run in runs)
    header = ["run", "steps", "tokens", "train loss", "eval split", "eval tokens", "forward ppl", "backward ppl",
              "biLM ppl", "tokens/s", *(TEST_COLUMNS if tested else ()),
              *(f"{task} {column}" for task in tasks
                for column in (*PROBE_COLUMNS, *(["static"] if task in with_static else [])))]
    aligns = ["---", "---:", "---:", "---:", "---", *["---:"] * (len(header) - 5)]
    rows = []
    for run in runs:
        s = summary(run)
        cells = [
            s["run"], f"{s['steps']:,}", f"{s['tokens']:,}", _fmt(s["train_loss"], 4), s["eval_split"],
            "n/a" if s["eval_tokens"] is None else f"{s['eval_tokens']:,}",
            _fmt(s["forward_perplexity"], 2), _fmt(s["backward_perplexity"], 2), _fmt(s["perplexity"], 2),
            _fmt(s["tokens_per_sec"], 0),
        ]
        if tested:
            cells += [_fmt(_value(run.test, key), 2) for key in TEST_KEYS]
        for task in tasks:
            probe = run.probes.get(task, Probe())
            cells += [*_probe_cells(probe), *([_static_cell(probe.result)] if task in with_static else [])]
        rows.append(cells)
    if len(rows) == 1:  # One run: a row a metric (a single row ran to 25 columns).
        lines = [f"| metric | {rows[0][0]} |", "| --- | ---: |"]
        lines += [f"| {name} | {cell} |" for name, cell in zip(header[1:], rows[0][1:])]
    else:
        lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    measures = {task: probe_measure(runs, task) for task in tasks}
    notes = [f"{task}: {measure}" for task, measure in measures.items() if measure != DEFAULT_MEASURE]
    if notes:
        lines += ["", f"Probe scores are test accuracy, except {'; '.join(notes)}."]
    return "\n".join(lines)


def _log_tick_positions(values: Sequence[float]) -> list[float]:
    """Tick values for a log axis over `values` whose labels read the data: 1-1.5-2-3-5-7 x 10^k
    within two decades, 1-2-5 within four, powers of ten beyond; every point lies between ticks."""
    low, high = min(values), max(values)
    decades = math.log10(high / low)
    mantissas = (1, 1.5, 2, 3, 5, 7) if decades <= 2 else (1, 2, 5) if decades <= 4 else (1,)
    candidates = [m * 10.0**k for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
                  for m in mantissas]
    below = max(t for t in candidates if t <= low)
    above = min(t for t in candidates if t >= high)
    return [t for t in candidates if below <= t <= above]


def plot_scores_by_layer(
    ax: Any, task: str, measure: str, lines: Sequence[tuple[dict[str, Any], int, str, bool]],
    baseline: tuple[str, str] = ("word-type baseline", ":"),
) -> None:
    """Probe scores of `task` by layer on the matplotlib axes `ax`: a line per (result, color, label,
    is a control) of `lines`, a control's dashed, a model's mix a star after the last layer, each row
    of its static vector files (`static_rows`) a level of the file's color (STATIC_COLORS) and the
    row's line style, and its `word_baseline` a gray level (`baseline`: their label and line style)."""
    n_layers = max(len(result["layers"]) for result, *_ in lines)
    levels = set()
    for result, color, label, control in lines:
        layers = result["layers"]
        if control:
            ax.plot(range(len(layers)), layers, color=f"C{color}", marker="x", linestyle="--", label=label)
            continue
        ax.plot(range(len(layers)), layers, color=f"C{color}", marker="o", label=label)
        ax.plot([n_layers], [result["mix"]], color=f"C{color}", marker="*", markersize=12, linestyle="none")
        for j, (name, rows) in enumerate(static_rows([result]).items()):
            for row in rows:
                ax.axhline(result["static"][name]["rows"][row], color=STATIC_COLORS[j % len(STATIC_COLORS)],
                           linewidth=1.5, linestyle=STATIC_LINE_STYLES[STATIC_ROWS.index(row)],
                           label=f"{label}: {name} {row}")
        if "word_baseline" in result:
            levels.add(result["word_baseline"])
    for j, level in enumerate(sorted(levels)):
        ax.axhline(level, color="gray", linestyle=baseline[1], linewidth=1, label=baseline[0] if j == 0 else None)
    ax.set_xticks(range(n_layers + 1), [*map(str, range(n_layers)), "mix"])
    ax.set(xlabel="layer (0: token embeddings)", ylabel=measure, title=f"{task} probes by layer")
    ax.grid(True, alpha=0.3)
    ax.legend()


def figure(runs: Sequence[Run]) -> Any:
    """2 x 2 matplotlib Figure: train loss and eval perplexity (log scale) against steps and tokens
    (subset evaluations dashed); then a panel per probed task."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    except ModuleNotFoundError as e:
        raise ReportError(f"the report's figure needs matplotlib ({e}): pip install 'elmo-jax[report]'") from e
    tasks = probe_tasks(runs)
    fig = Figure(figsize=(12 + 6 * len(tasks), 8), layout="constrained")
    grid = fig.add_gridspec(1, 1 + len(tasks), width_ratios=[2, *[1] * len(tasks)])
    axes = grid[0, 0].subgridspec(2, 2).subplots()
    for k, task in enumerate(tasks):  # The scores by layer, a line per run and per control.
        lines = []
        for i, run in enumerate(runs):
            probe = run.probes.get(task, Probe())
            lines += [(probe.result, i, run.name, False)] if probe.result else []
            lines += [(probe.control, i, f"{run.name} (random init)", True)] if probe.control else []
        plot_scores_by_layer(fig.add_subplot(grid[0, 1 + k]), task, probe_measure(runs, task), lines,
                             (baseline_name(task), ":"))
    splits = "/".join(sorted({"held-out text" if run.eval_split == "files" else run.eval_split for run in runs}))
    perplexities = [r["eval_perplexity"] for run in runs for r in run.evals if r["eval_perplexity"] > 0]
    for i, run in enumerate(runs):
        for col, scale in enumerate((1, run.tokens_per_step)):
            steps = [r["step"] * scale for r in run.train]
            axes[0, col].plot(  # A single record is a point: a line needs two.
                steps, [r["train_loss"] for r in run.train], color=f"C{i}", label=run.name,
                marker="o" if len(run.train) == 1 else None,
            )
            for n, (tokens, evals) in enumerate(run.evals_by_tokens().items()):
                subset = n > 0
                axes[1, col].plot(
                    [r["step"] * scale for r in evals], [r["eval_perplexity"] for r in evals], color=f"C{i}",
                    marker="o", linestyle="--" if subset else "-", markerfacecolor="none" if subset else None,
                    label=f"{run.name} (first {tokens:,} tokens)" if subset else run.name,
                )
    for col, xlabel in enumerate(("step", "tokens")):
        axes[0, col].set(xlabel=xlabel, ylabel="train loss", title=f"train loss vs {xlabel}")
        axes[1, col].set(
            xlabel=xlabel, ylabel=f"{splits} perplexity", title=f"eval perplexity vs {xlabel}", yscale="log"
        )
        if perplexities:
            ticks = _log_tick_positions(perplexities)
            axes[1, col].yaxis.set_major_locator(FixedLocator(ticks))
            axes[1, col].yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axes[1, col].yaxis.set_minor_locator(NullLocator())
            axes[1, col].set_ylim(ticks[0], ticks[-1])
        for row in range(2):
            axes[row, col].grid(True, alpha=0.3)
    axes[0, 0].legend()
    if any(len(run.evals_by_tokens()) > 1 for run in runs):
        axes[1, 0].legend()
    return fig


def run_names(run_dirs: Sequence[str]) -> list[str]:
    """Directory names, or the paths as given when two runs share a name."""
    names = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    return names if len(set(names)) == len(names) else list(run_dirs)
