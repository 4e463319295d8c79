"""configs/ptb_char_small_cpu.py with Transformers in place of its LSTMs: the contextualizer ablation
of Peters et al. 2018b on PTB (docs/contextualizers.md).

  python train.py --config=configs/ptb_char_small_transformer.py --workdir=runs/ptb_char_small_transformer
  python evaluate.py --workdir=runs/ptb_char_small_transformer --split=test

The char CNN (525 channels, one highway layer, no token projection), the softmax, the data, the
dropout and the 15-epoch cosine schedule are ptb_char_small_cpu's (ptb_char_small's model,
shortened for 2 CPU cores), so the LSTM, gated-CNN and Transformer rows of docs/contextualizers.md
share a recipe, but for the optimizer: Adam at 1e-3 after 400 warmup steps (AllenNLP's Transformer
biLM trains with Adam too), where SGD at the LSTMs' rate of 1 diverges and at 0.1 barely learns.
Per direction, with its own weights (as Peters et al. 2018b and AllenNLP): a linear map of the 525
channels to 300, 2 pre-norm blocks of 300 with 6 heads and a feed-forward layer of 690, sinusoidal
positions on the queries and keys. Windows of 35 (train.unroll_steps) attend to a memory of the
previous 35 positions of their stream. Parameters, counted with the model's init (10,001-word PTB
vocabulary):
  ptb_char_small_cpu          7,025,981  (char CNN 590,880; LSTMs 3,424,800; softmax 3,010,301)
  ptb_char_small_transformer  7,027,541  (char CNN 590,880; Transformer 3,426,360; softmax 3,010,301)
"""

from elmo_jax.config.recipes import recipe_module

ptb = recipe_module("ptb")


def get_config():
    config = ptb.char_small_cpu_config()
    ptb.adam_instead_of_sgd(config)
    config.model.contextualizer = "transformer"
    tfm = config.model.transformer
    tfm.n_layers = 2
    tfm.ff_dim = 690
    tfm.n_heads = 6
    tfm.norm = "pre"
    tfm.positions = "sinusoidal"
    tfm.shared_directions = False
    tfm.memory_length = config.train.unroll_steps
    tfm.max_window = config.train.unroll_steps
    return config
