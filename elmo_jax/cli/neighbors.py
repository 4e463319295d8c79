"""Contextual nearest neighbours of a word in a sentence (`elmo-neighbors`; Peters et al. 2018, Table 4).

  elmo-neighbors --workdir runs/demo --corpus 'ptb.train.txt' \\
      --query "he will play the role of the king" --word 2 [--layer L] [--k 5] [--same_word]
  elmo-neighbors --options options.json --weights weights.hdf5 --corpus 'text/*.txt' ... [--static vectors.txt]

Prints the k corpus tokens whose layer-L representation is nearest to the query word's, the k
corpus words nearest by token embedding and, for each --static file of word vectors, its k words
nearest by their vectors; what each list holds: elmo_jax/inference/neighbors.py.
"""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.data.segmenter import splitter
from elmo_jax.data.sources import count_lines, expand_globs
from elmo_jax.inference.embedder import ElmoEmbedder, embedder_from_bilm_files, embedder_from_workdir
from elmo_jax.inference.neighbors import (
    check_layer, check_query, format_report, nearest_static_words, nearest_words, read_corpus, scan_corpus,
)
from elmo_jax.static.lookup import StaticVectors

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
tool_flags.define_model_flags(_FLAGS)
tool_flags.define_runtime_flags(_FLAGS)
flags.DEFINE_string(
    "corpus", None, "comma-separated globs of text files, one sentence a line (*.conllu: CoNLL-U's sentences)",
    flag_values=_FLAGS,
)
flags.DEFINE_string("query", None, "the query sentence, cut as --segmenter cuts the corpus", flag_values=_FLAGS)
flags.DEFINE_integer("word", None, "0-based index of the query word in --query", flag_values=_FLAGS)
flags.DEFINE_integer("layer", None, "ELMo layer: 0 = token embeddings (default: top LSTM)", flag_values=_FLAGS)
flags.DEFINE_integer("k", 5, "neighbours per list", flag_values=_FLAGS)
flags.DEFINE_bool("same_word", False, "contexts: only occurrences of the query word", flag_values=_FLAGS)
flags.DEFINE_integer("max_words", 100_000, "word list: among the N most frequent corpus words", flag_values=_FLAGS)
flags.DEFINE_multi_string(
    "static", [], "a file of static word vectors (word2vec/GloVe text or word2vec binary): also its k words nearest "
    "to the query word (as written, else in lower case)", flag_values=_FLAGS,
)
tool_flags.define_segmenter_flag(_FLAGS, "each --corpus line and --query")
flags.DEFINE_integer("batch_size", 32, "corpus lines per embedder batch", flag_values=_FLAGS)
flags.DEFINE_bool("no_progress", False, "no progress bar", flag_values=_FLAGS)


def _neighbors() -> None:
    """The CLI: both lists of the query word on stdout."""
    tool_flags.configure_runtime(_FLAGS)
    tool_flags.check_model_source(_FLAGS)
    tool_flags.check_positive(_FLAGS, "k", "batch_size", "max_words")
    segmenter = tool_flags.segmenter(_FLAGS)
    vocabulary = tool_flags.workdir_vocabulary(_FLAGS)
    query = splitter(segmenter, vocabulary)(_FLAGS.query)
    check_query(query, _FLAGS.word)
    paths = expand_globs(_FLAGS.corpus)
    if not paths:
        raise ValueError(f"--corpus {_FLAGS.corpus!r} names no file")
    static = [StaticVectors.read(path, path) for path in _FLAGS.static]  # Before the model: bad files fail at once.
    if _FLAGS.workdir is not None:
        embedder = embedder_from_workdir(_FLAGS.workdir, _FLAGS.step, _FLAGS.batch_size, stateful=False)
    elif _FLAGS.manylangs is not None:
        embedder = ElmoEmbedder.from_manylangs(_FLAGS.manylangs, batch_size=_FLAGS.batch_size)
    else:
        embedder = embedder_from_bilm_files(_FLAGS.options, _FLAGS.weights, _FLAGS.batch_size, stateful=False)
    layer = embedder.n_outputs - 1 if _FLAGS.layer is None else _FLAGS.layer
    check_layer(embedder, layer)
    progress = not _FLAGS.no_progress
    totals = [count_lines(path) for path in paths] if progress else [None]
    total = None if None in totals else sum(totals)
    scan = scan_corpus(
        embedder, read_corpus(paths, segmenter, vocabulary), query, _FLAGS.word, layer, _FLAGS.k, _FLAGS.same_word,
        total, progress,
    )
    words = nearest_words(embedder, query[_FLAGS.word], scan.word_counts, _FLAGS.k, _FLAGS.max_words)
    n_words = min(_FLAGS.max_words, len(scan.word_counts))
    lists = [nearest_static_words(vectors, query[_FLAGS.word], scan.word_counts, _FLAGS.k) for vectors in static]
    print(format_report(
        query, _FLAGS.word, layer, embedder.n_outputs - 1, _FLAGS.same_word, scan, words, n_words, lists
    ))


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-neighbors` / `python -m elmo_jax.cli.neighbors`: the exit status (elmo_jax.cli.tool_flags)."""
    required = ["corpus", "query", "word"]
    return tool_flags.run(_FLAGS, argv, _neighbors, doc=__doc__, required=required, errors=tool_flags.ERRORS)


if __name__ == "__main__":
    sys.exit(main())
