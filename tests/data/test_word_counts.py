"""elmo_jax.data.word_counts: a streamed pass over a corpus, its progress bar in bytes read."""

import os

from elmo_jax.data import word_counts


def test_progress_follows_bytes_read(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_text("".join(f"w{i} x\n" for i in range(50)), encoding="utf-8")
    seen = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.n = total, 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, k):
            self.n += k
            seen.append(self.n)

    monkeypatch.setattr(word_counts, "tqdm", Bar)
    monkeypatch.setattr(word_counts, "_PROGRESS_EVERY", 10)
    counts = word_counts.count_words(str(path))
    size = os.path.getsize(path)
    assert counts.sentences == 50
    assert seen == sorted(seen) and seen[-1] == size
    assert 0 < seen[0] < size  # A plain file advances the bar while it is read.
