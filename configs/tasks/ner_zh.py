"""Named entities of Universal NER on UD Chinese GSDSimp (gold words): a BiLSTM-CRF with IOB2
transitions, scored by span F1.

  elmo-task train --config=configs/tasks/ner_zh.py[:DIR] --workdir=runs/ner_zh \\
      --config.inputs.elmo.workdir=runs/demo

DIR (default data/chinese/uner_gsdsimp) holds the files docs/tasks.md names. No input is set here: choose one or more
(inputs.elmo.workdir, inputs.static.file, inputs.word.dim, inputs.char_cnn.dim) on the command line.
"""

import os

from elmo_jax.tasks.schema import recipe


def get_config(data_dir: str = "data/chinese/uner_gsdsimp"):
    return recipe("ner", os.path.join(data_dir, "zh_gsdsimp-ud-{split}.iob2"), head="crf")
