"""README.md: the quick start, its size, and what a user meets there first."""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex

from tests.doc_blocks import code_blocks


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt && "
    ".venv/bin/python train.py --config=configs/demo.py --workdir=runs/demo\n",
    "python3 -m venv .venv && .venv/bin/pip install -q -r requirements-dev.txt && .venv/bin/python -m pytest\n",
]


def _text() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def _paragraph(starting: str) -> str:
    """The README's paragraph that starts with `starting`, its lines joined."""
    (paragraph,) = [p for p in _text().split("\n\n") if p.startswith(starting)]
    return " ".join(paragraph.split())


def test_embedding_paragraph_says_embeddings_are_stateful_and_how_to_get_stateless_ones():
    paragraph = _paragraph("Embeddings are stateful")
    assert "`embed_sentence`" in paragraph and "`ElmoEmbedder(..., stateful=False)`" in paragraph
    assert "`--stateless`" in paragraph and "`Elmo`" in paragraph


def test_readme_stays_within_12000_bytes():
    """Detail goes to docs/, linked from the README."""
    assert os.path.getsize(README) <= 12_000


def test_the_quick_start_names_the_optional_extras_and_the_line_that_installs_them_all():
    paragraph = _paragraph("**Optional extras**")
    for extra, what in (("static", "gensim"), ("zh", "jieba"), ("tfds", ""), ("report", "")):
        assert f"`[{extra}]`" in paragraph and what in paragraph, extra
    assert "pip install -r requirements-dev.txt" in paragraph


def test_the_override_example_trains_in_its_own_workdir():
    """Beside the quick start's runs/demo it failed after 9 s: the checkpoint's model.lstm.dim is 256."""
    overriding = [line for block in code_blocks(README, "bash") for line in block.splitlines() if "--config.model" in line]
    assert overriding and all("--workdir=runs/demo " not in line + " " for line in overriding)


def test_quick_start_is_its_two_commands():
    quick_start = _text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^```bash\n(.*?)^```$", quick_start, re.DOTALL | re.MULTILINE) == QUICK_START
    assert code_blocks(README, "bash")[:2] == QUICK_START


