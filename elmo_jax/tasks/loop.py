"""Training a task model (`elmo-task train`): the config's files read and their inputs computed once,
Adam over epochs of shuffled batches, the dev score after each epoch, early stopping, and the best
epoch's dev and test scores in `WORKDIR/results.json`.

The workdir holds `config.json`, `labels.json` (the labels and tables the model reads), `metrics.jsonl`
(+ TensorBoard), `checkpoints/last` (the train state after the latest epoch) and `checkpoints/best`
(the params of the best dev score). A run killed at any point resumes from its last epoch with the
same batches and dropout (both functions of the seed and the step), so it ends as an uninterrupted
run does.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from tqdm import tqdm

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_files, bilm_from_manylangs, bilm_from_workdir
from elmo_jax.probing.features import feature_shape
from elmo_jax.runtime import workdir_files
from elmo_jax.runtime.atomic_write import write_json_atomic
from elmo_jax.static.lookup import StaticVectors
from elmo_jax.tasks import crf, features, metrics
from elmo_jax.tasks.datasets import Examples, label_names, read_examples, training_subset
from elmo_jax.tasks.model import TaskModel, TaskModelConfig
from elmo_jax.tasks.schema import completed, uses_elmo, validate
from elmo_jax.tasks.tree_decoding import decode_trees
from elmo_jax.training.metrics_writer import MetricsWriter

SPLITS = ("train", "dev", "test")
RESULTS, LABELS, CONFIG = workdir_files.TASK_RESULTS, workdir_files.TASK_LABELS, workdir_files.CONFIG
STOPPING = ("epochs", "patience")  # The train keys a resumed run may change: neither moves an earlier step.


class TaskData:
    """A task's splits as read (`examples`) and as the model reads them (`inputs`), with its labels."""

    def __init__(self, config: Mapping[str, Any], progress: bool = True):
        kind, data = config["task"]["kind"], config["data"]
        read = {split: read_examples(kind, data[f"{split}_file"], config["task"]["column"], config["task"]["scheme"])
                for split in SPLITS if data[f"{split}_file"]}
        train = read["train"]
        read["train"] = train.take(training_subset(len(train.words), data["train_fraction"], config["seed"]))
        self.kind, self.examples = kind, read
        self.labels = label_names(kind, read["train"])
        inputs = config["inputs"]
        words = [read[split].words for split in read]
        self.words = features.word_table(read["train"].words, inputs["word"]["min_count"]) if inputs["word"]["dim"] \
            else None
        self.static_words, self.static_table, self.static_oov, static_index = None, None, None, None
        if inputs["static"]["file"]:
            vectors = StaticVectors.read(inputs["static"]["file"])
            self.static_words, rows = features.static_rows(vectors, words)
            self.static_table = features.static_table(vectors, rows)
            self.static_oov = {split: features.oov_record(read[split].words, self.static_words) for split in read}
            static_index = features.static_index(self.static_words)
        self.bilm = load_bilm(config) if uses_elmo(config) else None
        word_index = {w: i for i, w in enumerate(self.words)} if self.words else None
        self.inputs = dict(zip(read, split_inputs(config, words, self.bilm, word_index, static_index, progress)))

    def label_ids(self, split: str) -> list[np.ndarray]:
        """Each sentence's gold label ids (-1 for a label training never saw)."""
        index = {label: i for i, label in enumerate(self.labels)}
        return [np.array([index.get(label, -1) for label in labels], np.int32)
                for labels in self.examples[split].labels]

    def heads(self, split: str) -> list[np.ndarray] | None:
        examples = self.examples[split]
        return None if examples.heads is None else [np.array(h, np.int32) for h in examples.heads]


def load_bilm(config: Mapping[str, Any]) -> PretrainedBiLM:
    """The biLM inputs.elmo names: a training workdir, an ELMoForManyLangs model directory, or options/weights."""
    elmo = config["inputs"]["elmo"]
    if elmo["workdir"]:
        return bilm_from_workdir(elmo["workdir"])
    if elmo["manylangs"]:
        return bilm_from_manylangs(elmo["manylangs"])
    return bilm_from_files(elmo["options"], elmo["weights"])


