"""elmo_jax.runtime.atomic_write: whole or untouched outputs, temporaries removed (also on SIGTERM and
after a killed process), I/O errors naming the file, outputs that are inputs refused."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest

from elmo_jax.runtime.atomic_write import (
    SIGTERM_EXIT_STATUS, check_not_inputs, write_atomic, write_files_atomic,
)
from tests.entry_points import ROOT


def _write_text(text: str):
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    return write


def _fail(error: BaseException):
    def write(tmp: str) -> None:
        open(tmp, "w").close()
        raise error

    return write


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_stale_temporaries_of_ended_processes_are_removed(tmp_path):
    out = tmp_path / "out.hdf5"
    dead, live = _dead_pid(), os.getppid()
    (tmp_path / f"out.hdf5.tmp{dead}").write_text("partial")
    (tmp_path / f"out.hdf5.tmp{live}").write_text("another process is writing it")
    (tmp_path / "other.hdf5.tmp1").write_text("not a temporary of out.hdf5")
    write_atomic(str(out), _write_text("new"))
    assert out.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["other.hdf5.tmp1", "out.hdf5", f"out.hdf5.tmp{live}"]


def test_stale_staging_directory_is_removed(tmp_path):
    staging = tmp_path / f"export.tmp{_dead_pid()}"
    staging.mkdir()
    (staging / "weights.hdf5").write_text("partial")
    write_files_atomic({str(tmp_path / "export" / "a.txt"): _write_text("a")})
    assert sorted(os.listdir(tmp_path)) == ["export"]


@pytest.mark.parametrize("code, message", [(errno.ENOSPC, "No space left on device"), (errno.EFBIG, "File too large")])
def test_disk_errors_name_the_output(tmp_path, code, message):
    out = tmp_path / "out.json"
    out.write_text("old")
    with pytest.raises(OSError) as raised:
        write_atomic(str(out), _fail(OSError(code, message)))
    assert str(raised.value) == f"[Errno {code}] {message}: '{out}'"
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]
    with pytest.raises(OSError, match=rf"^\[Errno {code}\] {message}: '{out}'$"):  # h5py's multi-line text.
        write_atomic(str(out), _fail(OSError(code, f"Can't write data (filename = 'x',\n errno = {code})")))


def test_a_cleanup_error_does_not_hide_the_write_error(tmp_path):
    """h5py closing a file after a failed write raises a RuntimeError without the file's name."""

    def write(tmp: str) -> None:
        try:
            raise OSError(errno.EFBIG, f"Can't write data (file write failed: filename = '{tmp}',\n errno = 27)")
        finally:
            raise RuntimeError("Can't decrement id ref count (errno = 27)")

    out = tmp_path / "out.hdf5"
    with pytest.raises(OSError, match=rf"^\[Errno 27\] File too large: '{out}'$"):
        write_atomic(str(out), write)


def test_other_errors_pass_unchanged(tmp_path):
    error = FileNotFoundError("in.txt: input file not found")
    with pytest.raises(FileNotFoundError) as raised:
        write_atomic(str(tmp_path / "out"), _fail(error))
    assert raised.value is error and os.listdir(tmp_path) == []


def test_a_set_is_written_whole_or_not_at_all(tmp_path):
    a, b, other = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "other.txt"
    for path in (a, b, other):
        path.write_text("old")
    with pytest.raises(ValueError, match="bad"):
        write_files_atomic({str(a): _write_text("new"), str(b): _fail(ValueError("bad"))})
    assert [p.read_text() for p in (a, b)] == ["old", "old"]
    write_files_atomic({str(a): _write_text("new a"), str(b): _write_text("new b")})
    assert [p.read_text() for p in (a, b, other)] == ["new a", "new b", "old"]
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt", "other.txt"]


def test_a_set_in_a_new_directory_appears_whole(tmp_path):
    out = tmp_path / "deep" / "export"
    with pytest.raises(ValueError, match="bad"):
        write_files_atomic({str(out / "a"): _write_text("a"), str(out / "b"): _fail(ValueError("bad"))})
    assert os.listdir(tmp_path / "deep") == []
    write_files_atomic({str(out / "a"): _write_text("a"), str(out / "b"): _write_text("b")})
    assert sorted(os.listdir(out)) == ["a", "b"] and os.listdir(tmp_path / "deep") == ["export"]


def test_a_new_directory_another_writer_creates_meanwhile_gets_both_sets(tmp_path):
    """Found absent, then created by another writer before the rename (a probe and its control
    into one new --output): the second set joins the first, nothing is lost or left staged."""
    out = tmp_path / "out"

    def other_writer_first(tmp: str) -> None:
        out.mkdir()
        (out / "control.json").write_text("control")
        _write_text("model")(tmp)

    write_files_atomic({str(out / "model.json"): other_writer_first, str(out / "model.png"): _write_text("png")})
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "control.json": "control", "model.json": "model", "model.png": "png",
    }
    assert os.listdir(tmp_path) == ["out"]


