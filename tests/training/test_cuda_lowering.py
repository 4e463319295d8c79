"""The train step a GPU compiles, lowered for CUDA on this CPU-only machine: its size is bounded,
so that a change multiplying the GPU's compile work fails here rather than on a GPU.

On an H200 the elmo_original bfloat16 step compiled in 88 s with its LSTM windows unrolled and in
51 s with one step per loop iteration (docs/performance.md), from 3.1 times the operations. The
bound leaves room for ordinary changes (a quarter more), not for unrolled windows.
"""

from __future__ import annotations

import collections
import functools
import re
import sys

import jax
import jax.numpy as jnp
import pytest

from elmo_jax.config.recipes import load_config
from elmo_jax.model import platform
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel
from elmo_jax.training import optim, parallel
from elmo_jax.training.state import create_train_state
from elmo_jax.training.step import make_train_step

VOCAB_SIZE = 793471  # The 1B Word Benchmark's, as the released models.
# StableHLO operations of the elmo_original step, calls inlined: 5,971 with 1 LSTM step per loop
# iteration (the default), 6,641 with 2, 18,677 with the windows unrolled (jax 0.10.2); 5,901 with
# the char convolutions' forward pass as Pallas kernels (model.conv_kernel 'auto' on GPU, jax 0.11.2).
MAX_OPS = 7500


def cuda_train_step_text(overrides: dict) -> str:
    """The StableHLO text of `elmo_original`'s train step (bfloat16, batch 128) lowered for CUDA,
    with the model's platform choices made for the GPU; the state is abstract (nothing allocated)."""
    config = load_config("elmo_original")
    config.model.dtype = "bfloat16"
    config.train.batch_size = 128
    for key, value in overrides.items():
        config.update_from_flattened_dict({key: value})
    mesh = data_parallel.make_mesh()
    with platform.lowering_for("cuda"):
        model = bilm_from_config(config.model, VOCAB_SIZE)
        tx, _ = optim.make_optimizer(config.train, 1000)
        state = jax.eval_shape(
            lambda: create_train_state(model, tx, 0, config.train.batch_size, config.data.max_chars_per_token)
        )
        step = parallel.parallel_train_step(make_train_step(model, config), mesh, state)
        batch = _abstract_batch(config.train.batch_size, config.train.unroll_steps, config.data.max_chars_per_token)
        return step.trace(state, batch).lower(lowering_platforms=("cuda",)).as_text()


def _abstract_batch(batch: int, steps: int, chars: int) -> dict:
    """A train batch's shapes: both directions' token ids, targets and mask `[2, batch, steps]`,
    char ids `[2, batch, steps, chars]`."""
    ids = jax.ShapeDtypeStruct((2, batch, steps), jnp.int32)
    return {"token_ids": ids, "targets": ids, "char_ids": jax.ShapeDtypeStruct((2, batch, steps, chars), jnp.int32),
            "mask": jax.ShapeDtypeStruct((2, batch, steps), jnp.bool_)}


def op_counts(text: str) -> collections.Counter:
    """StableHLO operations by name in a lowered module's text, each function's counted once per
    call of it, as XLA inlines them (an unrolled loop is one function called once per step)."""
    functions = re.split(r"\n\s*func\.func (?:public |private )?@", text)[1:]
    bodies = {body.split("(", 1)[0]: body for body in functions}

    @functools.cache
    def inlined(name: str) -> collections.Counter:
        counts = collections.Counter(re.findall(r"= (stablehlo\.[a-z_]+)", bodies[name]))
        for callee in re.findall(r"(?<!custom_)call @([\w.$-]+)", bodies[name]):  # Not the kernels' calls.
            counts.update(inlined(callee))
        return counts

    return inlined("main")


@pytest.fixture(scope="module")
def default_text() -> str:
    return cuda_train_step_text({})


@pytest.fixture(scope="module")
def default_step(default_text) -> collections.Counter:
    return op_counts(default_text)


def test_cuda_step_is_within_its_size_bound(default_step):
    assert sum(default_step.values()) <= MAX_OPS, sum(default_step.values())


def test_cuda_step_takes_the_gpu_paths(default_text, default_step):
    """The char convolutions' forward pass as Triton kernels, one per filter width (model.conv_kernel
    'auto'), their reverse pass as XLA's whole-batch convolutions (not the CPU's blocked matmuls),
    and loops over time."""
    n_widths = len(load_config("elmo_original").model.char_cnn.filters)
    assert default_text.count("__gpu$xla.gpu.triton") == n_widths
    assert default_step["stablehlo.convolution"] > 0
    assert default_step["stablehlo.while"] > 0


def test_an_unrolled_window_exceeds_the_bound():
    """The guard catches what it is for: the windows unrolled (20 loop bodies per pass)."""
    unrolled = op_counts(cuda_train_step_text({"model.lstm.unroll": 20}))
    assert sum(unrolled.values()) > MAX_OPS, sum(unrolled.values())


def test_without_the_triton_backend_the_gpu_step_lowers_with_xla_convolutions(monkeypatch):
    """A JAX without Pallas's Triton backend: model.conv_kernel 'auto' still lowers the GPU step,
    its convolutions XLA's, no Triton call."""
    monkeypatch.setitem(sys.modules, "jax.experimental.pallas.triton", None)
    text = cuda_train_step_text({})
    assert "__gpu$xla.gpu.triton" not in text and op_counts(text)["stablehlo.convolution"] > 0


def test_the_wavefront_step_merges_the_layers_loops_within_the_bound(default_step):
    """model.lstm.wavefront: one time loop for both LSTM layers forward and one in reverse, where the
    layered stack has one per layer each way; the step within the same bound."""
    wavefront = op_counts(cuda_train_step_text({"model.lstm.wavefront": True}))
    n_layers = load_config("elmo_original").model.lstm.n_layers
    assert wavefront["stablehlo.while"] == default_step["stablehlo.while"] - 2 * (n_layers - 1)
    assert sum(wavefront.values()) <= MAX_OPS, sum(wavefront.values())


def test_the_fused_cell_step_runs_one_kernel_per_layer_in_the_forward_loops(default_text, default_step):
    """model.lstm.kernel='pallas_cell': each layer's forward time loop calls one Triton kernel per
    step for its gates and cell update, and its reverse loop one for dm and the cell's reverse
    (beside the convolutions' kernels), each in place of a dot and the cell's operations; the loops
    stay as many and the step within the same bound."""
    overrides = {"model.lstm.kernel": "pallas_cell"}
    text = cuda_train_step_text(overrides)
    fused = op_counts(text)
    n_layers = load_config("elmo_original").model.lstm.n_layers
    assert text.count("__gpu$xla.gpu.triton") == default_text.count("__gpu$xla.gpu.triton") + 2 * n_layers
    assert fused["stablehlo.while"] == default_step["stablehlo.while"]
    assert fused["stablehlo.dot_general"] == default_step["stablehlo.dot_general"] - 2 * n_layers
    assert sum(fused.values()) < sum(default_step.values()) <= MAX_OPS
