"""ELMo inside a downstream Flax model, as AllenNLP's `Elmo` inside a PyTorch one.

  elmo, bilm_params = Elmo.from_bilm_files("options.json", "weights.hdf5", num_output_representations=1)
  char_ids = batch_to_ids([["The", "cat", "sat", "."], ["Hello", "!"]], elmo.max_chars)  # [2, 4, 50] int32
  variables = with_bilm_params(elmo.init(jax.random.key(0), char_ids, deterministic=True), bilm_params)
  out = elmo.apply(variables, char_ids, deterministic=True)
  out["elmo_representations"]  # one [2, 4, 2P] per output representation
  out["mask"]                  # [2, 4] bool

In a task model `Elmo` is a field or submodule like any other; `with_bilm_params` puts the
pretrained weights wherever it sits in the model's variables (its init draws random ones).

Where the biLM's params live (under the Elmo module's path, then `bilm`):
- `requires_grad=False` (default): in the collection 'elmo_bilm', not in 'params'. A gradient or
  an optax optimizer over 'params' never sees them, so no optimizer (weight decay included) can
  change them and none keeps state for them; they also pass through `stop_gradient`, so a gradient
  taken w.r.t. every collection is zero there.
- `requires_grad=True`: in 'params', fine-tuned with the task.
Each output representation k mixes the layers with its own `ScalarMix` ('params' .../scalar_mix_k).
With `scalar_mix_parameters` the mixes are fixed (those scalars, gamma 1) and have no params, as
AllenNLP's `trainable=False`.

`vocab_to_cache` (AllenNLP's option): `Elmo.from_bilm_files(..., vocab_to_cache=words)` runs the
char CNN over `words` once, when it builds the module (the embedder's token cache), and `init`
stores those token embeddings as the variable `token_embeddings` `[len(words), P]` beside the biLM's
weights. A call may then take `word_ids` `[batch, time]`, indices into `words` with 0 = padding
(as AllenNLP: `words[0]` is the padding entry, e.g. '@@PADDING@@', and is never looked up), in place
of char ids: the char CNN is skipped for those words (`<S>`/`</S>`, two tokens, still go through
it) and the outputs are those of the char ids of the same words (`batch_to_word_ids` makes the
ids; a word outside `words` has no id and needs the char-id path). Where the cache lives follows
the biLM's weights:
- `requires_grad=False` (default): in 'elmo_bilm', read through `stop_gradient`: frozen.
- `requires_grad=True`: in 'params', fine-tuned as a parameter of its own, as AllenNLP's cache
  (an `Embedding` with `trainable=requires_grad`): a cached word's embedding then moves away from
  what the fine-tuned char CNN gives for the same word through char ids (AllenNLP warns about
  this too), and only the words a batch holds get a gradient.

Stateless by default: every call starts the LSTMs from zero states, so a token's representations
depend on its sentence alone (padding and other rows never change them, except through
`do_layer_norm`'s batch statistics). With `stateful=True` (AllenNLP's Elmo and bilm-tf), row r's
final states carry over to row r of the next call in the collection 'elmo_state': apply with
`mutable=['elmo_state']` and pass the returned collection to the next call. A call with fewer rows
leaves the other rows' states as they were, and an all-padding row leaves its own.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, words_to_char_ids
from elmo_jax.inference.embedder import (
    ElmoEmbedder, PretrainedBiLM, bilm_from_files, bilm_from_workdir, check_embeddable,
)
from elmo_jax.model.bilm import BiLM
from elmo_jax.model.lstm import LSTMState
from elmo_jax.model.scalar_mix import ScalarMix

FROZEN_COLLECTION = "elmo_bilm"  # The biLM's weights when requires_grad=False.
STATE_COLLECTION = "elmo_state"  # The carried LSTM states when stateful=True.
CACHE_NAME = "token_embeddings"  # The vocab_to_cache table, in FROZEN_COLLECTION or 'params'.


def batch_to_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50) -> np.ndarray:
    """Char ids `[batch, max_len, max_chars]` int32 of tokenized sentences, the input of `Elmo`.

    Tokens as `elmo_jax.data.chars.words_to_char_ids` (bilm-tf/AllenNLP ids); positions after a
    sentence's end are all zeros, as AllenNLP's `batch_to_ids`: that is how `Elmo` finds the mask.
    """
    ids = np.zeros((len(sentences), max((len(s) for s in sentences), default=0), max_chars), np.int32)
    for row, tokens in enumerate(sentences):
        if tokens:
            ids[row, : len(tokens)] = words_to_char_ids(tokens, max_chars)
    return ids


def batch_to_word_ids(sentences: Sequence[Sequence[str]], vocab_to_cache: Sequence[str]) -> np.ndarray:
    """Word ids `[batch, max_len]` int32 of tokenized sentences: each token's index in
    `vocab_to_cache` (its first after index 0, which is padding), 0 after a sentence's end; the
    `word_ids` input of an `Elmo` built with that `vocab_to_cache`. Raises ValueError for a token
    outside it."""
    index: dict[str, int] = {}
    for i, word in enumerate(vocab_to_cache):
        if i:
            index.setdefault(word, i)
    ids = np.zeros((len(sentences), max((len(s) for s in sentences), default=0)), np.int32)
    for row, tokens in enumerate(sentences):
        for t, token in enumerate(tokens):
            if token not in index:
                raise ValueError(
                    f"{token!r} is not in vocab_to_cache (index 0 is padding): give its sentence as char ids"
                )
            ids[row, t] = index[token]
    return ids


class CachedTokenEmbeddings:
    """The token embeddings `[V, P]` float32 of the words of `vocab_to_cache` (row 0, padding: zeros),
    computed by the pretrained biLM: the initial value of `Elmo`'s cache. A module field compared
    and hashed by identity."""

    def __init__(self, table: np.ndarray):
        self.table = table

    def __repr__(self) -> str:
        return f"CachedTokenEmbeddings(shape={self.table.shape})"


def cached_token_embeddings(pretrained: PretrainedBiLM, vocab_to_cache: Sequence[str]) -> CachedTokenEmbeddings:
    """The char CNN of `pretrained` over `vocab_to_cache[1:]`, once (as the embedder's token cache)."""
    embedder = ElmoEmbedder(pretrained.model, pretrained.params, pretrained.max_chars, token_cache_size=0)
    table = np.zeros((len(vocab_to_cache), pretrained.model.projection_dim), np.float32)
    table[1:] = embedder.token_embeddings(list(vocab_to_cache[1:]))
    return CachedTokenEmbeddings(table)


def _check_bilm(bilm: BiLM) -> None:
    check_embeddable(bilm)
    if bilm.token_encoder != "char_cnn":
        raise ValueError(
            f"Elmo needs a char-CNN biLM, got model.token_encoder={bilm.token_encoder!r}: embed a word-input "
            "biLM with elmo_jax.inference.embedder (embedder_from_workdir)"
        )


def _add_sentence_boundaries(char_ids: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """char_ids `[B, T, C]` of rows holding `lengths` `[B]` tokens -> (`<S> w1 .. wn </S>` char ids
    `[B, T + 2, C]`, its mask `[B, T + 2]`). Empty rows stay empty."""
    bos, eos = jnp.asarray(words_to_char_ids([BOS_TOKEN, EOS_TOKEN], char_ids.shape[-1]))
    positions = jnp.arange(char_ids.shape[1] + 2)[None, :, None]
    n = lengths[:, None, None]
    ids = jnp.pad(char_ids, ((0, 0), (1, 1), (0, 0)))
    ids = jnp.where(positions == 0, bos, jnp.where(positions == n + 1, eos, ids))
    mask = (positions <= n + 1) & (n > 0)
    return jnp.where(mask, ids, 0), mask[..., 0]


def _add_boundary_positions(x: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Token embeddings x `[B, T, P]` of rows holding `lengths` `[B]` tokens -> (`[B, T + 2, P]`
    with zeros where `<S>` and `</S>` go, for `_bilm_layers` to fill; the mask `[B, T + 2]` of
    `<S> w1 .. wn </S>`). Empty rows stay empty."""
    positions = jnp.arange(x.shape[1] + 2)[None, :]
    n = lengths[:, None]
    return jnp.pad(x, ((0, 0), (1, 1), (0, 0))), (positions <= n + 1) & (n > 0)


def _reverse_sentences(x: jax.Array, lengths: jax.Array) -> jax.Array:
    """x `[B, T, ...]` with each row's first `lengths[row]` positions reversed (the rest kept):
    the backward LM's view of a right-padded batch, and back."""
    t = jnp.arange(x.shape[1])[None, :]
    n = lengths[:, None]
    index = jnp.where(t < n, n - 1 - t, t)
    return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)


def _bilm_layers(
    bilm: BiLM, inputs: dict[str, jax.Array], mask: jax.Array, state: list[LSTMState]
) -> tuple[jax.Array, list[LSTMState]]:
    """The ELMo layers `[L + 1, B, T, 2P]` of sentences with boundaries (mask `[B, T]`) and the final
    LSTM states. Layer 0 = `[x; x]`, layer j = `[forward_j; backward_j]`, as `elmo_jax.inference.embedder`; zeros
    at masked positions. `inputs`: `{'char_ids': [B, T, C]}`, or the cached words' token
    embeddings `{'token_embeddings': [B, T, P]}` (`_add_boundary_positions`) and the char ids
    `{'boundary_char_ids': [2, C]}` of `<S>` and `</S>`, which the char CNN embeds."""
    lengths = mask.sum(axis=1)
    if "char_ids" in inputs:
        x = bilm.embed_tokens({"char_ids": inputs["char_ids"]})  # [B, T, P]
    else:
        bos, eos = bilm.embed_tokens({"char_ids": inputs["boundary_char_ids"]})
        t = jnp.arange(mask.shape[1])[None, :, None]
        n = lengths[:, None, None]
        x = jnp.where(t == 0, bos, jnp.where(t == n - 1, eos, inputs["token_embeddings"]))
    layers, _, state = bilm.contextualize(
        jnp.stack([x, _reverse_sentences(x, lengths)]), jnp.stack([mask, mask]), state
    )
    both = [jnp.concatenate([x, x], axis=-1)]
    both += [jnp.concatenate([h[0], _reverse_sentences(h[1], lengths)], axis=-1) for h in layers[1:]]
    return jnp.stack(both) * mask[..., None], state


def _frozen_as_params(variables: Mapping) -> dict:
    """The frozen weights as the biLM's 'params', gradients stopped."""
    return {"params": jax.lax.stop_gradient(variables.get(FROZEN_COLLECTION, {}))}


def _params_as_frozen(variables: Mapping) -> dict:
    """The biLM's 'params' (as its init creates them) into the frozen collection."""
    return {FROZEN_COLLECTION: variables.get("params", {})}


class Elmo(nn.Module):
    """AllenNLP's `Elmo`: K task-specific mixes of a pretrained biLM's layers.

    `__call__(char_ids [batch, time, C], deterministic)` (char ids from `batch_to_ids`, all-zero
    rows after a sentence's end), or with `vocab_to_cache` `__call__(word_ids=[batch, time],
    deterministic=...)` (`batch_to_word_ids`; 0 = padding), returns `{'elmo_representations': K
    arrays [batch, time, 2P], 'mask': [batch, time] bool}`: `<S>`/`</S>` are added inside (the
    biLM reads `<S> w1 .. wn </S>`); with `keep_sentence_boundaries` they stay in the output,
    `[batch, time + 2, 2P]`, and in the mask. Each representation is
    `gamma_k * sum_j softmax(s_k)_j * layer_j` (`ScalarMix`,
    layer-normalised over the batch's unmasked positions with `do_layer_norm`), zero at masked
    positions, then dropout (rng 'dropout' unless deterministic). Build it with `from_bilm_files`
    or `from_workdir`; see the module docstring for where the biLM's params and states live.
    `max_chars` (set by both): the char ids' width the biLM reads, `C`; `batch_to_ids(sentences,
    elmo.max_chars)` (other widths truncate and pool tokens differently: refused).
    `vocab_to_cache` (a tuple of words, index 0 = padding; give it to `from_bilm_files` /
    `from_workdir`, which also set `token_cache`, its token embeddings): see the module docstring.
    """

    bilm: BiLM
    num_output_representations: int
    requires_grad: bool = False
    do_layer_norm: bool = False
    dropout: float = 0.5
    keep_sentence_boundaries: bool = False
    scalar_mix_parameters: Sequence[float] | None = None
    stateful: bool = False
    deterministic: bool | None = None
    max_chars: int | None = None
    vocab_to_cache: Sequence[str] | None = None
    token_cache: CachedTokenEmbeddings | None = None

    @classmethod
    def from_bilm_files(
        cls, options_file: str, weight_file: str, num_output_representations: int, **options: Any
    ) -> tuple[Elmo, dict]:
        """(Elmo, biLM params) of a bilm-tf/AllenNLP model; `options`: the other fields
        (requires_grad, do_layer_norm, dropout, vocab_to_cache, ...). Put the params in with
        `with_bilm_params`. With `vocab_to_cache`, the char CNN runs over its words here, once."""
        return cls._pretrained(bilm_from_files(options_file, weight_file), num_output_representations, options)

    @classmethod
    def from_workdir(
        cls, workdir: str, num_output_representations: int, step: int | None = None, **options: Any
    ) -> tuple[Elmo, dict]:
        """(Elmo, biLM params) of an elmo-jax training checkpoint (latest step by default)."""
        return cls._pretrained(bilm_from_workdir(workdir, step), num_output_representations, options)

    @classmethod
    def _pretrained(cls, pretrained: PretrainedBiLM, n: int, options: Mapping[str, Any]) -> tuple[Elmo, dict]:
        _check_bilm(pretrained.model)
        options = {"max_chars": pretrained.max_chars, **options}
        if options.get("vocab_to_cache"):
            options["vocab_to_cache"] = tuple(options["vocab_to_cache"])
            options["token_cache"] = cached_token_embeddings(pretrained, options["vocab_to_cache"])
            if options.get("requires_grad"):
                logging.warning(
                    "Elmo with requires_grad=True and vocab_to_cache: the cached token embeddings are fine-tuned "
                    "as their own parameter, apart from the char CNN that char ids go through"
                )
        return cls(pretrained.model, n, **options), pretrained.params

    @nn.compact
    def __call__(
        self, char_ids: jax.Array | None = None, deterministic: bool | None = None, word_ids: jax.Array | None = None
    ) -> dict[str, Any]:
        deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
        self._check_fields()
        table = self._cached_table()
        if (char_ids is None) == (word_ids is None):
            raise ValueError("Elmo takes char_ids [batch, time, max_chars] or word_ids [batch, time]: one of them")
        if word_ids is not None:
            if table is None:
                raise ValueError("word_ids index vocab_to_cache: build the Elmo with vocab_to_cache=words")
            word_ids = jnp.asarray(word_ids)
            if word_ids.ndim != 2:
                raise ValueError(f"Elmo takes word ids [batch, time], got shape {word_ids.shape}")
            mask = word_ids > 0
            # An id outside the table gives NaNs rather than another word's embedding.
            x = jnp.take(table, word_ids, axis=0, mode="fill", fill_value=jnp.nan)
            x, mask_with_boundaries = _add_boundary_positions(x, mask.sum(axis=1))
            boundary_ids = words_to_char_ids([BOS_TOKEN, EOS_TOKEN], self.max_chars or 50)
            inputs = {"token_embeddings": x, "boundary_char_ids": jnp.asarray(boundary_ids)}
        else:
            char_ids = jnp.asarray(char_ids)
            if char_ids.ndim != 3:
                raise ValueError(f"Elmo takes char ids [batch, time, max_chars], got shape {char_ids.shape}")
            if self.max_chars is not None and char_ids.shape[-1] != self.max_chars:
                raise ValueError(
                    f"this biLM reads {self.max_chars} chars per token, got char ids of {char_ids.shape[-1]}: "
                    f"use batch_to_ids(sentences, max_chars={self.max_chars})"
                )
            mask = jnp.any(char_ids > 0, axis=-1)
            ids, mask_with_boundaries = _add_sentence_boundaries(char_ids, mask.sum(axis=1))
            inputs = {"char_ids": ids}
        layers = self._layers(inputs, mask_with_boundaries)
        out_mask = mask_with_boundaries if self.keep_sentence_boundaries else mask
        drop = nn.Dropout(self.dropout)
        representations = []
        for mixed in self._mixes(layers, mask_with_boundaries):
            if not self.keep_sentence_boundaries:
                mixed = mixed[:, 1:-1]  # Token i at position i; a shorter row's </S> is masked below.
            representations.append(drop(mixed * out_mask[..., None], deterministic=deterministic))
        return {"elmo_representations": representations, "mask": out_mask}

    def _check_fields(self) -> None:
        _check_bilm(self.bilm)
        if self.vocab_to_cache and self.token_cache is None:
            raise ValueError(
                "vocab_to_cache needs the pretrained biLM's token embeddings of its words: build the Elmo with "
                "Elmo.from_bilm_files or Elmo.from_workdir(..., vocab_to_cache=words)"
            )
        if self.vocab_to_cache and self.token_cache.table.shape != (len(self.vocab_to_cache), self.bilm.projection_dim):
            raise ValueError(
                f"token_cache has shape {self.token_cache.table.shape}, vocab_to_cache {len(self.vocab_to_cache)} words"
            )
        if self.num_output_representations < 1:
            raise ValueError(f"num_output_representations must be >= 1, got {self.num_output_representations}")
        fixed, n_layers = self.scalar_mix_parameters, self.bilm.n_layers + 1
        if fixed is not None and len(fixed) != n_layers:
            raise ValueError(f"scalar_mix_parameters has {len(fixed)} values, the biLM has {n_layers} layers")

    def _cached_table(self) -> jax.Array | None:
        """The `vocab_to_cache` token embeddings `[V, P]` (None without it): in 'params' when
        requires_grad, else frozen in FROZEN_COLLECTION. Created by init, from `token_cache`."""
        if not self.vocab_to_cache:
            return None
        initial = lambda *_: jnp.asarray(self.token_cache.table)
        if self.requires_grad:
            return self.param(CACHE_NAME, initial)
        return jax.lax.stop_gradient(self.variable(FROZEN_COLLECTION, CACHE_NAME, initial).value)

    def _layers(self, inputs: dict[str, jax.Array], mask: jax.Array) -> jax.Array:
        """The biLM's layers `[L + 1, B, T, 2P]` (`_bilm_layers`), from and to the carried states
        when stateful."""
        run = _bilm_layers
        if not self.requires_grad:
            run = nn.map_variables(
                _bilm_layers, ("params", FROZEN_COLLECTION), _frozen_as_params, _params_as_frozen,
                init=self.is_initializing(),
            )
        batch = mask.shape[0]
        if not self.stateful:
            return run(self.bilm, inputs, mask, self.bilm.initial_state(batch))[0]
        if not (self.is_initializing() or self.is_mutable_collection(STATE_COLLECTION)):
            raise ValueError(f"a stateful Elmo updates its LSTM states: apply it with mutable=[{STATE_COLLECTION!r}]")
        carried = self.variable(STATE_COLLECTION, "lstm", self.bilm.initial_state, batch)
        state = carried.value
        extra_rows = batch - state[0].c.shape[1]
        if extra_rows > 0:  # More rows than any call before: they start from zeros.
            state = jax.tree.map(lambda s: jnp.pad(s, ((0, 0), (0, extra_rows), (0, 0))), state)
        layers, new_state = run(self.bilm, inputs, mask, jax.tree.map(lambda s: s[:, :batch], state))
        if not self.is_initializing():
            carried.value = jax.tree.map(
                lambda s, new: s.at[:, :batch].set(jax.lax.stop_gradient(new)), state, new_state
            )
        return layers

    def _mixes(self, layers: jax.Array, mask: jax.Array) -> list[jax.Array]:
        """The K scalar mixes `[B, T, 2P]` of layers `[L + 1, B, T, 2P]`."""
        n_layers, n = layers.shape[0], self.num_output_representations
        if self.scalar_mix_parameters is None:
            return [ScalarMix(n_layers, self.do_layer_norm, name=f"scalar_mix_{k}")(layers, mask) for k in range(n)]
        fixed = {"scalar_parameters": jnp.asarray(self.scalar_mix_parameters, jnp.float32), "gamma": jnp.ones(())}
        mixed = ScalarMix(n_layers, self.do_layer_norm, parent=None).apply({"params": fixed}, layers, mask)
        return [mixed] * n


def with_bilm_params(variables: Mapping, bilm_params: Mapping) -> dict:
    """`variables` (of a model holding Elmo modules) with each Elmo's biLM weights set to
    `bilm_params` (from `Elmo.from_bilm_files` / `from_workdir`).

    The biLM weights are the `bilm` subtrees of those shapes in 'elmo_bilm' (requires_grad=False)
    or 'params' (requires_grad=True). Returns a new dict; `variables` is left as it is.
    """
    want = _shapes(bilm_params)
    found = 0

    def replace(tree: Mapping) -> dict:
        nonlocal found
        out = {}
        for key, value in tree.items():
            if key == "bilm" and isinstance(value, Mapping) and _shapes(value) == want:
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
