"""The contract of every data iterator a run checkpoints: sentence sources and batchers.

A checkpoint stores the iterator's `state_dict()`; a resumed run hands it to a fresh iterator's
`load_state_dict()`. `epochs_at` takes a saved position: a prefetching wrapper runs ahead of it.
"""

from __future__ import annotations

from typing import Iterator, Protocol, TypeVar, runtime_checkable

T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class ResumableIterator(Protocol[T_co]):
    """An iterator whose position is a JSON-serialisable dict that restores it exactly."""

    def __iter__(self) -> Iterator[T_co]: ...

    def __next__(self) -> T_co: ...

    def state_dict(self) -> dict:
        """The position of the next item."""
        ...

    def load_state_dict(self, state: dict) -> None:
        """Moves to a position returned by `state_dict()` (of an iterator built the same way)."""
        ...

    def epochs_at(self, state: dict) -> float:
        """Fractional passes over the data at a position returned by `state_dict()`."""
        ...
