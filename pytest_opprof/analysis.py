"""Events -> Profile: steps, per-op and per-kernel statistics, device-time attribution, trust checks.

One analysis serves both sources (live capture and trace file), so both give the same numbers.

Attribution: a kernel or memory op carries a correlation id shared with the runtime/driver call
that launched it; its launching op is the innermost CPU op enclosing that call on the call's
thread. Where no runtime call is known, Kineto's External id is used when it names a CPU op.
Each device event is attributed to at most one op (self device time) and rolled up once to each
distinct op name enclosing it (device time), so attributed + unattributed = total device time.
"""

from __future__ import annotations

import fnmatch
import re
import statistics
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress, repeat
from operator import add, lt, neg, sub
from typing import Any

from .events import (
    ANNOTATION,
    CPU_OP,
    DEVICE_KINDS,
    KERNEL,
    RUNTIME,
    Event,
    EventTable,
    freeze,
    gc_paused,
)

_CPU_OP_KIND = frozenset({CPU_OP})
_ANNOTATION_KIND = frozenset({ANNOTATION})
_RUNTIME_KIND = frozenset({RUNTIME})

SCHEMA = 1
STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
# The capture wraps its own step-boundary synchronisation in this annotation, so that the
# synchronisation it needs is not reported as the user's host-device sync.
OPPROF_SYNC_ANNOTATION = "opprof::step_sync"

# Trust-check thresholds. Timing consistency: CPU or device time may exceed the step's wall time
# only by clock skew between threads / device and host (a few microseconds) plus 2%.
WALL_MARGIN = 0.02
WALL_SLACK_NS = 20_000
SPREAD_LIMIT = 0.25  # IQR / median over steps
SPREAD_MIN_STEPS = 4
SPREAD_FLOOR_NS = 50_000  # ops faster than this per step are too small to judge spread

OK, WARNING, ERROR = "ok", "warning", "error"

