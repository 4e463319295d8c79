"""docs/coming_from_allennlp.md as documentation that runs: each elmo-jax block of the page as
written (Python blocks with `options_file`/`weight_file` given, commands in a directory holding
the files they name), on a small random biLM in bilm-tf files (tests/allennlp_fixtures.py).

The "play" example is checked for its mechanics only: one vector per occurrence, computed in its
sentence, and the similarities within and across the senses computed and reported (by the code
and by `python -m elmo_jax.neighbors`); a random biLM does not separate the senses.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from elmo_jax.elmo import batch_to_ids
from elmo_jax.interop.bilm_hdf5 import export_checkpoint
from tests.allennlp_fixtures import ElmoFiles, write_elmo_files
from tests.doc_blocks import code_blocks
from tests.reference.bilm_numpy import ReferenceBiLM
from tests.training.helpers import make_checkpoint_workdir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "coming_from_allennlp.md")
RTOL, ATOL = 1e-5, 1e-6


def python_blocks(library: str) -> list[str]:
    """The page's Python blocks that import from `library` ('allennlp' or 'elmo_jax'), in page order."""
    return [block for block in code_blocks(DOC) if re.search(rf"^from {library}\b", block, re.MULTILINE)]


def commands() -> list[list[str]]:
    """The commands of the page's bash blocks, each as its argv (continuation lines joined)."""
    return [shlex.split(line) for block in code_blocks(DOC, "bash") for line in block.replace("\\\n", " ").splitlines()]


def run_block(code: str, files: ElmoFiles) -> dict:
    """Runs one block of the page as written; its namespace, with what it printed under 'stdout'."""
    namespace: dict = {"__name__": "coming_from_allennlp", "options_file": files.options_file,
                       "weight_file": files.weight_file}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, DOC, "exec", dont_inherit=True), namespace)
    return {**namespace, "stdout": printed.getvalue()}


def run_command(argv: list[str], directory) -> subprocess.CompletedProcess:
    """A command of the page as a user types it, in `directory`: `python` is this interpreter and
    `elmo-TOOL` its module, `python -m elmo_jax.cli.TOOL`."""
    if argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    elif argv[0].startswith("elmo-"):
        argv = [sys.executable, "-m", f"elmo_jax.cli.{argv[0][len('elmo-'):]}", *argv[1:]]
    return subprocess.run(argv, cwd=directory, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def elmo_files(tmp_path_factory) -> ElmoFiles:
    return write_elmo_files(tmp_path_factory.mktemp("elmo"))


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory) -> ElmoFiles:
    """`elmo-export` of a workdir of the demo recipe (20 chars per token, vectors of 256)."""
    directory = tmp_path_factory.mktemp("demo")
    workdir = make_checkpoint_workdir(directory, "demo")
    options_file, weight_file = str(directory / "options.json"), str(directory / "weights.hdf5")
    export_checkpoint(workdir, options_file, weight_file)
    return ElmoFiles(options_file, weight_file, ReferenceBiLM.from_files(options_file, weight_file))


@pytest.fixture(scope="module")
def play_example(elmo_files, tmp_path_factory) -> tuple[dict, object]:
    """(namespace, directory) of the "play" block, run in a directory of its own (it writes play.txt)."""
    directory = tmp_path_factory.mktemp("play")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        return run_block(python_blocks("elmo_jax")[2], elmo_files), directory


def test_allennlps_snippets_and_their_elmo_jax_forms_differ_only_in_imports_and_init_apply():
    theirs, ours = python_blocks("allennlp"), python_blocks("elmo_jax")
    assert len(theirs) == 2 and len(ours) == 3  # Elmo, ElmoEmbedder; then the "play" example.
    for allennlp, elmo_jax in zip(theirs, ours):
        differing = set(allennlp.splitlines()) ^ set(elmo_jax.splitlines())
        for line in differing:
            assert re.match(r"(from|import) |#|variables = elmo\.init\(|embeddings = elmo(\.apply)?\(", line), line


# The demo's random weights, N(0, 0.5), drive its 256-cell LSTMs to activations of tens, where
# float32's rounding grows to 1e-3 of the float64 reference.
@pytest.mark.parametrize("files, rtol, atol", [("elmo_files", RTOL, ATOL), ("demo_files", 1e-3, 2e-3)])
def test_elmo_snippet_gives_allennlps_dict(files, rtol, atol, request):
    """On bilm-tf's 50 chars per token and on the demo recipe's 20: AllenNLP's 50-wide ids give the
    numbers of the biLM's own width."""
    files = request.getfixturevalue(files)
    namespace = run_block(python_blocks("elmo_jax")[0], files)
    embeddings, sentences, elmo = namespace["embeddings"], namespace["sentences"], namespace["elmo"]
    assert len(embeddings["elmo_representations"]) == 2
    np.testing.assert_array_equal(embeddings["mask"], [[True, True, True], [True, True, False]])
    own_width = elmo.apply(namespace["variables"], batch_to_ids(sentences, elmo.max_chars))
    layers = files.reference.embed_batches(sentences, 2, stateful=False)
    for representation, want in zip(embeddings["elmo_representations"], own_width["elmo_representations"]):
        assert representation.shape == (2, 3, 2 * files.reference.proj)
        np.testing.assert_array_equal(representation, want)
        for row, tokens in enumerate(sentences):  # The initial mix: the layers' mean, gamma 1.
            np.testing.assert_allclose(representation[row, : len(tokens)], layers[row].mean(axis=0), rtol, atol)
        np.testing.assert_array_equal(representation[1, 2], 0.0)


