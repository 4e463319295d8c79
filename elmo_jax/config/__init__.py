"""The config schema: the allowed values of every key and their validation (elmo_jax/config/validation.py)."""

from elmo_jax.config.validation import MIN_VOCAB_SIZE, SCHEMA, ConfigError, check_negative_samples, validate

__all__ = ["MIN_VOCAB_SIZE", "SCHEMA", "ConfigError", "check_negative_samples", "validate"]
