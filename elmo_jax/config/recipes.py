"""The recipes (configs/*.py): found by path or by name, loaded as `--config` loads them.

A recipe is a Python file whose `get_config(arg)` returns the config of a run. They live in
`configs/` of a source checkout and ship inside the package as `elmo_jax/recipes/`
(pyproject.toml), so an installed elmo-jax runs every preset from any directory by name:
`--config=demo`, `--config=ablations:no_highway`, `--config=tests/tiny`. A recipe builds on at
most one other, its base, with `recipe_module(name)` (never by importing a package named `configs`),
and a base builds on the schema's defaults alone: what recipes share are a base's functions
(configs/ptb.py's), so every value is set in a recipe, its base or the schema (tests/test_configs.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_INSTALLED = Path(__file__).resolve().parents[1] / "recipes"  # Where pyproject.toml ships configs/.
_CHECKOUT = Path(__file__).resolve().parents[2] / "configs"


def recipes_dir() -> Path:
    """The shipped recipes of an installed package, else the checkout's configs/."""
    return _INSTALLED if _INSTALLED.is_dir() else _CHECKOUT


def recipe_path(spec: str) -> str:
    """`spec` ('FILE.py' or 'FILE.py:ARG') as given when FILE exists or ends in .py; a recipe's
    name ('demo', 'ablations:no_highway', 'tests/tiny') as the path of the recipe shipped under
    that name, with the same ':ARG'; other names as given (a missing file, reported by the loader)."""
    path, colon, arg = spec.partition(":")
    if os.path.isfile(path) or path.endswith(".py"):
        return spec
    shipped = recipes_dir() / f"{path}.py"
    return f"{shipped}{colon}{arg}" if shipped.is_file() else spec


def recipe_names() -> list[str]:
    """The names of the shipped recipes ('demo', 'tests/tiny', ...)."""
    root = recipes_dir()
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.py") if p.name != "__init__.py")


def load_module(path: str, name: str | None = None) -> ModuleType:
    """The Python file at `path` as a module, registered under `name` (when given) so that it loads once."""
    if name and name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name or "elmo_jax_config_file", path)
    module = importlib.util.module_from_spec(spec)
    if name:
        sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name or "", None)
        raise
    return module


def recipe_module(name: str) -> ModuleType:
    """The shipped recipe `name` (e.g. 'ptb', 'tests/tiny') as a module: how recipes share code."""
    path = recipes_dir() / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no recipe named {name!r} in {recipes_dir()}")
    return load_module(str(path), "elmo_jax.recipes." + name.replace("/", "."))


def load_config(spec: str) -> Any:
    """`get_config(ARG)` of the recipe `spec` names ('FILE.py[:ARG]' or a recipe's name[:ARG])."""
    path, _, arg = recipe_path(spec).partition(":")
    return load_module(path).get_config(*([arg] if arg else []))
