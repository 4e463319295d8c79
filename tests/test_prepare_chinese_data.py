"""tools/prepare_chinese_data.py: the Chinese data built from downloaded files, FORM simplified by
OpenCC and nothing else changed, the other files copied byte for byte, one error line for bad input."""

from __future__ import annotations

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "prepare_chinese_data", os.path.join(ROOT, "tools", "prepare_chinese_data.py")
)
prepare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prepare)

TRADITIONAL = ("# sent_id = 1\r\n1\t看似\t_\tVERB\tVV\t_\t2\tcop\t_\t_\r\n2\t簡單\t_\tADJ\tJJ\t_\t0\troot\t_\t_\r\n\r\n"
               "1\t臺灣\t臺灣\tPROPN\tNNP\t_\t0\troot\t_\t_\r\n\r\n")


def _downloads(tmp_path) -> list[str]:
    gsd, simp, icwb2 = tmp_path / "UD_Chinese-GSD", tmp_path / "UD_Chinese-GSDSimp", tmp_path / "icwb2-data"
    for directory in (gsd, simp, icwb2 / "gold"):
        directory.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (gsd / f"zh-ud-{split}.conllu").write_bytes(TRADITIONAL.encode())
    for split in ("dev", "test"):
        (simp / f"zh_gsdsimp-ud-{split}.conllu").write_bytes(f"1\t{split}\t_\tX\t_\t_\t0\troot\t_\t_\n\n".encode())
    for corpus in ("msr", "pku"):
        (icwb2 / "gold" / f"{corpus}_test_gold.utf8").write_bytes(f"{corpus}  １９９７年  ，\r\n".encode())
    return ["--ud_gsd_2016", str(gsd), "--ud_gsdsimp", str(simp), "--icwb2", str(icwb2)]


def test_the_folder_is_built_with_the_forms_simplified_and_the_rest_as_downloaded(tmp_path):
    pytest.importorskip("opencc", reason="the conversion needs OpenCC (the dev extra installs it)")
    out = tmp_path / "data" / "chinese"
    assert prepare.main([*_downloads(tmp_path), "--output", str(out)]) == 0
    assert sorted(os.listdir(out)) == [
        "sighan2005_msr_test_gold.txt", "sighan2005_pku_test_gold.txt", "zh_gsd2017simp-ud-dev.conllu",
        "zh_gsd2017simp-ud-test.conllu", "zh_gsd2017simp-ud-train.conllu", "zh_gsdsimp-ud-dev.conllu",
        "zh_gsdsimp-ud-test.conllu",
    ]
    want = TRADITIONAL.replace("\t簡單\t", "\t简单\t").replace("1\t臺灣\t臺灣", "1\t台湾\t臺灣")  # FORM only.
    assert (out / "zh_gsd2017simp-ud-train.conllu").read_bytes() == want.encode()
    assert (out / "sighan2005_pku_test_gold.txt").read_bytes() == "pku  １９９７年  ，\r\n".encode()
    assert (out / "zh_gsdsimp-ud-test.conllu").read_bytes() == b"1\ttest\t_\tX\t_\t_\t0\troot\t_\t_\n\n"


def test_a_word_line_without_ten_columns_is_one_error_naming_its_line():
    lines = ["# c\n", "1\t看似\t_\tVERB\n"]
    with pytest.raises(ValueError, match=r"^zh-ud-train.conllu:2: 4 tab-separated columns, CoNLL-U has 10$"):
        list(prepare.simplified_lines(lines, str, "zh-ud-train.conllu"))
    with pytest.raises(ValueError, match="the conversion made 'a b' of the word"):
        list(prepare.simplified_lines(["1\tx\t_\t_\t_\t_\t0\troot\t_\t_\n"], lambda form: "a b", "f"))


def test_a_missing_download_is_one_line_before_anything_is_written(tmp_path, capsys):
    args = _downloads(tmp_path)
    os.remove(os.path.join(args[3], "zh_gsdsimp-ud-test.conllu"))
    with pytest.raises(SystemExit, match="zh_gsdsimp-ud-test.conllu not found"):
        prepare.main([*args, "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
