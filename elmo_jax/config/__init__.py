"""The config: every key declared once (schema.py, with the model's parts' sections), the
validation of a config where it enters (validation.py), recipes, overrides and migration."""

from elmo_jax.config.schema import EVAL_SPLITS
from elmo_jax.config.validation import check_negative_samples, validate, warn_unread_overrides
from elmo_jax.sections import ConfigError

__all__ = ["EVAL_SPLITS", "ConfigError", "check_negative_samples", "validate", "warn_unread_overrides"]
