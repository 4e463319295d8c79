"""Writing files so that a crash, a SIGTERM or a full disk never leaves a partial one: each path
holds its old content or the complete new one, and a set written together is all old or all new.

New content goes to `<path>.tmp<pid>`, fsynced, then renamed over the path. A failed write removes
the temporary (on SIGTERM too, inside `exit_on_sigterm`); a later write to the path removes those
of processes that no longer run.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
import signal
import threading
from typing import Any, Callable, Iterable, Iterator, Mapping, NoReturn

from elmo_jax.runtime.processes import pid_running

SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM  # 143: what a shell reports for a process ended by SIGTERM.
_TMP = ".tmp"


# Set by the handler of `exit_on_sigterm`: Python swallows a SystemExit raised in a weakref callback
# or a __del__, so the commit and the block's end check this instead.
_sigterm_received = threading.Event()


def _raise_exit(signum: int, frame: Any) -> None:
    _sigterm_received.set()
    raise SystemExit(SIGTERM_EXIT_STATUS)


def _exit_if_sigterm_received() -> None:
    """SystemExit(143) once a SIGTERM has arrived, also where its first SystemExit was swallowed."""
    if _sigterm_received.is_set():
        raise SystemExit(SIGTERM_EXIT_STATUS)


@contextlib.contextmanager
def exit_on_sigterm() -> Iterator[None]:
    """Within it, SIGTERM raises SystemExit(143), so `finally` blocks (removing temporaries) run;
    only where SIGTERM has its default action, in the main thread."""
    main_thread = threading.current_thread() is threading.main_thread()
    if not main_thread or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    _sigterm_received.clear()
    signal.signal(signal.SIGTERM, _raise_exit)
    try:
        yield
        _exit_if_sigterm_received()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def _sigterm_held() -> Iterator[None]:
    """SIGTERM waits until the block ends (renames that must all happen, or none); a SIGTERM that
    arrived before it, even one whose SystemExit was swallowed, stops the block from starting."""
    if threading.current_thread() is not threading.main_thread():
        _exit_if_sigterm_received()
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        _exit_if_sigterm_received()
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def remove_stale_temporaries(path: str) -> None:
    """Removes `<path>.tmp<pid>` files and directories whose process no longer runs."""
    prefix = f"{path}{_TMP}"
    for stale in glob.glob(f"{glob.escape(prefix)}*"):
        pid = stale[len(prefix):]
        if not pid.isdigit() or pid_running(int(pid)):
            continue
        if os.path.isdir(stale) and not os.path.islink(stale):
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(stale)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _raise_naming_file(error: BaseException, path: str, tmp: str) -> NoReturn:
    """Raises `error` of writing `tmp` (the temporary of `path`), or the OSError that h5py's
    RuntimeError on closing hides; an OSError with an errno naming no file or `tmp` is raised as
    `[Errno N] <strerror>: '<path>'`."""
    named = error
    if isinstance(error, RuntimeError) and isinstance(error.__context__, OSError):
        named = error.__context__
    if isinstance(named, OSError) and named.errno and named.filename in (None, tmp):
        named = type(named)(named.errno, os.strerror(named.errno), path)
    if named is error:
        raise error
    raise named from error


def _write_or_truncate(fd: int, data: bytes) -> None:
    """Writes all of `data` at the end of `fd`, or truncates the file back to its size before."""
    size = os.fstat(fd).st_size
    view = memoryview(data)
    try:
        while view:  # A short write is followed by one that fails with the reason.
            view = view[os.write(fd, view):]
    except OSError:
        os.ftruncate(fd, size)
        raise


def append_whole(path: str, data: bytes, create: bool = False) -> None:
    """Appends `data` to `path` whole or not at all (OSError naming `path`); with `create`,
    FileExistsError if `path` exists."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if create else 0)
    try:
        fd = os.open(path, flags, 0o644)
        try:
            _write_or_truncate(fd, data)
        finally:
            os.close(fd)
    except OSError as e:
        _raise_naming_file(e, path, path)


def write_atomic(path: str, write: Callable[[str], None]) -> None:
    """Calls `write(tmp)`, then renames tmp to `path` (creating its directory); a failed or
    interrupted write removes tmp and leaves `path` as it was. An I/O error names `path`."""
    write_files_atomic({path: write})


