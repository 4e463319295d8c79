"""A workdir whose config.json no longer fits its checkpoint (edited by hand, or copied from another
run): every reader refuses it in one line naming the key or the array, never a Flax traceback nor
another model's perplexity. The checkpoint's model record catches keys that change no shape."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from elmo_jax.cli.embed import main as embed_main
from elmo_jax.cli.export import main as export_main
from elmo_jax.cli.probe import main as probe_main
from tests.entry_points import run_script
from tests.probing.helpers import random_sentences, write_conllu
from tests.training.helpers import make_checkpoint_workdir

pytestmark = pytest.mark.slow

NORM_ERROR = "config.json does not fit checkpoint 2: it sets model.transformer.norm='post', the checkpoint was trained with 'pre'"
SHAPE_ERROR = "config.json does not fit checkpoint 2: "


@pytest.fixture(scope="module")
def transformer_workdir(tmp_path_factory):
    """A pre-norm Transformer's workdir whose config.json says 'post'."""
    workdir = make_checkpoint_workdir(tmp_path_factory.mktemp("norm"), **{"model.contextualizer": "transformer"})
    _edit(workdir, lambda model: model["transformer"].update(norm="post"))
    return workdir


@pytest.fixture(scope="module")
def wider_workdir(tmp_path_factory):
    """An LSTM's workdir whose config.json asks for wider cells than its checkpoint, one written
    before checkpoints recorded their model: the params' shapes tell."""
    workdir = make_checkpoint_workdir(tmp_path_factory.mktemp("dim"), recorded=False)
    _edit(workdir, lambda model: model["lstm"].update(dim=24))
    return workdir


def _edit(workdir: str, change) -> None:
    path = os.path.join(workdir, "config.json")
    with open(path) as f:
        config = json.load(f)
    change(config["model"])
    with open(path, "w") as f:
        json.dump(config, f)


def _one_error(stderr: str, text: str) -> None:
    assert "Traceback" not in stderr, stderr[-2000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and text in errors[0], stderr[-2000:]


@pytest.mark.parametrize("which,text", [("transformer", NORM_ERROR), ("wider", SHAPE_ERROR + "lstm_0.B: checkpoint")])
def test_evaluate_refuses(which, text, transformer_workdir, wider_workdir, tmp_path):
    workdir = {"transformer": transformer_workdir, "wider": wider_workdir}[which]
    eval_file = os.path.join(workdir, "..", "corpus", "part-0.txt")
    done = run_script("evaluate.py", f"--workdir={workdir}", f"--eval_files={eval_file}",
                      compile_cache=str(tmp_path / "cache"))
    assert done.returncode == 1
    _one_error(done.stderr, text)
    assert not [name for name in os.listdir(workdir) if name.startswith("eval_")]


def test_embed_export_and_probe_refuse(transformer_workdir, wider_workdir, tmp_path, capsys):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("the cat sat\n")
    out = tmp_path / "out"
    assert embed_main(["--workdir", transformer_workdir, "--input", str(sentences), "--output", str(out / "e.hdf5")]) == 1
    _one_error(capsys.readouterr().err, NORM_ERROR)
    # bilm-tf's files hold LSTM biLMs only.
    assert export_main(["--workdir", wider_workdir, "--options", str(out / "o.json"),
                        "--weights", str(out / "w.hdf5")]) == 1
    _one_error(capsys.readouterr().err, SHAPE_ERROR + "lstm_0.B: checkpoint (2, 64) float32")
    train = write_conllu(tmp_path / "train.conllu", random_sentences(20, seed=0))
    test = write_conllu(tmp_path / "test.conllu", random_sentences(5, seed=1))
    assert probe_main(["--workdir", transformer_workdir, "--train", train, "--test", test,
                       "--output", str(out / "probe")]) == 1
    _one_error(capsys.readouterr().err, NORM_ERROR)
    assert not out.exists()


def test_a_resumed_run_refuses_a_changed_key_that_changes_no_shape(tmp_path):
    """Training continues the model it trained: the same check as the readers', before any step."""
    from elmo_jax.workdir.checkpoints import CheckpointError
    from elmo_jax.training.loop import train_and_evaluate
    from elmo_jax.workdir.saved_config import saved_config

    workdir = make_checkpoint_workdir(tmp_path, **{"model.contextualizer": "transformer", "train.num_steps": 3})
    before = open(os.path.join(workdir, "config.json")).read()
    config = saved_config(workdir)
    config.model.transformer.positions = "none"  # No params either way.
    with pytest.raises(CheckpointError, match="model.transformer.positions: checkpoint 'sinusoidal', configured 'none'"):
        train_and_evaluate(config, workdir)
    assert open(os.path.join(workdir, "config.json")).read() == before
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2"]
    shutil.rmtree(workdir)