def _anchors(path: str) -> set[str]:
    """GitHub's anchors of the headings of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        headings = re.findall(r"^#+ (.*)$", f.read(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_readme_links_to_docs_that_exist():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", _text())
    assert ("docs/reproductions.md", "the-demo") in links
    assert ("docs/training.md", "fine-tune-a-released-elmo-on-your-corpus") in links
    for path, anchor in links:
        assert os.path.isfile(os.path.join(ROOT, path)), path
        assert not anchor or anchor in _anchors(os.path.join(ROOT, path)), f"{path}#{anchor}"


# The flags by which the README's commands name what they write, per command.
WRITTEN_BY = {
    "train.py": ("--workdir",),
    "elmo-train": ("--workdir",),
    "evaluate.py": ("--output",),
    "elmo-embed": ("--output",),
    "elmo-export": ("--options", "--weights", "--softmax_weights", "--vocab"),
    "elmo-report": ("--output",),
    "elmo-probe": ("--output",),
    "elmo-task": ("--workdir", "--output"),
}


def _commands() -> list[list[str]]:
    """The argv of each command of the README's bash blocks, continuation lines joined, comments dropped."""
    blocks = code_blocks(README, "bash")
    return [shlex.split(line, comments=True) for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def _flag_values(argv: list[str]) -> list[tuple[str, str]]:
    """(flag, value) of each `--flag=value` and `--flag value` of `argv`."""
    following = [*argv[1:], ""]
    return [tuple(a.split("=", 1)) if "=" in a else (a, b) for a, b in zip(argv, following) if a.startswith("--")]


def _written(argv: list[str]) -> list[str]:
    """The paths that a README command writes, by WRITTEN_BY."""
    tool = next((os.path.basename(a) for a in argv if os.path.basename(a) in WRITTEN_BY), None)
    return [value for flag, value in _flag_values(argv) if flag in WRITTEN_BY.get(tool, ())]


def test_the_readmes_commands_write_under_runs():
    """runs/ is git-ignored: following the README leaves no untracked file in the checkout (an
    absolute path, /shared/run, is outside it)."""
    written = [path for argv in _commands() for path in _written(argv)]
    for path in written:
        assert path.startswith("runs/") or os.path.isabs(path), path
    assert "runs/export/options.json" in written and "/shared/run" in written


def _test_perplexity(run: str) -> str:
    """The biLM test perplexity of a run under benchmarks/results/, as the README writes it."""
    (path,) = glob.glob(os.path.join(ROOT, "benchmarks", "results", run, "eval_test_*.json"))
    with open(path, encoding="utf-8") as f:
        return f"{json.load(f)['perplexity']:.2f}"


def test_ptb_char_small_cpus_perplexity_is_its_first_run_and_the_readme_quotes_no_other():
    """The reproductions table quotes the config's first run; its second (beside the other
    contextualizers, on shared cores) is docs/contextualizers.md's, not quoted here."""
    (row,) = [line for line in _text().splitlines() if line.startswith("| `ptb_char_small_cpu.py`")]
    assert f"/ {_test_perplexity('ptb_char_small_cpu_15epochs')} |" in row
    second = _test_perplexity("contextualizers/ptb_char_small_cpu")
    assert str(second) not in _text()


def test_the_gpu_install_paragraph_names_the_pinned_jax_and_the_measured_one():
    """The README's two JAX versions: constraints.txt's, and the one every GPU check recorded
    (benchmarks/results/gpu.jsonl's environment lines)."""
    with open(os.path.join(ROOT, "constraints.txt"), encoding="utf-8") as f:
        pinned = dict(line.strip().split("==") for line in f if "==" in line)["jax"]
    with open(os.path.join(ROOT, "benchmarks", "results", "gpu.jsonl"), encoding="utf-8") as f:
        (measured,) = {r["jax"] for r in map(json.loads, f) if r.get("variant") == "environment"}
    paragraph = _paragraph("**Install for a GPU or TPU**")
    assert f"They pin JAX {pinned};" in paragraph
    assert f"measured with JAX {measured} and its CUDA 13 plugin" in paragraph


README_ZH = os.path.join(ROOT, "README.zh-CN.md")


def test_the_readme_links_the_chinese_readme_in_its_first_lines():
    assert "[中文](README.zh-CN.md)" in "\n".join(_text().splitlines()[:4])


def test_the_chinese_readmes_quick_start_is_the_readmes():
    assert code_blocks(README_ZH, "bash")[:2] == QUICK_START


def _tool_flags(argv: list[str]):
    """The FlagValues of an elmo-* command line (`elmo-vocab chars ...`: its command's)."""
    from elmo_jax.cli import embed, export, neighbors, probe, report, vocab

    tool = os.path.basename(argv[0])
    if tool == "elmo-vocab":
        return {"build": vocab._BUILD, "stats": vocab._STATS, "chars": vocab._CHARS}[argv[1]]
    return {"elmo-embed": embed._FLAGS, "elmo-probe": probe._FLAGS, "elmo-neighbors": neighbors._FLAGS,
            "elmo-export": export._FLAGS, "elmo-report": report._FLAGS}[tool]


def test_the_chinese_readmes_commands_name_recipes_keys_and_flags_that_exist():
    """Each command as a user copies it: its recipe loads with its argument, its config keys exist,
    its flags are the tool's; what it writes goes under runs/."""
    from elmo_jax.cli import evaluate, task
    from elmo_jax.config import schema
    from elmo_jax.config.recipes import load_config, recipe_module

    blocks = code_blocks(README_ZH, "bash")[2:]
    commands = [shlex.split(line, comments=True) for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    commands = [argv for argv in commands if argv]
    assert {os.path.basename(argv[0]) if argv[0] != "python" else argv[1] for argv in commands} >= {
        "train.py", "evaluate.py", "elmo-probe", "elmo-embed", "elmo-task",
    }
    for argv in commands:
        flags = _flag_values(argv)
        if argv[1].startswith("tools/"):  # A script of the repository, its flags argparse's.
            with open(os.path.join(ROOT, argv[1]), encoding="utf-8") as f:
                script = f.read()
            assert all(f'"{flag}"' in script for flag, _ in flags), argv
            continue
        if argv[:2] == ["python", "train.py"]:
            path, *argument = dict(flags)["--config"].split(":", 1)
            recipe_module(os.path.basename(path).removesuffix(".py")).get_config(*argument)
            for flag, _ in flags:
                if flag.startswith("--config."):
                    assert flag.removeprefix("--config.") in schema.keys(), flag
        elif argv[:2] == ["python", "evaluate.py"]:
            assert all(flag.removeprefix("--") in evaluate.FLAGS for flag, _ in flags), argv
        elif os.path.basename(argv[0]) == "elmo-task":
            assert argv[1] in task.COMMANDS, argv
            config = load_config(os.path.join(ROOT, dict(flags)["--config"]))
            for flag, _ in flags:
                if flag.startswith("--config."):
                    *sections, key = flag.removeprefix("--config.").split(".")
                    assert key in functools.reduce(lambda section, name: section[name], sections, config), flag
                else:
                    assert flag.removeprefix("--") in task.FLAGS, (flag, argv)
        else:
            tool_flags = _tool_flags(argv)
            for flag, _ in flags:
                name = flag.removeprefix("--")
                assert name in tool_flags or name.removeprefix("no") in tool_flags, (flag, argv)
        for path in _written(argv):
            assert path.startswith("runs/"), path
