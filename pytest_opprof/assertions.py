"""The operator assertions, pure: each validates its arguments at once (a bad one raises
OpprofUsageError) and returns a check, a function of a Profile giving None or the failure message.

The fixture (fixture.py, run by the plugin) decides when checks run; these decide what passes.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from statistics import median
from typing import Protocol, TypeVar

from .analysis import NO_TENSOR_INPUTS, SYNC_OPS, SYNC_RUNTIME_CALL, Profile
from .analysis.compiled import REGION
from .analysis.model import (
    Compilation,
    Compiled,
    Dist,
    OpStats,
    OtherThread,
    RegionCall,
    Signature,
    validate_name,
    validate_op,
)
from .analysis.ranges import in_backward_each, op_calls, ranges_around_each
from .dtypes import dtype_words, profiler_dtype
from .errors import (
    NAMES_THE_LINE,
    OpprofUsageError,
    bad_argument,
    closest_names,
    looks_mistyped,
    recompile_limit_hit_text,
    recompiled_in_steps,
    shown_name,
)
from .events import TENSOR_LIST, EventTable
from .opmessages import (
    ASKED,
    REDISPATCH_CAUSES,
    UNREAD_LIST,
    UNREAD_NOT_RUN,
    UNREAD_PACKED,
    a_range_in_other_letters,
    a_range_not_an_op,
    asked,
    collective_over_limit,
    count_mismatch,
    dtype_unread,
    hidden_by_median,
    host_syncs,
    memory_op_dtype,
    near_miss,
    no_match,
    no_range,
    no_step_wall,
    over_limit,
    share_hidden_by_median,
    share_over_limit,
    unexpected_ops,
    unknown_dtype,
    unknown_op,
    unknown_op_name,
    unread_other_calls,
    unseen_on_other_threads,
)
from .opnames import gloo_ranges_of, is_glob, is_kernel_glob
from .tables import by_shown_time, steps_or_span
from .units import calls_text, count_of, count_text, first_three, share_text

Reduce = Callable[[Sequence[float]], float]  # median, min or max over the steps
STATS: dict[str, Reduce] = {"median": median, "min": min, "max": max}
PERS = ("step", "call")
_DTOH = "Memcpy DtoH*"

Assertion = Callable[[Profile], "str | None"]  # a failure message, or None


def validate_ms(name: str, value: object) -> float:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    number = _as_float(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise OpprofUsageError(bad_argument(name, value, "a finite number of milliseconds >= 0"))
    return abs(number)  # -0.0 is 0 (its limit printed as `-0.00 ms`)


def _as_float(value: object) -> float | None:
    """A plain int or float as a float (an int past float's range: inf, where float() raised
    OverflowError, a trial's ms=10**400); None for anything else, a bool among them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


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


def op_below(
    op: str,
    ms: float,
    per: str = "step",
    stat: str = "median",
    *,
    is_known: Callable[[str], bool] | None = None,
    known_names: Callable[[], Iterable[str]] = tuple,
) -> Assertion:
    """Every op matching `op` takes at most `ms` per step (or per call), by `stat` over steps.
    `is_known`, where given: an exact name torch does not know that matched nothing is said so,
    as a plain run says it (op_count's)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    limit, reduce = _time_limit(ms, per, stat)
    unmatched = partial(_unmatched_op, op=op, is_known=is_known, known_names=known_names)
    return lambda profile: _op_below(profile, op, limit, per, stat, reduce, unmatched)


def _time_limit(ms: object, per: object, stat: object) -> tuple[float, Reduce]:
    """The limit in ms and the statistic over steps, each checked (OpprofUsageError names it)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    limit = validate_ms("ms", ms)
    _choice("per", per, PERS)
    return limit, STATS[_choice("stat", stat, tuple(STATS))]


def _op_below(
    profile: Profile, op: str, limit: float, per: str, stat: str, reduce: Reduce, unmatched: Callable[[Profile], str]
) -> str | None:
    matched = profile.match(op)
    if not matched:
        return unmatched(profile)
    # per call: of the calls the time is of (a call nested in one of its name is in the outer's time)
    own = _over_limits(matched, limit, per, per, stat, reduce, calls=_outer_calls)
    collectives = _collectives_over(profile, matched, limit, per, stat, reduce)
    return "; ".join(found for found in (own, collectives) if found) or None


def _collectives_over(
    profile: Profile, matched: Sequence[OpStats], limit: float, per: str, stat: str, reduce: Reduce
) -> str | None:
    """A c10d collective's op time is its launch alone where gloo runs it on its own threads: its
    limit holds for the collective's gloo range too (a trial's assert_op_below("c10d::allreduce_",
    ms=1) passed an all-reduce that waited 409 ms a step for a slower rank). A range other ops'
    collectives ran in too (gloo runs a reduce-scatter as an all-reduce) holds each one's part
    untold: within the limit together, each part is; over it, the failure says they are not told
    apart (a review's small all_gather was charged a large all_gather_into_tensor's 100 ms)."""
    ranges = {r.name: r for r in profile.ranges}
    names = [op.name for op in matched]
    failures = []
    for name in dict.fromkeys(r for op in names for r in gloo_ranges_of(op) if r in ranges):
        failed = _over_limits([ranges[name]], limit, per, per, stat, reduce, calls=_outer_calls)
        if failed:
            ops = [op for op in names if name in gloo_ranges_of(op)]
            others = [op.name for op in profile.ops if op.name not in ops and name in gloo_ranges_of(op.name)]
            failures.append(collective_over_limit(ops, others, name, failed))
    return "; ".join(failures) or None


def _unmatched_op(
    profile: Profile, op: str, is_known: Callable[[str], bool] | None, known_names: Callable[[], Iterable[str]]
) -> str:
    """Why an op limit matched no op: a range's name given for an op's, a name torch does not know
    (as a plain run and op_count say it: a trial's typo read two ways), or the closest ops."""
    if not is_glob(op) and profile.match_ranges(op):
        return a_range_not_an_op(op, "assert_range_below")
    if is_known is not None and not is_known(op):
        return unknown_op_name(op, _closest_ops(profile, op, known_names))
    return _no_match_of(profile, op)


def op_share_below(
    op: str,
    pct: float,
    stat: str = "median",
    *,
    is_known: Callable[[str], bool] | None = None,
    known_names: Callable[[], Iterable[str]] = tuple,
) -> Assertion:
    """Every op matching `op` takes at most `pct`% of the step's wall time, by `stat` over the
    steps' shares (each op apart, as op_below judges a glob: summed, an op and the op inside it
    would count twice). `is_known`: as op_below's."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    limit = _pct("pct", pct)
    reduce = STATS[_choice("stat", stat, tuple(STATS))]
    unmatched = partial(_unmatched_op, op=op, is_known=is_known, known_names=known_names)
    return lambda profile: _op_share_below(profile, op, limit, stat, reduce, unmatched)


def _op_share_below(
    profile: Profile, op: str, limit: float, stat: str, reduce: Reduce, unmatched: Callable[[Profile], str]
) -> str | None:
    matched = profile.match(op)
    if not matched:
        return unmatched(profile)
    walls = [span.wall_ns for span in profile.step_spans]
    if not profile.wall_known or not all(walls):
        return no_step_wall(op)
    failures = []
    for m in matched:
        shares = [100 * t / wall for t, wall in zip(m.time_per_step.samples, walls)]
        ran = sum(1 for c in m.calls_per_step.samples if c > 0)
        if shares and (value := reduce(shares)) > limit:
            failures.append((value, share_over_limit(m.name, value, limit, stat, shares)))
        elif shares and stat == "median" and ran * 2 < len(shares) and max(shares) > limit:
            # its median share is 0 whatever a step that ran it spends (as _hidden, for ms limits)
            failures.append((max(shares), share_hidden_by_median(m.name, max(shares), limit, ran, len(shares))))
    return "; ".join(msg for _, msg in sorted(failures, reverse=True)) or None


def _elsewhere(profile: Profile) -> list[str]:
    """The other Python threads that ran during the capture, by name: an op missing may have run
    in one, unrecorded."""
    return [_thread_named(t) for t in profile.other_threads]


def _thread_named(thread: OtherThread) -> str:
    """`worker`, `worker (3 threads)`."""
    return shown_name(thread.name) + (f" ({thread.count} threads)" if thread.count > 1 else "")


def range_below(name: str, ms: float, per: str = "step", stat: str = "median") -> Assertion:
    """Every range (record_function block, annotation) matching `name` takes at most `ms` per step
    (or per call), by `stat` over steps: the device time launched inside it when it launched
    device work, else its wall time on its thread."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_name(name, "range", "name", ' such as "attention" or "## forward*"')
    limit, reduce = _time_limit(ms, per, stat)
    return lambda profile: _range_below(profile, name, limit, per, stat, reduce)


def _range_below(profile: Profile, name: str, limit: float, per: str, stat: str, reduce: Reduce) -> str | None:
    matched = profile.match_ranges(name)
    if not matched:
        seen = (r.name for r in by_shown_time(profile.ranges))
        return no_range(name, seen, is_op=bool(profile.match(name)), compiled=profile.compiled is not None)
    # per call: of the calls the time is of (a range nested in one of its name is in the outer's time)
    return _over_limits(matched, limit, per, per, stat, reduce, calls=_outer_calls)


class TimedMatch(Protocol):
    """What a time limit reads of an op, a kernel or a range that matched it."""

    @property
    def name(self) -> str: ...

    @property
    def time_per_step(self) -> Dist: ...

    @property
    def calls_per_step(self) -> Dist: ...


class _Nesting(TimedMatch, Protocol):
    """An op or a range: its calls not nested in one of its own name are those its time is of."""

    @property
    def outer_calls_per_step(self) -> Dist: ...


def _all_calls(match: TimedMatch) -> Dist:
    return match.calls_per_step


def _outer_calls(match: _Nesting) -> Dist:
    return match.outer_calls_per_step


M = TypeVar("M", bound=TimedMatch)


def _over_limits(
    matched: Sequence[M],
    limit: float,
    per: str,
    unit: str,
    stat: str,
    reduce: Reduce,
    calls: Callable[[M], Dist] = _all_calls,
) -> str | None:
    """The matches (ops, kernels or ranges) over `limit` ms per step (or per call: of their
    `calls` per step, those their time is of), by `stat`; the worst first, or None."""
    failures = []
    for m in matched:
        samples: tuple[float, ...] = m.time_per_step.samples
        if per == "call":
            samples = tuple(t / c for t, c in zip(samples, calls(m).samples) if c)
        if samples and (value := reduce(samples)) / 1e6 > limit:  # in ms: a limit of n / 1e6 ms passes n ns
            failures.append((value, over_limit(m.name, value, limit, unit, stat, samples)))
        elif samples and per == "step" and stat == "median" and (hidden := _hidden(m, samples, limit, calls)):
            failures.append((max(samples), hidden))
    return "; ".join(msg for _, msg in sorted(failures, reverse=True)) or None


def _hidden(match: M, samples: tuple[float, ...], limit: float, calls: Callable[[M], Dist]) -> str | None:
    """Where a match ran in under half the steps, its median per step is 0 whatever it costs: a
    step over the limit then fails the test rather than pass behind that 0 (a trial's optimizer
    update, every 4th call, passed a limit of 0.0001 ms)."""
    ran = [c > 0 for c in calls(match).samples]
    if sum(ran) * 2 >= len(ran) or max(samples) / 1e6 <= limit:
        return None
    return hidden_by_median(match.name, sum(ran), len(ran), max(samples), limit)


def op_count(
    op: str,
    n: int | None = None,
    *,
    min: int | None = None,
    max: int | None = None,
    is_known: Callable[[str], bool] | None = None,
    known_names: Callable[[], Iterable[str]] = tuple,
    dtype: object = None,
) -> Assertion:
    """Calls per step of the ops matching `op` (summed over matches): exactly n, or within [min, max];
    with `dtype`, only the calls that took a tensor input of that dtype (_count_on). A count that
    admits zero on an exact name torch does not know is an error, as in no_op."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    _validate_counts(n, min, max, "a call count")
    type_name = validate_dtype(dtype)
    _refuse_memory_dtype(op, type_name)
    return lambda profile: _op_count(profile, op, n, min, max, is_known, known_names, type_name)


def validate_dtype(value: object) -> tuple[str, ...] | None:
    """An assertion's dtype= as the profiler's inputs may name it (`c10::BFloat16`; `long int` or
    clang's `long`), from a torch dtype (read by its name: no torch import) or a name; None for
    None; OpprofUsageError otherwise."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours (a trial read our source)
    if value is None:
        return None
    name = str(value) if type(value).__module__ == "torch" else value
    found = profiler_dtype(name) if isinstance(name, str) else None
    if found is None:
        raise OpprofUsageError(unknown_dtype(value))
    return found


def _op_count(
    profile: Profile,
    op: str,
    n: int | None,
    min: int | None,
    max: int | None,
    is_known: Callable[[str], bool] | None,
    known_names: Callable[[], Iterable[str]] = tuple,
    dtype: tuple[str, ...] | None = None,
) -> str | None:
    matched = profile.match(op)
    if matched and dtype is not None:
        return _count_on(profile, op, matched, n, min, max, dtype)
    if not matched:
        fused = fused_into(profile, op)
        if fused:  # the op's work ran all the same: zero calls is not "absent", as for assert_no_op
            return f"{asked(op)}: no op of that name ran: {fused_text(op, fused)}; count them with assert_kernel_count"
        if not is_glob(op) and profile.match_ranges(op):  # zero calls of an op of its name prove nothing
            return a_range_not_an_op(op, "assert_range_below")
        known = is_known is None or is_known(op)
        if n == 0 or (n is None and not min):
            claim = "counting zero calls of it"
            if near := near_misses(profile, op):  # `ATEN::ADDMM` beside aten::addmm: a slip that passes forever
                return near_miss(op, near, claim, glob=is_glob(op))
            if not known:  # a typo would pass forever
                return unknown_op(op, _closest_ops(profile, op, known_names), claim)
            return _unproven_absence(profile, op, claim)  # else zero calls expected and seen
        if not known:  # a typo, as a plain run says: not "assert on its kernels" (a trial's aten::addm)
            return unknown_op_name(op, _closest_ops(profile, op, known_names))
        message = _no_match_of(profile, op)
        if profile.compiled is not None and profile.compiled.regions and not near_misses(profile, op, memory=False):
            message += "; compiled code ran here, which decomposes and fuses ops: assert on its kernels instead"
        return message
    per_step = Dist.summed(m.calls_per_step for m in matched).samples
    expected = _expected_count(per_step, n, min, max)
    if expected is None:
        return None
    contexts = [
        context(profile, m.name) if len(matched) == 1 else f"{m.name} {context(profile, m.name)}" for m in matched[:3]
    ]
    if len(matched) > 3:
        contexts.append(f"and {len(matched) - 3} more ops")
    return count_mismatch(op, per_step, expected, _redispatched(matched) + contexts)


def _redispatched(matched: list[OpStats]) -> list[str]:
    """The calls of each op made inside a call of its own name, as a count's first context:
    autocast's aten::linear calls aten::linear, so 4 would read as 4 layers."""
    inside = [_inside_itself(m.name, n) for m in matched if (n := _nested_calls(m))]
    return ["; ".join(inside)] if inside else []


def _inside_itself(name: str, calls: float) -> str:
    """`2 of them called inside aten::linear itself (torch calls it again inside: ...)`."""
    return f"{count_text(calls)} of them called inside {name} itself ({REDISPATCH_CAUSES})"


def _count_on(
    profile: Profile,
    op: str,
    matched: list[OpStats],
    n: int | None,
    min: int | None,
    max: int | None,
    dtype: tuple[str, ...],
) -> str | None:
    """assert_op_count with dtype=: the calls one of whose tensor inputs has the dtype, counted
    where inputs were recorded (run()'s signature call, a one-step capture's step). An op whose
    calls ran without recorded dtypes cannot be counted: said, never a pass."""
    taken, unread = _calls_on(matched, dtype)
    if unread:
        return dtype_unread(op, dtype[0], unread, is_glob(op))
    recorded = next((len(s.calls_per_step.samples) for m in matched if m.work for s in m.work.signatures), 1)
    per_step = Dist.summed(s.calls_per_step for _, s in taken).samples if taken else (0.0,) * recorded
    expected = _expected_count(per_step, n, min, max)
    if expected is None:
        return None
    named = len({name for name, _ in taken}) > 1  # as _op_count says them: the op's name where several
    contexts = [f"{name + ' ' if named else ''}{where}" for name, _, where in _found_on(taken)]
    if not taken:  # what its calls took instead (a trial read `0 calls/step on double`, not the float they took)
        contexts += [
            f"{name} ran {calls} on other dtypes, {where}" for name, calls, where in _found_on(_taken_any(matched))
        ]
    on = f" on {dtype_words(dtype[0])} inputs"
    return count_mismatch(op, per_step, expected, _redispatched(matched) + contexts, on=on, steps=RECORDED_STEPS)


RECORDED_STEPS = "in the step that recorded inputs"  # what a dtype count's per-step figures are


def _taken_any(ops: Sequence[OpStats], most: int = 3) -> list[tuple[str, Signature]]:
    """Every recorded signature of the first few ops that have one, as _calls_on gives its pairs."""
    with_work = [o for o in ops if o.work is not None and o.work.signatures][:most]
    return [(o.name, s) for o in with_work if o.work is not None for s in o.work.signatures]


def _calls_on(
    ops: Iterable[OpStats], dtype: tuple[str, ...]
) -> tuple[list[tuple[str, Signature]], list[tuple[str, str]]]:
    """The (op, signature) pairs one of whose tensor inputs has the dtype (any of its spellings),
    and (op, why) for the ops that ran calls whose dtypes cannot be told: no recorded inputs, a
    list of tensors (the profiler gives no dtype for those) and none of the dtype beside it, or
    other calls in the steps than where inputs were recorded."""
    taken: list[tuple[str, Signature]] = []
    unread: list[tuple[str, str]] = []
    for o in ops:
        if not o.calls:
            continue
        signatures = o.work.signatures if o.work is not None else ()
        mine = [s for s in signatures if any(d in dtype for d in s.dtypes)]
        taken += [(o.name, s) for s in mine]
        recorded = sum(s.calls_per_step.median for s in signatures)
        if not signatures:
            unread.append((o.name, UNREAD_NOT_RUN))
        elif any(TENSOR_LIST in s.dtypes for s in signatures if s not in mine):
            unread.append((o.name, UNREAD_LIST))
        elif o.name.startswith(PACKED_PREFIX) and any("" in s.dtypes for s in signatures if s not in mine):
            unread.append((o.name, UNREAD_PACKED))
        elif recorded != o.calls_per_step.median:
            unread.append((o.name, unread_other_calls(o.calls_per_step.median, recorded)))
    return taken, unread


def _nested_calls(op: _Nesting) -> float:
    """An op's calls per step (median) made inside a call of its own name."""
    return float(op.calls_per_step.median - op.outer_calls_per_step.median)


def no_op(
    op: str,
    is_known: Callable[[str], bool] | None = None,
    known_names: Callable[[], Iterable[str]] = tuple,
    dtype: object = None,
) -> Assertion:
    """No op (or memory op) matching `op` ran; with `dtype`, no call of one took a tensor input of
    that dtype (memory ops have none). An exact name torch does not know is an error: a typo
    would otherwise pass forever."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_op(op)
    type_name = validate_dtype(dtype)
    _refuse_memory_dtype(op, type_name)
    return lambda profile: _no_op(profile, op, is_known, known_names, type_name)


PACKED_PREFIX = "quantized::"  # ops that take packed weights (a dynamically quantized Linear's), read as no dtype
MEMORY_OP_PREFIXES = ("Memcpy", "Memset")  # the device copies' names (`Memcpy DtoH (Device -> Pageable)`)


def _refuse_memory_dtype(op: str, dtype: tuple[str, ...] | None) -> None:
    """dtype= on a name or glob of memory copies, whose bytes have no dtype, is refused as the
    assertion is made: on a CPU machine no copy ran, and it passed there (a trial) where a GPU
    run refused it."""
    __tracebackhide__ = True
    if dtype is not None and op.startswith(MEMORY_OP_PREFIXES):
        raise OpprofUsageError(memory_op_dtype(op))


def context(profile: Profile, name: str, say_unread: bool = True) -> str:
    """Where an op ran and on what: `in aten::to <- aten::div_; inputs long int[]` — its most
    frequent input signature and the callers of that signature's first call (innermost first),
    or, without recorded inputs, the callers of its first call; and the ranges around its calls
    (`called from Python inside Optimizer.step#Adam.step`), or, where its calls ran in several
    places, each (`by place: 2/step inside ..., 1/step outside every range`: _places). An op
    that did not run in the step that recorded the others' inputs says so (a diagnosis trial
    read no inputs, and no why), unless `say_unread` is false (a structure verdict's list of
    several such ops)."""
    stats = profile.op(name)
    around = _places(profile, profile.event_table, name) if profile.event_table is not None else ""
    if stats is None or stats.work is None or not stats.work.signatures:
        unread = (
            "; inputs not recorded: it did not run in the step that recorded them"
            if say_unread and _inputs_read(profile)
            else ""
        )
        return _where(profile.callers(name), around) + unread
    first, *others = stats.work.signatures
    text = first.text if first.text == NO_TENSOR_INPUTS else f"inputs {first.text}"
    return f"{_where(first.callers, around)}; {text}" + (
        f" (+{count_of(len(others), 'other signature')})" if others else ""
    )


def _inputs_read(profile: Profile) -> bool:
    """Whether some op's inputs were recorded (run()'s signature step, a trace's header)."""
    return any(op.work is not None and op.work.signatures for op in profile.ops)


def _where(callers: tuple[str, ...], around: str = "") -> str:
    """`in aten::to <- aten::div_` or `called from Python` (the callers of the op's first call),
    then where among the ranges (_places); calls in several places by place alone (a review read
    `in aten::to: 1/step inside A, 1/step outside every range` of two calls, one not in aten::to)."""
    if around.startswith(":"):
        return f"by place{around}"
    return ("in " + " <- ".join(callers) if callers else "called from Python") + around


Place = tuple[bool, tuple[str, ...]]  # (in the backward pass, the ranges around it, innermost first)


def _places(profile: Profile, table: EventTable, name: str, rows: list[int] | None = None) -> str:
    """Where the op's calls in the steps (or `rows`) ran among the ranges and the backward pass:
    ` inside R` where all ran in one place; where in several, each with its median calls per step
    (or the steps it ran in), the most calls first (a training trial's added `loss.item()` read as
    inside `Optimizer.step#AdamW.step`, where AdamW's 20 step-count reads ran: `: 20/step inside
    Optimizer.step#AdamW.step, 1/step outside every range`)."""
    steps = _step_of_rows(profile, table, op_calls(table, name) if rows is None else rows)
    kept = [row for row, step in steps if step is not None]
    keys: list[Place] = list(zip(in_backward_each(table, kept), ranges_around_each(table, kept)))
    places = Counter(keys)
    if len(places) <= 1:
        (only,) = places or [(False, ())]
        return "" if only == (False, ()) else " " + _place_text(*only, backward_elsewhere=False)
    n_steps = max(len(profile.step_spans) if profile.wall_known else 1, 1)
    per_step: dict[Place, list[int]] = {key: [0] * n_steps for key in places}
    for key, step in zip(keys, (step for _, step in steps if step is not None)):
        per_step[key][step] += 1
    elsewhere = any(backward for backward, _ in places)
    parts = [f"{_calls_of(per_step[key])} {_place_text(*key, elsewhere)}" for key, _ in places.most_common(3)]
    return f": {', '.join(parts)}{', ...' if len(places) > 3 else ''}"


def _calls_of(counts: list[int]) -> str:
    """A place's median calls per step, or `in 1 of 4 steps` where that median is 0 (a review's
    20 reads in one step of four read `5/step` beside a headline of medians)."""
    middle = median(counts)
    return f"{count_text(middle)}/step" if middle else f"in {sum(1 for c in counts if c)} of {len(counts)} steps"


def _place_text(backward: bool, ranges: tuple[str, ...], backward_elsewhere: bool) -> str:
    """`in the backward pass inside R`, `inside R`; in neither, `outside the backward pass` beside
    calls in it (activation checkpointing's recomputed forward ops), else `outside every range`."""
    inside = "inside " + " <- ".join(ranges) if ranges else ""
    if backward:
        return "in the backward pass" + (f" {inside}" if inside else "")
    return inside or ("outside the backward pass" if backward_elsewhere else "outside every range")


def spread_places(profile: Profile, name: str) -> str:
    """Where the op's calls in the steps ran, where in several places (_places): a structure
    verdict's count change says it (a training trial's `aten::item 20 -> 21/step` named none);
    "" where they ran in one, or the profile holds no events."""
    table = profile.event_table
    around = _places(profile, table, name) if table is not None else ""
    return around.removeprefix(": ") if around.startswith(":") else ""


def _step_of_rows(profile: Profile, table: EventTable, rows: list[int]) -> list[tuple[int, int | None]]:
    """Each row with the index of the measured step it started in (None outside every step; 0
    for all without step markers), by bisection over the steps' starts (a review's 3,000 steps
    took 4.8 s one step at a time)."""
    spans = sorted((s.start_ns, s.end_ns) for s in profile.step_spans) if profile.wall_known else []
    if not spans:
        return [(row, 0) for row in rows]
    starts = [start for start, _ in spans]
    found: list[tuple[int, int | None]] = []
    for row in rows:
        at = table.start_ns[row]
        k = bisect_right(starts, at) - 1
        found.append((row, k if k >= 0 and at <= spans[k][1] else None))
    return found


_PLACED = 5  # the ops found by assert_no_op whose message says where they ran


def _no_op(
    profile: Profile,
    op: str,
    is_known: Callable[[str], bool] | None,
    known_names: Callable[[], Iterable[str]] = tuple,
    dtype: tuple[str, ...] | None = None,
) -> str | None:
    ran = [o for o in profile.match(op) if o.calls]
    if ran and dtype is not None:
        return _none_on(op, ran, dtype)
    found = [  # where each ran, for the first few: a glob can match hundreds
        (o.name, calls_text(o.calls_per_step.samples), context(profile, o.name) if i < _PLACED else "")
        for i, o in enumerate(ran)
    ]
    if dtype is None:  # a copy's bytes have no dtype: with dtype=, a glob that matches copies too judges its ops
        found += [(m.name, calls_text(m.calls_per_step.samples), "") for m in profile.match_memory_ops(op) if m.calls]
    if found:
        return unexpected_ops(op, found)
    fused = fused_into(profile, op)
    if fused:
        return f"{asked(op)}: did not run as an op, but its work did: {fused_text(op, fused)}"
    if not is_glob(op) and profile.match_ranges(op):  # it ran: "no op of that name" proves nothing
        return a_range_not_an_op(op, "assert_range_below")
    if near := near_misses(profile, op):
        return near_miss(op, near, glob=is_glob(op))
    if is_known is not None and not is_known(op):
        return unknown_op(op, _closest_ops(profile, op, known_names))
    return _unproven_absence(profile, op)


def _none_on(op: str, ran: list[OpStats], dtype: tuple[str, ...]) -> str | None:
    """assert_no_op with dtype=: no call of the ops that ran took a tensor input of the dtype (an
    LLM trial's bf16 model wanted no upcast where torch's own integer casts run anyway)."""
    taken, unread = _calls_on(ran, dtype)
    if taken:
        nested = {o.name: n for o in ran if (n := _nested_calls(o))}  # autocast's outer call took the original dtype
        found = [
            (name, calls, f"{where}; {_inside_itself(name, nested[name])}" if name in nested else where)
            for name, calls, where in _found_on(taken)
        ]
        return unexpected_ops(op, found, on=f" on {dtype_words(dtype[0])} inputs")
    return dtype_unread(op, dtype[0], unread, is_glob(op)) if unread else None


def _found_on(taken: list[tuple[str, Signature]]) -> list[tuple[str, str, str]]:
    """Per op, in the order taken: its calls on the dtype, and where its first such signature ran
    and on what (`in aten::to; inputs c10::BFloat16[4,4] (+1 other signature)`)."""
    by_op: dict[str, list[Signature]] = {}
    for name, sig in taken:
        by_op.setdefault(name, []).append(sig)
    found = []
    for name, sigs in by_op.items():
        calls = calls_text(Dist.summed(s.calls_per_step for s in sigs).samples)
        more = f" (+{count_of(len(sigs) - 1, 'other signature')})" if len(sigs) > 1 else ""
        found.append((name, calls, f"{_where(sigs[0].callers)}; inputs {sigs[0].text}{more}"))
    return found


def _no_match_of(profile: Profile, op: str) -> str:
    """Why a name an assertion needs matched no op: a slip of letter case, spaces or namespace
    first, else the closest names, a range of the name, other threads."""
    ops, ranges = (o.name for o in profile.ops), (r.name for r in profile.ranges)
    return no_match(op, ops, ranges, _elsewhere(profile), near_misses(profile, op, memory=False), is_glob(op))


def _unproven_absence(profile: Profile, op: str, claim: str = "asserting it is absent") -> str | None:
    """Why an op that did not run may have all the same: a range of its exact name in other
    letters ran, or other Python threads ran the capture's work unrecorded; None where neither."""
    cased = [] if is_glob(op) else [r.name for r in profile.ranges if r.calls and r.name.lower() == op.lower()]
    if cased:  # a glob matching a range is left alone, as assert_no_op("bl*") beside `blk` is (a review)
        return a_range_in_other_letters(op, cased, claim)
    if threads := [_thread_named(t) for t in profile.other_threads if t.given_work]:
        return unseen_on_other_threads(op, threads, claim)
    return None


def _closest_ops(profile: Profile, op: str, known_names: Callable[[], Iterable[str]]) -> list[str]:
    """What an unknown op name meant: the closest ops that ran, unless a name torch knows is
    closer (`aten::gelux` finds aten::gelu, which did not run, before aten::relu, which did)."""
    ran = [o.name for o in profile.ops]
    close_ran, close_all = closest_names(op, ran), closest_names(op, [*ran, *known_names()])
    return close_ran if close_ran and close_all and close_ran[0] == close_all[0] else close_all


def near_misses(profile: Profile, op: str, memory: bool = True) -> list[str]:
    """The ops and memory ops that ran whose names `op` matches but for letter case, spaces
    around `::`, or (for an op) a left-out `aten::` (`ATEN::ADDMM`, `aten ::addmm`, `addmm`,
    `aten::*MM` beside aten::addmm; `memcpy dtoh*` beside `Memcpy DtoH (Device -> Pageable)`):
    names match exactly, so an absence asserted with such a slip passes beside what it meant.
    `memory`: memory ops too (an absence; a count or a time limit never matches them)."""
    wanted = _loose(op)
    forms = {wanted, wanted if "::" in wanted else f"aten::{wanted}"}  # `tocopybackward0`: no namespace either
    ops = [o.name for o in profile.ops if o.calls and any(fnmatch.fnmatchcase(_loose(o.name), f) for f in forms)]
    if not memory:
        return ops
    return ops + [m.name for m in profile.memory_ops if m.calls and fnmatch.fnmatchcase(_loose(m.name), wanted)]


def _loose(name: str) -> str:
    return re.sub(r"\s*::\s*", "::", name.strip()).lower()


def no_sync() -> Assertion:
    """No host-device synchronisation: sync runtime calls, aten::item/_local_scalar_dense, DtoH copies."""
    return _no_sync


def _no_sync(profile: Profile) -> str | None:
    """On a device, a scalar read syncs when it copied from the device: an `aten::item` that
    launched no device work read a CPU tensor (Adam's step counts, unless capturable), and waits
    for nothing. On the CPU only, every scalar read counts: each would sync on a device tensor."""
    on_device = _ran_on_a_device(profile)
    reads = [o for o in profile.ops if o.name in SYNC_OPS and o.calls and (o.device_ns or not on_device)]
    table = profile.event_table
    if on_device and table is not None:
        found = [read for o in reads if (read := _device_reads(profile, table, o.name)) is not None]
    else:
        found = [(o.name, calls_text(o.calls_per_step.samples), context(profile, o.name).split("; ")[0]) for o in reads]
    found += [
        (r.name, calls_text(r.calls_per_step.samples), "") for r in profile.runtime if SYNC_RUNTIME_CALL.search(r.name)
    ]
    found += [
        (m.name, calls_text(m.calls_per_step.samples), "")
        for m in profile.memory_ops
        if fnmatch.fnmatchcase(m.name, _DTOH)
    ]
    return host_syncs(found, cpu_only=not on_device) if found else None


def _device_reads(profile: Profile, table: EventTable, name: str) -> tuple[str, str, str] | None:
    """A scalar read's calls that copied from the device (its thread made a runtime call inside
    them), per step, and where the first ran; None when every call read a CPU tensor. By call:
    one `loss.item()` beside Adam's CPU step-count reads counts one, named where it ran."""
    rows = op_calls(table, name, launching=True)
    if not rows:
        return None
    where = _where(profile.callers(name), _places(profile, table, name, rows))
    return name, f"{count_text(len(rows) / max(1, profile.steps))}/step", where


def _ran_on_a_device(profile: Profile) -> bool:
    return bool(profile.device_ns or profile.kernels or profile.memory_ops)


def total_below(ms: float, stat: str = "median") -> Assertion:
    """The step's wall time is at most `ms`, by `stat` over steps."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    limit = validate_ms("ms", ms)
    reduce = STATS[_choice("stat", stat, tuple(STATS))]
    return lambda profile: _total_below(profile, limit, stat, reduce)


def _total_below(profile: Profile, limit: float, stat: str, reduce: Reduce) -> str | None:
    samples = tuple(s.wall_ns for s in profile.step_spans)
    value = reduce(samples)
    if value / 1e6 > limit:  # in ms, as _over_limits judges
        return over_limit("total", value, limit, "step", stat, samples)
    return None


# -- compiled code: fused ops, graph breaks, recompiles, eager work -------------------------------

NOTHING_COMPILED = (
    "no torch.compile'd region ran in the measured steps, so there is nothing compiled to check: "
    "wrap the model in torch.compile, and check Dynamo did not fall back to eager (TORCH_LOGS=recompiles,graph_breaks)"
)


def nothing_compiled(profile: Profile) -> str:
    """NOTHING_COMPILED, and where Dynamo hit its recompile limit in the run, that (a trial's
    shape changing every call fell back to eager: the message sent it to TORCH_LOGS)."""
    limit = limit_clause(profile)
    return NOTHING_COMPILED.split(": wrap", 1)[0] + limit if limit else NOTHING_COMPILED


def limit_clause(profile: Profile) -> str:
    """`; Dynamo hit its recompile limit ...` where it did in the run (run()'s warm-up or steps)."""
    limit = profile.metadata.get("recompile_limit_hit")
    if limit is None:
        return ""
    compiled = profile.metadata.get("graphs_in_run")
    return "; " + recompile_limit_hit_text(limit, compiled if isinstance(compiled, int) else None)


def fused_into(profile: Profile, op: str) -> list[str]:
    """The compiled kernels whose names say they fused `op` (`aten::gelu` ->
    `triton_poi_fused_gelu_0`, `graph_0_cpp_fused_gelu_0`); [] without compiled code or for a glob."""
    if profile.compiled is None or is_glob(op) or "::" not in op:
        return []
    token = "_" + op.rsplit("::", 1)[1].split(".")[0] + "_"
    kernels = [k.name for k in profile.kernel_rows()]
    kernels += [o.name for o in profile.ops if o.name.startswith("triton_") and o.name not in kernels]
    return [k for k in kernels if "fused" in k and token in "_" + k.split("fused", 1)[1] + "_"]


def fused_text(op: str, kernels: list[str]) -> str:
    return f"{asked(op)} ran inside compiled code, fused into {first_three(list(kernels))}"


def no_graph_break() -> Assertion:
    """At most one compiled region per compiled call per step: a region nested in another is
    the rest of a frame Dynamo had to resume after a graph break."""
    return _no_graph_break


def _no_graph_break(profile: Profile) -> str | None:
    regions = [r for r in profile.compiled.regions if r.step >= 0] if profile.compiled else []
    if not regions:
        return nothing_compiled(profile)
    broken = [r for r in regions if r.nested]
    if not broken:
        return _ran_eagerly_after_limit(profile, regions)
    first = min(broken, key=lambda r: r.step)
    steps = len({r.step for r in regions})
    found = [str(r) for r in profile.metadata.get("graph_break_reasons") or []]
    shown = list(dict.fromkeys(found))[:3]
    reasons = list(dict.fromkeys(break_reason(r) for r in shown))
    where = "" if all(_BREAK_AT.search(r) for r in shown) else NAMES_THE_LINE
    why = (
        f"; torch's reason: {'; '.join(reasons)}{where}"
        if reasons
        else "; torch names the reason when the model compiles inside opprof.run() (its warmup), "
        "or see torch._dynamo.explain(model)(*inputs)"
    )
    return (
        f"graph break: in step {first.step} {REGION} {first.inside} resumed its frame in {REGION} "
        f"{first.compile_id}; {len(broken)} resumed regions in {steps} steps{why}"
    )


def _ran_eagerly_after_limit(profile: Profile, regions: list[RegionCall]) -> str | None:
    """The steps after the last that ran a compiled region, in a run whose measured steps hit
    Dynamo's recompile limit: the frame ran eagerly from then on, as one long break (a compile
    trial's gate passed it). Not a step between compiled ones (an optimizer step every 2nd call),
    nor a limit hit before the steps (a review's)."""
    limit = limit_clause(profile)
    last = max(r.step for r in regions)
    eager = [s.number for s in profile.step_spans if s.number > last]
    if not limit or not profile.metadata.get("limit_in_steps", True) or not eager:
        return None
    listed = ", ".join(str(n) for n in eager[:3]) + (", ..." if len(eager) > 3 else "")
    steps = f"in the last {len(eager)} of {len(profile.step_spans)} steps ({listed})"
    return f"{steps} no compiled region ran, after step {last} ran one: the model ran eagerly there{limit}"


_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")  # not inside `(e.g. clamping ...)`
_BREAK_AT = re.compile(r'# File "([^"]+)", line (\d+), in ([^,\n]+)(?:, code: ([^\n]+))?')


def break_reason(text: str) -> str:
    """Torch's graph-break reason in one line: its title, explanation and first hint, and where
    it broke when torch says (`# File "m.py", line 7, in f, code: if y.sum() > 0:`). A trial's
    `print` read `Failed to trace builtin operator` alone: the explanation names the `print`."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return text

    def said(label: str) -> str:
        return next((line.removeprefix(label).strip().rstrip(".") for line in lines if line.startswith(label)), "")

    explanation, hint, at = said("Explanation:"), said("Hint:"), _BREAK_AT.search(text)
    reason = lines[0].rstrip(".") + (f": {explanation}" if explanation else "")
    if at:  # a data-dependent branch's text names where its condition was computed, not the `if`
        file, line, function, code = at.groups()
        what = "its condition computed at" if "computed as follows" in text[: at.start()] else "at"
        reason += f"; {what} {_near(file)}:{line} in {function}" + (f": `{code.strip()}`" if code else "")
    inside = _INSIDE_TORCH.search(text)
    if inside:  # torch's hint is for its own code there (`Remove the graph_break() call`), not the user's
        file, line, function = inside.groups()
        return f"{reason}; the break is inside torch's own code, {_torch_path(file)}:{line} in {function}"
    if hint:  # its first sentence
        reason += f"; hint: {_SENTENCE_END.split(hint, 1)[0].rstrip('.')}"
    return reason


_INSIDE_TORCH = re.compile(r'# Inside torch: File "([^"]+)", line (\d+), in ([^,\n]+)')


def _torch_path(file: str) -> str:
    """A file of torch's by its path from the package (`torch/optim/optimizer.py`)."""
    at = file.replace("\\", "/").rfind("/torch/")
    return file[at + 1 :] if at >= 0 else file


def _near(file: str) -> str:
    """A file under the working directory by its path from there (`models.py`, not the full path)."""
    try:
        relative = os.path.relpath(file)
    except ValueError:  # another drive
        return file
    return relative if not relative.startswith(os.pardir) else file


def no_recompile() -> Assertion:
    """No compilation inside the measured steps, and each frame ran as the same compilations in
    every step (a frame alternating between compilations fails its guards on some inputs)."""
    return _no_recompile


def _no_recompile(profile: Profile) -> str | None:
    compiled = profile.compiled
    if compiled is None or not compiled.regions and not compiled.compilations:
        return nothing_compiled(profile)
    inside = [c for c in compiled.compilations if c.step >= 0]
    if inside:
        listed = ", ".join(f"{c.compile_id} in step {c.step} ({c.dur_ns / 1e6:.1f} ms)" for c in inside[:3])
        more = f" and {len(inside) - 3} more" if len(inside) > 3 else ""
        return f"compiled inside the measured steps: {listed}{more}; {_recompile_cause(compiled, inside, profile)}"
    varied = _compilations_varied(compiled.regions)
    if varied is None:
        return None
    frame, by_step = varied
    listed = "; ".join(f"step {step}: {', '.join(f'{frame}/{c}' for c in sorted(ids))}" for step, ids in by_step[:3])
    return (
        f"frame {frame} ran as different compilations from step to step ({listed}): its guards fail for some "
        "inputs, so it was recompiled; keep input shapes fixed or mark the dimension dynamic"
    )


def _recompile_cause(compiled: Compiled, inside: list[Compilation], profile: Profile) -> str:
    """Why code compiled in the steps: a first call where it compiled in the first step alone;
    else new inputs every few steps, not fixed by a warm-up (a compile trial was sent to one
    where Dynamo recompiled every step, then hit its limit and ran eagerly: limit_clause)."""
    first = min([r.step for r in compiled.regions if r.step >= 0] + [c.step for c in inside])
    steps = {c.step for c in inside}
    return recompiled_in_steps(None if steps == {first} else len(steps), limit_clause(profile))


def _compilations_varied(regions: Iterable[RegionCall]) -> tuple[int, list[tuple[int, frozenset[int]]]] | None:
    """The first frame whose compilations differ between the steps it ran in, with the first two
    steps that differ. A frame may run as several compilations in every step (two instances of
    one module class compiled apart share their code, and so the frame): that is no recompile."""
    by_frame: dict[int, dict[int, set[int]]] = {}
    for r in regions:
        if r.step >= 0:
            by_frame.setdefault(r.frame, {}).setdefault(r.step, set()).add(r.compile)
    for frame in sorted(by_frame):
        steps = sorted(by_frame[frame].items())
        first = frozenset(steps[0][1])
        other = next(((step, frozenset(ids)) for step, ids in steps if frozenset(ids) != first), None)
        if other is not None:
            return frame, [(steps[0][0], first), other]
    return None


def compiled() -> Assertion:
    """The steps' work ran inside compiled code: no op ran eagerly outside it."""
    return _compiled


def _ran_compiled(profile: Profile) -> bool:
    """Whether a torch.compile'd region ran in the measured steps."""
    c = profile.compiled
    return c is not None and any(r.step >= 0 for r in c.regions)


def _compiled(profile: Profile) -> str | None:
    c = profile.compiled
    if c is None or not _ran_compiled(profile):
        return nothing_compiled(profile)
    if not c.eager:
        return None
    steps = max(profile.steps, 1)
    listed = ", ".join(
        f"{e.name} ({count_text(e.calls / steps)}/step, {e.cpu_ns / steps / 1e6:.3f} ms/step)" for e in c.eager[:3]
    )
    more = f" and {len(c.eager) - 3} more" if len(c.eager) > 3 else ""
    return (
        f"{share_text(c.eager_share)} of the steps' work ran eagerly, outside compiled code (eager ops' CPU time "
        f"against the compiled code's; Dynamo's own steps aside): {listed}{more}; "
        f"a graph break or work outside the compiled function{limit_clause(profile)}"
    )


# -- kernels ----------------------------------------------------------------------------------


def kernel_count(pattern: str, n: int | None = None, *, min: int | None = None, max: int | None = None) -> Assertion:
    """Launches per step of the kernels matching `pattern` (device kernels and Inductor CPU
    kernels; summed over matches): exactly n, or within [min, max]."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    _validate_kernel(pattern)
    _validate_counts(n, min, max, "a launch count")
    return lambda profile: _kernel_count(profile, pattern, n, min, max)


def _validate_kernel(pattern: object) -> None:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    validate_name(pattern, "kernel", "kernel", ' such as "triton_*" or "*gemm*"')


def _validate_counts(n: object, min: object, max: object, what: str) -> None:
    """n, or min=/max=, each a whole number >= 0, min <= max."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if n is None and min is None and max is None:
        raise OpprofUsageError(bad_argument("n", None, f"{what}, or min= and/or max="))
    if n is not None and (min is not None or max is not None):
        raise OpprofUsageError(bad_argument("n", n, "either n or min=/max=, not both"))
    for name, value in (("n", n), ("min", min), ("max", max)):
        if value is not None:
            _count(name, value)
    if isinstance(min, int) and isinstance(max, int) and min > max:
        raise OpprofUsageError(bad_argument("min", min, f"at most max={max} (no count lies between them)"))


def _kernel_count(profile: Profile, pattern: str, n: int | None, min: int | None, max: int | None) -> str | None:
    matched = profile.match_kernels(pattern)
    if not matched:
        if n == 0 or (n is None and not min):
            return _kernel_typo(pattern, profile)  # zero launches expected and seen, unless a typo
        return no_kernel(pattern, profile) + _records_dropped(profile)
    per_step = Dist.summed(k.calls_per_step for k in matched).samples
    expected = _expected_count(per_step, n, min, max)
    if expected is None:
        return None
    names = first_three([k.name for k in matched])
    fewer = any(c < (n if n is not None else (min or 0)) for c in per_step)  # a loss only makes counts lower
    clause = _records_dropped(profile) if fewer else ""
    return count_mismatch(pattern, per_step, expected, [f"kernels {names}"], unit="launches") + clause


def _records_dropped(profile: Profile) -> str:
    """A kernel count's failure in a capture whose tracer dropped kernel records: they may be why
    (a review's assert_kernel_count(..., 6) failed as 2-6 launches a step, saying nothing of them)."""
    if not profile.kernels_dropped:
        return ""
    return (
        f" (the device tracer dropped {count_of(profile.kernels_dropped, 'kernel record')} in this capture, which "
        "may be why: see its kernel_records warning)"
    )


def _expected_count(per_step: Sequence[float], n: int | None, min: int | None, max: int | None) -> str | None:
    """None when every step's count is n (or within min/max); else what was expected, in words."""
    if n is not None:
        return None if all(c == n for c in per_step) else str(n)
    low, high = min if min is not None else 0, max if max is not None else float("inf")
    if all(low <= c <= high for c in per_step):
        return None
    if min is not None and max is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if min is not None else f"at most {high}"


def _kernel_typo(name: str, profile: Profile) -> str | None:
    """A kernel name no registry can check, asserted absent while a kernel one typo away from it
    ran: the assertion would pass forever. A glob is taken as written (a C++ pointer's `*` is no
    wildcard: is_kernel_glob)."""
    if is_kernel_glob(name):
        return None
    near = next((k.name for k in profile.kernel_rows() if _mistyped_kernel(name, k.name)), None)
    if near is None:
        return None
    glob = f"'{name}*'" if len(name) <= ASKED else "the name and a *"
    return (
        f"{asked(name)}: no kernel of that name ran, but {near} did: a typo of it would pass forever; "
        f"name the kernel as it ran (for another kernel that must not run, write a glob such as {glob})"
    )


def _mistyped_kernel(name: str, ran: str) -> bool:
    """looks_mistyped, but for a pointer's `*`: `float**` beside `float*` is another kernel (an
    array of pointers), not a doubled letter (a review)."""
    return looks_mistyped(name, ran) and name.replace("*", "") != ran.replace("*", "")


def no_kernel(pattern: str, profile: Profile) -> str:
    """No kernel matched: the closest names, else the costliest kernels, else that none ran."""
    seen = [k.name for k in sorted(profile.kernel_rows(), key=lambda k: -sum(k.time_per_step.samples))]
    close = closest_names(pattern, seen)
    hint = (
        f"; closest: {', '.join(close)}"
        if close
        else f"; the kernels were {', '.join(seen[:3])}"
        if seen
        else f"; no kernels ran, and {nothing_compiled(profile)}"
        if not _ran_compiled(profile)
        else "; no kernels ran (on CPU only compiled code has kernels: Inductor's cpp_fused_*)"
    )
    return f"{asked(pattern)}: no kernel of that name ran in the measured code{hint}"


def kernel_below(pattern: str, ms: float, per: str = "step", stat: str = "median") -> Assertion:
    """Every kernel matching `pattern` takes at most `ms` per step (or per launch), by `stat`
    over steps: device time for device kernels, CPU time for Inductor CPU kernels."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    _validate_kernel(pattern)
    limit, reduce = _time_limit(ms, per, stat)
    return lambda profile: _kernel_below(profile, pattern, limit, per, stat, reduce)


def _kernel_below(profile: Profile, pattern: str, limit: float, per: str, stat: str, reduce: Reduce) -> str | None:
    matched = profile.match_kernels(pattern)
    if not matched:
        return no_kernel(pattern, profile)
    return _over_limits(matched, limit, per, "launch" if per == "call" else per, stat, reduce)


# -- the device's timeline --------------------------------------------------------------------

OVERLAP_KINDS = (("compute", "memory"), ("compute", "comm"))
_NO_DEVICE = "no device work was recorded, so the device timeline cannot be checked (a CPU-only run?)"


def _pct(name: str, value: object) -> float:
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise OpprofUsageError(bad_argument(name, value, "a percentage between 0 and 100"))
    # A fraction (0.5 for half) would pass as 0.5%: refused. Unlike a tolerance, a bare 1 is taken
    # (1%): a number argument has no other spelling of 1%, where a tolerance has "1%".
    if 0 < value < 1:
        raise OpprofUsageError(
            bad_argument(
                name,
                value,
                f"a percentage between 0 and 100, not a fraction: write {value * 100:g} for {value * 100:g}%",
            )
        )
    return float(value)


def overlap(kinds: Sequence[str] = ("compute", "memory"), min_pct: float = 50.0) -> Assertion:
    """In every step, at least `min_pct`% of the shorter of the two kinds of device work ran at
    the same time as the other (copies hidden behind compute, communication behind compute)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    pair = tuple(kinds) if isinstance(kinds, (tuple, list)) else ()
    if pair not in OVERLAP_KINDS and pair[::-1] not in OVERLAP_KINDS:
        raise OpprofUsageError(bad_argument("kinds", kinds, '("compute", "memory") or ("compute", "comm")'))
    limit = _pct("min_pct", min_pct)
    other = pair[1] if pair[0] == "compute" else pair[0]
    return lambda profile: _overlap(profile, other, limit)


def _overlap(profile: Profile, other: str, limit: float) -> str | None:
    t = profile.timeline
    if t is None or not t.total.busy_ns:
        return _NO_DEVICE
    worst: tuple[float, int, int, int, int] | None = None
    for number, f in zip((s.number for s in profile.step_spans), t.per_step):
        other_ns = f.memory_ns if other == "memory" else f.comm_ns
        both = f.compute_memory_overlap_ns if other == "memory" else f.compute_comm_overlap_ns
        shorter = min(f.compute_ns, other_ns)
        if not shorter:
            continue
        pct = 100 * both / shorter
        if worst is None or pct < worst[0]:
            worst = (pct, number, both, f.compute_ns, other_ns)
    if worst is None:
        return f"compute/{other} overlap: no step ran both compute and {other} work on the device"
    pct, number, both, compute_ns, other_ns = worst
    if pct >= limit:
        return None
    return (
        f"compute/{other} overlap: {pct:.0f}% < {limit:g}% in step {number} (the worst): {both / 1e6:.3f} ms of "
        f"compute {compute_ns / 1e6:.3f} ms and {other} {other_ns / 1e6:.3f} ms ran at once; run the {other} work "
        "on another stream (non_blocking copies from pinned memory)"
    )


def device_busy_above(pct: float) -> Assertion:
    """In every step, the device worked at least `pct`% of the step's wall time."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    limit = _pct("pct", pct)
    return lambda profile: _device_busy_above(profile, limit)


def _device_busy_above(profile: Profile, limit: float) -> str | None:
    t = profile.timeline
    if t is None or not t.total.busy_ns:
        return _NO_DEVICE
    shares = [
        (100 * f.busy_ns / span.wall_ns, span.number, f.busy_ns, span.wall_ns)
        for span, f in zip(profile.step_spans, t.per_step)
        if span.wall_ns
    ]
    worst = min(shares, default=None)
    if worst is None or worst[0] >= limit:
        return None
    share, number, busy, wall = worst
    host = (
        f"; the host ran ops while it was idle {share_text(t.host_bound_share)} of {steps_or_span(profile)}"
        if t.host_bound_share
        else ""
    )
    return (
        f"device busy {share:.0f}% < {limit:g}% of step {number} (the worst): {busy / 1e6:.3f} ms of a "
        f"{wall / 1e6:.3f} ms step{host}"
    )


def no_launch_bound() -> Assertion:
    """No op's kernels are shorter (median) than the host calls that launch them."""
    return _no_launch_bound


def _no_launch_bound(profile: Profile) -> str | None:
    t = profile.timeline
    if t is None or not t.total.busy_ns:
        return _NO_DEVICE
    if not t.launch_bound:
        return None
    listed = ", ".join(
        f"{b.op} ({b.kernels} kernels of {b.kernel_ns / 1e6:.4f} ms < launch {b.launch_ns / 1e6:.4f} ms)"
        for b in t.launch_bound[:3]
    )
    more = f" and {len(t.launch_bound) - 3} more" if len(t.launch_bound) > 3 else ""
    return (
        f"launch-bound: {listed}{more}: the host cannot launch kernels as fast as the device runs them; "
        "fuse them (torch.compile) or capture them in a CUDA graph"
    )
