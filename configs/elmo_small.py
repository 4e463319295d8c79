"""Small ELMo (13.6M params without softmax): LSTM 1024/128, 1 highway layer.

Shapes of the released AllenNLP/bilm-tf ELMo models, trained as bilm-tf did on the 1B Word
Benchmark (sampled softmax over a 793k-word vocabulary, Adagrad 0.2, batch 128 x 20 per step):

  python train.py --config=configs/elmo_small.py --workdir=runs/elmo_small \
      --config.data.source=text --config.data.train_files='lm1b/training/news.en-*' \
      --config.data.eval_files='lm1b/heldout/news.en.heldout-00000-of-00050' \
      --config.data.vocab_file=lm1b/vocab.txt
"""

from configs import default


def get_config():
    config = default.get_config()
    m = config.model
    m.char_cnn.embed_dim = 16
    m.char_cnn.filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
    m.char_cnn.n_highway = 1
    m.char_cnn.activation = "relu"
    m.lstm.dim = 1024
    m.lstm.projection_dim = 128
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
