"""Running `train.py` / `evaluate.py` as subprocesses, the way users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The test session's persistent compilation cache (set by tests/conftest.py), shared by the session's
# in-process compilations and the scripts it runs.
SESSION_CACHE_ENV_VAR = "ELMO_JAX_TEST_XLA_CACHE"
# The tests check what the programs compute, not how fast the compiled code runs: XLA's CPU backend
# skips LLVM's optimisation passes and emits fusions with its elemental IR emitters rather than the
# MLIR fusion emitters; each roughly halves the compiling, most of a test's time on 2 cores. The
# benchmarks and the tools compile at XLA's defaults.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def xla_flags(*flags: str) -> str:
    """XLA_FLAGS for a test's process: the tests' own and `flags` (e.g. a simulated device count)."""
    return " ".join((TEST_XLA_FLAGS, *flags))


def script_command(script: str, *args: str) -> list[str]:
    return [sys.executable, os.path.join(ROOT, script), *args]


def script_env(compile_cache: str) -> dict[str, str]:
    """CPU JAX with a persistent compilation cache: the test session's, where there is one (every
    program compiles once per session, whichever test runs it first), else `compile_cache`, shared by
    a test's runs (each compiles once)."""
    env = dict(os.environ)
    env.update(
        XLA_FLAGS=xla_flags(),
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=os.environ.get(SESSION_CACHE_ENV_VAR) or compile_cache,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    return env


def run_script(script: str, *args: str, compile_cache: str, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Runs the script to completion; `prefix` wraps the command (e.g. a shell setting limits)."""
    return subprocess.run(
        [*prefix, *script_command(script, *args)],
        env=script_env(compile_cache),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def training_records(workdir: str) -> list[dict]:
    """The training records of a workdir's metrics.jsonl (complete lines: the run may be writing the next one)."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in (json.loads(line) for line in f if line.endswith("\n")) if "train_loss" in r]


def training_losses(workdir: str) -> dict[int, float]:
    """Training loss per step; a step logged again by a resumed run takes its later value."""
    return {r["step"]: r["train_loss"] for r in training_records(workdir)}


def checkpoint_steps(workdir: str) -> list[int]:
    """The steps of the complete checkpoints in WORKDIR/checkpoints."""
    directory = os.path.join(workdir, "checkpoints")
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit()) if os.path.isdir(directory) else []


def uninterrupted_run(root, num_steps: int, checkpoint_every_steps: int) -> tuple[list[str], str, str]:
    """(train.py flags without --workdir, compilation cache, workdir of the uninterrupted run): a
    tiny text-corpus run under `root` (a pathlib.Path) logging every step, the reference that
    killed, pre-empted or resumed runs with the same flags must reproduce."""
    from tests.training.helpers import write_corpus

    flags = [
        "--config=configs/tests/tiny.py",
        "--config.data.source=text",
        f"--config.data.train_files={write_corpus(str(root / 'train'), 60, seed=0)}",
        f"--config.data.eval_files={write_corpus(str(root / 'valid'), 10, seed=1, n_files=1)}",
        f"--config.train.num_steps={num_steps}",
        "--config.train.log_every_steps=1",
        f"--config.train.checkpoint_every_steps={checkpoint_every_steps}",
    ]
    cache, reference = str(root / "jax_cache"), str(root / "reference")
    done = run_script("train.py", *flags, f"--workdir={reference}", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    return flags, cache, reference
