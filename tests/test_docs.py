"""The user documents (README*.md, docs/*.md) speak of the project only: no absolute path outside
the repository (a development machine's checkout, data folder or scratch files); commands name
paths relative to the repository (runs/, data/) or placeholders."""

from __future__ import annotations

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) + glob.glob(os.path.join(ROOT, "README*.md")))
# An absolute path: a slash after a space, quote, backtick, bracket, '=' or ':' (or at a line's
# start), then a name and another slash. Placeholders a user replaces are allowed.
ABSOLUTE_PATH = re.compile(r"(?:^|(?<=[\s`'\"(=:\[]))/[A-Za-z_.][\w.\-]*/\S*", re.MULTILINE)
# An install path; a cluster's shared file system (docs/scaling.md); the standard input, a pipe.
PLACEHOLDERS = ("/path/to/", "/shared/run", "/dev/stdin")


def _absolute_paths(text: str) -> list[str]:
    return [m.group(0) for m in ABSOLUTE_PATH.finditer(text) if not m.group(0).startswith(PLACEHOLDERS)
            and not text[max(0, m.start() - 8):m.start()].endswith(("http:", "https:", "://"))]


def test_the_documents_give_no_absolute_path_outside_the_repository():
    found = {}
    for path in DOCUMENTS:
        with open(path, encoding="utf-8") as f:
            paths = _absolute_paths(f.read())
        if paths:
            found[os.path.relpath(path, ROOT)] = paths[:3]
    assert not found, found


def test_the_scan_finds_what_it_is_for():
    text = ("elmo-probe --workdir /work/main/runs/demo --data=/work/shared/data/coarsewsd20 > '/tmp/x.txt'\n"
            "see https://github.com/allenai/bilm-tf/blob/master/README.md and runs/demo/x.txt, pip install /path/to/elmo")
    assert _absolute_paths(text) == ["/work/main/runs/demo", "/work/shared/data/coarsewsd20", "/tmp/x.txt'"]


def test_each_translated_page_has_its_english_pages_commands_and_tables():
    """docs/X.zh-CN.md is docs/X.md in Chinese: the same code blocks and the same tables' numbers,
    so a translation cannot drift from the commands and results it translates."""
    pairs = [(path.replace(".zh-CN.md", ".md"), path) for path in DOCUMENTS if path.endswith(".zh-CN.md")
             and os.path.dirname(path).endswith("docs")]
    assert pairs
    for english, chinese in pairs:
        with open(english, encoding="utf-8") as f, open(chinese, encoding="utf-8") as g:
            texts = f.read(), g.read()
        blocks = [re.findall(r"^```.*?^```$", text, re.DOTALL | re.MULTILINE) for text in texts]
        assert blocks[0] == blocks[1], chinese
        numbers = [re.findall(r"\d+(?:[.,]\d+)*", "\n".join(re.findall(r"^\|.*\|$", text, re.MULTILINE)))
                   for text in texts]
        assert numbers[0] == numbers[1], chinese


# Tables of keys and behaviour, whose numbers (defaults, limits) are not measurements.
REFERENCE_TABLES = ("| key | default | allowed | meaning |", "| keys | input |", "| fault | what happens | tests |")
MEASURED = re.compile(r"\b\d+\.\d{2,}\b")  # A number of two or more decimals: a result.
PROVENANCE = ("```", "benchmarks/", "configs/")  # A command, the committed result files, a recipe.


def _tables(text: str):
    """(the text of its section before it, the table) of each Markdown table of `text`."""
    for section in re.split(r"^#{1,4} ", text, flags=re.MULTILINE):
        lines = section.split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].startswith("|"):
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            yield "\n".join(lines[:i]), "\n".join(lines[i:j])
            i = j


def test_every_table_of_results_names_the_run_that_made_it():
    """A table of measured numbers has, in its section before it or in itself, the command, recipe or
    committed result files that made it, so a reader can rerun it and check the numbers."""
    unnamed = []
    for path in DOCUMENTS:
        with open(path, encoding="utf-8") as f:
            for before, table in _tables(f.read()):
                if table.startswith(REFERENCE_TABLES) or not MEASURED.search(table):
                    continue
                if not any(mark in before or mark in table for mark in PROVENANCE):
                    unnamed.append((os.path.relpath(path, ROOT), table.splitlines()[0]))
    assert unnamed == []
