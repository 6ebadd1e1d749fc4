"""A matmul reference that stalls alone beside busy loops: does a slower step wall still fail, and
does unchanged code still pass?

Records a small MLP `run()` on the quiet machine, then runs it N times beside two busy loops (on
2 cores the 2-thread matmul reference often stalls there, x45-81, while the one-thread dispatch
reference holds): with 2 ms of Python sleep per step (the step wall x57: target N/N failed), and
unchanged (target 0/N failed). Prints each run's outcome, CPU wait and both references' ratios
to the baseline's, and how many runs had the matmul reference stalled alone (past x4).

    python bench/stalled_reference.py [--runs 10] [--loops 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = """
import os, time, torch

def test_mlp(opprof):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    x = torch.randn(32, 64)

    def step():
        if os.environ.get("SLEEP"):
            time.sleep(float(os.environ["SLEEP"]))
        return m(x)

    with torch.no_grad():
        opprof.run(step, warmup=3, steps=10)
"""


def busy(until: float) -> None:
    while time.time() < until:
        pass


def pytest_run(project: Path, report: Path, *args: str, sleep: str = "") -> dict:
    env = {**os.environ, "SLEEP": sleep} if sleep else {k: v for k, v in os.environ.items() if k != "SLEEP"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--opprof-json={report}", *args]
    subprocess.run(command, cwd=project, env=env, capture_output=True, check=False)
    (test,) = json.loads(report.read_text())["tests"]
    return test


def runs_beside_loops(project: Path, runs: int, loops: int, sleep: str) -> list[tuple[str, float, float, float]]:
    """(outcome, cpu wait, matmul ratio, dispatch ratio) of each run beside `loops` busy loops."""
    base = json.loads(next((project / ".opprof").rglob("test_mlp.json")).read_text())
    procs = [multiprocessing.Process(target=busy, args=(time.time() + 3600,), daemon=True) for _ in range(loops)]
    for proc in procs:
        proc.start()
    try:
        found = []
        for i in range(runs):
            test = pytest_run(project, project / f"run{i}.json", "--opprof", sleep=sleep)
            profile = test["profile"]
            found.append(
                (
                    test["outcome"],
                    test["cpu_wait"] or 0.0,
                    profile["reference_ms"] / base["reference_ms"],
                    profile["dispatch_reference_ms"] / base["dispatch_reference_ms"],
                )
            )
        return found
    finally:
        for proc in procs:
            proc.terminate()
            proc.join()


def summary(name: str, found: list[tuple[str, float, float, float]], target: str) -> None:
    failed = sum(1 for outcome, *_ in found if outcome == "failed")
    stalled = [(o, m) for o, _, m, d in found if m > 4 and d <= 4]
    print(
        f"{name}: {failed}/{len(found)} failed (target {target}); {len(stalled)} with the matmul reference stalled alone"
    )
    for outcome, wait, matmul, dispatch in found:
        print(f"  {outcome:7} cpu_wait {wait:6.3f}  matmul x{matmul:6.2f}  dispatch x{dispatch:5.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--loops", type=int, default=2, help="busy loops beside each run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_mlp.py").write_text(TEST)
        (project / "pytest.ini").write_text("[pytest]\n")
        pytest_run(project, project / "record.json", "--opprof-update-baseline")
        print(f"{args.runs} runs each beside {args.loops} busy loops, {os.cpu_count()} cpus")
        summary("2 ms of Python per step", runs_beside_loops(project, args.runs, args.loops, "0.002"), "all")
        summary("unchanged", runs_beside_loops(project, args.runs, args.loops, ""), "0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
