"""The size keys of a contextualizer kept within what one row's arrays can hold.

JAX indexes with int32, its default integer: an array that one row of the batch needs, or a
position in it, past `MAX_ROW_ELEMENTS` elements cannot be built whatever the batch size or the
machine. Such values otherwise fail late, after minutes and gigabytes; the contextualizers whose
arrays grow with their keys (the Transformer, the gated CNN) check them where the config enters.
"""

from __future__ import annotations

from typing import Callable, Mapping

from elmo_jax.sections import ConfigError

MAX_ROW_ELEMENTS = 2**31 - 1


def _largest_fitting(fits: Callable[[int], bool], low: int) -> int:
    """The largest n in [low, MAX_ROW_ELEMENTS] with fits(n), for fits true up to some n and false
    after it, and true at low."""
    high = MAX_ROW_ELEMENTS
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def check_row_sizes(
    section: str, values: Mapping[str, int], sizes: tuple[tuple[str, int], ...], elements: Callable[..., int],
    arrays: str,
) -> None:
    """ConfigError unless `elements(**sizes)`, the element count of one row's largest array, stays
    within MAX_ROW_ELEMENTS at the size keys' `values` (of the config section `section`). `sizes`:
    each key with its minimum, in the order checked; `arrays` says what the arrays are. Each key is
    checked with the keys before it at their values and those after it at their minimums, so the
    error names the key that is too large, and its range given the others."""
    checked = dict(sizes)
    for name, minimum in sizes:
        value = values[name]

        def fits(n: int, name: str = name) -> bool:
            return elements(**{**checked, name: n}) <= MAX_ROW_ELEMENTS

        if fits(minimum) and not fits(value):
            raise ConfigError(
                f"config key {section}.{name}={value!r} is out of range (allowed: an integer in "
                f"[{minimum}, {_largest_fitting(fits, minimum)}]: {arrays} must stay within 2^31 - 1 elements, "
                "JAX's int32 indexing)"
            )
        checked[name] = value
