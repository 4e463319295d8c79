"""ELMoForManyLangs (HIT-SCIR) model directories read without PyTorch.

A released model is a directory (`zht.model/`, as users unzip it) of
- config.json: the training run's options (biLM.py:605, `vars(opt)`); only its `config_path` is read, the
  model configuration json, resolved as `Embedder.get_model` does (elmo.py:116-134);
- char.dic (char_dim > 0) and word.dic (word_dim > 0): 'ENTRY\\tID' lines (biLM.py:597-602);
- token_embedder.pkl and encoder.pkl: the PyTorch state dicts of ConvTokenEmbedder and ElmobiLm
  (biLM.py:277-278), read by interop/torch_pickle.py.

`read_model` reads one, checked whole (interop/manylangs_params.py makes it elmo-jax's biLM,
data/manylangs_inputs.py its token inputs). It is written from ELMoForManyLangs' code at b3de5f1 (file:line
references below are into its elmoformanylangs/). tests/reference/manylangs_numpy.py computes its biLM in
NumPy from a model read here, equal to its `sents2elmo` to 1e-5 on tests/interop/manylangs/ (made by
tools/make_manylangs_fixtures.py with ELMoForManyLangs itself).

Only what Embedder can run is read: token embedder 'cnn' (its 'lstm' one fails at token_embedder.py:44) and
encoder 'elmo' (exactly: frontend.py:190 compares case-sensitively). Every failure is one ValueError line
naming the file (and line) at fault.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from elmo_jax.interop.torch_pickle import read_state_dict

CHAR_SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")  # char.dic must hold (frontend.py:51-70)
WORD_SPECIALS = ("<oov>", "<pad>")  # word.dic must hold (frontend.py:40-41); <bos>/<eos> fall back to <oov>
WHITESPACE_ENTRY = "\u3000"  # the entry of a line whose entry `strip()` removed (elmo.py:144-146)
ACTIVATIONS = ("relu", "tanh")  # the convolutions' activations token_embedder.py:104-109 knows

# ELMoForManyLangs' own configs/ (its third place for a config, elmo.py:127-130; README.md:74-76): the
# released models' configuration, the same in both files at b3de5f1 (cnn_0_... holds word_dim 100 too).
_SAMPLE_CONFIG = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn", "activation": "relu", "n_highway": 2, "word_dim": 100, "char_dim": 50,
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
BUNDLED_CONFIGS = {"cnn_50_100_512_4096_sample.json": _SAMPLE_CONFIG, "cnn_0_100_512_4096_sample.json": _SAMPLE_CONFIG}
BUNDLED_PREFIX = "<elmoformanylangs>/configs/"  # ManyLangsModel.config_path of a bundled config


class ManyLangsError(ValueError):
    """A model directory that can't be read as ELMoForManyLangs reads it: one line, naming the file."""


@dataclass(frozen=True)
class ManyLangsConfig:
    """The model configuration's keys the biLM is built from (frontend.py, modules/token_embedder.py, elmo.py)."""

    word_dim: int  # 0: no word embedding, no word.dic
    char_dim: int  # 0: no char CNN, no char.dic
    filters: tuple[tuple[int, int], ...]  # (width, n_filters) of each convolution
    activation: str  # the convolutions' (the highway layers' is relu whatever this says, token_embedder.py:83)
    n_highway: int
    max_chars: int  # max_characters_per_token: char ids per word, <bow> and <eow> included
    projection_dim: int  # the token embedding's width and each LSTM direction's output
    cell_dim: int  # encoder.dim: each LSTM's memory cell
    n_layers: int
    cell_clip: float  # 0: none (`if self.memory_cell_clip_value:`, lstm_cell_with_projection.py:197, 206)
    proj_clip: float

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters) if self.char_dim > 0 else 0


