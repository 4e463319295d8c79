"""The task recipes (configs/tasks/*.py) built by `schema.recipe`: each names its directory's three split files."""

import glob
import importlib.util
import os

import pytest

from elmo_jax.tasks import schema

RECIPES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "tasks", "*.py")))


def test_recipe_sets_the_kinds_and_one_file_per_split():
    config = schema.recipe("ner", "corpus/{split}.iob2", head="softmax")
    assert (config.task.kind, config.head.kind) == ("ner", "softmax")
    assert [config.data[f"{split}_file"] for split in ("train", "dev", "test")] == [
        "corpus/train.iob2", "corpus/dev.iob2", "corpus/test.iob2"]


def test_recipe_keeps_the_default_head_when_the_task_has_no_choice():
    assert schema.recipe("parse", "{split}.conllu").head.kind == schema.get_config().head.kind


@pytest.mark.parametrize("path", RECIPES, ids=os.path.basename)
def test_each_task_recipe_reads_its_splits_from_the_directory_given(path):
    spec = importlib.util.spec_from_file_location("recipe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config("elsewhere")
    files = [config.data[f"{split}_file"] for split in ("train", "dev", "test")]
    assert all(os.path.dirname(file) == "elsewhere" for file in files)
    assert [split in os.path.basename(file) for split, file in zip(("train", "dev", "test"), files)] == [True] * 3
    assert config.task.kind in ("tag", "ner", "parse")
