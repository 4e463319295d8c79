"""UPOS tagging of UD English EWT (12,543 training sentences), a BiLSTM with a softmax per token,
scored by accuracy.

  elmo-task train --config=configs/tasks/upos_ewt.py[:DIR] --workdir=runs/upos_ewt \\
      --config.inputs.elmo.workdir=runs/demo

DIR (default data/ud_english_ewt) holds the files docs/tasks.md names. No input is set here: choose one or more
(inputs.elmo.workdir, inputs.static.file, inputs.word.dim, inputs.char_cnn.dim) on the command line.
"""

import os

from elmo_jax.tasks.schema import recipe


def get_config(data_dir: str = "data/ud_english_ewt"):
    return recipe("tag", os.path.join(data_dir, "en_ewt-ud-{split}.conllu"), head="softmax")
