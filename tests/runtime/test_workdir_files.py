"""The workdir's file names: what is built parses back, and nothing else parses."""

from __future__ import annotations

import pytest

from elmo_jax.runtime import workdir_files
from elmo_jax.runtime.workdir_files import EvaluationFile, ProbeFile


@pytest.mark.parametrize("split,step", [("test", 19920), ("valid", 0), ("files", 7), ("dev_other", 12)])
def test_an_evaluation_file_name_parses_back_to_its_split_and_step(split, step):
    name = workdir_files.evaluation_file(split, step)
    assert name == f"eval_{split}_{step}.json"
    assert workdir_files.parse_evaluation_file(name) == EvaluationFile(split, step)


@pytest.mark.parametrize("split", ["valid", "dev_other"])
def test_a_stateless_evaluation_has_its_own_name(split):
    name = workdir_files.evaluation_file(split, 12, stateful=False)
    assert name == f"eval_{split}_stateless_12.json" != workdir_files.evaluation_file(split, 12)
    assert workdir_files.parse_evaluation_file(name) == EvaluationFile(split, 12, stateful=False)


@pytest.mark.parametrize("name", ["eval_test.json", "eval_test_12.json.tmp", "eval__12.json", "probe_upos_12.json",
                                  "eval_test_x.json", "metrics.jsonl"])
def test_other_names_are_not_evaluation_files(name):
    assert workdir_files.parse_evaluation_file(name) is None


@pytest.mark.parametrize("probe,name", [
    (ProbeFile("upos"), "probe_upos.json"),
    (ProbeFile("deprel", control="random_init"), "probe_deprel_random_init.json"),
    (ProbeFile("xpos", step=2655), "probe_xpos_2655.json"),
])
def test_a_probe_file_name_parses_back_to_its_task_and_step_or_control(probe, name):
    assert workdir_files.probe_file(probe.task, probe.step, probe.control) == name
    assert workdir_files.parse_probe_file(name) == probe


@pytest.mark.parametrize("name", ["probe_upos.png", "probe_.json", "probe_upos_12.json.tmp", "eval_test_12.json"])
def test_other_names_are_not_probe_files(name):
    assert workdir_files.parse_probe_file(name) is None


def test_a_probe_during_training_has_no_control():
    with pytest.raises(ValueError, match="no control"):
        workdir_files.probe_file("upos", step=3, control="random_init")
