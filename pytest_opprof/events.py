"""The neutral event model: one record per CPU op, annotation, kernel, memory op or runtime call.

Both sources (a live torch.profiler capture and a trace file) produce these records, and the
analysis reads nothing else. Times are integer nanoseconds; no torch, no pytest.
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Event kinds. The Kineto category names map onto these (see KIND_OF_CATEGORY).
CPU_OP = "cpu_op"
ANNOTATION = "annotation"  # user annotation on a CPU thread (record_function, ProfilerStep#N)
GPU_ANNOTATION = "gpu_annotation"  # the device-side twin of an annotation: not device work
KERNEL = "kernel"
MEMCPY = "memcpy"
MEMSET = "memset"
RUNTIME = "runtime"  # CUDA/HIP runtime or driver call on a CPU thread (cudaLaunchKernel, ...)
SYNC = "sync"  # a synchronization recorded by CUPTI (cuda_sync: "Stream Sync", ...)
PYTHON = "python"
OTHER = "other"

DEVICE_KINDS = frozenset({KERNEL, MEMCPY, MEMSET})
MEMORY_KINDS = frozenset({MEMCPY, MEMSET})

# Kineto writes the same vocabulary as the trace's "cat" field and as
# _KinetoEvent.activity_type(), so one table serves both sources.
KIND_OF_CATEGORY: dict[str, str] = {
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "gpu_user_annotation": GPU_ANNOTATION,
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "cuda_runtime": RUNTIME,
    "cuda_driver": RUNTIME,
    "privateuse1_runtime": RUNTIME,
    "privateuse1_driver": RUNTIME,
    "xpu_runtime": RUNTIME,
    "xpu_driver": RUNTIME,
    "mtia_runtime": RUNTIME,
    "hip_runtime": RUNTIME,
    "cuda_sync": SYNC,
    "python_function": PYTHON,
}

NO_DEVICE = -1
END_THREAD = "End thread"  # an op's trace arg (opprof's): the thread its end was recorded on, where not its own
NEVER_ENDED = 0  # the end thread torch gives a record that no thread ended (a forked task that raised)


class Event(NamedTuple):
    """One profiler record.

    A NamedTuple rather than a frozen dataclass: a capture holds 10^5 of these and a frozen
    dataclass costs 4x more to build, which is most of the analysis budget.
    """

    kind: str
    name: str
    start_ns: int
    dur_ns: int
    pid: int = 0  # process; for device events the device index
    tid: int = 0  # thread; for device events the stream
    device: int = NO_DEVICE  # device index for device events, NO_DEVICE on CPU
    stream: int = NO_DEVICE
    correlation: int = 0  # links a runtime call with the device work it launched
    external_id: int = 0  # Kineto's External id: the op (or annotation) the record belongs to
    bytes: int = 0  # memcpy / memset size
    # The op's inputs (record_shapes): one shape and one type name per input, () when not recorded.
    shapes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    flops: int = 0  # with_flops: torch's estimate for the ops it knows (matmul, conv, ...)

    @property
    def end_ns(self) -> int:
        """start_ns + dur_ns."""
        return self.start_ns + self.dur_ns

    @property
    def is_device(self) -> bool:
        """A kernel, memcpy or memset (device work)."""
        return self.kind in DEVICE_KINDS


def freeze(value: object) -> object:
    """Nested lists (the input dims of a tensor list) as nested tuples: hashable, comparable."""
    return tuple(map(freeze, value)) if isinstance(value, (list, tuple)) else value


TENSOR_LIST = "TensorList"  # the input type of a list of tensors (torch.cat's, torch.stack's)
LIST_LIMIT = 8  # a longer list of tensors (a foreach optimizer step's: one per parameter) keeps no shapes


def capped_lists(shapes: Any, dtypes: Sequence[str]) -> Any:
    """`shapes` with each list of more than LIST_LIMIT tensors as `[]` (its shapes unrecorded):
    a baseline holds a few tensors' shapes per input, not one per parameter of a model."""
    if TENSOR_LIST not in dtypes:
        return shapes
    return tuple(
        () if i < len(dtypes) and dtypes[i] == TENSOR_LIST and len(s) > LIST_LIMIT else s for i, s in enumerate(shapes)
    )


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building 10^5 records.

    Every Event is a tracked tuple subclass, so a large capture triggers collection after
    collection over all live objects; pausing it makes conversion and analysis 5-10x faster.
    Events hold no reference cycles, so nothing is lost by collecting later.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(slots=True)
