"""Export a training checkpoint as bilm-tf/AllenNLP files (`elmo-export`).

  elmo-export --workdir runs/demo --options out/options.json --weights out/weights.hdf5 [--step N] \\
      [--softmax_weights out/softmax.hdf5 --vocab out/vocab.txt]
  elmo-export --manylangs en.model --options out/options.json --weights out/weights.hdf5

An ELMoForManyLangs model (`--manylangs`, or a workdir continuing one) is written where bilm-tf's files
hold it exactly (no word embedding, char.dic single-byte characters: elmo_jax/interop/manylangs_export.py);
otherwise one error naming the model and the reason.

With the softmax and the vocabulary, `elmo-evaluate --options ... --weights ... --softmax_weights ...
--vocab ... --eval_files GLOB` gives the checkpoint's perplexity from these files. The files are
written as one set (all or none) and carry one export id, so files of two exports are not
evaluated or embedded together. The format: elmo_jax/interop/bilm_hdf5.py.
"""

from __future__ import annotations

import json
import sys
from typing import Sequence

from absl import flags

from elmo_jax.runtime import quiet_logs
from elmo_jax.cli import tool_flags
from elmo_jax.interop.bilm_hdf5 import export_checkpoint, export_manylangs

_FLAGS = flags.FlagValues()  # The export CLI's own flags (see elmo_jax.cli.tool_flags).
flags.DEFINE_string("workdir", None, "elmo-jax training workdir", flag_values=_FLAGS)
flags.DEFINE_string("manylangs", None, "an ELMoForManyLangs model directory instead of --workdir", flag_values=_FLAGS)
flags.DEFINE_string("options", None, "options.json to write", flag_values=_FLAGS)
flags.DEFINE_string("weights", None, "hdf5 weight file to write", flag_values=_FLAGS)
flags.DEFINE_integer("step", None, "checkpoint step (default: the latest)", flag_values=_FLAGS)
flags.DEFINE_string(
    "softmax_weights", None, "also write the softmax (softmax/W, softmax/b) to this hdf5 file", flag_values=_FLAGS
)
flags.DEFINE_string(
    "vocab", None, "also write the vocabulary (one word per line, softmax row order)", flag_values=_FLAGS
)
flags.DEFINE_bool(quiet_logs.FLAG_NAME, False, quiet_logs.FLAG_HELP, flag_values=_FLAGS)


def _export() -> None:
    """The CLI: `export_checkpoint` with the flags."""
    quiet_logs.configure(_FLAGS.log_library)
    if bool(_FLAGS.workdir) == bool(_FLAGS.manylangs):
        raise tool_flags.UsageError("give one model: --workdir or --manylangs")
    if _FLAGS.manylangs:
        if _FLAGS.step is not None or _FLAGS.softmax_weights or _FLAGS.vocab:
            raise tool_flags.UsageError("--manylangs has no checkpoint steps and no softmax (none is released)")
        export_manylangs(_FLAGS.manylangs, _FLAGS.options, _FLAGS.weights)
    else:
        export_checkpoint(_FLAGS.workdir, _FLAGS.options, _FLAGS.weights, _FLAGS.step, _FLAGS.softmax_weights,
                          _FLAGS.vocab)
    written = [path for path in (_FLAGS.options, _FLAGS.weights, _FLAGS.softmax_weights, _FLAGS.vocab) if path]
    print(f"wrote {', '.join(written)}")
    with open(_FLAGS.options) as f:
        max_chars = json.load(f)["char_cnn"]["max_characters_per_token"]
    if max_chars != ALLENNLP_MAX_CHARS:
        print(allennlp_width_note(max_chars))


ALLENNLP_MAX_CHARS = 50  # AllenNLP's Elmo reshapes its char ids to this width, whatever options.json says.


def allennlp_width_note(max_chars: int) -> str:
    """The line `elmo-export` prints for a biLM that AllenNLP's own `Elmo` cannot read: bilm-tf and
    elmo-jax read any width, AllenNLP only 50 chars per token."""
    return (f"note: this biLM reads {max_chars} chars per token: bilm-tf and elmo-jax read these files, AllenNLP's "
            f"own Elmo only those of {ALLENNLP_MAX_CHARS} (train with --config.data.max_chars_per_token=50)")


def main(argv: Sequence[str] | None = None) -> int:
    """`elmo-export` / `python -m elmo_jax.cli.export`: the exit status (elmo_jax.cli.tool_flags)."""
    required = ["options", "weights"]
    return tool_flags.run(_FLAGS, argv, _export, doc=__doc__, required=required, errors=tool_flags.ERRORS)


if __name__ == "__main__":
    sys.exit(main())
