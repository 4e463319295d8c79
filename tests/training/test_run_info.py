"""run_info.json: one record per start, appended atomically; git state of the source tree."""

import datetime
import importlib.metadata
import json
import os
import shlex
import subprocess
import sys

import jax
import pytest

from elmo_jax.training import run_info


def _git(root, *args):
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "a.py").write_text("x = 1\n")
    _git(root, "add", "a.py")
    _git(root, "commit", "-q", "-m", "first")
    return root


def test_records_every_start_and_keeps_earlier_ones(tmp_path):
    run_info.record_start(str(tmp_path), 0)
    first = json.loads((tmp_path / "run_info.json").read_text())["starts"]
    run_info.record_start(str(tmp_path), 5)
    starts = json.loads((tmp_path / "run_info.json").read_text())["starts"]
    assert [s["step"] for s in starts] == [0, 5]
    assert starts[0] == first[0]
    start = starts[1]
    assert datetime.datetime.fromisoformat(start["start_time"]).tzinfo is not None
    assert start["command"] == shlex.join(sys.argv)
    assert start["hostname"]
    assert start["versions"]["jax"] == jax.__version__
    assert start["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert start["devices"] == {
        "platform": "cpu",
        "kinds": sorted({d.device_kind for d in jax.devices()}),
        "count": jax.device_count(),
        "local_count": jax.local_device_count(),
        "process_count": 1,
    }
    assert os.listdir(tmp_path) == ["run_info.json"]  # No temporary file left behind.


def test_the_segmenters_version_is_recorded_or_none(monkeypatch):
    """data.segmenter='jieba' cuts words by jieba's version; it is recorded beside JAX's."""
    versions = {"jieba": "0.42.1"}

    def version(name):
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert run_info.library_versions()["jieba"] == "0.42.1" and run_info.library_versions()["jax"] is None
    versions.clear()
    assert run_info.library_versions()["jieba"] is None


def test_only_process_zero_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(jax, "process_index", lambda: 1)
    run_info.record_start(str(tmp_path), 0)
    assert not (tmp_path / "run_info.json").exists()


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"starts": 3}'])
def test_an_unreadable_record_is_an_error_and_left_untouched(tmp_path, content):
    (tmp_path / "run_info.json").write_text(content)
    with pytest.raises(ValueError, match="run_info.json: .*move it away"):
        run_info.record_start(str(tmp_path), 0)
    assert (tmp_path / "run_info.json").read_text() == content


def test_git_commit_and_dirty_flag(repo):
    assert run_info.git_info(str(repo)) == {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": False}
    (repo / "notes.txt").write_text("untracked files do not make the tree dirty\n")
    assert run_info.git_info(str(repo))["dirty"] is False
    (repo / "a.py").write_text("x = 2\n")
    assert run_info.git_info(str(repo))["dirty"] is True


def test_no_git_info_outside_a_checkout_or_inside_another_one(tmp_path, repo):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert run_info.git_info(str(plain)) is None
    nested = repo / "site-packages"  # A package installed inside some other repository.
    nested.mkdir()
    assert run_info.git_info(str(nested)) is None


def test_no_git_info_without_git(repo, monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert run_info.git_info(str(repo)) is None


def test_source_root_is_the_tree_holding_the_package():
    assert os.path.isfile(os.path.join(run_info.SOURCE_ROOT, "elmo_jax", "training", "run_info.py"))
