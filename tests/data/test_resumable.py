"""Every data iterator a run checkpoints is a `ResumableIterator` (exact resumption of each is
tested beside it: test_sources.py, test_tfds_source.py, test_batching.py, test_contiguous.py)."""

import importlib
import inspect
import pkgutil

import pytest

import elmo_jax.data
from elmo_jax.data.batching import BiLMBatcher, Prefetcher
from elmo_jax.data.contiguous import ContiguousBatcher
from elmo_jax.data.resumable import ResumableIterator
from elmo_jax.data.sources import InMemorySource, TextFileSource
from elmo_jax.data.tfds_source import TfdsSource
from elmo_jax.data.vocab import Vocabulary

SENTENCES = [["the", "cat", "sat"], ["a", "dog"]]


def _classes_with_a_position() -> list[type]:
    """The classes of elmo_jax.data that define `state_dict` (each module imported once)."""
    found = set()
    for info in pkgutil.iter_modules(elmo_jax.data.__path__, "elmo_jax.data."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and hasattr(cls, "state_dict") and cls is not ResumableIterator:
                found.add(cls)
    return sorted(found, key=lambda c: c.__qualname__)


def test_every_class_with_a_position_is_resumable_but_the_prefetcher():
    """The prefetcher reports the position of the batcher it wraps; the run restores the batcher."""
    classes = _classes_with_a_position()
    assert {BiLMBatcher, ContiguousBatcher, InMemorySource, TextFileSource, TfdsSource, Prefetcher} <= set(classes)
    assert [c.__qualname__ for c in classes if not issubclass(c, ResumableIterator)] == ["Prefetcher"]


def test_instances_are_resumable(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("the cat sat\na dog\n")
    vocab = Vocabulary.build(SENTENCES)
    source = InMemorySource(SENTENCES)
    iterators = [
        source,
        TextFileSource(str(path)),
        BiLMBatcher(source, vocab, 2, 3),
        ContiguousBatcher(SENTENCES, vocab, 2, 3),
    ]
    for iterator in iterators:
        assert isinstance(iterator, ResumableIterator), type(iterator).__name__


@pytest.mark.parametrize("member", ["state_dict", "load_state_dict", "epochs_at", "__next__"])
def test_an_iterator_missing_a_member_is_not_resumable(member):
    names = {"__iter__", "__next__", "state_dict", "load_state_dict", "epochs_at"} - {member}
    partial = type("Partial", (), {name: lambda self, *args: None for name in names})
    assert not isinstance(partial(), ResumableIterator)
