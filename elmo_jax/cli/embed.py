"""ELMo representations of a file of sentences, or the token embeddings of a vocabulary (`elmo-embed`).

  elmo-embed --options options.json --weights weights.hdf5 \\
      --input sentences.txt --output elmo.hdf5 [--batch_size 64] [--stateless] [--vocab_to_cache vocab.txt] \\
      [--layers all|top|average | --all | --top | --average] [--forget_sentences | --use_sentence_keys] \\
      [--engine auto|cpu|xla] [--segmenter none|jieba|jieba_vocabulary]
  elmo-embed --workdir runs/demo [--step N] --input sentences.txt --output elmo.hdf5
  elmo-embed --manylangs zhs.model --input sentences.txt --output elmo.hdf5  # docs/elmoformanylangs.md
  elmo-embed --options options.json --weights weights.hdf5 --token_embeddings vocab.txt --output tokens.hdf5

Input: one whitespace-tokenized sentence per line (UTF-8), read once (a pipe works), or a
`*.conllu` file's sentences (their FORMs); `--segmenter jieba` cuts raw Chinese lines into words as
`data.segmenter='jieba'` cut the training text (docs/chinese.md), `--segmenter jieba_vocabulary`
into words of --workdir's vocabulary (a biLM trained on gold segmentation), and raw Chinese left
uncut is warned about. Output: one float32 dataset per input line (CoNLL-U: sentence), named by its 0-based
number, `(n_layers + 1, n_tokens, 2 * width)` (`--layers all`) or `(n_tokens, 2 * width)` (`top`,
`average`), and `sentence_to_index` (JSON, sentence -> dataset name), as AllenNLP's `allennlp elmo`;
stateful over batches of --batch_size consecutive lines unless --stateless. The formats in full:
elmo_jax/inference/hdf5_output.py; what is computed and how: elmo_jax/inference/embedder.py."""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from elmo_jax.runtime.atomic_write import check_not_inputs
from elmo_jax.cli import tool_flags
from elmo_jax.data.vocab import read_words
from elmo_jax.inference.embedder import DEFAULT_BATCH_SIZE, ENGINES, ElmoEmbedder, dump_token_embeddings
from elmo_jax.inference.hdf5_output import LAYER_MODES
from elmo_jax.workdir.runs import workdir_inputs

_FLAGS = flags.FlagValues()  # The CLI's own flags (see elmo_jax.cli.tool_flags).
tool_flags.define_model_flags(
    _FLAGS, "elmo-jax training workdir (instead of --options/--weights); a word-input biLM "
    "(model.token_encoder='word') maps words to ids by its vocab.txt, unknown words -> <UNK> as in training",
)
tool_flags.define_runtime_flags(_FLAGS)
flags.DEFINE_string("input", None, "sentences, one whitespace-tokenized sentence per line", flag_values=_FLAGS)
flags.DEFINE_string(
    "token_embeddings", None, "vocabulary file: write the token embeddings of its words instead", flag_values=_FLAGS
)
flags.DEFINE_string("output", None, "hdf5 file to write", flag_values=_FLAGS)
flags.DEFINE_integer(
    "batch_size", DEFAULT_BATCH_SIZE, "consecutive lines per batch (state rows), AllenNLP's default", flag_values=_FLAGS
)
flags.DEFINE_bool(
    "stateless", False, "embed every line from zero LSTM states (default: row r carries on from the line before it "
    "in batch row r)", flag_values=_FLAGS,
)
flags.DEFINE_enum(
    "layers", "all", LAYER_MODES,
    "per sentence: all layers (n_layers + 1, n, 2P), the top layer or their average (n, 2P)", flag_values=_FLAGS,
)
for _mode in LAYER_MODES:  # AllenNLP's spelling of --layers.
    flags.DEFINE_bool(_mode, False, f"the same as --layers {_mode} (AllenNLP's flag)", flag_values=_FLAGS)
