#!/usr/bin/env bash
# The accelerator rows of docs/performance.md's GPU table: benchmarks/throughput.py on the released
# shapes, float32 and bfloat16, at several batch sizes (and with the Pallas kernels), then, where
# PyTorch sees a GPU, the same step in benchmarks/pytorch_reference.py with cuDNN's LSTM. One JSON
# line per run is appended to ${1:-throughput.jsonl} and each run's whole output to the same name
# with .log; extra arguments are passed to every run (e.g. --steps=10). Every run draws one set of
# negatives per step, as the table was measured (the released configs draw one per 128 streams and
# direction, as bilm-tf).
#
#   bash benchmarks/accelerator_table.sh results.jsonl
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-throughput.jsonl}"
log="${out%.jsonl}.log"
shift || true
one_draw="--config.model.softmax.streams_per_draw=0 --config.model.softmax.negatives_per_direction=False"
runs=(
  "configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=128"
  "configs/elmo_original.py --config.model.dtype=float32 --config.train.batch_size=128"
  "configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=512"
  "configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=1024"
  "configs/elmo_small.py --config.model.dtype=bfloat16 --config.train.batch_size=128"
  "configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=128 --config.model.lstm.kernel=pallas --config.model.conv_kernel=pallas"
)
torch_runs=(
  "configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=128"
  "configs/elmo_original.py --config.model.dtype=bfloat16 --config.train.batch_size=512"
)

# run_one SCRIPT "CONFIG FLAGS..." EXTRA...: one benchmark run, its last line (the JSON record) to $out.
run_one() {
  local script=$1 run=$2
  shift 2
  local config=${run%% *}
  echo "== ${script} ${run} $*" >&2
  # shellcheck disable=SC2086  # the run's flags are meant to split
  python3 "${script}" --config=${config} ${run#* } ${one_draw} "$@" > "${log}.run" 2>&1
  tail -n 1 "${log}.run" | tee -a "${out}"
  { echo "== ${script} ${run} $*"; cat "${log}.run"; } >> "${log}" && rm "${log}.run"
}

for run in "${runs[@]}"; do
  run_one benchmarks/throughput.py "${run}" "$@"
done
if python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  for run in "${torch_runs[@]}"; do
    run_one benchmarks/pytorch_reference.py "${run}" --lstm=cudnn --device=cuda "$@"
  done
fi
