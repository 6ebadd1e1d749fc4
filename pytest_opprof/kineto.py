"""torch's profiler results -> EventTable -> Profile: a finished capture's raw Kineto events, read
column by column (torch 2.12+), or through Kineto's own trace of the capture where the events lack
their category (older torch). `from_profiler` reads a user's own profiler. torch is only read from
`sys.modules`: it is imported already wherever there is a profiler to read."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from itertools import compress, repeat
from typing import Any

from .analysis import Profile, analyze
from .analysis.checks import (
    copy_bytes_check,
    cycles_check,
)
from .errors import (
    CaptureError,
    not_a_profiler,
    profiler_cycle_cleared,
    profiler_never_started,
    profiler_never_stepped,
    profiler_not_finished,
    profiler_recorded_nothing,
    trace_already_saved,
    trace_not_written,
)
from .events import (
    ANNOTATION,
    CPU_OP,
    DEVICE_KINDS,
    KIND_OF_CATEGORY,
    MEMORY_KINDS,
    NEVER_ENDED,
    NO_DEVICE,
    OTHER,
    PYTHON,
    RUNTIME,
    EventTable,
    capped_lists,
    freeze,
    gc_paused,
    printable_name,
    printable_names,
    without_spans,
)
from .flops import COUNTED_OPS, torch_flops
from .trace import read_trace

_BYTES = re.compile(r'"bytes"\s*:\s*(\d+)')


_SIZE = re.compile(r'"size"\s*:\s*"?(\d+)"?')


def table_from_kineto(
    kineto_events: Any, pid: int | None = None, with_shapes: bool = False, own_flops: bool = False
) -> EventTable:
    """Convert torch's raw _KinetoEvent list to a neutral event table.

    Read column by column through the unbound accessors: a bound-method call per field per
    event costs 3x more, and this runs on every measured test. Op inputs and FLOPs are read
    only `with_shapes` (a capture with record_shapes): ~10 us per op; `own_flops`: a capture
    made without torch's with_flops, whose FLOPs are counted from the inputs (flops.py).
    """
    if not kineto_events:
        return EventTable.from_events([])
    pid = os.getpid() if pid is None else pid
    cls = type(kineto_events[0])
    kineto_events, kinds = _kept_events(kineto_events, cls)
    n = len(kinds)
    links_needed = not {CPU_OP, ANNOTATION}.issuperset(kinds)
    # Ids only link device work and runtime calls to ops: a CPU-only capture skips reading them.
    corrs = list(map(cls.correlation_id, kineto_events)) if links_needed else [0] * n
    table = EventTable(
        kind=kinds,
        name=printable_names(list(map(cls.name, kineto_events))),  # a range's name may hold a newline
        start_ns=list(map(cls.start_ns, kineto_events)),
        dur_ns=list(map(cls.duration_ns, kineto_events)),
        pid=[pid] * n,
        tid=list(map(cls.start_thread_id, kineto_events)),
        device=[NO_DEVICE] * n,
        stream=[NO_DEVICE] * n,
        # For ops and annotations correlation_id() is the op's own id: the External id that
        # device events and runtime calls link to (their linked_correlation_id()).
        correlation=[0] * n,
        external_id=corrs,
        bytes=[0] * n,
        shapes=[()] * n,
        dtypes=[()] * n,
        flops=[0] * n,
    )
    if with_shapes:
        _read_inputs(table, kineto_events, cls, own_flops)
    if links_needed:
        _link_device_work(table, kineto_events, corrs)
    table.end_threads = _ends_elsewhere(table, kineto_events, cls)
    return table


def _ends_elsewhere_by_id(table: EventTable, results: Any) -> dict[int, int]:
    """_ends_elsewhere for a capture read through Kineto's trace, which does not say where an op
    ended: the events do, matched by the op's External id (as its FLOPs are). The events number
    threads as torch does (1, 2, ...), the trace as the system does: an end thread is given as
    the trace's number of a thread an event matched starts on (else the op could not be written
    and read back: its `End thread` would name no thread of the trace)."""
    if not _ops_on_threads(table):
        return {}
    events = results.events()
    if not events or not hasattr(type(events[0]), "end_thread_id"):
        return {}
    # by id and name: a kernel's or runtime call's id is CUPTI's, a count that may equal an op's
    threads = {(e.correlation_id(), printable_name(e.name())): (e.start_thread_id(), e.end_thread_id()) for e in events}
    if all(start == end for start, end in threads.values()):
        return {}
    system: dict[int, int] = {}  # torch's thread number -> the trace's
    found: dict[int, int] = {}
    for i, (kind, ext, name, tid) in enumerate(zip(table.kind, table.external_id, table.name, table.tid)):
        if kind is CPU_OP and (ext, name) in threads:
            start, end = threads[ext, name]
            system.setdefault(start, tid)
            if end != start:
                found[i] = end
    return {i: system.get(end, NEVER_ENDED) for i, end in found.items() if end in system or end == NEVER_ENDED}


def _ops_on_threads(table: EventTable) -> bool:
    """Whether the table's ops ran on more than one thread."""
    return len(set(table.tid)) > 1 and len(set(compress(table.tid, map(CPU_OP.__eq__, table.kind)))) > 1


