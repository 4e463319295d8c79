"""The corpus a config names: training source, evaluation sentences, and its vocabulary."""

from __future__ import annotations

import collections
import glob as globlib
import logging
import os
from typing import Sequence

import ml_collections

from elmo_jax.data import sources, unsegmented
from elmo_jax.data.batching import Batch, BiLMBatcher
from elmo_jax.data.char_vocab import CharVocabulary, count_cut
from elmo_jax.data.contiguous import ContiguousBatcher
from elmo_jax.data.resumable import ResumableIterator
from elmo_jax.data.tfds_source import TfdsSource
from elmo_jax.data.vocab import MIN_VOCAB_SIZE, SPECIAL_TOKENS, Vocabulary
from elmo_jax.runtime import workdir_files

def _files(data: ml_collections.ConfigDict, key: str, needed_for: str = "(a glob of text files)") -> list[str]:
    """The files matched by config key `data.<key>` (data.source='text'), as glob patterns matching
    exactly themselves; DataError saying what they are `needed_for` when the key is empty."""
    if not data[key]:
        raise sources.DataError(f"data.source='text' needs data.{key} {needed_for}")
    try:
        return [globlib.escape(path) for path in sources.expand_globs(data[key])]
    except sources.DataError as e:
        raise sources.DataError(f"data.{key}: {e}") from None


def _tfds(data: ml_collections.ConfigDict, split: str, **kwargs) -> TfdsSource:
    """The TFDS split that stands for corpus split `split` ('train' | 'valid' | 'test')."""
    if split not in sources.SPLITS:
        raise sources.DataError(f"unknown split {split!r} for data.source='tfds'; expected one of {sources.SPLITS}")
    tfds_split = data[f"tfds_{split}_split"]
    return TfdsSource(data.tfds_name, tfds_split, data.tfds_data_dir, data.tfds_feature, **kwargs)


def train_source(
    data: ml_collections.ConfigDict,
    seed: int,
    num_epochs: int | None,
    process_index: int = 0,
    process_count: int = 1,
) -> sources.InMemorySource | sources.TextFileSource | TfdsSource:
    """The training sentence stream of this process; processes read disjoint parts: file i (or
    with fewer files than processes, line i of each) goes to process i mod P. With several
    processes the stream is endless: one running out early would leave the others waiting.
    """
    if process_count > 1:
        num_epochs = None
    if data.source == "ptb":
        sentences = sources.ptb_sentences("train")[process_index::process_count]
        return sources.InMemorySource(sentences, shuffle=data.shuffle, seed=seed, num_epochs=num_epochs)
    if data.source == "tfds":
        return _tfds(
            data, "train", shuffle=data.shuffle, seed=seed, num_epochs=num_epochs,
            process_index=process_index, process_count=process_count,
        )
    files = _files(data, "train_files")
    if len(files) >= process_count:
        files, line_shard = files[process_index::process_count], (0, 1)
    else:
        line_shard = (process_index, process_count)
    return sources.TextFileSource(
        files,
        shuffle=data.shuffle,
        seed=seed,
        num_epochs=num_epochs,
        shuffle_buffer=data.shuffle_buffer,
        max_sentence_tokens=data.max_sentence_tokens,
        line_shard=line_shard,
        segmenter=data.segmenter,
    )


