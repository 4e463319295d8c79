#!/usr/bin/env bash
# Compile time and step time of the train step's design levers on one GPU, in one run: the LSTM
# windows fully unrolled (model.unroll=0 on GPU) against lax.scan loops of 1 or 2 steps per
# iteration, XLA's Triton GEMM fusions on and off, and the code of the H100 record
# (benchmarks/results/h100.jsonl, commit 6f03be5, unpacked in OLD_TREE) beside today's.
#
#   WHEELS=.whl OLD_TREE=.gpu_old bash benchmarks/compile_levers.sh results.jsonl
#
# All variants compile at once (one process each, an empty compilation cache each), then time their
# steps one at a time (throughput.py --timing_lock): the compile times are under that contention
# (16 cores and one GPU shared by the variants), the step times are not. Then two variants launch a
# second time on their now-filled caches (the launch-to-first-step time of a repeated config).
# One JSON line per run (with "variant") goes to $1, the logs and the traces' summaries beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?results.jsonl}")
logs="${out%.jsonl}_logs"
mkdir -p "${logs}"
source benchmarks/gpu_env.sh || exit 1
old_tree=${OLD_TREE:-}
deadline_s=${COMPILE_DEADLINE_S:-330}
one_draw="--config.model.softmax.streams_per_draw=0 --config.model.softmax.negatives_per_direction=False"
b128="--config.model.dtype=bfloat16 --config.train.batch_size=128"
no_triton="XLA_FLAGS=--xla_gpu_enable_triton_gemm=false"
one_arena="ELMO_JAX_REUSE_FREED_MEMORY=1"  # elmo_jax.runtime.host_memory's malloc tuning, forced on.
# name | code (new: this tree, old: OLD_TREE) | config and flags | environment | profile (1)
# LEVERS=unroll: the loop forms, Triton GEMMs, the H100 record's code; LEVERS=malloc: one malloc arena.
unroll_variants=(
  "new_unroll_all|new|configs/elmo_original.py ${b128} ${one_draw}||1"
  "old_unroll_all|old|configs/elmo_original.py ${b128}||1"
  "new_scan1|new|configs/elmo_original.py ${b128} ${one_draw} --config.model.unroll=1||0"
  "old_scan1|old|configs/elmo_original.py ${b128} --config.model.unroll=1||0"
  "new_scan2|new|configs/elmo_original.py ${b128} ${one_draw} --config.model.unroll=2||0"
  "new_scan1_no_triton_gemm|new|configs/elmo_original.py ${b128} ${one_draw} --config.model.unroll=1|${no_triton}|0"
  "new_unroll_all_no_triton_gemm|new|configs/elmo_original.py ${b128} ${one_draw}|${no_triton}|0"
  "small_new_scan1|new|configs/elmo_small.py ${b128} ${one_draw} --config.model.unroll=1||0"
)
malloc_variants=(
  "new_scan1_one_arena|new|configs/elmo_original.py ${b128} ${one_draw} --config.model.unroll=1|${one_arena}|0"
  "new_scan1|new|configs/elmo_original.py ${b128} ${one_draw} --config.model.unroll=1||0"
  "new_unroll_all|new|configs/elmo_original.py ${b128} ${one_draw}||0"
  "small_new_scan1|new|configs/elmo_small.py ${b128} ${one_draw} --config.model.unroll=1||0"
  "new_scan1_b1024|new|configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=1024 ${one_draw} --config.model.unroll=1||0"
  "old_unroll_all|old|configs/elmo_original.py ${b128}||0"
)
case ${LEVERS:-unroll} in
  unroll) variants=("${unroll_variants[@]}") ;;
  malloc) variants=("${malloc_variants[@]}") ;;
  *) echo "LEVERS must be unroll or malloc, got ${LEVERS}" >&2; exit 2 ;;
esac
lock="${logs}/timing.lock"
exec 9>"${lock}"
flock 9  # Held until every variant has compiled: no step is timed while another compiles.

