"""Pre-emption: SIGTERM asks a run to stop at the end of the current step, checkpoint and exit.

One process: a SIGTERM handler sets a flag. Several: JAX's preemption service (started by
`jax.distributed.initialize`) has every process agree on the step at which all of them stop.
"""

from __future__ import annotations

import signal
from types import FrameType

import jax

from elmo_jax.runtime.atomic_write import SIGTERM_EXIT_STATUS

EXIT_CODE = SIGTERM_EXIT_STATUS  # What the train command exits with once preempted.


class TrainingPreempted(Exception):
    """The run stopped on SIGTERM after checkpointing; rerunning the same command resumes it."""


class PreemptionWatcher:
    """`reached(step)` is True once SIGTERM arrived (on any process): the step to stop after. A
    context manager around the training loop, restoring the previous SIGTERM handler on exit."""

    def __init__(self) -> None:
        self._multiprocess = jax.process_count() > 1
        self._received = False
        self._previous: signal.Handlers | None = None

    def __enter__(self) -> "PreemptionWatcher":
        if not self._multiprocess:
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._multiprocess:
            signal.signal(signal.SIGTERM, self._previous)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self._received = True

    def reached(self, step: int) -> bool:
        """Call once per step, with the same step numbers on every process."""
        if self._multiprocess:
            from jax.experimental import multihost_utils

            return multihost_utils.reached_preemption_sync_point(step)
        return self._received
