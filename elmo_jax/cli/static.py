"""Static word vectors on a biLM's training text and vocabulary (`elmo-static`, or `python -m elmo_jax.cli.static`).

  elmo-static --workdir runs/demo --method glove --out runs/demo/glove.txt
  elmo-static --config demo --method skipgram --dim 100 --out runs/skipgram_ptb.txt
  elmo-static --config configs/demo.py --method cbow [--window 5] [--epochs 5] [--seed 0] --out cbow.txt
  elmo-static --workdir runs/demo --method skipgram --objective hierarchical --out runs/demo/skipgram_hs.txt
  elmo-static --workdir runs/demo --method elmo_layers [--corpus text.txt] [--contexts 100] [--min_count 1] \
      [--layers 0,1,2] [--words words.txt] --out runs/demo/elmo    # runs/demo/elmo.layer0.txt, ...

--workdir reads a trained biLM's config.json and vocab.txt, so the vectors see exactly its text and
vocabulary; --config a recipe (a file, or a shipped recipe by name, as train.py's --config), its
corpus (data.source) and its vocabulary (data.vocab_file, or built from the corpus as training
builds it). Words outside the vocabulary are `<UNK>`, as the biLM sees them. The methods: GloVe in
JAX (defaults: window 10, 15 epochs), word2vec's skip-gram and CBOW with negative sampling or
hierarchical softmax (--objective) through gensim (`pip install -e .[static]`; window 5, 5 epochs).
Writes one vector per vocabulary word, word2vec's text format with its header
(docs/static_vectors.md), atomically. elmo_layers: the --workdir biLM's own layers, one file per
layer: layer 0 the token embedding of each word, an LSTM layer each word's mean over its first
--contexts occurrences in --corpus (default: the workdir's training text), words seen fewer than
--min_count times left out (elmo_jax/inference/static_vectors.py).
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Sequence

import ml_collections
import numpy as np
from absl import flags

from elmo_jax.cli import tool_flags
from elmo_jax.cli.config_flags import load_config_file
from elmo_jax.config import validate
from elmo_jax.config.recipes import recipe_path
from elmo_jax.data.corpus import load_or_build_vocab, training_sentences, vocab_origin
from elmo_jax.data.sources import expand_globs, numbered_sentences
from elmo_jax.data.vocab import Vocabulary, read_words
from elmo_jax.inference import static_vectors
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.pretrained import bilm_from_workdir
from elmo_jax.runtime import workdir_files
from elmo_jax.runtime.atomic_write import check_not_inputs
from elmo_jax.runtime.host_memory import physical_memory_bytes
from elmo_jax.static import word2vec
from elmo_jax.static.cooccurrence import cooccurrence_counts
from elmo_jax.static.glove import GloveConfig, train_glove
from elmo_jax.static.vector_files import write_text
from elmo_jax.workdir.runs import workdir_inputs
from elmo_jax.workdir.saved_config import saved_config, with_paths_from_start

GLOVE = "glove"
ELMO_LAYERS = "elmo_layers"  # A trained biLM's own layers as static vectors: no training.
# Per method, the default window and epochs: the GloVe paper's window and GloveConfig's epochs; gensim's.
DEFAULTS = {GLOVE: (10, GloveConfig.epochs)}
DEFAULTS.update(dict.fromkeys(word2vec.METHODS, (word2vec.Word2VecConfig.window, word2vec.Word2VecConfig.epochs)))

# The [n_words, dim] float32 tables each method holds at once: GloVe's W, W~, their AdaGrad sums and
# the vectors written; gensim's input and output vectors and the vectors written.
TABLES = {GLOVE: 5, **dict.fromkeys(word2vec.METHODS, 3)}
# Seeds NumPy's and gensim's generators both take: one range for every method.
SEEDS = range(2**32)
# The flags only some methods read: given with another method, they are refused, not ignored.
TRAINED = (GLOVE, *word2vec.METHODS)
METHOD_FLAGS = {
    "config": TRAINED, "dim": TRAINED, "window": TRAINED, "epochs": TRAINED, "seed": TRAINED,
    "objective": word2vec.METHODS,
    **dict.fromkeys(("corpus", "contexts", "min_count", "layers", "words"), (ELMO_LAYERS,)),
}

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
tool_flags.define_runtime_flags(_FLAGS)
flags.DEFINE_string(
    "workdir", None, "a trained biLM's workdir: its config.json's corpus and its vocab.txt (or --config)",
    flag_values=_FLAGS,
)
flags.DEFINE_string(
    "config", None,
    "a recipe file (configs/demo.py) or a shipped recipe by name (demo, ptb_word_small, ...): its corpus, and "
    "its vocabulary built as training builds it (or --workdir)",
    flag_values=_FLAGS,
)
flags.DEFINE_enum(
    "method", None, [*TRAINED, ELMO_LAYERS], "what trains the vectors (elmo_layers: --workdir's biLM's own layers)",
    flag_values=_FLAGS,
)
flags.DEFINE_enum(
    "objective", word2vec.Word2VecConfig.objective, word2vec.OBJECTIVES,
    "skipgram and cbow: what trains each word's output, negative sampling or hierarchical softmax "
    "(gensim's hs=1, negative=0)", flag_values=_FLAGS,
)
flags.DEFINE_integer("dim", 100, "dimensions of the vectors", flag_values=_FLAGS)
flags.DEFINE_integer(
    "window", None, "words on each side that count as context (default: 10 for glove, 5 for skipgram and cbow)",
    flag_values=_FLAGS,
)
flags.DEFINE_integer(
    "epochs", None, "passes over the co-occurrences (glove, default 15) or the corpus (skipgram, cbow, default 5)",
    flag_values=_FLAGS,
)
flags.DEFINE_integer(
    "seed", 0, "seed of the initial vectors and the sampling: the same seed, the same vectors", flag_values=_FLAGS
)
flags.DEFINE_string(
    "out", None, "the vector file to write (word2vec's text format); elmo_layers: a prefix, PREFIX.layerJ.txt "
    "for each layer J", flag_values=_FLAGS,
)
flags.DEFINE_string(
    "corpus", None, "elmo_layers: a text file of tokenized sentences, one a line, words split at spaces (*.conllu: "
    "its sentences), read once (a pipe works); default: --workdir's training text (data.source)",
    flag_values=_FLAGS,
)
flags.DEFINE_integer(
    "contexts", 100, "elmo_layers: an LSTM layer's vector of a word is the mean over at most this many of its "
    "occurrences, the first in --corpus", flag_values=_FLAGS,
)
flags.DEFINE_integer(
    "min_count", 1, "elmo_layers: words --corpus holds fewer times get no LSTM layer vector", flag_values=_FLAGS
)
flags.DEFINE_list(
    "layers", None, "elmo_layers: the ELMo layers to write, 0 the token embeddings (default: all, 0 to n_layers)",
    flag_values=_FLAGS,
)
flags.DEFINE_string(
    "words", None, "elmo_layers: a file of the words to write, one a line (first tab-separated field), any word "
    "(default: --workdir's vocab.txt)", flag_values=_FLAGS,
)
_ERRORS = (*tool_flags.ERRORS, word2vec.GensimMissing)


def _check_method_flags() -> None:
    """UsageError for a flag --method does not read (METHOD_FLAGS)."""
    for name, methods in METHOD_FLAGS.items():
        if _FLAGS[name].present and _FLAGS.method not in methods:
            raise tool_flags.UsageError(f"--{name} is for --method {' or '.join(methods)}, not {_FLAGS.method}")


def _check_flags() -> tuple[int, int]:
    """The window and epochs to train with; UsageError for flags that cannot be used."""
    if (_FLAGS.workdir is None) == (_FLAGS.config is None):
        raise tool_flags.UsageError("give either --workdir or --config (not both, not neither)")
    window = _FLAGS.window if _FLAGS.window is not None else DEFAULTS[_FLAGS.method][0]
    epochs = _FLAGS.epochs if _FLAGS.epochs is not None else DEFAULTS[_FLAGS.method][1]
    for name, value in (("dim", _FLAGS.dim), ("window", window), ("epochs", epochs)):
        if value < 1:
            raise tool_flags.UsageError(f"--{name} must be >= 1, got {value}")
    if _FLAGS.seed not in SEEDS:
        raise tool_flags.UsageError(
            f"--seed must be in [0, 2**32 - 1] (as NumPy and gensim take it), got {_FLAGS.seed}"
        )
    _check_memory(1)  # A dimension too large for one word's rows, before anything is read.
    _check_out(_FLAGS.out)
    return window, epochs


def _check_out(path: str) -> None:
    """UsageError for an output file that is empty, a directory, or below a file."""
    if not _FLAGS.out:
        raise tool_flags.UsageError("--out is empty: name the vector file to write")
    if os.path.isdir(path):
        raise tool_flags.UsageError(f"--out {path} is a directory (the vectors go to a file)")
    above = os.path.dirname(os.path.abspath(path))  # Missing directories are made, a file is in the way.
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        raise tool_flags.UsageError(f"--out {path}: {above} is a file, not a directory")


def _check_memory(n_words: int) -> None:
    """UsageError when the method's tables (TABLES) of `n_words` x --dim float32 exceed the machine's memory."""
    tables, dim = TABLES[_FLAGS.method], _FLAGS.dim
    need, have = tables * n_words * dim * 4, physical_memory_bytes()
    if need > have:
        raise tool_flags.UsageError(
            f"--dim {dim:,}: {_FLAGS.method}'s {tables} tables of [{n_words:,} words, {dim:,}] float32 need "
            f"{_bytes(need)}, more than this machine's {_bytes(have)} of memory"
        )


def _bytes(n: int) -> str:
    """`n` bytes in MiB below a GiB, else in GiB."""
    return f"{n / 2**20:,.1f} MiB" if n < 2**30 else f"{n / 2**30:,.1f} GiB"


def _config() -> ml_collections.ConfigDict:
    """The config whose data section names the corpus: --workdir's config.json or --config's recipe."""
    if _FLAGS.workdir is not None:
        return with_paths_from_start(saved_config(_FLAGS.workdir), _FLAGS.workdir)
    config = load_config_file(_FLAGS.config)
    validate(config)
    return config


def _inputs(data: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """The files the vectors are made from, as `check_not_inputs` takes them."""
    inputs = workdir_inputs(_FLAGS.workdir) + [("data.vocab_file", data.vocab_file)]
    if _FLAGS.config is not None:
        inputs.append(("--config", recipe_path(_FLAGS.config).split(":", 1)[0]))
    if data.source == "text" and data.train_files:
        inputs += [("data.train_files", path) for path in expand_globs(data.train_files)]
    return inputs


def _vocabulary(data: ml_collections.ConfigDict) -> tuple[Vocabulary, str]:
    """The biLM's vocabulary and where it comes from: --workdir's vocab.txt, else the config's."""
    if _FLAGS.workdir is not None:
        path = os.path.join(_FLAGS.workdir, workdir_files.VOCAB)
        return Vocabulary.load(path), path
    return load_or_build_vocab(data), vocab_origin(data)


