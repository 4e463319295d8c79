"""The schema declares each key once: the config, the docs' table and a section's module options come from it."""

from pathlib import Path

from elmo_jax.config import schema

DOCS = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_docs_config_md_holds_the_table_the_schema_prints():
    assert schema.schema_table() in DOCS.read_text(encoding="utf-8"), (
        "docs/config.md is out of date: paste `elmo_jax.config.schema.schema_table()` into it"
    )


def test_every_key_has_a_meaning_and_a_default_its_check_allows():
    for key, declared in schema.keys().items():
        assert declared.meaning.strip(), key
        assert declared.check.problem(declared.default) is None, key


def test_section_options_pass_the_section_whole_with_off_values_as_none():
    config = schema.get_config()
    config.model.lstm.cell_clip = 0.0
    options = schema.section_options(config.model.lstm, "model.lstm")
    assert set(options) == set(config.model.lstm)
    assert options["cell_clip"] is None and options["proj_clip"] == 3.0 and options["dim"] == 4096


def test_option_reads_a_key_with_its_off_value_as_none():
    config = schema.get_config()
    assert schema.option(config, "model.token_dropout") is None  # -1: the same as model.dropout.
    config.model.token_dropout = 0.0
    assert schema.option(config, "model.token_dropout") == 0.0  # 0 is a rate here, not "off".
