"""Compare training runs (`elmo-report`): curves of training loss and evaluation perplexity, and a
Markdown table of each run's final metrics; for runs whose layers were probed (`elmo-probe`, or
`config.eval.probe` in training), the probe accuracy by layer beside them, in the table and in a
panel of the figure.

  elmo-report runs/a runs/b --output report.png

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
    """The CLI: the table of the runs on stdout, their figure in --output."""
    runs = [load_run(d, name) for d, name in zip(run_dirs, run_names(run_dirs))]
    fig = figure(runs)  # Before any output: without matplotlib, only the error line.
    figure_format = _figure_format(fig, _FLAGS.output)
    print(markdown_table(runs))
    write_atomic(_FLAGS.output, lambda tmp: fig.savefig(tmp, dpi=100, format=figure_format))
    print(f"wrote {_FLAGS.output}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-report RUN_DIR...` / `python -m elmo_jax.cli.report`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _report, doc=__doc__, positional="RUN_DIR", errors=(ReportError, OSError))


if __name__ == "__main__":
    sys.exit(main())
