"""Whether a machine reference could tell a slow process from slow code: fresh processes of
unchanged code, each timing a small CNN and candidate references; prints each one's speed
against the median and how well each reference follows the CNN from process to process.

A process on a shared 2-vCPU VM can run the same code 30% slower or faster for its whole life
(docs/verdicts.md, "What the time rule cannot see"). A reference that followed it would let the time rule
excuse such a process and keep failing real slowdowns. This bench looks for one.

    python bench/reference_probe.py [--runs 24]

With `--spells SECONDS`, one process instead: three small models (an LSTM, a transformer
encoder layer, an MLP) and the references (the matmul, dispatch and small matmul ones that
opprof takes, and a 64 KB elementwise op) timed in turn for that long; per window of
`--window` seconds, each one's best time over its best window's. It prints, for each model,
the windows where it ran over x1.2 slower and how many of them each reference excuses as
opprof would (over x1.15, and the model's move within four times the reference's).
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


SPELLS = r"""
import json, sys, time, torch
from pytest_opprof import references
torch.manual_seed(0)
lstm = torch.nn.LSTM(32, 64, batch_first=True).eval()
enc = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval()
mlp = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
x, xe, xm, v = torch.randn(4, 20, 32), torch.randn(4, 16, 64), torch.randn(32, 128), torch.randn(16384)
def best(fn, n):
    b = None
    for _ in range(n):
        t = time.perf_counter_ns(); fn(); e = time.perf_counter_ns() - t
        b = e if b is None else min(b, e)
    return b / 1e6
def tanh():
    for _ in range(20):
        torch.tanh(v)
probes = {
    "model lstm": lambda: best(lambda: lstm(x), 10), "model encoder layer": lambda: best(lambda: enc(xe), 10),
    "model mlp": lambda: best(lambda: mlp(xm), 10),
    "matmul reference": lambda: references.machine_reference_ns(torch) / 1e6,
    "dispatch reference": lambda: references.dispatch_reference_ns(torch) / 1e6,
    "small matmul reference": lambda: references.small_reference_ns(torch) / 1e6,
    "tanh of 64 KB x20": lambda: best(tanh, 8),
}
rows, end = [], time.time() + float(sys.argv[1])
with torch.no_grad():
    while time.time() < end:
        rows.append([time.time()] + [probe() for probe in probes.values()])
print(json.dumps({"names": list(probes), "rows": rows}))
"""


def spells(seconds: float, window: float) -> None:
    """One process for `seconds`: which references follow the models' slow windows (module doc)."""
    out = subprocess.run([sys.executable, "-c", SPELLS, str(seconds)], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    names, rows = found["names"], found["rows"]
    windows: dict[int, list[list[float]]] = {}
    for row in rows:
        windows.setdefault(int((row[0] - rows[0][0]) / window), []).append(row)
    best = {n: [min(r[i + 1] for r in w) for w in windows.values()] for i, n in enumerate(names)}
    ratios = {n: [b / min(v) for b in v] for n, v in best.items()}
    count = len(windows)
    print(
        f"{len(rows)} rounds in {count} windows of {window:g} s; each figure is a window's best over the best window's"
    )
    for n in names:
        slow = sum(r > 1.15 for r in ratios[n])
        print(f"  {n:24s} best {min(best[n]):7.3f} ms  over x1.15 in {slow:3d} windows  most x{max(ratios[n]):.2f}")
    for model in (n for n in names if n.startswith("model")):
        slow_windows = [i for i in range(count) if ratios[model][i] > 1.2]
        print(f"{model}: over x1.2 in {len(slow_windows)} of {count} windows; excused by")
        for ref in (n for n in names if not n.startswith("model")):
            excused = [
                i for i in slow_windows if ratios[ref][i] > 1.15 and ratios[model][i] <= 1 + 4 * (ratios[ref][i] - 1)
            ]
            moved = [ratios[ref][i] for i in slow_windows]
            span = f" (ran x{min(moved):.2f}-x{max(moved):.2f} there)" if moved else ""
            print(f"  {ref:24s} {len(excused):3d}{span}")


def correlation(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.mean(xs), statistics.mean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    den = (sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)) ** 0.5
    return num / den if den else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="fresh processes")
    parser.add_argument("--spells", type=float, help="seconds of one process instead (module doc)")
    parser.add_argument("--window", type=float, default=4.0, help="with --spells: seconds per window")
    args = parser.parse_args()
    if args.spells:
        spells(args.spells, args.window)
        return 0
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
