"""What each segmenter makes of gold-segmented Chinese for a biLM's vocabulary: the share of tokens
outside it and the words' agreement with the gold segmentation (SIGHAN's word F1: a word is right
when its characters' span is a gold word's).

  python benchmarks/segmenters_zh.py --workdir runs/demo_zh --conllu data/chinese/zh_gsdsimp-ud-test.conllu \\
      [--probe_train data/chinese/zh_gsdsimp-ud-dev.conllu] [--output benchmarks/results/chinese/segmenters_demo_zh.json]

Each sentence is the gold words joined without spaces, cut by: the gold words themselves, jieba,
jieba_vocabulary (jieba's words outside the vocabulary cut into words of it), and none (the sentence
as one token). With --probe_train, UPOS probes as `elmo-probe --train=PROBE_TRAIN --test=CONLLU`
trains them (a tenth of PROBE_TRAIN held out for early stopping), but on the biLM's layers of each
segmenter's tokens, each gold word reading the mean of the tokens that share its characters
(probing/realign.py): what a UPOS tagger on the biLM would score on text segmented that way. The
JSON names the machine and the jieba version.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys

from glove_ptb import machine  # benchmarks/, the script's directory, is on sys.path.
from elmo_jax.data.conllu import Sentence, read_conllu
from elmo_jax.data.segmenter import splitter
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_workdir
from elmo_jax.probing.classifier import ProbeConfig
from elmo_jax.probing.features import compute_features, layer_dims
from elmo_jax.probing.realign import pooled_features
from elmo_jax.probing.run import fit_probes, labelled_splits
from elmo_jax.runtime import workdir_files
from elmo_jax.runtime.atomic_write import write_json_atomic

SEGMENTERS = ("gold", "jieba", "jieba_vocabulary", "none")
PROBED = SEGMENTERS[:3]  # A sentence as one token has no words to probe.


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


def cut(name: str, vocabulary: Vocabulary, gold: list[list[str]]) -> list[list[str]]:
    """The sentences `gold` (lists of words) joined and cut again by segmenter `name`."""
    if name == "gold":
        return gold
    split = splitter(name, vocabulary)
    return [split("".join(words)) for words in gold]


def probe_scores(pretrained: PretrainedBiLM, train: list[Sentence], test: list[Sentence], vocabulary: Vocabulary,
                 seed: int = 0) -> dict:
    """Each probed segmenter's UPOS test accuracy by layer and with the mix, the probes trained on
    `train`'s gold words (a tenth held out) reading the pooled layers of the segmenter's tokens."""
    splits = labelled_splits(train, None, test, "upos", "none", seed)
    ids = {label: i for i, label in enumerate(sorted(set(splits.train.labels)))}
    out = {}
    for name in PROBED:
        words = [split.sentences for split in splits[:3]]
        cuts = [cut(name, vocabulary, sentences) for sentences in words]
        layers = compute_features(pretrained, cuts, progress=False)
        pooled = [pooled_features(f, g, c) for f, g, c in zip(layers, words, cuts)]
        _, accuracy = fit_probes(splits, ids, pooled, layer_dims(pretrained.model), ProbeConfig(seed=seed), False)
        out[name] = {"layers": accuracy["linear"].tolist(), "mix": float(accuracy["mix"][0])}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--conllu", required=True)
    parser.add_argument("--probe_train", help="CoNLL-U whose gold words train UPOS probes (scored on --conllu)")
    parser.add_argument("--output")
    args = parser.parse_args()
    vocabulary = Vocabulary.load(os.path.join(args.workdir, workdir_files.VOCAB))
    test = list(read_conllu(args.conllu))
    gold = [[token.form for token in sentence.tokens] for sentence in test]
    results = {name: scores(gold, cut(name, vocabulary, gold), vocabulary) for name in SEGMENTERS}
    record = {
        "workdir": args.workdir, "conllu": os.path.basename(args.conllu), "sentences": len(gold),
        "vocabulary": len(vocabulary), "jieba": importlib.metadata.version("jieba"), "machine": machine(),
        "segmenters": results,
    }
    if args.probe_train:
        upos = probe_scores(bilm_from_workdir(args.workdir), list(read_conllu(args.probe_train)), test, vocabulary)
        record["upos_probe"] = {"train": os.path.basename(args.probe_train), "seed": 0, "segmenters": upos}
    print("| segmenter | tokens | outside the vocabulary | word P | word R | word F1 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {r['tokens']:,} | {100 * r['outside_vocabulary']:.1f}% | {r['precision']:.3f} | "
              f"{r['recall']:.3f} | {r['f1']:.3f} |")
    if args.probe_train:
        print("\n| segmenter | UPOS layer 0 | UPOS layer 1 | UPOS layer 2 | UPOS mix |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, r in record["upos_probe"]["segmenters"].items():
            print(f"| {name} | " + " | ".join(f"{a:.3f}" for a in r["layers"]) + f" | {r['mix']:.3f} |")
    if args.output:
        write_json_atomic(args.output, record)
    else:
        json.dump(record, sys.stdout, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
