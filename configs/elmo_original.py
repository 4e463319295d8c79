"""The original ELMo (93.6M parameters without the softmax): LSTM 4096/512, 2 highway layers.

Trained as bilm-tf did, e.g. on the 1B Word Benchmark as text files:

  python train.py --config=configs/elmo_original.py --workdir=runs/elmo_original \\
      --config.data.source=text --config.data.train_files='lm1b/training/news.en-*' \\
      --config.data.eval_files='lm1b/heldout/news.en.heldout-00000-of-00050' \\
      --config.data.vocab_file=lm1b/vocab.txt
"""

from elmo_jax.config.recipes import recipe_module

released_config = recipe_module("released").released_config


def get_config():
    return released_config(dim=4096, projection_dim=512, n_highway=2)
