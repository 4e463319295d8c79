"""A trained task workdir read back (`elmo-task evaluate`, `elmo-task predict`): its config, labels and
best params, scoring any labelled file of its task's format and predicting on unlabelled ones, written
back in the input's format (CoNLL-U with the column or HEAD/DEPREL filled, entity files with the tags)
for users' own scorers.

Words of a new file that the static table lacks get their vectors from the run's vector file (rows
added after the trained ones); the biLM's layers (a fine-tuned one's from its trained weights) and char
ids are computed for the file as in training.
"""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from elmo_jax.data.conllu_tasks import write_conllu
from elmo_jax.data.entities import write_entity_file
from elmo_jax.runtime.quiet_logs import library_errors_silenced
from elmo_jax.static.lookup import StaticVectors
from elmo_jax.tasks import features
from elmo_jax.tasks.datasets import Examples, read_examples
from elmo_jax.tasks.loop import CONFIG, LABELS, Predictor, load_bilm, model_config, scores, split_inputs
from elmo_jax.tasks.model import TaskModel
from elmo_jax.tasks.schema import completed, uses_elmo


class TrainedTask:
    """The task model of `workdir` (its `checkpoints/best`)."""

    def __init__(self, workdir: str):
        path = os.path.join(workdir, CONFIG)
        if not os.path.exists(os.path.join(workdir, "checkpoints", "best")):
            raise ValueError(f"{workdir}: no trained task model (checkpoints/best); train it with elmo-task train")
        with open(path, encoding="utf-8") as f:
            self.config = completed(json.load(f))
        with open(os.path.join(workdir, LABELS), encoding="utf-8") as f:
            tables = json.load(f)
        self.workdir, self.kind = workdir, self.config.task.kind
        self.labels, self.words, self.static_words = tables["labels"], tables["words"], tables["static_words"]
        inputs = self.config.inputs
        self.vectors = StaticVectors.read(inputs.static.file) if inputs.static.file else None
        self.bilm = load_bilm(self.config) if uses_elmo(self.config) else None

    def read(self, path: str, unlabelled: bool = False) -> Examples:
        """The sentences of a file of the task's format (`unlabelled`: for prediction)."""
        task = self.config.task
        return read_examples(self.kind, path, task.column, task.scheme, unlabelled)

    def predict(self, examples: Examples, progress: bool = False) -> tuple[list[list[str]], list[list[int]] | None]:
        """The labels (and the parser's heads) the model predicts for `examples`' sentences."""
        static_rows, static_index = None, None
        if self.vectors is not None:
            new_words, static_rows = features.static_rows(self.vectors, [examples.words], known=self.static_words)
            static_index = features.static_index([*self.static_words, *new_words])
        word_index = {w: i for i, w in enumerate(self.words)} if self.words else None
        (inputs,) = split_inputs(self.config, [examples.words], self.bilm, word_index, static_index, progress)
        model, params = self._model(inputs, static_rows)
        return Predictor(model, self.labels, self.config.train.eval_batch_size)(params, inputs)

    def _model(self, inputs: features.SplitInputs, static_rows: np.ndarray | None) -> tuple[TaskModel, Any]:
        """The model and its best params, the static table extended by `static_rows`."""
        dim = self.vectors.dim if self.vectors is not None else 0
        trained_rows = features.STATIC_FIRST_ROW + len(self.static_words) if self.vectors is not None else 0
        config = model_config(self.config, self.kind, self.labels, self.bilm,
                              (trained_rows, dim) if self.vectors is not None else None,
                              len(self.words) if self.words else 0)
        model = TaskModel(config)
        zeros = [np.zeros(n, np.int32) for n in np.diff(inputs.offsets)]  # Labels for `init`, which computes a loss.
        batch = features.make_batch(inputs, [0], zeros, zeros if self.kind == "parse" else None, rows=1)
        template = jax.eval_shape(lambda: model.init({"params": jax.random.PRNGKey(0)}, batch, deterministic=True))
        with library_errors_silenced():
            params = ocp.StandardCheckpointer().restore(os.path.join(os.path.abspath(self.workdir), "checkpoints",
                                                                     "best"), template)
        if static_rows is not None and len(static_rows):
            params["params"]["static_embed"]["embedding"] = jnp.concatenate(
                [params["params"]["static_embed"]["embedding"], jnp.asarray(static_rows)])
            grown = (trained_rows + len(static_rows), dim)
            model = TaskModel(model_config(self.config, self.kind, self.labels, self.bilm, grown,
                                           len(self.words) if self.words else 0))
        return model, params

    def evaluate(self, path: str, progress: bool = False) -> dict[str, Any]:
        """The task's scores on the labelled file at `path`."""
        examples = self.read(path)
        return scores(self.kind, examples, *self.predict(examples, progress))

    def write_predictions(self, path: str, out: TextIO, progress: bool = False) -> int:
        """Writes `path` (labelled or not) back to `out` with the predictions in its label columns;
        returns the sentence count."""
        examples = self.read(path, unlabelled=True)
        labels, heads = self.predict(examples, progress)
        if self.kind == "ner":
            write_entity_file(examples.source, labels, out)
        elif self.kind == "parse":
            write_conllu(examples.source, out, heads=heads, relations=labels)
        else:
            write_conllu(examples.source, out, **{self.config.task.column: labels})
        return len(labels)
