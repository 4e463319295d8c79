"""XLA compilations and their seconds, as the embedding benchmarks count them (jax.monitoring)."""

from __future__ import annotations

import jax

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # One per XLA compilation.


class CompileCounter:
    """XLA compilations and their seconds, counted through jax.monitoring since construction."""

    def __init__(self) -> None:
        self.count, self.seconds = 0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration: float, **kwargs) -> None:
        if event == BACKEND_COMPILE_EVENT:
            self.count += 1
            self.seconds += duration
