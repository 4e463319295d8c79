"""ELMoForManyLangs' token encoder (HIT-SCIR's ConvTokenEmbedder): a word embedding and a char CNN
side by side, projected together, `[word embedding; highway(char CNN)] W_proj + b_proj`.

It reads biLMs converted from ELMoForManyLangs model directories (interop/manylangs_params.py,
`pretrained.bilm_from_manylangs`); a config trains one only continuing such a model (`init.manylangs`
sets `model.token_encoder='manylangs'` and its section `model.manylangs`, training/init_from.py).
A token's inputs are one row of ids,
`[word id + 1, char id + 1, ...]` (`[..., 1 + C]`): its word.dic id +1 shifted (0 without a word
embedding), then its char.dic ids +1 shifted (row 0 of the char table is "no token", as
`CharCNNEncoder`'s). Every token's row thus holds an id > 0 and all zeros is no token, as for char
ids (how `Elmo` and the task models find a sentence's end, even for a model without a char CNN whose
<oov> is word 0), and the biLM's char-id path (`BiLM.embed_tokens`, the embedder's token cache)
carries both. Its char CNN is
`CharCNNEncoder` without its projection: ELMoForManyLangs' highway `g x + (1 - g) relu(A x + a)`,
g = sigmoid(B x + b), is bilm-tf's with W_carry = -B, b_carry = -b (the conversion's).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.model.char_cnn import CharCNNEncoder
from elmo_jax.model.conv_pool import resolve_block
from elmo_jax.model.initializers import uniform_symmetric, weight_init
from elmo_jax.model.precision import matmul
from elmo_jax.model.token_encoder import TokenEncoder
from elmo_jax.sections import ConfigError, Key, Section
from elmo_jax.sections.checks import BOOLEAN, integer

SECTION = Section("ELMoForManyLangs' token encoder: set by init.manylangs from its model directory.", {
    "word_dim": Key(0, integer(0), "Its word embedding's width (0 = none)."),
    "n_words": Key(1, integer(1), "Its word embedding's rows: word.dic's entries."),
    "chars": Key(True, BOOLEAN, "Whether it has a char CNN (model.char_cnn)."),
    "n_characters": Key(1, integer(1), "Its char table's rows: char.dic's entries + the \"no token\" row 0."),
})


class ManyLangsEncoder(nn.Module):
    """Ids `[..., 1 + C]` (+1 shifted word id and char ids) -> token embeddings `[..., output_dim]`.

    `word_dim` 0: no word embedding; `chars` False: no char CNN (`char_cnn` unread); at least one.
    `char_cnn`: `CharCNNEncoder`'s fields up to `projection` (its projection is this encoder's)."""

    n_words: int
    word_dim: int
    chars: bool
    char_cnn: Mapping[str, Any]
    n_characters: int  # Rows of the char table: char.dic's entries + the "no token" row 0.
    output_dim: int
    dtype: jnp.dtype = jnp.float32
    conv_block: int | None = None
    conv_kernel: str = "auto"
    init_range: float = 0.0

    @nn.compact
    def __call__(self, ids: jax.Array) -> jax.Array:
        parts = []
        if self.word_dim > 0:
            table = self.param("word_embed", weight_init(self.init_range, uniform_symmetric(1.0)),
                               (self.n_words, self.word_dim))
            # Word id + 1; a "no token" row (0) reads word 0, its output masked by the caller.
            parts.append(jnp.take(table, jnp.maximum(ids[..., 0] - 1, 0), axis=0))
        if self.chars:
            cnn = {**self.char_cnn, "projection": False}
            parts.append(CharCNNEncoder(
                **cnn, output_dim=self.output_dim, dtype=self.dtype, conv_block=self.conv_block,
                init_range=self.init_range, conv_kernel=self.conv_kernel, n_characters=self.n_characters,
                name="char_cnn",
            )(ids[..., 1:]))
        x = jnp.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
        w_proj = self.param("W_proj", weight_init(self.init_range, nn.initializers.normal(np.sqrt(1.0 / x.shape[-1]))),
                            (x.shape[-1], self.output_dim))
        b_proj = self.param("b_proj", nn.initializers.zeros, (self.output_dim,))
        return matmul("...i,io->...o", x, w_proj, self.dtype) + b_proj


class ManyLangsTokens(TokenEncoder):
    """ELMoForManyLangs' token encoder, `ManyLangsEncoder`; its fields beyond `char_cnn` are the
    biLM's `token_encoder_fields` (n_words, word_dim, chars, n_characters)."""

    config_name = "manylangs"
    summary = "ELMoForManyLangs' word embedding + char CNN, set by init.manylangs"
    section = SECTION
    reads_chars = True  # Its id rows travel as char ids: `[word id + 1, char ids + 1...]`.
    bilm_tf_format = False

    @classmethod
    def max_chars(cls, max_chars_per_token: int) -> int | None:
        """The ids per token: the word id and `max_chars_per_token` char ids."""
        return 1 + max_chars_per_token

    @classmethod
    def fields(cls, model: Mapping[str, Any]) -> dict[str, Any]:
        """`ManyLangsEncoder`'s fields beyond `char_cnn`: the section `model.manylangs`."""
        return SECTION.options(model["manylangs"])

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> None:
        if not config["init"]["manylangs"]:
            raise ConfigError(
                "config key model.token_encoder='manylangs' is ELMoForManyLangs' token encoder: only "
                "init.manylangs (its model directory) sets it"
            )

    @classmethod
    def flops_per_token(cls, model: Mapping[str, Any], max_chars: int) -> dict[str, int]:
        raise NotImplementedError("ELMoForManyLangs' token encoder is not configured: no FLOPs by config")

    @classmethod
    def module(cls, bilm: nn.Module) -> ManyLangsEncoder:
        return ManyLangsEncoder(
            **bilm.token_encoder_fields, char_cnn=bilm.char_cnn, output_dim=bilm.width, dtype=bilm.dtype,
            conv_block=resolve_block(bilm.conv_block), conv_kernel=bilm.conv_kernel, init_range=bilm.init_range,
        )
