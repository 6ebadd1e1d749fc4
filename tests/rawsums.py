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
            sums["bytes"] += e["args"].get("bytes", 0)
    return sums


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
