"""GloVe on the bundled PTB training text: seconds counting, compiling and per epoch, entries/s,
J / nnz per epoch, and the nearest neighbours (cosine) of a few frequent words as a sanity check.

  python benchmarks/glove_ptb.py [--dim 100] [--window 10] [--epochs 15] [--batch_size 1024] \\
      [--seed 0] [--output benchmarks/results/static/glove_ptb.json] [--vectors glove_ptb.txt]

The vocabulary is the biLM's of `data.source='ptb'` (every training word, `<UNK>` for PTB's
`<unk>`). The JSON names the machine (lscpu's model name) and the JAX backend.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import subprocess
import time

import jax
import numpy as np

from elmo_jax.data.sources import ptb_sentences
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.runtime.atomic_write import write_json_atomic
from elmo_jax.static.cooccurrence import cooccurrence_counts
from elmo_jax.static.glove import GloveConfig, train_glove
from elmo_jax.static.vector_files import write_text

PROBE_WORDS = ("company", "stock", "president", "million", "monday", "bank", "two", "said")


def machine() -> str:
    """lscpu's model name."""
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def neighbours(vectors: np.ndarray, vocab: Vocabulary, word: str, k: int = 8) -> list[str]:
    """The `k` words of highest cosine with `word`'s vector, itself excluded."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ unit[vocab.word_to_id(word)]
    order = [i for i in np.argsort(-cosines) if vocab.words[i] != word]
    return [f"{vocab.words[i]} {cosines[i]:.2f}" for i in order[:k]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch_size", type=int, default=GloveConfig.batch_size)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/static/glove_ptb.json")
    parser.add_argument("--vectors", help="also write the vectors here (text, word2vec's header)")
    args = parser.parse_args()

    sentences = ptb_sentences("train")
    vocab = Vocabulary.build(sentences)
    start = time.perf_counter()
    cooc = cooccurrence_counts(sentences, vocab, args.window)
    count_seconds = time.perf_counter() - start
    print(f"counted {cooc.tokens:,} tokens, window {args.window}: {len(cooc.values):,} nonzero entries of "
          f"{len(vocab):,} words in {count_seconds:.2f} s ({cooc.tokens / count_seconds:,.0f} tokens/s)", flush=True)

    config = GloveConfig(dim=args.dim, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed)
    result = train_glove(cooc, config, log=lambda line: print(line, flush=True))
    epoch_seconds = float(np.median(result.seconds))
    print(f"compiled in {result.compile_seconds:.1f} s; median epoch {epoch_seconds:.1f} s, "
          f"{len(cooc.values) / epoch_seconds:,.0f} entries/s; {sum(result.seconds):.0f} s in all")
    found = {word: neighbours(result.vectors, vocab, word) for word in PROBE_WORDS}
    for word, near in found.items():
        print(f"{word}: {', '.join(near)}")

    record = {
        "machine": machine(), "jax_backend": jax.default_backend(), "jax": jax.__version__,
        "config": dataclasses.asdict(config), "window": args.window, "tokens": cooc.tokens,
        "vocabulary": len(vocab), "entries": len(cooc.values), "count_seconds": round(count_seconds, 3),
        "compile_seconds": round(result.compile_seconds, 3), "epoch_seconds": [round(s, 3) for s in result.seconds],
        "entries_per_second": round(len(cooc.values) / epoch_seconds), "loss_per_entry": result.losses,
        "neighbours": found,
    }
    write_json_atomic(args.output, record)
    if args.vectors:
        write_text(args.vectors, vocab.words, result.vectors)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
