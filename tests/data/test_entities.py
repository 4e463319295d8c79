"""Named-entity files: both layouts (UNER, CoNLL-2003), gzip and pipes read once, IOB1 -> IOB2, errors naming
file:line, and writing predictions back line for line."""

from __future__ import annotations

import gzip
import io
import os
import threading

import pytest

from elmo_jax.data.entities import (
    EntitySentence,
    entity_counts,
    entity_spans,
    entity_types,
    iob2_to_iob1,
    read_entity_file,
    tag_vocabulary,
    write_entity_file,
)

UNER = "\n".join([
    "# newdoc id = d1",
    "# sent_id = d1-0001",
    "# text = Tampa Bay sells morcillas .",
    "1\tTampa\tB-LOC\t-\tstephen",
    "2\tBay\tI-LOC\t-\tstephen",
    "3\tsells\tO\t-\t-",
    "4\tmorcillas\tO\t-\t-",
    "5\t.\tO\t-\t-",
    "",
    "# sent_id = d1-0002",
    "1\tAsk\tO\t-\t-",
    "2\tMary\tB-PER\tmaria\t-",
    "3\tof\tO\t-\t-",
    "4\tIBM\tB-ORG\t-\t-",
    "",
]) + "\n"

CONLL = "\n".join([
    "-DOCSTART- -X- -X- O",
    "",
    "EU NNP B-NP B-ORG",
    "rejects VBZ B-VP O",
    "German JJ B-NP B-MISC",
    "call NN I-NP O",
    ".  .   O    O",  # Odd spacing: kept on writing back.
    "",
    "Peter NNP B-NP B-PER",
    "Blackburn NNP I-NP I-PER",
    "",
    "-DOCSTART- -X- -X- O",
    "",
    "BRUSSELS NNP B-NP B-LOC",
    "",
]) + "\n"

# CoNLL-2003's original IOB1: I- starts an entity, B- only where two entities of one type touch.
CONLL_IOB1 = "\n".join([
    "-DOCSTART- -X- -X- O",
    "",
    "Germany NNP I-NP I-LOC",
    "France NNP I-NP B-LOC",
    "and CC O O",
    "Peter NNP I-NP I-PER",
    "Blackburn NNP I-NP I-PER",
    "EU NNP I-NP I-ORG",
    "",
]) + "\n"


def write(tmp_path, text, name="x.iob2"):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8")
    return str(path)


def written(entity_file, predicted=None):
    out = io.StringIO()
    write_entity_file(entity_file, [s.tags for s in entity_file.sentences] if predicted is None else predicted, out)
    return out.getvalue()


def test_uner_sentences_words_tags_and_lines(tmp_path):
    path = write(tmp_path, UNER)
    f = read_entity_file(path)
    assert f.layout == "uner" and f.scheme == "iob2" and f.path == path
    assert f.sentences == [
        EntitySentence(["Tampa", "Bay", "sells", "morcillas", "."], ["B-LOC", "I-LOC", "O", "O", "O"], [4, 5, 6, 7, 8]),
        EntitySentence(["Ask", "Mary", "of", "IBM"], ["O", "B-PER", "O", "B-ORG"], [11, 12, 13, 14]),
    ]
    assert entity_types(f.sentences) == ["LOC", "ORG", "PER"]
    assert entity_counts(f.sentences) == {"LOC": 1, "ORG": 1, "PER": 1}
    assert tag_vocabulary(entity_types(f.sentences)) == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_conll2003_documents_are_not_sentences_and_the_tag_is_the_last_column(tmp_path):
    f = read_entity_file(write(tmp_path, CONLL, "x.conll"))
    assert f.layout == "conll2003"
    assert [s.words for s in f.sentences] == [["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"],
                                              ["BRUSSELS"]]
    assert [s.tags for s in f.sentences] == [["B-ORG", "O", "B-MISC", "O", "O"], ["B-PER", "I-PER"], ["B-LOC"]]
    assert [s.lines for s in f.sentences] == [[3, 4, 5, 6, 7], [9, 10], [14]]
    assert entity_counts(f.sentences) == {"LOC": 1, "MISC": 1, "ORG": 1, "PER": 1}


