"""CoNLL-U for task models: a file read once (a FIFO too), its labels, checked trees, predictions written back."""

from __future__ import annotations

import io
import os
import threading

import numpy as np
import pytest

from elmo_jax.data.conllu import COLUMNS, parse_conllu
from elmo_jax.data.conllu_tasks import (Tree, column_labels, document_trees, read_conllu_document, tree_of,
                                        write_conllu)


def row(token_id: str, form: str, upos: str, head: str, deprel: str, deps: str = "_") -> str:
    return "\t".join([token_id, form, form.lower(), upos, f"x{upos}", "_", head, deprel, deps, "SpaceAfter=No"])


def document_text(first_deps: str = "_") -> str:
    return "\n".join([
        "# newdoc id = d1",
        "# sent_id = 1",
        "# text = I don't know.",
        row("1", "I", "PRON", "4", "nsubj", first_deps),
        row("2-3", "don't", "_", "_", "_"),
        row("2", "do", "AUX", "4", "aux"),
        row("3", "n't", "PART", "4", "advmod"),
        row("4", "know", "VERB", "0", "root"),
        row("4.1", "knows", "VERB", "_", "_", "4:conj"),
        row("5", ".", "PUNCT", "4", "punct"),
        "",
        "# sent_id = 2",
        row("1", "Yes", "INTJ", "0", "root"),
        row("2", "!", "PUNCT", "1", "punct"),
        "",
    ]) + "\n"


TEXT = document_text()
WORD_LINES = [[4, 6, 7, 8, 10], [13, 14]]
UPOS = [["PRON", "AUX", "PART", "VERB", "PUNCT"], ["INTJ", "PUNCT"]]
HEADS = [[4, 4, 4, 0, 4], [0, 1]]
RELATIONS = [["nsubj", "aux", "advmod", "root", "punct"], ["root", "punct"]]

EWT_DEV = "/work/shared/data/ud_english_ewt/en_ewt-ud-dev.conllu"
ZH_GSD_DEV = "/work/shared/data/chinese/zh_gsd2017simp-ud-dev.conllu"


def write(tmp_path, text, name="x.conllu"):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8", newline="")
    return str(path)


def written(document, **columns) -> str:
    out = io.StringIO()
    write_conllu(document, out, **columns)
    return out.getvalue()


def raises_at(path: str, line: int | None, fragment: str, call, *args, **kwargs) -> None:
    with pytest.raises(ValueError) as e:
        call(*args, **kwargs)
    message = str(e.value)
    assert message.startswith(f"{path}:{line}: " if line else f"{path}: "), message
    assert fragment in message and "\n" not in message, message


def test_a_document_keeps_its_lines_and_sentences(tmp_path):
    path = write(tmp_path, TEXT)
    document = read_conllu_document(path)
    assert document.path == path and document.lines == TEXT.split("\n")[:-1]
    assert document.sentences == parse_conllu(TEXT.splitlines(), path)
    assert [[t.line for t in s.tokens] for s in document.sentences] == WORD_LINES
    assert all(document.lines[t.line - 1].startswith(f"{t.id}\t{t.form}\t") for s in document.sentences for t in s.tokens)


def test_labels_and_trees_of_the_gold_file(tmp_path):
    document = read_conllu_document(write(tmp_path, TEXT))
    assert column_labels(document, "upos") == column_labels(document, "UPOS") == UPOS
    assert column_labels(document, "xpos") == [[f"x{u}" for u in s] for s in UPOS]
    assert document_trees(document) == [Tree(h, r) for h, r in zip(HEADS, RELATIONS)]
    heads, relations = tree_of(document.sentences[1])
    assert heads == [0, 1] and relations == ["root", "punct"]


def test_round_trip_with_the_gold_values_is_byte_for_byte(tmp_path):
    path = write(tmp_path, TEXT)
    document = read_conllu_document(path)
    gold = {"upos": UPOS, "heads": HEADS, "relations": RELATIONS}
    assert written(document) == written(document, **gold) == TEXT
    out_path = tmp_path / "out.conllu"
    with open(out_path, "w", encoding="utf-8", newline="") as out:
        write_conllu(document, out, **gold)
    assert out_path.read_bytes() == (tmp_path / "x.conllu").read_bytes()


