"""Building the CPU kernel: cached per source, compiler and CPU, verified before it is loaded, built
once by concurrent processes, old builds pruned; clear errors when it cannot be built."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from elmo_jax.inference.cpu_kernels import build
from tests.inference.cpu_kernels.compiler import requires_compiler

DAY = 24 * 3600


@pytest.fixture
def fresh_build(monkeypatch, tmp_path):
    """An empty kernel cache and no library loaded yet in this process."""
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "kernels"))
    build.forget_library()
    yield tmp_path / "kernels"
    build.forget_library()


def script(path, text):
    """An executable file `path` holding `text`."""
    path.write_text(textwrap.dedent(text))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def counting_compiler(tmp_path, log):
    """A C++ compiler that runs the real one and adds a line to `log` for each compile."""
    return script(tmp_path / "counting-cxx", f"""\
        #!/bin/sh
        [ "$1" = --version ] || echo compile >> {log}
        exec {build.compiler()} "$@"
        """)


@requires_compiler
def test_builds_once_into_the_cache_dir_and_reuses_it(fresh_build):
    library = build.load_library()
    assert callable(library.elmo_lstm_stack)
    built = build.library_path()
    assert sorted(p.name for p in fresh_build.iterdir()) == sorted(
        [built.name, built.name + ".sha256", "elmo_kernels.lock"]
    )  # The library, its checksum and the lock: no temporary left.
    mtime = built.stat().st_mtime_ns
    build.forget_library()
    build.load_library()
    assert build.library_path().stat().st_ino == built.stat().st_ino  # Read back, not compiled again.
    assert built.stat().st_mtime_ns >= mtime


@requires_compiler
def test_checksum_beside_the_build_is_sha256sum_output(fresh_build):
    build.load_library()
    built = build.library_path()
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    assert (fresh_build / (built.name + ".sha256")).read_text() == f"{digest}  {built.name}\n"


@requires_compiler
@pytest.mark.parametrize("damage", ["truncated", "empty", "no checksum"])
def test_a_damaged_build_is_compiled_again(fresh_build, damage):
    build.load_library()
    built = build.library_path()
    checksum = fresh_build / (built.name + ".sha256")
    if damage == "no checksum":
        checksum.unlink()
    else:  # A new file: this process has the build mapped, and rewriting that in place would crash it.
        damaged = fresh_build / "damaged"
        damaged.write_bytes(built.read_bytes()[: built.stat().st_size // 2] if damage == "truncated" else b"")
        os.replace(damaged, built)
    build.forget_library()
    build.load_library()
    assert checksum.read_text().split()[0] == hashlib.sha256(built.read_bytes()).hexdigest()
    assert built.stat().st_size > 0


def test_default_cache_dir_is_under_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(build.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.cache_dir() == tmp_path / "elmo_jax" / "kernels"


@requires_compiler
def test_library_name_follows_source_and_cpu(fresh_build, monkeypatch):
    name = build.library_path().name
    monkeypatch.setattr(build, "_cpu_identity", lambda: "another cpu")
    assert build.library_path().name != name


def test_missing_compiler_is_a_clear_error(fresh_build, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(build.KernelUnavailable, match="no C\\+\\+ compiler: 'no-such-compiler'"):
        build.load_library()


def test_compiler_that_cannot_run_is_a_clear_error(fresh_build, monkeypatch, tmp_path):
    compiler = script(tmp_path / "cxx", "#!/no/such/interpreter\n")
    monkeypatch.setenv("CXX", str(compiler))
    with pytest.raises(build.KernelUnavailable, match=f"cannot run the C\\+\\+ compiler '{compiler}'"):
        build.load_library()


def test_failing_compiler_names_its_error_and_leaves_no_file(fresh_build, monkeypatch, tmp_path):
    compiler = script(tmp_path / "broken-cxx", "#!/bin/sh\necho 'lstm_stack.cc:1: error: something broke' >&2\nexit 1\n")
    monkeypatch.setenv("CXX", str(compiler))
    with pytest.raises(build.KernelUnavailable, match="compiling the CPU kernels failed: lstm_stack.cc:1: error: something broke"):
        build.load_library()
    assert not fresh_build.exists() or {p.name for p in fresh_build.iterdir()} <= {"elmo_kernels.lock"}


def test_a_failed_build_is_remembered_for_the_process(fresh_build, monkeypatch, tmp_path):
    log = tmp_path / "compiles"
    compiler = script(tmp_path / "broken-cxx", f"""\
        #!/bin/sh
        [ "$1" = --version ] && exit 0
        echo compile >> {log}
        echo 'error: broken' >&2
        exit 1
        """)
    monkeypatch.setenv("CXX", str(compiler))
    for _ in range(3):
        with pytest.raises(build.KernelUnavailable, match="error: broken"):
            build.load_library()
    assert log.read_text() == "compile\n"


@requires_compiler
def test_compiles_holding_the_cache_lock(fresh_build, monkeypatch, tmp_path):
    log = tmp_path / "lock"
    probe = f"import fcntl; fcntl.flock(open('{fresh_build / 'elmo_kernels.lock'}', 'a'), fcntl.LOCK_EX | fcntl.LOCK_NB)"
    compiler = script(tmp_path / "cxx", f"""\
        #!/bin/sh
        if [ "$1" != --version ]; then
          {sys.executable} -c "{probe}" 2>/dev/null && echo unlocked >> {log} || echo locked >> {log}
        fi
        exec {build.compiler()} "$@"
        """)
    monkeypatch.setenv("CXX", str(compiler))
    build.load_library()
    assert log.read_text() == "locked\n"


@pytest.mark.slow
@requires_compiler
def test_concurrent_processes_compile_once(fresh_build, tmp_path):
    log = tmp_path / "compiles"
    env = {**os.environ, build.CACHE_ENV: str(fresh_build), "CXX": str(counting_compiler(tmp_path, log))}
    load = "from elmo_jax.inference.cpu_kernels import build; assert callable(build.load_library().elmo_lstm_stack)"
    processes = [subprocess.Popen([sys.executable, "-c", load], env=env) for _ in range(3)]
    assert [p.wait() for p in processes] == [0, 0, 0]
    assert log.read_text() == "compile\n"


def age(path, days):
    """Sets `path`'s modification time `days` ago."""
    then = time.time() - days * DAY
    os.utime(path, (then, then))


