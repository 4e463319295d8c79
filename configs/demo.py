"""Demo: a small char-CNN biLM on the bundled Penn Treebank, on CPU in a few minutes.

  python train.py --config=configs/demo.py --workdir=runs/demo

Reached on 2 CPU cores (3 to 6 minutes of training): PTB test perplexity 152.73 forward, 153.08
backward, 152.91 biLM (README, "Demo result").
"""

from elmo_jax.config import schema


def get_config():
    config = schema.get_config()
    config.data.source = "ptb"
    config.data.eval_split = "test"
    config.data.max_chars_per_token = 20  # PTB words are short; cuts the char CNN's cost 2.5x.
    m = config.model
    m.char_cnn.embed_dim = 16
    m.char_cnn.filters = [[1, 32], [2, 32], [3, 64], [4, 128]]
    m.char_cnn.n_highway = 1
    m.lstm.dim = 256
    m.width = 128
    m.lstm.n_layers = 2
    m.dropout = 0.0
    m.softmax.n_negative_samples = 1024
    t = config.train
    t.batch_size = 64
    t.unroll_steps = 20
    t.num_steps = 1800
    t.optimizer.name = "adam"
    t.optimizer.learning_rate = 6e-3
    t.optimizer.b2 = 0.99
    t.optimizer.schedule = "cosine"
    t.optimizer.warmup_steps = 100
    t.clip_norm = 5.0
    t.log_every_steps = 50
    t.checkpoint_every_steps = 500
    config.eval.batch_size = 64
    return config
