"""The names of the files in a training workdir, built and parsed here only, for writers and readers.

    WORKDIR/config.json                         the run's config (CONFIG)
    WORKDIR/vocab.txt                           its vocabulary (VOCAB)
    WORKDIR/chars.txt                           its character vocabulary, if it has one (CHARS)
    WORKDIR/manylangs_inputs.json               an ELMoForManyLangs model's char.dic/word.dic (MANYLANGS_INPUTS)
    WORKDIR/metrics.jsonl                       training and evaluation records (METRICS)
    WORKDIR/run_info.json                       every start's command, git and versions (RUN_INFO)
    WORKDIR/checkpoints/<step>/                 orbax checkpoints (CHECKPOINTS)
    WORKDIR/train.lock                          held while a run trains (LOCK, workdir_lock.py)
    WORKDIR/eval_<split>_<step>.json            a checkpoint's perplexity on a split ('files': text files)
    WORKDIR/eval_<split>_stateless_<step>.json  the same, every window from the initial state
    WORKDIR/probe_<task>_<step>.json            a probe during training (config.eval.probe)
    WORKDIR/probe_<task>[_<control>].json       elmo-probe's result (of a control: random_init)
    WORKDIR/probe_<task>.png                    elmo-probe's figure

A task model's workdir (`elmo-task train`) has config.json and metrics.jsonl too, and
    WORKDIR/results.json                        its best epoch's dev and test scores (TASK_RESULTS)
    WORKDIR/labels.json                         the labels and tables the model reads (TASK_LABELS)
"""

from __future__ import annotations

import dataclasses
import re

CONFIG = "config.json"
VOCAB = "vocab.txt"
CHARS = "chars.txt"
MANYLANGS_INPUTS = "manylangs_inputs.json"
METRICS = "metrics.jsonl"
RUN_INFO = "run_info.json"
LOCK = "train.lock"
CHECKPOINTS = "checkpoints"
TASK_RESULTS = "results.json"
TASK_LABELS = "labels.json"

_EVALUATION = re.compile(r"eval_(?P<split>.+?)(?P<stateless>_stateless)?_(?P<step>[0-9]+)\.json")
_PROBE = re.compile(r"probe_(?P<task>[^_]+)(?:_(?P<step>[0-9]+)|_(?P<control>[a-z_]+))?\.json")


def evaluation_file(split: str, step: int, stateful: bool = True) -> str:
    """The perplexity of the checkpoint of `step` on `split`: `eval_<split>_<step>.json`, or
    `eval_<split>_stateless_<step>.json` when every window started from the initial state."""
    return f"eval_{split}_{step}.json" if stateful else f"eval_{split}_stateless_{step}.json"


PROBE_CONTROLS = ("none", "random_init")  # elmo-probe's model itself, or the same biLM re-initialized.


def probe_file(task: str, step: int | None = None, control: str = "none") -> str:
    """A probe result of `task`: of training's probe at `step`, else of elmo-probe's model
    (`control` 'none') or of one of its controls."""
    if step is not None:
        if control != "none":
            raise ValueError("a probe during training has no control")
        return f"probe_{task}_{step}.json"
    return f"probe_{task}.json" if control == "none" else f"probe_{task}_{control}.json"


def probe_figure(task: str) -> str:
    """elmo-probe's figure of `task`: `probe_<task>.png`."""
    return f"probe_{task}.png"


@dataclasses.dataclass(frozen=True)
class EvaluationFile:
    split: str
    step: int
    stateful: bool = True


@dataclasses.dataclass(frozen=True)
class ProbeFile:
    """`step` is set for training's probes; `control` is 'none' for the model's."""

    task: str
    step: int | None = None
    control: str = "none"


def parse_evaluation_file(name: str) -> EvaluationFile | None:
    """The split, step and statefulness of an `evaluation_file` name, or None for any other name."""
    match = _EVALUATION.fullmatch(name)
    return EvaluationFile(match["split"], int(match["step"]), not match["stateless"]) if match else None


def parse_probe_file(name: str) -> ProbeFile | None:
    """The task and step or control of a `probe_file` name, or None for any other name."""
    match = _PROBE.fullmatch(name)
    if not match:
        return None
    step = int(match["step"]) if match["step"] is not None else None
    return ProbeFile(match["task"], step, match["control"] or "none")
