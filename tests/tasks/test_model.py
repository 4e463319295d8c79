"""TaskModel: shapes of every head on every input kind, padding invariance (no leak into the backward LSTM),
the scalar mix against NumPy, frozen static vectors, each head's loss against the functions of crf.py and
biaffine.py, and toy tasks each head learns (tags from word ids; each word's head the previous word)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from elmo_jax.tasks import biaffine, crf
from elmo_jax.tasks.model import TaskModel, TaskModelConfig
from elmo_jax.tasks.tree_decoding import decode_trees

BATCH, TIME = 24, 8
ELMO_LAYERS, ELMO_DIM = 3, 4
STATIC_ROWS, STATIC_DIM = 30, 3
WORD_ROWS, WORD_DIM = 24, 8  # Word ids 8 t + 0..7 for IOB2 tag t (of TAG_NAMES).
CHAR_ROWS, CHARS = 12, 4
TAG_NAMES = ("O", "B-X", "I-X")
INPUTS = {
    "elmo": dict(elmo_layers=ELMO_LAYERS, elmo_dim=ELMO_DIM),
    "static": dict(static_rows=STATIC_ROWS, static_dim=STATIC_DIM),
    "word": dict(word_rows=WORD_ROWS, word_dim=WORD_DIM),
    "char": dict(char_rows=CHAR_ROWS, char_embed_dim=3, char_filters=((1, 3), (2, 4))),
}
ALL_INPUTS = {key: value for sizes in INPUTS.values() for key, value in sizes.items()}
NUM_LABELS = {"softmax": 2, "crf": len(TAG_NAMES), "biaffine": 2}
CONSTRAINTS = crf.as_constraints(*crf.allowed_transitions(TAG_NAMES))


def config(head: str, inputs: dict, **overrides) -> TaskModelConfig:
    """A tiny model, dropout off unless `overrides` say."""
    sizes = dict(num_labels=NUM_LABELS[head], lstm_layers=1, lstm_dim=12, arc_dim=12, label_dim=6,
                 elmo_dropout=0.0, mlp_dropout=0.0, constraints=CONSTRAINTS if head == "crf" else None)
    return TaskModelConfig(head=head, **{**sizes, **inputs, **overrides})


def toy_batch(seed: int = 0) -> dict:
    """Every input and label of `BATCH` sentences (lengths 0..TIME: batch padding, one word, the longest, random
    ones), random at padding.
    IOB2 tags follow a chain that respects CONSTRAINTS, each word id in its tag's range; softmax tags and
    relations: the word id's parity; each word's head: the previous word (the first's: the root)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, TIME + 1, BATCH)
    lengths[:3] = TIME, 1, 0
    mask = np.arange(TIME) < lengths[:, None]
    iob = np.zeros((BATCH, TIME), np.int32)
    for t in range(TIME):
        allowed = [0, 1] if t == 0 else [0, 1, 2]
        iob[:, t] = rng.choice(allowed, BATCH)
        if t > 0:
            iob[:, t] = np.where((iob[:, t] == 2) & (iob[:, t - 1] == 0), 1, iob[:, t])
    words = 8 * iob + rng.integers(0, 8, (BATCH, TIME))
    heads = np.broadcast_to(np.arange(TIME), (BATCH, TIME))  # Word i + 1's head: word i (0: the root).
    garbage = rng.integers(-3, 100, (BATCH, TIME))
    return {
        "mask": mask,
        "elmo": rng.standard_normal((BATCH, TIME, ELMO_LAYERS, ELMO_DIM)).astype(np.float32),
        "static_ids": rng.integers(0, STATIC_ROWS, (BATCH, TIME)).astype(np.int32),
        "word_ids": words.astype(np.int32),
        "char_ids": rng.integers(0, CHAR_ROWS, (BATCH, TIME, CHARS)).astype(np.int32),
        "tags": np.where(mask, words % 2, garbage).astype(np.int32),
        "iob": np.where(mask, iob, garbage).astype(np.int32),
        "heads": np.where(mask, heads, garbage).astype(np.int32),
        "relations": np.where(mask, words % 2, garbage).astype(np.int32),
    }


def for_head(batch: dict, head: str) -> dict:
    """The batch with the head's tags under "tags" (the CRF's IOB2 tags)."""
    return {**batch, "tags": batch["iob"]} if head == "crf" else batch


def perturbed_padding(batch: dict, seed: int = 1) -> dict:
    """`batch` with every padded position's inputs and labels replaced."""
    rng = np.random.default_rng(seed)
    pad = ~batch["mask"]
    out = dict(batch)
    out["elmo"] = np.where(pad[..., None, None], rng.standard_normal(batch["elmo"].shape) * 9, batch["elmo"])
    out["char_ids"] = np.where(pad[..., None], rng.integers(1, CHAR_ROWS, batch["char_ids"].shape), batch["char_ids"])
    for key, high in (("static_ids", STATIC_ROWS), ("word_ids", WORD_ROWS), ("tags", 2), ("iob", 3), ("heads", TIME),
                      ("relations", 2)):
        out[key] = np.where(pad, rng.integers(0, high, pad.shape), batch[key]).astype(np.int32)
    return {key: np.asarray(value, batch[key].dtype) for key, value in out.items()}


def padded_further(batch: dict, extra: int, seed: int = 2) -> dict:
    """`batch` with `extra` more padded positions, random, at the end of every row."""
    rng = np.random.default_rng(seed)
    out = {}
    for key, value in batch.items():
        shape = (value.shape[0], extra, *value.shape[2:])
        pad = np.zeros(shape, bool) if key == "mask" else rng.integers(0, 3, shape).astype(value.dtype)
        out[key] = np.concatenate([value, pad], axis=1)
    return out


@dataclasses.dataclass
class Fitted:
    """A model with every input, trained on `toy_batch` (so its CRF and biaffine weights are not zero)."""

    model: TaskModel
    variables: dict
    batch: dict
    losses: list[float]
    compiled: dict = dataclasses.field(default_factory=dict)

    def run(self, method: str | None, *args):
        """The model's `method` (None: the loss, deterministic) on `args`, compiled once per method."""
        if method not in self.compiled:
            kwargs = {"deterministic": True} if method is None else {"method": method}
            self.compiled[method] = jax.jit(lambda variables, *a: self.model.apply(variables, *a, **kwargs))
        return self.compiled[method](self.variables, *args)


def fit(head: str, steps: int, learning_rate: float, lstm_layers: int = 1) -> Fitted:
    batch = for_head(toy_batch(), head)
    model = TaskModel(config(head, ALL_INPUTS, lstm_layers=lstm_layers))
    params = jax.jit(lambda b: model.init(jax.random.key(0), b, deterministic=True))(batch)["params"]
    optimizer = optax.adam(learning_rate)

    @jax.jit
    def step(params, state):
        loss_fn = lambda p: model.apply({"params": p}, batch, deterministic=True)[0]
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, state = optimizer.update(grads, state)
        return optax.apply_updates(params, updates), state, loss

    state, losses = optimizer.init(params), []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(loss)
    return Fitted(model, {"params": params}, batch, [float(loss) for loss in losses])


# The taggers are linear probes (no BiLSTM): the parser tests the BiLSTM (its toy task needs the context), and
# each BiLSTM model costs seconds of compiling.


@pytest.fixture(scope="module")
def tagger() -> Fitted:
    return fit("softmax", 100, 0.03, lstm_layers=0)


@pytest.fixture(scope="module")
def crf_tagger() -> Fitted:
    return fit("crf", 100, 0.03, lstm_layers=0)


@pytest.fixture(scope="module")
def parser() -> Fitted:
    return fit("biaffine", 80, 0.02)


def loss_and_outputs(fitted: Fitted, batch: dict) -> tuple:
    """(loss, aux, predictions: tags, or arc scores and relations at the gold heads)."""
    loss, aux = fitted.run(None, batch)
    if fitted.model.config.head == "biaffine":
        return loss, aux, (fitted.run("arc_scores", batch), fitted.run("relations_for", batch, batch["heads"]))
    return loss, aux, (fitted.run("predict", batch),)


# Shapes.


@pytest.mark.parametrize(
    "head,inputs,lstm_layers",
    [(head, inputs, 0) for head in NUM_LABELS for inputs in (*([name] for name in INPUTS), list(INPUTS))]
    + [("softmax", list(INPUTS), 2), ("crf", list(INPUTS), 2)],  # The parser's BiLSTM: the `parser` fixture.
)
def test_shapes(head: str, inputs: list[str], lstm_layers: int) -> None:
    sizes = {key: value for name in inputs for key, value in INPUTS[name].items()}
    model = TaskModel(config(head, sizes, lstm_layers=lstm_layers, input_dropout=0.2, lstm_dropout=0.2))
    batch = for_head(toy_batch(), head)
    variables = jax.eval_shape(lambda: model.init(jax.random.key(0), batch, deterministic=True))
    apply = lambda method, *args, **kwargs: jax.eval_shape(
        lambda v: model.apply(v, batch, *args, method=method, **kwargs), variables
    )
    loss, aux = apply(None, False, rngs={"dropout": jax.random.key(1)})
    assert loss.shape == aux["mix_l2"].shape == aux["tokens"].shape == ()
    assert loss.dtype == aux["mix_l2"].dtype == jnp.float32
    if head == "biaffine":
        arcs, relations = apply("arc_scores"), apply("relations_for", batch["heads"])
        assert (arcs.shape, arcs.dtype) == ((BATCH, TIME + 1, TIME + 1), jnp.float32)
        assert (relations.shape, relations.dtype) == ((BATCH, TIME), jnp.int32)
        with pytest.raises(ValueError, match="softmax or crf"):
            apply("predict")
    else:
        tags = apply("predict")
        assert (tags.shape, tags.dtype) == ((BATCH, TIME), jnp.int32)
        with pytest.raises(ValueError, match="biaffine"):
            apply("arc_scores")


def test_invalid_configs() -> None:
    for bad in (dict(head="tree"), dict(mix="mean"), dict(gamma="none"), dict(elmo_layers=2),
                dict(static_rows=0, static_dim=3), dict(constraints=CONSTRAINTS), dict(lstm_dim=0)):
        with pytest.raises(ValueError):
            TaskModelConfig(**{"head": "softmax", "num_labels": 2, "word_rows": 5, "word_dim": 2, **bad})
    with pytest.raises(ValueError, match="no input"):
        TaskModelConfig(head="softmax", num_labels=2)
    model = TaskModel(config("softmax", INPUTS["char"], char_filters=((CHARS + 1, 2),)))
    with pytest.raises(ValueError, match="widest char filter"):
        jax.eval_shape(lambda: model.init(jax.random.key(0), toy_batch(), deterministic=True))


# The fitted models: every input, every head.


@pytest.mark.parametrize("name", ["tagger", "crf_tagger", "parser"])
def test_padding_changes_nothing(name: str, request: pytest.FixtureRequest) -> None:
    fitted = request.getfixturevalue(name)
    loss, aux, outputs = loss_and_outputs(fitted, fitted.batch)
    other_loss, other_aux, other_outputs = loss_and_outputs(fitted, perturbed_padding(fitted.batch))
    np.testing.assert_allclose(other_loss, loss, rtol=1e-6)
    assert int(aux["tokens"]) == int(other_aux["tokens"]) == fitted.batch["mask"].sum()
    for output, other in zip(outputs, other_outputs, strict=True):
        np.testing.assert_allclose(other, output, rtol=1e-5, atol=1e-5)
    # More padding: the backward LSTM still starts at each row's last word.
    np.testing.assert_allclose(fitted.run(None, padded_further(fitted.batch, 3))[0], loss, rtol=1e-4)
    # The inputs at real positions do matter (the comparison above can fail).
    changed = dict(fitted.batch, word_ids=(fitted.batch["word_ids"] + 1) % WORD_ROWS)
    assert not np.allclose(loss_and_outputs(fitted, changed)[0], loss)


@pytest.mark.parametrize("name", ["tagger", "crf_tagger"])
def test_taggers_learn_the_toy_task(name: str, request: pytest.FixtureRequest) -> None:
    fitted = request.getfixturevalue(name)
    mask = fitted.batch["mask"]
    tags = np.asarray(fitted.run("predict", fitted.batch))
    assert (tags[~mask] == 0).all()
    assert np.mean(tags[mask] == fitted.batch["tags"][mask]) > 0.99
    assert fitted.losses[-1] < 0.1 * fitted.losses[0]


def test_parser_learns_the_toy_task(parser: Fitted) -> None:
    mask = parser.batch["mask"]
    scores = np.asarray(parser.run("arc_scores", parser.batch))
    heads = decode_trees(scores, mask.sum(axis=1))
    assert np.mean(heads[mask] == parser.batch["heads"][mask]) > 0.99
    relations = np.asarray(parser.run("relations_for", parser.batch, heads))
    assert np.mean(relations[mask] == parser.batch["relations"][mask]) > 0.99


def test_softmax_loss_is_the_mean_cross_entropy(tagger: Fitted) -> None:
    batch = dict(tagger.batch, tags=1 - tagger.batch["tags"])  # Wrong tags: a loss far from 0.
    mask = batch["mask"]
    logits = np.asarray(tagger.run("tag_scores", batch), np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    gold = np.take_along_axis(log_probs, np.where(mask, batch["tags"], 0)[..., None], axis=-1)[..., 0]
    loss, aux = tagger.run(None, batch)
    np.testing.assert_allclose(loss, -gold[mask].mean(), rtol=1e-5)
    assert float(aux["mix_l2"]) > 0  # The mix's weights moved in training.


def test_crf_loss_and_prediction_are_crf_py_s(crf_tagger: Fitted) -> None:
    batch = dict(crf_tagger.batch, tags=np.zeros_like(crf_tagger.batch["tags"]))  # All O: a loss far from 0.
    mask = batch["mask"]
    emissions = crf_tagger.run("tag_scores", batch)
    params = crf_tagger.variables["params"]["crf"]
    scores = crf.apply_constraints(params["transitions"], params["start"], params["end"], *CONSTRAINTS)
    assert np.abs(params["transitions"]).max() > 0.1  # Trained: the transitions count.
    likelihood = jax.jit(crf.log_likelihood)(emissions, np.where(mask, batch["tags"], 0), mask, *scores)
    loss, _ = crf_tagger.run(None, batch)
    np.testing.assert_allclose(loss, -np.sum(likelihood) / mask.sum(), rtol=1e-5)
    best, _ = jax.jit(crf.viterbi_decode)(emissions, mask, *scores)
    np.testing.assert_array_equal(crf_tagger.run("predict", batch), best)


def test_parser_loss_is_arc_plus_label_loss_shifted_past_the_root(parser: Fitted) -> None:
    # Every word on the root, the other relation: a loss far from 0.
    batch = dict(parser.batch, heads=np.zeros_like(parser.batch["heads"]), relations=1 - parser.batch["relations"])
    mask = batch["mask"]
    shift = lambda words: np.pad(np.where(mask, words, 0), ((0, 0), (1, 0)))  # [batch, time + 1], 0: the root.
    arcs = parser.run("arc_scores", batch)
    labels = parser.run("label_scores", batch, batch["heads"])
    assert labels.shape == (BATCH, TIME + 1, NUM_LABELS["biaffine"])
    words = shift(mask)
    want_arcs = biaffine.arc_loss(arcs, shift(batch["heads"]), words)
    want_labels = biaffine.label_loss(labels, shift(batch["relations"]), words)
    loss, aux = parser.run(None, batch)
    np.testing.assert_allclose([aux["arc_loss"], aux["label_loss"]], [want_arcs, want_labels], rtol=1e-5)
    np.testing.assert_allclose(loss, want_arcs + want_labels, rtol=1e-5)
    relations = parser.run("relations_for", batch, batch["heads"])
    np.testing.assert_array_equal(relations, np.where(mask, np.argmax(labels[:, 1:], axis=-1), 0))


# The stored layers' mix, on a linear probe (no LSTM) whose projection is the identity: its scores are the mix.


def probe(**overrides) -> tuple[TaskModel, dict]:
    """An ELMo-only softmax probe with `ELMO_DIM` labels, its params (the projection the identity)."""
    model = TaskModel(config("softmax", INPUTS["elmo"], num_labels=ELMO_DIM, lstm_layers=0, **overrides))
    params = model.init(jax.random.key(0), toy_batch(), deterministic=True)["params"]
    params["tag_projection"] = {"kernel": jnp.eye(ELMO_DIM), "bias": jnp.zeros(ELMO_DIM)}
    return model, params


def np_layer_norm(layers: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """layers `[batch, time, layers, dim]`, each layer normalised over the real tokens' elements."""
    real = layers[mask]  # [tokens, layers, dim]
    mean, var = real.mean(axis=(0, 2)), real.var(axis=(0, 2))
    return (layers - mean[:, None]) / np.sqrt(var[:, None] + 1e-12)


@pytest.mark.parametrize("gamma,do_layer_norm", [("learned", False), ("fixed", True)])
def test_mix_is_the_weighted_sum(gamma: str, do_layer_norm: bool) -> None:
    model, params = probe(gamma=gamma, do_layer_norm=do_layer_norm)
    assert ("gamma" in params) == (gamma == "learned")
    weights = np.array([0.3, -1.2, 0.8], np.float32)
    params["scalar_parameters"] = jnp.asarray(weights)
    scale = 1.0
    if gamma == "learned":
        params["gamma"] = jnp.float32(scale := 1.7)
    batch = toy_batch()
    mask, layers = batch["mask"], batch["elmo"].astype(np.float64)
    if do_layer_norm:
        layers = np_layer_norm(layers, mask)
    softmax = np.exp(weights) / np.exp(weights).sum()
    want = np.where(mask[..., None], scale * np.einsum("btld,l->btd", layers, softmax), 0.0)
    (scores, (_, aux)) = jax.jit(lambda p, b: (model.apply({"params": p}, b, method="tag_scores"),
                                               model.apply({"params": p}, b, deterministic=True)))(params, batch)
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(aux["mix_l2"], np.sum(weights.astype(np.float64) ** 2), rtol=1e-6)


def test_top_takes_the_last_layer_alone() -> None:
    model, params = probe(mix="top", elmo_dropout=0.5)
    assert "scalar_parameters" not in params and "gamma" not in params
    batch = toy_batch()
    other = dict(batch, elmo=batch["elmo"].copy())
    other["elmo"][:, :, :-1] = 5.0
    last = dict(batch, elmo=batch["elmo"].copy())
    last["elmo"][:, :, -1] += 1.0

    @jax.jit
    def outputs(b):
        scores = model.apply({"params": params}, b, method="tag_scores")
        train_loss, aux = model.apply({"params": params}, b, False, rngs={"dropout": jax.random.key(3)})
        return scores, train_loss, model.apply({"params": params}, b, deterministic=True)[0], aux["mix_l2"]

    scores, train_loss, loss, l2 = outputs(batch)
    np.testing.assert_allclose(scores, np.where(batch["mask"][..., None], batch["elmo"][:, :, -1], 0), rtol=1e-6)
    assert float(l2) == 0.0
    assert train_loss != loss  # ELMo's dropout applies in training only.
    np.testing.assert_array_equal(outputs(other)[0], scores)
    assert not np.allclose(outputs(last)[0], scores)


@pytest.mark.parametrize("trainable", [False, True])
def test_static_vectors_are_frozen_unless_trainable(trainable: bool) -> None:
    model = TaskModel(config("softmax", {**INPUTS["static"], **INPUTS["word"]}, lstm_layers=0,
                             static_trainable=trainable))
    batch = toy_batch()
    params = model.init(jax.random.key(0), batch, deterministic=True)["params"]
    assert params["static_embed"]["embedding"].shape == (STATIC_ROWS, STATIC_DIM)
    grads = jax.jit(jax.grad(lambda p: model.apply({"params": p}, batch, deterministic=True)[0]))(params)
    assert bool(np.any(grads["static_embed"]["embedding"] != 0)) == trainable
    assert np.any(grads["word_embed"]["embedding"] != 0)
