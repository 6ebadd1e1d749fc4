"""The comparison rule a run or a marker sets: the verdict kinds, the defaults and `Rule`. Apart
from `verdicts` (which imports what it uses of them) so that reading the options at pytest's start
imports no analysis."""

from __future__ import annotations

from dataclasses import dataclass

STRUCTURE, WORK, TIME, ENVIRONMENT = "structure", "work", "time", "environment"


KINDS = (STRUCTURE, WORK, TIME, ENVIRONMENT)


DEFAULT_TOLERANCE = 0.20  # how much slower than its baseline an op may get


DEFAULT_MIN_DELTA_MS = 0.05  # time changes smaller than this (ms per step) are never verdicts


DEFAULT_FAIL_ON = frozenset({STRUCTURE, WORK, TIME})


@dataclass(frozen=True, slots=True)
class Rule:
    """How a measurement is compared; set per run and per test."""

    tolerance: float = DEFAULT_TOLERANCE
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS
    ignore_ops: tuple[str, ...] = ()
    fail_on: frozenset[str] = DEFAULT_FAIL_ON
