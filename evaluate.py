"""Full-softmax perplexity of a trained biLM checkpoint on held-out text.

  python evaluate.py --workdir=runs/demo [--split=test] [--eval_files=GLOB] [--step=N]
  python evaluate.py --config=configs/demo.py --workdir=runs/demo [--config.eval.batch_size=16]

The model is built from WORKDIR/config.json, the config it was trained with. `--config` and its
overrides may change the evaluation (eval.*, data.source, data.eval_split, data.eval_files,
data.tfds_*); a model key (model.*, data.max_chars_per_token, data.vocab_*) that differs from
the trained model's is an error naming it. Prints a table and writes WORKDIR/eval_<split>_<step>.json.
"""

import sys

from absl import app, flags

from elmo_jax import host_memory, quiet_logs
from elmo_jax.config_flags import define_config_flag
from elmo_jax.evaluation_job import evaluate_checkpoint

FLAGS = flags.FLAGS
define_config_flag(
    "Optional config (e.g. the one trained with) whose evaluation keys (eval.*, data.source, data.eval_split, "
    "data.eval_files, data.tfds_*) and overrides apply; the model is always built from WORKDIR/config.json, and "
    "a model key (model.*, data.max_chars_per_token, data.vocab_*) that differs from it is an error."
)
flags.DEFINE_string("workdir", None, "Training workdir holding config.json, checkpoints/ and vocab.txt.")
flags.DEFINE_string("split", None, "Corpus split to evaluate ('valid' | 'test'); default data.eval_split.")
flags.DEFINE_string("eval_files", "", "Evaluate these text files (globs) instead of a corpus split.")
flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest).")
flags.DEFINE_bool(quiet_logs.FLAG_NAME, False, quiet_logs.FLAG_HELP)
flags.mark_flags_as_required(["workdir"])


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    host_memory.reuse_freed_memory()  # Before JAX starts its CPU backend.
    quiet_logs.configure(FLAGS.log_library)
    try:
        evaluate_checkpoint(FLAGS.workdir, FLAGS.config, FLAGS.split, FLAGS.eval_files, FLAGS.step)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