# Runtime calls that launch device work: seeing them without device events means the device
# tracer (CUPTI / roctracer) did not deliver.
_LAUNCH_CALL = re.compile(r"(LaunchKernel|LaunchCooperativeKernel|Memcpy|Memset|GraphLaunch)", re.I)
# Host-device synchronisation: runtime calls, CPU ops, and device-to-host copies.
SYNC_RUNTIME_CALL = re.compile(r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchronize|^(cuda|hip)StreamWaitEvent$")
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")


def ns_to_ms(ns: float) -> float:
    return ns / 1e6


@dataclass(frozen=True, slots=True)
class Dist:
    """The per-step distribution of one quantity (counts, or nanoseconds)."""

    samples: tuple[int, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else 0.0

    @property
    def min(self) -> int:
        return min(self.samples, default=0)

    @property
    def max(self) -> int:
        return max(self.samples, default=0)

    @property
    def iqr(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q3 - q1

    def to_dict(self, scale: float = 1.0) -> dict[str, Any]:
        def conv(v: float) -> float:
            return v / scale if scale != 1.0 else v

        return {
            "median": conv(self.median),
            "min": conv(self.min),
            "max": conv(self.max),
            "samples": [conv(v) for v in self.samples],
        }


NO_TENSOR_INPUTS = "no tensor inputs"
_NOT_TENSORS = frozenset({"Scalar", "ScalarList", "TensorList", "GenericList", "Device", "Layout", "ScalarType"})


def _dims(shape: Any) -> str:
    return "[" + ",".join(_dims(d) if isinstance(d, tuple) else str(d) for d in shape) + "]"


def inputs_text(shapes: Any, dtypes: tuple[str, ...], full: bool = False) -> str:
    """`float[128,512], float[512,1024]`: tensors with their shapes, lists by kind; scalars and
    absent optional inputs left out (they are still part of the signature) unless `full`, which
    shows every position (`float[4,4], -, Scalar`)."""
    parts = []
    for i, dtype in enumerate(dtypes):
        shape = shapes[i] if i < len(shapes) else ()
        if not dtype or dtype == "Scalar":
            if full:
                parts.append(dtype or "-")
            continue
        parts.append(dtype if dtype in _NOT_TENSORS and not shape else f"{dtype}{_dims(shape)}")
    return ", ".join(parts) or NO_TENSOR_INPUTS


@dataclass(frozen=True, slots=True)
class Signature:
    """One input signature of an op (shapes and types, from record_shapes) and its calls per step."""

    shapes: Any  # one shape per input: a tuple of ints, nested for a list of tensors
    dtypes: tuple[str, ...]
    calls_per_step: Dist
    callers: tuple[str, ...] = ()  # the ops around its first call, innermost first

    @property
    def text(self) -> str:
        return inputs_text(self.shapes, self.dtypes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "shapes": _lists(self.shapes),
            "dtypes": list(self.dtypes),
            "calls": sum(self.calls_per_step.samples),
            "callers": list(self.callers),
        }


def _lists(value: Any) -> Any:
    return [_lists(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class OpWork:
    """What an op computed, as exact counts: its input signatures, FLOPs, the bytes its copies moved.

    Recorded with record_shapes and with_flops: in a separate untimed step of `run()`, in the
    single step of a one-step capture, in every step of a trace that has them."""

    signatures: tuple[Signature, ...]
    flops_per_step: Dist
    bytes_per_step: tuple[tuple[str, Dist], ...] = ()  # (memory op, bytes per step) launched by the op

    @property
    def flops(self) -> int:
        return sum(self.flops_per_step.samples)

    def to_json(self) -> dict[str, Any]:
        """Everything, per step: what an exported trace carries for load_trace to restore."""
        return {
            "signatures": [
                {
                    "shapes": _lists(s.shapes),
                    "dtypes": list(s.dtypes),
                    "calls_per_step": list(s.calls_per_step.samples),
                    "callers": list(s.callers),
                }
                for s in self.signatures
            ],
            "flops_per_step": list(self.flops_per_step.samples),
            "bytes_per_step": {name: list(d.samples) for name, d in self.bytes_per_step},
        }

    @classmethod
    def from_json(cls, data: Any) -> OpWork:
        """The inverse of to_json; ValueError (or a KeyError/TypeError) on anything else."""
        signatures = tuple(
            Signature(
                freeze(s["shapes"]),
                tuple(map(str, s["dtypes"])),
                Dist(_ints(s["calls_per_step"])),
                tuple(map(str, s.get("callers", ()))),
            )
            for s in data["signatures"]
        )
        copies = tuple((str(name), Dist(_ints(v))) for name, v in sorted(data["bytes_per_step"].items()))
        return cls(signatures, Dist(_ints(data["flops_per_step"])), copies)


def _ints(values: Any) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(type(v) is int for v in values):
        raise ValueError(f"{values!r} is not a list of integers")
    return tuple(values)


@dataclass(frozen=True, slots=True)
class OpStats:
    """One operator name: totals over the source and its per-step distributions."""

    name: str
    calls: int
    cpu_ns: int  # inclusive CPU time; a call nested in a call of the same name counts once
    self_cpu_ns: int
    device_ns: int  # device time of work launched under the op (inclusive)
    self_device_ns: int  # device time of work launched by the op itself
    calls_per_step: Dist
    cpu_per_step: Dist
    self_cpu_per_step: Dist
    device_per_step: Dist
    self_device_per_step: Dist
    work: OpWork | None = None  # None: inputs not recorded

    @property
    def on_device(self) -> bool:
        """True when device work ran under this op: its time is then device time."""
        return self.device_ns > 0

    @property
    def time_ns(self) -> int:
        return self.device_ns if self.on_device else self.cpu_ns

    @property
    def time_per_step(self) -> Dist:
        """Device time per step for ops that ran on a device, CPU time otherwise."""
        return self.device_per_step if self.on_device else self.cpu_per_step

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "cpu_ms": ns_to_ms(self.cpu_ns),
            "self_cpu_ms": ns_to_ms(self.self_cpu_ns),
            "device_ms": ns_to_ms(self.device_ns),
            "self_device_ms": ns_to_ms(self.self_device_ns),
            "on_device": self.on_device,
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "cpu_ms": self.cpu_per_step.to_dict(1e6),
                "self_cpu_ms": self.self_cpu_per_step.to_dict(1e6),
                "device_ms": self.device_per_step.to_dict(1e6),
                "self_device_ms": self.self_device_per_step.to_dict(1e6),
                "flops": self.work.flops_per_step.to_dict() if self.work else None,
            },
            "flops": self.work.flops if self.work else None,
            "signatures": [sig.to_dict() for sig in self.work.signatures] if self.work else None,
        }


@dataclass(frozen=True, slots=True)
class KernelStats:
    """One kernel name launched by one op (op None: no launching op found)."""

    name: str
    op: str | None
    calls: int
    device_ns: int
    calls_per_step: Dist
    device_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "calls": self.calls,
            "device_ms": ns_to_ms(self.device_ns),
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "device_ms": self.device_per_step.to_dict(1e6),
            },
        }


@dataclass(frozen=True, slots=True)
class MemoryOpStats:
    """One memcpy/memset kind ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)")."""

    name: str
    calls: int
    device_ns: int
    bytes: int
    calls_per_step: Dist
    device_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "device_ms": ns_to_ms(self.device_ns),
            "bytes": self.bytes,
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "device_ms": self.device_per_step.to_dict(1e6),
            },
        }


