"""The capture's own ranges (record_function blocks, torch's and libraries' annotations) by name:
calls, wall time on their thread and the device time of the work launched inside them, per step.

Pure: annotation, runtime and device events in, RangeStats out.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate, compress

from ..events import ANNOTATION, CPU_OP, RUNTIME, Event, EventTable
from ..opnames import AUTOGRAD_PREFIX
from ..tables import by_shown_time
from .compiled import COMPILE_MARK, CompileSpan, outside_spans, stable_name
from .model import OPPROF_SYNC_ANNOTATION, STEP_NAME, Dist, RangeStats, merged

# torch.compile's compile-stage annotations carry process-dependent ids: not the code's ranges
_COMPILE_ID = re.compile(r"compile_id=\[?\d+/\d+")
# and torch < 2.9 times its compile stages (and a gc between them) as "<stage> (dynamo_timed)"
_DYNAMO_TIMED = " (dynamo_timed)"


def is_range(name: str) -> bool:
    """An annotation that is the code's range: not a step marker, opprof's step sync or a
    torch.compile stage (by name; inside a compilation, range_statistics leaves any out)."""
    return not (
        STEP_NAME.match(name)
        or name == OPPROF_SYNC_ANNOTATION
        or name.startswith(COMPILE_MARK)
        or name.endswith(_DYNAMO_TIMED)  # LEGACY_COMPILE_ROOT among them
        or ("compile_id=" in name and _COMPILE_ID.search(name) is not None)
    )


class _Launches:
    """Per host thread, its runtime calls by start time with the running sum of the device time
    each launched: the device time launched in any window of the thread is two bisections."""

    def __init__(self, runtime: Iterable[Event], device: Iterable[Event]) -> None:
        launched: dict[int, int] = defaultdict(int)
        for d in device:
            if d.correlation:
                launched[d.correlation] += d.dur_ns
        by_thread: dict[tuple[int, int], list[Event]] = defaultdict(list)
        for r in runtime:
            by_thread[(r.pid, r.tid)].append(r)
        self.starts: dict[tuple[int, int], list[int]] = {}
        self.sums: dict[tuple[int, int], list[int]] = {}
        for thread, calls in by_thread.items():
            calls.sort(key=lambda r: r.start_ns)
            self.starts[thread] = [r.start_ns for r in calls]
            self.sums[thread] = [0, *accumulate(launched.get(r.correlation, 0) for r in calls)]

    def device_ns(self, e: Event) -> int:
        """The device time launched by calls starting inside `e` on its thread."""
        starts = self.starts.get((e.pid, e.tid))
        if not starts:
            return 0
        sums = self.sums[(e.pid, e.tid)]
        return sums[bisect_left(starts, e.end_ns)] - sums[bisect_left(starts, e.start_ns)]


def range_statistics(
    annotations: Iterable[Event],
    runtime: Iterable[Event],
    device: Iterable[Event],
    step_of: Callable[[int], int],
    n_steps: int,
    compilations: list[CompileSpan],
) -> list[RangeStats]:
    """Each range name's calls, CPU (wall) time and launched device time, totals and per step (the
    step of the range's start; a range outside every step counts in the totals only). A range
    nested in one of the same name on its thread is a call whose time the outer one holds. The
    annotations inside a compilation are the compiler's stages (torch 2.6's `compiler
    (dynamo_timed)`, ...), not ranges."""
    ranges = [a for a in annotations if is_range(a.name)]
    if ranges and compilations:
        columns = (
            [a.start_ns for a in ranges],
            [a.dur_ns for a in ranges],
            [a.pid for a in ranges],
            [a.tid for a in ranges],
        )
        ranges = list(compress(ranges, outside_spans(compilations, *columns)))
    by_key: dict[tuple[str, int, int], list[Event]] = defaultdict(list)
    for a in ranges:
        by_key[(stable_name(a.name), a.pid, a.tid)].append(a)
    if not by_key:
        return []
    launches = _Launches(runtime, device)
    acc: dict[str, _Acc] = {}
    for (name, _, _), events in by_key.items():
        into = acc.setdefault(name, _Acc(n_steps))
        outer_end = None
        for e in sorted(events, key=lambda e: (e.start_ns, -e.dur_ns)):
            nested = outer_end is not None and e.start_ns < outer_end
            if not nested:
                outer_end = e.end_ns
            into.add(step_of(e.start_ns), nested, 0 if nested else e.dur_ns, 0 if nested else launches.device_ns(e))
    stats = [a.stats(name) for name, a in acc.items()]
    return by_shown_time(stats)  # the tables' order: --top keeps the same ranges everywhere


class _Acc:
    def __init__(self, n_steps: int) -> None:
        self.calls = self.cpu = self.device = 0
        self.step_calls = [0] * n_steps
        self.step_outer = [0] * n_steps
        self.step_cpu = [0] * n_steps
        self.step_device = [0] * n_steps

    def add(self, step: int, nested: bool, cpu_ns: int, device_ns: int) -> None:
        self.calls += 1
        self.cpu += cpu_ns
        self.device += device_ns
        if step >= 0:
            self.step_calls[step] += 1
            self.step_outer[step] += not nested
            self.step_cpu[step] += cpu_ns
            self.step_device[step] += device_ns

    def stats(self, name: str) -> RangeStats:
        return RangeStats(
            name, self.calls, self.cpu, self.device,
            Dist(tuple(self.step_calls)), Dist(tuple(self.step_cpu)), Dist(tuple(self.step_device)),
            Dist(tuple(self.step_outer)),
        )  # fmt: skip


Thread = tuple[int, int]  # (pid, tid)


@dataclass(frozen=True, slots=True)
class CallIndex:
    """Where the table's calls are, found in one pass and kept with the table (a structure
    verdict places each op whose calls moved: a scan of the table each took 29 ms of 52,000 events)."""

    rows: dict[str, list[int]]  # a CPU op's rows by name, by start
    ranges: dict[Thread, list[int]]  # the code's ranges on each thread, by start, the wider first
    backward: dict[Thread, list[tuple[int, int]]]  # the autograd engine's calls of nodes, merged spans

    @classmethod
    def of(cls, table: EventTable) -> CallIndex:
        """The table's index, built on first use."""
        found = table.derived.get("calls")
        if found is None:
            found = table.derived["calls"] = cls._built(table)
        return found

    @classmethod
    def _built(cls, table: EventTable) -> CallIndex:
        rows: dict[str, list[int]] = defaultdict(list)
        ranges: dict[Thread, list[int]] = defaultdict(list)
        engine: dict[Thread, list[tuple[int, int]]] = defaultdict(list)
        for i, (kind, name) in enumerate(zip(table.kind, table.name)):
            if kind == CPU_OP:
                rows[name].append(i)
                if name.startswith(AUTOGRAD_PREFIX):
                    engine[(table.pid[i], table.tid[i])].append(
                        (table.start_ns[i], table.start_ns[i] + table.dur_ns[i])
                    )
            elif kind == ANNOTATION and is_range(name):
                ranges[(table.pid[i], table.tid[i])].append(i)
        start, dur = table.start_ns, table.dur_ns
        return cls(
            {name: sorted(found, key=start.__getitem__) for name, found in rows.items()},
            {thread: sorted(found, key=lambda i: (start[i], -dur[i])) for thread, found in ranges.items()},
            {thread: merged(found) for thread, found in engine.items()},
        )


