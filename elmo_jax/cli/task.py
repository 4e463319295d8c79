"""Train a task model on a biLM's layers, static vectors or inputs learned from scratch: `elmo-task`
or `python -m elmo_jax.task`.

  elmo-task train --config=configs/tasks/upos_ewt.py --workdir=runs/upos_ewt \\
      [--config.inputs.elmo.workdir=runs/demo] [--config.data.train_fraction=0.1] [--print_config]
  elmo-task evaluate --workdir=runs/upos_ewt --file=other.conllu       # the scores on a labelled file
  elmo-task predict --workdir=runs/upos_ewt --input=raw.conllu --output=tagged.conllu

The recipes of configs/tasks/ name the files (UPOS and LAS on UD English EWT, NER on Universal NER);
every key of elmo_jax/tasks/schema.py is overridable as --config.KEY=VALUE. Rerunning the same
command resumes from the last finished epoch. `predict` writes its input back with the predictions in
its label columns (CoNLL-U: the tagger's column, or HEAD and DEPREL; entity files: the tags). Exit
status: 0 when done; 1 with a one-line `error: ...` on stderr for bad input or a workdir trained with
another config.
"""

import json
import sys

from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.cli.config_flags import define_config_flag, define_print_config_flag, flags_parser, print_config
from elmo_jax.runtime.atomic_write import check_not_inputs, write_atomic
from elmo_jax.tasks.loop import train_task
from elmo_jax.tasks.trained import TrainedTask
from elmo_jax.tasks.schema import validate

COMMANDS = ("train", "evaluate", "predict")
# Flags of their own, not absl's global ones: train.py's and evaluate.py's --config may share a process.
FLAGS = flags.FlagValues()
define_config_flag("A task recipe file (configs/tasks/*.py).", FLAGS)
flags.DEFINE_string("workdir", None, "Directory for the task model's checkpoints, metrics and results.",
                    flag_values=FLAGS)
define_print_config_flag("the config of the task model (the recipe with every --config.KEY override, validated)",
                         FLAGS)
flags.DEFINE_string("file", None, "evaluate: a labelled file of the task's format", flag_values=FLAGS)
flags.DEFINE_string("input", None, "predict: a file of the task's format (its labels may be '_')", flag_values=FLAGS)
flags.DEFINE_string("output", None, "predict: where the input is written with the predictions", flag_values=FLAGS)
flags.DEFINE_bool("no_progress", False, "no progress bars", flag_values=FLAGS)
tool_flags.define_runtime_flags(FLAGS)


def main(argv: list[str]) -> None:
    """One command of `argv` (the arguments left after the flags)."""
    try:
        if len(argv) != 2 or argv[1] not in COMMANDS:
            raise ValueError(f"give one command: {' | '.join(COMMANDS)} (got {' '.join(argv[1:]) or 'none'})")
        if argv[1] != "train":
            _use_trained(argv[1])
            return
        if FLAGS.config is None:
            raise ValueError("--config is required (a task recipe, configs/tasks/*.py)")
        validate(FLAGS.config)
        if FLAGS.print_config:
            print_config(FLAGS.config)
            return
        if FLAGS.workdir is None:
            raise ValueError("--workdir is required (but with --print_config)")
        tool_flags.configure_runtime(FLAGS)
        results = train_task(FLAGS.config, FLAGS.workdir, progress=not FLAGS.no_progress)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(format_results(results))


def _use_trained(command: str) -> None:
    """evaluate: the scores of --file on stdout; predict: --input written to --output with the predictions."""
    if FLAGS.workdir is None:
        raise ValueError(f"elmo-task {command} needs --workdir (a trained task model)")
    needed = ("file",) if command == "evaluate" else ("input", "output")
    for name in needed:
        if FLAGS[name].value is None:
            raise ValueError(f"elmo-task {command} needs --{name}")
    tool_flags.configure_runtime(FLAGS)
    trained = TrainedTask(FLAGS.workdir)
    if command == "evaluate":
        print(json.dumps(trained.evaluate(FLAGS.file, progress=not FLAGS.no_progress), indent=1))
        return
    check_not_inputs([("--output", FLAGS.output)], [("--input", FLAGS.input)])
    written = {}

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as out:
            written["sentences"] = trained.write_predictions(FLAGS.input, out, progress=not FLAGS.no_progress)

    write_atomic(FLAGS.output, write)  # Whole or not at all.
    print(f"wrote {written['sentences']} sentences to {FLAGS.output}")


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
    """The `elmo-task` console script: its flags parsed (help, one-line errors), then its command."""
    main(flags_parser(__doc__, FLAGS)(sys.argv))
