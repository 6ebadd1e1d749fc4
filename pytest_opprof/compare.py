"""A measurement vs its baseline -> verdicts. Pure: both sides are baseline documents.

In order of trust (the time rule in timing.py, the machine's excuses in excuses.py, the records in
verdicts.py):
1. structure (exact): an op's calls per step changed, an op appeared or vanished;
2. work (exact): an op's input signatures, FLOPs, kernels or copied bytes per step changed, or
   the test ran its ops on another number of torch threads than its baseline;
3. time: an op's per-step minimum moved beyond the tolerance and the floor, the fastest half of
   the steps says the move is real, and the machine cannot explain it; otherwise inconclusive.
   The steps' wall time is judged the same way on what the slower ops do not account for (time
   outside the operators);
4. environment: device key or software versions differ (reported).

Why the minimum, why "inconclusive" instead of a widened limit: docs/design.md.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from functools import partial
from statistics import median
from typing import Any, TypeVar

from .analysis import inputs_text
from .analysis.compiled import COMPILED_CODE, FX_GRAPH, REGION
from .device import same_device_key
from .documents import BaselineDoc, KernelEntry, KernelShare, MemoryEntry, OpEntry, WorkEntry
from .dtypes import dtype_words, profiler_dtype
from .errors import ONE_SIDE_COMPILED, closest_names, compiled_regions_moved, sizes_as_numbers, state_kept
from .events import TENSOR_LIST
from .excuses import recorded_under_load, same_thread_setup, setup_changes, thread_setup, threads_differ
from .opnames import inductor_kernel_stem
from .rules import ENVIRONMENT, STRUCTURE, WORK, Rule
from .timing import AROUND_CHANGE_FIX, RANGE_FIX, time_verdicts, untimed_why
from .units import count_of, count_text, first_three, stored_ms_text
from .verdicts import (
    CHANGED,
    MIN_TIME_STEPS,
    SOMETIMES_STEPS,
    STEP_WALL,
    UNPLACED,
    Change,
    Comparison,
    Differs,
    Ignore,
    Machine,
    Places,
    Verdict,
    ignored,
    median_calls,
    step_cost_ms,
    steps_run,
)

EVERY_CHANGE = "-v or --opprof-json lists every change"  # the plugin's; opprof compare names its own flag


def compare(
    current: BaselineDoc,
    baseline: BaselineDoc,
    rule: Rule,
    path: str = "",
    machine: Machine | None = None,
    every_change: str = EVERY_CHANGE,
    places: Places | None = None,
) -> Comparison:
    """Verdicts for `current` against `baseline`, both baseline documents. Time is judged only for
    ops whose structure and work are unchanged, and only where `machine` cannot explain a move.
    `every_change`: where a structure verdict's capped list of changes sends the reader for all;
    `places`: where an op ran in the current measurement, said of an op it added, and of one whose
    calls moved where they ran in several places."""
    where = f" [{path}]" if path else ""
    unread = {FX_GRAPH} if graph_call_unread(current, baseline) else set()  # not compared
    structure, recounted = _structure(current, baseline, rule, where, unread, every_change, places)
    threads = _threads_set_by_test(current, baseline, where)
    work = threads + _dtypes_swapped(current, baseline, _work(current, baseline, rule, recounted, where), where)
    structure, work = _state_said_once(structure, work, {*baseline.unrepeated, *current.unrepeated}, where)
    untimed = untimed_why(current, baseline)
    skip = recounted | {v.op for v in work if v.op}
    if threads:  # its CPU times moved with the threads: the work verdict says why
        skip |= {name for name, op in current.ops.items() if not op.on_device}
    timed = [] if untimed else time_verdicts(current, baseline, rule, machine or Machine(), skip, where)
    if structure or any(v.op for v in work):  # an op around a changed one takes its time: not the machine's range
        timed = [replace(v, fix=AROUND_CHANGE_FIX) if v.fix == RANGE_FIX else v for v in timed]
    verdicts = tuple(structure + work + timed + _environment(current, baseline, where))
    return Comparison(
        verdicts,
        untimed,
        ignores(current, baseline, rule),
        _lists_unrecorded(current, baseline),
        recorded_under_load(current, baseline),
        work_unrecorded(current, baseline, unread),
        baseline.steps < MIN_TIME_STEPS <= current.steps,
        bool(unread),
        (current.kernels_dropped, baseline.kernels_dropped),
        _grad_unrecorded(current, baseline),
    )


def exact_verdicts(
    current: BaselineDoc, baseline: BaselineDoc, kernels: bool = True, every_change: str = EVERY_CHANGE
) -> list[Verdict]:
    """`opprof compare`'s structure, work and environment verdicts of `current` (B) against
    `baseline` (A), as the plugin gives them (its time rule is sidebyside's); without the kernels'
    names where `kernels` is False (two devices launch their own kernels by design: every op of a
    T4 vs A10 comparison would read as changed). Work verdicts are the ops' only: a thread count
    is told as a warning there."""
    if not kernels:
        current, baseline = _without_kernels(current), _without_kernels(baseline)
    return [
        v
        for v in compare(current, baseline, Rule(), every_change=every_change).verdicts
        if v.kind in (STRUCTURE, ENVIRONMENT) or (v.kind == WORK and v.op)
    ]


def _without_kernels(doc: BaselineDoc) -> BaselineDoc:
    ops = {
        name: replace(op, work=replace(op.work, kernels={})) if op.work is not None else op
        for name, op in doc.ops.items()
    }
    return replace(doc, ops=ops)


def graph_call_unread(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """Whether the baseline holds compiled code but not its graph calls as this run reads them: a
    file recorded before pytest-opprof read `## Call CompiledFxGraph` as an op where torch writes
    it as an annotation (a single-step capture; the untimed step run() takes the work from; torch
    2.9). Its CompiledFxGraph, added or without work, is no change of the code (a review: every
    such test failed as `+ CompiledFxGraph` after the upgrade)."""
    new, old = current.ops.get(FX_GRAPH), baseline.ops.get(FX_GRAPH)
    if new is None or REGION not in baseline.ops:
        return False
    return old is None or (old.work is None and new.work is not None)


def ignores(current: BaselineDoc, baseline: BaselineDoc, rule: Rule) -> tuple[Ignore, ...]:
    """What each ignore glob matched among the names it applies to: ops, memory ops, the wall."""
    names = {*current.ops, *baseline.ops, *current.memory_ops, *baseline.memory_ops}
    found = []
    for glob in rule.ignore_ops:
        matched = fnmatch.fnmatchcase(STEP_WALL, glob) or any(fnmatch.fnmatchcase(n, glob) for n in names)
        near = None if matched else next(iter(closest_names(glob, [*sorted(names), STEP_WALL], limit=1)), None)
        found.append(Ignore(glob, matched, near))
    return tuple(found)


# -- 1. structure ------------------------------------------------------------------------------


def _structure(
    current: BaselineDoc,
    baseline: BaselineDoc,
    rule: Rule,
    where: str,
    unread: Collection[str] = (),
    every_change: str = EVERY_CHANGE,
    places: Places | None = None,
) -> tuple[list[Verdict], set[str]]:
    """One verdict listing every op and memory op whose calls per step changed, the costliest
    first (a trial's vanished attention op sat in `and 4 more` behind alphabetical small ones);
    and their names. An added op says where it ran (`places`: a CI log's `+ aten::item (1/step)`
    named no caller; the baseline keeps none to say where a removed one ran)."""
    changes: list[Change] = []
    names: set[str] = set()
    sections: tuple[tuple[Mapping[str, OpEntry | MemoryEntry], Mapping[str, OpEntry | MemoryEntry]], ...] = (
        (current.ops, baseline.ops),
        (current.memory_ops, baseline.memory_ops),
    )
    for new_ops, old_ops in sections:
        for name in sorted(set(new_ops) | set(old_ops)):
            if ignored(name, rule.ignore_ops) or name in unread:
                continue
            here = places if places is not None and name in current.ops else UNPLACED
            change = _change(name, new_ops.get(name), old_ops.get(name), partial(here.added, name))
            if change is not None and change.was and change.now and (spread := here.spread(name)):
                change = replace(change, text=f"{change.text} ({spread})")
            if change is not None:
                names.add(name)
                changes.append(change)
    if not changes:
        return [], names
    changes = _renumbered(changes)
    changes.sort(key=lambda c: (-c.ms, c.op))
    shown = ", ".join(c.text for c in changes[:MAX_LISTED])
    more = f" and {len(changes) - MAX_LISTED} more ({every_change})" if len(changes) > MAX_LISTED else ""
    mode = DISPATCH_MODE_HINT if DISPATCH_MODE in set(current.ops) - set(baseline.ops) else ""
    causes = [c for c in (_compiled_hint(current, baseline, rule), _precision_clause(current, baseline, changes)) if c]
    if causes:  # the cause first: a compile trial's sat past 12 ops, an LLM trial's bf16 behind 7 incidental ones
        shown = f"{'; '.join(causes)}; the ops: {shown}"
    mode += _threads_clause(current, baseline)  # a verdict trial's one thread read as a structure change first
    return [
        Verdict(STRUCTURE, CHANGED, f"structure changed: {shown}{more}{mode}{where}", changes=tuple(changes))
    ], names


def _dtypes_swapped(current: BaselineDoc, baseline: BaselineDoc, work: list[Verdict], where: str) -> list[Verdict]:
    """Where the inputs of several ops whose work changed went from some dtypes to others as a
    whole (no input of the old ones left in them, none of the new ones before), one clause on the
    first op's verdict says so: a precision trial's autocast bf16 -> fp16 read `work changed in
    11 ops: aten::linear: inputs (c10::BFloat16[16,64], ...) -> (c10::Half[16,64], ...)`, and the
    other ten in JSON only."""
    ops = {v.op: (_input_dtypes(baseline, v.op), _input_dtypes(current, v.op)) for v in work if v.op}
    was, now = set().union(*(old for old, _ in ops.values())), set().union(*(new for _, new in ops.values()))
    gone, came = sorted(was - now), sorted(now - was)
    swapped = sum(1 for old, new in ops.values() if old & was - now and new & now - was)  # not shapes alone
    if swapped < 2:
        return work
    which = f"all {len(ops)}" if swapped == len(ops) else f"{swapped} of the {len(ops)}"
    clause = (
        f"; the inputs of {which} ops whose work changed went from {', '.join(map(dtype_words, gone))} to "
        f"{', '.join(map(dtype_words, came))}"
    )
    at = next(i for i, v in enumerate(work) if v.op)
    first, threads = work[at], _threads_clause(current, baseline)  # the thread count's clause ends each op's
    message = first.message.removesuffix(where).removesuffix(threads) + clause + threads + where
    return [*work[:at], replace(first, message=message), *work[at + 1 :]]


def _input_dtypes(doc: BaselineDoc, name: str) -> set[str]:
    """The dtypes an op's recorded inputs took (profiler names, `c10::BFloat16`), not `Scalar`,
    lists or a None's empty name."""
    work = doc.ops[name].work if name in doc.ops else None
    signatures = work.signatures if work is not None else ()
    return {d for sig in signatures for d in sig.dtypes if profiler_dtype(d) is not None}


def _state_said_once(
    structure: list[Verdict], work: list[Verdict], varied: set[str], where: str
) -> tuple[list[Verdict], list[Verdict]]:
    """The clause that run()'s fn keeps state (state_kept), once per test: on the structure verdict
    where it changed in ops whose work varied when either side was recorded, else on the first op's
    work verdict where such an op's work changed (a review read it in full on each of a test's lines)."""
    if named := list(dict.fromkeys(c.op for v in structure for c in v.changes if c.op in varied)):
        return [_stating(structure[0], named, where), *structure[1:]], work
    if named := [v.op for v in work if v.op in varied]:
        at = next(i for i, v in enumerate(work) if v.op)  # not the test's thread-count verdict
        return structure, [*work[:at], _stating(work[at], named, where), *work[at + 1 :]]
    return structure, work


def _stating(verdict: Verdict, ops: list[str], where: str) -> Verdict:
    """The verdict with state_kept's clause before its file."""
    return replace(verdict, message=verdict.message.removesuffix(where) + state_kept(first_three(ops)) + where)


def _renumbered(changes: list[Change]) -> list[Change]:
    """A kernel gone and one added that differ by their index in the graph only, at the same calls:
    the same kernel renumbered (a graph break made it the first of the resumed graph: a compile
    trial read `- cpp_fused_add_relu_1 (was 1/step), + cpp_fused_add_relu_0 (...)`): one change,
    of the new name, its calls the same on both sides."""
    gone = {(stem, c.was): c for c in changes if not c.now and (stem := inductor_kernel_stem(c.op))}
    paired: dict[str, Change] = {}
    for c in changes:
        stem = inductor_kernel_stem(c.op) if not c.was else None
        old = gone.pop((stem, c.now), None) if stem else None
        if old is not None:
            text = f"{old.op} -> {c.op} ({count_text(c.now)}/step: the same kernel, renumbered in its graph)"
            paired[old.op] = paired[c.op] = Change(c.op, old.was, c.now, max(c.ms, old.ms), text, old.op)
    return [paired.get(c.op, c) for c in changes if paired.get(c.op, c).op == c.op]  # the pair once, as the new name


def _change(
    name: str, new: OpEntry | MemoryEntry | None, old: OpEntry | MemoryEntry | None, place_of: Callable[[], str]
) -> Change | None:
    """One op's change of calls, or None: its median calls per step moved (`aten::mm 2 -> 3/step`,
    `+ aten::clone (1/step, called from Python)`, `- aten::bmm (was 2/step)`, or `... -> 0/step (now in
    3 of 10 steps)` where it still runs in some), it ran in some steps of one side only, or in some
    steps of both with other calls there (a trial's 1 -> 8 calls in 3 of 10 steps passed in silence).
    `place_of`: where it ran in this measurement, asked of an op it added only."""
    new_calls, old_calls = (median_calls(e) if e is not None else 0 for e in (new, old))
    ms = _median_ms(old if old is not None else new)  # the baseline's: a stable order
    if new_calls == old_calls:
        if new is not None and old is not None:
            return _calls_where_ran(name, new, old, ms) or _counts_moved(name, new, old, ms)
        if not _sometimes_on_one_side(new, old):
            return None
        entry = new if new is not None else old
        assert entry is not None
        place = place_of() if new is not None else ""
        return Change(name, 0.0, 0.0, step_cost_ms(entry), _sometimes(name, entry, new is not None, place))
    if not old_calls and old is not None and steps_run(old):  # it ran in some baseline steps: not added
        text = f"{name} 0 -> {count_text(new_calls)}/step (was in {_ran_in(old)})"
    elif not old_calls:
        place = place_of()
        text = f"+ {name} ({count_text(new_calls)}/step{', ' + place if place else ''})"
    elif not new_calls and new is not None and steps_run(new):  # it still runs in some steps: not removed
        text = f"{name} {count_text(old_calls)} -> 0/step (now in {_ran_in(new)})"
    elif not new_calls:
        text = f"- {name} (was {count_text(old_calls)}/step)"
    else:
        text = f"{name} {count_text(old_calls)} -> {count_text(new_calls)}/step"
    return Change(name, float(old_calls), float(new_calls), ms, text)


def _ran_in(entry: OpEntry | MemoryEntry) -> str:
    """`3 of 10 steps`."""
    return f"{steps_run(entry)} of {len(entry.calls_per_step)} steps"


def _calls_where_ran(name: str, new: OpEntry | MemoryEntry, old: OpEntry | MemoryEntry, ms: float) -> Change | None:
    """An op both sides ran in some steps only (their medians 0) whose calls in those steps
    moved past x2 every step of the other side: `aten::mm 1 -> 8/step where it ran (3 of 10 steps;
    was 3 of 10 steps)`. Counts the sides share, or near ones, are not: an optimizer's scalar reads,
    3 in one step and 2 in another, gave 3 -> 2 where `-k` moved the window over the loop."""
    if median_calls(new) or min(steps_run(new), steps_run(old)) < SOMETIMES_STEPS:
        return None
    old_ran, new_ran = ([c for c in e.calls_per_step if c] for e in (old, new))
    if not (min(new_ran) > 2 * max(old_ran) or min(old_ran) > 2 * max(new_ran)):
        return None  # counts in common, or near: which steps fall in the window moves them (a review's -k run)
    was, now = median(old_ran), median(new_ran)
    text = f"{name} {count_text(was)} -> {count_text(now)}/step where it ran ({_ran_in(new)}; was {_ran_in(old)})"
    return Change(name, float(was), float(now), ms, text)


def _counts_moved(name: str, new: OpEntry | MemoryEntry, old: OpEntry | MemoryEntry, ms: float) -> Change | None:
    """Per-step counts the median hides: a count one side made in SOMETIMES_STEPS steps or more that
    no step of the other made, past x2 of every count there (a data trial's early exit never taken
    any more: aten::linear 14, 14, 2 -> 14, 14, 14 kept its median and passed). Counts near the
    other side's are not: which steps fall in the window moves them (`-k`, warmup=)."""
    was, now = Counter(old.calls_per_step), Counter(new.calls_per_step)

    def far(counts: Counter[float], others: Counter[float]) -> list[float]:
        return sorted(c for c, k in counts.items() if k >= SOMETIMES_STEPS and all(_far(c, o) for o in others))

    gone, came = far(was, now), far(now, was)
    if not gone and not came:
        return None
    steps = len(old.calls_per_step) if gone else len(new.calls_per_step)
    count = gone[0] if gone else came[0]
    where = (
        f"{count_text(count)}/step in {was[count]} of {steps} baseline steps, in no step now"
        if gone
        else f"{count_text(count)}/step in {now[count]} of {steps} steps now, in no baseline step"
    )
    median_now = count_text(median_calls(new))
    text = f"{name} per step {_some_counts(old)} -> {_some_counts(new)} ({where}; the median {median_now} the same)"
    return Change(name, median_calls(old), median_calls(new), ms, text)


def _far(a: float, b: float) -> bool:
    """Whether two per-step counts are past x2 apart (0 is far from any other)."""
    return a != b and (min(a, b) == 0 or max(a, b) > 2 * min(a, b))


def _some_counts(entry: OpEntry | MemoryEntry, shown: int = 6) -> str:
    """`14, 14, 2, 14, 14, 2, ...`: an entry's first per-step counts."""
    counts = [count_text(c) for c in entry.calls_per_step]
    return ", ".join(counts[:shown]) + (", ..." if len(counts) > shown else "")


def _compiled_hint(current: BaselineDoc, baseline: BaselineDoc, rule: Rule) -> str:
    """What a change in the compiled regions per step means, in words (a trial read `Torch-Compiled
    Region 1 -> 2/step` and `- Torch-Compiled Region` among op names and had to work it out)."""
    if ignored(REGION, rule.ignore_ops):
        return ""
    old, new = _regions_per_step(baseline), _regions_per_step(current)
    return "" if old == new else compiled_regions_moved(old, new, count_text(old), count_text(new))


def _regions_per_step(doc: BaselineDoc) -> float:
    return median_calls(doc.ops[REGION]) if REGION in doc.ops else 0


def compiled_on_one_side(current: BaselineDoc, baseline: BaselineDoc, rule: Rule) -> bool:
    """Whether compiled code ran on one side only, as the structure verdict says it (not where
    its regions are ignored): its ops' calls (out= forms, decompositions) are not the eager code's."""
    if ignored(REGION, rule.ignore_ops):
        return False
    return bool(_regions_per_step(current)) != bool(_regions_per_step(baseline))


def _median_ms(entry: OpEntry | MemoryEntry | None) -> float:
    """An op's median time per step (device time where it ran on a device), 0 where absent."""
    if entry is None:
        return 0.0
    samples = entry.time_samples if isinstance(entry, OpEntry) else entry.device_ms
    return float(median(samples)) if samples else 0.0


DISPATCH_MODE = "PythonDispatchMode"  # the profiler's event of a TorchDispatchMode handling an op


DISPATCH_MODE_HINT = (
    "; a TorchDispatchMode now runs (PythonDispatchMode): the profiler records each op it handles and "
    "calls again, so counts double without more work"
)


MAX_LISTED = 12  # changes a structure verdict names; a baseline of 20k made-up ops made a 600 KB line


def _sometimes_on_one_side(new: Any, old: Any) -> bool:
    """An op that one side ran in some steps (2 or more: a background thread's op landing in one
    step by its timing is not the code's structure; a costly one is a time verdict) and the
    other never (`new`, `old`: its entries, None where a side has none)."""
    if (new is None) == (old is None):
        return False
    return steps_run(new if new is not None else old) >= SOMETIMES_STEPS


def _sometimes(name: str, entry: OpEntry | MemoryEntry, added: bool, place: str = "") -> str:
    """An op that ran in some steps of one side only: `+ aten::matmul (in 2 of 10 steps, up to
    0.850 ms a step, called from Python)`: its cost in its costliest step (its median per step is
    0: a diagnosis trial's added matmul read as costing nothing) and, added, where it ran."""
    steps = f"in {steps_run(entry)} of {len(entry.calls_per_step)} steps, up to {stored_ms_text(step_cost_ms(entry))} ms a step"
    return f"+ {name} ({steps}{', ' + place if place else ''})" if added else f"- {name} (was {steps})"


CAST_OPS = frozenset(
    {"aten::to", "aten::_to_copy", "aten::_autocast_to_reduced_precision", "aten::_autocast_to_full_precision"}
)


def _precision_clause(current: BaselineDoc, baseline: BaselineDoc, changes: list[Change]) -> str:
    """`the baseline's ops took c10::BFloat16 (torch.bfloat16) inputs, none here: ...` where casts
    changed and reduced-precision inputs ran on one side only (a training trial's autocast removed
    read as `aten::linear 4 -> 2/step, - aten::to (was 5/step), ...`: the cause was in the work
    lines). Both causes are named: a model moved to another dtype casts as autocast does (an LLM
    trial's `model.to(torch.bfloat16)` undone read as `autocast removed`)."""
    if not any(c.op in CAST_OPS for c in changes):
        return ""
    both = [
        n for n, e in current.ops.items() if e.work is not None and (o := baseline.ops.get(n)) and o.work is not None
    ]
    was, now = _reduced_types(baseline, both), _reduced_types(current, both)
    if was and not now:
        return (
            f"the baseline's ops took {', '.join(map(dtype_words, sorted(was)))} inputs, none here: the model or its inputs in another "
            "dtype now (model.to(...), a cast), or autocast removed (its casts and re-dispatched calls, an op "
            "called inside itself, were in these counts)"
        )
    if now and not was:
        return (
            f"the ops take {', '.join(map(dtype_words, sorted(now)))} inputs here, none in the baseline: the model or its inputs cast "
            "to it now (model.to(...), a cast), or autocast added (its casts and re-dispatched calls, an op "
            "called inside itself, are in these counts)"
        )
    return ""


_REDUCED = re.compile(r"^c10::(BFloat16|Half|Float8\w*)$")


def _reduced_types(doc: BaselineDoc, names: list[str]) -> set[str]:
    """The reduced-precision input types the named ops of the document took (their recorded work:
    ops whose work both sides hold, so a side that holds none, a schema-1 file or a trace without
    record_shapes, reads as no types of its own, not as none taken, a review's)."""
    return {
        dtype
        for name in names
        if (entry := doc.ops[name]).work is not None
        for signature in entry.work.signatures
        for dtype in signature.dtypes
        if _REDUCED.match(dtype)
    }


def _threads_clause(current: BaselineDoc, baseline: BaselineDoc) -> str:
    """`; torch ran on 1 thread, the baseline on 2: ...` where the thread counts differ: reductions
    split otherwise (a scale trial's OMP_NUM_THREADS=1, as the xdist note advises, failed 12 tests
    on `aten::zero_: inputs (float[2,2,32]) -> (float[2,1,32])`, no word of threads on their lines)."""
    if not threads_differ(current, baseline):
        return ""
    return (
        f"; torch ran on {count_of(current.threads or 0, 'thread')}, the baseline on {baseline.threads}: "
        "a thread count changes how some ops split their work"
    )


# -- 2. work -----------------------------------------------------------------------------------


def _work(current: BaselineDoc, baseline: BaselineDoc, rule: Rule, skip: set[str], where: str) -> list[Verdict]:
    """A verdict per op whose work changed (both sides recorded it; its call count did not change;
    of one whose calls differ between steps, only replaced inputs: _steady), those whose FLOPs
    changed first, each group the costliest first (the baseline's fastest step): the op that
    carries the step heads the failure, not an `aten::add` of 0.4% of it that sorts first by name
    (a trial's doubled LSTM), and `aten::addmm: 1.8x the FLOPs` before the 13 inputs of the
    transformer layer's fused op that called it (a trial's wider feed-forward)."""
    found = []
    threads = _threads_clause(current, baseline)
    cost = {name: min(entry.time_samples, default=0.0) for name, entry in baseline.ops.items()}
    flops = records_flops(current) and records_flops(baseline)
    for name in set(current.ops) & set(baseline.ops):
        new, old = current.ops[name].work, baseline.ops[name].work
        if name in skip or not new or not old or ignored(name, rule.ignore_ops):
            continue
        lists = current.list_shapes and baseline.list_shapes
        steady = _steady(current.ops[name]) and _steady(baseline.ops[name])
        lost = (current.ops[name].lost_per_step, baseline.ops[name].lost_per_step)
        parts = work_changes(new, old, lists, lost, flops) if steady else _inputs_replaced(new, old, lists)
        if parts and name in COMPILED_CODE and (sizes := _sizes_as_numbers(new, old)):
            parts = [part.replace(FULL_LEGEND, "") + sizes if part.startswith("inputs ") else part for part in parts]
        elif parts and compiled_on_one_side(current, baseline, rule):
            # a compile trial's read as a change of its own; and inside compiled code autograd
            # records the graph's call, not its ops: no forgotten no_grad()
            parts = [part for part in parts if not part.startswith(AUTOGRAD_WORDS)]
            parts[-1:] = [part + ONE_SIDE_COMPILED for part in parts[-1:]]
        if parts:
            flops_same = not steady or not flops or new.flops_per_step == old.flops_per_step
            found.append(
                (
                    (flops_same, -cost[name], name),
                    Verdict(WORK, CHANGED, f"{name}: {'; '.join(parts)}{threads}{where}", name),
                )
            )
    return [verdict for _, verdict in sorted(found, key=lambda f: f[0])]


def _sizes_as_numbers(new: WorkEntry, old: WorkEntry) -> str | None:
    """Why a compiled graph's inputs differ only by number inputs: the same tensors, and sizes
    passed as SymInts (`Scalar`) on one side, where Dynamo compiled the graph with dynamic
    shapes. It does so after a function ran with another shape in the process (automatic
    dynamic): a compile trial's test compiled dynamic after an earlier test's other batch size
    and static alone (`-k`, another xdist worker), and failed unchanged code. None otherwise."""

    def tensors(work: WorkEntry) -> list[str]:
        return sorted(
            json.dumps([[(s, d) for s, d in zip(sig.shapes, sig.dtypes) if d != "Scalar"], sig.calls_per_step])
            for sig in work.signatures
        )

    def numbers(work: WorkEntry) -> float:
        return sum(sig.dtypes.count("Scalar") * sig.calls_per_step for sig in work.signatures)

    if tensors(new) != tensors(old) or min(numbers(new), numbers(old)) or numbers(new) == numbers(old):
        return None  # the same tensors, and sizes as numbers on one side only (dynamic on both: the code's own change)
    return sizes_as_numbers(here=numbers(new) > numbers(old))


def _threads_set_by_test(current: BaselineDoc, baseline: BaselineDoc, where: str) -> list[Verdict]:
    """A work verdict when the capture ran on another number of torch threads on the same
    thread setup (CPUs, OMP_NUM_THREADS/MKL_NUM_THREADS): the project set them (torch.set_num_threads
    in the test, the code it calls, a conftest or an earlier test). Another setup is another
    machine: _environment says so."""
    if not threads_differ(current, baseline) or not same_thread_setup(current, baseline):
        return []
    message = (
        f"torch threads {baseline.threads} -> {current.threads} on the same machine setup ({thread_setup(current)}): "
        "torch.set_num_threads in the test, the code it calls, a conftest or an earlier test; "
        f"CPU times not compared{where}"
    )
    counts = Differs("torch threads", str(baseline.threads), str(current.threads))
    return [Verdict(WORK, CHANGED, message, differs=(counts,))]


def _steady(entry: OpEntry) -> bool:
    """Whether an op's recorded work stands for its steps: it made as many calls in every step,
    and in the call its inputs were read from (run()'s signature step, one call of fn). An op of
    an optimizer that steps every 4th call of a gradient-accumulation step does not: which call
    the inputs were read from decides what they hold, and `-k`, `warmup` or test order move it
    (a training trial's unchanged code failed with `aten::copy_: inputs (none) -> (float[],
    double[]) x6`). Its structure (calls per step) is still judged, and its work on replaced
    inputs only (_inputs_replaced)."""
    counts = set(entry.calls_per_step)
    if len(counts) > 1:
        return False
    if entry.work is None or not entry.work.signatures or not counts:
        return True
    read = sum(s.calls_per_step for s in entry.work.signatures)
    return math.isclose(read, counts.pop(), rel_tol=1e-6)


def _inputs_replaced(new: WorkEntry, old: WorkEntry, lists: bool) -> list[str]:
    """The work change of an op whose calls differ between steps (not _steady): only inputs one
    side lacks where the other has new ones. Which call its inputs were read from adds or drops
    signatures (an optimizer's `aten::add_` in one call of four), never replaces one; a forward
    `add_` whose bias went from [4] to [8,4], sharing the name, does (a review's case)."""
    sig_new, sig_old = _signatures(new, not lists), _signatures(old, not lists)
    gone = {k: v for k, v in sig_old.items() if k not in sig_new}
    came = {k: v for k, v in sig_new.items() if k not in sig_old}
    if not gone or not came:
        return []
    return [
        f"inputs {_listed(gone, came)} -> {_listed(came, gone)} (in the steps that ran it: its calls differ between "
        f"steps{'; ' + LEGEND if _legend(gone, came) else ''})"
    ]


def records_flops(doc: BaselineDoc) -> bool:
    """Whether a document's capture recorded FLOPs: some op has them. A trace of a profiler made
    without with_flops has none for any op, an addmm's neither: unknown, not 0 (a trial's plain
    torch.profiler trace against opprof's read `aten::addmm: FLOPs per step 0 -> 6.3M`, and
    `opprof compare --fail-on work` exited 1 on the same model)."""
    return any(op.work is not None and op.work.flops_per_step for op in doc.ops.values())


def work_changes(
    new: WorkEntry, old: WorkEntry, lists: bool = True, lost: tuple[float, float] = (0, 0), flops: bool = True
) -> list[str]:
    """What changed in one op's work, in words: FLOPs, input signatures, grad mode, kernels, bytes.
    `lists`: both sides hold the shapes of lists of tensors (else compared as unrecorded);
    `flops`: both sides recorded FLOPs (records_flops; else they are not compared);
    `lost`: the kernel records each side (new, old) lost under it per step, which explain as many
    fewer kernels on that side (_lost_explain)."""
    parts = []
    if flops and new.flops_per_step != old.flops_per_step:
        parts.append(_flops_change(old.flops_per_step, new.flops_per_step))
    sig_new, sig_old = _signatures(new, not lists), _signatures(old, not lists)
    if sig_new != sig_old:
        parts.append(f"inputs {_listed(sig_old, sig_new)} -> {_listed(sig_new, sig_old)}{_legend(sig_old, sig_new)}")
    if grad := _autograd_change(old.autograd_calls_per_step, new.autograd_calls_per_step):
        parts.append(grad)
    tables = (
        ("kernels", old.kernels, new.kernels, count_text),
        ("bytes per step", old.bytes_per_step, new.bytes_per_step, si),
    )
    for what, a, b, fmt in tables:
        if what == "kernels" and any(lost) and _lost_explain(b, a, lost):
            continue
        if a != b:
            changed = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
            shown = ", ".join(f"{n} {fmt(a.get(n, 0))} -> {fmt(b.get(n, 0))}" for n in changed[:3])
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            parts.append(f"{what}: {shown}{more}")
    return parts


AUTOGRAD_WORDS = ("autograd records its calls", "autograd no longer records its calls")


def _autograd_change(old: float | None, new: float | None) -> str | None:
    """Grad mode on as the op ran where it was off in the baseline, or the reverse: autograd
    recorded its calls (a sequence number) on one side only. A forgotten torch.no_grad() runs the
    same ops on the same inputs, only slower and keeping activations for a backward that never
    comes: a regression trial's passed 12 test runs of 12 on an MLP, a CNN and an attention block.
    Counts both sides record are not compared: which calls autograd records follows the code's
    structure, which the other verdicts judge. None where a side did not say (a file written before)."""
    if old is None or new is None or (old == 0) == (new == 0):
        return None
    if new:
        return (
            f"{AUTOGRAD_WORDS[0]} now ({count_text(old)} -> {count_text(new)}/step): grad mode was on as it "
            "ran, off in the baseline (a forgotten torch.no_grad() or torch.inference_mode()?)"
        )
    return (
        f"{AUTOGRAD_WORDS[1]} ({count_text(old)} -> 0/step): grad mode was off as it ran, on in the "
        "baseline (a torch.no_grad() around it, or grad mode left off by an earlier test?)"
    )


def _lost_explain(new: dict[str, float], old: dict[str, float], lost: tuple[float, float]) -> bool:
    """Whether kernel records a side lost explain how its kernels differ: only fewer on that side,
    and no more than it lost (a one-step capture that lost 4 of 6 read `sm90_gemm 6 -> 2`). A
    kernel the other side lacks, or more of one, is a change all the same."""
    names = set(new) | set(old)
    fewer_now = sum(max(0.0, old.get(n, 0) - new.get(n, 0)) for n in names)
    fewer_before = sum(max(0.0, new.get(n, 0) - old.get(n, 0)) for n in names)
    # a loss only takes records away: the side that lost more holds some of the other's, no others
    # (both sides losing 4 of 6 hid sm90_gemm renamed sm80_gemm, a review's)
    return (fewer_before == 0 and fewer_now <= lost[0]) or (fewer_now == 0 and fewer_before <= lost[1])


def _flops_change(old: float, new: float) -> str:
    """`1.8x the FLOPs per step (6.1k -> 11.0k)`; a change too small for 3 digits is given in
    more (a trial read `1x the FLOPs per step (32.8M -> 32.8M)` for a Linear of 1000 -> 1001)."""
    shown = (si(old), si(new))
    shown = shown if shown[0] != shown[1] else (f"{old:,.10g}", f"{new:,.10g}")
    if old and new:
        ratio = f"{new / old:.3g}"
        ratio = ratio if ratio != "1" else f"{new / old:.6g}"
        return f"{ratio}x the FLOPs per step ({shown[0]} -> {shown[1]})"
    return f"FLOPs per step {shown[0]} -> {shown[1]}"


def si(value: float) -> str:
    """134217728 -> 134.2M: counts and bytes at a glance."""
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:g}"


def work_unrecorded(current: BaselineDoc, baseline: BaselineDoc, unread: Collection[str] = ()) -> tuple[str, ...]:
    """The ops (in both, running alike in each step) whose work this run recorded and the
    baseline holds none of: a schema-1 file, or one edited (`"work": null`, or no `work`), whose
    work was never compared again and never said so (a CI trial's float -> double change passed)."""
    found = []
    for name in sorted(set(current.ops) & set(baseline.ops) - set(unread)):
        new, old = current.ops[name], baseline.ops[name]
        if new.work and new.work.signatures and old.work is None and _steady(new) and _steady(old):
            found.append(name)
    return tuple(found)


def _grad_unrecorded(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """Whether the baseline holds its ops' work without the calls autograd recorded (written by an
    earlier pytest-opprof) where this capture holds them: grad mode is not compared."""
    works = [(entry.work, baseline.ops[name].work) for name, entry in current.ops.items() if name in baseline.ops]
    pairs = [(new, old) for new, old in works if new is not None and old is not None]
    return any(new.autograd_calls_per_step is not None and old.autograd_calls_per_step is None for new, old in pairs)


def _lists_unrecorded(current: BaselineDoc, baseline: BaselineDoc) -> tuple[str, ...]:
    """The ops with a list-of-tensors input whose shapes are not compared: one side was recorded
    without them (capture.list_shapes false: an earlier pytest-opprof, or a torch without
    structured input shapes)."""
    if current.list_shapes and baseline.list_shapes:
        return ()
    found = []
    for name in sorted(set(current.ops) & set(baseline.ops)):
        new, old = current.ops[name].work, baseline.ops[name].work
        if new and old and any(TENSOR_LIST in sig.dtypes for sig in (*new.signatures, *old.signatures)):
            found.append(name)
    return tuple(found)


def _signatures(work: WorkEntry, blank_lists: bool = False) -> dict[str, tuple[str, float]]:
    """Input signature (exact: its shapes and types as JSON) -> (readable text, calls per step).
    `blank_lists`: tensor-list inputs as if unrecorded (`[]`), to compare with a side without them."""
    found: dict[str, tuple[str, float]] = {}
    for sig in work.signatures:
        shapes = sig.shapes
        if blank_lists:
            shapes = [[] if i < len(sig.dtypes) and sig.dtypes[i] == TENSOR_LIST else s for i, s in enumerate(shapes)]
        key = json.dumps([shapes, list(sig.dtypes)])
        calls = found.get(key, ("", 0.0))[1] + sig.calls_per_step
        found[key] = (inputs_text(_tuples(shapes), sig.dtypes), calls)
    return found


def _full_text(key: str) -> str:
    shapes, dtypes = json.loads(key)
    return inputs_text(_tuples(shapes), tuple(dtypes), full=True)


def _tuples(value: Any) -> Any:
    return tuple(map(_tuples, value)) if isinstance(value, list) else value


LEGEND = "every input shown: `-` an optional one not given, `Scalar` a number, `ScalarList` a list of them"
FULL_LEGEND = f" ({LEGEND})"


def _legend(old: dict[str, tuple[str, float]], new: dict[str, tuple[str, float]]) -> str:
    """FULL_LEGEND where _listed shows either side's signatures in full: their short texts read
    alike, the change is in what is not a tensor (an LLM trial read `aten::empty_strided: inputs
    (ScalarList, ScalarList, Scalar, Scalar, -, Scalar) x6 and (..., -, -) x2 -> ...` as noise)."""
    return FULL_LEGEND if _shown_in_full(old, new) or _shown_in_full(new, old) else ""


def _differ(these: dict[str, tuple[str, float]], others: dict[str, tuple[str, float]]) -> list[tuple[str, str, float]]:
    """The signatures of `these` that `others` lacks or calls differently: (key, text, calls)."""
    return [(key, text, calls) for key, (text, calls) in these.items() if others.get(key, (None, None))[1] != calls]


def _shown_in_full(these: dict[str, tuple[str, float]], others: dict[str, tuple[str, float]], limit: int = 2) -> bool:
    """Whether _listed shows one of `these` in full with an input its short text leaves out (a
    review's: same shapes moving between signatures needed no legend)."""
    other_texts = {text for text, _ in others.values()}
    full = [_full_text(key) for key, text, _ in _differ(these, others)[:limit] if text in other_texts]
    return any(_NOT_SHOWN.intersection(text.split(", ")) for text in full)


_NOT_SHOWN = frozenset({"-", "Scalar", "ScalarList"})  # the inputs a short signature text leaves out


def _listed(these: dict[str, tuple[str, float]], others: dict[str, tuple[str, float]], limit: int = 2) -> str:
    """The signatures of `these` that `others` lacks (or calls differently), with their calls;
    in full (every input position) where the short texts of the two sides would read alike."""
    differ = _differ(these, others)
    if not differ:
        return "(none)"
    other_texts = {text for text, _ in others.values()}
    shown = [
        f"({_full_text(key) if text in other_texts else text})" + (f" x{count_text(calls)}" if calls != 1 else "")
        for key, text, calls in differ[:limit]
    ]
    # `(a) and (b)`: side by side, `(a) (b)` read as one signature (a newcomer's trial)
    if len(differ) > limit:
        return ", ".join(shown) + f" and {len(differ) - limit} more"
    return " and ".join(shown)


# -- 4. environment ----------------------------------------------------------------------------


SOFTWARE_FACTS = ("torch", "cuda", "hip", "driver", "cuda_driver")


# read through NVML: null where it could not be read (a MIG instance before opprof found its GPU,
# no permission), which is no difference (an upgrade's every test read `driver none -> 550.54.15`)
NVML_READ = frozenset({"driver", "cuda_driver"})


# the hardware under one device key: a key names a GPU or a CPU architecture (every x86-64 CPU
# is `cpu-x86_64`), and a hook or --opprof-device-key may give several machines one key
HARDWARE_FACTS = ("gpu_name", "gpu_capability", "cpu_model", "cpu_capability")


# the environment differences that excuse a CPU time's move within a bound (explained_by_machine)
EXCUSING_FACTS = frozenset({"torch threads", "cpu_capability"})


def _environment(current: BaselineDoc, baseline: BaselineDoc, where: str) -> list[Verdict]:
    """What differs between the machine setups: device key, software versions, the hardware the
    key stands for, and the torch threads where another machine setup gave torch another count
    (one verdict, each fact in `differs`)."""
    differs = []
    if not same_device_key(current.device_key, baseline.device_key):
        differs.append(Differs("device", str(baseline.device_key), str(current.device_key)))
    for key in SOFTWARE_FACTS:
        was, now = baseline.environment.get(key), current.environment.get(key)
        if was != now and not (key in NVML_READ and (was is None or now is None)):
            differs.append(Differs(key, _fact(baseline, key), _fact(current, key)))
    for key in HARDWARE_FACTS:  # a file that does not hold one (a hand-made one) is not told apart on it
        if key in baseline.environment and baseline.environment[key] != current.environment.get(key):
            differs.append(Differs(key, _fact(baseline, key), _fact(current, key)))
    words = [f"{d.fact} {d.was} -> {d.now}" for d in differs]
    if threads_differ(current, baseline) and not same_thread_setup(current, baseline):
        differs.append(Differs("torch threads", str(baseline.threads), str(current.threads)))
        words.append(
            f"torch threads {baseline.threads} -> {current.threads} ({_other_setup(current, baseline, differs)})"
        )
    if not differs:
        return []
    what = ", ".join(words)  # also as `why`: one run line can stand for the tests alike
    message = f"environment differs from the baseline: {what}{where}"
    return [Verdict(ENVIRONMENT, CHANGED, message, why=what, differs=tuple(differs))]


def _other_setup(current: BaselineDoc, baseline: BaselineDoc, differs: list[Differs]) -> str:
    """Which machine setup gave torch its other thread count: what differs in the thread setups
    (`MKL_NUM_THREADS unset -> 1`: the whole setups read `2 cpus -> 2 cpus, MKL_NUM_THREADS=1`
    to a trial), or the CPU models where those agree (once: a cpu_model already named is not
    named again)."""
    old, new = thread_setup(baseline), thread_setup(current)
    if old != new:
        return f"another machine setup: {', '.join(setup_changes(old, new))}"
    if any(d.fact == "cpu_model" for d in differs):
        return "another machine setup: the other CPU"
    return f"another machine setup: CPU {_fact(baseline, 'cpu_model')} -> {_fact(current, 'cpu_model')}"


def _fact(doc: BaselineDoc, key: str) -> str:
    """An environment fact in words: `none` (no CUDA on that side), `unrecorded` (a hand-edited file)."""
    if key not in doc.environment:
        return "unrecorded"
    value = doc.environment[key]
    return "none" if value is None else str(value)


def merge_measurements(first: BaselineDoc, second: BaselineDoc) -> BaselineDoc:
    """Two measurements of the same test as one: every op's per-step samples from both.

    Confirms a suspected time change: interference rarely hits twice, a slowdown shows in both.
    Pooled unscaled, keeping the faster of each reference (the less excused; docs/design.md).
    """

    def pooled_op(a: OpEntry, b: OpEntry) -> OpEntry:
        lost = a.records_lost or b.records_lost
        return replace(
            a,
            calls_per_step=a.calls_per_step + b.calls_per_step,
            cpu_ms=a.cpu_ms + b.cpu_ms,
            device_ms=a.device_ms + b.device_ms,
            records_lost=a.lost_in_steps() + b.lost_in_steps() if lost else (),
        )

    def pooled_kernel(a: KernelEntry, b: KernelEntry) -> KernelEntry:
        return replace(
            a,
            calls_per_step=a.calls_per_step + b.calls_per_step,
            device_ms=a.device_ms + b.device_ms,
            ops=tuple(sorted({*a.ops, *b.ops})),
            by_op=_pooled_shares(a, b),
        )

    def pooled_memory(a: MemoryEntry, b: MemoryEntry) -> MemoryEntry:
        return replace(a, calls_per_step=a.calls_per_step + b.calls_per_step, device_ms=a.device_ms + b.device_ms)

    events = first.events_per_step + second.events_per_step
    return replace(
        first,
        ops=_pooled(first.ops, second.ops, pooled_op),
        kernels=_pooled(first.kernels, second.kernels, pooled_kernel),
        memory_ops=_pooled(first.memory_ops, second.memory_ops, pooled_memory),
        wall_ms=first.wall_ms + second.wall_ms if first.wall_ms and second.wall_ms else first.wall_ms,
        outside_ms=first.outside_ms + second.outside_ms if first.outside_ms and second.outside_ms else None,
        events_per_step=events,
        steps=len(events),
        reference_ms=_faster(first.reference_ms, second.reference_ms),
        dispatch_reference_ms=_faster(first.dispatch_reference_ms, second.dispatch_reference_ms),
        small_reference_ms=_faster(first.small_reference_ms, second.small_reference_ms),
    )


def _pooled_shares(a: KernelEntry, b: KernelEntry) -> dict[str, KernelShare]:
    """Each launching op's share over both measurements (zeros for the steps it launched none);
    none where one op launched every call on both sides. Nothing reads a merged document's
    shares today (it is judged, never written); pooled so that it stays a valid document."""
    if not a.by_op and not b.by_op and a.ops == b.ops and len(a.ops) <= 1:
        return {}

    def zeros(entry: KernelEntry) -> KernelShare:
        return KernelShare((0,) * len(entry.calls_per_step), (0.0,) * len(entry.device_ms))

    first, second = a.shares(), b.shares()
    return {
        op: KernelShare(
            first.get(op, zeros(a)).calls_per_step + second.get(op, zeros(b)).calls_per_step,
            first.get(op, zeros(a)).device_ms + second.get(op, zeros(b)).device_ms,
        )
        for op in sorted({*first, *second})
    }


E = TypeVar("E")


def _pooled(a: Mapping[str, E], b: Mapping[str, E], pool: Callable[[E, E], E]) -> dict[str, E]:
    """Entries of both; an entry on one side only is kept as it is."""
    return {name: pool(a[name], b[name]) if name in a and name in b else a.get(name) or b[name] for name in {**a, **b}}


def _faster(a: float | None, b: float | None) -> float | None:
    known = [v for v in (a, b) if v]
    return min(known) if known else None
