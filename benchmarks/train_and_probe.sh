#!/usr/bin/env bash
# Train one config, evaluate it on PTB test (its final checkpoint), probe its layers for UPOS on
# UD English EWT, and copy what a results table needs to RESULTS_DIR.
#
#   bash benchmarks/train_and_probe.sh CONFIG WORKDIR RESULTS_DIR UD_EWT_DIR [--control]
#   bash benchmarks/train_and_probe.sh configs/ptb_char_small_cpu.py runs/ptb_char_small_cpu \
#       benchmarks/results/contextualizers/ptb_char_small_cpu ../shared/data/ud_english_ewt --control
#
# A run with a test evaluation is finished and not trained again; an interrupted one resumes from
# its last checkpoint, and a finished one without a test evaluation gets one. The probes train on
# en_ewt-ud-dev.conllu (a tenth held out for early stopping) and are scored on
# en_ewt-ud-test.conllu, words spelled as PTB's (--normalize ptb); --control also probes the same
# architecture with random weights (--control=random_init). With WSD_DATA=DIR (CoarseWSD-20's
# directory) the word-sense probes run too (`--task wsd`, and its control with --control).
# RESULTS_DIR gets the evaluations, the probe results, config.json, metrics.jsonl and
# run_info.json, so that `elmo-report RESULTS_DIR` makes the table.
set -euo pipefail
usage="usage: bash benchmarks/train_and_probe.sh CONFIG WORKDIR RESULTS_DIR UD_EWT_DIR [--control]"
config=${1:?$usage}
workdir=${2:?$usage}
results=${3:?$usage}
ewt=${4:?$usage}
control=${5:-}
if [ -n "$control" ] && [ "$control" != --control ]; then
  echo "$usage" >&2
  exit 2
fi
python=${PYTHON:-.venv/bin/python}
probe=("$python" -m elmo_jax.probe --workdir="$workdir" --normalize=ptb --no_progress)

probe_with_control() {  # One probe, and with --control the same on random weights.
  "${probe[@]}" "$@"
  if [ -n "$control" ]; then
    "${probe[@]}" "$@" --control=random_init
  fi
}

if ! compgen -G "$workdir/eval_test_*.json" > /dev/null; then
  "$python" train.py --config="$config" --workdir="$workdir"
fi
if ! compgen -G "$workdir/eval_test_*.json" > /dev/null; then  # Its evaluation split was not test.
  "$python" evaluate.py --workdir="$workdir" --split=test
fi
probe_with_control --task=upos --train="$ewt/en_ewt-ud-dev.conllu" --test="$ewt/en_ewt-ud-test.conllu"
if [ -n "${WSD_DATA:-}" ]; then
  probe_with_control --task=wsd --data="$WSD_DATA"
fi
mkdir -p "$results"
cp "$workdir"/eval_*.json "$workdir"/probe_*.json "$workdir"/config.json "$workdir"/metrics.jsonl \
   "$workdir"/run_info.json "$results/"
if [ -n "${WSD_DATA:-}" ]; then
  cp "$workdir"/probe_wsd*.json "$results/"
fi
