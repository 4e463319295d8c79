"""Run records in the workdir: `metrics.jsonl` (one JSON object per logged step), TensorBoard
event files holding the same numbers, eval JSON."""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import socket
import time
from typing import Any

import jax
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

from elmo_jax.runtime.atomic_write import append_whole, write_atomic
from elmo_jax.runtime import workdir_files


def _item(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _jsonable(value: Any) -> Any:
    value = _item(value)  # Non-finite floats as 'nan' / 'inf' strings: JSON has no such numbers.
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _is_past(line: bytes, step: int) -> bool:
    """Whether `line` is a metrics record of a step after `step` (a line that is not one is kept)."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] > step


def drop_records_after(path: str, step: int) -> None:
    """Rewrites `path` (atomically, if anything changes) without a partial last line and without
    the records of steps after `step`: a run resumed from checkpoint `step` logs those steps again."""
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    kept = [line for line in lines if line.endswith(b"\n") and not _is_past(line, step)]
    if kept == lines:
        return

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.writelines(kept)

    write_atomic(path, write)


class ScalarEventFile:
    """A TensorBoard event file of scalars, written synchronously (nothing lost if the process dies),
    named to sort after the files of earlier starts."""

    def __init__(self, logdir: str, purge_step: int):
        name = f"events.out.tfevents.{time.time_ns()}.{socket.gethostname()}.{os.getpid()}"
        self.path = os.path.join(logdir, name)
        # A session START at `purge_step` makes TensorBoard drop what earlier files hold from there.
        start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
        self._append(
            [
                event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"),
                event_pb2.Event(wall_time=time.time(), step=purge_step, session_log=start),
            ],
            create=True,
        )

    def write(self, step: int, scalars: dict[str, float]) -> None:
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in scalars.items()]
        self._append([event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values))])

    def _append(self, events: list[event_pb2.Event], create: bool = False) -> None:
        buffer = io.BytesIO()
        records = RecordWriter(buffer)
        for event in events:
            records.write(event.SerializeToString())
        append_whole(self.path, buffer.getvalue(), create=create)


class MetricsWriter:
    """Appends metric records, each whole or not at all, to `WORKDIR/metrics.jsonl` and their numbers
    to a TensorBoard event file (process 0). What an earlier attempt logged after `start_step` is
    dropped from metrics.jsonl and hidden in TensorBoard."""

    def __init__(self, workdir: str, start_step: int = 0):
        self.path = os.path.join(workdir, workdir_files.METRICS)
        self.enabled = jax.process_index() == 0
        self.events = None
        if self.enabled:
            drop_records_after(self.path, start_step)
            self.events = ScalarEventFile(workdir, purge_step=start_step + 1)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        line = json.dumps({k: _jsonable(v) for k, v in record.items()}) + "\n"
        append_whole(self.path, line.encode())
        values = {k: _item(v) for k, v in record.items() if k != "step"}
        scalars = {k: float(v) for k, v in values.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)}
        self.events.write(int(record["step"]), scalars)
