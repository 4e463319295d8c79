"""The training loop: `train_and_evaluate(config, workdir)`.

Builds the vocabulary, model, optimizer and mesh; resumes from the latest checkpoint (state and
data position) if there is one; trains with periodic logging, checkpoints and evaluation; then
evaluates full-softmax perplexity on the configured split.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import jax
import ml_collections
import numpy as np
from tqdm import tqdm

from elmo_jax.data import corpus
from elmo_jax.data.batching import BiLMBatcher, Prefetcher
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation import Evaluator, format_table
from elmo_jax.model.bilm import BiLM, bilm_from_config
from elmo_jax.training import optim, parallel
from elmo_jax.training.checkpoint import Checkpointer, gather_process_states, local_process_state
from elmo_jax.training.metrics_writer import MetricsWriter, write_json_atomic
from elmo_jax.training.state import TrainState, create_train_state
from elmo_jax.training.step import make_train_step


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or infinite loss."""


def planned_steps(config: ml_collections.ConfigDict) -> tuple[int, int | None]:
    """(total training steps, epochs for the source or None for an endless stream)."""
    train = config.train
    if train.num_steps > 0:
        return train.num_steps, None
    if train.num_epochs <= 0:
        raise ValueError("set train.num_steps or train.num_epochs to a positive value")
    positions = corpus.count_positions(corpus.training_sentences(config.data))
    steps_per_epoch = math.ceil(positions / (train.batch_size * train.unroll_steps))
    return steps_per_epoch * train.num_epochs, train.num_epochs


def setup_model(config: ml_collections.ConfigDict, vocab: Vocabulary) -> BiLM:
    if config.model.softmax.sampled and not vocab.is_frequency_sorted() and config.data.vocab_file:
        logging.warning(
            "%s has no descending-frequency counts; the sampled softmax's log-uniform sampler assumes "
            "frequency order", config.data.vocab_file,
        )
    return bilm_from_config(config.model, len(vocab))


def initial_train_state(
    config: ml_collections.ConfigDict, model: BiLM, mesh: jax.sharding.Mesh, num_steps: int
) -> TrainState:
    tx, _ = optim.make_optimizer(config.train, num_steps)
    state = create_train_state(model, tx, config.seed, config.train.batch_size, config.data.max_chars_per_token)
    return parallel.place_state(state, mesh)


def _save_config(config: ml_collections.ConfigDict, workdir: str) -> None:
    path = os.path.join(workdir, "config.json")
    write_json_atomic(path, config.to_dict())


