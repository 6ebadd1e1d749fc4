"""Adopting opprof in an existing suite: the ways a test reaches the fixture, plugins that
multiply a test's ids, where the device-key hook lives, names that shadow ours, ini typos."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _deterministic(fake_clock):
    """Every capture in these runs is timed by the fake clock: no test here reads real time."""
    return fake_clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


LATE_FIXTURE = """
import os, torch

def f(x):
    y = x * 2
    if os.environ.get("REGRESS"):
        y = y + 1
    return y

def test_late(request):
    opprof = request.getfixturevalue("opprof")
    opprof.run(f, torch.ones(4), warmup=1, steps=3)
"""


def test_a_fixture_asked_for_in_the_body_is_compared_and_recorded(pytester, monkeypatch):
    """`request.getfixturevalue("opprof")` in the test body: its run() used to be measured but
    never compared or recorded, so a regression passed, even under --opprof-require-baseline."""
    pytester.makepyfile(test_late=LATE_FIXTURE)
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(errors=1)
    assert "test_late.py::test_late has no baseline" in result.stdout.str()
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert [p.name for p in pytester.path.glob(".opprof/*/test_late.py/*.json")] == ["test_late.json"]
    monkeypatch.setenv("REGRESS", "1")
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(failed=1)
    assert "structure changed" in result.stdout.str() and "+ aten::add" in result.stdout.str()
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert test["baseline"]["status"] == "compared"
    assert [(v["kind"], v["status"]) for v in test["baseline"]["verdicts"]] == [("structure", "changed")]


def test_a_fixture_asked_for_in_the_body_that_captured_nothing_says_so(pytester):
    """Asked for too late for the whole call, it measured nothing: a warning, and an error when
    --opprof-require-baseline expected a measurement."""
    pytester.makepyfile(
        test_late="import torch\ndef test_late(request):\n    request.getfixturevalue('opprof')\n    torch.ones(3) + 1\n"
    )
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert [(c["name"], c["status"]) for c in test["checks"]] == [("unmeasured", "warning")]
    assert "asked for the opprof fixture in its body (request.getfixturevalue)" in test["checks"][0]["message"]
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(errors=1)
    assert "name opprof in the test's arguments" in result.stdout.str()
