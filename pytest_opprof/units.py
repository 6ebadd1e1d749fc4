"""Units at the edges: integer nanoseconds inside, milliseconds in reports and assertions."""

from __future__ import annotations


def ns_to_ms(ns: float) -> float:
    return ns / 1e6


def ms_text(ms: float, digits: int = 3) -> str:
    """A number of milliseconds as the reports print it: `0.418`."""
    return f"{ms:.{digits}f}"
