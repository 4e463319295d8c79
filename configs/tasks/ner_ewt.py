"""Named entities of Universal NER on UD English EWT (PER, ORG, LOC): a BiLSTM-CRF with IOB2
transitions, scored by exact-match span F1.

  elmo-task train --config=configs/tasks/ner_ewt.py[:DIR] --workdir=runs/ner_ewt \\
      --config.inputs.elmo.workdir=runs/demo

DIR (default data/uner_english_ewt) holds the files docs/tasks.md names. No input is set here: choose one or more
(inputs.elmo.workdir, inputs.static.file, inputs.word.dim, inputs.char_cnn.dim) on the command line.
"""

import os

from elmo_jax.tasks.schema import recipe


def get_config(data_dir: str = "data/uner_english_ewt"):
    return recipe("ner", os.path.join(data_dir, "en_ewt-ud-{split}.iob2"), head="crf")
