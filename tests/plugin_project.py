"""The user project the end-to-end plugin tests run pytest on (tests/test_plugin*.py), and how they run it.
A test module imports `project`, `run` and the autouse `_deterministic` (every capture timed by the fake clock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_clock import WORKER_FAKE_CLOCK

USER_CONFTEST = (
    """
import pytest
import torch


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    return model, torch.randn(4, 32)


def infer(model, x):
    with torch.no_grad():
        return model(x)
"""
    + WORKER_FAKE_CLOCK
)


@pytest.fixture(name="project")
def project_fixture(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(USER_CONFTEST)
    return pytester


@pytest.fixture(autouse=True, name="_deterministic")
def deterministic_fixture(fake_clock, monkeypatch):
    """Every capture in these runs is timed by the fake clock: no test here reads real time, also
    in the xdist workers of a run under `-n` (its conftest, USER_CONFTEST, installs the clock
    there; a worker's real timing once failed the CSV test's baseline on its step wall)."""
    monkeypatch.setenv("OPPROF_FAKE_CLOCK_DIR", str(Path(__file__).parent))
    monkeypatch.setenv("OPPROF_FAKE_CLOCK_OUTER_RUN", os.environ.get("PYTEST_XDIST_TESTRUNUID", ""))
    return fake_clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)
