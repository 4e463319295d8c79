"""Small ELMo (13.6M parameters without the softmax): LSTM 1024/128, 1 highway layer.

Trained as bilm-tf did, e.g. on the 1B Word Benchmark as text files:

  python train.py --config=configs/elmo_small.py --workdir=runs/elmo_small \\
      --config.data.source=text --config.data.train_files='lm1b/training/news.en-*' \\
      --config.data.eval_files='lm1b/heldout/news.en.heldout-00000-of-00050' \\
      --config.data.vocab_file=lm1b/vocab.txt
"""

from elmo_jax.config.recipes import recipe_module

released_config = recipe_module("released").released_config


def get_config():
    return released_config(dim=1024, projection_dim=128, n_highway=1)