flags.DEFINE_bool(
    "forget_sentences", False, "write no sentence_to_index dataset (the JSON of sentence -> dataset name)",
    flag_values=_FLAGS,
)
flags.DEFINE_bool(
    "use_sentence_keys", False,
    "name each dataset by its sentence instead of its line number (a repeated sentence is written once; "
    "no sentence_to_index)", flag_values=_FLAGS,
)
flags.DEFINE_string(
    "vocab_to_cache", None,
    "vocabulary file: compute its words' token embeddings once, up front (same output; char-CNN biLMs only)",
    flag_values=_FLAGS,
)
flags.DEFINE_enum(
    "engine", "auto", ENGINES,
    "what computes the char CNN and the LSTMs: C++ kernels built for this CPU on first use (cpu), jitted XLA "
    "(xla), or the kernels when computing on the CPU in float32 (auto)",
    flag_values=_FLAGS,
)

tool_flags.define_segmenter_flag(_FLAGS, "each --input line")


_INPUT_FLAGS = ("input", "token_embeddings", "options", "weights", "vocab_to_cache")  # Files --output must not be.


def _layers() -> str:
    """--layers, or the one of --all, --top and --average given (AllenNLP's flags)."""
    given = [mode for mode in LAYER_MODES if _FLAGS[mode].value]
    if len(given) > 1:
        raise tool_flags.UsageError(f"give one of --all, --top and --average, got {', '.join('--' + g for g in given)}")
    if given and _FLAGS["layers"].present and _FLAGS.layers != given[0]:
        raise tool_flags.UsageError(f"--{given[0]} and --layers={_FLAGS.layers} disagree")
    return given[0] if given else _FLAGS.layers


def _embed() -> None:
    """The CLI: checks the flags' combinations, then writes --output."""
    tool_flags.check_model_source(_FLAGS)
    if (_FLAGS.input is None) == (_FLAGS.token_embeddings is None):
        raise tool_flags.UsageError("give exactly one of --input and --token_embeddings")
    if _FLAGS.segmenter not in (None, "none") and _FLAGS.input is None:
        raise tool_flags.UsageError("--segmenter cuts the lines of --input; --token_embeddings reads words")
    tool_flags.check_positive(_FLAGS, "batch_size")
    layers = _layers()
    inputs = [(f"--{name}", _FLAGS[name].value) for name in _INPUT_FLAGS]
    check_not_inputs([("--output", _FLAGS.output)], inputs + workdir_inputs(_FLAGS.workdir))
    tool_flags.configure_runtime(_FLAGS)
    cache = read_words(_FLAGS.vocab_to_cache) if _FLAGS.vocab_to_cache else None
    settings = {"batch_size": _FLAGS.batch_size, "stateful": not _FLAGS.stateless, "vocab_to_cache": cache,
                "engine": _FLAGS.engine}
    if _FLAGS.workdir is not None:
        embedder = ElmoEmbedder.from_workdir(_FLAGS.workdir, _FLAGS.step, **settings)
    elif _FLAGS.manylangs is not None:  # As ELMoForManyLangs' fresh Embedder: no state carried between lines.
        embedder = ElmoEmbedder.from_manylangs(_FLAGS.manylangs, **{**settings, "stateful": False})
    else:
        embedder = ElmoEmbedder(_FLAGS.options, _FLAGS.weights, **settings)
    if _FLAGS.input is not None:
        n = embedder.embed_file(
            _FLAGS.input, _FLAGS.output, layers,
            forget_sentences=_FLAGS.forget_sentences, use_sentence_keys=_FLAGS.use_sentence_keys,
            segmenter=tool_flags.segmenter(_FLAGS), vocabulary=tool_flags.workdir_vocabulary(_FLAGS),
        )
        print(f"wrote {n} sentences to {_FLAGS.output}")
    else:
        n = dump_token_embeddings(embedder, _FLAGS.token_embeddings, _FLAGS.output)
        print(f"wrote {n} token embeddings to {_FLAGS.output}")


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-embed` / `python -m elmo_jax.cli.embed`: the exit status (elmo_jax.cli.tool_flags)."""
    return tool_flags.run(_FLAGS, argv, _embed, doc=__doc__, required=["output"], errors=tool_flags.ERRORS)


if __name__ == "__main__":
    sys.exit(main())
