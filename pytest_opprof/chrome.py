"""Events -> a Chrome/Perfetto trace file (what torch.profiler exports and `opprof analyze` reads).

Below the model: it knows events only, so `Profile.export_chrome_trace` can use it without the
model importing anything that imports the model.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from .events import ANNOTATION, CPU_OP, DEVICE_KINDS, END_THREAD, RUNTIME, Event
from .files import write_atomic
from .textout import file_bytes

RECORDED_INPUTS = "Inputs (recorded step)"  # an op's arg: its name's inputs in the step that recorded them


def event_to_trace_json(event: Event, end_thread: int | None = None, extra: dict[str, Any] | None = None) -> str:
    """One event as a Chrome-trace record, its times written exactly (us with ns decimals);
    `end_thread`: the thread an op's end was recorded on, where another (EventTable.end_threads);
    `extra`: args of its own to add (an op's RECORDED_INPUTS)."""
    args: dict[str, Any] = dict(extra) if extra else {}
    if end_thread is not None:
        args[END_THREAD] = end_thread
    if event.external_id:
        args["External id"] = event.external_id
    if event.correlation:
        args["correlation"] = event.correlation
    if event.shapes or event.dtypes:
        args["Input Dims"] = event.shapes
        args["Input type"] = event.dtypes
    if event.flops:
        args["flops"] = event.flops
    if event.kind in DEVICE_KINDS:
        args["device"] = event.device
        args["stream"] = event.stream
        if event.bytes:
            args["bytes"] = event.bytes
        ev_pid, ev_tid = event.device, event.stream
    else:
        ev_pid, ev_tid = event.pid, event.tid
    return (
        f'{{"ph":"X","cat":"{_CATEGORY_OF_KIND[event.kind]}","name":{json.dumps(event.name)},'
        f'"pid":{ev_pid},"tid":{ev_tid},"ts":{_ns_to_us_text(event.start_ns)},'
        f'"dur":{_ns_to_us_text(event.dur_ns)},"args":{json.dumps(args)}}}'
    )


_CATEGORY_OF_KIND = {
    "cpu_op": "cpu_op",
    ANNOTATION: "user_annotation",
    "gpu_annotation": "gpu_user_annotation",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "runtime": "cuda_runtime",
    "sync": "cuda_sync",
}


def _ns_to_us_text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


def write_trace(
    path: str | os.PathLike[str],
    events: list[Event],
    metadata: dict[str, Any],
    relative: bool = False,
    end_threads: dict[int, int] | None = None,
    op_args: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Write events as a Chrome/Perfetto trace (.json, or .json.gz by the file name), atomically.
    `relative`: times from the first event's whole microsecond, that instant in the header's
    `baseTimeNanoseconds` as torch writes it (epoch microseconds, 1796190588632019.176, lose their
    nanoseconds in a reader's doubles: a trial's Perfetto saw 55 of 10,420 events end after their
    parent). `end_threads`: by event index, as EventTable.end_threads (read back by the trace reader).
    `op_args`: by op name, args added to each of its events that records no inputs of its own."""
    if relative and events:
        base = min(e.start_ns for e in events) // 1000 * 1000
        events = [e._replace(start_ns=e.start_ns - base) for e in events]
        metadata = {**metadata, "baseTimeNanoseconds": base}
    head = json.dumps({k: v for k, v in metadata.items() if k != "traceEvents"})[:-1]
    ends = end_threads or {}
    extra = op_args or {}
    written = (
        [
            event_to_trace_json(e, ends.get(i), extra.get(e.name) if e.kind == CPU_OP and not e.shapes else None)
            for i, e in enumerate(events)
        ]
        if ends or extra
        else map(event_to_trace_json, events)
    )
    records = [*written, *_names(events), *_flows(events)]
    body = ",\n".join(records)
    sep = ", " if head != "{" else ""
    data = file_bytes(f'{head}{sep}"traceEvents": [\n{body}\n]}}\n')
    p = Path(path)
    write_atomic(p, gzip.compress(data) if p.name.endswith(".gz") else data)


def _names(events: list[Event]) -> list[str]:
    """Perfetto's names for the tracks ("ph": "M"), one per process and thread: a process that
    holds device work is `GPU n` (sorted after the host) with `stream s` tracks, whatever else
    Kineto put on it (its sync records, the GPU-side twins of annotations); any other is the
    host, `host (pid n)` with `thread t` tracks. Without them Perfetto shows bare numbers."""
    devices = {e.device for e in events if e.kind in DEVICE_KINDS}
    tracks = {(e.device, e.stream) if e.kind in DEVICE_KINDS else (e.pid, e.tid) for e in events}
    out = []
    for pid in sorted({pid for pid, _ in tracks}):
        on_device = pid in devices
        name, order = (f"GPU {pid}", 1 + pid) if on_device else (f"host (pid {pid})", 0)
        out += [_meta("process_name", pid, 0, name=name), _meta("process_sort_index", pid, 0, sort_index=order)]
        thread = "stream" if on_device else "thread"
        out += [_meta("thread_name", pid, tid, name=f"{thread} {tid}") for p, tid in sorted(tracks) if p == pid]
    return out


def _meta(what: str, pid: int, tid: int, **args: Any) -> str:
    return json.dumps({"ph": "M", "name": what, "pid": pid, "tid": tid, "args": args})


def _flows(events: list[Event]) -> list[str]:
    """An arrow from each runtime call to the first device work it launched (same correlation id),
    as Kineto draws them ("ac2g" flow events): Perfetto shows which launch ran which kernel."""
    first_work: dict[int, Event] = {}
    for e in events:
        if e.kind in DEVICE_KINDS and e.correlation and e.correlation not in first_work:
            first_work[e.correlation] = e
    out = []
    for e in events:
        work = first_work.pop(e.correlation, None) if e.kind == RUNTIME and e.correlation else None
        if work is not None:
            flow = f'"id":{e.correlation},"cat":"ac2g","name":"ac2g"'
            out.append(f'{{"ph":"s",{flow},"pid":{e.pid},"tid":{e.tid},"ts":{_ns_to_us_text(e.start_ns)}}}')
            out.append(
                f'{{"ph":"f",{flow},"bp":"e","pid":{work.device},"tid":{work.stream},"ts":{_ns_to_us_text(work.start_ns)}}}'
            )
    return out
