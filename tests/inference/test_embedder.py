"""ELMo representations vs an independent NumPy reference; statefulness, padding, bad input, CLI."""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading

import h5py
import jax
import numpy as np
import pytest
from flax.core import FrozenDict

from elmo_jax.config.recipes import recipe_module
from elmo_jax.data import segmenter
from elmo_jax.data.vocab import SPECIAL_TOKENS, Vocabulary, VocabularyError, fingerprint_mismatch
from elmo_jax.elmo import Elmo
from elmo_jax.inference import embedder as embed
from elmo_jax.inference import ragged_lstm
from elmo_jax.cli.embed import main
from elmo_jax.inference.embedder import ElmoEmbedder, embedder_from_bilm_files, embedder_from_workdir
from elmo_jax.inference.hdf5_output import SENTENCE_TO_INDEX
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_workdir

from elmo_jax.workdir.runs import load_params
from elmo_jax.interop.bilm_hdf5 import load_options, load_weights, save_options, save_weights
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM, bilm_from_config
from elmo_jax.model.initial_params import init_params
from tests.reference.bilm_numpy import ReferenceBiLM, random_bilm_weights, write_bilm_files
from tests.training import helpers
from tests.training.helpers import make_checkpoint_workdir

no_projection = recipe_module("tests/no_projection")

RTOL, ATOL = 1e-5, 2e-6  # float32 against a float64 NumPy reference, through up to 3 LSTM layers.
BATCH = 3


def options(skip: bool, dim: int = 12) -> dict:
    """bilm-tf options; dim == projection_dim (6): LSTM layers without projection (no W_P_0)."""
    return {
        "lstm": {"dim": dim, "projection_dim": 6, "n_layers": 3 if skip else 2, "cell_clip": 3, "proj_clip": 3,
                 "use_skip_connections": skip},
        "char_cnn": {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 6], [3, 8]],
                     "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2},
    }


# 8 lines -> batches of 3, 3, 2: an empty line, a token over 48 bytes, non-ASCII, one line long enough
# for the next length bucket.
LINES = [
    "the cat sat on the mat",
    "",
    "a",
    "x" * 60 + " tail",
    "naïve café 中文 é",
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen",
    "the cat",
    "end of the story .",
]
SENTENCES = [line.split() for line in LINES]


@pytest.fixture(scope="module", params=[(True, 12), (False, 12), (True, 6)], ids=["skip", "noskip", "noprojection"])
def bilm(request, tmp_path_factory):
    """(options path, weights path, NumPy reference) of a random biLM written with h5py."""
    directory = tmp_path_factory.mktemp("model")
    opts = options(*request.param)
    options_path, weights_path = str(directory / "options.json"), str(directory / "weights.hdf5")
    write_bilm_files(opts, random_bilm_weights(opts, seed=1), options_path, weights_path)
    return options_path, weights_path, ReferenceBiLM.from_files(options_path, weights_path)


@pytest.fixture(scope="module")
def skip_bilm(tmp_path_factory):
    directory = tmp_path_factory.mktemp("model")
    opts = options(True)
    options_path, weights_path = str(directory / "options.json"), str(directory / "weights.hdf5")
    write_bilm_files(opts, random_bilm_weights(opts, seed=2), options_path, weights_path)
    return options_path, weights_path, ReferenceBiLM.from_files(options_path, weights_path)


def read_output(path) -> dict[str, np.ndarray]:
    """The datasets of an output file but `sentence_to_index` (tests/cli/test_embed_allennlp.py checks it)."""
    with h5py.File(path, "r") as f:
        return {name: f[name][...] for name in f if name != SENTENCE_TO_INDEX}


def assert_matches(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == np.float32, i
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"sentence {i}")


def test_cli_matches_numpy_reference(bilm, tmp_path):
    options_path, weights_path, reference = bilm
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    rc = main(["--options", options_path, "--weights", weights_path, "--input", str(tmp_path / "in.txt"),
               "--output", str(tmp_path / "out.hdf5"), "--batch_size", str(BATCH)])
    assert rc == 0
    out = read_output(tmp_path / "out.hdf5")
    assert sorted(out, key=int) == [str(i) for i in range(len(LINES))]
    assert_matches([out[str(i)] for i in range(len(LINES))], reference.embed_batches(SENTENCES, BATCH))
    n_layers = reference.n_layers + 1
    assert out["1"].shape == (n_layers, 0, 12)  # the empty line
    assert out["5"].shape == (n_layers, 15, 12)


def test_stateless_matches_reference(skip_bilm):
    options_path, weights_path, reference = skip_bilm
    embedder = embedder_from_bilm_files(options_path, weights_path, batch_size=BATCH, stateful=False)
    got = list(embedder.embed_sentences(SENTENCES))
    assert_matches(got, reference.embed_batches(SENTENCES, BATCH, stateful=False))
    # The states matter: the stateful run differs from the second batch on.
    stateful = reference.embed_batches(SENTENCES, BATCH, stateful=True)
    assert not np.allclose(got[6], stateful[6], atol=1e-3)


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
@pytest.mark.parametrize("group_positions", [1, 40])
@pytest.mark.parametrize("engine", ["cpu", "xla"])
def test_batches_grouped_into_several_lstm_runs_match_reference(
    skip_bilm, monkeypatch, stateful, group_positions, engine
):
    """embed_sentences runs the LSTMs over groups of consecutive batches (GROUP_POSITIONS): one
    batch per run, or a couple, give the same output as the reference's batch-by-batch run, with
    either engine (the C++ kernels or XLA)."""
    options_path, weights_path, reference = skip_bilm
    monkeypatch.setattr(embed, "GROUP_POSITIONS", group_positions)
    sentences = SENTENCES + SENTENCES[::-1] + [[]] + SENTENCES[2:5]  # 20 lines: 7 batches of 3.
    embedder = embedder_from_bilm_files(
        options_path, weights_path, batch_size=BATCH, stateful=stateful, engine=engine
    )
    assert (embedder.kernels.char_cnn is not None) == (embedder.kernels.lstm_stack is not None) == (engine == "cpu")
    assert_matches(list(embedder.embed_sentences(sentences)), reference.embed_batches(sentences, BATCH, stateful))


