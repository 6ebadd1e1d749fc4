"""What --opprof costs a measured test beyond its profiled steps, and what recording work costs.

1. End to end: a suite of K tests, each `opprof.run(infer, mlp, x, warmup=3, steps=10)`, run
   without --opprof (run() calls fn once) and with --opprof against recorded baselines. Per test:
   (time with - time without) - (its profiled steps' wall time) - (its 2 other warm-up calls).
   Target: <= 0.15 s.
2. In process, the parts: the machine references around a capture, the untimed signature step,
   the judgement (baseline document + compare + decide; target ~20 ms), and what record_shapes +
   with_flops cost a profiled step (ratio and per op).

    python bench/overhead.py [--tests 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pytest_opprof.baseline import baseline_from_profile
from pytest_opprof.capture import _profiling, _signature_step, _step, measure
from pytest_opprof.decide import Measurement, decide
from pytest_opprof.kineto import from_profiler
from pytest_opprof.references import take_references
from pytest_opprof.verdicts import Machine, Rule

SUITE = """
import torch

torch.manual_seed(0)
MODEL = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).eval()
X = torch.randn(64, 256)


def infer(model, x):
    with torch.no_grad():
        return model(x)

"""
TEST = """
def test_{i}(opprof):
    opprof.run(infer, MODEL, X, warmup=3, steps=10)
"""


def best(fn: Callable[[], Any], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def junit_times(path: Path) -> dict[str, float]:
    return {case.get("name"): float(case.get("time")) for case in ET.parse(path).iter("testcase")}


def pytest_run(project: Path, *flags: str) -> float:
    """The pytest process's wall time, in seconds."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags],
        cwd=project,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def end_to_end(tests: int, fn_s: float) -> tuple[list[float], float]:
    """What --opprof adds to each test beyond its profiled steps, and to the whole run beyond
    its tests' additions and steps (torch.profiler's first start, the reports)."""
    project = Path(tempfile.mkdtemp(prefix="opprof-overhead-"))
    (project / "test_suite.py").write_text(textwrap.dedent(SUITE) + "".join(TEST.format(i=i) for i in range(tests)))
    pytest_run(project, "--opprof-update-baseline")
    off_run = pytest_run(project, f"--junitxml={project / 'off.xml'}")
    on_flags = ("--opprof", f"--opprof-json={project / 'on.json'}", f"--junitxml={project / 'on.xml'}")
    on_run = pytest_run(project, *on_flags)
    off, on = junit_times(project / "off.xml"), junit_times(project / "on.xml")
    walls = {
        t["nodeid"].split("::")[-1]: t["profile"]["wall_ms"] / 1e3
        for t in json.loads((project / "on.json").read_text())["tests"]
    }
    # off: run() called fn once; on: 2 warm-up calls, the signature step, 10 profiled steps
    added = [on[name] - off[name] - walls[name] - 2 * fn_s + fn_s for name in on]
    return added, on_run - off_run - sum(on[name] - off[name] for name in on)


def parts() -> dict[str, float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).eval()
    x = torch.randn(64, 256)

    def infer() -> Any:
        with torch.no_grad():
            return model(x)

    for _ in range(5):
        infer()
    fn_s = best(infer, 20)
    profile = measure(infer, warmup=3, steps=10)
    doc = baseline_from_profile(profile, "t.py::t", "cpu-x86_64", {})

    def judgement() -> None:
        current = Measurement(baseline_from_profile(profile, "t.py::t", "cpu-x86_64", {}), Machine(0.0))
        decide(current, doc, Rule(), None)

    def profiled_step(work: bool) -> float:
        with _profiling(torch, work) as (prof, cuda):
            start = time.perf_counter()
            for n in range(1, 11):
                with _step(torch, n, cuda):
                    infer()
            elapsed = (time.perf_counter() - start) / 10
        from_profiler(prof)
        return elapsed

    plain_step = min(profiled_step(False) for _ in range(5))
    work_step = min(profiled_step(True) for _ in range(5))
    ops_per_step = sum(op.calls for op in profile.ops) / profile.steps
    return {
        "fn_s": fn_s,
        "references_s": best(lambda: take_references(torch)),
        "signature_step_s": best(lambda: _signature_step(torch, infer, (), {})),
        "judgement_s": best(judgement),
        "plain_step_s": plain_step,
        "work_step_s": work_step,
        "ops_per_step": ops_per_step,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=10)
    args = parser.parse_args()
    p = parts()
    added, run_level = end_to_end(args.tests, p["fn_s"])
    ms = 1e3
    print(f"{os.cpu_count()} cpus, torch {torch.__version__}, MLP 256-1024-256 on a [64, 256] batch")
    first, rest = added[0], added[1:] or added
    print(
        f"  --opprof adds per measured test, beyond its profiled steps: median {statistics.median(rest):.3f} s, "
        f"max {max(rest):.3f} s over the {len(rest)} tests after the first   (target <= 0.15 s)"
    )
    print(f"  the first measured test: {first:.3f} s")
    print(
        f"  the run beyond its tests (torch.profiler's one-time start, paid before the first test; the reports): "
        f"{run_level:.3f} s"
    )
    rule_ms = 2 * p["references_s"] * ms + p["judgement_s"] * ms
    print(
        f"  the time rule's own cost per run() test (references twice + judgement): {rule_ms:.1f} ms   (target ~20 ms)"
    )
    print(f"  the MLP call unprofiled: {p['fn_s'] * ms:.2f} ms")
    print(
        f"  machine references (matmul + dispatch + small matmul), taken twice per run(): {p['references_s'] * ms:.1f} ms each time"
    )
    print(
        f"  untimed signature step (one call with record_shapes + with_flops, analysed): {p['signature_step_s'] * ms:.1f} ms"
    )
    print(f"  judgement (baseline document + compare + decide): {p['judgement_s'] * ms:.2f} ms")
    print(
        f"  a profiled step: {p['plain_step_s'] * ms:.3f} ms plain, {p['work_step_s'] * ms:.3f} ms with record_shapes + "
        f"with_flops (x{p['work_step_s'] / p['plain_step_s']:.2f}; "
        f"+{(p['work_step_s'] - p['plain_step_s']) / p['ops_per_step'] * 1e6:.1f} us per op, {p['ops_per_step']:.0f} ops): "
        "taken once per run(), never in a timed step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