@dataclass(frozen=True, slots=True)
class RuntimeStats:
    """One runtime/driver call name (cudaLaunchKernel, hipMemcpyAsync, ...)."""

    name: str
    calls: int
    cpu_ns: int
    calls_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "cpu_ms": ns_to_ms(self.cpu_ns),
            "per_step": {"calls": self.calls_per_step.to_dict()},
        }


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one trust check on a measurement."""

    name: str
    status: str  # ok | warning | error
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "message": self.message}


@dataclass(frozen=True, slots=True)
class StepSpan:
    number: int  # N of ProfilerStep#N; 0 for a source without step markers
    start_ns: int
    end_ns: int

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Profile:
    """The analysed measurement: what `opprof.profile`, `measure()` and `load_trace()` return."""

    source: str
    step_spans: tuple[StepSpan, ...]
    wall_known: bool  # False for a trace without step markers: its span is not a wall time
    ops: tuple[OpStats, ...]
    kernels: tuple[KernelStats, ...]
    memory_ops: tuple[MemoryOpStats, ...]
    runtime: tuple[RuntimeStats, ...]
    device_ns: int
    device_busy_ns: int
    unattributed_device_ns: int
    outside_step_ops: int
    checks: tuple[Check, ...]
    metadata: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    event_table: EventTable | None = field(default=None, repr=False, compare=False)
    # Best time of a fixed CPU workload around a live capture (machine speed); None for traces.
    reference_ns: int | None = field(default=None, compare=False)
    # Best time of 100 one-element ops around it (dispatch speed: a core shared with another tenant).
    dispatch_reference_ns: int | None = field(default=None, compare=False)
    # Steps the ops' work (input signatures, FLOPs) was recorded over: 0 when not recorded.
    work_steps: int = field(default=0, compare=False)
    # Op names and parent indices of the analysed ops, for naming an op's callers in messages.
    op_tree: tuple[list[str], list[int]] = field(default=((), ()), repr=False, compare=False)  # type: ignore[assignment]

    def with_work(self, work: dict[str, OpWork], steps: int) -> Profile:
        """This profile with its ops' work taken from `work` (recorded over `steps` other steps:
        the untimed signature step of a run, or an exported trace's header)."""
        ops = tuple(replace(op, work=work.get(op.name)) for op in self.ops)
        return replace(self, ops=ops, work_steps=steps)

    def callers(self, name: str, depth: int = 2) -> tuple[str, ...]:
        """The names of the ops that called the first `name` op, innermost first."""
        names, parent = self.op_tree
        try:
            i = names.index(name)
        except ValueError:
            return ()
        found: list[str] = []
        while len(found) < depth and (i := parent[i]) >= 0:
            found.append(names[i])
        return tuple(found)

    @property
    def events(self) -> list[Event]:
        """The analysed events (built on demand: the analysis reads columns)."""
        return self.event_table.to_events() if self.event_table is not None else []

    # -- numbers -----------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return len(self.step_spans)

    @property
    def wall_ms(self) -> float | None:
        """Summed wall time of the steps; None for a trace without step markers."""
        if not self.wall_known:
            return None
        return ns_to_ms(sum(s.wall_ns for s in self.step_spans))

    @property
    def device_busy_ms(self) -> float:
        return ns_to_ms(self.device_busy_ns)

    @property
    def errors(self) -> list[Check]:
        return [c for c in self.checks if c.status == ERROR]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == WARNING]

    # -- lookup ------------------------------------------------------------------------------
    def op(self, name: str) -> OpStats | None:
        """The op of exactly this name, or None."""
        for op in self.ops:
            if op.name == name:
                return op
        return None

    def match(self, pattern: str) -> list[OpStats]:
        """Ops whose name equals `pattern` or matches it as a glob ("aten::*mm")."""
        exact = self.op(pattern)
        if exact is not None:
            return [exact]
        return [op for op in self.ops if fnmatch.fnmatchcase(op.name, pattern)]

    def match_memory_ops(self, pattern: str) -> list[MemoryOpStats]:
        return [m for m in self.memory_ops if m.name == pattern or fnmatch.fnmatchcase(m.name, pattern)]

    # -- output ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (also what `opprof analyze --json` prints)."""
        return {
            "schema": SCHEMA,
            "source": self.source,
            "steps": self.steps,
            "wall_ms": self.wall_ms,
            "step_wall_ms": Dist(tuple(s.wall_ns for s in self.step_spans)).to_dict(1e6) if self.wall_known else None,
            "ops": [o.to_dict() for o in self.ops],
            "kernels": [k.to_dict() for k in self.kernels],
            "memory_ops": [m.to_dict() for m in self.memory_ops],
            "runtime": [r.to_dict() for r in self.runtime],
            "device_ms": ns_to_ms(self.device_ns),
            "device_busy_ms": ns_to_ms(self.device_busy_ns),
            "unattributed_device_ms": ns_to_ms(self.unattributed_device_ns),
            "outside_step_ops": self.outside_step_ops,
            "reference_ms": ns_to_ms(self.reference_ns) if self.reference_ns else None,
            "dispatch_reference_ms": ns_to_ms(self.dispatch_reference_ns) if self.dispatch_reference_ns else None,
            "work_steps": self.work_steps,
            "checks": [c.to_dict() for c in self.checks],
        }

    def table(self, top: int | None = 20) -> str:
        """The ops, kernels, memory ops and checks as text tables."""
        from .report import profile_tables  # report reads profiles; import late to keep one way

        return profile_tables(self, top=top)

    def export_chrome_trace(self, path: str) -> None:
        """Write the captured events as a Chrome/Perfetto trace (.json or .json.gz)."""
        from .trace import write_trace

        opprof = {
            "source": self.source,
            "reference_ns": self.reference_ns,
            "dispatch_reference_ns": self.dispatch_reference_ns,
            # The work of a run() comes from its untimed signature step, not from these events.
            "work_steps": self.work_steps,
            "work": {op.name: op.work.to_json() for op in self.ops if op.work is not None},
        }
        write_trace(path, self.events, {"schemaVersion": 1, "opprof": opprof})


# --------------------------------------------------------------------------------------------
# the analysis


def _is_step_marker(event: Event) -> bool:
    return (event.kind == ANNOTATION or event.kind == CPU_OP) and STEP_NAME.match(event.name) is not None