def test_sentences_of_many_lengths_compile_few_programs_and_match_reference(skip_bilm, monkeypatch):
    """XLA pads to few shapes (`bucket`, `row_bucket`, TOKEN_CHUNK words per char-CNN call): 60
    stateless sentences of 1 to 60 words, of words 1 to 40 bytes long, in runs of 1 to 12 streams
    (GROUP_POSITIONS 90) compile at most 12 programs (40 with the padding before), and each
    sentence is still its own alone."""
    options_path, weights_path, reference = skip_bilm
    monkeypatch.setattr(embed, "GROUP_POSITIONS", 90)
    rng = np.random.default_rng(7)
    words = ["".join(rng.choice(list("abcdefgh"), size=n)) for n in rng.integers(1, 41, size=400)]
    sentences = [list(rng.choice(words, size=n)) for n in rng.permutation(np.arange(1, 61))]
    jitted = (embed.encode_chars, ragged_lstm._first_layer_gates, ragged_lstm._run_chunk)
    for fn in jitted:
        fn.clear_cache()
    embedder = embedder_from_bilm_files(options_path, weights_path, batch_size=12, stateful=False, engine="xla")
    assert_matches(list(embedder.embed_sentences(sentences)), reference.embed_batches(sentences, 12, stateful=False))
    assert embed.encode_chars._cache_size() <= 3  # Characters 16, 32 and 50 (the model's), 256 words.
    assert sum(fn._cache_size() for fn in jitted) <= 12


def test_engine_auto_takes_the_kernels_on_cpu_and_falls_back_without_a_compiler(skip_bilm, monkeypatch, tmp_path, caplog):
    from elmo_jax.inference.cpu_kernels import build

    options_path, weights_path, reference = skip_bilm
    kernels = embedder_from_bilm_files(options_path, weights_path, BATCH).kernels
    assert kernels.char_cnn is not None and kernels.lstm_stack is not None
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))  # Nothing built there yet.
    monkeypatch.setenv("CXX", "no-such-compiler")
    build.forget_library()
    try:
        embedder = embedder_from_bilm_files(options_path, weights_path, BATCH, stateful=False)
        assert embedder.kernels == (None, None)
        assert "computing with XLA: no C++ compiler" in caplog.text
        assert_matches(list(embedder.embed_sentences(SENTENCES)), reference.embed_batches(SENTENCES, BATCH, stateful=False))
        with pytest.raises(build.KernelUnavailable):
            embedder_from_bilm_files(options_path, weights_path, BATCH, engine="cpu")
    finally:
        build.forget_library()
    with pytest.raises(ValueError, match="engine must be one of"):
        embedder_from_bilm_files(options_path, weights_path, BATCH, engine="gpu")


def test_stateless_packs_sentences_into_batch_size_rows(skip_bilm):
    """Stateless, a batch's sentences are packed into streams one after another (the state zeroed
    at each start): nine sentences in two rows give each sentence's own output."""
    options_path, weights_path, reference = skip_bilm
    sentences = [s for s in SENTENCES if s] + [SENTENCES[0], SENTENCES[5]]
    embedder = embedder_from_bilm_files(options_path, weights_path, batch_size=2, stateful=False)
    streams = embedder._packed_streams(sentences, 2)
    assert sorted(index for stream in streams for index, _ in stream) == list(range(len(sentences)))
    assert all(len(stream) >= 4 for stream in streams)  # Several sentences per row.
    # A sentence takes its words' positions only: it starts from the state after <S> / </S>.
    assert sum(stream.length for stream in streams) == sum(len(s) for s in sentences)
    assert_matches(list(embedder.embed_sentences(sentences)), reference.embed_batches(sentences, 1, stateful=False))


def test_short_batch_leaves_other_rows_states_untouched(skip_bilm):
    options_path, weights_path, reference = skip_bilm
    embedder = embedder_from_bilm_files(options_path, weights_path, batch_size=BATCH)
    s = SENTENCES
    got = embedder.embed_batch(s[0:3]) + embedder.embed_batch([s[3]]) + embedder.embed_batch(s[5:8])
    # An empty sentence leaves its row untouched, so the reference of a short batch pads it with [].
    want = reference.embed_batches(s[0:3] + [s[3], [], []] + s[5:8], BATCH)
    assert_matches(got, want[:4] + want[6:])


def test_empty_line_leaves_its_row_state_untouched(skip_bilm):
    options_path, weights_path, _ = skip_bilm
    s = SENTENCES
    with_empty = embedder_from_bilm_files(options_path, weights_path, batch_size=BATCH)
    with_empty.embed_batch(s[5:8])
    empty_out = with_empty.embed_batch([[], s[0], s[2]])[0]
    after_empty = with_empty.embed_batch([s[6], s[7], s[3]])
    direct = embedder_from_bilm_files(options_path, weights_path, batch_size=BATCH)
    direct.embed_batch(s[5:8])
    direct_out = direct.embed_batch([s[6], s[7], s[3]])
    assert empty_out.shape == (4, 0, 12) and empty_out.dtype == np.float32
    np.testing.assert_array_equal(after_empty[0], direct_out[0])  # row 0 skipped the empty line
    assert not np.allclose(after_empty[1], direct_out[1], atol=1e-3)  # row 1 moved on


