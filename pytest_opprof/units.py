"""Units at the edges: integer nanoseconds inside, milliseconds in reports and assertions."""

from __future__ import annotations


def ns_to_ms(ns: float) -> float:
    return ns / 1e6


def ms_text(ms: float, digits: int = 3) -> str:
    """A number of milliseconds as the reports print it: `0.418`."""
    return f"{ms:.{digits}f}"


def count_text(value: float) -> str:
    """A count, or a median or mean of counts, as reports print it: `1000000`, `2.5`, `1.33`
    (`:g` printed a million calls as `1e+06`)."""
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")  # 2.999 -> `3`, not `3.`


def count_of(n: int, noun: str) -> str:
    """`1 step`, `3 steps`."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


def first_three(names: list[str]) -> str:
    """`a, b, c and 2 more`: the first three names, and how many more."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
