"""Contextual nearest neighbours vs a brute-force NumPy search over the reference biLM's representations;
--same_word, tie order, the token-embedding list, static vectors' list, one-line errors, bounded streaming."""

from __future__ import annotations

import collections
import subprocess
import sys

import numpy as np
import pytest

from elmo_jax.inference import embedder as embed, neighbors
from elmo_jax.inference.embedder import embedder_from_bilm_files
from elmo_jax.cli.neighbors import main
from elmo_jax.data.sources import expand_globs
from elmo_jax.inference.neighbors import (
    CorpusLine, TopK, nearest_static_words, nearest_words, read_corpus, scan_corpus,
)
from elmo_jax.static.lookup import StaticVectors
from elmo_jax.static.vector_files import write_text
from tests.entry_points import ROOT
from tests.reference.bilm_numpy import ReferenceBiLM, random_bilm_weights, write_bilm_files
from tests.inference.test_embedder import options

BATCH = 3
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "play", "a", "park", "stock", "market", "of", "naïve"]
QUERY = "the dog will play in the park".split()
WORD = 3  # play


def random_lines(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 9))) for _ in range(n)]


# Two files (read in sorted order): an empty line, the query itself (its own "play" is left out).
FILE_A = random_lines(7, seed=0) + [""] + [" ".join(QUERY)]
FILE_B = random_lines(8, seed=1)
LINES = FILE_A + FILE_B


@pytest.fixture(scope="module")
def bilm(tmp_path_factory):
    """(options path, weights path, NumPy reference, corpus glob) of a random 3-layer biLM."""
    directory = tmp_path_factory.mktemp("model")
    opts = options(True)
    options_path, weights_path = str(directory / "options.json"), str(directory / "weights.hdf5")
    write_bilm_files(opts, random_bilm_weights(opts, seed=4), options_path, weights_path)
    (directory / "a.txt").write_text("\n".join(FILE_A) + "\n", encoding="utf-8")
    (directory / "b.txt").write_text("\n".join(FILE_B) + "\n", encoding="utf-8")
    return options_path, weights_path, ReferenceBiLM.from_files(options_path, weights_path), str(directory / "*.txt")


@pytest.fixture(scope="module")
def embedder(bilm):
    return embedder_from_bilm_files(bilm[0], bilm[1], batch_size=BATCH, stateful=False)