@dataclass(frozen=True)
class ManyLangsModel:
    """A model directory read: its configuration, dictionaries and both state dicts (float32 arrays)."""

    directory: str
    config_path: str  # the file read (BUNDLED_PREFIX + name for ELMoForManyLangs' own)
    config: ManyLangsConfig
    chars: dict[str, int] | None  # char.dic: entry -> id, ids 0..n-1
    words: dict[str, int] | None  # word.dic
    token_embedder: dict[str, np.ndarray]
    encoder: dict[str, np.ndarray]


# Reading a model directory


def find_config(directory: str) -> tuple[str, dict[str, Any]]:
    """(where, the model configuration) named by `directory`/config.json's `config_path`.

    Tried in ELMoForManyLangs' order (elmo.py:116-134): `directory`/config_path (an absolute config_path as
    it stands: the path of the machine it was trained on, in released models), `directory`/its basename,
    then ELMoForManyLangs' bundled configs/ by basename (BUNDLED_CONFIGS). Between the last two this also tries
    `directory`/configs/basename (not ELMoForManyLangs': a copy of its configs/ beside the model).
    """
    options_path = os.path.join(directory, "config.json")
    options = _read_json(options_path)
    config_path = options.get("config_path") if isinstance(options, dict) else None
    if not isinstance(config_path, str) or not config_path:
        raise ManyLangsError(f"{options_path}: no 'config_path' naming the model configuration json")
    name = os.path.basename(config_path)
    for candidate in (os.path.join(directory, config_path), os.path.join(directory, name),
                      os.path.join(directory, "configs", name)):
        if os.path.isfile(candidate):
            return candidate, _read_json(candidate)
    if name in BUNDLED_CONFIGS:
        return BUNDLED_PREFIX + name, json.loads(json.dumps(BUNDLED_CONFIGS[name]))
    raise ManyLangsError(f"{options_path}: config_path {config_path!r} is neither in {directory} (nor its configs/) "
                         f"nor one of ELMoForManyLangs' configs ({', '.join(BUNDLED_CONFIGS)})")


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ManyLangsError(f"{path}: can't be read ({e.strerror or e})") from e
    except ValueError as e:
        raise ManyLangsError(f"{path}: not JSON ({' '.join(str(e).split())})") from e


def parse_config(config: Any, where: str) -> ManyLangsConfig:
    """The configuration's keys checked for what Embedder can run; a ManyLangsError naming `where` otherwise."""
    try:
        encoder, embedder = config["encoder"], config["token_embedder"]
        if str(embedder["name"]).lower() != "cnn":
            raise ManyLangsError(f"{where}: token_embedder {embedder['name']!r}: only 'cnn' is read "
                                 "(ELMoForManyLangs' 'lstm' token embedder does not run)")
        if encoder["name"] != "elmo":
            raise ManyLangsError(f"{where}: encoder {encoder['name']!r}: only 'elmo' is read")
        char_dim = int(embedder["char_dim"])
        parsed = ManyLangsConfig(
            word_dim=int(embedder["word_dim"]), char_dim=char_dim,
            filters=tuple((int(w), int(n)) for w, n in embedder["filters"]) if char_dim > 0 else (),
            activation=embedder["activation"] if char_dim > 0 else "relu",
            n_highway=int(embedder["n_highway"]) if char_dim > 0 else 0,
            max_chars=int(embedder["max_characters_per_token"]), projection_dim=int(encoder["projection_dim"]),
            cell_dim=int(encoder["dim"]), n_layers=int(encoder["n_layers"]),
            cell_clip=float(encoder["cell_clip"] or 0), proj_clip=float(encoder["proj_clip"] or 0))
    except ManyLangsError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise ManyLangsError(f"{where}: not an ELMoForManyLangs model configuration ({type(e).__name__}: {e})") from e
    _check_config(parsed, where)
    return parsed


