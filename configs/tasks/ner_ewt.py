"""Named entities of Universal NER on UD English EWT (PER, ORG, LOC): a BiLSTM-CRF with IOB2
transitions, scored by exact-match span F1.

  elmo-task train --config=configs/tasks/ner_ewt.py[:DIR] --workdir=runs/ner_ewt \\
      --config.inputs.elmo.workdir=runs/demo

DIR (default data/uner_english_ewt) holds the files docs/tasks.md names. No input is set here: choose one or more
(inputs.elmo.workdir, inputs.static.file, inputs.word.dim, inputs.char_cnn.dim) on the command line.
"""

import os

from elmo_jax.tasks.schema import get_config as task_defaults


def get_config(data_dir: str = "data/uner_english_ewt"):
    config = task_defaults()
    config.task.kind = "ner"
    config.head.kind = "crf"
    config.data.train_file = os.path.join(data_dir, "en_ewt-ud-train.iob2")
    config.data.dev_file = os.path.join(data_dir, "en_ewt-ud-dev.iob2")
    config.data.test_file = os.path.join(data_dir, "en_ewt-ud-test.iob2")
    return config