class EventTable:
    """The same records as columns: what the analysis reads.

    A live capture fills the columns straight from torch's accessors; a list of Events is
    transposed in one C-level zip. Both skip a Python object per event on the hot path.
    """

    kind: list[str]
    name: list[str]
    start_ns: list[int]
    dur_ns: list[int]
    pid: list[int]
    tid: list[int]
    device: list[int]
    stream: list[int]
    correlation: list[int]
    external_id: list[int]
    bytes: list[int]
    shapes: list[tuple[tuple[int, ...], ...]]
    dtypes: list[tuple[str, ...]]
    flops: list[int]
    # Row -> the thread an op's end was recorded on, where not the thread it started on (torch's
    # "async" op: a TorchScript function that forks and waits ends on the thread that finished
    # its work, after its caller went on): its end bounds nothing on its own thread.
    end_threads: dict[int, int] = field(default_factory=dict, init=False)
    # The CPU ops autograd recorded (a sequence number: grad mode was on as they ran), by row;
    # None where the source does not say (read with the inputs: torch's events, a trace's `Sequence number`).
    autograd: set[int] | None = field(default=None, init=False)
    # Indexes the analysis derives from the complete columns, built once on first use and kept
    # with the table (analysis.ranges: an op's rows by name, the ranges and backward spans by thread).
    derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def has_shapes(self) -> bool:
        """Whether the source recorded op inputs (record_shapes): the work signatures."""
        return any(self.shapes)

    @classmethod
    def from_events(cls, events: Sequence[Event]) -> EventTable:
        """The columns of a list of Events (one C-level transpose)."""
        if not events:
            return cls(*([] for _ in Event._fields))
        return cls(*map(list, zip(*events)))

    def row(self, i: int) -> Event:
        """Row `i` as an Event."""
        return Event(
            self.kind[i],
            self.name[i],
            self.start_ns[i],
            self.dur_ns[i],
            self.pid[i],
            self.tid[i],
            self.device[i],
            self.stream[i],
            self.correlation[i],
            self.external_id[i],
            self.bytes[i],
            self.shapes[i],
            self.dtypes[i],
            self.flops[i],
        )

    def to_events(self) -> list[Event]:
        """Every row as an Event."""
        with gc_paused():
            return list(
                map(
                    Event._make,
                    zip(
                        self.kind,
                        self.name,
                        self.start_ns,
                        self.dur_ns,
                        self.pid,
                        self.tid,
                        self.device,
                        self.stream,
                        self.correlation,
                        self.external_id,
                        self.bytes,
                        self.shapes,
                        self.dtypes,
                        self.flops,
                    ),
                )
            )


# What a name may not hold as it is: control characters (a newline, a tab, an ESC: Unicode's
# Cc), the line and paragraph separators, and the bidirectional embeddings, overrides and
# isolates, which reorder the text after them, and a lone UTF-16 surrogate (a hand edit's
# `\ud800`: no character, which no UTF-8 writer takes: a report, xdist). A CJK or no-break space, an emoji's zero-width
# joiner print as they are (a review: `str.isprintable()` escaped them, and a range named
# `前向\u3000计算` was no longer found by its name).
UNSAFE_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def without_spans(table: EventTable, name: str, trimmed: str = "") -> EventTable:
    """The table less the annotations named `name` and the work inside them: on each one's
    thread, the host events that start within it (ops, annotations, runtime calls), and the
    device events those runtime calls launched (by correlation). The table itself when none.
    An annotation named from `trimmed` (a step's marker) whose last host work on its thread is
    such work ends where the last run of it began (a failing assert's message ends its step);
    on a GPU the step's closing synchronisation follows it, and the step keeps its end."""
    spans = _merged_spans(table, name)
    if not spans:
        return table
    kinds, tids, starts, correlations, names = table.kind, table.tid, table.start_ns, table.correlation, table.name
    keep: list[int] = []
    launched: set[int] = set()
    for i, kind in enumerate(kinds):
        if names[i] == name:  # the span itself, and its copy on a device's stream
            continue
        if kind in DEVICE_KINDS or not _within(spans.get(tids[i]), starts[i]):
            keep.append(i)
        elif kind == RUNTIME and correlations[i]:
            launched.add(correlations[i])
    if launched:
        keep = [i for i in keep if kinds[i] not in DEVICE_KINDS or correlations[i] not in launched]
    columns = [getattr(table, f) for f in Event._fields]
    kept = EventTable(*(list(map(column.__getitem__, keep)) for column in columns))
    if table.end_threads:
        kept.end_threads = {new: table.end_threads[old] for new, old in enumerate(keep) if old in table.end_threads}
    if table.autograd is not None:
        kept.autograd = {new for new, old in enumerate(keep) if old in table.autograd}
    if trimmed:
        _trim_tails(kept, spans, trimmed)
    return kept


