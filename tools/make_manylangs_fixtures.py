"""Writes tests/interop/manylangs/: tiny random ELMoForManyLangs (HIT-SCIR) models, built and run with
ELMoForManyLangs' own classes, and what its `Embedder.sents2elmo` returns for them, for
tests/interop/test_manylangs.py (which reads them with elmo_jax/interop/manylangs.py, without PyTorch).

Runs under a PyTorch of its own, outside the project's venv, on a checkout of ELMoForManyLangs at the
commit the files record (b3de5f1, its PyPI release; the `fetch`ed mirror exported with `git archive`):

    git --git-dir=MIRROR archive b3de5f1 | tar -x -C /tmp/efml
    /tmp/torchvenv/bin/python tools/make_manylangs_fixtures.py --source /tmp/efml

ELMoForManyLangs targets PyTorch 0.4. Its files are not changed; this script patches, in memory only:
- `overrides` (modules/highway.py:9 `from overrides import overrides`, an unpinned dependency): a stub
  module whose `overrides` decorator returns the method unchanged (what the decorator does at run time);
- `h5py` (modules/elmo.py:3, imported and never used): an empty stub module;
- `torch.cuda.is_available` -> False (elmo.py:111): the models run on the CPU whatever the machine.
Nothing else needed a patch under torch 2.14: `torch.autograd.Variable` is still an alias that returns its
tensor (and `isinstance(t, Variable)` holds, modules/util.py:53), `torch.load`'s `weights_only=True`
default reads plain state dicts, `torch.nn.functional.tanh` only warns.

Each model directory looks like a released one (biLM.py:597-605 writes the dictionaries and config.json):
config.json (biLM.py's `vars(opt)`, its `config_path` the model configuration's), the model configuration
json, char.dic, word.dic (when word_dim > 0), token_embedder.pkl and encoder.pkl (biLM.py:277-278: the
modules' state dicts); with expected.npz beside them (NumPy, not part of a release):
- `output_layer_{k}_sentence_{i}`: `Embedder(dir).sents2elmo(SENTENCES, output_layer=k)[i]` for k in
  0, 1, 2, -1, -2, each from a freshly loaded Embedder: its first (and only) batch, from a zero LSTM state;
- `second_call_batch_size_2_sentence_{i}`: output_layer -2 of a second call on the Embedder of the
  output_layer=-2 call, with `batch_size = 2` (after `random.seed(SECOND_CALL_SEED)`: create_batches shuffles
  the batches' order, elmo.py:84-86). ElmobiLm is stateful (modules/elmo.py:20, encoder_base.py:117-278):
  each batch starts from the states the previous batch left, so these differ from the first call's
  (ELMoForManyLangs issues #30 and #53); versions.json records by how much.

The models (all random, every parameter drawn again so that no initialisation's structure hides a wrong
formula; cell and projection clips small enough that both clip in these runs, versions.json counts how often):
- cnn_words: word_dim 6, char_dim 5, filters [[1, 3], [2, 4], [3, 5]], conv activation relu, 2 highway
  layers, projection 8, LSTM cell 16, 2 layers; legacy pickles (`_use_new_zipfile_serialization=False`, the
  layout of the released models); config.json's `config_path` an absolute path that does not exist here
  (ELMoForManyLangs falls back to its basename in the model directory, elmo.py:120-123);
- cnn_chars: word_dim 0 (no word.dic), char_dim 4, filters [[1, 4], [3, 3]], conv activation tanh, 1 highway
  layer, projection 6, cell 12, 2 layers; zip pickles; `config_path` relative to the model directory;
- words_only: char_dim 0 (no char.dic), word_dim 5, projection 4, cell 8, 2 layers; zip pickles.
max_characters_per_token is 8 (words are cut to 6 characters, elmo.py:36-37; 7 is the least that '<bos>'
passes frontend.py:57's assertion with).

SENTENCES (tests/interop/manylangs/sentences.json) hold words outside the dictionaries, words longer than the
limit (one cut to a word of word.dic), characters outside the Basic Multilingual Plane (one in char.dic, an
emoji not), U+3000 (char.dic and word.dic hold it: a whitespace entry is written '\u3000\tID' and read back
by elmo.py:144-146's rule, `strip()` leaving one field), a space inside a word (in no dictionary), the
literal word '<eos>' inside a sentence (its characters are the boundary token's, frontend.py:69) and a 1-word
sentence. An empty sentence is run apart (beside EMPTY_BESIDE): output_layer -1 raises ZeroDivisionError in
`np.average` over no words (elmo.py:221) and the others give [.., 0, dim] arrays: expected.npz's
`empty_sentence_output_layer_{k}` and versions.json's `empty_sentence` record which.

Last run with torch 2.14.1+cu130 (CPU), NumPy 2.4.6, Python 3.11.7; versions.json records the run. The
files are under 200 KB together.
"""

