"""`elmo-vectors` in-process on toy vector files and toy sets: the table, the example, the JSON,
the defaults (gensim's sets) and one-line errors."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest

from elmo_jax.cli import vectors as vectors_cli
from elmo_jax.static import intrinsic
from elmo_jax.static.lookup import StaticVectors
from elmo_jax.static.vector_files import write_text

WORDS = ["man", "woman", "king", "queen", "boy", "girl", "Paris", "France", "Rome", "Italy", "apple", "pear"]
ANALOGIES = ": family\nman woman king queen\nboy girl king queen\nman woman boy girl\n: capitals\n" \
            "Paris France Rome Italy\nParis France Berlin Germany\n"
SIMILARITY = "# toy\nman\twoman\t8\nking\tqueen\t9\napple\tpear\t7\nman\tapple\t1\nking\tberlin\t2\n"


@pytest.fixture
def toy(tmp_path) -> dict[str, str]:
    """Two vector files (one without a header, GloVe's), an analogy file and a similarity file."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(WORDS), 16))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[3] = vectors[2] - vectors[0] + vectors[1]  # queen = king - man + woman: 3CosAdd's target exactly.
    vectors[5] = vectors[4] - vectors[0] + vectors[1]  # girl = boy - man + woman
    vectors[9] = vectors[8] - vectors[6] + vectors[7]  # Italy = Rome - Paris + France
    paths = {"a": str(tmp_path / "a.txt"), "b": str(tmp_path / "b.txt")}
    write_text(paths["a"], WORDS, vectors)
    write_text(paths["b"], WORDS[::-1], rng.standard_normal((len(WORDS), 8)), header=False)
    for name, text in (("questions", ANALOGIES), ("pairs", SIMILARITY)):
        paths[name] = str(tmp_path / f"{name}.txt")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write(text)
    return paths


def _run(capsys, *args: str) -> tuple[int, str, str]:
    status = vectors_cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_table_the_example_and_the_json(toy, tmp_path, capsys):
    output = str(tmp_path / "out" / "results.json")
    status, out, err = _run(capsys, "--vectors", f"{toy['a']},{toy['b']}", "--analogies", toy["questions"],
                            "--similarity", toy["pairs"], "--output", output)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == ("| vectors | words | questions.txt 3CosAdd | questions.txt 3CosMul | questions.txt coverage "
                        "| pairs.txt rho | pairs.txt coverage |")
    assert lines[1] == "|" + " --- |" * 7
    results = json.load(open(output))
    first = results["vectors"][0]
    analogies = first["analogies"]
    assert (analogies["questions"], analogies["answered"], analogies["unknown"]) == (5, 4, 1)
    assert analogies["accuracy"]["3CosAdd"] == 1.0  # By construction; Berlin and Germany are unknown.
    row = (f"| a.txt | 12 | {analogies['accuracy']['3CosAdd']:.3f} | {analogies['accuracy']['3CosMul']:.3f} | "
           f"0.800 (4/5) | {first['similarity']['pairs.txt']['spearman']:.3f} | 0.800 (4/5) |")
    assert lines[2] == row
    assert re.fullmatch(r"\| b\.txt \| 12 \| [\d.]+ \| [\d.]+ \| 0\.800 \(4/5\) \| -?[\d.]+ \| 0\.800 \(4/5\) \|", lines[3])
    assert "man : woman :: king : ? (3CosAdd, cosine to b - a + c)" in lines
    (example,) = [line for line in lines if line.startswith("  a.txt: ")]
    assert example.startswith("  a.txt: queen 1.000, ") and example.count(",") == 4
    assert lines[-1] == f"wrote {output}"
    # The JSON holds what the library computes, per section too.
    toy_a = StaticVectors.read(toy["a"])
    expected = intrinsic.evaluate_analogies(toy_a, intrinsic.read_analogies(toy["questions"])).to_json()
    assert {k: v for k, v in analogies.items() if k != "seconds"} == expected
    assert [s["section"] for s in analogies["sections"]] == ["family", "capitals"]
    assert analogies["sections"][1]["answered"] == 1 and analogies["sections"][1]["questions"] == 2
    similarity = intrinsic.evaluate_similarity(toy_a, intrinsic.read_similarity(toy["pairs"]))
    assert first["similarity"]["pairs.txt"]["spearman"] == pytest.approx(similarity.rho)
    assert first["similarity"]["pairs.txt"]["unknown"] == 1
    assert first["example"][0]["word"] == "queen" and len(first["example"]) == 5
    assert results["restrict"] == 30_000 and results["example"] == ["man", "woman", "king"]
    assert results["sets"]["analogies"] == {"name": "questions.txt", "path": toy["questions"]}
    assert [v["name"] for v in results["vectors"]] == ["a.txt", "b.txt"] and results["vectors"][1]["dim"] == 8


def test_an_example_word_a_file_lacks_is_said_and_not_an_error(toy, capsys):
    status, out, err = _run(capsys, "--vectors", toy["a"], "--similarity", toy["pairs"], "--example", "man woman emperor")
    assert status == 0, err
    assert "  a.txt: 'emperor' not among the first 12 words" in out.splitlines()
    assert "3CosAdd" not in out.splitlines()[0]  # Only --similarity given: no analogies.


def test_restrict_cuts_the_rows_answered_from(toy, tmp_path, capsys):
    output = str(tmp_path / "r.json")
    status, _, err = _run(capsys, "--vectors", toy["a"], "--analogies", toy["questions"], "--restrict", "4",
                          "--example", "", "--output", output)
    assert status == 0, err
    results = json.load(open(output))
    assert results["vectors"][0]["analogies"]["restrict"] == 4 and results["vectors"][0]["analogies"]["answered"] == 1
    assert "example" not in results["vectors"][0] and results["example"] is None


@pytest.mark.skipif(importlib.util.find_spec("gensim") is None, reason="gensim (the [static] extra) is not installed")
def test_without_sets_gensims_three_are_read(toy, capsys):
    status, out, err = _run(capsys, "--vectors", toy["a"])
    assert status == 0, err
    header = out.splitlines()[0]
    assert "google 3CosAdd" in header and "wordsim353 rho" in header and "simlex999 rho" in header
    # 9 questions of the file's words (man woman king queen, Paris France Rome Italy twice, ...), all by construction;
    # one SimLex pair (man woman): no rho.
    assert "| a.txt | 12 | 1.000 | 1.000 | 0.000 (9/19,544) | 1.000 | 0.006 (2/353) | n/a | 0.001 (1/999) |" in out


def _written_files(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("args, message", [
    (["--vectors", "/nonexistent/v.txt"], r"--vectors /nonexistent/v\.txt: no such file"),
    (["--vectors", "{a}", "--analogies", "/nonexistent/q.txt"], r"/nonexistent/q\.txt: no such file \(or one of google\)"),
    (["--vectors", "{a}", "--similarity", "men"], r"men: no such file \(or one of wordsim353, simlex999\)"),
    (["--vectors", "{a}", "--analogies", "{bad_questions}"], r"{bad_questions}:2: expected 4 words"),
    (["--vectors", "{a}", "--similarity", "{bad_pairs}"], r"{bad_pairs}:1: the score 'x' is not a number"),
    (["--vectors", "{bad_vectors}", "--similarity", "{pairs}"], r"{bad_vectors}:3: 2 values, expected the header.s 3"),
    (["--vectors", "{a}", "--similarity", "{pairs}", "--example", "man woman"], "--example takes three words"),
    (["--vectors", "{a}", "--restrict", "0"], "--restrict must be >= 1"),
    (["--vectors", "{a}", "--similarity", "{pairs}", "--output", "{a}"], "refusing to overwrite an input"),
    (["--vectors", "{a}", "--analogies", "{questions}", "--output", "{questions}"], "refusing to overwrite an input"),
    (["--vectors", "{a}", "--similarity", "{pairs}", "--output", "{tmp}"], "is not a file name"),
    (["--vectors", "{a}", "--similarity", "{pairs},{pairs}"], "--similarity names a set twice"),
    (["--similarity", "{pairs}"], "the following arguments are required: --vectors"),
])
def test_one_line_errors(toy, tmp_path, capsys, args, message):
    (tmp_path / "bad_questions.txt").write_text(": s\na b c\n")
    (tmp_path / "bad_pairs.txt").write_text("a b x\n")
    (tmp_path / "bad_vectors.txt").write_text("2 3\nman 1 2 3\nwoman 1 2\n")
    paths = {**toy, **{name: str(tmp_path / f"{name}.txt") for name in ("bad_questions", "bad_pairs", "bad_vectors")},
             "tmp": str(tmp_path)}
    before = _written_files(tmp_path)
    status, out, err = _run(capsys, *(arg.format(**paths) for arg in args))
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and re.match(rf"error: .*{message.format(**paths)}", err), err
    assert _written_files(tmp_path) == before


def test_two_files_of_one_name_are_told_apart_by_their_paths(toy, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    copy = str(other / "a.txt")
    with open(toy["a"], "rb") as f, open(copy, "wb") as g:
        g.write(f.read())
    status, out, err = _run(capsys, "--vectors", f"{toy['a']},{copy}", "--similarity", toy["pairs"], "--example", "")
    assert status == 0, err
    assert out.splitlines()[2].startswith(f"| {toy['a']} |") and out.splitlines()[3].startswith(f"| {copy} |")


def test_help_names_the_flags(capsys):
    status, out, _ = _run(capsys, "--help")
    assert status == 0 and "elmo-vectors" in out and "--restrict" in out and "--similarity" in out
