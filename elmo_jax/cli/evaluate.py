"""Full-softmax perplexity of a trained biLM on held-out text (`python evaluate.py` or
`elmo-evaluate`): a training workdir's checkpoint, or a bilm-tf/AllenNLP model's files.

  python evaluate.py --workdir=runs/demo [--split=test] [--eval_files=GLOB] [--step=N] [--output=R.json]
  python evaluate.py --config=configs/demo.py --workdir=runs/demo [--config.eval.batch_size=16]   # or --config=demo
  python evaluate.py --workdir=runs/demo --config.eval.stateful=False   # --config=workdir:runs/demo implied
  python evaluate.py --options=O --weights=H --softmax_weights=S --vocab=V --eval_files=GLOB [--output=R.json]
  python evaluate.py --workdir=runs/demo --config.eval.stateful=False --print_config   # the config it would use

A workdir's model is built from WORKDIR/config.json; `--config` and its overrides change only the
evaluation (see --config), and overrides without `--config` apply to WORKDIR/config.json. A
bilm-tf/AllenNLP model is built from its options.json, the rest of the config from
configs/default.py or `--config`. Prints a table and writes WORKDIR/eval_<split>_<step>.json
(a bilm-tf model: `--output` only). Details: docs/training.md.
"""

import sys
from typing import Any, Mapping

import ml_collections
from absl import app, flags

from elmo_jax.config import EVAL_SPLITS, schema, validate
from elmo_jax.runtime.atomic_write import exit_on_sigterm
from elmo_jax.cli import tool_flags
from elmo_jax.cli.config_flags import (
    config_origin, define_config_flag, define_print_config_flag, flags_parser, print_config,
)
from elmo_jax.evaluation.saved_models import (
    BilmFiles, bilm_files_config, check_training_overrides, evaluate_bilm_files, evaluate_checkpoint,
    evaluation_config,
)

FLAGS = flags.FLAGS
define_config_flag(
    "Optional config. With --workdir (e.g. the config trained with) only its evaluation keys (eval.batch_size, "
    "eval.max_tokens, eval.stateful, eval.unroll_steps, data.streams, data.source, data.eval_split, data.eval_files, "
    "data.segmenter, data.tfds_*) and overrides apply: the model is always built from WORKDIR/config.json, a model "
    "key (model.*, data.max_chars_per_token, data.char_vocab_*, data.vocab_*) that differs from it is an error, and "
    "so is an override that changes a training key (train.*, data.train_files, ...), which evaluation does not read. "
    "With --options it replaces configs/default.py, except for the model, which --options describes."
)
flags.DEFINE_string("workdir", None, "Training workdir holding config.json, checkpoints/ and vocab.txt.")
flags.DEFINE_string("options", None, "bilm-tf/AllenNLP options.json (instead of --workdir; needs the next three).")
flags.DEFINE_string("weights", None, "bilm-tf/AllenNLP hdf5 weight file of --options.")
flags.DEFINE_string("softmax_weights", None, "hdf5 softmax (softmax/W [V, P], softmax/b [V]) of --options.")
flags.DEFINE_string("vocab", None, "Vocabulary of --softmax_weights, one word per line: line i is softmax row i.")
flags.DEFINE_enum("split", None, EVAL_SPLITS, "Corpus split to evaluate; default data.eval_split.")
flags.DEFINE_string("eval_files", "", "Evaluate these text files (globs) instead of a corpus split.")
flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest).")
flags.DEFINE_string("output", None, "Also write the result to this JSON file.")
define_print_config_flag(
    "the config the evaluation would use (WORKDIR/config.json with --config's evaluation keys and overrides; "
    "for --options, its model over --config or the defaults)"
)
tool_flags.define_runtime_flags()


# evaluate.py's flags naming a BilmFiles field, with what each names.
BILM_FILE_FLAGS = {
    "options": "its options.json",
    "weights": "its hdf5 weights",
    "softmax_weights": "its softmax hdf5",
    "vocab": "its vocabulary, line i = softmax row i",
}


def bilm_files_from_flags(flag_values: Mapping[str, Any]) -> BilmFiles | None:
    """The bilm-tf/AllenNLP model that evaluate.py's flags name, or None when they name --workdir;
    ValueError naming the flag unless they name exactly one model: --workdir, or all of
    BILM_FILE_FLAGS with --eval_files and without --split or --step."""
    named = [flag for flag in BILM_FILE_FLAGS if flag_values.get(flag)]
    if not named:
        if not flag_values.get("workdir"):
            raise ValueError(
                "name the model to evaluate: --workdir (a training workdir) or --options, --weights, "
                "--softmax_weights and --vocab (a bilm-tf/AllenNLP model)"
            )
        return None
    if flag_values.get("workdir"):
        raise ValueError(
            f"--workdir and --{named[0]} name two models: evaluate a training workdir or a bilm-tf/AllenNLP model"
        )
    for flag, what in BILM_FILE_FLAGS.items():
        if flag not in named:
            raise ValueError(
                f"--{named[0]} needs --{flag} ({what}): a bilm-tf/AllenNLP model is read from --options, "
                "--weights, --softmax_weights and --vocab"
            )
    for flag in ("split", "step"):
        if flag_values.get(flag) is not None:
            raise ValueError(f"--{flag} is for --workdir: a bilm-tf/AllenNLP model is evaluated on --eval_files")
    if not flag_values.get("eval_files"):
        raise ValueError("--options needs --eval_files: the held-out text to evaluate the bilm-tf/AllenNLP model on")
    return BilmFiles(**{flag: flag_values[flag] for flag in BILM_FILE_FLAGS})


def evaluated_config(flag_values: flags.FlagValues) -> ml_collections.ConfigDict:
    """The config the evaluation that `flag_values` name would use (`--print_config`)."""
    files = bilm_files_from_flags(flag_values.flag_values_dict())
    if files is None:
        return evaluation_config(flag_values.workdir, flag_values.config, *config_origin(flag_values))
    return bilm_files_config(files, flag_values.config or schema.get_config())


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        if FLAGS.config is not None:
            validate(FLAGS.config)  # Before anything starts or touches the workdir.
        files = bilm_files_from_flags(FLAGS.flag_values_dict())
        if files is not None and FLAGS.config is not None:
            check_training_overrides(FLAGS.config, config_origin(FLAGS)[1])
        if FLAGS.print_config:
            print_config(evaluated_config(FLAGS))
            return
        tool_flags.configure_runtime()
        with exit_on_sigterm():  # A SIGTERM removes a half-written --output, then exits 143.
            if files is None:
                evaluate_checkpoint(
                    FLAGS.workdir, FLAGS.config, FLAGS.split, FLAGS.eval_files, FLAGS.step, FLAGS.output,
                    *config_origin(FLAGS),
                )
            else:
                evaluate_bilm_files(files, FLAGS.eval_files, FLAGS.config or schema.get_config(), FLAGS.output)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def run() -> None:
    """The `elmo-evaluate` console script."""
    app.run(main, flags_parser=flags_parser(__doc__, config_from_workdir=True))
