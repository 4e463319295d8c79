"""Probe inputs the probes cannot use, end to end: `elmo-probe` and train.py's `config.eval.probe`
refuse them in one `error:` line and exit 1 before any work (the model loaded, a training step),
where they failed after it or wrote untrained probes with exit 0."""

from __future__ import annotations

import os

import pytest

from elmo_jax.cli import probe as probe_cli
from tests.data.coarsewsd_helpers import write_made_up_dataset
from tests.data.wic_helpers import made_up_pairs, write_split
from tests.entry_points import run_script
from tests.probing.helpers import bilm_files, random_sentences, write_conllu  # noqa: F401 (fixture)


def _lower_cased_tags(path, n: int = 5) -> str:
    """A CoNLL-U file whose UPOS tags are spelled in lower case: no label of the training files."""
    return write_conllu(path, [[(word, tag.lower()) for word, tag in s] for s in random_sentences(n, seed=1)])


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.fixture
def files(tmp_path):
    """{train, test}: CoNLL-U files of 40 and 10 random sentences."""
    return {"train": write_conllu(tmp_path / "train.conllu", random_sentences(40, seed=0)),
            "test": write_conllu(tmp_path / "test.conllu", random_sentences(10, seed=2))}


@pytest.fixture
def no_model(monkeypatch):
    """elmo-probe fails the test if it loads the model."""
    def load(*args):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(probe_cli, "bilm_from_files", load)


def _elmo_probe(bilm_files, **flags) -> list[str]:  # noqa: F811
    args = ["--options", bilm_files[0], "--weights", bilm_files[1], "--no_progress"]
    return [*args, *(a for name, value in flags.items() for a in (f"--{name}", value))]


