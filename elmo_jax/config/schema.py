"""Every configuration key of elmo-jax, declared once: its default, the values it allows and its meaning.

`SCHEMA` is a tree of `Section`s whose leaves are `Key`s. From it come `get_config()` (the
ml_collections config that recipes (configs/*.py) start from and any key of which can be overridden
on the command line, e.g. `--config.model.lstm.dim=1024`), the checks of validation.py
(`keys()`), the keyword arguments of the module a section configures (`section_options`: a key's
"off" value becomes None) and the table of docs/config.md (`schema_table()`).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, NamedTuple

import ml_collections

from elmo_jax.config.checks import (
    BOOLEAN, FILTERS, STRING, Check, dropout_rate, integer, number, one_of, zero_or_integer,
)
from elmo_jax.config.overrides import get_key

# A char-CNN token is [BOW, chars..., EOW, pad...] (elmo_jax/data/chars.py): room for one character.
MIN_CHARS_PER_TOKEN = 3
# <S>, </S>, <UNK> and a handful of words: with fewer every word is <UNK> and perplexity means nothing.
MIN_VOCAB_SIZE = 8
# The held-out splits of a corpus: data.eval_split's values and evaluate.py's --split.
EVAL_SPLITS = ("valid", "test")
# data.segmenter's values: what cuts a line of a text file into words (elmo_jax/data/segmenter.py).
SEGMENTERS = ("none", "jieba")


class Key(NamedTuple):
    """One key: its default, its allowed values, what it means, and the value that means "none"
    (`off`: e.g. 0 for no clipping), which the module it configures receives as None."""

    default: Any
    check: Check
    meaning: str
    off: Any = None


class Section(NamedTuple):
    """A group of keys (and sections) configuring one thing; `meaning` says what."""

    meaning: str
    keys: dict[str, "Key | Section"]


# The values of model.contextualizer: the registry's names (elmo_jax/model/contextualizer_registry.py, a
# layer above, declares each contextualizer it registers through `declare_contextualizer`).
CONTEXTUALIZER_NAMES = ["lstm", "gated_cnn", "transformer"]

SCHEMA = Section("", {
    "seed": Key(0, integer(0), "Seeds parameter init, dropout, negative sampling and data order."),
    "distributed": Section("A run over several processes (docs/scaling.md).", {
        "enabled": Key(False, BOOLEAN, "Multi-process run: call jax.distributed.initialize() first."),
        "coordinator_address": Key("", STRING,
                                   "'host:port' of process 0 ('' = auto-detect: SLURM, Open MPI, TPU)."),
        "num_processes": Key(0, integer(0), "Number of processes (0 = auto-detect)."),
        "process_id": Key(-1, integer(-1), "This process's index (-1 = auto-detect)."),
    }),
    "data": Section("The training and evaluation text, the vocabulary and the batches.", {
        "source": Key("ptb", one_of("ptb", "text", "tfds"),
                      "'ptb' (bundled Penn Treebank) | 'text' (files below) | 'tfds' (a TFDS dataset)."),
        "train_files": Key("", STRING,
                           "source='text': comma-separated globs, one sentence per line; `.conllu` files (`.gz` "
                           "too): their FORM column, one sentence per CoNLL-U sentence."),
        "eval_files": Key("", STRING, "source='text': held-out globs for perplexity, read as data.train_files."),
        "segmenter": Key("none", one_of(*SEGMENTERS),
                         "source='text': what cuts text lines into words: 'none' (whitespace) | 'jieba' (Chinese; "
                         "pip install 'elmo-jax[zh]', docs/chinese.md); not CoNLL-U files, words already."),
        "tfds_name": Key("lm1b", STRING, "source='tfds': dataset name, prepared with --file_format=array_record."),
        "tfds_data_dir": Key("", STRING, "source='tfds': directory of prepared datasets ('' = TFDS default)."),
        "tfds_feature": Key("text", STRING, "source='tfds': the text feature; one record = one sentence."),
        "tfds_train_split": Key("train", STRING, "source='tfds': split trained on (slices work: 'train[:99%]')."),
        "tfds_valid_split": Key("test", STRING, "source='tfds': split read as 'valid' (lm1b has none: its test)."),
        "tfds_test_split": Key("test", STRING, "source='tfds': split read as 'test'."),
        "vocab_file": Key("", STRING, "bilm-tf vocabulary file; '' builds one from the training data."),
        "vocab_min_count": Key(1, integer(1), "When building: drop words seen fewer times."),
        "vocab_max_size": Key(0, zero_or_integer(MIN_VOCAB_SIZE, "all words"),
                              "When building: keep the most frequent words (0 = all)."),
        "char_vocab_file": Key("", STRING,
                               "Character vocabulary (elmo-vocab chars): its characters one id each, the others "
                               "UTF-8 bytes; '' = bytes only (bilm-tf), or built (char_vocab_min_count)."),
        "char_vocab_min_count": Key(0, integer(0),
                                    "> 0: build the character vocabulary from the training data, every non-ASCII "
                                    "character seen this many times (0 = none: bytes, or data.char_vocab_file)."),
        "max_chars_per_token": Key(50, integer(MIN_CHARS_PER_TOKEN),
                                   "Characters per token, BOW/EOW included (bilm-tf: 50); with data.char_vocab_file "
                                   "a listed character counts one, and no word is cut inside a character."),
        "streams": Key("sentences", one_of("sentences", "contiguous"),
                       "'sentences' (bilm-tf: whole sentences dealt to the rows) | 'contiguous' (the text in order, "
                       "B streams)."),
        "shuffle": Key(True, BOOLEAN,
                       "Reshuffle the training sentences (ptb, tfds) or files and sentences (text) every epoch."),
        "shuffle_buffer": Key(10000, integer(0),
                              "source='text': sentences shuffled within blocks of this many (0 = files only)."),
        "max_sentence_tokens": Key(1000, integer(0),
                                   "source='text': longer training lines are split into pieces (0 = no limit)."),
        "prefetch_batches": Key(4, integer(1), "Batches prepared ahead on a background thread."),
        "eval_split": Key("valid", one_of(*EVAL_SPLITS), "Split evaluated during and after training."),
    }),
    "model": Section("The biLM: token encoder, contextualizer, softmax.", {
        "token_encoder": Key("char_cnn", one_of("char_cnn", "word"),
                             "'char_cnn' | 'word' (word embeddings; ablation)."),
        "width": Key(512, integer(1),
                     "P: the token embeddings' size, each layer's output size per direction and the softmax's "
                     "input size (bilm-tf's lstm.projection_dim)."),
        "char_cnn": Section("The character CNN of the token encoder (bilm-tf's char_cnn).", {
            "embed_dim": Key(16, integer(1), "Character embedding size."),
            "filters": Key([[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]], FILTERS,
                           "[width, channels] of each convolution."),
            "activation": Key("relu", one_of("relu", "tanh"), "The convolutions' activation."),
            "n_highway": Key(2, integer(0), "Highway layers after the convolutions."),
            "projection": Key(True, BOOLEAN,
                              "Project the highway output to model.width (bilm-tf); False: it feeds the first layer "
                              "directly, sum(channels) wide (Kim et al. 2016; no bilm-tf export)."),
        }),
        "contextualizer": Key("lstm", one_of(*CONTEXTUALIZER_NAMES),
                              "What reads the token embeddings in context, one stack per direction, each seeing "
                              "only its side (docs/contextualizers.md): 'lstm' (bilm-tf's biLM, model.lstm) | "
                              "'gated_cnn' (model.gated_cnn) | 'transformer' (model.transformer); each is a section "
                              "of its own."),
        "lstm": Section("bilm-tf's LSTMs with projection (model.contextualizer='lstm'), one stack per direction.", {
            "dim": Key(4096, integer(1),
                       "LSTM cell size; the cell projects to model.width (no projection when equal)."),
            "n_layers": Key(2, integer(1), "Stacked LSTM layers per direction."),
            "cell_clip": Key(3.0, number(0.0), "Clip the cell state to +-cell_clip (0 = no clipping).", off=0.0),
            "proj_clip": Key(3.0, number(0.0), "Clip the projected output to +-proj_clip (0 = no clipping).", off=0.0),
            "use_skip_connections": Key(True, BOOLEAN, "Residual connection around layers 2..L."),
            "initializer": Key("uniform", one_of("uniform", "glorot_uniform"),
                               "Kernels: 'uniform' U(-0.05, 0.05) | 'glorot_uniform' (bilm-tf: TF's default, limit "
                               "sqrt(6 / (fan_in + fan_out)) of LSTMCell's kernel and projection)."),
            "unroll": Key(0, integer(0),
                          "Time steps per loop iteration (0 = automatic: 1; more multiplies the compile work)."),
            "kernel": Key("xla", one_of("xla", "pallas"),
                          "The time loop: 'xla' | 'pallas' (model/pallas_lstm.py: Triton kernels on GPU, 1.6-7x "
                          "slower than xla there (docs/performance.md); Pallas's slow interpreter elsewhere)."),
        }),
        "gated_cnn": Section(
            "Gated CNN (model.contextualizer='gated_cnn', Dauphin et al. 2017): causal convolutions with gated linear "
            "units, h = (X*W + b) * sigmoid(X*V + c), dropout as the LSTMs' (model.token_dropout, model.dropout).", {
            "kernel_width": Key(3, integer(2), "Taps of each convolution: the current position and k - 1 before it."),
            "n_layers": Key(3, integer(1), "Layers per direction (a gated CNN of an LSTM's size is deeper)."),
            "residual": Key(True, BOOLEAN, "Residual connection around layers 2..L (Dauphin et al.'s blocks)."),
            "dilation_base": Key(1, integer(1),
                                 "Layer l's taps are dilation_base^(l-1) positions apart (1: contiguous, Dauphin et "
                                 "al.; 2: doubling, WaveNet's): the stack sees 1 + (k - 1) sum_l dilation_base^(l-1)."),
        }),
        "transformer": Section(
            "Transformer (model.contextualizer='transformer', model/transformer.py): causal self-attention blocks, "
            "dropout on the stack's input (model.token_dropout) and on each sublayer's output (model.dropout).", {
            "n_layers": Key(2, integer(1), "Blocks per direction."),
            "ff_dim": Key(2048, integer(1), "Width of each block's ReLU feed-forward layer."),
            "n_heads": Key(8, integer(1), "Attention heads (they must divide model.width)."),
            "norm": Key("pre", one_of("pre", "post"),
                        "'pre': x + f(LayerNorm(x)), a final LayerNorm (AllenNLP) | 'post': LayerNorm(x + f(x))."),
            "positions": Key("sinusoidal", one_of("learned", "sinusoidal", "none"),
                             "Added to each layer's queries and keys."),
            "shared_directions": Key(False, BOOLEAN,
                                     "True: one stack's weights for both directions (False: one stack each, as "
                                     "Peters et al. 2018b and AllenNLP's bidirectional_lm_transformer)."),
            "memory_length": Key(20, integer(0),
                                 "Positions of the previous windows each layer attends to, held without gradient "
                                 "(Transformer-XL); the carried state across windows (0 = windows independent)."),
            "max_window": Key(20, integer(1),
                              "Positions the stack reads at once (and 'learned' positions index): longer inputs, "
                              "such as sentences the embedder reads, run as consecutive windows carrying the memory."),
        }),
        "init_range": Key(0.0, number(0.0),
                          "> 0: every weight matrix and embedding from U(-init_range, init_range) (Kim et al. 2016, "
                          "Zaremba et al. 2014: 0.05); 0: bilm-tf's initializer of each (see docs/)."),
        "dropout": Key(0.1, dropout_rate(), "Dropout on each layer's input after the first and on the softmax input."),
        "token_dropout": Key(-1.0, dropout_rate(-1.0, "= model.dropout"),
                             "Dropout on the token embeddings, the first layer's input (-1 = model.dropout; Kim et "
                             "al. 2016 leave it out: 0).", off=-1.0),
        "dtype": Key("float32", one_of("float32", "bfloat16"), "Compute dtype (parameters stay float32)."),
        "remat": Key(False, BOOLEAN,
                     "Recompute each contextual layer's forward pass in the backward pass instead of keeping its "
                     "activations (an LSTM layer, a gated-CNN layer, a Transformer block): less memory on long "
                     "windows and large batches, about a third more compute."),
        "conv_block": Key(0, integer(-1),
                          "Tokens per block of the char convolutions, forward and reverse (0 = automatic: 16 on CPU, "
                          "whole batch on GPU/TPU; -1 = whole batch). See model/conv_pool.py."),
        "conv_kernel": Key("auto", one_of("auto", "xla", "pallas"),
                           "The char convolutions' forward pass: 'xla' | 'pallas' (model/pallas_conv_pool.py: the max "
                           "over positions in the kernel; Triton on GPU, the slow interpreter elsewhere) | 'auto': "
                           "pallas on GPU, where it is measured faster, else xla (also on GPU in a JAX without "
                           "Pallas's Triton backend, saying so once). The reverse pass follows conv_block."),
        "distinct_fraction": Key(0.0, number(0.0, 1.0),
                                 "> 0: the char CNN encodes each distinct word of a batch once when at most this "
                                 "fraction of its tokens are distinct, else every token (configs/ptb.py: 0.5)."),
        "softmax": Section("The softmax over the vocabulary, shared by both directions.", {
            "sampled": Key(True, BOOLEAN, "Sampled softmax in training (False: exact full softmax)."),
            "n_negative_samples": Key(8192, integer(1),
                                      "Candidates per draw for the sampled softmax (one draw per step by default)."),
            "unique_samples": Key(True, BOOLEAN, "Distinct candidates (as TF's sampler) vs. with replacement."),
            "streams_per_draw": Key(0, integer(0),
                                    "Each group of this many consecutive streams draws its own n_negative_samples, "
                                    "and its tokens see only that draw (bilm-tf: 128, one draw per GPU tower); 0 = "
                                    "one draw for the global batch. Groups are global (the loss does not depend on "
                                    "the device count); their number and the device count must divide one another."),
            "negatives_per_direction": Key(False, BOOLEAN,
                                           "Separate draws for the forward and backward streams of a group (bilm-tf: "
                                           "True, one sampled_softmax_loss call per direction)."),
            "chunk_size": Key(8192, integer(1), "Vocabulary rows per chunk of the full softmax (bounds memory)."),
        }),
    }),
    "train": Section("The training loop.", {
        "batch_size": Key(128, integer(1), "Global number of streams per direction (split over devices)."),
        "unroll_steps": Key(20, integer(1), "Truncated-BPTT window length T."),
        "num_steps": Key(0, integer(0), "Stop after this many steps (0 = use num_epochs)."),
        "num_epochs": Key(10, integer(1), "Passes over the training data (used when num_steps = 0)."),
        "stateful": Key(True, BOOLEAN,
                        "Carry the contextualizer's state across batches (False: the initial state every batch)."),
        "optimizer": Section("The optimizer and its learning-rate schedule.", {
            "name": Key("adagrad", one_of("adagrad", "adam", "sgd"), "The optimizer."),
            "learning_rate": Key(0.2, number(0.0), "Peak learning rate."),
            "initial_accumulator_value": Key(1.0, number(0.0, low_open=True),
                                             "Adagrad accumulator start (bilm-tf: 1.0)."),
            "b1": Key(0.9, number(0.0, 1.0, high_open=True), "Adam."),
            "b2": Key(0.999, number(0.0, 1.0, high_open=True), "Adam."),
            "eps": Key(1e-8, number(0.0), "Adam."),
            "schedule": Key("constant", one_of("constant", "cosine", "linear"),
                            "'linear' and 'cosine' decay to 0 at the last step."),
            "warmup_steps": Key(0, integer(0),
                                "Linear warmup from 0 to learning_rate (a cosine/linear run of at most this many "
                                "steps warms up for num_steps // 10 instead, with a warning)."),
        }),
        "softmax_row_updates": Key(True, BOOLEAN,
                                   "Update only the softmax rows a step touches (sampled softmax with adagrad or sgd, "
                                   "where it is the same step as the dense update; ignored otherwise)."),
        "loss_scale": Key(1.0, number(0.0, low_open=True),
                          "Differentiate loss_scale x the mean loss (bilm-tf: unroll_steps; the logged loss is "
                          "unscaled; clip_norm applies to the scaled gradients)."),
        "clip_norm": Key(10.0, number(0.0), "Clip gradients to this global norm (0 = no clipping)."),
        "nonfinite_policy": Key("stop", one_of("stop", "skip"),
                                "NaN/inf loss or gradient norm: 'stop' the run | 'skip' the update."),
        "log_every_steps": Key(50, integer(1), "Steps between metrics.jsonl lines."),
        "checkpoint_every_steps": Key(1000, integer(1), "Steps between checkpoints (and one at the end)."),
        "keep_checkpoints": Key(3, integer(1), "Most recent checkpoints kept."),
    }),
    "eval": Section("Perplexity during and after training.", {
        "batch_size": Key(64, integer(1), "Streams per direction when computing perplexity."),
        "unroll_steps": Key(20, integer(1), "Window length when computing perplexity."),
        "every_steps": Key(0, integer(0), "Evaluate on data.eval_split every N training steps (0 = only at the end)."),
        "max_tokens": Key(0, integer(0), "Cap the tokens evaluated during training (0 = the whole split)."),
        "stateful": Key(True, BOOLEAN,
                        "Carry the contextualizer's state (LSTM states, gated-CNN buffers, Transformer memory) from "
                        "window to window of a stream; False starts every window from the initial state: what "
                        "context beyond a window is worth."),
        "probe": Section(
            "Linear probes of what each layer of the biLM knows (elmo_jax/probing/, as `elmo-probe`) on the params "
            "being trained: trained on train_file, early-stopped on dev_file, scored on test_file (CoNLL-U files); "
            "each result goes to probe_<task>_<step>.json in the workdir; word senses of wsd_data beside them.", {
                "task": Key("", one_of("", "upos", "xpos", "deprel"),
                            "'' (no probes) | 'upos' | 'xpos' | 'deprel': the token label to predict."),
                "train_file": Key("", STRING, "CoNLL-U file the probes train on (needed with a task)."),
                "dev_file": Key("", STRING, "CoNLL-U file for early stopping ('' = a tenth of train_file held out)."),
                "test_file": Key("", STRING, "CoNLL-U file the probes are scored on (needed with a task)."),
                "normalize": Key("none", one_of("none", "lower", "ptb"),
                                 "Spell the words as the training text: 'none' | 'lower' | 'ptb' (lower, numbers "
                                 "as N)."),
                "every_steps": Key(0, integer(0),
                                   "Probe every N training steps (0 = only at the end); always at the end."),
                "wsd_data": Key("", STRING,
                                "CoarseWSD-20's directory (a directory per word, or one word's): also probe word "
                                "senses as `elmo-probe --task wsd` (probe_wsd_<step>.json); '' = none. With or "
                                "without a task."),
            }),
    }),
    "init": Section(
        "Continued training of a bilm-tf/AllenNLP model (elmo_jax/training/init_from.py): its shape comes from "
        "options.json, a new run starts from its weights (and its softmax rows for the words the two vocabularies "
        "share), the optimizer starts fresh. Ignored when the workdir has a checkpoint.", {
            "options": Key("", STRING, "options.json of the model to start from ('' = a fresh model)."),
            "weights": Key("", STRING, "Its hdf5 weights."),
            "softmax_weights": Key("", STRING,
                                   "Its softmax hdf5 (softmax/W [V, P], softmax/b [V]); '' = a fresh softmax."),
            "vocab_file": Key("", STRING, "Its vocabulary, line i = softmax row i (with init.softmax_weights)."),
        }),
})


def _walk(section: Section, prefix: str = "") -> Iterator[tuple[str, Key | Section]]:
    """(dotted name, item) of every key and section below `section`, each section before its keys."""
    for name, item in section.keys.items():
        yield prefix + name, item
        if isinstance(item, Section):
            yield from _walk(item, f"{prefix}{name}.")


def keys() -> dict[str, Key]:
    """{'model.lstm.dim': Key(...), ...}: every key of the schema, registered sections included."""
    return {name: item for name, item in _walk(SCHEMA) if isinstance(item, Key)}


def _config_of(section: Section) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    for name, item in section.keys.items():
        config[name] = _config_of(item) if isinstance(item, Section) else item.default
    return config


def get_config() -> ml_collections.ConfigDict:
    """The schema's defaults as a config: what configs/default.py runs and every recipe changes."""
    return _config_of(SCHEMA)


