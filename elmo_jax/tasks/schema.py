"""The config of a task model (`elmo-task train`), every key declared once: default, allowed values,
meaning. The recipes of configs/tasks/ override these; `--config.KEY=VALUE` overrides any of them.

Inputs are concatenated per token (Peters et al. 2018 concatenated ELMo with GloVe); each is on when
its key names a source (`inputs.elmo.workdir`, `inputs.static.file`) or a width (`inputs.word.dim`,
`inputs.char_cnn.dim`), and at least one is.
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_collections

from elmo_jax.sections import ConfigError, Key, Section
from elmo_jax.sections.checks import BOOLEAN, STRING, dropout_rate, integer, number, one_of
from elmo_jax.tasks.datasets import COLUMNS, KINDS

HEADS = ("softmax", "crf")  # The taggers' outputs; the parser's is the biaffine scorers.
MIXES = ("mix", "top")
GAMMAS = ("learned", "fixed")
RUNS = ("once", "every_step", "fine_tune")  # How the biLM takes part: stored layers, frozen in the step, trained.

SCHEMA = Section("a task model", {
    "seed": Key(0, integer(0), "initial parameters, dropout, the batches' order and the training subset"),
    "task": Section("what is learned", {
        "kind": Key("tag", one_of(*KINDS), "tag: a CoNLL-U column; ner: IOB2/IOB1 entity files; parse: "
                    "CoNLL-U trees (biaffine parser, UAS/LAS)"),
        "column": Key("upos", one_of(*COLUMNS), "the CoNLL-U column a tagger predicts"),
        "scheme": Key("iob2", one_of("iob2", "iob1"), "the entity files' tags (iob1: CoNLL-2003's)"),
    }),
    "data": Section("the labelled files", {
        "train_file": Key("", STRING, "training sentences"),
        "dev_file": Key("", STRING, "early stopping and model choice"),
        "test_file": Key("", STRING, "the final score ('' for none)"),
        "train_fraction": Key(1.0, number(0.0, 1.0, low_open=True),
                              "the share of the training sentences used (a learning curve's point; nested subsets)"),
    }),
    "inputs": Section("what each token is read as", {
        "elmo": Section("a biLM's layers: frozen and computed once, or fine-tuned", {
            "workdir": Key("", STRING, "an elmo-jax training workdir ('' for no ELMo, or options/weights)"),
            "options": Key("", STRING, "bilm-tf/AllenNLP options.json (with weights)"),
            "weights": Key("", STRING, "bilm-tf/AllenNLP weights hdf5 (with options)"),
            "manylangs": Key("", STRING, "an ELMoForManyLangs model directory (docs/elmoformanylangs.md)"),
            "mix": Key("mix", one_of(*MIXES), "mix: a learned scalar mix of every layer; top: the top layer"),
            "gamma": Key("learned", one_of(*GAMMAS), "the mix's scale: learned, or fixed at 1"),
            "do_layer_norm": Key(False, BOOLEAN, "normalise each layer before mixing"),
            "l2": Key(0.001, number(0.0), "lambda: the L2 weight on the mix's scalars (Peters et al.: 1 or 0.001)"),
            "dropout": Key(0.5, dropout_rate(), "dropout on the mix"),
            "run": Key("once", one_of(*RUNS), "once: the frozen biLM's layers computed before training and stored; "
                       "every_step: the frozen biLM run in each step (the same numbers, slower); fine_tune: its "
                       "weights trained with the task (run in each step)"),
            "learning_rate": Key(0.0001, number(0.0, low_open=True), "Adam's on the biLM's weights (run=fine_tune)"),
        }),
        "static": Section("a static vector file (word2vec text/binary, GloVe)", {
            "file": Key("", STRING, "the vector file ('' for none)"),
            "trainable": Key(False, BOOLEAN, "fine-tune the vectors"),
        }),
        "word": Section("word embeddings trained from scratch (the no-pretraining baseline)", {
            "dim": Key(0, integer(0), "their width (0: none)"),
            "min_count": Key(2, integer(1), "training words seen fewer times are <unk>"),
        }),
        "char_cnn": Section("a char CNN trained from scratch", {
            "dim": Key(0, integer(0), "its output width (0: none)"),
            "max_chars": Key(20, integer(3), "UTF-8 bytes read per word, begin/end of word included"),
        }),
        "dropout": Key(0.0, dropout_rate(), "dropout on the concatenated inputs"),
    }),
    "encoder": Section("a BiLSTM over the inputs", {
        "dim": Key(200, integer(1), "hidden units per direction"),
        "n_layers": Key(1, integer(0), "layers (0: the inputs go straight to the output, a linear probe)"),
        "dropout": Key(0.3, dropout_rate(), "dropout between and after the layers"),
    }),
    "head": Section("the output", {
        "kind": Key("crf", one_of(*HEADS), "taggers: softmax per token, or a linear-chain CRF (Viterbi)"),
        "constrained": Key(True, BOOLEAN, "NER with a CRF: only IOB2-valid transitions"),
        "arc_dim": Key(200, integer(1), "parser: the arc MLPs' width (Dozat & Manning: 500)"),
        "label_dim": Key(100, integer(1), "parser: the label MLPs' width"),
    }),
    "train": Section("the optimisation", {
        "batch_size": Key(32, integer(1), "sentences a step"),
        "epochs": Key(100, integer(1), "at most this many passes over the data (a resumed run may raise it)"),
        "patience": Key(5, integer(1), "stop after this many epochs without a better dev score"),
        "learning_rate": Key(0.001, number(0.0, low_open=True), "Adam's"),
        "clip_norm": Key(5.0, number(0.0, low_open=True), "gradients clipped to this global norm"),
        "eval_batch_size": Key(64, integer(1), "sentences a batch when scoring and predicting"),
        "max_feature_gib": Key(8.0, number(0.0, low_open=True), "the stored ELMo layers' bound in memory"),
    }),
})


def get_config() -> ml_collections.ConfigDict:
    """Every key at its default."""
    return SCHEMA.defaults()


def recipe(task: str, files: str, head: str | None = None) -> ml_collections.ConfigDict:
    """A task recipe (configs/tasks/*.py): the defaults with its task kind, its head kind when the task has a
    choice, and its files, `files` naming them with '{split}' for train, dev and test."""
    config = get_config()
    config.task.kind = task
    if head is not None:
        config.head.kind = head
    for split in ("train", "dev", "test"):
        config.data[f"{split}_file"] = files.replace("{split}", split)
    return config


def completed(saved: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """A config saved in a task workdir (config.json), with the keys declared since at their defaults: each
    added key keeps what the model did before it existed."""
    return SCHEMA.completed(saved)


def validate(config: Mapping[str, Any]) -> None:
    """ConfigError naming the first key whose value its declaration does not allow, or the first
    combination of keys that does not fit."""
    SCHEMA.check_values(config)
    _check_combinations(config)


def _check_combinations(config: Mapping[str, Any]) -> None:
    data, inputs, elmo = config["data"], config["inputs"], config["inputs"]["elmo"]
    for key in ("train_file", "dev_file"):
        if not data[key]:
            raise ConfigError(f"config key data.{key} is empty: a task model needs its {key.split('_')[0]} file")
    named = _bilm_sources(elmo)
    if len(named) > 1:
        raise ConfigError(f"config keys inputs.elmo.{named[0]} and inputs.elmo.{named[1]} both name a biLM: set one")
    if bool(elmo["options"]) != bool(elmo["weights"]):
        raise ConfigError("config keys inputs.elmo.options and inputs.elmo.weights go together")
    if not (uses_elmo(config) or inputs["static"]["file"] or inputs["word"]["dim"] or inputs["char_cnn"]["dim"]):
        raise ConfigError("no input: set inputs.elmo.workdir (or options/weights, or manylangs), inputs.static.file, "
                          "inputs.word.dim or inputs.char_cnn.dim")


def _bilm_sources(elmo: Mapping[str, Any]) -> list[str]:
    """The keys of the section inputs.elmo that name a biLM (at most one may): workdir, options/weights, manylangs."""
    given = {"workdir": elmo["workdir"], "options/weights": elmo["options"] or elmo["weights"],
             "manylangs": elmo["manylangs"]}
    return [key for key, value in given.items() if value]


def uses_elmo(config: Mapping[str, Any]) -> bool:
    """Whether the config reads a biLM's layers."""
    elmo = config["inputs"]["elmo"]
    return bool(elmo["workdir"] or elmo["options"] or elmo["manylangs"])
