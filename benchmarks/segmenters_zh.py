"""What each segmenter makes of gold-segmented Chinese for a biLM's vocabulary: the share of tokens
outside it and the words' agreement with the gold segmentation (SIGHAN's word F1: a word is right
when its characters' span is a gold word's).

  python benchmarks/segmenters_zh.py --workdir runs/demo_zh --conllu data/chinese/zh_gsdsimp-ud-test.conllu \\
      [--output benchmarks/results/chinese/segmenters_demo_zh.json]

Each sentence is the gold words joined without spaces, cut by: the gold words themselves, jieba,
jieba_vocabulary (jieba's words outside the vocabulary cut into words of it), and none (the sentence
as one token). The JSON names the machine and the jieba version.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys

from glove_ptb import machine  # benchmarks/, the script's directory, is on sys.path.
from elmo_jax.data.conllu import read_conllu
from elmo_jax.data.segmenter import splitter
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.runtime import workdir_files
from elmo_jax.runtime.atomic_write import write_json_atomic

SEGMENTERS = ("gold", "jieba", "jieba_vocabulary", "none")


def spans(words: list[str]) -> set[tuple[int, int]]:
    """The (start, end) character offsets of each word of a sentence."""
    out, start = set(), 0
    for word in words:
        out.add((start, start + len(word)))
        start += len(word)
    return out


def scores(gold: list[list[str]], cut: list[list[str]], vocabulary: Vocabulary) -> dict:
    """Tokens, the share outside `vocabulary`, and word precision/recall/F1 against `gold`."""
    tokens = sum(map(len, cut))
    outside = sum(word not in vocabulary for sentence in cut for word in sentence)
    right = sum(len(spans(g) & spans(c)) for g, c in zip(gold, cut))
    precision, recall = right / tokens, right / sum(map(len, gold))
    return {
        "tokens": tokens, "outside_vocabulary": outside / tokens,
        "precision": precision, "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if right else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--conllu", required=True)
    parser.add_argument("--output")
    args = parser.parse_args()
    vocabulary = Vocabulary.load(os.path.join(args.workdir, workdir_files.VOCAB))
    gold = [[token.form for token in sentence.tokens] for sentence in read_conllu(args.conllu)]
    raw = ["".join(words) for words in gold]
    results = {}
    for name in SEGMENTERS:
        cut = gold if name == "gold" else [splitter(name, vocabulary)(line) for line in raw]
        results[name] = scores(gold, cut, vocabulary)
    record = {
        "workdir": args.workdir, "conllu": os.path.basename(args.conllu), "sentences": len(gold),
        "vocabulary": len(vocabulary), "jieba": importlib.metadata.version("jieba"), "machine": machine(),
        "segmenters": results,
    }
    print("| segmenter | tokens | outside the vocabulary | word P | word R | word F1 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {r['tokens']:,} | {100 * r['outside_vocabulary']:.1f}% | {r['precision']:.3f} | "
              f"{r['recall']:.3f} | {r['f1']:.3f} |")
    if args.output:
        write_json_atomic(args.output, record)
    else:
        json.dump(record, sys.stdout, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
