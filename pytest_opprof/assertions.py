"""The operator assertions, pure: each validates its arguments at once (a bad one raises
OpprofUsageError) and returns a check, a function of a Profile giving None or the failure message.

The fixture (plugin.py) decides when checks run; these decide what passes.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Sequence

Assertion = Callable[["Profile"], "str | None"]  # a failure message, or None
from statistics import median

from .analysis import NO_TENSOR_INPUTS, SYNC_OPS, SYNC_RUNTIME_CALL, Profile
from .errors import (
    OpprofUsageError,
    bad_argument,
    closest_names,
    count_mismatch,
    host_syncs,
    no_match,
    over_limit,
    unexpected_ops,
    unknown_op,
)

STATS: dict[str, Callable[[Sequence[float]], float]] = {"median": median, "min": min, "max": max}
PERS = ("step", "call")
_DTOH = "Memcpy DtoH*"
_GLOB = re.compile(r"[*?\[]")


def is_glob(pattern: str) -> bool:
    return bool(_GLOB.search(pattern))


def validate_ms(name: str, value: object) -> float:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise OpprofUsageError(bad_argument(name, value, "a number of milliseconds >= 0"))
    return float(value)


def validate_op(op: object) -> str:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if not isinstance(op, str) or not op.strip():
        raise OpprofUsageError(bad_argument("op", op, 'an op name or glob such as "aten::addmm" or "aten::*mm"'))
    return op


def _choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if value not in choices:
        raise OpprofUsageError(bad_argument(name, value, " or ".join(repr(c) for c in choices)))
    return str(value)


def _count(name: str, value: object) -> int:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OpprofUsageError(bad_argument(name, value, "a whole number >= 0"))
    return value


def op_below(op: str, ms: float, per: str = "step", stat: str = "median") -> Assertion:
    """Every op matching `op` takes at most `ms` per step (or per call), by `stat` over steps."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    limit = validate_ms("ms", ms)
    _choice("per", per, PERS)
    reduce = STATS[_choice("stat", stat, tuple(STATS))]
    return lambda profile: _op_below(profile, op, limit, per, stat, reduce)


Reduce = Callable[[Sequence[float]], float]  # median, min or max over the steps


def _op_below(profile: Profile, op: str, limit: float, per: str, stat: str, reduce: Reduce) -> str | None:
    matched = profile.match(op)
    if not matched:
        return no_match(op, (o.name for o in profile.ops))
    failures = []
    for stats in matched:
        samples: tuple[float, ...] = stats.time_per_step.samples
        if per == "call":
            calls = stats.calls_per_step.samples
            samples = tuple(t / c for t, c in zip(samples, calls) if c)
        if not samples:
            continue
        value = reduce(samples)
        if value > limit * 1e6:
            failures.append((value, over_limit(stats.name, value, limit, per, stat, samples)))
    if not failures:
        return None
    failures.sort(reverse=True)
    return "; ".join(msg for _, msg in failures)


def op_count(op: str, n: int | None = None, *, min: int | None = None, max: int | None = None) -> Assertion:
    """Calls per step of the ops matching `op` (summed over matches): exactly n, or within [min, max]."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    if n is None and min is None and max is None:
        raise OpprofUsageError(bad_argument("n", None, "a call count, or min= and/or max="))
    if n is not None and (min is not None or max is not None):
        raise OpprofUsageError(bad_argument("n", n, "either n or min=/max=, not both"))
    for name, value in (("n", n), ("min", min), ("max", max)):
        if value is not None:
            _count(name, value)
    if min is not None and max is not None and min > max:
        raise OpprofUsageError(bad_argument("min", min, f"at most max={max} (no count lies between them)"))
    return lambda profile: _op_count(profile, op, n, min, max)


def _op_count(profile: Profile, op: str, n: int | None, min: int | None, max: int | None) -> str | None:
    matched = profile.match(op)
    if not matched:
        if n == 0 or (n is None and not min):
            return None  # zero calls expected and seen
        return no_match(op, (o.name for o in profile.ops))
    per_step = tuple(sum(s) for s in zip(*(m.calls_per_step.samples for m in matched)))
    if n is not None:
        ok, expected = all(c == n for c in per_step), str(n)
    else:
        low, high = min if min is not None else 0, max if max is not None else float("inf")
        ok = all(low <= c <= high for c in per_step)
        expected = (
            f"between {low} and {high}"
            if min is not None and max is not None
            else f"at least {low}"
            if min is not None
            else f"at most {high}"
        )
    if ok:
        return None
    contexts = [
        context(profile, m.name) if len(matched) == 1 else f"{m.name} {context(profile, m.name)}" for m in matched[:3]
    ]
    if len(matched) > 3:
        contexts.append(f"and {len(matched) - 3} more ops")
    return count_mismatch(op, per_step, expected, contexts)


def no_op(op: str, is_known: Callable[[str], bool] | None = None) -> Assertion:
    """No op (or memory op) matching `op` ran. An exact name torch does not know is an error:
    a typo would otherwise pass forever."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    return lambda profile: _no_op(profile, op, is_known)


def context(profile: Profile, name: str) -> str:
    """Where an op ran and on what: `in aten::to <- aten::div_; inputs long int[]` — its most
    frequent input signature and the callers of that signature's first call (innermost first),
    or, without recorded inputs, the callers of its first call."""
    stats = profile.op(name)
    if stats is None or stats.work is None or not stats.work.signatures:
        return _where(profile.callers(name))
    first, *others = stats.work.signatures
    text = first.text if first.text == NO_TENSOR_INPUTS else f"inputs {first.text}"
    return f"{_where(first.callers)}; {text}" + (f" (+{len(others)} other signatures)" if others else "")


def _where(callers: tuple[str, ...]) -> str:
    return "in " + " <- ".join(callers) if callers else "called from Python"


def _no_op(profile: Profile, op: str, is_known: Callable[[str], bool] | None) -> str | None:
    found = [(o.name, o.calls_per_step.median, context(profile, o.name)) for o in profile.match(op) if o.calls]
    found += [(m.name, m.calls_per_step.median, "") for m in profile.match_memory_ops(op) if m.calls]
    if found:
        return unexpected_ops(op, found)
    if not is_glob(op) and is_known is not None and not is_known(op):
        return unknown_op(op, closest_names(op, (o.name for o in profile.ops)))
    return None


def no_sync() -> Assertion:
    """No host-device synchronisation: sync runtime calls, aten::item/_local_scalar_dense, DtoH copies."""
    return _no_sync


def _no_sync(profile: Profile) -> str | None:
    found = [(o.name, o.calls_per_step.median) for o in profile.ops if o.name in SYNC_OPS and o.calls]
    found += [(r.name, r.calls_per_step.median) for r in profile.runtime if SYNC_RUNTIME_CALL.search(r.name)]
    found += [(m.name, m.calls_per_step.median) for m in profile.memory_ops if fnmatch.fnmatchcase(m.name, _DTOH)]
    return host_syncs(found) if found else None


def total_below(ms: float, stat: str = "median") -> Assertion:
    """The step's wall time is at most `ms`, by `stat` over steps."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    limit = validate_ms("ms", ms)
    reduce = STATS[_choice("stat", stat, tuple(STATS))]
    return lambda profile: _total_below(profile, limit, stat, reduce)


def _total_below(profile: Profile, limit: float, stat: str, reduce: Reduce) -> str | None:
    samples = tuple(s.wall_ns for s in profile.step_spans)
    value = reduce(samples)
    if value > limit * 1e6:
        return over_limit("total", value, limit, "step", stat, samples)
    return None
