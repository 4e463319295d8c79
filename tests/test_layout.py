"""docs/layout.md's table of layers names every module of elmo_jax/, in the row of its package,
and names no module that does not exist."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "elmo_jax")


def _rows() -> dict[str, str]:
    """Each table row's first cell (the layer: `training/`, `elmo.py`, ...) -> the whole row."""
    with open(os.path.join(ROOT, "docs", "layout.md"), encoding="utf-8") as f:
        lines = [line for line in f if line.startswith("| `")]
    return {line.split(" | ")[0].removeprefix("| "): line for line in lines}


def _modules() -> list[str]:
    """Every module below elmo_jax/ but the packages' `__init__.py`, as a path relative to it."""
    found = []
    for directory, subdirectories, files in os.walk(PACKAGE):
        subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
        found += [os.path.relpath(os.path.join(directory, f), PACKAGE) for f in files
                  if f.endswith(".py") and f != "__init__.py"]
    return sorted(found)


def _row_of(package: str) -> str:
    (row,) = [row for first, row in _rows().items() if f"`{package}/`" in first]
    return row


def _named(name: str, text: str) -> bool:
    """`name` in backticks, alone or as the end of a path (`evaluation/report.py`)."""
    return re.search(rf"[`/]{re.escape(name)}`", text) is not None


@pytest.mark.parametrize("module", _modules())
def test_the_table_names_every_module_in_the_row_of_its_package(module: str) -> None:
    """A module of a subpackage (`inference/cpu_kernels/build.py`) is named in the row of its
    top package, beside the subpackage's name."""
    parts = module.split(os.sep)
    if len(parts) == 1:  # elmo.py has a row; the `python -m` entry points are named with their path.
        rows = _rows()
        assert f"`{module}`" in rows or _named(f"elmo_jax/{module}", "".join(rows.values())), module
        return
    row = _row_of(parts[0])
    for subpackage in parts[1:-1]:
        assert _named(f"{subpackage}/", row), f"docs/layout.md's `{parts[0]}/` row does not name {subpackage}/"
    assert _named(parts[-1], row), f"docs/layout.md's `{parts[0]}/` row does not name {module}"


def test_every_module_the_table_names_exists() -> None:
    modules = _modules()
    for first, row in _rows().items():
        packages = re.findall(r"`(\w+)/`", first)
        for name in re.findall(r"`([\w/]+\.py)`", row):
            if name.startswith("elmo_jax/"):
                assert os.path.isfile(os.path.join(ROOT, name)), name
            elif packages:
                assert any(
                    m.endswith(os.sep + name.split("/")[-1]) and m.split(os.sep)[0] in packages for m in modules
                ), f"docs/layout.md's {first} row names {name}, which is not a module there"
            else:
                assert name in modules, name
