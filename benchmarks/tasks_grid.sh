#!/usr/bin/env bash
# The task models' grid (docs/tasks.md): one `elmo-task train` a cell (task x input x training share x
# seed); a cell whose results are in OUT is skipped, so rerunning continues an interrupted grid.
#
#   bash benchmarks/tasks_grid.sh                       # OUT=benchmarks/results/tasks
#   TASKS="upos_ewt ner_ewt" INPUTS="words glove elmo" FRACTIONS="0.1 1" SEEDS="0 1 2" bash benchmarks/tasks_grid.sh
#
# Needs the task files (data/ud_english_ewt, data/uner_english_ewt: docs/tasks.md) and the README's
# demo biLM (runs/demo); GloVe and skip-gram vectors on the demo's own text and vocabulary are made
# with elmo-static when missing (runs/static/). Each cell's workdir is runs/tasks/<cell>; its
# results.json, metrics.jsonl and config.json are copied to OUT/<cell>/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/results/tasks}
TASKS=${TASKS:-"upos_ewt ner_ewt"}
INPUTS=${INPUTS:-"words glove elmo"}
FRACTIONS=${FRACTIONS:-"0.1"}
SEEDS=${SEEDS:-"0 1 2"}
BILM=${BILM:-runs/demo}

vectors() {  # $1: glove | skipgram -> the vector file, trained once on the biLM's text.
  local file="runs/static/$1_$(basename "$BILM").txt"
  if [[ ! -f "$file" ]]; then
    "$PYTHON" -m elmo_jax.cli.static --workdir "$BILM" --method "$1" --dim 100 --out "$file" >&2
  fi
  echo "$file"
}

input_flags() {
  case "$1" in
    words) echo "--config.inputs.word.dim=100" ;;
    glove|skipgram) echo "--config.inputs.static.file=$(vectors "$1")" ;;
    elmo) echo "--config.inputs.elmo.workdir=$BILM" ;;
    elmo_glove) echo "--config.inputs.elmo.workdir=$BILM --config.inputs.static.file=$(vectors glove)" ;;
    *) echo "unknown input $1" >&2; exit 1 ;;
  esac
}

for task in $TASKS; do
  for fraction in $FRACTIONS; do
    for seed in $SEEDS; do
      for input in $INPUTS; do
        cell="${task}_${input}_f${fraction}_s${seed}"
        [[ -f "$OUT/$cell/results.json" ]] && continue
        echo "== $cell" >&2
        # shellcheck disable=SC2046  # input_flags gives several flags.
        "$PYTHON" -m elmo_jax.task train --config="configs/tasks/$task.py" --workdir="runs/tasks/$cell" \
          --config.seed="$seed" --config.data.train_fraction="$fraction" $(input_flags "$input") --no_progress
        mkdir -p "$OUT/$cell"
        cp "runs/tasks/$cell/"{results.json,metrics.jsonl,config.json} "$OUT/$cell/"
      done
    done
  done
done
