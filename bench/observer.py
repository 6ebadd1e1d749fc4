"""The observer effect: how much longer a profiled step takes than an unprofiled one, as
`opprof.run()` reports it (`overhead`: best profiled step / best unprofiled step).

    python bench/observer.py [--runs 5] [--device cuda]

Prints, per workload, the median over runs of the overhead run() reported, and its range.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from pytest_opprof import measure


def workloads(device: str):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval().to(device)
    x = torch.randn(64, 256, device=device)
    big = torch.randn(512, 512, device=device)

    def infer():
        with torch.no_grad():
            return mlp(x)

    return [
        ("MLP 256-512-10, batch 64 (3 ops of real work)", infer),
        ("matmul 512x512 (one large op)", lambda: big @ big),
        (
            "50 adds on 2-element tensors (a flood of tiny ops)",
            lambda: [torch.ones(2, device=device).add(1) for _ in range(50)],
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {args.device} ({where}); run(warmup=3, steps=10), {args.runs} runs")
    for name, fn in workloads(args.device):
        ratios = [measure(fn, warmup=3, steps=10).overhead for _ in range(args.runs)]
        print(f"  {name:52s} overhead x{statistics.median(ratios):.2f}  (x{min(ratios):.2f}-x{max(ratios):.2f})")


if __name__ == "__main__":
    main()
