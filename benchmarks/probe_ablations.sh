#!/usr/bin/env bash
# Perplexity and UPOS probe accuracy by layer for the ablation presets of configs/ablations.py
# (the demo's recipe, 1,800 steps each on PTB), the demo's random-init control beside them.
#
#   bash benchmarks/probe_ablations.sh UD_EWT_DIR [RUNS_DIR] [RESULTS_DIR]
#   PRESETS="baseline one_layer" bash benchmarks/probe_ablations.sh ../shared/data/ud_english_ewt
#
# Each preset trains into RUNS_DIR/<preset> (default runs/ablations; a finished run is not trained
# again) and is probed on UD English EWT: the probes train on en_ewt-ud-dev.conllu (a tenth held out
# for early stopping) and are scored on en_ewt-ud-test.conllu, words spelled as PTB's (--normalize
# ptb). The runs' test evaluations and probe results are copied to RESULTS_DIR/<preset> (default
# benchmarks/results/probing); `elmo-report RUNS_DIR/*` puts them side by side.
set -euo pipefail
ewt=${1:?usage: bash benchmarks/probe_ablations.sh UD_EWT_DIR [RUNS_DIR] [RESULTS_DIR]}
runs=${2:-runs/ablations}
results=${3:-benchmarks/results/probing}
presets=${PRESETS:-baseline word_inputs no_highway one_layer no_skip_connections no_projection_clip tanh_cnn full_softmax adagrad}
python=${PYTHON:-.venv/bin/python}
probe=("$python" -m elmo_jax.probe --train="$ewt/en_ewt-ud-dev.conllu" --test="$ewt/en_ewt-ud-test.conllu"
       --task=upos --normalize=ptb --no_progress)

for preset in $presets; do
  workdir="$runs/$preset"
  if ! compgen -G "$workdir/eval_test_*.json" > /dev/null; then
    "$python" train.py --config="configs/ablations.py:$preset" --workdir="$workdir"
  fi
  "${probe[@]}" --workdir="$workdir"
  if [ "$preset" = baseline ]; then
    "${probe[@]}" --workdir="$workdir" --control=random_init
  fi
  mkdir -p "$results/$preset"
  cp "$workdir"/eval_test_*.json "$workdir"/probe_upos*.json "$workdir"/config.json "$results/$preset/"
done
