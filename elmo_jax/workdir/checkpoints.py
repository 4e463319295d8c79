"""A training workdir's checkpoints, read without training (no optax): one's params and model record,
and the failures every reader and the training Checkpointer share."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from elmo_jax.config.migration import migrated_record
from elmo_jax.runtime import quiet_logs, workdir_files

T = TypeVar("T")

MODEL_RECORD = "model"  # The checkpoint item holding `config.model_record` of the run that wrote it.


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, cannot be written, or does not fit the model."""


class UnreadableCheckpoint(Exception):
    """A checkpoint whose files cannot be read or decoded, or hold NaN or infinite values: what makes
    a reader fall back to the previous step."""


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def describe_error(error: BaseException) -> str:
    return f"{type(error).__name__}: {first_line(error)}"


def leaf_name(path: tuple) -> str:
    """'params.lstm.W' for a pytree key path (dict keys, sequence indices, dataclass fields)."""
    return ".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)


def check_finite(tree: Any) -> None:
    """UnreadableCheckpoint naming the first floating-point leaf (of this process's shards) holding a
    NaN or an infinity: corrupt bytes can decode without an error."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            continue
        shards = [shard.data for shard in leaf.addressable_shards] if isinstance(leaf, jax.Array) else [leaf]
        if not all(np.isfinite(np.asarray(shard)).all() for shard in shards):
            raise UnreadableCheckpoint(f"non-finite values in {leaf_name(path)}")


def _leaf_specs(tree: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{'params.lstm.W': (shape, dtype)} of the leaves of a tree of arrays or array metadata."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {leaf_name(p): (tuple(x.shape), np.dtype(x.dtype)) for p, x in leaves}


def first_spec_difference(saved: Any, wanted: Any, wanted_by: str) -> str | None:
    """The first difference of names, shapes or dtypes between a checkpoint's arrays (or their
    metadata) `saved` and the tree `wanted_by` wants, or None. Params come first: the most telling."""
    have, want = _leaf_specs(saved), _leaf_specs(wanted)
    params_first = lambda key: (not key.startswith("params."), key)
    missing = sorted(want.keys() - have.keys(), key=params_first)
    extra = sorted(have.keys() - want.keys(), key=params_first)
    if missing:
        return f"{wanted_by} has {missing[0]}, the checkpoint does not"
    if extra:
        return f"the checkpoint has {extra[0]}, {wanted_by} does not"
    for key in sorted(want, key=params_first):
        if have[key] != want[key]:
            (saved_shape, saved_dtype), (shape, dtype) = have[key], want[key]
            return f"{key}: checkpoint {saved_shape} {saved_dtype}, {wanted_by} {shape} {dtype}"
    return None


def _not_read_only_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Given directory is read only")


def open_manager(
    directory: str, options: ocp.CheckpointManagerOptions, state_handler: ocp.CheckpointHandler
) -> ocp.CheckpointManager:
    """An orbax manager of a run's checkpoint items, created without the warning 'Given directory is
    read only' that orbax logs (through absl's logger) for every read-only manager."""
    handlers = {"state": state_handler, "data": ocp.JsonCheckpointHandler(), MODEL_RECORD: ocp.JsonCheckpointHandler()}
    logger = logging.getLogger("absl")
    logger.addFilter(_not_read_only_notice)
    try:
        return ocp.CheckpointManager(directory, options=options, item_handlers=handlers)
    finally:
        logger.removeFilter(_not_read_only_notice)


def candidate_steps(directory: str, saved: list[int], step: int | None) -> list[int]:
    """The steps to try, newest first: all of `saved`, or only `step` (CheckpointError if not saved)."""
    steps = sorted(saved, reverse=True)
    if not steps:
        raise CheckpointError(f"{directory}: no checkpoint found")
    if step is None:
        return steps
    if step not in steps:
        raise CheckpointError(f"{directory}: no checkpoint for step {step} (have {sorted(steps)})")
    return [step]


def first_readable(
    directory: str, steps: list[int], read: Callable[[int], T], agree: Callable[[bool], bool]
) -> tuple[T, int, int]:
    """(read(step), step, how many steps before it were unreadable) for the first of `steps` read
    on every process (`agree(ok)`); each unreadable one is reported, CheckpointError if none is."""
    unreadable: list[str] = []
    for candidate in steps:
        try:
            with quiet_logs.library_errors_silenced():
                restored, error = read(candidate), None
        except UnreadableCheckpoint as e:
            restored, error = None, str(e)
        if agree(error is None):
            return restored, candidate, len(unreadable)
        error = error or "unreadable on another process"
        unreadable.append(f"step {candidate}: {error}")
        fallback = "; trying the previous one" if candidate != steps[-1] else ""
        logging.warning("%s/%d: unreadable checkpoint (%s)%s", directory, candidate, error, fallback)
    raise CheckpointError(f"{directory}: no readable checkpoint ({'; '.join(unreadable)})")


def checkpoint_directory(workdir: str) -> str:
    """`WORKDIR/checkpoints`; CheckpointError naming `workdir` when it has none."""
    directory = os.path.join(workdir, workdir_files.CHECKPOINTS)
    if not os.path.isdir(directory):
        raise CheckpointError(f"{workdir}: no checkpoint found (is this a training workdir?)")
    return directory


class Checkpoint(NamedTuple):
    """One checkpoint's params, step and model record (None for checkpoints written without one)."""

    params: Any
    step: int
    record: dict[str, Any] | None


