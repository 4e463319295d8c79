"""Run records in the workdir: `metrics.jsonl` (one JSON object per logged step), eval JSON."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import jax


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def write_json_atomic(path: str, obj: Any) -> None:
    """Writes a temporary file and renames it: `path` is either the old file or the complete new one."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)  # A failed write (full disk) leaves nothing behind.
        raise


class MetricsWriter:
    """Appends metric records to `WORKDIR/metrics.jsonl` (process 0 only)."""

    def __init__(self, workdir: str):
        self.path = os.path.join(workdir, "metrics.jsonl")
        self.enabled = jax.process_index() == 0

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps({k: _jsonable(v) for k, v in record.items()}) + "\n")
            f.flush()
