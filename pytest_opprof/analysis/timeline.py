"""How the device spent the capture, as an analysis stage: busy and idle, compute, communication
and memory work and their overlap, streams, how far the host ran ahead (queue), the device idle
while the host was busy, and the ops whose kernels are shorter than their launch calls.

Exact integer nanoseconds over all device events (kernels, memcpy, memset), like the rest.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..events import KERNEL, MEMORY_KINDS, Event
from .model import Interval, LaunchBound, StreamStats, Timeline, TimelineFigures, intersection, length, merged

_COMM = ("nccl", "rccl")
# and their per-thread default stream twins (`_ptsz`; HIP's `_spt`)
GRAPH_LAUNCHES = frozenset(
    {
        "cudaGraphLaunch",
        "hipGraphLaunch",
        "cuGraphLaunch",
        "cudaGraphLaunch_ptsz",
        "cuGraphLaunch_ptsz",
        "hipGraphLaunch_spt",
    }
)


def quantiles(values: Sequence[int]) -> tuple[float, float, int] | None:
    """(median, p90, max); p90 by linear interpolation between closest ranks (inclusive)."""
    if not values:
        return None
    ordered = sorted(values)
    p90 = statistics.quantiles(ordered, n=10, method="inclusive")[8] if len(ordered) > 1 else float(ordered[0])
    return statistics.median(ordered), p90, ordered[-1]


def figures(device: Sequence[Event], queue: Sequence[int], comm: set[str]) -> TimelineFigures:
    """The timeline figures of a set of device events sorted by start (a capture, or one step):
    each device's own, summed over devices (two GPUs busy at once are two busy GPUs; compute on
    one and communication on another do not overlap)."""
    by_device: dict[int, list[Event]] = {}
    for d in device:
        by_device.setdefault(d.device, []).append(d)
    parts = [_device_figures(events, comm) for events in by_device.values()]
    span, busy, compute, comms, memory, with_comm, with_memory = (sum(p[k] for p in parts) for k in range(7))
    return TimelineFigures(span, busy, compute, comms, memory, with_comm, with_memory, quantiles(queue))


def _device_figures(device: list[Event], comm: set[str]) -> tuple[int, ...]:
    spans = [(d.start_ns, d.end_ns) for d in device]
    everything = merged(spans, presorted=True)
    kernel = [d.kind == KERNEL for d in device]
    is_comm = [k and d.name in comm for k, d in zip(kernel, device)] if comm else [False] * len(device)
    if all(kernel) and not any(is_comm):  # only compute kernels (most captures): no more unions
        compute, comms, memory = everything, [], []
    else:
        compute = merged((s for s, k, c in zip(spans, kernel, is_comm) if k and not c), presorted=True)
        comms = merged((s for s, c in zip(spans, is_comm) if c), presorted=True)
        memory = merged((s for s, d in zip(spans, device) if d.kind in MEMORY_KINDS), presorted=True)
    return (
        everything[-1][1] - everything[0][0],
        length(everything),
        length(compute),
        length(comms),
        length(memory),
        length(intersection(compute, comms)),
        length(intersection(compute, memory)),
    )


def streams(device: Sequence[Event]) -> tuple[StreamStats, ...]:
    by_stream: dict[tuple[int, int], list[Event]] = {}
    for d in device:
        by_stream.setdefault((d.device, d.stream), []).append(d)
    return tuple(
        StreamStats(
            dev,
            stream,
            length(merged(((d.start_ns, d.end_ns) for d in events), presorted=True)),
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
    if not device:  # a CPU capture: the same fields, all zero, at no cost per step
        empty = TimelineFigures(0, 0, 0, 0, 0, 0, 0, None)
        return Timeline(empty, (), (empty,) * len(steps), 0, None, ())
    order = sorted(range(len(device)), key=lambda i: device[i].start_ns)  # one sort serves every union
    events = [device[i] for i in order]
    call_of = [launches.call_of[i] for i in order]
    kernel_names = {d.name for d in events if d.kind == KERNEL}
    comm = {name for name in kernel_names if any(c in name.lower() for c in _COMM)}
    first_kernel = _first_kernel_of_each_call(events, call_of)
    step_of_call = {j: step_of(runtime[j].start_ns) for j in set(call_of) if j >= 0}
    per_step_events: list[list[Event]] = [[] for _ in steps]
    per_step_queue: list[list[int]] = [[] for _ in steps]
    for d, j in zip(events, call_of):
        s = step_of_call[j] if j >= 0 else step_of(d.start_ns)
        if s >= 0:
            per_step_events[s].append(d)
    for j, start in first_kernel.items():
        if (s := step_of_call[j]) >= 0:
            per_step_queue[s].append(start - runtime[j].start_ns)
    queue = [start - runtime[j].start_ns for j, start in first_kernel.items()]
    host_bound = _host_bound(events, host_busy)
    wall = sum(e - s for s, e in steps)
    return Timeline(
        figures(events, queue, comm),
        streams(events),
        tuple(figures(ev, q, comm) for ev, q in zip(per_step_events, per_step_queue)),
        host_bound,
        host_bound / wall if device and wall else None,
        _launch_bound(events, call_of, runtime, launches.op_of_call),
    )


def _first_kernel_of_each_call(events: list[Event], call_of: list[int]) -> dict[int, int]:
    """Launch call -> the start of its first kernel: how far ahead the host ran. A graph launch
    has many kernels; the queue counts it once, by its first."""
    first: dict[int, int] = {}
    for d, j in zip(events, call_of):
        if d.kind == KERNEL and j >= 0 and j not in first:
            first[j] = d.start_ns  # events are in start order
    return first


def _host_bound(device: list[Event], host_busy: Sequence[list[Interval]]) -> int:
    """The time the host ran ops (top-level, any thread, inside the steps) while no device
    worked: the host's busy time minus the part a device was busy too."""
    if not device:
        return 0
    host = merged(interval for step in host_busy for interval in step)
    busy = merged(((d.start_ns, d.end_ns) for d in device), presorted=True)
    return length(host) - length(intersection(host, busy))