from __future__ import annotations

import argparse
import codecs
import collections
import json
import os
import platform
import random
import subprocess
import sys
import types

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "interop", "manylangs")
COMMIT = "b3de5f1dc1ac13638a930b49c41e1f1e0e185ca1"
OUTPUT_LAYERS = (0, 1, 2, -1, -2)
SECOND_CALL_SEED = 7
MAX_CHARS = 8

# What the models were "trained" on: their dictionaries are built from it as biLM.py:515-545 builds them.
TRAINING = [
    ["the", "cat", "sat", "on", "the", "mat"],
    ["a", "cat", "extrao", "日本", "𠀀x"],
    ["the\u3000mat", "\u3000", "sixsix", "ok"],
]
SENTENCES = [
    ["the", "cat", "sat", "on", "the", "mat"],
    ["a", "dog", "sat", "extraordinary", "mat"],  # 'dog' in no dictionary; 'extraordinary' cut to 'extrao'
    ["日本", "𠀀x", "😀", "ok"],  # 𠀀 (U+20000) in char.dic, 😀 (U+1F600) not
    ["cat"],
    ["the\u3000cat", "\u3000", "a b"],  # U+3000 in both dictionaries; ' ' in neither
    ["<eos>", "on", "sixsix", "sevenAB", "cat"],  # 6 characters kept whole, 7 cut to 'sevenA'
]
EMPTY_BESIDE = ["the", "cat"]  # the sentence an empty one is run beside


def model_configs() -> dict[str, dict]:
    """Each model's configuration json (the layout of configs/cnn_50_100_512_4096_sample.json)."""
    def config(word_dim, char_dim, filters, activation, n_highway, proj, cell, layers, cell_clip, proj_clip):
        return {
            "encoder": {"name": "elmo", "projection_dim": proj, "cell_clip": cell_clip, "proj_clip": proj_clip,
                        "dim": cell, "n_layers": layers},
            "token_embedder": {"name": "cnn", "activation": activation, "filters": filters, "n_highway": n_highway,
                               "word_dim": word_dim, "char_dim": char_dim, "max_characters_per_token": MAX_CHARS},
            "classifier": {"name": "sampled_softmax", "n_samples": 8},
            "dropout": 0.1,
        }
    return {
        "cnn_words": config(6, 5, [[1, 3], [2, 4], [3, 5]], "relu", 2, 8, 16, 2, 0.5, 0.4),
        "cnn_chars": config(0, 4, [[1, 4], [3, 3]], "tanh", 1, 6, 12, 2, 0.6, 0.5),
        "words_only": config(5, 0, [[1, 2]], "relu", 1, 4, 8, 2, 0.5, 0.4),
    }


LAYOUTS = {  # model -> (zip pickles?, config_path written in config.json, where the configuration json goes)
    "cnn_words": (False, "/users4/hit-scir/elmo/configs/cnn_6_5_8_16_tiny.json", "cnn_6_5_8_16_tiny.json"),
    "cnn_chars": (True, "cnn_0_4_6_12_tiny.json", "cnn_0_4_6_12_tiny.json"),
    "words_only": (True, "words_5_4_8_tiny.json", "words_5_4_8_tiny.json"),
}


def patch_imports(source: str) -> types.ModuleType:
    """Imports ELMoForManyLangs from `source` with the in-memory patches the docstring lists."""
    stub = types.ModuleType("overrides")
    stub.overrides = lambda method: method
    sys.modules["overrides"] = stub
    sys.modules["h5py"] = types.ModuleType("h5py")
    torch.cuda.is_available = lambda: False
    sys.path.insert(0, os.path.abspath(source))
    import elmoformanylangs
    assert os.path.abspath(os.path.dirname(elmoformanylangs.__file__)).startswith(os.path.abspath(source))
    return elmoformanylangs


def lexicons(config: dict) -> tuple[dict | None, dict | None]:
    """word.dic's and char.dic's entries as biLM.py:515-545 makes them (without pretrained vectors):
    <oov> <bos> <eos> <pad> first in word.dic; in char.dic each character in the order it first appears in the
    training sentences *with* their '<bos>' and '<eos>' (their characters too), then the special entries."""
    data = [["<bos>", *s, "<eos>"] for s in TRAINING]
    words = None
    if config["token_embedder"]["word_dim"] > 0:
        words = {}
        for w in ["<oov>", "<bos>", "<eos>", "<pad>"] + [w for s in TRAINING for w in s]:
            words.setdefault(w, len(words))
    chars = None
    if config["token_embedder"]["char_dim"] > 0:
        chars = {}
        for ch in [c for s in data for w in s for c in w] + ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]:
            chars.setdefault(ch, len(chars))
    return words, chars


