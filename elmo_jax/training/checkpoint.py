"""Checkpoints with orbax: the train state plus the data iterator's position, written atomically.

Layout: `WORKDIR/checkpoints/<step>/{state,data}`. orbax writes each checkpoint to a temporary
directory and renames it when complete, so a killed run leaves at worst an unfinished temporary
directory (removed when the next run starts), never a checkpoint that looks valid; old
checkpoints are deleted only after a newer one is complete, and a failed write leaves them
untouched. A checkpoint that cannot be read (truncated or corrupt files, NaN or infinite values)
is reported in one line and the next older one is used; the unreadable one is moved aside to
`<step>.unreadable`, never deleted.

`load_params(workdir)` reads only the model params of a checkpoint (with the workdir's
config.json), for evaluation, export and embedding: it builds no model or optimizer, never reads
the optimizer state, and importing this module imports neither optax nor the training loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import orbax.checkpoint as ocp

from elmo_jax import quiet_logs

if TYPE_CHECKING:  # Annotations only: the train state module imports optax.
    from elmo_jax.training.state import TrainState

T = TypeVar("T")

UNREADABLE_SUFFIX = ".unreadable"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, cannot be written, or does not fit the model."""


class _Unreadable(Exception):
    """A checkpoint whose files cannot be read or decoded (internal: triggers the fallback)."""


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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {_first_line(error)}"


def _leaf_name(path: tuple) -> str:
    """'params.lstm.W' for a pytree key path (dict keys, sequence indices, dataclass fields)."""
    return ".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)


