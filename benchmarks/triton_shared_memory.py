"""Shared memory of the Pallas kernels' Triton modules at a recipe's shapes, measured without a GPU.

  python benchmarks/triton_shared_memory.py --recipe elmo_small --batch 128 --num_stages 1 2 3 \\
      --triton_python /tmp/tvenv/bin/python

Lowers the kernels as the model calls them (abstract inputs, bfloat16 operands): the LSTM
recurrence (`pallas_lstm`: its forward module, and the forward-with-residuals and backward modules
of its gradient; time on axis 2, the recipe's dim, width, clips and unroll_steps), the fused
gate-and-cell step and its reverse (`pallas_lstm_cell`: as its recurrence's gradient calls them) and the char
CNN's fused convolution and max (`pallas_conv_pool`: one module per filter width, for the
2 x batch x unroll_steps tokens of a batch). Each Triton (tt dialect) module is then compiled for
CUDA sm_90 with PyPI's `triton` package, which bundles ptxas and needs no GPU, and the table gives
its shared memory (bytes) and compile seconds (wall and CPU) against the H100/H200 limit of 232,448 bytes per
block. XLA compiles the same modules with its own copy of Triton's passes, so the numbers are
Triton's, not XLA's to the byte.

`triton` need not be importable here: --triton_python names an interpreter that has it (e.g. a
separate venv made with `python -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install triton`). Each
module compiles in its own process, under --timeout seconds. Pallas compiles with num_warps 4 and
num_stages 3 on CUDA unless the kernel says otherwise; the modules do not record either, so both
are flags here. --dump_dir keeps the modules' text (`<kernel>.ttir`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from dataclasses import dataclass

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from elmo_jax.config.recipes import recipe_module  # noqa: E402
from elmo_jax.model.pallas_conv_pool import pallas_conv_max  # noqa: E402
from elmo_jax.model.pallas_lstm import pallas_lstm_recurrence  # noqa: E402
from elmo_jax.model.pallas_lstm_cell import fused_cell_recurrence  # noqa: E402

T = TypeVar("T")
SHARED_MEMORY_LIMIT = 232_448  # bytes per block on the H100 and H200 (227 KiB)

# Run by --triton_python: compiles one .ttir file for sm_90 and prints its shared memory as JSON.
_COMPILE = """
import json, os, sys, time
import triton
from triton.backends.compiler import GPUTarget
path, num_warps, num_stages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cpu_time = lambda: sum(os.times()[:4])  # this process and its children (ptxas)
start, cpu = time.perf_counter(), cpu_time()
compiled = triton.compile(path, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})
print(json.dumps({"shared": compiled.metadata.shared, "seconds": time.perf_counter() - start,
                  "cpu_seconds": cpu_time() - cpu, "triton": triton.__version__}))
"""


@dataclass
class Result:
    """One module's compile: shared memory in bytes (None if it failed), wall and CPU seconds (CPU:
    None if it failed), error text."""

    name: str
    num_stages: int
    shared: int | None
    seconds: float
    cpu_seconds: float | None = None
    error: str = ""


@contextlib.contextmanager
def captured_modules(keep: Callable[[Any], T]) -> Iterator[list[T]]:
    """Yields a list that receives `keep(module)` of each Triton module (MLIR) Pallas lowers meanwhile."""
    from jax._src.pallas.triton import lowering  # private: the one place that sees each module

    kept: list[T] = []
    original = lowering.lower_jaxpr_to_triton_module

    def lower_and_keep(*args, **kwargs):
        result = original(*args, **kwargs)
        kept.append(keep(result.module))
        return result

    lowering.lower_jaxpr_to_triton_module = lower_and_keep
    try:
        yield kept
    finally:
        lowering.lower_jaxpr_to_triton_module = original


def lower_for_cuda(fn: Callable, *args: jax.ShapeDtypeStruct) -> list[str]:
    """The Triton modules of `jax.jit(fn)` lowered for CUDA at abstract `args`."""
    with captured_modules(lambda module: module.operation.get_asm(enable_debug_info=False)) as modules:
        jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    return modules


def lstm_loss(
    config, batch: int, recurrence: Callable = pallas_lstm_recurrence
) -> tuple[Callable, list[jax.ShapeDtypeStruct]]:
    """(loss, abstract args) of an LSTM recurrence (`pallas_lstm_recurrence` or another of its
    signature) as `BiLSTMLayer` calls it at a recipe's shapes: xw `[2, batch, unroll_steps, 4 dim]`,
    bias `[2, 4 dim]`, W_hidden `[2, width, 4 dim]`, W_proj `[2, dim, width]`, states `[2, batch, dim]`
    and `[2, batch, width]`; time on axis 2, the recipe's clips, bfloat16 operands."""
    dim, p, steps = config.model.lstm.dim, config.model.width, config.train.unroll_steps
    clips = config.model.lstm.cell_clip, config.model.lstm.proj_clip
    shapes = [(2, batch, steps, 4 * dim), (2, 4 * dim), (2, p, 4 * dim), (2, dim, p), (2, batch, dim), (2, batch, p)]

    def loss(xw, bias, w_hidden, w_proj, c0, h0):
        mask = jnp.ones((2, batch, steps, 1), bool)
        hs, (c, h) = recurrence(xw, w_hidden, w_proj, mask, c0, h0, *clips, jnp.bfloat16, time_axis=2, bias=bias)
        return jnp.sum(hs) + jnp.sum(c) + jnp.sum(h)

    return loss, [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]


