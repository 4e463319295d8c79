"""The token encoders behind one interface: the registry, what each reads, its width and FLOPs,
and the module it builds for the biLM."""

import jax
import pytest
from flax.core import FrozenDict

from elmo_jax.config import schema
from elmo_jax.sections import ConfigError
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM
from elmo_jax.model.char_cnn import CharCNNEncoder, CharCNNTokens
from elmo_jax.model.initial_params import dummy_inputs, param_shapes
from elmo_jax.model.token_encoder_registry import IMPORTED_ENCODERS, TOKEN_ENCODERS, token_encoder_class
from elmo_jax.model.word_encoder import WordEncoder, WordTokens

FILTERS = ((1, 4), (2, 8), (3, 8))  # 20 channels.
CHAR_CNN = FrozenDict({**CHAR_CNN_DEFAULTS, "filters": FILTERS, "embed_dim": 4, "n_highway": 1})


def test_the_registry_names_the_schemas_token_encoders():
    assert list(TOKEN_ENCODERS) == ["char_cnn", "word"] and list(IMPORTED_ENCODERS) == ["manylangs"]
    # The imported one is a value too: only init.manylangs sets it (its check_config refuses it otherwise).
    assert list(schema.keys()["model.token_encoder"].check.choices) == ["char_cnn", "word", "manylangs"]
    assert token_encoder_class("word") is WordTokens
    with pytest.raises(ConfigError, match=r"^config key model.token_encoder='bytes' is not one of 'char_cnn', 'word'$"):
        token_encoder_class("bytes")


def test_what_each_reads_and_what_the_bilm_tf_format_holds():
    assert CharCNNTokens.reads_chars and CharCNNTokens.max_chars(20) == 20 and CharCNNTokens.bilm_tf_format
    assert not WordTokens.reads_chars and WordTokens.max_chars(20) is None and not WordTokens.bilm_tf_format


@pytest.mark.parametrize("projection, width", [(True, 16), (False, 20)])
def test_the_char_cnns_width_is_p_with_its_projection_else_its_channels(projection, width):
    assert CharCNNTokens.width({**CHAR_CNN, "projection": projection}, 16) == width
    assert WordTokens.width({**CHAR_CNN, "projection": projection}, 16) == 16


def test_flops_per_token_count_the_convolutions_highways_and_projection():
    model = {"char_cnn": {**CHAR_CNN, "projection": True}, "width": 16}
    convolutions = 2 * 4 * (1 * 4 * 10 + 2 * 8 * 9 + 3 * 8 * 8)  # 2 x d x sum(w n (C - w + 1)), C = 10.
    assert CharCNNTokens.flops_per_token(model, 10) == {
        "char_cnn": convolutions, "highway": 1 * 2 * 2 * 20 * 20, "token_projection": 2 * 20 * 16,
    }
    assert WordTokens.flops_per_token(model, 10) == {}


@pytest.mark.parametrize("encoder, module", [("char_cnn", CharCNNEncoder), ("word", WordEncoder)])
def test_the_biLM_builds_the_registered_encoders_module_and_inputs(encoder, module):
    bilm = BiLM(vocab_size=30, token_encoder=encoder, char_cnn=CHAR_CNN, width=16,
                contextualizer_fields=FrozenDict(dim=8, n_layers=1))
    assert isinstance(token_encoder_class(encoder).module(bilm), module)
    assert ("char_ids" in dummy_inputs(bilm, 1, 1, 10)) == token_encoder_class(encoder).reads_chars
    shapes = param_shapes(bilm, 10)["encoder"]
    if encoder == "word":
        assert shapes["embedding"].shape == (30, 16)  # A row per vocabulary word.
    else:
        assert shapes["char_embed"].shape == (262, 4) and shapes["W_proj"].shape == (20, 16)
    embedded = jax.eval_shape(
        lambda p, x: bilm.apply({"params": p}, x, method=BiLM.embed_tokens),
        param_shapes(bilm, 10), dummy_inputs(bilm, 2, 3, 10),
    )
    assert embedded.shape == (2, 2, 3, 16)
