"""Process crashes at exit after measuring a TorchScript model that forks (torch.jit.fork), with
and without opprof's wait for torch's pool threads before each profiler stop.

Each run is a fresh process doing `--calls` measure() calls of the model; a crash is an exit by a
signal (SIGSEGV, SIGABRT: `free(): invalid next size`). The two variants alternate, so the
machine's load hits both alike.

    python bench/fork_exit.py [--runs 40] [--calls 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

CHILD = """
import importlib, sys, warnings
import torch
from pytest_opprof import measure

if sys.argv[2] == "off":
    importlib.import_module("pytest_opprof.capture")._settle_torch_pools = lambda: None


class Forky(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)

    def forward(self, x):
        fut = torch.jit.fork(self.a, x)
        return torch.jit.wait(fut) + self.b(x)


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    m = torch.jit.script(Forky().eval())
x = torch.randn(8, 32)


def infer(x):
    with torch.no_grad():
        return m(x)


for _ in range(int(sys.argv[1])):
    measure(infer, x, warmup=3, steps=10)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="processes per variant")
    parser.add_argument("--calls", type=int, default=10, help="measure() calls per process")
    args = parser.parse_args()
    crashed = {"on": 0, "off": 0}
    start = time.time()
    with tempfile.TemporaryDirectory() as folder:
        child = os.path.join(folder, "child.py")  # TorchScript reads the model's source: a file
        with open(child, "w") as f:
            f.write(CHILD)
        for _ in range(args.runs):
            for variant in crashed:
                done = subprocess.run(
                    [sys.executable, child, str(args.calls), variant], capture_output=True, check=False
                )
                crashed[variant] += done.returncode < 0 or done.returncode >= 128
    print(f"{args.runs} processes a variant, {args.calls} measure() calls each ({time.time() - start:.0f} s):")
    print(f"  crashed with the wait for torch's pools (opprof's)   {crashed['on']}/{args.runs}")
    print(f"  crashed without it                                    {crashed['off']}/{args.runs}")


if __name__ == "__main__":
    main()
