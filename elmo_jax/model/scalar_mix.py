"""Task-specific weighting of the biLM layers (Peters et al. 2018, eq. 1): ELMo = gamma * sum_k softmax(s)_k h_k.

With `do_layer_norm`, each layer is first normalised by the mean and variance of all its unmasked
elements (as bilm-tf's `weight_layers` and AllenNLP's `ScalarMix`; no learned scale or offset).
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

LAYER_NORM_EPS = 1e-12  # bilm-tf / AllenNLP.


class ScalarMix(nn.Module):
    """AllenNLP's `ScalarMix`: `mixture_size` layers mixed by softmax-normalised scalar weights, times gamma.

    `trainable=True`: params `scalar_parameters` `[mixture_size]` (initially
    `initial_scalar_parameters`, default zeros: an equal average) and `gamma` `[]` (initially 1).
    `trainable=False`: no params; the weights stay `initial_scalar_parameters` and gamma 1.
    """

    mixture_size: int
    do_layer_norm: bool = False
    initial_scalar_parameters: Sequence[float] | None = None
    trainable: bool = True

    def __post_init__(self) -> None:
        initial = self.initial_scalar_parameters
        if initial is not None and len(initial) != self.mixture_size:
            raise ValueError(
                f"initial_scalar_parameters has {len(initial)} values, expected mixture_size={self.mixture_size}"
            )
        super().__post_init__()

    @nn.compact
    def __call__(self, tensors: jax.Array | Sequence[jax.Array], mask: jax.Array | None = None) -> jax.Array:
        """tensors: a list of `mixture_size` arrays `[..., dim]` (AllenNLP's call) or one array
        `[mixture_size, ..., dim]` (e.g. one output of `elmo_jax.inference.embedder`,
        `[L + 1, n_tokens, 2P]`); mask: `[...]` (nonzero = real token), used only by the layer norm
        (default: every position). Returns `[..., dim]`."""
        layers = jnp.stack(tensors) if isinstance(tensors, (list, tuple)) else jnp.asarray(tensors)
        if layers.shape[0] != self.mixture_size:
            raise ValueError(f"ScalarMix got {layers.shape[0]} layers, expected mixture_size={self.mixture_size}")
        scalars, gamma = self._weights()
        if self.do_layer_norm:
            layers = self._layer_norm(layers, mask)
        weights = jax.nn.softmax(scalars).reshape((-1,) + (1,) * (layers.ndim - 1))
        return gamma * jnp.sum(weights * layers, axis=0)

    def _weights(self) -> tuple[jax.Array, jax.Array]:
        """(scalar parameters `[mixture_size]`, gamma `[]`): params when trainable, else constants."""
        initial = self.initial_scalar_parameters
        initial = jnp.zeros(self.mixture_size) if initial is None else jnp.asarray(initial, jnp.float32)
        if not self.trainable:
            return initial, jnp.ones(())
        scalars = self.param("scalar_parameters", lambda *_: initial)
        return scalars, self.param("gamma", nn.initializers.ones, ())

    @staticmethod
    def _layer_norm(layers: jax.Array, mask: jax.Array | None) -> jax.Array:
        """Per layer k: (h_k - mean) / sqrt(var + eps) with statistics over unmasked elements. A mask
        with none (an `Elmo` batch without tokens) counts one element, not 0: mean and variance 0
        instead of 0 / 0 = NaN, which multiplying by the mask would not remove."""
        if mask is None:
            mask = jnp.ones(layers.shape[1:-1])
        if mask.shape != layers.shape[1:-1]:
            raise ValueError(f"mask shape {mask.shape} does not match the layers' {layers.shape[1:-1]}")
        m = mask.astype(layers.dtype)[None, ..., None]
        axes = tuple(range(1, layers.ndim))
        count = jnp.maximum(jnp.sum(mask.astype(layers.dtype)) * layers.shape[-1], 1)
        mean = jnp.sum(layers * m, axis=axes, keepdims=True) / count
        variance = jnp.sum(((layers - mean) * m) ** 2, axis=axes, keepdims=True) / count
        return (layers - mean) / jnp.sqrt(variance + LAYER_NORM_EPS)
