"""ELMo inside a downstream Flax model, as AllenNLP's `Elmo` inside a PyTorch one (docs/elmo_in_flax.md;
what differs from AllenNLP: docs/coming_from_allennlp.md). Building an `Elmo` reads the biLM into an
`ElmoBiLM` once, which Flax's clones share; `init` stores its weights in FROZEN_COLLECTION (through
`stop_gradient`) or, with `requires_grad=True`, in 'params'.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from typing import Any, Callable, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.data.char_vocab import CharVocabulary
from elmo_jax.data.chars import (
    BOS_CHAR, BOS_TOKEN, EOS_TOKEN, ID_SHIFT, N_CHARACTERS, OwnInputs, narrow_char_ids, words_to_char_ids,
)
from elmo_jax.inference.embedder import check_embeddable, encode_chars
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_files, bilm_from_manylangs, bilm_from_workdir
from elmo_jax.model.bilm import BiLM
from elmo_jax.model.scalar_mix import ScalarMix

FROZEN_COLLECTION = "elmo_bilm"  # The biLM's weights when requires_grad=False.
STATE_COLLECTION = "elmo_state"  # The biLM's carried state when stateful=True.
BILM_NAME = "bilm"  # The biLM's weights, in FROZEN_COLLECTION or 'params'.
CACHE_NAME = "token_embeddings"  # The vocab_to_cache table, beside them.
_TABLE_CHUNK = 1024  # Words through the char CNN per call when building the vocab_to_cache table.
_WORD_ID_MESSAGE = (  # `_check_ids`' message: {0} the word id, {1} the table's size.
    "word id {0} is outside vocab_to_cache ({1} words, 0 = padding): pass the char ids too (Elmo embeds "
    "a batch holding such a word from its char ids) or give the sentence as char ids"
)
_CHAR_ID_MESSAGE = (  # {0}: the char id, {1}: the biLM's char ids.
    f"char id {{0}} is outside this biLM's {{1}} char ids (0 = padding, 1..256 = a UTF-8 byte + 1, "
    f"{BOS_CHAR + ID_SHIFT}..{N_CHARACTERS - 1} = special, more: a character vocabulary's or the biLM's own): make "
    "char ids with elmo.batch_to_ids(sentences)"
)


def batch_to_ids(
    sentences: Sequence[Sequence[str]], max_chars: int = 50, characters: CharVocabulary | OwnInputs | None = None
) -> np.ndarray:
    """AllenNLP's `batch_to_ids`: char ids `[batch, max_len, max_chars]` int32, all zeros after a
    sentence's end (how `Elmo` finds the mask). `max_chars`: `elmo.max_chars` for a narrower biLM;
    `characters`: `elmo.characters` for a biLM with a character vocabulary or its own inputs (an
    ELMoForManyLangs model's: their rows, `[batch, max_len, 1 + its max_characters_per_token]`)."""
    tokens = [token for sentence in sentences for token in sentence]
    rows = words_to_char_ids(tokens, max_chars, characters)  # [sum of lengths, width]
    lengths = np.array([len(sentence) for sentence in sentences], np.int64)
    ids = np.zeros((len(sentences), int(lengths.max(initial=0)), rows.shape[1]), np.int32)
    ids[np.arange(ids.shape[1]) < lengths[:, None]] = rows
    return ids


def batch_to_word_ids(sentences: Sequence[Sequence[str]], vocab_to_cache: Sequence[str]) -> np.ndarray:
    """`Elmo`'s `word_inputs` `[batch, max_len]` int32: each token's first index in `vocab_to_cache`
    after 0 (padding, as after a sentence's end); ValueError for a token outside it."""
    index = {word: i for i, word in reversed(list(enumerate(vocab_to_cache))) if i}  # A word's first index wins.
    ids = np.zeros((len(sentences), max((len(s) for s in sentences), default=0)), np.int32)
    for row, tokens in enumerate(sentences):
        for t, token in enumerate(tokens):
            if token not in index:
                raise ValueError(
                    f"{token!r} is not in vocab_to_cache (index 0 is padding): give its sentence as char ids"
                )
            ids[row, t] = index[token]
    return ids


def _source(
    options_file: str | None, weight_file: str | None, workdir: str | None, step: int | None, manylangs: str | None
) -> tuple:
    """('files', options path, weights path), ('workdir', path, step) or ('manylangs', directory), paths
    absolute (`_read` reads it); ValueError unless the arguments name one of files, a workdir or an
    ELMoForManyLangs model directory."""
    files = (options_file, weight_file)
    if workdir is not None and files == (None, None) and manylangs is None:
        return "workdir", os.path.abspath(workdir), step
    if manylangs is not None and files == (None, None) and (workdir, step) == (None, None):
        return "manylangs", os.path.abspath(manylangs)
    if (workdir, step, manylangs) == (None, None, None) and None not in files:
        return "files", os.path.abspath(options_file), os.path.abspath(weight_file)
    raise ValueError(
        "Elmo reads options_file and weight_file, or a training workdir (step: its checkpoint), or an "
        "ELMoForManyLangs model directory (manylangs), with None for the others; got "
        f"options_file={options_file!r}, weight_file={weight_file!r}, workdir={workdir!r}, step={step!r}, "
        f"manylangs={manylangs!r}"
    )


def _read(source: tuple) -> PretrainedBiLM:
    """The biLM of a `_source`: its kind's reader given the rest."""
    kind, *arguments = source
    reader = {"files": bilm_from_files, "workdir": bilm_from_workdir, "manylangs": bilm_from_manylangs}[kind]
    return reader(*arguments)


def _check_bilm(bilm: BiLM) -> None:
    """ValueError unless Elmo can run `bilm`: a char-CNN biLM whose layers are one width."""
    check_embeddable(bilm)
    if not bilm.token_encoder_class.reads_chars:
        raise ValueError(
            f"Elmo needs a char-CNN biLM, got model.token_encoder={bilm.token_encoder!r}: embed a word-input "
            "biLM with elmo_jax.inference.embedder (ElmoEmbedder.from_workdir)"
        )


class ElmoBiLM:
    """The pretrained biLM of an `Elmo`, read once when built (from files, `None, None, workdir=...,
    step=...` or `None, None, manylangs=directory`), shared by the Elmos given it (`bilm=`): `model`
    (unbound), `params` (no softmax), `max_chars` (ids per token of its input rows), `boundaries` (the
    rows of `<S>` and `</S>`), `source` and the `vocab_to_cache` tables so far. Compared and hashed by
    identity."""

    def __init__(
        self, options_file: str | None, weight_file: str | None, *, workdir: str | None = None,
        step: int | None = None, manylangs: str | None = None,
    ) -> None:
        self.source = _source(options_file, weight_file, workdir, step, manylangs)
        pretrained = _read(self.source)
        _check_bilm(pretrained.model)
        # Built unbound: read while a parent module runs (an Elmo made in its compact `__call__`),
        # the BiLM would be made that parent's submodule.
        self.model: BiLM = pretrained.model.clone(parent=None, name=None)
        self.params: dict = pretrained.params
        self.characters: CharVocabulary | OwnInputs | None = pretrained.characters
        self.input_ids: Callable[[Sequence[str]], np.ndarray] = pretrained.input_ids
        self.boundaries: np.ndarray = self.input_ids([BOS_TOKEN, EOS_TOKEN])  # [2, max_chars]
        self.max_chars: int = self.boundaries.shape[1]
        # What its rows spell (None: bilm-tf's bytes, the only char ids narrowed when wider).
        self.spelling: str | None = "its own inputs" if isinstance(self.characters, OwnInputs) else (
            "its character vocabulary" if self.characters is not None else None)
        self._tables: dict[tuple[str, ...], np.ndarray] = {}

    def __repr__(self) -> str:
        kind, *args = self.source
        if kind == "files":
            return f"ElmoBiLM({args[0]!r}, {args[1]!r})"
        if kind == "manylangs":
            return f"ElmoBiLM(None, None, manylangs={args[0]!r})"
        return f"ElmoBiLM(None, None, workdir={args[0]!r}, step={args[1]!r})"

    def token_table(self, vocab_to_cache: tuple[str, ...]) -> np.ndarray:
        """The char CNN's token embeddings `[V, P]` float32 of `vocab_to_cache` (row 0, padding:
        zeros), once per vocabulary, by a compiled executable (so also while `init` is traced)."""
        if vocab_to_cache not in self._tables:
            self._tables[vocab_to_cache] = _token_table(self, vocab_to_cache)
        return self._tables[vocab_to_cache]


def _token_table(bilm: ElmoBiLM, vocab_to_cache: tuple[str, ...]) -> np.ndarray:
    """`ElmoBiLM.token_table`, `_TABLE_CHUNK` words per call."""
    model, params = bilm.model, bilm.params
    table = np.zeros((len(vocab_to_cache), model.width), np.float32)
    ids = np.zeros((_TABLE_CHUNK, bilm.max_chars), np.int32)  # One shape: one compilation.
    embed = encode_chars.lower(model, params, ids).compile()
    for start in range(1, len(vocab_to_cache), _TABLE_CHUNK):
        words = vocab_to_cache[start : start + _TABLE_CHUNK]
        ids[: len(words)] = bilm.input_ids(words)
        table[start : start + len(words)] = np.asarray(embed(params, ids))[: len(words)]
    return table


def _with_boundaries(x: jax.Array, lengths: jax.Array, bos: jax.Array, eos: jax.Array) -> jax.Array:
    """x `[B, T, F]` of rows holding `lengths` `[B]` tokens -> `[B, T + 2, F]`: `bos` at position 0,
    each row's tokens, `eos` after them, then x's padding."""
    t = jnp.arange(x.shape[1] + 2)[None, :, None]
    n = lengths[:, None, None]
    x = jnp.pad(x, ((0, 0), (1, 1), (0, 0)))
    return jnp.where(t == 0, bos, jnp.where(t == n + 1, eos, x))


def _boundary_mask(lengths: jax.Array, steps: int) -> jax.Array:
    """The mask `[B, steps + 2]` of `<S> w1 .. wn </S>` in rows of `lengths` `[B]` tokens (empty: none)."""
    n = lengths[:, None]
    return (jnp.arange(steps + 2)[None, :] <= n + 1) & (n > 0)


def _outside(ids: Any, size: int) -> Any:
    """Which of `ids` (NumPy or JAX, any shape) are outside `0 .. size - 1`."""
    return (ids < 0) | (ids >= size)


def _as_array(ids: Any) -> Any:
    """`ids` as an array: JAX arrays (and tracers) as they are, anything else as NumPy, which the
    checks read without a transfer and `_elmo_layers` takes as it takes JAX arrays; None stays."""
    return ids if ids is None or isinstance(ids, jax.Array) else np.asarray(ids)


def _check_ids(ids: jax.Array, size: int, message: str) -> None:
    """ValueError `message.format(id, size)` of the first id outside `0 .. size - 1`: now, or for traced
    ids when the computation runs (a debug callback). It would read NaN, or pass for padding."""

    def check(ids: Any) -> None:
        ids = np.asarray(ids)
        outside = ids[_outside(ids, size)]
        if outside.size:
            raise ValueError(message.format(int(outside[0]), size))

    if isinstance(ids, jax.core.Tracer):
        jax.debug.callback(check, ids)
    else:
        check(ids)


def _reverse_sentences(x: jax.Array, lengths: jax.Array) -> jax.Array:
    """x `[B, T, ...]` with each row's first `lengths[row]` positions reversed (the rest kept):
    the backward LM's view of a right-padded batch, and back."""
    t = jnp.arange(x.shape[1])[None, :]
    n = lengths[:, None]
    index = jnp.where(t < n, n - 1 - t, t)
    return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)