def lstm_modules(config, batch: int) -> dict[str, str]:
    """{name: Triton module} of the LSTM recurrence (`lstm_loss`) and its gradient."""
    loss, args = lstm_loss(config, batch)
    [forward] = lower_for_cuda(loss, *args)
    grad_forward, backward = lower_for_cuda(jax.grad(loss, argnums=range(6)), *args)
    return {"lstm_forward": forward, "lstm_forward_grad": grad_forward, "lstm_backward": backward}


def cell_modules(config, batch: int) -> dict[str, str]:
    """{name: Triton module} of the fused gate-and-cell step (`pallas_lstm_cell`) and its reverse,
    as the gradient of the LSTM recurrence with them (`lstm_loss`) lowers them."""
    loss, args = lstm_loss(config, batch, fused_cell_recurrence)
    forward, reverse = lower_for_cuda(jax.grad(loss, argnums=range(6)), *args)
    return {"lstm_cell_forward": forward, "lstm_cell_reverse": reverse}


def conv_modules(config, batch: int) -> dict[str, str]:
    """{name: Triton module} of the fused char convolution and max, one per filter width: x `[2
    batch unroll_steps, max_chars_per_token, embed_dim]`, kernel `[width, embed_dim, n_filters]`;
    bfloat16 operands."""
    cnn, n_chars = config.model.char_cnn, config.data.max_chars_per_token
    x = jax.ShapeDtypeStruct((2 * batch * config.train.unroll_steps, n_chars, cnn.embed_dim), jnp.float32)
    modules = {}
    for width, n_filters in cnn.filters:
        kernel = jax.ShapeDtypeStruct((width, cnn.embed_dim, n_filters), jnp.float32)
        [modules[f"conv_max_w{width}_n{n_filters}"]] = lower_for_cuda(
            lambda x, k: pallas_conv_max(x, k, jnp.bfloat16), x, kernel
        )
    return modules


def compile_module(
    name: str, text: str, num_warps: int, num_stages: int, triton_python: str, timeout: float
) -> Result:
    """Compiles one Triton module for sm_90 in a `triton_python` process; its shared memory."""
    with tempfile.NamedTemporaryFile("w", suffix=".ttir") as f:
        f.write(text)
        f.flush()
        command = [triton_python, "-c", _COMPILE, f.name, str(num_warps), str(num_stages)]
        env = {**os.environ, "TRITON_ALWAYS_COMPILE": "1", "TRITON_DEFAULT_FP_FUSION": "1"}
        start = time.perf_counter()
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return Result(name, num_stages, None, time.perf_counter() - start, error=f"timed out after {timeout:.0f} s")
    if run.returncode != 0:
        error = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        return Result(name, num_stages, None, time.perf_counter() - start, error=error)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    return Result(name, num_stages, out["shared"], out["seconds"], out["cpu_seconds"])


def format_row(result: Result) -> str:
    """One table row: module, num_stages, shared bytes, its ratio to the limit, wall and CPU seconds
    of the compile, verdict (or the error)."""
    head = f"{result.name:<24} {result.num_stages:>6}"
    if result.shared is None:
        return f"{head} {'-':>12} {'-':>8} {result.seconds:>8.1f} {'-':>7}  {result.error}"
    verdict = "fits" if result.shared <= SHARED_MEMORY_LIMIT else "EXCEEDS"
    ratio = result.shared / SHARED_MEMORY_LIMIT
    return f"{head} {result.shared:>12,} {ratio:>7.2f}x {result.seconds:>8.1f} {result.cpu_seconds:>7.1f}  {verdict}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="elmo_small", help="a recipe of configs/ (default: elmo_small)")
    parser.add_argument("--batch", type=int, default=128, help="sequences per batch (default: 128)")
    parser.add_argument("--kernels", nargs="+", choices=["lstm", "cell", "conv"], default=["lstm", "cell", "conv"])
    parser.add_argument("--num_stages", type=int, nargs="+", default=[3], help="Triton's pipeline stages (Pallas: 3)")
    parser.add_argument("--num_warps", type=int, default=4, help="Triton's warps per program (Pallas: 4)")
    parser.add_argument("--triton_python", default=sys.executable, help="an interpreter that imports triton")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per module's compile")
    parser.add_argument("--dump_dir", default=None, help="write each module's text here as <name>.ttir")
    args = parser.parse_args(argv)

    config = recipe_module(args.recipe).get_config()
    modules: dict[str, str] = {}
    if "lstm" in args.kernels:
        modules.update(lstm_modules(config, args.batch))
    if "cell" in args.kernels:
        modules.update(cell_modules(config, args.batch))
    if "conv" in args.kernels:
        modules.update(conv_modules(config, args.batch))
    if args.dump_dir:
        os.makedirs(args.dump_dir, exist_ok=True)
        for name, text in modules.items():
            with open(os.path.join(args.dump_dir, f"{name}.ttir"), "w") as f:
                f.write(text)

    print(f"{args.recipe}, batch {args.batch}, num_warps {args.num_warps}, sm_90; limit {SHARED_MEMORY_LIMIT:,} bytes")
    print(f"{'module':<24} {'stages':>6} {'shared (B)':>12} {'/limit':>8} {'wall s':>8} {'cpu s':>7}")
    exceeded = False
    for num_stages in args.num_stages:
        for name, text in modules.items():
            result = compile_module(name, text, args.num_warps, num_stages, args.triton_python, args.timeout)
            exceeded |= result.shared is None or result.shared > SHARED_MEMORY_LIMIT
            print(format_row(result), flush=True)
    return 1 if exceeded else 0


if __name__ == "__main__":
    sys.exit(main())
