"""The `--config` flag of the entry points and the command line of train and evaluate: help that
lists the command's flags, one-line errors. ml_collections' config flags do not parse lists, which
the configs declare (as config.json and options.json write them): `ListParser` makes them
overridable, `--config.model.char_cnn.filters='((1, 8), (2, 8))'` (or '[[1, 8], [2, 8]]').
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import sys
from typing import Any, Callable, Iterable, Sequence

from absl import flags
from ml_collections import config_flags

from elmo_jax.cli.tool_flags import HELP_ARGS
from elmo_jax.config import recipes
from elmo_jax.config.migration import RENAMED
from elmo_jax.workdir.saved_config import saved_config


class ListParser(flags.ArgumentParser):
    """A Python list or tuple literal, nested tuples included, parsed into nested lists."""

    def parse(self, argument: str | list | tuple) -> list:
        """The value as lists at every depth (how the config files write it); else ValueError."""
        value = argument
        if isinstance(argument, str):
            try:
                value = ast.literal_eval(argument)
            except (ValueError, SyntaxError, TypeError):
                value = None
        if not isinstance(value, (list, tuple)):  # absl prefixes the flag and its value.
            raise ValueError("expected a Python list literal such as '[[1, 8], [2, 8]]'")
        return _as_lists(value)

    def flag_type(self) -> str:
        return "list"


def _as_lists(value: Any) -> Any:
    """`value` with every tuple or list, at any depth, turned into a list."""
    if isinstance(value, (list, tuple)):
        return [_as_lists(item) for item in value]
    return value


def define_config_flag(help_string: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines `--config`, a locked config file whose keys, lists included, are overridable."""
    config_flags.register_flag_parser_for_type(list, ListParser())
    config_flags.DEFINE_config_file("config", None, help_string, flag_values=flag_values, lock_config=True)


def config_origin(flag_values: flags.FlagValues) -> tuple[str, frozenset[str]]:
    """The recipe file `--config` loaded ('' without one) and the keys that `--config.KEY` overrides
    set: an error about a key names the one that set it."""
    if flag_values.config is None:
        return "", frozenset()
    flag = flag_values["config"]
    return config_flags.get_config_filename(flag), frozenset(config_flags.get_override_values(flag))


CONFIG_HELP = (
    "A recipe file (configs/demo.py, in the repository) or a shipped recipe by name, from any directory "
    "(demo, ablations:no_highway, ptb_char_small, ...)."
)
KEYS_DOC = (
    "--config: a recipe file (configs/*.py) or a shipped recipe by name (demo, ablations:no_highway, ...). "
    "Config keys: every key, its meaning and default in elmo_jax/config/schema.py; set one as --config.KEY=VALUE."
)


PRINT_CONFIG_HELP = (
    "Print {what} as JSON with sorted keys (as WORKDIR/config.json: diff it, or paste a value back as "
    "--config.KEY=VALUE) and exit, writing nothing."
)


