"""`elmo-probe` end to end: bilm-tf files and a trained workdir, its control, static vector files,
one-line errors."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

import numpy as np

from elmo_jax.cli.probe import main
from elmo_jax.data.coarsewsd import read_coarsewsd
from tests.data.coarsewsd_helpers import CONTEXTS, write_made_up_dataset
from tests.data.wic_helpers import write_made_up_wic
from tests.doc_blocks import code_blocks
from tests.entry_points import ROOT
from tests.probing.helpers import WORDS, bilm_files, conllu_splits, write_static_vectors  # noqa: F401 (fixtures)
from tests.static.vector_file_helpers import binary_bytes
from tests.training.helpers import make_checkpoint_workdir

FAST = ["--no_progress"]


def test_bilm_files_then_control_into_one_directory(bilm_files, conllu_splits, tmp_path, capsys):  # noqa: F811
    options, weights = bilm_files
    train, dev, test = conllu_splits
    args = ["--options", options, "--weights", weights, "--train", train, "--dev", dev, "--test", test,
            "--normalize", "lower", "--output", str(tmp_path / "out"), *FAST]
    assert main(args) == 0
    result = json.loads((tmp_path / "out" / "probe_upos.json").read_text())
    assert result["command"].startswith("elmo-probe --options") and result["model"] == "weights.hdf5"
    assert len(result["layers"]) == 3 and result["normalize"] == "lower" and result["test"] == test
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "| probe | weights.hdf5 |"
    assert main([*args, "--control", "random_init"]) == 0
    control = json.loads((tmp_path / "out" / "probe_upos_random_init.json").read_text())
    assert control["control"] == "random_init" and control["layers"] != result["layers"]
    assert capsys.readouterr().out.splitlines()[0] == "| probe | weights.hdf5 | weights.hdf5 (random_init) |"
    assert (tmp_path / "out" / "probe_upos.png").stat().st_size > 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--train": "bad"}, "train.conllu:2: expected 10 tab-separated columns, got 2"),
        ({"--task": "lemma"}, "flag --task=lemma: value should be one of"),
        ({"--options": None}, "--options and --weights go together"),
        ({"--test": "missing"}, "No such file or directory"),
        ({"--output": "train"}, "refusing to overwrite an input"),
    ],
    ids=["malformed", "task", "options", "missing", "output"],
)
def test_bad_input_is_one_error_line(bilm_files, conllu_splits, tmp_path, capsys, change, message):  # noqa: F811
    train, dev, test = conllu_splits
    flags = {"--options": bilm_files[0], "--weights": bilm_files[1], "--train": train, "--test": test,
             "--output": str(tmp_path / "out")}
    for flag, value in change.items():
        if value == "bad":
            (tmp_path / "train.conllu").write_text("# c\n1\tx\n")
        elif value == "missing":
            flags[flag] = str(tmp_path / "missing.conllu")
        elif value == "train":
            flags[flag] = str(tmp_path)
            (tmp_path / "probe_upos.json").symlink_to(train)
        elif value is None:
            del flags[flag]
        else:
            flags[flag] = value
    assert main([*[a for item in flags.items() for a in item], *FAST]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_word_senses_of_a_coarsewsd_directory_then_control(bilm_files, tmp_path, capsys):  # noqa: F811
    options, weights = bilm_files
    data = write_made_up_dataset(str(tmp_path / "data"))
    args = ["--options", options, "--weights", weights, "--task", "wsd", "--data", data, "--output",
            str(tmp_path / "out"), "--max_train_per_word", "20", *FAST]
    assert main(args) == 0
    result = json.loads((tmp_path / "out" / "probe_wsd.json").read_text())
    assert result["data"] == data and result["command"].startswith("elmo-probe --options")
    assert list(result["words"]) == ["bank", "bass"] and result["train_sentences"] == 40 and len(result["layers"]) == 3
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    out_dir = tmp_path / "out"
    assert captured.err.splitlines()[-1] == f"wrote {out_dir / 'probe_wsd.json'}, {out_dir / 'probe_wsd.png'}"
    assert out[0].startswith("| mean over words | weights.hdf5 centroid F1 | weights.hdf5 linear F1 |")
    assert out[6].startswith("| most frequent sense |") and any(line.startswith("| bass | 3 | 16 |") for line in out)
    assert main([*args, "--control", "random_init", "--data", data + "/bank"]) == 0
    assert json.loads((tmp_path / "out" / "probe_wsd_random_init.json").read_text())["words"].keys() == {"bank"}
    assert "weights.hdf5 (random_init) centroid F1" in capsys.readouterr().out.splitlines()[0]
    assert (tmp_path / "out" / "probe_wsd.png").stat().st_size > 0


def test_the_documented_apple_and_play_command_shows_each_sentences_nearest_sense(bilm_files, tmp_path, capsys):  # noqa: F811
    """docs/probing.md's command as written, on a small model for the demo's workdir."""
    options, weights = bilm_files
    (command,) = [line for block in code_blocks(os.path.join(ROOT, "docs", "probing.md"), "bash")
                  for line in block.splitlines() if "examples/senses" in line]
    args = shlex.split(command)[1:]
    args[args.index("--workdir") : args.index("--workdir") + 2] = ["--options", options, "--weights", weights]
    args[args.index("--output") + 1] = str(tmp_path / "senses")
    args[args.index("--data") + 1] = os.path.join(ROOT, args[args.index("--data") + 1])
    assert main([*args, *FAST]) == 0
    out = capsys.readouterr().out
    words = read_coarsewsd(os.path.join(ROOT, "examples", "senses"))
    for word in words:
        assert f"nearest sense centroid: {word.word}" in out
        for example in word.test:
            tokens = list(example.tokens)
            tokens[example.position] = f"[[{tokens[example.position]}]]"
            row = next(line for line in out.splitlines() if line.startswith(f"| {' '.join(tokens)} |"))
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert cells[1] == word.senses[example.sense] and set(cells[2:]) <= set(word.senses.values())
            assert len(cells) == 2 + 3 + 1  # Sentence, gold sense, layers 0..2, mix.
    predictions = json.loads((tmp_path / "senses" / "probe_wsd.json").read_text())["words"]["play"]["predictions"]
    assert len(predictions) == 6 and predictions[3]["gold"] == "play_theatre"


def test_the_sense_examples_are_two_words_of_two_senses_each():
    words = read_coarsewsd(os.path.join(ROOT, "examples", "senses"))
    assert [w.word for w in words] == ["apple", "play"]
    for word in words:
        assert len(word.senses) == 2
        for split in (word.train, word.test):
            assert all(e.tokens[e.position] == word.word for e in split)
            counts = [sum(e.sense == sense for e in split) for sense in word.senses]
            assert counts == [len(split) // 2] * 2, counts  # As many sentences of each sense.


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "wsd"], "--task wsd needs --data"),
        (["--task", "wsd", "--data", "DATA", "--train", "x.conllu"], "--train not taken with --task wsd"),
        (["--data", "DATA", "--train", "x", "--test", "y"], "--data not taken with --task upos"),
        (["--task", "wsd", "--data", "DATA", "--max_train_per_word", "1"], "--max_train_per_word must be 0 (all) or >= 2"),
        (["--task", "wsd", "--data", "DATA", "--output", "DATA/bank"], "refusing to overwrite an input"),
        (["--task", "wsd", "--data", "DATA/bank/train.gold.txt"], "train.gold.txt: not a directory"),
        (["--train", "x", "--test", "y", "--show_predictions"], "--show_predictions not taken with --task upos"),
    ],
    ids=["no-data", "train", "data", "max-train", "output", "not-a-directory", "show-predictions"],
)
def test_bad_word_sense_flags_are_one_error_line(bilm_files, tmp_path, capsys, args, message):  # noqa: F811
    data = write_made_up_dataset(str(tmp_path / "data"))
    args = [arg.replace("DATA", data) for arg in args]
    assert main(["--options", bilm_files[0], "--weights", bilm_files[1], *args, *FAST]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_word_in_context_of_a_wic_directory_then_control(bilm_files, tmp_path, capsys):  # noqa: F811
    options, weights = bilm_files
    data = write_made_up_wic(str(tmp_path / "data"), train=40, dev=10, test=20)
    args = ["--options", options, "--weights", weights, "--task", "wic", "--data", data, "--output",
            str(tmp_path / "out"), *FAST]
    assert main(args) == 0
    result = json.loads((tmp_path / "out" / "probe_wic.json").read_text())
    assert result["data"] == data and result["command"].startswith("elmo-probe --options")
    assert result["dev"] == "dev" and result["train_pairs"] == 40 and len(result["layers"]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| accuracy | weights.hdf5 cosine | weights.hdf5 linear |" and out[-1] == "| test pairs | 20 | 20 |"
    assert main([*args, "--control", "random_init"]) == 0
    control = json.loads((tmp_path / "out" / "probe_wic_random_init.json").read_text())
    assert control["control"] == "random_init" and control["thresholds"] != result["thresholds"]
    assert "weights.hdf5 (random_init) cosine" in capsys.readouterr().out.splitlines()[0]
    assert (tmp_path / "out" / "probe_wic.png").stat().st_size > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "wic"], "--task wic needs --data"),
        (["--task", "wic", "--data", "DATA", "--max_train_per_word", "5"], "--max_train_per_word not taken with"),
        (["--task", "wic", "--data", "DATA/dev"], "/dev: no train.data.txt, test.data.txt (WiC's layout"),
        (["--task", "wic", "--data", "DATA", "--weights", "missing.hdf5"], "test.gold.txt:2: label 'X' is not T or F"),
    ],
    ids=["no-data", "max-train", "no-splits", "bad-label-before-the-model"],
)
def test_bad_word_in_context_input_is_one_error_line(bilm_files, tmp_path, capsys, args, message):  # noqa: F811
    data = write_made_up_wic(str(tmp_path / "data"), train=4, dev=2, test=3)
    (tmp_path / "data" / "test" / "test.gold.txt").write_text("T\nX\nF\n")
    args = [arg.replace("DATA", data) for arg in args]
    assert main(["--options", bilm_files[0], "--weights", bilm_files[1], *args, *FAST]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


@pytest.mark.slow
def test_python_m_on_a_trained_workdir(tiny_training_run, conllu_splits, tmp_path):  # noqa: F811
    workdir = tiny_training_run[0]
    train, _, test = conllu_splits
    run = subprocess.run(
        [sys.executable, "-m", "elmo_jax.probe", "--workdir", workdir, "--train", train, "--test", test,
         "--output", str(tmp_path), "--task", "deprel", "--mlp", "--seed", "3", *FAST],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "probe_deprel.json").read_text())
    assert result["dev"] == "train_tenth" and len(result["mlp"]) == len(result["layers"]) == 3
    assert result["workdir"] == workdir and result["seed"] == 3
    assert "| mix |" in run.stdout


def test_a_workdir_without_token_projection_records_the_step_it_loaded(conllu_splits, tmp_path):  # noqa: F811
    """A checkpoint (step 2) of configs/tests/tiny.py with model.char_cnn.projection=False, probed
    without --step: its layers at their own widths, and the step loaded in the result."""
    workdir = make_checkpoint_workdir(tmp_path, **{"model.char_cnn.projection": False})
    train, dev, test = conllu_splits
    out = tmp_path / "out"
    assert main(["--workdir", workdir, "--train", train, "--dev", dev, "--test", test, "--output", str(out), *FAST]) == 0
    result = json.loads((out / "probe_upos.json").read_text())
    assert result["step"] == 2 and result["model"] == "workdir"
    assert result["layer_dims"] == [20, 16, 16] and len(result["layers"]) == 3


def write_both_formats(directory) -> tuple[str, str]:
    """A text file of vectors of the test words, the sense words' contexts and <UNK>, and a word2vec
    binary file of half of them."""
    words = [*sorted(set(WORDS) | set(CONTEXTS) | {w for s in CONTEXTS.values() for c in s.values() for w in c}), "<UNK>"]
    text = write_static_vectors(directory / "vectors.txt", words)
    binary = directory / "half.bin"
    binary.write_bytes(binary_bytes(words[::2], np.random.default_rng(1).normal(size=(len(words[::2]), 8))))
    return text, str(binary)


@pytest.mark.parametrize("task", ["upos", "wsd", "wic"])
def test_static_vector_files_are_rows_of_the_result_and_its_table(bilm_files, conllu_splits, tmp_path, capsys, task):  # noqa: F811
    text, binary = write_both_formats(tmp_path)
    train, _, test = conllu_splits
    data = {"upos": ["--train", train, "--test", test],
            "wsd": ["--data", write_made_up_dataset(str(tmp_path / "wsd")), "--max_train_per_word", "20"],
            "wic": ["--data", write_made_up_wic(str(tmp_path / "wic"), train=40, test=20)]}[task]
    args = ["--options", bilm_files[0], "--weights", bilm_files[1], "--task", task, *data, "--static", text,
            "--static", binary, "--output", str(tmp_path / "out"), *FAST]
    assert main(args) == 0
    static = json.loads((tmp_path / "out" / f"probe_{task}.json").read_text())["static"]
    assert sorted(static) == ["half.bin", "vectors.txt"]  # The files' names; JSON sorts them.
    assert [static[name]["format"] for name in ("vectors.txt", "half.bin")] == ["text", "binary"]
    assert [static[name]["dim"] for name in ("vectors.txt", "half.bin")] == [16, 8] and static["half.bin"]["file"] == binary
    assert static["vectors.txt"]["oov"]["oov_rate"] < static["half.bin"]["oov"]["oov_rate"]
    out = capsys.readouterr().out.splitlines()
    for name in static:
        for row, score in static[name]["rows"].items():
            (line,) = [line for line in out if line.startswith(f"| {name}: {row} |")]
            assert float(line.split("|")[2]) == pytest.approx(score, abs=5e-4)


MALFORMED = {
    "wrong dimension": (b"the 1 2\ncat 1 2 3\n", "vectors:2: 3 values, expected line 1's 2"),
    "header lies about the count": (b"3 2\nthe 1 2\ncat 1 2\n", "vectors:1: the header says 3 words, the file has 2"),
    "header lies about the dimension": (b"2 3\nthe 1 2\ncat 1 2\n", "vectors:2: 2 values, expected the header's 3"),
    "NaN": (b"the 1 2\ncat nan 2\n", "vectors:2: 'nan' is not a finite float32"),
    "binary NaN": (binary_bytes(["the", "cat"], np.array([[1, 2], [3, np.nan]], np.float32)),
                   "vectors:3: the vector of 'cat' is not finite"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_vector_file_is_one_error_line_before_the_model_loads(conllu_splits, tmp_path, capsys, case):  # noqa: F811
    content, message = MALFORMED[case]
    (tmp_path / "vectors").write_bytes(content)
    train, _, test = conllu_splits
    args = ["--options", str(tmp_path / "missing.json"), "--weights", str(tmp_path / "missing.hdf5"), "--train", train,
            "--test", test, "--static", str(tmp_path / "vectors"), "--output", str(tmp_path / "out"), *FAST]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / message}"]


@pytest.mark.parametrize(
    "args, biLM, message",
    [
        (["--static", "V", "--control", "random_init"], True, "--static is probed beside the model, not its control"),
        (["--static", "V", "--static", "V"], True, "--static names a file twice"),
        (["--static", "V"], False, "give one model: --workdir, --options with --weights, or --manylangs"),  # No static-only probe.
        (["--static", "missing.txt"], True, "No such file or directory"),
    ],
    ids=["control", "twice", "no-biLM", "missing"],
)
def test_bad_static_flags_are_one_error_line(bilm_files, conllu_splits, tmp_path, capsys, args, biLM, message):  # noqa: F811
    text, _ = write_both_formats(tmp_path)
    train, _, test = conllu_splits
    model = ["--options", bilm_files[0], "--weights", bilm_files[1]] if biLM else []
    args = [text if arg == "V" else arg for arg in args]
    assert main([*model, "--train", train, "--test", test, *args, "--output", str(tmp_path / "out"), *FAST]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
