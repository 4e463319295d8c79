"""AllenNLP's `tests/modules/elmo_test.py`, ported call for call (names and tolerances kept), on a
small random biLM in bilm-tf files shaped as AllenNLP's fixture (2 layers, projection 16: outputs
of 32; tests/allennlp_fixtures.py), checked against the NumPy reference where AllenNLP checks
against bilm-tf's outputs.

Differences of design:
- AllenNLP's private `_ElmoBiLm` (the biLM's layers and mask) and `_ElmoCharacterEncoder` (its
  token embeddings) have no counterpart: `elmo_bilm` below is an `Elmo` whose representation k is
  exactly layer k (`scalar_parameters` one-hot, gamma 1, boundaries kept), and the token
  embeddings are layer 0's first half. AllenNLP's `ElmoTokenEmbedder` is `Elmo` with one output.
- Flax: `elmo.apply(variables, ...)` after `init`; a stateful `Elmo` carries its states in the
  collection 'elmo_state' (`stateful=True`; AllenNLP's `Elmo` is always stateful, elmo-jax's is
  stateless by default, so `reset_states()` has nothing to do); gradients are taken w.r.t. 'params'
  (a frozen biLM is not there: AllenNLP's `grad is None`).
- `Elmo(None, None, 2, module=...)` (a biLM already built): a biLM not in bilm-tf files is a
  training workdir, `Elmo(None, None, 2, workdir=...)`; its char ids are as wide as it reads.
- The fixture sentences and words are generated here (AllenNLP's files are not in this repository).
"""

from __future__ import annotations

import numpy
import jax
import jax.numpy as jnp
import pytest

from elmo_jax import Elmo, batch_to_ids
from elmo_jax.workdir.runs import load_params
from tests.allennlp_fixtures import ElmoFiles, write_elmo_files
from tests.training.helpers import make_checkpoint_workdir

WORDS = "the a of cat sat on mat . , dog ran old man saw birds sing ELMo helps Elmo from is This OOV so".split()
ONE_LAYER = -1e9  # exp(-1e9) is 0 in float32: a scalar mix of exactly one layer.


@pytest.fixture(scope="module")
def elmo_files(tmp_path_factory) -> ElmoFiles:
    """(options_file, weight_file, NumPy reference)."""
    return write_elmo_files(tmp_path_factory.mktemp("elmo"))


def _ElmoBiLm(options_file, weight_file, **options) -> Elmo:  # noqa: N802 (AllenNLP's name)
    """An Elmo whose representations are the biLM's layers `[B, T + 2, 32]` (`layer_variables`)."""
    return Elmo(options_file, weight_file, 3, dropout=0.0, keep_sentence_boundaries=True, **options)


def layer_variables(variables: dict) -> dict:
    """`variables` of `_ElmoBiLm` with mix k = layer k (gamma 1)."""
    mixes = {
        f"scalar_mix_{k}": {"scalar_parameters": jnp.where(jnp.arange(3) == k, 0.0, ONE_LAYER), "gamma": jnp.ones(())}
        for k in range(3)
    }
    return {**variables, "params": mixes}


def forward(elmo: Elmo, stateful: bool = False):
    """AllenNLP's `_ElmoBiLm.forward` of `elmo` (an `_ElmoBiLm`), jitted: `(variables, *inputs)` ->
    `{'activations': 3 arrays, 'mask'}`; stateful: also the variables with the new states."""
    mutable = ["elmo_state"] if stateful else False
    apply = jax.jit(lambda variables, *inputs: elmo.apply(layer_variables(variables), *inputs, mutable=mutable))

    def call(variables: dict, *inputs) -> dict:
        out = apply(variables, *inputs)
        out, new = out if stateful else (out, {})
        return {"activations": out["elmo_representations"], "mask": out["mask"], "variables": {**variables, **new}}

    return call


def remove_sentence_boundaries(tensor, mask) -> tuple[numpy.ndarray, numpy.ndarray]:
    """AllenNLP's `nn.util.remove_sentence_boundaries`: drops each row's first and last unmasked positions."""
    tensor, mask = numpy.asarray(tensor), numpy.asarray(mask)
    lengths = mask.sum(axis=1)
    out = numpy.zeros((tensor.shape[0], tensor.shape[1] - 2) + tensor.shape[2:], tensor.dtype)
    new_mask = numpy.zeros((mask.shape[0], mask.shape[1] - 2), bool)
    for row, n in enumerate(lengths):
        if n > 2:
            out[row, : n - 2] = tensor[row, 1 : n - 1]
            new_mask[row, : n - 2] = True
    return out, new_mask


