"""Record small traces of known models on a CUDA GPU, for test fixtures (tests/data/).

    python scripts/record_gpu_traces.py OUT_DIR

Writes, each a few steps with `opprof.run`'s capture exported as a Chrome trace (.json.gz):
  matmul_copy_sync  three matmuls, a copy to the host and a synchronisation per step
  compiled_block    a torch.compile'd block (Triton kernels launched through cuLaunchKernel)
  cuda_graph        a CUDA-graph replay of a small MLP
and `expected.json`: per trace, the numbers torch's own key_averages() gives for the same
capture (device time and calls per op), to pin them in CPU-side tests.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from pytest_opprof import from_profiler


def profiled(fn, steps: int = 3, warmup: int = 3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(steps):
            with torch.autograd.profiler.record_function(f"ProfilerStep#{i + 1}"):
                fn()
                torch.cuda.synchronize()
    return prof


def matmul_copy_sync():
    a = torch.randn(512, 512, device="cuda")

    def step():
        b = a @ a
        c = b @ a
        d = (c @ b).sum()
        return d.cpu().item()

    return step


def compiled_block():
    block = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda().eval()
    compiled = torch.compile(block)
    x = torch.randn(64, 256, device="cuda")

    def step():
        with torch.no_grad():
            return compiled(x)

    return step


def cuda_graph():
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
    """key_averages(): per op, calls and device time in ns (torch's own figures)."""
    out = {}
    for avg in prof.key_averages():
        device_us = getattr(avg, "device_time_total", None) or getattr(avg, "cuda_time_total", 0)
        out[avg.key] = {"calls": avg.count, "device_ns": int(round(device_us * 1000))}
    return out


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-traces")
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    for name, make in (
        ("matmul_copy_sync", matmul_copy_sync),
        ("compiled_block", compiled_block),
        ("cuda_graph", cuda_graph),
    ):
        prof = profiled(make())
        profile = from_profiler(prof)
        path = out / f"h200_{name}.json.gz"
        profile.export_chrome_trace(str(path))
        expected[name] = {"torch": torch_numbers(prof), "opprof": profile.to_dict()}
        print(f"{path}: {path.stat().st_size} bytes, {len(profile.ops)} ops, {len(profile.kernels)} kernels")
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
