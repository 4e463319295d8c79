"""Input-pipeline throughput: tokens/s of training batches (char ids included) from text shards.

  python benchmarks/input_pipeline.py --config=configs/default.py [--batch_size=128] [--unroll_steps=20]
      [--seconds=10] [--repeats=3] [--prefetch]
  python benchmarks/input_pipeline.py --config=configs/default.py --corpus_gb=1 [--corpus_dir=DIR]

Writes a synthetic sharded corpus (words of a 200,000-word list drawn with Zipf frequencies, 1-49
tokens per line, a vocabulary of the `--vocab_size` most frequent, so the rest are out of
vocabulary) to a temporary directory, then streams it through the real path, `TextFileSource`
(the config's shuffle buffer and sentence limit) -> `BiLMBatcher`, on this process's main thread
(one core), or through the background `Prefetcher` with `--prefetch`. tokens = positions with mask
1 (words and `</S>`).

Without `--corpus_gb`: a small corpus read in endless passes, timed `--repeats` times for
`--seconds` each. With `--corpus_gb=N`: N GB of shards (about 64 MB each), read once, completely.
The corpus is written by a child process, so `peak_rss_mb` (ru_maxrss) is that of streaming alone.
Prints, as its last line, one JSON object:
  {"config", "batch", "shuffle_buffer", "max_chars", "prefetch", "corpus_bytes", "shards",
   "tokens_per_sec" (median), "tokens_per_sec_runs", "tokens", "seconds", "rss_start_mb", "peak_rss_mb"}
"""

from __future__ import annotations

import gzip
import itertools
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
from absl import app, flags
from ml_collections import config_flags

from elmo_jax.cli.config_flags import define_config_flag
from elmo_jax.data.batching import BiLMBatcher, Prefetcher
from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
from elmo_jax.data.sources import TextFileSource
from elmo_jax.data.vocab import Vocabulary

FLAGS = flags.FLAGS
define_config_flag("Config (data.* and train.batch_size/unroll_steps).")
flags.DEFINE_integer("batch_size", 0, "Streams per direction (default: the config's train.batch_size).")
flags.DEFINE_integer("unroll_steps", 0, "Window length (default: the config's train.unroll_steps).")
flags.DEFINE_float("seconds", 10.0, "Seconds per timed run (without --corpus_gb).")
flags.DEFINE_integer("repeats", 3, "Timed runs; the median is reported (without --corpus_gb).")
flags.DEFINE_float("corpus_gb", 0.0, "Write this many GB of shards and stream all of them once (0: small corpus).")
flags.DEFINE_string("corpus_dir", "", "Directory for the shards (default: a temporary one, deleted afterwards).")
flags.DEFINE_integer("vocab_size", 100_000, "Vocabulary: the most frequent words of the 200,000-word list.")
flags.DEFINE_bool("gzip", False, "Write gzip shards.")
flags.DEFINE_bool("prefetch", False, "Consume batches from the background Prefetcher (as training does).")
flags.mark_flags_as_required(["config"])

N_WORDS = 200_000
SHARD_BYTES = 64 << 20  # With --corpus_gb.
SMALL_CORPUS_BYTES, SMALL_SHARD_BYTES = 24 << 20, 3 << 20


