"""Pretrain an ELMo biLM: `python train.py` or `elmo-train`.

  python train.py --config=configs/demo.py --workdir=runs/demo [--config.model.lstm.dim=1024]   # in the repository
  elmo-train --config=demo --workdir=runs/demo     # a shipped recipe by name, from any directory
  elmo-train --config=demo --config.model.lstm.dim=1024 --print_config   # the config it would train with

Rerunning the same command resumes from the latest checkpoint in WORKDIR. Exit status: 0 when
training and the final evaluation are done; 143 after SIGTERM (a checkpoint was saved: rerun to
resume); 1 with a one-line `error: ...` on stderr for bad input, an unusable workdir or
checkpoint, a workdir another run is training in, or a non-finite loss. Library log lines (orbax,
jax) show only with --log_library.
"""

import sys

from absl import app, flags

from elmo_jax.cli import tool_flags
from elmo_jax.cli.config_flags import (
    CONFIG_HELP, config_origin, define_config_flag, define_print_config_flag, flags_parser, print_config,
)
from elmo_jax.config import validate, warn_unread_overrides
from elmo_jax.training import preemption
from elmo_jax.training.loop import NonFiniteLossError, train_and_evaluate
from elmo_jax.runtime.data_parallel import initialize_distributed

FLAGS = flags.FLAGS
define_config_flag(CONFIG_HELP)
flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics and evaluation results.")
define_print_config_flag("the config of the run (the recipe with every --config.KEY override, validated)")
tool_flags.define_runtime_flags()
flags.mark_flag_as_required("config")
flags.register_multi_flags_validator(
    ["workdir", "print_config"], lambda values: values["workdir"] is not None or values["print_config"],
    message="--workdir is required (but with --print_config)",
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        validate(FLAGS.config)  # As train_and_evaluate does, first.
        warn_unread_overrides(FLAGS.config, config_origin(FLAGS)[1])
        if FLAGS.print_config:
            print_config(FLAGS.config)
            if FLAGS.config.train.num_steps > 0:  # Both keys print; say which one ends the run.
                print(f"note: train.num_steps={FLAGS.config.train.num_steps} ends the run; train.num_epochs="
                      f"{FLAGS.config.train.num_epochs} is used only when num_steps is 0", file=sys.stderr)
            return
        tool_flags.configure_runtime()
        initialize_distributed(FLAGS.config.distributed)
        train_and_evaluate(FLAGS.config, FLAGS.workdir)
    except preemption.TrainingPreempted as e:
        print(e, file=sys.stderr)
        sys.exit(preemption.EXIT_CODE)
    except (ValueError, RuntimeError, OSError, NonFiniteLossError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def run() -> None:
    """The `elmo-train` console script."""
    app.run(main, flags_parser=flags_parser(__doc__))
