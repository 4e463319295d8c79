#!/usr/bin/env bash
# Word vectors measured as taught (docs/static_vectors.md, "Analogies and similarity on PTB,
# measured"): skip-gram and CBOW, each with negative sampling and hierarchical softmax, and GloVe,
# trained on a biLM's own text and vocabulary (elmo-static --workdir, DIM dimensions, the tool's
# defaults otherwise), and the biLM's own layers as static vectors (layer 0 and the LSTM layers
# pooled over its training text); then elmo-vectors on each (Google's analogies by 3CosAdd and
# 3CosMul, WordSim-353, SimLex-999; its default sets and --restrict) and once over all of them.
#
#   bash benchmarks/static_intrinsic.sh [WORKDIR] [RESULTS_DIR]
#   bash benchmarks/static_intrinsic.sh                              # runs/demo
#   CONTEXTS=20 bash benchmarks/static_intrinsic.sh                  # fewer contexts pooled a word
#   ANALOGIES=ca8.txt SIMILARITY=COS960_all.txt,wordsim-240.txt EXAMPLE="男人 女人 国王" \
#     bash benchmarks/static_intrinsic.sh runs/demo_zh benchmarks/results/static_intrinsic_zh   # Chinese
#
# ANALOGIES, SIMILARITY and EXAMPLE are elmo-vectors' --analogies, --similarity and --example (its
# defaults when unset: Google's analogies, WordSim-353 and SimLex-999, man woman king).
#
# A cell is one vector file, runs/static_intrinsic/<name>.txt (VECTORS_DIR); its elmo-vectors JSON
# is RESULTS_DIR/<name>.json (default benchmarks/results/static_intrinsic) and a cell whose JSON
# exists is skipped. Each training's seconds (date +%s around the command) and the tool's summary
# line go to RESULTS_DIR/<name>.train.json (elmo_layers.train.json: one command writes every
# layer). The last elmo-vectors over every file writes RESULTS_DIR/all.json and its printed table
# and example answers to RESULTS_DIR/all.md.
set -euo pipefail
workdir=${1:-runs/demo}
results=${2:-benchmarks/results/static_intrinsic}
python=${PYTHON:-.venv/bin/python}
vectors_dir=${VECTORS_DIR:-runs/static_intrinsic}
dim=${DIM:-100}
contexts=${CONTEXTS:-}
sets=(${ANALOGIES:+--analogies="$ANALOGIES"} ${SIMILARITY:+--similarity="$SIMILARITY"} ${EXAMPLE:+--example="$EXAMPLE"})
mkdir -p "$vectors_dir" "$results"

# train NAME ARGS...: runs elmo-static ARGS, logging to VECTORS_DIR/NAME.log, and writes
# RESULTS_DIR/NAME.train.json with its wall seconds and the tool's summary line.
train() {
  local name=$1
  shift
  local log="$vectors_dir/$name.log" start end
  start=$(date +%s)
  "$python" -m elmo_jax.cli.static --workdir="$workdir" "$@" 2>&1 | tee "$log"
  end=$(date +%s)
  "$python" - "$results/$name.train.json" "$name" "$((end - start))" "$log" "$@" <<'EOF'
import json, sys
out, name, seconds, log, *args = sys.argv[1:]
lines = [line.strip() for line in open(log, encoding="utf-8") if line.strip()]
with open(out, "w", encoding="utf-8") as f:
    json.dump({"name": name, "seconds": int(seconds), "args": args,
               "summary": lines[-1] if lines else ""}, f, indent=1)
    f.write("\n")
EOF
}

# measure NAME: elmo-vectors on VECTORS_DIR/NAME.txt, writing RESULTS_DIR/NAME.json.
measure() {
  "$python" -m elmo_jax.cli.vectors --vectors="$vectors_dir/$1.txt" "${sets[@]}" --output="$results/$1.json"
}

files=()
for method in skipgram cbow; do
  for objective in negative hierarchical; do
    name=${method}_$objective
    files+=("$vectors_dir/$name.txt")
    [ -f "$results/$name.json" ] && continue
    if [ ! -f "$vectors_dir/$name.txt" ]; then
      train "$name" --method="$method" --objective="$objective" --dim="$dim" --out="$vectors_dir/$name.txt"
    fi
    measure "$name"
  done
done

files+=("$vectors_dir/glove.txt")
if [ ! -f "$results/glove.json" ]; then
  if [ ! -f "$vectors_dir/glove.txt" ]; then
    train glove --method=glove --dim="$dim" --out="$vectors_dir/glove.txt"
  fi
  measure glove
fi

# The biLM's layers: one command writes elmo.layer0.txt, elmo.layer1.txt, ...
if [ ! -f "$vectors_dir/elmo.layer0.txt" ]; then
  train elmo_layers --method=elmo_layers ${contexts:+--contexts="$contexts"} --out="$vectors_dir/elmo"
fi
for layer_file in "$vectors_dir"/elmo.layer*.txt; do
  name=$(basename "$layer_file" .txt)
  files+=("$layer_file")
  [ -f "$results/$name.json" ] || measure "$name"
done

list=$(IFS=,; echo "${files[*]}")
"$python" -m elmo_jax.cli.vectors --vectors="$list" "${sets[@]}" --output="$results/all.json" | tee "$results/all.md"
