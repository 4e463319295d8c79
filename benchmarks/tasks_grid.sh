#!/usr/bin/env bash
# The task models' grid (docs/tasks.md): one `elmo-task train` a cell (task x input x training share x
# seed); a cell whose results are in OUT is skipped, so rerunning continues an interrupted grid.
#
#   bash benchmarks/tasks_grid.sh                       # OUT=benchmarks/results/tasks
#   TASKS="upos_ewt ner_ewt" INPUTS="words glove elmo" FRACTIONS="0.1 1" SEEDS="0 1 2" bash benchmarks/tasks_grid.sh
#
# Needs the task files (data/ud_english_ewt, data/uner_english_ewt, data/chinese: docs/tasks.md) and
# the READMEs' demo biLMs (BILM=runs/demo for the English tasks, BILM_ZH=runs/demo_zh for the *_zh
# ones); GloVe and skip-gram vectors on a biLM's own text and vocabulary are made with elmo-static
# when missing (runs/static/). Each cell's workdir is runs/tasks/<cell>; its
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
BILM_ZH=${BILM_ZH:-runs/demo_zh}

vectors() {  # $1: glove | skipgram, $2: the biLM -> the vector file, trained once on the biLM's text.
  local file="runs/static/$1_$(basename "$2").txt"
  if [[ ! -f "$file" ]]; then
    "$PYTHON" -m elmo_jax.cli.static --workdir "$2" --method "$1" --dim 100 --out "$file" >&2
  fi
  echo "$file"
}

input_flags() {  # $1: the input, $2: the biLM.
  case "$1" in
    words) echo "--config.inputs.word.dim=100" ;;
    glove|skipgram) echo "--config.inputs.static.file=$(vectors "$1" "$2")" ;;
    elmo) echo "--config.inputs.elmo.workdir=$2" ;;
    elmo_glove) echo "--config.inputs.elmo.workdir=$2 --config.inputs.static.file=$(vectors glove "$2")" ;;
    # Peters et al.'s Table 2: the top layer alone, the mix with lambda 1 (near an average), gamma fixed at 1.
    elmo_top) echo "--config.inputs.elmo.workdir=$2 --config.inputs.elmo.mix=top" ;;
    elmo_l2_1) echo "--config.inputs.elmo.workdir=$2 --config.inputs.elmo.l2=1" ;;
    elmo_gamma_fixed) echo "--config.inputs.elmo.workdir=$2 --config.inputs.elmo.gamma=fixed" ;;
    *) echo "unknown input $1" >&2; exit 1 ;;
  esac
}

for task in $TASKS; do
  bilm=$BILM
  [[ "$task" == *_zh ]] && bilm=$BILM_ZH
  for fraction in $FRACTIONS; do
    for seed in $SEEDS; do
      for input in $INPUTS; do
        cell="${task}_${input}_f${fraction}_s${seed}"
        [[ -f "$OUT/$cell/results.json" ]] && continue
        echo "== $cell" >&2
        # shellcheck disable=SC2046  # input_flags gives several flags.
        "$PYTHON" -m elmo_jax.task train --config="configs/tasks/$task.py" --workdir="runs/tasks/$cell" \
          --config.seed="$seed" --config.data.train_fraction="$fraction" $(input_flags "$input" "$bilm") --no_progress
        mkdir -p "$OUT/$cell"
        cp "runs/tasks/$cell/"{results.json,metrics.jsonl,config.json} "$OUT/$cell/"
      done
    done
  done
done
