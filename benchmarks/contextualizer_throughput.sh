#!/usr/bin/env bash
# The training tokens/s column of docs/contextualizers.md: benchmarks/throughput.py on the three
# contextualizer recipes side by side, in turns (LSTM, gated CNN, Transformer, then again), so
# that the machine's drift during the run falls on all three alike. Synthetic batches of PTB's
# vocabulary size (10,001 words); each turn times 30 steps after 2 warm-up steps. One JSON line
# per turn is appended to OUT (default throughput.jsonl), then the median of each config's turns
# is printed.
#
#   bash benchmarks/contextualizer_throughput.sh [OUT] [ROUNDS]
#   bash benchmarks/contextualizer_throughput.sh benchmarks/results/contextualizers/throughput_cpu.jsonl 3
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-throughput.jsonl}
rounds=${2:-3}
python=${PYTHON:-.venv/bin/python}
configs=(ptb_char_small_cpu ptb_char_small_gated_cnn ptb_char_small_transformer)

for round in $(seq "$rounds"); do
  for config in "${configs[@]}"; do
    echo "== round $round: $config" >&2
    "$python" benchmarks/throughput.py --config="configs/$config.py" --vocab_size=10001 --steps=30 2>/dev/null \
      | tail -n 1 >> "$out"
  done
done
"$python" - "$out" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    record = json.loads(line)
    runs.setdefault(record["config"], []).append(record)
print("| config | turns | tokens/s (median) | step ms | GFLOP/s | matmul peak GFLOP/s | MFU |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for config, records in runs.items():
    def median(key):
        return statistics.median(r[key] for r in records)
    print(f"| {config} | {len(records)} | {median('tokens_per_sec'):,.0f} | {median('step_ms_median'):.1f} "
          f"| {median('achieved_gflops'):.1f} | {median('matmul_peak_gflops'):.1f} | {median('mfu'):.1%} |")
EOF
