"""A long test run: does --opprof keep memory bounded and per-test time flat over 500 tests?

Writes a suite of N measured tests (each `opprof.run` of a small MLP, 3 steps), runs
`pytest --opprof` on it once, and reads, after every test, the process's resident memory and
the wall time of the test (a small conftest hook writes them down). Prints RSS growth from test
10 to test N and the median per-test time of tests 10-30 against the last 20.
Targets: RSS growth under 50 MB; per-test time flat within noise.

`--adds N`: each test captures 25 steps of N one-element adds instead (25k events a test at
N=1000: a large capture), and the peak RSS is printed too: torch's profiler refers to itself,
so what a capture leaves waits for a full garbage collection unless opprof lets it go.

    python bench/long_run.py [--tests 500] [--adds 1000 --tests 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SUITE_HEAD = """
import torch

torch.manual_seed(0)
MODEL = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).eval()
X = torch.randn(8, 64)


def infer():
    with torch.no_grad():
        return MODEL(X)
"""
TEST = """
def test_{i}(opprof):
    opprof.run(infer, warmup=1, steps=3)
"""
LARGE_TEST = """
def adds(x):
    for _ in range({adds}):
        x = x + 1
    return x


def test_{i}(opprof):
    opprof.run(adds, torch.zeros(4), warmup=1, steps=25)
"""
CONFTEST = """
import time

import pytest

LOG = open("progress.log", "w")
_start = {}


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _start[item.nodeid] = time.perf_counter()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    LOG.write(f"{time.perf_counter() - _start.pop(item.nodeid)} {_rss_kib()}\\n")
    LOG.flush()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--adds", type=int, default=0, help="each test: 25 steps of this many adds")
    args = parser.parse_args()
    test = LARGE_TEST.replace("{adds}", str(args.adds)) if args.adds else TEST
    project = Path(tempfile.mkdtemp(prefix="opprof-long-"))
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "test_long.py").write_text(SUITE_HEAD + "".join(test.replace("{i}", str(i)) for i in range(args.tests)))
    json_report = project / "report.json"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--opprof", f"--opprof-json={json_report}"],
        cwd=project,
        check=True,
        capture_output=True,
    )
    rows = [line.split() for line in (project / "progress.log").read_text().splitlines()]
    seconds = [float(r[0]) for r in rows]
    rss_mib = [int(r[1]) / 1024 for r in rows]
    n = len(rows)
    first = min(10, n // 2)  # the first tests warm up; --adds runs fewer
    early, late = statistics.median(seconds[first : first + 20]), statistics.median(seconds[-20:])
    print(f"{n} measured tests, {os.cpu_count()} cpus, --opprof with --opprof-json")
    print(
        f"  RSS after test {first}: {rss_mib[first - 1]:.1f} MiB, after test {n}: {rss_mib[-1]:.1f} MiB, growth "
        f"{rss_mib[-1] - rss_mib[first - 1]:.1f} MiB, peak {max(rss_mib):.1f} MiB   (target < 50 MB growth)"
    )
    print(
        f"  per-test time, median of tests {first}-{first + 20}: {early * 1e3:.1f} ms; of the last 20: {late * 1e3:.1f} ms "
        f"(x{late / early:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
