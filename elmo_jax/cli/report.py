"""Compare training runs (`elmo-report`): curves of training loss and evaluation perplexity, and a
Markdown table of each run's final metrics; for runs whose layers were probed (`elmo-probe`, or
`config.eval.probe` in training), the probe accuracy by layer beside them, in the table and in a
panel of the figure.

  elmo-report runs/a runs/b --output report.png
  elmo-report runs/tasks/* --output runs/tasks.png    # task models (elmo-task): table and learning curves

What the figure and the table show: elmo_jax/evaluation/report.py. Needs matplotlib:
`pip install 'elmo-jax[report]'`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.evaluation.report import ReportError, figure, load_run, markdown_table, run_names
from elmo_jax.evaluation.task_report import is_task_workdir, learning_curves, load_task_run, task_table
from elmo_jax.runtime.atomic_write import write_atomic

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
flags.DEFINE_string("output", "report.png", "figure to write (PNG)", flag_values=_FLAGS)


def _figure_format(fig: Any, path: str) -> str:
    """The format matplotlib writes `path` in (its extension; PNG without one); ReportError naming
    the flag and the formats there are, before any output, for one it cannot write."""
    extension = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    supported = fig.canvas.get_supported_filetypes()
    if extension not in supported:
        raise ReportError(
            f"--output {path}: the figure cannot be written as '.{extension}'; "
            f"name a file ending in one of {', '.join('.' + f for f in sorted(supported))}"
        )
    return extension


def _report(*run_dirs: str) -> None:
    """The CLI: the table of the runs on stdout, their figure in --output (task workdirs: their table
    and learning curves; biLM and task workdirs are not mixed)."""
    names = dict(zip(run_dirs, run_names(run_dirs)))
    tasks = [d for d in run_dirs if is_task_workdir(d)]
    if tasks and len(tasks) != len(run_dirs):
        raise ReportError(f"{tasks[0]} is a task model's workdir, {next(d for d in run_dirs if d not in tasks)} a "
                          "biLM's: report them apart")
    if tasks:
        task_runs = [load_task_run(d, names[d]) for d in tasks]
        _write_figure(learning_curves(task_runs), task_table(task_runs))
        return
    runs = [load_run(d, names[d]) for d in run_dirs]
    _write_figure(figure(runs), markdown_table(runs))


def _write_figure(fig: Any, table: str) -> None:
    """`table` on stdout, `fig` in --output (built before any output: without matplotlib, only the
    error line)."""
    figure_format = _figure_format(fig, _FLAGS.output)
    print(table)
    write_atomic(_FLAGS.output, lambda tmp: fig.savefig(tmp, dpi=100, format=figure_format))
    print(f"wrote {_FLAGS.output}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-report RUN_DIR...` / `python -m elmo_jax.cli.report`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _report, doc=__doc__, positional="RUN_DIR", errors=(ReportError, OSError))


if __name__ == "__main__":
    sys.exit(main())
