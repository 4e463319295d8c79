"""elmo-report: the table of final metrics, the figure, and clear errors."""

import json
import os
import re

import pytest
from PIL import Image

from elmo_jax.cli.report import main as report_main
from elmo_jax.evaluation import report


def make_run(root, name, records, batch_size=4, unroll_steps=5, eval_split="valid", text=None):
    """A workdir with config.json and metrics.jsonl (the given records, or the raw `text`)."""
    workdir = root / name
    workdir.mkdir(parents=True)
    config = {"train": {"batch_size": batch_size, "unroll_steps": unroll_steps}, "data": {"eval_split": eval_split}}
    (workdir / "config.json").write_text(json.dumps(config))
    if text is None:
        text = "".join(json.dumps(r) + "\n" for r in records)
    (workdir / "metrics.jsonl").write_text(text)
    return str(workdir)


def train(step, loss, speed):
    return {"step": step, "train_loss": loss, "tokens_per_sec": speed, "softmax": "sampled"}


def evaluation(step, fwd, bwd, ppl, tokens=None):
    record = {"step": step, "eval_step": step, "eval_forward_perplexity": fwd, "eval_backward_perplexity": bwd, "eval_perplexity": ppl}
    return record if tokens is None else {**record, "eval_tokens": tokens}


def table_rows(stdout):
    """The table's rows as {column: cell}, a single run's table (a row per column) read back so too."""
    lines = stdout.strip().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if line.startswith("|")]
    if header[0] == "metric":  # Notes may follow the table.
        return [{"run": header[1], **dict(rows)}]
    return [dict(zip(header, row)) for row in rows]


def test_a_single_runs_table_is_a_row_per_metric(tmp_path, capsys):
    """25 columns on one line were unreadable: one run prints `| metric | <run> |` rows."""
    run_dir = make_run(tmp_path, "solo", [train(10, 5.0, 1.0)])
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[:3] == ["| metric | solo |", "| --- | ---: |", "| steps | 10 |"]
    assert all(line.count("|") == 3 for line in lines if line.startswith("|"))


def assert_png(path, size=(1200, 800)):
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == size


def test_table_and_figure_of_two_runs(tmp_path, capsys):
    a = make_run(tmp_path, "a", [
        train(10, 5.0, 100.0), evaluation(10, 200.0, 210.0, 205.0),
        train(20, 4.5, 1000.0), train(30, 4.25, 1100.0), evaluation(30, 150.5, 152.25, 151.375),
    ])
    b = make_run(tmp_path, "b", [train(10, 6.0, 50.0), train(20, 5.5, 70.0)], batch_size=8, unroll_steps=10, eval_split="test")
    output = str(tmp_path / "report.png")
    assert report_main([a, b, "--output", output]) == 0
    captured = capsys.readouterr()
    assert table_rows(captured.out) == [
        {"run": "a", "steps": "30", "tokens": "600", "train loss": "4.2500", "eval split": "valid", "eval tokens": "n/a",
         "forward ppl": "150.50", "backward ppl": "152.25", "biLM ppl": "151.38", "tokens/s": "1,000"},
        {"run": "b", "steps": "20", "tokens": "1,600", "train loss": "5.5000", "eval split": "test", "eval tokens": "n/a",
         "forward ppl": "n/a", "backward ppl": "n/a", "biLM ppl": "n/a", "tokens/s": "60"},
    ]
    assert captured.err == f"wrote {output}\n"
    assert_png(output)


