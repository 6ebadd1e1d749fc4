"""The live source: run code under torch.profiler and read its raw Kineto events.

We read `prof.profiler.kineto_results.events()` directly (torch 2.12+; older torch through
Kineto's own trace of the capture, see `table_of`). torch's own `prof.events()` and
`key_averages()` build a Python object tree per event and cost ~20x more (bench/bench_analysis.py).
torch is imported lazily, so the rest of the package works without it.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import os
import re
import sys
import tempfile
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import replace
from itertools import compress, repeat
from typing import Any, TypeVar, cast

from . import clock, device  # as modules: tests put fakes on device
from .analysis import OPPROF_SYNC_ANNOTATION, Profile, analyze
from .analysis.checks import (
    copy_bytes_check,
    cuda_untraced_check,
    cycles_check,
    last_step_partial,
    overhead_check,
    unprofiled_kernels_check,
    with_other_threads,
)
from .analysis.model import WORKLOAD_DTYPES, WORKLOAD_OPS, OtherThread, WorkloadReference, workload_problem
from .breaks import breaks_seen, in_torch, new_break_reasons, recompile_limit_hit
from .errors import (
    CaptureError,
    OpprofUsageError,
    bad_argument,
    captures_cannot_nest,
    fn_expected,
    fn_keyword_taken,
    fn_missing,
    not_a_profiler,
    profiler_already_running,
    profiler_cycle_cleared,
    profiler_inside_capture,
    profiler_never_started,
    profiler_never_stepped,
    profiler_not_finished,
    profiler_off_thread,
    profiler_recorded_nothing,
    ran_no_op_in_run,
    run_keyword_slip,
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
from .trace import read_trace

T = TypeVar("T")
_BYTES = re.compile(r'"bytes"\s*:\s*(\d+)')
_SIZE = re.compile(r'"size"\s*:\s*"?(\d+)"?')


def _torch() -> Any:
    import torch

    return torch


def torch_import_problem() -> str | None:
    """Why torch cannot be imported here (`No module named 'torch'`, a broken install), or None."""
    try:
        _torch()
    except Exception as exc:  # an ImportError, or what a broken install raises on import
        return f"{type(exc).__name__}: {exc}"
    return None


def _cuda_active(torch: Any) -> bool:
    """CUDA is traced when it is available and already initialised by the code under test."""
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def sync_devices(torch: Any) -> None:
    """Wait for the work of every GPU the code has used: `torch.cuda.synchronize()` waits for the
    current device's only, so a model on cuda:1 ran past each step's end (a review's erred
    `wall_time`: device 1 busy 5 ms in a 0.2 ms step). A GPU the process holds no context on ran
    nothing, and is left alone (syncing it would create one)."""
    count = torch.cuda.device_count()
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    if count <= 1 or has_context is None:
        torch.cuda.synchronize()
        return
    for index in range(count):
        if has_context(index):
            torch.cuda.synchronize(index)


def _profiler_running(torch: Any) -> bool:
    enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
    return bool(enabled()) if enabled is not None else False


def profiler_left_running() -> bool:
    """Whether a torch profiler that is not opprof's runs now (one a test started and left on);
    False before torch is imported."""
    torch = sys.modules.get("torch")
    return torch is not None and not _RUNNING and _profiler_running(torch)


MAX_STEPS = 10_000


def _async_fix() -> str:
    """How to measure an async def: asyncio.run, unless an event loop runs here (an async test),
    where asyncio.run cannot (a trial's followed the advice: `cannot be called from a running
    event loop`)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return "pass lambda: asyncio.run(fn(...))"
    return (
        "an event loop runs here (an async test), where asyncio.run cannot: measure the awaits as one step, "
        "with opprof.capture(): await fn(...)"
    )


def validate_run_args(
    fn: object,
    warmup: object,
    steps: object,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    call: str = "opprof.run",
) -> None:
    """Reject bad arguments to measure()/opprof.run() with one clear line (OpprofUsageError);
    `call`: which of them the messages name."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if not callable(fn):
        raise OpprofUsageError(bad_argument("fn", fn, fn_expected(call)))
    taken = _run_keyword_taken(fn, args, kwargs or {})
    if taken:
        raise OpprofUsageError(fn_keyword_taken(taken, call))
    slip = _run_keyword_slip(fn, kwargs or {})
    if slip and kwargs:
        raise OpprofUsageError(run_keyword_slip(*slip, kwargs[slip[0]], call))
    called = (fn, getattr(fn, "__call__", None))  # noqa: B004  # an object's `async def __call__` too
    if any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) for f in called):
        raise OpprofUsageError(
            bad_argument("fn", fn, "a function that does its work when called, not an async def (a call only "
            f"makes a coroutine); {_async_fix()}")
        )  # fmt: skip
    if any(inspect.isgeneratorfunction(f) for f in called):
        raise OpprofUsageError(
            bad_argument("fn", fn, "a function that does its work when called, not a generator (a call only "
            "makes one); pass lambda: list(fn(...))")
        )  # fmt: skip
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise OpprofUsageError(bad_argument("warmup", warmup, "a whole number >= 0"))
    if warmup > MAX_STEPS:  # a typo (10**20) would run the model for ever before any output
        raise OpprofUsageError(bad_argument("warmup", warmup, f"at most {MAX_STEPS:,}"))
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise OpprofUsageError(bad_argument("steps", steps, "a whole number >= 1"))
    if steps > MAX_STEPS:  # a typo (10**6): the profiler would hold every step's events in memory
        raise OpprofUsageError(
            bad_argument("steps", steps, f"at most {MAX_STEPS:,} (a capture holds every step's events in memory)")
        )


def _run_keyword_taken(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """'steps' or 'warmup' where fn needs a parameter of that name the call leaves without a value
    (opprof took the keyword for itself), else None; None too where fn's signature cannot be read."""
    try:
        signature = inspect.signature(fn)
        parameters, bound = signature.parameters, signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return None
    for name in ("steps", "warmup"):
        parameter = parameters.get(name)
        if parameter is None or name in bound or parameter.default is not inspect.Parameter.empty:
            continue
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            return name
    return None


def _run_keyword_slip(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(keyword, run()'s own) for a keyword meant for run() (`step=3`, `warm_up=1`) that fn
    does not take and would refuse with a TypeError after opprof's warm-up, else None."""
    parameters = _keywords_taken(fn)
    if parameters is None:
        return None
    for name in kwargs:
        if name in parameters:
            continue
        for own in ("steps", "warmup"):
            if difflib.SequenceMatcher(None, name.replace("_", "").lower(), own).ratio() >= _SLIP_RATIO:
                return name, own
    return None


def _keywords_taken(fn: Callable[..., Any]) -> set[str] | None:
    """The keywords fn takes, or None where it takes any (`**kwargs`) or they cannot be read. A
    TorchScript function's come from its schema, a torch built-in's (torch.relu) from its
    operator's overloads: a trial's `run(scripted, x, step=3)` got torch's error after the warm-up."""
    forward = getattr(fn, "forward", None)  # a module's call takes what its forward does
    target = forward if callable(forward) else fn
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return _schema_keywords(target)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return None
    return set(parameters)


def _schema_keywords(fn: Any) -> set[str] | None:
    """The argument names of a TorchScript function's schema, or of every overload of the aten
    operator a torch built-in calls; None for another callable without a signature."""
    schema = getattr(fn, "schema", None)
    if schema is not None and hasattr(schema, "arguments"):
        return {a.name for a in schema.arguments}
    torch = sys.modules.get("torch")
    name = getattr(fn, "__name__", None)
    if torch is None or not isinstance(name, str) or getattr(fn, "__module__", None) not in ("torch", "torch._C._nn"):
        return None
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    return {a.name for s in schemas for a in s.arguments} if schemas else None


_SLIP_RATIO = 0.75  # step, warm_up, n_steps, stpes, warm; not sleep, stop, iters


def table_from_kineto(kineto_events: Any, pid: int | None = None, with_shapes: bool = False) -> EventTable:
    """Convert torch's raw _KinetoEvent list to a neutral event table.

    Read column by column through the unbound accessors: a bound-method call per field per
    event costs 3x more, and this runs on every measured test. Op inputs and FLOPs are read
    only `with_shapes` (a capture with record_shapes): ~10 us per op.
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
        _read_inputs(table, kineto_events, cls)
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


def _read_inputs(table: EventTable, kineto_events: Any, cls: Any) -> None:
    """Input shapes, input types and FLOPs of every CPU op (a capture with record_shapes).
    Shapes as torch's structured input shapes give them, a list of tensors (torch.cat's) with each
    tensor's shape; an event class without them gives such an input as `[]` (records_list_shapes)."""
    shapes = getattr(cls, "structured_input_shapes", cls.shapes)
    for i, kind in enumerate(table.kind):
        if kind is CPU_OP:
            e = kineto_events[i]
            dtypes = tuple(cls.dtypes(e))
            table.shapes[i] = capped_lists(freeze(shapes(e)), dtypes)  # nested tuples of ints
            table.dtypes[i] = dtypes
            table.flops[i] = int(cls.flops(e) or 0)


def from_profiler(prof: Any) -> Profile:
    """Analyse a finished `torch.profiler.profile` (or `torch.autograd.profiler.profile`)."""
    return _read_profiler(prof, stray_step=True)  # the user's: its loop's last prof.step() may open a stray step


def _read_own(prof: Any, aside: bool = False) -> Profile:
    """A profiler opprof started: read, and an error where it could not trace the GPU its code
    used (CUDA first initialised inside it), in place of the device tracer's (CUPTI's) blame.
    Then its results are let go (release_results)."""
    try:
        profile = _read_profiler(prof, aside=aside)
        if _cuda_untraced(prof):
            kept = tuple(check for check in profile.checks if check.name != "device_events")
            profile = replace(profile, checks=(*kept, cuda_untraced_check()))
    finally:
        release_results(prof)
    return profile


def release_results(prof: Any) -> None:
    """Let go of a read profiler's results (torch's events, hundreds of MiB for a large capture).
    A torch.profiler.profile refers to itself (its action map holds its bound methods), so only
    Python's full collection frees it, which counts objects, not bytes: a scale trial's 16 tests of
    25k events each climbed to 2.4 GiB RSS, +200 MiB a test. Only for profilers opprof started:
    a user's own stays as the user left it."""
    if hasattr(prof, "profiler"):
        prof.profiler = None


def _cuda_untraced(prof: Any) -> bool:
    """Whether a profiler opprof started without the GPU's activity ends with CUDA in use: its
    code initialised CUDA after the start, and the GPU work it ran went unrecorded."""
    torch = sys.modules["torch"]
    return torch.profiler.ProfilerActivity.CUDA not in getattr(prof, "activities", ()) and _cuda_active(torch)


def _read_profiler(prof: Any, stray_step: bool = False, aside: bool = False) -> Profile:
    """A finished profiler's Profile (`stray_step`: see analyze; opprof's own mark each step as a
    call of fn; `aside`: work run in set_aside() is left out)."""
    inner = getattr(prof, "profiler", prof)
    results = getattr(inner, "kineto_results", None)
    if results is None:
        raise CaptureError(_no_results(prof))
    with_shapes = bool(getattr(prof, "record_shapes", False))
    with gc_paused():
        table = table_of(results, with_shapes=with_shapes)
        table = without_spans(table, SET_ASIDE, trimmed="ProfilerStep#") if aside else table
        profile = analyze(table, source="capture", stray_step=stray_step)
    if not profile.ops and (cleared_at := _cycle_cleared_at(prof)) is not None:
        raise CaptureError(profiler_cycle_cleared(cleared_at))
    if not profile.ops and _unstepped(prof):
        raise CaptureError(profiler_never_stepped())
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
        return profiler_never_stepped() if _unstepped(prof) else profiler_never_started()
    return profiler_not_finished()


def _unstepped(prof: Any) -> bool:
    """A scheduled profiler whose loop called no prof.step() while its schedule waited or warmed
    up at the first step: it recorded nothing (a trial's loop forgot prof.step() and was told to
    call from_profiler after the `with` block it had left; with warmup first, it read no ops)."""
    schedule, steps = getattr(prof, "schedule", None), getattr(prof, "step_num", None)
    if not callable(schedule) or steps != 0:
        return False
    action = sys.modules["torch"].profiler.ProfilerAction
    return schedule(0) in (action.NONE, action.WARMUP)


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


def table_of(results: Any, with_shapes: bool = False) -> EventTable:
    """A finished capture's events (torch's `kineto_results`) as a neutral table.

    Where torch's events carry their Kineto category (`activity_type`, torch 2.12 on), they are read
    directly. Older torch's events say only CPU or device: a runtime call would pass for an op, a
    memory copy or a GPU-side annotation for a kernel. There the capture goes through Kineto's
    own Chrome trace of it (`save()`, as `export_chrome_trace` writes) and the trace reader,
    whose categories are Kineto's; that trace has no FLOPs, which come from the events, matched
    by the op's External id. Such a torch writes a capture's trace once: the profilers opprof
    starts are its own; a user's, already written, is refused in one line naming load_trace."""
    if events_carry_category():
        return table_from_kineto(results.events(), with_shapes=with_shapes)
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
        flops = {e.correlation_id(): e.flops() for e in results.events() if e.flops()}
        for i, kind in enumerate(table.kind):
            if kind is CPU_OP:
                table.flops[i] = flops.get(table.external_id[i], 0)
    return table


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


def new_profiler(torch: Any, cuda: bool, work: bool) -> Any:
    """A torch.profiler.profile as opprof's captures make it (CPU, and CUDA where asked; shapes and
    FLOPs where `work`): scripts/gpu_probe.py and record_gpu_traces.py record with this one too."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(
        activities=activities,
        record_shapes=work,
        with_flops=work,
        with_stack=False,
        profile_memory=False,
        experimental_config=_device_details(torch) if cuda else None,
    )


def _device_details(torch: Any) -> Any:
    """Where the events are read directly (torch 2.12 on), a config that keeps each device event's
    metadata, which holds a copy's bytes: torch fills it only when asked (pytorch#161624)."""
    if not events_carry_category():
        return None  # read through Kineto's trace, which holds the bytes
    return torch._C._profiler._ExperimentalConfig(expose_kineto_event_metadata=True)


def _start_profiler(torch: Any, work: bool = False) -> tuple[Any, bool]:
    """Start a profiler (CUDA traced when initialised); refuse when another one is running.
    `work`: record op inputs and FLOPs too (record_shapes, with_flops: every op costs more)."""
    _refuse_a_running_profiler(torch)
    cuda = _cuda_active(torch)
    if cuda:
        sync_devices(torch)  # earlier work must not spill into the first step
    prof = new_profiler(torch, cuda, work)
    try:
        with quiet_profiler():
            prof.start()
    except BaseException:  # a timeout's signal or Ctrl-C mid-start: no profiler stays on for later tests
        _stop_quietly(torch, prof)
        raise
    _RUNNING.append(prof)
    _guard_inner_profilers(torch)
    return prof, cuda


_RUNNING: list[Any] = []  # the profilers opprof started and has not stopped (one at most: torch runs one)
_STEPS_ASIDE: list[StepRecorder] = []  # the whole-call capture while it runs: it gives way to the test's profiler
_RECORDING: list[StepRecorder] = []  # the one-step captures running now (a whole call, a capture() block)
SET_ASIDE = "opprof::set_aside"  # the annotation around work that is pytest's, not the test's


@contextmanager
def set_aside() -> Iterator[None]:
    """Work that is pytest's, not the test's, run while a one-step capture records on this
    thread: left out of it. A failing assert's message is made inside the test call, and a
    trial's `assert y.sum() > 1e9` on a 16x16 tensor reported 535 `aten::item` calls of its
    repr. On the CPU a step that ends in such work ends where it began (events.without_spans)."""
    thread = threading.get_ident()
    recorder = next((r for r in _RECORDING if r.thread == thread and r.recording), None)
    if recorder is None:
        yield
        return
    recorder.had_aside = True
    with recorder.torch.autograd.profiler.record_function(SET_ASIDE):
        yield


def run_aside(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, run in set_aside() whenever a one-step capture records (nothing more otherwise)."""

    @functools.wraps(fn)
    def aside(*args: Any, **kwargs: Any) -> T:
        if not _RECORDING:
            return fn(*args, **kwargs)
        with set_aside():
            return fn(*args, **kwargs)

    aside.__dict__["_opprof_aside"] = True
    return aside


def _stop_profiler(prof: Any) -> None:
    """Stop a profiler opprof started, once torch's pool threads are idle (_settle_torch_pools)."""
    try:
        _unguard_inner_profilers()
        _settle_torch_pools()
        with quiet_profiler():
            prof.stop()
    finally:
        if prof in _RUNNING:
            _RUNNING.remove(prof)


POOL_SETTLE_NS = 50_000_000  # the longest a stop waits for torch's pool threads to go idle
POOL_POLL_S = 0.0002


def _settle_torch_pools() -> None:
    """Wait, up to POOL_SETTLE_NS, until no torch pool thread runs: a TorchScript function that
    forks ends its forked task's record on the pool thread after its caller went on, and a
    profiler stopped before that record ends has its memory written after it was freed
    (bench/fork_exit.py: 30 of 30 processes crashed at exit without this wait, SIGSEGV or SIGABRT
    `corrupted size vs. prev_size`; 0 of 30 with it). One read of /proc where no pool thread runs."""
    deadline = clock.now_ns() + POOL_SETTLE_NS
    while device.torch_pool_threads_running() and clock.now_ns() < deadline:
        clock.sleep(POOL_POLL_S)


def _guard_inner_profilers(torch: Any) -> None:
    """While a profiler of opprof's runs, a torch profiler the measured code starts is refused:
    torch runs one at a time, and a trial's `with torch.profiler.profile():` inside fn silently
    stopped opprof's, which then reported that fn ran no operator. Both torch.profiler.profile and
    the autograd profiler prepare through `_prepare_trace`. The whole-call capture steps aside
    for a profiler started on its thread (StepRecorder.give_way), which then goes through."""
    cls = torch.autograd.profiler.profile
    prepare = getattr(cls, "_prepare_trace", None)  # in every torch we admit; without it, no guard
    if prepare is None or getattr(prepare, "_opprof_guard", False):
        return

    def guarded(profiler: Any) -> Any:
        __tracebackhide__ = True  # the line that started the profiler shows, not ours
        for recorder in list(_STEPS_ASIDE):  # the whole-call capture (one at most) gives way on its own thread
            recorder.give_way()
        if _RUNNING:
            raise CaptureError(profiler_inside_capture())
        return prepare(profiler)

    guarded._opprof_guard = True  # type: ignore[attr-defined]
    guarded._opprof_guarded = (cls, prepare)  # type: ignore[attr-defined]
    cls._prepare_trace = guarded


def _unguard_inner_profilers() -> None:
    """Take the guard off torch's profiler class where it is still the outermost hook."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    hook = torch.autograd.profiler.profile._prepare_trace
    if getattr(hook, "_opprof_guard", False):
        cls, prepare = hook._opprof_guarded
        cls._prepare_trace = prepare


def _refuse_a_running_profiler(torch: Any) -> None:
    """One line when a profiler runs: opprof's own (a capture inside a capture) or the user's."""
    __tracebackhide__ = True  # the test's line shows, not ours (a trial saw two frames of plugin code)
    if _profiler_running(torch):
        raise CaptureError(captures_cannot_nest() if _RUNNING else profiler_already_running())


def _stop_quietly(torch: Any, prof: Any) -> None:
    """Stop a profiler whose start did not finish, if it runs; its own error is not the one to surface."""
    if _profiler_running(torch):
        with suppress(Exception):
            _stop_profiler(prof)


def torch_threads() -> int | None:
    """torch's intra-op thread count now; None before torch is imported (nothing is imported)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


_WARMED: list[bool] = []  # a profiler was started and stopped in this process (warm_profiler)


def warm_profiler() -> None:
    """Start and stop a CPU profiler once per process, so that no test pays for torch's first
    start (it imports Inductor: 1.1-1.7 s here, into the first measured test's time and its
    timeout) and no measurement's steps for its first-time setup. Any error is left for the first
    capture to report."""
    if _WARMED:
        return
    try:
        torch = _torch()
        if _profiler_running(torch):
            return
        prof = new_profiler(torch, cuda=False, work=False)
        try:
            with quiet_profiler():
                prof.start()
        finally:
            _stop_quietly(torch, prof)
            release_results(prof)
        _WARMED.append(True)
    except Exception:
        pass


# Kineto's lines at every profiler start and stop, and its one line at the first stop of a CUDA
# build of torch on a machine without a GPU driver (the capture then runs on the CPU, as the
# report's device says).
_KINETO_CHATTER = re.compile(rb"^(USDT|STAGE):[^\n]*\] |^ERROR:[^\n]*\] gpuGetDeviceCount failed with code ")
# torch 2.10-2.11 warn at every first start that a profiler "clears events at the end of each
# cycle": true of every capture, which runs one cycle.
_ONE_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


@contextmanager
def quiet_profiler() -> Iterator[None]:
    """Kineto writes `USDT: ... profiler_start` and `STAGE: ... Completed Stage` lines to the
    process's stderr at every profiler start and stop, which nobody asked for (they fill every
    failing test's captured stderr). Around a start or stop, stderr (fd 2) goes to a temporary
    file; every other line (a Kineto error, anything else written meanwhile) is written back.
    torch's warning that a profiler keeps one cycle's events is dropped too."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_ONE_CYCLE_WARNING, category=UserWarning)
        with _stderr_filtered(_KINETO_CHATTER):
            yield


@contextmanager
def _stderr_filtered(drop: re.Pattern[bytes]) -> Iterator[None]:
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to redirect
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().splitlines(keepends=True) if not drop.match(line)]
            if kept:
                os.write(2, b"".join(kept))


def _end_step_sync(torch: Any) -> None:
    # Synchronise at the step boundary only, inside the step so the step's wall time covers its
    # device work; the annotation keeps it out of assert_no_sync().
    with torch.autograd.profiler.record_function(OPPROF_SYNC_ANNOTATION):
        sync_devices(torch)


class StepRecorder:
    """A one-step capture that can be started and stopped from different places (the plugin
    starts one around the whole test call and abandons it when the test captures by itself)."""

    def __init__(self, probe: Callable[[], None] | None = None, step_aside: bool = False) -> None:
        self._probe = probe  # called just before the profiler starts and just after it stops
        self._torch: Any = None
        self._prof: Any = None
        self._step: Any = None
        self._cuda = False
        # The whole-call capture steps aside when the test starts a profiler of its own: torch
        # runs one at a time, and stopping ours later would empty the user's.
        self._step_aside = step_aside
        self._threads: ThreadWatch | None = None
        self.stepped_aside = False
        self.refused: list[str] = []  # profilers refused on another thread (their thread may swallow it)
        self.thread = 0  # the thread the capture started on
        self.had_aside = False  # whether work of pytest's ran in set_aside() during it

    def start(self) -> None:
        __tracebackhide__ = True  # a refusal shows the test's line
        torch = self._torch = _torch()
        _refuse_a_running_profiler(torch)  # before the reference: fail without measuring anything
        if self._probe is not None:
            self._probe()
        # One step carries both: its times include the cost of recording inputs (one-step
        # captures are reported, never judged on time).
        prof, self._cuda = _start_profiler(torch, work=True)
        self._prof = prof
        self._threads = ThreadWatch(torch)
        self._threads.start()
        try:
            self._step = torch.autograd.profiler.record_function("ProfilerStep#1")
            self._step.__enter__()
        except BaseException:
            self._prof = None
            self._threads.stop()
            _stop_profiler(prof)
            raise
        self.thread = threading.get_ident()
        _RECORDING.append(self)
        if self._step_aside:
            _STEPS_ASIDE.append(self)

    def give_way(self) -> None:
        """A profiler the test starts itself: on the thread ours started on, ours ends (dropped);
        on another, it is refused: stopping ours from there left it running on this one, into
        every later test (a review)."""
        __tracebackhide__ = True  # the line that started the profiler shows, not ours
        if threading.get_ident() != self.thread:
            message = profiler_off_thread(threading.current_thread().name)
            self.refused.append(message)
            raise CaptureError(message)
        self.stepped_aside = True
        self.stop(keep=False)

    def stop(self, keep: bool = True) -> Profile | None:
        """End the step and the profiler; the Profile when `keep`, else the capture is dropped."""
        prof = self._end()
        if prof is None or not keep:
            if prof is not None:
                release_results(prof)  # dropped: its results go now, not at the next full collection
            return None
        # References only for a kept capture, after it: a whole call that run() abandons costs none.
        assert self._threads is not None  # set with _prof
        profile = with_other_threads(_read_own(prof, aside=self.had_aside), self._threads.others)
        return _with_reference(profile, self._threads.fewest, _references(self._torch))

    def stop_cut_short(self) -> Profile | None:
        """End a capture that the test's exception interrupted: what it recorded, for the
        failure's report (no machine references: it is never judged). None when it cannot be
        read: the test's own exception is what must surface, not ours."""
        try:
            prof = self._end()
        except Exception:
            return None
        others = self._threads.others if self._threads is not None else ()
        return _cut_with_others(_read_cut_short(prof, aside=self.had_aside), others)

    @property
    def torch(self) -> Any:
        return self._torch

    @property
    def recording(self) -> bool:
        return self._prof is not None

    def _end(self) -> Any:
        """End the step and the profiler; the stopped profiler, or None when none was running."""
        for running in (_STEPS_ASIDE, _RECORDING):
            if self in running:
                running.remove(self)
        prof, self._prof = self._prof, None
        if prof is None:
            return None
        torch, threads = self._torch, self._threads
        assert threads is not None  # set with _prof
        threads.stop()
        try:
            if self._cuda:
                _end_step_sync(torch)
            self._step.__exit__(None, None, None)
        finally:
            _stop_profiler(prof)
        if self._probe is not None:
            self._probe()
        return prof


@contextmanager
def _profiling(torch: Any, work: bool = False) -> Iterator[tuple[Any, bool]]:
    prof, cuda = _start_profiler(torch, work)
    try:
        yield prof, cuda
    finally:
        _stop_profiler(prof)  # whatever happened in the body


class ThreadWatch:
    """torch's intra-op thread counts during a capture, on the capturing thread: the count at its
    start and at its end, and each count that thread sets through torch.set_num_threads
    meanwhile, so a limit the code restores before the capture ends is still seen. The setting is
    per thread (a DataLoader's pin-memory thread sets 1 for itself): other threads' calls do not
    count. `fewest` is what the capture records; `others`, the other Python threads that ran
    during it (PythonThreadWatch)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._original: Any = None
        self._wrapper: Any = None
        self._python = PythonThreadWatch()
        self.seen = [torch.get_num_threads()]

    @property
    def others(self) -> tuple[OtherThread, ...]:
        return self._python.found

    def start(self) -> None:
        self._python.start()
        torch, seen, me = self._torch, self.seen, threading.get_ident()
        original = self._original = torch.set_num_threads

        def set_num_threads(n: int) -> None:
            original(n)
            if threading.get_ident() == me:
                seen.append(torch.get_num_threads())

        torch.set_num_threads = self._wrapper = set_num_threads

    def stop(self) -> None:
        if self._original is not None and self._torch.set_num_threads is self._wrapper:
            self._torch.set_num_threads = self._original  # not when the test replaced it meanwhile
        self._original = self._wrapper = None
        self.seen.append(self._torch.get_num_threads())
        self._python.stop()

    @property
    def fewest(self) -> int:
        return min(self.seen)


OTHER_THREAD_MS = 0.1  # CPU a Python thread used in a capture from which it ran in it (with OTHER_THREAD_SHARE)
OTHER_THREAD_SHARE = 0.05  # of the capture's wall: a heartbeat's 2.2 ms in a 500 ms capture is no work of it
# CPU a thread started in the capture that is not the code's own (a Timer, torch's) must use to be
# named: its start alone passed the floor beside a busy loop (a cancelled Timer, 1 run in 12)
STARTED_ASIDE_MS = 1.0


class PythonThreadWatch:
    """The Python threads besides the capturing one that ran during a capture, whose ops
    torch.profiler does not record. Given the capture's work: a thread the code started in it
    (a hook `threading` gives each new thread while it runs), and a ThreadPoolExecutor's worker
    that ran an item the code submitted in it (its `submit` is watched: a pool made before whose
    0.1 ms items the CPU rule missed 5 runs in 6). torch's own are not the code's: a pool torch
    submits to (Inductor compiles in one: a review's cold-cache run failed an absence on it), a
    thread whose target is torch's, a Timer (a cancelled one runs nothing). Besides, any other
    alive at its end that used OTHER_THREAD_MS and OTHER_THREAD_SHARE of its wall in CPU, or,
    started in it, STARTED_ASIDE_MS (its start alone may pass the floor on a loaded machine) (a queue
    worker of the code's own). The hooks pass straight through once it stopped, should the code
    have kept them (a test's monkeypatch put one back as the method it found)."""

    def __init__(self) -> None:
        self._me = self._wall = 0
        self._active = False
        self._before: dict[int, tuple[str, int]] = {}
        self._started: list[tuple[threading.Thread, bool]] = []  # each started, and whether the code's own
        self._ran: dict[int, threading.Thread] = {}  # by id(): pool workers that ran an item the code submitted
        self._previous: Any = None
        self._hook: Any = None
        self._submit: Any = None
        self._original_submit: Any = None
        self.found: tuple[OtherThread, ...] = ()

    def start(self) -> None:
        self._me, self._wall = threading.get_ident(), clock.now_ns()
        self._before = device.python_threads_cpu_ns(self._me)
        self._started, self._ran, self._active = [], {}, True
        self._watch_new_threads()
        self._watch_pools()

    def _watch_new_threads(self) -> None:
        self._previous = previous = threading.getprofile()
        started = self._started

        def first_call(frame: Any, event: Any, arg: Any) -> None:
            if self._active:
                thread = threading.current_thread()
                started.append((thread, _the_codes_own(thread)))
            sys.setprofile(previous)  # seen: the thread goes on as it would have
            if previous is not None:
                previous(frame, event, arg)

        self._hook = first_call
        threading.setprofile(first_call)

    def _watch_pools(self) -> None:
        ran = self._ran
        original = self._original_submit = ThreadPoolExecutor.submit

        def submit(executor: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            if not self._active or in_torch(sys._getframe(1).f_code.co_filename):
                return original(executor, fn, *args, **kwargs)

            def item(*a: Any, **k: Any) -> Any:
                thread = threading.current_thread()
                ran[id(thread)] = thread
                return fn(*a, **k)

            return original(executor, item, *args, **kwargs)

        self._submit = submit
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]

    def stop(self) -> None:
        self._active = False
        if threading.getprofile() is self._hook:  # not one the code set since
            threading.setprofile(self._previous)
        if ThreadPoolExecutor.submit is self._submit:  # not one the code set since
            ThreadPoolExecutor.submit = self._original_submit  # type: ignore[method-assign]
        wall = clock.now_ns() - self._wall
        self.found = self._found(device.python_threads_cpu_ns(self._me), wall)
        self._started.clear()  # the hooks' own lists: nothing of them is kept
        self._ran.clear()

    def _found(self, after: dict[int, tuple[str, int]], wall_ns: int) -> tuple[OtherThread, ...]:
        """Threads are told apart as objects, not idents: an ended thread's ident is reused (a
        review's joined `alpha` went unnamed beside a later `beta` of its ident)."""
        floor = max(OTHER_THREAD_MS * 1e6, OTHER_THREAD_SHARE * wall_ns)
        started = {id(t) for t, _ in self._started}
        given = {id(t) for t, own in self._started if own} | set(self._ran)
        alive = {t.ident: t for t in threading.enumerate()}
        found, gone = [], Counter[str]()
        for ident, (name, ns) in after.items():
            thread = alive.get(ident)
            new = thread is not None and id(thread) in started
            used = ns - (0 if new else self._before.get(ident, (name, ns))[1])
            worked = thread is not None and id(thread) in given
            if worked or used >= (max(floor, STARTED_ASIDE_MS * 1e6) if new else floor):
                found.append(OtherThread(name, round(used / 1e6, 3), given_work=worked))
        ended = [t for t, _ in self._started if id(t) in given] + [
            t for key, t in self._ran.items() if key not in started
        ]
        for thread in ended:  # gone by the end, or unread (no /proc)
            if alive.get(thread.ident) is not thread or thread.ident not in after:
                gone[thread.name] += 1
        return tuple(found + [OtherThread(name, None, count) for name, count in gone.items()])


# multiprocessing's own threads, which move data between processes and run no torch op: a queue's
# feeder (a trial's DataLoader test warned of 10 `QueueFeederThread`s it could neither stop nor run
# on the calling thread) and a process pool's handlers. A ThreadPool's workers run the code's work.
_MULTIPROCESSING_PLUMBING = frozenset(
    {
        ("multiprocessing.queues", "Queue._feed"),
        ("multiprocessing.pool", "Pool._handle_workers"),
        ("multiprocessing.pool", "Pool._handle_tasks"),
        ("multiprocessing.pool", "Pool._handle_results"),
    }
)


def _the_codes_own(thread: threading.Thread) -> bool:
    """Whether a thread started in a capture is the code's own: not a Timer (a cancelled one runs
    nothing), not a pool's worker (whose items say: PythonThreadWatch._ran), not torch's."""
    if isinstance(thread, threading.Timer):
        return False
    target = getattr(thread, "_target", None)
    target = getattr(target, "func", target)  # a functools.partial
    if getattr(target, "__module__", None) == "concurrent.futures.thread":
        return False
    if (getattr(target, "__module__", None), getattr(target, "__qualname__", None)) in _MULTIPROCESSING_PLUMBING:
        return False
    if type(thread).__module__ == "concurrent.futures.process":  # a process pool's manager thread
        return False
    code = getattr(target, "__code__", None)  # torch's Python, not an op of torch's the code runs (torch.sin)
    return not (code is not None and in_torch(code.co_filename))


@contextmanager
def _threads_watched(torch: Any) -> Iterator[ThreadWatch]:
    watch = ThreadWatch(torch)
    watch.start()
    try:
        yield watch
    finally:
        watch.stop()


@contextmanager
def _step(torch: Any, number: int, cuda: bool) -> Iterator[None]:
    with torch.autograd.profiler.record_function(f"ProfilerStep#{number}"):
        yield
        if cuda:
            _end_step_sync(torch)


_REFERENCE_SIZE = 256
_REFERENCE_REPS = 8
_DISPATCH_OPS = 100


def _best_ns(work: Callable[[], Any], reps: int = _REFERENCE_REPS) -> int:
    """The best of `reps` timings of `work`: interference only adds time."""
    best = None
    for _ in range(reps):
        start = clock.now_ns()
        work()
        elapsed = clock.now_ns() - start
        best = elapsed if best is None else min(best, elapsed)
    return int(best or 0)


def machine_reference_ns(torch: Any) -> int:
    """The best of 8 timings of a fixed CPU workload (a 256x256 float matmul, torch's threads).

    Taken around every capture and stored with baselines: a time move in the machine's direction
    is then inconclusive (excuses.explained_by_machine; measurements in docs/design.md).
    """
    a = torch.ones(_REFERENCE_SIZE, _REFERENCE_SIZE)
    with torch.no_grad():
        return _best_ns(lambda: torch.mm(a, a))


def dispatch_reference_ns(torch: Any) -> int:
    """The best of 8 timings of 100 one-element torch additions: the dispatch path, scalar code.

    Scalar code notices a core shared with another tenant that the vector matmul barely does
    (docs/design.md); a slowdown while it ran slower is inconclusive.
    """
    one = torch.ones(1)

    def work() -> None:
        for _ in range(_DISPATCH_OPS):
            torch.add(one, 1)

    with torch.no_grad():
        return _best_ns(work)


_SETTLE_ELEMENTS = 1 << 20  # 4 MB of float: parallel on torch's threads, ~0.1 ms an add


def settle_cpus(seconds: float, threads: int | None = None) -> None:
    """Keep torch's threads busy for `seconds` (a parallel add, again and again), on `threads`
    threads where given. Run before a confirmation: on a 2-vCPU VM, a parallel op measured
    0.3 s after the process idled ran 1.5-3x slower in 16 of 30 windows, after 0.5 s of this in
    9 of 30 (after a busy Python loop on one thread: 16 of 30; python bench/spells.py)."""
    torch = _torch()
    keep_forked_children_working(torch)
    with torch.no_grad(), _on_threads(torch, threads):
        ones = torch.ones(_SETTLE_ELEMENTS, device="cpu")  # not the test's default device
        out = torch.empty_like(ones)
        end = clock.now_ns() + int(seconds * 1e9)
        while clock.now_ns() < end:  # the real clock: a test's frozen one never moved (freezegun)
            torch.add(ones, 1.0, out=out)


def _references(torch: Any) -> tuple[int, int]:
    keep_forked_children_working(torch)
    return machine_reference_ns(torch), dispatch_reference_ns(torch)


_FORK_HOOKED: list[bool] = []  # once per process: os.register_at_fork hooks cannot be taken back


def keep_forked_children_working(torch: Any) -> None:
    """Before opprof runs parallel torch work of its own (the references, settling the CPUs): a
    child forked after it gets one torch thread. GNU OpenMP does not survive a fork: once the
    parent ran a parallel region, a forked child's next one waits for the parent's pool threads,
    which the child has not, for ever (a trial's test forking after run() hung under --opprof
    only: its own 64x64 products ran no parallel region, the 256x256 reference did). One thread
    runs no team; DataLoader workers set it so too. A child that exec()s is untouched."""
    if _FORK_HOOKED or not hasattr(os, "register_at_fork"):
        return
    _FORK_HOOKED.append(True)
    os.register_at_fork(after_in_child=functools.partial(_one_thread, torch))


def _one_thread(torch: Any) -> None:
    with suppress(Exception):  # a child must not fail for this
        if torch.get_num_threads() > 1:
            torch.set_num_threads(1)


WORKLOAD_BUDGET_NS = 20_000_000  # a large product is replayed fewer times (one call past this)


def workload_choice(profile: Profile) -> WorkloadReference | None:
    """The op and inputs a workload reference replays: the costliest aten::addmm/mm/bmm on the
    CPU with recorded inputs, its most called signature, when its tensors are of a float type."""
    ops = [o for o in profile.ops if o.name in WORKLOAD_OPS and o.work is not None and o.work.signatures]
    ops = [o for o in ops if not o.on_device]
    if not ops:
        return None
    op = max(ops, key=lambda o: (o.cpu_ns, o.name))
    assert op.work is not None
    n = WORKLOAD_OPS[op.name]
    replayable = [s for s in op.work.signatures if workload_problem(op.name, s.shapes[:n], s.dtypes[:n]) is None]
    if not replayable:
        return None
    # the costliest signature: its product's size times its calls (not a tiny, dispatch-bound one)
    sig = max(
        replayable, key=lambda s: math.prod(s.shapes[n - 1]) * s.shapes[n - 2][-2] * sum(s.calls_per_step.samples)
    )
    return WorkloadReference(op.name, tuple(sig.shapes[:n]), tuple(sig.dtypes[:n]), 0)


def workload_reference_ns(torch: Any, choice: WorkloadReference) -> int | None:
    """The best of up to 8 timings of the chosen product on new CPU tensors of its shapes and
    types (torch's threads, no grad): as many as fit WORKLOAD_BUDGET_NS, at least 2, or the one
    call of a product longer than that; None when they do not make a valid product (a bias that
    does not broadcast)."""
    try:
        tensors = [
            torch.ones(shape, dtype=getattr(torch, WORKLOAD_DTYPES[t]), device="cpu")
            for shape, t in zip(choice.shapes, choice.dtypes)
        ]
        product = getattr(torch, choice.op.split("::")[1])
        keep_forked_children_working(torch)
        with torch.no_grad():
            start = clock.now_ns()
            product(*tensors)  # a shape mismatch raises here, before any timing
            first = max(clock.now_ns() - start, 1)
            if first > WORKLOAD_BUDGET_NS:  # a large product: its one call is the sample
                return first
            return _best_ns(lambda: product(*tensors), max(2, min(_REFERENCE_REPS, WORKLOAD_BUDGET_NS // first)))
    except (RuntimeError, TypeError, ValueError):
        return None


def _with_workload_reference(torch: Any, profile: Profile, choice: WorkloadReference | None) -> Profile:
    """The profile with its workload reference timed now (workload_choice took a CPU product
    only: whether CUDA is up, which depends on the tests before, changes nothing)."""
    if choice is None:
        return profile
    ns = workload_reference_ns(torch, choice)
    return replace(profile, workload_reference=replace(choice, ns=ns)) if ns else profile


UNPROFILED_STEPS = 2  # steps of run() timed without the profiler (the best one is compared)


def unprofiled_step_ns(torch: Any, fn: Callable[..., Any], args: Any, kwargs: Any) -> int:
    """The wall time of one call of fn without the profiler (device work included)."""
    cuda = _cuda_active(torch)
    if cuda:
        sync_devices(torch)
    start = clock.now_ns()
    fn(*args, **kwargs)
    if cuda:
        sync_devices(torch)
    return clock.now_ns() - start


def _with_overhead(profile: Profile, unprofiled: list[int]) -> Profile:
    """The observer effect: the best profiled step's wall time / the best unprofiled one's (the
    best: interference only adds time, and the first calls after a pause wake thread pools), and
    a trust warning when it is far above the usual."""
    walls = [s.wall_ns for s in profile.step_spans]
    if not walls or not unprofiled or min(unprofiled) <= 0:
        return profile
    ratio = min(walls) / min(unprofiled)
    compiling = profile.compiled is not None and any(c.step >= 0 for c in profile.compiled.compilations)
    # the compilation warning says why the steps were slow; a step of no op has no distortion to
    # speak of (a trial's fn that returned a generator got `give each step more work` beside its error)
    check = None if compiling or not profile.ops else overhead_check(ratio)
    return replace(profile, overhead=round(ratio, 3), checks=profile.checks + ((check,) if check else ()))


def _with_reference(profile: Profile, threads: int, *references: tuple[int, int]) -> Profile:
    """The best of each reference taken around the capture, and the fewest torch threads it ran
    on (the references run on torch's threads: compare.py compares them only at equal counts)."""
    return replace(
        profile,
        reference_ns=min(r[0] for r in references),
        dispatch_reference_ns=min(r[1] for r in references),
        threads=threads,
    )


def run_steps(
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    warmup: int,
    steps: int,
    probe: Callable[[], None] | None = None,
    work: bool = True,
    threads: int | None = None,
    cut_short: Callable[[Profile, BaseException], None] | None = None,
    signature: bool = False,
    workload: bool = False,
) -> tuple[Profile, T]:
    """Call fn `warmup` times unprofiled, then `steps` times profiled, one step each, then (with
    `work` or `signature`) once more profiled apart for the ops' inputs and FLOPs (the signature
    step, untimed; a further measurement takes it to tell whether fn ran the first's work).
    With `work`, UNPROFILED_STEPS more calls are timed without the profiler (before the profiled
    steps, after them with no warmup) for the profile's `overhead`. Returns the profile and fn's
    last result. When fn raises in a profiled step (or after the steps), `cut_short` is given
    what was recorded up to then and the exception, for the failure's report, before the
    exception goes on. `probe` (the plugin's CPU-wait and GPU clock sampler) is called just
    before the first profiled step and just after the last.
    `threads`: torch's thread count for the call (a confirmation runs on its first measurement's
    threads, which the test may have restored since), put back afterwards. With `work`, after the
    signature step, the workload reference is timed (workload_choice). A confirmation takes none:
    it runs only when the first measurement's references excused nothing, and pooling keeps the
    faster of each. `workload`: a further measurement of a recording takes one all the same, as
    the file may hold it (decide._calm_base: a review's calm one was written without one)."""
    __tracebackhide__ = True  # a failure in fn shows the user's frames, not the loop calling it
    validate_run_args(fn, warmup, steps, args, kwargs)
    torch = _torch()
    _refuse_a_running_profiler(torch)  # before warmup: fail without running the user's code
    with compiled_kernel_profiling(), _on_threads(torch, threads):
        return _run_steps(torch, fn, args, kwargs, warmup, steps, probe, work, cut_short, signature, workload)


def by_failure(exc: BaseException | None) -> bool:
    """Whether an exception that ended a capture is the test failing (or skipping), whose report
    may show what the capture recorded: not an interrupt (Ctrl-C) or SystemExit."""
    return exc is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit))


def _read_cut_short(prof: Any, aside: bool = False) -> Profile | None:
    """A stopped profiler's capture, cut short by the test's exception; None when there is none
    or it cannot be read (the test's own exception is what must surface, not ours)."""
    if prof is None:
        return None
    try:
        return _read_own(prof, aside=aside)
    except Exception:
        return None


@contextmanager
def _on_threads(torch: Any, threads: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_steps(
    torch: Any,
    fn: Callable[..., T],
    args: Any,
    kwargs: dict[str, Any],
    warmup: int,
    steps: int,
    probe: Callable[[], None] | None,
    work: bool,
    cut_short: Callable[[Profile, BaseException], None] | None = None,
    signature: bool = False,
    workload: bool = False,
) -> tuple[Profile, T]:
    __tracebackhide__ = True
    warm_profiler()  # the Python API's first measure() too: torch's first profiler start is no step's
    breaks_before = breaks_seen()
    # The machine references first: right after them compiled code ran slow for several calls (a
    # trial's 643, 185, 98 us against 75), which the warm-up now absorbs instead of the timed calls.
    before = _references(torch)
    for _ in range(warmup):
        fn(*args, **kwargs)
    # The observer effect: steps timed without the profiler, warm, just before the profiled ones
    # (after them when there is no warmup: the first profiled step is then the cold call asked for).
    observed = UNPROFILED_STEPS if work else 0  # a confirming measurement reads only the times
    unprofiled = [unprofiled_step_ns(torch, fn, args, kwargs) for _ in range(observed if warmup else 0)]
    prof, threads, result = _profiled_steps(torch, fn, args, kwargs, steps, cut_short, probe)
    try:
        with _cut_short_as(
            cut_short, lambda: _cut_with_others(_read_cut_short(prof), threads.others)
        ):  # fn may still raise: the steps stand
            unprofiled += [unprofiled_step_ns(torch, fn, args, kwargs) for _ in range(0 if warmup else observed)]
    except BaseException:
        release_results(prof)  # read for the failure's report or not
        raise
    timed = _with_overhead(_with_reference(_read_own(prof), threads.fewest, before, _references(torch)), unprofiled)
    timed = with_other_threads(timed, threads.others)
    new_breaks = new_break_reasons(breaks_before)
    if new_breaks:  # Dynamo compiled during this run: the graph breaks it found, with torch's reasons
        timed = replace(timed, metadata={**timed.metadata, "graph_break_reasons": new_breaks})
    limit = recompile_limit_hit(breaks_before)
    if limit is not None:  # Dynamo gave up compiling a frame: it ran eagerly from then on
        timed = replace(timed, metadata={**timed.metadata, "recompile_limit_hit": limit})
    if not (work or signature):
        return timed, result
    with _cut_short_as(cut_short, lambda: timed):
        signed, result = _signature_step(torch, fn, args, kwargs)
    recorded = {op.name: op.work for op in signed.ops if op.work}
    timed = timed.with_work(recorded, signed.work_steps, signed.list_shapes)
    if not (work or workload):  # a further measurement: its references are pooled with the first's, the faster kept
        return timed, result
    return _with_workload_reference(torch, timed, workload_choice(timed)), result


def _profiled_steps(
    torch: Any,
    fn: Callable[..., T],
    args: Any,
    kwargs: Any,
    steps: int,
    cut_short: Callable[[Profile, BaseException], None] | None,
    probe: Callable[[], None] | None = None,
) -> tuple[Any, ThreadWatch, T]:
    """`steps` profiled calls of fn, one step each: the stopped profiler, the threads watched and
    fn's last result. When fn raises, `cut_short` gets what was recorded up to then. `probe` is
    called just before the first step and just after the last, the profiler running: the CPU
    wait it reads is the steps', not the profiler's start and stop (a third of a 30 ms capture)."""
    __tracebackhide__ = True
    result: Any = None
    prof: Any = None
    watched: list[ThreadWatch] = []  # the threads the failure's profile names, once the watch stopped

    def cut() -> Profile | None:
        return _cut_with_others(_cut_in_step(_read_cut_short(prof)), watched[0].others if watched else ())

    try:
        with _cut_short_as(cut_short, cut):
            with _profiling(torch) as (prof, cuda), _threads_watched(torch) as threads:
                watched.append(threads)
                if probe is not None:
                    probe()
                for number in range(1, steps + 1):
                    with _step(torch, number, cuda):
                        result = fn(*args, **kwargs)
                if probe is not None:
                    probe()
    except BaseException:
        if prof is not None:  # read for the failure's report or not, its results go (release_results)
            release_results(prof)
        raise
    return prof, threads, result


def _cut_with_others(profile: Profile | None, others: tuple[OtherThread, ...]) -> Profile | None:
    """A capture a failure cut short, with the other Python threads that ran in it: the failure's
    report and trace say them as a kept capture's do (a review's failing twin lost the warning)."""
    return with_other_threads(profile, others) if profile is not None else None


def _cut_in_step(profile: Profile | None) -> Profile | None:
    """A capture the test's exception ended inside a step: that step is partial, so a warning
    that the steps differ because of it says nothing of the code (it blamed data-dependent code
    for a timeout); one that the whole steps before it bear out stands."""
    if profile is None:
        return None
    checks = last_step_partial(profile.checks, profile.ops, len(profile.step_spans))
    return replace(profile, checks=checks, cut_in_step=True)


@contextmanager
def _cut_short_as(
    cut_short: Callable[[Profile, BaseException], None] | None, recorded: Callable[[], Profile | None]
) -> Iterator[None]:
    """When fn raises inside, `cut_short` is given what was `recorded` (for the failure's report)
    before the exception goes on."""
    __tracebackhide__ = True
    try:
        yield
    except BaseException as exc:
        if cut_short is not None and by_failure(exc) and (profile := recorded()) is not None:
            cut_short(profile, exc)
        raise


def _signature_step(torch: Any, fn: Callable[..., T], args: Any, kwargs: Any) -> tuple[Profile, T]:
    """One untimed call profiled with record_shapes and with_flops: the work signatures.

    Recording inputs costs every op time, so it never shares a profiler with the timed steps.
    It comes after them: warm whatever `warmup` is, and the timed steps are as they were."""
    __tracebackhide__ = True  # a failure in fn shows the user's frames
    prof = None
    try:
        with _profiling(torch, work=True) as (prof, cuda):
            with _step(torch, 1, cuda):
                result = fn(*args, **kwargs)
    except BaseException:
        if prof is not None:
            release_results(prof)
        raise
    return _read_own(prof), result


F = TypeVar("F", bound=Callable[..., Any])


def fn_first(call: str, method: bool = True) -> Callable[[F], F]:
    """A profiling call whose first argument, the function, is there: `opprof.run()` and
    `opprof.run(fn=model)` (a keyword fn goes to the function) raised Python's bare TypeError
    (an audit); `call` is the name its message gives."""

    def checked(profiling: F) -> F:
        @functools.wraps(profiling)
        def first(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            if len(args) < (2 if method else 1):
                raise OpprofUsageError(fn_missing(call, "fn" in kwargs))
            return profiling(*args, **kwargs)

        return cast(F, first)

    return checked


@fn_first("measure", method=False)
def measure(fn: Callable[..., Any], /, *args: Any, warmup: int = 3, steps: int = 10, **kwargs: Any) -> Profile:
    """Profile `steps` calls of fn(*args, **kwargs) after `warmup` unprofiled ones."""
    validate_run_args(fn, warmup, steps, args, kwargs, call="measure")
    _whole_call_gives_way()
    unprofiled = kernel_profiling_off()
    profile, result = run_steps(fn, args, kwargs, warmup, steps)
    return _with_kernels_check(_why_empty(profile, fn, steps, result), unprofiled)


def _whole_call_gives_way() -> None:
    """The library's measure() or capture() in a measured test's body: the plugin's whole-call
    capture gives way, as to a torch profiler the test starts (a trial's was refused as nested).
    Not for the fixture's own run() or capture() (of a fixture asked for late, beside the marker's
    whole call, a review's): they stay refused as nested."""
    for recorder in list(_STEPS_ASIDE):
        recorder.give_way()


def kernel_profiling_off() -> bool:
    """Whether Inductor is loaded with its C++ kernel profiling off: what it compiled so far shows
    no kernel in a profile (checks.unprofiled_kernels_check)."""
    config = sys.modules.get("torch._inductor.config")
    return config is not None and not config.cpp.enable_kernel_profile


def _with_kernels_check(profile: Profile, unprofiled: bool) -> Profile:
    """A library capture's profile, warned where its compiled code's kernels went unprofiled."""
    found = unprofiled_kernels_check(profile) if unprofiled else None
    return replace(profile, checks=(*profile.checks, found)) if found else profile


def _why_empty(profile: Profile, fn: Callable[..., Any], steps: int, result: object) -> Profile:
    """A profile that recorded no event at all, its `events` error saying why, as opprof.run()'s
    does (a library trial's fn returned a `map`, its work not done, and read only `nothing ran
    under the profiler`)."""
    if not profile.recorded_nothing:
        return profile
    why = ran_no_op_in_run(fn, steps, result, call="measure")
    return replace(profile, checks=tuple(replace(c, message=why) if c.name == "events" else c for c in profile.checks))


class Capture:
    """What `capture()` returns: a context manager whose `with` profiles its block as one step;
    `.profile` is the latest block's, set when it ends without an exception (None before, and
    after a block that raised).
    Entered again, it captures again (a generator-based one raised AttributeError, and its
    `.profile` did not exist before the block)."""

    profile: Profile | None

    def __init__(self) -> None:
        self.profile = None
        self._recorder: StepRecorder | None = None
        self._unprofiled = False  # Inductor's kernel profiling was off at the block's start

    def __enter__(self) -> Capture:
        if self._recorder is not None:
            raise CaptureError(captures_cannot_nest())
        self.profile = None  # a block that raises leaves none: not the block before's
        _whole_call_gives_way()
        recorder = StepRecorder()
        recorder.start()  # may raise (another profiler runs): then no block is in progress
        self._recorder = recorder
        self._unprofiled = kernel_profiling_off()
        return self

    def __exit__(self, kind: object, raised: BaseException | None, traceback: object) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        if raised is not None:
            recorder.stop(keep=False)
            return  # the exception goes on
        profile = recorder.stop()
        if profile is not None:
            self.profile = _with_kernels_check(profile, self._unprofiled or kernel_profiling_off())


def capture() -> Capture:
    """Profile the block as one step: `with capture() as cap: ...; cap.profile`."""
    return Capture()


INDUCTOR_KERNEL_PROFILE = "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"


def enable_compiled_kernel_profiling() -> None:
    """Inductor's C++ kernels show in a profile only when compiled with kernel profiling on:
    switch it on for code compiled from now on (unless the user set it to 0). Nothing is
    imported; a config already loaded is set too. Used through compiled_kernel_profiling()."""
    os.environ.setdefault(INDUCTOR_KERNEL_PROFILE, "1")
    config = sys.modules.get("torch._inductor.config")
    if config is not None and os.environ[INDUCTOR_KERNEL_PROFILE] == "1":
        config.cpp.enable_kernel_profile = True


@contextmanager
def compiled_kernel_profiling() -> Iterator[None]:
    """Kernel profiling on for what compiles inside the block only (`measure()` used as a
    library): the variable and Inductor's flag are as they were after it, so models the caller
    compiles later are not slowed by it. Kernels compiled inside keep their profiling."""
    variable = os.environ.get(INDUCTOR_KERNEL_PROFILE)
    loaded = sys.modules.get("torch._inductor.config")
    flag = loaded.cpp.enable_kernel_profile if loaded is not None else None
    enable_compiled_kernel_profiling()
    try:
        yield
    finally:
        if variable is None:
            os.environ.pop(INDUCTOR_KERNEL_PROFILE, None)
        config = sys.modules.get("torch._inductor.config")  # maybe loaded inside: it read the variable
        if config is not None:
            config.cpp.enable_kernel_profile = flag if loaded is not None else variable == "1"
