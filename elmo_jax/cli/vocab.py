"""Vocabulary tools for text corpora of any size (`elmo-vocab`, or `python -m elmo_jax.cli.vocab`).

  elmo-vocab build --input 'corpus/train-*.txt' --output vocab.txt \\
      [--min_count N] [--max_size N] [--nocounts] [--segmenter none|jieba]
  elmo-vocab stats --input 'corpus/valid.txt' [--vocab vocab.txt] [--segmenter none|jieba]
  elmo-vocab chars --input 'corpus/train-*.txt' --output chars.txt [--min_count N]
      (a character vocabulary, data.char_vocab_file: docs/chinese.md)

Files (comma-separated globs; UTF-8, optionally gzip, one whitespace-tokenized sentence per line,
`.conllu` files their FORM column) are streamed line by line, so memory grows with the number of
distinct words only.
"""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from elmo_jax.data.segmenter import SEGMENTERS
from elmo_jax.runtime.atomic_write import check_not_inputs
from elmo_jax.cli import tool_flags
from elmo_jax.data.char_vocab import CharVocabulary, count_characters
from elmo_jax.data.sources import expand_globs
from elmo_jax.data.vocab import SPECIAL_TOKENS, Vocabulary
from elmo_jax.data.word_counts import count_words

# Each command's own flags (see elmo_jax.cli.tool_flags).
_BUILD = flags.FlagValues()
_STATS = flags.FlagValues()
_CHARS = flags.FlagValues()
flags.DEFINE_string("output", None, "vocabulary file to write", flag_values=_BUILD)
flags.DEFINE_integer("min_count", 1, "drop words seen fewer times", flag_values=_BUILD)
flags.DEFINE_integer("max_size", 0, "at most N lines, the 3 special tokens included (0 = all)", flag_values=_BUILD)
flags.DEFINE_bool(
    "counts", True,
    "each word with its count; --nocounts: one word per line without its count (elmo-jax then cannot check the "
    "frequency order)",
    flag_values=_BUILD,
)
flags.DEFINE_string("vocab", None, "vocabulary file: also print the OOV rates of tokens and types", flag_values=_STATS)
flags.DEFINE_string("output", None, "character vocabulary file to write", flag_values=_CHARS)
flags.DEFINE_integer("min_count", 2, "drop characters seen fewer times (they are read as bytes)", flag_values=_CHARS)
for _command_flags in (_BUILD, _STATS, _CHARS):
    flags.DEFINE_string(
        "input", None, "comma-separated globs of text files (optionally .gz)", flag_values=_command_flags
    )
    flags.DEFINE_bool("quiet", False, "no progress bar", flag_values=_command_flags)
    flags.DEFINE_enum(
        "segmenter", "none", SEGMENTERS, "what cuts the lines of text files into words, as data.segmenter "
        "(docs/chinese.md)", flag_values=_command_flags,
    )
_ERRORS = (ValueError, OSError)  # DataError, VocabularyError and an output that is an input are ValueErrors.


def _build() -> None:
    """`build`: write a bilm-tf vocabulary of the most frequent words."""
    tool_flags.check_positive(_BUILD, "min_count")
    if _BUILD.max_size and _BUILD.max_size < len(SPECIAL_TOKENS):
        raise tool_flags.UsageError(
            f"--max_size must be 0 or >= {len(SPECIAL_TOKENS)} (the special tokens), got {_BUILD.max_size}"
        )
    check_not_inputs([("--output", _BUILD.output)], [("--input", path) for path in expand_globs(_BUILD.input)])
    counts = count_words(_BUILD.input, progress=not _BUILD.quiet, segmenter=_BUILD.segmenter)
    vocab = Vocabulary.from_counts(counts.words, min_count=_BUILD.min_count, max_size=_BUILD.max_size or None)
    vocab.save(_BUILD.output, with_counts=_BUILD.counts)
    kept = sum(c for w, c in zip(vocab.words, vocab.counts) if w not in SPECIAL_TOKENS)
    print(
        f"wrote {len(vocab)} words to {_BUILD.output}: {len(vocab) - len(SPECIAL_TOKENS)} of "
        f"{len(counts.words)} types, covering {100 * kept / counts.tokens:.2f}% of {counts.tokens} tokens"
    )


def _chars() -> None:
    """`chars`: write a character vocabulary (data.char_vocab_file): every non-ASCII character seen at
    least --min_count times, most frequent first; a character not listed is read as its UTF-8 bytes."""
    tool_flags.check_positive(_CHARS, "min_count")
    check_not_inputs([("--output", _CHARS.output)], [("--input", path) for path in expand_globs(_CHARS.input)])
    counts = count_words(_CHARS.input, progress=not _CHARS.quiet, segmenter=_CHARS.segmenter)
    seen = count_characters(counts.words)
    characters = CharVocabulary.from_character_counts(seen, min_count=_CHARS.min_count)
    if not characters.characters:
        raise ValueError(
            f"--input: no non-ASCII character is seen {_CHARS.min_count} times or more: bytes spell the text as it is"
        )
    characters.save(_CHARS.output)
    print(
        f"wrote {len(characters)} characters to {_CHARS.output}: {len(characters)} of {len(seen)} non-ASCII "
        f"characters, covering {100 * sum(characters.counts) / sum(seen.values()):.2f}% of their "
        f"{sum(seen.values())} occurrences ({characters.n_ids} char ids)"
    )


def _stats() -> None:
    """`stats`: print sentence, token and type counts (and OOV rates)."""
    vocab = Vocabulary.load(_STATS.vocab) if _STATS.vocab else None  # Fails before a long pass over the corpus.
    counts = count_words(_STATS.input, progress=not _STATS.quiet, segmenter=_STATS.segmenter)
    rows = [("sentences", f"{counts.sentences}"), ("tokens", f"{counts.tokens}"), ("types", f"{len(counts.words)}")]
    if vocab is not None:
        oov = {w: c for w, c in counts.words.items() if w not in vocab}
        oov_tokens = sum(oov.values())
        rows += [
            ("OOV tokens", f"{100 * oov_tokens / counts.tokens:.2f}% ({oov_tokens} of {counts.tokens})"),
            ("OOV types", f"{100 * len(oov) / len(counts.words):.2f}% ({len(oov)} of {len(counts.words)})"),
        ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def _build_main(argv: Sequence[str]) -> int:
    return tool_flags.run(_BUILD, argv, _build, doc=_build.__doc__, required=["input", "output"], errors=_ERRORS)


def _chars_main(argv: Sequence[str]) -> int:
    return tool_flags.run(_CHARS, argv, _chars, doc=_chars.__doc__, required=["input", "output"], errors=_ERRORS)


def _stats_main(argv: Sequence[str]) -> int:
    return tool_flags.run(_STATS, argv, _stats, doc=_stats.__doc__, required=["input"], errors=_ERRORS)


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-vocab` / `python -m elmo_jax.cli.vocab`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run_commands(
        {"build": _build_main, "stats": _stats_main, "chars": _chars_main}, argv, doc=__doc__
    )


if __name__ == "__main__":
    sys.exit(main())
