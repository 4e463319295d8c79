"""Checkpoints with orbax, `WORKDIR/checkpoints/<step>/{state,data,model}`: the train state, the
data iterators' positions and the model record. orbax renames a checkpoint into place once complete
and deletes old ones only after that. An unreadable checkpoint is reported in one line, moved aside
to `<step>.unreadable` and the next older one used.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from elmo_jax.config.model_record import VOCABULARY, record_difference
from elmo_jax.data.vocab import fingerprint_mismatch
from elmo_jax.workdir.checkpoints import (
    CheckpointError, UnreadableCheckpoint, candidate_steps, check_finite, describe_error, first_line, first_readable,
    MODEL_RECORD, first_spec_difference, open_manager, read_model_record,
)
from elmo_jax.runtime.data_parallel import all_processes

if TYPE_CHECKING:  # Annotations only: the train state module imports optax.
    from elmo_jax.training.state import TrainState

UNREADABLE_SUFFIX = ".unreadable"
# Train-state fields renamed since a checkpoint was written: the name in older checkpoints -> today's.
RENAMED_FIELDS = {"lstm_state": "carried_state"}


def abstract_like(tree: Any) -> Any:
    """Shape/dtype/sharding skeleton of a pytree of arrays (the restore target)."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree)


def gather_process_states(local_state: dict | None) -> dict:
    """Every process's data-iterator state, `{'processes': [state_0, state_1, ...]}`: all-gathered
    because orbax writes the JSON item from process 0 only."""
    if jax.process_count() == 1:
        return {"processes": [local_state]}
    from jax.experimental import multihost_utils

    encoded = np.frombuffer(json.dumps(local_state).encode(), dtype=np.uint8)
    length = int(np.max(multihost_utils.process_allgather(np.array([encoded.size]))))
    padded = np.pad(encoded, (0, length - encoded.size))
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


def _saved_names(saved: Any) -> dict[str, str]:
    """{today's field name: its old name} of the renamed fields a checkpoint's state metadata holds."""
    names = saved.keys() if hasattr(saved, "keys") else ()  # orbax's TreeMetadata: a mapping of the fields.
    return {new: old for old, new in RENAMED_FIELDS.items() if old in names}


def _array_fields(state: TrainState) -> list[str]:
    return [f.name for f in dataclasses.fields(state) if f.metadata.get("pytree_node", True)]


