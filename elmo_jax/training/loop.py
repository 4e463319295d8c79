"""The training loop: `train_and_evaluate(config, workdir)`.

Resumes from the latest readable checkpoint, trains with periodic logs, checkpoints, evaluations
and probes, then evaluates full-softmax perplexity. No checkpoint is written from a state reached
through a non-finite step; SIGTERM ends the step, checkpoints and raises TrainingPreempted.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import time
from typing import Any, Callable, Iterator

import jax
import ml_collections
import numpy as np
from tqdm import tqdm

from elmo_jax.data import corpus
from elmo_jax.data.batching import Batch, Prefetcher
from elmo_jax.data.char_vocab import CharVocabulary, n_char_ids
from elmo_jax.data.manylangs_inputs import ManyLangsInputs
from elmo_jax.data.resumable import ResumableIterator
from elmo_jax.data.sources import DataError
from elmo_jax.evaluation.perplexity import Evaluator, format_table
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel, workdir_files, workdir_lock
from elmo_jax.training import init_from, probes, run_info
from elmo_jax.training.checkpoint import Checkpointer, gather_process_states, local_process_state
from elmo_jax.runtime.atomic_write import write_json_atomic
from elmo_jax.config import check_negative_samples, validate
from elmo_jax.config.model_record import BYTES, model_record
from elmo_jax.training.metrics_writer import MetricsWriter
from elmo_jax.training.preemption import PreemptionWatcher, TrainingPreempted
from elmo_jax.model.initial_params import init_params
from elmo_jax.training.state import TrainState
from elmo_jax.training.trainer import build_trainer
from elmo_jax.workdir.saved_config import saved_config


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or infinite loss or gradient norm (`train.nonfinite_policy='stop'`)."""


class WorkdirError(OSError):
    """The workdir cannot be created or written."""


def planned_steps(config: ml_collections.ConfigDict) -> tuple[int, int | None]:
    """(total training steps, epochs for the source or None for an endless stream)."""
    train = config.train
    if train.num_steps > 0:
        return train.num_steps, None
    positions = corpus.count_positions(corpus.training_sentences(config.data))
    steps_per_epoch = math.ceil(positions / (train.batch_size * train.unroll_steps))
    return steps_per_epoch * train.num_epochs, train.num_epochs


def _workdir_error(workdir: str, error: OSError) -> WorkdirError:
    return WorkdirError(f"{workdir}: cannot write to the workdir ({error})")


def _write_config(
    config: ml_collections.ConfigDict, characters: CharVocabulary | ManyLangsInputs | None, workdir: str
) -> None:
    """Writes `config.json` and the character vocabulary `chars.txt` (or an ELMoForManyLangs model's
    inputs, `manylangs_inputs.json`) (process 0), what the model is rebuilt from; only once the run fits
    the workdir's checkpoint, so that a refused rerun leaves the files the checkpoints were trained with."""
    try:
        if jax.process_index() == 0:
            write_json_atomic(os.path.join(workdir, workdir_files.CONFIG), config.to_dict())
            if characters is not None:
                own = isinstance(characters, ManyLangsInputs)
                name = workdir_files.MANYLANGS_INPUTS if own else workdir_files.CHARS
                characters.save(os.path.join(workdir, name))
    except OSError as e:
        raise _workdir_error(workdir, e) from e


def _holds_results(workdir: str) -> bool:
    """A checkpoint or a metrics record is on disk: what a failed run never removes."""
    checkpoints = os.path.join(workdir, workdir_files.CHECKPOINTS)
    if os.path.isdir(checkpoints) and any(name.isdigit() for name in os.listdir(checkpoints)):
        return True
    metrics = os.path.join(workdir, workdir_files.METRICS)
    return os.path.exists(metrics) and os.path.getsize(metrics) > 0


def _remove_run_files(workdir: str, keep_directory: bool) -> None:
    """Deletes `workdir` (or only its content), logging rather than raising: the run's error matters more."""
    try:
        if not keep_directory:
            shutil.rmtree(workdir)
            return
        for entry in os.scandir(workdir):
            (shutil.rmtree if entry.is_dir(follow_symlinks=False) else os.remove)(entry.path)
    except OSError as e:
        logging.warning("%s: could not remove what the failed run wrote (%s)", workdir, e)