def sentences_json(seed: int = 0) -> list[list[str]]:
    """As AllenNLP's sentences.json: 3 lists of 10 sentences; the k-th sentence of batch i is
    `sentences[k][i]`. Every batch's longest sentence has 9 tokens (one compilation)."""
    rng = numpy.random.default_rng(seed)
    lengths = [[9] * 10, rng.integers(1, 10, 10), rng.integers(1, 10, 10)]
    return [[" ".join(rng.choice(WORDS, n)) for n in row] for row in lengths]


def get_vocab_and_both_elmo_indexed_ids(batch: list[list[str]]) -> tuple[list[str], dict]:
    """AllenNLP's helper: (the batch's vocabulary, padding and unknown first, then by count;
    {'character_ids': [B, T, 50], 'tokens': [B, T] word ids in that vocabulary})."""
    counts: dict[str, int] = {}
    for sentence in batch:
        for token in sentence:
            counts[token] = counts.get(token, 0) + 1
    vocab = ["@@PADDING@@", "@@UNKNOWN@@"] + sorted(counts, key=lambda w: -counts[w])
    index = {word: i for i, word in enumerate(vocab)}
    tokens = numpy.zeros((len(batch), max(map(len, batch))), numpy.int32)
    for row, sentence in enumerate(batch):
        tokens[row, : len(sentence)] = [index[token] for token in sentence]
    return vocab, {"character_ids": batch_to_ids(batch), "tokens": tokens}


def init(elmo: Elmo, character_ids) -> dict:
    return jax.jit(elmo.init)(jax.random.key(0), character_ids)


# ----------------------------------------------------------------------------- TestElmoBiLm


def test_elmo_bilm(elmo_files):
    options_file, weight_file, reference = elmo_files
    sentences = sentences_json()
    # The expected embeddings: bilm-tf's (here the NumPy reference's), stateful, batches of 3.
    ordered = [sentence.split() for batch in zip(*sentences) for sentence in batch]
    expected = reference.embed_batches(ordered, 3, stateful=True)
    stateless = reference.embed_batches(ordered, 3, stateful=False)
    assert not numpy.allclose(expected[-1][2], stateless[-1][2], atol=1e-3)  # The carried states matter.

    elmo_bilm = _ElmoBiLm(options_file, weight_file, stateful=True)
    variables = init(elmo_bilm, batch_to_ids([["init"]] * 3))
    elmo_bilm_forward = forward(elmo_bilm, stateful=True)
    for i, batch in enumerate(zip(*sentences)):
        lm_embeddings = elmo_bilm_forward(variables, batch_to_ids([s.split() for s in batch]))
        variables = lm_embeddings["variables"]
        top_layer_embeddings, mask = remove_sentence_boundaries(
            lm_embeddings["activations"][2], lm_embeddings["mask"]
        )
        # check the mask lengths
        lengths = mask.sum(axis=1)
        expected_lengths = [len(sentence.split()) for sentence in batch]
        assert lengths.tolist() == expected_lengths
        # get the expected embeddings and compare!
        for k in range(3):
            expected_top_layer = expected[3 * i + k][2]
            assert numpy.allclose(top_layer_embeddings[k, : lengths[k], :], expected_top_layer, atol=1.0e-6)


def test_elmo_char_cnn_cache_does_not_raise_error_for_uncached_words(elmo_files):
    sentences = [["This", "is", "OOV"], ["so", "is", "this"]]
    in_vocab_sentences = [["here", "is"], ["a", "vocab"]]
    oov_tensor = get_vocab_and_both_elmo_indexed_ids(sentences)[1]
    vocab, in_vocab_tensor = get_vocab_and_both_elmo_indexed_ids(in_vocab_sentences)
    words_to_cache = list(vocab)
    elmo_bilm = _ElmoBiLm(*elmo_files[:2], vocab_to_cache=words_to_cache)
    variables = init(elmo_bilm, in_vocab_tensor["character_ids"])

    elmo_bilm_forward = forward(elmo_bilm)
    elmo_bilm_forward(variables, in_vocab_tensor["character_ids"], in_vocab_tensor["tokens"])
    oov = elmo_bilm_forward(variables, oov_tensor["character_ids"], oov_tensor["tokens"])
    # Beyond AllenNLP's test: the char CNN gave those words, no NaN.
    by_chars = elmo_bilm_forward(variables, oov_tensor["character_ids"])
    for got, want in zip(oov["activations"], by_chars["activations"]):
        assert numpy.all(numpy.isfinite(got))
        numpy.testing.assert_array_almost_equal(got, want, decimal=6)


