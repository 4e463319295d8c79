"""Pretrain an ELMo biLM (the `elmo-train` command; flags and exit status: elmo_jax/cli/train.py).

  python train.py --config=configs/demo.py --workdir=runs/demo [--config.model.lstm.dim=1024]

Rerunning the same command resumes from the latest checkpoint in WORKDIR.
"""

from elmo_jax.cli.train import run

if __name__ == "__main__":
    run()
