"""Units at the edges: integer nanoseconds inside, milliseconds in reports and assertions."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from decimal import Decimal
from typing import Any


def ns_to_ms(ns: float) -> float:
    return ns / 1e6


def ms_text(ms: float, digits: int = 3) -> str:
    """A number of milliseconds as the reports print it: `0.418`."""
    return f"{ms:.{digits}f}"


STORED_DIGITS = 4  # significant digits of a baseline's times (baseline.round_sig rounds to them)


def stored_decimals(ms: float) -> int:
    """The decimals a time held to 4 significant digits has, at most 3 (the reports' µs):
    145.0 has 1, 29950 has none; a figure shown as `29950.000` claims precision it lacks."""
    if ms == 0 or not math.isfinite(ms):
        return 3
    return min(3, max(0, STORED_DIGITS - 1 - math.floor(math.log10(abs(ms)))))


def stored_ms_text(ms: float) -> str:
    """A time a baseline holds, to the digits it has: `145.0`, `0.350`, `29950`."""
    return f"{ms:.{stored_decimals(ms)}f}"


def share_text(share: float) -> str:
    """A share as a whole percentage, never rounded to an end it is not at: `<1%` for 0.4%,
    `>99%` for 99.6% (a 100% would read as "all of it")."""
    shown = f"{share:.0%}"
    if shown == "0%" and share > 0:
        return "<1%"
    if shown == "100%" and share < 1:
        return ">99%"
    return shown


def count_text(value: float) -> str:
    """A count, or a median or mean of counts, as reports print it: `1000000`, `2.5`, `1.33`
    (`:g` printed a million calls as `1e+06`)."""
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")  # 2.999 -> `3`, not `3.`


def calls_text(samples: Sequence[float]) -> str:
    """Calls per step as a finding says them: `2/step` (the median) where made in every step, else
    `2/step in 4 of 10 steps` (the median of those steps): a diagnosis trial's assert_no_op read
    `found aten::_to_copy (0/step)`, a later trial's `0.5/step` for one call in 5 of 10 steps."""
    ran = [c for c in samples if c]
    if not ran or len(ran) == len(samples):
        return f"{count_text(statistics.median(samples) if samples else 0)}/step"
    return f"{count_text(statistics.median(ran))}/step in {len(ran)} of {len(samples)} steps"


PERIODIC_STEPS = 4  # slow steps at one gap: 3 of 10 steps fall so by chance in 10% of placements, 4 in 2.4%


def fixed_period(indexes: Sequence[int]) -> int | None:
    """The one gap (2 or more) between consecutive `indexes` (steps), or None where they have none."""
    gaps = {b - a for a, b in zip(indexes, indexes[1:])}
    return gaps.pop() if len(gaps) == 1 and min(gaps) >= 2 else None


def ordinal(n: int) -> str:
    """`2nd`, `3rd`, `4th`, `11th`, `21st`."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def count_of(n: int, noun: str) -> str:
    """`1 step`, `3 steps`."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


_DIGITS = re.compile(r"(\d+)")


def id_order(nodeid: str) -> tuple[list[str | int], str]:
    """A sort key that reads the runs of digits in a test id as whole numbers: `test_m[64]` before
    `test_m[128]`, as a parametrized test's cases are listed; ids alike so (`[v1]`, `[v01]`) in
    their own order, whatever the order they came in (a review's listed them by hash seed).
    Signs and decimal points are text: `[-2]` after `[-1]`, `[0.25]` after `[0.5]`."""
    parts: list[str | int] = []
    for index, part in enumerate(_DIGITS.split(nodeid)):
        parts.append(int(part) if index % 2 else part)
    return parts, nodeid


def first_three(names: list[str], every: bool = False) -> str:
    """`a, b, c and 2 more`: the first three names, and how many more; `every` (-v): all of them."""
    if every:
        return ", ".join(names)
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def positional(cell: Any) -> Any:
    """A float in positional notation (`0.000086`, not `8.6e-05`), to the digits repr gives it; any
    other cell as it is (the CSV report's and junit properties' numbers)."""
    if isinstance(cell, float) and math.isfinite(cell) and "e" in repr(cell):
        return format(Decimal(repr(cell)), "f")
    return cell
