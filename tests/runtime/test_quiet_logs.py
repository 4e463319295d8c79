"""The command-line tools show elmo-jax's own log lines, the progress bars and results, and library
log lines (orbax, jax) only with --log_library."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import types

import pytest

from elmo_jax.runtime import quiet_logs
from tests.entry_points import ROOT, run_script, script_env
from tests.training.helpers import write_corpus

# absl's prefix of a Python log record: level, date, time, thread, file:line (XLA's C++ lines name .cc files).
ABSL_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ (\S+\.py):\d+\] ")
LIBRARY_WORDS = ("orbax", "read only", "checkpoint_manager", "libtpu")


def _log_lines(stderr: str) -> list[str]:
    """The log lines of a stderr, progress bars (redrawn with \\r) left out."""
    lines = [part for line in stderr.splitlines() for part in line.split("\r")]
    return [line for line in lines if ABSL_LINE.match(line) or line.startswith(("INFO:", "WARNING:"))]


def _module(*args: str, cache: str) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", *args], env=script_env(cache), capture_output=True, text=True, timeout=600, cwd=ROOT
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(workdir, compilation cache, train.py's CompletedProcess) of a 4-step tiny run with two checkpoints."""
    root = tmp_path_factory.mktemp("quiet_logs")
    cache, workdir = str(root / "jax_cache"), str(root / "run")
    done = run_script(
        "train.py", "--config=configs/tests/tiny.py", "--config.data.source=text",
        f"--config.data.train_files={write_corpus(str(root / 'train'), 40, seed=0)}",
        f"--config.data.eval_files={write_corpus(str(root / 'valid'), 6, seed=1, n_files=1)}",
        "--config.train.num_steps=4", "--config.train.log_every_steps=2", "--config.train.checkpoint_every_steps=2",
        f"--workdir={workdir}", compile_cache=cache,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir, cache, done


def test_training_logs_only_its_own_lines(trained):
    _, _, done = trained
    logged = [ABSL_LINE.match(line).group(1) for line in _log_lines(done.stderr)]
    assert logged == ["corpus.py", "loop.py"]  # Building the vocabulary; vocabulary, parameters, devices.
    assert re.search(r"vocabulary 19 words, \d+ parameters, 1 devices \(cpu\)\n", done.stderr)
    assert "train: 100%" in done.stderr and "files @ step 4" in done.stdout
    assert not any(word in done.stderr for word in LIBRARY_WORDS)


def test_evaluation_export_and_embedding_log_nothing(trained, tmp_path):
    workdir, cache, _ = trained
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("the cat sat\n")
    runs = {
        "evaluate.py": run_script("evaluate.py", f"--workdir={workdir}", compile_cache=cache),
        "export": _module("elmo_jax.interop.bilm_hdf5", f"--workdir={workdir}", f"--options={tmp_path / 'o.json'}",
                          f"--weights={tmp_path / 'w.hdf5'}", cache=cache),
        "embed": _module("elmo_jax.inference.embedder", f"--workdir={workdir}", f"--input={sentences}",
                         f"--output={tmp_path / 'e.hdf5'}", cache=cache),
    }
    for name, done in runs.items():
        assert done.returncode == 0, (name, done.stderr[-3000:])
        assert _log_lines(done.stderr) == [], name
        assert not any(word in done.stderr for word in LIBRARY_WORDS), name
    assert runs["export"].stderr == ""  # No progress bar either.


def test_log_library_shows_the_libraries_lines(trained):
    workdir, cache, _ = trained
    done = run_script("evaluate.py", f"--workdir={workdir}", "--log_library", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checkpoint_manager.py" in {ABSL_LINE.match(line).group(1) for line in _log_lines(done.stderr)}


def test_the_filter_passes_the_projects_records_and_the_libraries_errors():
    threshold = quiet_logs._LibraryThreshold(logging.ERROR)

    def record(path: str, level: int) -> logging.LogRecord:
        return logging.LogRecord("name", level, path, 1, "message", None, None)

    project = os.path.join(os.path.dirname(quiet_logs.__file__), "training", "loop.py")
    library = os.path.join(os.path.dirname(logging.__file__), "orbax_like.py")
    assert threshold.filter(record(project, logging.INFO))
    assert not threshold.filter(record(library, logging.WARNING))
    assert threshold.filter(record(library, logging.ERROR))


def test_late_closed_event_loop_errors_stay_dropped_and_other_unraisables_still_show(monkeypatch):
    """tensorstore threads can call back into a failed read's closed event loop after the context."""
    shown = []
    monkeypatch.setattr(sys, "unraisablehook", shown.append)

    def unraisable(error: BaseException):
        return types.SimpleNamespace(exc_type=type(error), exc_value=error, exc_traceback=None, err_msg=None, object=None)

    for _ in range(2):  # Entered twice: still one filter in front of the original hook.
        with quiet_logs.library_errors_silenced():
            sys.unraisablehook(unraisable(ValueError("dropped inside")))
    assert sys.unraisablehook.inner == shown.append
    sys.unraisablehook(unraisable(RuntimeError("Event loop is closed")))
    assert shown == []
    other = [unraisable(RuntimeError("another error")), unraisable(ValueError("Event loop is closed"))]
    for args in other:
        sys.unraisablehook(args)
    assert shown == other


def test_a_tool_logs_in_absl_format_like_train_py_even_after_an_early_record():
    """An early record makes Python install a handler of its own format (`WARNING:root:...`);
    `configure` gives every handler absl's, so the tools' lines look like train.py's."""
    script = (
        "import logging; logging.warning('early'); from elmo_jax.runtime import quiet_logs; quiet_logs.configure(); "
        "from elmo_jax.data.unsegmented import UnsegmentedWatch; UnsegmentedWatch('lines').see([['苹果公司发布了新的手机和电脑']])"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    early, line = done.stderr.splitlines()
    assert early == "WARNING:root:early"
    assert ABSL_LINE.match(line).group(1) == "unsegmented.py" and "lines look like Chinese" in line
