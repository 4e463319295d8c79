"""The tools' outputs are whole or absent and their inputs checked, end to end on a trained tiny run:
a SIGTERM during an export or an embedding leaves the earlier outputs and no temporary (during a
probe: one line says what was written), a mixed export set or a vocabulary cut short is a one-line
error, a full disk names the file."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from elmo_jax.runtime.atomic_write import SIGTERM_EXIT_STATUS
from elmo_jax.cli.export import main as export_main
from elmo_jax.data.vocab import fingerprint_mismatch
from elmo_jax.interop.export_sets import read_export_id
from tests.entry_points import ROOT, last_line, run_script, script_env
from tests.probing.helpers import bilm_files, conllu_splits  # noqa: F401 (fixtures)
from tests.training.helpers import swap_vocabulary_lines

pytestmark = pytest.mark.slow

SET = ("options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt")
# The export, pausing when it opens the vocabulary's file for writing (the last of the set): it
# says so on stdout and waits on stdin, so that the SIGTERM lands while the set is half written.
PAUSED_EXPORT = (
    "import builtins, os, sys\n"
    "from elmo_jax.cli import export\n"
    "real_open = builtins.open\n"
    "def paused_open(file, mode='r', *args, **kwargs):\n"
    "    if 'w' in mode and os.path.basename(str(file)).startswith('vocab.txt'):\n"
    "        print('paused', flush=True)\n"
    "        sys.stdin.readline()\n"
    "    return real_open(file, mode, *args, **kwargs)\n"
    "builtins.open = paused_open\n"
    "sys.exit(export.main(sys.argv[1:]))\n"
)

# elmo-probe, pausing in the function of elmo_jax.cli.probe named by its first argument: it says so
# on stdout and waits on stdin, so that the SIGTERM lands there.
PAUSED_PROBE = (
    "import sys\n"
    "from elmo_jax.cli import probe\n"
    "name, real = sys.argv[1], getattr(probe, sys.argv[1])\n"
    "def paused(*args, **kwargs):\n"
    "    print('paused', flush=True)\n"
    "    sys.stdin.readline()\n"
    "    return real(*args, **kwargs)\n"
    "setattr(probe, name, paused)\n"
    "sys.exit(probe.main(sys.argv[2:]))\n"
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("jax_cache"))


@pytest.fixture(scope="module")
def workdir(tiny_training_run) -> str:
    """The trained tiny run: checkpoints at steps 5 and 10."""
    return tiny_training_run[0]


def export_flags(workdir: str, out: str, step: int) -> list[str]:
    paths = [os.path.join(out, name) for name in SET]
    return ["--workdir", workdir, "--step", str(step), "--options", paths[0], "--weights", paths[1],
            "--softmax_weights", paths[2], "--vocab", paths[3]]


def export(workdir: str, out: str, step: int) -> dict[str, bytes]:
    """Exports checkpoint `step` to the directory `out`; returns each file's content."""
    assert export_main(export_flags(workdir, out, step)) == 0
    return contents(out)


