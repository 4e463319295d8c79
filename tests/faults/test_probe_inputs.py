"""Probe inputs the probes cannot use, end to end: `elmo-probe` and train.py's `config.eval.probe`
refuse them in one `error:` line and exit 1 before any work (the model loaded, a training step),
where they failed after it or wrote untrained probes with exit 0."""

from __future__ import annotations

import pytest

from elmo_jax.cli import probe as probe_cli
from tests.probing.helpers import bilm_files, random_sentences, write_conllu  # noqa: F401 (fixture)


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