@requires_compiler
def test_building_prunes_other_builds_unused_for_a_while(fresh_build):
    fresh_build.mkdir(parents=True)
    current = build.library_path().name
    stale = ["elmo_kernels_0123456789abcdef.so", "elmo_kernels_0123456789abcdef.so.sha256",
             "elmo_kernels_fedcba9876543210.so.tmp4242"]
    kept = ["elmo_kernels_1111111111111111.so", "notes.txt"]
    for name in stale + kept:
        (fresh_build / name).write_text("x")
    for name in stale + ["notes.txt"]:
        age(fresh_build / name, build.MAX_UNUSED_DAYS + 1)
    age(fresh_build / kept[0], build.MAX_UNUSED_DAYS - 1)
    build.load_library()
    assert sorted(p.name for p in fresh_build.iterdir()) == sorted(
        [*kept, current, current + ".sha256", "elmo_kernels.lock"]
    )


@requires_compiler
def test_loading_a_build_marks_it_used(fresh_build):
    build.load_library()
    built = build.library_path()
    for path in (built, fresh_build / (built.name + ".sha256")):
        age(path, build.MAX_UNUSED_DAYS + 1)
    build.forget_library()
    build.load_library()
    assert time.time() - built.stat().st_mtime < DAY
    assert time.time() - (fresh_build / (built.name + ".sha256")).stat().st_mtime < DAY


@requires_compiler
def test_unusable_cache_dir_builds_privately_with_one_warning(fresh_build, monkeypatch, caplog):
    fresh_build.parent.mkdir(parents=True, exist_ok=True)
    fresh_build.write_text("not a directory")
    assert callable(build.load_library().elmo_lstm_stack)
    assert fresh_build.read_text() == "not a directory"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(fresh_build) in warnings[0] and "File exists" in warnings[0]