def _check_config(c: ManyLangsConfig, where: str) -> None:
    problems = []
    if c.word_dim < 0 or c.char_dim < 0 or c.word_dim + c.char_dim == 0:
        problems.append(f"word_dim {c.word_dim} and char_dim {c.char_dim}: at least one must be > 0")
    if min(c.projection_dim, c.cell_dim, c.n_layers) < 1 or c.n_highway < 0:
        problems.append("projection_dim, dim and n_layers must be > 0, n_highway >= 0")
    if c.char_dim > 0:
        if c.activation not in ACTIVATIONS:
            problems.append(f"activation {c.activation!r} is neither of {sorted(ACTIVATIONS)}")
        if c.max_chars < 7:  # '<bos>' + <bow> + <eow> must fit (frontend.py:57)
            problems.append(f"max_characters_per_token {c.max_chars} < 7, the characters of '<bos>' with its marks")
        if not c.filters or any(w < 1 or n < 1 or w > c.max_chars for w, n in c.filters):
            problems.append(f"filters {[list(f) for f in c.filters]}: widths 1..max_characters_per_token, counts > 0")
    elif c.max_chars < 3:
        problems.append(f"max_characters_per_token {c.max_chars} < 3 leaves no character of a word")
    if problems:
        raise ManyLangsError(f"{where}: {'; '.join(problems)}")


def read_dictionary(path: str) -> dict[str, int]:
    """char.dic or word.dic: `{entry: id}`, the ids exactly 0..n-1.

    Read as elmo.py:142-148 reads them: lines as `codecs.open(..., 'utf-8')` splits them (str.splitlines:
    U+0085, U+2028 ... end lines too), each `strip()`ped and split at tabs into 'ENTRY', 'ID'; a line left
    with one field is the whitespace entry U+3000 (what 'CHAR\\tID' of a whitespace CHAR reads back as). A
    line without exactly those fields or with an ID `int()` refuses, a repeated entry, and ids that are not
    0..n-1 (ELMoForManyLangs' embedding has len(dict) rows) are a ManyLangsError naming `path:line`.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ManyLangsError(f"{path}: can't be read ({e.strerror or e})") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ManyLangsError(f"{path}:{line}: not UTF-8 ({e.reason})") from e
    entries: dict[str, int] = {}
    where: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, WHITESPACE_ENTRY)
        try:
            entry, index = fields
            index = int(index)
        except ValueError:
            raise ManyLangsError(f"{path}:{number}: not 'ENTRY<tab>ID': {_short(line)}") from None
        if entry in entries:
            raise ManyLangsError(f"{path}:{number}: {entry!r} again (line {where[entry]})")
        entries[entry], where[entry] = index, number
    _check_ids(entries, where, path)
    return entries


def _check_ids(entries: dict[str, int], where: dict[str, int], path: str) -> None:
    """The ids are 0..n-1, each once: otherwise the first line (in file order) breaking that."""
    seen: dict[int, str] = {}
    for entry, index in entries.items():
        if not 0 <= index < len(entries):
            raise ManyLangsError(f"{path}:{where[entry]}: id {index} of {entry!r} is outside 0..{len(entries) - 1}, "
                                 f"the ids of its {len(entries)} entries")
        if index in seen:
            raise ManyLangsError(f"{path}:{where[entry]}: id {index} of {entry!r} is {seen[index]!r}'s too "
                                 f"(line {where[seen[index]]})")
        seen[index] = entry


def _check_specials(entries: dict[str, int], specials: tuple[str, ...], path: str) -> None:
    missing = [s for s in specials if s not in entries]
    if missing:
        raise ManyLangsError(f"{path}: lacks {', '.join(missing)} (ELMoForManyLangs needs {', '.join(specials)})")


def expected_shapes(c: ManyLangsConfig, n_chars: int, n_words: int) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each state dict's `{name: shape}` as ELMoForManyLangs' modules declare them.

    token_embedder.pkl (token_embedder.py:49-86, highway.py:36, embedding_layer.py:30): embeddings
    [n_entries, dim], Conv1d weights [n_filters, char_dim, width], highway Linear [2 * n_filters, n_filters]
    (transform rows first, gate rows second), projection [projection_dim, word_dim + n_filters].
    encoder.pkl (modules/elmo.py:41-59, lstm_cell_with_projection.py:73-77): per layer and direction,
    input_linearity [4 * cell, projection_dim] (no bias), state_linearity [4 * cell, projection_dim] + bias,
    state_projection [projection_dim, cell] (no bias).
    """
    embedder: dict[str, tuple[int, ...]] = {}
    if c.word_dim > 0:
        embedder["word_emb_layer.embedding.weight"] = (n_words, c.word_dim)
    if c.char_dim > 0:
        embedder["char_emb_layer.embedding.weight"] = (n_chars, c.char_dim)
        for i, (width, n) in enumerate(c.filters):
            embedder[f"convolutions.{i}.weight"], embedder[f"convolutions.{i}.bias"] = (n, c.char_dim, width), (n,)
        for i in range(c.n_highway):
            embedder[f"highways._layers.{i}.weight"] = (2 * c.n_filters, c.n_filters)
            embedder[f"highways._layers.{i}.bias"] = (2 * c.n_filters,)
    embedder["projection.weight"] = (c.projection_dim, c.word_dim + c.n_filters)
    embedder["projection.bias"] = (c.projection_dim,)
    encoder: dict[str, tuple[int, ...]] = {}
    for layer in range(c.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}."
            encoder[prefix + "input_linearity.weight"] = (4 * c.cell_dim, c.projection_dim)
            encoder[prefix + "state_linearity.weight"] = (4 * c.cell_dim, c.projection_dim)
            encoder[prefix + "state_linearity.bias"] = (4 * c.cell_dim,)
            encoder[prefix + "state_projection.weight"] = (c.projection_dim, c.cell_dim)
    return {"token_embedder": embedder, "encoder": encoder}


