"""What each layer of a biLM knows: probes of a token task or of word senses on its frozen layers (`elmo-probe`).

  elmo-probe --workdir runs/demo [--step N] --train train.conllu [--dev dev.conllu] --test test.conllu \\
      [--task upos|xpos|deprel] [--normalize none|lower|ptb] [--control none|random_init] [--mlp] [--output DIR]
  elmo-probe --options options.json --weights weights.hdf5 --train ... --test ...
  elmo-probe --workdir runs/demo --task wsd --data CoarseWSD-20 [--max_train_per_word 400] [--normalize ...] \\
      [--control ...] [--show_predictions] [--output DIR]
  elmo-probe --workdir runs/demo --task wic --data WiC_dataset [--normalize ...] [--control ...] [--output DIR]
  elmo-probe --workdir runs/demo ... --static vectors.txt [--static other.bin]

Token tasks read CoNLL-U files; without --dev, a tenth of the training sentences is held out for
early stopping. A softmax classifier is trained on each layer (0: the token layer) and on a learned
scalar mix of all of them, scored beside the most frequent tag of each word. `--task wsd` probes
the senses of CoarseWSD-20's words (--data: its directory, or one word's) by the nearest sense
centroid and a linear probe; `--task wic` whether a word has one sense in two sentences (--data:
WiC's directory) by a cosine threshold and a linear probe. Each `--static` file of word vectors
(word2vec/GloVe text or word2vec binary) is probed by the same classifiers beside the biLM's
layers, in two rows: each word's own vector, and it with the mean vector of its neighbours.

Writes `probe_<task>.json` (a control's: `probe_<task>_random_init.json`) and `probe_<task>.png`
into --output (default: the workdir, or the current directory), and Markdown tables on stdout.
What each task measures and writes: docs/probing.md.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from typing import Any, Sequence

from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.data.coarsewsd import read_coarsewsd
from elmo_jax.data.conllu import read_conllu
from elmo_jax.data.wic import read_wic
from elmo_jax.inference.embedder import ENGINES
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_files, bilm_from_manylangs, bilm_from_workdir
from elmo_jax.workdir.runs import workdir_inputs
from elmo_jax.probing import wic, wsd
from elmo_jax.probing.report import (
    figure_path, markdown_table, read_results, result_path, wic_markdown_table, write_outputs, wsd_markdown_tables,
    wsd_prediction_tables,
)
from elmo_jax.probing.run import probe
from elmo_jax.probing.static_features import WINDOW
from elmo_jax.probing.tasks import NORMALIZATIONS, TASKS
from elmo_jax.runtime import workdir_files
from elmo_jax.runtime.atomic_write import SIGTERM_EXIT_STATUS, check_not_inputs
from elmo_jax.static.lookup import StaticVectors

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
tool_flags.define_model_flags(_FLAGS)
tool_flags.define_runtime_flags(_FLAGS)
flags.DEFINE_enum(
    "task", "upos", [*sorted(TASKS), wsd.TASK, wic.TASK],
    "the token label to predict (a CoNLL-U column), or wsd: the senses of CoarseWSD-20's words (--data), "
    "or wic: whether a word has one sense in two sentences (WiC, --data)",
    flag_values=_FLAGS,
)
flags.DEFINE_string("train", None, "CoNLL-U file the probes train on", flag_values=_FLAGS)
flags.DEFINE_string(
    "dev", None, "CoNLL-U file for early stopping (default: a tenth of --train held out)", flag_values=_FLAGS
)
flags.DEFINE_string("test", None, "CoNLL-U file the probes are scored on", flag_values=_FLAGS)
flags.DEFINE_string(
    "data", None,
    "with --task wsd: CoarseWSD-20's directory (a directory per word) or one word's directory; with --task wic: "
    "WiC's directory (train, test and optionally dev, each <split>.data.txt and .gold.txt, or in <split>/)",
    flag_values=_FLAGS,
)
flags.DEFINE_integer(
    "max_train_per_word", wsd.MAX_TRAIN_PER_WORD,
    "with --task wsd: training sentences read of each word, a sample by --seed (0: all)", flag_values=_FLAGS,
)
flags.DEFINE_bool(
    "show_predictions", False,
    "with --task wsd: also the nearest sense centroid of each test sentence at each layer, a table per word "
    "(and in the JSON: it then holds the test sentences)", flag_values=_FLAGS,
)
flags.DEFINE_enum(
    "normalize", "none", NORMALIZATIONS,
    "spell the words as the biLM's training text: as written, lower case, or PTB (lower case, numbers as N)",
    flag_values=_FLAGS,
)
flags.DEFINE_enum(
    "control", "none", workdir_files.PROBE_CONTROLS,
    "random_init: probe the same biLM with fresh random weights instead", flag_values=_FLAGS,
)
flags.DEFINE_string(
    "output", None, "directory of the results (default: --workdir, or the current directory)", flag_values=_FLAGS
)
flags.DEFINE_multi_string(
    "static", [],
    "a file of static word vectors (word2vec/GloVe text, with or without its header line, or word2vec binary) "
    f"probed beside the biLM's layers: each word's own vector, and it with the mean vector of the words within "
    f"{WINDOW} tokens of it", flag_values=_FLAGS,
)
flags.DEFINE_bool("mlp", False, "also train a one-hidden-layer MLP probe on each layer", flag_values=_FLAGS)
flags.DEFINE_integer("seed", 0, "seed of the probes (and of the random-init control's weights)", flag_values=_FLAGS)
flags.DEFINE_integer("batch_size", 32, "sentences per embedder batch", flag_values=_FLAGS)
flags.DEFINE_float(
    "max_memory_gib", 8.0, "refuse when the representations of all splits would take more", flag_values=_FLAGS
)
flags.DEFINE_enum(
    "engine", "auto", ENGINES,
    "what computes the char CNN and the LSTMs: C++ kernels built for this CPU (cpu), XLA (xla), or the kernels "
    "when computing on the CPU in float32 (auto)",
    flag_values=_FLAGS,
)
flags.DEFINE_bool("no_progress", False, "no progress bars", flag_values=_FLAGS)


def _check_flags() -> None:
    """Raises UsageError for bad flag combinations and values."""
    tool_flags.check_model_source(_FLAGS)
    tool_flags.check_positive(_FLAGS, "batch_size")
    if _FLAGS.max_memory_gib <= 0:
        raise tool_flags.UsageError(f"--max_memory_gib must be > 0, got {_FLAGS.max_memory_gib}")
    data_task = _FLAGS.task in (wsd.TASK, wic.TASK)
    needed = ["data"] if data_task else ["train", "test"]
    missing = [f"--{name}" for name in needed if _FLAGS[name].value is None]
    if missing:
        raise tool_flags.UsageError(f"--task {_FLAGS.task} needs {', '.join(missing)}")
    others = ["train", "dev", "test", "mlp"] if data_task else ["data", "max_train_per_word", "show_predictions"]
    others += ["max_train_per_word", "show_predictions"] if _FLAGS.task == wic.TASK else []
    given = [f"--{name}" for name in others if _FLAGS[name].present]
    if given:
        raise tool_flags.UsageError(f"{', '.join(given)} not taken with --task {_FLAGS.task}")
    if _FLAGS.static and _FLAGS.control != "none":
        raise tool_flags.UsageError("--static is probed beside the model, not its control: drop --control or --static")
    if _FLAGS.max_train_per_word < 0 or _FLAGS.max_train_per_word == 1:
        raise tool_flags.UsageError(f"--max_train_per_word must be 0 (all) or >= 2, got {_FLAGS.max_train_per_word}")


def _check_output(output: str) -> list[str]:
    """The files the result goes to in the directory `output`, checked before any work: ValueError
    when `output` or a written file is or lies in an input, or a result file there is not a result;
    UsageError when `output` is not a directory."""
    written = [result_path(output, _FLAGS.task, _FLAGS.control), figure_path(output, _FLAGS.task)]
    inputs = [(f"--{name}", _FLAGS[name].value) for name in ("train", "dev", "test", "data", "options", "weights")]
    inputs += [("--static", path) for path in _FLAGS.static]
    inputs += workdir_inputs(_FLAGS.workdir)
    check_not_inputs([("--output", output)], inputs)
    check_not_inputs([("--output", path) for path in written], inputs)
    blocking = os.path.abspath(output)  # The nearest of `output` and its parents that exists.
    while not os.path.exists(blocking):
        blocking = os.path.dirname(blocking)
    if not os.path.isdir(blocking):
        raise tool_flags.UsageError(f"--output {output}: {blocking} is not a directory (the results go into one)")
    read_results(output, _FLAGS.task)  # What write_outputs reads after the work.
    return written


def _model() -> tuple[PretrainedBiLM, dict[str, Any]]:
    """The biLM of the flags, and what names it in the result (a workdir's: the step loaded)."""
    if _FLAGS.workdir is not None:
        name = os.path.basename(os.path.normpath(_FLAGS.workdir))
        pretrained = bilm_from_workdir(_FLAGS.workdir, _FLAGS.step)
        described = {"model": name if _FLAGS.step is None else f"{name} step {_FLAGS.step}",
                     "workdir": _FLAGS.workdir, "step": pretrained.step}
        return pretrained, described
    if _FLAGS.manylangs is not None:
        directory = os.path.normpath(_FLAGS.manylangs)
        return bilm_from_manylangs(directory), {"model": os.path.basename(directory), "manylangs": directory}
    described = {"model": os.path.basename(_FLAGS.weights), "options": _FLAGS.options, "weights": _FLAGS.weights}
    return bilm_from_files(_FLAGS.options, _FLAGS.weights), described


def _static_vectors() -> list[StaticVectors]:
    """The --static files, each named by its file name, or by its path as given when two share one."""
    names = [os.path.basename(path) for path in _FLAGS.static]
    names = names if len(set(names)) == len(names) else list(_FLAGS.static)
    if len(set(names)) != len(names):
        raise tool_flags.UsageError(f"--static names a file twice: {' '.join(_FLAGS.static)}")
    return [StaticVectors.read(path, name) for path, name in zip(_FLAGS.static, names)]


def _file_id(path: str) -> tuple[int, int] | None:
    """`path`'s inode and modification time (None: absent), both new once an atomic write replaced it."""
    if not os.path.exists(path):
        return None
    stat = os.stat(path)
    return stat.st_ino, stat.st_mtime_ns


def _stopped_line(written: Sequence[str], before: Sequence[tuple[int, int] | None]) -> str:
    """What elmo-probe says when SIGTERM stops it: which of its results `written` (their `_file_id`
    before the work: `before`) it wrote, and that the others are as they were."""
    new = [path for path, old in zip(written, before) if _file_id(path) != old]
    kept = ", ".join(path for path in written if path not in new)
    if not new:
        return f"stopped by SIGTERM; nothing written ({kept} left as before)"
    return f"stopped by SIGTERM after writing {', '.join(new)}" + (f" ({kept} left as before)" if kept else "")


def _probe(command: str) -> None:
    """The CLI: the result's JSON and figure in the output directory, its table on stdout; after a
    SIGTERM, one line saying which of them it wrote."""
    _check_flags()
    output = next(path for path in (_FLAGS.output, _FLAGS.workdir, os.getcwd()) if path is not None)
    written = _check_output(output)
    tool_flags.configure_runtime(_FLAGS)
    before = [_file_id(path) for path in written]
    try:
        _probe_task(command, output)
    except SystemExit as e:
        if e.code == SIGTERM_EXIT_STATUS:
            print(_stopped_line(written, before), file=sys.stderr)
        raise
    new = [path for path, old in zip(written, before) if _file_id(path) != old]
    print(f"wrote {', '.join(new)}", file=sys.stderr)  # The JSON, and the figure when matplotlib is there.


def _probe_task(command: str, output: str) -> None:
    """The probes of --task on the model of the flags: the result's JSON and figure in `output`,
    its table on stdout."""
    common = dict(
        control=_FLAGS.control, seed=_FLAGS.seed, engine=_FLAGS.engine, batch_size=_FLAGS.batch_size,
        progress=not _FLAGS.no_progress, max_feature_bytes=int(_FLAGS.max_memory_gib * 2**30),
        static=_static_vectors(),  # Before the data and the model: a malformed file fails at once.
    )
    if _FLAGS.task == wsd.TASK:
        words = read_coarsewsd(_FLAGS.data)
        pretrained, described = _model()
        result = wsd.probe_wsd(
            pretrained, words, _FLAGS.normalize, max_train_per_word=_FLAGS.max_train_per_word,
            per_sentence=_FLAGS.show_predictions, **common
        )
        result.update(described, command=command, data=_FLAGS.data)
        print(wsd_markdown_tables(write_outputs(output, result), result))
        if _FLAGS.show_predictions:
            print(f"\n{wsd_prediction_tables(result)}")
    elif _FLAGS.task == wic.TASK:
        data = read_wic(_FLAGS.data)
        wic.check_pairs(data, _FLAGS.seed)  # Before the model loads, as the files' own errors.
        pretrained, described = _model()
        result = wic.probe_wic(pretrained, data, _FLAGS.normalize, **common)
        result.update(described, command=command, data=_FLAGS.data)
        print(wic_markdown_table(write_outputs(output, result)))
    else:
        train, test = read_conllu(_FLAGS.train), read_conllu(_FLAGS.test)
        dev = read_conllu(_FLAGS.dev) if _FLAGS.dev is not None else None
        pretrained, described = _model()
        result = probe(pretrained, train, dev, test, _FLAGS.task, _FLAGS.normalize, mlp=_FLAGS.mlp, **common)
        result.update(described, command=command, train=_FLAGS.train, dev_file=_FLAGS.dev, test=_FLAGS.test)
        print(markdown_table(write_outputs(output, result)))


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-probe` / `python -m elmo_jax.probe`: the exit status (elmo_jax.cli.tool_flags)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    body = functools.partial(_probe, shlex.join(["elmo-probe", *argv]))
    return tool_flags.run(_FLAGS, argv, body, doc=__doc__, errors=tool_flags.ERRORS)


if __name__ == "__main__":
    sys.exit(main())