def test_padding_never_changes_a_real_token(skip_bilm):
    options_path, weights_path, _ = skip_bilm
    embedder = embedder_from_bilm_files(options_path, weights_path, batch_size=BATCH, stateful=False)
    s = SENTENCES[0]
    alone = embedder.embed_batch([s])[0]
    other_rows = embedder.embed_batch([s, SENTENCES[6], SENTENCES[2]])[0]
    last_row = embedder.embed_batch([SENTENCES[2], SENTENCES[7], s])[2]
    longer_bucket = embedder.embed_batch([s, SENTENCES[5]])[0]  # padded to 32 steps instead of 16
    np.testing.assert_array_equal(other_rows, last_row)  # another row, other neighbours: the same bits
    # Only rows holding a sentence run: batches of 1 and 2 sentences run smaller matmuls, which round
    # differently.
    np.testing.assert_allclose(alone, other_rows, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(alone, longer_bucket, rtol=RTOL, atol=ATOL)


def test_tokens_are_truncated_to_48_bytes(skip_bilm):
    options_path, weights_path, _ = skip_bilm
    embedder = embedder_from_bilm_files(options_path, weights_path, batch_size=BATCH, stateful=False)
    long, cut, shorter = embedder.embed_batch([["x" * 60], ["x" * 48], ["x" * 47]])
    np.testing.assert_array_equal(long, cut)
    assert not np.allclose(long, shorter)


def test_invalid_utf8_is_replaced_with_a_warning(skip_bilm, tmp_path, caplog):
    options_path, weights_path, _ = skip_bilm
    (tmp_path / "bad.txt").write_bytes(b"the cat\ncaf\xe9 au lait\n\xff\n")
    (tmp_path / "good.txt").write_text("the cat\ncaf\ufffd au lait\n\ufffd\n", encoding="utf-8")
    common = ["--options", options_path, "--weights", weights_path, "--batch_size", str(BATCH)]
    with caplog.at_level(logging.WARNING):
        assert main(common + ["--input", str(tmp_path / "bad.txt"), "--output", str(tmp_path / "bad.hdf5")]) == 0
    assert "bad.txt:2: invalid UTF-8 replaced by U+FFFD" in caplog.text
    assert main(common + ["--input", str(tmp_path / "good.txt"), "--output", str(tmp_path / "good.hdf5")]) == 0
    bad, good = read_output(tmp_path / "bad.hdf5"), read_output(tmp_path / "good.hdf5")
    assert sorted(bad) == ["0", "1", "2"]
    for name in good:
        np.testing.assert_array_equal(bad[name], good[name])


def test_token_embeddings_mode(skip_bilm, tmp_path):
    options_path, weights_path, reference = skip_bilm
    words = ["<S>", "</S>", "<UNK>", "the", "naïve", "x" * 60]
    (tmp_path / "vocab.txt").write_text("".join(f"{w}\t{i}\n" for i, w in enumerate(words)), encoding="utf-8")
    rc = main(["--options", options_path, "--weights", weights_path, "--token_embeddings", str(tmp_path / "vocab.txt"),
               "--output", str(tmp_path / "tokens.hdf5")])
    assert rc == 0
    out = read_output(tmp_path / "tokens.hdf5")
    assert list(out) == ["embedding"] and out["embedding"].shape == (len(words), 6)
    np.testing.assert_allclose(out["embedding"], [reference.token_embedding(w) for w in words], rtol=RTOL, atol=ATOL)


def test_cli_errors(skip_bilm, tmp_path, capsys):
    options_path, weights_path, _ = skip_bilm
    out = str(tmp_path / "out.hdf5")
    model = ["--options", options_path, "--weights", weights_path]
    assert main(model + ["--input", str(tmp_path / "no.txt"), "--output", out]) == 1
    assert "no.txt: input file not found" in capsys.readouterr().err
    assert not os.path.exists(out)
    (tmp_path / "in.txt").write_text("a b\n")
    no_weights = ["--options", options_path, "--weights", str(tmp_path / "no.hdf5")]
    assert main(no_weights + ["--input", str(tmp_path / "in.txt"), "--output", out]) == 1
    assert "no.hdf5: weight file not found" in capsys.readouterr().err
    (tmp_path / "vocab.txt").write_text("a\n\nb\n")
    assert main(model + ["--token_embeddings", str(tmp_path / "vocab.txt"), "--output", out]) == 1
    assert "vocab.txt:2: empty token" in capsys.readouterr().err
    for argv, message in (
        (["--workdir", str(tmp_path), "--options", options_path, "--input", "x", "--output", out],
         "give one model: --workdir, --options with --weights, or --manylangs"),
        (["--options", options_path, "--input", "x", "--output", out], "--options and --weights go together"),
        (["--workdir", str(tmp_path), "--input", "x", "--token_embeddings", "v", "--output", out],
         "give exactly one of --input and --token_embeddings"),
        (model + ["--input", "x", "--output", out, "--batch_size", "0"], "--batch_size must be >= 1, got 0"),
        (model + ["--input", "x", "--output", out, "--layers", "middle"], "--layers=middle: value should be one of"),
        (model + ["--input", "x"], "the following arguments are required: --output"),
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_cli_twice_in_one_process_starts_from_the_defaults(skip_bilm, tmp_path):
    """main() parses each argv from the flags' defaults: nothing of the previous call's flags stays."""
    options_path, weights_path, reference = skip_bilm
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    model = ["--options", options_path, "--weights", weights_path, "--input", str(tmp_path / "in.txt")]
    assert main(model + ["--output", str(tmp_path / "top.hdf5"), "--layers", "top", "--stateless",
                         "--batch_size", str(BATCH)]) == 0
    assert read_output(tmp_path / "top.hdf5")["0"].shape == (6, 12)  # The top layer of 6 tokens.
    assert main(model + ["--output", str(tmp_path / "all.hdf5")]) == 0  # --layers all, stateful, batches of 64.
    out = read_output(tmp_path / "all.hdf5")
    assert_matches([out[str(i)] for i in range(len(LINES))], reference.embed_batches(SENTENCES, 64))


def test_checkpoint_to_hdf5_to_embeddings_is_identical(tmp_path):
    workdir = make_checkpoint_workdir(tmp_path)
    config, params = load_params(workdir)
    options_path, weights_path = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    save_options(config, options_path)
    save_weights(params, config, weights_path)
    loaded = load_weights(load_options(options_path), weights_path)
    for path, leaf in jax.tree_util.tree_leaves_with_path(loaded):
        want = params
        for key in path:
            want = want[key.key]
        want = np.asarray(want)[1:] if path[-1].key == "char_embed" else np.asarray(want)
        assert (leaf[1:] if path[-1].key == "char_embed" else leaf).tobytes() == want.tobytes(), path

    (tmp_path / "in.txt").write_text("the cat sat\n\nthe dog ran past the old barn\na\n")
    common = ["--input", str(tmp_path / "in.txt"), "--batch_size", "2"]
    assert main(["--workdir", workdir, "--output", str(tmp_path / "ckpt.hdf5")] + common) == 0
    model = ["--options", options_path, "--weights", weights_path]
    assert main(model + ["--output", str(tmp_path / "file.hdf5")] + common) == 0
    from_checkpoint, from_file = read_output(tmp_path / "ckpt.hdf5"), read_output(tmp_path / "file.hdf5")
    assert sorted(from_checkpoint) == ["0", "1", "2", "3"] == sorted(from_file)
    for name in from_file:
        np.testing.assert_array_equal(from_checkpoint[name], from_file[name])


def test_model_without_projection_embeds_2_dim_wide(tmp_path):
    """configs/tests/no_projection.py (projection_dim == dim == 8): layers of 2 * dim, token embeddings of
    dim, as the NumPy reference of its exported bilm-tf files."""
    config = no_projection.get_config()
    model = bilm_from_config(config.model, vocab_size=5)
    chars = config.data.max_chars_per_token
    shapes = jax.eval_shape(lambda: init_params(model, jax.random.key(0), chars))
    rng = np.random.default_rng(3)
    params = jax.tree.map(lambda s: rng.normal(0.0, 0.5, s.shape).astype(s.dtype), shapes)
    assert "W_P" not in params["lstm_0"] and "W_P" not in params["lstm_1"]
    options_path, weights_path = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    save_options(config, options_path)
    save_weights(params, config, weights_path)
    reference = ReferenceBiLM.from_files(options_path, weights_path)

    embedder = ElmoEmbedder.from_pretrained(PretrainedBiLM(model, params, chars), batch_size=BATCH)
    got = list(embedder.embed_sentences(SENTENCES))
    assert got[0].shape == (3, 6, 2 * 8) and got[1].shape == (3, 0, 2 * 8)
    assert_matches(got, reference.embed_batches(SENTENCES, BATCH))
    words = ["<S>", "the", "naïve"]
    np.testing.assert_allclose(
        embedder.token_embeddings(words), [reference.token_embedding(w) for w in words], rtol=RTOL, atol=ATOL
    )


def test_model_without_token_projection_is_refused():
    model = BiLM(vocab_size=5, char_cnn=FrozenDict(CHAR_CNN_DEFAULTS, projection=False))
    with pytest.raises(ValueError, match="projection=False"):
        ElmoEmbedder.from_pretrained(PretrainedBiLM(model, {}, max_chars=10))


@pytest.mark.parametrize("stateful", [True, False])
def test_vocab_to_cache_gives_the_same_output(skip_bilm, stateful):
    """Cached words skip the char CNN; words outside the cache (and <S>) still go through it."""
    options_path, weights_path, reference = skip_bilm
    cache = ["the", "cat", "</S>", "the", "mat", "unused"]  # a duplicate and a word no sentence has
    embedder = embedder_from_bilm_files(options_path, weights_path, BATCH, stateful, vocab_to_cache=cache)
    assert_matches(list(embedder.embed_sentences(SENTENCES)), reference.embed_batches(SENTENCES, BATCH, stateful))
    words = ["the", "naïve", "<S>", "unused"]
    np.testing.assert_allclose(
        embedder.token_embeddings(words), [reference.token_embedding(w) for w in words], rtol=RTOL, atol=ATOL
    )


def test_cli_vocab_to_cache(skip_bilm, tmp_path):
    options_path, weights_path, reference = skip_bilm
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("the\t10\ncat\t3\n<S>\t1\n", encoding="utf-8")
    rc = main(["--options", options_path, "--weights", weights_path, "--input", str(tmp_path / "in.txt"),
               "--output", str(tmp_path / "out.hdf5"), "--batch_size", str(BATCH),
               "--vocab_to_cache", str(tmp_path / "vocab.txt")])
    assert rc == 0
    out = read_output(tmp_path / "out.hdf5")
    assert_matches([out[str(i)] for i in range(len(LINES))], reference.embed_batches(SENTENCES, BATCH))




@pytest.mark.parametrize("mode", ["top", "average"])
def test_cli_layers_top_and_average(skip_bilm, tmp_path, mode):
    """`--layers top|average` writes `(n_tokens, 2P)` per sentence: the reference's top layer or the
    mean of its layers (AllenNLP's `elmo --top/--average`)."""
    options_path, weights_path, reference = skip_bilm
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    rc = main(["--options", options_path, "--weights", weights_path, "--input", str(tmp_path / "in.txt"),
               "--output", str(tmp_path / "out.hdf5"), "--batch_size", str(BATCH), "--layers", mode])
    assert rc == 0
    out = read_output(tmp_path / "out.hdf5")
    want = [w[-1] if mode == "top" else w.mean(axis=0) for w in reference.embed_batches(SENTENCES, BATCH)]
    assert_matches([out[str(i)] for i in range(len(LINES))], want)
    assert out["1"].shape == (0, 12) and out["5"].shape == (15, 12)


# ----------------------------------------------------------------------------- word-input biLMs

# configs/tests/tiny.py with word inputs: as configs/ptb_word_small.py (no LSTM projection, so layers
# of 2 * dim; no skip connections or clipping), and with tiny.py's projection 16 -> 8, skips and clips.
WORD_MODELS = {
    "ptb_like": {"model.token_encoder": "word", "model.width": 16, "model.lstm.use_skip_connections": False,
                 "model.lstm.cell_clip": 0.0, "model.lstm.proj_clip": 0.0},
    "projected": {"model.token_encoder": "word"},
}


class WordReference(ReferenceBiLM):
    """The NumPy reference with a word encoder: a word's token embedding is the row of its line in
    vocab.txt (`<UNK>`'s for other words); the LSTMs are the reference's, fed bilm-tf datasets
    assembled here from the Flax params (W_0 = [W_input; W_hidden])."""

    def __init__(self, config, params: dict, vocab_path: str):
        weights = {}
        for layer in range(config.model.lstm.n_layers):
            lstm = {k: np.asarray(v) for k, v in params[f"lstm_{layer}"].items()}
            for d in (0, 1):
                root = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
                weights[root + "W_0"] = np.concatenate([lstm["W_input"][d], lstm["W_hidden"][d]])
                weights[root + "B"] = lstm["B"][d]
                if "W_P" in lstm:
                    weights[root + "W_P_0"] = lstm["W_P"][d]
        opts = {k: config.model.lstm[k] for k in ("dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections")}
        opts["projection_dim"] = config.model.width  # bilm-tf's name for the width.
        super().__init__({"lstm": opts, "char_cnn": {"max_characters_per_token": 0}}, weights)
        self.table = np.asarray(params["encoder"]["embedding"], np.float64)
        with open(vocab_path, encoding="utf-8") as f:
            self.ids = {line.split("\t")[0].strip(): i for i, line in enumerate(f)}

    def token_embedding(self, word: str) -> np.ndarray:
        return self.table[self.ids.get(word, self.ids["<UNK>"])]


@pytest.fixture(scope="module", params=list(WORD_MODELS))
def word_workdir(request, tmp_path_factory):
    """(workdir, NumPy reference) of a word-input biLM's checkpoint (random params)."""
    workdir = make_checkpoint_workdir(tmp_path_factory.mktemp("word"), **WORD_MODELS[request.param])
    config, params = load_params(workdir)
    assert config.model.token_encoder == "word"
    return workdir, WordReference(config, params, os.path.join(workdir, "vocab.txt"))


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
def test_word_workdir_embeds_as_numpy_reference(word_workdir, tmp_path, stateful):
    """The CLI on a word-input workdir: the layout of char models, unknown words (most of LINES: the
    corpus has 16 words) as <UNK>, an empty line, states carried or not."""
    workdir, reference = word_workdir
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    rc = main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.hdf5"),
               "--batch_size", str(BATCH)] + ([] if stateful else ["--stateless"]))
    assert rc == 0
    out = read_output(tmp_path / "out.hdf5")
    got = [out[str(i)] for i in range(len(LINES))]
    want = reference.embed_batches(SENTENCES, BATCH, stateful)
    assert_matches(got, want)
    width = 2 * reference.proj
    assert got[1].shape == (3, 0, width) and got[5].shape == (3, 15, width)
    unk = reference.token_embedding("<UNK>")
    np.testing.assert_allclose(got[4][0], np.tile(unk, (4, 2)), rtol=RTOL, atol=ATOL)  # "naïve café 中文 é"
    assert not np.allclose(got[0][0, 0], np.tile(unk, 2))  # "the" has its own row
    # The states matter: the other mode differs from the second batch on.
    assert not np.allclose(got[6], reference.embed_batches(SENTENCES, BATCH, not stateful)[6], atol=1e-3)