# launch NAME CODE "CONFIG FLAGS" "NAME=VALUE..." PROFILE CACHE: one benchmark process in the background,
# its compilation cache in /tmp/elmo_jax_cache/CACHE.
launch() {
  local name=$1 code=$2 run=$3 environment=$4 profile=$5 dir=. cache="/tmp/elmo_jax_cache/$6"
  [[ ${code} == old ]] && dir=${old_tree}
  local trace=()
  [[ ${profile} == 1 ]] && trace=("--trace_dir=/tmp/trace_${name}")
  (
    cd "${dir}" || exit 1
    # shellcheck disable=SC2086  # the run's flags are meant to split
    XLA_PYTHON_CLIENT_PREALLOCATE=false TIMING_LOCK="${lock}" ELMO_JAX_COMPILATION_CACHE="${cache}" \
      PYTHONUNBUFFERED=1 env ${environment} timeout 600 python3 benchmarks/throughput.py --config=${run%% *} ${run#* } --steps=20 \
      $([[ ${code} == new ]] && echo "--timing_lock=${lock}") "${trace[@]}"
  ) > "${logs}/${name}.log" 2>&1 &
  pids[${name}]=$!
}

declare -A pids
start=${SECONDS}
for variant in "${variants[@]}"; do
  IFS='|' read -r name code run environment profile <<< "${variant}"
  launch "${name}" "${code}" "${run}" "${environment}" "${profile}" "${name}"
done
# Release the lock once each variant has compiled (or died), or at the deadline (the rest killed).
while true; do
  waiting=()
  for name in "${!pids[@]}"; do
    if kill -0 "${pids[${name}]}" 2>/dev/null && ! grep -q "^compiled in" "${logs}/${name}.log"; then
      waiting+=("${name}")
    fi
  done
  ((${#waiting[@]} == 0)) && break
  if ((SECONDS - start > deadline_s)); then
    echo "still compiling after ${deadline_s} s, killed: ${waiting[*]}" | tee -a "${logs}/summary.txt"
    for name in "${waiting[@]}"; do pkill -P "${pids[${name}]}"; kill "${pids[${name}]}"; done
    break
  fi
  sleep 2
done
echo "all compiled or stopped after $((SECONDS - start)) s" | tee -a "${logs}/summary.txt"
flock -u 9
wait

record() {  # NAME LOG: the run's JSON line, tagged with the variant, appended to $out.
  local line
  line=$(grep '^{' "$2" | tail -n 1)
  if [[ -n ${line} ]]; then
    python3 -c "import json, sys; r = json.loads(sys.argv[1]); r['variant'] = sys.argv[2]; print(json.dumps(r))" \
      "${line}" "$1" | tee -a "${out}"
  else
    echo "$1: no result; log tail:"; tail -n 5 "$2"
  fi
}
for variant in "${variants[@]}"; do
  name=${variant%%|*}
  record "${name}" "${logs}/${name}.log"
done

# Second launches on the filled caches, alone on the machine.
for variant in "${variants[@]}"; do
  IFS='|' read -r name code run environment profile <<< "${variant}"
  [[ ${name} == new_scan1 || ${name} == new_unroll_all ]] || continue
  launch "${name}_cached" "${code}" "${run}" "${environment}" 0 "${name}"
  wait
  record "${name}_cached" "${logs}/${name}_cached.log"
done

for name in new_unroll_all old_unroll_all; do
  trace=$(find "/tmp/trace_${name}" -name 'perfetto_trace.json.gz' 2>/dev/null | head -n 1)
  [[ -n ${trace} ]] || continue
  echo "== ${name}" >> "${logs}/trace_summary.txt"
  python3 benchmarks/trace_summary.py "${trace}" --hlo="/tmp/trace_${name}/train_step.hlo.txt" --depth=5 \
    >> "${logs}/trace_summary.txt" 2>&1
  wc -c "/tmp/trace_${name}/train_step.hlo.txt" >> "${logs}/trace_summary.txt"
done
cat "${logs}/summary.txt"
