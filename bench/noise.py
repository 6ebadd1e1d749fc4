"""The flake study: does the gate stay quiet on noise and catch real regressions, in every capture mode?

Records baselines for a small example suite once on the quiet machine, then reruns it N times
(default 20) with a CPU-bound process beside it (2 cores: the tests share them with the hog):
unchanged code, a doubled hidden layer (same ops, 2x the FLOPs), one extra op per step, the same
code on one torch thread (torch.set_num_threads(1): same work, only time moves), and
`--opprof-update-baseline` on unchanged code; and without the hog: unchanged code (idle) and the
same ops with ~0.4 ms of Python per step outside them (python: only the step wall moves; pyhog:
the same beside the hog, where the CPU wait must not excuse more than it can explain). Every MLP test exists in each capture mode: run(),
capture(), the whole test call, and the marker. Prints, per mode:
false failures (target 0/N), doubled layers failed as `work` naming the FLOPs (target N/N), extra
ops failed as `structure` (target N/N), one-thread runs failed as `work` naming the threads (target
N/N), Python time outside the ops failed on time (idle, and beside the hog; how many on the `step wall`), and
re-recordings that changed any baseline byte (target 0/N).

    python bench/noise.py [--runs 20] [--keep DIR] [--scenarios hog,wide,extra,threads,rerecord,idle,python,pyhog]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

SUITE = """
import os

import pytest
import torch

INJECT = os.environ.get("OPPROF_INJECT", "")
WIDTH = 2048 if INJECT == "wide" else 1024  # "wide": the same ops, twice the work in both addmm
if INJECT == "threads":  # the same ops and work on one thread (x1.7 the addmm time here): a set_num_threads slip
    torch.set_num_threads(1)


def mlp(width=WIDTH):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(), torch.nn.Linear(width, 256)).eval()


def infer(model, x):
    with torch.no_grad():
        y = model(x)
        if INJECT == "extra":
            y = y.clone()  # one extra op per step
        if INJECT == "python":  # the same ops, ~0.4 ms of Python per step outside them (a slow hook)
            sum(i * i for i in range(20000))
        return y


def test_run_mlp(opprof):
    opprof.run(infer, mlp(), torch.randn(64, 256), warmup=3, steps=10)
    opprof.assert_op_count("aten::addmm", 2)


def test_run_small_mlp(opprof):
    opprof.run(infer, mlp(128), torch.randn(16, 256), warmup=3, steps=10)


def test_run_conv(opprof):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 16, 3, padding=1).eval()
    x = torch.randn(4, 8, 32, 32)
    with torch.no_grad():
        opprof.run(conv, x, warmup=3, steps=10)


def test_capture_mlp(opprof):
    model, x = mlp(), torch.randn(64, 256)
    infer(model, x)
    with opprof.capture():
        infer(model, x)


def test_whole_mlp(opprof):
    model, x = mlp(), torch.randn(64, 256)
    infer(model, x)


@pytest.mark.opprof
def test_marker_mlp():
    infer(mlp(), torch.randn(64, 256))