def write_files_atomic(writers: Mapping[str, Callable[[str], None]]) -> None:
    """Writes each path of `writers` with `writers[path](tmp)`: all of them, or none.

    Paths in one new directory are written to a temporary directory renamed into place whole;
    otherwise every temporary is fsynced before the first rename, and the renames hold SIGTERM.
    """
    paths = {path: os.path.abspath(path) for path in writers}
    if len(set(paths.values())) != len(paths):
        raise ValueError(f"the same file is written twice: {', '.join(writers)}")
    directories = {os.path.dirname(p) for p in paths.values()}
    new_directory = directories.pop() if len(directories) == 1 and not os.path.lexists(*directories) else None
    if new_directory:
        staging = f"{new_directory}{_TMP}{os.getpid()}"
        tmps = {path: os.path.join(staging, os.path.basename(p)) for path, p in paths.items()}
    else:
        staging, tmps = None, {path: f"{p}{_TMP}{os.getpid()}" for path, p in paths.items()}
    try:
        if staging:
            remove_stale_temporaries(new_directory)
            os.makedirs(staging)
        for path, write in writers.items():  # Each fsynced, its stale temporaries gone; errors name `path`.
            os.makedirs(os.path.dirname(tmps[path]), exist_ok=True)
            remove_stale_temporaries(paths[path])
            try:
                write(tmps[path])
                _fsync(tmps[path])
            except (OSError, RuntimeError) as e:
                _raise_naming_file(e, path, tmps[path])
        _commit(tmps, paths, staging, new_directory)
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        for tmp in tmps.values():
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)


def _commit(tmps: Mapping[str, str], paths: Mapping[str, str], staging: str | None, directory: str | None) -> None:
    """Renames the written temporaries into place: the staging directory to the new `directory`
    whole when there is one, else each file; then fsyncs the directories that changed.

    Another writer may have created `directory` since it was found absent (two probes or two
    embeddings into one new folder): this set's files then join it, each renamed in.
    """
    with _sigterm_held():
        if not _renamed_whole(staging, directory):
            for path, tmp in tmps.items():
                os.replace(tmp, paths[path])
    parents = {os.path.dirname(p) for p in paths.values()}
    if directory is not None:
        parents.add(os.path.dirname(directory))  # Where the new directory's entry is.
    for parent in parents:
        _fsync(parent)


def _renamed_whole(staging: str | None, directory: str | None) -> bool:
    """Renames `staging` to `directory`: False when there is none, or another writer created
    `directory` first (rename(2) refuses a directory that is not empty)."""
    if staging is None or directory is None:
        return False
    try:
        os.rename(staging, directory)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return False
    return True


def json_writer(obj: Any, sort_keys: bool = True) -> Callable[[str], None]:
    """The function writing `obj` as indented JSON to a path (a writer of `write_atomic`)."""

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=sort_keys)
            f.write("\n")

    return write


def write_json_atomic(path: str, obj: Any) -> None:
    """`obj` as indented JSON with sorted keys, written atomically."""
    write_atomic(path, json_writer(obj))


def check_not_inputs(outputs: Iterable[tuple[str, str | None]], inputs: Iterable[tuple[str, str | None]]) -> None:
    """Raises a one-line ValueError naming both when an output is, or is inside, an input or is
    another output. `outputs` and `inputs` are (flag name, path or None)."""
    outputs = [(name, path) for name, path in outputs if path]
    inputs = [(name, path) for name, path in inputs if path]
    for i, (name, path) in enumerate(outputs):
        for others, why in ((inputs, "refusing to overwrite an input"), (outputs[:i], "refusing to write it twice")):
            for other, other_path in others:
                relation = _relation(path, other_path)
                if relation:
                    raise ValueError(f"{name} {path} {relation} {other} {other_path}: {why}")


def _relation(path: str, other: str) -> str | None:
    """'is' when `path` is the file `other`, 'is inside' when it lies in the directory `other`, else None."""
    real, other_real = os.path.realpath(path), os.path.realpath(other)
    if real == other_real:
        return "is"
    if os.path.isdir(other_real) and real.startswith(other_real.rstrip(os.sep) + os.sep):
        return "is inside"
    try:
        return "is" if os.path.samefile(path, other) else None
    except OSError:  # One of them does not exist (yet).
        return None