def declare_contextualizer(name: str, section: Section) -> None:
    """Makes `model.contextualizer=name` allowed and `model.<name>` its config section (called by
    the contextualizers' registry, a layer above)."""
    if name not in CONTEXTUALIZER_NAMES:
        CONTEXTUALIZER_NAMES.append(name)
    model = SCHEMA.keys["model"]
    model.keys["contextualizer"] = model.keys["contextualizer"]._replace(check=one_of(*CONTEXTUALIZER_NAMES))
    model.keys[name] = section


def section_options(values: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The keys of the section at dotted `path` (e.g. 'model.lstm') as keyword arguments of the
    function or module it configures: their `values` (that section of a complete config), an `off`
    value as None, lists as tuples (a module's fields are hashed)."""
    section: Any = SCHEMA
    for name in path.split("."):
        section = section.keys[name]
    keys = {name: key for name, key in section.keys.items() if isinstance(key, Key)}
    return {name: _frozen(_none_if_off(key, values[name])) for name, key in keys.items()}


def _frozen(value: Any) -> Any:
    return tuple(map(_frozen, value)) if isinstance(value, (list, tuple)) else value


def option(config: Mapping[str, Any], path: str) -> Any:
    """The value of dotted key `path` in the complete `config`, its `off` value as None."""
    return _none_if_off(keys()[path], get_key(config, path))


def token_width(token_encoder: str, char_cnn: Mapping[str, Any], width: int) -> int:
    """The token embeddings' width, the first contextual layer's input: the char CNN's channels
    (the sum over `char_cnn['filters']`) without its projection, else `width` (model.width, P)."""
    if token_encoder == "char_cnn" and not char_cnn["projection"]:
        return sum(channels for _, channels in char_cnn["filters"])
    return width


def _none_if_off(key: Key, value: Any) -> Any:
    return None if key.off is not None and value == key.off else value


def with_defaults(partial: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """`partial` (nested dicts or a ConfigDict: a saved config.json, an options.json's model) with
    every key it lacks, at any depth, taken from `get_config()`: so readers index keys instead of
    guessing defaults of their own."""
    return ml_collections.ConfigDict(_merged(dict(partial), get_config().to_dict()))


def _merged(partial: dict, defaults: dict) -> dict:
    merged = dict(partial)
    for key, value in defaults.items():
        if key not in merged:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged[key], (Mapping, ml_collections.ConfigDict)):
            merged[key] = _merged(dict(merged[key]), value)
    return merged


def schema_table() -> str:
    """docs/config.md's table: one row per key (dotted key, default, allowed values, meaning), a
    heading row per section with its meaning."""
    rows = ["| key | default | allowed | meaning |", "| --- | --- | --- | --- |"]
    for name, item in _walk(SCHEMA):
        if isinstance(item, Section):
            rows.append(f"| **`{name}`** | | | {item.meaning} |")
        else:
            meaning = item.meaning.replace("|", "\\|")
            rows.append(f"| `{name}` | `{item.default!r}` | {item.check.allowed} | {meaning} |")
    return "\n".join(rows) + "\n"
