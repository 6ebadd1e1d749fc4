"""An MLP built in code (no downloads). `OPPROF_EXAMPLE_REGRESSION=1` adds a third layer: the
regression the README's quick start catches."""

from __future__ import annotations

import os

import pytest
import torch


def build_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    layers = [torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)]
    if os.environ.get("OPPROF_EXAMPLE_REGRESSION"):
        layers[1:1] = [torch.nn.Linear(512, 512)]  # someone "improves" the model
    return torch.nn.Sequential(*layers).eval()


@pytest.fixture
def mlp():
    return build_mlp(), torch.randn(64, 256)


def infer(model, x):
    with torch.no_grad():
        return model(x)
