"""Kim et al. 2016 LSTM-Char-Small (published PTB test perplexity 92.3), trained as a biLM.

  python train.py --config=configs/ptb_char_small.py --workdir=runs/ptb_char_small
  python evaluate.py --config=configs/ptb_char_small.py --workdir=runs/ptb_char_small --split=test

Character embeddings of 15, tanh convolutions of widths 1-6 with 25 x width filters (525), one
highway layer whose 525 outputs feed the first of two LSTM layers of 300 units (no token
projection: `model.char_cnn.projection=False`); dropout 0.5 between the layers and before the
softmax, not on the token embeddings. The softmax is shared by the two directions. 18 epochs; the
recipe is configs/ptb.py's.

Result (2 AMD EPYC Zen 5 cores, 94 minutes): test perplexity 104.54 forward, 102.47 backward,
103.50 biLM; the published 92.3 is not reached yet (docs/reproductions.md).
"""

from configs import ptb


def get_config():
    config = ptb.ptb_config("char_cnn", dim=300, num_epochs=18, token_dropout=0.0)
    ptb.kim_char_cnn(config, [[w, 25 * w] for w in range(1, 7)], n_highway=1)
    return config