def test_word_workdir_library_api_and_token_embeddings(word_workdir, tmp_path):
    workdir, reference = word_workdir
    embedder = embedder_from_workdir(workdir, batch_size=BATCH, stateful=False)
    s = SENTENCES
    got = embedder.embed_batch([s[0], [], s[4]]) + embedder.embed_batch([s[6]])
    assert_matches(got, reference.embed_batches([s[0], [], s[4], s[6]], BATCH, stateful=False))
    words = ["<S>", "</S>", "<UNK>", "the", "naïve", "x" * 60]
    (tmp_path / "vocab.txt").write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    rc = main(["--workdir", workdir, "--token_embeddings", str(tmp_path / "vocab.txt"),
               "--output", str(tmp_path / "tokens.hdf5")])
    assert rc == 0
    table = read_output(tmp_path / "tokens.hdf5")["embedding"]
    assert table.shape == (len(words), reference.proj)
    np.testing.assert_allclose(table, [reference.token_embedding(w) for w in words], rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(table[4], table[2])  # unknown words: <UNK>'s row


def test_word_workdir_refuses_vocab_to_cache(word_workdir, tmp_path, capsys):
    workdir, _ = word_workdir
    (tmp_path / "in.txt").write_text("the cat\n")
    (tmp_path / "vocab.txt").write_text("the\ncat\n")
    out = str(tmp_path / "out.hdf5")
    rc = main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output", out,
               "--vocab_to_cache", str(tmp_path / "vocab.txt")])
    assert rc == 1 and not os.path.exists(out)
    err = capsys.readouterr().err.strip()
    assert "--vocab_to_cache" in err and "model.token_encoder='word'" in err and len(err.splitlines()) == 1
    config, params = load_params(workdir)
    model = bilm_from_config(config.model, vocab_size=19)
    with pytest.raises(ValueError, match="needs vocab"):
        ElmoEmbedder.from_pretrained(PretrainedBiLM(model, params, max_chars=12))



