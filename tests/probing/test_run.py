"""`probe`: the result of a small biLM on small CoNLL-U files, its control, static vectors' rows, and
the written outputs."""

from __future__ import annotations

import json
import logging

import jax
import numpy as np
import pytest

from elmo_jax.data.conllu import read_conllu
from elmo_jax.pretrained import bilm_from_files
from elmo_jax.probing.classifier import ProbeConfig
from elmo_jax.probing.report import markdown_table, read_results, write_outputs
from elmo_jax.probing.run import held_out_tenth, labelled_splits, probe, random_init, static_scores
from elmo_jax.static.lookup import StaticVectors
from tests.probing.helpers import WORDS, random_sentences, tiny_bilm, write_conllu, write_static_vectors

FAST = ProbeConfig(learning_rate=1e-2, max_epochs=5, patience=2)


@pytest.fixture
def splits(conllu_splits):
    return [read_conllu(path) for path in conllu_splits]


def test_result_of_a_small_model(bilm_files, splits, caplog):
    train, dev, test = splits
    with caplog.at_level(logging.WARNING):
        result = probe(bilm_from_files(*bilm_files), train, dev, test, "upos", "ptb", progress=False, config=FAST)
    assert len(result["layers"]) == 3 and result["n_layers"] == 2 and result["dim"] == 12
    for value in [*result["layers"], result["mix"], result["word_baseline"], result["majority_baseline"]]:
        assert 0 <= value <= 1
    assert result["word_baseline"] < 1  # The unseen label's token is an error.
    n_test = sum(len(s.tokens) for s in test)
    assert (result["train_tokens"], result["test_tokens"]) == (sum(len(s.tokens) for s in train), n_test)
    assert result["unseen_test_labels"]["tokens"] == 1 and result["unseen_test_labels"]["labels"] == ["INTJ"]
    first = result["unseen_test_labels"]["first"]
    lines = open(test[0].path).read().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.split("\t")[1:2] == ["wow"])
    assert first == f"{test[0].path}:{line}"
    assert [r.getMessage() for r in caplog.records if first in r.getMessage()], caplog.text
    assert result["task"] == "upos" and result["normalize"] == "ptb" and result["control"] == "none"
    assert result["dev"] == "dev" and abs(sum(result["mix_weights"]) - 1) < 1e-5
    assert "mlp" not in result
    json.dumps(result)  # Plain JSON values only.


def test_mlp_and_held_out_dev(bilm_files, splits):
    train, _, test = splits
    result = probe(bilm_from_files(*bilm_files), train, None, test, "xpos", mlp=True, progress=False, config=FAST)
    assert result["dev"] == "train_tenth" and len(result["mlp"]) == 3
    assert result["train_tokens"] + result["dev_tokens"] == sum(len(s.tokens) for s in train)
    rest, held = held_out_tenth(train, 0, "train")
    assert len(held) == 6 and len(rest) == 54 and set(map(id, rest)).isdisjoint(map(id, held))
    assert held_out_tenth(train, 0, "train") == (rest, held) and held_out_tenth(train, 1, "train") != (rest, held)


def test_random_init_control_has_the_shapes_and_other_values(bilm_files, splits):
    pretrained = bilm_from_files(*bilm_files)
    control = random_init(pretrained, seed=0)
    assert jax.tree.structure(control.params) == jax.tree.structure(pretrained.params)
    for a, b in zip(jax.tree.leaves(control.params), jax.tree.leaves(pretrained.params)):
        assert a.shape == b.shape
    different = [not np.allclose(a, b) for a, b in zip(jax.tree.leaves(control.params), jax.tree.leaves(pretrained.params))]
    assert sum(different) > len(different) // 2
    train, dev, test = splits
    a = probe(pretrained, train, dev, test, "upos", control="random_init", progress=False, config=FAST)
    b = probe(control, train, dev, test, "upos", progress=False, config=FAST)
    assert a["control"] == "random_init" and a["layers"] == b["layers"] and a["mix"] == b["mix"]


def test_a_biLM_whose_token_layer_is_wider_than_its_LSTM_layers(splits):
    """configs/tests/tiny.py without token projection: layer 0 of 20 (the char CNN), layers 1-2 of
    2 x 8, probed together (padded to 20), the mix and the control alike."""
    train, dev, test = splits
    learns = ProbeConfig(learning_rate=5e-2, max_epochs=30, patience=5)
    result = probe(tiny_bilm(projection=False), train, dev, test, "upos", progress=False, config=learns)
    assert result["layer_dims"] == [20, 16, 16] and result["dim"] == 20 and len(result["layers"]) == 3
    assert result["layers"][0] > result["majority_baseline"] + 0.2  # UPOS is a function of the word here.
    assert 0.0 <= result["mix"] <= 1.0 and len(result["mix_weights"]) == 3
    control = probe(tiny_bilm(projection=False), train, dev, test, "upos", control="random_init", progress=False,
                    config=FAST)
    assert control["layer_dims"] == [20, 16, 16] and control["layers"] != result["layers"]