def test_the_layout_argument_overrides_detection(tmp_path):
    """A tab-separated CoNLL-2003 file looks like UNER to detection; layout='conll2003' reads it."""
    path = write(tmp_path, "EU\tNNP\tB-NP\tB-ORG\ncalls\tVBZ\tB-VP\tO\n")
    with pytest.raises(ValueError, match=":1: expected 5 tab-separated columns"):
        read_entity_file(path)
    f = read_entity_file(path, layout="conll2003")
    assert f.sentences == [EntitySentence(["EU", "calls"], ["B-ORG", "O"], [1, 2])]
    assert written(f, [["O", "B-PER"]]) == "EU\tNNP\tB-NP\tO\ncalls\tVBZ\tB-VP\tB-PER\n"


def test_a_gzipped_file_reads_as_its_text(tmp_path):
    path = write(tmp_path, gzip.compress(UNER.encode()), "x.iob2.gz")
    assert read_entity_file(path) == read_entity_file(write(tmp_path, UNER))._replace(path=path)
    with pytest.raises(ValueError, match=r"bad\.iob2\.gz:1: bad gzip data"):
        read_entity_file(write(tmp_path, UNER, "bad.iob2.gz"))


@pytest.mark.parametrize("text", [UNER, CONLL], ids=["uner", "conll2003"])
def test_a_pipe_is_read_once(tmp_path, text):
    fifo = str(tmp_path / "in.fifo")
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "w", encoding="utf-8") as f:
            f.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        f = read_entity_file(fifo)
    finally:
        writer.join(timeout=10)
    assert not writer.is_alive()
    assert f.sentences == read_entity_file(write(tmp_path, text)).sentences
    assert written(f) == text


def test_crlf_line_ends_and_a_byte_order_mark(tmp_path):
    f = read_entity_file(write(tmp_path, "\ufeff" + UNER.replace("\n", "\r\n")))
    assert f.sentences == read_entity_file(write(tmp_path, UNER, "plain.iob2")).sentences
    assert written(f) == UNER  # Written back with \n line ends, without the mark.


@pytest.mark.parametrize(
    "iob1, iob2",
    [
        (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),  # I- starts an entity.
        (["O", "I-LOC", "B-LOC", "I-LOC"], ["O", "B-LOC", "B-LOC", "I-LOC"]),  # B-: a second LOC touching the first.
        (["I-PER", "I-ORG", "I-ORG"], ["B-PER", "B-ORG", "I-ORG"]),  # A type change starts an entity.
        (["I-ORG", "O", "I-ORG"], ["B-ORG", "O", "B-ORG"]),  # O ends one.
        (["I-MISC"], ["B-MISC"]),
        (["O", "O"], ["O", "O"]),
    ],
)
def test_iob1_is_converted_to_iob2_on_reading_and_back_on_writing(tmp_path, iob1, iob2):
    text = "".join(f"w{i} NN I-NP {tag}\n" for i, tag in enumerate(iob1))
    f = read_entity_file(write(tmp_path, text, "x.conll"), scheme="iob1")
    assert f.sentences[0].tags == iob2
    assert iob2_to_iob1(iob2) == iob1
    assert written(f) == text


def test_the_conll2003_iob1_file(tmp_path):
    f = read_entity_file(write(tmp_path, CONLL_IOB1, "x.conll"), scheme="iob1")
    assert f.sentences[0].tags == ["B-LOC", "B-LOC", "O", "B-PER", "I-PER", "B-ORG"]
    assert entity_spans(f.sentences[0].tags) == [("LOC", 0, 1), ("LOC", 1, 2), ("PER", 3, 5), ("ORG", 5, 6)]
    assert written(f) == CONLL_IOB1
    # A prediction in IOB2 comes back as IOB1, lined up with the gold file.
    predicted = [["B-LOC", "I-LOC", "O", "B-PER", "B-PER", "O"]]
    assert [line.split()[-1] for line in written(f, predicted).splitlines()[2:-1]] == [
        "I-LOC", "I-LOC", "O", "I-PER", "B-PER", "O"]


def test_not_strict_reads_a_stray_tag_as_starting_an_entity(tmp_path):
    f = read_entity_file(write(tmp_path, "1\ta\tO\t-\t-\n2\tb\tI-PER\t-\t-\n3\tc\tI-PER\t-\t-\n"), strict=False)
    assert f.sentences[0].tags == ["O", "B-PER", "I-PER"]
    f = read_entity_file(write(tmp_path, "a NN O O\nb NN B-PER B-PER\n", "x.conll"), scheme="iob1", strict=False)
    assert f.sentences[0].tags == ["O", "B-PER"]


