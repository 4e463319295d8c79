"""A persistent cache of XLA compilations for the command-line tools: a second run skips compiling.

JAX keys each entry by the program, its compile options, the backend and the jax version, so a
changed model or an upgraded jax compiles afresh. The directory is the tools' `--compilation_cache`.
"""

from __future__ import annotations

import os

import jax

FLAG_NAME = "compilation_cache"  # The entry points' absl flag for `configure`.
FLAG_HELP = (
    "Directory of the persistent XLA compilation cache: later runs with the same model and shapes load "
    "the compiled programs instead of compiling them again. Empty: no cache."
)
ENV_VAR = "ELMO_JAX_COMPILATION_CACHE"


def default_dir() -> str:
    """`$ELMO_JAX_COMPILATION_CACHE` when set (empty: no cache), else `$JAX_COMPILATION_CACHE_DIR`
    when set, else `$XDG_CACHE_HOME/elmo_jax/jax`."""
    for name in (ENV_VAR, "JAX_COMPILATION_CACHE_DIR"):
        if name in os.environ:
            return os.environ[name]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "elmo_jax", "jax")


def configure(directory: str) -> None:
    """Caches every compilation of this process in `directory` (nothing when empty); call before
    the first. Fast compilations too: the embedder's are many below JAX's default 1 s threshold."""
    if not directory:
        return
    jax.config.update("jax_compilation_cache_dir", os.path.expanduser(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # XLA:GPU's autotuning results per fusion: a new config whose fusions an earlier one had
    # (an ablation changing one key) skips their autotuning.
    jax.config.update("jax_persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir")