def test_subset_evaluations_are_drawn_apart_and_the_table_reports_the_whole_split(tmp_path, capsys):
    """Evaluations of the first eval.max_tokens tokens during training are a dashed line of their own,
    labelled with their count; the table's perplexities are those of the final whole-split evaluation."""
    run_dir = make_run(tmp_path, "s", [
        train(10, 5.0, 1.0), evaluation(10, 400.0, 410.0, 405.0, tokens=1000),
        train(20, 4.0, 1.0), evaluation(20, 300.0, 310.0, 305.0, tokens=1000),
        evaluation(20, 320.0, 330.0, 325.0, tokens=73760),
    ])
    run = report.load_run(run_dir)
    assert list(run.evals_by_tokens()) == [73760, 1000]
    fig = report.figure([run])
    lines = {line.get_label(): line for line in fig.axes[2].get_lines()}
    assert set(lines) == {"s", "s (first 1,000 tokens)"}
    assert lines["s"].get_linestyle() == "-" and list(lines["s"].get_ydata()) == [325.0]
    assert lines["s (first 1,000 tokens)"].get_linestyle() == "--"
    assert list(lines["s (first 1,000 tokens)"].get_ydata()) == [405.0, 305.0]
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 0
    (row,) = table_rows(capsys.readouterr().out)
    assert (row["eval tokens"], row["biLM ppl"]) == ("73,760", "325.00")


def test_a_run_of_one_train_record_is_drawn_as_a_point(tmp_path):
    """A line through one point draws nothing: the run had a legend entry and no visible curve."""
    one, two = (make_run(tmp_path, name, records) for name, records in
                (("one", [train(10, 5.0, 1.0)]), ("two", [train(10, 5.0, 1.0), train(20, 4.0, 1.0)])))
    fig = report.figure([report.load_run(one), report.load_run(two)])
    for axis in fig.axes[:2]:  # Train loss against steps and tokens.
        lines = {line.get_label(): line for line in axis.get_lines()}
        assert lines["one"].get_marker() == "o" and list(lines["one"].get_ydata()) == [5.0]
        assert lines["two"].get_marker() in (None, "None", "")


@pytest.mark.parametrize("values", [[152.9, 9748.0], [152.9, 480.0], [1.2, 99999.0], [77.0]])
def test_log_axis_ticks_enclose_and_label_every_value(values):
    ticks = report._log_tick_positions(values)
    assert ticks[0] <= min(values) and ticks[-1] >= max(values)
    assert ticks == sorted(ticks) and 2 <= len(ticks) <= 16
    fig = report.figure([report.Run("r", 1, "test", [], [evaluation(i + 1, v, v, v) for i, v in enumerate(values)])])
    axis = fig.axes[2]
    fig.canvas.draw()  # Tick labels are formatted when drawn.
    labelled = [(t.get_position()[1], t.get_text()) for t in axis.get_yticklabels() if t.get_text()]
    assert labelled and labelled[0][0] <= min(values) and labelled[-1][0] >= max(values)
    assert axis.get_ylim() == (ticks[0], ticks[-1])


def test_without_matplotlib_the_report_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    run_dir = make_run(tmp_path, "a", [train(10, 5.0, 100.0)])
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: ") and "pip install 'elmo-jax[report]'" in captured.err
    assert not (tmp_path / "r.png").exists()


@pytest.mark.parametrize("name", ["report.txt", "report.PNG.bak"])
def test_an_output_matplotlib_cannot_write_is_one_line_before_any_output(tmp_path, capsys, name):
    """Was: the table printed, then a 23-line ValueError traceback ("Format 'txt' is not supported")."""
    run_dir = make_run(tmp_path, "a", [train(10, 5.0, 100.0)])
    output = str(tmp_path / name)
    assert report_main([run_dir, "--output", output]) == 1
    captured = capsys.readouterr()
    extension = os.path.splitext(name)[1]
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: --output {output}: the figure cannot be written as '{extension.lower()}';")
    assert ".png, " in captured.err and ".svg" in captured.err
    assert os.listdir(tmp_path) == ["a"]


@pytest.mark.parametrize("name, magic", [("r.svg", b"<?xml"), ("r.PDF", b"%PDF"), ("r", b"\x89PNG")])
def test_the_figure_is_written_in_the_format_its_extension_names(tmp_path, name, magic):
    run_dir = make_run(tmp_path, "a", [train(10, 5.0, 100.0)])
    assert report_main([run_dir, "--output", str(tmp_path / name)]) == 0
    assert (tmp_path / name).read_bytes().startswith(magic)
    assert sorted(os.listdir(tmp_path)) == sorted(["a", name])  # No temporary left.


