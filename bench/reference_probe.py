"""Whether a machine reference could tell a slow process from slow code: fresh processes of
unchanged code, each timing a small CNN and candidate references; prints each one's speed
against the median and how well each reference follows the CNN from process to process.

A process on a shared 2-vCPU VM can run the same code 30% slower or faster for its whole life
(docs/verdicts.md, "What the time rule cannot see"). A reference that followed it would let the time rule
excuse such a process and keep failing real slowdowns. This bench looks for one.

    python bench/reference_probe.py [--runs 24]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = r"""
import json, time, torch
torch.manual_seed(0)
def best(fn, n=8):
    b = None
    for _ in range(n):
        t = time.perf_counter_ns(); fn(); e = time.perf_counter_ns() - t
        b = e if b is None else min(b, e)
    return b / 1e6
m = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval()
x, y = torch.randn(16, 3, 32, 32), torch.randn(16, 64, 32, 32)
a, one, big = torch.ones(256, 256), torch.ones(1), torch.randn(4 * 1024 * 1024)
with torch.no_grad():
    for _ in range(3):
        m(x)
    print(json.dumps({
        "cnn": best(lambda: m(x), 20),
        "matmul 256 (the matmul reference)": best(lambda: torch.mm(a, a)),
        "100 adds (the dispatch reference)": best(lambda: [torch.add(one, 1) for _ in range(100)]),
        "max_pool2d alone": best(lambda: torch.nn.functional.max_pool2d(y, 2), 20),
        "clone of 16 MB": best(lambda: big.clone()),
        "relu of 16 MB": best(lambda: torch.relu(big)),
    }))
"""


def correlation(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.mean(xs), statistics.mean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    den = (sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)) ** 0.5
    return num / den if den else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="fresh processes")
    args = parser.parse_args()
    rows = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    names = list(rows[0])
    median = {n: statistics.median(r[n] for r in rows) for n in names}
    print(f"{args.runs} fresh processes; each figure is the process's best time over the median's")
    for n in names:
        ratios = [r[n] / median[n] for r in rows]
        corr = correlation([r["cnn"] for r in rows], [r[n] for r in rows])
        follows = "" if n == "cnn" else f"  follows the cnn: r = {corr:+.2f}"
        print(f"  {n:36s} median {median[n]:7.3f} ms  range x{min(ratios):.2f}-x{max(ratios):.2f}{follows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
