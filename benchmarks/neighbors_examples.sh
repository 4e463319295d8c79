#!/usr/bin/env bash
# docs/embeddings.md's contextual nearest neighbours of "play", made by the README's quick-start run
# (runs/demo): the PTB training text written out once, skip-gram vectors of the run's text and
# vocabulary (elmo-static, for the last query's --static list), then each query's elmo-neighbors output to
# RESULTS_DIR/<name>.txt, its first line the command that printed it. A file already there is kept
# (delete it to run its query again). tests/inference/test_neighbors_doc.py checks that the doc's
# output blocks are these files.
#
#   bash benchmarks/neighbors_examples.sh [WORKDIR] [RESULTS_DIR]   # runs/demo benchmarks/results/neighbors
set -euo pipefail
workdir=${1:-runs/demo}
results=${2:-benchmarks/results/neighbors}
python=${PYTHON:-.venv/bin/python}
corpus=runs/ptb.train.txt
mkdir -p "$results" runs
if [ ! -s "$corpus" ]; then
  "$python" -c "from elmo_jax.data.sources import ptb_sentences
print('\n'.join(' '.join(s) for s in ptb_sentences('train')))" > "$corpus"
fi
vectors=$workdir/static/skipgram_100.txt
[ -s "$vectors" ] || "$python" -m elmo_jax.cli.static --workdir "$workdir" --method skipgram --dim 100 --out "$vectors"
queries=(
  "verb_role|he will play the role of the king|2"
  "verb_children|the children play in the park|2"
  "noun_game|he made a spectacular play on the ground ball|4"
  "noun_theatre|she signed to do a broadway play for the director|6"
  "verb_role_static|he will play the role of the king|2|--static $vectors"
)
for entry in "${queries[@]}"; do
  IFS='|' read -r name query word extra <<< "$entry"
  out=$results/$name.txt
  [ -s "$out" ] && continue
  command="elmo-neighbors --workdir $workdir --corpus $corpus --query \"$query\" --word $word${extra:+ $extra}"
  # shellcheck disable=SC2086  # $extra: flags, split.
  { echo "\$ $command"; "$python" -m elmo_jax.neighbors --workdir "$workdir" --corpus "$corpus" \
      --query "$query" --word "$word" $extra --no_progress; } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out"
done