def _find_steps(markers: list[Event], t: EventTable) -> tuple[list[StepSpan], bool]:
    if markers:
        markers.sort(key=lambda e: e.start_ns)
        spans = [StepSpan(int(STEP_NAME.match(m.name).group(1)), m.start_ns, m.end_ns) for m in markers]  # type: ignore[union-attr]
        return spans, True
    if not len(t):
        return [StepSpan(0, 0, 0)], False
    start = min(t.start_ns)
    end = max(map(add, t.start_ns, t.dur_ns))
    return [StepSpan(0, start, end)], False


def _union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    total = 0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start  # type: ignore[operator]
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += cur_end - cur_start  # type: ignore[operator]
    return total


def analyze(
    events: Sequence[Event] | EventTable,
    *,
    source: str = "events",
    metadata: dict[str, Any] | None = None,
) -> Profile:
    """Analyse events into a Profile. Steps come from CPU-side ProfilerStep#N annotations;
    without them the whole source is one step."""
    with gc_paused():
        table = events if isinstance(events, EventTable) else EventTable.from_events(events)
        return _analyze(table, source, dict(metadata or {}))


def _rows_of(kinds: list[str], counts: Counter[str], wanted: frozenset[str]) -> list[int] | range:
    if sum(counts[k] for k in wanted) == len(kinds):
        return range(len(kinds))
    if not any(counts[k] for k in wanted):
        return []
    return list(compress(range(len(kinds)), map(wanted.__contains__, kinds)))


