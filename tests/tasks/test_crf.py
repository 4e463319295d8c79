"""The linear-chain CRF against brute force: every tag sequence of tiny sentences enumerated in NumPy (float64),
for the log partition, a sequence's score, the likelihood's gradients (gold counts minus expected counts), the
Viterbi maximum, and the IOB2 constraints."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.tasks import crf as crf_module
from elmo_jax.tasks.crf import DISALLOWED_SCORE, LinearChainCRF, allowed_transitions, apply_constraints, as_constraints

# Jitted: one compilation per shape rather than one per operation (seconds on 2 busy cores), and jit-ability checked.
log_partition = jax.jit(crf_module.log_partition)
sequence_score = jax.jit(crf_module.sequence_score)
log_likelihood = jax.jit(crf_module.log_likelihood)
viterbi_decode = jax.jit(crf_module.viterbi_decode)

LENGTHS = (4, 2, 1, 0)  # Batch 4, time 4: a full row, a shorter one, length 1 and a padding row.
NUM_TAGS = 4
IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def random_problem(seed: int, lengths=LENGTHS, num_tags=NUM_TAGS, scale=1.0) -> dict:
    """Random float32 emissions `[batch, time, tags]` (NaN at padded positions, to show they are ignored), gold tags
    (padded positions random too), prefix mask, transitions, start, end."""
    rng = np.random.default_rng(seed)
    batch, time = len(lengths), max(lengths)
    mask = np.arange(time)[None] < np.array(lengths)[:, None]
    emissions = rng.standard_normal((batch, time, num_tags)) * scale
    emissions = np.where(mask[..., None], emissions, np.nan)
    f32 = lambda x: np.asarray(x, np.float32)
    return {
        "emissions": f32(emissions),
        "tags": rng.integers(0, num_tags, (batch, time)).astype(np.int32),
        "mask": mask,
        "transitions": f32(rng.standard_normal((num_tags, num_tags))),
        "start": f32(rng.standard_normal(num_tags)),
        "end": f32(rng.standard_normal(num_tags)),
    }


def np_score(emissions, seq, transitions, start, end) -> float:
    """float64 score of the tag sequence `seq` (its length: the row's real positions) of one row `[time, tags]`."""
    if len(seq) == 0:
        return 0.0
    e, tr = np.asarray(emissions, np.float64), np.asarray(transitions, np.float64)
    score = start[seq[0]] + end[seq[-1]] + sum(e[k, t] for k, t in enumerate(seq))
    return float(score + sum(tr[a, b] for a, b in zip(seq[:-1], seq[1:])))


def enumerate_row(p: dict, row: int, allowed=None) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every tag sequence of the row's length (only those `allowed` permits, given (allowed, start, end)) and
    their float64 scores."""
    length = int(p["mask"][row].sum())
    seqs = list(itertools.product(range(p["transitions"].shape[0]), repeat=length))
    if allowed is not None:
        trans_ok, start_ok, end_ok = allowed
        seqs = [
            s
            for s in seqs
            if not s or (start_ok[s[0]] and end_ok[s[-1]] and all(trans_ok[a, b] for a, b in zip(s[:-1], s[1:])))
        ]
    scores = np.array([np_score(p["emissions"][row], s, p["transitions"], p["start"], p["end"]) for s in seqs])
    return seqs, scores


def np_logsumexp(scores: np.ndarray) -> float:
    top = scores.max()
    return float(top + np.log(np.exp(scores - top).sum()))


def scores_args(p: dict) -> tuple:
    return p["transitions"], p["start"], p["end"]


def test_log_partition_is_the_log_sum_over_every_sequence():
    p = random_problem(0)
    got = np.asarray(log_partition(p["emissions"], p["mask"], *scores_args(p)))
    want = [np_logsumexp(enumerate_row(p, b)[1]) if n else 0.0 for b, n in enumerate(LENGTHS)]
    assert got.dtype == np.float32 and got[-1] == 0.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_sequence_score_ignores_padded_tags():
    p = random_problem(1)
    got = np.asarray(sequence_score(p["emissions"], p["tags"], p["mask"], *scores_args(p)))
    want = [np_score(p["emissions"][b], p["tags"][b, :n], *scores_args(p)) for b, n in enumerate(LENGTHS)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert got[-1] == 0.0
    for padding in (99, -1):  # Padded tags changed, even out of range.
        other = np.where(p["mask"], p["tags"], padding)
        np.testing.assert_array_equal(sequence_score(p["emissions"], other, p["mask"], *scores_args(p)), got)


def test_gradients_are_gold_minus_expected_counts():
    p = random_problem(2)
    mean_ll = lambda e, tr, s, en: crf_module.log_likelihood(e, p["tags"], p["mask"], tr, s, en).mean()
    grads = jax.jit(jax.grad(mean_ll, argnums=(0, 1, 2, 3)))(p["emissions"], *scores_args(p))
    want = [np.zeros(x.shape) for x in (p["emissions"], *scores_args(p))]
    for b, n in enumerate(LENGTHS):
        if not n:
            continue
        seqs, scores = enumerate_row(p, b)
        probs = np.exp(scores - np_logsumexp(scores))
        gold = tuple(p["tags"][b, :n])
        for seq, weight in [(gold, 1.0)] + [(s, -q) for s, q in zip(seqs, probs)]:
            for k, t in enumerate(seq):
                want[0][b, k, t] += weight
            for a, c in zip(seq[:-1], seq[1:]):
                want[1][a, c] += weight
            want[2][seq[0]] += weight
            want[3][seq[-1]] += weight
    for name, got, expected in zip(["emissions", "transitions", "start", "end"], grads, want):
        np.testing.assert_allclose(got, expected / len(LENGTHS), atol=1e-5, err_msg=name)


@pytest.mark.parametrize("seed", [3, 4, 5, 6])  # Shorter rows walk back through padded positions: chance may hide a bug.
def test_viterbi_finds_the_enumerated_maximum(seed):
    p = random_problem(seed)
    tags, score = viterbi_decode(p["emissions"], p["mask"], *scores_args(p))
    tags, score = np.asarray(tags), np.asarray(score)
    assert tags.dtype == np.int32 and tags.shape == p["tags"].shape
    np.testing.assert_array_equal(tags[~p["mask"]], 0)
    for b, n in enumerate(LENGTHS):
        best = enumerate_row(p, b)[1].max() if n else 0.0
        np.testing.assert_allclose(score[b], best, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np_score(p["emissions"][b], tags[b, :n], *scores_args(p)), best, rtol=1e-5, atol=1e-5)


def test_low_precision_emissions_are_computed_in_float32_and_empty_batches():
    p = random_problem(4)
    low = [jnp.asarray(x, jnp.bfloat16) for x in (p["emissions"], *scores_args(p))]
    got = log_partition(low[0], p["mask"], *low[1:])
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(got, log_partition(low[0].astype(jnp.float32), p["mask"], *low[1:]))
    empty = np.zeros((2, 0, NUM_TAGS), np.float32), np.zeros((2, 0), bool)
    np.testing.assert_array_equal(crf_module.log_partition(*empty, *scores_args(p)), [0.0, 0.0])
    tags, score = crf_module.viterbi_decode(*empty, *scores_args(p))
    assert tags.shape == (2, 0) and tags.dtype == jnp.int32
    np.testing.assert_array_equal(score, [0.0, 0.0])


def test_allowed_transitions_of_iob2():
    allowed, allowed_start, allowed_end = allowed_transitions(IOB2)
    # From (rows) O, B-PER, I-PER, B-LOC, I-LOC to (columns) the same.
    want = np.array(
        [
            [1, 1, 0, 1, 0],
            [1, 1, 1, 1, 0],
            [1, 1, 1, 1, 0],
            [1, 1, 0, 1, 1],
            [1, 1, 0, 1, 1],
        ],
        bool,
    )
    np.testing.assert_array_equal(allowed, want)
    np.testing.assert_array_equal(allowed_start, [True, True, False, True, False])
    np.testing.assert_array_equal(allowed_end, [True] * 5)
    assert allowed.dtype == allowed_start.dtype == allowed_end.dtype == bool


@pytest.mark.parametrize("bad", ["B-", "X-PER", "I", "o", "B_PER", ""])
def test_a_tag_that_is_not_iob2_is_named(bad):
    with pytest.raises(ValueError, match=f"tag '{bad}'"):
        allowed_transitions(["O", "B-PER", bad])


def test_constraints_must_fit_num_tags():
    with pytest.raises(ValueError, match="num_tags=3"):
        LinearChainCRF(3, constraints=as_constraints(*allowed_transitions(IOB2)))


def violations(seq, allowed) -> list[str]:
    """The disallowed start, transitions and end of `seq` under (allowed, allowed_start, allowed_end)."""
    trans_ok, start_ok, end_ok = allowed
    found = [] if start_ok[seq[0]] else [f"start {IOB2[seq[0]]}"]
    found += [f"{IOB2[a]} -> {IOB2[b]}" for a, b in zip(seq[:-1], seq[1:]) if not trans_ok[a, b]]
    return found + ([] if end_ok[seq[-1]] else [f"end {IOB2[seq[-1]]}"])


def test_constrained_module_decodes_and_normalises_over_allowed_sequences_only():
    allowed = allowed_transitions(IOB2)
    p = random_problem(5, lengths=(4, 3, 0), num_tags=len(IOB2), scale=0.3)
    # Emissions favouring disallowed sequences: I-PER I-LOC O I-PER, and B-PER I-LOC I-PER.
    for b, favoured in enumerate([[2, 4, 0, 2], [1, 4, 2]]):
        p["emissions"][b, np.arange(len(favoured)), favoured] += 6.0
    free_tags, _ = viterbi_decode(p["emissions"], p["mask"], *scores_args(p))
    assert violations(list(np.asarray(free_tags)[0]), allowed), "the unconstrained decoding should break a rule"

    crf = LinearChainCRF(len(IOB2), constraints=as_constraints(*allowed))
    variables = {"params": {"transitions": p["transitions"], "start": p["start"], "end": p["end"]}}
    tags, score = jax.jit(lambda v, e, m: crf.apply(v, e, m, method="decode"))(variables, p["emissions"], p["mask"])
    tags, score = np.asarray(tags), np.asarray(score)
    gold = np.zeros_like(p["tags"])
    for b, n in enumerate((4, 3, 0)):
        if not n:
            continue
        assert not violations(list(tags[b, :n]), allowed), tags[b, :n]
        seqs, scores = enumerate_row(p, b, allowed)
        np.testing.assert_allclose(score[b], scores.max(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np_score(p["emissions"][b], tags[b, :n], *scores_args(p)), scores.max(), rtol=1e-5)
        gold[b, :n] = seqs[int(np.argmin(scores))]  # an allowed sequence of low score, as a gold one.
    ll = np.asarray(jax.jit(crf.apply)(variables, p["emissions"], gold, p["mask"]))
    want = [
        np_score(p["emissions"][b], gold[b, :n], *scores_args(p)) - np_logsumexp(enumerate_row(p, b, allowed)[1])
        if n
        else 0.0
        for b, n in enumerate((4, 3, 0))
    ]
    np.testing.assert_allclose(ll, want, rtol=1e-5, atol=1e-4)
    penalised = apply_constraints(*scores_args(p), *allowed)
    np.testing.assert_array_equal(ll, log_likelihood(p["emissions"], gold, p["mask"], *penalised))
    assert penalised[0][0, 2] == p["transitions"][0, 2] + np.float32(DISALLOWED_SCORE)


def test_module_under_jit_agrees_with_the_functions():
    p = random_problem(6)
    crf = LinearChainCRF(NUM_TAGS)
    params = jax.jit(crf.init)(jax.random.key(0), p["emissions"], p["tags"], p["mask"])["params"]
    assert {k: (v.shape, v.dtype) for k, v in params.items()} == {
        "transitions": ((NUM_TAGS, NUM_TAGS), jnp.float32),
        "start": ((NUM_TAGS,), jnp.float32),
        "end": ((NUM_TAGS,), jnp.float32),
    }
    assert not any(np.asarray(v).any() for v in params.values()), "zeros init"
    variables = {"params": {"transitions": p["transitions"], "start": p["start"], "end": p["end"]}}
    ll = jax.jit(crf.apply)(variables, p["emissions"], p["tags"], p["mask"])
    want = log_likelihood(p["emissions"], p["tags"], p["mask"], *scores_args(p))
    np.testing.assert_allclose(ll, want, rtol=1e-6, atol=1e-6)
    tags, score = jax.jit(lambda v, e, m: crf.apply(v, e, m, method="decode"))(variables, p["emissions"], p["mask"])
    want_tags, want_score = viterbi_decode(p["emissions"], p["mask"], *scores_args(p))
    np.testing.assert_array_equal(tags, want_tags)
    np.testing.assert_allclose(score, want_score, rtol=1e-6, atol=1e-6)
