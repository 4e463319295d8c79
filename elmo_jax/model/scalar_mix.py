"""Task-specific weighting of the biLM layers (Peters et al. 2018, eq. 1): ELMo = gamma * sum_k softmax(s)_k h_k.

With `do_layer_norm`, each layer is first normalised by the mean and variance of all its unmasked
elements (as bilm-tf's `weight_layers` and AllenNLP's `ScalarMix`; no learned scale or offset).
"""

from __future__ import annotations

import functools
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

LAYER_NORM_EPS = 1e-12  # bilm-tf / AllenNLP.


class ScalarMix(nn.Module):
    """AllenNLP's `ScalarMix`: `mixture_size` layers mixed by softmax-normalised scalar weights, times
    gamma. Trainable: params `scalar_parameters` (from `initial_scalar_parameters`, default zeros)
    and `gamma` (from 1); else no params."""

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
        """tensors: `mixture_size` arrays `[..., dim]` or one `[mixture_size, ..., dim]`; mask `[...]`
        (nonzero = real token; only for the layer norm, default all) -> `[..., dim]`."""
        layers = jnp.stack(tensors) if isinstance(tensors, (list, tuple)) else jnp.asarray(tensors)
        if layers.shape[0] != self.mixture_size:
            raise ValueError(f"ScalarMix got {layers.shape[0]} layers, expected mixture_size={self.mixture_size}")
        if self.do_layer_norm and mask is not None and mask.shape != layers.shape[1:-1]:
            raise ValueError(f"mask shape {mask.shape} does not match the layers' {layers.shape[1:-1]}")
        scalars, gamma = self._weights()
        return mix(layers, scalars, gamma, mask if self.do_layer_norm else None, self.do_layer_norm)

    def _weights(self) -> tuple[jax.Array, jax.Array]:
        """(scalar parameters `[mixture_size]`, gamma `[]`), as NumPy when fixed (no computation to
        compile when not under a trace)."""
        initial = self.initial_scalar_parameters
        initial = np.zeros(self.mixture_size, np.float32) if initial is None else np.asarray(initial, np.float32)
        if not self.trainable:
            return initial, np.ones((), np.float32)
        scalars = self.param("scalar_parameters", lambda *_: jax.device_put(initial))
        return scalars, self.param("gamma", lambda *_: jax.device_put(np.ones((), np.float32)))


@functools.partial(jax.jit, static_argnums=4)
def mix(
    layers: jax.Array, scalars: jax.Array, gamma: jax.Array, mask: jax.Array | None, do_layer_norm: bool
) -> jax.Array:
    """`ScalarMix`'s result of layers `[mixture_size, ..., dim]` (mask `[...]` for the layer norm;
    None: all), its weights before the softmax `[mixture_size]` and gamma `[]` -> `[..., dim]`.
    Compiled: called op by op (an `Elmo` applied without `jit`) each op would compile alone."""
    if do_layer_norm:
        layers = _layer_norm(layers, mask)
    weights = jax.nn.softmax(scalars).reshape((-1,) + (1,) * (layers.ndim - 1))
    return gamma * jnp.sum(weights * layers, axis=0)


def _layer_norm(layers: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Per layer: (h - mean) / sqrt(var + eps) over unmasked elements; an empty mask counts one
    element, so mean and variance are 0 rather than NaN."""
    if mask is None:
        mask = jnp.ones(layers.shape[1:-1])
    m = mask.astype(layers.dtype)[None, ..., None]
    axes = tuple(range(1, layers.ndim))
    count = jnp.maximum(jnp.sum(mask.astype(layers.dtype)) * layers.shape[-1], 1)
    mean = jnp.sum(layers * m, axis=axes, keepdims=True) / count
    variance = jnp.sum(((layers - mean) * m) ** 2, axis=axes, keepdims=True) / count
    return (layers - mean) / jnp.sqrt(variance + LAYER_NORM_EPS)