def test_a_resumed_run_keeps_the_records_of_its_latest_attempt(tmp_path):
    records = [train(s, 10.0 - s, 1.0) for s in range(1, 9)]  # Killed after step 8, resumed from 5.
    records += [train(s, 100.0 + s, 1.0) for s in range(6, 11)] + [evaluation(10, 3.0, 4.0, 3.5)]
    run = report.load_run(make_run(tmp_path, "r", records))
    assert [(r["step"], r["train_loss"]) for r in run.train] == [
        (1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0), (5, 5.0), (6, 106.0), (7, 107.0), (8, 108.0), (9, 109.0), (10, 110.0)
    ]
    assert report.summary(run)["train_loss"] == 110.0


def test_non_finite_values_as_metrics_jsonl_writes_them(tmp_path):
    run = report.load_run(make_run(tmp_path, "n", [train(1, "nan", 5.0)]))
    assert table_rows(report.markdown_table([run]))[0]["train loss"] == "n/a"


def test_runs_with_the_same_name_are_named_by_path(tmp_path, capsys):
    dirs = [make_run(tmp_path / "x", "run", [train(1, 1.0, 1.0)]), make_run(tmp_path / "y", "run", [train(1, 1.0, 1.0)])]
    assert report_main([*dirs, "--output", str(tmp_path / "r.png")]) == 0
    assert [r["run"] for r in table_rows(capsys.readouterr().out)] == dirs


def test_an_interrupted_last_line_is_skipped_with_a_warning(tmp_path, capsys):
    run_dir = make_run(tmp_path, "k", None, text=json.dumps(train(1, 2.0, 3.0)) + '\n{"step": 2, "train_lo')
    assert [r["step"] for r in report.load_run(run_dir).train] == [1]
    assert "metrics.jsonl:2: incomplete last line ignored" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"step": 1, "train_loss": 2.0}\n{"step": 2, "train_lo\n{"step": 3}\n', r"metrics.jsonl:2: malformed JSON"),
        ('{"step": 1, "train_loss": 2.0}\n[1, 2]\n', r"metrics.jsonl:2: expected a JSON object with an integer 'step'"),
        ('{"train_loss": 2.0}\n', r"metrics.jsonl:1: expected a JSON object with an integer 'step'"),
        ('{"step": 1, "train_loss": "low"}\n', r"metrics.jsonl:1: train_loss is not a number: 'low'"),
    ],
)
def test_a_bad_metrics_line_is_an_error_naming_file_and_line(tmp_path, capsys, text, message):
    run_dir = make_run(tmp_path, "bad", None, text=text)
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run_dir}{os.sep}metrics.jsonl:") and len(err.splitlines()) == 1
    assert re.search(message, err)
    assert not (tmp_path / "r.png").exists()


def test_missing_files_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report_main([str(empty), "--output", str(tmp_path / "r.png")]) == 1
    assert capsys.readouterr().err == f"error: {empty}: no metrics.jsonl (not a training workdir?)\n"
    run_dir = make_run(tmp_path, "noconfig", [train(1, 1.0, 1.0)])
    os.remove(os.path.join(run_dir, "config.json"))
    assert report_main([run_dir]) == 1
    assert capsys.readouterr().err == f"error: {run_dir}: no config.json (needed for tokens per step)\n"


def test_each_call_starts_from_the_defaults(tmp_path, monkeypatch, capsys):
    """--output of one call does not carry over to the next, which writes the default report.png."""
    run_dir = make_run(tmp_path, "a", [train(10, 5.0, 100.0)])
    monkeypatch.chdir(tmp_path)
    assert report_main([run_dir, "--output", "first.png"]) == 0
    assert report_main([run_dir]) == 0
    assert capsys.readouterr().err == "wrote first.png\nwrote report.png\n"
    assert_png(tmp_path / "first.png")
    assert_png(tmp_path / "report.png")


