"""bilm-tf's contextualizer: a stack of LSTM layers with projections, both directions in each."""

from __future__ import annotations


import jax
import jax.numpy as jnp

from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.lstm import BiLSTMLayer, LSTMState, has_projection


class LSTMContextualizer(Contextualizer):
    """n_layers `BiLSTMLayer`s named `lstm_{i}`, dropout before each (`token_drop` before the first);
    skip connections around layers 2..L. State: an `LSTMState` per layer. Beyond the contract it
    offers `first_layer_gates` and `contextualize_from_gates`, embedding's fast path."""

    dim: int = 4096
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    initializer: str = "uniform"  # LSTM kernels: 'uniform' | 'glorot_uniform' (lstm.kernel_limits).
    unroll: int = 0
    kernel: str = "xla"  # The time loop: 'xla' | 'pallas' (BiLSTMLayer.kernel).

    def setup(self) -> None:
        super().setup()
        self.layers = [
            BiLSTMLayer(
                self.dim, self.width, self.cell_clip, self.proj_clip,
                residual=self.use_skip_connections and i > 0, remat=self.remat, dtype=self.dtype,
                unroll=self.unroll, initializer=self.initializer, init_range=self.init_range,
                kernel=self.kernel, name=f"lstm_{i}",
            )
            for i in range(self.n_layers)
        ]

    def initial_state(self, batch_size: int) -> list[LSTMState]:
        return [
            LSTMState(jnp.zeros((2, batch_size, self.dim)), jnp.zeros((2, batch_size, self.width)))
            for _ in range(self.n_layers)
        ]

    def __call__(
        self, x: jax.Array, mask: jax.Array, state: list[LSTMState], train: bool = False
    ) -> tuple[list[jax.Array], list[LSTMState]]:
        return self._layers(x, mask, state, train)

    def _layers(
        self, x: jax.Array, mask: jax.Array, state: list[LSTMState], train: bool, reset: jax.Array | None = None,
        reset_state: list[LSTMState] | None = None, from_gates: bool = False,
    ) -> tuple[list[jax.Array], list[LSTMState]]:
        """The layers over x `[2, B, T, .]` (with `from_gates` the first layer's x W_input), dropout
        before each -> (their outputs `[2, B, T, P]`, final states)."""
        outputs, new_state = [], []
        for i, layer in enumerate(self.layers):
            layer_reset_state = None if reset_state is None else reset_state[i]
            if from_gates and i == 0:
                x, final = layer.from_input_gates(x, mask, state[0], reset, layer_reset_state)
            else:
                drop = self.token_drop if i == 0 else self.drop
                x, final = layer(drop(x, deterministic=not train), mask, state[i], reset, layer_reset_state)
            outputs.append(x)
            new_state.append(final)
        return outputs, new_state

    def first_layer_gates(self, x: jax.Array) -> jax.Array:
        """The first layer's x W_input for both directions: x `[N, F]` -> `[2, N, 4 dim]`."""
        return self.layers[0].input_gates(x)

    def contextualize_from_gates(
        self,
        first_gates: jax.Array,
        mask: jax.Array,
        state: list[LSTMState],
        reset: jax.Array | None = None,
        reset_state: list[LSTMState] | None = None,
    ) -> tuple[list[jax.Array], list[LSTMState]]:
        """Inference: the layers from the first layer's x W_input `[2, B, T, 4 dim]` -> (L outputs
        `[2, B, T, P]`, final states). reset `[2, B, T]`: each layer's state becomes its
        `reset_state` (`[2, 1, .]`, default zeros) before the step where true (packed sentences)."""
        return self._layers(first_gates, mask, state, False, reset, reset_state, from_gates=True)

    def flops_per_token(self) -> int:
        """Per layer: its input and its recurrent h (P) by the 4 gates' kernel, plus the projection."""
        d, p = self.dim, self.width
        projection = 2 * d * p if has_projection(d, p) else 0
        layer_inputs = (self.n_layers - 1) * p + self.input_dim
        return 2 * (layer_inputs + self.n_layers * p) * 4 * d + self.n_layers * projection
