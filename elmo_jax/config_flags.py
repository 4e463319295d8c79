"""The `--config` flag of the entry points, with list-valued keys overridable on the command line.

ml_collections' config flags parse int, float, bool, str and tuple fields but not lists, while the
configs declare lists (`model.char_cnn.filters = [[1, 32], ...]`) because that is how `config.json`
and bilm-tf's options.json write them. `ListParser`, registered through ml_collections' own hook
(`register_flag_parser_for_type`), makes every list-valued key overridable:

  --config.model.char_cnn.filters='((1, 8), (2, 8))'   # or '[[1, 8], [2, 8]]'
"""

from __future__ import annotations

import ast
from typing import Any

from absl import flags
from ml_collections import config_flags


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
        if not isinstance(value, (list, tuple)):
            # absl prefixes the flag and its value.
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
