"""The package metadata: console scripts that resolve, dependencies that match requirements.txt."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


@pytest.mark.parametrize("script", sorted(_project()["scripts"]))
def test_console_script_names_a_callable(script: str) -> None:
    """Each in its own process: two absl entry points define the same flags (--config)."""
    module_name, function = _project()["scripts"][script].split(":")
    check = f"import importlib; assert callable(getattr(importlib.import_module({module_name!r}), {function!r}))"
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_console_scripts_cover_every_tool() -> None:
    assert set(_project()["scripts"]) == {
        "elmo-train", "elmo-evaluate", "elmo-embed", "elmo-export", "elmo-vocab", "elmo-report", "elmo-neighbors",
        "elmo-probe", "elmo-static", "elmo-vectors", "elmo-task",
    }


def _requirements(name: str) -> list[str]:
    """The requirement lines of the requirements file `name`, without comments."""
    with open(os.path.join(ROOT, name)) as f:
        lines = [line.split("#")[0].strip() for line in f]
    return [line for line in lines if line]


def test_requirements_install_the_package_with_its_extras_at_the_locked_versions() -> None:
    """requirements*.txt install this package (editable) rather than repeating its dependencies,
    constrained to constraints.txt's exact versions."""
    assert _requirements("requirements.txt") == ["-c constraints.txt", "-e .[tfds,report,tasks]"]
    assert _requirements("requirements-dev.txt") == ["-c constraints.txt", "-e .[dev]"]


# Each platform's requirements file, and the extra of jax it adds to requirements.txt.
PLATFORM_REQUIREMENTS = {
    "requirements-cuda12.txt": "jax[cuda12]", "requirements-cuda13.txt": "jax[cuda13]", "requirements-tpu.txt": "jax[tpu]",
}


def test_platform_requirements_add_jaxs_extra_at_the_pinned_jax() -> None:
    """requirements-<platform>.txt is requirements.txt and jax's extra for the platform, with no
    version of its own: constraints.txt's jax decides, the plugin follows it (CI resolves each file:
    tools/check_platform_requirements.sh), and docs/scaling.md installs each."""
    found = {os.path.basename(path) for path in glob.glob(os.path.join(ROOT, "requirements-*.txt"))}
    assert found == {*PLATFORM_REQUIREMENTS, "requirements-dev.txt"}
    with open(os.path.join(ROOT, "docs", "scaling.md"), encoding="utf-8") as f:
        scaling = f.read()
    for name, extra in PLATFORM_REQUIREMENTS.items():
        assert _requirements(name) == ["-r requirements.txt", extra], name
        assert f"pip install -q -r {name}" in scaling, name


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_constraints_pin_every_dependency_within_its_lower_bound() -> None:
    """Each dependency of pyproject.toml (extras included) has an exact version in constraints.txt
    that its lower bound admits, so the lock and the bounds cannot drift apart."""
    with open(os.path.join(ROOT, "constraints.txt")) as f:
        pins = dict(line.strip().split("==") for line in f if line.strip() and not line.startswith("#"))
    pins = {_normalized(name): version for name, version in pins.items()}
    project = _project()
    requirements = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra if not r.startswith("elmo-jax")
    ]
    for requirement in requirements:
        spec = requirement.split(";")[0].strip()
        name, _, bound = spec.partition(">=")
        version = pins.get(_normalized(name))
        assert version is not None, f"constraints.txt does not pin {name}"
        as_tuple = lambda v: tuple(int(p) for p in v.split(".")[:3] if p.isdigit())
        assert as_tuple(version) >= as_tuple(bound), f"{name}=={version} is below pyproject's {spec}"


def test_public_api_resolves_and_data_stays_free_of_jax() -> None:
    check = (
        "import sys, elmo_jax, elmo_jax.data.vocab; assert 'jax' not in sys.modules; "
        "missing = [n for n in elmo_jax.__all__ if getattr(elmo_jax, n, None) is None]; assert not missing, missing"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _setuptools() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_is_installed_and_the_recipes_ship_inside_elmo_jax() -> None:
    on_disk = {
        os.path.relpath(directory, ROOT).replace(os.sep, ".")
        for directory, _, files in os.walk(os.path.join(ROOT, "elmo_jax"))
        if "__init__.py" in files
    }
    listed = set(_setuptools()["packages"])
    assert listed - on_disk == {"elmo_jax.recipes"} and on_disk <= listed
    assert _setuptools()["package-dir"] == {"elmo_jax.recipes": "configs"}
    assert not any(name == "configs" or name.startswith("configs.") for name in listed)


@pytest.mark.slow
def test_an_installed_package_runs_a_recipe_by_name_from_any_directory(tmp_path) -> None:
    """`pip install .` (not editable) into a fresh target; a shipped recipe loads by name there."""
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), ROOT],
        capture_output=True, text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    assert not (target / "configs").exists() and (target / "elmo_jax" / "recipes" / "demo.py").is_file()
    check = (
        "import elmo_jax.config.recipes as r; assert r.recipes_dir().parent.name == 'elmo_jax', r.recipes_dir(); "
        "c = r.load_config('ablations:no_highway'); assert c.model.char_cnn.n_highway == 0; "
        "assert r.load_config('tests/tiny').model.lstm.dim == 16"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not os.path.exists(os.path.join(ROOT, "build")) or "build" in open(os.path.join(ROOT, ".gitignore")).read()
