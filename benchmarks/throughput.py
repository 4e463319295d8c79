"""Training throughput and model FLOP utilisation on synthetic data.

  python benchmarks/throughput.py --config=configs/elmo_small.py [--config.x=y] [--steps=20]

Runs the real train step (jit(shard_map) over all devices) on Zipf-distributed synthetic batches
(no data files needed), measures a large matmul on the same devices in the same run, and prints,
as its last line, one JSON object:
  {"config", "devices", "tokens_per_sec", "step_ms_median", "flops_per_token",
   "achieved_gflops", "matmul_peak_gflops", "mfu", "final_loss", "trace_lower_s", "compile_s",
   "launch_to_first_step_s", "compilation_cache"}
The step is lowered and compiled ahead of time, so tracing, compiling and the wait from launch to
the first step's result are timed apart (with the persistent compilation cache, as train.py:
`--compilation_cache`, a second launch loads the compiled step). tokens = global batch x unroll
steps per step; flops_per_token = elmo_jax.model.flops (analytic
forward + backward matmul/conv FLOPs for both directions); mfu = achieved / matmul peak, the
peak measured in the model's compute dtype.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from ml_collections import config_flags

from elmo_jax.runtime import compilation_cache, host_memory
from elmo_jax.cli.config_flags import define_config_flag
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model import precision
from elmo_jax.model.flops import train_flops_per_token
from elmo_jax.runtime import data_parallel
from elmo_jax.training.trainer import build_trainer

FLAGS = flags.FLAGS
define_config_flag("Model/training config.")
flags.DEFINE_integer("steps", 20, "Timed steps (after 2 warm-up steps).")
flags.DEFINE_integer("vocab_size", 0, "Vocabulary size (default: 793471, the 1B Word Benchmark's; "
                     "10002 for the demo config).")
flags.DEFINE_string("trace_dir", "", "If set, also profile 5 steps into this directory "
                    "(jax.profiler, with a Perfetto trace.json.gz) and write the compiled step's HLO "
                    "there (train_step.hlo.txt; see benchmarks/trace_summary.py).")
flags.DEFINE_string(compilation_cache.FLAG_NAME, compilation_cache.default_dir(), compilation_cache.FLAG_HELP)
flags.DEFINE_string("timing_lock", "", "If set, time the steps and the matmul peak while holding an exclusive "
                    "lock on this file: several benchmark processes can compile at once and time one at a time.")
flags.mark_flags_as_required(["config"])
IMPORTED = time.perf_counter()


def zipf_batch(rng: np.random.Generator, vocab_size: int, batch: int, steps: int, chars: int) -> dict:
    """Token ids of a Zipf(1.1) rank distribution truncated at the vocabulary size; each id spelled
    as a fixed 5-letter word (`spelled`), so a repeated token repeats its characters, as in text
    (a batch of 2 x 20 x 35 tokens of a 10k vocabulary is ~38% distinct words; PTB's ~45%)."""
    probs = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
    probs /= probs.sum()

    def ids() -> np.ndarray:
        return rng.choice(vocab_size, (batch, steps), p=probs).astype(np.int32)

    token_ids = np.stack([ids(), ids()])  # [2 directions, B, T]
    return {"token_ids": token_ids, "targets": np.stack([ids(), ids()]), "char_ids": spelled(token_ids, chars),
            "mask": np.ones((2, batch, steps), bool)}


def spelled(token_ids: np.ndarray, chars: int, letters: int = 5) -> np.ndarray:
    """Char ids `[..., chars]` of a made-up word per token id: its base-26 digits as letters between
    the begin- and end-of-word marks, then padding (the model's shifted ids)."""
    letters = min(letters, chars - 2)
    char_ids = np.full(token_ids.shape + (chars,), 261, np.int32)
    char_ids[..., 0] = 259
    rest = token_ids.astype(np.int64)
    for k in range(1, letters + 1):
        char_ids[..., k] = 98 + rest % 26
        rest //= 26
    char_ids[..., letters + 1] = 260
    return char_ids


def seconds_since_launch() -> float:
    """Seconds since this process started (Linux: its start time in /proc; elsewhere since this
    module was imported): the launch-to-first-step time a user waits, imports included."""
    try:
        with open("/proc/self/stat") as f:
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - IMPORTED


@contextlib.contextmanager
def exclusive(lock_path: str):
    """Holds an exclusive lock on `lock_path` (created if missing) for the block; no lock when empty."""
    if not lock_path:
        yield
        return
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def matmul_peak_gflops(mesh: jax.sharding.Mesh, dtype: jnp.dtype) -> float:
    """FLOP/s of a large square matmul on every device at once (the achievable dense peak).

    Random operands (constant ones or zeros can run faster than real data); n = 2048 on CPU,
    8192 on accelerators (large enough to fill them); median of 20 products (10 on CPU).
    """
    n, repeats = (2048, 10) if jax.devices()[0].platform == "cpu" else (8192, 20)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    key_a, key_b = jax.random.split(jax.random.key(0))
    a = jax.device_put(jax.random.normal(key_a, (mesh.size * n, n), dtype), sharding)
    b = jax.random.normal(key_b, (n, n), dtype)
    f = jax.jit(lambda a, b: precision.matmul("ij,jk->ik", a, b, dtype))
    jax.block_until_ready(f(a, b))
    return 2.0 * mesh.size * n**3 / median_time(lambda: f(a, b), repeats) / 1e9


def throughput_record(
    config, config_name: str, vocab_size: int, step_times: list[float], devices: str, peak_gflops: float
) -> dict:
    """The benchmark's JSON record from the timed steps (shared with the PyTorch reference)."""
    batch, steps = config.train.batch_size, config.train.unroll_steps
    step_s = float(np.median(step_times))
    tokens_per_step = batch * steps
    flops_per_token = train_flops_per_token(config.model, vocab_size, config.data.max_chars_per_token)
    achieved = flops_per_token * tokens_per_step / step_s / 1e9
    return {
        "config": config_name,
        "devices": devices,
        "dtype": config.model.dtype,
        "global_batch": [batch, steps],
        "vocab_size": vocab_size,
        "tokens_per_sec": round(tokens_per_step / step_s, 1),
        "step_ms_median": round(1000 * step_s, 2),
        "flops_per_token": flops_per_token,
        "achieved_gflops": round(achieved, 2),
        "matmul_peak_gflops": round(peak_gflops, 2),
        "mfu": round(achieved / peak_gflops, 4),
    }


def main(argv: list[str]) -> None:
    del argv
    host_memory.reuse_freed_memory()  # As train.py: before JAX starts its CPU backend.
    compilation_cache.configure(FLAGS.compilation_cache)
    config = FLAGS.config
    vocab_size = FLAGS.vocab_size or 793471
    mesh = data_parallel.make_mesh()
    batch, steps = config.train.batch_size, config.train.unroll_steps
    data_parallel.check_batch_size(batch, mesh, "train.batch_size")
    chars = config.data.max_chars_per_token
    model = bilm_from_config(config.model, vocab_size)
    state, train_step, _ = build_trainer(model, config, mesh, 1_000_000)
    rng = np.random.default_rng(0)
    batches = [data_parallel.shard_batch(zipf_batch(rng, vocab_size, batch, steps, chars), mesh) for _ in range(4)]

    start = time.perf_counter()
    lowered = train_step.lower(state, batches[0])
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
    state, metrics = compiled(state, batches[0])
    jax.block_until_ready(metrics)
    launch_to_first_step = seconds_since_launch()
    print(f"compiled in {compiled_at - lowered_at:.1f} s (traced and lowered in {lowered_at - start:.1f} s); "
          f"first step {launch_to_first_step:.1f} s after launch", file=sys.stderr, flush=True)
    with exclusive(FLAGS.timing_lock):
        state, metrics = compiled(state, batches[1])  # Warm up.
        jax.block_until_ready(metrics)
        times = []
        for i in range(FLAGS.steps):
            start_step = time.perf_counter()
            state, metrics = compiled(state, batches[i % 4])
            jax.block_until_ready(metrics)
            times.append(time.perf_counter() - start_step)
        if FLAGS.trace_dir:
            os.makedirs(FLAGS.trace_dir, exist_ok=True)
            with open(os.path.join(FLAGS.trace_dir, "train_step.hlo.txt"), "w") as f:
                f.write(compiled.as_text())
            with jax.profiler.trace(FLAGS.trace_dir, create_perfetto_trace=True):
                for i in range(5):
                    state, metrics = compiled(state, batches[i % 4])
                jax.block_until_ready(metrics)
        peak_gflops = matmul_peak_gflops(mesh, precision.DTYPES[config.model.dtype])
    record = throughput_record(
        config, config_flags.get_config_filename(FLAGS["config"]), vocab_size, times,
        devices=f"{mesh.size} x {jax.devices()[0].device_kind}",
        peak_gflops=peak_gflops,
    )
    record["final_loss"] = round(float(metrics["train_loss"]), 4)
    record["trace_lower_s"] = round(lowered_at - start, 2)
    record["compile_s"] = round(compiled_at - lowered_at, 2)
    record["launch_to_first_step_s"] = round(launch_to_first_step, 2)
    record["compilation_cache"] = bool(FLAGS.compilation_cache)
    print(json.dumps(record))

if __name__ == "__main__":
    app.run(main)
