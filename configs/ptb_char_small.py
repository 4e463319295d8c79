"""Kim et al. 2016 LSTM-Char-Small (published PTB test perplexity 92.3), trained as a biLM.

  python train.py --config=configs/ptb_char_small.py --workdir=runs/ptb_char_small
  python evaluate.py --workdir=runs/ptb_char_small --split=test

Character embeddings of 15, tanh convolutions of widths 1-6 with 25 x width filters (525), one
highway layer whose 525 outputs feed the first of two LSTM layers of 300 units (no token
projection: `model.char_cnn.projection=False`); the softmax is shared by the two directions.
18 epochs, dropout 0.3 between the layers and before the softmax (Kim et al.: 25 epochs at 0.5),
none on the token embeddings; the rest of the recipe is configs/ptb.py's.

Result (one H100, 18 epochs): test perplexity 91.64 forward, 90.13 backward, 90.88 biLM, against
the published 92.3. On 2 AMD EPYC Zen 4 cores 18 epochs take about 2.5 hours:
configs/ptb_char_small_cpu.py is the 2-hour CPU variant.
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    return ptb.char_small_config(num_epochs=18, dropout=0.3)
