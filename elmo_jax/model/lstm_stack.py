"""bilm-tf's contextualizer: a stack of LSTM layers with projections, both directions in each."""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.lstm import (
    KERNEL_INITIALIZERS, TIME_LOOP_KERNELS, BiLSTMLayer, LSTMState, has_projection, sequence_input_gates,
)
from elmo_jax.model.lstm_wavefront import WavefrontLayer, wavefront_lstm
from elmo_jax.sections import ConfigError, Key, Section
from elmo_jax.sections.checks import BOOLEAN, integer, number, one_of

# model.lstm: the keys of LSTMContextualizer's own fields.
SECTION = Section("bilm-tf's LSTMs with projection (model.contextualizer='lstm'), one stack per direction.", {
    "dim": Key(4096, integer(1), "LSTM cell size; the cell projects to model.width (no projection when equal)."),
    "n_layers": Key(2, integer(1), "Stacked LSTM layers per direction."),
    "cell_clip": Key(3.0, number(0.0), "Clip the cell state to +-cell_clip (0 = no clipping).", off=0.0),
    "proj_clip": Key(3.0, number(0.0), "Clip the projected output to +-proj_clip (0 = no clipping).", off=0.0),
    "use_skip_connections": Key(True, BOOLEAN, "Residual connection around layers 2..L."),
    "initializer": Key("uniform", one_of(*KERNEL_INITIALIZERS),
                       "Kernels: 'uniform' U(-0.05, 0.05) | 'glorot_uniform' (bilm-tf: TF's default, limit "
                       "sqrt(6 / (fan_in + fan_out)) of LSTMCell's kernel and projection).", how_computed=True),
    "unroll": Key(0, integer(0), "Time steps per loop iteration (0 = automatic: 1; more multiplies the compile work).",
                  how_computed=True),
    "kernel": Key("xla", one_of(*TIME_LOOP_KERNELS),
                  "The time loop: 'xla' | 'pallas' (model/pallas_lstm.py: Triton kernels on GPU, 1.6-7x "
                  "slower than xla there (docs/performance.md)) | 'pallas_cell' (model/pallas_lstm_cell.py: "
                  "XLA's loops, a step's gates and cell update and their reverse as Triton kernels); Pallas's slow "
                  "interpreter off GPU.",
                  how_computed=True),
    "wavefront": Key(False, BOOLEAN,
                     "Run the layers as a wavefront, layer l's step t beside layer l-1's step t+1: T + L - 1 "
                     "dependent steps a direction instead of L T (model/lstm_wavefront.py; the 'xla' kernel).",
                     how_computed=True),
})


class LSTMContextualizer(Contextualizer):
    """n_layers `BiLSTMLayer`s named `lstm_{i}`, dropout before each (`token_drop` before the first);
    skip connections around layers 2..L. State: an `LSTMState` per layer. Beyond the contract it
    offers `first_layer_gates` and `contextualize_from_gates`, embedding's fast path."""

    config_name = "lstm"
    summary = "bilm-tf's biLM, model.lstm"
    section = SECTION
    bilm_tf_format = True

    n_layers: int = SECTION.default("n_layers")
    dim: int = SECTION.default("dim")
    cell_clip: float | None = SECTION.default("cell_clip")
    proj_clip: float | None = SECTION.default("proj_clip")
    use_skip_connections: bool = SECTION.default("use_skip_connections")
    initializer: str = SECTION.default("initializer")  # LSTM kernels (lstm.kernel_limits).
    unroll: int = SECTION.default("unroll")
    kernel: str = SECTION.default("kernel")  # The time loop (BiLSTMLayer.kernel).
    wavefront: bool = SECTION.default("wavefront")  # The layers skewed in one time loop (wavefront_lstm).

    @classmethod
    def check_config(cls, model: Mapping[str, Any], input_dim: int) -> None:
        """`model.init_range` draws every weight from one uniform, the LSTM's kernels included."""
        init_range, initializer = model["init_range"], model["lstm"]["initializer"]
        if init_range > 0 and initializer != "uniform":
            raise ConfigError(
                f"config key model.init_range={init_range!r} draws every weight from a uniform: "
                f"it needs model.lstm.initializer='uniform', not {initializer!r}"
            )
        if model["lstm"]["wavefront"] and model["lstm"]["kernel"] != "xla":
            raise ConfigError(
                "config key model.lstm.wavefront=True runs XLA's time loop: it needs model.lstm.kernel='xla', "
                f"not {model['lstm']['kernel']!r}"
            )

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
        if self.wavefront:
            return self._wavefront(x, mask, state, train, reset, reset_state, from_gates)
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

    def _wavefront(
        self, x: jax.Array, mask: jax.Array, state: list[LSTMState], train: bool, reset: jax.Array | None,
        reset_state: list[LSTMState] | None, from_gates: bool,
    ) -> tuple[list[jax.Array], list[LSTMState]]:
        """`_layers` as one skewed time loop (`wavefront_lstm`): the same params, dropout masks and
        numbers, layer l's input dropout drawn for its whole `[2, B, T, P]` input as the layers draw it."""
        layers = []
        for i, layer in enumerate(self.layers):
            w_input, bias, w_hidden, w_proj = layer.weights(self.input_dim if i == 0 else self.width)
            scale = None
            if i == 0 and not from_gates:
                x = sequence_input_gates(self.token_drop(x, deterministic=not train), w_input, self.dtype)
            elif i > 0 and train and self.dropout > 0:
                scale = self.drop(jnp.ones((*x.shape[:3], self.width)), deterministic=False)
            layers.append(WavefrontLayer(None if i == 0 else w_input, w_hidden, bias, w_proj, scale))
        residual = [layer.residual for layer in self.layers]

        def run(x, layers, mask, state, reset, reset_state):
            return wavefront_lstm(
                x, layers, residual, mask, state, self.cell_clip, self.proj_clip, self.dtype, self.unroll, reset,
                reset_state,
            )

        if self.remat:
            run = jax.checkpoint(run)
        outputs, final = run(x, layers, mask, list(state), reset, None if reset_state is None else list(reset_state))
        return outputs, [LSTMState(*s) for s in final]

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
