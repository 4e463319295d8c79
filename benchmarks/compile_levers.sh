#!/usr/bin/env bash
# Compile time and step time of the train step's design levers on one GPU, in one run: the LSTM
# windows unrolled (model.lstm.unroll=20) against loops of 1 or 2 steps per iteration, XLA's Triton
# GEMM fusions on and off, glibc malloc in one arena (elmo_jax.runtime.host_memory's CPU tuning),
# and the code of the H100 table (commit 6f03be5, unpacked in OLD_TREE) beside today's.
#
#   WHEELS=.whl OLD_TREE=.old [LEVERS=unroll|malloc] bash benchmarks/compile_levers.sh results.jsonl
#
# All variants of a set compile at once, each with an empty compilation cache (so the compile
# times are under that contention: the 16 cores and the GPU's autotuning are shared), then time
# their steps one at a time (benchmarks/concurrent_runs.sh). Then two variants launch a second
# time on their filled caches. One JSON line per run goes to $1, the logs beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?results.jsonl}")
logs="${out%.jsonl}_logs"
source benchmarks/gpu_env.sh || exit 1
source benchmarks/concurrent_runs.sh
old=${OLD_TREE:-}
one_draw="--config.model.softmax.streams_per_draw=0 --config.model.softmax.negatives_per_direction=False"
original="--config=configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=128 --steps=20"
small="--config=configs/elmo_small.py --config.model.dtype=bfloat16 --config.train.batch_size=128 --steps=20"
no_triton="XLA_FLAGS=--xla_gpu_enable_triton_gemm=false"
one_arena="ELMO_JAX_REUSE_FREED_MEMORY=1"
# NAME|TREE|ARGS|ENV|CACHE (benchmarks/concurrent_runs.sh). The code of 6f03be5 has no one-draw
# flags: one draw per step was its only softmax sampling. Its automatic unroll is the whole window.
case ${LEVERS:-unroll} in
  unroll) variants=(
    "new_unroll_all|.|${original} ${one_draw} --config.model.lstm.unroll=20 --trace_dir=/tmp/trace_new||new_unroll_all"
    "old_unroll_all|${old}|${original} --trace_dir=/tmp/trace_old||old_unroll_all"
    "new_scan1|.|${original} ${one_draw} --config.model.lstm.unroll=1||new_scan1"
    "old_scan1|${old}|${original} --config.model.unroll=1||old_scan1"
    "new_scan2|.|${original} ${one_draw} --config.model.lstm.unroll=2||new_scan2"
    "new_scan1_no_triton_gemm|.|${original} ${one_draw} --config.model.lstm.unroll=1|${no_triton}|new_scan1_no_triton_gemm"
    "new_unroll_all_no_triton_gemm|.|${original} ${one_draw} --config.model.lstm.unroll=20|${no_triton}|new_unroll_all_no_triton_gemm"
    "small_new_scan1|.|${small} ${one_draw} --config.model.lstm.unroll=1||small_new_scan1"
  ) ;;
  malloc) variants=(
    "new_scan1_one_arena|.|${original} ${one_draw} --config.model.lstm.unroll=1|${one_arena}|new_scan1_one_arena"
    "new_scan1|.|${original} ${one_draw} --config.model.lstm.unroll=1||new_scan1"
    "new_unroll_all|.|${original} ${one_draw} --config.model.lstm.unroll=20||new_unroll_all"
    "small_new_scan1|.|${small} ${one_draw} --config.model.lstm.unroll=1||small_new_scan1"
    "new_scan1_b1024|.|${original/batch_size=128/batch_size=1024} ${one_draw} --config.model.lstm.unroll=1||new_scan1_b1024"
    "old_unroll_all|${old}|${original}||old_unroll_all"
  ) ;;
  *) echo "LEVERS must be unroll or malloc, got ${LEVERS}" >&2; exit 2 ;;
esac
run_concurrently "${out}" "${logs}" "${COMPILE_DEADLINE_S:-330}" "${variants[@]}"
for variant in "${variants[@]}"; do  # Second launches of the same programs, alone on the machine.
  IFS='|' read -r name tree args environment cache <<< "${variant}"
  [[ ${name} == new_scan1 || ${name} == new_unroll_all ]] || continue
  run_concurrently "${out}" "${logs}" 300 "${name}_cached|${tree}|${args/--trace_dir=*/}|${environment}|${cache}"
done
for name in new old; do
  trace=$(find "/tmp/trace_${name}" -name 'perfetto_trace.json.gz' 2>/dev/null | head -n 1)
  [[ -n ${trace} ]] || continue
  echo "== ${name}_unroll_all" >> "${logs}/trace_summary.txt"
  python3 benchmarks/trace_summary.py "${trace}" --hlo="/tmp/trace_${name}/train_step.hlo.txt" --depth=5 \
    >> "${logs}/trace_summary.txt" 2>&1
done