# Pairs of processes forked together, from a fresh interpreter (forking a test process that runs
# JAX's threads could deadlock): each trial's line says the writers' exit codes and what landed.
RACING_WRITERS = (
    "import multiprocessing, os, sys\n"
    "from elmo_jax.runtime.atomic_write import write_files_atomic\n"
    "def write(directory, name, barrier):\n"
    "    barrier.wait()\n"
    "    write_files_atomic({os.path.join(directory, name): lambda tmp: open(tmp, 'w').write(name)})\n"
    "context = multiprocessing.get_context('fork')\n"
    "for trial in range(20):\n"
    "    directory, barrier = os.path.join(sys.argv[1], str(trial)), context.Barrier(2)\n"
    "    writers = [context.Process(target=write, args=(directory, name, barrier)) for name in 'ab']\n"
    "    for writer in writers:\n"
    "        writer.start()\n"
    "    for writer in writers:\n"
    "        writer.join()\n"
    "    print([w.exitcode for w in writers], sorted(os.listdir(directory)))\n"
)


def test_two_processes_writing_into_one_new_directory_both_land(tmp_path):
    """Started together, 20 times: each process's file is there (the second rename failed with
    'Directory not empty' in most trials, after all its work)."""
    done = subprocess.run([sys.executable, "-c", RACING_WRITERS, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[0, 0] ['a', 'b']"] * 20, done.stdout + done.stderr
    assert len(os.listdir(tmp_path)) == 20  # No staging directory left.


def test_sigterm_during_a_write_removes_the_temporary(tmp_path):
    """SIGTERM's default action would end the process before the cleanup: exit 143, old file kept."""
    out = tmp_path / "out.txt"
    out.write_text("old")
    script = (
        "import os, signal, sys\n"
        "from elmo_jax.runtime.atomic_write import exit_on_sigterm, write_atomic\n"
        "def write(tmp):\n"
        "    open(tmp, 'w').write('partial')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    signal.pause()\n"  # The handler's SystemExit ends the wait.
        "with exit_on_sigterm():\n"
        "    write_atomic(sys.argv[1], write)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == SIGTERM_EXIT_STATUS, done.stderr
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_a_sigterm_swallowed_in_a_weakref_callback_still_stops_the_commit(tmp_path):
    """Python only prints an exception raised in a weakref callback: a SIGTERM handled there (seen
    during an embedding, in tqdm's bookkeeping) must still leave the old file and exit 143."""
    out = tmp_path / "out.txt"
    out.write_text("old")
    script = (
        "import os, signal, sys, weakref\n"
        "from elmo_jax.runtime.atomic_write import exit_on_sigterm, write_atomic\n"
        "class Thing:\n"
        "    pass\n"
        "def write(tmp):\n"
        "    open(tmp, 'w').write('new')\n"
        "    thing = Thing()\n"
        "    ref = weakref.ref(thing, lambda r: (os.kill(os.getpid(), signal.SIGTERM), sum(range(100))))\n"
        "    del thing\n"  # The callback runs here, the handler inside it; its SystemExit is printed.
        "with exit_on_sigterm():\n"
        "    write_atomic(sys.argv[1], write)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert "Exception ignored" in done.stderr  # The case this is about: the first SystemExit was lost.
    assert done.returncode == SIGTERM_EXIT_STATUS, done.stderr
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_writing_never_touches_the_signal_handlers(tmp_path, monkeypatch):
    """Training writes beside a SIGTERM handler that Python cannot see (JAX's pre-emption service
    of a multi-process run): restoring 'the default' after a write would disarm it."""
    calls = []
    monkeypatch.setattr(signal, "signal", lambda *args: calls.append(args))
    write_atomic(str(tmp_path / "a"), _write_text("a"))
    write_files_atomic({str(tmp_path / "new" / "b"): _write_text("b"), str(tmp_path / "new" / "c"): _write_text("c")})
    assert calls == [] and (tmp_path / "new" / "c").read_text() == "c"


def test_a_sigterm_handler_of_the_program_stays(tmp_path):
    def handler(signum, frame):
        pass

    seen = []

    def write(tmp: str) -> None:
        seen.append(signal.getsignal(signal.SIGTERM))
        open(tmp, "w").close()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        write_atomic(str(tmp_path / "out"), write)
        assert seen == [handler] and signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outputs_that_are_inputs_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("x")
    os.symlink("in.txt", tmp_path / "link.txt")
    os.link(tmp_path / "in.txt", tmp_path / "hard.txt")
    (tmp_path / "run").mkdir()
    for output, relation in [("./in.txt", "is"), ("link.txt", "is"), ("hard.txt", "is"), ("run/x", "is inside")]:
        inputs = [("--input", "in.txt"), ("--dir", str(tmp_path / "run"))]
        other = "--dir " + str(tmp_path / "run") if relation == "is inside" else "--input in.txt"
        with pytest.raises(ValueError) as raised:
            check_not_inputs([("--output", output)], inputs)
        assert str(raised.value) == f"--output {output} {relation} {other}: refusing to overwrite an input"
    with pytest.raises(ValueError, match="^--b x.txt is --a ./x.txt: refusing to write it twice$"):
        check_not_inputs([("--a", "./x.txt"), ("--b", "x.txt")], [])
    check_not_inputs([("--output", "out.txt"), ("--other", None)], [("--input", "in.txt"), ("--unset", None)])