def synthetic_words(n: int, seed: int = 0) -> list[str]:
    """n distinct lowercase words of 2-12 letters."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < n:
        letters = rng.integers(ord("a"), ord("z") + 1, (n, 12), dtype=np.uint8)
        for row, length in zip(letters, rng.integers(2, 13, n)):
            words.setdefault(row[:length].tobytes().decode(), None)
    return list(words)[:n]


def write_corpus(directory: str, total_bytes: int, shard_bytes: int, use_gzip: bool, seed: int = 0) -> None:
    """Shards of about `shard_bytes` of Zipf-distributed words, one sentence per line, until
    `total_bytes` (uncompressed) are written."""
    words = np.array(synthetic_words(N_WORDS), dtype=object)
    cdf = np.cumsum(1.0 / np.arange(1, N_WORDS + 1))
    cdf /= cdf[-1]
    rng = np.random.default_rng(seed + 1)
    written, shard = 0, 0
    while written < total_bytes:
        path = os.path.join(directory, f"train-{shard:05d}.txt" + (".gz" if use_gzip else ""))
        opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if use_gzip else (lambda p: open(p, "wb"))
        with opener(path + ".tmp") as out:
            size = 0
            while size < min(shard_bytes, total_bytes - written):
                tokens = words[np.searchsorted(cdf, rng.random(1 << 17))]
                lengths = rng.integers(1, 50, len(tokens) // 25)
                ends = np.cumsum(lengths)
                ends = ends[ends <= len(tokens)]
                lines = [" ".join(tokens[a:b]) for a, b in zip(itertools.chain([0], ends), ends)]
                data = ("\n".join(lines) + "\n").encode()
                out.write(data)
                size += len(data)
        os.replace(path + ".tmp", path)
        written += size
        shard += 1


def corpus_vocabulary(vocab_size: int) -> Vocabulary:
    """The `vocab_size` most frequent synthetic words, in frequency order (the writer's Zipf ranks)."""
    words = synthetic_words(N_WORDS)[: vocab_size - 3]
    return Vocabulary([BOS_TOKEN, EOS_TOKEN, UNK_TOKEN] + words)


def count_tokens(batches, seconds: float) -> tuple[int, float]:
    """Real positions in the batches produced within `seconds` (all of them if seconds is inf)."""
    tokens, start = 0, time.perf_counter()
    for batch in batches:
        tokens += int(batch["mask"][0].sum())
        if time.perf_counter() - start >= seconds:
            break
    return tokens, time.perf_counter() - start


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB.


def main(argv: list[str]) -> None:
    del argv
    config = FLAGS.config
    batch = FLAGS.batch_size or config.train.batch_size
    unroll = FLAGS.unroll_steps or config.train.unroll_steps
    full_pass = FLAGS.corpus_gb > 0
    total_bytes = int(FLAGS.corpus_gb * 1e9) if full_pass else SMALL_CORPUS_BYTES
    tmp = None if FLAGS.corpus_dir else tempfile.TemporaryDirectory(prefix="elmo_jax_corpus_")
    directory = FLAGS.corpus_dir or tmp.name
    os.makedirs(directory, exist_ok=True)
    shard_bytes = SHARD_BYTES if full_pass else SMALL_SHARD_BYTES
    writer = multiprocessing.get_context("fork").Process(
        target=write_corpus, args=(directory, total_bytes, shard_bytes, FLAGS.gzip)
    )
    writer.start()
    writer.join()
    if writer.exitcode:
        raise SystemExit(f"writing the corpus failed (exit code {writer.exitcode})")
    shards = sorted(os.listdir(directory))
    corpus_bytes = sum(os.path.getsize(os.path.join(directory, s)) for s in shards)
    vocab = corpus_vocabulary(FLAGS.vocab_size)

    def batches():
        source = TextFileSource(
            os.path.join(directory, "train-*"),
            shuffle=config.data.shuffle,
            seed=config.seed,
            num_epochs=1 if full_pass else None,
            shuffle_buffer=config.data.shuffle_buffer,
            max_sentence_tokens=config.data.max_sentence_tokens,
        )
        batcher = BiLMBatcher(source, vocab, batch, unroll, config.data.max_chars_per_token)
        return Prefetcher(batcher, config.data.prefetch_batches) if FLAGS.prefetch else batcher

    rss_start = max_rss_mb()
    if full_pass:
        tokens, seconds = count_tokens(batches(), float("inf"))
        runs = [tokens / seconds]
    else:
        runs, tokens, seconds = [], 0, 0.0
        for _ in range(FLAGS.repeats):
            stream = batches()
            next(stream)  # Opening files and the first block of the shuffle buffer are not timed.
            n, s = count_tokens(stream, FLAGS.seconds)
            runs.append(n / s)
            tokens, seconds = tokens + n, seconds + s
            if FLAGS.prefetch:
                stream.close()
    if tmp is not None:
        tmp.cleanup()
    record = {
        "config": config_flags.get_config_filename(FLAGS["config"]),
        "batch": [batch, unroll],
        "shuffle_buffer": config.data.shuffle_buffer if config.data.shuffle else 0,
        "max_chars": config.data.max_chars_per_token,
        "prefetch": FLAGS.prefetch,
        "gzip": FLAGS.gzip,
        "corpus_bytes": corpus_bytes,
        "shards": len(shards),
        "tokens_per_sec": round(float(np.median(runs)), 1),
        "tokens_per_sec_runs": [round(r, 1) for r in runs],
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "rss_start_mb": round(rss_start, 1),
        "peak_rss_mb": round(max_rss_mb(), 1),
    }
    print(json.dumps(record))


if __name__ == "__main__":
    app.run(main)
