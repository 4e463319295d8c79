"""Perplexity: every target counted once, states carried exactly across windows."""

import math

import jax
import numpy as np
import pytest

from elmo_jax.data.sources import DataError
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation.perplexity import Evaluator, format_table
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel
from elmo_jax.model.initial_params import init_params
from tests.training.helpers import WORDS, tiny_config

RNG = np.random.default_rng(0)
SENTENCES = [list(RNG.choice(WORDS, RNG.integers(1, 12))) for _ in range(23)]


def _evaluate(batch_size, unroll_steps, sentences=SENTENCES, vocab_words=WORDS, stateful=True):
    config = tiny_config(**{"eval.batch_size": batch_size, "eval.unroll_steps": unroll_steps, "eval.stateful": stateful})
    vocab = Vocabulary.build([vocab_words])
    model = bilm_from_config(config.model, len(vocab))
    params = init_params(model, jax.random.key(3), config.data.max_chars_per_token)
    evaluator = Evaluator(model, vocab, config, data_parallel.make_mesh(jax.devices()[:1]))
    return evaluator(params, sentences, progress=False)


@pytest.mark.slow
def test_every_target_is_counted_once_and_windows_do_not_matter():
    expected_tokens = sum(len(s) + 1 for s in SENTENCES)
    short = _evaluate(batch_size=3, unroll_steps=4)
    long = _evaluate(batch_size=3, unroll_steps=13)
    assert short["tokens"] == long["tokens"] == expected_tokens
    # Same 3 streams cut into different windows: carried states make the NLL identical.
    for key in ("forward_nll", "backward_nll"):
        assert short[key] == pytest.approx(long[key], rel=1e-5)
    whole = _evaluate(batch_size=1, unroll_steps=expected_tokens)  # One window, no carrying.
    windowed = _evaluate(batch_size=1, unroll_steps=5)
    assert whole["forward_nll"] == pytest.approx(windowed["forward_nll"], rel=1e-5)
    assert whole["backward_nll"] == pytest.approx(windowed["backward_nll"], rel=1e-5)


def test_stateless_evaluation_starts_every_window_afresh():
    """eval.stateful=False: windows of 4 lose the context that carried states give them (another NLL
    over the same tokens); one window over each whole stream has nothing to carry, so the same NLL."""
    n_tokens = sum(len(s) + 1 for s in SENTENCES)
    carried, fresh = _evaluate(3, 4), _evaluate(3, 4, stateful=False)
    assert carried["tokens"] == fresh["tokens"] == n_tokens
    assert abs(carried["forward_nll"] - fresh["forward_nll"]) > 1e-6  # (A random tiny model: small, not 0.)
    assert abs(carried["backward_nll"] - fresh["backward_nll"]) > 1e-6
    whole, whole_fresh = _evaluate(1, n_tokens), _evaluate(1, n_tokens, stateful=False)
    assert whole_fresh["forward_nll"] == pytest.approx(whole["forward_nll"], rel=1e-6)
    assert whole_fresh["backward_nll"] == pytest.approx(whole["backward_nll"], rel=1e-6)


def test_perplexity_definitions_and_oov_rate():
    result = _evaluate(2, 6, sentences=SENTENCES + [["unseen", "the"]], vocab_words=WORDS[:-3])
    assert result["forward_perplexity"] == pytest.approx(math.exp(result["forward_nll"]))
    assert result["perplexity"] == pytest.approx(math.exp(0.5 * (result["forward_nll"] + result["backward_nll"])))
    words = [w for s in SENTENCES + [["unseen", "the"]] for w in s]
    expected_oov = sum(w not in WORDS[:-3] for w in words) / len(words)
    assert result["oov_rate"] == pytest.approx(expected_oov)
    assert "forward perplexity" in format_table(result, "valid")


def test_empty_evaluation_set_is_an_error():
    with pytest.raises(DataError, match="no sentences"):
        _evaluate(2, 4, sentences=[])