@pytest.mark.parametrize("output", ["train", "file", "under_file"])
def test_elmo_probe_refuses_an_output_that_is_not_a_directory_before_loading_the_model(
    bilm_files, files, tmp_path, capsys, no_model, output  # noqa: F811
):
    """--output is a directory whose results of the task are replaced: an input, or a file in its
    place, failed after all the work naming a temporary."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    path = {"train": files["train"], "file": str(notes), "under_file": str(notes / "out")}[output]
    expected = (f"error: --output {path} is --train {path}: refusing to overwrite an input" if output == "train"
                else f"error: --output {path}: {notes} is not a directory (the results go into one)")
    assert probe_cli.main(_elmo_probe(bilm_files, **files, output=path)) == 1
    assert capsys.readouterr().err.splitlines() == [expected]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "test.conllu", "train.conllu"]
    assert notes.read_text() == "mine"


def test_elmo_probe_refuses_a_result_file_in_output_that_is_not_one_before_loading_the_model(
    bilm_files, files, tmp_path, capsys, no_model  # noqa: F811
):
    """The figure draws the task's other results in --output: one cut short failed after the work."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "probe_upos_random_init.json").write_text('{"layers": [0.5')
    assert probe_cli.main(_elmo_probe(bilm_files, **files, output=str(out))) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {out / 'probe_upos_random_init.json'}: not a probe result"), err
    assert [p.name for p in out.iterdir()] == ["probe_upos_random_init.json"]


def test_elmo_probe_refuses_dev_labels_none_of_which_training_has(bilm_files, files, tmp_path, capsys):  # noqa: F811
    """Every layer scored below the majority baseline with exit 0: the probes were never trained."""
    dev = _lower_cased_tags(tmp_path / "dev.conllu")
    out = tmp_path / "out"
    assert probe_cli.main(_elmo_probe(bilm_files, **files, dev=dev, output=str(out))) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {dev}: no dev token has a label of the training tokens (dev: adj, adp, det, noun, num, ... "
        "(7 labels); training: ADJ, ADP, DET, NOUN, NUM, ... (7 labels))"
    ]
    assert not out.exists()


def _empty_test_split(root) -> tuple[str, str]:
    """(CoarseWSD-20's directory of made-up words, its word bank's emptied test.data.txt and test.gold.txt)."""
    data = write_made_up_dataset(str(root))
    path = os.path.join(data, "bank", "test.data.txt")
    for name in (path, os.path.join(data, "bank", "test.gold.txt")):
        open(name, "w").close()
    return data, path


@pytest.mark.parametrize("fault", ["empty_test", "superscript_two", "arabic_indic_one"])
def test_elmo_probe_refuses_coarsewsd_files_the_probes_cannot_use_before_loading_the_model(
    bilm_files, tmp_path, capsys, no_model, fault  # noqa: F811
):
    """An empty test split embedded and trained every probe, then failed in macro_f1 naming no file;
    a position written with a digit other than ASCII's failed naming no line ('²') or was read as
    the digit's value ('١', Arabic-Indic one: int() takes it for 1)."""
    if fault == "empty_test":
        data, path = _empty_test_split(tmp_path / "data")
        expected = f"error: {path}: no sentences (an empty file)"
    else:
        data = write_made_up_dataset(str(tmp_path / "data"))
        path = os.path.join(data, "bass", "train.data.txt")
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        digit = "\u00b2" if fault == "superscript_two" else "\u0661"
        _, tab, sentence = lines[6].partition("\t")
        lines[6] = f"{digit}{tab}{sentence}"
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(lines)
        expected = f"error: {path}:7: the position '{digit}' is not a non-negative integer (ASCII digits)"
    out = tmp_path / "out"
    assert probe_cli.main(_elmo_probe(bilm_files, task="wsd", data=data, output=str(out))) == 1
    assert capsys.readouterr().err.splitlines() == [expected]
    assert not out.exists()


@pytest.mark.parametrize("fault", ["dev_labels", "long_index"])
def test_elmo_probe_refuses_wic_files_the_probes_cannot_use_before_loading_the_model(
    bilm_files, tmp_path, capsys, no_model, fault  # noqa: F811
):
    """Dev pairs none of whose labels the training pairs have stopped the probes untrained at epoch
    0 with exit 0; an index of over 4,300 digits failed in int() naming no file."""
    lines, gold = made_up_pairs(40, seed=0)
    data = str(tmp_path / "data")
    write_split(data, "train", [line for line, label in zip(lines, gold) if label == "T"], ["T"] * gold.count("T"))
    write_split(data, "test", lines[:10], gold[:10])
    dev = write_split(data, "dev", [line for line, label in zip(lines, gold) if label == "F"], ["F"] * gold.count("F"))
    expected = f"error: {dev}: no dev token has a label of the training tokens (dev: F; training: T)"
    if fault == "long_index":
        word, pos, _, *sentences = lines[3].split("\t")
        test = write_split(data, "test", [*lines[:3], "\t".join([word, pos, f"0-{'9' * 4301}", *sentences])], gold[:4])
        expected = f"error: {test}:4: index of 4301 digits is past sentence 2's {len(sentences[1].split())} tokens"
    out = tmp_path / "out"
    assert probe_cli.main(_elmo_probe(bilm_files, task="wic", data=data, output=str(out))) == 1
    assert capsys.readouterr().err.splitlines() == [expected]
    assert not out.exists()


@pytest.mark.parametrize("fault", ["one_sentence", "dev_labels", "wsd_empty_test"])
def test_train_py_refuses_probe_files_the_probes_cannot_use_before_creating_the_workdir(files, tmp_path, fault):
    """One training sentence and no dev file (no tenth to hold out), dev labels none of which
    training has, or a word of `wsd_data` without test sentences: the run failed after training and
    its final evaluation, probed untrained, or failed at its first probe naming no file."""
    if fault == "one_sentence":
        train = write_conllu(tmp_path / "one.conllu", random_sentences(1, seed=0))
        flags, expected = [f"--config.eval.probe.train_file={train}"], f"error: {train}: 1 training sentence(s); "
    elif fault == "wsd_empty_test":
        data, path = _empty_test_split(tmp_path / "senses")
        flags = [f"--config.eval.probe.train_file={files['train']}", f"--config.eval.probe.wsd_data={data}"]
        expected = f"error: {path}: no sentences (an empty file)"
    else:
        dev = _lower_cased_tags(tmp_path / "dev.conllu")
        flags = [f"--config.eval.probe.train_file={files['train']}", f"--config.eval.probe.dev_file={dev}"]
        expected = f"error: {dev}: no dev token has a label of the training tokens"
    workdir = tmp_path / "run"
    done = run_script(
        "train.py", "--config=configs/tests/tiny.py", "--config.eval.probe.task=upos", *flags,
        f"--config.eval.probe.test_file={files['test']}", f"--workdir={workdir}",
        compile_cache=str(tmp_path / "cache"),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and errors[0].startswith(expected), done.stderr[-2000:]
    assert not workdir.exists()
