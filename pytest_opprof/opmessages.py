"""The messages about the ops a person asked for: a failed operator assertion, and a name or
pattern that cannot be judged (an op that never ran, a mistyped name, a glob that selects nothing,
a capture with no step markers or no op at all). The other messages: errors.py.

Tests import these formatters so they assert the real text."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Sequence

from .dtypes import dtype_words
from .errors import closest_names, shown_name, shown_value
from .events import without_overload
from .opnames import is_glob
from .textout import ELLIPSIS
from .units import count_of, count_text, first_three, ms_text, ns_to_ms

# Why torch calls an op inside itself (a trial's vmap and nested-tensor counts were said to be autocast's).
REDISPATCH_CAUSES = "torch calls it again inside: autocast after casting the inputs, vmap, a nested tensor or subclass"


def _ms(value_ns: float) -> str:
    return _ms_of(ns_to_ms(value_ns))


def _ms_of(ms: float) -> str:
    """2 decimals, more below 0.1 ms so that a small value or limit never reads as another
    (0.005 is not 0.01); below 0.0001 ms as given (a limit of 0.000001 is not 0.0000)."""
    if 0 < ms < 0.0001:
        return f"{ms:.12f}".rstrip("0")
    return ms_text(ms, 2 if ms >= 0.1 or ms == 0 else 3 if ms >= 0.01 else 4)


def _told_apart(value_ms: float, limit_ms: float) -> tuple[str, str]:
    """A value over its limit and the limit, with the decimals that tell them apart (a trial read
    `0.065 ms/step > limit 0.065 ms`)."""
    value, limit = _ms_of(value_ms), _ms_of(limit_ms)
    digits = max(len(value.partition(".")[2]), len(limit.partition(".")[2]))
    while float(value) == float(limit) and digits < 12:  # `0.10` and `0.100` read as equal too (a review)
        digits += 1
        value, limit = f"{value_ms:.{digits}f}", f"{limit_ms:.{digits}f}"
    return value, limit


def over_limit(name: str, value_ns: float, limit_ms: float, unit: str, stat: str, samples: tuple[float, ...]) -> str:
    """`aten::addmm: 2.41 ms/step > limit 2.00 ms (median of 10 steps; min 2.30, max 2.55)`; where
    only some steps were over it, which (`; over it in steps 3, 7`)."""
    steps = len(samples)
    value, limit = _told_apart(ns_to_ms(value_ns), limit_ms)
    return (
        f"{name}: {value} ms/{unit} > limit {limit} ms "
        f"({stat} of {steps} step{'s' if steps != 1 else ''}; min {_ms(min(samples))}, max {_ms(max(samples))}"
        f"{_steps_over([v / 1e6 > limit_ms for v in samples])})"  # as assertions judge
    )


def _steps_over(over: Sequence[bool]) -> str:
    """`; over it in steps 3, 7` (step numbers from 1), where only some of the steps were over a limit."""
    numbers = [str(i) for i, is_over in enumerate(over, 1) if is_over]
    if len(numbers) == len(over):
        return ""
    more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
    return f"; over it in step{'s' if len(numbers) > 1 else ''} {', '.join(numbers[:10])}{more}"


def collective_over_limit(ops: list[str], others: list[str], range_name: str, failed: str) -> str:
    """c10d ops (`ops`, matched by a limit) within it whose collective, on gloo's threads, was over
    it (`failed`: the range's over_limit); where the range holds more ops' collectives (`others`,
    or several of `ops`), that each one's part is not told apart."""
    if len(ops) == 1 and not others:
        return (
            f"{ops[0]} launched a collective that gloo ran on its own threads, over the op's limit: {failed}; the "
            "op's own time is its launch alone"
        )
    return (
        f"{first_three(ops)} launched collectives that gloo ran on its own threads in {range_name}"
        f"{f' with those of {first_three(others)}' if others else ''}, which gloo names alike, over the op's limit "
        f"together: {failed}; each one's part is not told apart: budget them together "
        f'(assert_range_below("{range_name}", ms=...))'
    )


def hidden_by_median(name: str, ran: int, steps: int, worst_ns: float, limit_ms: float) -> str:
    """A time assertion's failure where the match ran in under half the steps: the median per step
    (0) would have passed it whatever the steps that ran it cost."""
    worst, limit = _told_apart(ns_to_ms(worst_ns), limit_ms)
    return (
        f"{name}: {worst} ms in a step > limit {limit} ms; it ran in {ran} of {steps} steps, so its median per step "
        'is 0 whatever it costs; assert it per="call" or by stat="max"'
    )


def share_over_limit(name: str, value_pct: float, limit_pct: float, stat: str, shares: Sequence[float]) -> str:
    """`aten::addmm: 73.8% of the step > limit 50% (median of 10 steps; min 70.1%, max 95.5%;
    over it in steps 2, 7)`: `shares` holds each step's percentage, in step order."""
    digits = 1
    while round(value_pct, digits) <= limit_pct and digits < 12:  # `50.0% > limit 50%` would read as equal
        digits += 1
    return (
        f"{name}: {value_pct:.{digits}f}% of the step > limit {limit_pct:g}% "
        f"({stat} of {count_of(len(shares), 'step')}; min {min(shares):.1f}%, max {max(shares):.1f}%"
        f"{_steps_over([pct > limit_pct for pct in shares])})"
    )


def share_hidden_by_median(name: str, worst_pct: float, limit_pct: float, ran: int, steps: int) -> str:
    """A share assertion's failure where the op ran in under half the steps: its median share (0)
    would have passed it whatever the steps that ran it spent."""
    return (
        f"{name}: {worst_pct:.1f}% of a step > limit {limit_pct:g}%; it ran in {ran} of {steps} steps, so its median "
        'share is 0 whatever it costs; assert it by stat="max"'
    )


def no_step_wall(name: str) -> str:
    """A share of the step asked of a capture whose steps have no wall time (a trace without step markers)."""
    return f"{asked(name)}: the capture has no step markers, so no share of a step's wall time can be judged"


def no_match(
    pattern: str,
    seen: Iterable[str],
    ranges: Iterable[str] = (),
    threads: Sequence[str] = (),
    near: Sequence[str] = (),
    glob: bool = False,
) -> str:
    """`seen` in order of cost: the hint falls back to the costliest ops. A range (`ranges`) of
    the name but for letter case, or of a close one where no op is close, is named first: a
    trial's `Optimizer.step#SGD.Step` got `no similar name` beside `Optimizer.step#SGD.step`.
    `threads`: the other Python threads that ran during the capture, where the op may have run
    unrecorded (a trial's model ran in a ThreadPoolExecutor). `near`: ops that ran whose names it
    matches but for letter case, spaces or the namespace (an audit's `aten::*MM` beside
    aten::addmm was told `no similar name`), said first."""
    if near:
        return near_miss(pattern, list(near), glob=glob, claim=None)
    return _no_match(pattern, seen, ranges) + (
        f"; other Python threads ran during the capture ({first_three(list(threads))}), and torch.profiler "
        "does not record their ops"
        if threads
        else ""
    )


def _no_match(pattern: str, seen: Iterable[str], ranges: Iterable[str]) -> str:
    seen = list(seen)
    close = closest_names(pattern, seen)
    ranges = list(ranges)
    cased = [name for name in ranges if name.lower() == pattern.strip().lower()]
    near_range = cased or ([] if close else closest_names(pattern, ranges, limit=1))
    if near_range:
        hint = f"; a range of a close name ran: {shown_name(near_range[0])} (a record_function block: assert_range_below checks it)"
    elif close:
        hint = f"; closest: {', '.join(close)}"
    elif seen:
        hint = f"; no similar name; the costliest ops were {', '.join(seen[:3])}"
    else:
        hint = "; the profile has no ops at all"
    return f"{asked(pattern)}: no op of that name ran in the measured code{hint}"


def _shown_pattern(pattern: str) -> str:
    """A pattern as an error line quotes it: spaces around it visible, at most 60 characters."""
    return shown_value(pattern) if pattern != pattern.strip() or len(pattern) > 60 else shown_name(pattern)


def _cut(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + ELLIPSIS


ASKED = 100  # characters of a name asked for (an assertion's op, glob or range) that a message echoes


def asked(pattern: str) -> str:
    """A name or glob the test asked for, as its message leads with it: shown_name, cut to
    ASKED characters (a trial's 4,000-character name made a 4,084-character failure line). An op
    name with letters that are not ASCII says which: an audit's `aten::\u0430ddmm` (a Cyrillic a)
    was told `did you mean aten::addmm?`, two names that look the same."""
    shown = _cut(shown_name(pattern), ASKED)
    odd = sorted({c for c in pattern if not c.isascii() and c.isprintable()})  # shown_name escapes the rest
    if "::" not in pattern or not odd:  # a range's name may be any text; an op's is ASCII
        return shown
    letters = ", ".join(f"{c!r} U+{ord(c):04X}" for c in odd[:3])
    return f"{shown} (it holds {letters}, not ASCII as op names are)"


def selects_nothing(pattern: str, where: str, seen: Iterable[str], what: str) -> str:
    """`opprof ... --op PATTERN` that matches no name in what was read."""
    bare = without_overload(pattern)
    close = [bare] if bare in set(seen) else closest_names(pattern.strip(), seen)
    if pattern.endswith(ELLIPSIS):  # copied from a table, which cuts long names
        hint = f"names ending in … are cut in the tables: give a glob such as {_cut(pattern[:-1] + '*')!r}"
    elif close:
        hint = f"closest: {', '.join(_cut(shown_name(name)) for name in close)}"
    else:
        hint = "give an exact name or a glob such as 'aten::*mm'"
    return f"--op {_shown_pattern(pattern)}: matches no {what} in {where}; {hint}"


def chooses_no_op(pattern: str, where: str, what: str, launchers: list[str]) -> str:
    """`opprof compare --op PATTERN` that matches kernels or memory ops but no op: compare judges ops."""
    fix = f"choose the ops that launched them ({', '.join(launchers[:3])})" if launchers else "choose an op"
    return (
        f"--op {_shown_pattern(pattern)}: matches {what} but no op in {where}; compare judges ops, "
        f"with the kernels they launched: {fix}"
    )


def a_range_not_an_op(pattern: str, assertion: str) -> str:
    """An op assertion given a record_function range's name."""
    return (
        f"{asked(pattern)}: a range (a record_function block or annotation), not an op; "
        f"{assertion}({repr(pattern) if len(pattern) <= ASKED else 'name'}, ...) checks it"
    )


def no_range(pattern: str, seen: Iterable[str], is_op: bool, compiled: bool = False) -> str:
    """No range of that name: an op of that name, the closest ranges, or that there were none;
    and that torch.compile drops the blocks inside compiled code, where it ran."""
    seen = list(seen)
    close = closest_names(pattern, seen)
    dropped = (
        "; compiled code ran here, and torch.compile drops record_function blocks inside it (put the "
        "block around the compiled call)"
        if compiled and not is_op
        else ""
    )
    return _no_range_hint(pattern, seen, close, is_op) + dropped


def _no_range_hint(pattern: str, seen: list[str], close: list[str], is_op: bool) -> str:
    if is_op:
        hint = "; it is an op: assert_op_below checks it"
    elif close:
        hint = f"; closest: {', '.join(close)}"
    elif seen:
        hint = f"; the ranges were {first_three(seen)}"
    else:
        hint = "; the profile has no ranges (torch.profiler.record_function blocks) at all"
    return f"{asked(pattern)}: no range of that name ran in the measured code{hint}"


def unknown_op_name(op: str, close: list[str]) -> str:
    """An op name torch does not know, refused in a plain run (with --opprof, the assertion says it)."""
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{asked(op)}: {_not_known(op)}{hint}"


def near_miss(pattern: str, ran: list[str], claim: str | None = "asserting it is absent", glob: bool = False) -> str:
    """An absence asserted (or, `claim` None, a count or a time limit) with a name or glob that
    misses an op that ran only by letter case, spaces or the namespace (assertions.near_misses)."""
    hint = "write the glob in the names' own letters" if glob else f"did you mean {ran[0]}?"
    proves = f", so {claim} proves nothing" if claim else ""
    return (
        f"{asked(pattern)}: no op of exactly that name ran, but {first_three(ran)} did (names match "
        f"exactly: letter case, spaces and the `aten::` namespace count){proves}; {hint}"
    )


def a_range_in_other_letters(pattern: str, ranges: list[str], claim: str = "asserting it is absent") -> str:
    """An absence asserted with the name of a range that ran, in other letter case (a trial's
    assert_no_op("my_block") passed beside the range my_Block)."""
    return (
        f"{asked(pattern)}: no op of that name ran, but the range {first_three(ranges)} did (a record_function "
        f"block, not an op), so {claim} proves nothing; assert_range_below checks ranges"
    )


def unseen_on_other_threads(pattern: str, threads: Sequence[str], claim: str = "asserting it is absent") -> str:
    """An absence asserted where other Python threads ran the capture's work, whose ops
    torch.profiler does not record (a trial's `aten::_to_copy` ran on one, and assert_no_op passed)."""
    return (
        f"{asked(pattern)}: no op of that name ran on the thread that runs the steps, but other Python threads "
        f"ran the capture's work ({first_three(list(threads))}) and torch.profiler does not record their ops, so "
        f"{claim} proves nothing; run that work on the calling thread (a thread of no torch work: start it before "
        "the capture)"
    )


def unknown_op(pattern: str, close: list[str], claim: str = "asserting it is absent") -> str:
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{asked(pattern)}: {_not_known(pattern)}, so {claim} proves nothing{hint}"


def _not_known(pattern: str) -> str:
    return "matches no operator torch knows" if is_glob(pattern) else "not an operator torch knows"


def unknown_dtype(value: object) -> str:
    """An assertion's dtype= that names no dtype opprof knows the profiler's name of."""
    return (
        f"dtype={shown_value(value)}: not a dtype opprof can find in the profiler's inputs; pass a torch dtype "
        "(torch.bfloat16), its name ('bfloat16', 'torch.half') or the name the inputs give it ('c10::BFloat16')"
    )


UNREAD_NOT_RUN = "it did not run where inputs were recorded: run()'s one call of fn after the steps"
UNREAD_LIST = "it took a list of tensors, whose dtypes the profiler does not give"
UNREAD_PACKED = "it took packed weights, whose dtype the profiler does not give"


def unread_other_calls(in_steps: float, recorded: float) -> str:
    """Why an op's dtypes cannot be told: the call that recorded inputs made other calls of it."""
    return f"it made {count_text(in_steps)} calls a step, {count_text(recorded)} where inputs were recorded"


def dtype_unread(pattern: str, dtype: str, unread: Sequence[tuple[str, str]], glob: bool) -> str:
    """dtype= where an op ran calls whose dtypes cannot be told (`unread`: (op, why)): never a pass."""
    name, why = unread[0]
    more = f" (and {count_of(len(unread) - 1, 'more op')})" if len(unread) > 1 else ""
    fix = (
        "assert the ops you mean by name, one assertion each (a glob cannot leave one out), or without dtype="
        if glob
        else "assert on it without dtype="
    )
    return (
        f"{asked(pattern)}: {name} ran on inputs whose dtypes cannot be told ({why}){more}, so whether a call took "
        f"{dtype_words(dtype)} inputs cannot be either; {fix}"
    )


def memory_op_dtype(pattern: str) -> str:
    """dtype= on a name or glob of memory copies, whose bytes have no dtype."""
    return (
        f"{asked(pattern)}: it names memory copies, whose bytes have no dtype the profiler gives; assert on the op "
        "that makes the copy (aten::copy_, aten::_to_copy) with dtype=, or on the copy without it"
    )


def count_mismatch(
    pattern: str,
    per_step: Sequence[float],
    expected: str,
    contexts: Iterable[str] = (),
    unit: str = "calls",
    on: str = "",
    steps: str = "per step",
) -> str:
    """`aten::addmm: 3 calls/step, expected 2 (per step: 3, 3; in aten::linear; inputs float[64,256], ...)`;
    `on`: which calls (` on float (torch.float32) inputs`), `steps`: what the figures are of."""
    counts = [int(c) for c in per_step]
    shown = sorted(set(counts))
    got = str(shown[0]) if len(shown) == 1 else f"{min(counts)}-{max(counts)}"
    figures = ", ".join(map(str, counts[:10])) + (", ..." if len(counts) > 10 else "")
    where = "".join(f"; {c}" for c in contexts if c)
    return f"{asked(pattern)}: {got} {unit}/step{on}, expected {expected} ({steps}: {figures}{where})"


def unexpected_ops(pattern: str, found: list[tuple[str, str, str]], on: str = "") -> str:
    """`aten::_to_copy: expected no calls, found aten::_to_copy (1/step, in aten::to <- aten::div_; inputs long int[])`;
    `found`: (name, its calls as units.calls_text says them, where it ran); `on`: which calls
    (` on c10::BFloat16 (torch.bfloat16) inputs`)."""
    listed = ", ".join(f"{name} ({calls}{', ' + where if where else ''})" for name, calls, where in found)
    return f"{asked(pattern)}: expected no calls{on}, found {listed}"


def host_syncs(found: list[tuple[str, str, str]], cpu_only: bool = False) -> str:
    """`host-device syncs: aten::item (12/step, called from Python inside Optimizer.step#Adam.step)`;
    on a CPU-only capture, what its scalar reads mean (`found` as unexpected_ops takes it)."""
    listed = ", ".join(f"{name} ({calls}{f', {where}' if where else ''})" for name, calls, where in found)
    note = (
        "; a CPU-only capture: these reads wait for no device here, and sync where their tensor is on one "
        "(a scalar kept on the CPU, such as a non-capturable optimizer's step count, never does)"
        if cpu_only
        else ""
    )
    return f"host-device syncs: {listed}{note}"


def untrusted_earlier(capture: int, errors: list[str]) -> str:
    """An earlier capture of the test could not be trusted, and assertions made after it were skipped."""
    return (
        f"opprof: capture {capture} of this test cannot be trusted, so the assertions made after it were not "
        "checked: " + "; ".join(errors)
    )


def ran_no_op_in_run(fn: object, steps: int, result: object = None, call: str = "opprof.run") -> str:
    """Why a run() (or measure()) recorded nothing: fn ran no torch operator (and, where its result
    says why, that: a trial's fn returned a generator, and the line named only what fn might have done)."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    ran = f"{call}()'s fn ({shown_name(str(name))}) ran no torch operator in its {count_of(steps, 'profiled step')}"
    lazy = _lazy_result(result)
    if lazy:
        what, fix = lazy
        return f"{ran}: it returned {what}, whose work had not run; make fn do the work: pass {fix}"
    return (
        f"{ran}: check that it calls the model, and does not return what would (a generator, a lambda), nor hand it "
        "to another thread or process (threading, a pool, multiprocessing, mp.spawn: the profiler records only the "
        f"thread that calls {call.rsplit('.', 1)[-1]}())"
    )


def _lazy_result(result: object) -> tuple[str, str] | None:
    """What a result is, and the fn that would do its work, where it holds work not done yet (a
    generator, a coroutine, a lazy iterator, a function), else None."""
    if inspect.isgenerator(result) or isinstance(result, (map, filter, zip)):
        return f"a {type(result).__name__}", "lambda: list(fn(...))"
    if inspect.iscoroutine(result):
        return "a coroutine", "lambda: asyncio.run(fn(...))"
    if inspect.isfunction(result) or isinstance(result, functools.partial):
        return "a function", "lambda: fn(...)()"
    return None


RAN_NO_OP_IN_BLOCK = (
    "the `with opprof.capture():` block ran no torch operator: put the model's call inside it, on the test's "
    "own thread (the profiler records that thread: a model run in another thread or process is not seen)"
)


RAN_NO_OP_IN_BODY = (
    "the test's body ran no torch operator, and called neither opprof.run() nor opprof.capture(): "
    "measure the model with opprof.run(fn, *args) (the profiler records the test's own thread: a model run in "
    "another thread or process is not seen), or where the test has nothing to measure (no GPU, say) "
    "call pytest.skip(reason) instead of returning"
)


def ran_no_op_in_body(asked_by: str | None) -> str:
    """RAN_NO_OP_IN_BODY, or, where the test does not ask for opprof itself, naming the fixture
    that does (an autouse one measured a trial's torch-free tests too)."""
    if asked_by is None:
        return RAN_NO_OP_IN_BODY
    return (
        "the test's body ran no torch operator, and called neither opprof.run() nor opprof.capture(); the test "
        f"does not ask for opprof itself, its fixture {asked_by!r} does, so the test is measured: ask for opprof "
        "in the tests that measure (not in an autouse fixture), or call pytest.skip(reason) in this one"
    )


def untrusted_measurement(errors: list[str]) -> str:
    return "opprof: the measurement cannot be trusted, so its assertions were not checked: " + "; ".join(errors)
