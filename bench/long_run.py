"""A long test run: does --opprof keep memory bounded and per-test time flat over 500 tests?

Writes a suite of N measured tests (each `opprof.run` of a small MLP, 3 steps), runs
`pytest --opprof` on it once, and reads, after every test, the process's resident memory and
the wall time of the test (a small conftest hook writes them down). Prints RSS growth from test
10 to test N and the median per-test time of tests 10-30 against the last 20.
Targets: RSS growth under 50 MB; per-test time flat within noise.

    python bench/long_run.py [--tests 500]
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
    args = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="opprof-long-"))
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "test_long.py").write_text(SUITE_HEAD + "".join(TEST.format(i=i) for i in range(args.tests)))
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
    early, late = statistics.median(seconds[10:30]), statistics.median(seconds[-20:])
    print(f"{n} measured tests, {os.cpu_count()} cpus, --opprof with --opprof-json")
    print(
        f"  RSS after test 10: {rss_mib[9]:.1f} MiB, after test {n}: {rss_mib[-1]:.1f} MiB, growth {rss_mib[-1] - rss_mib[9]:.1f} MiB   (target < 50 MB)"
    )
    print(
        f"  per-test time, median of tests 10-30: {early * 1e3:.1f} ms; of the last 20: {late * 1e3:.1f} ms (x{late / early:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