def _ends_elsewhere(table: EventTable, kineto_events: Any, cls: Any) -> dict[int, int]:
    """Ops whose end torch recorded on another thread than their start (its `is_async` events:
    a TorchScript function that forks ends on the thread that finished its work, after its caller
    went on to the next step: a trial's jit.fork model erred `nesting` in most 300-step runs), by
    row, with that thread, or NEVER_ENDED (0) where no thread ended it (a forked task that raised:
    torch calls it async too). Only where ops ran on several threads (the thread that ends a forking
    function runs its forked ops): a capture of ops on one thread skips the read (~25 ms per 200k
    events)."""
    if not hasattr(cls, "end_thread_id") or not _ops_on_threads(table):
        return {}
    ends = list(map(cls.end_thread_id, kineto_events))
    if not any(ends):  # a torch that fills no end thread: 0 for every event
        return {}
    return {
        i: end
        for i, (kind, start, end) in enumerate(zip(table.kind, table.tid, ends))
        if end != start and kind is CPU_OP
    }


def _kept_events(kineto_events: Any, cls: Any) -> tuple[Any, list[str]]:
    """The events and their kinds, without torch's hidden events, Python functions and kinds we
    do not read."""
    kinds = list(map(KIND_OF_CATEGORY.get, map(cls.activity_type, kineto_events), repeat(OTHER)))
    drop: set[int] = set()
    if hasattr(cls, "is_hidden_event"):
        hidden = list(map(cls.is_hidden_event, kineto_events))
        if any(hidden):
            drop.update(i for i, h in enumerate(hidden) if h)
    if OTHER in kinds or PYTHON in kinds:
        drop.update(i for i, k in enumerate(kinds) if k is OTHER or k is PYTHON)
    if not drop:
        return kineto_events, kinds
    kept = [i for i in range(len(kinds)) if i not in drop]
    return [kineto_events[i] for i in kept], [kinds[i] for i in kept]


def _link_device_work(table: EventTable, kineto_events: Any, corrs: list[int]) -> None:
    """Device events and runtime calls: their correlation ids, the op they link to, and a device
    event's device, stream and (a memory op's) bytes."""
    sizeless: dict[int, list[int]] = {}  # correlation -> copies without bytes of their own (ROCm's)
    for i, kind in enumerate(table.kind):
        if kind is CPU_OP or kind is ANNOTATION:
            continue
        e = kineto_events[i]
        table.correlation[i] = corrs[i]
        table.external_id[i] = e.linked_correlation_id()
        if kind in DEVICE_KINDS:
            table.device[i] = table.pid[i] = e.device_index()
            table.stream[i] = table.tid[i] = e.device_resource_id()
            if kind in MEMORY_KINDS:
                found = _BYTES.search(e.metadata_json() or "")
                if found:
                    table.bytes[i] = int(found.group(1))
                elif table.correlation[i]:  # (corrs is the external_id column, overwritten above)
                    sizeless.setdefault(table.correlation[i], []).append(i)
    if sizeless:
        _bytes_from_launches(table, kineto_events, sizeless)


def _bytes_from_launches(table: EventTable, kineto_events: Any, sizeless: dict[int, list[int]]) -> None:
    """Copies without bytes take the `size` of the runtime call that launched them (ROCm's
    hipMemcpy* give it there, as text); read only when such copies exist, never on CUDA."""
    for i, kind in enumerate(table.kind):
        if kind is RUNTIME and table.correlation[i] in sizeless:
            found = _SIZE.search(kineto_events[i].metadata_json() or "")
            size = int(found.group(1)) if found else 0
            for copy in sizeless[table.correlation[i]]:
                table.bytes[copy] = size


