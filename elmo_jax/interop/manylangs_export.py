"""An ELMoForManyLangs biLM (a model directory's, or a workdir's continuing one) as a bilm-tf char-CNN
biLM, where bilm-tf's files can hold it exactly: `bilm_tf_model`.

bilm-tf's char CNN reads UTF-8 bytes (ids 0..255, then <S>, </S>, begin/end of word and padding);
ELMoForManyLangs' reads char.dic's entries, one per code point, and may put a word embedding beside it.
Without a word embedding (word_dim 0) and with every char.dic entry but its specials a single-byte
(ASCII) character, its char table re-indexed by byte is the same function: byte b -> the row of chr(b)
(`<oov>`'s for bytes it lacks), <S>/</S> -> `<bos>`/`<eos>`, begin/end of word -> `<eow>`/`<bow>` (its
marks swapped, data/manylangs_inputs.py), padding -> `<pad>`; words are cut alike (a byte per
character). The layers agree on sentences in those characters; a character of more bytes is several
`<oov>`s in the export, one in the model (and a word spelled '<bos>' is its bytes there).
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_collections
import numpy as np

from elmo_jax.config import schema
from elmo_jax.data.chars import BOS_CHAR, BOW_CHAR, EOS_CHAR, EOW_CHAR, ID_SHIFT, N_CHARACTERS, PAD_CHAR
from elmo_jax.data.manylangs_inputs import ManyLangsInputs
from elmo_jax.interop.manylangs import CHAR_SPECIALS, ManyLangsError

# bilm-tf's special char ids -> the char.dic entry whose row they take.
_SPECIAL_ROWS = {BOS_CHAR: "<bos>", EOS_CHAR: "<eos>", BOW_CHAR: "<eow>", EOW_CHAR: "<bow>", PAD_CHAR: "<pad>"}


def _check_exportable(config: ml_collections.ConfigDict, inputs: ManyLangsInputs, where: str) -> None:
    """ManyLangsError naming `where` when bilm-tf's files cannot hold the model exactly."""
    reason = None
    if config.model.manylangs.word_dim > 0:
        reason = f"its word embedding (word_dim {config.model.manylangs.word_dim}) has no place in them"
    elif inputs.chars is None:
        reason = "it has no char CNN"
    else:
        wide = [e for e in inputs.chars if e not in CHAR_SPECIALS and not (len(e) == 1 and ord(e) < 128)]
        if wide:
            reason = (f"char.dic's {wide[0]!r} (one of {len(wide)} such entries) is not a single-byte character, "
                      "and bilm-tf's char CNN reads UTF-8 bytes")
    if reason:
        raise ManyLangsError(f"{where}: an ELMoForManyLangs model bilm-tf files cannot hold: {reason}")


def _byte_table(table: np.ndarray, chars: Mapping[str, int]) -> np.ndarray:
    """ELMoForManyLangs' char table `[len(char.dic) + 1, char_dim]` (row id + 1) -> bilm-tf's by byte
    `[N_CHARACTERS, char_dim]` (row 0: no token)."""
    rows = np.full(N_CHARACTERS, chars["<oov>"] + ID_SHIFT)
    rows[0] = 0
    for byte in range(128):
        rows[byte + ID_SHIFT] = chars.get(chr(byte), chars["<oov>"]) + ID_SHIFT
    for char_id, entry in _SPECIAL_ROWS.items():
        rows[char_id + ID_SHIFT] = chars[entry] + ID_SHIFT
    return np.asarray(table)[rows]


def bilm_tf_model(
    config: ml_collections.ConfigDict, params: Mapping[str, Any], inputs: ManyLangsInputs, where: str
) -> tuple[ml_collections.ConfigDict, dict]:
    """(the char-CNN config, its params) of an ELMoForManyLangs biLM's `config` (model.token_encoder
    'manylangs') and `params`, reading bytes; ManyLangsError naming `where` (its model directory or
    workdir) and the reason where no bilm-tf biLM computes the same."""
    _check_exportable(config, inputs, where)
    converted = ml_collections.ConfigDict(config.to_dict())
    converted.model.token_encoder = "char_cnn"
    converted.model.manylangs = schema.get_config().model.manylangs
    encoder = params["encoder"]
    cnn = {k: v for k, v in encoder["char_cnn"].items() if k != "char_embed"}
    char_embed = _byte_table(encoder["char_cnn"]["char_embed"], inputs.chars)
    out = {k: v for k, v in params.items() if k != "encoder"}
    out["encoder"] = {**cnn, "char_embed": char_embed, "W_proj": encoder["W_proj"], "b_proj": encoder["b_proj"]}
    return converted, out
