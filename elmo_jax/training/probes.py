"""Probes during training (`config.eval.probe`): what each layer of the biLM being trained knows.

Their files are read and checked before any training work (a bad file fails at once, not after
hours). They run on process 0 at the end of training and every `eval.probe.every_steps`, writing
`probe_<task>_<step>.json` unless it exists.
"""

from __future__ import annotations

import logging
import os
from typing import Any, NamedTuple

import jax
import ml_collections
import numpy as np

from elmo_jax.data.coarsewsd import WsdWord, read_coarsewsd
from elmo_jax.data.conllu import Sentence, read_conllu
from elmo_jax.data.char_vocab import CharVocabulary
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation.report import best_layer
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_params
from elmo_jax.probing import wsd
from elmo_jax.probing.run import labelled_splits, probe
from elmo_jax.runtime import data_parallel, workdir_files
from elmo_jax.runtime.atomic_write import write_json_atomic

FILE_KEYS = ("train_file", "dev_file", "test_file")  # The keys of config.eval.probe that name CoNLL-U files.
SEED = 0  # The probes' seed (elmo-probe's default: the same result for a checkpoint), and of the dev tenth.


class ProbeData(NamedTuple):
    """What config.eval.probe's probes read: the token task's sentences (None without a task; `dev`
    None: a tenth of train is held out) and the words of `wsd_data` (None without)."""

    train: list[Sentence] | None
    dev: list[Sentence] | None
    test: list[Sentence] | None
    words: list[WsdWord] | None = None


def read_probe_data(settings: ml_collections.ConfigDict) -> ProbeData | None:
    """The files of config.eval.probe, their splits checked as the probes will take them, or None
    without a task or word senses. FileNotFoundError naming the key, ValueError the file."""
    if not settings.task and not settings.wsd_data:
        return None
    sentences = _read_token_files(settings) if settings.task else (None, None, None)
    return ProbeData(*sentences, words=_read_words(settings.wsd_data) if settings.wsd_data else None)


def _read_words(directory: str) -> list[WsdWord]:
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"config key eval.probe.wsd_data={directory!r}: no such directory")
    words = read_coarsewsd(directory)
    wsd.sense_splits(words, wsd.MAX_TRAIN_PER_WORD, SEED)  # What the probes will fail on fails now.
    return words


def _read_token_files(settings: ml_collections.ConfigDict) -> tuple[Any, Any, Any]:
    """(train, dev or None, test) sentences of the token task's CoNLL-U files, their splits checked."""
    sentences = []
    for key in FILE_KEYS:
        path = settings[key]
        if path and not os.path.isfile(path):
            raise FileNotFoundError(f"config key eval.probe.{key}={path!r}: no such file")
        sentences.append(read_conllu(path) if path else None)
    labelled_splits(*sentences, settings.task, settings.normalize, SEED)  # What the probes will fail on fails now.
    return tuple(sentences)


def result_path(workdir: str, task: str, step: int) -> str:
    """Where the probe of `task` at training step `step` is written."""
    return os.path.join(workdir, workdir_files.probe_file(task, step))


def pretrained_bilm(
    config: ml_collections.ConfigDict, params: Any, vocab: Vocabulary, characters: CharVocabulary | None = None
) -> PretrainedBiLM:
    """The biLM of a run's `config` with `params` (replicated on the mesh) copied to the host."""
    kept = {k: v for k, v in params.items() if k != "softmax"}
    host = jax.tree.map(lambda x: np.asarray(x.addressable_data(0)), kept)  # This process's copy.
    return bilm_from_params(config, host, vocab, characters=characters)


class TrainingProbes:
    """config.eval.probe of one run: `due(step)` says when, calling it probes the params of a step."""

    def __init__(
        self, config: ml_collections.ConfigDict, vocab: Vocabulary, data: ProbeData, workdir: str,
        characters: CharVocabulary | None = None,
    ):
        self.config, self.vocab, self.data, self.workdir = config, vocab, data, workdir
        self.characters = characters
        self.settings = config.eval.probe

    def due(self, step: int) -> bool:
        """Whether `step` is a multiple of `eval.probe.every_steps` (the end of training is probed anyway)."""
        every = self.settings.every_steps
        return bool(every) and step % every == 0

    def __call__(self, params: Any, step: int) -> None:
        """Probes `params` of `step` on process 0 unless its file exists; every process returns
        once it is done, or raises when it failed."""
        failure = None
        if jax.process_index() == 0:
            try:
                self._probe(params, step)
            except Exception as e:  # Told to the other processes, then raised here.
                failure = e
        if not data_parallel.all_processes(failure is None):
            raise failure or RuntimeError(f"the probe at step {step} failed on process 0")

    def _probe(self, params: Any, step: int) -> None:
        """The probes of config.eval.probe whose result at `step` is not on disk yet."""
        tasks = ([self.settings.task] if self.data.train is not None else []) + ([wsd.TASK] if self.data.words else [])
        pretrained = None  # Loaded for the first task not on disk.
        for task in tasks:
            path = result_path(self.workdir, task, step)
            if os.path.exists(path):
                logging.info("%s exists: step %d is not probed again", path, step)
                continue
            if pretrained is None:
                pretrained = pretrained_bilm(self.config, params, self.vocab, self.characters)
            self._write(task, step, self._run(task, pretrained))

    def _run(self, task: str, pretrained: PretrainedBiLM) -> dict[str, Any]:
        """The result of `task`'s probes of `pretrained`, with what names its data."""
        settings = self.settings
        if task == wsd.TASK:
            result = wsd.probe_wsd(pretrained, self.data.words, settings.normalize, seed=SEED, progress=False)
            return {**result, "data": settings.wsd_data}
        result = probe(
            pretrained, self.data.train, self.data.dev, self.data.test, task, settings.normalize, seed=SEED,
            progress=False,
        )
        return {**result, "train": settings.train_file, "dev_file": settings.dev_file or None,
                "test": settings.test_file}

    def _write(self, task: str, step: int, result: dict[str, Any]) -> None:
        name = os.path.basename(os.path.normpath(self.workdir))
        result.update(model=f"{name} step {step}", workdir=self.workdir, step=step)
        write_json_atomic(result_path(self.workdir, task, step), result)
        layer = best_layer(result)
        logging.info(
            "probe %s @ step %d: best layer %d (%.4f), mix %.4f, word baseline %.4f",
            task, step, layer, result["layers"][layer], result["mix"], result["word_baseline"],
        )