def _read_inputs(table: EventTable, kineto_events: Any, cls: Any, own_flops: bool = False) -> None:
    """Input shapes, input types and FLOPs of every CPU op (a capture with record_shapes; `own_flops`:
    counted from the inputs, as torch counts them, where torch was not asked to), and
    whether autograd recorded one with inputs (its sequence number: grad mode was on, a forgotten
    no_grad(); Kineto's trace carries it with the inputs, not for the engine's own functions).
    Shapes as torch's structured input shapes give them, a list of tensors (torch.cat's) with each
    tensor's shape; an event class without them gives such an input as `[]` (records_list_shapes)."""
    shapes = getattr(cls, "structured_input_shapes", cls.shapes)
    sequence_nr = getattr(cls, "sequence_nr", None)
    autograd: set[int] = set()
    for i, kind in enumerate(table.kind):
        if kind is CPU_OP:
            e = kineto_events[i]
            dtypes = tuple(cls.dtypes(e))
            inputs = freeze(shapes(e))  # nested tuples of ints
            table.shapes[i] = capped_lists(inputs, dtypes)
            table.dtypes[i] = dtypes
            if not own_flops:
                table.flops[i] = int(cls.flops(e) or 0)
            elif table.name[i] in COUNTED_OPS:  # the name read once, from the table: every op passes here
                table.flops[i] = _counted_flops(e, table.name[i], inputs, dtypes)
            if sequence_nr is not None and dtypes and sequence_nr(e) >= 0:  # an op with inputs, as traces say
                autograd.add(i)
    table.autograd = autograd if sequence_nr is not None else None


def _counted_flops(event: Any, name: str, shapes: Any, dtypes: Sequence[str]) -> int:
    """An op event's FLOPs as torch's with_flops counts them, from its recorded inputs (flops.py);
    the values of a conv2d's stride, padding... from torch's concrete inputs (0 where torch keeps none)."""
    values = event.concrete_inputs() if name == "aten::conv2d" and hasattr(event, "concrete_inputs") else ()
    return torch_flops(name, shapes, dtypes, values)


def from_profiler(prof: Any) -> Profile:
    """Analyse a finished `torch.profiler.profile` (or `torch.autograd.profiler.profile`)."""
    return read_profiler(prof, stray_step=True)  # the user's: its loop's last prof.step() may open a stray step


def release_results(prof: Any) -> None:
    """Let go of a read profiler's results (torch's events, hundreds of MiB for a large capture).
    A torch.profiler.profile refers to itself (its action map holds its bound methods), so only
    Python's full collection frees it, which counts objects, not bytes: a scale trial's 16 tests of
    25k events each climbed to 2.4 GiB RSS, +200 MiB a test. Only for profilers opprof started:
    a user's own stays as the user left it."""
    if hasattr(prof, "profiler"):
        prof.profiler = None


def read_profiler(prof: Any, stray_step: bool = False, aside: bool = False, own: bool = False) -> Profile:
    """A finished profiler's Profile (`stray_step`: see analyze; opprof's own mark each step as a
    call of fn; `aside`: work run in set_aside() is left out; `own`: a profiler opprof made, whose
    FLOPs, where it recorded inputs without torch's with_flops, are counted from them)."""
    inner = getattr(prof, "profiler", prof)
    results = getattr(inner, "kineto_results", None)
    if results is None:
        raise CaptureError(_no_results(prof))
    with_shapes = bool(getattr(prof, "record_shapes", False))
    own_flops = own and with_shapes and not getattr(prof, "with_flops", False)
    with gc_paused():
        table = table_of(results, with_shapes=with_shapes, own_flops=own_flops)
        table = without_spans(table, SET_ASIDE, trimmed="ProfilerStep#") if aside else table
        profile = analyze(table, source="capture", stray_step=stray_step)
    if not profile.ops and (cleared_at := _cycle_cleared_at(prof)) is not None:
        raise CaptureError(profiler_cycle_cleared(cleared_at))
    if not profile.ops and (steps := _inactive_steps(prof)) is not None:
        raise CaptureError(profiler_recorded_nothing(steps) if steps else profiler_never_stepped())
    found = (cycles_check(_cycles_kept_last(prof)), copy_bytes_check(_copies_without_metadata(table, results)))
    checks = profile.checks + tuple(check for check in found if check is not None)
    return replace(profile, list_shapes=with_shapes and records_list_shapes(), checks=checks)


