"""What each token of a task's sentences is read as, computed once before training: ids into the
word and static-vector tables, char ids, and a frozen biLM's layers (`probing.features`: every token's
layers in one pass, so a task epoch never reruns the biLM; dropout after the mix keeps this exact),
and the padded batches the model reads.
"""

from __future__ import annotations

import collections
from typing import Any, NamedTuple, Sequence

import numpy as np

from elmo_jax.data.chars import words_to_char_ids
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.probing.features import compute_features
from elmo_jax.static.lookup import StaticVectors

PAD, UNK = "<pad>", "<unk>"  # Rows 0 and 1 of the word table.
# The static table: row 0 zeros (padding), row 1 the vector file's unknown-word entry (zeros without
# one) for the words it lacks, then its words.
STATIC_UNKNOWN_ROW, STATIC_FIRST_ROW = 1, 2
TIME_STEP = 8  # The shortest batch length (`padded_length`).


class SplitInputs(NamedTuple):
    """One split's inputs, each per sentence (None when the model does not read it): `word_ids`,
    `static_ids` (`[n]` int32 each), `char_ids` (`[n, max_chars]`), and the biLM's layers of all its
    tokens `elmo` `[n_tokens, layers, dim]` with each sentence's first row `offsets` `[sentences + 1]`;
    or, for a biLM run in the step, its input rows `bilm_char_ids` (`[n, C]`, `PretrainedBiLM.input_ids`)."""

    word_ids: list[np.ndarray] | None
    static_ids: list[np.ndarray] | None
    char_ids: list[np.ndarray] | None
    elmo: np.ndarray | None
    offsets: np.ndarray
    bilm_char_ids: list[np.ndarray] | None = None


def word_table(train_words: Sequence[Sequence[str]], min_count: int) -> list[str]:
    """The from-scratch word table: PAD, UNK, then the training words seen `min_count` times, most
    frequent first (ties in order of first appearance)."""
    counts = collections.Counter(word for sentence in train_words for word in sentence)
    return [PAD, UNK, *(word for word, n in counts.most_common() if n >= min_count)]


def static_rows(vectors: StaticVectors, words: Sequence[Sequence[Sequence[str]]],
                known: Sequence[str] = ()) -> tuple[list[str], np.ndarray]:
    """The words of the sentences of `words` (splits of sentences) that the vector file has, after the
    table's `known` words, and their rows `[new words, dim]` (the table's rows from STATIC_FIRST_ROW on).
    A word is looked up as written, then in lower case."""
    known_set = set(known)
    distinct = sorted({word for split in words for sentence in split for word in sentence} - known_set)
    lookup = vectors.lookup([(word, word.lower()) for word in distinct])
    new = [(word, int(row)) for word, row, oov in zip(distinct, lookup.rows, lookup.oov) if not oov]
    rows = vectors.vectors[[row for _, row in new]] if new else np.zeros((0, vectors.dim), np.float32)
    return [word for word, _ in new], rows.astype(np.float32)


def static_table(vectors: StaticVectors, rows: np.ndarray) -> np.ndarray:
    """The static table `[STATIC_FIRST_ROW + words, dim]` of a task: padding, the file's unknown word, `rows`."""
    unknown = vectors.unknown_word
    head = np.zeros((STATIC_FIRST_ROW, vectors.dim), np.float32)
    if unknown is not None:
        head[STATIC_UNKNOWN_ROW] = vectors.vectors[vectors.index[unknown]]
    return np.concatenate([head, rows])


def static_index(table_words: Sequence[str]) -> dict[str, int]:
    """Each word of the static table's row."""
    return {word: STATIC_FIRST_ROW + i for i, word in enumerate(table_words)}


def oov_record(words: Sequence[Sequence[str]], table_words: Sequence[str]) -> dict[str, Any]:
    """Tokens of the sentences `words`, those without a vector in the static table, and their share."""
    known = set(table_words)
    tokens = sum(map(len, words))
    missing = sum(word not in known for sentence in words for word in sentence)
    return {"tokens": tokens, "oov": missing, "oov_rate": missing / tokens if tokens else 0.0}


