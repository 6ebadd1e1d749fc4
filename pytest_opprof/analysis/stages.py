"""Events -> Profile, in named stages: select rows -> steps -> nesting -> torch's counting rule
-> CPU statistics -> device attribution -> runtime statistics -> work -> trust checks -> assemble.

Hot path: 10^5 events per capture. The stages pass columns (lists) in small slotted records and
use comprehensions and C-level map/compress; no Python object per event.

Attribution: a kernel or memory op carries a correlation id shared with the runtime/driver call
that launched it; its launching op is the innermost CPU op enclosing that call on the call's
thread. Where no runtime call is known, Kineto's External id is used when it names a CPU op.
Each device event is attributed to at most one op (self device time) and rolled up once to each
distinct op name enclosing it (device time), so attributed + unattributed = total device time.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import add, lt, neg, sub
from typing import Any, NamedTuple

from ..errors import OpprofUsageError, bad_event, not_events, shown_value
from ..events import (
    ANNOTATION,
    CPU_OP,
    DEVICE_KINDS,
    GPU_ANNOTATION,
    KERNEL,
    MEMCPY,
    MEMSET,
    OTHER,
    PYTHON,
    RUNTIME,
    SYNC,
    Event,
    EventTable,
    gc_paused,
)
from ..tables import by_shown_time
from .checks import NEST_SLACK_NS, CheckInputs, dropped_launches, trust_checks
from .compiled import (
    COMPILE_MARK,
    FX_GRAPH,
    LEGACY_COMPILE_ROOT,
    REGION,
    CompileScan,
    OpView,
    is_graph_call,
    scan_compilation,
    summarize_compiled,
)
from .model import (
    OPPROF_SYNC_ANNOTATION,
    STEP_NAME,
    Compiled,
    Dist,
    GraphLaunchStats,
    KernelStats,
    MemoryOpStats,
    OpStats,
    OpWork,
    Profile,
    RuntimeStats,
    Signature,
    StepSpan,
    Timeline,
)
from .ranges import REDISPATCHED, range_statistics
from .timeline import GRAPH_LAUNCHES, Launches, timeline

_CPU_OP_KIND = frozenset({CPU_OP})
_ANNOTATION_KIND = frozenset({ANNOTATION})
_RUNTIME_KIND = frozenset({RUNTIME})


def analyze(
    events: Sequence[Event] | EventTable,
    *,
    source: str = "events",
    metadata: dict[str, Any] | None = None,
    stray_step: bool = False,
) -> Profile:
    """Analyse events into a Profile. Steps come from CPU-side ProfilerStep#N annotations;
    without them the whole source is one step. `stray_step`: the source is a scheduled torch
    profiler of the user's (or its trace), whose loop's last prof.step() may open a step it then
    stops in: a last step in which nothing started is no step."""
    with gc_paused():
        table = events if isinstance(events, EventTable) else _checked_table(events)
        return _analyze(table, source, dict(metadata or {}), stray_step)


_KINDS = (CPU_OP, ANNOTATION, GPU_ANNOTATION, KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC, PYTHON, OTHER)


def _checked_table(events: object) -> EventTable:
    """The table of the events a caller of the public analyze() gave, each an Event of a known kind
    with a name and integer times: a library trial's analyze("trace.json") and analyze(prof) raised
    TypeErrors from deep inside, analyze(None) gave an empty Profile, and an unknown kind was
    dropped. Judged by column (C-level set()s: ~10 ms for 100k events beside the table's ~55), each
    event only on a refusal."""
    if not isinstance(events, (list, tuple)):
        raise OpprofUsageError(not_events(events))
    if set(map(type, events)) <= {Event}:
        table = EventTable.from_events(events)
        ints = {int}
        if (
            set(table.kind) <= set(_KINDS)
            and set(map(type, table.name)) <= {str}
            and set(map(type, table.start_ns)) <= ints
            and set(map(type, table.dur_ns)) <= ints  # a negative one is the `durations` check's
        ):
            return table
    found = next(((i, p) for i, p in enumerate(map(_event_problem, events)) if p), None)
    if found is None:  # a subclass the columns' exact types left out (a str's, an int's): readable
        return EventTable.from_events(events)
    raise OpprofUsageError(bad_event(*found))


def _event_problem(event: object) -> str | None:
    if type(event) is not Event:
        return f"{shown_value(event)} is not an Event"
    if event.kind not in _KINDS:
        return f"kind {shown_value(event.kind)} is not one of {', '.join(_KINDS)}"
    if not isinstance(event.name, str):
        return f"name {shown_value(event.name)} is not a str"
    for field_name in ("start_ns", "dur_ns"):
        value = getattr(event, field_name)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{field_name} {shown_value(value)} is not an integer of nanoseconds"
    return None


def _analyze(t: EventTable, source: str, metadata: dict[str, Any], stray_step: bool = False) -> Profile:
    rows = select_rows(t)
    steps = find_steps(rows, t, stray_step)
    ops = op_columns(t, rows)
    scan, ops = set_compilation_apart(rows, ops)
    tree = nest(ops, rows.runtime, steps, t.end_threads)
    ops, tree = fold_redispatches(ops, tree, t)
    compiled = compiled_summary(t, ops, tree, steps, scan) if scan.present else None
    cpu = cpu_statistics(ops, tree, steps.count)
    device = attribute_device_time(rows, t, ops, tree, cpu, steps)
    runtime = runtime_statistics(rows, steps)
    device_timeline = timeline_of(rows, ops, tree, steps)
    outside = time_outside_ops(ops, tree, cpu, steps, rows.markers)
    work = op_work(ops, tree, cpu, steps.count, device.op_copies, _op_inputs(t, ops.rows))
    op_stats = assemble_ops(cpu, device, steps.count, work)
    ranges = range_statistics(rows.annotations, rows.runtime, rows.device, steps.of, steps.count, scan.spans)
    dropped = dropped_launches(rows.device, rows.runtime)  # read by the kernel_records check and the loss
    lost = records_lost(rows, ops, tree, steps, dropped[1])
    checks = trust_checks(
        CheckInputs(
            ops.pids,
            ops.tids,
            ops.starts,
            ops.durs,
            ops.names,
            tree.parent,
            tree.op_step,
            rows.device,
            rows.runtime,
            frozenset(tree.unnested),
            dropped,
        ),  # fmt: skip
        steps.spans,
        device.busy_by_step,
        op_stats,
        cpu.outside,
        steps.wall_known,
        compiled.compilations if compiled else (),
        ranges,
        steps.thread,
        host_may_lead=stray_step,  # a user's loop, not opprof's calls of fn, which wait for the device
    )
    return Profile(
        source=source,
        step_spans=tuple(steps.spans),
        wall_known=steps.wall_known,
        ops=tuple(op_stats),
        kernels=tuple(device.kernel_stats(steps.count)),
        memory_ops=tuple(device.memory_stats()),
        runtime=tuple(runtime),
        device_ns=device.total_ns,
        device_busy_ns=device_timeline.total.busy_ns,  # per device, summed: the timeline's own
        unattributed_device_ns=device.unattributed_ns,
        outside_step_ops=cpu.outside,
        checks=tuple(checks),
        metadata=metadata,
        event_table=t,
        work_steps=steps.count if work else 0,
        op_tree=(ops.names, tree.parent),
        compiled=compiled,
        graph_launches=tuple(device.graph_stats()),
        timeline=device_timeline,
        ranges=tuple(ranges),
        outside_ops_ns=outside,
        stray_step=stray_step,
        kernels_dropped=lost.dropped,
        records_lost=lost.by_op,
    )


# -- 1. rows ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Rows:
    """Which rows of the table are what: CPU ops (indices), and the few others as events."""

    op_rows: Sequence[int]
    device: list[Event]
    runtime: list[Event]
    markers: list[Event]  # ProfilerStep#N annotations (or, in older Kineto, cpu_ops)
    old_markers: list[int]  # rows of step markers written as cpu_op (excluded from the ops)
    sync_windows: list[Event]  # the capture's own step synchronisation
    compile_marks: list[Event]  # torch.compile's "dynamo_data: compile_id=F/C" annotations (and older torch's root)
    annotations: list[Event]  # every CPU-side annotation (the ranges are among them)
    graph_calls: list[int] = field(default_factory=list)  # rows of compiled-graph calls written as annotations
    runtime_by_corr: dict[int, int] = field(default_factory=dict)  # correlation id -> runtime call

    def __post_init__(self) -> None:
        self.runtime_by_corr = {r.correlation: j for j, r in enumerate(self.runtime) if r.correlation}


def _rows_of(kinds: list[str], counts: Counter[str], wanted: frozenset[str]) -> list[int] | range:
    if sum(counts[k] for k in wanted) == len(kinds):
        return range(len(kinds))
    if not any(counts[k] for k in wanted):
        return []
    return list(compress(range(len(kinds)), map(wanted.__contains__, kinds)))


def select_rows(t: EventTable) -> Rows:
    kinds = t.kind
    counts = Counter(kinds)
    op_rows: Sequence[int] = _rows_of(kinds, counts, _CPU_OP_KIND)
    annotation_rows = _rows_of(kinds, counts, _ANNOTATION_KIND)
    graph_calls = [i for i in annotation_rows if is_graph_call(t.name[i])]
    if graph_calls:  # an op, as torch writes it without record_shapes: one op set whatever the capture
        op_rows = sorted([*op_rows, *graph_calls])
        called = set(graph_calls)
        annotation_rows = [i for i in annotation_rows if i not in called]
    annotations = [t.row(i) for i in annotation_rows]
    markers = [e for e in annotations if e.name.startswith("ProfilerStep#") and STEP_NAME.match(e.name)]
    old_markers: list[int] = []
    if not markers and any(t.name[i].startswith("ProfilerStep#") for i in op_rows):
        old_markers = [i for i in op_rows if STEP_NAME.match(t.name[i])]  # older Kineto: cpu_op markers
        markers = [t.row(i) for i in old_markers]
    return Rows(
        op_rows,
        [t.row(i) for i in _rows_of(kinds, counts, DEVICE_KINDS)],
        [t.row(i) for i in _rows_of(kinds, counts, _RUNTIME_KIND)],
        markers,
        old_markers,
        [e for e in annotations if e.name == OPPROF_SYNC_ANNOTATION],
        [e for e in annotations if e.name.startswith(COMPILE_MARK) or e.name == LEGACY_COMPILE_ROOT],
        annotations,
        graph_calls,
    )


# -- 2. steps ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Steps:
    spans: list[StepSpan]
    wall_known: bool  # False for a source without step markers: its span is not a wall time
    thread: tuple[int, int] | None = None  # (pid, tid) that marks every step; None: several, or none
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.starts = [s.start_ns for s in self.spans]
        self.ends = [s.end_ns for s in self.spans]

    @property
    def count(self) -> int:
        return len(self.spans)

    def of(self, ts: int) -> int:
        """The step a timestamp lies in, -1 outside every step."""
        i = bisect_right(self.starts, ts) - 1
        return i if i >= 0 and ts <= self.ends[i] else -1


def find_steps(rows: Rows, t: EventTable, stray_step: bool = False) -> Steps:
    markers = rows.markers
    if markers:
        markers.sort(key=lambda e: e.start_ns)
        spans = [StepSpan(int(STEP_NAME.match(m.name).group(1)), m.start_ns, m.end_ns) for m in markers]  # type: ignore[union-attr]
        threads = {(m.pid, m.tid) for m in markers}
        thread = next(iter(threads)) if len(threads) == 1 else None
        return Steps(_without_a_trailing_empty_step(spans, rows, t) if stray_step else spans, True, thread)
    if not len(t):
        return Steps([StepSpan(0, 0, 0)], False)
    return Steps([StepSpan(0, min(t.start_ns), max(map(add, t.start_ns, t.dur_ns)))], False)


def _without_a_trailing_empty_step(spans: list[StepSpan], rows: Rows, t: EventTable) -> list[StepSpan]:
    """The steps less a last one in which nothing started, after steps that held work: the step
    that a loop's final `prof.step()` opened just before the profiler stopped (a scheduled torch
    profiler of the user's), which would read as a step of no work. Not for opprof's own captures,
    where each step is a call of fn: an empty last one is the code's doing, and step_events says so.
    What started in it is read on the host (ops, runtime calls): a GPU runs an earlier step's
    kernels in it when the host ran ahead (a review's stray step counted as a third, of no addmm),
    so device events count only in a source with no host events."""
    if len(spans) < 2:
        return spans
    last, start_ns = spans[-1], t.start_ns
    # Latest first: the events of the last step are near the end, so a step with work stops the scan soon.
    host = rows.op_rows or rows.runtime
    own = rows.runtime if host else rows.device
    starts = chain((start_ns[i] for i in reversed(rows.op_rows)), (e.start_ns for e in own))
    if any(last.start_ns <= ts <= last.end_ns for ts in starts) or not (host or rows.device):
        return spans
    return spans[:-1]


# -- 3. op columns ----------------------------------------------------------------------------


@dataclass(slots=True)
class OpColumns:
    """The analysed CPU ops, column by column; `rows` are their rows in the event table."""

    rows: Sequence[int]
    names: list[str]
    starts: list[int]
    durs: list[int]
    pids: list[int]
    tids: list[int]

    def __len__(self) -> int:
        return len(self.names)

    def keep(self, keep: list[bool]) -> OpColumns:
        def kept(column: Sequence[Any]) -> list[Any]:
            return list(compress(column, keep))

        return OpColumns(
            kept(self.rows), kept(self.names), kept(self.starts), kept(self.durs), kept(self.pids), kept(self.tids)
        )


def op_columns(t: EventTable, rows: Rows) -> OpColumns:
    if isinstance(rows.op_rows, range) and not rows.old_markers:
        return OpColumns(rows.op_rows, t.name, t.start_ns, t.dur_ns, t.pid, t.tid)
    is_op = list(map(_CPU_OP_KIND.__contains__, t.kind))
    for i in rows.old_markers:
        is_op[i] = False
    for i in rows.graph_calls:
        is_op[i] = True

    def kept(column: Sequence[Any]) -> list[Any]:
        return list(compress(column, is_op))

    return OpColumns(kept(range(len(t))), kept(t.name), kept(t.start_ns), kept(t.dur_ns), kept(t.pid), kept(t.tid))


def set_compilation_apart(rows: Rows, ops: OpColumns) -> tuple[CompileScan, OpColumns]:
    """torch.compile: compiler ops inside a compilation leave the op table (the compilation is
    reported on its own) and regions and graph calls take their stable names."""
    scan, keep, names = scan_compilation(ops.names, ops.starts, ops.durs, ops.pids, ops.tids, rows.compile_marks)
    if keep is not None:
        ops = ops.keep(keep)
        names = list(compress(names, keep)) if names is not None else None
    if names is not None:
        ops = OpColumns(ops.rows, names, ops.starts, ops.durs, ops.pids, ops.tids)
    return scan, ops


def compiled_summary(t: EventTable, ops: OpColumns, tree: Tree, steps: Steps, scan: CompileScan) -> Compiled:
    raw = t.name
    raw_names = [raw[r] if n in (REGION, FX_GRAPH) else n for r, n in zip(ops.rows, ops.names)]
    view = OpView(ops.names, raw_names, tree.parent, tree.op_step, ops.durs, ops.starts)
    return summarize_compiled(view, [s.number for s in steps.spans], scan.spans, steps.of)


# -- 4. nesting -------------------------------------------------------------------------------


@dataclass(slots=True)
class Tree:
    """Per op: its caller (-1 at the top), its direct children's time, whether a same-name op
    encloses it, its step (-1 outside every step); per runtime call: the op around it."""

    parent: list[int]
    child_ns: list[int]
    nested_same_name: list[bool]
    op_step: list[int]
    launcher_of_runtime: list[int]
    one_thread: tuple[int, int] | None = None  # (pid, tid) where every op and runtime call ran on it
    # Ops whose end was recorded on another thread (EventTable.end_threads), which torch's tree
    # leaves out: no parent, no children, no self time; their time is their children's.
    unnested: list[int] = field(default_factory=list)

    def callers(self, names: list[str], i: int, depth: int = 2) -> tuple[str, ...]:
        found: list[str] = []
        while len(found) < depth and (i := self.parent[i]) >= 0:
            found.append(names[i])
        return tuple(found)


def time_outside_ops(
    ops: OpColumns, tree: Tree, cpu: CpuStats, steps: Steps, markers: list[Event]
) -> tuple[int, ...] | None:
    """Per step, its wall time outside the ops of the thread that marks it: the Python between
    the ops (hooks, data preparation), which no op's time holds. An op's self time counts in the
    step it starts in, as its time does, so the steps' ops' self times summed per step are their
    time (nested ops once), from the CPU statistics: a few names times the steps, no pass over
    the ops. None without step markers, where the steps are marked on several threads, or where
    an op in a step ran on another thread (a pool's work: the marking thread waits for it
    outside its own ops, which is no time outside the ops)."""
    threads = {(m.pid, m.tid) for m in markers}
    if not steps.wall_known or len(threads) != 1:
        return None
    thread, n = next(iter(threads)), steps.count
    if tree.one_thread != thread and any(
        s >= 0 and (pid, tid) != thread for s, pid, tid in zip(tree.op_step, ops.pids, ops.tids)
    ):
        return None
    flat = cpu.self_cpu_per_step  # name k's step s at k * n + s
    return tuple(max(0, span.wall_ns - sum(flat[s::n])) for s, span in enumerate(steps.spans))


def nest(ops: OpColumns, runtime: list[Event], steps: Steps, end_threads: dict[int, int] | None = None) -> Tree:
    """Items 0..n_ops-1 are ops, n_ops.. runtime calls; each thread's items are swept in start
    order (at equal starts the longer op first: it encloses the shorter; calls after ops). An op
    whose end was recorded on another thread (`end_threads`, by table row) is not swept: its end
    encloses nothing on its own thread (torch leaves such ops out of its tree too)."""
    n_ops = len(ops)
    # The last slot of child_ns is a sentinel: top-level ops (parent -1) add their time there.
    tree = Tree([-1] * n_ops, [0] * (n_ops + 1), [False] * n_ops, [-1] * n_ops, [-1] * len(runtime))
    if end_threads:
        tree.unnested = [k for k, row in enumerate(ops.rows) if row in end_threads]
    unnested = set(tree.unnested)
    items = _Items(ops, runtime)
    groups = _thread_groups(ops, runtime)
    if len(groups) == 1 and n_ops:
        tree.one_thread = (ops.pids[0], ops.tids[0])
    for group in groups:
        group, group_starts, in_order = items.ordered(group)
        # a fork's pool thread runs a task while another's record is open: their records overlap
        pool = bool(unnested) and _thread_of(ops, runtime, group[0]) != steps.thread
        if unnested:
            swept = [(i, start) for i, start in zip(group, group_starts) if i not in unnested]
            _sweep(tree, items, [i for i, _ in swept], [start for _, start in swept], n_ops, pool)
        else:
            _sweep(tree, items, group, group_starts, n_ops)
        _assign_steps(tree, group, group_starts, in_order, steps, n_ops)
    tree.child_ns.pop()
    return tree


class _Items:
    """Ops and runtime calls side by side, as the sweep reads them."""

    __slots__ = ("starts", "durs", "names", "op_starts", "op_durs", "runtime", "keys")

    def __init__(self, ops: OpColumns, runtime: list[Event]) -> None:
        self.starts = ops.starts + [r.start_ns for r in runtime] if runtime else ops.starts
        self.durs = ops.durs + [0] * len(runtime) if runtime else ops.durs
        self.names = ops.names + [""] * len(runtime) if runtime else ops.names
        self.op_starts, self.op_durs, self.runtime = ops.starts, ops.durs, runtime
        self.keys: list[tuple[int, int]] = []  # sort keys, made only if a thread arrives out of order

    def ordered(self, group: list[int]) -> tuple[list[int], list[int], bool]:
        """The group in sweep order, its starts, and whether it arrived in order (live captures do)."""
        group_starts = list(map(self.starts.__getitem__, group))
        in_order = all(map(lt, group_starts, group_starts[1:]))
        if not in_order:
            if not self.keys:  # start; the longer op first; runtime calls (1) after ops (-dur <= 0)
                self.keys = list(zip(self.op_starts, map(neg, self.op_durs)))
                self.keys += [(r.start_ns, 1) for r in self.runtime]
            group.sort(key=self.keys.__getitem__)
            group_starts = list(map(self.starts.__getitem__, group))
        return group, group_starts, in_order


def _thread_groups(ops: OpColumns, runtime: list[Event]) -> list[list[int]]:
    pids, tids = ops.pids, ops.tids
    n_items = len(ops) + len(runtime)
    if (
        pids
        and len(set(pids)) <= 1
        and len(set(tids)) <= 1
        and all(r.pid == pids[0] and r.tid == tids[0] for r in runtime)
    ):
        return [list(range(n_items))]
    item_thread = list(zip(pids, tids)) + [(r.pid, r.tid) for r in runtime]
    by_thread: dict[tuple[int, int], list[int]] = {th: [] for th in set(item_thread)}
    for i, th in enumerate(item_thread):
        by_thread[th].append(i)
    return list(by_thread.values())


def _thread_of(ops: OpColumns, runtime: list[Event], item: int) -> tuple[int, int]:
    """The (pid, tid) of an item of the sweep (an op, or a runtime call after the ops)."""
    n_ops = len(ops)
    return (ops.pids[item], ops.tids[item]) if item < n_ops else (runtime[item - n_ops].pid, runtime[item - n_ops].tid)


def _sweep(
    tree: Tree, items: _Items, group: list[int], group_starts: list[int], n_ops: int, overlapping: bool = False
) -> None:
    """One thread's stack sweep: each op's parent and each runtime call's launching op.
    Sentinels keep the loop free of emptiness checks: an infinite end never pops. `overlapping`:
    the thread's records may overlap without nesting (a TorchScript fork's pool, whose task waits
    while the thread runs another: a trial's nested forks erred `nesting` in 5 of 5 runs): an op
    that ends past the one it starts in is not its child, torch's rule (populate_cpu_children)."""
    parent, child_ns, nested, launcher = tree.parent, tree.child_ns, tree.nested_same_name, tree.launcher_of_runtime
    stack = [-1]
    stack_ends: list[float] = [float("inf")]
    stack_names: list[str | None] = [None]  # a short list: `in` on it beats a dict of counts
    group_durs = list(map(items.durs.__getitem__, group))
    group_names = list(map(items.names.__getitem__, group))
    runtime = items.runtime
    for idx, start, dur, name in zip(group, group_starts, group_durs, group_names):
        if idx >= n_ops:  # an op that ends as a call of 1 us or less starts still holds it (a trace in whole us)
            while stack_ends[-1] < start or (stack_ends[-1] == start and runtime[idx - n_ops].dur_ns > NEST_SLACK_NS):
                stack_ends.pop()
                stack.pop()
                stack_names.pop()
            launcher[idx - n_ops] = stack[-1]
            continue
        while stack_ends[-1] <= start or (overlapping and stack_ends[-1] + NEST_SLACK_NS < start + dur):
            stack_ends.pop()
            stack.pop()
            stack_names.pop()
        p = stack[-1]
        parent[idx] = p
        child_ns[p] += dur
        if name in stack_names:
            nested[idx] = True
        stack.append(idx)
        stack_ends.append(start + dur)
        stack_names.append(name)


def _assign_steps(
    tree: Tree, group: list[int], group_starts: list[int], in_order: bool, steps: Steps, n_ops: int
) -> None:
    """The step of each op: the latest step begun at its start, if the op starts before that
    step ends. Later steps overwrite earlier ones where (odd) steps overlap."""
    op_step = tree.op_step
    identity = in_order and (not group or (group[0] == 0 and group[-1] == len(group) - 1))
    for si in range(steps.count):
        lo = bisect_left(group_starts, steps.starts[si])
        hi = bisect_right(group_starts, steps.ends[si])
        if identity:  # positions are op indices (runtime calls come after all ops)
            hi = min(hi, n_ops)
            if hi > lo:
                op_step[lo:hi] = [si] * (hi - lo)
        else:
            for idx in group[lo:hi]:
                if idx < n_ops:
                    op_step[idx] = si


# -- 5. torch's counting rule -----------------------------------------------------------------


def redispatches(names: list[str], parent: list[int], nested_same_name: list[bool]) -> set[int]:
    """Ops torch's key_averages() folds into their caller: the only CPU-op child of an op of the
    same name (aten::upsample_bilinear2d.vec calling aten::upsample_bilinear2d, say)."""
    same = [i for i in compress(range(len(names)), nested_same_name) if names[parent[i]] == names[i]]
    if not same:
        return set()
    callers = {parent[i] for i in same}
    children = Counter(filter(callers.__contains__, parent))
    return {i for i in same if children[parent[i]] == 1}


def fold_redispatches(ops: OpColumns, tree: Tree, table: EventTable | None = None) -> tuple[OpColumns, Tree]:
    """Fold each redispatch into its caller: its children and launches become the caller's, and
    its self time too (the caller's child time loses it and gains its children's). The `table`
    keeps the folded rows (`redispatched`: op_calls leaves them out, as the counts do)."""
    folded = redispatches(ops.names, tree.parent, tree.nested_same_name)
    if folded:  # one that runs past its caller's end is a broken duration, left for the nesting check
        ends = list(map(add, ops.starts, ops.durs))  # (an `aten::mm` whose `dur` swallowed the next: hidden)
        folded = {i for i in folded if ends[i] <= ends[tree.parent[i]] + NEST_SLACK_NS}
    if table is not None:
        table.derived[REDISPATCHED] = frozenset(ops.rows[i] for i in folded)
    if not folded:
        return ops, tree
    parent = tree.parent

    def survivor(i: int) -> int:
        while i in folded:
            i = parent[i]
        return i

    child_ns = list(tree.child_ns)
    for i in folded:
        child_ns[survivor(i)] += child_ns[i] - ops.durs[i]
    keep = [i not in folded for i in range(len(parent))]
    new_index = [-1] * (len(parent) + 1)  # the last slot maps a top-level op's parent -1 to -1
    for new, old in enumerate(compress(range(len(parent)), keep)):
        new_index[old] = new

    def remap(i: int) -> int:
        return new_index[survivor(i)] if i >= 0 else -1

    folded_tree = Tree(
        [remap(p) for p in compress(parent, keep)],
        list(compress(child_ns, keep)),
        list(compress(tree.nested_same_name, keep)),
        list(compress(tree.op_step, keep)),
        [remap(j) for j in tree.launcher_of_runtime],
        tree.one_thread,
        [new_index[i] for i in tree.unnested],  # never folded: a redispatch has a parent
    )
    return ops.keep(keep), folded_tree


# -- 6. CPU statistics ------------------------------------------------------------------------


@dataclass(slots=True)
class CpuStats:
    """Per op name (index k in `name_index`): totals, and per-step values in flat lists of
    n_names * n_steps (name k's steps at k * n_steps ...)."""

    name_index: dict[str, int]
    nid: list[int]  # per op: its name's index
    calls: Counter[int]
    cpu_ns: list[int]
    self_cpu_ns: list[int]
    calls_per_step: list[int]
    cpu_per_step: list[int]
    self_cpu_per_step: list[int]
    outside: int  # ops outside every step
    outer_calls_per_step: list[int] | None  # calls not nested in one of the same name; None: no op nests so


def cpu_statistics(ops: OpColumns, tree: Tree, n_steps: int) -> CpuStats:
    """Accumulated per (name, step) in flat slots: slot 0 of each name's block collects the ops
    outside every step; totals are block sums."""
    name_index = {n: i for i, n in enumerate(dict.fromkeys(ops.names))}
    nid = list(map(name_index.__getitem__, ops.names))
    n_names, width = len(name_index), n_steps + 1
    first_slot = [k * width + 1 for k in range(n_names)]
    slot = list(map(add, map(first_slot.__getitem__, nid), tree.op_step))
    calls_slots = Counter(slot)
    slot_calls = [calls_slots.get(j, 0) for j in range(n_names * width)]
    self_ns = _self_ns(ops.durs, tree.child_ns)
    for k in tree.unnested:  # torch's rule: no self time (the time it holds is its children's)
        self_ns[k] = 0
    slot_outer_calls: list[int] | None = None  # the same as the calls where no op nests in its own name
    if any(tree.nested_same_name):  # an op inside a same-name op: its time is counted once
        outer = [not n for n in tree.nested_same_name]
        slot_self_cpu = _slot_sums(slot, self_ns, n_names * width)
        slot_cpu = _slot_sums(list(compress(slot, outer)), list(compress(ops.durs, outer)), n_names * width)
        outer_slots = Counter(compress(slot, outer))
        slot_outer_calls = [outer_slots.get(j, 0) for j in range(n_names * width)]
    else:
        slot_cpu, slot_self_cpu = _slot_sums_2(slot, ops.durs, self_ns, n_names * width)

    def totals(flat: list[int]) -> list[int]:
        return [sum(flat[k * width : (k + 1) * width]) for k in range(n_names)]

    def steps_only(flat: list[int]) -> list[int]:
        return [v for k in range(n_names) for v in flat[k * width + 1 : (k + 1) * width]]

    return CpuStats(
        name_index,
        nid,
        Counter(nid),
        totals(slot_cpu),
        totals(slot_self_cpu),
        steps_only(slot_calls),
        steps_only(slot_cpu),
        steps_only(slot_self_cpu),
        tree.op_step.count(-1),
        steps_only(slot_outer_calls) if slot_outer_calls is not None else None,
    )


def _self_ns(durs: list[int], child_ns: list[int]) -> list[int]:
    self_ns = list(map(sub, durs, child_ns))
    if any(map(lt, self_ns, repeat(0))):  # children may overrun a parent by a rounding step
        self_ns = [v if v > 0 else 0 for v in self_ns]
    return self_ns


def _slot_sums_2(slots: list[int], a: list[int], b: list[int], size: int) -> tuple[list[int], list[int]]:
    """Two _slot_sums in one pass (the hot case: no op nested in a same-name op)."""
    sums_a, sums_b = [0] * size, [0] * size
    for j, x, y in zip(slots, a, b):
        sums_a[j] += x
        sums_b[j] += y
    return sums_a, sums_b


def _slot_sums(slots: list[int], values: list[int], size: int) -> list[int]:
    sums = [0] * size
    for j, v in zip(slots, values):
        sums[j] += v
    return sums


# -- 7. device attribution --------------------------------------------------------------------


@dataclass(slots=True)
class DeviceAcc:
    """A kernel (per launching op) or memory op being summed up."""

    calls: int
    ns: int
    calls_per_step: list[int]
    ns_per_step: list[int]
    bytes: int = 0


@dataclass(slots=True)
class GraphAcc:
    """The replays of CUDA/HIP graphs launched under one op: which launch calls, their kernels."""

    launches: set[int]  # runtime-call indices
    launches_per_step: list[int]
    kernels: DeviceAcc


def is_graph_launch(name: str) -> bool:
    """cudaGraphLaunch and its HIP and driver twins: one call, the kernels of a whole graph."""
    return name in GRAPH_LAUNCHES


@dataclass(slots=True)
class DeviceStats:
    kernels: dict[tuple[str, str | None], DeviceAcc]
    memory: dict[str, DeviceAcc]
    total_ns: int
    unattributed_ns: int
    busy_by_step: list[dict[int, list[tuple[int, int]]]]
    dev_ns: list[int]  # per op name: device time under it (inclusive)
    self_dev_ns: list[int]
    dev_per_step: list[int]  # flat, n_names * n_steps
    self_dev_per_step: list[int]
    op_copies: dict[tuple[str, str], list[int]]  # (op, memory op) -> bytes per step
    graphs: dict[tuple[str | None, str], GraphAcc] = field(default_factory=dict)  # (op, launch call)

    def graph_stats(self) -> list[GraphLaunchStats]:
        stats = (
            GraphLaunchStats(
                op,
                launch,
                len(a.launches),
                a.kernels.calls,
                a.kernels.ns,
                Dist(tuple(a.launches_per_step)),
                Dist(tuple(a.kernels.calls_per_step)),
                Dist(tuple(a.kernels.ns_per_step)),
            )  # fmt: skip
            for (op, launch), a in self.graphs.items()
        )
        return sorted(stats, key=lambda g: (-g.device_ns, g.op or "", g.launch))

    def kernel_stats(self, n_steps: int) -> list[KernelStats]:
        stats = (
            KernelStats(name, op, a.calls, a.ns, Dist(tuple(a.calls_per_step)), Dist(tuple(a.ns_per_step)))
            for (name, op), a in self.kernels.items()
        )
        return sorted(stats, key=lambda k: (-k.device_ns, k.name, k.op or ""))

    def memory_stats(self) -> list[MemoryOpStats]:
        stats = (
            MemoryOpStats(name, a.calls, a.ns, a.bytes, Dist(tuple(a.calls_per_step)), Dist(tuple(a.ns_per_step)))
            for name, a in self.memory.items()
        )
        return sorted(stats, key=lambda m: (-m.device_ns, m.name))


def attribute_device_time(
    rows: Rows, t: EventTable, ops: OpColumns, tree: Tree, cpu: CpuStats, steps: Steps
) -> DeviceStats:
    """Each kernel and memory op: its launching op (through the runtime call's correlation id,
    else the External id), its step, and its time rolled up once per enclosing op name."""
    n_names, n_steps = len(cpu.name_index), steps.count
    stats = DeviceStats(
        {}, {}, 0, 0, [{} for _ in range(n_steps)], [0] * n_names, [0] * n_names,
        [0] * (n_names * n_steps), [0] * (n_names * n_steps), {},
    )  # fmt: skip
    runtime, runtime_by_corr = rows.runtime, rows.runtime_by_corr
    op_by_external = _ops_by_external_id(rows.device, runtime_by_corr, t, ops)
    for d in rows.device:
        j = runtime_by_corr.get(d.correlation, -1) if d.correlation else -1
        if j >= 0:
            op_idx, s = tree.launcher_of_runtime[j], steps.of(runtime[j].start_ns)
            if is_graph_launch(runtime[j].name):
                _add_graph_replay(stats, d, j, runtime[j].name, ops.names[op_idx] if op_idx >= 0 else None, s, n_steps)
        else:
            op_idx = op_by_external.get(d.external_id, -1) if d.external_id else -1
            s = tree.op_step[op_idx] if op_idx >= 0 else steps.of(d.start_ns)
        _add_device_event(stats, d, op_idx, s, ops.names, tree.parent, cpu.nid, n_steps)
    return stats


def _add_graph_replay(stats: DeviceStats, d: Event, j: int, launch: str, op: str | None, s: int, n_steps: int) -> None:
    """A kernel of a graph replay: counted under its launch call's row (the op's row gets it too)."""
    acc = stats.graphs.get((op, launch))
    if acc is None:
        acc = stats.graphs[op, launch] = GraphAcc(set(), [0] * n_steps, DeviceAcc(0, 0, [0] * n_steps, [0] * n_steps))
    if j not in acc.launches:
        acc.launches.add(j)
        if s >= 0:
            acc.launches_per_step[s] += 1
    if d.kind == KERNEL:
        acc.kernels.calls += 1
        acc.kernels.ns += d.dur_ns
        if s >= 0:
            acc.kernels.calls_per_step[s] += 1
            acc.kernels.ns_per_step[s] += d.dur_ns


def _ops_by_external_id(
    device: list[Event], runtime_by_corr: dict[int, int], t: EventTable, ops: OpColumns
) -> dict[int, int]:
    """External id -> op index, only when some device event has no runtime call to go by."""
    if not any(d.external_id and d.correlation not in runtime_by_corr for d in device):
        return {}
    ext = t.external_id
    op_ext = ext if isinstance(ops.rows, range) else [ext[i] for i in ops.rows]
    return {x: i for i, x in enumerate(op_ext) if x}


def _add_device_event(
    stats: DeviceStats, d: Event, op_idx: int, s: int, names: list[str], parent: list[int], nid: list[int], n_steps: int
) -> None:
    dur = d.dur_ns
    stats.total_ns += dur
    interval = (d.start_ns, d.start_ns + dur)
    if s >= 0:
        stats.busy_by_step[s].setdefault(d.device, []).append(interval)
    op_name: str | None = None
    if op_idx >= 0:
        op_name = names[op_idx]
        _roll_up(stats, dur, op_idx, s, parent, nid, n_steps)
    else:
        stats.unattributed_ns += dur
    if d.kind == KERNEL:
        acc = stats.kernels.get((d.name, op_name))
        if acc is None:
            acc = stats.kernels[d.name, op_name] = DeviceAcc(0, 0, [0] * n_steps, [0] * n_steps)
    else:
        acc = stats.memory.get(d.name)
        if acc is None:
            acc = stats.memory[d.name] = DeviceAcc(0, 0, [0] * n_steps, [0] * n_steps)
        acc.bytes += d.bytes
        if op_name is not None and s >= 0 and d.bytes:
            stats.op_copies.setdefault((op_name, d.name), [0] * n_steps)[s] += d.bytes
    acc.calls += 1
    acc.ns += dur
    if s >= 0:
        acc.calls_per_step[s] += 1
        acc.ns_per_step[s] += dur


def _roll_up(
    stats: DeviceStats, dur: int, op_idx: int, s: int, parent: list[int], nid: list[int], n_steps: int
) -> None:
    """Self device time to the launching op; device time once to each distinct enclosing name
    (so recursion does not count twice)."""
    k = nid[op_idx]
    stats.self_dev_ns[k] += dur
    if s >= 0:
        stats.self_dev_per_step[k * n_steps + s] += dur
    seen: set[int] = set()
    i = op_idx
    while i >= 0:
        k = nid[i]
        if k not in seen:
            seen.add(k)
            stats.dev_ns[k] += dur
            if s >= 0:
                stats.dev_per_step[k * n_steps + s] += dur
        i = parent[i]


class RecordsLost(NamedTuple):
    dropped: int  # kernel launches without a kernel record
    by_op: tuple[tuple[str, tuple[int, ...]], ...]  # per op enclosing one, those in each step


def records_lost(rows: Rows, ops: OpColumns, tree: Tree, steps: Steps, missing: list[Event]) -> RecordsLost:
    """The kernel launches the tracer dropped the records of (kernel_records), and per op that
    encloses one (its device time rolls up to each) how many in each step: there its device time
    is short and its kernel counts low (CUPTI of CUDA 12.6 Update 2 to 13.0 drops a growing number
    at each profiler session's start, pytorch#192021: a run()'s first step). `missing`: those
    launches (checks.dropped_launches)."""
    if not missing:
        return RecordsLost(0, ())
    index = {id(r): j for j, r in enumerate(rows.runtime)}
    lost: dict[str, list[int]] = {}
    for r in missing:
        s, i = steps.of(r.start_ns), tree.launcher_of_runtime[index[id(r)]]
        enclosing = set()
        while i >= 0 and s >= 0:
            enclosing.add(ops.names[i])
            i = tree.parent[i]
        for name in enclosing:
            lost.setdefault(name, [0] * steps.count)[s] += 1
    return RecordsLost(len(missing), tuple(sorted((name, tuple(counts)) for name, counts in lost.items())))


# -- 8. the device's timeline -----------------------------------------------------------------


def timeline_of(rows: Rows, ops: OpColumns, tree: Tree, steps: Steps) -> Timeline:
    """The timeline stage's inputs: each device event's launch call, each call's op, and per
    step the host's busy time (top-level ops on any thread)."""
    windows = [(span.start_ns, span.end_ns) for span in steps.spans]
    if not rows.device:
        return timeline([], [], Launches([], []), windows, steps.of, [])
    runtime, by_corr = rows.runtime, rows.runtime_by_corr
    call_of = [by_corr.get(d.correlation, -1) if d.correlation else -1 for d in rows.device]
    names = ops.names
    op_of_call = [names[i] if i >= 0 else None for i in tree.launcher_of_runtime]
    host_busy: list[list[tuple[int, int]]] = [[] for _ in steps.spans]
    unnested = set(tree.unnested)  # its end is another thread's moment
    for i, (p, s) in enumerate(zip(tree.parent, tree.op_step)):
        if p < 0 and s >= 0 and i not in unnested:
            host_busy[s].append((ops.starts[i], ops.starts[i] + ops.durs[i]))
    return timeline(rows.device, runtime, Launches(call_of, op_of_call), windows, steps.of, host_busy)


# -- 9. runtime calls -------------------------------------------------------------------------


def runtime_statistics(rows: Rows, steps: Steps) -> list[RuntimeStats]:
    """The user's runtime calls per name; the capture's own step synchronisation excluded."""
    windows: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for w in rows.sync_windows:
        windows.setdefault((w.pid, w.tid), []).append((w.start_ns, w.end_ns))
    for lst in windows.values():
        lst.sort()
    accs: dict[str, DeviceAcc] = {}
    for r in rows.runtime:
        if windows and _in_window(windows, r):
            continue
        acc = accs.get(r.name)
        if acc is None:
            acc = accs[r.name] = DeviceAcc(0, 0, [0] * steps.count, [])
        acc.calls += 1
        acc.ns += r.dur_ns
        s = steps.of(r.start_ns)
        if s >= 0:
            acc.calls_per_step[s] += 1
    stats = (RuntimeStats(name, a.calls, a.ns, Dist(tuple(a.calls_per_step))) for name, a in accs.items())
    return sorted(stats, key=lambda r: (-r.cpu_ns, r.name))


def _in_window(windows: dict[tuple[int, int], list[tuple[int, int]]], e: Event) -> bool:
    lst = windows.get((e.pid, e.tid))
    if not lst:
        return False
    i = bisect_right(lst, (e.start_ns, 1 << 62)) - 1
    return i >= 0 and lst[i][0] <= e.start_ns <= lst[i][1]


# -- 9. work ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Inputs:
    """The analysed ops' input shapes, types and FLOPs; empty lists when not recorded. `autograd`:
    whether autograd recorded each (EventTable.autograd), None where the source does not say."""

    shapes: list[Any]
    dtypes: list[tuple[str, ...]]
    flops: list[int]
    autograd: list[bool] | None = None


def _op_inputs(t: EventTable, op_rows: Sequence[int]) -> _Inputs:
    if not t.has_shapes:
        return _Inputs([], [], [])
    recorded = t.autograd
    autograd = None if recorded is None else [row in recorded for row in op_rows]
    if isinstance(op_rows, range) and len(op_rows) == len(t):
        return _Inputs(t.shapes, t.dtypes, t.flops, autograd)
    pick = list(op_rows)
    return _Inputs(
        list(map(t.shapes.__getitem__, pick)),
        list(map(t.dtypes.__getitem__, pick)),
        list(map(t.flops.__getitem__, pick)),
        autograd,
    )


def op_work(
    ops: OpColumns,
    tree: Tree,
    cpu: CpuStats,
    n_steps: int,
    op_copies: dict[tuple[str, str], list[int]],
    inputs: _Inputs,
) -> dict[str, OpWork]:
    """Per op name: its calls per step by input signature (with the callers of its first call),
    its FLOPs, the bytes its memory ops moved and its calls autograd recorded per step. Empty
    when no inputs were recorded."""
    if not inputs.shapes:
        return {}
    names = list(cpu.name_index)
    calls: dict[int, dict[tuple[Any, tuple[str, ...]], list[int]]] = {}
    first_call: dict[tuple[int, Any, tuple[str, ...]], int] = {}
    flops = [0] * (len(names) * n_steps)
    graded = [0] * (len(names) * n_steps)
    autograd: Iterable[bool] = inputs.autograd or repeat(False)
    for i, (k, s, shapes, dtypes, f, g) in enumerate(
        zip(cpu.nid, tree.op_step, inputs.shapes, inputs.dtypes, inputs.flops, autograd)
    ):
        if s >= 0:
            calls.setdefault(k, {}).setdefault((shapes, dtypes), [0] * n_steps)[s] += 1
            first_call.setdefault((k, shapes, dtypes), i)
            flops[k * n_steps + s] += f
            graded[k * n_steps + s] += g
    copies: dict[str, list[tuple[str, Dist]]] = {}
    for (op, memory_op), per_step in sorted(op_copies.items()):
        copies.setdefault(op, []).append((memory_op, Dist(tuple(per_step))))

    def signatures(k: int) -> tuple[Signature, ...]:
        by_calls = sorted(calls.get(k, {}).items(), key=lambda item: -sum(item[1]))  # stable: first run first
        return tuple(
            Signature(shapes, dtypes, Dist(tuple(per_step)), tree.callers(ops.names, first_call[k, shapes, dtypes]))
            for (shapes, dtypes), per_step in by_calls
        )

    def recorded(k: int) -> Dist | None:
        return None if inputs.autograd is None else Dist(tuple(graded[k * n_steps : (k + 1) * n_steps]))

    return {
        name: OpWork(
            signatures(k), Dist(tuple(flops[k * n_steps : (k + 1) * n_steps])), tuple(copies.get(name, ())), recorded(k)
        )
        for k, name in enumerate(names)
    }


# -- 10. assemble -----------------------------------------------------------------------------


def assemble_ops(cpu: CpuStats, device: DeviceStats, n_steps: int, work: dict[str, OpWork]) -> list[OpStats]:
    def per_step(flat: list[int], k: int) -> Dist:
        return Dist(tuple(flat[k * n_steps : (k + 1) * n_steps]))

    ops = [
        OpStats(
            name,
            cpu.calls[k],
            cpu.cpu_ns[k],
            cpu.self_cpu_ns[k],
            device.dev_ns[k],
            device.self_dev_ns[k],
            per_step(cpu.calls_per_step, k),
            per_step(cpu.cpu_per_step, k),
            per_step(cpu.self_cpu_per_step, k),
            per_step(device.dev_per_step, k),
            per_step(device.self_dev_per_step, k),
            work.get(name),
            per_step(cpu.outer_calls_per_step, k) if cpu.outer_calls_per_step is not None else None,
        )
        for name, k in cpu.name_index.items()
    ]
    return by_shown_time(ops)