def _copies_without_metadata(table: EventTable, results: Any) -> int:
    """The memory copies and sets of a directly read capture whose event has no metadata at all
    (a profiler made without expose_kineto_event_metadata): their bytes are unknown. Counted only
    where such a capture read a copy as 0 bytes."""
    if not events_carry_category() or not any(
        kind in MEMORY_KINDS and not size for kind, size in zip(table.kind, table.bytes)
    ):
        return 0
    memory = {name for name, kind in KIND_OF_CATEGORY.items() if kind in MEMORY_KINDS}
    return sum(1 for e in results.events() if e.activity_type() in memory and not e.metadata_json())


def _no_results(prof: Any) -> str:
    """Why a profiler has no events to read: not a profiler, a schedule that never recorded, or
    not finished."""
    if not hasattr(prof, "profiler") and not hasattr(prof, "kineto_results"):
        return not_a_profiler(prof)
    steps = getattr(prof, "step_num", 0)
    if getattr(prof, "profiler", "") is None and isinstance(steps, int):
        if steps > 0:
            return profiler_recorded_nothing(steps)
        return profiler_never_stepped() if _inactive_steps(prof) == 0 else profiler_never_started()
    return profiler_not_finished()


def _inactive_steps(prof: Any) -> int | None:
    """The prof.step() calls of a scheduled profiler whose schedule reached no active step up to
    where it stopped (it waited or warmed up throughout: it recorded nothing), else None. A trial's
    loop forgot prof.step() (0 calls) and was told to call from_profiler after the `with` block it
    had left; with warmup first it read no ops; a loop stopped in its warm-up read a Profile of no
    ops and `nothing ran under the profiler`, though its work had run."""
    run = _schedule_run(prof)
    if run is None:
        return None
    ends, stopped_inside = run
    return None if ends or stopped_inside else prof.step_num


def _schedule_run(prof: Any) -> tuple[list[int], bool] | None:
    """How a scheduled profiler's steps went: the prof.step() calls that ended an active cycle (1-based),
    and whether it stopped inside one (torch saves that cycle too); None for a profiler without a
    schedule."""
    schedule, steps = getattr(prof, "schedule", None), getattr(prof, "step_num", None)
    if not callable(schedule) or not isinstance(steps, int):
        return None
    action = sys.modules["torch"].profiler.ProfilerAction
    ends = [step + 1 for step in range(steps) if schedule(step) == action.RECORD_AND_SAVE]
    return ends, schedule(steps) in (action.RECORD, action.RECORD_AND_SAVE)


def _cycle_cleared_at(prof: Any) -> int | None:
    """The prof.step() call that ended the last active cycle of a scheduled profiler, when a next
    cycle began (its warm-up) and the profiler stopped outside an active cycle: torch cleared that
    cycle's events as the next began, so what is left to read is the new cycle's nothing. Else
    None: a schedule whose cycles ran out (`repeat=1`) keeps its last cycle's events, and a trial's
    capture whose steps ran no torch work was told to give `repeat=1`, which it had."""
    run = _schedule_run(prof)  # with acc_events too: torch accumulates its averages, not the events
    if run is None:
        return None
    ends, stopped_inside = run
    if not ends or stopped_inside:
        return None
    action = sys.modules["torch"].profiler.ProfilerAction
    after = (prof.schedule(step) for step in range(ends[-1], prof.step_num + 1))
    return ends[-1] if any(a in (action.WARMUP, action.RECORD, action.RECORD_AND_SAVE) for a in after) else None


def _cycles_kept_last(prof: Any) -> int:
    """The active cycles a scheduled profiler completed while accumulating (`acc_events`) with no
    `on_trace_ready` to read each: its user expects them all, and torch's raw events hold only the
    last (1 when it is not such a profiler)."""
    if not getattr(prof, "acc_events", False) or getattr(prof, "on_trace_ready", None) is not None:
        return 1
    run = _schedule_run(prof)
    if run is None:
        return 1
    ends, stopped_inside = run
    return len(ends) + stopped_inside


def records_list_shapes() -> bool:
    """Whether a live capture records the shapes of a list of tensors: torch 2.13's structured
    input shapes, or (before torch 2.12) Kineto's trace of the capture, whose Input Dims have them.
    A torch that reads its events directly without structured shapes (torch 2.12 builds before
    pytorch#179714) gives such an input as `[]`."""
    event = sys.modules["torch"]._C._autograd._KinetoEvent
    return hasattr(event, "structured_input_shapes") or not events_carry_category()


