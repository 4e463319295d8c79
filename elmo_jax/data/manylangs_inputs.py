"""An ELMoForManyLangs model's token inputs (its char.dic and word.dic) as a run's char ids: what a run
continuing the training of such a model (`config.init.manylangs`) spells its words with, in place of a
character vocabulary (data/char_vocab.py), and what its workdir keeps (`save`, `load`) to read them again.

A token is one row `[word id + 1, char id + 1, ...]` (`[1 + max_chars]`, model/manylangs_encoder.py's
input): its word.dic id (`<oov>`'s for a word it lacks) +1 shifted (0 without a word.dic), then its
char.dic ids +1 shifted (0 without a char.dic); all zeros is no token. It is spelled as ELMoForManyLangs
spells it (its frontend.py:39-75;
tests/reference/manylangs_numpy.py spells it apart, for the tests): `<S>`/`</S>` are its `<bos>`/`<eos>`, a word longer
than max_chars - 2 characters (code points) is cut to them, for its word id too, and is `<eow>`'s id, its
characters' (`<oov>`'s for unknown ones), `<bow>`'s, then `<pad>`'s (the marks swapped, as its models were
trained).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Mapping, Sequence

import numpy as np

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN
from elmo_jax.runtime.atomic_write import write_atomic

_BOUNDARIES = {BOS_TOKEN: "<bos>", EOS_TOKEN: "<eos>"}  # The run's sentence boundaries -> ELMoForManyLangs'.
_SPECIAL_TOKENS = ("<bos>", "<eos>")  # Spelled as their own char.dic entry.
FINGERPRINT_PREFIX = "manylangs:"  # Of `ManyLangsInputs.fingerprint`, in a checkpoint's model record.


class ManyLangsInputsError(ValueError):
    """A workdir's saved ELMoForManyLangs inputs that cannot be read: one line naming the file."""


class ManyLangsInputs:
    """char.dic and word.dic (entry -> id, ids 0..n-1; None: the model has no such input) and
    max_characters_per_token: `token_ids` gives words' id rows."""

    def __init__(self, chars: Mapping[str, int] | None, words: Mapping[str, int] | None, max_chars: int):
        self.chars, self.words, self.max_chars = (dict(chars) if chars is not None else None,
                                                  dict(words) if words is not None else None, max_chars)

    @property
    def width(self) -> int:
        """Ids per token: the word id and max_chars char ids."""
        return 1 + self.max_chars

    @property
    def n_ids(self) -> int:
        """Every id of a row is below it (the biLM's `n_characters`): char.dic's or word.dic's entries, the
        more, + 1 (the shift)."""
        return max(len(self.chars or ()), len(self.words or ())) + 1

    def token_ids(self, words: Sequence[str]) -> np.ndarray:
        """`[len(words), 1 + max_chars]` int32 id rows of `words` (the run's `<S>`/`</S>` among them)."""
        tokens = [_BOUNDARIES.get(w) or w[: self.max_chars - 2] for w in words]
        out = np.zeros((len(tokens), self.width), np.int32)
        if self.words is not None:
            oov = self.words["<oov>"]
            out[:, 0] = np.array([self.words.get(t, oov) for t in tokens], np.int32) + 1
        if self.chars is not None:
            c = self.chars
            out[:, 1:] = c["<pad>"] + 1
            for i, token in enumerate(tokens):
                inner = [c[token]] if token in _SPECIAL_TOKENS else [c.get(ch, c["<oov>"]) for ch in token]
                out[i, 1 : len(inner) + 3] = np.array([c["<eow>"], *inner, c["<bow>"]]) + 1
        return out

    def _as_json(self) -> dict:
        """The dictionaries as entry lists in id order, and max_chars."""
        def entries(d: Mapping[str, int] | None) -> list[str] | None:
            return None if d is None else sorted(d, key=d.__getitem__)
        return {"max_chars": self.max_chars, "chars": entries(self.chars), "words": entries(self.words)}

    def fingerprint(self) -> str:
        """'manylangs:sha256:<hex>' of the dictionaries and max_chars: what a checkpoint's id rows stand for."""
        text = json.dumps(self._as_json(), ensure_ascii=False, sort_keys=True)
        return FINGERPRINT_PREFIX + "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ManyLangsInputs) and self._as_json() == other._as_json()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def save(self, path: str) -> None:
        """Writes them as JSON (entries in id order), atomically."""
        def write(target: str) -> None:
            with open(target, "w", encoding="utf-8") as f:
                json.dump(self._as_json(), f, ensure_ascii=False)
        write_atomic(path, write)

    @classmethod
    def load(cls, path: str) -> "ManyLangsInputs":
        """Reads what `save` writes; ManyLangsInputsError naming `path` otherwise."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            lists = {name: data[name] for name in ("chars", "words")}
            max_chars = int(data["max_chars"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ManyLangsInputsError(f"{path}: not ELMoForManyLangs inputs saved by a run ({e})") from None
        dicts = {name: None if entries is None else {e: k for k, e in enumerate(entries)}
                 for name, entries in lists.items()}
        return cls(dicts["chars"], dicts["words"], max_chars)


def checkpoint_inputs(path: str, fingerprint: str | None) -> ManyLangsInputs:
    """The inputs saved at `path` by a run whose checkpoint records `fingerprint` (None: unchecked);
    ManyLangsInputsError naming the file unless it is there and they are the same."""
    if not os.path.exists(path):
        raise ManyLangsInputsError(f"{path}: not found, but the checkpoint was trained on an ELMoForManyLangs "
                                   "model's inputs; restore the file the run wrote")
    inputs = ManyLangsInputs.load(path)
    if fingerprint is not None and inputs.fingerprint() != fingerprint:
        raise ManyLangsInputsError(f"{path}: not the inputs the checkpoint was trained with (the dictionaries "
                                   "or max_chars differ); restore the file the run wrote")
    return inputs
