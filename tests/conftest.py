"""Shared test setup: repository root on sys.path (for `tests` and `benchmarks`), the host-memory tuning of the
entry points and the tests' XLA flags (before JAX starts), the session's persistent compilation
cache, and one real tiny training run shared by the tests that read a workdir."""

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
from tests.entry_points import SESSION_CACHE_ENV_VAR, xla_flags  # noqa: E402

# XLA reads its flags when its backend starts (the first computation, after this): the tests' own
# join any the user set.
os.environ["XLA_FLAGS"] = xla_flags(*os.environ.get("XLA_FLAGS", "").split())
host_memory.reuse_freed_memory()
# The tools run in process must not cache this process's compilations in the user's cache
# directory: their own setting is off, ...
os.environ[compilation_cache.ENV_VAR] = ""
# ... and the session keeps every compilation in a persistent cache of its own, shared with the
# scripts the tests run as subprocesses (tests/entry_points.py): a program compiled again (the tiny
# model's train and eval steps, for most training tests) is loaded instead, about 5 s rather than
# 45 s per tiny run on 2 CPU cores. JAX keys each entry by the program itself, so a run of another
# model or shape still compiles its own.
os.environ.setdefault(SESSION_CACHE_ENV_VAR, tempfile.mkdtemp(prefix="elmo_jax_xla_"))
compilation_cache.configure(os.environ[SESSION_CACHE_ENV_VAR])
# The CPU LSTM kernel is compiled once per test session, in a directory of its own (not ~/.cache).
os.environ.setdefault("ELMO_JAX_KERNEL_CACHE", tempfile.mkdtemp(prefix="elmo_jax_kernels_"))


@pytest.fixture(scope="session")
def tiny_training(tmp_path_factory) -> dict:
    """A real 10-step run on a random corpus, evaluated at 5 and 10: its workdir, stderr, final
    result, validation file and the calls that read the validation split (`eval_reads`)."""
    from elmo_jax.data import corpus
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
    stderr, eval_reads = io.StringIO(), []
    read_eval_sentences = corpus.eval_sentences
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(stderr):  # stderr: the progress bars.
        patch.setattr(corpus, "eval_sentences", lambda *args: eval_reads.append(args) or read_eval_sentences(*args))
        result = train_and_evaluate(config, workdir)
    return {"workdir": workdir, "stderr": stderr.getvalue(), "result": result,
            "eval_file": str(root / "valid" / "part-0.txt"), "eval_reads": eval_reads}


@pytest.fixture(scope="session")
def tiny_training_run(tiny_training) -> tuple[str, str, dict]:
    """(workdir, stderr, final result) of the shared tiny run."""
    return tiny_training["workdir"], tiny_training["stderr"], tiny_training["result"]