def _bilm_layers(bilm: BiLM, params: Any, x: jax.Array, mask: jax.Array, state: Any) -> tuple[jax.Array, Any]:
    """The ELMo layers `[L + 1, B, T, 2P]` (zeros at masked positions) of the token embeddings x
    `[B, T, P]` of sentences with boundaries (mask `[B, T]`), and the final carried state."""
    lengths = mask.sum(axis=1)
    layers, _, state = bilm.apply(
        {"params": params}, jnp.stack([x, _reverse_sentences(x, lengths)]), jnp.stack([mask, mask]), state,
        method=BiLM.contextualize,
    )
    both = [jnp.concatenate([x, x], axis=-1)]
    both += [jnp.concatenate([h[0], _reverse_sentences(h[1], lengths)], axis=-1) for h in layers[1:]]
    return jnp.stack(both) * mask[..., None], state


@functools.partial(jax.jit, static_argnums=2)
def _masked(mixed: jax.Array, mask: jax.Array, keep_sentence_boundaries: bool) -> jax.Array:
    """A mix `[B, T + 2, 2P]` -> zero at masked positions of mask `[B, T']`: with boundaries (T' = T + 2),
    or token i at position i (T' = T; a shorter row's `</S>` is masked). Compiled, as `_elmo_layers`."""
    if not keep_sentence_boundaries:
        mixed = mixed[:, 1:-1]
    return mixed * mask[..., None]


