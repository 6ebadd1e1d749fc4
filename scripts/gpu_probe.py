"""What this machine's profiler delivers, before the GPU tests run: torch's and CUPTI's versions,
the route opprof reads a capture by (torch's events, or Kineto's trace before torch 2.12), and
whether kernel records go missing at the start of later profiler sessions in one process (CUPTI
from CUDA 12.6 Update 2 to 13.0 drops a growing number of them: pytorch/pytorch#192021; opprof
starts several sessions per test).

    python scripts/gpu_probe.py [--device cuda|cpu] [--sessions 12] [--kernels 20] [--idle 0.5]

Exit 0 whatever it finds (it reports; the tests judge); 1 only when it cannot run.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import metadata

import torch

from pytest_opprof import Profile, from_profiler
from pytest_opprof.capture import new_profiler
from pytest_opprof.kineto import events_carry_category

CUPTI_DISTRIBUTIONS = ("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13", "nvidia-cuda-cupti-cu12")


def cupti_version() -> str:
    for name in CUPTI_DISTRIBUTIONS:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "no CUPTI wheel (a system CUPTI, or none)"


def session(device: str, kernels: int) -> tuple[int, int, list[str]]:
    """One profiler session launching `kernels` small kernels: (launch calls, kernel records, the
    warnings of the profile)."""
    x = torch.zeros(16, device=device)
    if device == "cuda":
        torch.cuda.synchronize()
    with new_profiler(torch, cuda=device == "cuda", work=False) as prof:  # as opprof's own captures are made
        with torch.autograd.profiler.record_function("ProfilerStep#1"):
            for _ in range(kernels):
                x.add_(1)
            if device == "cuda":
                torch.cuda.synchronize()
    profile = from_profiler(prof)
    launches, records = launches_and_records(profile)
    return launches, records, [f"{c.name}: {c.message}" for c in profile.checks if c.status != "ok"]


def launches_and_records(profile: Profile) -> tuple[int, int]:
    """Kernel launch calls (cudaLaunchKernel and its kin, each row's calls) and kernel records."""
    launches = sum(r.calls for r in profile.runtime if "LaunchKernel" in r.name)
    return launches, sum(k.calls for k in profile.kernels)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="what this machine's profiler delivers")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--idle", type=float, default=0.5, help="seconds idle between sessions")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("probe: no CUDA device")
        return 1
    route = "torch's events" if events_carry_category() else "Kineto's trace (torch before 2.12)"
    print(f"probe: torch {torch.__version__}, CUDA {torch.version.cuda}, {cupti_version()}; captures read from {route}")
    lost = []
    for k in range(1, args.sessions + 1):
        if k > 1:
            time.sleep(args.idle)  # the loss grows with the GPU's idle time between sessions
        launches, records, warnings = session(args.device, args.kernels)
        print(
            f"session {k}: {launches} kernel launches, {records} kernel records" + "".join(f"; {w}" for w in warnings)
        )
        if args.device == "cuda" and records < launches:
            lost.append(f"session {k} lost {launches - records}")
    if args.device != "cuda":
        print("probe: CPU dry run: no kernels to count")
    elif lost:
        print(f"probe: kernel records lost at session starts ({', '.join(lost)}): pytorch/pytorch#192021")
    else:
        print(f"probe: no kernel record lost in {args.sessions} sessions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