def randomize(module: torch.nn.Module, seed: int) -> None:
    """Every parameter drawn again: N(0, 0.5^2), biases too (the highway's carry bias of 1, the forget gate's
    bias of 1 and the unit-norm embedding rows of ELMoForManyLangs' initialisation would hide mistakes)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)


def write_dictionary(path: str, lexicon: dict) -> None:
    """As biLM.py:597-602 writes them: 'ENTRY\\tID' lines in the dict's order."""
    with codecs.open(path, "w", encoding="utf-8") as f:
        for entry, i in lexicon.items():
            print("{0}\t{1}".format(entry, i), file=f)


def write_model(efml: types.ModuleType, name: str, config: dict, seed: int) -> str:
    """A model directory as released, of ELMoForManyLangs' own Model with random parameters."""
    zip_format, config_path, config_file = LAYOUTS[name]
    directory = os.path.join(OUT, name)
    words, chars = lexicons(config)
    save_model(efml, directory, config, words, chars, seed=seed, zip_format=zip_format, config_path=config_path,
               config_file=config_file)
    return directory


def save_model(efml: types.ModuleType, directory: str, config: dict, words: dict | None, chars: dict | None, *,
               seed: int | None, zip_format: bool, config_path: str, config_file: str) -> None:
    """`directory` made a model directory as released (biLM.py:597-605 and 277-278), of ELMoForManyLangs' own
    Model built from `config` and the dictionaries `words` (word.dic) and `chars` (char.dic; None: none); every
    parameter drawn again (`randomize(model, seed)`) unless `seed` is None (ELMoForManyLangs' initialisation).
    `config_file`: the configuration json's name in `directory`; `config_path`: what config.json says of it;
    `zip_format`: zip pickles, else legacy ones. Also used by benchmarks/manylangs_speed.py."""
    from elmoformanylangs.frontend import Model
    from elmoformanylangs.modules.embedding_layer import EmbeddingLayer
    os.makedirs(directory, exist_ok=True)
    embedder = config["token_embedder"]
    word_layer = EmbeddingLayer(embedder["word_dim"], words, fix_emb=False, embs=None) if words else None
    char_layer = EmbeddingLayer(embedder["char_dim"], chars, fix_emb=False, embs=None) if chars else None
    model = Model(config, word_layer, char_layer, use_cuda=False)
    if seed is not None:
        randomize(model, seed)
    with open(os.path.join(directory, config_file), "w") as f:
        json.dump(config, f, indent=1)
    name = os.path.basename(os.path.normpath(directory))
    opt = {"seed": 1, "gpu": -1, "train_path": "/users4/hit-scir/elmo/data/train.txt", "valid_path": None,
           "test_path": None, "config_path": config_path, "word_embedding": None, "optimizer": "adam", "lr": 0.001,
           "lr_decay": 0, "model": f"/users4/hit-scir/elmo/{name}", "batch_size": 32, "max_epoch": 10,
           "clip_grad": 5, "max_sent_len": 20, "min_count": 1, "max_vocab_size": 150000,
           "save_classify_layer": False, "valid_size": 0, "eval_steps": None}
    json.dump(opt, codecs.open(os.path.join(directory, "config.json"), "w", encoding="utf-8"))
    if chars:
        write_dictionary(os.path.join(directory, "char.dic"), chars)
    if words:
        write_dictionary(os.path.join(directory, "word.dic"), words)
    for part in ("token_embedder", "encoder"):
        torch.save(getattr(model, part).state_dict(), os.path.join(directory, f"{part}.pkl"),
                   _use_new_zipfile_serialization=zip_format)


def fresh_embedder(efml: types.ModuleType, directory: str, config: dict):
    """ELMoForManyLangs' Embedder of `directory`, checked to read back the dictionaries written."""
    embedder = efml.Embedder(directory)
    words, chars = lexicons(config)
    chars = None if chars is None else {("\u3000" if k.strip() == "" else k): i for k, i in chars.items()}
    words = None if words is None else {("\u3000" if k.strip() == "" else k): i for k, i in words.items()}
    assert embedder.char_lexicon == chars and embedder.word_lexicon == words, directory
    return embedder


