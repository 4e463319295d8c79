"""evaluate.py end to end in subprocesses: a result (the model always from the workdir's config.json),
or one clear error line and a non-zero exit."""

from __future__ import annotations

import json
import os

import pytest

from elmo_jax.cli.export import main as export_main
from tests.entry_points import last_line, run_script
from tests.training.helpers import make_checkpoint_workdir


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(workdir with a step-2 checkpoint, evaluate.py flags matching its config, compilation cache)."""
    root = tmp_path_factory.mktemp("evaluate_script")
    workdir = make_checkpoint_workdir(root)
    files = str(root / "corpus" / "part-*.txt")
    flags = ["--config=configs/tests/tiny.py", "--config.data.source=text", f"--config.data.train_files={files}",
             f"--config.data.eval_files={files}"]
    return workdir, flags, str(root / "jax_cache")


def _evaluate(trained, *args: str) -> dict:
    """evaluate.py's result (eval_files_2.json) with `args` besides --workdir."""
    workdir, _, cache = trained
    done = run_script("evaluate.py", f"--workdir={workdir}", *args, compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "files @ step 2" in done.stdout
    with open(os.path.join(workdir, "eval_files_2.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def with_config(trained):
    """The result of evaluating with the training config given again (the README's command)."""
    return _evaluate(trained, *trained[1])


def test_evaluates_the_latest_checkpoint(with_config):
    assert with_config["step"] == 2 and with_config["tokens"] > 0 and with_config["perplexity"] > 1


def test_without_config_the_workdirs_config_gives_the_same_result(trained, with_config):
    assert _evaluate(trained) == with_config


def test_evaluation_keys_are_overridable(trained, with_config):
    one_file = os.path.join(os.path.dirname(trained[0]), "corpus", "part-0.txt")
    result = _evaluate(trained, *trained[1], f"--config.data.eval_files={one_file}", "--config.eval.batch_size=2")
    with open(one_file) as f:
        assert result["tokens"] == sum(len(line.split()) + 1 for line in f) < with_config["tokens"]


def test_a_stateless_evaluation_is_written_beside_the_stateful_one(trained):
    """--config.eval.stateful=False, without --config (the workdir's config then): the result goes
    to eval_files_stateless_2.json, the same tokens; eval_files_2.json stays the stateful result."""
    workdir, _, cache = trained
    stateful = _evaluate(trained)
    done = run_script("evaluate.py", f"--workdir={workdir}", "--config.eval.stateful=False", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(workdir, "eval_files_stateless_2.json")) as f:
        stateless = json.load(f)
    with open(os.path.join(workdir, "eval_files_2.json")) as f:
        assert json.load(f) == stateful
    assert stateless["tokens"] == stateful["tokens"]
    assert stateless["perplexity"] != stateful["perplexity"]


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no_config", "{empty}: no config.json (is this an elmo-jax training workdir?)"),
        ("other_model", "--config sets model.lstm.use_skip_connections=False, but the model in {workdir} was trained "
                        "with model.lstm.use_skip_connections=True (its config.json): evaluation always builds the "
                        "trained model, drop the override"),
        ("empty_eval_set", "no sentences in {empty_file}"),
        ("training_override", "--config.train.num_steps is a training key, which evaluation does not read: drop "
                              "the override (evaluation reads eval.batch_size, eval.max_tokens, eval.stateful, "
                              "eval.unroll_steps and the data keys of what is evaluated)"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_1(trained, tmp_path, case, expected):
    workdir, flags, cache = trained
    empty, empty_file = str(tmp_path / "empty"), str(tmp_path / "empty.txt")
    os.makedirs(empty)
    open(empty_file, "w").close()
    args = {
        "no_config": [f"--workdir={empty}"],
        "other_model": [f"--workdir={workdir}", "--config.model.lstm.use_skip_connections=False"],
        "empty_eval_set": [f"--workdir={workdir}", f"--eval_files={empty_file}"],
        "training_override": [f"--workdir={workdir}", "--config.train.num_steps=5"],
    }[case]
    done = run_script("evaluate.py", *flags, *args, compile_cache=cache)
    assert done.returncode == 1
    assert last_line(done.stderr) == "error: " + expected.format(empty=empty, workdir=workdir, empty_file=empty_file)
    assert "Traceback" not in done.stderr


def test_a_recipe_of_another_model_is_named_in_the_error(trained):
    """--config=RECIPE of another model than the workdir's: the error names the recipe, which no
    override put there."""
    workdir, _, cache = trained
    recipe = "configs/tests/no_projection.py"
    done = run_script("evaluate.py", f"--workdir={workdir}", f"--config={recipe}", compile_cache=cache)
    assert done.returncode == 1
    assert last_line(done.stderr) == (
        f"error: --config={recipe} sets model.lstm.dim=8, but the model in {workdir} was trained with "
        "model.lstm.dim=16 (its config.json): evaluation always builds the trained model, give no --config "
        "(or the recipe it was trained with)"
    )
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def exported(trained):
    """The workdir's checkpoint exported as bilm-tf/AllenNLP files (options, weights, softmax, vocabulary)."""
    workdir = trained[0]
    out = os.path.join(os.path.dirname(workdir), "exported")
    paths = {name: os.path.join(out, name) for name in ("options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt")}
    assert export_main([
        "--workdir", workdir, "--options", paths["options.json"], "--weights", paths["weights.hdf5"],
        "--softmax_weights", paths["softmax.hdf5"], "--vocab", paths["vocab.txt"],
    ]) == 0
    return [f"--options={paths['options.json']}", f"--weights={paths['weights.hdf5']}",
            f"--softmax_weights={paths['softmax.hdf5']}", f"--vocab={paths['vocab.txt']}"]


def test_exported_files_evaluate_to_the_workdirs_perplexity(trained, exported, tmp_path):
    workdir, flags, cache = trained
    eval_files = os.path.join(os.path.dirname(workdir), "corpus", "part-*.txt")
    output = str(tmp_path / "result.json")
    # The workdir's evaluation settings (eval.batch_size, eval.unroll_steps) apply to both; a
    # training key (data.train_files) has no run to compare with here.
    evaluation_flags = [flag for flag in flags if not flag.startswith("--config.data.train_files=")]
    done = run_script("evaluate.py", *exported, f"--eval_files={eval_files}", f"--output={output}",
                      *evaluation_flags, compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "forward perplexity" in done.stdout
    with open(output) as f:
        from_files = json.load(f)
    done = run_script("evaluate.py", f"--workdir={workdir}", f"--eval_files={eval_files}",
                      f"--output={tmp_path / 'workdir.json'}", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(tmp_path / "workdir.json") as f:
        from_workdir = json.load(f)
    assert from_files["step"] is None and from_files["tokens"] == from_workdir["tokens"]
    for key in ("forward_perplexity", "backward_perplexity", "perplexity", "oov_rate"):
        assert from_files[key] == pytest.approx(from_workdir[key], rel=1e-5), key


@pytest.mark.parametrize(
    "drop, extra, expected",
    [
        ("--vocab", [], "--options needs --vocab (its vocabulary, line i = softmax row i): a bilm-tf/AllenNLP "
                        "model is read from --options, --weights, --softmax_weights and --vocab"),
        (None, ["--workdir=W"], "--workdir and --options name two models: evaluate a training workdir or a "
                               "bilm-tf/AllenNLP model"),
        (None, ["--split=test"], "--split is for --workdir: a bilm-tf/AllenNLP model is evaluated on --eval_files"),
        (None, ["--config=configs/tests/tiny.py", "--config.train.num_steps=2"],
         "--config.train.num_steps is a training key, which evaluation does not read: drop the override (evaluation "
         "reads eval.batch_size, eval.max_tokens, eval.stateful, eval.unroll_steps and the data keys of what is "
         "evaluated)"),
    ],
)
def test_bilm_files_flags_errors_are_one_line(trained, exported, drop, extra, expected):
    _, _, cache = trained
    args = [a for a in exported if drop is None or not a.startswith(drop + "=")]
    done = run_script("evaluate.py", *args, "--eval_files=x.txt", *extra, compile_cache=cache)
    assert done.returncode == 1
    assert last_line(done.stderr) == "error: " + expected
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--split=test"], "--split=test does not apply to data.source='text', which has no splits: "
                           "data.eval_files='{files}' is evaluated"),
        (["--split=valid", "--eval_files={files}"], "--split=valid does not apply beside --eval_files: "
                                                    "the files are evaluated"),
    ],
)
def test_a_split_of_a_text_corpus_is_refused_in_one_line(trained, args, expected):
    """A text corpus has files, not splits: --split=test and --split=valid read the same files."""
    workdir, flags, cache = trained
    files = flags[-1].split("=", 1)[1]
    done = run_script("evaluate.py", f"--workdir={workdir}", *(a.format(files=files) for a in args),
                      compile_cache=cache)
    assert done.returncode == 1
    assert last_line(done.stderr) == "error: " + expected.format(files=files)
    assert "Traceback" not in done.stderr
