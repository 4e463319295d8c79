#!/usr/bin/env bash
# Perplexity and UPOS probe accuracy by layer for the ablation presets of configs/ablations.py
# (the demo's recipe, 1,800 steps each on PTB), the demo's random-init control beside them.
#
#   bash benchmarks/probe_ablations.sh UD_EWT_DIR [RUNS_DIR] [RESULTS_DIR]
#   PRESETS="baseline one_layer" bash benchmarks/probe_ablations.sh ../shared/data/ud_english_ewt
#   WSD_DATA=../shared/data/coarsewsd20 bash benchmarks/probe_ablations.sh ../shared/data/ud_english_ewt
#   elmo-report benchmarks/results/probing/*      # the table
#
# Each preset trains into RUNS_DIR/<preset> (default runs/ablations; a finished run is not trained
# again), is probed on UD English EWT and has its results copied to RESULTS_DIR/<preset> (default
# benchmarks/results/probing) by benchmarks/train_and_probe.sh, which says how.
set -euo pipefail
ewt=${1:?usage: bash benchmarks/probe_ablations.sh UD_EWT_DIR [RUNS_DIR] [RESULTS_DIR]}
runs=${2:-runs/ablations}
results=${3:-benchmarks/results/probing}
presets=${PRESETS:-baseline word_inputs no_highway one_layer no_skip_connections no_projection_clip tanh_cnn full_softmax adagrad}

for preset in $presets; do
  control=()
  if [ "$preset" = baseline ]; then
    control=(--control)
  fi
  bash "$(dirname "$0")/train_and_probe.sh" "configs/ablations.py:$preset" "$runs/$preset" \
    "$results/$preset" "$ewt" "${control[@]}"
done
