"""Chinese demo: the demo's biLM on about 310K words of segmented simplified Chinese, reading
characters (a character vocabulary built from the training text), on CPU in minutes.

  python train.py --config=configs/demo_zh.py:DIR --workdir=runs/demo_zh

DIR (default data/chinese) holds UD Chinese GSD train converted to simplified characters, the SIGHAN
2005 MSR and PKU gold segmentations (trained on) and UD Chinese GSDSimp test (perplexity): the files
docs/chinese.md names. Filter widths and data.max_chars_per_token count characters: a listed
character is one position of the char CNN, not the 3 bytes of its UTF-8.
"""

import os

from elmo_jax.config.recipes import recipe_module

demo = recipe_module("demo")

TRAIN_FILES = ("zh_gsd2017simp-ud-train.conllu", "sighan2005_msr_test_gold.txt", "sighan2005_pku_test_gold.txt")
TEST_FILE = "zh_gsdsimp-ud-test.conllu"


def get_config(data_dir: str = "data/chinese"):
    config = demo.get_config()
    data = config.data
    data.source = "text"
    data.train_files = ",".join(os.path.join(data_dir, name) for name in TRAIN_FILES)
    data.eval_files = os.path.join(data_dir, TEST_FILE)
    data.vocab_min_count = 2  # About 310K words: a word seen once is <UNK>, its characters still read.
    data.char_vocab_min_count = 2  # Characters seen once stay UTF-8 bytes.
    data.max_chars_per_token = 10  # 8 characters: 99.9% of the training tokens (93% are 1 or 2).
    config.model.dropout = 0.1  # About 7 passes over the text in the demo's 1,800 steps.
    return config
