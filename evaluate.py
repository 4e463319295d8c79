"""Full-softmax perplexity of a trained biLM checkpoint on held-out text.

  python evaluate.py --config=configs/demo.py --workdir=runs/demo [--split=test]
      [--eval_files=GLOB] [--step=N]

Prints a table and writes WORKDIR/eval_<split>_<step>.json.
"""

import sys

from absl import app, flags, logging

from elmo_jax import host_memory
from elmo_jax.config_flags import define_config_flag
from elmo_jax.evaluation_job import evaluate_checkpoint

FLAGS = flags.FLAGS
define_config_flag("Path to the config the model was trained with.")
flags.DEFINE_string("workdir", None, "Training workdir holding checkpoints/ and vocab.txt.")
flags.DEFINE_string("split", None, "Corpus split to evaluate ('valid' | 'test'); default data.eval_split.")
flags.DEFINE_string("eval_files", "", "Evaluate these text files (globs) instead of a corpus split.")
flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    host_memory.reuse_freed_memory()  # Before JAX starts its CPU backend.
    logging.set_verbosity(logging.WARNING)
    try:
        evaluate_checkpoint(FLAGS.config, FLAGS.workdir, FLAGS.split, FLAGS.eval_files, FLAGS.step)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