@pytest.mark.parametrize("flag", ["--input", "--weights", "--options"])
def test_cli_refuses_an_output_that_is_an_input(skip_bilm, tmp_path, monkeypatch, capsys, flag):
    """`./x` and `x`, or a symlink to the file: the input stays as it was."""
    options_path, weights_path, _ = skip_bilm
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a b\n")
    paths = {"--input": "in.txt", "--weights": weights_path, "--options": options_path}
    os.symlink(paths[flag], tmp_path / "link")
    output = "./in.txt" if flag == "--input" else "link"
    before = open(paths[flag], "rb").read()
    assert main([arg for pair in paths.items() for arg in pair] + ["--output", output]) == 1
    assert capsys.readouterr().err == f"error: --output {output} is {flag} {paths[flag]}: refusing to overwrite an input\n"
    assert open(paths[flag], "rb").read() == before


def test_word_workdir_with_a_vocabulary_cut_short_is_refused(word_workdir, tmp_path, capsys):
    workdir = str(tmp_path / "run")
    shutil.copytree(word_workdir[0], workdir)
    vocab = os.path.join(workdir, "vocab.txt")
    with open(vocab) as f:
        lines = f.readlines()
    with open(vocab, "w") as f:
        f.writelines(lines[:-2])
    (tmp_path / "in.txt").write_text("the cat\n")
    assert main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.hdf5")]) == 1
    assert capsys.readouterr().err == (f"error: {vocab}: {len(lines) - 2} lines, but the checkpoint's softmax has "
                                       f"{len(lines)} rows (one per line)\n")


