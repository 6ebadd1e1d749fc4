from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# The shared real-world traces live beside the repository (../shared/traces); never copied in.
SHARED_TRACES = Path(os.environ.get("OPPROF_SHARED_TRACES", Path(__file__).resolve().parents[2] / "shared" / "traces"))
SHARED_TRACE_FILES = sorted(SHARED_TRACES.glob("*.json*")) if SHARED_TRACES.is_dir() else []


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACE_FILES:
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    # pytester's in-process runs drop the modules first imported inside them. torch.profiler
    # imports ~800 modules lazily on first use (torch._inductor among them), and torch cannot
    # register its operator libraries twice; so we use the profiler once here, up front.
    try:
        import torch
    except ImportError:
        return
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        torch.ones(1).add(1)
