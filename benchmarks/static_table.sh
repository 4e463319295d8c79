#!/usr/bin/env bash
# Static word vectors against a biLM's layers (docs/probing.md, "Static baselines against the
# layers"): word2vec skip-gram and CBOW and GloVe at DIMS dimensions, trained on the run's own text
# and vocabulary (elmo-static --workdir), probed beside the run's layers and mix on UPOS (UD English
# EWT), word senses (CoarseWSD-20) and the "apple"/"play" sets (examples/senses).
#
#   bash benchmarks/static_table.sh WORKDIR UD_EWT_DIR COARSEWSD_DIR [RESULTS_DIR]
#   bash benchmarks/static_table.sh runs/demo_lstm ../shared/data/ud_english_ewt ../shared/data/coarsewsd20
#   DIMS="100" METHODS="skipgram" bash benchmarks/static_table.sh ...        # fewer
#   elmo-report benchmarks/results/static/demo_lstm                            # the table
#
# The vectors go to WORKDIR/static/<method>_<dim>.txt (a file already there is not trained again);
# one elmo-probe per task reads them all (--static, repeated), and its probe_<task>.json, with the
# run's config.json, metrics.jsonl and evaluations, is copied to RESULTS_DIR (default
# benchmarks/results/static/<WORKDIR's name>).
set -euo pipefail
usage="usage: bash benchmarks/static_table.sh WORKDIR UD_EWT_DIR COARSEWSD_DIR [RESULTS_DIR]"
workdir=${1:?$usage}
ewt=${2:?$usage}
coarsewsd=${3:?$usage}
results=${4:-benchmarks/results/static/$(basename "$workdir")}
python=${PYTHON:-.venv/bin/python}
dims=${DIMS:-100 300}
methods=${METHODS:-skipgram cbow glove}
senses=$(dirname "$0")/../examples/senses

static=()
mkdir -p "$workdir/static"
for method in $methods; do
  for dim in $dims; do
    vectors="$workdir/static/${method}_$dim.txt"
    if [ ! -f "$vectors" ]; then
      "$python" -m elmo_jax.cli.static --workdir="$workdir" --method="$method" --dim="$dim" --out="$vectors"
    fi
    static+=(--static="$vectors")
  done
done

out="$workdir/static/probes"
probe=("$python" -m elmo_jax.probe --workdir="$workdir" --normalize=ptb --no_progress "${static[@]}")
"${probe[@]}" --task=upos --train="$ewt/en_ewt-ud-dev.conllu" --test="$ewt/en_ewt-ud-test.conllu" --output="$out/upos"
"${probe[@]}" --task=wsd --data="$coarsewsd" --output="$out/wsd"
"${probe[@]}" --task=wsd --data="$senses" --output="$out/senses"

mkdir -p "$results"/{upos,wsd,senses}
for task in upos wsd senses; do
  cp "$out/$task"/probe_*.json "$results/$task/"
  cp "$workdir"/config.json "$workdir"/metrics.jsonl "$workdir"/eval_*.json "$results/$task/"
done
