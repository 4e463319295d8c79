"""The fenced code blocks of a Markdown page, for tests that run the docs' examples as written."""

from __future__ import annotations

import re


def code_blocks(path: str, language: str = "python") -> list[str]:
    """The text of each ```language block of the Markdown file `path`, in page order."""
    with open(path, encoding="utf-8") as f:
        return re.findall(rf"^```{re.escape(language)}\n(.*?)^```$", f.read(), re.DOTALL | re.MULTILINE)
