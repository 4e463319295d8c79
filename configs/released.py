"""The shared recipe of the released ELMo shapes (configs/elmo_{small,medium,original}.py).

2-layer biLSTMs with projection and residual connections over a 2048-filter char CNN, trained as
bilm-tf trained them: sampled softmax with 8192 candidates, Adagrad 0.2, batch 128 x 20, dropout
0.1, gradient norm clipped to 10.
"""

from configs import default


def released_config(dim: int, projection_dim: int, n_highway: int):
    config = default.get_config()
    m = config.model
    m.char_cnn.embed_dim = 16
    m.char_cnn.filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
    m.char_cnn.n_highway = n_highway
    m.char_cnn.activation = "relu"
    m.lstm.dim = dim
    m.lstm.projection_dim = projection_dim
    m.lstm.n_layers = 2
    m.lstm.cell_clip = 3.0
    m.lstm.proj_clip = 3.0
    m.lstm.use_skip_connections = True
    m.dropout = 0.1
    m.softmax.sampled = True
    m.softmax.n_negative_samples = 8192
    config.train.batch_size = 128
    config.train.unroll_steps = 20
    config.train.num_steps = 0
    config.train.num_epochs = 10
    config.train.optimizer.name = "adagrad"
    config.train.optimizer.learning_rate = 0.2
    config.train.clip_norm = 10.0
    return config