def _train(corpus: word2vec.Corpus, vocab: Vocabulary, window: int, epochs: int) -> tuple[np.ndarray, int]:
    """`[n_words, dim]` vectors by --method, and the tokens of one pass over the corpus."""
    say = functools.partial(print, flush=True)
    if _FLAGS.method == GLOVE:
        start = time.perf_counter()
        cooc = cooccurrence_counts(corpus(), vocab, window)
        say(f"counted {cooc.tokens:,} tokens, window {window}: {len(cooc.values):,} nonzero co-occurrences "
            f"in {time.perf_counter() - start:.1f} s")
        config = GloveConfig(dim=_FLAGS.dim, epochs=epochs, seed=_FLAGS.seed)
        return train_glove(cooc, config, log=say).vectors, cooc.tokens
    config = word2vec.Word2VecConfig(
        method=_FLAGS.method, objective=_FLAGS.objective, dim=_FLAGS.dim, window=window, epochs=epochs,
        seed=_FLAGS.seed,
    )
    result = word2vec.train_word2vec(corpus, vocab, config, log=say)
    return result.vectors, int(result.counts.sum())


def _method_name() -> str:
    """--method as the summary line names it: word2vec's with its objective."""
    if _FLAGS.method in word2vec.METHODS:
        return f"{_FLAGS.method}, {word2vec.OBJECTIVE_NAMES[_FLAGS.objective]}"
    return _FLAGS.method


