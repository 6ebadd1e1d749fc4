"""Shared models for the examples: built in code, no downloads."""

import pytest
import torch


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval()
    return model, torch.randn(64, 256)
