"""How the device spent the capture, as an analysis stage: busy and idle, compute, communication
and memory work and their overlap, streams, how far the host ran ahead (queue), the device idle
while the host was busy, and the ops whose kernels are shorter than their launch calls.

Exact integer nanoseconds over all device events (kernels, memcpy, memset), like the rest.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..events import KERNEL, MEMORY_KINDS, Event
from .model import LaunchBound, StreamStats, Timeline, TimelineFigures

Interval = tuple[int, int]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def length(intervals: list[Interval]) -> int:
    return sum(end - start for start, end in intervals)


def intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Of two merged interval lists, the time both cover."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def clipped(intervals: list[Interval], window: Interval) -> list[Interval]:
    return [(max(s, window[0]), min(e, window[1])) for s, e in intervals if e > window[0] and s < window[1]]


def is_comm(name: str) -> bool:
    lowered = name.lower()
    return "nccl" in lowered or "rccl" in lowered


def quantiles(values: Sequence[int]) -> tuple[float, float, int] | None:
    """(median, p90, max); p90 by linear interpolation between closest ranks (inclusive)."""
    if not values:
        return None
    ordered = sorted(values)
    p90 = statistics.quantiles(ordered, n=10, method="inclusive")[8] if len(ordered) > 1 else float(ordered[0])
    return statistics.median(ordered), p90, ordered[-1]


def figures(device: Sequence[Event], queue: Sequence[int]) -> TimelineFigures:
    """The timeline figures of a set of device events (a capture, or one step)."""
    if not device:
        return TimelineFigures(0, 0, 0, 0, 0, 0, 0, quantiles(queue))
    everything = merged((d.start_ns, d.end_ns) for d in device)
    compute = merged((d.start_ns, d.end_ns) for d in device if d.kind == KERNEL and not is_comm(d.name))
    comm = merged((d.start_ns, d.end_ns) for d in device if d.kind == KERNEL and is_comm(d.name))
    memory = merged((d.start_ns, d.end_ns) for d in device if d.kind in MEMORY_KINDS)
    span = everything[-1][1] - everything[0][0]
    return TimelineFigures(
        span,
        length(everything),
        length(compute),
        length(comm),
        length(memory),
        length(intersection(compute, comm)),
        length(intersection(compute, memory)),
        quantiles(queue),
    )


def streams(device: Sequence[Event]) -> tuple[StreamStats, ...]:
    by_stream: dict[tuple[int, int], list[Event]] = {}
    for d in device:
        by_stream.setdefault((d.device, d.stream), []).append(d)
    return tuple(
        StreamStats(
            dev,
            stream,
            length(merged((d.start_ns, d.end_ns) for d in events)),
            sum(1 for d in events if d.kind == KERNEL),
            sum(1 for d in events if d.kind in MEMORY_KINDS),
        )
        for (dev, stream), events in sorted(by_stream.items())
    )


@dataclass(frozen=True, slots=True)
class Launches:
    """Per device event: its launching runtime call (-1 when none), as the timeline reads them."""

    call_of: list[int]  # per device event: index into runtime, -1 without one
    op_of_call: list[str | None]  # per runtime call: the name of the op around it


def timeline(
    device: Sequence[Event],
    runtime: Sequence[Event],
    launches: Launches,
    steps: Sequence[Interval],
    step_of: Callable[[int], int],
    host_busy: Sequence[list[Interval]],
) -> Timeline:
    """Stage: the capture's figures, per step (a device event belongs to the step of its launch
    call, else of its start), streams, host-bound time and launch-bound ops."""
    queue = [d.start_ns - runtime[j].start_ns for d, j in zip(device, launches.call_of) if d.kind == KERNEL and j >= 0]
    per_step_events: list[list[Event]] = [[] for _ in steps]
    per_step_queue: list[list[int]] = [[] for _ in steps]
    for d, j in zip(device, launches.call_of):
        s = step_of(runtime[j].start_ns if j >= 0 else d.start_ns)
        if s >= 0:
            per_step_events[s].append(d)
            if d.kind == KERNEL and j >= 0:
                per_step_queue[s].append(d.start_ns - runtime[j].start_ns)
    host_bound = _host_bound(device, steps, host_busy)
    wall = sum(e - s for s, e in steps)
    return Timeline(
        figures(device, queue),
        streams(device),
        tuple(figures(ev, q) for ev, q in zip(per_step_events, per_step_queue)),
        host_bound,
        host_bound / wall if device and wall else None,
        _launch_bound(device, runtime, launches),
    )


def _host_bound(device: Sequence[Event], steps: Sequence[Interval], host_busy: Sequence[list[Interval]]) -> int:
    """Per step: the time the host ran ops (top-level, any thread) while no device worked."""
    if not device:
        return 0
    busy = merged((d.start_ns, d.end_ns) for d in device)
    total = 0
    for window, host in zip(steps, host_busy):
        idle = _complement(clipped(busy, window), window)
        total += length(intersection(merged(host), idle))
    return total


def _complement(intervals: list[Interval], window: Interval) -> list[Interval]:
    out, cursor = [], window[0]
    for start, end in intervals:
        if start > cursor:
            out.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < window[1]:
        out.append((cursor, window[1]))
    return out


def _launch_bound(device: Sequence[Event], runtime: Sequence[Event], launches: Launches) -> tuple[LaunchBound, ...]:
    """Ops whose kernels take less time on the device (median) than the calls that launch them
    take on the host: a flood of tiny kernels the host cannot feed."""
    kernels: dict[str, list[int]] = {}
    calls: dict[str, dict[int, int]] = {}
    for d, j in zip(device, launches.call_of):
        if d.kind != KERNEL or j < 0 or (op := launches.op_of_call[j]) is None:
            continue
        kernels.setdefault(op, []).append(d.dur_ns)
        calls.setdefault(op, {})[j] = runtime[j].dur_ns
    found = []
    for op, durs in kernels.items():
        kernel_ns, launch_ns = statistics.median(durs), statistics.median(calls[op].values())
        if kernel_ns < launch_ns:
            found.append(LaunchBound(op, len(durs), kernel_ns, launch_ns))
    return tuple(sorted(found, key=lambda b: (-b.kernels, b.op)))