def split_inputs(words: Sequence[Sequence[str]], *, word_index: dict | None = None, static_index: dict | None = None,
                 max_chars: int = 0, elmo: np.ndarray | None = None, bilm: PretrainedBiLM | None = None) -> SplitInputs:
    """The inputs of one split's sentences `words` that the model reads: word ids through `word_index`
    (UNK for others), static rows through `static_index` (the unknown word's for others), char ids of `max_chars` (0:
    none), the biLM's layers `elmo` `[n_tokens, layers, dim]` (from `elmo_layers`) or the input rows of `bilm`, a
    biLM run in the step (its char ids, or an ELMoForManyLangs model's own rows)."""
    def ids(index: dict, default: int) -> list[np.ndarray]:
        return [np.array([index.get(w, default) for w in sentence], np.int32) for sentence in words]

    return SplitInputs(
        ids(word_index, 1) if word_index is not None else None,
        ids(static_index, STATIC_UNKNOWN_ROW) if static_index is not None else None,
        [words_to_char_ids(sentence, max_chars) for sentence in words] if max_chars else None,
        elmo, np.concatenate([[0], np.cumsum([len(sentence) for sentence in words])]),
        [bilm.input_ids(sentence) for sentence in words] if bilm is not None else None,
    )


def elmo_layers(pretrained: PretrainedBiLM, splits: Sequence[Sequence[Sequence[str]]], max_bytes: int,
                progress: bool) -> list[np.ndarray]:
    """Every token's layers `[n_tokens, layers, dim]` of each split, from zero states per sentence."""
    return compute_features(pretrained, splits, progress=progress, max_bytes=max_bytes)


def padded_length(longest: int) -> int:
    """The batch length for a longest sentence of `longest` words: the next of 8, 16, 24, 32, 48, 64,
    96, 128, ... (each step at most half the length), so few shapes compile."""
    length = TIME_STEP
    while length < longest:
        length += max(TIME_STEP, 2 ** (length.bit_length() - 2) if length >= 32 else TIME_STEP)
    return length


def make_batch(inputs: SplitInputs, indices: Sequence[int], labels: Sequence[np.ndarray] | None = None,
               heads: Sequence[np.ndarray] | None = None, rows: int = 0) -> dict[str, Any]:
    """The padded batch of sentences `indices` (and empty rows up to `rows`, so that every batch of a
    run has one shape but for its length): `mask` `[batch, time]` and the inputs present
    (`word_ids`, `static_ids` `[batch, time]`, `char_ids`, `bilm_char_ids` `[batch, time, chars]`, `elmo`
    `[batch, time, layers, dim]`), with `labels` (`tags` for taggers, `relations` with `heads` for the
    parser; per sentence of the split) when given."""
    lengths = np.diff(inputs.offsets)[list(indices)]
    batch, time = max(rows, len(indices)), padded_length(int(lengths.max(initial=1)))
    lengths = np.pad(lengths, (0, batch - len(indices)))
    out: dict[str, Any] = {"mask": np.arange(time)[None] < lengths[:, None]}

    def stack(per_sentence: Sequence[np.ndarray], name: str, tail: tuple = ()) -> None:
        array = np.zeros((batch, time, *tail), per_sentence[0].dtype if len(per_sentence) else np.int32)
        for row, i in enumerate(indices):
            array[row, : len(per_sentence[i])] = per_sentence[i]
        out[name] = array

    for name in ("word_ids", "static_ids", "char_ids", "bilm_char_ids"):
        per_sentence = getattr(inputs, name)
        if per_sentence is not None:
            stack(per_sentence, name, per_sentence[0].shape[1:])
    if inputs.elmo is not None:
        elmo = np.zeros((batch, time, *inputs.elmo.shape[1:]), np.float32)
        for row, i in enumerate(indices):
            elmo[row, : lengths[row]] = inputs.elmo[inputs.offsets[i] : inputs.offsets[i + 1]]
        out["elmo"] = elmo
    if labels is not None:
        stack(labels, "relations" if heads is not None else "tags")
    if heads is not None:
        stack(heads, "heads")
    return out


def epoch_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of one training epoch, a function of (seed, epoch) only, so a resumed run reads
    what an uninterrupted one does: the sentences shuffled, cut into chunks of 50 batches, each chunk
    sorted by length (little padding) and cut into batches, the batches shuffled."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    lengths = np.asarray(lengths)
    batches = []
    chunk = 50 * batch_size
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]
