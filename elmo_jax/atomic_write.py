"""Writing a file so that a crash or a full disk never leaves a partial one: `path` holds either
its old content or the complete new one."""

from __future__ import annotations

import json
import os
from typing import Any, Callable


def write_atomic(path: str, write: Callable[[str], None]) -> None:
    """Calls `write(tmp)`, then renames tmp to `path` (creating its directory); a failed write
    removes tmp and leaves `path` as it was."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json_atomic(path: str, obj: Any) -> None:
    """`obj` as indented JSON with sorted keys, written atomically."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")

    write_atomic(path, write)