def test_dev_labels_none_of_which_training_has_are_refused_naming_the_dev_file(bilm_files, splits, tmp_path):
    """Lower-cased tags: the probes could never be right on dev, and stayed untrained with exit 0."""
    train, _, test = splits
    dev = write_conllu(tmp_path / "lower.conllu", [[(w, t.lower()) for w, t in s] for s in random_sentences(5, 1)])
    with pytest.raises(ValueError) as error:
        probe(bilm_from_files(*bilm_files), train, read_conllu(dev), test, "upos", progress=False, config=FAST)
    assert str(error.value).startswith(f"{dev}: no dev token has a label of the training tokens (dev: adj, ")
    assert "; training: ADJ, ADP, DET, NOUN, NUM, ... (7 labels))" in str(error.value)


def test_dev_labels_training_lacks_are_warned_naming_the_first(bilm_files, splits, tmp_path, caplog):
    train, _, test = splits
    sentences = random_sentences(5, 1)
    sentences[2] = [*sentences[2], ("wow", "INTJ")]
    dev = write_conllu(tmp_path / "dev_intj.conllu", sentences)
    line = next(n for n, text in enumerate(open(dev).read().splitlines(), 1) if text.split("\t")[1:2] == ["wow"])
    with caplog.at_level(logging.WARNING):
        result = probe(bilm_from_files(*bilm_files), train, read_conllu(dev), test, "upos", progress=False, config=FAST)
    assert result["unseen_dev_labels"] == {"tokens": 1, "labels": ["INTJ"], "first": f"{dev}:{line}"}
    assert f"{dev}:{line}: 1 dev token(s) with 1 label(s) never seen in training (INTJ), counted as errors" in [
        r.getMessage() for r in caplog.records
    ]


def test_one_training_sentence_without_dev_is_refused_naming_the_file(splits):
    train, _, test = splits
    with pytest.raises(ValueError, match=f"^{train[0].path}: 1 training sentence\\(s\\); without dev sentences"):
        labelled_splits(train[:1], None, test, "upos", "none", seed=0)


def test_static_vectors_rows_are_probed_as_the_layers(splits, tmp_path):
    """UPOS is a function of the word here: the own vector finds it, the OOV "cat" and "dog" too
    (<UNK>'s vector: one tag, the other's an error); the digits are found as written, not as N."""
    train, dev, test = splits
    vectors = StaticVectors.read(write_static_vectors(tmp_path / "v.txt", [*sorted(set(WORDS) - {"cat", "dog"}), "<UNK>"]))
    split = labelled_splits(train, dev, test, "upos", "ptb", seed=0)
    ids = {label: i for i, label in enumerate(sorted(set(split.train.labels)))}
    entry = static_scores(vectors, split, ids, "ptb", FAST, progress=False)
    assert set(entry["rows"]) == {"own vector", "context bag"} and entry["rows"]["own vector"] > 0.8
    words = [w for tokens in (split.train, split.dev, split.test) for sentence in tokens.forms for w in sentence]
    assert entry["oov"]["tokens"] == len(words)
    assert entry["oov"]["oov_tokens"] == sum(w in ("cat", "dog", "wow") for w in words)
    assert entry["oov"]["found_by"]["as written"] == sum(w in ("3.5", "1,000") for w in words) > 0


def test_feature_memory_bound(bilm_files, splits):
    train, dev, test = splits
    with pytest.raises(ValueError, match="over the bound"):
        probe(bilm_from_files(*bilm_files), train, dev, test, "upos", progress=False, max_feature_bytes=1000)


def result(control: str, layers: list[float]) -> dict:
    return {"task": "upos", "control": control, "model": "m", "layers": layers, "mix": 0.5, "word_baseline": 0.4,
            "majority_baseline": 0.2, "test_tokens": 10}


def test_outputs_json_figure_and_table(tmp_path):
    results = write_outputs(str(tmp_path), result("none", [0.1, 0.2, 0.3]))
    assert [r["control"] for r in results] == ["none"]
    results = write_outputs(str(tmp_path), result("random_init", [0.1, 0.15, 0.12]))
    assert [r["control"] for r in results] == ["none", "random_init"]  # The model's line beside its control's.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe_upos.json", "probe_upos.png", "probe_upos_random_init.json"]
    assert (tmp_path / "probe_upos.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert read_results(str(tmp_path), "upos") == results
    table = markdown_table(results)
    assert table.splitlines()[0] == "| probe | m | m (random_init) |"
    assert "| layer 2 | 0.3000 | 0.1200 |" in table and "| word baseline | 0.4000 | 0.4000 |" in table
    (tmp_path / "probe_upos_random_init.json").write_text("[1]")
    with pytest.raises(ValueError, match="probe_upos_random_init.json: not a probe result"):
        read_results(str(tmp_path), "upos")
