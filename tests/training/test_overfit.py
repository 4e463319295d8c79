"""A tiny biLM memorises a few sentences: the strongest end-to-end check that learning works."""

import jax
import numpy as np

from elmo_jax.data.batching import BiLMBatcher
from elmo_jax.data.sources import InMemorySource
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel
from elmo_jax.training.trainer import build_trainer
from tests.training.helpers import tiny_config

SENTENCES = [
    "the quick brown fox jumps over the lazy dog".split(),
    "a stitch in time saves nine".split(),
    "colourless green ideas sleep furiously".split(),
]


def test_tiny_model_memorises_three_sentences():
    config = tiny_config(
        **{
            "model.lstm.dim": 32,
            "model.width": 16,
            "model.dropout": 0.0,
            "model.softmax.sampled": False,
            "train.batch_size": 1,
            "train.unroll_steps": 8,
            "train.optimizer.name": "adam",
            "train.optimizer.learning_rate": 0.02,
        }
    )
    vocab = Vocabulary.build(SENTENCES)
    model = bilm_from_config(config.model, len(vocab))
    mesh = data_parallel.make_mesh(jax.devices()[:1])
    state, step, _ = build_trainer(model, config, mesh, 300)
    source = InMemorySource(SENTENCES, shuffle=False, num_epochs=None)
    batches = BiLMBatcher(source, vocab, 1, 8, config.data.max_chars_per_token)
    losses = []
    for _ in range(300):
        state, metrics = step(state, data_parallel.shard_batch(next(batches), mesh))
        losses.append(float(metrics["train_loss"]))
    # The text repeats with a period of 21 tokens; a memorising model predicts nearly every
    # token (chance: log(21 words) = 3.0 nats). Bound: mean loss of the last 20 steps < 0.1.
    assert losses[0] > 2.5
    assert np.mean(losses[-20:]) < 0.1, losses[-20:]
