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

from .events import ANNOTATION, DEVICE_KINDS, Event
from .files import write_atomic


def event_to_trace_json(event: Event) -> str:
    """One event as a Chrome-trace record, its times written exactly (us with ns decimals)."""
    args: dict[str, Any] = {}
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


def write_trace(path: str | os.PathLike[str], events: list[Event], metadata: dict[str, Any]) -> None:
    """Write events as a Chrome/Perfetto trace (.json, or .json.gz by the file name), atomically."""
    head = json.dumps({k: v for k, v in metadata.items() if k != "traceEvents"})[:-1]
    body = ",\n".join(event_to_trace_json(e) for e in events)
    sep = ", " if head != "{" else ""
    data = f'{head}{sep}"traceEvents": [\n{body}\n]}}\n'.encode()
    p = Path(path)
    write_atomic(p, gzip.compress(data) if p.name.endswith(".gz") else data)
