"""Shared test setup: repository root on sys.path (for `tests` and `benchmarks`), the host-memory tuning of the
entry points (before JAX starts), and one real tiny training run shared by the tests that read a
workdir."""

import contextlib
import io
import os
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from elmo_jax.runtime import compilation_cache, host_memory  # noqa: E402

host_memory.reuse_freed_memory()
# The tools run in process must not cache this process's compilations on disk (scripts run as
# subprocesses get JAX's own cache settings from tests/entry_points.py).
os.environ[compilation_cache.ENV_VAR] = ""
# The CPU LSTM kernel is compiled once per test session, in a directory of its own (not ~/.cache).
os.environ.setdefault("ELMO_JAX_KERNEL_CACHE", tempfile.mkdtemp(prefix="elmo_jax_kernels_"))


@pytest.fixture(scope="session")
def tiny_training_run(tmp_path_factory):
    """(workdir, stderr, final result) of a real 10-step run on a random corpus, evaluated at 5 and 10."""
    from elmo_jax.training.loop import train_and_evaluate
    from tests.training.helpers import tiny_config, write_corpus

    root = tmp_path_factory.mktemp("tiny_run")
    config = tiny_config(
        **{
            "data.source": "text",
            "data.train_files": write_corpus(str(root / "train"), 60, seed=0),
            "data.eval_files": write_corpus(str(root / "valid"), 10, seed=1, n_files=1),
            "eval.every_steps": 5,
        }
    )
    workdir = str(root / "run")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):  # The progress bars.
        result = train_and_evaluate(config, workdir)
    return workdir, stderr.getvalue(), result
