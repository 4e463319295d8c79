"""elmo_jax.cli.tool_flags: absl flags parsed afresh on every call, help, one-line errors and exit
status 1; and every tool that uses it (elmo-embed, elmo-export, elmo-vocab, elmo-report, neighbors, elmo-static)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from absl import flags

from elmo_jax.cli import embed, export, neighbors, report, static, tool_flags, vectors, vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = "A toy tool.\n\n  toy --name N [--count C] [--flag]\n"


@pytest.fixture
def toy():
    """(main, calls): a tool with a string, an int, a bool and an enum flag; `calls` records what its
    body saw (its arguments and the flags' values)."""
    values = flags.FlagValues()
    flags.DEFINE_string("name", None, "a name", flag_values=values)
    flags.DEFINE_integer("count", 1, "a count", flag_values=values)
    flags.DEFINE_bool("flag", False, "a switch", flag_values=values)
    flags.DEFINE_enum("mode", "a", ["a", "b"], "a choice", flag_values=values)
    calls = []

    def body(*args: str) -> None:
        calls.append((args, values.name, values.count, values.flag, values.mode))
        if values.name == "bad":
            raise tool_flags.UsageError("--name bad is not allowed")
        if values.name == "missing":
            raise FileNotFoundError("missing: no such file")

    def main(argv, errors=(OSError,), **kwargs) -> int:
        return tool_flags.run(values, argv, body, doc=DOC, errors=errors, **kwargs)

    return main, calls


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err[len("error: "):-1]


def test_each_call_parses_from_the_defaults(toy, capsys):
    main, calls = toy
    assert main(["--name", "x", "--count=3", "--flag", "--mode", "b"]) == 0
    assert main([]) == 0
    assert main(["--count", "-2", "--flag", "--noflag"]) == 0  # `--flag value`, a negative value; the last wins.
    assert calls == [((), "x", 3, True, "b"), ((), None, 1, False, "a"), ((), None, -2, False, "a")]
    assert main(["--name=y", "--count=4", "--bogus"]) == 1  # Parsed up to the error: still nothing stays.
    assert main([]) == 0
    assert calls[-1] == ((), None, 1, False, "a")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bogus"], "Unknown command line flag 'bogus'"),
        (["--nmae=x"], "Unknown command line flag 'nmae'. Did you mean: name ?"),
        (["--count"], "Missing value for flag --count"),
        (["--count=two"], "flag --count=two: invalid literal for int() with base 10: 'two'"),
        (["--mode", "c"], "flag --mode=c: value should be one of <a|b>"),
        (["--noflag=1"], "--noflag=1 does not take an argument"),
        (["extra"], "unexpected arguments: extra"),
        (["--name=bad"], "--name bad is not allowed"),  # The body's UsageError.
        (["--name=missing"], "missing: no such file"),  # One of the tool's `errors`.
    ],
)
def test_bad_input_is_one_line_and_status_1(toy, capsys, argv, message):
    main, _ = toy
    assert main(argv) == 1
    assert one_error_line(capsys) == message
    assert capsys.readouterr().out == ""


def test_exceptions_outside_errors_propagate(toy):
    main, _ = toy
    with pytest.raises(FileNotFoundError):  # With its traceback: not an error the tool expects.
        main(["--name=missing"], errors=())


def test_required_flags_and_positional_arguments(toy, capsys):
    main, calls = toy
    assert main([], required=["name"]) == 1
    assert one_error_line(capsys) == "the following arguments are required: --name"
    assert main(["--count=2"], required=["name"], positional="FILE") == 1
    assert one_error_line(capsys) == "the following arguments are required: FILE, --name"
    assert main(["a", "--name=n", "b", "--", "--c"], required=["name"], positional="FILE") == 0
    assert calls == [(("a", "b", "--c"), "n", 1, False, "a")]  # Flags between arguments; none after `--`.


@pytest.mark.parametrize("help_arg", ["-h", "--help", "--helpfull"])
def test_help_prints_the_doc_and_the_flags_and_exits_0(toy, capsys, help_arg):
    main, calls = toy
    assert main(["--name=x", help_arg, "--bogus"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(DOC.strip()) and "--name: a name" in out and "--[no]flag: a switch" in out
    assert calls == []


def test_commands(capsys):
    seen = []
    commands = {"one": lambda argv: seen.append(("one", argv)) or 0, "two": lambda argv: 3}
    assert tool_flags.run_commands(commands, ["one", "--x", "y"], doc=DOC) == 0
    assert tool_flags.run_commands(commands, ["two"], doc=DOC) == 3
    assert seen == [("one", ["--x", "y"])]
    assert tool_flags.run_commands(commands, [], doc=DOC) == 1
    assert one_error_line(capsys) == "the following arguments are required: command (one, two)"
    assert tool_flags.run_commands(commands, ["three"], doc=DOC) == 1
    assert one_error_line(capsys) == "invalid command 'three' (choose from one, two)"
    assert tool_flags.run_commands(commands, ["--help"], doc=DOC) == 0
    assert capsys.readouterr().out.startswith(DOC.strip())


# Each tool's main, the arguments before its flags, and one of its flags.
TOOLS = {
    "embed": (embed.main, [], "--[no]stateless"),
    "export": (export.main, [], "--softmax_weights"),
    "vocab build": (vocab.main, ["build"], "--min_count"),
    "vocab stats": (vocab.main, ["stats"], "--vocab"),
    "report": (report.main, [], "--output"),
    "neighbors": (neighbors.main, [], "--[no]same_word"),
    "static": (static.main, [], "--method"),
    "vectors": (vectors.main, [], "--restrict"),
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_has_help_and_one_line_flag_errors(tool, capsys):
    main, command, flag = TOOLS[tool]
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert flag in out
    assert main([*command, "--bogus=1"]) == 1
    assert one_error_line(capsys).startswith("Unknown command line flag 'bogus'")


def test_tools_run_beside_the_absl_entry_points():
    """In one process with evaluate's flags on absl's global FLAGS (--workdir, --options, --output, ...,
    which the tools define too): no clash, and the global FLAGS get none of the tools' flags."""
    check = (
        "import sys; from absl import flags; import elmo_jax.cli.evaluate; "
        "from elmo_jax.cli import embed, export, neighbors, report, static, vocab; "
        "assert not {'stateless', 'same_word', 'min_count', 'no_progress', 'token_embeddings', 'method'} & set(flags.FLAGS); "
        "sys.exit(embed.main(['--workdir=w', '--input=i']))"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr == "error: the following arguments are required: --output\n"