def uner_row(token_id, word="w", tag="O"):
    return f"{token_id}\t{word}\t{tag}\t-\t-\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (uner_row(1) + "2\tw\tO\t-\n", ":2: expected 5 tab-separated columns (ID WORD TAG annotation 1 annotation 2), got 4"),
        (uner_row(1) + uner_row(3), ":2: word ID '3' out of order (expected 2; a missing blank line"),
        ("# c\n" + uner_row(1) + uner_row(2) + uner_row(1), ":4: word ID '1' out of order (expected 3"),
        (uner_row("x"), ":1: word ID 'x' out of order (expected 1"),
        (uner_row(1) + uner_row(2, ""), ":2: empty WORD column"),
        (uner_row(1) + uner_row(2, tag="PER"), ":2: tag 'PER' is not O, B-<type> or I-<type>"),
        (uner_row(1, tag="B-"), ":1: tag 'B-' is not O, B-<type> or I-<type>"),
        (uner_row(1, tag=""), ":1: tag '' is not O, B-<type> or I-<type>"),
        (uner_row(1) + uner_row(2, tag="I-LOC"), ":2: I-LOC after O continues no entity: IOB2 starts every entity "
                                                 "with B- (an IOB1 file? read it with scheme='iob1')"),
        (uner_row(1, tag="I-LOC"), ":1: I-LOC at the start of the sentence continues no entity"),
        (uner_row(1, tag="B-PER") + uner_row(2, tag="I-LOC"), ":2: I-LOC after B-PER continues no entity"),
        ("\n# only comments\n\n", "no sentences"),
        ("", "no sentences"),
    ],
    ids=["columns", "id-gap", "id-restart", "id-not-a-number", "empty-word", "bare-type", "no-type", "empty-tag",
         "i-after-o", "i-first", "i-after-other-type", "comments-only", "empty-file"],
)
def test_uner_errors_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as e:
        read_entity_file(path)
    assert str(e.value).startswith(path + (":" if "no sentences" in message else "")) and message in str(e.value), e.value
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, scheme, message",
    [
        ("a NN B-NP O\nb NN O\n", "iob2", ":2: expected 4 space-separated columns (WORD ... TAG, as many as the file's "
                                          "first line), got 3"),
        ("-DOCSTART- -X- -X- O\n\na NN\n", "iob2", ":3: expected 4 space-separated columns"),
        ("a\n", "iob2", ":1: expected 2 space-separated columns"),
        ("a NN B-NP B-PER\nb NN I-NP S-PER\n", "iob2", ":2: tag 'S-PER' is not O, B-<type> or I-<type>"),
        ("a NN B-NP O\nb NN I-NP I-PER\n", "iob2", ":2: I-PER after O continues no entity"),
        ("a NN B-NP O\nb NN B-NP B-PER\n", "iob1", ":2: B-PER after O: IOB1 writes B- only between two adjacent "
                                                   "entities of one type (an IOB2 file? read it with scheme='iob2')"),
        ("a NN B-NP B-PER\n", "iob1", ":1: B-PER at the start of the sentence: IOB1 writes B- only"),
        ("a NN B-NP I-LOC\nb NN B-NP B-PER\n", "iob1", ":2: B-PER after I-LOC: IOB1"),
        ("-DOCSTART- -X- -X- O\n\n", "iob2", "no sentences (an empty file, or comments and -DOCSTART- lines only)"),
    ],
    ids=["columns", "columns-after-docstart", "one-column", "iobes-tag", "i-after-o", "iob1-b-after-o",
         "iob1-b-first", "iob1-b-after-other-type", "docstart-only"],
)
def test_conll2003_errors_name_file_and_line(tmp_path, text, scheme, message):
    path = write(tmp_path, text, "x.conll")
    with pytest.raises(ValueError) as e:
        read_entity_file(path, scheme=scheme)
    assert str(e.value).startswith(path) and message in str(e.value), e.value


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = write(tmp_path, UNER.encode() + b"6\t\xff\tO\t-\t-\n")
    with pytest.raises(ValueError, match=r"x\.iob2:16: invalid UTF-8"):
        read_entity_file(path)
    path = write(tmp_path, gzip.compress(UNER.encode() + b"6\t\xff\tO\t-\t-\n"), "x.iob2.gz")
    with pytest.raises(ValueError, match=r"x\.iob2\.gz:16: invalid UTF-8"):
        read_entity_file(path)


