"""Analogies and word similarity (elmo_jax/static/intrinsic.py): 3CosAdd and 3CosMul against a
candidate-by-candidate brute force and against gensim, the exclusions, the restricted vocabulary,
the unknown questions, Spearman's rho against scipy, the files' formats and their errors."""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np
import pytest

from elmo_jax.static import intrinsic
from elmo_jax.static.intrinsic import ADD, MUL, METHODS
from elmo_jax.static.lookup import NO_ROW, StaticVectors
from elmo_jax.static.vector_files import write_text

HAVE_GENSIM = importlib.util.find_spec("gensim") is not None
needs_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason="gensim (the [static] extra) is not installed")


def _vectors(tmp_path, words, vectors, name="toy.txt") -> StaticVectors:
    """`words` and `vectors` written as a word2vec text file and read back, as the command reads them."""
    path = str(tmp_path / name)
    write_text(path, words, np.asarray(vectors, np.float32))
    return StaticVectors.read(path)


def _analogies(sections: dict[str, list[str]]) -> intrinsic.AnalogySet:
    """An analogy set of `section -> ["a b c d", ...]`."""
    names, questions, ids = [], [], []
    for i, (name, lines) in enumerate(sections.items()):
        names.append(name)
        questions += [tuple(line.split()) for line in lines]
        ids += [i] * len(lines)
    return intrinsic.AnalogySet("toy", "toy", tuple(names), tuple(questions), np.array(ids, np.int64))


def _brute_force(words, vectors, questions, restrict):
    """Each question's (3CosAdd row, 3CosMul row), None when a word is outside the first `restrict`
    rows: every candidate row scored one at a time in float64, the first best kept."""
    n = min(restrict, len(words))
    first: dict[str, int] = {}
    for i, word in enumerate(words[:n]):
        first.setdefault(word.lower(), i)
    unit = [np.asarray(v, np.float64) / np.linalg.norm(np.asarray(v, np.float64)) for v in vectors[:n]]
    answers = []
    for question in questions:
        rows = [first.get(word.lower()) for word in question]
        if None in rows:
            answers.append(None)
            continue
        a, b, c = (unit[r] for r in rows[:3])
        asked = {word.lower() for word in question[:3]}
        best = {ADD: (-math.inf, None), MUL: (-math.inf, None)}
        for i in range(n):
            if words[i].lower() in asked:
                continue
            cos_a, cos_b, cos_c = (float(unit[i] @ y) for y in (a, b, c))
            scores = {ADD: cos_b - cos_a + cos_c,
                      MUL: (cos_b + 1) / 2 * ((cos_c + 1) / 2) / ((cos_a + 1) / 2 + 0.001)}
            for method, score in scores.items():
                if score > best[method][0]:
                    best[method] = (score, i)
        answers.append((best[ADD][1], best[MUL][1]))
    return answers


