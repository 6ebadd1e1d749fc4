"""GPU-only tests: every test here is skipped, with the reason, on a machine without CUDA."""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (these tests check kernels and copies)")
    for item in items:
        if "05_gpu_only" in str(item.path):
            item.add_marker(skip)


@pytest.fixture
def gpu_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
    return model.cuda().eval(), torch.randn(256, 1024, device="cuda")


def infer(model, x):
    with torch.no_grad():
        return model(x)