def test_unknown_scheme_and_layout(tmp_path):
    path = write(tmp_path, UNER)
    with pytest.raises(ValueError, match="unknown tag scheme 'bio'"):
        read_entity_file(path, scheme="bio")
    with pytest.raises(ValueError, match="unknown entity file layout 'conll'"):
        read_entity_file(path, layout="conll")


@pytest.mark.parametrize("text, name", [(UNER, "x.iob2"), (CONLL, "x.conll")], ids=["uner", "conll2003"])
def test_writing_the_gold_tags_back_gives_the_input(tmp_path, text, name):
    assert written(read_entity_file(write(tmp_path, text, name))) == text


def test_only_the_tag_column_changes(tmp_path):
    f = read_entity_file(write(tmp_path, UNER))
    lines = written(f, [["O", "O", "B-ORG", "O", "O"], ["B-PER", "I-PER", "O", "B-LOC"]]).splitlines()
    assert lines[:3] == UNER.splitlines()[:3] and lines[8:10] == ["", "# sent_id = d1-0002"]
    assert lines[3] == "1\tTampa\tO\t-\tstephen"  # The annotation columns as they were.
    assert lines[5] == "3\tsells\tB-ORG\t-\t-"
    assert lines[11] == "2\tMary\tI-PER\tmaria\t-"
    f = read_entity_file(write(tmp_path, CONLL, "x.conll"))
    lines = written(f, [["O", "O", "O", "O", "B-MISC"], ["B-PER", "O"], ["O"]]).splitlines()
    assert lines[2] == "EU NNP B-NP O" and lines[6] == ".  .   O    B-MISC" and lines[9] == "Blackburn NNP I-NP O"
    assert lines[0] == lines[11] == "-DOCSTART- -X- -X- O"


@pytest.mark.parametrize(
    "predicted, message",
    [
        ([["O"] * 5], "1 sentences of predicted tags for the 2 of "),
        ([["O"] * 5, ["O"] * 4, ["O"]], "3 sentences of predicted tags for the 2 of "),
        ([["O"] * 5, ["O"] * 3], ":11: sentence 2: 3 predicted tags for its 4 words"),
        ([["O"] * 5, ["O", "O", "PER", "O"]], ":11: sentence 2: predicted tag 'PER' is not O, B-<type> or I-<type>"),
        ([["O"] * 5, ["O", "O", "B-P ER", "O"]], ":11: sentence 2: predicted tag 'B-P ER' is not"),
    ],
    ids=["fewer-sentences", "more-sentences", "shorter", "bad-tag", "tag-with-a-space"],
)
def test_predictions_that_disagree_with_the_file_are_an_error_before_writing(tmp_path, predicted, message):
    f = read_entity_file(write(tmp_path, UNER))
    out = io.StringIO()
    with pytest.raises(ValueError) as e:
        write_entity_file(f, predicted, out)
    assert message in str(e.value) and f.path in str(e.value), e.value
    assert out.getvalue() == ""


def test_entity_spans_of_iob2_tags():
    assert entity_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG", "I-ORG"]) == [
        ("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5), ("ORG", 5, 7)]
    assert entity_spans(["O", "I-PER", "B-PER"]) == [("PER", 1, 2), ("PER", 2, 3)]  # A stray I- starts one.
    assert entity_spans([]) == []


UNER_DEV = "/work/shared/data/uner_english_ewt/en_ewt-ud-dev.iob2"


@pytest.mark.skipif(not os.path.exists(UNER_DEV), reason=f"{UNER_DEV} is not here")
def test_the_uner_english_ewt_dev_file_has_its_readme_counts():
    f = read_entity_file(UNER_DEV)
    assert f.layout == "uner" and len(f.sentences) == 2001
    assert entity_counts(f.sentences) == {"LOC": 399, "ORG": 224, "PER": 343}
    with open(UNER_DEV, encoding="utf-8") as gold:
        assert written(f) == gold.read()
