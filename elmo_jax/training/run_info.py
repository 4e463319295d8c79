"""`WORKDIR/run_info.json`, `{"starts": [record, ...]}`: where, when and with what code each
(re)start of a run ran."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
from typing import Any

import jax

from elmo_jax.runtime.atomic_write import write_json_atomic
from elmo_jax.runtime.workdir_files import RUN_INFO

# Distributions whose versions change results or performance (jieba: its words, with data.segmenter='jieba').
LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "ml-collections", "jieba")
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _git(args: list[str], root: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):  # git missing or hanging.
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_info(root: str = SOURCE_ROOT) -> dict[str, Any] | None:
    """{'commit': sha, 'dirty': bool} of the checkout at `root`, or None if `root` is not one."""
    top = _git(["rev-parse", "--show-toplevel"], root)
    # An installed package inside some other repository (e.g. a venv in a checkout) is not a checkout.
    if top is None or os.path.realpath(top) != os.path.realpath(root):
        return None
    commit = _git(["rev-parse", "HEAD"], root)
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    if commit is None or status is None:
        return None
    return {"commit": commit, "dirty": bool(status)}


def library_versions() -> dict[str, str | None]:
    """Installed versions of LIBRARIES (None when not installed) and of Python."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def start_record(step: int) -> dict[str, Any]:
    """What describes this start of the run (resuming from `step`, 0 for a fresh run)."""
    devices = jax.devices()
    return {
        "start_time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "step": step,
        "hostname": socket.gethostname(),
        "command": shlex.join(sys.argv),
        "directory": os.getcwd(),  # What config.json's relative paths are relative to.
        "git": git_info(),
        "versions": library_versions(),
        "devices": {
            "platform": devices[0].platform, "kinds": sorted({d.device_kind for d in devices}), "count": len(devices),
            "local_count": jax.local_device_count(), "process_count": jax.process_count(),
        },
    }


def record_start(workdir: str, step: int) -> None:
    """Appends this start to `WORKDIR/run_info.json` (atomically; process 0 only)."""
    if jax.process_index() != 0:
        return
    path = os.path.join(workdir, RUN_INFO)
    starts = _previous_starts(path) if os.path.exists(path) else []
    write_json_atomic(path, {"starts": [*starts, start_record(step)]})


def _previous_starts(path: str) -> list[dict[str, Any]]:
    move_away = "move it away to start a new record"
    try:
        with open(path) as f:
            data = json.load(f)
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); {move_away}") from e
    starts = data.get("starts") if isinstance(data, dict) else None
    if not isinstance(starts, list):
        raise ValueError(f'{path}: expected {{"starts": [...]}}; {move_away}')
    return starts
