"""Sums of raw trace events computed without any code of ours, to check the analysis against."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path


def stable(name: str) -> str:
    """torch.compile's names without their process-dependent parts (frame/compile ids, hashes)."""
    if name.startswith("Torch-Compiled Region: "):
        return "Torch-Compiled Region"
    if name.startswith("## Call CompiledFxGraph ") and name.endswith(" ##"):
        return "CompiledFxGraph"
    return name


def independent_sums(path: Path) -> dict:
    """Sums of the raw events, parsed with Decimal and no code of ours."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)

    def ns(v) -> int:
        return int(Decimal(v) * 1000)

    sums: dict = {
        "cpu_ops": Counter(),
        "cpu_ops_torch_rule": torch_rule_counts(doc["traceEvents"]),
        "kernels": Counter(),
        "kernel_ns": 0,
        "memory": Counter(),
        "memory_ns": 0,
        "bytes": 0,
    }
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "cpu_op" and not e["name"].startswith("ProfilerStep#"):
            sums["cpu_ops"][stable(e["name"])] += 1
        elif cat == "kernel":
            sums["kernels"][e["name"]] += 1
            sums["kernel_ns"] += ns(e["dur"])
        elif cat in ("gpu_memcpy", "gpu_memset"):
            sums["memory"][e["name"]] += 1
            sums["memory_ns"] += ns(e["dur"])
            sums["bytes"] += e["args"].get("bytes", 0) or launched_size(doc, e["args"].get("correlation"))
    return sums


def launched_size(doc: dict, correlation: int | None) -> int:
    """The `size` of the runtime call that launched a copy (ROCm's copies carry no bytes)."""
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        if e.get("cat") == "cuda_runtime" and args.get("correlation") == correlation and "size" in args:
            return int(args["size"])
    return 0


def torch_rule_counts(events: list) -> Counter:
    """Calls per op name as torch's key_averages() counts them: an op whose only CPU-op child has
    the same name is one call. A naive tree (each op's parent is the innermost earlier op on its
    thread that encloses it), written apart from the analysis, with Decimal times."""
    ops = [
        (e.get("pid"), e.get("tid"), Decimal(str(e["ts"])), Decimal(str(e.get("dur", 0))), stable(e["name"]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and not e["name"].startswith("ProfilerStep#")
    ]
    ops.sort(key=lambda o: (o[0], o[1], o[2], -o[3]))
    parent = [None] * len(ops)
    for i, (pid, tid, start, dur, _) in enumerate(ops):
        for j in range(i - 1, -1, -1):
            p = ops[j]
            if (p[0], p[1]) != (pid, tid):
                break
            if p[2] <= start and start + dur <= p[2] + p[3]:
                parent[i] = j
                break
    children = Counter(p for p in parent if p is not None)
    dropped = {i for i, p in enumerate(parent) if p is not None and children[p] == 1 and ops[p][4] == ops[i][4]}
    return Counter(o[4] for i, o in enumerate(ops) if i not in dropped)


RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime", "privateuse1_runtime", "privateuse1_driver")


def _covered(intervals: list, *wanted: str) -> Decimal:
    """Time during which every kind in `wanted` has an interval open: a sweep over start/end
    points with a counter per kind (a different method from the analysis's merge)."""
    points = []
    for start, end, kind in intervals:
        if kind in wanted:
            points += [(start, 1, kind), (end, -1, kind)]
    points.sort(key=lambda p: (p[0], p[1]))
    open_ = Counter()
    total, last = Decimal(0), None
    for t, delta, kind in points:
        if last is not None and all(open_[k] > 0 for k in wanted):
            total += t - last
        open_[kind] += delta
        last = t
    return total


def independent_timeline(path: Path) -> dict:
    """The timeline figures of a trace from its raw events, with Decimal microseconds."""
    with gzip.open(path, "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    device, launches = [], {}
    for e in events:
        if e.get("ph") != "X":
            continue
        start, end = Decimal(str(e["ts"])), Decimal(str(e["ts"])) + Decimal(str(e.get("dur", 0)))
        cat = e.get("cat")
        where = e.get("args", {}).get("device", e.get("pid"))
        if cat == "kernel":
            name = e["name"].lower()
            kind = "comm" if "nccl" in name or "rccl" in name else "compute"
            device.append((start, end, kind, e.get("args", {}).get("correlation"), where))
        elif cat in ("gpu_memcpy", "gpu_memset"):
            device.append((start, end, "memory", None, where))
        elif cat in RUNTIME_CATS and e.get("args", {}).get("correlation"):
            launches[e["args"]["correlation"]] = start
    first: dict = {}  # correlation -> its first kernel's start (a graph launch has many)
    for s, _, k, c, _ in sorted(device, key=lambda d: d[0]):
        if k != "memory" and c in launches and c not in first:
            first[c] = s
    queue = sorted(s - launches[c] for c, s in first.items())
    ms = Decimal(1000)

    def per_device(*wanted: str) -> Decimal:  # each device its own timeline, summed
        total = Decimal(0)
        for where in {d[4] for d in device}:
            mine = [d for d in device if d[4] == where]
            spans = [(s, t, "any") for s, t, _, _, _ in mine] + [(s, t, k) for s, t, k, _, _ in mine]
            total += _covered(spans, *wanted)
        return total

    def span() -> Decimal:
        ends = {}
        for s, t, _, _, where in device:
            lo, hi = ends.get(where, (s, t))
            ends[where] = (min(lo, s), max(hi, t))
        return sum((hi - lo for lo, hi in ends.values()), Decimal(0))

    return {
        "span_ms": span() / ms,
        "busy_ms": per_device("any") / ms,
        "compute_ms": per_device("compute") / ms,
        "comm_ms": per_device("comm") / ms,
        "memory_ms": per_device("memory") / ms,
        "compute_comm_overlap_ms": per_device("compute", "comm") / ms,
        "compute_memory_overlap_ms": per_device("compute", "memory") / ms,
        "queue_max_ms": queue[-1] / ms if queue else None,
        "queue_median_ms": (queue[len(queue) // 2] + queue[(len(queue) - 1) // 2]) / 2 / ms if queue else None,
    }
