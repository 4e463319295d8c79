"""Bad config values through the entry points: one `error:` line naming the key, exit status 1, and
nothing written, before any work (the values ran, hung or failed late before the schema)."""

import pytest

from elmo_jax.config import ConfigError
from elmo_jax.config.recipes import recipe_module
from elmo_jax.data import corpus
from elmo_jax.data.sources import DataError
from elmo_jax.training.loop import train_and_evaluate
from tests.entry_points import run_script
from tests.training.helpers import tiny_config, write_corpus

tiny = recipe_module("tests/tiny")

TINY = "--config=configs/tests/tiny.py"


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _assert_one_error_naming(done, text: str) -> None:
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and text in errors[0], done.stderr[-2000:]


@pytest.mark.parametrize(
    "key,value",
    [
        ("train.keep_checkpoints", "0"),  # Trained, then kept no checkpoint.
        ("train.batch_size", "0"),  # Hung after a checkpoint error.
        ("model.lstm.dim", "0"),  # Hung after a checkpoint error.
        ("data.max_chars_per_token", "2"),  # A cryptic numpy error.
        ("train.unroll_steps", "0"),  # Trained 0 steps and exited 0.
        ("eval.batch_size", "0"),  # A traceback after all of training.
    ],
)
def test_train_py_rejects_the_value_before_creating_the_workdir(tmp_path, key, value):
    workdir = tmp_path / "run"
    done = run_script("train.py", TINY, f"--config.{key}={value}", f"--workdir={workdir}",
                      compile_cache=str(tmp_path / "cache"))
    _assert_one_error_naming(done, f"error: config key {key}={value} is out of range (allowed: an integer >= ")
    assert not workdir.exists()


@pytest.mark.parametrize(
    "overrides,key,value",
    [
        (["--config.model.contextualizer=transformer"], "model.transformer.memory_length", "1000000000"),  # 25 s, a
        # NumPy ArrayMemoryError traceback; 30000000: 119 s and 23.5 GB.
        (["--config.model.contextualizer=transformer"], "model.transformer.max_window", "1000000000"),  # No key named.
        (["--config.model.contextualizer=gated_cnn"], "model.gated_cnn.dilation_base", "1000000"),  # An int32
        # OverflowError traceback.
    ],
)
def test_train_py_rejects_sizes_no_row_can_hold_before_creating_the_workdir(tmp_path, overrides, key, value):
    workdir = tmp_path / "run"
    done = run_script("train.py", TINY, *overrides, f"--config.{key}={value}", f"--workdir={workdir}",
                      compile_cache=str(tmp_path / "cache"))
    _assert_one_error_naming(done, f"error: config key {key}={value} is out of range (allowed: an integer in [")
    assert not workdir.exists()


def test_train_py_leaves_an_existing_workdir_untouched(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("mine")
    done = run_script("train.py", TINY, "--config.model.dropout=1.5", f"--workdir={workdir}",
                      compile_cache=str(tmp_path / "cache"))
    _assert_one_error_naming(done, "config key model.dropout=1.5 is out of range (allowed: a number in [0, 1))")
    assert [p.name for p in workdir.iterdir()] == ["notes.txt"]
    assert (workdir / "notes.txt").read_text() == "mine"


def test_evaluate_py_rejects_the_value_before_reading_the_workdir(tmp_path):
    """The workdir holds no trained model ("no config.json"): validation speaks first."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("mine")
    done = run_script("evaluate.py", TINY, "--config.model.softmax.chunk_size=0", f"--workdir={workdir}",
                      compile_cache=str(tmp_path / "cache"))
    _assert_one_error_naming(done, "error: config key model.softmax.chunk_size=0 is out of range")
    assert [p.name for p in workdir.iterdir()] == ["notes.txt"]


def test_train_py_rejects_a_vocabulary_too_small_to_train_on(tmp_path):
    files = write_corpus(str(tmp_path / "corpus"), 20, seed=0)
    workdir = tmp_path / "run"
    done = run_script(
        "train.py", TINY, "--config.data.source=text", f"--config.data.train_files={files}",
        f"--config.data.eval_files={files}", "--config.data.vocab_min_count=1000", f"--workdir={workdir}",
        compile_cache=str(tmp_path / "cache"),
    )
    _assert_one_error_naming(done, "data.vocab_min_count=1000, data.vocab_max_size=0 has 3 words")
    assert "at least 8" in done.stderr
    assert not workdir.exists()


def test_a_small_vocabulary_file_is_an_error_and_nothing_is_saved(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("<S>\n</S>\n<UNK>\nthe\n")
    data = tiny.get_config().data
    data.vocab_file = str(vocab_file)
    workdir = tmp_path / "run"
    workdir.mkdir()
    with pytest.raises(DataError, match=r"data.vocab_file='.*vocab.txt' has 4 words, .* at least 8$"):
        corpus.load_or_build_vocab(data, str(workdir))
    assert list(workdir.iterdir()) == []
    vocab_file.write_text("<S>\n</S>\n<UNK>\n" + "".join(f"w{i}\n" for i in range(5)))
    assert len(corpus.load_or_build_vocab(data, str(workdir))) == 8


def test_train_py_names_the_sampled_softmax_too_wide_for_a_small_corpus(tmp_path):
    """The demo's 1024 candidates on a corpus of 16 words: the key and the way out, in one line."""
    files = write_corpus(str(tmp_path / "corpus"), 20, seed=0)
    workdir = tmp_path / "run"
    done = run_script(
        "train.py", "--config=configs/demo.py", "--config.data.source=text", f"--config.data.train_files={files}",
        f"--config.data.eval_files={files}", f"--workdir={workdir}", compile_cache=str(tmp_path / "cache"),
    )
    _assert_one_error_naming(done, "config key model.softmax.n_negative_samples=1024 is out of range (allowed: an "
                                   "integer below the 19 words of the vocabulary built with data.vocab_min_count=1")
    assert "--config.model.softmax.sampled=False" in _error_lines(done.stderr)[0]
    assert not workdir.exists()


def test_sampled_softmax_too_wide_for_a_vocabulary_file_is_named_before_the_data_is_read(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("<S>\n</S>\n<UNK>\n" + "".join(f"w{i}\n" for i in range(9)))
    config = tiny_config(**{"data.source": "text", "data.vocab_file": str(vocab_file),
                            "data.train_files": str(tmp_path / "missing" / "*.txt"),
                            "data.eval_files": str(tmp_path / "missing" / "*.txt")})
    with pytest.raises(ConfigError, match=r"^config key model.softmax.n_negative_samples=16 is out of range \(allowed: "
                                          r"an integer below the 12 words of data.vocab_file='.*vocab.txt'\)"):
        train_and_evaluate(config, str(tmp_path / "run"))
    config.model.softmax.sampled = False  # The way out the error names: past the vocabulary, to the data.
    with pytest.raises(DataError, match="missing"):
        train_and_evaluate(config, str(tmp_path / "run"))