def read_model_record(manager: ocp.CheckpointManager, step: int) -> dict[str, Any] | None:
    """Checkpoint `step`'s model record under today's key names, or None."""
    if not os.path.isdir(os.path.join(str(manager.directory), str(step), MODEL_RECORD)):
        return None
    try:
        restored = manager.restore(step, args=ocp.args.Composite(**{MODEL_RECORD: ocp.args.JsonRestore()}))
    except Exception as e:
        raise UnreadableCheckpoint(describe_error(e)) from e
    return migrated_record(restored[MODEL_RECORD] or {})


def _read_params(manager: ocp.CheckpointManager, step: int, sharding: jax.sharding.Sharding | None) -> Checkpoint:
    """The `params` subtree of checkpoint `step`, with the shapes and dtypes it was saved with, and its record."""
    try:
        saved = manager.item_metadata(step).state
    except Exception as e:  # orbax and tensorstore report unreadable files as many types.
        raise UnreadableCheckpoint(describe_error(e)) from e
    if saved is None or "params" not in saved:
        raise UnreadableCheckpoint("no params in the saved state")
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), saved["params"])
    args = ocp.args.PyTreeRestore(
        item={"params": target},
        restore_args={"params": ocp.checkpoint_utils.construct_restore_args(target)},
        partial_restore=True,  # The optimizer state, LSTM states and RNG stay on disk.
    )
    try:
        restored = manager.restore(step, args=ocp.args.Composite(state=args))
    except Exception as e:
        raise UnreadableCheckpoint(describe_error(e)) from e
    check_finite(restored.state)
    return Checkpoint(restored.state["params"], step, read_model_record(manager, step))


def restore_params(
    directory: str, step: int | None = None, sharding: jax.sharding.Sharding | None = None
) -> Checkpoint:
    """(params, step, record) of checkpoint `step` under `directory` (default: the latest readable):
    NumPy arrays, or jax.Arrays placed with `sharding`; each process reads the same whole arrays."""
    directory = os.path.abspath(directory)
    options = ocp.CheckpointManagerOptions(read_only=True, create=False, save_interval_steps=0)
    manager = open_manager(directory, options, ocp.PyTreeCheckpointHandler())
    try:
        steps = candidate_steps(directory, list(manager.all_steps()), step)
        checkpoint, _, _ = first_readable(directory, steps, lambda s: _read_params(manager, s, sharding), bool)
    finally:
        manager.close()
    return checkpoint
