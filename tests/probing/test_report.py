"""Static vector files' rows in the probes' Markdown tables and figure, beside the layers (the rest
of the written outputs: tests/probing/test_run.py)."""

from __future__ import annotations

from elmo_jax.probing.report import figure, markdown_table, wic_markdown_table, wsd_markdown_tables


def by_row(own: float, bag: float) -> dict:
    return {"own vector": own, "context bag": bag}


def static_entry(own: float, bag: float, **scores) -> dict:
    return {"rows": by_row(own, bag), "oov": {"oov_rate": 0.125}, "target_oov": {"oov_rate": 0.5}, **scores}


def layer_scores(values: list[float]) -> dict:
    return {"layers": values[:-1], "mix": values[-1]}


MODEL = {"task": "upos", "model": "m", "control": "none", "layers": [0.5, 0.75], "mix": 0.8, "word_baseline": 0.7,
         "majority_baseline": 0.2, "test_tokens": 10, "static": {"sg.txt": static_entry(0.625, 0.6875)}}
CONTROL = {**{k: v for k, v in MODEL.items() if k != "static"}, "control": "random_init", "layers": [0.25, 0.375]}


def test_the_token_table_has_each_files_rows_and_oov_rate_in_the_models_column():
    lines = markdown_table([MODEL, CONTROL]).splitlines()
    assert lines[0] == "| probe | m | m (random_init) |"
    at = lines.index("| mix | 0.8000 | 0.8000 |")
    assert lines[at + 1 : at + 4] == ["| sg.txt: own vector | 0.6250 |  |", "| sg.txt: context bag | 0.6875 |  |",
                                      "| sg.txt: OOV rate | 0.1250 |  |"]
    assert lines[at + 4].startswith("| word baseline |")
    assert not any("sg.txt" in line for line in markdown_table([CONTROL]).splitlines())


def test_word_sense_and_wic_tables_have_each_files_rows_under_the_mix():
    f1, accuracy = by_row(0.25, 0.5), by_row(0.375, 0.625)
    mean = {"centroid": {"macro_f1": layer_scores([0.1, 0.2, 0.3]), "accuracy": layer_scores([0.4, 0.5, 0.6])},
            "linear": {"macro_f1": layer_scores([0.1, 0.1, 0.1]), "accuracy": layer_scores([0.2, 0.2, 0.2])},
            "most_frequent_sense": {"macro_f1": 0.25, "accuracy": 0.5}}
    static_mean = {"centroid": {"macro_f1": f1, "accuracy": accuracy}, "linear": {"macro_f1": f1, "accuracy": f1}}
    wsd = {"model": "m", "layers": [0.1, 0.2], "mix": 0.3, "mean": mean, "words": {}, "test_sentences": 4,
           "static": {"sg.txt": static_entry(0.25, 0.5, mean=static_mean)}}
    lines = wsd_markdown_tables([wsd], wsd).splitlines()
    at = lines.index("| mix | 0.300 | 0.100 | 0.600 | 0.200 |")
    assert lines[at + 1 : at + 4] == ["| sg.txt: own vector | 0.250 | 0.250 | 0.375 | 0.250 |",
                                      "| sg.txt: context bag | 0.500 | 0.500 | 0.625 | 0.500 |",
                                      "| sg.txt: OOV rate (tokens / targets) | 0.125 / 0.500 |  |  |  |"]
    wic = {"model": "m", "layers": [0.5], "mix": 0.5, "cosine": layer_scores([0.5, 0.5]),
           "linear": layer_scores([0.6, 0.6]), "majority_baseline": 0.5, "test_pairs": 2,
           "static": {"glove.txt": static_entry(0.5, 0.75, cosine=by_row(0.5, 0.75), linear=by_row(0.25, 1.0))}}
    lines = wic_markdown_table([wic]).splitlines()
    assert lines[lines.index("| mix | 0.500 | 0.600 |") + 1 :][:2] == [
        "| glove.txt: own vector | 0.500 | 0.250 |", "| glove.txt: context bag | 0.750 | 1.000 |"]


def test_the_figure_draws_each_row_as_a_level_of_its_files_color():
    axes = figure([MODEL, CONTROL]).axes[0]
    lines = {line.get_label(): line for line in axes.get_lines()}
    own, bag = lines["m: sg.txt own vector"], lines["m: sg.txt context bag"]
    assert list(own.get_ydata()) == [0.625, 0.625] and list(bag.get_ydata()) == [0.6875, 0.6875]
    assert own.get_color() == bag.get_color() != lines["m"].get_color() and own.get_linestyle() != bag.get_linestyle()
    assert "m (random_init)" in lines and not any(label.startswith("m (random_init):") for label in lines)