def test_replaced_columns_and_nothing_else_change(tmp_path):
    document = read_conllu_document(write(tmp_path, document_text(first_deps="4:nsubj")))
    upos = [["X"] * 5, ["SYM", "NUM"]]
    heads = [np.array([2, 0, 2, 2, 4]), [2, 0]]  # NumPy integers too, as a decoder returns them.
    relations = [["a", "root", "b", "c", "d"], ["e:sub", "root"]]
    lines = written(document, upos=upos, heads=heads, relations=relations).split("\n")[:-1]
    assert len(lines) == len(document.lines)
    words = {line: (s, w) for s, numbers in enumerate(WORD_LINES) for w, line in enumerate(numbers)}
    for number, (old, new) in enumerate(zip(document.lines, lines), 1):
        if number not in words:  # Comments, 2-3, 4.1 (its DEPS kept) and blank lines.
            assert new == old
            continue
        s, w = words[number]
        expected = old.split("\t")
        expected[COLUMNS.index("upos")] = upos[s][w]
        expected[COLUMNS.index("head")] = str(heads[s][w])
        expected[COLUMNS.index("deprel")] = relations[s][w]
        expected[COLUMNS.index("deps")] = "_"
        assert new.split("\t") == expected
    assert lines[3] == row("1", "I", "X", "2", "a").replace("xX", "xPRON")


def test_xpos_is_replaced_in_its_own_column(tmp_path):
    document = read_conllu_document(write(tmp_path, TEXT))
    xpos = [["T"] * len(s) for s in UPOS]
    lines = written(document, xpos=xpos).split("\n")[:-1]
    assert column_labels(read_conllu_document(write(tmp_path, "\n".join(lines) + "\n", "y.conllu")), "xpos") == xpos
    assert column_labels(read_conllu_document(write(tmp_path, "\n".join(lines) + "\n", "z.conllu")), "upos") == UPOS


@pytest.mark.parametrize("given, deps_kept", [("upos", True), ("heads", False), ("relations", False)])
def test_deps_are_cleared_only_when_the_tree_changes(tmp_path, given, deps_kept):
    document = read_conllu_document(write(tmp_path, document_text(first_deps="4:nsubj")))
    gold = {"upos": UPOS, "heads": HEADS, "relations": RELATIONS}[given]
    expected = document_text(first_deps="4:nsubj" if deps_kept else "_")
    assert written(document, **{given: gold}) == expected


def test_crlf_a_byte_order_mark_and_no_final_line_end_are_written_plainly(tmp_path):
    text = "\ufeff" + TEXT.rstrip("\n").replace("\n", "\r\n")
    document = read_conllu_document(write(tmp_path, text))
    assert written(document, upos=UPOS) == TEXT.rstrip("\n") + "\n"


def test_a_fifo_is_read_once(tmp_path):
    fifo = str(tmp_path / "x.conllu")
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: open(fifo, "w", encoding="utf-8").write(TEXT))
    writer.start()
    document = read_conllu_document(fifo)
    writer.join(timeout=10)
    assert document.lines == TEXT.split("\n")[:-1] and document_trees(document)[1] == Tree([0, 1], ["root", "punct"])
    assert written(document, upos=UPOS) == TEXT


def bad_sentence(heads: list[str], relations: list[str] | None = None) -> str:
    """TEXT (15 lines), then a comment on line 16 and the words of `heads` from line 17 on."""
    relations = relations or ["dep"] * len(heads)
    words = [row(str(i), f"w{i}", "X", head, relation) for i, (head, relation) in enumerate(zip(heads, relations), 1)]
    return TEXT + "\n".join(["# sent_id = bad", *words, ""]) + "\n"


@pytest.mark.parametrize(
    "heads, relations, line, fragment",
    [
        (["0", "4", "1"], None, 18, "HEAD '4' of word 2 is neither 0 (the root) nor a word ID of its sentence of 3 words (1..3)"),
        (["0", "1", "99999999999999999999"], None, 19, "HEAD '99999999999999999999' of word 3 is neither"),
        (["0", "_", "1"], None, 18, "HEAD '_' of word 2 is neither"),
        (["0", "-1", "1"], None, 18, "HEAD '-1' of word 2"),
        (["0", "01", "1"], None, 18, "HEAD '01' of word 2"),
        (["0", "1", "1"], ["root", "_", "dep"], 18, "word 2 has no DEPREL ('_')"),
        (["2", "3", "1"], None, 17, "the sentence whose first word is here has no word with HEAD 0; a tree has one root"),
        (["0", "1", "0"], None, 17, "the sentence whose first word is here has 2 words (1, 3) with HEAD 0"),
        (["0", "3", "2"], None, 18, "word 2 is on a cycle of heads (2 -> 3 -> 2): its words never reach the root"),
        (["0", "4", "2", "3"], None, 18, "word 2 is on a cycle of heads (2 -> 4 -> 3 -> 2)"),
        (["0", "1", "3"], None, 19, "word 3 is on a cycle of heads (3 -> 3)"),
    ],
    ids=["head-past-the-sentence", "head-huge", "head-missing", "head-negative", "head-leading-zero", "deprel-missing",
         "no-root", "two-roots", "cycle", "cycle-of-three", "self-loop"],
)
def test_a_bad_tree_names_its_file_and_line(tmp_path, heads, relations, line, fragment):
    path = write(tmp_path, bad_sentence(heads, relations))
    document = read_conllu_document(path)
    assert len(document_trees(read_conllu_document(write(tmp_path, TEXT, "good.conllu")))) == 2
    raises_at(path, line, fragment, document_trees, document)
    raises_at(path, line, fragment, tree_of, document.sentences[2])


