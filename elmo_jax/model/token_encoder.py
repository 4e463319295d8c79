"""The token encoder interface: what the biLM and its readers ask of the part that turns each token
into its embedding, the first layer (layer 0) of the biLM.

An encoder reads either a token's character ids (`[..., C]`, C = `data.max_chars_per_token`) or its
id in the run's vocabulary (`[...]`); it says which, how wide its embeddings are, what it costs
and whether bilm-tf's files can hold it, declares its config section (`model.<name>`, if it has
one) and the checks it needs, and builds its module from the biLM's fields. Readers ask these
instead of comparing `model.token_encoder` with names (model/token_encoder_registry.py).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import flax.linen as nn

from elmo_jax.sections import Section


class TokenEncoder:
    """A token encoder, declared by class attributes and class methods (it holds no state)."""

    config_name: ClassVar[str]  # Its value of `model.token_encoder`, and its section's name under `model`.
    summary: ClassVar[str]  # What it is, in a few words: its entry in `model.token_encoder`'s meaning.
    section: ClassVar[Section | None] = None  # Its config section `model.<config_name>`, if it has keys.
    reads_chars: ClassVar[bool]  # Char ids `[..., C]`; else word ids `[...]` by the run's vocabulary.
    bilm_tf_format: ClassVar[bool]  # bilm-tf's options.json and hdf5 weights can hold it.

    @classmethod
    def max_chars(cls, max_chars_per_token: int) -> int | None:
        """The characters per token it reads (`data.max_chars_per_token`), None when it reads words."""
        return max_chars_per_token if cls.reads_chars else None

    @classmethod
    def width(cls, char_cnn: Mapping[str, Any], width: int) -> int:
        """F, its embeddings' width, given `model.char_cnn` and `model.width` (P): P by default."""
        return width

    @classmethod
    def fields(cls, model: Mapping[str, Any]) -> dict[str, Any]:
        """The biLM's `token_encoder_fields` from `config.model` (an imported encoder's own); none by default."""
        return {}

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> None:
        """ConfigError for values of the (complete) config that it cannot read; none by default."""

    @classmethod
    def flops_per_token(cls, model: Mapping[str, Any], max_chars: int) -> dict[str, int]:
        """Forward FLOPs for one token, by component (a multiply-add is 2)."""
        raise NotImplementedError

    @classmethod
    def module(cls, bilm: nn.Module) -> nn.Module:
        """Its Flax module for the BiLM `bilm`, from its fields (token inputs -> embeddings `[..., F]`);
        the biLM names it `encoder`."""
        raise NotImplementedError
