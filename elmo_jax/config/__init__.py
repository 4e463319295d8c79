"""The config: every key declared once (schema.py), its checks (checks.py) and the validation of a
config where it enters (validation.py)."""

from elmo_jax.config.checks import ConfigError
from elmo_jax.config.schema import EVAL_SPLITS, MIN_VOCAB_SIZE
from elmo_jax.config.validation import check_negative_samples, validate

__all__ = ["EVAL_SPLITS", "MIN_VOCAB_SIZE", "ConfigError", "check_negative_samples", "validate"]