@contextlib.contextmanager
def _workdir_of_run(workdir: str) -> Iterator[None]:
    """Creates `workdir` and holds its lock while the run uses it. A run that fails before saving a
    result in a missing or empty workdir removes what it wrote (a rerun would pick up its config.json)."""
    with contextlib.ExitStack() as stack:
        try:
            existed = os.path.exists(workdir)
            fresh = not existed or not os.listdir(workdir)
            os.makedirs(workdir, exist_ok=True)
            stack.enter_context(workdir_lock.hold(workdir))
        except OSError as e:
            raise _workdir_error(workdir, e) from e
        try:
            yield
        except BaseException:
            if fresh and jax.process_index() == 0 and not _holds_results(workdir):
                _remove_run_files(workdir, keep_directory=existed)  # The lock too: its release then finds none.
            raise


Window = list[tuple[int, dict[str, Any]]]  # (step, that step's metrics on the device).


def _summarise(window: Window) -> dict[str, float]:
    """Means over the steps whose update was applied, and the number of skipped steps."""
    fetched = [metrics for _, metrics in jax.device_get(window)]
    applied = [m for m in fetched if not m["nonfinite"]]
    keys = [k for k in fetched[0] if k != "nonfinite"]
    summary = {k: float(np.mean([m[k] for m in applied])) if applied else math.nan for k in keys}
    summary["skipped_steps"] = len(fetched) - len(applied)
    return summary