def test_elmo_bilm_can_cache_char_cnn_embeddings(elmo_files):
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab, tensor = get_vocab_and_both_elmo_indexed_ids(sentences)
    words_to_cache = list(vocab)
    elmo_bilm = _ElmoBiLm(*elmo_files[:2])
    variables = init(elmo_bilm, tensor["character_ids"])
    no_cache = forward(elmo_bilm)(variables, tensor["character_ids"], tensor["character_ids"])

    elmo_bilm = _ElmoBiLm(*elmo_files[:2], vocab_to_cache=words_to_cache)
    variables = init(elmo_bilm, tensor["character_ids"])
    cached = forward(elmo_bilm)(variables, tensor["character_ids"], tensor["tokens"])

    numpy.testing.assert_array_almost_equal(no_cache["mask"], cached["mask"])
    for activation_cached, activation in zip(cached["activations"], no_cache["activations"]):
        numpy.testing.assert_array_almost_equal(activation_cached, activation, decimal=6)


# ----------------------------------------------------------------------------- TestElmo

ELMO_SENTENCES = [
    ["The", "sentence", "."],
    ["ELMo", "helps", "disambiguate", "ELMo", "from", "Elmo", "."],
]


@pytest.fixture(scope="module")
def elmo(elmo_files):
    """TestElmo's setup: (Elmo(options, weights, 2, dropout=0.0), its variables)."""
    module = Elmo(*elmo_files[:2], 2, dropout=0.0)
    return module, init(module, _sentences_to_ids(ELMO_SENTENCES))


def _sentences_to_ids(sentences):
    return batch_to_ids(sentences)


def test_elmo(elmo):
    # Correctness checks are in ElmoBiLm and ScalarMix, here we just add a shallow test
    # to ensure things execute.
    module, variables = elmo
    character_ids = _sentences_to_ids(ELMO_SENTENCES)
    output = module.apply(variables, character_ids)
    elmo_representations = output["elmo_representations"]
    mask = output["mask"]

    assert len(elmo_representations) == 2
    assert list(elmo_representations[0].shape) == [2, 7, 32]
    assert list(elmo_representations[1].shape) == [2, 7, 32]
    assert list(mask.shape) == [2, 7]


def test_elmo_keep_sentence_boundaries(elmo_files):
    module = Elmo(*elmo_files[:2], 2, dropout=0.0, keep_sentence_boundaries=True)
    character_ids = _sentences_to_ids(ELMO_SENTENCES)
    output = module.apply(init(module, character_ids), character_ids)
    elmo_representations = output["elmo_representations"]
    mask = output["mask"]

    assert len(elmo_representations) == 2
    # Add 2 to the lengths because we're keeping the start and end of sentence tokens.
    assert list(elmo_representations[0].shape) == [2, 7 + 2, 32]
    assert list(elmo_representations[1].shape) == [2, 7 + 2, 32]
    assert list(mask.shape) == [2, 7 + 2]


def test_elmo_4D_input(elmo):  # noqa: N802 (AllenNLP's name)
    module, variables = elmo
    sentences = [
        [["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from", "Elmo", "."]],
        [["1", "2"], ["1", "2", "3", "4", "5", "6", "7"]],
        [["1", "2", "3", "4", "50", "60", "70"], ["The"]],
    ]
    all_character_ids = [_sentences_to_ids(batch_sentences) for batch_sentences in sentences]

    # (2, 3, 7, 50)
    character_ids = numpy.stack(all_character_ids, axis=1)
    apply = jax.jit(module.apply)
    embeddings_4d = apply(variables, character_ids)
    assert embeddings_4d["elmo_representations"][0].shape == (2, 3, 7, 32)
    assert embeddings_4d["mask"].shape == (2, 3, 7)

    # Run the individual batches (elmo-jax's Elmo is stateless: no states to reset).
    embeddings_3d = [apply(variables, char_ids) for char_ids in all_character_ids]

    for k in range(3):
        numpy.testing.assert_array_almost_equal(
            embeddings_4d["elmo_representations"][0][:, k, :, :], embeddings_3d[k]["elmo_representations"][0]
        )
        numpy.testing.assert_array_equal(embeddings_4d["mask"][:, k], embeddings_3d[k]["mask"])


def test_elmo_with_module(tmp_path):
    # A biLM not from bilm-tf files: an elmo-jax training workdir.
    workdir = make_checkpoint_workdir(tmp_path)
    elmo = Elmo(None, None, 2, dropout=0.0, workdir=workdir)
    character_ids = batch_to_ids(ELMO_SENTENCES, elmo.max_chars)
    output = elmo.apply(init(elmo, character_ids), character_ids)
    elmo_representations = output["elmo_representations"]

    width = 2 * load_params(workdir)[0].model.width
    assert len(elmo_representations) == 2
    for k in range(2):
        assert list(elmo_representations[k].shape) == [2, 7, width]