def define_print_config_flag(what: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines `--print_config`: a command prints `what` (the config it would run with) and exits."""
    flags.DEFINE_bool("print_config", False, PRINT_CONFIG_HELP.format(what=what), flag_values=flag_values)


def print_config(config: Any) -> None:
    """Prints `config` (a ConfigDict) as `--print_config` says: the JSON of WORKDIR/config.json."""
    print(json.dumps(config.to_dict(), indent=2, sort_keys=True), flush=True)


class CommandLineError(ValueError):
    """A flag, config file or config key on the command line that cannot be used."""


def flags_parser(
    usage: str, flag_values: flags.FlagValues = flags.FLAGS, config_from_workdir: bool = False
) -> Callable[[list[str]], list[str]]:
    """absl's `app.run(main, flags_parser=...)` for train and evaluate: `--help` prints `usage` and the
    command's own flags (exit 0); a bad config or flag is one line `error: ...` (exit 1) before any
    work. `config_from_workdir`: overrides without `--config` apply to `--workdir`'s config."""

    def parse(argv: list[str]) -> list[str]:
        if any(arg in HELP_ARGS for arg in argv[1:]):
            print(command_help(usage, flag_values))
            sys.exit(0)
        try:
            args = add_workdir_config(argv[1:]) if config_from_workdir else argv[1:]
            check_config_arguments(args)  # Errors name the recipe as given, not its resolved path.
            return flag_values([argv[0], *resolve_config_argument(args)])
        except (CommandLineError, flags.Error, ValueError, OSError) as e:
            print(f"error: {_first_line(e)}", file=sys.stderr)
            sys.exit(1)

    return parse


def command_help(usage: str, flag_values: flags.FlagValues) -> str:
    """`usage`, one line per flag the command defines (not absl's or the libraries'), where the keys are."""
    own = [flag for module, module_flags in flag_values.flags_by_module_dict().items()
           if module.startswith("elmo_jax.") for flag in module_flags]
    lines = [usage.strip(), "", "flags:"]
    for flag in sorted({f.name: f for f in own}.values(), key=lambda f: f.name):
        default = "" if flag.default is None else f" (default: {flag.default_as_str})"
        lines.append(f"  --{flag.name}: {' '.join(flag.help.split())}{default}")
    return "\n".join([*lines, "", KEYS_DOC])


def check_config_arguments(args: Sequence[str]) -> None:
    """Loads `--config`'s file as ml_collections will and checks every `--config.KEY` against it:
    CommandLineError for a missing file, the file's own error, a renamed or an unknown key, each
    with the nearest name that would do."""
    spec = _flag_value(args, "config")
    if spec is None:
        return
    config = load_config_file(spec)
    known = set(_dotted_keys(config))
    for key in _override_keys(args):
        if key in RENAMED:
            raise CommandLineError(f"config key {key!r} is now {RENAMED[key]!r}")
        if key not in known:
            raise CommandLineError(f"unknown config key {key!r}{_did_you_mean(key, known)}")


def load_config_file(spec: str) -> Any:
    """`get_config(ARG)` of the recipe in `spec` ('path.py[:ARG]' or a shipped recipe's name[:ARG])."""
    resolved = recipes.recipe_path(spec)
    path = resolved.split(":", 1)[0]
    if not os.path.isfile(path):
        directory = os.path.dirname(path) or "."
        siblings = [os.path.join(os.path.dirname(path), n) for n in os.listdir(directory) if n.endswith(".py")] \
            if os.path.isdir(directory) else []
        nearest = _recipe_by_name(spec) or _did_you_mean(path, siblings) or _did_you_mean(path, recipes.recipe_names())
        raise CommandLineError(f"config file {path!r} not found{nearest}")
    try:
        return recipes.load_config(resolved)
    except Exception as e:  # The config file's own error, whatever it raises.
        raise CommandLineError(f"{spec}: {_first_line(e)}") from e


def _recipe_by_name(spec: str) -> str:
    """The hint for a missing recipe file whose path ends in a shipped recipe (configs/demo.py run
    outside the repository): its name, which works anywhere."""
    path, colon, arg = spec.partition(":")
    stem = path.removesuffix(".py").replace(os.sep, "/")
    names = [name for name in recipes.recipe_names() if stem == name or stem.endswith("/" + name)]
    if not names:
        return ""
    return f" (a shipped recipe: --config={max(names, key=len)}{colon}{arg} works from any directory)"


def add_workdir_config(args: Sequence[str]) -> list[str]:
    """`args` with `--config=workdir:WORKDIR` (configs/workdir.py: WORKDIR/config.json) added when
    they override config keys without a `--config` and name `--workdir=WORKDIR`;
    FileNotFoundError when WORKDIR has no config.json."""
    workdir = _flag_value(args, "workdir")
    if _flag_value(args, "config") is not None or not _override_keys(args) or workdir is None:
        return list(args)
    saved_config(workdir)  # Its one-line error for a directory that is no training workdir.
    return [f"--config=workdir:{workdir}", *args]


def resolve_config_argument(args: Sequence[str]) -> list[str]:
    """`args` with `--config=NAME[:ARG]` (a shipped recipe's name) replaced by its file's path."""
    resolved = list(args)
    for i, arg in enumerate(resolved):
        if arg.startswith("--config="):
            resolved[i] = "--config=" + recipes.recipe_path(arg.split("=", 1)[1])
        elif arg == "--config" and i + 1 < len(resolved):
            resolved[i + 1] = recipes.recipe_path(resolved[i + 1])
    return resolved


def _flag_value(args: Sequence[str], name: str) -> str | None:
    """The value of `--NAME=VALUE` or `--NAME VALUE` in `args`, else None."""
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def _override_keys(args: Sequence[str]) -> list[str]:
    """KEY of each `--config.KEY=VALUE` / `--config.KEY VALUE` / `--[no]config.KEY` argument."""
    return [arg.split(".", 1)[1].split("=", 1)[0] for arg in args if arg.startswith(("--config.", "--noconfig."))]


def _dotted_keys(config: Any, prefix: str = "") -> list[str]:
    """Every key of a (nested) ConfigDict, sections included: 'model', 'model.lstm', 'model.lstm.dim'."""
    keys = []
    for name, value in config.items():
        keys.append(prefix + name)
        if hasattr(value, "items"):
            keys.extend(_dotted_keys(value, f"{prefix}{name}."))
    return keys


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _first_line(error: BaseException) -> str:
    """The error's message (its last non-empty line when it wraps a traceback, as ml_collections' do)."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return lines[-1].strip() if len(lines) > 1 and lines[0].startswith("Error whilst parsing") else lines[0]