def test_word_workdir_with_two_vocabulary_lines_swapped_is_refused(word_workdir, tmp_path, capsys):
    """The same line count: each word would read the other's embedding row; the recorded fingerprint
    refuses the file in the CLI, `ElmoEmbedder` and `Elmo` alike."""
    workdir = str(tmp_path / "run")
    shutil.copytree(word_workdir[0], workdir)
    vocab, trained_with, found = helpers.swap_vocabulary_lines(workdir)
    expected = fingerprint_mismatch(vocab, found, trained_with)
    (tmp_path / "in.txt").write_text("the cat\n")
    assert main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.hdf5")]) == 1
    assert capsys.readouterr().err == f"error: {expected}\n"
    with pytest.raises(VocabularyError, match=f"^{re.escape(expected)}$"):
        embedder_from_workdir(workdir)
    with pytest.raises(VocabularyError, match=f"^{re.escape(expected)}$"):
        Elmo(None, None, workdir=workdir, num_output_representations=1)


def test_bilm_from_workdir_records_the_step_it_loaded(word_workdir):
    """The latest checkpoint's step when none is asked (make_checkpoint_workdir saves step 2)."""
    workdir, _ = word_workdir
    assert bilm_from_workdir(workdir).step == 2 and bilm_from_workdir(workdir, 2).step == 2


# Short windows and memory: the embedder's streams run as several windows carrying the memory.
TRANSFORMER = {"model.transformer.max_window": 4, "model.transformer.memory_length": 3,
               "model.transformer.positions": "learned", "model.transformer.ff_dim": 16, "model.transformer.n_heads": 2}


def gated_cnn_bilm(engine_chars: int = 12, contextualizer: str = "gated_cnn") -> PretrainedBiLM:
    """configs/tests/tiny.py with the gated CNN (kernel 3, 3 layers of 8) or the Transformer
    (`TRANSFORMER`), random params, no dropout."""
    overrides = TRANSFORMER if contextualizer == "transformer" else {}
    config = helpers.tiny_config(**{"model.contextualizer": contextualizer, "model.dropout": 0.0, **overrides})
    model = bilm_from_config(config.model, vocab_size=5)
    shapes = jax.eval_shape(lambda: init_params(model, jax.random.key(0), engine_chars))
    rng = np.random.default_rng(5)
    params = jax.tree.map(lambda s: rng.normal(0.0, 0.5, s.shape).astype(s.dtype), shapes)
    return PretrainedBiLM(model, {k: v for k, v in params.items() if k != "softmax"}, engine_chars)


def contextualized_streams(pretrained: PretrainedBiLM, embedder: ElmoEmbedder, streams: list[list[list[str]]]):
    """The reference: each stream (its sentences with <S> and </S>, one after another; the backward
    stream each sentence reversed in place) through `BiLM.contextualize` in one call from zeros,
    cut into sentences as ELMo layers `[L + 1, n, 2P]`."""
    out = []
    for sentences in streams:
        forward = [w for s in sentences for w in ("<S>", *s, "</S>")]
        backward = [w for s in sentences for w in ("<S>", *s, "</S>")[::-1]]
        x = np.stack([embedder.token_embeddings(forward), embedder.token_embeddings(backward)])[:, None]
        layers, _, _ = pretrained.model.apply(
            {"params": pretrained.params}, x, np.ones(x.shape[:3], bool), pretrained.model.initial_state(1),
            method=BiLM.contextualize,
        )
        start = 0
        for s in sentences:
            n = len(s)
            fwd = np.stack([np.asarray(layer)[0, 0, start + 1 : start + 1 + n] for layer in layers])
            bwd = np.stack([np.asarray(layer)[1, 0, start + 1 : start + 1 + n][::-1] for layer in layers])
            out.append(np.concatenate([fwd, bwd], axis=-1))
            start += n + 2
    return out


@pytest.mark.parametrize("contextualizer", ["gated_cnn", "transformer"])
@pytest.mark.parametrize("engine", ["auto", "xla"])
def test_non_lstm_bilm_embeds_as_contextualize_stateful_and_stateless(engine, contextualizer):
    """A non-LSTM biLM embeds with XLA through `BiLM.contextualize`: stateful, row r of each batch
    continues row r's stream of the batches before (three batches of 2, one shorter); stateless,
    every sentence alone from the zero state; with any engine (the C++ char CNN at most). The
    Transformer's streams are longer than its max_window: they run as windows carrying the memory."""
    pretrained = gated_cnn_bilm(contextualizer=contextualizer)
    sentences = [["the", "cat", "sat"], ["a", "dog"], ["a", "bird", "flew", "past", "the", "barn"], ["it"], ["x"]]
    stateful = ElmoEmbedder.from_pretrained(pretrained, batch_size=2, engine=engine)
    assert stateful.kernels.lstm_stack is None
    got = list(stateful.embed_sentences(sentences))
    want = contextualized_streams(pretrained, stateful, [sentences[0::2], sentences[1::2]])
    want = [want[0], want[3], want[1], want[4], want[2]]  # Stream order back to sentence order.
    assert [g.shape for g in got] == [(pretrained.model.n_layers + 1, len(s), 16) for s in sentences]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    stateless = ElmoEmbedder.from_pretrained(pretrained, batch_size=2, stateful=False, engine=engine)
    alone = contextualized_streams(pretrained, stateless, [[s] for s in sentences])
    for g, w in zip(stateless.embed_sentences(sentences), alone):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert not np.allclose(got[2][1:], alone[2][1:], atol=1e-3)  # Stateful: the earlier sentence is context.