LAUNCH_LOAD_NS = 1_000_000  # a launch this long loaded a module or waited for the queue (launches take ~5-20 us)


def _launch_bound(
    events: list[Event], call_of: list[int], runtime: Sequence[Event], op_of_call: list[str | None]
) -> tuple[LaunchBound, ...]:
    """Ops whose kernels take less time on the device (median) than the calls that launch them
    take on the host: a flood of tiny kernels the host cannot feed. A graph launch is left out:
    its one call launches many kernels, which is the cure, not the disease. So is a launch past
    LAUNCH_LOAD_NS, which loaded its kernel's module (CUDA's lazy loading, a first use) or waited
    for a full queue, no launch cost: a real MI250 trace's `aten::add_`, launched in 12 us and once
    in 6.5 ms, read launch-bound at their mean (the median of two)."""
    kernels: dict[str, list[int]] = {}
    calls: dict[str, dict[int, int]] = {}
    for d, j in zip(events, call_of):
        if d.kind != KERNEL or j < 0 or (op := op_of_call[j]) is None or runtime[j].name in GRAPH_LAUNCHES:
            continue
        kernels.setdefault(op, []).append(d.dur_ns)
        if runtime[j].dur_ns <= LAUNCH_LOAD_NS:
            calls.setdefault(op, {})[j] = runtime[j].dur_ns
    found = []
    for op, durs in kernels.items():
        if op not in calls:
            continue
        kernel_ns, launch_ns = statistics.median(durs), statistics.median_low(calls[op].values())
        if kernel_ns < launch_ns:
            found.append(LaunchBound(op, len(durs), kernel_ns, launch_ns))
    return tuple(sorted(found, key=lambda b: (-b.kernels, b.op)))
