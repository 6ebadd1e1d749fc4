"""Record small traces of known models on a CUDA GPU, for test fixtures (tests/data/).

    python scripts/record_gpu_traces.py [--device cuda|cpu] OUT_DIR

Writes, each a few steps with `opprof.run`'s capture exported as a Chrome trace (.json.gz):
  matmul_copy_sync  three matmuls, a copy to the host and a synchronisation per step
  compiled_block    a torch.compile'd block (Triton kernels launched through cuLaunchKernel)
  cuda_graph        a CUDA-graph replay of a small MLP
and `expected.json`: per trace, the numbers torch's own key_averages() gives for the same
capture (device time and calls per op), to pin them in CPU-side tests. Files are named
`gpu_<model>.json.gz` on a GPU; `--device cpu` (a dry run of the plumbing, no CUDA graph)
writes `cpu_<model>.json.gz`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from pytest_opprof import from_profiler
from pytest_opprof.capture import new_profiler


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def profiled(fn, device: str, steps: int = 3, warmup: int = 3):
    for _ in range(warmup):
        fn()
    synchronize(device)
    # as opprof's own captures are made (on torch 2.12+ a GPU copy keeps its bytes only so)
    with new_profiler(torch, cuda=device == "cuda", work=False) as prof:
        for i in range(steps):
            with torch.autograd.profiler.record_function(f"ProfilerStep#{i + 1}"):
                fn()
                synchronize(device)
    return prof


def matmul_copy_sync(device: str):
    a = torch.randn(512, 512, device=device)

    def step():
        with torch.profiler.record_function("matmuls"):  # a range, for Profile.ranges
            b = a @ a
            c = b @ a
            d = (c @ b).sum()
        return d.cpu().item()

    return step


def compiled_block(device: str):
    block = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    compiled = torch.compile(block.to(device).eval())
    x = torch.randn(64, 256, device=device)

    def step():
        with torch.no_grad():
            return compiled(x)

    return step


def cuda_graph(device: str):
    assert device == "cuda", "a CUDA graph needs a CUDA device"
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)).cuda().eval()
    x = torch.randn(32, 256, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        model(x)
    return graph.replay


def torch_numbers(prof) -> dict:
    """key_averages(): per op (and record_function range), calls and device time in ns (torch's
    own figures). Only the CPU side's entries: on a GPU a range has a device-side twin of the same
    name (`gpu_user_annotation`), with no CPU time, that would replace the range's entry."""
    out = {}
    for avg in prof.key_averages():
        if getattr(avg, "device_type", torch.autograd.DeviceType.CPU) != torch.autograd.DeviceType.CPU:
            continue  # a kernel, a copy, a range's device-side twin
        device_us = getattr(avg, "device_time_total", None) or getattr(avg, "cuda_time_total", 0)
        out[avg.key] = {
            "calls": avg.count,
            "device_ns": int(round(device_us * 1000)),
            "cpu_ns": int(round(avg.cpu_time_total * 1000)),
        }
    return out


MODELS = {"matmul_copy_sync": matmul_copy_sync, "compiled_block": compiled_block, "cuda_graph": cuda_graph}
CPU_MODELS = ("matmul_copy_sync", "compiled_block")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="record small traces of known models for tests/data/")
    parser.add_argument("out", nargs="?", default="gpu-traces", type=Path)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--only", action="append", choices=sorted(MODELS), help="record these models alone")
    args = parser.parse_args(argv)
    names = args.only or (list(MODELS) if args.device == "cuda" else list(CPU_MODELS))
    prefix = "gpu" if args.device == "cuda" else "cpu"  # the GPU is named in each trace's header
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    expected: dict[str, dict] = {}
    failed = []
    for name in names:  # each model on its own: one that fails or is cut short costs only itself
        try:
            expected[name] = record_one(name, args.device, out / f"{prefix}_{name}.json.gz")
        except Exception as exc:  # noqa: BLE001  # reported, and the next model still runs
            failed.append(name)
            print(f"{name}: failed: {type(exc).__name__}: {exc}")
            continue
        (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True))
    return 1 if failed else 0


def record_one(name: str, device: str, path: Path) -> dict:
    """Record one model to `path`; its figures for expected.json (torch's and ours)."""
    prof = profiled(MODELS[name](device), device)
    torch_figures = torch_numbers(prof)
    profile = from_profiler(prof)
    profile.export_chrome_trace(str(path))
    print(f"{path}: {path.stat().st_size} bytes, {len(profile.ops)} ops, {len(profile.kernels)} kernels")
    return {"torch": torch_figures, "opprof": profile.to_dict()}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