REDISPATCHED = "redispatched"  # an analysed table's rows torch's counting rule folded into their callers


def op_calls(table: EventTable, op: str, launching: bool = False) -> list[int]:
    """The rows of the op named `op`, by start time, as the op's calls are counted: without the
    redispatches the analysis folded into their callers (a trial's `by place: 5/step in the backward
    pass, 1/step outside it` beside a count of 5: PowBackward0's aten::mul calls aten::mul); with
    `launching`, only the calls inside which their thread made a runtime call (a scalar read that
    copied from the device, not one of a CPU tensor: Adam's step counts)."""
    calls = list(CallIndex.of(table).rows.get(op, ()))  # a copy: the index's stays as built
    folded = table.derived.get(REDISPATCHED)
    if folded:
        calls = [i for i in calls if i not in folded]
    if not launching or not calls:
        return calls
    runtime: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, kind in enumerate(table.kind):
        if kind == RUNTIME:
            runtime[(table.pid[i], table.tid[i])].append(table.start_ns[i])
    for starts in runtime.values():
        starts.sort()

    def launched(i: int) -> bool:
        starts = runtime.get((table.pid[i], table.tid[i]), [])
        j = bisect_left(starts, table.start_ns[i])
        return j < len(starts) and starts[j] <= table.start_ns[i] + table.dur_ns[i]

    return [i for i in calls if launched(i)]