def _summarise(window: list[dict[str, Any]]) -> dict[str, float]:
    fetched = jax.device_get(window)
    return {k: float(np.mean([m[k] for m in fetched])) for k in fetched[0]}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
    """Trains (or resumes) in `workdir`, then returns the final evaluation result."""
    os.makedirs(workdir, exist_ok=True)
    is_main = jax.process_index() == 0
    if is_main:
        _save_config(config, workdir)
    mesh = parallel.make_mesh()
    parallel.check_batch_size(config.train.batch_size, mesh, "train.batch_size")
    if config.train.batch_size % jax.process_count():
        raise ValueError(f"train.batch_size={config.train.batch_size} must divide by the process count")

    vocab = corpus.load_or_build_vocab(config.data, workdir)
    model = setup_model(config, vocab)
    num_steps, num_epochs = planned_steps(config)
    state = initial_train_state(config, model, mesh, num_steps)
    schedule = optim.make_schedule(config.train.optimizer, num_steps)  # For logging the learning rate.
    n_params = sum(x.size for x in jax.tree.leaves(state.params))
    logging.info("vocabulary %d words, %d parameters, %d devices", len(vocab), n_params, mesh.size)

    local_batch = config.train.batch_size // jax.process_count()
    max_chars = config.data.max_chars_per_token if model.token_encoder == "char_cnn" else None
    source = corpus.train_source(config.data, config.seed, num_epochs, jax.process_index(), jax.process_count())
    batcher = BiLMBatcher(source, vocab, local_batch, config.train.unroll_steps, max_chars)

    checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"), keep=config.train.keep_checkpoints)
    if checkpointer.latest_step() is not None:
        state, saved_data, restored_step = checkpointer.restore(state)
        data_state = local_process_state(saved_data)
        if data_state:
            batcher.load_state_dict(data_state)
        logging.info("resumed from step %d", restored_step)
    start_step = int(jax.device_get(state.step))

    train_step = parallel.parallel_train_step(make_train_step(model, config), mesh, state)
    evaluator = Evaluator(model, vocab, config, mesh)
    writer = MetricsWriter(workdir)
    tokens_per_step = config.train.batch_size * config.train.unroll_steps
    softmax_kind = "sampled" if config.model.softmax.sampled else "full"

    batches = Prefetcher(batcher, size=config.data.prefetch_batches)
    window: list[dict[str, Any]] = []
    window_start = time.perf_counter()
    step = start_step
    bar = tqdm(total=num_steps, initial=start_step, desc="train", unit="step", disable=not is_main)
    try:
        while step < num_steps:
            batch = next(batches, None)  # Fetch only when a step will use it: the data state stays exact.
            if batch is None:
                break
            state, metrics = train_step(state, parallel.shard_batch(batch, mesh))
            step += 1
            window.append(metrics)
            bar.update(1)
            if step % config.train.log_every_steps == 0 or step == num_steps:
                summary = _summarise(window)
                elapsed = time.perf_counter() - window_start
                if not math.isfinite(summary["train_loss"]):
                    raise NonFiniteLossError(
                        f"non-finite training loss at step {step}; the last good checkpoint is kept in "
                        f"{checkpointer.directory}"
                    )
                record = {
                    "step": step,
                    "epoch": round(batcher.epochs_at(batches.state_dict()), 4),
                    **summary,
                    "train_perplexity": math.exp(min(summary["train_loss"], 80.0)),
                    "softmax": softmax_kind,
                    "tokens_per_sec": len(window) * tokens_per_step / elapsed,
                    "learning_rate": float(schedule(step - 1)),
                }
                writer.write(record)
                bar.set_postfix(
                    epoch=f"{record['epoch']:.2f}", loss=f"{summary['train_loss']:.3f}", tok_s=f"{record['tokens_per_sec']:.0f}"
                )
                window, window_start = [], time.perf_counter()
            if step % config.train.checkpoint_every_steps == 0 and step < num_steps:
                checkpointer.save(step, state, gather_process_states(batches.state_dict()))
            if config.eval.every_steps and step % config.eval.every_steps == 0 and step < num_steps:
                result = _evaluate(evaluator, state, config, step, workdir, config.eval.max_tokens)
                writer.write({"step": step, **{f"eval_{k}": v for k, v in result.items()}})
    finally:
        bar.close()
        batches.close()
    if step > start_step or checkpointer.latest_step() is None:
        checkpointer.save(step, state, gather_process_states(batches.state_dict()))
    checkpointer.close()
    result = _evaluate(evaluator, state, config, step, workdir, 0)
    writer.write({"step": step, **{f"eval_{k}": v for k, v in result.items()}})
    if is_main:
        print(format_table(result, f"{config.data.eval_split} @ step {step}"), flush=True)
    return result


def _evaluate(
    evaluator: Evaluator, state: TrainState, config: ml_collections.ConfigDict, step: int, workdir: str, max_tokens: int
) -> dict[str, float]:
    split = config.data.eval_split
    sentences = corpus.eval_sentences(config.data, split)
    result = {"step": step, **evaluator(state.params, sentences, max_tokens=max_tokens)}
    if jax.process_index() == 0:
        write_json_atomic(os.path.join(workdir, f"eval_{split}_{step}.json"), result)
    return result