@pytest.mark.parametrize(
    "argv, message",
    [([], "the following arguments are required: RUN_DIR"), (["--output", "r.png"], "required: RUN_DIR"),
     (["a", "--output"], "Missing value for flag --output")],
)
def test_usage_errors_are_one_line(argv, message, capsys):
    assert report_main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_report_of_a_real_training_run(tiny_training_run, tmp_path, capsys):
    workdir, _, result = tiny_training_run
    output = str(tmp_path / "real.png")
    assert report_main([workdir, "--output", output]) == 0
    (row,) = table_rows(capsys.readouterr().out)
    last_train = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl")) if "train_loss" in line][-1]
    assert row["steps"] == "10" and row["tokens"] == "200"  # 10 steps x 4 streams x 5 tokens.
    assert row["train loss"] == f"{last_train['train_loss']:.4f}"
    assert row["eval split"] == "files" and row["eval tokens"] == f"{result['tokens']:,}"
    assert row["forward ppl"] == f"{result['forward_perplexity']:.2f}"
    assert row["backward ppl"] == f"{result['backward_perplexity']:.2f}"
    assert row["biLM ppl"] == f"{result['perplexity']:.2f}"
    assert [r["step"] for r in report.load_run(workdir).evals] == [5, 10]
    assert_png(output)


def probe_result(layers, mix, word_baseline=0.8, **extra):
    return {"task": "upos", "layers": layers, "mix": mix, "word_baseline": word_baseline, **extra}


def write_probe(run_dir, name, result):
    with open(os.path.join(run_dir, name), "w") as f:
        json.dump(result, f)


PROBE_HEADER = ["upos by layer", "upos best layer", "upos mix", "upos word baseline", "upos random init best"]


def test_probe_accuracy_by_layer_beside_perplexity_in_the_table_and_a_panel(tmp_path, capsys):
    """A run probed by elmo-probe (with its control), one probed in training (its latest step shown),
    and one without probes: a row each, and a panel of accuracy by layer."""
    probed = make_run(tmp_path, "probed", [train(10, 5.0, 1.0), evaluation(10, 200.0, 210.0, 205.0)])
    write_probe(probed, "probe_upos.json", probe_result([0.8, 0.875, 0.85], 0.9))
    write_probe(probed, "probe_upos_random_init.json", probe_result([0.625, 0.7, 0.75], 0.7, control="random_init"))
    trained = make_run(tmp_path, "trained", [train(10, 6.0, 1.0)])
    write_probe(trained, "probe_upos_5.json", probe_result([0.5, 0.5], 0.5, step=5))
    write_probe(trained, "probe_upos_10.json", probe_result([0.75, 0.8125], 0.8, word_baseline=0.7, step=10))
    plain = make_run(tmp_path, "plain", [train(10, 7.0, 1.0)])
    output = str(tmp_path / "report.png")
    assert report_main([probed, trained, plain, "--output", output]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert [[row[column] for column in PROBE_HEADER] for row in rows] == [
        ["0.800 / 0.875 / 0.850", "1: 0.875", "0.900", "0.800", "2: 0.750"],
        ["0.750 / 0.812", "1: 0.812", "0.800", "0.700", "n/a"],
        ["n/a"] * 5,
    ]
    assert rows[0]["biLM ppl"] == "205.00" and rows[2]["train loss"] == "7.0000"
    assert_png(output, size=(1800, 800))

    fig = report.figure([report.load_run(d) for d in (probed, trained, plain)])
    panel = fig.axes[4]
    assert panel.get_title() == "upos probes by layer"
    lines = {line.get_label(): line for line in panel.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"probed", "probed (random init)", "trained", "word-type baseline"}
    assert list(lines["trained"].get_ydata()) == [0.75, 0.8125]
    assert list(lines["probed (random init)"].get_ydata()) == [0.625, 0.7, 0.75]
    assert lines["probed (random init)"].get_linestyle() == "--"
    assert [t.get_text() for t in panel.get_xticklabels()] == ["0", "1", "2", "mix"]


def test_elmo_probes_result_is_shown_rather_than_trainings(tmp_path):
    run_dir = make_run(tmp_path, "r", [train(10, 5.0, 1.0)])
    write_probe(run_dir, "probe_upos_10.json", probe_result([0.5, 0.5], 0.5, step=10))
    write_probe(run_dir, "probe_upos.json", probe_result([0.6, 0.7], 0.7))
    write_probe(run_dir, "probe_xpos_3.json", {**probe_result([0.1, 0.2], 0.3), "task": "xpos"})
    probes = report.load_run(run_dir).probes
    assert sorted(probes) == ["upos", "xpos"]
    assert probes["upos"].result["layers"] == [0.6, 0.7] and probes["upos"].control is None
    assert probes["xpos"].result["mix"] == 0.3
    columns = list(table_rows(report.markdown_table([report.load_run(run_dir)]))[0])
    assert columns[-5:] == ["xpos by layer", "xpos best layer", "xpos mix", "xpos word baseline", "xpos random init best"]


def test_a_control_without_a_model_result_is_shown_alone(tmp_path, capsys):
    run_dir = make_run(tmp_path, "c", [train(10, 5.0, 1.0)])
    write_probe(run_dir, "probe_upos_random_init.json", probe_result([0.5, 0.625], 0.6, control="random_init"))
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 0
    (row,) = table_rows(capsys.readouterr().out)
    assert [row[column] for column in PROBE_HEADER] == ["n/a", "n/a", "n/a", "n/a", "1: 0.625"]


@pytest.mark.parametrize(
    "text,message",
    [("{", "malformed JSON"), ('{"layers": [], "mix": 0.5}', "not a probe result"),
     ('{"layers": [0.5, "x"], "mix": 0.5}', "not a probe result"), ('{"layers": [0.5]}', "not a probe result")],
)
def test_a_bad_probe_file_is_an_error_naming_it(tmp_path, capsys, text, message):
    run_dir = make_run(tmp_path, "bad", [train(1, 1.0, 1.0)])
    (tmp_path / "bad" / "probe_upos_7.json").write_text(text)
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run_dir}{os.sep}probe_upos_7.json: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "r.png").exists()


