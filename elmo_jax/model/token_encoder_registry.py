"""The registry of token encoders: `model.token_encoder`'s values, each the class that declares it
(model/token_encoder.py). config/schema.py reads it for the allowed values and the sections.
`IMPORTED_ENCODERS`: those of biLMs converted from other projects' files, which the biLM builds and a
config names only continuing such a model (ELMoForManyLangs', model/manylangs_encoder.py: init.manylangs)."""

from __future__ import annotations

from elmo_jax.model.char_cnn import CharCNNTokens
from elmo_jax.model.manylangs_encoder import ManyLangsTokens
from elmo_jax.model.token_encoder import TokenEncoder
from elmo_jax.model.word_encoder import WordTokens
from elmo_jax.sections import ConfigError

TOKEN_ENCODERS: dict[str, type[TokenEncoder]] = {cls.config_name: cls for cls in (CharCNNTokens, WordTokens)}
IMPORTED_ENCODERS: dict[str, type[TokenEncoder]] = {cls.config_name: cls for cls in (ManyLangsTokens,)}


def token_encoder_class(name: str) -> type[TokenEncoder]:
    """The token encoder registered as `name` (an imported one too); ConfigError naming the key and the
    config's names if none is."""
    if name in IMPORTED_ENCODERS:
        return IMPORTED_ENCODERS[name]
    if name not in TOKEN_ENCODERS:
        allowed = ", ".join(repr(n) for n in TOKEN_ENCODERS)
        raise ConfigError(f"config key model.token_encoder={name!r} is not one of {allowed}")
    return TOKEN_ENCODERS[name]
