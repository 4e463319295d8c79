"""Log output of the command-line tools: elmo-jax's own lines, its libraries' errors only.

Records are told apart by the file that logged them, so a library logging through the root logger
stays quiet too.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from typing import Any, Iterator

from absl import logging as absl_logging

FLAG_NAME = "log_library"  # The entry points' absl flag for `configure`.
FLAG_HELP = (
    "Also show the INFO and WARNING log lines of libraries (orbax, jax, absl); by default only their "
    "errors appear beside elmo-jax's own lines."
)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # elmo_jax/


class _LibraryThreshold(logging.Filter):
    """Passes every record logged from the elmo_jax package, and other records at `level` and up."""

    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or record.pathname.startswith(_PACKAGE_DIR)


def configure(log_library: bool = False) -> None:
    """Logs to stderr elmo_jax's records at INFO and up, libraries' at ERROR and up (INFO with
    `log_library`), in absl's format. Call once, after parsing the flags: it formats and filters the
    root logger's handlers."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    for handler in root.handlers:
        # One format for every entry point: absl's, which train.py and evaluate.py (absl apps) print,
        # also on a handler that an early record made Python install with its own (`WARNING:root:`).
        handler.setFormatter(absl_logging.PythonFormatter())
        handler.addFilter(_LibraryThreshold(logging.INFO if log_library else logging.ERROR))


class _ClosedEventLoopErrorsDropped:
    """A `sys.unraisablehook` that drops asyncio's "Event loop is closed" and passes the rest to `inner`."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __call__(self, unraisable: Any) -> None:
        error = unraisable.exc_value
        if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
            self.inner(unraisable)


@contextlib.contextmanager
def library_errors_silenced() -> Iterator[None]:
    """Within it, only elmo_jax's own log records show; libraries' records and unraisable
    exceptions are dropped.

    For an attempt whose failure the caller reports in one line: orbax reading a corrupt checkpoint
    leaves coroutines failing on a closed event loop, hundreds of traceback lines. Garbage is
    collected before leaving; tensorstore's threads can still call into the closed loop later, so a
    hook dropping only those errors stays installed.
    """
    only_package = _LibraryThreshold(logging.CRITICAL + 1)
    handlers = list(logging.getLogger().handlers)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    for handler in handlers:
        handler.addFilter(only_package)
    try:
        yield
    finally:
        gc.collect()
        if isinstance(previous_hook, _ClosedEventLoopErrorsDropped):
            sys.unraisablehook = previous_hook
        else:
            sys.unraisablehook = _ClosedEventLoopErrorsDropped(previous_hook)
        for handler in handlers:
            handler.removeFilter(only_package)
