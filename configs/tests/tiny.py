"""Tiny shapes for tests: a few seconds per run on CPU.

  python train.py --config=configs/tests/tiny.py --workdir=/tmp/tiny
"""

from elmo_jax.config import schema


def get_config():
    config = schema.get_config()
    config.data.max_chars_per_token = 12
    config.data.prefetch_batches = 2
    m = config.model
    m.char_cnn.embed_dim = 4
    m.char_cnn.filters = [[1, 4], [2, 8], [3, 8]]
    m.char_cnn.n_highway = 1
    m.lstm.dim = 16
    m.width = 8
    m.lstm.n_layers = 2
    m.softmax.n_negative_samples = 16
    m.softmax.chunk_size = 64
    t = config.train
    t.batch_size = 4
    t.unroll_steps = 5
    t.num_steps = 10
    t.log_every_steps = 5
    t.checkpoint_every_steps = 5
    config.eval.batch_size = 4
    config.eval.unroll_steps = 5
    return config