def in_backward_each(table: EventTable, rows: Iterable[int]) -> list[bool]:
    """For each of `rows`, whether it ran in the backward pass: inside an autograd engine's call
    of a node on its thread (`autograd::engine::evaluate_function: AddmmBackward0`), as the
    forward ops activation checkpointing recomputes do. The engine's calls on a thread nest, so
    their union, in disjoint spans, is searched by bisection."""
    union = CallIndex.of(table).backward
    return [
        _within(
            union.get((table.pid[r], table.tid[r]), []),
            table.start_ns[r],
            table.dur_ns[r],
            strictly=table.name[r].startswith(AUTOGRAD_PREFIX),
        )
        for r in rows
    ]


def _within(union: list[tuple[int, int]], start: int, dur: int, strictly: bool) -> bool:
    """Whether [start, start + dur] lies in one of the union's spans; `strictly` for an engine
    call itself, whose own span is in the union: only a wider span holds it. Another op may span
    its engine call exactly (a trace's whole microseconds: `aten::t` in `TBackward0`, 100 us for 5)."""
    k = bisect_right(union, (start, math.inf)) - 1
    if k < 0 or start + dur > union[k][1]:
        return False
    return not strictly or union[k][0] < start or start + dur < union[k][1]


def ranges_around_each(table: EventTable, rows: Iterable[int], limit: int = 2) -> list[tuple[str, ...]]:
    """ranges_around for each of `rows`: the ranges on its thread that hold it, innermost first
    (at most `limit`). One sweep per thread over the rows and the ranges by start, keeping the
    ranges open at each row's start (10,000 calls beside 1,000 ranges took 1.7 s one row at a
    time)."""
    rows = list(rows)
    by_thread = CallIndex.of(table).ranges
    found: dict[int, tuple[str, ...]] = {}
    wanted: dict[Thread, list[int]] = defaultdict(list)
    for row in rows:
        wanted[(table.pid[row], table.tid[row])].append(row)
    for thread, thread_rows in wanted.items():
        ranges = by_thread.get(thread, [])
        found.update(_sweep(table, sorted(thread_rows, key=table.start_ns.__getitem__), ranges, limit))
    return [found[row] for row in rows]


def _sweep(table: EventTable, rows: list[int], ranges: list[int], limit: int) -> dict[int, tuple[str, ...]]:
    """The ranges around each of `rows` (by start), of one thread's `ranges` (by start, the wider first)."""
    found: dict[int, tuple[str, ...]] = {}
    open_ranges: list[int] = []
    j = 0
    for row in rows:
        start, end = table.start_ns[row], table.start_ns[row] + table.dur_ns[row]
        while j < len(ranges) and table.start_ns[ranges[j]] <= start:
            open_ranges.append(ranges[j])
            j += 1
        open_ranges = [i for i in open_ranges if table.start_ns[i] + table.dur_ns[i] >= start]
        around = [i for i in open_ranges if table.start_ns[i] + table.dur_ns[i] >= end]
        found[row] = tuple(stable_name(table.name[i]) for i in reversed(around[-limit:]))
    return found