class _Run:
    """One training run's moving parts: state, data position, metrics window, checkpoints."""

    def __init__(
        self, config: ml_collections.ConfigDict, workdir: str, state: TrainState, batcher: ResumableIterator[Batch],
        checkpointer: Checkpointer, schedule: Any, evaluator: Evaluator, eval_sentences: list[list[str]],
        prober: probes.TrainingProbes | None,
    ):
        self.config, self.workdir, self.state, self.batcher = config, workdir, state, batcher
        self.checkpointer, self.schedule = checkpointer, schedule
        self.evaluator, self.eval_sentences, self.prober = evaluator, eval_sentences, prober
        self.batches = Prefetcher(batcher, size=config.data.prefetch_batches)
        self.step = self.saved_step = self.start_step = int(jax.device_get(state.step))
        run_info.record_start(workdir, self.step)
        self.writer = MetricsWriter(workdir, self.step)
        self.window: Window = []
        self.window_start = time.perf_counter()
        self.check_finite = config.train.nonfinite_policy == "stop"

    def train(
        self, train_step: Callable, mesh: jax.sharding.Mesh, num_steps: int, preemption: PreemptionWatcher
    ) -> None:
        """Steps until `num_steps` or the end of the data, logging, checkpointing and evaluating."""
        train = self.config.train
        is_main = jax.process_index() == 0
        # The run's average rate: steps are dispatched ahead and wait at each log step, so a rate over
        # the last few updates (tqdm's default) swung the estimate from minutes to an hour and back.
        bar = tqdm(total=num_steps, initial=self.step, desc="train", unit="step", disable=not is_main, smoothing=0)
        try:
            while True:
                if preemption.reached(self.step):
                    self._stop_for_preemption()
                if self.step >= num_steps:
                    break
                batch = next(self.batches, None)  # Fetch only when a step will use it: the data state stays exact.
                if batch is None:
                    break
                self.state, metrics = train_step(self.state, data_parallel.shard_batch(batch, mesh))
                self.step += 1
                self.window.append((self.step, metrics))
                bar.update(1)
                if self.step % train.log_every_steps == 0 or self.step == num_steps:
                    record = self.log()
                    bar.set_postfix(
                        epoch=f"{record['epoch']:.2f}", loss=f"{record['train_loss']:.3f}",
                        tok_s=f"{record['tokens_per_sec']:.0f}",
                    )
                if self.step % train.checkpoint_every_steps == 0 and self.step < num_steps:
                    self.save()
                every = self.config.eval.every_steps
                if every and self.step % every == 0 and self.step < num_steps:
                    self.evaluate(self.config.eval.max_tokens)
                if self.prober and self.prober.due(self.step) and self.step < num_steps:
                    self.prober(self.state.params, self.step)
        finally:
            bar.close()
            self.batches.close()
        if self.window:  # The data ran out between two log steps.
            self.log()

    def log(self) -> dict[str, Any]:
        """Writes one metrics record of the steps since the previous one; `steps` says how many (a
        window cut short is logged as such: its means and tokens/s describe steps timed by this run)."""
        self._check_finite()
        summary = _summarise(self.window)
        elapsed = time.perf_counter() - self.window_start
        train = self.config.train
        record = {
            "step": self.step,
            "epoch": round(self.batcher.epochs_at(self.batches.state_dict()), 4),
            "steps": len(self.window),
            **summary,
            "train_perplexity": math.exp(min(summary["train_loss"], 80.0)),
            "softmax": "sampled" if self.config.model.softmax.sampled else "full",
            "tokens_per_sec": len(self.window) * train.batch_size * train.unroll_steps / elapsed,
            "learning_rate": float(self.schedule(self.step - 1)),
        }
        self.writer.write(record)
        self.window, self.window_start = [], time.perf_counter()
        return record

    def save(self) -> None:
        """Starts saving state and data position; never from a state reached through a non-finite step."""
        self._check_finite()
        self.checkpointer.save(self.step, self.state, gather_process_states(self.batches.state_dict()))
        self.saved_step = self.step

    def _check_finite(self) -> None:
        """NonFiniteLossError for a non-finite step in the window (`train.nonfinite_policy='stop'`)."""
        if not self.check_finite:
            return
        for step, metrics in jax.device_get(self.window):
            if metrics["nonfinite"]:
                raise NonFiniteLossError(
                    f"non-finite training loss or gradient norm at step {step} (loss {metrics['train_loss']}, "
                    f"gradient norm {metrics['grad_norm']}); the last good checkpoint is kept in "
                    f"{self.checkpointer.directory} (train.nonfinite_policy='skip' skips such updates instead)"
                )

    def _stop_for_preemption(self) -> None:
        """Logs and checkpoints what this run trained, then raises TrainingPreempted saying what is saved."""
        if self.window:
            self.log()
        if self.saved_step != self.step:
            self.save()
        self.checkpointer.wait()
        checkpoint, resume = f"checkpoint {self.checkpointer.directory}/{self.step}", "rerun the same command to resume"
        if self.step != self.start_step:
            message = f"stopped by SIGTERM at step {self.step}; {checkpoint} is saved, {resume}"
        elif self.step in self.checkpointer.all_steps():
            message = f"stopped by SIGTERM before the first step; {checkpoint} is kept, {resume}"
        else:
            message = "stopped by SIGTERM before the first step; nothing was saved"
        logging.warning(message)
        raise TrainingPreempted(message)

    def evaluate(self, max_tokens: int) -> dict[str, float]:
        """Perplexity of the current parameters on the evaluation split (eval JSON and a metrics record)."""
        result = {"step": self.step, **self.evaluator(self.state.params, self.eval_sentences, max_tokens=max_tokens)}
        if jax.process_index() == 0:
            data = self.config.data
            name = workdir_files.evaluation_file(
                corpus.eval_set_name(data.source, data.eval_split), self.step, self.config.eval.stateful
            )
            write_json_atomic(os.path.join(self.workdir, name), result)
        self.writer.write({"step": self.step, **{f"eval_{k}": v for k, v in result.items()}})
        return result


def _check_resumed_source(config: ml_collections.ConfigDict, workdir: str) -> None:
    """DataError when a resumed run reads another data.source than its checkpoint's data position
    is in (its config.json's): a position in one corpus means nothing in another."""
    if not os.path.exists(os.path.join(workdir, workdir_files.CONFIG)):
        return
    trained = saved_config(workdir).data.source
    if trained != config.data.source:
        raise DataError(
            f"data.source={config.data.source!r}, but the checkpoint in {workdir} holds a position in "
            f"data.source={trained!r} (its config.json): resume with the source it trained on, or train in a new "
            "workdir"
        )


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
    """Trains (or resumes) in `workdir` and returns the final evaluation result; call from the main
    thread. ConfigError before the workdir is touched, WorkdirInUseError if another run trains in it,
    TrainingPreempted after checkpointing on SIGTERM."""
    validate(config)
    probe_data = probes.read_probe_data(config.eval.probe)  # A bad file fails before the workdir is touched.
    with _workdir_of_run(workdir):
        return _train_and_evaluate(config, workdir, probe_data)