def training_batcher(
    data: ml_collections.ConfigDict,
    vocab: Vocabulary,
    batch_size: int,
    unroll_steps: int,
    max_chars: int | None,
    seed: int,
    num_epochs: int | None,
    process_index: int = 0,
    process_count: int = 1,
    characters: CharVocabulary | None = None,
) -> ResumableIterator[Batch]:
    """This process's training batches, `batch_size / process_count` of the `batch_size` streams,
    laid out as `data.streams` says ('contiguous' holds the training text in memory); words spelled
    with `characters` (a character vocabulary) or as bytes."""
    if data.streams == "contiguous":
        sentences = list(training_sentences(data))
        return ContiguousBatcher(
            sentences, vocab, batch_size, unroll_steps, max_chars, num_epochs, process_index, process_count, characters
        )
    source = train_source(data, seed, num_epochs, process_index, process_count)
    return BiLMBatcher(source, vocab, batch_size // process_count, unroll_steps, max_chars, characters)


def evaluation_batcher(
    data: ml_collections.ConfigDict,
    sentences: Sequence[list[str]],
    vocab: Vocabulary,
    batch_size: int,
    unroll_steps: int,
    max_chars: int | None,
    process_index: int = 0,
    process_count: int = 1,
    characters: CharVocabulary | None = None,
) -> ResumableIterator[Batch]:
    """One pass over held-out `sentences` in their order, laid out as `data.streams` says;
    the processes read disjoint parts."""
    if data.streams == "contiguous":
        return ContiguousBatcher(
            sentences, vocab, batch_size, unroll_steps, max_chars, 1, process_index, process_count, characters
        )
    local = list(sentences[process_index::process_count]) if process_count > 1 else sentences
    source = sources.InMemorySource(local, shuffle=False, num_epochs=1)
    return BiLMBatcher(source, vocab, batch_size // process_count, unroll_steps, max_chars, characters)


def training_sentences(data: ml_collections.ConfigDict):
    """One ordered, streamed pass over all training sentences (for vocabulary building and counting)."""
    if data.source == "ptb":
        return sources.ptb_sentences("train")
    if data.source == "tfds":
        return _tfds(data, "train", shuffle=False)
    return sources.TextFileSource(
        _files(data, "train_files"), shuffle=False, num_epochs=1, max_sentence_tokens=data.max_sentence_tokens,
        segmenter=data.segmenter,
    )


def _warn_if_files_unsegmented(patterns: str) -> None:
    """unsegmented.py's warning for the text files `patterns` match (none when they match nothing:
    that is said where the files are read, after the checks of the vocabulary's size)."""
    try:
        files = sources.expand_globs(patterns)
    except sources.DataError:
        return
    unsegmented.warn_if_unsegmented(files)


def warn_if_eval_unsegmented(data: ml_collections.ConfigDict, eval_files: str = "") -> None:
    """The same warning for the text files an evaluation reads (`eval_files`, else data.eval_files
    of data.source='text') when data.segmenter leaves them uncut."""
    patterns = eval_files or (data.eval_files if data.source == "text" else "")
    if data.segmenter == "none" and patterns:
        _warn_if_files_unsegmented(patterns)


def warn_if_unsegmented(data: ml_collections.ConfigDict) -> None:
    """One warning naming the first training text file that looks like Chinese or Japanese without
    spaces between words (unsegmented.py), when data.source='text' reads it unsegmented; a sample of
    each file, read before the passes over the corpus."""
    if data.source == "text" and data.segmenter == "none" and data.train_files:
        _warn_if_files_unsegmented(data.train_files)


def eval_set_name(source: str, split: str, eval_files: str = "") -> str:
    """What an evaluation reads, its label and file name: 'files' for text files (`eval_files`, or
    data.source='text', which has no splits), else the corpus split."""
    return "files" if eval_files or source == "text" else split


def check_split_applies(data: ml_collections.ConfigDict, split: str, eval_files: str = "") -> None:
    """A split asked for by name (evaluate.py's --split) where files are evaluated is a DataError."""
    if eval_files:
        raise sources.DataError(f"--split={split} does not apply beside --eval_files: the files are evaluated")
    if data.source == "text":
        raise sources.DataError(
            f"--split={split} does not apply to data.source='text', which has no splits: "
            f"data.eval_files={data.eval_files!r} is evaluated"
        )


def eval_sentences(data: ml_collections.ConfigDict, split: str, eval_files: str = "") -> list[list[str]]:
    """Held-out sentences: `eval_files` if given, else the split of the configured corpus."""
    if eval_files:
        return sources.read_sentences(eval_files, data.segmenter)
    if data.source == "ptb":
        return sources.ptb_sentences(split)
    if data.source == "tfds":
        return list(_tfds(data, split, shuffle=False))
    return sources.read_sentences(_files(data, "eval_files", "(or --eval_files) to evaluate"), data.segmenter)


def vocab_origin(data: ml_collections.ConfigDict) -> str:
    """Where a run's vocabulary comes from, in the words of its config keys (for errors)."""
    if data.vocab_file:
        return f"data.vocab_file={data.vocab_file!r}"
    return (
        f"the vocabulary built with data.vocab_min_count={data.vocab_min_count}, "
        f"data.vocab_max_size={data.vocab_max_size}"
    )


def load_or_build_vocab(data: ml_collections.ConfigDict, workdir: str | None = None) -> Vocabulary:
    """`WORKDIR/vocab.txt` if present, else `data.vocab_file`, else built from the training data;
    saved to `WORKDIR/vocab.txt`. DataError before saving one too small to train on."""
    saved = os.path.join(workdir, workdir_files.VOCAB) if workdir else None
    if saved and os.path.exists(saved):
        return Vocabulary.load(saved)
    if data.vocab_file:
        vocab = Vocabulary.load(data.vocab_file)
    else:
        sentences = training_sentences(data)  # Its files checked before the log says the work starts.
        logging.info("Building the vocabulary from the training data")
        vocab = Vocabulary.build(sentences, min_count=data.vocab_min_count, max_size=data.vocab_max_size or None)
    if len(vocab) < MIN_VOCAB_SIZE:
        raise sources.DataError(
            f"{vocab_origin(data)} has {len(vocab)} words, special tokens included; "
            f"training needs at least {MIN_VOCAB_SIZE}"
        )
    if saved:
        vocab.save(saved)
    return vocab


def load_characters(data: ml_collections.ConfigDict, workdir: str | None = None) -> CharVocabulary | None:
    """The run's character vocabulary: `WORKDIR/chars.txt` if present, else `data.char_vocab_file`,
    else built from the training data (`data.char_vocab_min_count` > 0), else None (bytes). The
    training loop saves it once the checkpoint has been checked. A resumed run whose config names
    another file than the one it saved, or bytes, is refused (its char table's rows are the saved
    file's)."""
    saved = os.path.join(workdir, workdir_files.CHARS) if workdir else None
    if saved and os.path.exists(saved):
        characters = CharVocabulary.load(saved)
        if data.char_vocab_file and CharVocabulary.load(data.char_vocab_file) != characters:
            raise sources.DataError(
                f"data.char_vocab_file={data.char_vocab_file!r} is not the character vocabulary {saved} was "
                "trained with"
            )
        if not (data.char_vocab_file or data.char_vocab_min_count):
            raise sources.DataError(
                f"data.char_vocab_file='' and data.char_vocab_min_count=0 spell bytes, not the character vocabulary "
                f"{saved} was trained with"
            )
        return characters
    if data.char_vocab_file:
        return CharVocabulary.load(data.char_vocab_file)
    if not data.char_vocab_min_count:
        return None
    sentences = training_sentences(data)  # Its files checked before the log says the work starts.
    logging.info("Building the character vocabulary from the training data")
    counts: collections.Counter[str] = collections.Counter()
    for sentence in sentences:
        counts.update(sentence)
    characters = CharVocabulary.build(counts, data.char_vocab_min_count)
    if not len(characters):
        raise sources.DataError(
            f"no non-ASCII character of the training data is seen data.char_vocab_min_count="
            f"{data.char_vocab_min_count} times: set it to 0 (bytes)"
        )
    return characters


def warn_cut_words(vocab: Vocabulary, max_chars: int, characters: CharVocabulary | None) -> None:
    """One warning counting the vocabulary's words longer than the char CNN reads (`max_chars`
    ids, BOW and EOW included): each is read as its first units only."""
    words = [w for w in vocab.words if w not in SPECIAL_TOKENS]
    n_cut, first = count_cut(words, max_chars, characters)
    if n_cut:
        units = "units (a listed character or a byte)" if characters else "UTF-8 bytes"
        logging.warning(
            "%d of the vocabulary's %d words are longer than data.max_chars_per_token - 2 = %d %s and are read "
            "cut (%r the first)", n_cut, len(words), max_chars - 2, units, first,
        )


def count_positions(sentences) -> int:
    """Predicted positions per direction in one pass: n + 1 per sentence of n words."""
    return sum(len(s) + 1 for s in sentences)
