"""Checkpoints with orbax: the train state plus the data iterator's position, written atomically.

Layout: `WORKDIR/checkpoints/<step>/{state,data}`. orbax writes each checkpoint to a temporary
directory and renames it when complete, so a killed run leaves at worst an unfinished temporary
directory, never a checkpoint that looks valid; old checkpoints are deleted only after a newer
one is complete.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from elmo_jax.training.state import TrainState


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or does not fit the configured model."""


def abstract_like(tree: Any) -> Any:
    """Shape/dtype/sharding skeleton of a pytree of arrays (the restore target)."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree)


class Checkpointer:
    """Saves and restores `(TrainState, data_state)` under `directory`."""

    def __init__(self, directory: str, keep: int = 3, read_only: bool = False):
        self.directory = os.path.abspath(directory)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=not read_only, read_only=read_only, enable_async_checkpointing=True
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options, item_names=("state", "data"))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def save(self, step: int, state: TrainState, data_state: dict | None, force: bool = True) -> None:
        """Starts an (asynchronous) save; `wait()` blocks until it is on disk."""
        self.manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state or {})
            ),
            force=force,
        )

    def restore(self, target: TrainState, step: int | None = None) -> tuple[TrainState, dict, int]:
        """Restores into the structure, shapes and shardings of `target` (latest step by default)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"{self.directory}: no checkpoint found")
        if step not in self.all_steps():
            raise CheckpointError(f"{self.directory}: no checkpoint for step {step} (have {self.all_steps()})")
        try:
            restored = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract_like(target)), data=ocp.args.JsonRestore()
                ),
            )
        except (ValueError, KeyError, TypeError) as e:
            first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CheckpointError(
                f"{self.directory}/{step}: checkpoint does not match the configured model/optimizer ({first_line})"
            ) from e
        return restored.state, dict(restored.data or {}), step

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