def _train_and_evaluate(
    config: ml_collections.ConfigDict, workdir: str, probe_data: probes.ProbeData | None
) -> dict[str, float]:
    """The run, in a created and locked `workdir`."""
    if config.init.options:
        config = init_from.config_with_init_model(config)
    manylangs = None
    if config.init.manylangs:
        config, manylangs = init_from.config_with_manylangs_model(config)
    mesh = data_parallel.make_mesh()
    data_parallel.check_batch_size(config.train.batch_size, mesh, "train.batch_size")
    if config.train.batch_size % jax.process_count():
        raise ValueError(f"train.batch_size={config.train.batch_size} must divide by the process count")

    with PreemptionWatcher() as preemption:
        corpus.warn_if_unsegmented(config.data)  # Before the passes over the corpus (the vocabulary, epochs).
        vocab = corpus.load_or_build_vocab(config.data, workdir)
        characters = manylangs or corpus.load_characters(config.data, workdir)
        check_negative_samples(config, len(vocab), corpus.vocab_origin(config.data))
        eval_sentences = corpus.eval_sentences(config.data, config.data.eval_split)  # Read once per run.
        eval_set = corpus.eval_set_name(config.data.source, config.data.eval_split)
        if not eval_sentences:
            raise DataError(f"the evaluation set ({eval_set}) has no sentences")
        if config.model.softmax.sampled and not vocab.is_frequency_sorted() and config.data.vocab_file:
            logging.warning(
                "%s has no descending-frequency counts; the sampled softmax's log-uniform sampler assumes "
                "frequency order", config.data.vocab_file,
            )
        model = bilm_from_config(config.model, len(vocab), n_char_ids(characters))
        num_steps, num_epochs = planned_steps(config)
        max_chars = model.token_encoder_class.max_chars(config.data.max_chars_per_token)
        if max_chars and manylangs is None:  # ELMoForManyLangs cuts words to max_chars - 2 characters, as it did.
            corpus.warn_cut_words(vocab, max_chars, characters)
        checkpoints = os.path.join(workdir, workdir_files.CHECKPOINTS)
        record = model_record(config, vocab.fingerprint(), characters.fingerprint() if characters else BYTES)
        checkpointer = Checkpointer(
            checkpoints, keep=config.train.keep_checkpoints, model_record=record,
            vocabulary_file=os.path.join(workdir, workdir_files.VOCAB),
        )
        try:
            resuming = checkpointer.latest_step() is not None
            if resuming:
                _check_resumed_source(config, workdir)
            params = None
            if (config.init.options or config.init.manylangs) and not resuming:
                fresh = init_params(model, jax.random.key(config.seed), config.data.max_chars_per_token)
                if config.init.options:
                    params = init_from.init_params(config, vocab, fresh)
                else:
                    params = init_from.manylangs_init_params(config, fresh)
                logging.info("starting from %s (the optimizer starts fresh)",
                             config.init.weights or config.init.manylangs)
            state, train_step, schedule = build_trainer(model, config, mesh, num_steps, params)
            n_params = sum(x.size for x in jax.tree.leaves(state.params))
            logging.info(  # The platform too: jax's warning that it fell back to the CPU is a library line.
                "vocabulary %d words, %d parameters, %d devices (%s)", len(vocab), n_params, mesh.size,
                mesh.devices.flat[0].platform,
            )
            batcher = corpus.training_batcher(
                config.data, vocab, config.train.batch_size, config.train.unroll_steps, max_chars, config.seed,
                num_epochs, jax.process_index(), jax.process_count(), characters,
            )
            if resuming:
                state, saved_data, restored_step = checkpointer.restore(state)
                data_state = local_process_state(saved_data)
                if data_state:
                    batcher.load_state_dict(data_state)
                logging.info("resumed from step %d", restored_step)
            _write_config(config, characters, workdir)  # Only now: a run refused for its checkpoint leaves the old one.
            evaluator = Evaluator(model, vocab, config, mesh, characters)
            prober = probes.TrainingProbes(config, vocab, probe_data, workdir, characters) if probe_data else None
            run = _Run(config, workdir, state, batcher, checkpointer, schedule, evaluator, eval_sentences, prober)
            run.train(train_step, mesh, num_steps, preemption)
            if run.step != run.saved_step or checkpointer.latest_step() is None:
                run.save()
        finally:
            checkpointer.close()
    result = run.evaluate(max_tokens=0)
    if jax.process_index() == 0:
        print(format_table(result, f"{eval_set} @ step {run.step}"), flush=True)
    if run.prober:
        run.prober(run.state.params, run.step)
    return result
