"""What judging against the baseline costs a test in a comparing run: `run()` builds its
measurement's document, reads the test's baseline and judges one against the other before it
returns (so that a suspected time's confirmations run in the test's own context), and the
baseline step, after the body, gives that decision (before, it read and judged there). Runs `pytest --opprof` on
a project with committed baselines (the examples by default) with a plugin that times both and
each test's call, and prints their cost and its share of the call. `--code DIR` runs another
version of pytest_opprof (a folder holding its `pytest_opprof/`) the same way, in the same run.
`--gc-off` turns Python's garbage collector off in the measured run: a collection lands in one
test's judgement or another's as the run's allocations fall (one test read x2 by that alone).

    python bench/judge_cost.py [--project conftest_examples] [--code /tmp/old] [--gc-off]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TIMING_PLUGIN = """
import json, os, time
import pytest
import importlib

try:  # where the judging steps are: plugin/judge.py, or plugin.py in versions before the split
    plugin = importlib.import_module("pytest_opprof.plugin.judge")
except ImportError:
    plugin = importlib.import_module("pytest_opprof.plugin")

JUDGED, CALLS = [], {}


def timed(name):
    step = getattr(plugin, name, None)
    if step is None:  # an older version: no judgement in run()
        return

    def timed_step(item, *args):
        start = time.perf_counter()
        try:
            return step(item, *args)
        finally:
            JUDGED.append((item.nodeid, (time.perf_counter() - start) * 1e3))

    setattr(plugin, name, timed_step)


timed("_judge_in_run")
timed("_baseline_step")


def pytest_runtest_logreport(report):
    if report.when == "call":
        CALLS[report.nodeid] = report.duration * 1e3


def pytest_unconfigure(config):
    with open(os.environ["JUDGE_COST_OUT"], "w") as out:
        json.dump({"judged": JUDGED, "calls": CALLS}, out)
"""


def measured(project: Path, code: Path | None, gc_off: bool = False) -> dict[str, object]:
    """The judgements' and calls' times of one `pytest --opprof` run of `project`."""
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "judge_timing.py").write_text(("import gc\ngc.disable()\n" if gc_off else "") + TIMING_PLUGIN)
        out = Path(folder, "out.json")
        paths = [folder, *([str(code.resolve())] if code else []), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "JUDGE_COST_OUT": str(out)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "judge_timing", "--opprof"]
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
        if not out.is_file():
            raise SystemExit(
                f"pytest wrote no timings (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        return json.loads(out.read_text())


def summary(project: Path, code: Path | None, gc_off: bool) -> str:
    """One line: the judging's cost per test and its share of the test call."""
    result = measured(project, code, gc_off)
    calls: dict[str, float] = result["calls"]  # type: ignore[assignment]
    per_test: dict[str, float] = {}
    for nodeid, ms in result["judged"]:  # type: ignore[union-attr]
        per_test[nodeid] = per_test.get(nodeid, 0.0) + ms
    if not per_test:
        raise SystemExit(f"no test was judged in {project}: give --project a project with baselines")
    costs = sorted(per_test.values())
    shares = sorted(ms / calls[nodeid] for nodeid, ms in per_test.items() if calls.get(nodeid))
    return (
        f"{len(costs)} tests judged: median {statistics.median(costs):.2f} ms, max {costs[-1]:.2f} ms; "
        f"{statistics.median(shares):.2%} of the test call (median), {shares[-1]:.2%} (max)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=Path("conftest_examples"))
    parser.add_argument("--code", type=Path, help="a folder holding another version's pytest_opprof/")
    parser.add_argument("--gc-off", action="store_true", help="no garbage collection in the measured runs")
    args = parser.parse_args()
    if args.code is not None and not (args.code / "pytest_opprof").is_dir():
        raise SystemExit(f"--code {args.code}: no pytest_opprof/ folder there; give the folder that holds it")
    print(f"this version:  {summary(args.project, None, args.gc_off)}")
    if args.code is not None:
        print(f"{args.code}: {summary(args.project, args.code, args.gc_off)}")


if __name__ == "__main__":
    main()
