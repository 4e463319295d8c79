"""Whether a process of this host still runs: what tells a stale lock or temporary from a live one."""

from __future__ import annotations

import os


def pid_running(pid: int) -> bool:
    """True when a process with `pid` exists on this host (another user's included)."""
    try:
        os.kill(pid, 0)  # Signal 0: only checks that the process exists.
    except ProcessLookupError:
        return False
    except PermissionError:  # It exists, as another user's process.
        return True
    return True
