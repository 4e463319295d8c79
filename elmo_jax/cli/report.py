"""Compare training runs (`elmo-report`): curves of training loss and evaluation perplexity, and a
Markdown table of each run's final metrics; for runs whose layers were probed (`elmo-probe`, or
`config.eval.probe` in training), the probe accuracy by layer beside them, in the table and in a
panel of the figure.

  elmo-report runs/a runs/b --output report.png

What the figure and the table show: elmo_jax/evaluation/report.py. Needs matplotlib:
`pip install 'elmo-jax[report]'`.
"""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.evaluation.report import ReportError, figure, load_run, markdown_table, run_names

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
flags.DEFINE_string("output", "report.png", "figure to write (PNG)", flag_values=_FLAGS)


def _report(*run_dirs: str) -> None:
    """The CLI: the table of the runs on stdout, their figure in --output."""
    runs = [load_run(d, name) for d, name in zip(run_dirs, run_names(run_dirs))]
    fig = figure(runs)  # Before any output: without matplotlib, only the error line.
    print(markdown_table(runs))
    fig.savefig(_FLAGS.output, dpi=100)
    print(f"wrote {_FLAGS.output}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-report RUN_DIR...` / `python -m elmo_jax.cli.report`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _report, doc=__doc__, positional="RUN_DIR", errors=(ReportError, OSError))


if __name__ == "__main__":
    sys.exit(main())