def test_embedder_snippet_gives_allennlps_arrays(elmo_files):
    namespace = run_block(python_blocks("elmo_jax")[1], elmo_files)
    activations, mask, vectors = namespace["activations"], namespace["mask"], namespace["vectors"]
    sentences = namespace["sentences"]
    assert activations.shape == (2, 3, 3, 32) and vectors.shape == (3, 6, 32)
    np.testing.assert_array_equal(mask, [[True, True, True], [True, True, False]])
    # Stateful, as AllenNLP: embed_sentence continues row 0 of the batch before it.
    want = elmo_files.reference.embed_batches([*sentences, ["I", "ate", "an", "apple", "for", "breakfast"]], 2)
    for row, tokens in enumerate(sentences):
        np.testing.assert_allclose(activations[row, :, : len(tokens)], want[row], RTOL, ATOL)
    np.testing.assert_allclose(vectors, want[2], RTOL, ATOL)


def test_embed_command_of_the_page_writes_every_layer(elmo_files, tmp_path):
    (command,) = [argv for argv in commands() if argv[0] == "elmo-embed"]
    shutil.copy(elmo_files.options_file, tmp_path / "options.json")
    shutil.copy(elmo_files.weight_file, tmp_path / "weights.hdf5")
    (tmp_path / "sentences.txt").write_text("First sentence .\nAnother .\n", encoding="utf-8")
    result = run_command(command, tmp_path)
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "elmo.hdf5", "r") as f:
        assert f["0"].shape == (3, 3, 32) and f["1"].shape == (3, 2, 32)


def test_play_vectors_are_one_per_occurrence_in_its_sentence(play_example, elmo_files):
    namespace, _ = play_example
    embedder, sentences = namespace["embedder"], namespace["GAME"] + namespace["STAGE"]
    vectors = namespace["play_vectors"](embedder, sentences)
    assert vectors.shape == (6, 32)
    for sentence, vector in zip(sentences, vectors):
        tokens = sentence.split()
        want = elmo_files.reference.embed_batches([tokens], 1, stateful=False)[0][2, tokens.index("play")]
        np.testing.assert_allclose(vector, want, RTOL, ATOL)
    assert min(np.abs(a - b).max() for i, a in enumerate(vectors) for b in vectors[i + 1 :]) > 1e-3  # In context.
    token_vectors = namespace["play_vectors"](embedder, sentences, layer=0)  # Context-free: all alike.
    np.testing.assert_allclose(token_vectors, np.broadcast_to(token_vectors[0], token_vectors.shape), RTOL, ATOL)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([[x @ y / np.linalg.norm(x) / np.linalg.norm(y) for y in b] for x in a])


def test_play_similarities_within_and_across_senses_are_computed_and_reported(play_example):
    namespace, directory = play_example
    embedder = namespace["embedder"]
    game = namespace["play_vectors"](embedder, namespace["GAME"])
    stage = namespace["play_vectors"](embedder, namespace["STAGE"])
    pairs = [(0, 1), (0, 2), (1, 2)]
    within = np.mean([cosines(v, v)[i, j] for v in (game, stage) for i, j in pairs])
    across = cosines(game, stage).mean()
    np.testing.assert_allclose([namespace["within"], namespace["across"]], [within, across], rtol=1e-5)
    assert namespace["stdout"] == f"'play', layer -1: within a sense {within:.3f}, across senses {across:.3f}\n"
    with contextlib.redirect_stdout(io.StringIO()):
        np.testing.assert_allclose(namespace["play_senses"](embedder, 0), [1.0, 1.0], rtol=1e-5)
    corpus = (directory / "play.txt").read_text(encoding="utf-8").splitlines()
    assert corpus == namespace["GAME"] + namespace["STAGE"]


def test_neighbors_command_of_the_page_reports_each_play_by_similarity(play_example, elmo_files):
    namespace, directory = play_example
    (command,) = [argv for argv in commands() if argv[:3] == ["python", "-m", "elmo_jax.neighbors"]]
    shutil.copy(elmo_files.options_file, directory / "options.json")
    shutil.copy(elmo_files.weight_file, directory / "weights.hdf5")
    result = run_command(command, directory)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "query: chico ruiz made a spectacular [[play]] on the grounder"
    hits = [re.fullmatch(r"  (-?\d\.\d{4})  play\.txt:(\d)  (.*)", line) for line in lines[2:7]]
    assert all(hits), lines
    sentences = namespace["GAME"] + namespace["STAGE"]
    vectors = namespace["play_vectors"](namespace["embedder"], sentences)
    want = cosines(vectors[:1], vectors)[0]
    assert sorted(int(hit[2]) for hit in hits) == [2, 3, 4, 5, 6]  # Every other occurrence, the query's left out.
    for hit in hits:
        line = int(hit[2])
        assert hit[3] == sentences[line - 1].replace(" play ", " [[play]] ")
        assert float(hit[1]) == pytest.approx(want[line - 1], abs=2e-4)
    assert [float(hit[1]) for hit in hits] == sorted((float(hit[1]) for hit in hits), reverse=True)