"""
MODES = {"run": "test_run_", "capture": "test_capture_", "whole call": "test_whole_", "marker": "test_marker_"}
MLP_TESTS = {
    "run": "test_run_mlp",
    "capture": "test_capture_mlp",
    "whole call": "test_whole_mlp",
    "marker": "test_marker_mlp",
}


def hog(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def run_suite(project: Path, inject: str = "", *flags: str) -> tuple[int, dict]:
    out = project / "report.json"
    env = dict(os.environ, OPPROF_INJECT=inject)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--opprof-json={out}", *flags],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    report = json.loads(out.read_text()) if out.exists() else {"tests": []}
    report["short_summary"] = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return done.returncode, report


def failed_tests(report: dict) -> dict[str, Any]:
    """nodeid -> (verdict kind, message) of each failed test's failing verdicts, then the
    machine's state: CPU wait and whether it was measured twice; under "inconclusive" the
    tests with an inconclusive time verdict (counted, not failures)."""
    found: dict[str, Any] = {}
    unsure = {
        t["nodeid"]: next(v["why"] for v in t["baseline"]["verdicts"] if v["status"] == "inconclusive")
        for t in report["tests"]
        if any(v["status"] == "inconclusive" for v in (t.get("baseline") or {}).get("verdicts", []))
    }
    for test in report["tests"]:
        if test["outcome"] != "passed":
            base = test.get("baseline") or {}
            failing = [v for v in base.get("verdicts", []) if v["status"] in ("regressed", "changed")]
            said = [line for line in report.get("short_summary", []) if test["nodeid"] in line]
            messages = [f"{v['kind']}: {v['message']}" for v in failing] or [test["outcome"], *said]
            found[test["nodeid"]] = [*messages, f"cpu_wait {test.get('cpu_wait')}, remeasured {base.get('remeasured')}"]
    if unsure:
        found["inconclusive"] = unsure
    return found


def with_hog(action):
    proc = multiprocessing.Process(target=hog, args=(time.time() + 300,), daemon=True)
    proc.start()
    try:
        return action()
    finally:
        proc.terminate()
        proc.join()


def scenario(project: Path, runs: int, inject: str = "", hogged: bool = True) -> list[dict]:
    results = []
    for _ in range(runs):
        _, report = (
            with_hog(lambda: run_suite(project, inject, "--opprof"))
            if hogged
            else run_suite(project, inject, "--opprof")
        )
        results.append(failed_tests(report))
    return results


def snapshot(project: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (project / ".opprof").rglob("*.json")}


def rerecord(project: Path, runs: int) -> list[int]:
    """Files changed by each hogged --opprof-update-baseline on unchanged code (restored after)."""
    before = snapshot(project)
    changed = []
    for _ in range(runs):
        with_hog(lambda: run_suite(project, "", "--opprof-update-baseline"))
        after = snapshot(project)
        changed.append(sum(1 for p, data in after.items() if before.get(p) != data) + len(set(before) - set(after)))
        for p, data in before.items():
            p.write_bytes(data)
    return changed


def detected(results: list[dict], test: str, kind: str, needle: str) -> int:
    return sum(
        1
        for r in results
        if any(k.endswith(test) and any(m.startswith(f"{kind}: ") and needle in m for m in v) for k, v in r.items())
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep", help="keep the example project in this folder")
    parser.add_argument(
        "--scenarios",
        default="hog,wide,extra,threads,rerecord",
        help="comma list of hog, wide, extra, threads, rerecord, idle, python, pyhog",
    )
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="opprof-noise-"))
    base.mkdir(parents=True, exist_ok=True)
    (base / "test_suite.py").write_text(textwrap.dedent(SUITE))
    code, _ = run_suite(base, "", "--opprof-update-baseline")
    if code != 0:
        print("recording the baselines failed", file=sys.stderr)
        return 2
    n, wanted, started = args.runs, set(args.scenarios.split(",")), time.time()
    results = {
        name: scenario(base, n, inject, name not in ("idle", "python"))
        for name, inject in (
            ("idle", ""),
            ("hog", ""),
            ("wide", "wide"),
            ("extra", "extra"),
            ("threads", "threads"),
            ("python", "python"),
            ("pyhog", "python"),
        )
        if name in wanted
    }
    changed = rerecord(base, n) if "rerecord" in wanted else []
    print(
        f"{n} runs per scenario, {os.cpu_count()} cpus, a CPU hog beside every run but idle's, {time.time() - started:.0f} s"
    )
    for mode, prefix in MODES.items():
        line = [f"  {mode:<11}"]
        for name in ("idle", "hog"):
            if name in results:
                false = sum(1 for r in results[name] if any(prefix in k for k in r if k != "inconclusive"))
                line.append(f"false failures {name} {false}/{n}")
        for name in ("idle", "hog"):  # visible noise: a line per test, though no failure
            if name in results:
                unsure = sum(1 for r in results[name] if any(prefix in k for k in r.get("inconclusive", {})))
                line.append(f"inconclusive time {name} {unsure}/{n}")
        if "wide" in results:
            line.append(
                f"doubled layer as work {detected(results['wide'], MLP_TESTS[mode], 'work', 'aten::addmm: 2x the FLOPs')}/{n}"
            )
        if "extra" in results:
            line.append(
                f"extra op as structure {detected(results['extra'], MLP_TESTS[mode], 'structure', '+ aten::clone')}/{n}"
            )
        if "threads" in results:
            line.append(
                f"one thread as work {detected(results['threads'], MLP_TESTS[mode], 'work', 'torch threads ')}/{n}"
            )
        if "python" in results:
            timed = detected(results["python"], MLP_TESTS[mode], "time", "")
            wall = detected(results["python"], MLP_TESTS[mode], "time", "step wall: ")
            line.append(f"python failed on time (idle) {timed}/{n}, {wall} on the step wall")
        if "pyhog" in results:
            timed = detected(results["pyhog"], MLP_TESTS[mode], "time", "")
            wall = detected(results["pyhog"], MLP_TESTS[mode], "time", "step wall: ")
            line.append(f"python failed on time beside the hog {timed}/{n}, {wall} on the step wall")
        print("  ".join(line))
    if changed:
        print(
            f"  re-recording unchanged code under the hog: {sum(1 for c in changed if c)}/{n} runs changed a baseline file ({sum(changed)} files in all; target 0)"
        )
    print_details(results)
    return 0


def print_details(results: dict[str, list[dict]]) -> None:
    """What unchanged code's runs said (failures, and why a time was inconclusive), and why a run
    the Python slowdown did not fail passed."""
    for name in ("idle", "hog"):
        for r in results.get(name, []):
            for test, messages in r.items():
                if test != "inconclusive":
                    print(f"  [{name}] {test}: {'; '.join(messages)[:600]}")
            for test, why in r.get("inconclusive", {}).items():  # unchanged code: why it was not judged
                print(f"  [{name}] {test} time inconclusive: {why[:300]}")
    for r in results.get("python", []) + results.get("pyhog", []):  # a run the slowdown did not fail: why
        for test, why in r.get("inconclusive", {}).items():
            if test.endswith(MLP_TESTS["run"]) and test not in r:
                print(f"  [python] {test} passed, time inconclusive: {why}")


if __name__ == "__main__":
    sys.exit(main())
