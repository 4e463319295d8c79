"""`python -m elmo_jax.task`: the `elmo-task` command (elmo_jax/cli/task.py)."""

from elmo_jax.cli.task import run

if __name__ == "__main__":
    run()