def _leaf_specs(tree: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{'params.lstm.W': (shape, dtype)} of the leaves of a tree of arrays or array metadata."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {_leaf_name(p): (tuple(x.shape), np.dtype(x.dtype)) for p, x in leaves}


def _check_finite(tree: Any) -> None:
    """_Unreadable naming the first floating-point leaf holding a NaN or an infinity.

    Corrupt bytes in an array file can decode without any error: checked on load, such a
    checkpoint falls back like an unreadable one instead of training or evaluating on NaN.
    Only this process's shards are read; the processes then agree on the step (`_first_readable`).
    """
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            continue
        shards = [shard.data for shard in leaf.addressable_shards] if isinstance(leaf, jax.Array) else [leaf]
        if not all(np.isfinite(np.asarray(shard)).all() for shard in shards):
            raise _Unreadable(f"non-finite values in {_leaf_name(path)}")


def describe_mismatch(saved: Any, target: Any) -> str | None:
    """The first difference between a checkpoint's array metadata and `target`, or None."""
    have = _leaf_specs(saved)
    want = _leaf_specs(ocp.tree.serialize_tree(abstract_like(target), keep_empty_nodes=True))
    params_first = lambda key: (not key.startswith("params."), key)  # The most telling difference.
    missing = sorted(want.keys() - have.keys(), key=params_first)
    extra = sorted(have.keys() - want.keys(), key=params_first)
    if missing:
        return f"the configured model/optimizer has {missing[0]}, the checkpoint does not"
    if extra:
        return f"the checkpoint has {extra[0]}, the configured model/optimizer does not"
    for key in sorted(want, key=params_first):
        if have[key] != want[key]:
            (saved_shape, saved_dtype), (shape, dtype) = have[key], want[key]
            return f"{key}: checkpoint {saved_shape} {saved_dtype}, configured {shape} {dtype}"
    return None


class _ReadOnlyNotice(logging.Filter):
    """Drops orbax's warning 'Given directory is read only', which it logs for every read-only
    manager: evaluation and embedding ask for one, so it only made users wonder what went wrong."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Given directory is read only")


@contextlib.contextmanager
def _without_read_only_notice() -> Iterator[None]:
    """orbax logs through absl's logger: filter it while a manager is created."""
    notice, logger = _ReadOnlyNotice(), logging.getLogger("absl")
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def _candidate_steps(directory: str, saved: list[int], step: int | None) -> list[int]:
    """The steps to try, newest first: all of `saved`, or only `step` (CheckpointError if not saved)."""
    steps = sorted(saved, reverse=True)
    if not steps:
        raise CheckpointError(f"{directory}: no checkpoint found")
    if step is None:
        return steps
    if step not in steps:
        raise CheckpointError(f"{directory}: no checkpoint for step {step} (have {sorted(steps)})")
    return [step]


def _first_readable(
    directory: str, steps: list[int], read: Callable[[int], T], agree: Callable[[bool], bool]
) -> tuple[T, int, int]:
    """(read(step), step, how many steps before it were unreadable) for the first of `steps` that
    `agree` accepts as read; each unreadable one is reported, CheckpointError if none is readable.

    `agree(ok)` turns this process's outcome into the decision every process takes.
    """
    unreadable: list[str] = []
    for candidate in steps:
        try:
            with quiet_logs.library_errors_silenced():
                restored, error = read(candidate), None
        except _Unreadable as e:
            restored, error = None, str(e)
        if agree(error is None):
            return restored, candidate, len(unreadable)
        error = error or "unreadable on another process"
        unreadable.append(f"step {candidate}: {error}")
        fallback = "; trying the previous one" if candidate != steps[-1] else ""
        logging.warning("%s/%d: unreadable checkpoint (%s)%s", directory, candidate, error, fallback)
    raise CheckpointError(f"{directory}: no readable checkpoint ({'; '.join(unreadable)})")


class Checkpointer:
    """Saves and restores `(TrainState, data_state)` under `directory`."""

    def __init__(self, directory: str, keep: int = 3, read_only: bool = False):
        self.directory = os.path.abspath(directory)
        self.read_only = read_only
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
        handlers = {"state": ocp.StandardCheckpointHandler(), "data": ocp.JsonCheckpointHandler()}
        with _without_read_only_notice():
            self.manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=handlers)
        self._pending: int | None = None  # Step of the save in flight.

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def save(self, step: int, state: TrainState, data_state: dict | None) -> None:
        """Starts an asynchronous save once the previous one is on disk; `wait()` blocks until done.

        Raises CheckpointError if this or the previous save cannot be written (the checkpoints
        already on disk are untouched).
        """
        self.wait()
        try:
            self.manager.save(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state or {})
                ),
                force=True,
            )
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
            f"{self.directory}/{step}: could not write the checkpoint ({_first_line(error)}); "
            "the checkpoints already saved are untouched"
        )

    def restore(self, target: TrainState, step: int | None = None) -> tuple[TrainState, dict, int]:
        """(state, data state, step) restored into the structure, shapes and shardings of `target`.

        Without `step`, the latest readable checkpoint: an unreadable one is reported and the next
        older one tried; unless read-only, the unreadable ones are then moved aside (to
        `<step>.unreadable`) so that the run can save those steps again. A checkpoint that does not
        fit `target` is a configuration error, raised at once.
        """
        from elmo_jax.training.parallel import all_processes  # Imported here: it imports the train step (optax).

        steps = _candidate_steps(self.directory, self.all_steps(), step)
        # Processes may read different files of a checkpoint: they agree on the step to restore.
        restored, candidate, n_unreadable = _first_readable(
            self.directory, steps, lambda s: self._restore_step(s, target), all_processes
        )
        self._set_aside(steps[:n_unreadable])
        return (*restored, candidate)

    def _restore_step(self, step: int, target: TrainState) -> tuple[TrainState, dict]:
        try:
            saved = self.manager.item_metadata(step).state
        except Exception as e:  # orbax and tensorstore report unreadable files as many types.
            raise _Unreadable(_describe(e)) from e
        if saved is None:
            raise _Unreadable("no state metadata")
        mismatch = describe_mismatch(saved, target)
        if mismatch:
            raise CheckpointError(
                f"{self.directory}/{step}: checkpoint does not match the configured model/optimizer ({mismatch})"
            )
        try:
            restored = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract_like(target)), data=ocp.args.JsonRestore()
                ),
            )
        except Exception as e:  # Shapes matched: what fails now is reading or decoding the files.
            raise _Unreadable(_describe(e)) from e
        _check_finite(restored.state)
        return restored.state, dict(restored.data or {})

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