def clip_counts(embedder) -> dict[str, float]:
    """How often the cell and projection clips bite on SENTENCES (fractions of the clipped values); run on a
    separate Embedder, with torch.clamp wrapped to count: the fixtures' runs use torch unwrapped."""
    from elmoformanylangs.modules import lstm_cell_with_projection as cell_module
    counts = collections.Counter()
    clamp = torch.clamp

    def counting(tensor, low, high):
        kind = "cell" if tensor.shape[-1] == embedder.config["encoder"]["dim"] else "projection"
        counts[kind + "_clipped"] += int(((tensor < low) | (tensor > high)).sum())
        counts[kind + "_values"] += tensor.numel()
        return clamp(tensor, low, high)

    cell_module.torch.clamp = counting
    try:
        embedder.sents2elmo(SENTENCES, output_layer=-2)
    finally:
        cell_module.torch.clamp = clamp
    return {kind: counts[kind + "_clipped"] / counts[kind + "_values"] for kind in ("cell", "projection")}


def empty_sentence(efml: types.ModuleType, directory: str, config: dict, expected: dict) -> dict[str, str]:
    """What sents2elmo([EMPTY_BESIDE, []]) gives for the empty sentence, each output_layer from a fresh Embedder:
    its array (into `expected`, `empty_sentence_output_layer_{k}`) or the exception it raises."""
    outcome = {}
    for k in OUTPUT_LAYERS:
        try:
            out = fresh_embedder(efml, directory, config).sents2elmo([EMPTY_BESIDE, []], output_layer=k)[1]
        except Exception as error:  # noqa: BLE001 - recorded, not handled
            outcome[str(k)] = f"{type(error).__name__}: {error}"
            continue
        expected[f"empty_sentence_output_layer_{k}"] = np.asarray(out)
        outcome[str(k)] = f"array of shape {list(np.shape(out))}"
    return outcome


def run(efml: types.ModuleType, name: str, directory: str, config: dict) -> dict:
    """expected.npz of `directory`; what versions.json records of the run."""
    expected, first = {}, None
    for k in OUTPUT_LAYERS:
        embedder = fresh_embedder(efml, directory, config)
        outputs = embedder.sents2elmo(SENTENCES, output_layer=k)
        assert len(outputs) == len(SENTENCES)
        for i, out in enumerate(outputs):
            expected[f"output_layer_{k}_sentence_{i}"] = np.asarray(out)
        if k == -2:
            first = outputs
            embedder.batch_size = 2
            random.seed(SECOND_CALL_SEED)
            second = embedder.sents2elmo(SENTENCES, output_layer=-2)
            for i, out in enumerate(second):
                expected[f"second_call_batch_size_2_sentence_{i}"] = np.asarray(out)
    n_layers = config["encoder"]["n_layers"] + 1
    for i, layers in enumerate(first):  # output_layer k is layer k of -2's; -1 their average
        assert layers.shape == (n_layers, len(SENTENCES[i]), 2 * config["encoder"]["projection_dim"])
        for k in range(n_layers):
            np.testing.assert_array_equal(expected[f"output_layer_{k}_sentence_{i}"], layers[k])
        np.testing.assert_allclose(expected[f"output_layer_-1_sentence_{i}"], layers.mean(0), rtol=0, atol=1e-6)
    empty = empty_sentence(efml, directory, config, expected)
    np.savez_compressed(os.path.join(directory, "expected.npz"), **expected)
    differences = [float(np.abs(expected[f"second_call_batch_size_2_sentence_{i}"] - layers).max())
                   for i, layers in enumerate(first) if layers.size]
    return {
        "pickles": "zip" if LAYOUTS[name][0] else "legacy",
        "empty_sentence": empty,
        "clipped_fraction": clip_counts(fresh_embedder(efml, directory, config)),
        "second_call_batch_size_2": {
            "random_seed": SECOND_CALL_SEED,
            "max_abs_difference_from_first_call_per_sentence": differences,
        },
    }


def source_commit(source: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None  # an exported tree (git archive) has no .git


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="a checkout of ELMoForManyLangs (its elmoformanylangs/)")
    args = parser.parse_args()
    head = source_commit(args.source)
    if head is not None and head != COMMIT:
        sys.exit(f"{args.source} is at {head}, not ELMoForManyLangs {COMMIT}")
    efml = patch_imports(args.source)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sentences.json"), "w", encoding="utf-8") as f:
        json.dump(SENTENCES, f, ensure_ascii=False, indent=1)
    models = {}
    for seed, (name, config) in enumerate(model_configs().items()):
        directory = write_model(efml, name, config, seed)
        models[name] = run(efml, name, directory, config)
    record = {"elmoformanylangs_commit": COMMIT, "torch": torch.__version__, "numpy": np.__version__,
              "python": platform.python_version(), "output_layers": list(OUTPUT_LAYERS), "models": models}
    with open(os.path.join(OUT, "versions.json"), "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
