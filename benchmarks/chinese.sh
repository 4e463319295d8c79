#!/usr/bin/env bash
# The Chinese demo (configs/demo_zh.py) reading characters against the same model reading UTF-8 bytes,
# SEEDS seeds each: test perplexity on UD Chinese GSDSimp, UPOS probes by layer (trained on GSDSimp
# dev, scored on its test, with the random-init control for seed 0) and training tokens/s.
#
#   bash benchmarks/chinese.sh CHINESE_DIR [RUNS_DIR] [RESULTS_DIR]
#   SEEDS="0 1 2" VARIANTS="chars bytes" bash benchmarks/chinese.sh ../shared/data/chinese
#   EXTRA="--config.model.char_cnn.embed_dim=32" TAG=_e32 bash benchmarks/chinese.sh ../shared/data/chinese
#   python benchmarks/chinese_table.py benchmarks/results/chinese      # the table
#
# chars: the recipe (a character vocabulary of the training text's characters seen twice, 10 units
# per token); bytes: the same model without one (data.char_vocab_min_count=0), 20 bytes per token
# (the demo's: 6 Chinese characters). EXTRA holds overrides for every run and TAG names them. Each
# variant and seed trains into RUNS_DIR/<variant><TAG>_s<seed> (default runs/chinese; a finished run
# is not trained again) and its results are copied to RESULTS_DIR/<variant><TAG>_s<seed> (default
# benchmarks/results/chinese).
set -euo pipefail
data=${1:?usage: bash benchmarks/chinese.sh CHINESE_DIR [RUNS_DIR] [RESULTS_DIR]}
runs=${2:-runs/chinese}
results=${3:-benchmarks/results/chinese}
python=${PYTHON:-.venv/bin/python}
seeds=${SEEDS:-0 1 2}
variants=${VARIANTS:-chars bytes}
read -r -a extra <<< "${EXTRA:-}"
tag=${TAG:-}

for seed in $seeds; do
  for variant in $variants; do
    overrides=(--config.seed="$seed" "${extra[@]}")
    if [ "$variant" = bytes ]; then
      overrides+=(--config.data.char_vocab_min_count=0 --config.data.max_chars_per_token=20)
    fi
    workdir="$runs/${variant}${tag}_s$seed"
    if ! compgen -G "$workdir/eval_files_*.json" > /dev/null; then
      "$python" train.py --config="configs/demo_zh.py:$data" --workdir="$workdir" "${overrides[@]}"
    fi
    probe=("$python" -m elmo_jax.probe --workdir="$workdir" --task=upos --no_progress
           --train="$data/zh_gsdsimp-ud-dev.conllu" --test="$data/zh_gsdsimp-ud-test.conllu")
    "${probe[@]}"
    if [ "$seed" = "$(echo "$seeds" | cut -d' ' -f1)" ]; then
      "${probe[@]}" --control=random_init
    fi
    mkdir -p "$results/${variant}${tag}_s$seed"
    cp "$workdir"/eval_*.json "$workdir"/probe_upos*.json "$workdir"/config.json "$workdir"/metrics.jsonl \
       "$workdir"/run_info.json "$results/${variant}${tag}_s$seed/"
    if [ -f "$workdir/chars.txt" ]; then
      cp "$workdir/chars.txt" "$results/${variant}${tag}_s$seed/"
    fi
  done
done
