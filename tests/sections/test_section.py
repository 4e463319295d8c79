"""A section declares its keys once: its defaults, its walk and a module's options come from them."""

from elmo_jax.sections import Key, Section
from elmo_jax.sections.checks import BOOLEAN, FILTERS, integer, number

INNER = Section("Inner.", {"depth": Key(2, integer(1), "How deep.")})
OUTER = Section("Outer.", {
    "clip": Key(3.0, number(0.0), "Clip (0 = none).", off=0.0),
    "filters": Key([[1, 4], [2, 8]], FILTERS, "Filters."),
    "inner": INNER,
    "on": Key(True, BOOLEAN, "On.", how_computed=True),
})


def test_walk_names_each_section_before_its_keys_in_declared_order():
    assert [name for name, _ in OUTER.walk("top.")] == ["top.clip", "top.filters", "top.inner", "top.inner.depth",
                                                        "top.on"]


def test_defaults_nest_the_sections():
    defaults = OUTER.defaults()
    assert defaults.to_dict() == {"clip": 3.0, "filters": [[1, 4], [2, 8]], "inner": {"depth": 2}, "on": True}
    assert OUTER.default("clip") == 3.0 and INNER.default("depth") == 2


def test_options_are_its_own_keys_with_off_as_none_and_lists_as_tuples():
    values = {"clip": 0.0, "filters": [[1, 4]], "inner": {"depth": 5}, "on": False}
    assert OUTER.options(values) == {"clip": None, "filters": ((1, 4),), "on": False}
    assert OUTER.options({**values, "clip": 1.5})["clip"] == 1.5


def test_a_key_says_whether_it_changes_only_how_the_model_is_computed():
    assert OUTER.keys["on"].how_computed and not OUTER.keys["clip"].how_computed
    assert OUTER.keys["clip"].value(0.0) is None and OUTER.keys["filters"].value([]) == []
