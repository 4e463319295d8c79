"""Checkpoints with orbax: the train state plus the data iterator's position, written atomically.

Layout: `WORKDIR/checkpoints/<step>/{state,data}`. orbax writes each checkpoint to a temporary
directory and renames it when complete, so a killed run leaves at worst an unfinished temporary
directory, never a checkpoint that looks valid; old checkpoints are deleted only after a newer
one is complete.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from elmo_jax.training.state import TrainState


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or does not fit the configured model."""


def abstract_like(tree: Any) -> Any:
    """Shape/dtype/sharding skeleton of a pytree of arrays (the restore target)."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree)


def gather_process_states(local_state: dict | None) -> dict:
    """Every process's data-iterator state, as `{'processes': [state_0, state_1, ...]}`.

    Each process reads its own part of the data, so each has its own position; orbax writes the
    JSON item from process 0, hence the all-gather (JSON bytes, padded to a common length).
    """
    if jax.process_count() == 1:
        return {"processes": [local_state]}
    from jax.experimental import multihost_utils

    encoded = np.frombuffer(json.dumps(local_state).encode(), dtype=np.uint8)
    length = int(np.max(multihost_utils.process_allgather(np.array([encoded.size]))))
    padded = np.zeros(length, np.uint8)
    padded[: encoded.size] = encoded
    gathered = np.asarray(multihost_utils.process_allgather(padded)).reshape(jax.process_count(), length)
    return {"processes": [json.loads(row.tobytes().rstrip(b"\0")) for row in gathered]}


def local_process_state(saved: dict) -> dict | None:
    """This process's entry of a `gather_process_states` record."""
    states = saved.get("processes", [])
    if len(states) != jax.process_count():
        raise CheckpointError(
            f"checkpoint holds data positions for {len(states)} processes, this run has {jax.process_count()}"
        )
    return states[jax.process_index()]


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
