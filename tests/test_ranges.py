"""Ranges: record_function blocks and other annotations, by name (hand-built events; the shared
GPU traces against a sweep of their raw events written apart from the analysis)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal

import pytest
from builders import annotation, kernel, launch, op, step
from conftest import SHARED_TRACES

from pytest_opprof import load_trace
from pytest_opprof.analysis import analyze


def test_a_range_has_its_calls_wall_time_and_launched_device_time_per_step():
    """Two steps; `blk` holds a launch (a 5 us kernel) and, nested in it, another `blk` (a call
    whose time the outer one holds); `other` on another thread gets none of thread 1's launches;
    one `blk` outside the steps counts in the totals only; step markers, opprof's step sync and
    torch.compile's stages are not ranges."""
    events = []
    for i in range(2):
        base = i * 100
        events += [
            step(i + 1, base, 100),
            annotation("blk", base + 10, 40),
            annotation("blk", base + 15, 5),  # nested, same name
            op("aten::mm", base + 20, 20),
            launch(base + 21, corr=i + 1),
            kernel("gemm", base + 30, 5, corr=i + 1),
            annotation("other", base + 10, 30, tid=2),
            annotation("opprof::step_sync", base + 90, 5),
            annotation("dynamo_data: compile_id=0/0", base + 60, 5),
        ]
    events.append(annotation("blk", 300, 10))
    profile = analyze(events)
    # by time: device time for a range that launched device work (blk: 10 us), else wall (other: 60 us)
    assert [r.name for r in profile.ranges] == ["other", "blk"]
    other, blk = profile.ranges
    assert (blk.calls, blk.cpu_ns, blk.device_ns) == (5, 90_000, 10_000)
    assert blk.calls_per_step.samples == (2, 2) and blk.cpu_per_step.samples == (40_000, 40_000)
    assert blk.device_per_step.samples == (5000, 5000) and blk.on_device
    assert blk.time_per_step.samples == (5000, 5000)
    assert (other.calls, other.cpu_ns, other.device_ns, other.on_device) == (2, 60_000, 0, False)
    assert profile.to_dict()["ranges"][1] == {
        "name": "blk", "calls": 5, "cpu_ms": 0.09, "device_ms": 0.01, "on_device": True,
        "per_step": {
            "calls": {"median": 2, "min": 2, "max": 2, "samples": [2, 2]},
            "cpu_ms": {"median": 0.04, "min": 0.04, "max": 0.04, "samples": [0.04, 0.04]},
            "device_ms": {"median": 0.005, "min": 0.005, "max": 0.005, "samples": [0.005, 0.005]},
        },
    }  # fmt: skip
    assert "range (record_function)" in profile.table() and "blk " in profile.table()


def test_a_profile_without_ranges_has_an_empty_list_and_no_table():
    profile = analyze([step(1, 0, 10), op("aten::add", 1, 2)])
    assert profile.ranges == () and profile.to_dict()["ranges"] == []
    assert "range (record_function)" not in profile.table()


SHARED_GPU = ["gpu-sampled-steps.json.gz", "a100-alexnet.json.gz", "mi250-minitoy-train.json.gz"]


def independent_ranges(path) -> dict[str, tuple[int, int, int]]:
    """Per range name: calls, summed ns, and ns of device work whose launching runtime call started
    inside the range on its thread, computed from the raw events with Decimal; a range nested in
    one of its name on its thread is a call whose time the outer one holds."""
    with gzip.open(path, "rt") as f:
        events = [e for e in json.load(f, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]

    def ns(v) -> int:
        return int(Decimal(v) * 1000)

    device = defaultdict(int)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            device[e["args"].get("correlation")] += ns(e["dur"])
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    outer_end: dict[tuple, int] = {}
    annotations = [e for e in events if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")]
    for a in sorted(annotations, key=lambda a: (ns(a["ts"]), -ns(a["dur"]))):
        start, end = ns(a["ts"]), ns(a["ts"]) + ns(a["dur"])
        row = out[a["name"]]
        row[0] += 1
        key = (a["name"], a["pid"], a["tid"])
        if start < outer_end.get(key, start):
            continue  # nested in a range of its name: the outer one holds its time
        outer_end[key] = end
        row[1] += end - start
        row[2] += sum(
            device[r["args"].get("correlation")]
            for r in runtime
            if (r["pid"], r["tid"]) == (a["pid"], a["tid"]) and start <= ns(r["ts"]) < end
        )
    return {k: tuple(v) for k, v in out.items()}


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="the shared traces are not here")
@pytest.mark.parametrize("name", SHARED_GPU)
def test_ranges_of_shared_gpu_traces_agree_with_an_independent_sweep(name):
    path = SHARED_TRACES / name
    expected = independent_ranges(path)
    got = {r.name: (r.calls, r.cpu_ns, r.device_ns) for r in load_trace(path).ranges}
    assert got == expected and got
