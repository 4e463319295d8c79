"""Kim et al. 2016 LSTM-Char-Small (published PTB test perplexity 92.3), trained as a biLM.

  python train.py --config=configs/ptb_char_small.py --workdir=runs/ptb_char_small
  python evaluate.py --config=configs/ptb_char_small.py --workdir=runs/ptb_char_small --split=test

Architecture (Kim, Jernite, Sontag & Rush, "Character-Aware Neural Language Models", table 2):
character embeddings of 15, tanh convolutions of widths 1-6 with 25 * width filters (525 in all),
one highway layer, two LSTM layers of 300 without projection, clipping or residual connections,
dropout 0.5 between the layers and before the softmax but not on the token embeddings. As in
every elmo-jax biLM the token embedding is projected to the LSTM size and the softmax is shared
by the two directions.

Recipe (theirs, except batch and schedule): SGD with learning rate 1 on the full softmax, windows
of 35 steps, gradients of the loss summed over the window's steps (and here over both directions:
`loss_scale` = 2 x 35), norm clipped to 5 per direction (5 sqrt(2) for the two), parameters drawn
from U(-0.05, 0.05). Batches of 32 rather than 20 streams (CPU throughput) and 20 epochs rather
than 25, with the learning rate following a cosine to 0 instead of being halved on a validation
plateau, so that training fits in 2 hours on 2 CPU cores. Validation perplexity is logged every
2 epochs; test is evaluated once, on the final checkpoint.

Result: see docs/reproductions.md.
"""

from configs import default

TOKENS_PER_EPOCH = 929_589  # PTB train: 887,521 words + 42,068 sentence ends.


def get_config():
    config = default.get_config()
    config.data.source = "ptb"
    config.data.eval_split = "valid"
    config.data.max_chars_per_token = 21  # The longest PTB word has 19 characters.
    m = config.model
    m.char_cnn.embed_dim = 15
    m.char_cnn.filters = [[w, 25 * w] for w in range(1, 7)]
    m.char_cnn.activation = "tanh"
    m.char_cnn.n_highway = 1
    m.lstm.dim = 300
    m.lstm.projection_dim = 300  # = dim: no projection.
    m.lstm.n_layers = 2
    m.lstm.cell_clip = 0.0
    m.lstm.proj_clip = 0.0
    m.lstm.use_skip_connections = False
    m.dropout = 0.5
    m.token_dropout = 0.0
    m.softmax.sampled = False
    m.softmax.chunk_size = 16384  # The whole 10k vocabulary in one chunk.
    t = config.train
    t.batch_size = 32
    t.unroll_steps = 35
    t.num_epochs = 20
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
