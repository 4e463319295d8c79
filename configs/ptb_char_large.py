"""Kim et al. 2016 LSTM-Char-Large (published PTB test perplexity 78.9), trained as a biLM.

  python train.py --config=configs/ptb_char_large.py --workdir=runs/ptb_char_large
  python evaluate.py --workdir=runs/ptb_char_large --split=test

Character embeddings of 15, tanh convolutions of widths 1-7 with min(200, 50 x width) filters
(1100), two highway layers feeding the first of two LSTM layers of 650 units directly; dropout 0.5
between the layers and before the softmax, not on the token embeddings. 25 epochs (Kim et al.'s count); the recipe is
configs/ptb.py's.

Result (one H100, 25 epochs, 11 minutes of training steps beside four other runs): test perplexity 76.78 forward,
76.30 backward, 76.54 biLM, against the published 78.9 (docs/reproductions.md).
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    config = ptb.ptb_config("char_cnn", dim=650, num_epochs=25, token_dropout=0.0)
    ptb.kim_char_cnn(config, [[w, min(200, 50 * w)] for w in range(1, 8)], n_highway=2)
    return config
