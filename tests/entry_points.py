"""Running `train.py` / `evaluate.py` as subprocesses, the way users run them."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script_command(script: str, *args: str) -> list[str]:
    return [sys.executable, os.path.join(ROOT, script), *args]


def script_env(compile_cache: str) -> dict[str, str]:
    """CPU JAX with a persistent compilation cache shared by a test's runs (each compiles once)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=compile_cache,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    return env


def run_script(script: str, *args: str, compile_cache: str, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Runs the script to completion; `prefix` wraps the command (e.g. a shell setting limits)."""
    return subprocess.run(
        [*prefix, *script_command(script, *args)], env=script_env(compile_cache), capture_output=True, text=True,
        timeout=600, cwd=ROOT,
    )


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""
