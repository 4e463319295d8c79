"""The language of config sections: keys with their checks, grouped in sections (docs/config.md).

The lowest layer that knows configs, so that each part of the model declares its own section."""

from elmo_jax.sections.checks import ConfigError
from elmo_jax.sections.section import Key, Section

__all__ = ["ConfigError", "Key", "Section"]