def _analyze(t: EventTable, source: str, metadata: dict[str, Any]) -> Profile:
    # Hot path: 10^5 events per capture. Columns and comprehensions, no object per event.
    kinds = t.kind
    counts = Counter(kinds)
    op_rows = _rows_of(kinds, counts, _CPU_OP_KIND)
    ann_rows = _rows_of(kinds, counts, _ANNOTATION_KIND)
    device = [t.row(i) for i in _rows_of(kinds, counts, DEVICE_KINDS)]
    runtime = [t.row(i) for i in _rows_of(kinds, counts, _RUNTIME_KIND)]
    annotations = [t.row(i) for i in ann_rows]

    markers = [e for e in annotations if e.name.startswith("ProfilerStep#") and STEP_NAME.match(e.name)]
    all_names = t.name
    old_markers: list[int] = []
    if not markers and any(all_names[i].startswith("ProfilerStep#") for i in op_rows):
        # older Kineto wrote the step markers as cpu_op
        old_markers = [i for i in op_rows if STEP_NAME.match(all_names[i])]
        markers = [t.row(i) for i in old_markers]
    sync_windows = [e for e in annotations if e.name == OPPROF_SYNC_ANNOTATION]

    spans, wall_known = _find_steps(markers, t)
    n_steps = len(spans)
    step_starts = [s.start_ns for s in spans]
    step_ends = [s.end_ns for s in spans]

    def step_of(ts: int) -> int:
        i = bisect_right(step_starts, ts) - 1
        return i if i >= 0 and ts <= step_ends[i] else -1

    if isinstance(op_rows, range) and not old_markers:
        names, starts, durs, pids, tids = t.name, t.start_ns, t.dur_ns, t.pid, t.tid
    else:
        is_op = list(map(_CPU_OP_KIND.__contains__, kinds))
        for i in old_markers:
            is_op[i] = False
        op_rows = list(compress(range(len(kinds)), is_op))
        names, starts, durs, pids, tids = (
            list(compress(c, is_op)) for c in (t.name, t.start_ns, t.dur_ns, t.pid, t.tid)
        )
    n_ops = len(names)

    # -- nesting, per thread: parent of each op, innermost op around each runtime call -------
    # Items 0..n_ops-1 are ops, n_ops.. are runtime calls. Sort key: start; at equal starts
    # the longer op first (it encloses the shorter), calls after ops.
    parent = [-1] * n_ops
    child_ns = [0] * n_ops
    nested_same_name = [False] * n_ops
    launcher_of_runtime = [-1] * len(runtime)
    item_starts = starts + [r.start_ns for r in runtime] if runtime else starts
    n_items = len(item_starts)
    if len(set(pids)) <= 1 and len(set(tids)) <= 1 and all(r.pid == pids[0] and r.tid == tids[0] for r in runtime):
        groups: list[list[int]] = [list(range(n_items))]
    else:
        item_thread = list(zip(pids, tids)) + [(r.pid, r.tid) for r in runtime]
        by_thread: dict[tuple[int, int], list[int]] = {th: [] for th in set(item_thread)}
        for i, th in enumerate(item_thread):
            by_thread[th].append(i)
        groups = list(by_thread.values())
    op_step = [-1] * n_ops  # index of the step each op starts in; -1 outside every step
    # Sentinels keep the hot loop free of emptiness checks: the parent of a top-level op is -1,
    # whose child time lands in an extra last slot of child_ns (dropped below); an infinite end
    # never pops, and a step start at infinity is never reached.
    child_ns.append(0)
    inf = float("inf")
    keys: list[tuple[int, int]] = []
    item_durs = durs + [0] * len(runtime) if runtime else durs
    item_names = names + [""] * len(runtime) if runtime else names
    for group in groups:
        group_starts = list(map(item_starts.__getitem__, group))
        in_order = all(map(lt, group_starts, group_starts[1:]))
        if not in_order:
            # Sort key: start; at equal starts the longer op first (it encloses the shorter),
            # runtime calls (1) after every op (-dur <= 0). Live captures arrive sorted.
            if not keys:
                keys = list(zip(starts, map(neg, durs)))
                keys += [(r.start_ns, 1) for r in runtime]
            group.sort(key=keys.__getitem__)
            group_starts = list(map(item_starts.__getitem__, group))
        stack = [-1]
        stack_ends: list[float] = [inf]
        stack_names: list[str | None] = [None]  # a short list: `in` on it beats a dict of counts
        group_durs = list(map(item_durs.__getitem__, group))
        group_names = list(map(item_names.__getitem__, group))
        for idx, start, dur, name in zip(group, group_starts, group_durs, group_names):
            while stack_ends[-1] <= start:
                stack_ends.pop()
                stack.pop()
                stack_names.pop()
            if idx >= n_ops:
                launcher_of_runtime[idx - n_ops] = stack[-1]
                continue
            p = stack[-1]
            parent[idx] = p
            child_ns[p] += dur
            if name in stack_names:
                nested_same_name[idx] = True
            stack.append(idx)
            stack_ends.append(start + dur)
            stack_names.append(name)
        # The step of each op: the latest step begun at its start, if the op starts before
        # that step ends. Later steps overwrite earlier ones where (odd) steps overlap.
        identity = in_order and (not group or (group[0] == 0 and group[-1] == len(group) - 1))
        for si in range(n_steps):
            lo = bisect_left(group_starts, step_starts[si])
            hi = bisect_right(group_starts, step_ends[si])
            if identity:  # positions are op indices (runtime calls come after all ops)
                hi = min(hi, n_ops)
                if hi > lo:
                    op_step[lo:hi] = [si] * (hi - lo)
            else:
                for idx in group[lo:hi]:
                    if idx < n_ops:
                        op_step[idx] = si
    child_ns.pop()

    # -- torch's counting rule: a redispatch to an op of the same name is one call ----------
    folded = _redispatches(names, parent, nested_same_name)
    if folded:
        rows = list(op_rows)
        fold = _fold(folded, parent, child_ns, durs, launcher_of_runtime)
        keep = fold.keep
        names, starts, durs, pids, tids, op_step, child_ns, nested_same_name, rows = (
            list(compress(c, keep))
            for c in (names, starts, durs, pids, tids, op_step, child_ns, nested_same_name, rows)
        )
        parent, launcher_of_runtime, op_rows = fold.parent, fold.launcher_of_runtime, rows
        n_ops = len(names)
    inputs = _op_inputs(t, op_rows)

    # -- CPU op statistics, accumulated per (name, step) in flat lists ----------------------
    # Slot 0 of each name's block collects ops outside every step; totals are block sums.
    name_index = {n: i for i, n in enumerate(dict.fromkeys(names))}
    nid = list(map(name_index.__getitem__, names))
    n_names = len(name_index)
    calls_by_name = Counter(nid)
    width = n_steps + 1
    first_slot = [k * width + 1 for k in range(n_names)]
    slot = list(map(add, map(first_slot.__getitem__, nid), op_step))
    calls_slots = Counter(slot)
    slot_calls = [calls_slots.get(j, 0) for j in range(n_names * width)]
    slot_self_cpu = [0] * (n_names * width)
    slot_cpu = [0] * (n_names * width)
    self_ns = list(map(sub, durs, child_ns))
    if any(map(lt, self_ns, repeat(0))):  # children may overrun a parent by a rounding step
        self_ns = [v if v > 0 else 0 for v in self_ns]
    for j, v in zip(slot, self_ns):
        slot_self_cpu[j] += v
    if any(nested_same_name):  # an op inside a same-name op: its time is counted once
        outer = [not n for n in nested_same_name]
        for j, d in zip(compress(slot, outer), compress(durs, outer)):
            slot_cpu[j] += d
    else:
        for j, d in zip(slot, durs):
            slot_cpu[j] += d

    def totals(flat: list[int]) -> list[int]:
        return [sum(flat[k * width : (k + 1) * width]) for k in range(n_names)]

    def steps_only(flat: list[int]) -> list[int]:
        return [v for k in range(n_names) for v in flat[k * width + 1 : (k + 1) * width]]

    cpu_tot, self_cpu_tot = totals(slot_cpu), totals(slot_self_cpu)
    ps_calls, ps_cpu, ps_self_cpu = steps_only(slot_calls), steps_only(slot_cpu), steps_only(slot_self_cpu)
    dev_tot = [0] * n_names
    self_dev_tot = [0] * n_names
    ps_dev = [0] * (n_names * n_steps)
    ps_self_dev = [0] * (n_names * n_steps)
    outside = op_step.count(-1)

    # -- device events: launching op, step, attribution ---------------------------------------
    runtime_by_corr: dict[int, int] = {}
    for j, r in enumerate(runtime):
        if r.correlation:
            runtime_by_corr[r.correlation] = j
    op_by_external: dict[int, int] = {}
    if any(d.external_id and d.correlation not in runtime_by_corr for d in device):
        ext = t.external_id
        op_ext = ext if isinstance(op_rows, range) else [ext[i] for i in op_rows]
        op_by_external = {x: i for i, x in enumerate(op_ext) if x}

    kernels: dict[tuple[str, str | None], list[Any]] = {}
    op_copies: dict[tuple[str, str], list[int]] = {}  # (op, memory op) -> bytes per step
    memory: dict[str, list[Any]] = {}
    device_total = 0
    unattributed = 0
    busy_by_device: dict[int, list[tuple[int, int]]] = {}
    busy_by_step: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(n_steps)]
    for d in device:
        dur = d.dur_ns
        device_total += dur
        j = runtime_by_corr.get(d.correlation, -1) if d.correlation else -1
        if j >= 0:
            op_idx = launcher_of_runtime[j]
            s = step_of(runtime[j].start_ns)
        else:
            op_idx = op_by_external.get(d.external_id, -1) if d.external_id else -1
            s = op_step[op_idx] if op_idx >= 0 else step_of(d.start_ns)
        interval = (d.start_ns, d.start_ns + dur)
        busy_by_device.setdefault(d.device, []).append(interval)
        if s >= 0:
            busy_by_step[s].setdefault(d.device, []).append(interval)
        op_name: str | None = None
        if op_idx >= 0:
            op_name = names[op_idx]
            k = nid[op_idx]
            self_dev_tot[k] += dur
            if s >= 0:
                ps_self_dev[k * n_steps + s] += dur
            # Roll up once per distinct enclosing name, so recursion does not count twice.
            seen: set[int] = set()
            i = op_idx
            while i >= 0:
                k = nid[i]
                if k not in seen:
                    seen.add(k)
                    dev_tot[k] += dur
                    if s >= 0:
                        ps_dev[k * n_steps + s] += dur
                i = parent[i]
        else:
            unattributed += dur
        if d.kind == KERNEL:
            key = (d.name, op_name)
            row = kernels.get(key)
            if row is None:
                row = kernels[key] = [0, 0, [0] * n_steps, [0] * n_steps]
        else:
            row = memory.get(d.name)
            if row is None:
                row = memory[d.name] = [0, 0, [0] * n_steps, [0] * n_steps, 0]
            row[4] += d.bytes
            if op_name is not None and s >= 0 and d.bytes:
                op_copies.setdefault((op_name, d.name), [0] * n_steps)[s] += d.bytes
        row[0] += 1
        row[1] += dur
        if s >= 0:
            row[2][s] += 1
            row[3][s] += dur

    # -- runtime calls (the user's; the capture's own step synchronisation excluded) ---------
    windows: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for w in sync_windows:
        windows.setdefault((w.pid, w.tid), []).append((w.start_ns, w.end_ns))
    for lst in windows.values():
        lst.sort()

    def in_sync_window(e: Event) -> bool:
        lst = windows.get((e.pid, e.tid))
        if not lst:
            return False
        i = bisect_right(lst, (e.start_ns, 1 << 62)) - 1
        return i >= 0 and lst[i][0] <= e.start_ns <= lst[i][1]

    rt_rows: dict[str, list[Any]] = {}
    for r in runtime:
        if windows and in_sync_window(r):
            continue
        row = rt_rows.get(r.name)
        if row is None:
            row = rt_rows[r.name] = [0, 0, [0] * n_steps]
        row[0] += 1
        row[1] += r.dur_ns
        s = step_of(r.start_ns)
        if s >= 0:
            row[2][s] += 1

    # -- work: input signatures, FLOPs and copied bytes per op and step -----------------------
    work = _work(nid, op_step, list(name_index), inputs, n_steps, op_copies, _Tree(names, parent))

    # -- assemble -----------------------------------------------------------------------------
    def per_step(flat: list[int], k: int) -> Dist:
        return Dist(tuple(flat[k * n_steps : (k + 1) * n_steps]))

    ops = [
        OpStats(
            name,
            calls_by_name[k],
            cpu_tot[k],
            self_cpu_tot[k],
            dev_tot[k],
            self_dev_tot[k],
            per_step(ps_calls, k),
            per_step(ps_cpu, k),
            per_step(ps_self_cpu, k),
            per_step(ps_dev, k),
            per_step(ps_self_dev, k),
            work.get(name),
        )
        for name, k in name_index.items()
    ]
    ops.sort(key=lambda o: (-o.time_ns, -o.cpu_ns, o.name))
    kernel_stats = sorted(
        (KernelStats(name, op, r[0], r[1], Dist(tuple(r[2])), Dist(tuple(r[3]))) for (name, op), r in kernels.items()),
        key=lambda k: (-k.device_ns, k.name, k.op or ""),
    )
    memory_stats = sorted(
        (MemoryOpStats(name, r[0], r[1], r[4], Dist(tuple(r[2])), Dist(tuple(r[3]))) for name, r in memory.items()),
        key=lambda m: (-m.device_ns, m.name),
    )
    runtime_stats = sorted(
        (RuntimeStats(name, r[0], r[1], Dist(tuple(r[2]))) for name, r in rt_rows.items()),
        key=lambda r: (-r.cpu_ns, r.name),
    )
    device_busy = sum(_union_ns(v) for v in busy_by_device.values())

    checks = _trust_checks(
        pids=pids,
        tids=tids,
        durs=durs,
        parent=parent,
        op_step=op_step,
        device=device,
        runtime=runtime,
        spans=spans,
        busy_by_step=busy_by_step,
        ops=ops,
        outside=outside,
        wall_known=wall_known,
        n_events=n_ops + len(device),
    )
    return Profile(
        source=source,
        step_spans=tuple(spans),
        wall_known=wall_known,
        ops=tuple(ops),
        kernels=tuple(kernel_stats),
        memory_ops=tuple(memory_stats),
        runtime=tuple(runtime_stats),
        device_ns=device_total,
        device_busy_ns=device_busy,
        unattributed_device_ns=unattributed,
        outside_step_ops=outside,
        checks=tuple(checks),
        metadata=metadata,
        event_table=t,
        work_steps=n_steps if inputs.shapes else 0,
        op_tree=(names, parent),
    )