@pytest.mark.parametrize("contextualizer", ["gated_cnn", "transformer"])
def test_non_lstm_streams_run_in_calls_as_long_as_their_longest(monkeypatch, contextualizer):
    """Streams of several lengths, more than one call holds (CHUNK_POSITIONS 48): longest first,
    each call T' = bucket(its longest, 16) long with 48 // T' streams, the last call's count a
    power of two; every sentence's layers are still its own alone (stateless) or its stream's."""
    pretrained = gated_cnn_bilm(contextualizer=contextualizer)
    monkeypatch.setattr(embed, "CHUNK_POSITIONS", 48)
    calls = []
    contextualize = embed._contextualize

    def recorded(model, params, x, mask, state):
        calls.append(mask.shape)
        return contextualize(model, params, x, mask, state)

    monkeypatch.setattr(embed, "_contextualize", recorded)
    sentences = [[f"w{i}" for i in range(n)] for n in (20, 1, 3, 30, 2, 14, 5)]  # With <S>, </S>: 22, 3, 5, 32, ...
    stateless = ElmoEmbedder.from_pretrained(pretrained, batch_size=8, stateful=False)
    got = list(stateless.embed_sentences(sentences))
    assert calls == [(2, 1, 32), (2, 1, 32), (2, 3, 16), (2, 2, 16)]  # 32 | 22 | 16, 7, 5 | 4, 3.
    for g, w in zip(got, contextualized_streams(pretrained, stateless, [[s] for s in sentences])):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    stateful = ElmoEmbedder.from_pretrained(pretrained, batch_size=3)
    got = list(stateful.embed_sentences(sentences))
    want = contextualized_streams(pretrained, stateful, [sentences[0::3], sentences[1::3], sentences[2::3]])
    order = [0, 3, 6, 1, 4, 2, 5]  # The streams' sentences, in sentence order.
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, want[order.index(i)], rtol=1e-5, atol=1e-5)


def test_gated_cnn_bilm_refuses_the_lstm_only_methods():
    pretrained = gated_cnn_bilm()
    with pytest.raises(ValueError, match="LSTM biLMs; this one's contextualizer is 'gated_cnn'"):
        pretrained.model.apply({"params": pretrained.params}, np.zeros((1, 8)), method=BiLM.first_layer_gates)


def test_embedding_methods_say_they_are_stateful_and_how_to_get_stateless_vectors():
    for method in (ElmoEmbedder.embed_sentence, ElmoEmbedder.embed_batch):
        doc = " ".join(method.__doc__.split())
        assert "Stateful by default, as AllenNLP's" in doc and "stateful=False" in doc, method.__name__


def test_embed_file_progress_bar_ends_complete(skip_bilm, tmp_path, capsys):
    """The bar reaches every line before the file is written (it stopped at 2/3 for 3 lines)."""
    path = tmp_path / "sentences.txt"
    path.write_text("the cat sat\na dog\nred barns near hills\n")
    embedder = ElmoEmbedder(skip_bilm[0], skip_bilm[1], batch_size=2)
    assert embedder.embed_file(str(path), str(tmp_path / "out.hdf5")) == 3
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in last and "3/3" in last, last


def test_cli_input_from_a_pipe_embeds_every_line(skip_bilm, tmp_path):
    """A FIFO (`/dev/stdin`, `<(zcat ...)`) is read once: its lines are not counted first (that
    read emptied it and 0 sentences were written, exit 0)."""
    lines = "the cat sat\na dog\n\nred barns near hills\n"
    (tmp_path / "sentences.txt").write_text(lines)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(lines,))
    writer.start()
    model = ["--options", skip_bilm[0], "--weights", skip_bilm[1], "--batch_size", "2"]
    assert main(model + ["--input", str(fifo), "--output", str(tmp_path / "pipe.hdf5")]) == 0
    writer.join()
    assert main(model + ["--input", str(tmp_path / "sentences.txt"), "--output", str(tmp_path / "file.hdf5")]) == 0
    piped, filed = read_output(tmp_path / "pipe.hdf5"), read_output(tmp_path / "file.hdf5")
    assert sorted(piped) == sorted(filed) == ["0", "1", "2", "3"]
    for key in filed:
        np.testing.assert_array_equal(piped[key], filed[key])


def test_a_sentence_given_as_a_str_is_an_error(skip_bilm):
    """A str is a sequence of characters: each was embedded as a word, silently."""
    embedder = ElmoEmbedder(skip_bilm[0], skip_bilm[1], batch_size=2)
    for call in (lambda: embedder.embed_sentence("the cat sat"), lambda: embedder.embed_batch(["a dog", ["ok"]]),
                 lambda: list(embedder.embed_sentences(["the cat"]))):
        with pytest.raises(TypeError, match=r"sentence \d is a str \('(the cat sat|a dog|the cat)'\), not its list of "
                                            r"tokens"):
            call()


def test_raw_chinese_given_as_one_token_a_sentence_is_warned_about_once(skip_bilm, tmp_path, caplog):
    embedder = ElmoEmbedder(skip_bilm[0], skip_bilm[1], batch_size=2)
    with caplog.at_level(logging.WARNING):
        embedder.embed_batch([["我爱吃苹果。"], ["苹果公司发布了新手机。"]])
        embedder.embed_batch([["苹果公司发布了新手机。"]])
        ElmoEmbedder(skip_bilm[0], skip_bilm[1]).embed_batch([["苹果", "公司"], ["发布", "了", "新", "手机", "。"]])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("the sentences embedded look like Chinese or Japanese text")


