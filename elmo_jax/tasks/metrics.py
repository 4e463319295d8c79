"""Task metrics: exact-match entity span F1 (CoNLL-2003's, the spans `seqeval` reads in its default
conlleval-compatible mode), attachment scores as the CoNLL 2018 shared task's evaluation script counts
them (every word, universal relations), and token accuracy. Inputs are lists of per-sentence lists;
lists that disagree in sentence count or lengths are a ValueError rather than a score of the overlap.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

_TAG = re.compile(r"O|[BI]-\S+")


def span_f1(gold: list[list[str]], predicted: list[list[str]]) -> dict:
    """Entity span scores of `predicted` IOB tags against `gold` ones (one list of tags per sentence, a
    tag per word): an entity counts as correct only when its type, first and last word all match (an I-X
    not continuing an X starts an entity, as in conlleval). Returns {"precision", "recall", "f1" (micro,
    0.0 where undefined), "gold", "predicted", "correct" (entity counts), "per_type": {type: the same six
    keys}} with the types of both sides, sorted. ValueError for sentence counts or lengths that disagree,
    or a tag that is not O, B-<type> or I-<type>."""
    _check_lengths(gold, predicted, "predicted tags")
    get_entities = _seqeval_entities()
    counts: dict[str, list[int]] = {}  # type -> [gold, predicted, correct]
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        gold_spans = set(get_entities(_checked_tags(gold_tags, index, "gold")))
        predicted_spans = set(get_entities(_checked_tags(predicted_tags, index, "predicted")))
        for column, spans in enumerate((gold_spans, predicted_spans, gold_spans & predicted_spans)):
            for kind, _, _ in spans:
                counts.setdefault(kind, [0, 0, 0])[column] += 1
    totals = [sum(count[column] for count in counts.values()) for column in range(3)]
    return {**_scores(*totals), "per_type": {kind: _scores(*counts[kind]) for kind in sorted(counts)}}


def attachment_scores(gold_heads: Sequence[Sequence[int]], gold_relations: Sequence[Sequence[str]],
                      predicted_heads: Sequence[Sequence[int]], predicted_relations: Sequence[Sequence[str]],
                      ) -> dict:
    """Unlabelled and labelled attachment scores of one parse per sentence (heads: 1-based word indices,
    0 for the root; relations: UD dependency relations; a list per sentence, an entry per word), as the
    CoNLL 2018 shared task's script counts them on gold words: every word, punctuation included; LAS
    compares only a relation's universal part (`nmod:poss` equals `nmod`). Returns {"uas", "las" (fractions
    of the words), "words"}. ValueError for lists that disagree in sentence count or lengths, or no words."""
    _check_lengths(gold_heads, gold_relations, "gold relations")
    _check_lengths(gold_heads, predicted_heads, "predicted heads")
    _check_lengths(gold_heads, predicted_relations, "predicted relations")
    words = attached = labelled = 0
    for sentence in zip(gold_heads, gold_relations, predicted_heads, predicted_relations):
        for gold_head, gold_relation, predicted_head, predicted_relation in zip(*sentence):
            words += 1
            if gold_head == predicted_head:
                attached += 1
                labelled += gold_relation.split(":")[0] == predicted_relation.split(":")[0]
    if not words:
        raise ValueError("no words to score")
    return {"uas": attached / words, "las": labelled / words, "words": words}


def accuracy(gold: list[list[str]], predicted: list[list[str]]) -> float:
    """The fraction of words whose `predicted` label equals the `gold` one (a list of labels per sentence).
    ValueError for sentence counts or lengths that disagree, or no words."""
    _check_lengths(gold, predicted, "predicted labels")
    pairs = [(g, p) for gold_labels, predicted_labels in zip(gold, predicted)
             for g, p in zip(gold_labels, predicted_labels)]
    if not pairs:
        raise ValueError("no words to score")
    return sum(g == p for g, p in pairs) / len(pairs)


def _check_lengths(reference: Sequence[Sequence], other: Sequence[Sequence], what: str) -> None:
    """ValueError unless `other` has as many sentences as `reference`, each as long."""
    if len(other) != len(reference):
        raise ValueError(f"{len(other)} sentences of {what} for {len(reference)} gold sentences")
    for index, (reference_sentence, other_sentence) in enumerate(zip(reference, other)):
        if len(other_sentence) != len(reference_sentence):
            raise ValueError(f"sentence {index} (from 0): {len(other_sentence)} {what} for its "
                             f"{len(reference_sentence)} gold words")


def _seqeval_entities() -> Callable[[list[str]], list[tuple[str, int, int]]]:
    """seqeval's get_entities: one sentence's tags -> its (type, first word, last word) entities."""
    try:
        from seqeval.metrics.sequence_labeling import get_entities
    except ImportError:
        raise ImportError("span F1 needs seqeval: pip install 'elmo-jax[tasks]' (or seqeval)") from None
    return get_entities


def _checked_tags(tags: Sequence[str], index: int, side: str) -> list[str]:
    """Sentence `index`'s tags as a list; ValueError for a tag that is not O, B-<type> or I-<type> (seqeval
    would warn and read an entity in it)."""
    for tag in tags:
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise ValueError(f"sentence {index} (from 0): {side} tag {tag!r} is not O, B-<type> or I-<type>")
    return list(tags)


def _scores(gold: int, predicted: int, correct: int) -> dict:
    """Precision, recall and F1 of entity counts, 0.0 where a denominator is 0, and the counts."""
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "gold": gold, "predicted": predicted,
            "correct": correct}
