"""Task metrics on hand-counted cases: span F1 (checked against a span extractor of its own and seqeval's report),
attachment scores (CoNLL 2018: every word, universal relations), token accuracy, and mismatched inputs."""

from __future__ import annotations

import warnings

import pytest

from elmo_jax.tasks.metrics import accuracy, attachment_scores, span_f1


def conlleval_spans(tags):
    """(type, start, end) of IOB tags, written here apart from seqeval: an entity starts at B-, at an I- after O or
    after another type, and ends before O, B- or another type."""
    spans, start, kind = set(), None, None
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, _, tag_type = tag.partition("-")
        if start is not None and (prefix != "I" or tag_type != kind):
            spans.add((kind, start, index))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = index, tag_type
    return spans


def independent_counts(gold, predicted):
    counts = {}
    for gold_tags, predicted_tags in zip(gold, predicted):
        g, p = conlleval_spans(gold_tags), conlleval_spans(predicted_tags)
        for column, spans in enumerate((g, p, g & p)):
            for kind, _, _ in spans:
                counts.setdefault(kind, [0, 0, 0])[column] += 1
    return {kind: tuple(c) for kind, c in counts.items()}


GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC"],  # PER 0-1, LOC 3-5
    ["O", "B-ORG", "O", "B-PER"],  # ORG 1, PER 3 (at the sentence end)
    ["B-LOC", "O", "O"],  # LOC 0
]
PREDICTED = [
    ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"],  # PER correct; LOC 3-4 overlaps gold's 3-5: no match
    ["O", "B-PER", "O", "I-PER"],  # PER 1: wrong type (gold ORG); PER 3 from a bare I- at the end: correct
    ["I-LOC", "I-LOC", "O"],  # I- continuation: one LOC 0-1, not gold's LOC 0
]
# By hand: gold PER 2, LOC 2, ORG 1 = 5; predicted PER 3, LOC 2 = 5; correct PER 2.
HAND = {"PER": (2, 3, 2), "LOC": (2, 2, 0), "ORG": (1, 0, 0)}


def test_span_f1_against_hand_counts_and_an_independent_extractor():
    result = span_f1(GOLD, PREDICTED)
    assert independent_counts(GOLD, PREDICTED) == HAND
    assert {kind: (r["gold"], r["predicted"], r["correct"]) for kind, r in result["per_type"].items()} == HAND
    assert list(result["per_type"]) == ["LOC", "ORG", "PER"]
    assert (result["gold"], result["predicted"], result["correct"]) == (5, 5, 2)
    assert result["precision"] == pytest.approx(2 / 5) and result["recall"] == pytest.approx(2 / 5)
    assert result["f1"] == pytest.approx(2 / 5)
    per = result["per_type"]["PER"]
    assert per["precision"] == pytest.approx(2 / 3) and per["recall"] == 1.0 and per["f1"] == pytest.approx(0.8)
    assert result["per_type"]["LOC"]["f1"] == 0.0 and result["per_type"]["ORG"]["precision"] == 0.0


def test_span_f1_agrees_with_seqeval_report():
    from seqeval.metrics import classification_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # The ORG row's 0/0 precision.
        report = classification_report(GOLD, PREDICTED, output_dict=True)
    result = span_f1(GOLD, PREDICTED)
    assert result["f1"] == pytest.approx(report["micro avg"]["f1-score"])
    for kind, scores in result["per_type"].items():
        assert scores["f1"] == pytest.approx(report[kind]["f1-score"])
        assert scores["gold"] == report[kind]["support"]


@pytest.mark.parametrize(
    "gold, predicted, counts",
    [
        ([["O", "O"]], [["O", "O"]], (0, 0, 0)),
        ([["B-PER", "O"]], [["O", "O"]], (1, 0, 0)),
        ([["O", "O"]], [["B-PER", "I-PER"]], (0, 1, 0)),
        ([], [], (0, 0, 0)),
    ],
    ids=["nothing", "no-predictions", "no-gold", "no-sentences"],
)
def test_span_f1_is_zero_without_warnings_when_a_side_has_no_entities(gold, predicted, counts):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = span_f1(gold, predicted)
    assert (result["gold"], result["predicted"], result["correct"]) == counts
    assert result["precision"] == result["recall"] == result["f1"] == 0.0
    assert all(scores["f1"] == 0.0 for scores in result["per_type"].values())


