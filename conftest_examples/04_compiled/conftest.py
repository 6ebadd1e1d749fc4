"""A torch.compile'd MLP (Inductor: C++ kernels on CPU, Triton kernels on a GPU)."""

from __future__ import annotations

import pytest
import torch


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = torch.nn.Linear(128, 512), torch.nn.Linear(512, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.down(torch.nn.functional.gelu(self.up(x))) + x)


@pytest.fixture(scope="module")
def compiled():
    return torch.compile(Mlp().eval()), torch.randn(16, 128)


def infer(model, x):
    with torch.no_grad():
        return model(x)