def _redispatches(names: list[str], parent: list[int], nested_same_name: list[bool]) -> set[int]:
    """Ops torch's key_averages() folds into their caller: the only CPU-op child of an op of the
    same name (aten::upsample_bilinear2d.vec calling aten::upsample_bilinear2d, say)."""
    same = [i for i in compress(range(len(names)), nested_same_name) if names[parent[i]] == names[i]]
    if not same:
        return set()
    callers = {parent[i] for i in same}
    children = Counter(filter(callers.__contains__, parent))
    return {i for i in same if children[parent[i]] == 1}


@dataclass(frozen=True, slots=True)
class _Fold:
    keep: list[bool]  # per op: not folded into its caller
    parent: list[int]  # the kept ops' parents, as indices among the kept ops
    launcher_of_runtime: list[int]  # likewise for runtime calls


def _fold(folded: set[int], parent: list[int], child_ns: list[int], durs: list[int], launchers: list[int]) -> _Fold:
    """Fold each redispatch into its caller: its children and launches become the caller's,
    and its self time too (the caller's child time loses it and gains its children's)."""

    def survivor(i: int) -> int:
        while i in folded:
            i = parent[i]
        return i

    for i in folded:
        child_ns[survivor(i)] += child_ns[i] - durs[i]
    keep = [i not in folded for i in range(len(parent))]
    new_index = [-1] * (len(parent) + 1)  # the last slot maps a top-level op's parent -1 to -1
    for new, old in enumerate(compress(range(len(parent)), keep)):
        new_index[old] = new

    def remap(i: int) -> int:
        return new_index[survivor(i)] if i >= 0 else -1

    return _Fold(
        keep,
        [remap(p) for p in compress(parent, keep)],
        [remap(j) for j in launchers],
    )