def _static() -> None:
    """The CLI: progress lines, the vector file(s), a summary line."""
    _check_method_flags()
    if _FLAGS.method == ELMO_LAYERS:
        _elmo_layers()
        return
    window, epochs = _check_flags()
    if _FLAGS.method in word2vec.METHODS:
        word2vec.gensim_word2vec()  # Missing gensim fails before the corpus is read.
    config = _config()
    check_not_inputs([("--out", _FLAGS.out)], _inputs(config.data))
    tool_flags.configure_runtime(_FLAGS)
    start = time.perf_counter()
    vocab, origin = _vocabulary(config.data)
    _check_memory(len(vocab))  # Before the corpus is counted or trained on.
    print(f"vocabulary: {len(vocab):,} words ({origin}); corpus: data.source={config.data.source!r}", flush=True)
    vectors, tokens = _train(functools.partial(training_sentences, config.data), vocab, window, epochs)
    write_text(_FLAGS.out, vocab.words, vectors)
    print(f"{_method_name()}: {len(vocab):,} words x {_FLAGS.dim} dims, window {window}, {epochs} epochs over "
          f"{tokens:,} tokens in {time.perf_counter() - start:.1f} s; wrote {_FLAGS.out}")


def _check_elmo_flags() -> None:
    """UsageError for elmo_layers' flags that cannot be used, before the biLM is read."""
    if _FLAGS.workdir is None:
        raise tool_flags.UsageError("--method elmo_layers reads a trained biLM: give --workdir (not --config)")
    tool_flags.check_positive(_FLAGS, "contexts", "min_count")
    _check_out(static_vectors.layer_path(_FLAGS.out, 0))  # The directory every layer's file goes to.
    if _FLAGS.corpus is not None and not os.path.exists(_FLAGS.corpus):
        raise tool_flags.UsageError(f"--corpus {_FLAGS.corpus}: no such file")
    if _FLAGS.layers is not None:
        try:
            [int(layer) for layer in _FLAGS.layers]
        except ValueError:
            raise tool_flags.UsageError(f"--layers {','.join(_FLAGS.layers)}: not integers") from None


