#!/usr/bin/env bash
# The contextualizer ablation on PTB (docs/contextualizers.md): ptb_char_small's char CNN and
# softmax with LSTMs (configs/ptb_char_small_cpu.py), a gated CNN or a Transformer; each trained,
# evaluated on PTB test and probed for UPOS on UD English EWT beside its random-init control.
#
#   bash benchmarks/contextualizers.sh UD_EWT_DIR [RUNS_DIR] [RESULTS_DIR]
#   CONFIGS=ptb_char_small_gated_cnn bash benchmarks/contextualizers.sh ../shared/data/ud_english_ewt
#   WSD_DATA=../shared/data/coarsewsd20 bash benchmarks/contextualizers.sh ../shared/data/ud_english_ewt
#   elmo-report benchmarks/results/contextualizers/ptb_*  # the table
#
# Each config trains into RUNS_DIR/<config> (default runs; about 2 hours each on 2 CPU cores; a
# finished run is not trained again, an interrupted one resumes) and has its results copied to
# RESULTS_DIR/<config> (default benchmarks/results/contextualizers) by
# benchmarks/train_and_probe.sh, which says how.
set -euo pipefail
ewt=${1:?usage: bash benchmarks/contextualizers.sh UD_EWT_DIR [RUNS_DIR] [RESULTS_DIR]}
runs=${2:-runs}
results=${3:-benchmarks/results/contextualizers}
configs=${CONFIGS:-ptb_char_small_cpu ptb_char_small_gated_cnn ptb_char_small_transformer}

for config in $configs; do
  bash "$(dirname "$0")/train_and_probe.sh" "configs/$config.py" "$runs/$config" "$results/$config" \
    "$ewt" --control
done
