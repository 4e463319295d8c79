"""`python -m elmo_jax.neighbors`: the `elmo-neighbors` command (elmo_jax/cli/neighbors.py)."""

import sys

from elmo_jax.cli.neighbors import main

if __name__ == "__main__":
    sys.exit(main())
