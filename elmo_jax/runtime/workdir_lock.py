"""One training run per workdir: `WORKDIR/train.lock`, held while `train_and_evaluate` runs.

The lock is a file created with O_EXCL holding `{"host", "pid", "start_time"}`. A lock whose
process is gone from this host is taken over with a warning; one from another host is refused.
With several processes, only process 0 takes it.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import socket
from typing import Iterator

import jax

from elmo_jax.runtime.data_parallel import all_processes
from elmo_jax.runtime.processes import pid_running
from elmo_jax.runtime.workdir_files import LOCK

_ATTEMPTS = 3


class WorkdirInUseError(RuntimeError):
    """Another training run holds the workdir (or process 0 could not take its lock)."""


def _read(path: str) -> bytes | None:
    """The lock's content, or None when there is no lock."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _holder(content: bytes) -> dict | None:
    """The {host, pid, start_time} of a lock's content; None if it is not such a record."""
    try:
        holder = json.loads(content)
    except ValueError:
        return None
    valid = isinstance(holder, dict) and isinstance(holder.get("pid"), int) and {"host", "start_time"} <= holder.keys()
    return holder if valid else None


def _is_stale(holder: dict) -> bool:
    """The holder is gone: on this host, with no process of its pid, or with this process's own pid
    (a restarted container reuses pids; this process holds no lock yet)."""
    if holder["host"] != socket.gethostname():
        return False
    return holder["pid"] == os.getpid() or not pid_running(holder["pid"])


def _refusal(workdir: str, path: str, content: bytes) -> WorkdirInUseError:
    holder = _holder(content)
    if holder is None:
        return WorkdirInUseError(
            f"{workdir}: in use by another training run (unreadable lock {path}: {content[:80]!r}); "
            "delete the lock if no run uses this workdir"
        )
    hint = "" if holder["host"] == socket.gethostname() else f"; if that run has stopped, delete {path}"
    return WorkdirInUseError(
        f"{workdir}: in use by another training run (host {holder['host']}, pid {holder['pid']}, "
        f"started {holder['start_time']}){hint}"
    )


def _create(path: str, content: bytes) -> bool:
    """Creates the lock holding `content`; False if it exists. A failed write leaves no lock."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, content)
    except BaseException:
        os.remove(path)
        raise
    finally:
        os.close(fd)
    return True


def _remove_if_unchanged(path: str, stale: bytes) -> None:
    """Removes the lock at `path` if it is still the one that held `stale` (under flock: of two
    processes judging it stale, neither removes the new lock the other then creates)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(fd), os.stat(path)) and _read(path) == stale:
                os.remove(path)
    finally:
        os.close(fd)  # Releases the flock.


def _acquire(workdir: str, path: str) -> bytes:
    """Creates the lock, taking over a stale one; returns its content. WorkdirInUseError if held."""
    start_time = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "start_time": start_time}).encode()
    for _ in range(_ATTEMPTS):
        if _create(path, mine):
            return mine
        held = _read(path)
        if held is None:
            continue  # Released meanwhile.
        holder = _holder(held)
        if holder is None or not _is_stale(holder):
            raise _refusal(workdir, path, held)
        logging.warning(
            "%s: taking over the lock of a run that is gone (host %s, pid %d, started %s)",
            workdir, holder["host"], holder["pid"], holder["start_time"],
        )
        _remove_if_unchanged(path, held)
    raise WorkdirInUseError(f"{workdir}: could not take the lock {path}: other runs keep taking and releasing it")


@contextlib.contextmanager
def hold(workdir: str) -> Iterator[None]:
    """Holds the lock of the existing directory `workdir` while the block runs: WorkdirInUseError
    on every process when process 0 is refused, OSError when the lock cannot be written."""
    path = os.path.join(workdir, LOCK)
    mine, error = None, None
    if jax.process_index() == 0:
        try:
            mine = _acquire(workdir, path)
        except (WorkdirInUseError, OSError) as e:
            error = e
    if not all_processes(error is None):  # The other processes must not train without it.
        raise error or WorkdirInUseError(f"{workdir}: process 0 could not take the workdir lock (see its error)")
    try:
        yield
    finally:
        if mine is not None and _read(path) == mine:
            os.remove(path)
