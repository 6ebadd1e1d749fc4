"""Per-directory rules: every test in this folder gets a wider time tolerance and ignores the
allocation ops, without touching the tests. (The device-key hook of the examples is in
conftest_examples/conftest.py: pytest-opprof asks for the key once, at start.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent

RULES = pytest.mark.opprof(tolerance="50%", min_delta_ms=0.1, ignore_ops=["aten::empty*", "aten::resize_"])


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(RULES)


@pytest.fixture
def conv():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
    return model.eval(), torch.randn(8, 3, 32, 32)


def infer(model, x):
    with torch.no_grad():
        return model(x)