def _trim_tails(table: EventTable, spans: dict[int, tuple[list[int], list[int]]], prefix: str) -> None:
    """End each annotation named from `prefix` at the first set-aside span after the last host
    event of its thread inside it (a test that caught a failed assert and went on, then failed
    another: the last message is trimmed; time set aside earlier stays in the step)."""
    for i, name in enumerate(table.name):
        if not name.startswith(prefix) or table.kind[i] != ANNOTATION or table.tid[i] not in spans:
            continue
        start, end, tid = table.start_ns[i], table.start_ns[i] + table.dur_ns[i], table.tid[i]
        own = [
            table.start_ns[j]
            for j in range(len(table))
            if j != i
            and table.tid[j] == tid
            and start <= table.start_ns[j] <= end
            and table.kind[j] not in DEVICE_KINDS
        ]
        last_own = max(own, default=start)
        tail = next((s for s in spans[tid][0] if last_own <= s <= end), None)
        if tail is not None:
            table.dur_ns[i] = tail - start


def _merged_spans(table: EventTable, name: str) -> dict[int, tuple[list[int], list[int]]]:
    """Per thread, the spans of the annotations named `name`, nested ones merged: (starts, ends)
    in order."""
    found: dict[int, list[tuple[int, int]]] = {}
    for i, (kind, event_name) in enumerate(zip(table.kind, table.name)):
        if event_name == name and kind == ANNOTATION:
            found.setdefault(table.tid[i], []).append((table.start_ns[i], table.start_ns[i] + table.dur_ns[i]))
    merged: dict[int, tuple[list[int], list[int]]] = {}
    for tid, spans in found.items():
        starts: list[int] = []
        ends: list[int] = []
        for start, end in sorted(spans):
            if ends and start <= ends[-1]:
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        merged[tid] = (starts, ends)
    return merged


def _within(spans: tuple[list[int], list[int]] | None, ts: int) -> bool:
    if spans is None:
        return False
    starts, ends = spans
    i = bisect_right(starts, ts) - 1
    return i >= 0 and ts <= ends[i]


def printable_name(name: str) -> str:
    """A name with each unsafe character (UNSAFE_CHARACTER: a newline, an ESC, a right-to-left
    override) written as its escape (`\\n`, `\\x1b`, `\\u202e`): a name is shown on one line of
    a table or message, and would otherwise start a fake row or colour the terminal."""
    return UNSAFE_CHARACTER.sub(lambda found: repr(found.group())[1:-1], name)


def printable_texts(values: dict[str, Any]) -> dict[str, Any]:
    """The mapping with each text value as printable_name writes it (a baseline's environment
    facts: the writer's and the reader's alike)."""
    return {k: printable_name(v) if isinstance(v, str) else v for k, v in values.items()}


def is_printable_name(name: str) -> bool:
    """Whether printable_name leaves the name as it is."""
    return UNSAFE_CHARACTER.search(name) is None


def printable_names(names: list[str]) -> list[str]:
    """The names as printable_name writes them: the same list, unless one holds an unsafe
    character (the distinct names are checked: 2 ms for 10^5 events)."""
    odd = {n for n in set(names) if not is_printable_name(n)}
    if not odd:
        return names
    return [printable_name(n) if n in odd else n for n in names]


def without_overload(name: str) -> str | None:
    """`aten::mm` for torch's schema name `aten::mm.default`, which no profile holds (the profiler
    names aten and prim ops without their overload); None for a name without one."""
    namespace, sep, op = name.partition("::")
    if sep and namespace in ("aten", "prim") and "." in op:
        return f"{namespace}::{op.split('.')[0]}"
    return None
