"""How far an op's time moves between runs of unchanged code, and within one run.

The time rule compares the fastest step of a run with the baseline's fastest step. Within one
run the steps agree closely; between processes the whole run can sit higher or lower (where the
allocator put the tensors, which cores the threads got, the machine's other tenants). A baseline
is one run, so that between-run spread is what a tolerance has to cover.

    python bench/between_runs.py [--runs 20] [--steps 10]

Each run is a fresh process measuring each workload 3 times (`measure(fn, warmup=3, steps=N)`).
Prints, per workload and op: the range of the first measurement's per-step minimum over the
processes (max/min), the median and largest spread of the 3 measurements within a process, and
how many of the ordered pairs of processes (a baseline from one, a run from another) would put
the op more than 20% over its baseline before any machine check or confirmation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from itertools import permutations

WORKLOADS = {
    "transformer layer (d_model 256, batch 8x64)": "aten::_transformer_encoder_layer_fwd",
    "MLP 256-1024-256, batch 64": "aten::addmm",
}


def one_process(steps: int) -> dict[str, list[float]]:
    """In this process: each workload measured 3 times; its op's per-step minimum (ms) each time."""
    import torch

    from pytest_opprof import measure

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).eval()
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).eval()
    inputs = {"transformer": (layer, torch.randn(8, 64, 256)), "mlp": (mlp, torch.randn(64, 256))}

    def infer(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(x)

    found: dict[str, list[float]] = {}
    for (label, op), (model, x) in zip(WORKLOADS.items(), inputs.values()):
        for _ in range(3):
            stats = measure(infer, model, x, warmup=3, steps=steps).op(op)
            assert stats is not None, f"{op} did not run"
            found.setdefault(label, []).append(stats.time_per_step.min / 1e6)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_process(args.steps)))
        return
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--steps", str(args.steps)],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout.splitlines()[-1]))
    print(f"{args.runs} processes, {args.steps} steps per measurement, 3 measurements each")
    for label, op in WORKLOADS.items():
        firsts = [r[label][0] for r in runs]
        within = [max(r[label]) / min(r[label]) for r in runs]
        over = sum(b > 1.2 * a for a, b in permutations(firsts, 2))
        pairs = args.runs * (args.runs - 1)
        print(f"{label}, {op} (per-step minimum, ms):")
        print(f"  between processes: {min(firsts):.3f} - {max(firsts):.3f}  (x{max(firsts) / min(firsts):.2f})")
        print(f"  within a process:  median x{statistics.median(within):.2f}, largest x{max(within):.2f}")
        print(f"  pairs of processes over +20%: {over} of {pairs} ({100 * over / pairs:.0f}%)")


if __name__ == "__main__":
    main()