def in_step(config: Mapping[str, Any], bilm: PretrainedBiLM | None) -> PretrainedBiLM | None:
    """`bilm` when `config` runs it in each step (frozen or fine-tuned), None when its layers are stored."""
    return bilm if config["inputs"]["elmo"]["run"] != "once" else None


def split_inputs(config: Mapping[str, Any], splits: Sequence[Sequence[Sequence[str]]], bilm: PretrainedBiLM | None,
                 word_index: dict | None, static_index: dict | None, progress: bool) -> list[features.SplitInputs]:
    """Each split's (its sentences' words) inputs as the model of `config` reads them: ids through the word
    and static tables' indices, char ids, and the biLM's layers computed once for all splits (or its char
    ids when it runs in the step)."""
    inputs = config["inputs"]
    layers = [None] * len(splits)
    if bilm is not None and in_step(config, bilm) is None:
        layers = features.elmo_layers(bilm, splits, int(config["train"]["max_feature_gib"] * 2**30), progress)
    max_chars = inputs["char_cnn"]["max_chars"] if inputs["char_cnn"]["dim"] else 0
    return [features.split_inputs(words, word_index=word_index, static_index=static_index, max_chars=max_chars,
                                  elmo=layer, bilm=in_step(config, bilm)) for words, layer in zip(splits, layers)]


def model_config(config: Mapping[str, Any], kind: str, labels: list[str], bilm: PretrainedBiLM | None,
                 static_shape: tuple[int, int] | None, word_rows: int) -> TaskModelConfig:
    """The model of `config` for task `kind` predicting `labels`, over its inputs: the biLM (None: absent),
    the static table's (rows, dim) (None: absent) and the word table's rows."""
    inputs, encoder, head = config["inputs"], config["encoder"], config["head"]
    constraints = None
    if kind == "ner" and head["kind"] == "crf" and head["constrained"]:
        constraints = crf.as_constraints(*crf.allowed_transitions(labels))
    elmo_layers, elmo_dim = feature_shape(bilm, 0)[1:] if bilm is not None else (0, 0)
    static_rows, static_dim = static_shape or (0, 0)
    running = in_step(config, bilm)
    return TaskModelConfig(
        head="biaffine" if kind == "parse" else head["kind"], num_labels=len(labels),
        elmo_layers=elmo_layers, elmo_dim=elmo_dim,
        bilm=None if running is None else running.model,
        bilm_boundaries=_boundary_rows(running),
        fine_tune=inputs["elmo"]["run"] == "fine_tune" and running is not None,
        mix=inputs["elmo"]["mix"], gamma=inputs["elmo"]["gamma"], do_layer_norm=inputs["elmo"]["do_layer_norm"],
        elmo_dropout=inputs["elmo"]["dropout"], static_rows=static_rows, static_dim=static_dim,
        static_trainable=inputs["static"]["trainable"], word_rows=word_rows, word_dim=inputs["word"]["dim"],
        char_rows=262 if inputs["char_cnn"]["dim"] else 0, char_filters=_char_filters(inputs["char_cnn"]["dim"]),
        input_dropout=inputs["dropout"], lstm_layers=encoder["n_layers"], lstm_dim=encoder["dim"],
        lstm_dropout=encoder["dropout"], arc_dim=head["arc_dim"], label_dim=head["label_dim"],
        constraints=constraints,
    )


def _boundary_rows(bilm: PretrainedBiLM | None) -> tuple[tuple[int, ...], ...]:
    """The input rows of `<S>` and `</S>` of a biLM run in the step (`TaskModelConfig.bilm_boundaries`), () for none."""
    return () if bilm is None else tuple(map(tuple, bilm.input_ids([BOS_TOKEN, EOS_TOKEN]).tolist()))