class Checkpointer:
    """Saves and restores `(TrainState, data_state)` under `directory`."""

    def __init__(
        self,
        directory: str,
        keep: int = 3,
        read_only: bool = False,
        model_record: dict[str, Any] | None = None,
        vocabulary_file: str | None = None,
    ):
        """`model_record` (`config.model_record`) is saved with every checkpoint and compared on restore;
        `vocabulary_file` is the file whose fingerprint it records, named when a checkpoint's differs."""
        self.directory = os.path.abspath(directory)
        self.read_only = read_only
        self.model_record = model_record
        self.vocabulary_file = vocabulary_file
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None if read_only else keep,  # orbax warns when a read-only manager is given one.
            save_interval_steps=0 if read_only else 1,
            create=not read_only,
            read_only=read_only,
            enable_async_checkpointing=True,
            # With directories created in the background, a save failing before its commit leaves a
            # thread waiting for them that can block the process's exit: created at once instead.
            async_options=ocp.AsyncOptions(create_directories_asynchronously=False),
            cleanup_tmp_directories=not read_only,  # Unfinished saves of a killed run.
        )
        self.manager = open_manager(self.directory, options, ocp.StandardCheckpointHandler())
        self._pending: int | None = None  # Step of the save in flight.

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def save(self, step: int, state: TrainState, data_state: dict | None) -> None:
        """Starts an asynchronous save once the previous one is on disk; CheckpointError if either
        cannot be written."""
        self.wait()
        items = {"state": ocp.args.StandardSave(state), "data": ocp.args.JsonSave(data_state or {})}
        if self.model_record is not None:
            items[MODEL_RECORD] = ocp.args.JsonSave(self.model_record)
        try:
            self.manager.save(step, args=ocp.args.Composite(**items), force=True)
        except (OSError, ValueError, RuntimeError) as e:
            raise self._write_error(step, e) from e
        self._pending = step

    def wait(self) -> None:
        """Blocks until the save in flight is on disk; CheckpointError if it failed."""
        step, self._pending = self._pending, None
        try:
            self.manager.wait_until_finished()
        except (OSError, ValueError, RuntimeError) as e:
            raise self._write_error(step, e) from e

    def _write_error(self, step: int | None, error: BaseException) -> CheckpointError:
        return CheckpointError(
            f"{self.directory}/{step}: could not write the checkpoint ({first_line(error)}); "
            "the checkpoints already saved are untouched"
        )

    def restore(self, target: TrainState, step: int | None = None) -> tuple[TrainState, dict, int]:
        """(state, data state, step) restored into the structure, shapes and shardings of `target`: of
        `step`, else of the latest readable checkpoint (unreadable ones moved aside unless read-only);
        CheckpointError at once for a checkpoint that does not fit `target`."""
        steps = candidate_steps(self.directory, self.all_steps(), step)
        # Processes may read different files of a checkpoint: they agree on the step to restore.
        restored, candidate, n_unreadable = first_readable(
            self.directory, steps, lambda s: self._restore_step(s, target), all_processes
        )
        self._set_aside(steps[:n_unreadable])
        return (*restored, candidate)

    def _restore_step(self, step: int, target: TrainState) -> tuple[TrainState, dict]:
        try:
            saved = self.manager.item_metadata(step).state
        except Exception as e:  # orbax and tensorstore report unreadable files as many types.
            raise UnreadableCheckpoint(describe_error(e)) from e
        if saved is None:
            raise UnreadableCheckpoint("no state metadata")
        saved_names = _saved_names(saved)
        stored = {saved_names.get(f, f): getattr(target, f) for f in _array_fields(target)} if saved_names else target
        want = ocp.tree.serialize_tree(abstract_like(stored), keep_empty_nodes=True)
        # The record first: a key tells more than an array.
        mismatch = self._record_mismatch(step) or first_spec_difference(saved, want, "the configured model/optimizer")
        if mismatch:
            raise CheckpointError(
                f"{self.directory}/{step}: checkpoint does not match the configured model/optimizer ({mismatch})"
            )
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_like(stored)), data=ocp.args.JsonRestore())
        try:
            restored = self.manager.restore(step, args=args)
        except Exception as e:  # Shapes matched: what fails now is reading or decoding the files.
            raise UnreadableCheckpoint(describe_error(e)) from e
        check_finite(restored.state)
        state = restored.state
        if saved_names:
            state = target.replace(**{field: state[saved_names.get(field, field)] for field in _array_fields(target)})
        return state, dict(restored.data or {})

    def _record_mismatch(self, step: int) -> str | None:
        """How this run's model record differs from checkpoint `step`'s, or None."""
        recorded = read_model_record(self.manager, step)
        if self.model_record is None or recorded is None:
            return None
        difference = record_difference(self.model_record, recorded)
        if difference is None:
            return None
        if difference.key == VOCABULARY:  # The run's vocabulary file differs, not its model.
            raise CheckpointError(
                fingerprint_mismatch(self.vocabulary_file or VOCABULARY, difference.configured, difference.recorded)
            )
        return f"{difference.key}: checkpoint {difference.recorded!r}, configured {difference.configured!r}"

    def _set_aside(self, steps: list[int]) -> None:
        """Renames unreadable step directories to `<step>.unreadable[.N]` (kept for inspection)."""
        if not steps or self.read_only:
            return
        if jax.process_index() == 0:
            for step in steps:
                source = os.path.join(self.directory, str(step))
                dest, n = source + UNREADABLE_SUFFIX, 0
                while os.path.exists(dest):
                    n += 1
                    dest = f"{source}{UNREADABLE_SUFFIX}.{n}"
                os.rename(source, dest)
                logging.warning("moved the unreadable checkpoint %s to %s", source, dest)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("elmo_jax:checkpoint_set_aside")
        self.manager.reload()

    def close(self) -> None:
        """Waits for the save in flight (CheckpointError if it failed) and releases the manager."""
        try:
            self.wait()
        finally:
            self.manager.close()