def np_cosine(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    return x @ q / (np.linalg.norm(x, axis=-1) * np.linalg.norm(q))


def brute_force_contexts(reference, layer: int, same_word: bool) -> list[tuple[float, int, int]]:
    """All (similarity, line, token) of the corpus, from every line's full reference representation,
    best first with ties in corpus order; the query's own occurrence left out."""
    target = reference.embed(QUERY, reference.zero_state())[layer, WORD]
    found = []
    for s, line in enumerate(LINES):
        tokens = line.split()
        if not tokens:
            continue
        similarities = np_cosine(reference.embed(tokens, reference.zero_state())[layer], target)
        for t, similarity in enumerate(similarities):
            if (same_word and tokens[t] != QUERY[WORD]) or (tokens == QUERY and t == WORD):
                continue
            found.append((similarity, s, t))
    return sorted(found, key=lambda hit: (-hit[0], hit[1], hit[2]))


def assert_same_ranking(got: list[tuple[float, int, int]], want: list[tuple[float, int, int]], k: int) -> None:
    assert want[k - 1][0] - want[k][0] > 1e-4  # No near-tie at the cut: float32 vs float64 cannot swap it.
    assert [(s, t) for _, s, t in got] == [(s, t) for _, s, t in want[:k]]
    np.testing.assert_allclose([sim for sim, _, _ in got], [sim for sim, _, _ in want[:k]], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layer", [3, 2, 1])
def test_contexts_equal_brute_force(bilm, embedder, layer):
    _, _, reference, corpus = bilm
    scan = scan_corpus(embedder, read_corpus(expand_globs(corpus)), QUERY, WORD, layer, k=6)
    want = brute_force_contexts(reference, layer, same_word=False)
    assert_same_ranking([(h.similarity, h.sentence, h.token) for h in scan.hits], want, k=6)
    for hit in scan.hits:
        assert hit.line.tokens == LINES[hit.sentence].split()
    assert scan.n_sentences == len(LINES) and scan.n_tokens == sum(len(line.split()) for line in LINES)
    assert not any(h.line.tokens == QUERY and h.token == WORD for h in scan.hits)


def test_same_word_restricts_to_the_query_word(bilm, embedder):
    _, _, reference, corpus = bilm
    scan = scan_corpus(embedder, read_corpus(expand_globs(corpus)), QUERY, WORD, 3, k=3, same_word=True)
    want = brute_force_contexts(reference, 3, same_word=True)
    assert len(want) > 3 and all(h.line.tokens[h.token] == "play" for h in scan.hits)
    assert_same_ranking([(h.similarity, h.sentence, h.token) for h in scan.hits], want, k=3)


def test_ties_resolve_to_corpus_order(bilm, embedder):
    corpus = bilm[3]
    top = TopK(3)
    for position in [(5, 0), (1, 2), (4, 1), (1, 0), (9, 9), (2, 7)]:
        top.offer(0.5, position, position)
    top.offer(0.25, (0, 0))
    assert [p for _, p, _ in top.best()] == [(1, 0), (1, 2), (2, 7)] and len(top) == 3
    # Identical lines in identical batches: equal similarities, listed by line then token.
    lines = [CorpusLine("the cat sat".split(), f"x:{i}") for i in range(6)]
    scan = scan_corpus(embedder, iter(lines), "a cat sat".split(), 1, 3, k=4, same_word=True)
    assert [(h.sentence, h.token) for h in scan.hits] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    # Layer 0 (context-free): every other "play" of the corpus has the query's vector, the first k win.
    scan = scan_corpus(embedder, read_corpus(expand_globs(corpus)), QUERY, WORD, 0, k=4)
    plays = [(s, t) for s, line in enumerate(LINES) for t, w in enumerate(line.split()) if w == "play"]
    plays.remove((LINES.index(" ".join(QUERY)), WORD))
    assert len(plays) > 4 and [(h.sentence, h.token) for h in scan.hits] == plays[:4]
    assert len({h.similarity for h in scan.hits}) == 1


@pytest.mark.parametrize("max_words", [100_000, 4])
def test_token_embedding_neighbours_equal_brute_force(bilm, embedder, max_words):
    _, _, reference, _ = bilm
    counts = collections.Counter(w for line in LINES for w in line.split())
    got = nearest_words(embedder, "play", counts, k=3, max_words=max_words)
    ranked = [w for w, _ in counts.most_common(max_words) if w != "play"]
    target = reference.token_embedding("play")
    similarities = np_cosine(np.stack([reference.token_embedding(w) for w in ranked]), target)
    order = sorted(range(len(ranked)), key=lambda i: (-similarities[i], i))
    assert [h.word for h in got] == [ranked[i] for i in order[:3]]
    assert [h.count for h in got] == [counts[ranked[i]] for i in order[:3]]
    np.testing.assert_allclose([h.similarity for h in got], similarities[order[:3]], rtol=1e-5, atol=1e-6)


# A vector file of the corpus words but "naïve", with <UNK> and a word the corpus lacks; two equal vectors.
STATIC_WORDS = [w for w in WORDS if w != "naïve"] + ["<UNK>", "stadium"]


@pytest.fixture(scope="module")
def static_file(tmp_path_factory) -> tuple[str, np.ndarray]:
    vectors = np.random.default_rng(7).normal(size=(len(STATIC_WORDS), 5)).astype(np.float32)
    vectors[STATIC_WORDS.index("park")] = vectors[STATIC_WORDS.index("cat")]
    path = str(tmp_path_factory.mktemp("static") / "vectors.txt")
    write_text(path, STATIC_WORDS, vectors)
    return path, vectors


def brute_force_static(vectors: np.ndarray, word: str, k: int) -> list[tuple[float, str]]:
    """The k file words nearest to `word` by cosine, itself and <UNK> left out, ties in file order."""
    similarities = np_cosine(vectors.astype(np.float64), vectors[STATIC_WORDS.index(word)].astype(np.float64))
    ranked = sorted((-s, i) for i, s in enumerate(similarities) if STATIC_WORDS[i] not in (word, "<UNK>"))
    return [(-s, STATIC_WORDS[i]) for s, i in ranked[:k]]


def test_static_neighbours_equal_brute_force(static_file):
    path, vectors = static_file
    counts = collections.Counter(w for line in LINES for w in line.split())
    static = StaticVectors.read(path)
    for query in ("play", "Play", "cat"):  # "Play": found in lower case; "cat" ties with "park".
        got = nearest_static_words(static, query, counts, k=4)
        want = brute_force_static(vectors, query.lower(), 4)
        assert got.name == "vectors.txt" and got.n_words == len(STATIC_WORDS)
        assert [h.word for h in got.hits] == [w for _, w in want]
        np.testing.assert_allclose([h.similarity for h in got.hits], [s for s, _ in want], rtol=1e-6)
        assert [h.count for h in got.hits] == [counts[w] for _, w in want]  # "stadium": 0.
    assert nearest_static_words(static, "naïve", counts, k=4).hits is None


def test_cli_prints_both_lists(bilm, capsys):
    options_path, weights_path, reference, corpus = bilm
    argv = ["--options", options_path, "--weights", weights_path, "--corpus", corpus, "--query", " ".join(QUERY),
            "--word", str(WORD), "--k", "2", "--batch_size", str(BATCH), "--no_progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "query: the dog will [[play]] in the park"
    assert out[1].startswith("nearest contexts (LSTM layer 3 of 3, cosine, all tokens of 17 lines")
    want = brute_force_contexts(reference, 3, same_word=False)
    for printed, (similarity, s, t) in zip(out[2:4], want):
        tokens = LINES[s].split()
        tokens[t] = f"[[{tokens[t]}]]"
        path = "a.txt" if s < len(FILE_A) else "b.txt"
        line_no = s + 1 if s < len(FILE_A) else s - len(FILE_A) + 1
        assert printed.endswith(f"/{path}:{line_no}  {' '.join(tokens)}")
        assert abs(float(printed.split()[0]) - similarity) < 2e-4
    n_words = len({w for line in LINES for w in line.split()})
    assert out[4] == f"nearest words by token embedding (layer 0, cosine, {n_words} most frequent corpus words):"

    assert len(out) == 7


def test_cli_prints_each_static_files_list_after_the_others(bilm, static_file, capsys):
    options_path, weights_path, _, corpus = bilm
    path, vectors = static_file
    argv = ["--options", options_path, "--weights", weights_path, "--corpus", corpus, "--word", str(WORD), "--k", "2",
            "--no_progress", "--static", path]
    assert main([*argv, "--query", " ".join(QUERY)]) == 0
    out = capsys.readouterr().out.splitlines()
    counts = collections.Counter(w for line in LINES for w in line.split())
    assert out[7] == f"nearest words by static vectors ({path}, cosine, {len(STATIC_WORDS)} words of the file):"
    assert out[8:] == [f"  {s:.4f}  {w}  (count {counts[w]})" for s, w in brute_force_static(vectors, "play", 2)]
    assert main([*argv, "--query", "the dog will naïve go", "--static", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == [out[7], "  ('naïve' is not in the file)"] * 2  # The file given twice: two lists.


def test_errors_are_one_line(bilm, tmp_path, capsys):
    options_path, weights_path, _, corpus = bilm
    model = ["--options", options_path, "--weights", weights_path]
    query = ["--query", "a b c"]
    bad = tmp_path / "bad.txt"
    bad.write_text("2 2\nthe 1 2\ncat 1\n")
    cases = [
        (model + ["--corpus", corpus] + query + ["--word", "3"], "--word 3 is out of range: the query has 3 words"),
        (model + ["--corpus", corpus] + query + ["--word", "-1"], "--word -1 is out of range"),
        (model + ["--corpus", corpus] + query + ["--word", "0", "--layer", "4"], "--layer 4 is out of range"),
        (model + ["--corpus", corpus] + query + ["--word", "0", "--layer", "-1"], "--layer -1 is out of range"),
        (model + ["--corpus", str(tmp_path / "no*.txt")] + query + ["--word", "0"], "no file matches"),
        (["--corpus", corpus] + query + ["--word", "0"], "give one model: --workdir"),
        (model + ["--workdir", str(tmp_path), "--corpus", corpus] + query + ["--word", "0"], "give one model: --workdir"),
        (model + ["--corpus", corpus, "--static", str(bad)] + query + ["--word", "0"],
         f"{bad}:3: 1 values, expected the header's 2"),
    ]
    for argv, message in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_module_entry_point_error(bilm):
    """`elmo-neighbors` in a fresh process: exit 1 and one stderr line, no library logs."""
    corpus = bilm[3]
    result = subprocess.run(
        [sys.executable, "-m", "elmo_jax.cli.neighbors", "--corpus", corpus, "--query", "a b", "--word", "0"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "error: give one model: --workdir, --options with --weights, or --manylangs\n"


def test_streaming_keeps_bounded_memory(embedder, monkeypatch):
    """Many lines, read lazily: the reader is never more than one batch ahead of the similarities, and
    the running top-k never holds more than k entries (nor more than k lines' text)."""
    n, k = 600, 4
    monkeypatch.setattr(embed, "GROUP_POSITIONS", 40)  # The embedder runs batches in groups of >= 40 positions.
    # A group closes at the first full batch that reaches 40 positions; each line takes >= 2 (<S>, </S>).
    group_lines = 40 // 2 + BATCH
    pulled = 0

    def lines():
        nonlocal pulled
        for i, text in enumerate(random_lines(n, seed=7)):
            pulled += 1
            yield CorpusLine(text.split(), f"x:{i}")

    lags, sizes, cosine, offer = [], [], neighbors.cosine, TopK.offer

    def counting_cosine(vectors, query):
        lags.append(pulled - len(lags))  # Lines read minus lines scored.
        return cosine(vectors, query)

    def checked_offer(self, similarity, position, payload=None):
        offer(self, similarity, position, payload)
        sizes.append((len(self), len({id(item[2]) for item in self._heap})))

    monkeypatch.setattr(neighbors, "cosine", counting_cosine)
    monkeypatch.setattr(TopK, "offer", checked_offer)
    scan = scan_corpus(embedder, lines(), QUERY, WORD, 3, k=k)
    assert scan.n_sentences == n and len(lags) == n and len(scan.hits) == k
    assert max(lags) <= group_lines  # The lines between the reader and the scorer: one group at most.
    assert len(sizes) > k and max(size for size, _ in sizes) == k and max(texts for _, texts in sizes) <= k


def test_the_corpus_reads_conllu_sentences_at_their_lines_and_cuts_text_by_the_segmenter(tmp_path):
    pytest.importorskip("jieba", reason="--segmenter jieba needs the jieba package (pip install 'elmo-jax[zh]')")
    (tmp_path / "a.conllu").write_text("# c\n1\tthe\t_\t_\t_\t_\t0\troot\t_\t_\n2\tcat\t_\t_\t_\t_\t1\tdep\t_\t_\n\n",
                                       encoding="utf-8")
    (tmp_path / "b.txt").write_text("我爱北京天安门\n", encoding="utf-8")
    paths = [str(tmp_path / "a.conllu"), str(tmp_path / "b.txt")]
    assert list(read_corpus(paths, "jieba")) == [
        CorpusLine(["the", "cat"], f"{paths[0]}:2"), CorpusLine(["我", "爱", "北京", "天安门"], f"{paths[1]}:1"),
    ]