def _char_filters(dim: int) -> tuple[tuple[int, int], ...]:
    """Filters of widths 1..4 whose channels sum to `dim` (the char CNN's output width)."""
    return tuple((width, dim // 4 + (width <= dim % 4)) for width in (1, 2, 3, 4)) if dim else ((1, 1),)


class Predictor:
    """A trained model's predictions on a split's inputs, as label strings (and heads for the parser)."""

    def __init__(self, model: TaskModel, labels: list[str], batch_size: int):
        self.model, self.labels, self.batch_size = model, labels, batch_size
        method = model.arc_scores if model.config.head == "biaffine" else model.predict
        self._first = jax.jit(lambda params, batch: model.apply(params, batch, method=method))
        self._relations = jax.jit(lambda params, batch, heads: model.apply(params, batch, heads,
                                                                           method=model.relations_for))

    def __call__(self, params: Any, inputs: features.SplitInputs) -> tuple[list[list[str]], list[list[int]] | None]:
        lengths = np.diff(inputs.offsets)
        labels, heads = [None] * len(lengths), [None] * len(lengths)
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            indices = order[start : start + self.batch_size]
            batch = features.make_batch(inputs, indices, rows=self.batch_size)
            if self.model.config.head == "biaffine":
                scores = np.asarray(self._first(params, batch), np.float64)
                predicted = decode_trees(scores, np.pad(lengths[indices], (0, len(scores) - len(indices))))
                ids = np.asarray(self._relations(params, batch, jnp.asarray(predicted, jnp.int32)))
            else:
                predicted, ids = None, np.asarray(self._first(params, batch))
            for row, i in enumerate(indices):
                labels[i] = [self.labels[k] for k in ids[row, : lengths[i]]]
                if predicted is not None:
                    heads[i] = [int(h) for h in predicted[row, : lengths[i]]]
        return labels, (heads if self.model.config.head == "biaffine" else None)


class MeanLoss:
    """A model's loss per real token over a split, without dropout: early stopping's tie-breaker. Labels
    training never saw (-1) are read as label 0, the same in every epoch."""

    def __init__(self, model: TaskModel, batch_size: int):
        self.batch_size = batch_size
        self._loss = jax.jit(lambda params, batch: model.apply(params, batch, deterministic=True))

    def __call__(self, params: Any, inputs: features.SplitInputs, labels: list[np.ndarray],
                 heads: list[np.ndarray] | None) -> float:
        labels = [np.maximum(ids, 0) for ids in labels]
        order = np.argsort(np.diff(inputs.offsets), kind="stable")
        total, tokens = 0.0, 0
        for start in range(0, len(order), self.batch_size):
            batch = features.make_batch(inputs, order[start : start + self.batch_size], labels, heads, self.batch_size)
            loss, aux = self._loss(params, batch)
            total, tokens = total + float(loss) * int(aux["tokens"]), tokens + int(aux["tokens"])
        return total / max(tokens, 1)


def better_epoch(score: float, loss: float, state: Mapping[str, Any]) -> bool:
    """Whether an epoch's dev score and loss beat the best epoch's (`state`): a higher score, or the same
    with a lower loss, so that a run whose score stays flat (an NER model of a few sentences, at F1 0 for
    its first epochs) is not stopped while its loss still falls."""
    return score > state["best_score"] or (score == state["best_score"] and loss < state["best_loss"])


def scores(kind: str, gold: Examples, labels: list[list[str]], heads: list[list[int]] | None) -> dict[str, Any]:
    """The metrics of predictions against `gold`, with the headline `score`: accuracy (taggers), span
    F1 (NER), LAS (parser)."""
    if kind == "ner":
        result = metrics.span_f1(gold.labels, labels)
        return {"score": result["f1"], **result}
    if kind == "parse":
        result = metrics.attachment_scores(gold.heads, gold.labels, heads, labels)
        return {"score": result["las"], **result}
    return {"score": metrics.accuracy(gold.labels, labels)}


def _optimizer(config: Mapping[str, Any], with_bilm: bool) -> optax.GradientTransformation:
    """Adam on the gradients clipped to `train.clip_norm`; with the biLM's weights among the params (`with_bilm`),
    those at `inputs.elmo.learning_rate` when fine-tuned, else never moved."""
    train, elmo = config["train"], config["inputs"]["elmo"]
    adam = optax.adam(train["learning_rate"])
    if with_bilm:
        bilm = optax.adam(elmo["learning_rate"]) if elmo["run"] == "fine_tune" else optax.set_to_zero()
        adam = optax.multi_transform({"task": adam, "bilm": bilm}, _bilm_or_task)
    return optax.chain(optax.clip_by_global_norm(train["clip_norm"]), adam)


def _bilm_or_task(params: Any) -> Any:
    """The labels of `_optimizer`'s transforms: "bilm" for the leaves of the param "bilm", else "task"."""
    return jax.tree_util.tree_map_with_path(lambda path, _: "bilm" if path[1].key == "bilm" else "task", params)


def train_step(model: TaskModel, optimizer: optax.GradientTransformation, l2: float) -> Callable:
    """The compiled step `(params, opt_state, batch, dropout key) -> (params, opt_state, loss)`, the mix's L2
    weighted by `l2`."""
    def loss_fn(params: Any, batch: dict, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        loss, aux = model.apply(params, batch, deterministic=False, rngs={"dropout": key})
        return loss + l2 * aux["mix_l2"], loss

    @jax.jit
    def step(params: Any, opt_state: Any, batch: dict, key: jax.Array) -> tuple[Any, Any, jax.Array]:
        (_, loss), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, key)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def initial_model(config: Mapping[str, Any], data: TaskData) -> tuple[TaskModel, Any, optax.GradientTransformation]:
    """The task model of `config` over `data`'s inputs, its initial params from `config.seed` (the static
    table and a biLM run in the step written in) and its optimizer."""
    model = TaskModel(model_config(config, data.kind, data.labels, data.bilm,
                                   None if data.static_table is None else data.static_table.shape,
                                   len(data.words) if data.words else 0))
    labels, heads = data.label_ids("train"), data.heads("train")
    first = features.make_batch(data.inputs["train"], np.arange(min(2, len(labels))), labels, heads)
    seed = config["seed"]
    params = model.init({"params": jax.random.PRNGKey(seed), "dropout": jax.random.PRNGKey(seed)}, first,
                        deterministic=True)
    if data.static_table is not None:
        params["params"]["static_embed"]["embedding"] = jnp.asarray(data.static_table)
    if model.config.bilm is not None:
        params["params"]["bilm"] = jax.tree.map(jnp.asarray, dict(data.bilm.params))
    return model, params, _optimizer(config, with_bilm=model.config.bilm is not None)


def train_task(config: Mapping[str, Any], workdir: str, progress: bool = True) -> dict[str, Any]:
    """Trains (or resumes) the task model of `config` in `workdir`; returns what results.json holds."""
    validate(config)
    os.makedirs(workdir, exist_ok=True)
    _check_same_config(config, workdir)
    data = TaskData(config, progress)
    model, params, optimizer = initial_model(config, data)
    train = config["train"]
    train_inputs = data.inputs["train"]
    train_labels, train_heads = data.label_ids("train"), data.heads("train")
    seed = config["seed"]
    opt_state = optimizer.init(params)
    checkpoints = ocp.StandardCheckpointer()
    directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    progress_path = os.path.join(workdir, "progress.json")
    state = {"epoch": 0, "step": 0, "best_score": -1.0, "best_loss": float("inf"), "best_epoch": 0, "since_best": 0}
    if os.path.exists(progress_path):
        with open(progress_path, encoding="utf-8") as f:
            state = {**state, **json.load(f)}  # A run saved before best_loss was kept has none.
        restored = checkpoints.restore(os.path.join(directory, "last"), {"params": params, "opt_state": opt_state})
        params, opt_state = restored["params"], restored["opt_state"]
    write_json_atomic(os.path.join(workdir, LABELS),
                      {"labels": data.labels, "words": data.words, "static_words": data.static_words})
    writer = MetricsWriter(workdir, start_step=state["step"])
    step_fn = train_step(model, optimizer, config["inputs"]["elmo"]["l2"])
    predict = Predictor(model, data.labels, train["eval_batch_size"])
    mean_loss = MeanLoss(model, train["eval_batch_size"])
    lengths = np.diff(train_inputs.offsets)
    while state["epoch"] < train["epochs"] and state["since_best"] < train["patience"]:
        start = time.perf_counter()
        batches = features.epoch_batches(lengths, train["batch_size"], seed, state["epoch"])
        losses = []
        for indices in tqdm(batches, desc=f"epoch {state['epoch'] + 1}", disable=not progress, leave=False):
            batch = features.make_batch(train_inputs, indices, train_labels, train_heads, train["batch_size"])
            key = jax.random.fold_in(jax.random.PRNGKey(seed), state["step"])
            params, opt_state, loss = step_fn(params, opt_state, batch, key)
            losses.append(float(loss))
            state["step"] += 1
        dev = scores(data.kind, data.examples["dev"], *predict(params, data.inputs["dev"]))
        dev_loss = mean_loss(params, data.inputs["dev"], data.label_ids("dev"), data.heads("dev"))
        state["epoch"] += 1
        if better_epoch(dev["score"], dev_loss, state):
            state.update(best_score=dev["score"], best_loss=dev_loss, best_epoch=state["epoch"], since_best=0)
            checkpoints.save(os.path.join(directory, "best"), params, force=True)
        else:
            state["since_best"] += 1
        checkpoints.save(os.path.join(directory, "last"), {"params": params, "opt_state": opt_state}, force=True)
        checkpoints.wait_until_finished()
        write_json_atomic(progress_path, state)
        writer.write({"step": state["step"], "epoch": state["epoch"], "loss": float(np.mean(losses)),
                      "dev_score": dev["score"], "dev_loss": dev_loss, "seconds": time.perf_counter() - start})
    best = checkpoints.restore(os.path.join(directory, "best"), params)
    results = {"task": data.kind, "best_epoch": state["best_epoch"], "epochs": state["epoch"],
               "train_sentences": len(data.examples["train"].words), "labels": len(data.labels)}
    for split in ("dev", "test"):
        if split in data.examples:
            results[split] = scores(data.kind, data.examples[split], *predict(best, data.inputs[split]))
    if data.static_oov is not None:
        results["static_oov"] = data.static_oov
    write_json_atomic(os.path.join(workdir, RESULTS), results)
    return results


def _check_same_config(config: Mapping[str, Any], workdir: str) -> None:
    """Saves the config at a run's start; a resumed run must have the same one (ValueError naming the
    first key that differs), but for the keys that only say when to stop (`STOPPING`): a capped run
    continues with a higher `train.epochs` exactly as one begun with it, and config.json then says so (and
    names the keys declared since it was saved, at their defaults)."""
    path = os.path.join(workdir, CONFIG)
    as_dict = json.loads(json.dumps(dict(config.to_dict() if hasattr(config, "to_dict") else config)))
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        comparable = completed(saved).to_dict()
        comparable["train"].update({key: as_dict["train"][key] for key in STOPPING})
        if comparable != as_dict:
            differing = _first_difference(comparable, as_dict)
            raise ValueError(f"{workdir} was trained with another config ({differing}): use another --workdir")
        if comparable == saved:
            return
    write_json_atomic(path, as_dict)


def _first_difference(saved: Any, now: Any, prefix: str = "") -> str:
    if isinstance(saved, dict) and isinstance(now, dict):
        for key in sorted(set(saved) | set(now)):
            if saved.get(key) != now.get(key):
                return _first_difference(saved.get(key), now.get(key), f"{prefix}{key}.")
    return f"{prefix.rstrip('.')}: {saved!r} then, {now!r} now"


