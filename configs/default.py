"""Every configuration key with its default: the schema (elmo_jax/config/schema.py) as a recipe.

  python train.py --config=configs/default.py --workdir=runs/default
"""

from elmo_jax.config.schema import get_config

__all__ = ["get_config"]
