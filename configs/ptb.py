"""The Penn Treebank recipe shared by the configs/ptb_*.py reproductions.

The models of Kim et al. 2016 ("Character-Aware Neural Language Models") and Zaremba et al. 2014
("Recurrent Neural Network Regularization"), trained as biLMs on the bundled PTB (Mikolov's
split, 10k vocabulary): LSTMs without projection, clipping or residual connections, dropout 0.5
(0.3 for the shorter char-small run) on the non-recurrent connections, parameters from
U(-0.05, 0.05), full softmax.

Their recipe, except the schedule: SGD with learning rate 1, the training text in its order split
into 20 contiguous streams (`data.streams='contiguous'`, states carried from window to window),
windows of 35 steps, gradients of the loss summed over the window's steps (here also over both
directions: `loss_scale` = 2 x 35), norm clipped to 5 per direction
(5 sqrt(2) for the two); a cosine decay of the learning rate to 0 in place of halving it on a
validation plateau. Validation perplexity is logged every 2 epochs; test is evaluated once, on
the final checkpoint (`evaluate.py --split=test`).
"""

import ml_collections

from elmo_jax.config import schema

TOKENS_PER_EPOCH = 929_589  # PTB train: 887,521 words + 42,068 sentence ends.


def ptb_config(
    token_encoder: str, dim: int, num_epochs: int, token_dropout: float, dropout: float = 0.5
) -> ml_collections.ConfigDict:
    """The shared recipe for a 2-layer LSTM of `dim` units without projection.

    dropout: on the LSTM layers' inputs (but the first's) and outputs (the papers: 0.5).
    token_dropout: dropout on the token embeddings (Kim et al.: 0; Zaremba et al.: 0.5).
    """
    config = schema.get_config()
    config.data.source = "ptb"
    config.data.eval_split = "valid"
    config.data.streams = "contiguous"  # The text in order, as the papers train.
    config.data.max_chars_per_token = 21  # The longest PTB word has 19 characters.
    m = config.model
    m.token_encoder = token_encoder
    m.distinct_fraction = 0.5  # A PTB batch is 45% distinct words: the char CNN encodes each once.
    m.init_range = 0.05
    m.lstm.dim = dim
    m.width = dim  # = dim: no projection.
    m.lstm.n_layers = 2
    m.lstm.cell_clip = 0.0
    m.lstm.proj_clip = 0.0
    m.lstm.use_skip_connections = False
    m.dropout = dropout
    m.token_dropout = token_dropout
    m.softmax.sampled = False
    m.softmax.chunk_size = 16384  # The whole 10k vocabulary in one chunk.
    t = config.train
    t.batch_size = 20
    t.unroll_steps = 35
    t.num_epochs = num_epochs
    t.optimizer.name = "sgd"
    t.optimizer.learning_rate = 1.0
    t.optimizer.schedule = "cosine"
    t.loss_scale = 2 * t.unroll_steps
    t.clip_norm = 5.0 * 2**0.5
    t.log_every_steps = 100
    t.checkpoint_every_steps = 1000
    config.eval.batch_size = 20
    config.eval.unroll_steps = 35
    config.eval.every_steps = 2 * TOKENS_PER_EPOCH // (t.batch_size * t.unroll_steps)
    return config


def kim_char_cnn(config: ml_collections.ConfigDict, filters: list[list[int]], n_highway: int) -> None:
    """Kim et al.'s token encoder: character embeddings of 15, tanh convolutions, highway layers
    whose output feeds the first LSTM layer directly (no projection to the LSTM size)."""
    cnn = config.model.char_cnn
    cnn.embed_dim = 15
    cnn.filters = filters
    cnn.activation = "tanh"
    cnn.n_highway = n_highway
    cnn.projection = False


def char_small_config(num_epochs: int, dropout: float) -> ml_collections.ConfigDict:
    """Kim et al.'s LSTM-Char-Small: convolutions of widths 1-6 with 25 x width filters (525), one
    highway layer, two LSTM layers of 300. Here rather than in configs/ptb_char_small.py so that its
    variants build on this file alone: a recipe builds on at most one other."""
    config = ptb_config("char_cnn", dim=300, num_epochs=num_epochs, token_dropout=0.0, dropout=dropout)
    kim_char_cnn(config, [[w, 25 * w] for w in range(1, 7)], n_highway=1)
    return config


def char_small_cpu_config() -> ml_collections.ConfigDict:
    """LSTM-Char-Small shortened to train within 2 hours on 2 CPU cores (configs/ptb_char_small_cpu.py):
    15 epochs instead of 18 and dropout 0.25 instead of 0.3; also the gated-CNN and Transformer
    variants' recipe."""
    return char_small_config(num_epochs=15, dropout=0.25)


def adam_instead_of_sgd(config: ml_collections.ConfigDict) -> None:
    """Adam at 1e-3 after 400 linear warmup steps, then the recipe's cosine decay: the optimizer of
    the gated-CNN and Transformer biLMs, which SGD does not train (docs/contextualizers.md)."""
    opt = config.train.optimizer
    opt.name = "adam"
    opt.learning_rate = 1e-3
    opt.warmup_steps = 400
