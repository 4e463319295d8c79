"""Probe inputs the probes cannot use, end to end: `elmo-probe` and train.py's `config.eval.probe`
refuse them in one `error:` line and exit 1 before any work (the model loaded, a training step),
where they failed after it or wrote untrained probes with exit 0."""

from __future__ import annotations

import pytest

from elmo_jax.cli import probe as probe_cli
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


@pytest.mark.parametrize("fault", ["one_sentence", "dev_labels"])
def test_train_py_refuses_probe_files_the_probes_cannot_use_before_creating_the_workdir(files, tmp_path, fault):
    """One training sentence and no dev file (no tenth to hold out), or dev labels none of which
    training has: the run failed after training and its final evaluation, or probed untrained."""
    if fault == "one_sentence":
        train = write_conllu(tmp_path / "one.conllu", random_sentences(1, seed=0))
        flags, expected = [f"--config.eval.probe.train_file={train}"], f"error: {train}: 1 training sentence(s); "
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