def _random_toy(seed: int, n_questions: int = 300):
    """~50 words (two with a second spelling later in the file), random vectors, random questions
    in 3 sections, a few with a word the file lacks."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(46)] + ["W3", "W10", "Cat", "cat"]
    vectors = rng.standard_normal((len(words), 8)).astype(np.float32)
    pool = words + ["W3", "CAT", "absent"]
    picks = rng.integers(0, len(pool), (n_questions, 4))
    lines = [" ".join(pool[j] for j in row) for row in picks]
    return words, vectors, _analogies({"one": lines[:100], "two": lines[100:250], "three": lines[250:]})


@pytest.mark.parametrize("seed, restrict, block", [(0, 30_000, None), (1, 40, None), (2, 30, 7), (3, 50, 1)])
def test_both_methods_answer_as_the_brute_force_does(tmp_path, seed, restrict, block):
    words, vectors, analogies = _random_toy(seed)
    toy = _vectors(tmp_path, words, vectors)
    result = intrinsic.evaluate_analogies(toy, analogies, restrict, block=block)
    expected = _brute_force(words, toy.vectors, analogies.questions, restrict)
    for method, k in ((ADD, 0), (MUL, 1)):
        assert result.answers[method].tolist() == [NO_ROW if e is None else e[k] for e in expected], method
    known = [e is not None for e in expected]
    assert result.answered == sum(known) and result.unknown == len(known) - sum(known) and 0 < sum(known) < len(known)
    for method, k in ((ADD, 0), (MUL, 1)):
        correct = [e is not None and words[e[k]].lower() == q[3].lower() for e, q in zip(expected, analogies.questions)]
        assert result.correct(method) == sum(correct)
        assert result.accuracy(method) == sum(correct) / sum(known)
        for i, section in enumerate(result.sections):
            in_section = analogies.section_ids == i
            assert section.correct[method] == sum(np.array(correct) & in_section)
            assert section.answered == sum(np.array(known) & in_section) and section.questions == sum(in_section)
    assert result.restrict == min(restrict, len(words))
    assert sum(result.correct(m) for m in METHODS) > 0  # Some answers right: the comparison saw correct ones too.


def _unit(*components: float, dim: int = 6) -> np.ndarray:
    """A unit vector of `components` on the first axes and the rest of its length on the last."""
    v = np.zeros(dim)
    v[:len(components)] = components
    v[-1] = math.sqrt(1 - sum(c * c for c in components))
    return v


def test_3cosadd_and_3cosmul_disagree_where_one_cosine_dominates_the_sum(tmp_path):
    """x1: cos 0.9 with b, 0 with a and c: 3CosAdd 0.9, 3CosMul 0.95 * 0.5 / 0.501 = 0.948. x2: cos
    0.42 with b and with c: 3CosAdd 0.84, 3CosMul 0.71^2 / 0.501 = 1.006."""
    e = np.eye(6)
    a, b, c = e[0], e[1], e[2]
    x1, x2 = _unit(0, 0.9, 0, 0.1, dim=6), _unit(0, 0.42, 0.42, 0, -0.2, dim=6)
    toy = _vectors(tmp_path, ["a", "b", "c", "x1", "x2"], [a, b, c, x1, x2])
    scores = {}
    for name, x in (("x1", x1), ("x2", x2)):
        cos = {w: float(x @ v) for w, v in zip("abc", (a, b, c))}
        shifted = {w: (value + 1) / 2 for w, value in cos.items()}
        scores[name] = (cos["b"] - cos["a"] + cos["c"], shifted["b"] * shifted["c"] / (shifted["a"] + 0.001))
    assert scores["x1"][0] > scores["x2"][0] and scores["x1"][1] < scores["x2"][1]
    result = intrinsic.evaluate_analogies(toy, _analogies({"s": ["a b c x2"]}))
    assert result.answers[ADD].tolist() == [3] and result.answers[MUL].tolist() == [4]
    assert result.accuracy(ADD) == 0.0 and result.accuracy(MUL) == 1.0


def test_the_question_words_and_their_other_spellings_are_never_the_answer(tmp_path):
    """c (and its spelling C) is nearest to b - a + c; the answer is d, the best of the others."""
    e = np.eye(6)
    words = ["a", "b", "c", "d", "C", "B", "far"]
    vectors = [e[0], e[1], e[2], _unit(0, 0.5, 0.5, dim=6), _unit(0, 0.2, 0.9, dim=6), _unit(0, 0.9, 0.2, dim=6),
               -e[1]]
    toy = _vectors(tmp_path, words, vectors)
    result = intrinsic.evaluate_analogies(toy, _analogies({"s": ["a b c d", "A B C D", "a b c c"]}))
    for method in METHODS:
        assert result.answers[method].tolist() == [3, 3, 3], method
        assert result.correct(method) == 2  # `a b c c` expects a question word: never answered so.
    assert [words[i] for i, _ in _top(toy, "a", "b", "c")] == ["d", "far"]


def _top(toy, a, b, c, k=5, restrict=None):
    return [(toy.index[w], cos) for w, cos in intrinsic.nearest_answers(toy, a, b, c, k=k, restrict=restrict)]


def test_every_candidate_excluded_is_no_answer(tmp_path):
    toy = _vectors(tmp_path, ["a", "b", "c"], np.eye(3))
    result = intrinsic.evaluate_analogies(toy, _analogies({"s": ["a b c a"]}))
    assert result.answered == 1 and all(result.answers[m].tolist() == [NO_ROW] for m in METHODS)
    assert result.correct(ADD) == result.correct(MUL) == 0


def test_the_search_and_the_lookup_see_only_the_first_n_rows(tmp_path):
    """d2 (row 4) is the best answer; restricted to 4 rows the answer is d1, and a question with d2 is unknown."""
    e = np.eye(6)
    words = ["a", "b", "c", "d1", "d2"]
    toy = _vectors(tmp_path, words, [e[0], e[1], e[2], _unit(0, 0.3, 0.3, dim=6), _unit(0, 0.6, 0.6, dim=6)])
    questions = _analogies({"s": ["a b c d1", "a b c d2", "d2 b c a"]})
    full = intrinsic.evaluate_analogies(toy, questions)
    assert full.restrict == 5 and full.answered == 3 and full.answers[ADD].tolist()[:2] == [4, 4]
    assert full.correct(ADD) == 2  # d2 : b :: c : a as well (a's cosines are 0, the others' sum negative).
    cut = intrinsic.evaluate_analogies(toy, questions, restrict=4)
    assert cut.restrict == 4 and cut.answered == 1 and cut.unknown == 2 and cut.unknown_words == ("d2",)
    assert cut.answers[ADD].tolist() == [3, NO_ROW, NO_ROW] and cut.accuracy(ADD) == 1.0
    assert [i for i, _ in _top(toy, "a", "b", "c")] == [4, 3] and [i for i, _ in _top(toy, "a", "b", "c", restrict=4)] == [3]
    with pytest.raises(ValueError, match=r"'d2' not among the first 4 words"):
        intrinsic.nearest_answers(toy, "d2", "b", "c", restrict=4)
    with pytest.raises(ValueError, match="restrict must be >= 1"):
        intrinsic.evaluate_analogies(toy, questions, restrict=0)


def test_unknown_questions_are_counted_apart_and_outside_the_accuracy(tmp_path):
    e = np.eye(6)
    toy = _vectors(tmp_path, ["a", "b", "c", "d"], [e[0], e[1], e[2], _unit(0, 0.5, 0.5, dim=6)])
    questions = _analogies({"known": ["a b c d", "A B C D"], "mixed": ["a b c d", "a b c e", "x y c d"],
                            "none": ["x b c d"]})
    result = intrinsic.evaluate_analogies(toy, questions)
    assert (result.questions, result.answered, result.unknown) == (6, 3, 3)
    assert result.coverage == 0.5 and result.accuracy(ADD) == 1.0 and result.accuracy(MUL) == 1.0
    assert result.unknown_words == ("e", "x", "y")
    assert [(s.name, s.questions, s.answered, s.correct[ADD]) for s in result.sections] == [
        ("known", 2, 2, 2), ("mixed", 3, 1, 1), ("none", 1, 0, 0)]
    as_json = result.to_json()
    assert as_json["unknown"] == 3 and as_json["unknown_words"] == 3 and as_json["coverage"] == 0.5
    assert as_json["sections"][2]["accuracy"] == {ADD: None, MUL: None}  # No question answered: no accuracy.
    assert as_json["sections"][1]["accuracy"] == {ADD: 1.0, MUL: 1.0}


def test_the_textbook_example_finds_queen_with_its_cosine(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((5, 10))
    man, woman, king, apple, pear = base
    queen = king - man + woman + 0.05 * rng.standard_normal(10)
    toy = _vectors(tmp_path, ["Man", "woman", "king", "queen", "apple", "pear"], [man, woman, king, queen, apple, pear])
    answers = intrinsic.nearest_answers(toy, "man", "WOMAN", "king", k=2)
    unit = intrinsic.unit_vectors(np.stack([man, woman, king, queen]))
    target = intrinsic.unit_vectors((unit[2] - unit[0] + unit[1])[None])[0]  # Of the unit vectors, as gensim's.
    expected_cos = float(unit[3] @ target)
    assert answers[0][0] == "queen" and answers[0][1] == pytest.approx(expected_cos, abs=1e-6) and len(answers) == 2
    assert {w for w, _ in intrinsic.nearest_answers(toy, "man", "woman", "king", k=10)} == {"queen", "apple", "pear"}


def test_words_match_in_lower_case_by_the_first_spelling():
    forms = intrinsic.Forms.of(["King", "the", "king", "KING", "queen"])
    assert forms.form.tolist() == [0, 1, 0, 0, 4]
    assert forms.rows(["king", "KING", "Queen", "absent"]).tolist() == [0, 0, 4, NO_ROW]
    assert {f: rows.tolist() for f, rows in forms.spellings().items()} == {0: [0, 2, 3]}


def test_unit_vectors_keep_a_zero_row_zero():
    unit = intrinsic.unit_vectors(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(unit, [[0.6, 0.8], [0.0, 0.0]])


# ----------------------------------------------------------------------------------------------
# Similarity.


@pytest.mark.parametrize("seed", range(4))
def test_spearman_and_average_ranks_match_scipy_with_ties(seed):
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    x = rng.integers(0, 5, n).astype(np.float64)  # Many ties.
    y = x + rng.integers(0, 3, n) if seed % 2 else rng.normal(size=n).round(1)
    np.testing.assert_allclose(intrinsic.average_ranks(x), stats.rankdata(x))
    expected = stats.spearmanr(x, y).statistic
    if np.isnan(expected):
        assert math.isnan(intrinsic.spearman(x, y))
    else:
        assert intrinsic.spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_spearman_is_nan_without_two_pairs_or_with_a_constant_side():
    assert math.isnan(intrinsic.spearman(np.array([1.0]), np.array([2.0])))
    assert math.isnan(intrinsic.spearman(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0])))
    assert intrinsic.spearman(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])) == -1.0


def test_similarity_correlates_the_found_pairs_cosines_and_counts_the_others(tmp_path):
    rng = np.random.default_rng(0)
    words = ["a", "B", "c", "d", "e"]
    toy = _vectors(tmp_path, words, rng.standard_normal((5, 4)))
    pairs = (("a", "b"), ("A", "c"), ("c", "d"), ("d", "e"), ("a", "missing"), ("b", "e"))
    scores = np.array([1.0, 2.0, 2.0, 5.0, 9.0, 0.5])
    result = intrinsic.evaluate_similarity(toy, intrinsic.SimilaritySet("toy", "toy", pairs, scores))
    unit = intrinsic.unit_vectors(toy.vectors)
    rows = [(0, 1), (0, 2), (2, 3), (3, 4), (1, 4)]
    cosines = [float(unit[i] @ unit[j]) for i, j in rows]
    np.testing.assert_allclose(result.cosines, cosines, atol=1e-6)
    assert (result.pairs, result.found, result.unknown) == (6, 5, 1)
    assert result.rho == pytest.approx(intrinsic.spearman(np.array(cosines), scores[[0, 1, 2, 3, 5]]))
    assert result.to_json()["coverage"] == 5 / 6


# ----------------------------------------------------------------------------------------------
# Files.


def _write(tmp_path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def test_an_analogy_file_reads_as_sections_of_questions(tmp_path):
    path = _write(tmp_path, "q.txt", "\ufeff: capitals\nAthens Greece Oslo Norway\n\n: family\n boy girl  son daughter \n")
    analogies = intrinsic.read_analogies(path)
    assert analogies.name == "q.txt" and analogies.path == path and analogies.sections == ("capitals", "family")
    assert analogies.questions == (("Athens", "Greece", "Oslo", "Norway"), ("boy", "girl", "son", "daughter"))
    assert analogies.section_ids.tolist() == [0, 1]


@pytest.mark.parametrize("text, line, message", [
    (": s\na b c d\na b c\n", 3, "expected 4 words `a b c d`"),
    (": s\na b c d e\n", 2, "expected 4 words"),
    ("a b c d\n: s\n", 1, "a question before any `: section` line"),
    (": s\na b c d\n:  \n", 3, "without a section name"),
    (": s\na b c d\n: s\n", 3, "section 's' again"),
    (b": s\na b \xff d\n", 2, "invalid UTF-8"),
])
def test_a_malformed_analogy_file_is_one_error_at_its_line(tmp_path, text, line, message):
    path = _write(tmp_path, "q.txt", text)
    with pytest.raises(ValueError, match=rf"^{path}:{line}: .*{message}"):
        intrinsic.read_analogies(path)


def test_an_analogy_file_without_questions_is_an_error(tmp_path):
    path = _write(tmp_path, "q.txt", ": s\n\n")
    with pytest.raises(ValueError, match=rf"^{path}: no analogy questions"):
        intrinsic.read_analogies(path)


def test_similarity_files_read_tabs_spaces_comments_and_simlexs_header(tmp_path):
    tsv = intrinsic.read_similarity(_write(tmp_path, "ws.tsv", "# a comment\n# Word 1\tWord 2\tHuman\nlove\tsex\t6.77\n"
                                                               "new york\tcity\t8\n"))
    assert tsv.pairs == (("love", "sex"), ("new york", "city")) and tsv.scores.tolist() == [6.77, 8.0]
    spaced = intrinsic.read_similarity(_write(tmp_path, "men.txt", "sun sunlight 50\nautomobile  car 50.5\n\n"))
    assert spaced.pairs == (("sun", "sunlight"), ("automobile", "car")) and spaced.scores.tolist() == [50.0, 50.5]
    simlex = intrinsic.read_similarity(_write(
        tmp_path, "SimLex-999.txt",
        "word1\tword2\tPOS\tSimLex999\tconc(w1)\nold\tnew\tA\t1.58\t2.72\nsmart\tintelligent\tA\t9.2\t1.75\n",
    ))
    assert simlex.pairs == (("old", "new"), ("smart", "intelligent")) and simlex.scores.tolist() == [1.58, 9.2]


@pytest.mark.parametrize("text, line, message", [
    ("a\tb\t1\nc\td\thigh\n", 2, "the score 'high' is not a number"),
    ("a b 1\nc d nan\n", 2, "the score 'nan' is not a finite number"),
    ("# header\na b\n", 2, "expected `word1 word2 score`"),
    ("a\tb\t1\nc\td\n", 2, "2 columns, expected line 1's 3"),
    ("word1 word2 POS SimLex999\nold new A\n", 2, "3 columns, expected line 1's 4"),
    (b"a b 1\n\xc3( b 2\n", 2, "invalid UTF-8"),
])
def test_a_malformed_similarity_file_is_one_error_at_its_line(tmp_path, text, line, message):
    path = _write(tmp_path, "s.txt", text)
    with pytest.raises(ValueError, match=rf"^{path}:{line}: {message}"):
        intrinsic.read_similarity(path)


def test_a_similarity_file_without_pairs_is_an_error(tmp_path):
    path = _write(tmp_path, "s.txt", "# only a comment\n")
    with pytest.raises(ValueError, match=rf"^{path}: no word pairs"):
        intrinsic.read_similarity(path)


@needs_gensim
def test_gensims_bundled_sets_are_found_and_read():
    google = intrinsic.read_analogies(intrinsic.bundled_file("google"))
    assert len(google.questions) == 19_544 and len(google.sections) == 14 and google.sections[0] == "capital-common-countries"
    wordsim = intrinsic.read_similarity(intrinsic.bundled_file("wordsim353"))
    simlex = intrinsic.read_similarity(intrinsic.bundled_file("simlex999.txt"))
    assert len(wordsim.pairs) == 353 and wordsim.pairs[0] == ("love", "sex") and wordsim.scores[0] == 6.77
    assert len(simlex.pairs) == 999 and simlex.pairs[0] == ("old", "new") and simlex.scores[0] == 1.58
    assert os.path.basename(intrinsic.bundled_file("wordsim353")) == "wordsim353.tsv"


def test_a_bundled_set_without_gensim_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(intrinsic.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"gensim, an optional extra, is not installed \(pip install -e .\[static\]\)"):
        intrinsic.bundled_file("google")
    with pytest.raises(ValueError, match="'men' is not a bundled set"):
        intrinsic.bundled_file("men")


@needs_gensim
@pytest.mark.parametrize("seed, restrict", [(0, 60), (1, 45)])
def test_3cosadd_and_similarity_agree_with_gensim(tmp_path, seed, restrict):
    """Lower-case words, no zero vector: gensim's upper-casing and this module's lower-casing agree."""
    from gensim.models import KeyedVectors

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)]
    toy = _vectors(tmp_path, words, rng.standard_normal((60, 6)))
    pool = words + ["absent"]
    lines = [" ".join(pool[j] for j in row) for row in rng.integers(0, len(pool), (400, 4))]
    questions_path = _write(tmp_path, "q.txt", ": one\n" + "\n".join(lines[:150]) + "\n: two\n" + "\n".join(lines[150:]))
    ours = intrinsic.evaluate_analogies(toy, intrinsic.read_analogies(questions_path), restrict=restrict)
    keyed = KeyedVectors.load_word2vec_format(toy.path)
    score, sections = keyed.evaluate_word_analogies(questions_path, restrict_vocab=restrict)
    total = sections[-1]
    assert ours.answered == len(total["correct"]) + len(total["incorrect"]) and ours.correct(ADD) == len(total["correct"])
    assert ours.accuracy(ADD) == pytest.approx(score) and ours.correct(ADD) > 0
    assert [s.correct[ADD] for s in ours.sections] == [len(s["correct"]) for s in sections[:-1]]
    pairs_path = _write(tmp_path, "p.tsv", "".join(f"{pool[i]}\t{pool[j]}\t{s:.2f}\n" for i, j, s in zip(
        rng.integers(0, len(pool), 80), rng.integers(0, len(pool), 80), rng.uniform(0, 10, 80))))
    similarity = intrinsic.evaluate_similarity(toy, intrinsic.read_similarity(pairs_path))
    _, spearman, oov_percent = keyed.evaluate_word_pairs(pairs_path)
    assert similarity.rho == pytest.approx(spearman.statistic, abs=1e-9)
    assert similarity.unknown / similarity.pairs * 100 == pytest.approx(oov_percent)
    gensim_top = keyed.most_similar(positive=["w1", "w2"], negative=["w0"], topn=5)
    ours_top = intrinsic.nearest_answers(toy, "w0", "w1", "w2")
    assert [w for w, _ in ours_top] == [w for w, _ in gensim_top]
    np.testing.assert_allclose([c for _, c in ours_top], [c for _, c in gensim_top], atol=1e-6)
