"""Word counts of text corpora of any size, streamed line by line (memory grows with the number of
distinct words only): what a vocabulary is built from (`elmo-vocab build`)."""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass

from tqdm import tqdm

from elmo_jax.data.sources import TextFileSource
from elmo_jax.data.unsegmented import warn_if_unsegmented

_PROGRESS_EVERY = 4096  # Sentences between progress-bar updates.


@dataclass
class CorpusCounts:
    """Word counts of a corpus and its number of sentences."""

    words: collections.Counter
    sentences: int

    @property
    def tokens(self) -> int:
        return sum(self.words.values())


def count_words(patterns: str, progress: bool = True, segmenter: str = "none") -> CorpusCounts:
    """Counts the words of text files, their lines cut by `segmenter` (data.segmenter's values), in
    one streamed pass (progress bar in bytes on disk); first warns about a file that looks like
    unsegmented Chinese or Japanese when it is not segmented."""
    source = TextFileSource(patterns, shuffle=False, num_epochs=1, segmenter=segmenter)
    if segmenter == "none":
        warn_if_unsegmented(source.files)
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
