"""UPOS tagging of UD Chinese GSD as released in 2016 (simplified characters, gold words), a BiLSTM
with a softmax per token.

  elmo-task train --config=configs/tasks/upos_zh.py[:DIR] --workdir=runs/upos_zh \\
      --config.inputs.elmo.workdir=runs/demo

DIR (default data/chinese) holds the files docs/tasks.md names. No input is set here: choose one or more
(inputs.elmo.workdir, inputs.static.file, inputs.word.dim, inputs.char_cnn.dim) on the command line.
"""

import os

from elmo_jax.tasks.schema import get_config as task_defaults


def get_config(data_dir: str = "data/chinese"):
    config = task_defaults()
    config.task.kind = "tag"
    config.head.kind = "softmax"
    config.data.train_file = os.path.join(data_dir, "zh_gsd2017simp-ud-train.conllu")
    config.data.dev_file = os.path.join(data_dir, "zh_gsd2017simp-ud-dev.conllu")
    config.data.test_file = os.path.join(data_dir, "zh_gsd2017simp-ud-test.conllu")
    return config
