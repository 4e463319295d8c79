"""The config a training workdir was trained with (WORKDIR/config.json), as a recipe, so that a
run's further commands start from it and override only what they change:

  python evaluate.py --workdir=runs/x --config=workdir:runs/x --config.eval.stateful=False
  python train.py --workdir=runs/x --config=workdir:runs/x      # resumes with its own config

evaluate.py adds `--config=workdir:WORKDIR` itself when given `--config.KEY` overrides without a
`--config`.
"""

from elmo_jax.workdir.saved_config import saved_config


def get_config(workdir: str):
    return saved_config(workdir)
