"""Full-softmax perplexity of a trained biLM (the `elmo-evaluate` command; flags: elmo_jax/cli/evaluate.py).

  python evaluate.py --workdir=runs/demo [--split=test] [--eval_files=GLOB] [--step=N] [--output=R.json]
  python evaluate.py --options=O --weights=H --softmax_weights=S --vocab=V --eval_files=GLOB [--output=R.json]
"""

from elmo_jax.cli.evaluate import run

if __name__ == "__main__":
    run()
