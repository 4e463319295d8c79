"""benchmarks/tasks_table.py: the grid's cells tabled, and ELMo against no pretraining and the best
static input (relative error reduction, ranges apart or not), on cells written here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("tasks_table", ROOT / "benchmarks" / "tasks_table.py")
tasks_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tasks_table)


def write_cells(root: Path, cells: dict[str, float]) -> None:
    """One results.json per cell name, its test score as given (dev 0.5)."""
    for name, score in cells.items():
        (root / name).mkdir()
        results = {"task": "tag", "test": {"score": score}, "dev": {"score": 0.5}}
        (root / name / "results.json").write_text(json.dumps(results), encoding="utf-8")


def test_error_reduction_is_the_share_of_the_baselines_errors_removed():
    assert tasks_table.error_reduction(0.9, 0.8) == pytest.approx(0.5)  # 20% errors -> 10%.
    assert tasks_table.error_reduction(0.8, 0.9) == pytest.approx(-1.0)  # 10% -> 20%: doubled.


def test_elmo_is_compared_with_words_and_the_best_static_input(tmp_path):
    write_cells(tmp_path, {
        "upos_ewt_words_f0.1_s0": 0.80, "upos_ewt_words_f0.1_s1": 0.84,
        "upos_ewt_glove_f0.1_s0": 0.70, "upos_ewt_glove_f0.1_s1": 0.72,
        "upos_ewt_skipgram_f0.1_s0": 0.74, "upos_ewt_skipgram_f0.1_s1": 0.78,  # The better static input.
        "upos_ewt_elmo_f0.1_s0": 0.82, "upos_ewt_elmo_f0.1_s1": 0.86,  # Overlaps words, above skip-gram.
        "upos_ewt_elmo_top_f0.1_s0": 0.99,  # An ablation: not ELMo's row.
        "ner_ewt_glove_f0.1_s0": 0.5,  # No ELMo nor words: no row.
        "not_a_cell": 0.1,
    })
    groups = tasks_table.read_cells(str(tmp_path))
    assert ("upos_ewt", "elmo_top", 0.1) in groups and len(groups) == 6
    cells = tasks_table.cells_table(groups)
    assert "| upos_ewt (accuracy) | words | 0.1 | 2 | 0.8200 | 0.8000-0.8400 | 0.5000 |" in cells
    header, rule, *rows = tasks_table.comparison_table(groups)
    assert header.startswith("| task | training share | no pretraining | best static | ELMo |")
    # ELMo 0.84 against words 0.82: (0.84 - 0.82) / 0.18 = 11.1%; against skip-gram 0.76: 0.08 / 0.24.
    assert rows == ["| upos_ewt | 0.1 | 0.8200 (2) | skipgram 0.7600 (2) | 0.8400 (2) | +11.1% | "
                    "+33.3%, above its range |"]
