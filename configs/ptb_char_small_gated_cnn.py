"""configs/ptb_char_small_cpu.py with a gated CNN (Dauphin et al. 2017) in place of its LSTMs: the
contextualizer ablation of Peters et al. 2018b on PTB (docs/contextualizers.md).

  python train.py --config=configs/ptb_char_small_gated_cnn.py --workdir=runs/ptb_char_small_gated_cnn
  python evaluate.py --workdir=runs/ptb_char_small_gated_cnn --split=test

The char CNN (525 channels, one highway layer, no token projection), the softmax, the data, the
dropout and the 15-epoch cosine schedule are ptb_char_small_cpu's (ptb_char_small's model,
shortened for 2 CPU cores), so the LSTM, gated-CNN and Transformer rows of docs/contextualizers.md
share a recipe, but for the optimizer: Adam at 1e-3 after 400 warmup steps, as the Transformer's
(SGD at the LSTMs' rate of 1 diverges).
Per direction: 4 causal GLU layers of 300, kernel width 2 with dilations 1, 2, 4, 8 (WaveNet's
doubling), residual around layers 2-4; the first reads the 525 channels. Parameters, counted with
the model's init (10,001-word PTB vocabulary):
  ptb_char_small_cpu        7,025,981  (char CNN 590,880; LSTMs 3,424,800; softmax 3,010,301)
  ptb_char_small_gated_cnn  7,025,981  (char CNN 590,880; gated CNN 3,424,800; softmax 3,010,301)
Each output sees 16 positions of its stream (1 + (k - 1)(1 + 2 + 4 + 8); 5 without dilation, as
Dauphin et al.'s contiguous taps: `--config.model.gated_cnn.dilation_base=1`), the carried buffers
supplying the left context across windows.
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    config = ptb.char_small_cpu_config()
    ptb.adam_instead_of_sgd(config)
    config.model.contextualizer = "gated_cnn"
    gcnn = config.model.gated_cnn
    gcnn.kernel_width = 2
    gcnn.n_layers = 4
    gcnn.residual = True
    gcnn.dilation_base = 2
    return config