@pytest.mark.parametrize(
    "columns, line, fragment",
    [
        ({"upos": UPOS[:1]}, 13, "upos has no values for sentence 2 (its first word here), the file has 2 sentences"),
        ({"heads": HEADS + [[0]]}, None, "heads has values for 3 sentences, the file has 2"),
        ({"relations": [RELATIONS[0], ["root"]]}, 13, "relations[1] has 1 values for sentence 2 (its first word here) of 2 words"),
        ({"upos": [UPOS[0][:4], UPOS[1]]}, 4, "upos[0] has 4 values for sentence 1 (its first word here) of 5 words"),
        ({"heads": [HEADS[0], [0, 3]]}, 14, "heads[1][1] = 3 for word 2 is neither 0 (the root) nor a word ID of its sentence of 2 words"),
        ({"heads": [HEADS[0], [0, "1"]]}, 14, "heads[1][1] = '1' for word 2 is neither"),
        ({"heads": [HEADS[0], [-1, 1]]}, 13, "heads[1][0] = -1 for word 1"),
        ({"upos": [UPOS[0], ["INTJ", ""]]}, 14, "upos[1][1] = '' for word 2 is not a CoNLL-U value"),
        ({"relations": [RELATIONS[0], ["root", "a\tb"]]}, 14, "relations[1][1] = 'a\\tb' for word 2 is not a CoNLL-U value"),
        ({"upos": [UPOS[0], ["INTJ", None]]}, 14, "upos[1][1] = None for word 2 is not a CoNLL-U value"),
    ],
    ids=["fewer-sentences", "more-sentences", "fewer-words", "fewer-words-first", "head-past", "head-text", "head-negative",
         "empty-value", "tab", "not-text"],
)
def test_values_that_disagree_with_the_document_are_refused_before_writing(tmp_path, columns, line, fragment):
    path = write(tmp_path, TEXT)
    document = read_conllu_document(path)
    out = io.StringIO()
    raises_at(path, line, fragment, write_conllu, document, out, **columns)
    assert out.getvalue() == ""


def test_an_unannotated_column_is_an_error_unless_the_file_is_unlabelled(tmp_path):
    text = TEXT.replace(row("2", "!", "PUNCT", "1", "punct"), row("2", "!", "_", "1", "punct"))
    path = write(tmp_path, text)
    document = read_conllu_document(path)
    raises_at(path, 14, "word 2 has no UPOS ('_'): an unannotated file? (unlabelled=True", column_labels, document, "upos")
    assert column_labels(document, "upos", unlabelled=True)[1] == ["INTJ", "_"]
    assert column_labels(document, "feats", unlabelled=True) == [["_"] * 5, ["_"] * 2]
    with pytest.raises(ValueError, match=r"unknown CoNLL-U column 'pos' \(one of ID, FORM, LEMMA, UPOS"):
        column_labels(document, "pos")


def test_an_empty_file_has_no_sentences(tmp_path):
    path = write(tmp_path, "# only a comment\n")
    raises_at(path, None, "no sentences", read_conllu_document, path)


@pytest.mark.parametrize("path, sentences", [
    pytest.param(path, sentences, id=name, marks=pytest.mark.skipif(not os.path.exists(path), reason=f"no {path}"))
    for name, path, sentences in [("en-ewt", EWT_DEV, 2001), ("zh-gsd", ZH_GSD_DEV, 500)]
])
def test_every_tree_of_the_ud_dev_files_passes(path, sentences):
    """Its trees check, and writing its gold values back changes nothing but the words' DEPS."""
    document = read_conllu_document(path)
    trees = document_trees(document)
    assert len(trees) == len(document.sentences) == sentences
    gold = {"upos": column_labels(document, "upos"), "heads": [t.heads for t in trees],
            "relations": [t.relations for t in trees]}
    with open(path, "rb") as f:
        assert written(document, upos=gold["upos"]).encode("utf-8") == f.read()
    deps = COLUMNS.index("deps")
    rewritten = written(document, **gold).split("\n")[:-1]
    words = {t.line for s in document.sentences for t in s.tokens}
    assert all(new.split("\t")[deps] == "_" and new.split("\t")[:deps] == old.split("\t")[:deps]
               if number in words else new == old
               for number, (old, new) in enumerate(zip(document.lines, rewritten), 1))