# ----------------------------------------------------------------------------- params only


def saved_config(workdir: str) -> ml_collections.ConfigDict:
    """The config `workdir` was trained with (its config.json): the only one that builds its model."""
    config_path = os.path.join(workdir, "config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{workdir}: no config.json (is this an elmo-jax training workdir?)")
    with open(config_path, encoding="utf-8") as f:
        return ml_collections.ConfigDict(json.load(f))


def checkpoint_directory(workdir: str) -> str:
    """`WORKDIR/checkpoints`; CheckpointError naming `workdir` when it has none."""
    directory = os.path.join(workdir, "checkpoints")
    if not os.path.isdir(directory):
        raise CheckpointError(f"{workdir}: no checkpoint found (is this a training workdir?)")
    return directory


def _read_params(manager: ocp.CheckpointManager, step: int, sharding: jax.sharding.Sharding | None) -> Any:
    """The `params` subtree of checkpoint `step`, with the shapes and dtypes it was saved with."""
    try:
        saved = manager.item_metadata(step).state
    except Exception as e:  # orbax and tensorstore report unreadable files as many types.
        raise _Unreadable(_describe(e)) from e
    if saved is None or "params" not in saved:
        raise _Unreadable("no params in the saved state")
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), saved["params"])
    args = ocp.args.PyTreeRestore(
        item={"params": target},
        restore_args={"params": ocp.checkpoint_utils.construct_restore_args(target)},
        partial_restore=True,  # The optimizer state, LSTM states and RNG stay on disk.
    )
    try:
        restored = manager.restore(step, args=ocp.args.Composite(state=args))
    except Exception as e:
        raise _Unreadable(_describe(e)) from e
    _check_finite(restored.state)
    return restored.state["params"]


def restore_params(
    directory: str, step: int | None = None, sharding: jax.sharding.Sharding | None = None
) -> tuple[Any, int]:
    """(params, step) of the checkpoint `step` under `directory` (default: the latest readable).

    Only the saved state's `params` subtree is read (orbax partial restore), with the shapes and
    dtypes the checkpoint records, so no model, optimizer or abstract train state is built. Leaves
    are NumPy arrays, or with `sharding` jax.Arrays placed with it (e.g. replicated over a mesh).
    An unreadable checkpoint is reported and the previous one read, as `Checkpointer.restore`
    does; each process decides alone, which is safe for host or replicated params: every process
    reads the same whole arrays.
    """
    directory = os.path.abspath(directory)
    options = ocp.CheckpointManagerOptions(read_only=True, create=False, save_interval_steps=0)
    handlers = {"state": ocp.PyTreeCheckpointHandler(), "data": ocp.JsonCheckpointHandler()}
    with _without_read_only_notice():
        manager = ocp.CheckpointManager(directory, options=options, item_handlers=handlers)
    try:
        steps = _candidate_steps(directory, list(manager.all_steps()), step)
        params, step, _ = _first_readable(directory, steps, lambda s: _read_params(manager, s, sharding), bool)
    finally:
        manager.close()
    return params, step


def load_params(workdir: str, step: int | None = None) -> tuple[ml_collections.ConfigDict, dict]:
    """(config, params) of a training workdir: its config.json and the params of checkpoint `step`
    (default: the latest readable) as host NumPy arrays, float32 as trained whatever model.dtype.

    Evaluation, export and embedding need nothing else from a checkpoint: the optimizer state (one
    or two more copies of the params) is neither read nor built.
    """
    config = saved_config(workdir)
    return config, restore_params(checkpoint_directory(workdir), step)[0]
