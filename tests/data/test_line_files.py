"""Numbered lines and gold files line for line: line ends (LF, CRLF) and a byte order mark are not text."""

from __future__ import annotations

from elmo_jax.data.line_files import gold_lines, numbered_lines


def test_crlf_lines_read_as_their_lf_twins(tmp_path):
    text = "\ufeff１９９７年 ， 北京\n\nT\n"
    (tmp_path / "lf.txt").write_text(text, encoding="utf-8")
    (tmp_path / "crlf.txt").write_bytes(text.replace("\n", "\r\n").encode())
    lf, crlf = (list(numbered_lines(str(tmp_path / name))) for name in ("lf.txt", "crlf.txt"))
    assert crlf == lf == [(1, "１９９７年 ， 北京"), (2, ""), (3, "T")]
    gold = list(gold_lines(str(tmp_path / "crlf.txt"), "data.txt", 3))
    assert gold == [(1, "１９９７年 ， 北京"), (2, ""), (3, "T")]
