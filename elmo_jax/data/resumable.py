"""The contract of every data iterator a run checkpoints: sentence sources and batchers.

A checkpoint stores the iterator's `state_dict()`; a resumed run hands it to a fresh iterator's
`load_state_dict()` and continues with exactly the item that would have come next. The epoch
count in the metrics is `epochs_at(state)` of a saved position rather than of the iterator
itself, because the position that counts is the one of the last batch consumed, which a
prefetching wrapper (`batching.Prefetcher`) keeps while the iterator runs ahead.
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
