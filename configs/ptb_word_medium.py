"""Zaremba et al. 2014 medium regularized LSTM (published PTB test perplexity 82.7), as a biLM.

  python train.py --config=configs/ptb_word_medium.py --workdir=runs/ptb_word_medium
  python evaluate.py --workdir=runs/ptb_word_medium --split=test

Word embeddings of 650, two LSTM layers of 650 units, dropout 0.5 on every non-recurrent
connection (the embeddings included). 39 epochs (theirs); the recipe is configs/ptb.py's.

Result: docs/reproductions.md.
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    return ptb.ptb_config("word", dim=650, num_epochs=39, token_dropout=0.5)