def contents(directory: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = f.read()
    return out


def wait_for(pattern: str, count: int, process: subprocess.Popen, timeout: float = 120) -> None:
    """Polls until `count` paths match `pattern` (the process's temporaries exist)."""
    deadline = time.monotonic() + timeout
    while len(glob.glob(pattern)) < count:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no {pattern} after {timeout} s"
        time.sleep(0.05)


def terminate(process: subprocess.Popen) -> str:
    """Sends SIGTERM; returns stderr once the process has exited with status 143."""
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == SIGTERM_EXIT_STATUS, stderr[-3000:]
    return stderr


@pytest.mark.parametrize("earlier", [True, False], ids=["over_an_earlier_export", "into_a_new_directory"])
def test_sigterm_during_an_export_leaves_the_earlier_set(workdir, cache, tmp_path, earlier):
    out = str(tmp_path / "export")
    before = export(workdir, out, 5) if earlier else None
    process = subprocess.Popen(
        [sys.executable, "-c", PAUSED_EXPORT, *export_flags(workdir, out, 10)], cwd=ROOT, env=script_env(cache),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout.readline() == "paused\n", process.communicate()[1][-3000:]
    staged = os.path.join(out, "*.tmp*") if earlier else os.path.join(out + ".tmp*", "*")
    assert len(glob.glob(staged)) == 3  # Options, weights and softmax: written, not yet in place.
    terminate(process)
    assert sorted(os.listdir(tmp_path)) == (["export"] if earlier else [])
    if earlier:
        assert contents(out) == before


def test_a_mixed_export_set_is_refused(workdir, cache, tmp_path):
    """Weights of step 10 beside the options and softmax of step 5: evaluate and embed name the files."""
    export(workdir, str(tmp_path / "step5"), 5)
    export(workdir, str(tmp_path / "step10"), 10)
    mixed = str(tmp_path / "mixed")
    shutil.copytree(tmp_path / "step5", mixed)
    shutil.copy(tmp_path / "step10" / "weights.hdf5", mixed)
    options, weights, softmax, vocab = (os.path.join(mixed, name) for name in SET)
    ids = {path: read_export_id(path) for path in (options, weights, softmax)}
    assert ids[options] == ids[softmax] != ids[weights] and ids[weights].startswith("step 10 of ")
    corpus = str(tmp_path / "text.txt")
    with open(corpus, "w") as f:
        f.write("the cat sat\n")
    done = run_script("evaluate.py", f"--options={options}", f"--weights={weights}", f"--softmax_weights={softmax}",
                      f"--vocab={vocab}", f"--eval_files={corpus}", compile_cache=cache)
    listed = f"{options} ({ids[options]}), {weights} ({ids[weights]}), {softmax} ({ids[softmax]})"
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert last_line(done.stderr) == f"error: files of different exports: {listed}; export them again together"
    done = subprocess.run(
        [sys.executable, "-m", "elmo_jax.cli.embed", "--options", options, "--weights", weights, "--input", corpus,
         "--output", str(tmp_path / "out.hdf5")], cwd=ROOT, env=script_env(cache), capture_output=True, text=True,
    )
    listed = f"{options} ({ids[options]}), {weights} ({ids[weights]})"
    assert done.returncode == 1
    assert last_line(done.stderr) == f"error: files of different exports: {listed}; export them again together"
    assert not os.path.exists(tmp_path / "out.hdf5")


def assert_evaluate_and_export_refuse(workdir: str, cache: str, tmp_path, capsys, expected: str) -> None:
    """evaluate.py and the export of `workdir` each end with the one line `expected`, exporting nothing."""
    done = run_script("evaluate.py", f"--workdir={workdir}", compile_cache=cache)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert last_line(done.stderr) == expected
    assert export_main(export_flags(workdir, str(tmp_path / "export"), 10)) == 1
    assert last_line(capsys.readouterr().err) == expected
    assert not os.path.exists(tmp_path / "export")


def test_a_vocabulary_cut_short_is_refused(workdir, cache, tmp_path, capsys):
    cut = str(tmp_path / "run")
    shutil.copytree(workdir, cut)
    vocab = os.path.join(cut, "vocab.txt")
    with open(vocab) as f:
        lines = f.readlines()
    with open(vocab, "w") as f:
        f.writelines(lines[: len(lines) // 2])
    expected = (f"error: {vocab}: {len(lines) // 2} lines, but the checkpoint's softmax has {len(lines)} rows "
                "(one per line)")
    assert_evaluate_and_export_refuse(cut, cache, tmp_path, capsys, expected)


def test_a_vocabulary_with_two_lines_swapped_is_refused(workdir, cache, tmp_path, capsys):
    """The same line count, so no row count tells: the fingerprint the training run recorded with
    each checkpoint does, in evaluate.py and the export."""
    swapped = str(tmp_path / "run")
    shutil.copytree(workdir, swapped)
    vocab, trained_with, found = swap_vocabulary_lines(swapped)
    expected = f"error: {fingerprint_mismatch(vocab, found, trained_with)}"
    assert_evaluate_and_export_refuse(swapped, cache, tmp_path, capsys, expected)


def test_sigterm_during_an_embedding_leaves_the_earlier_output(workdir, cache, tmp_path):
    small, big, out = (str(tmp_path / name) for name in ("small.txt", "big.txt", "out.hdf5"))
    with open(small, "w") as f:
        f.write("the cat sat\n")
    with open(big, "w") as f:
        f.write("the cat sat on a mat\n" * 20000)  # Tens of seconds to embed: the SIGTERM lands in it.
    embed = [sys.executable, "-m", "elmo_jax.cli.embed", "--workdir", workdir, "--output", out, "--input"]
    assert subprocess.run([*embed, small], cwd=ROOT, env=script_env(cache), capture_output=True).returncode == 0
    with open(out, "rb") as f:
        before = f.read()
    process = subprocess.Popen([*embed, big], cwd=ROOT, env=script_env(cache), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    wait_for(out + ".tmp*", 1, process)
    terminate(process)
    assert sorted(os.listdir(tmp_path)) == ["big.txt", "out.hdf5", "small.txt"]
    with open(out, "rb") as f:
        assert f.read() == before


def test_a_full_disk_names_the_file(workdir, cache, tmp_path):
    """A file-size limit of 0 bytes: every write fails with EFBIG, as a full disk fails with ENOSPC."""
    exported = str(tmp_path / "export")
    export(workdir, exported, 10)
    corpus = str(tmp_path / "text.txt")
    with open(corpus, "w") as f:
        f.write("the cat sat\n")
    limit = ["bash", "-c", 'ulimit -f 0 && exec "$@"', "bash"]
    options, weights, softmax, vocab = (os.path.join(exported, name) for name in SET)
    out = str(tmp_path / "out")
    commands = {
        os.path.join(out, "options.json"): ["-m", "elmo_jax.cli.export", *export_flags(workdir, out, 10)],
        out + ".hdf5": ["-m", "elmo_jax.cli.embed", "--options", options, "--weights", weights, "--input", corpus,
                        "--engine", "xla", "--output", out + ".hdf5"],
        out + ".json": [os.path.join(ROOT, "evaluate.py"), f"--options={options}", f"--weights={weights}",
                        f"--softmax_weights={softmax}", f"--vocab={vocab}", f"--eval_files={corpus}",
                        f"--output={out}.json"],
    }
    for path, args in commands.items():
        done = subprocess.run([*limit, sys.executable, *args], cwd=ROOT, env=script_env(cache), capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 1, done.stderr[-3000:]
        assert last_line(done.stderr) == f"error: [Errno 27] File too large: '{path}'"
        assert sorted(os.listdir(tmp_path)) == ["export", "text.txt"]


@pytest.mark.parametrize("paused_in", ["_model", "markdown_table"], ids=["before_writing", "after_writing"])
def test_sigterm_during_a_probe_says_what_was_written(bilm_files, conllu_splits, cache, tmp_path, paused_in):  # noqa: F811
    """elmo-probe exited 143 saying nothing: stopped while loading the model (nothing written) or
    while printing its table (both results written)."""
    out = tmp_path / "out"
    train, _, test = conllu_splits
    args = ["--options", bilm_files[0], "--weights", bilm_files[1], "--train", train, "--test", test,
            "--output", str(out), "--no_progress"]
    process = subprocess.Popen(
        [sys.executable, "-c", PAUSED_PROBE, paused_in, *args], cwd=ROOT, env=script_env(cache),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout.readline() == "paused\n", process.communicate()[1][-3000:]
    stderr = terminate(process)
    results = f"{out / 'probe_upos.json'}, {out / 'probe_upos.png'}"
    if paused_in == "_model":
        assert last_line(stderr) == f"stopped by SIGTERM; nothing written ({results} left as before)"
        assert not out.exists()
    else:
        assert last_line(stderr) == f"stopped by SIGTERM after writing {results}"
        assert sorted(p.name for p in out.iterdir()) == ["probe_upos.json", "probe_upos.png"]
