"""Builds the Chinese data of configs/demo_zh.py and docs/chinese.md (default `data/chinese`) from
files you downloaded; it downloads nothing.

  pip install opencc          # OpenCC's traditional -> simplified tables (t2s: characters and phrases)
  python tools/prepare_chinese_data.py --ud_gsd_2016 UD_Chinese-GSD --ud_gsdsimp UD_Chinese-GSDSimp \
      --icwb2 icwb2-data [--output data/chinese]

Inputs (each a directory as its source distributes it):
- `--ud_gsd_2016`: UD Chinese GSD as released in April 2016 (traditional characters, UD v1 tags):
  github.com/UniversalDependencies/UD_Chinese-GSD at commit 9eab518, files zh-ud-{train,dev,test}.conllu.
  Written as zh_gsd2017simp-ud-{train,dev,test}.conllu with the FORM column converted to simplified
  characters by OpenCC's t2s tables, every other column and line as it was (CC BY-NC-SA 4.0).
- `--ud_gsdsimp`: UD Chinese GSDSimp (v2.13 or later; simplified), its zh_gsdsimp-ud-{dev,test}.conllu
  copied as they are (CC BY-SA 4.0).
- `--icwb2`: the SIGHAN 2005 bakeoff's icwb2-data, its gold/{msr,pku}_test_gold.utf8 copied as
  sighan2005_{msr,pku}_test_gold.txt (gold segmentations of the test sets: words separated by spaces;
  non-commercial research use).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Callable, Iterable, Iterator

GSD_2016 = {f"zh-ud-{split}.conllu": f"zh_gsd2017simp-ud-{split}.conllu" for split in ("train", "dev", "test")}
GSDSIMP = {name: name for name in ("zh_gsdsimp-ud-dev.conllu", "zh_gsdsimp-ud-test.conllu")}
SIGHAN = {
    os.path.join("gold", f"{corpus}_test_gold.utf8"): f"sighan2005_{corpus}_test_gold.txt" for corpus in ("msr", "pku")
}
FORM = 1  # CoNLL-U's second column.


def simplified_lines(lines: Iterable[str], convert: Callable[[str], str], path: str) -> Iterator[str]:
    """CoNLL-U `lines` (with their line ends) with each word line's FORM passed through `convert`;
    comments, blank lines and the other nine columns as they are. ValueError naming `path:line`
    for a word line without 10 columns, or a FORM that the conversion cuts or joins."""
    for number, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if not text or text.startswith("#"):
            yield line
            continue
        columns = text.split("\t")
        if len(columns) != 10:
            raise ValueError(f"{path}:{number}: {len(columns)} tab-separated columns, CoNLL-U has 10")
        form = convert(columns[FORM])
        if not form or any(c.isspace() for c in form):
            raise ValueError(f"{path}:{number}: the conversion made {form!r} of the word {columns[FORM]!r}")
        columns[FORM] = form
        yield "\t".join(columns) + line[len(text):]


def _opencc() -> Callable[[str], str]:
    try:
        import opencc
    except ImportError:
        sys.exit("error: the conversion needs OpenCC's tables: pip install opencc")
    return opencc.OpenCC("t2s").convert


def _source(directory: str, name: str) -> str:
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        sys.exit(f"error: {path} not found (see --help for where it comes from)")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ud_gsd_2016", required=True, help="UD_Chinese-GSD at commit 9eab518 (April 2016)")
    parser.add_argument("--ud_gsdsimp", required=True, help="UD_Chinese-GSDSimp, v2.13 or later")
    parser.add_argument("--icwb2", required=True, help="the SIGHAN 2005 bakeoff's icwb2-data")
    parser.add_argument("--output", default=os.path.join("data", "chinese"), help="default: data/chinese")
    args = parser.parse_args(argv)
    jobs = [(_source(args.ud_gsd_2016, name), out, True) for name, out in GSD_2016.items()]
    jobs += [(_source(args.ud_gsdsimp, name), out, False) for name, out in GSDSIMP.items()]
    jobs += [(_source(args.icwb2, name), out, False) for name, out in SIGHAN.items()]
    convert = _opencc()  # Before anything is written: a missing OpenCC leaves no half-made folder.
    os.makedirs(args.output, exist_ok=True)
    for source, name, simplify in jobs:
        target = os.path.join(args.output, name)
        if not simplify:
            shutil.copyfile(source, target)
        else:
            with open(source, encoding="utf-8", newline="") as f:
                lines = list(simplified_lines(f, convert, source))  # Every line checked before the file is written.
            with open(target + ".tmp", "w", encoding="utf-8", newline="") as f:
                f.writelines(lines)
            os.replace(target + ".tmp", target)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
