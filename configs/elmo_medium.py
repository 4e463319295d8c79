"""Medium ELMo (28.0M parameters without the softmax): LSTM 2048/256, 1 highway layer.

Trained as bilm-tf did, e.g. on the 1B Word Benchmark as text files:

  python train.py --config=configs/elmo_medium.py --workdir=runs/elmo_medium \\
      --config.data.source=text --config.data.train_files='lm1b/training/news.en-*' \\
      --config.data.eval_files='lm1b/heldout/news.en.heldout-00000-of-00050' \\
      --config.data.vocab_file=lm1b/vocab.txt
"""

from elmo_jax.config.recipes import recipe_module

released_config = recipe_module("released").released_config


def get_config():
    return released_config(dim=2048, projection_dim=256, n_highway=1)