def test_a_perfect_prediction():
    result = span_f1(GOLD, GOLD)
    assert result["precision"] == result["recall"] == result["f1"] == 1.0 and result["correct"] == 5


@pytest.mark.parametrize(
    "gold, predicted, message",
    [
        ([["O"], ["O"]], [["O"]], "1 sentences of predicted tags for 2 gold sentences"),
        ([["O"], ["O", "B-PER"]], [["O"], ["O"]], "sentence 1 (from 0): 1 predicted tags for its 2 gold words"),
        ([["O", "PER"]], [["O", "O"]], "sentence 0 (from 0): gold tag 'PER' is not O, B-<type> or I-<type>"),
        ([["O"]], [["E-PER"]], "sentence 0 (from 0): predicted tag 'E-PER' is not"),
    ],
    ids=["sentences", "lengths", "gold-tag", "predicted-tag"],
)
def test_span_f1_errors(gold, predicted, message):
    with pytest.raises(ValueError) as e:
        span_f1(gold, predicted)
    assert message in str(e.value), e.value


def test_attachment_scores_count_every_word_and_only_universal_relations():
    gold_heads = [[2, 0, 2, 2], [0, 1]]
    gold_relations = [["nsubj", "root", "obj", "punct"], ["root", "nmod:poss"]]
    predicted_heads = [[2, 0, 1, 2], [0, 1]]
    predicted_relations = [["nsubj:pass", "root", "obj", "dep"], ["root", "nmod"]]
    # Heads right: words 1, 2, 4 of sentence 1 and both of sentence 2 = 5 / 6. Relations of those, universal part:
    # nsubj:pass = nsubj, root, punct != dep (punctuation counts), root, nmod = nmod:poss -> 4 / 6.
    assert attachment_scores(gold_heads, gold_relations, predicted_heads, predicted_relations) == {
        "uas": pytest.approx(5 / 6), "las": pytest.approx(4 / 6), "words": 6}
    # A right relation on a wrong head is no labelled attachment.
    assert attachment_scores([[0, 1]], [["root", "obj"]], [[2, 0]], [["root", "obj"]]) == {
        "uas": 0.0, "las": 0.0, "words": 2}


@pytest.mark.parametrize(
    "arguments, message",
    [
        (([[0]], [["root"]], [[0], [1]], [["root"]]), "2 sentences of predicted heads for 1 gold sentences"),
        (([[0, 1]], [["root", "obj"]], [[0, 1]], [["root"]]), "sentence 0 (from 0): 1 predicted relations for its 2"),
        (([[0, 1]], [["root"]], [[0, 1]], [["root", "obj"]]), "sentence 0 (from 0): 1 gold relations for its 2"),
        (([[]], [[]], [[]], [[]]), "no words to score"),
    ],
    ids=["sentences", "predicted-relations", "gold-relations", "no-words"],
)
def test_attachment_scores_errors(arguments, message):
    with pytest.raises(ValueError) as e:
        attachment_scores(*arguments)
    assert message in str(e.value), e.value


def test_accuracy():
    assert accuracy([["NOUN", "VERB"], ["DET"]], [["NOUN", "NOUN"], ["DET"]]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"sentence 1 \(from 0\): 2 predicted labels for its 1 gold words"):
        accuracy([["a"], ["b"]], [["a"], ["b", "c"]])
    with pytest.raises(ValueError, match="0 sentences of predicted labels for 1 gold sentences"):
        accuracy([["a"]], [])
    with pytest.raises(ValueError, match="no words to score"):
        accuracy([], [])