def write_test_evaluation(run_dir, step, fwd, bwd, ppl):
    result = {"step": step, "forward_perplexity": fwd, "backward_perplexity": bwd, "perplexity": ppl, "tokens": 9}
    with open(os.path.join(run_dir, f"eval_test_{step}.json"), "w") as f:
        json.dump(result, f)


TEST_HEADER = ["test forward ppl", "test backward ppl", "test biLM ppl"]


def test_a_runs_latest_test_evaluation_is_shown_beside_its_validation(tmp_path, capsys):
    """evaluate.py --split=test's files: the latest step's perplexities, n/a for a run without one."""
    tested = make_run(tmp_path, "tested", [train(10, 5.0, 1.0), evaluation(10, 200.0, 210.0, 205.0)])
    write_test_evaluation(tested, 5, 400.0, 410.0, 405.0)
    write_test_evaluation(tested, 10, 190.25, 195.5, 192.875)
    untested = make_run(tmp_path, "untested", [train(10, 6.0, 1.0)])
    assert report_main([tested, untested, "--output", str(tmp_path / "r.png")]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert [[row[column] for column in TEST_HEADER] for row in rows] == [["190.25", "195.50", "192.88"], ["n/a"] * 3]
    assert rows[0]["biLM ppl"] == "205.00"
    assert "test biLM ppl" not in report.markdown_table([report.load_run(untested)])


def test_a_bad_test_evaluation_file_is_an_error_naming_it(tmp_path, capsys):
    run_dir = make_run(tmp_path, "bad", [train(1, 1.0, 1.0)])
    (tmp_path / "bad" / "eval_test_3.json").write_text('{"forward_perplexity": 1.0}')
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run_dir}{os.sep}eval_test_3.json: not an evaluation result") and err.count("\n") == 1, err


