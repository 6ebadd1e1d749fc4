"""A small classifier and its optimizer, built in code (no downloads), fresh for each test: a
training step changes the model and the optimizer's state, and opprof.run() calls it
`warmup + steps + 3` times. `OPPROF_EXAMPLE_OPTIMIZER=adam` swaps the optimizer: the
regression this folder's README shows caught."""

from __future__ import annotations

import os

import pytest
import torch


@pytest.fixture
def trainer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    # foreach=True: one update for all parameters at once (on the CPU torch loops over them by default)
    if os.environ.get("OPPROF_EXAMPLE_OPTIMIZER") == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    return model, opt, x, y


def train_step(model, opt, x, y):
    """One whole step: zero the grads, forward, loss, backward, update."""
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def accumulated_step(model, opt, batches):
    """Gradient accumulation: one optimizer step over several micro-batches, as one call."""
    opt.zero_grad(set_to_none=True)
    for x, y in batches:
        (torch.nn.functional.cross_entropy(model(x), y) / len(batches)).backward()
    opt.step()