@dataclass(frozen=True, slots=True)
class _Inputs:
    """The analysed ops' input shapes, types and FLOPs; empty lists when not recorded."""

    shapes: list[Any]
    dtypes: list[tuple[str, ...]]
    flops: list[int]


def _op_inputs(t: EventTable, op_rows: Sequence[int]) -> _Inputs:
    if not t.has_shapes:
        return _Inputs([], [], [])
    if isinstance(op_rows, range) and len(op_rows) == len(t):
        return _Inputs(t.shapes, t.dtypes, t.flops)
    pick = list(op_rows)
    return _Inputs(
        list(map(t.shapes.__getitem__, pick)),
        list(map(t.dtypes.__getitem__, pick)),
        list(map(t.flops.__getitem__, pick)),
    )


@dataclass(frozen=True, slots=True)
class _Tree:
    names: list[str]  # per analysed op
    parent: list[int]  # index of its caller, -1 at the top

    def callers(self, i: int, depth: int = 2) -> tuple[str, ...]:
        found: list[str] = []
        while len(found) < depth and (i := self.parent[i]) >= 0:
            found.append(self.names[i])
        return tuple(found)


def _work(
    nid: list[int],
    op_step: list[int],
    names: list[str],
    inputs: _Inputs,
    n_steps: int,
    op_copies: dict[tuple[str, str], list[int]],
    tree: _Tree,
) -> dict[str, OpWork]:
    """Per op name: its calls per step by input signature (with the callers of its first call),
    its FLOPs and the bytes its memory ops moved per step. Empty when no inputs were recorded."""
    if not inputs.shapes:
        return {}
    calls: dict[int, dict[tuple[Any, tuple[str, ...]], list[int]]] = {}
    first_call: dict[tuple[int, Any, tuple[str, ...]], int] = {}
    flops = [0] * (len(names) * n_steps)
    for i, (k, s, shapes, dtypes, f) in enumerate(zip(nid, op_step, inputs.shapes, inputs.dtypes, inputs.flops)):
        if s >= 0:
            calls.setdefault(k, {}).setdefault((shapes, dtypes), [0] * n_steps)[s] += 1
            first_call.setdefault((k, shapes, dtypes), i)
            flops[k * n_steps + s] += f
    copies: dict[str, list[tuple[str, Dist]]] = {}
    for (op, memory_op), per_step in sorted(op_copies.items()):
        copies.setdefault(op, []).append((memory_op, Dist(tuple(per_step))))
    return {
        name: OpWork(
            tuple(
                Signature(shapes, dtypes, Dist(tuple(per_step)), tree.callers(first_call[k, shapes, dtypes]))
                for (shapes, dtypes), per_step in sorted(calls.get(k, {}).items(), key=_signature_order)
            ),
            Dist(tuple(flops[k * n_steps : (k + 1) * n_steps])),
            tuple(copies.get(name, ())),
        )
        for k, name in enumerate(names)
    }


