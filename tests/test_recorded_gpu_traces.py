"""Traces recorded on a real GPU by scripts/gpu_check.sh (scripts/record_gpu_traces.py), kept in
tests/data/ with the figures torch's own key_averages() gave for the same capture: CPU-side tests
that guard the CUDA path in CI. Skipped, saying so, until such traces are committed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_opprof.trace import load_trace

DATA = Path(__file__).parent / "data"
EXPECTED = DATA / "expected.json"
TRACES = sorted(DATA.glob("h200_*.json.gz"))
ROOT = Path(__file__).resolve().parents[1]


def recorded() -> list[tuple[str, Path]]:
    return [(p.name[len("h200_") : -len(".json.gz")], p) for p in TRACES]


@pytest.mark.skipif(
    not TRACES or not EXPECTED.exists(), reason="no GPU traces recorded yet (scripts/gpu_check.sh on a GPU)"
)
@pytest.mark.parametrize(("name", "path"), recorded())
def test_a_recorded_gpu_trace_reads_back_as_captured_and_agrees_with_torch(name, path):
    """A trace recorded on a GPU reads back to the profile captured, and each op's calls and device
    time equal torch's key_averages()."""
    expected = json.loads(EXPECTED.read_text())[name]
    profile = load_trace(path)
    assert {**profile.to_dict(), "source": None} == {**expected["opprof"], "source": None}
    checked = 0
    for op_name, figures in expected["torch"].items():
        op = profile.op(op_name)
        if op is None or not figures["device_ns"]:
            continue
        assert op.calls == figures["calls"], op_name
        assert op.device_ns == pytest.approx(figures["device_ns"], rel=1e-3), op_name
        checked += 1
    assert checked >= 1  # torch's own figures pinned at least one op with device time


def test_the_gpu_script_fits_its_budget_and_parses():
    """scripts/gpu_check.sh: valid bash, and its steps' timeouts sum to under 8 minutes."""
    script = ROOT / "scripts" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    limits = [int(line.split()[2]) for line in script.read_text().splitlines() if line.startswith("step ")]
    assert len(limits) == 6 and sum(limits) <= 480