def test_word_sense_scores_are_labelled_as_their_metric_not_accuracy(tmp_path, capsys):
    run_dir = make_run(tmp_path, "senses", [train(10, 5.0, 1.0)])
    write_probe(run_dir, "probe_upos.json", probe_result([0.8, 0.9], 0.9))
    metric = "macro-F1 of the nearest sense centroid (mean over words)"
    wsd = {**probe_result([0.25, 0.5, 0.625], 0.6, word_baseline=0.35), "task": "wsd", "metric": metric}
    write_probe(run_dir, "probe_wsd.json", wsd)
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 0
    out = capsys.readouterr().out
    assert table_rows(out)[0]["wsd by layer"] == "0.250 / 0.500 / 0.625"
    assert out.rstrip().endswith(f"Probe scores are test accuracy, except wsd: {metric}.")
    fig = report.figure([report.load_run(run_dir)])
    assert [ax.get_ylabel() for ax in fig.axes[4:]] == ["test accuracy", metric]
    assert "Probe scores" not in report.markdown_table([report.load_run(make_run(tmp_path, "plain", [train(1, 5.0, 1.0)]))])


def test_static_vector_files_rows_are_a_column_of_their_task_and_levels_of_its_panel(tmp_path, capsys):
    rows = {"own vector": 0.625, "context bag": 0.6875}
    with_static = make_run(tmp_path, "with", [train(10, 5.0, 1.0)])
    write_probe(with_static, "probe_upos.json", probe_result([0.8, 0.9], 0.9, static={"sg.txt": {"rows": rows}}))
    write_probe(with_static, "probe_wsd.json", {**probe_result([0.3, 0.5], 0.5), "task": "wsd"})
    without = make_run(tmp_path, "without", [train(10, 5.0, 1.0)])
    write_probe(without, "probe_upos.json", probe_result([0.7, 0.8], 0.8))
    assert report_main([with_static, without, "--output", str(tmp_path / "r.png")]) == 0
    table = table_rows(capsys.readouterr().out)
    assert [row["upos static"] for row in table] == ["sg.txt: own vector 0.625 / context bag 0.688", "n/a"]
    assert "wsd static" not in table[0]  # No result of the task has static rows.
    panel = report.figure([report.load_run(with_static), report.load_run(without)]).axes[4]
    levels = {line.get_label(): list(line.get_ydata()) for line in panel.get_lines()}
    assert levels["with: sg.txt own vector"] == [0.625] * 2 and levels["with: sg.txt context bag"] == [0.6875] * 2
    assert not any(label.startswith("without:") for label in levels)


def test_static_rows_that_are_not_numbers_are_an_error_naming_the_file(tmp_path, capsys):
    run_dir = make_run(tmp_path, "bad", [train(1, 1.0, 1.0)])
    write_probe(run_dir, "probe_upos.json", probe_result([0.5], 0.5, static={"sg.txt": {"rows": {"own vector": "x"}}}))
    assert report_main([run_dir, "--output", str(tmp_path / "r.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run_dir}{os.sep}probe_upos.json: not a probe result ('static'") and err.count("\n") == 1


def test_each_static_vector_file_has_its_own_color_and_the_wsd_panel_names_its_floor(tmp_path):
    """Four vector files' rows shared their run's color; the WSD panel's level said 'word-type baseline'."""
    files = {f"{name}.txt": {"rows": {"own vector": 0.5 + i / 100, "context bag": 0.6 + i / 100}}
             for i, name in enumerate(("sg", "cbow", "glove", "sg300"))}
    run_dir = make_run(tmp_path, "run", [train(10, 5.0, 1.0)])
    write_probe(run_dir, "probe_upos.json", probe_result([0.8, 0.9], 0.9, static=files))
    write_probe(run_dir, "probe_wsd.json", {**probe_result([0.3, 0.5], 0.5), "task": "wsd", "word_baseline": 0.33})
    fig = report.figure([report.load_run(run_dir)])
    upos, wsd = fig.axes[4], fig.axes[5]
    colors = {line.get_label(): line.get_color() for line in upos.get_lines() if ".txt" in line.get_label()}
    by_file = {name: {colors[f"run: {name} own vector"], colors[f"run: {name} context bag"]} for name in files}
    assert all(len(c) == 1 for c in by_file.values()) and len(set.union(*by_file.values())) == 4
    assert "most frequent sense" in [line.get_label() for line in wsd.get_lines()]
