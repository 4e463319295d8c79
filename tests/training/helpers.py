"""Shared helpers for training tests: tiny configs, random batches, text corpora."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from elmo_jax.config.overrides import apply_overrides
from elmo_jax.config.recipes import recipe_module
from elmo_jax.data import corpus
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training import optim, parallel
from elmo_jax.runtime import data_parallel
from elmo_jax.training.checkpoint import Checkpointer
from elmo_jax.config.model_record import model_record
from elmo_jax.model.initial_params import param_shapes
from elmo_jax.training.state import TrainState

WORDS = "the cat sat on a mat while dogs ran past old red barns near quiet hills".split()


def shaped_params(model, max_chars: int, seed: int, scale: float = 0.5):
    """N(0, scale^2) params of `model`'s shapes, drawn leaf by leaf in tree order (`param_shapes`:
    traced, no initializer compiled or run, seconds cheaper on CPU), for tests that check no
    initial value."""
    shapes = param_shapes(model, max_chars)
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda s: jnp.asarray(rng.normal(0.0, scale, s.shape), s.dtype), shapes)


def recipe_config(recipe: str, **overrides):
    """The config of a recipe by name (e.g. 'demo') with dotted-key overrides."""
    config = recipe_module(recipe).get_config()
    apply_overrides(config, overrides)
    return config


def tiny_config(**overrides):
    """configs/tests/tiny.py with dotted-key overrides, e.g. {'model.dropout': 0.0}."""
    return recipe_config("tests/tiny", **overrides)


def random_batch(rng: np.random.Generator, vocab_size: int, batch: int, steps: int, chars: int, mask_tail: int = 0):
    """A batch `{field: [2, batch, steps, ...]}` with random ids; the last `mask_tail` positions of
    row 0 are padding in both directions."""
    mask = np.ones((2, batch, steps), bool)
    if mask_tail:
        mask[:, 0, -mask_tail:] = False
    return {
        "token_ids": rng.integers(0, vocab_size, (2, batch, steps)).astype(np.int32),
        "targets": rng.integers(0, vocab_size, (2, batch, steps)).astype(np.int32),
        "char_ids": rng.integers(1, 262, (2, batch, steps, chars)).astype(np.int32),
        "mask": mask,
    }


def write_corpus(directory: str, n_sentences: int, seed: int, n_files: int = 2) -> str:
    """Random sentences over WORDS split into text files; returns a glob."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    for f in range(n_files):
        with open(os.path.join(directory, f"part-{f}.txt"), "w") as out:
            for _ in range(n_sentences // n_files):
                out.write(" ".join(rng.choice(WORDS, rng.integers(2, 9))) + "\n")
    return os.path.join(directory, "part-*.txt")


def make_checkpoint_workdir(tmp_path, recipe: str = "tests/tiny", recorded: bool = True, **overrides) -> str:
    """A workdir as `train_and_evaluate` leaves it (config.json, vocab.txt, orbax checkpoint), of
    `recipe` (the tiny config unless named) on a small text corpus with dotted-key `overrides`;
    `recorded=False`: the checkpoint has no model record, as those written before it had one.

    The params are random rather than trained: training even two steps costs about a minute of
    CPU compilation, and any params exercise the same checkpoint -> hdf5 path.
    """
    files = write_corpus(str(tmp_path / "corpus"), 12, seed=0)
    config = recipe_config(
        recipe, **{"data.source": "text", "data.train_files": files, "data.eval_files": files, **overrides}
    )
    workdir = str(tmp_path / "workdir")
    os.makedirs(workdir)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(config.to_dict(), f)
    vocab = corpus.load_or_build_vocab(config.data, workdir)
    model = bilm_from_config(config.model, len(vocab))
    params = shaped_params(model, config.data.max_chars_per_token, seed=0)
    tx, _ = optim.make_optimizer(config.train, config.train.num_steps)
    state = TrainState(
        step=jnp.asarray(2, jnp.int32), params=params, opt_state=tx.init(params),
        carried_state=model.initial_state(config.train.batch_size), rng=jax.random.key_data(jax.random.key(0)), tx=tx,
    )
    record = model_record(config, vocab.fingerprint()) if recorded else None
    checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"), model_record=record)
    checkpointer.save(2, parallel.place_state(state, data_parallel.make_mesh()), {})
    checkpointer.close()
    return workdir


def swap_vocabulary_lines(workdir: str) -> tuple[str, str, str]:
    """Swaps the first two words after the special tokens in `workdir`'s vocab.txt: the same size, each
    word now naming the other's softmax row. Returns (its path, its fingerprint before, after)."""
    path = os.path.join(workdir, "vocab.txt")
    before = Vocabulary.load(path).fingerprint()
    with open(path) as f:
        lines = f.readlines()
    lines[3], lines[4] = lines[4], lines[3]
    with open(path, "w") as f:
        f.writelines(lines)
    return path, before, Vocabulary.load(path).fingerprint()


def tensorboard_scalars(logdir: str) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} as TensorBoard reads them from `logdir` (restarted steps purged)."""
    accumulator = EventAccumulator(logdir, size_guidance={"scalars": 0})  # 0: keep every point.
    accumulator.Reload()
    return {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}