def _elmo_layer_numbers(n_layers: int) -> list[int]:
    """--layers (default: 0 to n_layers), checked against the biLM's; UsageError naming its layers."""
    layers = list(range(n_layers + 1)) if _FLAGS.layers is None else [int(layer) for layer in _FLAGS.layers]
    try:
        static_vectors.check_layers(layers, n_layers)
    except ValueError as e:
        raise tool_flags.UsageError(f"--layers: {e}") from None
    return layers


def _check_pooling_memory(n_words: int, n_pooled: int, width: int) -> None:
    """UsageError when the pooled layers' float64 sums and float32 means exceed the machine's memory."""
    need, have = n_pooled * n_words * width * 12, physical_memory_bytes()
    if need > have:
        raise tool_flags.UsageError(
            f"{n_pooled} layers of [{n_words:,} words, {width:,}] sums need {_bytes(need)}, more than this "
            f"machine's {_bytes(have)} of memory: fewer --words or --layers"
        )


def _elmo_sentences(data: ml_collections.ConfigDict):
    """The sentences the LSTM layers are pooled over: --corpus's lines cut at spaces, else the training text."""
    if _FLAGS.corpus is None:
        return training_sentences(data)
    return (tokens for _, tokens in numbered_sentences(_FLAGS.corpus))


def _elmo_layers() -> None:
    """--method elmo_layers: a file per layer of the --workdir biLM (inference/static_vectors.py)."""
    _check_elmo_flags()
    config = _config()
    tool_flags.configure_runtime(_FLAGS)
    start = time.perf_counter()
    words_path = _FLAGS.words or os.path.join(_FLAGS.workdir, workdir_files.VOCAB)
    words = read_words(words_path) if _FLAGS.words else Vocabulary.load(words_path).words
    static_vectors.check_words(words)
    pretrained = bilm_from_workdir(_FLAGS.workdir)
    embedder = ElmoEmbedder.from_pretrained(pretrained, stateful=False, any_token_width=True)
    n_layers = embedder.n_outputs - 1
    layers = _elmo_layer_numbers(n_layers)
    outputs = [("--out", static_vectors.layer_path(_FLAGS.out, layer)) for layer in layers]
    for _, path in outputs:
        _check_out(path)
    inputs = _inputs(config.data) + [("--corpus", _FLAGS.corpus), ("--words", _FLAGS.words)]
    check_not_inputs(outputs, inputs)
    pooled_layers = [layer for layer in layers if layer > 0]
    _check_pooling_memory(len(words), len(pooled_layers), 2 * embedder.model.width)
    print(f"biLM: {_FLAGS.workdir}, step {pretrained.step}, {n_layers} layers of {2 * embedder.model.width}; "
          f"words: {len(words):,} ({words_path})", flush=True)
    written = []
    if 0 in layers:
        vectors = static_vectors.token_layer(embedder, words)
        written.append(static_vectors.write_layer(_FLAGS.out, 0, words, vectors))
        print(f"layer 0 (token embeddings): {len(words):,} words x {vectors.shape[1]} dims; wrote {written[-1]}",
              flush=True)
    if pooled_layers:
        pooled = static_vectors.pool_layers(
            embedder, _elmo_sentences(config.data), words, pooled_layers, _FLAGS.contexts, _FLAGS.min_count
        )
        corpus = _FLAGS.corpus or f"data.source={config.data.source!r}"
        print(f"corpus {corpus}: {pooled.sentences:,} sentences read, {pooled.embedded:,} embedded; "
              f"{len(pooled.words):,} words seen >= {_FLAGS.min_count} times ({pooled.omitted:,} left out), "
              f"{int(pooled.contexts.sum()):,} contexts (at most {_FLAGS.contexts} a word)", flush=True)
        for layer in pooled_layers:
            written.append(static_vectors.write_layer(_FLAGS.out, layer, pooled.words, pooled.layer(layer)))
            print(f"layer {layer} (mean over contexts): {len(pooled.words):,} words x "
                  f"{pooled.vectors.shape[2]} dims; wrote {written[-1]}", flush=True)
    print(f"{ELMO_LAYERS}: layers {','.join(map(str, layers))} of {_FLAGS.workdir} in "
          f"{time.perf_counter() - start:.1f} s; wrote {', '.join(written)}")


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-static` / `python -m elmo_jax.cli.static`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _static, doc=__doc__, required=["method", "out"], errors=_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
