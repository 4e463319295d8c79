#!/usr/bin/env bash
# Sourced by the GPU benchmark scripts: run benchmarks/throughput.py variants that compile at once
# and time their steps one at a time.
#
#   run_concurrently OUT LOGS DEADLINE_S VARIANT...
#
# VARIANT is "NAME|TREE|ARGS|ENV|CACHE": throughput.py of the source tree TREE (. for this one;
# another tree's script must take the lock from $TIMING_LOCK) with ARGS (--config=... first),
# the environment assignments ENV (NAME=VALUE ..., may be empty) and its compilation cache in
# /tmp/elmo_jax_cache/CACHE (a new name: cold; a used one: a second launch). Every variant starts
# at once; a lock held here until each has compiled (or died, or DEADLINE_S passed: the rest are
# killed) keeps their timed steps apart from each other's compiling. The JSON line of each run,
# tagged "variant": NAME, is appended to OUT; its output goes to LOGS/NAME.log.

# record NAME LOG OUT: the run's last JSON line, tagged with the variant, appended to OUT.
record() {
  local line
  line=$(grep '^{' "$2" | tail -n 1)
  if [[ -n ${line} ]]; then
    python3 -c "import json, sys; r = json.loads(sys.argv[1]); r['variant'] = sys.argv[2]; print(json.dumps(r))" \
      "${line}" "$1" | tee -a "$3"
  else
    echo "$1: no result; the end of ${2}:"
    tail -n 5 "$2"
  fi
}

run_concurrently() {
  local out=$1 logs=$2 deadline_s=$3
  shift 3
  mkdir -p "${logs}"
  local lock="${logs}/timing.lock" variant name tree args environment cache start=${SECONDS}
  local -A pids=()
  exec 9>"${lock}"
  flock 9
  for variant in "$@"; do
    IFS='|' read -r name tree args environment cache <<< "${variant}"
    (
      cd "${tree}" || exit 1
      local lock_flag=""
      [[ ${tree} == . ]] && lock_flag="--timing_lock=${lock}"
      # shellcheck disable=SC2086  # the arguments and assignments are meant to split
      env XLA_PYTHON_CLIENT_PREALLOCATE=false TIMING_LOCK="${lock}" ELMO_JAX_COMPILATION_CACHE="/tmp/elmo_jax_cache/${cache}" \
        PYTHONUNBUFFERED=1 ${environment} timeout 600 python3 benchmarks/throughput.py ${args} ${lock_flag}
    ) > "${logs}/${name}.log" 2>&1 &
    pids[${name}]=$!
  done
  local waiting
  while true; do
    waiting=()
    for name in "${!pids[@]}"; do
      if kill -0 "${pids[${name}]}" 2>/dev/null && ! grep -q "^compiled in" "${logs}/${name}.log"; then
        waiting+=("${name}")
      fi
    done
    ((${#waiting[@]} == 0)) && break
    if ((SECONDS - start > deadline_s)); then
      echo "still compiling after ${deadline_s} s, stopped: ${waiting[*]}"
      for name in "${waiting[@]}"; do
        pkill -P "${pids[${name}]}"
        kill "${pids[${name}]}"
      done
      break
    fi
    sleep 2
  done
  echo "$# variants compiled or stopped after $((SECONDS - start)) s"
  flock -u 9
  exec 9>&-
  wait
  for variant in "$@"; do
    name=${variant%%|*}
    record "${name}" "${logs}/${name}.log" "${out}"
  done
}
