"""elmo_jax.elmo.Elmo of an ELMoForManyLangs model directory (`manylangs=`): fed its own inputs
(`elmo.batch_to_ids`), its mixes of the fixture models' layers (tests/interop/manylangs/, made with
ELMoForManyLangs itself) are its `sents2elmo` outputs to 1e-5; the sources are exclusive; the docs'
example runs."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.elmo import Elmo, ElmoBiLM, batch_to_ids, batch_to_word_ids
from tests.doc_blocks import code_blocks
from tests.interop.test_manylangs_bilm import FIXTURES, MODELS, SENTENCES, expected

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "elmoformanylangs.md")

# Pre-softmax scalars selecting ELMoForManyLangs' output_layer 0, 1, 2 (exp(-1e4) is 0 in float32) and -1,
# the mean of the three.
SELECT = {0: (0.0, -1e4, -1e4), 1: (-1e4, 0.0, -1e4), 2: (-1e4, -1e4, 0.0), -1: (0.0, 0.0, 0.0)}


def with_mixes(variables: dict) -> dict:
    """`variables` of an Elmo of len(SELECT) trainable mixes, the k-th set to SELECT's k-th (gamma 1)."""
    params = {f"scalar_mix_{k}": {"scalar_parameters": jnp.asarray(s, jnp.float32), "gamma": jnp.ones((), jnp.float32)}
              for k, s in enumerate(SELECT.values())}
    return {**variables, "params": params}


def assert_sents2elmo(representation: np.ndarray, want: dict, layer: int, offset: int = 0) -> None:
    """Each sentence's rows `[offset, offset + n)` of `representation` `[B, T, 2P]` are output_layer `layer`'s."""
    for i, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(representation[i, offset : offset + len(sentence)],
                                   want[f"output_layer_{layer}_sentence_{i}"], rtol=0, atol=1e-5,
                                   err_msg=f"output_layer {layer}, sentence {i}")


@pytest.mark.parametrize("name", MODELS)
def test_elmos_mixes_of_a_manylangs_model_are_its_sents2elmo_layers(name):
    """Every layer and their mean, padding zero and the mask each sentence's words; `<S>`/`</S>` kept
    with keep_sentence_boundaries around the same numbers."""
    want = expected(name)
    elmo = Elmo(None, None, len(SELECT), dropout=0.0, keep_sentence_boundaries=True,
                manylangs=os.path.join(FIXTURES, name))
    ids = elmo.batch_to_ids(SENTENCES)
    assert ids.shape == (len(SENTENCES), max(map(len, SENTENCES)), elmo.max_chars)
    variables = with_mixes(elmo.init(jax.random.key(0), ids))
    out = jax.jit(elmo.apply)(variables, ids)
    lengths = [len(s) for s in SENTENCES]
    np.testing.assert_array_equal(np.asarray(out["mask"]).sum(axis=1), np.array(lengths) + 2)
    for representation, layer in zip(out["elmo_representations"], SELECT):
        representation = np.asarray(representation)
        assert_sents2elmo(representation, want, layer, offset=1)
        for i, n in enumerate(lengths):
            assert not np.any(representation[i, n + 2 :])


def test_a_fixed_mix_and_vocab_to_cache_give_the_same_layer():
    """scalar_mix_parameters selecting layer 1 gives output_layer 1, from the model's char ids and from
    vocab_to_cache's word ids alike."""
    want = expected("cnn_words")
    vocab = ("@@PADDING@@", *sorted({w for s in SENTENCES for w in s}))
    elmo = Elmo(None, None, 1, dropout=0.0, scalar_mix_parameters=SELECT[1], vocab_to_cache=vocab,
                manylangs=os.path.join(FIXTURES, "cnn_words"))
    ids, word_ids = elmo.batch_to_ids(SENTENCES), batch_to_word_ids(SENTENCES, vocab)
    variables = elmo.init(jax.random.key(0), ids)
    for inputs in ((ids,), (None, word_ids)):
        out = elmo.apply(variables, *inputs)
        np.testing.assert_array_equal(np.asarray(out["mask"]), word_ids > 0)
        assert_sents2elmo(np.asarray(out["elmo_representations"][0]), want, 1)


def test_a_manylangs_model_is_one_source_and_reads_its_own_inputs(tmp_path):
    directory = os.path.join(FIXTURES, "cnn_chars")
    for sources in ({"options_file": "options.json", "weight_file": "weights.hdf5"}, {"workdir": str(tmp_path)},
                    {"step": 3}):
        arguments = {"options_file": None, "weight_file": None, **sources}
        with pytest.raises(ValueError, match=r"or an ELMoForManyLangs model directory \(manylangs\), with None for "
                                             r"the others; got .*manylangs="):
            Elmo(arguments.pop("options_file"), arguments.pop("weight_file"), 1, manylangs=directory, **arguments)
    shared = ElmoBiLM(None, None, manylangs=directory)
    assert repr(shared) == f"ElmoBiLM(None, None, manylangs={os.path.abspath(directory)!r})"
    elmo = Elmo(None, None, 1, manylangs=directory, bilm=shared)
    assert elmo.bilm is shared and elmo.max_chars == 1 + 8  # The word id and max_characters_per_token.
    with pytest.raises(ValueError, match="was not read from"):
        Elmo(None, None, 1, manylangs=os.path.join(FIXTURES, "cnn_words"), bilm=shared)
    with pytest.raises(ValueError, match=r"reads 9 ids per token of its own inputs, got char ids of 50: use "
                                         r"batch_to_ids as the module's method, elmo.batch_to_ids\(sentences\)"):
        jax.eval_shape(elmo.init, jax.random.key(0), batch_to_ids(SENTENCES))
    # The module's function, given the model's inputs as elmo.characters, gives the method's rows.
    np.testing.assert_array_equal(batch_to_ids(SENTENCES, elmo.max_chars, elmo.characters), elmo.batch_to_ids(SENTENCES))


def test_the_docs_example_runs_on_a_fixture_model():
    """docs/elmoformanylangs.md's `Elmo` example, zhs.model replaced by a fixture model (P = 8)."""
    (block,) = code_blocks(DOC)
    namespace: dict = {}
    exec(block.replace('"zhs.model"', repr(os.path.join(FIXTURES, "cnn_words"))), namespace)
    out = namespace["out"]
    assert out["elmo_representations"][0].shape == (2, 4, 16)
    np.testing.assert_array_equal(out["mask"], [[True] * 4, [True, False, False, False]])
