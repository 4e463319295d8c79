"""absl flags of the tools whose `main(argv)` returns an exit status (elmo-embed, elmo-export,
elmo-vocab, elmo-report, elmo-neighbors, elmo-probe, elmo-static, elmo-vectors), and the flags they share with train
and evaluate.

`main(argv)` may run many times in one process (tests, notebooks): each tool has a `flags.FlagValues`
of its own, parsed from the defaults on every call. Exit status: 0, also after the help; 1 with one
line `error: ...` on stderr for a flag or argument that cannot be used or one of the tool's `errors`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Callable, Mapping, Sequence

from absl import flags

from elmo_jax.data.segmenter import TOOL_SEGMENTERS, VOCABULARY_SEGMENTER
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.runtime import compilation_cache, host_memory, quiet_logs, workdir_files
from elmo_jax.runtime.atomic_write import exit_on_sigterm
from elmo_jax.workdir.saved_config import saved_config

flags.disclaim_key_flags()  # The flags the helpers below define belong to the calling tool (its --help).
HELP_ARGS = ("-h", "--help", "--helpshort", "--helpfull")  # argparse's and absl's spellings.
ERRORS = (ValueError, RuntimeError, OSError)  # What the model tools report as `error: ...`.
ONE_MODEL = "give one model: --workdir, --options with --weights, or --manylangs"


class UsageError(Exception):
    """Flags that parse but cannot be used as given: `error: <message>` on stderr, exit status 1."""


def define_model_flags(
    flag_values: flags.FlagValues, workdir_help: str = "elmo-jax training workdir (instead of --options/--weights)"
) -> None:
    """--options and --weights (a bilm-tf/AllenNLP model), --workdir and --step (a checkpoint), or --manylangs
    (an ELMoForManyLangs model directory)."""
    flags.DEFINE_string("options", None, "bilm-tf/AllenNLP options.json (with --weights)", flag_values=flag_values)
    flags.DEFINE_string("weights", None, "bilm-tf/AllenNLP hdf5 weight file (with --options)", flag_values=flag_values)
    flags.DEFINE_string("workdir", None, workdir_help, flag_values=flag_values)
    flags.DEFINE_integer("step", None, "with --workdir: checkpoint step (default: latest)", flag_values=flag_values)
    flags.DEFINE_string("manylangs", None, "an ELMoForManyLangs model directory as unzipped (config.json, char.dic, "
                        "*.pkl), each sentence from zero LSTM states", flag_values=flag_values)


def define_segmenter_flag(flag_values: flags.FlagValues, what: str) -> None:
    """--segmenter: what cuts `what` (raw text) into words; `segmenter` reads it."""
    flags.DEFINE_enum(
        "segmenter", None, TOOL_SEGMENTERS,
        f"what cuts {what} into words: whitespace (none) or jieba, as the biLM's training text was cut, or "
        "jieba_vocabulary (jieba's words, those outside --workdir's vocabulary cut into words of it: for a biLM "
        "trained on gold segmentation); default: --workdir's data.segmenter, else none", flag_values=flag_values,
    )


def segmenter(flag_values: flags.FlagValues) -> str:
    """--segmenter, else the workdir's training text's (a workdir trained on jieba's words is read
    on jieba's words unless told otherwise), else none. One warning when --segmenter cuts the text
    otherwise than the workdir's training text was cut: jieba's 苹果公司 is one word where gold
    segmentation has 苹果 公司 ('jieba_vocabulary', which cuts jieba's words into the vocabulary's,
    is for a biLM trained on text segmented before training: no warning then). UsageError for
    'jieba_vocabulary' without a workdir, whose vocabulary it reads."""
    if flag_values.workdir is None:
        if flag_values.segmenter == VOCABULARY_SEGMENTER:
            raise UsageError(f"--segmenter {VOCABULARY_SEGMENTER} reads --workdir's vocabulary: give --workdir")
        return flag_values.segmenter or "none"
    trained = saved_config(flag_values.workdir).data.segmenter
    expected = (trained, VOCABULARY_SEGMENTER) if trained == "none" else (trained,)
    if flag_values.segmenter is not None and flag_values.segmenter not in expected:
        logging.warning(
            "--segmenter %s cuts the text otherwise than %s's training text was cut (data.segmenter=%r): its "
            "words may be outside the biLM's vocabulary", flag_values.segmenter, flag_values.workdir, trained,
        )
    return flag_values.segmenter or trained


def workdir_vocabulary(flag_values: flags.FlagValues) -> Vocabulary | None:
    """--workdir's training words (its vocabulary file), None for bilm-tf files (--options, --weights)."""
    if flag_values.workdir is None:
        return None
    return Vocabulary.load(os.path.join(flag_values.workdir, workdir_files.VOCAB))


def define_runtime_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--log_library and --compilation_cache, which `configure_runtime` applies."""
    flags.DEFINE_bool(quiet_logs.FLAG_NAME, False, quiet_logs.FLAG_HELP, flag_values=flag_values)
    flags.DEFINE_string(
        compilation_cache.FLAG_NAME, compilation_cache.default_dir(), compilation_cache.FLAG_HELP,
        flag_values=flag_values,
    )


def configure_runtime(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The process set up for JAX as `define_runtime_flags`' flags say; before JAX starts a backend."""
    host_memory.reuse_freed_memory()
    quiet_logs.configure(flag_values[quiet_logs.FLAG_NAME].value)
    compilation_cache.configure(flag_values[compilation_cache.FLAG_NAME].value)


def check_positive(flag_values: flags.FlagValues, *names: str) -> None:
    """Raises UsageError for the first of the integer flags `names` below 1."""
    for name in names:
        if flag_values[name].value < 1:
            raise UsageError(f"--{name} must be >= 1, got {flag_values[name].value}")


def check_model_source(flag_values: flags.FlagValues, either: str = ONE_MODEL) -> None:
    """Raises UsageError (`either`) unless the flags name one model: --workdir, --options with --weights,
    or --manylangs."""
    workdir, options, weights, manylangs = (flag_values[name].value
                                            for name in ("workdir", "options", "weights", "manylangs"))
    files = options is not None or weights is not None
    if (workdir is not None) + files + (manylangs is not None) != 1:
        raise UsageError(either)
    if files and (options is None or weights is None):
        raise UsageError("--options and --weights go together")


def run(
    flag_values: flags.FlagValues, argv: Sequence[str] | None, body: Callable[..., None], *, doc: str,
    required: Sequence[str] = (), positional: str | None = None, errors: tuple[type[Exception], ...] = (),
) -> int:
    """Parses `argv` (default: sys.argv[1:]) into `flag_values`, calls `body(*arguments)` and returns
    the exit status. `required`: the flags that must be given; `positional`: the name of the tool's
    arguments (one or more, e.g. 'RUN_DIR'), without which it takes none. Help: `doc` and the flags."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(arg in HELP_ARGS for arg in (argv[: argv.index("--")] if "--" in argv else argv)):  # Before a '--'.
        print(f"{doc.strip()}\n{flag_values.get_help(include_special_flags=False)}")
        return 0
    try:
        with exit_on_sigterm():  # A SIGTERM removes what the tool was writing, then exits 143.
            body(*_parse(flag_values, argv, required, positional))
    except (UsageError, *errors) as e:
        return _error(e)
    return 0


def run_commands(
    commands: Mapping[str, Callable[[Sequence[str]], int]], argv: Sequence[str] | None, *, doc: str
) -> int:
    """A tool whose first argument names a command (`elmo-vocab build ...`): returns the command's
    `main(the other arguments)`, each command a `run` of its own flags (and its own help)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in commands:
        return commands[argv[0]](argv[1:])
    names = ", ".join(commands)
    if argv and argv[0] in HELP_ARGS:
        print(f"{doc.strip()}\n\ncommands: {names} (COMMAND --help lists its flags)")
        return 0
    if not argv:
        return _error(f"the following arguments are required: command ({names})")
    return _error(f"invalid command {argv[0]!r} (choose from {names})")


def _parse(
    flag_values: flags.FlagValues, argv: list[str], required: Sequence[str], positional: str | None
) -> list[str]:
    """The positional arguments, once `argv`'s flags are in `flag_values`; raises UsageError."""
    flag_values.unparse_flags()  # From the defaults: nothing of an earlier call's argv (even one that failed) stays.
    try:
        arguments = flag_values(["", *argv])[1:]
    except (flags.Error, ValueError) as e:  # ValueError: a value given to --noFLAG.
        raise UsageError(e) from e
    missing = [f"--{name}" for name in required if not flag_values[name].present]
    if positional is not None and not arguments:
        missing.insert(0, positional)
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)}")
    if arguments and positional is None:
        raise UsageError(f"unexpected arguments: {' '.join(arguments)}")
    return arguments


def _error(message: object) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1
