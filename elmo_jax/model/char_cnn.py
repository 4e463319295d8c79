"""The character CNN token encoder with highway layers (bilm-tf).

Parameter names and `x @ W` orientation follow bilm-tf's weight file, so the weights export as they
are; initializers are bilm-tf's (or U(-r, r) with `init_range` r > 0), biases 0 (highway carry -2).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.model.conv_pool import CONV_KERNELS, conv_max_over_positions, resolve_block, resolve_fused
from elmo_jax.model.initializers import uniform_symmetric, weight_init
from elmo_jax.model.precision import matmul
from elmo_jax.model.token_encoder import TokenEncoder
from elmo_jax.sections import ConfigError, Key, Section
from elmo_jax.sections.checks import BOOLEAN, FILTERS, integer, one_of

# model.char_cnn: the keys of CharCNNEncoder's fields up to `projection`.
SECTION = Section("The character CNN of the token encoder (bilm-tf's char_cnn).", {
    "embed_dim": Key(16, integer(1), "Character embedding size."),
    "filters": Key([[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]], FILTERS,
                   "[width, channels] of each convolution."),
    "activation": Key("relu", one_of("relu", "tanh"), "The convolutions' activation."),
    "n_highway": Key(2, integer(0), "Highway layers after the convolutions."),
    "projection": Key(True, BOOLEAN,
                      "Project the highway output to model.width (bilm-tf); False: it feeds the first layer "
                      "directly, sum(channels) wide (Kim et al. 2016; no bilm-tf export)."),
})
# The activations the section allows, each jax.nn's function of that name.
ACTIVATIONS = {name: getattr(jax.nn, name) for name in SECTION.keys["activation"].check.choices}


def _normal(stddev: float) -> nn.initializers.Initializer:
    return nn.initializers.normal(stddev=stddev)


class Highway(nn.Module):
    """`t = sigmoid(x Wc + bc); x = t * relu(x Wt + bt) + (1 - t) * x`, repeated `n_layers` times."""

    n_layers: int
    dtype: jnp.dtype = jnp.float32
    init_range: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """x: [..., F] -> [..., F]."""
        dim = x.shape[-1]
        init = weight_init(self.init_range, _normal(np.sqrt(1.0 / dim)))
        for k in range(self.n_layers):
            w_carry = self.param(f"W_carry_{k}", init, (dim, dim))
            b_carry = self.param(f"b_carry_{k}", nn.initializers.constant(-2.0), (dim,))
            w_transform = self.param(f"W_transform_{k}", init, (dim, dim))
            b_transform = self.param(f"b_transform_{k}", nn.initializers.zeros, (dim,))
            gate = jax.nn.sigmoid(matmul("...i,io->...o", x, w_carry, self.dtype) + b_carry)
            transformed = jax.nn.relu(matmul("...i,io->...o", x, w_transform, self.dtype) + b_transform)
            x = gate * transformed + (1.0 - gate) * x
        return x


class CharCNNEncoder(nn.Module):
    """Char ids `[..., C]` (+1 shifted, 0 = no token) -> token embeddings `[..., output_dim]`.

    The fields up to `projection` are the keys of `model.char_cnn`. Without a projection the
    highway output, `[..., sum of channels]`, is the embedding (Kim et al. 2016).
    """

    embed_dim: int
    filters: Sequence[tuple[int, int]]  # (width, channels) of each convolution.
    activation: str
    n_highway: int
    projection: bool
    output_dim: int
    dtype: jnp.dtype = jnp.float32
    conv_block: int | None = None  # Tokens per block of the convolutions (conv_pool.conv_max_over_positions).
    init_range: float = 0.0
    conv_kernel: str = "auto"  # The convolutions' forward pass: conv_pool.resolve_fused.
    n_characters: int = N_CHARACTERS  # Rows of the char table: bilm-tf's, + a character vocabulary's (BiLM).

    @nn.compact
    def __call__(self, char_ids: jax.Array) -> jax.Array:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"model.char_cnn.activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if self.conv_kernel not in CONV_KERNELS:
            raise ValueError(f"model.conv_kernel must be one of {CONV_KERNELS}, got {self.conv_kernel!r}")
        act = ACTIVATIONS[self.activation]
        table = self.param(
            "char_embed", weight_init(self.init_range, uniform_symmetric(1.0)), (self.n_characters, self.embed_dim)
        )
        # Row 0 is "no token": fixed at zero, so it never receives a gradient.
        table = table * (jnp.arange(self.n_characters) != 0)[:, None].astype(table.dtype)
        lead_shape, n_chars = char_ids.shape[:-1], char_ids.shape[-1]
        x = jnp.take(table, char_ids.reshape(-1, n_chars), axis=0)  # [N, C, d]
        kernels, biases = [], []
        for i, (width, channels) in enumerate(self.filters):
            if self.activation == "relu":
                init = weight_init(self.init_range, uniform_symmetric(0.05))
            else:
                init = weight_init(self.init_range, _normal(np.sqrt(1.0 / (width * self.embed_dim))))
            kernels.append(self.param(f"W_cnn_{i}", init, (width, self.embed_dim, channels)))
            biases.append(self.param(f"b_cnn_{i}", nn.initializers.zeros, (channels,)))
        fused = resolve_fused(self.conv_kernel)
        pooled = conv_max_over_positions(x, kernels, self.dtype, self.conv_block, fused)  # [N, n_i] each
        pooled = [act(p + bias) for p, bias in zip(pooled, biases)]
        h = jnp.concatenate(pooled, axis=-1)  # [N, F]
        h = Highway(self.n_highway, self.dtype, self.init_range, name="highway")(h)
        n_filters = h.shape[-1]
        if not self.projection:
            return h.reshape(*lead_shape, n_filters)
        w_proj = self.param(
            "W_proj", weight_init(self.init_range, _normal(np.sqrt(1.0 / n_filters))), (n_filters, self.output_dim)
        )
        b_proj = self.param("b_proj", nn.initializers.zeros, (self.output_dim,))
        out = matmul("ni,io->no", h, w_proj, self.dtype) + b_proj
        return out.reshape(*lead_shape, self.output_dim)


class CharCNNTokens(TokenEncoder):
    """bilm-tf's token encoder: `CharCNNEncoder` over each token's character ids."""

    config_name = "char_cnn"
    summary = "bilm-tf's character CNN, model.char_cnn"
    section = SECTION
    reads_chars = True
    bilm_tf_format = True

    @classmethod
    def width(cls, char_cnn: Mapping[str, Any], width: int) -> int:
        """The channels of `char_cnn['filters']` without the projection, else P (`width`)."""
        return width if char_cnn["projection"] else sum(channels for _, channels in char_cnn["filters"])

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> None:
        """A valid convolution needs a token at least as long as its filter."""
        max_chars, filters = config["data"]["max_chars_per_token"], config["model"]["char_cnn"]["filters"]
        widest = max(width for width, _ in filters)
        if max_chars < widest:
            raise ConfigError(
                f"config key data.max_chars_per_token={max_chars!r} is out of range (allowed: an integer >= "
                f"{widest}, the widest of model.char_cnn.filters={filters!r})"
            )

    @classmethod
    def flops_per_token(cls, model: Mapping[str, Any], max_chars: int) -> dict[str, int]:
        """The convolutions over the `max_chars` positions, the highway layers, the projection to P."""
        cnn = model["char_cnn"]
        n_filters = sum(n for _, n in cnn["filters"])
        parts = {
            "char_cnn": sum(2 * w * cnn["embed_dim"] * n * (max_chars - w + 1) for w, n in cnn["filters"]),
            "highway": cnn["n_highway"] * 2 * (2 * n_filters * n_filters),
        }
        if cnn["projection"]:
            parts["token_projection"] = 2 * n_filters * model["width"]
        return parts

    @classmethod
    def module(cls, bilm: nn.Module) -> CharCNNEncoder:
        return CharCNNEncoder(
            **bilm.char_cnn, output_dim=bilm.width, dtype=bilm.dtype, conv_block=resolve_block(bilm.conv_block),
            init_range=bilm.init_range, conv_kernel=bilm.conv_kernel, n_characters=bilm.n_characters,
        )