def _read_weights(path: str, shapes: dict[str, tuple[int, ...]], config_path: str) -> dict[str, np.ndarray]:
    """A state dict checked against `shapes` (names and shapes, as `load_state_dict` is strict), as float32."""
    arrays = read_state_dict(path)
    missing, unexpected = [k for k in shapes if k not in arrays], [k for k in arrays if k not in shapes]
    if missing or unexpected:
        raise ManyLangsError(f"{path}: not the state dict {config_path} describes (missing {missing or 'none'}, "
                             f"unexpected {unexpected or 'none'})")
    for name, shape in shapes.items():
        if arrays[name].shape != shape:
            raise ManyLangsError(f"{path}: {name} has shape {list(arrays[name].shape)}, {config_path} and the "
                                 f"dictionaries make it {list(shape)}")
        if not np.issubdtype(arrays[name].dtype, np.floating):
            raise ManyLangsError(f"{path}: {name} is {arrays[name].dtype}, not floating point")
    return {name: arrays[name].astype(np.float32, copy=False) for name in shapes}


def read_model(directory: str) -> ManyLangsModel:
    """A model directory as ELMoForManyLangs' Embedder reads it (elmo.py:109-188), checked whole."""
    config_path, raw = find_config(directory)
    config = parse_config(raw, config_path)
    chars = words = None
    if config.char_dim > 0:
        chars = read_dictionary(path := os.path.join(directory, "char.dic"))
        _check_specials(chars, CHAR_SPECIALS, path)
    if config.word_dim > 0:
        words = read_dictionary(path := os.path.join(directory, "word.dic"))
        _check_specials(words, WORD_SPECIALS, path)
    shapes = expected_shapes(config, len(chars or ()), len(words or ()))
    return ManyLangsModel(
        directory=directory, config_path=config_path, config=config, chars=chars, words=words,
        token_embedder=_read_weights(os.path.join(directory, "token_embedder.pkl"), shapes["token_embedder"],
                                     config_path),
        encoder=_read_weights(os.path.join(directory, "encoder.pkl"), shapes["encoder"], config_path))


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit - 3] + "...")
