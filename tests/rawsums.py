"""Sums of raw trace events computed without any code of ours, to check the analysis against."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path


def independent_sums(path: Path) -> dict:
    """Sums of the raw events, parsed with Decimal and no code of ours."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)

    def ns(v) -> int:
        return int(Decimal(v) * 1000)

    sums: dict = {
        "cpu_ops": Counter(),
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
            sums["cpu_ops"][e["name"]] += 1
        elif cat == "kernel":
            sums["kernels"][e["name"]] += 1
            sums["kernel_ns"] += ns(e["dur"])
        elif cat in ("gpu_memcpy", "gpu_memset"):
            sums["memory"][e["name"]] += 1
            sums["memory_ns"] += ns(e["dur"])
            sums["bytes"] += e["args"].get("bytes", 0)
    return sums
