"""The flake study: does the default verdict rule stay quiet on noise and catch real regressions?

Records baselines for a small example suite once, then reruns it N times (default 20):
idle, with a CPU hog beside it, with one op 2x slower (a twice-as-wide layer: same ops, more
work), and with one extra op per step. Prints false-failure and detection rates.
Targets: 0/N false failures, idle and under load; N/N detections of both injections.

    python bench/noise.py [--runs 20] [--keep DIR]
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

SUITE = """
import os
import torch

INJECT = os.environ.get("OPPROF_INJECT", "")


def mlp(width):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(), torch.nn.Linear(width, 256)).eval()


def infer(model, x):
    with torch.no_grad():
        y = model(x)
        if INJECT == "extra":
            y = y.clone()  # one extra op per step
        return y


def test_mlp(opprof):
    width = 2048 if INJECT == "slow" else 1024  # "slow": the same ops, twice the work in addmm
    opprof.run(infer, mlp(width), torch.randn(64, 256), warmup=3, steps=10)
    opprof.assert_op_count("aten::addmm", 2)


def test_small_mlp(opprof):
    opprof.run(infer, mlp(128), torch.randn(16, 256), warmup=3, steps=10)


def test_conv(opprof):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 16, 3, padding=1).eval()
    x = torch.randn(4, 8, 32, 32)
    with torch.no_grad():
        opprof.run(conv, x, warmup=3, steps=10)
"""


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
    return done.returncode, report


def failed_tests(report: dict) -> dict[str, list[str]]:
    """nodeid -> messages of its failing verdicts (only tests that failed), then the machine's
    state: CPU wait and whether it was measured twice."""
    found = {}
    for test in report["tests"]:
        if test["outcome"] != "passed":
            base = test.get("baseline") or {}
            messages = [v["message"] for v in base.get("verdicts", [])] or [test["outcome"]]
            found[test["nodeid"]] = [*messages, f"cpu_wait {test.get('cpu_wait')}, remeasured {base.get('remeasured')}"]
    return found


def passed_notes(report: dict, test: str) -> str:
    """Why a test that should have failed passed: its verdicts, CPU wait, re-measurement."""
    for t in report["tests"]:
        if test in t["nodeid"] and t["outcome"] == "passed":
            base = t.get("baseline") or {}
            verdicts = "; ".join(v["message"] for v in base.get("verdicts", [])) or "no verdict"
            return f"cpu_wait {t.get('cpu_wait')}, remeasured {base.get('remeasured')}: {verdicts}"
    return ""


def scenario(
    project: Path, name: str, runs: int, inject: str = "", with_hog: bool = False, misses: list | None = None
) -> list[dict]:
    results = []
    for _ in range(runs):
        proc = None
        if with_hog:
            proc = multiprocessing.Process(target=hog, args=(time.time() + 120,), daemon=True)
            proc.start()
        try:
            _, report = run_suite(project, inject, "--opprof")
        finally:
            if proc is not None:
                proc.terminate()
                proc.join()
        results.append(failed_tests(report))
        if misses is not None and "test_mlp" not in " ".join(results[-1]):
            misses.append(f"[{name}] test_mlp passed: {passed_notes(report, 'test_mlp')}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep", help="keep the example project in this folder")
    parser.add_argument(
        "--scenarios", default="idle,hog,slow,extra", help="comma list of idle, hog, slow, extra (default all)"
    )
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="opprof-noise-"))
    base.mkdir(parents=True, exist_ok=True)
    (base / "test_suite.py").write_text(textwrap.dedent(SUITE))
    code, _ = run_suite(base, "", "--opprof-update-baseline")
    if code != 0:
        print("recording the baselines failed", file=sys.stderr)
        return 2
    n = args.runs
    started = time.time()
    wanted = set(args.scenarios.split(","))
    misses: list[str] = []
    idle = scenario(base, "idle", n) if "idle" in wanted else []
    loaded = scenario(base, "hog", n, with_hog=True) if "hog" in wanted else []
    slow = scenario(base, "slow", n, inject="slow", misses=misses) if "slow" in wanted else []
    extra = scenario(base, "extra", n, inject="extra", misses=misses) if "extra" in wanted else []

    def false_failures(results: list[dict]) -> int:
        return sum(1 for r in results if r)

    def detected(results: list[dict], test: str, needle: str) -> int:
        return sum(1 for r in results if any(test in k and any(needle in m for m in v) for k, v in r.items()))

    print(f"{n} runs per scenario, {os.cpu_count()} cpus, {time.time() - started:.0f} s")
    if "idle" in wanted:
        print(f"  false failures, idle:              {false_failures(idle)}/{n}   (target 0/{n})")
    if "hog" in wanted:
        print(f"  false failures, with a CPU hog:    {false_failures(loaded)}/{n}   (target 0/{n})")
    if "slow" in wanted:
        print(
            f"  2x slower aten::addmm detected:    {detected(slow, 'test_mlp', 'aten::addmm')}/{n}   (target {n}/{n})"
        )
    if "extra" in wanted:
        print(
            f"  extra op per step detected:        {detected(extra, 'test_mlp', 'aten::clone')}/{n}   (target {n}/{n})"
        )
    if slow or extra:
        others = sum(len([k for k in r if "test_mlp" not in k]) for r in slow + extra)
        print(f"  other tests failed with injections: {others} (the extra op is in every test's model)")
    for label, results in (("idle", idle), ("hog", loaded)):
        for r in results:
            for test, messages in r.items():
                print(f"  [{label}] {test}: {'; '.join(messages)[:600]}")
    for miss in misses:
        print(f"  {miss[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