def test_elmo_bilm_can_handle_higher_dimensional_input_with_cache(elmo_files):
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab, tensor = get_vocab_and_both_elmo_indexed_ids(sentences)
    words_to_cache = list(vocab)
    elmo_bilm = Elmo(*elmo_files[:2], 1, vocab_to_cache=words_to_cache)
    variables = init(elmo_bilm, tensor["character_ids"])
    apply = jax.jit(elmo_bilm.apply)

    individual_dim = apply(variables, tensor["character_ids"], tensor["tokens"])

    expanded_word_ids = numpy.stack([tensor["tokens"] for _ in range(4)], axis=1)
    expanded_char_ids = numpy.stack([tensor["character_ids"] for _ in range(4)], axis=1)
    expanded_result = apply(variables, expanded_char_ids, expanded_word_ids)
    split_result = [expanded_result["elmo_representations"][0][:, k] for k in range(4)]
    for expanded in split_result:
        numpy.testing.assert_array_almost_equal(expanded, individual_dim["elmo_representations"][0])


# ----------------------------------------------------------------------------- TestElmoRequiresGrad


def _run_test(elmo_files, requires_grad):
    embedder = Elmo(*elmo_files[:2], 1, requires_grad=requires_grad)  # AllenNLP's ElmoTokenEmbedder
    batch_size = 3
    seq_len = 4
    char_ids = numpy.random.default_rng(0).integers(0, 262, (batch_size, seq_len, 50)).astype(numpy.int32)
    variables = init(embedder, char_ids)
    params, others = variables.get("params", {}), {k: v for k, v in variables.items() if k != "params"}

    def loss(params):
        embeddings = embedder.apply({"params": params, **others}, char_ids)["elmo_representations"][0]
        return embeddings.sum()

    grads = jax.jit(jax.grad(loss))(params)
    elmo_grads = jax.tree.leaves(grads.get("bilm", {}))
    if requires_grad:
        # None of the elmo grads should be None.
        assert len(elmo_grads) == len(jax.tree.leaves(embedder.bilm_params))
        assert all(numpy.all(numpy.isfinite(grad)) for grad in elmo_grads)
    else:
        # All of the elmo grads should be None.
        assert elmo_grads == []
        assert set(grads) == {"scalar_mix_0"}


def test_elmo_requires_grad(elmo_files):
    _run_test(elmo_files, True)


def test_elmo_does_not_require_grad(elmo_files):
    _run_test(elmo_files, False)


# ----------------------------------------------------------------------------- TestElmoTokenRepresentation


def vocab_test_words(n: int = 457) -> list[str]:
    """As AllenNLP's vocab_test.txt: 457 words, here generated (ASCII, non-ASCII, over 48 bytes)."""
    rng = numpy.random.default_rng(1)
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,'-") + ["é", "中", "ß"]
    return ["".join(rng.choice(alphabet, rng.integers(1, 55 if i % 50 == 0 else 12))) for i in range(n)]


def test_elmo_token_representation(elmo_files):
    # Load the test words and convert to char ids
    words = vocab_test_words()
    # There are 457 tokens. Reshape into 10 batches of 50 tokens.
    sentences = [words[(k * 50) : ((k + 1) * 50)] for k in range(10)]
    batch = batch_to_ids(sentences)

    elmo_token_embedder = _ElmoBiLm(*elmo_files[:2])
    elmo_token_embedder_output = forward(elmo_token_embedder)(init(elmo_token_embedder, batch), batch)

    # Reshape back to a list of words and compare with ground truth.  Need to also
    # remove <S>, </S>
    token_embedding = numpy.asarray(elmo_token_embedder_output["activations"][0])[..., :16]  # [x; x]: x
    actual_embeddings, mask = remove_sentence_boundaries(token_embedding, elmo_token_embedder_output["mask"])
    actual_embeddings = actual_embeddings[mask]

    expected_embeddings = numpy.stack([elmo_files[2].token_embedding(word) for word in words])
    assert numpy.allclose(actual_embeddings[: len(words)], expected_embeddings, atol=1e-6)


def test_elmo_token_representation_bos_eos(elmo_files):
    # The additional <S> and </S> embeddings added by the embedder should be as expected.
    elmo_token_embedder = _ElmoBiLm(*elmo_files[:2])
    variables = init(elmo_token_embedder, batch_to_ids([["<S>"]]))
    elmo_token_embedder_forward = forward(elmo_token_embedder)

    for correct_index, token in [[0, "<S>"], [2, "</S>"]]:
        indices = batch_to_ids([[token]])  # [1, 1, 50]
        embeddings = elmo_token_embedder_forward(variables, indices)["activations"][0]
        assert numpy.allclose(embeddings[0, correct_index, :], embeddings[0, 1, :])
