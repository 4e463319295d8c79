"""configs/tests/tiny.py with projection_dim == dim: LSTM layers without projection, as bilm-tf.

  python train.py --config=configs/tests/no_projection.py --workdir=/tmp/no_projection
"""

from elmo_jax.config.recipes import recipe_module

tiny = recipe_module("tests/tiny")


def get_config():
    config = tiny.get_config()
    config.model.lstm.dim = 8
    config.model.width = 8  # = dim: no W_P, h = sigmoid(o) tanh(c), proj_clip unused.
    return config
