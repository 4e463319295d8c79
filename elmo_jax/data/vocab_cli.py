"""Vocabulary tools for text corpora of any size (run as `python -m elmo_jax.data.vocab_cli`).

  python -m elmo_jax.data.vocab_cli build --input 'corpus/train-*.txt' --output vocab.txt \\
      [--min_count N] [--max_size N] [--nocounts]
  python -m elmo_jax.data.vocab_cli stats --input 'corpus/valid.txt' [--vocab vocab.txt]

Files (comma-separated globs; UTF-8, optionally gzip, one whitespace-tokenized sentence per line)
are streamed line by line, so memory grows with the number of distinct words only.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from dataclasses import dataclass
from typing import Sequence

from tqdm import tqdm

from elmo_jax.data.sources import DataError, TextFileSource
from elmo_jax.data.vocab import SPECIAL_TOKENS, Vocabulary, VocabularyError

_PROGRESS_EVERY = 4096  # Sentences between progress-bar updates.


@dataclass
class CorpusCounts:
    """Word counts of a corpus and its number of sentences."""

    words: collections.Counter
    sentences: int

    @property
    def tokens(self) -> int:
        return sum(self.words.values())


def count_words(patterns: str, progress: bool = True) -> CorpusCounts:
    """Counts the words of text files in one streamed pass (progress bar in bytes on disk)."""
    source = TextFileSource(patterns, shuffle=False, num_epochs=1)
    total = sum(os.path.getsize(f) for f in source.files)
    counts = CorpusCounts(collections.Counter(), 0)

    def bytes_read() -> int:
        return int(total * min(source.epochs_at(source.state_dict()), 1.0))

    with tqdm(total=total, unit="B", unit_scale=True, desc="reading", disable=not progress) as bar:
        for sentence in source:
            counts.words.update(sentence)
            counts.sentences += 1
            if counts.sentences % _PROGRESS_EVERY == 0:
                bar.update(bytes_read() - bar.n)
        bar.update(total - bar.n)
    return counts


def build(args: argparse.Namespace) -> None:
    counts = count_words(args.input, progress=not args.quiet)
    vocab = Vocabulary.from_counts(counts.words, min_count=args.min_count, max_size=args.max_size or None)
    vocab.save(args.output, with_counts=args.counts)
    kept = sum(c for w, c in zip(vocab.words, vocab.counts) if w not in SPECIAL_TOKENS)
    print(
        f"wrote {len(vocab)} words to {args.output}: {len(vocab) - len(SPECIAL_TOKENS)} of "
        f"{len(counts.words)} types, covering {100 * kept / counts.tokens:.2f}% of {counts.tokens} tokens"
    )


def stats(args: argparse.Namespace) -> None:
    vocab = Vocabulary.load(args.vocab) if args.vocab else None  # Fails before a long pass over the corpus.
    counts = count_words(args.input, progress=not args.quiet)
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


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m elmo_jax.data.vocab_cli", description="Vocabulary tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("build", help="write a bilm-tf vocabulary of the most frequent words")
    b.add_argument("--output", required=True, help="vocabulary file to write")
    b.add_argument("--min_count", type=int, default=1, help="drop words seen fewer times")
    b.add_argument("--max_size", type=int, default=0, help="at most N lines, the 3 special tokens included (0 = all)")
    b.add_argument(
        "--nocounts", dest="counts", action="store_false",
        help="one word per line without its count (elmo-jax then cannot check the frequency order)",
    )
    s = commands.add_parser("stats", help="print sentence, token and type counts (and OOV rates)")
    s.add_argument("--vocab", help="vocabulary file: also print the OOV rates of tokens and types")
    for p in (b, s):
        p.add_argument("--input", required=True, help="comma-separated globs of text files (optionally .gz)")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.command == "build":
        if args.min_count < 1:
            b.error(f"--min_count must be >= 1, got {args.min_count}")
        if args.max_size and args.max_size < len(SPECIAL_TOKENS):
            b.error(f"--max_size must be 0 or >= {len(SPECIAL_TOKENS)} (the special tokens), got {args.max_size}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        if args.command == "build":
            build(args)
        else:
            stats(args)
    except (DataError, VocabularyError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
