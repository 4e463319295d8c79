"""Train a task model on a biLM's layers, static vectors or inputs learned from scratch: `elmo-task`
or `python -m elmo_jax.task`.

  elmo-task train --config=configs/tasks/upos_ewt.py --workdir=runs/upos_ewt \\
      [--config.inputs.elmo.workdir=runs/demo] [--config.data.train_fraction=0.1] [--print_config]

The recipes of configs/tasks/ name the files (UPOS and LAS on UD English EWT, NER on Universal NER);
every key of elmo_jax/tasks/schema.py is overridable as --config.KEY=VALUE. Rerunning the same
command resumes from the last finished epoch. Exit status: 0 when training and scoring are done; 1
with a one-line `error: ...` on stderr for bad input or a workdir trained with another config.
"""

import sys

from absl import app, flags

from elmo_jax.cli import tool_flags
from elmo_jax.cli.config_flags import define_config_flag, define_print_config_flag, flags_parser, print_config
from elmo_jax.tasks.loop import train_task
from elmo_jax.tasks.schema import validate

COMMANDS = ("train",)
FLAGS = flags.FLAGS
define_config_flag("A task recipe file (configs/tasks/*.py).")
flags.DEFINE_string("workdir", None, "Directory for the task model's checkpoints, metrics and results.")
define_print_config_flag("the config of the task model (the recipe with every --config.KEY override, validated)")
flags.DEFINE_bool("no_progress", False, "no progress bars")
tool_flags.define_runtime_flags()


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise app.UsageError(f"give one command: {' | '.join(COMMANDS)}")
    try:
        if FLAGS.config is None:
            raise ValueError("--config is required (a task recipe, configs/tasks/*.py)")
        validate(FLAGS.config)
        if FLAGS.print_config:
            print_config(FLAGS.config)
            return
        if FLAGS.workdir is None:
            raise ValueError("--workdir is required (but with --print_config)")
        tool_flags.configure_runtime()
        results = train_task(FLAGS.config, FLAGS.workdir, progress=not FLAGS.no_progress)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(format_results(results))


def format_results(results: dict) -> str:
    """The result table: each split's headline score (and UAS for the parser)."""
    lines = ["| split | score | detail |", "| --- | ---: | --- |"]
    for split in ("dev", "test"):
        if split in results:
            scores = results[split]
            detail = {"ner": "span F1", "parse": f"LAS (UAS {scores.get('uas', 0):.4f})"}.get(results["task"],
                                                                                            "accuracy")
            lines.append(f"| {split} | {scores['score']:.4f} | {detail} |")
    return "\n".join(lines + [f"best epoch {results['best_epoch']} of {results['epochs']}; "
                              f"{results['train_sentences']} training sentences"])


def run() -> None:
    """The `elmo-task` console script."""
    app.run(main, flags_parser=flags_parser(__doc__))
