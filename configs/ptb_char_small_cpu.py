"""ptb_char_small's model and recipe, shortened to train within 2 hours on 2 CPU cores.

  python train.py --config=configs/ptb_char_small_cpu.py --workdir=runs/ptb_char_small_cpu
  python evaluate.py --workdir=runs/ptb_char_small_cpu --split=test

The architecture of configs/ptb_char_small.py (Kim et al. 2016 LSTM-Char-Small, published PTB
test perplexity 92.3); 15 epochs instead of 18 and dropout 0.25 instead of 0.3 (fewer epochs
need less regularisation).

Result (2 AMD EPYC Zen 4 cores, 1 h 53 min of training): test perplexity 91.78 forward,
90.68 backward, 91.23 biLM, against the published 92.3 (docs/reproductions.md).
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    return ptb.char_small_cpu_config()
