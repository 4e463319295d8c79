"""`python -m elmo_jax.probe`: the `elmo-probe` command (elmo_jax/cli/probe.py)."""

import sys

from elmo_jax.cli.probe import main

if __name__ == "__main__":
    sys.exit(main())
