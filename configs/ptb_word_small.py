"""Kim et al. 2016 LSTM-Word-Small (published PTB test perplexity 97.6), trained as a biLM.

  python train.py --config=configs/ptb_word_small.py --workdir=runs/ptb_word_small
  python evaluate.py --workdir=runs/ptb_word_small --split=test

Word embeddings of 200, two LSTM layers of 200 units; dropout 0.5 between the layers and before
the softmax, not on the embeddings. 25 epochs (theirs); the recipe is configs/ptb.py's.

Result (one H100, 25 epochs): test perplexity 94.49 forward, 94.38 backward, 94.43 biLM, against
the published 97.6 (docs/reproductions.md).
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    return ptb.ptb_config("word", dim=200, num_epochs=25, token_dropout=0.0)