def _signature_order(item: tuple[tuple[Any, tuple[str, ...]], list[int]]) -> int:
    """Most calls first; a stable sort keeps ties in the order they first ran."""
    return -sum(item[1])


def _fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _trust_checks(
    *,
    pids: list[int],
    tids: list[int],
    durs: list[int],
    parent: list[int],
    op_step: list[int],
    device: list[Event],
    runtime: list[Event],
    spans: list[StepSpan],
    busy_by_step: list[dict[int, list[tuple[int, int]]]],
    ops: list[OpStats],
    outside: int,
    wall_known: bool,
    n_events: int,
) -> list[Check]:
    checks: list[Check] = []
    n_steps = len(spans)

    # 1. events present
    if n_events == 0:
        checks.append(
            Check("events", ERROR, "no operator or device events were recorded: nothing ran under the profiler")
        )
    else:
        checks.append(Check("events", OK, f"{len(durs)} CPU ops, {len(device)} device events"))

    # 2. device events present when device work was launched
    launches = sum(1 for r in runtime if _LAUNCH_CALL.search(r.name))
    if launches and not device:
        checks.append(
            Check(
                "device_events",
                ERROR,
                f"{launches} kernel/memory launches but no device events: the device tracer "
                "(CUPTI/roctracer) delivered nothing; check CUPTI is installed and not in use by another profiler",
            )
        )
    elif device:
        checks.append(Check("device_events", OK, f"{len(device)} device events for {launches} launches"))

    # 3. repeatable steps
    if n_steps >= 2:
        in_step = Counter(op_step)
        per_step = [in_step[s] for s in range(n_steps)]
        if len(set(per_step)) > 1:
            checks.append(
                Check(
                    "step_events",
                    WARNING,
                    f"CPU ops per step differ between steps ({', '.join(map(str, per_step))}): "
                    "the steps do not repeat the same work; raise warmup or check for data-dependent code",
                )
            )
        else:
            checks.append(Check("step_events", OK, f"{per_step[0]} CPU ops in each of {n_steps} steps"))

    # 4. time consistent with wall time
    top_level: dict[tuple[int, int, int], int] = {}
    is_top = list(map(lt, parent, repeat(0)))
    for key, dur in zip(
        zip(compress(op_step, is_top), compress(pids, is_top), compress(tids, is_top)), compress(durs, is_top)
    ):
        if key[0] >= 0:
            top_level[key] = top_level.get(key, 0) + dur
    worst: tuple[float, str] | None = None
    for (s, _pid, tid), total in top_level.items():
        wall = spans[s].wall_ns
        if total > wall * (1 + WALL_MARGIN) + WALL_SLACK_NS:
            ratio = total / wall if wall else float("inf")
            text = f"step {spans[s].number}, thread {tid}: top-level CPU ops take {_fmt_ms(total)} in a {_fmt_ms(wall)} step"
            if worst is None or ratio > worst[0]:
                worst = (ratio, text)
    for s, per_device in enumerate(busy_by_step):
        wall = spans[s].wall_ns
        for dev, intervals in per_device.items():
            busy = _union_ns(intervals)
            if busy > wall * (1 + WALL_MARGIN) + WALL_SLACK_NS:
                ratio = busy / wall if wall else float("inf")
                text = f"step {spans[s].number}, device {dev}: device busy {_fmt_ms(busy)} in a {_fmt_ms(wall)} step"
                if worst is None or ratio > worst[0]:
                    worst = (ratio, text)
    if worst is not None:
        checks.append(
            Check("wall_time", ERROR, f"{worst[1]}: timings exceed wall time, so units or attribution are broken")
        )
    elif n_events:
        checks.append(Check("wall_time", OK, "CPU and device time within each step's wall time"))

    # 5. spread over steps
    if n_steps >= SPREAD_MIN_STEPS:
        wide = []
        for op in ops:
            dist = op.time_per_step
            med = dist.median
            if med >= SPREAD_FLOOR_NS and dist.iqr / med > SPREAD_LIMIT:
                wide.append(f"{op.name} (IQR/median {dist.iqr / med:.2f})")
        if wide:
            checks.append(
                Check(
                    "spread",
                    WARNING,
                    f"per-step time too spread to compare: {', '.join(wide[:3])}"
                    + (f" and {len(wide) - 3} more" if len(wide) > 3 else "")
                    + "; use more warmup or steps, or a quieter machine",
                )
            )
        else:
            checks.append(Check("spread", OK, f"per-step spread of every op within IQR/median {SPREAD_LIMIT}"))

    # 6. coverage of step markers
    if outside and wall_known:
        checks.append(
            Check(
                "outside_steps",
                WARNING,
                f"{outside} of {len(durs)} CPU ops lie outside the ProfilerStep annotations: "
                "counted in the totals, not in the per-step numbers",
            )
        )
    return checks
