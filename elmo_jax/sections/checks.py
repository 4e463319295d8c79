"""The allowed values of one config key: a `Check` (type, range or choices, and the words that
describe them) and the constructors every key is declared with (section.py).

A check's `problem` says why a value is not allowed, with the values that are, so that an error
reads `config key train.keep_checkpoints=0 is out of range (allowed: an integer >= 1)`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

class ConfigError(ValueError):
    """A config value outside its key's allowed range, choices or type."""


@dataclasses.dataclass(frozen=True)
class Check:
    """The allowed values of one key: a type test, a range test on values of that type, their
    description, how a value of the type that fails the test reads (`{allowed}`: the description)
    and, for a choice of names, the names (which the modules implementing them read)."""

    is_type: Callable[[Any], bool]
    in_range: Callable[[Any], bool]
    allowed: str
    outside: str = "is out of range (allowed: {allowed})"
    choices: tuple[str, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why `value` is not allowed, with the values that are, or None when it is."""
        if not self.is_type(value):
            return f"has the wrong type (allowed: {self.allowed})"
        if not self.in_range(value):
            return self.outside.format(allowed=self.allowed)
        return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def integer(minimum: int) -> Check:
    """An int >= minimum."""
    return Check(_is_int, lambda v: v >= minimum, f"an integer >= {minimum}")


def zero_or_integer(minimum: int, zero_means: str) -> Check:
    """0 (a sentinel) or an int >= minimum."""
    return Check(_is_int, lambda v: v == 0 or v >= minimum, f"0 ({zero_means}) or an integer >= {minimum}")


def number(low: float, high: float = math.inf, low_open: bool = False, high_open: bool = False) -> Check:
    """A finite int or float between low and high, each end included unless open."""

    def in_range(v: float) -> bool:
        above = v > low if low_open else v >= low
        below = v < high if high_open else v <= high
        return above and below

    if high == math.inf:
        allowed = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        allowed = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return Check(_is_number, in_range, allowed)


def dropout_rate(sentinel: float | None = None, sentinel_means: str = "") -> Check:
    """A rate in [0, 1), or the sentinel value."""
    rate = number(0.0, 1.0, high_open=True)
    if sentinel is None:
        return rate
    return Check(
        _is_number, lambda v: v == sentinel or rate.in_range(v), f"{sentinel:g} ({sentinel_means}) or {rate.allowed}"
    )


def one_of(*choices: str) -> Check:
    """One of the named strings."""
    allowed = "one of " + ", ".join(map(repr, choices))
    return Check(_is_str, lambda v: v in choices, allowed, "is not {allowed}", choices)


BOOLEAN = Check(lambda v: isinstance(v, bool), lambda v: True, "True or False")
STRING = Check(_is_str, lambda v: True, "a string")


def _is_filter_list(value: Any) -> bool:
    pairs = isinstance(value, (list, tuple)) and all(isinstance(f, (list, tuple)) and len(f) == 2 for f in value)
    return pairs and all(_is_int(n) for f in value for n in f)


FILTERS = Check(
    _is_filter_list,
    lambda v: len(v) > 0 and all(width >= 1 and channels >= 1 for width, channels in v),
    "a non-empty list of [width, channels] pairs of integers >= 1",
)