def events_carry_category() -> bool:
    """Whether this torch's profiler events carry their Kineto category (`activity_type`)."""
    return hasattr(sys.modules["torch"]._C._autograd._KinetoEvent, "activity_type")


def table_of(results: Any, with_shapes: bool = False, own_flops: bool = False) -> EventTable:
    """A finished capture's events (torch's `kineto_results`) as a neutral table.

    Where torch's events carry their Kineto category (`activity_type`, torch 2.12 on), they are read
    directly. Older torch's events say only CPU or device: a runtime call would pass for an op, a
    memory copy or a GPU-side annotation for a kernel. There the capture goes through Kineto's
    own Chrome trace of it (`save()`, as `export_chrome_trace` writes) and the trace reader,
    whose categories are Kineto's; that trace has no FLOPs, which come from the events, matched
    by the op's External id (`own_flops`: counted from the events' inputs, flops.py). Such a torch writes a capture's trace once: the profilers opprof
    starts are its own; a user's, already written, is refused in one line naming load_trace."""
    if events_carry_category():
        return table_from_kineto(results.events(), with_shapes=with_shapes, own_flops=own_flops)
    with tempfile.TemporaryDirectory(prefix="opprof-") as folder:
        path = os.path.join(folder, "capture.json")
        try:
            results.save(path)  # once per capture on this torch: a later export of it fails
        except RuntimeError as exc:
            if "already saved" in str(exc):
                raise CaptureError(trace_already_saved(sys.modules["torch"].__version__)) from None
            raise CaptureError(trace_not_written(str(exc).strip())) from None
        table = read_trace(path).table
    _names_from_events(table, results)
    table.end_threads = _ends_elsewhere_by_id(table, results)
    if with_shapes:
        flops = _flops_by_id(results.events(), own_flops)
        for i, kind in enumerate(table.kind):
            if kind is CPU_OP:
                table.flops[i] = flops.get(table.external_id[i], 0)
    return table


def _flops_by_id(events: Any, own_flops: bool) -> dict[int, int]:
    """The ops' FLOPs by their External id: torch's, or (`own_flops`) counted from their inputs."""
    if not own_flops:
        return {e.correlation_id(): e.flops() for e in events if e.flops()}
    named = ((e, e.name()) for e in events)
    counted = (
        (e, _counted_flops(e, name, freeze(e.shapes()), tuple(e.dtypes()))) for e, name in named if name in COUNTED_OPS
    )
    return {e.correlation_id(): n for e, n in counted if n}


def _names_from_events(table: EventTable, results: Any) -> None:
    """Kineto's trace does not keep every name: it names `unknown` an op or record_function block
    whose name holds a character past ASCII (a CJK `前向 计算`, a newline; torch 2.11 and 2.13),
    and torch 2.6's writes a tab or an ESC raw (read with its escape) but drops a newline. torch
    before 2.12 is read through that trace (the compat run on 2.11 read five such ranges as one
    `unknown`). The events keep the names: a row named `unknown` or with an escape takes its
    event's, by the op's External id, as the FLOPs do, written as printable_name writes names.
    Only then are the events read (0.28 s for 150k ops, against the 1.4 s of the trace route; the
    check of the distinct names costs 5 ms); a name whose only odd character was a newline stays
    as torch 2.6 wrote it."""
    odd = {name for name in set(table.name) if name == KINETO_UNKNOWN or "\\" in name}  # distinct names: fast
    if not odd:
        return
    rows = [
        i
        for i, (kind, name) in enumerate(zip(table.kind, table.name))
        if name in odd and (kind is CPU_OP or kind is ANNOTATION)
    ]
    names = _mangled_names(results.events())
    for i in rows:
        name = names.get(table.external_id[i])
        if name:
            table.name[i] = printable_name(name)


KINETO_UNKNOWN = "unknown"  # the name Kineto's trace gives one holding a character past ASCII


def _mangled_names(events: Any) -> dict[int, str]:
    """The names Kineto's trace mangles (a character past ASCII, a control character), by their
    event's id. Only those: a kernel's or a runtime call's id is CUPTI's correlation id, another
    count that may equal an op's, and their plain names would rename the op."""
    names = {}
    for e in events:
        name = e.name()
        if not (name.isascii() and name.isprintable()) and e.correlation_id():
            names[e.correlation_id()] = name
    return names


SET_ASIDE = "opprof::set_aside"  # the annotation around work that is pytest's, not the test's
