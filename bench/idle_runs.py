"""False time failures of unchanged code on an idle machine, over fresh recordings.

Writes a small project (a CNN, an MLP, a transformer layer, a top-k decode twice, a CNN training
step; each `opprof.run(fn, warmup=3, steps=10)`) into a temporary folder. Then, per round: records
its baselines afresh (`pytest --opprof-update-baseline`), and runs `pytest --opprof` with time
among the failing checks (`-o opprof_fail_on=structure,work,time`) several times, 1 s of idle
before each. A baseline is one recording; a run is one draw of the machine's state, so both are
repeated. Prints, over all runs: runs with a failure, failed tests, tests whose first measurement
was suspected of a time change (measured again), tests with an inconclusive time verdict and the
commonest reasons, the seconds spent recording and running, and what the recorded ranges cost:
per op of 0.05 ms or more, the slowdown of its fastest recorded time past which it fails, with
its range and judged without one (the floor counted), as quantiles over every op of every
recording.

    python bench/idle_runs.py [--rounds 8] [--runs 4] [--code DIR]

`--code DIR` puts DIR first on PYTHONPATH: a copy of another version's `pytest_opprof` folder's
parent, to measure it on the same machine in the same way.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROJECT = """
import pytest
import torch

torch.manual_seed(0)


def cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10),
    ).eval()


@torch.no_grad()
def test_cnn(opprof):
    opprof.run(cnn(), torch.randn(16, 3, 32, 32), warmup=3, steps=10)


@torch.no_grad()
def test_mlp(opprof):
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).eval()
    opprof.run(model, torch.randn(64, 256), warmup=3, steps=10)


@torch.no_grad()
def test_transformer(opprof):
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True).eval()
    opprof.run(layer, torch.randn(8, 32, 128), warmup=3, steps=10)


@pytest.mark.parametrize("k", [8, 64])
@torch.no_grad()
def test_topk(opprof, k):
    logits = torch.randn(32, 32000)
    opprof.run(lambda: torch.topk(torch.softmax(logits, -1), k), warmup=3, steps=10)


def test_train_step(opprof):
    model = cnn().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    opprof.run(step, warmup=3, steps=10)
"""


def pytest_run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)


def one_run(project: Path, env: dict[str, str], totals: collections.Counter, reasons: collections.Counter) -> list[str]:
    """One idle run against the recorded baselines; the failed tests' time lines."""
    out = project / "run.json"
    pytest_run(project, env, "--opprof", "-o", "opprof_fail_on=structure,work,time", f"--opprof-json={out}")
    failed = []
    for test in json.loads(out.read_text())["tests"]:
        baseline = test.get("baseline") or {}
        totals["tests"] += 1
        totals["suspected"] += baseline.get("measurements", 1) > 1
        inconclusive = [v for v in baseline.get("verdicts", []) if v.get("status") == "inconclusive"]
        totals["inconclusive tests"] += bool(inconclusive)
        for verdict in inconclusive:
            reasons[" ".join((verdict.get("why") or "").split()[:6])] += 1
        if test["outcome"] == "failed":
            failed += [v["message"] for v in baseline.get("verdicts", []) if v.get("status") == "regressed"]
            totals["failed tests"] += 1
    totals["runs"] += 1
    totals["runs with a failure"] += bool(failed)
    return failed


def widened_limits(project: Path, tolerance: float = 0.2, floor_ms: float = 0.05) -> list[tuple[float, float]]:
    """Per op of each baseline file with a recorded range, the slowdown of its fastest recorded
    time beyond which it fails: with the range (past its slowest, plus the tolerance or the
    floor) and without (past the written time, plus the tolerance or the floor)."""

    def limit(ms: float) -> float:
        return ms + max(floor_ms, tolerance * ms)

    limits = []
    for path in (project / ".opprof").rglob("*.json"):
        for op in json.loads(path.read_text())["ops"].values():
            samples = op["device_ms"] if op["on_device"] else op["cpu_ms"]
            span = op.get("recorded_range_ms")
            if span and span[0] >= floor_ms:  # below the floor, the floor sets the limit
                limits.append((limit(span[1]) / span[0], limit(min(samples)) / span[0]))
    return limits


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    at = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.9)]
    return f"median x{at[0]:.2f}, p90 x{at[1]:.2f}, max x{ordered[-1]:.2f} over {len(ordered)} op recordings"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="fresh recordings")
    parser.add_argument("--runs", type=int, default=4, help="idle runs against each recording")
    parser.add_argument("--code", help="a folder holding another version's pytest_opprof, first on PYTHONPATH")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.code, env.get("PYTHONPATH")]))
    totals: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    limits: list[tuple[float, float]] = []
    seconds = {"recording": 0.0, "running": 0.0}
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "test_models.py").write_text(textwrap.dedent(PROJECT))
        for round_ in range(args.rounds):
            shutil.rmtree(project / ".opprof", ignore_errors=True)
            began = time.perf_counter()
            pytest_run(project, env, "--opprof-update-baseline")
            seconds["recording"] += time.perf_counter() - began
            limits += widened_limits(project)
            for _ in range(args.runs):
                time.sleep(1.0)
                began = time.perf_counter()
                for line in one_run(project, env, totals, reasons):
                    print(f"  round {round_ + 1}: failed: {line}", flush=True)
                seconds["running"] += time.perf_counter() - began
    print(f"runs with a failure: {totals['runs with a failure']} of {totals['runs']}")
    print(f"failed tests: {totals['failed tests']} of {totals['tests']} (test runs)")
    print(f"first measurement suspected of a time change: {totals['suspected']} of {totals['tests']}")
    print(f"inconclusive time: {totals['inconclusive tests']} of {totals['tests']}; commonest reasons:")
    for reason, n in reasons.most_common(5):
        print(f"  {n:4d}  {reason} ...")
    rounds, runs = max(1, args.rounds), max(1, totals["runs"])
    print(f"recording: {seconds['recording'] / rounds:.1f} s a round; a run: {seconds['running'] / runs:.1f} s")
    if limits:
        print("an op fails past, as a slowdown of its fastest recorded time (the floor counted):")
        print(f"  with its range: {quantiles([with_range for with_range, _ in limits])}")
        print(f"  judged without: {quantiles([without for _, without in limits])}")


if __name__ == "__main__":
    main()