def _flatten(x: jax.Array | None, ndim: int) -> jax.Array | None:
    """x `[..., *trailing]` with `ndim` trailing dimensions -> `[max(rows, 1), *trailing]`: no rows
    get one row of zeros (the LSTMs cannot run on none), which `_unflatten` drops again."""
    if x is None:
        return None
    trailing, rows = x.shape[x.ndim - ndim :], math.prod(x.shape[: x.ndim - ndim])
    return x.reshape((rows,) + trailing) if rows else np.zeros((1,) + trailing, x.dtype)


def _unflatten(x: jax.Array, lead: tuple[int, ...]) -> jax.Array:
    """x `[max(rows, 1), ...]` of `_flatten` -> `[*lead, ...]`."""
    return x[: math.prod(lead)].reshape(lead + x.shape[1:])


class Elmo(nn.Module):
    """AllenNLP's `Elmo`: K task-specific mixes of a pretrained biLM's layers (docs/elmo_in_flax.md).

    `__call__(inputs, word_inputs=None, *, deterministic=True)`: char ids `[..., T, C]`
    (`elmo.batch_to_ids(sentences)`, for bilm-tf biLMs AllenNLP's `batch_to_ids`) and/or, with
    `vocab_to_cache`, word ids `[..., T]` (`batch_to_word_ids`; 0 = padding). Returns
    `{'elmo_representations': K arrays [..., T, 2P], 'mask': [..., T] bool}`; with
    `keep_sentence_boundaries`, `<S>`/`</S>` stay in both (`T + 2` positions). Each representation is
    a `ScalarMix` of the layers, zero at masked positions, then dropout when `deterministic=False`.

    The biLM: `options_file` and `weight_file`, or with None for both files a training `workdir`
    (`step`: its checkpoint) or an ELMoForManyLangs model directory `manylangs` (its char ids are its
    own: `[word id + 1, char.dic ids + 1]` rows, from `elmo.batch_to_ids`); or `bilm`, an `ElmoBiLM`
    read before. Byte char ids wider than `max_chars` are narrowed to it, narrower ones refused.
    """

    options_file: str | None
    weight_file: str | None
    num_output_representations: int
    requires_grad: bool = False
    do_layer_norm: bool = False
    dropout: float = 0.5
    vocab_to_cache: Sequence[str] | None = None
    keep_sentence_boundaries: bool = False
    scalar_mix_parameters: Sequence[float] | None = None
    stateful: bool = False
    workdir: str | None = None
    step: int | None = None
    bilm: ElmoBiLM | None = None
    manylangs: str | None = None

    def __post_init__(self) -> None:
        """Reads the biLM unless `bilm` holds it (Flax's clones get this one's `bilm`)."""
        sources = (self.options_file, self.weight_file, self.workdir, self.step, self.manylangs)
        if self.bilm is None:
            bilm = ElmoBiLM(*sources[:2], workdir=self.workdir, step=self.step, manylangs=self.manylangs)
            object.__setattr__(self, "bilm", bilm)  # Flax's __setattr__ allows fields in `setup` only.
        elif sources != (None,) * len(sources):
            source = _source(*sources)
            if source != self.bilm.source:
                raise ValueError(
                    f"Elmo's bilm={self.bilm!r} was not read from {source[1:]}: pass bilm with the files and "
                    "workdir it was read from, or with None for them"
                )
        super().__post_init__()

    @property
    def max_chars(self) -> int:
        """Ids per token of the biLM's char ids (50 for bilm-tf/AllenNLP models; an ELMoForManyLangs
        model's: the word id and its max_characters_per_token char ids)."""
        return self.bilm.max_chars

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """The biLM's char ids `[batch, max_len, max_chars]` int32 of tokenized sentences, all zeros after
        a sentence's end: `batch_to_ids(sentences, elmo.max_chars, elmo.characters)`."""
        return batch_to_ids(sentences, self.max_chars, self.characters)

    @property
    def characters(self) -> CharVocabulary | OwnInputs | None:
        """What the biLM's rows spell with (`batch_to_ids` takes it): its character vocabulary, its own
        inputs (an ELMoForManyLangs model's dictionaries), or None (bytes, as bilm-tf)."""
        return self.bilm.characters

    @property
    def bilm_params(self) -> dict:
        """The pretrained biLM's weights, as `init` stores them under `bilm`."""
        return self.bilm.params

    @nn.compact
    def __call__(
        self, inputs: jax.Array | None = None, word_inputs: jax.Array | None = None, *, deterministic: bool = True
    ) -> dict[str, Any]:
        pretrained = self.bilm
        self._check_fields(pretrained.model)
        char_ids, word_ids = self._inputs(inputs, word_inputs, pretrained.max_chars)
        params = self._pretrained_variable(BILM_NAME, functools.partial(jax.device_put, pretrained.params))
        table = self._cached_table()
        lead = char_ids.shape[:-2] if char_ids is not None else word_ids.shape[:-1]
        char_ids, word_ids = _flatten(char_ids, 2), _flatten(word_ids, 1)
        layers, mask, mask_with_boundaries = self._layers(params, table, char_ids, word_ids)
        fixed = self.scalar_mix_parameters
        representations = [  # The K scalar mixes [B, T + 2, 2P].
            ScalarMix(len(layers), self.do_layer_norm, fixed, trainable=fixed is None, name=f"scalar_mix_{k}")(
                layers, mask_with_boundaries
            )
            for k in range(self.num_output_representations)
        ]
        if self.keep_sentence_boundaries:
            mask = mask_with_boundaries
        drop = nn.Dropout(self.dropout)
        representations = [
            drop(_masked(mixed, mask, self.keep_sentence_boundaries), deterministic=deterministic)
            for mixed in representations
        ]
        return {
            "elmo_representations": [_unflatten(mixed, lead) for mixed in representations],
            "mask": _unflatten(mask, lead),
        }

    def _check_fields(self, bilm: BiLM) -> None:
        if self.num_output_representations < 1:
            raise ValueError(f"num_output_representations must be >= 1, got {self.num_output_representations}")
        fixed, n_layers = self.scalar_mix_parameters, bilm.n_layers + 1
        if fixed is not None and len(fixed) != n_layers:
            raise ValueError(f"scalar_mix_parameters has {len(fixed)} values, the biLM has {n_layers} layers")

    def _inputs(self, inputs: Any, word_inputs: Any, max_chars: int) -> tuple[jax.Array | None, jax.Array | None]:
        """(char ids `[..., T, C]`, word ids `[..., T]`) as arrays, checked; either may be None."""
        char_ids, word_ids = _as_array(inputs), _as_array(word_inputs)
        if char_ids is None and word_ids is None:
            raise ValueError("Elmo takes char ids [..., time, max_chars] (inputs) and/or word ids [..., time]")
        if char_ids is not None:
            if char_ids.ndim < 3:
                raise ValueError(f"Elmo takes char ids [..., batch, time, max_chars], got shape {char_ids.shape}")
            if char_ids.shape[-1] < max_chars:
                raise ValueError(
                    f"this biLM reads {max_chars} chars per token, got char ids of {char_ids.shape[-1]}: "
                    f"use batch_to_ids(sentences, max_chars={max_chars})"
                )
            if self.bilm.spelling is not None and char_ids.shape[-1] != max_chars:
                raise ValueError(  # Narrowing could cut an unlisted character's bytes apart, or mean nothing.
                    f"this biLM reads {max_chars} ids per token of {self.bilm.spelling}, got char ids of "
                    f"{char_ids.shape[-1]}: use batch_to_ids as the module's method, elmo.batch_to_ids(sentences)"
                )
            _check_ids(char_ids, self.bilm.model.n_characters, _CHAR_ID_MESSAGE)
        if word_ids is None or not self.vocab_to_cache:
            if char_ids is None:
                raise ValueError("word ids index vocab_to_cache: build the Elmo with vocab_to_cache=words")
            return char_ids, None
        if word_ids.ndim < 2:
            raise ValueError(f"Elmo takes word ids [..., batch, time], got shape {word_ids.shape}")
        if char_ids is not None and char_ids.shape[:-1] != word_ids.shape:
            raise ValueError(
                f"char ids {char_ids.shape} and word ids {word_ids.shape} must have the same [..., time]"
            )
        if char_ids is None:
            _check_ids(word_ids, len(self.vocab_to_cache), _WORD_ID_MESSAGE)
        return char_ids, word_ids

    def _pretrained_variable(self, name: str, initial: Callable[[], Any]) -> Any:
        """The variable `name`, made by init as `initial()`: in 'params' when requires_grad, else
        frozen in FROZEN_COLLECTION (read through `stop_gradient`)."""
        if self.requires_grad:
            return self.param(name, lambda _: initial())
        return jax.lax.stop_gradient(self.variable(FROZEN_COLLECTION, name, initial).value)

    def _cached_table(self) -> jax.Array | None:
        """The `vocab_to_cache` token embeddings `[V, P]` (None without it), beside the biLM's params."""
        if not self.vocab_to_cache:
            return None
        if self.requires_grad and self.is_initializing():
            logging.warning(
                "Elmo with requires_grad=True and vocab_to_cache: the cached token embeddings are fine-tuned "
                "as their own parameter, apart from the char CNN that char ids go through"
            )
        return self._pretrained_variable(
            CACHE_NAME, lambda: jax.device_put(self.bilm.token_table(tuple(self.vocab_to_cache)))
        )

    def _layers(
        self, params: Any, table: jax.Array | None, char_ids: jax.Array | None, word_ids: jax.Array | None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """`_elmo_layers` (layers `[L + 1, B, T + 2, 2P]`, mask `[B, T]`, mask with boundaries `[B, T + 2]`)
        of the `[B, ...]` ids, from and to the carried state when stateful."""
        bilm, boundaries = self.bilm.model, self.bilm.boundaries
        if not self.stateful:
            return _elmo_layers(bilm, params, boundaries, table, char_ids, word_ids, None)[:3]
        if not (self.is_initializing() or self.is_mutable_collection(STATE_COLLECTION)):
            raise ValueError(f"a stateful Elmo updates its carried state: apply it with mutable=[{STATE_COLLECTION!r}]")
        batch = (char_ids if word_ids is None else word_ids).shape[0]
        carried = self.variable(STATE_COLLECTION, "carried", bilm.initial_state, batch)
        *layers, state = _elmo_layers(bilm, params, boundaries, table, char_ids, word_ids, carried.value)
        if not self.is_initializing():
            carried.value = state
        return tuple(layers)


def word_layers(bilm: BiLM, boundaries: jax.Array, params: Any, char_ids: jax.Array) -> jax.Array:
    """ELMo's layers at the words of char ids `[B, T, C]` (the biLM's input rows,
    `PretrainedBiLM.input_ids`; `boundaries` `[2, C]` those of `<S>` and `</S>`), each sentence from
    zero states, the boundaries dropped: `[B, T, L + 1, 2P]`, zero past each sentence's end. The layout
    the task models store (`probing.features.compute_features` of a biLM that projects its tokens),
    here differentiable in `params`, for a task step that runs or fine-tunes the biLM."""
    layers = _elmo_layers(bilm, params, boundaries, None, char_ids, None, None)[0]
    words = jnp.any(char_ids > 0, axis=-1)
    return jnp.moveaxis(layers[:, :, 1:-1], 0, 2) * words[..., None, None]


@functools.partial(jax.jit, static_argnums=0)
def _elmo_layers(
    bilm: BiLM, params: Any, boundaries: jax.Array, table: jax.Array | None, char_ids: jax.Array | None,
    word_ids: jax.Array | None, state: Any,
) -> tuple[jax.Array, jax.Array, jax.Array, Any]:
    """`Elmo`'s biLM part, one compiled program per shape (op by op, each call would compile its
    scans anew): char ids `[B, T, C >= max_chars]` (wider: bilm-tf bytes, narrowed; `boundaries`
    `[2, max_chars]`, the rows of `<S>` and `</S>`) and/or word ids `[B, T]` -> (the ELMo layers
    `[L + 1, B, T + 2, 2P]` of `<S> w1 .. wn </S>`, zero at masked positions; the mask `[B, T]`;
    the mask with boundaries `[B, T + 2]`; the carried state after them). `state`: None, the
    sentences start from zeros; else the carried state of R rows, whose first B the batch
    continues (rows beyond R start from zeros), returned with them updated (max(R, B) rows)."""
    max_chars = boundaries.shape[-1]
    if char_ids is not None and char_ids.shape[-1] != max_chars:
        char_ids = narrow_char_ids(char_ids, max_chars)  # AllenNLP's 50-wide ids for a narrower biLM.
    mask = word_ids > 0 if char_ids is None else jnp.any(char_ids > 0, axis=-1)
    lengths = mask.sum(axis=1)
    with_boundaries = _boundary_mask(lengths, mask.shape[1])
    x = _token_embeddings(bilm, params, boundaries, table, char_ids, word_ids, lengths)
    if state is None:
        layers, _ = _bilm_layers(bilm, params, x, with_boundaries, bilm.initial_state(mask.shape[0]))
        return layers, mask, with_boundaries, None
    batch = mask.shape[0]
    extra_rows = batch - jax.tree.leaves(state)[0].shape[1]
    if extra_rows > 0:  # More rows than any call before: they start from zeros.
        state = jax.tree.map(lambda s: jnp.pad(s, ((0, 0), (0, extra_rows)) + ((0, 0),) * (s.ndim - 2)), state)
    layers, new_state = _bilm_layers(bilm, params, x, with_boundaries, jax.tree.map(lambda s: s[:, :batch], state))
    state = jax.tree.map(lambda s, new: s.at[:, :batch].set(jax.lax.stop_gradient(new)), state, new_state)
    return layers, mask, with_boundaries, state


def _token_embeddings(
    bilm: BiLM, params: Any, boundaries: jax.Array, table: jax.Array | None, char_ids: jax.Array | None,
    word_ids: jax.Array | None, lengths: jax.Array,
) -> jax.Array:
    """The token embeddings `[B, T + 2, P]` of `<S> w1 .. wn </S>` (rows of `lengths` `[B]` tokens):
    from the char ids, from the cached table, or, with both, from the table unless a word id is
    outside it; `<S>` and `</S>` (their rows `boundaries` `[2, C]`) always through the char CNN."""

    def from_chars() -> jax.Array:
        ids = _with_boundaries(char_ids, lengths, *boundaries)
        return encode_chars(bilm, params, jnp.where(_boundary_mask(lengths, char_ids.shape[1])[..., None], ids, 0))

    def from_table() -> jax.Array:
        bos, eos = encode_chars(bilm, params, boundaries)
        return _with_boundaries(jnp.take(table, word_ids, axis=0, mode="clip"), lengths, bos, eos)

    if word_ids is None:
        return from_chars()
    if char_ids is None:
        return from_table()
    return jax.lax.cond(jnp.any(_outside(word_ids, table.shape[0])), from_chars, from_table)


def with_bilm_params(variables: Mapping, bilm_params: Mapping) -> dict:
    """A copy of `variables` (of a model holding Elmo modules, e.g. the shapes of
    `jax.eval_shape(model.init, ...)`) with each `bilm` subtree of the shapes of `bilm_params` (e.g.
    `elmo.bilm_params`), in 'elmo_bilm' or 'params', set to `bilm_params`."""
    want = _shapes(bilm_params)
    found = 0

    def replace(tree: Mapping) -> dict:
        nonlocal found
        out = {}
        for key, value in tree.items():
            if key == BILM_NAME and isinstance(value, Mapping) and _shapes(value) == want:
                out[key] = jax.tree.map(jnp.asarray, dict(bilm_params))
                found += 1
            else:
                out[key] = replace(value) if isinstance(value, Mapping) else value
        return out

    new = {col: replace(tree) if col in (FROZEN_COLLECTION, "params") else tree for col, tree in variables.items()}
    if not found:
        raise ValueError("the variables hold no Elmo biLM with the shapes of these params (params of another biLM?)")
    return new


def _shapes(tree: Mapping) -> dict:
    """The nested dict of `tree` with each array replaced by its shape."""
    return {k: _shapes(v) if isinstance(v, Mapping) else tuple(np.shape(v)) for k, v in tree.items()}
