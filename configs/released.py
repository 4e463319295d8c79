"""The shared recipe of the released ELMo shapes (configs/elmo_{small,medium,original}.py).

2-layer biLSTMs with projection and residual connections over a 2048-filter char CNN, trained
with the recipe of bilm-tf's `bin/train_elmo.py` and `bilm/training.py`, on one device or many:
- batch: 3 GPU towers x 128 streams = 384 streams per direction, 20 steps unrolled; gradients
  averaged over the towers (elmo-jax: the mean over all 384 streams' tokens, the same thing);
- sampled softmax: each tower draws its own 8192 distinct log-uniform candidates for each
  direction (`streams_per_draw=128`, `negatives_per_direction=True`);
- the gradient of 20 x the loss (`loss_scale = unroll_steps`), clipped to global norm 10, then
  Adagrad with learning rate 0.2 and initial accumulator 1.0;
- dropout 0.1, LSTM kernels initialised as TF's default (Glorot uniform), 10 epochs.
docs/bilm_tf_differences.md lists what still differs. The 3 groups of streams and the device
count must divide one another: 1, 3, 6, 12, ... devices (the loss is the same on any of them).
A batch of at most 128 streams (benchmarks, small runs) draws once per step.
"""

from elmo_jax.config import schema

BILM_TF_TOWERS = 3  # bilm-tf's n_gpus.
BILM_TF_TOWER_BATCH = 128  # bilm-tf's batch_size, per GPU.


def released_config(dim: int, projection_dim: int, n_highway: int):
    config = schema.get_config()
    m = config.model
    m.char_cnn.embed_dim = 16
    m.char_cnn.filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
    m.char_cnn.n_highway = n_highway
    m.char_cnn.activation = "relu"
    m.lstm.dim = dim
    m.width = projection_dim
    m.lstm.n_layers = 2
    m.lstm.cell_clip = 3.0
    m.lstm.proj_clip = 3.0
    m.lstm.use_skip_connections = True
    m.lstm.initializer = "glorot_uniform"
    m.dropout = 0.1
    m.softmax.sampled = True
    m.softmax.n_negative_samples = 8192
    m.softmax.unique_samples = True
    m.softmax.streams_per_draw = BILM_TF_TOWER_BATCH
    m.softmax.negatives_per_direction = True
    t = config.train
    t.batch_size = BILM_TF_TOWERS * BILM_TF_TOWER_BATCH
    t.unroll_steps = 20
    t.num_steps = 0
    t.num_epochs = 10
    t.stateful = True
    t.optimizer.name = "adagrad"
    t.optimizer.learning_rate = 0.2
    t.optimizer.initial_accumulator_value = 1.0
    t.optimizer.schedule = "constant"
    t.optimizer.warmup_steps = 0
    t.loss_scale = float(t.unroll_steps)
    t.clip_norm = 10.0
    return config