def test_cli_input_conllu_embeds_each_sentences_words(skip_bilm, tmp_path):
    """Comment lines and ten columns were embedded as words."""
    (tmp_path / "in.conllu").write_text(
        "# text = the cat sat\n1\tthe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
        "3\tsat\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n1\ta\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\tNOUN\t_\t_\t0\t"
        "root\t_\t_\n\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text("the cat sat\na dog\n")
    model = ["--options", skip_bilm[0], "--weights", skip_bilm[1], "--batch_size", "2"]
    for name in ("in.conllu", "in.txt"):
        assert main(model + ["--input", str(tmp_path / name), "--output", str(tmp_path / f"{name}.hdf5")]) == 0
    conllu, text = read_output(tmp_path / "in.conllu.hdf5"), read_output(tmp_path / "in.txt.hdf5")
    assert sorted(conllu) == sorted(text) == ["0", "1"]
    for key in text:
        np.testing.assert_array_equal(conllu[key], text[key])


def test_segmenter_jieba_embeds_raw_chinese_lines_as_their_segmented_twins(skip_bilm, tmp_path, capsys):
    pytest.importorskip("jieba", reason="--segmenter jieba needs the jieba package (pip install 'elmo-jax[zh]')")
    options_path, weights_path, reference = skip_bilm
    (tmp_path / "raw.txt").write_text("我爱北京天安门\r\n他来到了网易杭研大厦\r\n", encoding="utf-8")
    words = [["我", "爱", "北京", "天安门"], ["他", "来到", "了", "网易", "杭研", "大厦"]]
    model = ["--options", options_path, "--weights", weights_path, "--batch_size", str(BATCH)]
    assert main(model + ["--input", str(tmp_path / "raw.txt"), "--output", str(tmp_path / "cli.hdf5"),
                         "--segmenter", "jieba"]) == 0
    out = read_output(tmp_path / "cli.hdf5")
    assert_matches([out["0"], out["1"]], reference.embed_batches(words, BATCH))
    embedder = ElmoEmbedder(options_path, weights_path, batch_size=BATCH)
    with open(tmp_path / "raw.txt", encoding="utf-8") as f:  # An open file, cut the same.
        assert embedder.embed_file(f, str(tmp_path / "api.hdf5"), segmenter="jieba", progress=False) == 2
    api = read_output(tmp_path / "api.hdf5")
    np.testing.assert_array_equal(api["1"], out["1"])
    (tmp_path / "vocab.txt").write_text("北京\n")
    assert main(model + ["--token_embeddings", str(tmp_path / "vocab.txt"), "--output", str(tmp_path / "t.hdf5"),
                         "--segmenter", "jieba"]) == 1
    assert "--segmenter cuts the lines of --input" in capsys.readouterr().err


def test_segmenter_jieba_vocabulary_embeds_jiebas_words_cut_into_the_vocabularys(skip_bilm, tmp_path, capsys):
    """jieba's 苹果公司 and 新手机 are outside a gold-segmented vocabulary that has 苹果, 公司, 新 and 手机:
    they are embedded as those words; bilm-tf files have no vocabulary, so the CLI needs --workdir."""
    pytest.importorskip("jieba", reason="--segmenter jieba needs the jieba package (pip install 'elmo-jax[zh]')")
    options_path, weights_path, reference = skip_bilm
    (tmp_path / "raw.txt").write_text("苹果公司发布了新手机\n", encoding="utf-8")
    assert segmenter.splitter("jieba")("苹果公司发布了新手机") == ["苹果公司", "发布", "了", "新手机"]
    vocabulary = Vocabulary([*SPECIAL_TOKENS, "苹果", "公司", "发布", "了", "新", "手机"])
    embedder = ElmoEmbedder(options_path, weights_path, batch_size=BATCH)
    assert embedder.embed_file(str(tmp_path / "raw.txt"), str(tmp_path / "out.hdf5"), progress=False,
                               segmenter="jieba_vocabulary", vocabulary=vocabulary) == 1
    words = [["苹果", "公司", "发布", "了", "新", "手机"]]
    assert_matches([read_output(tmp_path / "out.hdf5")["0"]], reference.embed_batches(words, BATCH))
    assert main(["--options", options_path, "--weights", weights_path, "--input", str(tmp_path / "raw.txt"),
                 "--output", str(tmp_path / "cli.hdf5"), "--segmenter", "jieba_vocabulary"]) == 1
    assert "--segmenter jieba_vocabulary reads --workdir's vocabulary: give --workdir" in capsys.readouterr().err

def test_a_workdir_trained_on_jiebas_words_embeds_raw_lines_cut_by_jieba(tmp_path, capsys):
    """`elmo-embed --workdir` cuts --input as the run's data.segmenter cut its training text, unless told."""
    pytest.importorskip("jieba", reason="data.segmenter='jieba' needs the jieba package (pip install 'elmo-jax[zh]')")
    workdir = make_checkpoint_workdir(tmp_path, **{"data.segmenter": "jieba"})
    (tmp_path / "raw.txt").write_text("我爱北京天安门\n", encoding="utf-8")
    outputs = {}
    for name, flags in (("saved", []), ("none", ["--segmenter", "none"])):
        out = str(tmp_path / f"{name}.hdf5")
        assert main(["--workdir", workdir, "--input", str(tmp_path / "raw.txt"), "--output", out, *flags]) == 0
        outputs[name] = read_output(out)["0"]
    assert outputs["saved"].shape[1] == 4 and outputs["none"].shape[1] == 1  # 我 爱 北京 天安门 | the whole line.


def test_a_workdir_embedding_says_how_many_tokens_are_outside_its_vocabulary_and_warns_of_another_segmenter(
    tmp_path, caplog
):
    """demo_zh learned gold segmentation; jieba's 苹果公司 is outside its vocabulary: say so."""
    workdir = make_checkpoint_workdir(tmp_path)
    with open(os.path.join(workdir, "vocab.txt"), encoding="utf-8") as f:
        known = [line.split("\t")[0].strip() for line in f][5:7]
    (tmp_path / "in.txt").write_text(f"{known[0]} zzqx {known[1]}\nqqzv\n", encoding="utf-8")
    with caplog.at_level(logging.INFO):
        assert main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output",
                     str(tmp_path / "out.hdf5"), "--segmenter", "none"]) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("2 of the 4 tokens (50.0%) are outside the biLM's vocabulary of ") for m in messages), messages
    assert not any("cuts the text otherwise" in m for m in messages)  # --segmenter none: the run's own.
    pytest.importorskip("jieba", reason="--segmenter jieba needs the jieba package (pip install 'elmo-jax[zh]')")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output",
                     str(tmp_path / "jieba.hdf5"), "--segmenter", "jieba"]) == 0
    assert any(r.getMessage().startswith(f"--segmenter jieba cuts the text otherwise than {workdir}'s training text")
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # The segmenter for a biLM trained on text segmented before training.
        assert main(["--workdir", workdir, "--input", str(tmp_path / "in.txt"), "--output",
                     str(tmp_path / "pieces.hdf5"), "--segmenter", "jieba_vocabulary"]) == 0
    assert not any("cuts the text otherwise" in r.getMessage() for r in caplog.records)
