"""A config checked where it enters (the commands, a workdir's config.json, an options.json), before
a run does any work: the modules it configures then take its values as they are. Keys a config
lacks are checked at the schema's defaults (what a run reads for them), keys it adds are left
alone; checks that depend on the run (the device count, the vocabulary) are made where that is known.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from elmo_jax.config import schema
from elmo_jax.config.overrides import get_key, under
from elmo_jax.model.contextualizer_registry import CONTEXTUALIZERS, contextualizer_class
from elmo_jax.model.token_encoder_registry import IMPORTED_ENCODERS, TOKEN_ENCODERS, token_encoder_class
from elmo_jax.sections import ConfigError


def _check_parts(config: Mapping[str, Any]) -> None:
    """The checks the token encoder and the contextualizer declare for their sections."""
    model = config["model"]
    encoder = token_encoder_class(model["token_encoder"])
    encoder.check_config(config)
    contextualizer_class(model["contextualizer"]).check_config(model, encoder.width(model["char_cnn"], model["width"]))


def _check_char_vocab_is_read(config: Mapping[str, Any]) -> None:
    """A character vocabulary (a file, or built from the training data) spells the char ids: one
    source of it, and a token encoder that reads characters, starting from no bilm-tf files."""
    data, token_encoder = config["data"], config["model"]["token_encoder"]
    given = [f"data.{key}={data[key]!r}" for key in ("char_vocab_file", "char_vocab_min_count") if data[key]]
    if len(given) == 2:
        raise ConfigError(f"config keys {given[0]} and {given[1]} both give the character vocabulary: set one")
    if given and not token_encoder_class(token_encoder).reads_chars:
        raise ConfigError(
            f"config key {given[0]} spells characters, which model.token_encoder={token_encoder!r} does not "
            "read: leave it unset or use the char CNN"
        )
    for key, source in (("options", "bilm-tf's files, bytes only"), ("manylangs", "its char.dic spells them")):
        if given and config["init"][key]:
            raise ConfigError(
                f"config key {given[0]} gives the char table rows that init.{key}={config['init'][key]!r} "
                f"({source}) does not have"
            )


def _check_one_init_model(config: Mapping[str, Any]) -> None:
    """Continued training starts from one model: bilm-tf's files or an ELMoForManyLangs directory."""
    init = config["init"]
    if init["options"] and init["manylangs"]:
        raise ConfigError(
            f"config keys init.options={init['options']!r} and init.manylangs={init['manylangs']!r} both give the "
            "model to start from: set one"
        )


def _check_probe_files_given(config: Mapping[str, Any]) -> None:
    """A probe task needs the files its probes train on and are scored on."""
    task = config["eval"]["probe"]["task"]
    for key in ("eval.probe.train_file", "eval.probe.test_file"):
        path = get_key(config, key)
        if task and not path:
            raise ConfigError(f"config key {key}={path!r}: eval.probe.task={task!r} needs a CoNLL-U file")


def check_negative_samples(config: Mapping[str, Any], vocab_size: int, vocabulary: str) -> None:
    """The sampled softmax draws distinct candidates (model.softmax.unique_samples) from the
    vocabulary, so it needs fewer than its `vocab_size` words; `vocabulary` says where they come
    from. Known once the vocabulary is read: before the training data when it is a file."""
    softmax = config["model"]["softmax"]
    n_samples = softmax["n_negative_samples"]
    if softmax["sampled"] and softmax["unique_samples"] and n_samples >= vocab_size:
        raise ConfigError(
            f"config key model.softmax.n_negative_samples={n_samples!r} is out of range (allowed: an integer below "
            f"the {vocab_size} words of {vocabulary}): set it lower, or "
            "--config.model.softmax.sampled=False for the full softmax"
        )


def unread_sections(config: Mapping[str, Any]) -> list[str]:
    """The sections `model.<name>` of the registered contextualizers and token encoders that
    `config` does not build (model.lstm under model.contextualizer='transformer'): their keys
    change nothing."""
    model = config["model"]
    unread = [f"model.{name}" for name in CONTEXTUALIZERS if name != model["contextualizer"]]
    return unread + [f"model.{name}" for name, cls in {**TOKEN_ENCODERS, **IMPORTED_ENCODERS}.items()
                     if cls.section is not None and name != model["token_encoder"]]


def warn_unread_overrides(config: Mapping[str, Any], overrides: Iterable[str]) -> list[str]:
    """Logs one warning per override (a dotted key) under an `unread_sections` section; returns them."""
    unread = unread_sections(config)
    ignored = sorted(key for key in overrides if under(key, tuple(f"{section}." for section in unread)))
    for key in ignored:
        part = "contextualizer" if key.split(".")[1] in CONTEXTUALIZERS else "token_encoder"
        logging.warning(
            "--config.%s changes nothing: model.%s=%r does not read %s", key, part, config["model"][part],
            ".".join(key.split(".")[:2]),
        )
    return ignored


def validate(config: Mapping[str, Any]) -> None:
    """Raises ConfigError naming the first key whose value its declaration (schema.py) does not
    allow (`config key train.keep_checkpoints=0 is out of range (allowed: an integer >= 1)`), or
    the first combination of keys that does not fit."""
    config = schema.with_defaults(config)
    # With the defaults in, a key is missing only where a value stands in place of its section.
    schema.tree().check_values(config, missing=": a value stands where its section belongs")
    for check in (_check_parts, _check_char_vocab_is_read, _check_one_init_model, _check_probe_files_given):
        check(config)
