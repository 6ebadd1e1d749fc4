"""Traces recorded on a real GPU by scripts/gpu_check.sh (scripts/record_gpu_traces.py), kept in
tests/data/ with the figures torch's own key_averages() gave for the same capture: CPU-side tests
that guard the CUDA path in CI. Skipped, saying so, until such traces are committed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_opprof.trace import load_trace

DATA = Path(__file__).parent / "data"
EXPECTED = DATA / "expected.json"
TRACES = sorted(DATA.glob("gpu_*.json.gz"))
ROOT = Path(__file__).resolve().parents[1]


def recorded() -> list[tuple[str, Path]]:
    return [(p.name[len("gpu_") : -len(".json.gz")], p) for p in TRACES]


def agrees_with_torch(path: Path, expected: dict) -> tuple[int, int]:
    """The trace at `path` reads back to the profile captured (`expected["opprof"]`), and each op's
    calls and device time equal torch's key_averages() (`expected["torch"]`). Returns how many ops
    had their calls and their device time compared."""
    profile = load_trace(path)
    assert {**profile.to_dict(), "source": None} == {**expected["opprof"], "source": None}
    calls = device = 0
    for op_name, figures in expected["torch"].items():
        op = profile.op(op_name)
        if op is None:
            continue
        assert op.calls == figures["calls"], op_name
        calls += 1
        if figures["device_ns"]:
            assert op.device_ns == pytest.approx(figures["device_ns"], rel=1e-3), op_name
            device += 1
    for block in profile.ranges:  # record_function blocks: torch counts them as it counts ops
        figures = expected["torch"][block.name]
        assert block.calls == figures["calls"], block.name
        assert block.cpu_ns == pytest.approx(figures.get("cpu_ns", block.cpu_ns), rel=1e-3), block.name
    return calls, device


@pytest.mark.skipif(
    not TRACES or not EXPECTED.exists(), reason="no GPU traces recorded yet (scripts/gpu_check.sh on a GPU)"
)
@pytest.mark.parametrize(("name", "path"), recorded())
def test_a_recorded_gpu_trace_reads_back_as_captured_and_agrees_with_torch(name, path):
    """A trace recorded on a GPU reads back to the profile captured, and each op's calls and device
    time equal torch's key_averages()."""
    _, device = agrees_with_torch(path, json.loads(EXPECTED.read_text())[name])
    replays = load_trace(path).graph_launches
    if replays:  # a replay outside every op: torch gives no op its kernels' time; the launch has it all
        assert sum(g.device_ns for g in replays) == sum(k.device_ns for k in load_trace(path).kernels) > 0
    else:
        assert device >= 1  # torch's own figures pinned at least one op with device time


def test_the_recording_script_dry_run_on_cpu_agrees_with_torch(tmp_path):
    """The recorder's plumbing, run on the CPU: the trace it writes reads back to the profile it
    captured, and each op's calls equal torch's key_averages() for the same capture."""
    pytest.importorskip("torch")  # its run or script measures torch ops
    script = ROOT / "scripts" / "record_gpu_traces.py"
    args = [sys.executable, str(script), "--device", "cpu", "--only", "matmul_copy_sync", str(tmp_path)]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    expected = json.loads((tmp_path / "expected.json").read_text())
    calls, device = agrees_with_torch(tmp_path / "cpu_matmul_copy_sync.json.gz", expected["matmul_copy_sync"])
    assert calls >= 10 and device == 0  # aten::matmul, mm, sum, item, copy_, ...; no device on CPU
    assert [r.name for r in load_trace(tmp_path / "cpu_matmul_copy_sync.json.gz").ranges] == ["matmuls"]


def test_the_recorders_torch_figures_keep_each_ranges_cpu_side():
    """On a GPU, key_averages() lists a record_function range twice under one name: its CPU side
    and its device-side twin (no CPU time), which came later and replaced the range's figures in
    expected.json (a desk review); the recorder keeps the CPU side's and skips device entries."""
    import importlib.util
    from types import SimpleNamespace

    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("record_gpu_traces", ROOT / "scripts" / "record_gpu_traces.py")
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    averages = [
        SimpleNamespace(key="matmuls", count=3, device_time_total=30.0, cpu_time_total=90.0, device_type=cpu),
        SimpleNamespace(key="gemm_kernel", count=9, device_time_total=27.0, cpu_time_total=0.0, device_type=cuda),
        SimpleNamespace(key="matmuls", count=3, device_time_total=31.0, cpu_time_total=0.0, device_type=cuda),
    ]
    figures = recorder.torch_numbers(SimpleNamespace(key_averages=lambda: averages))
    assert figures == {"matmuls": {"calls": 3, "device_ns": 30_000, "cpu_ns": 90_000}}


def test_the_gpu_probe_counts_every_launch_call_against_the_kernel_records():
    """scripts/gpu_probe.py's count: each launch call (a runtime row's calls, not its rows) against
    the kernel records, so a session that lost its first records shows fewer records than launches
    (the first version counted rows: 1 launch, and never saw a loss; found by a review)."""
    import importlib.util

    from builders import kernel, launch, step

    from pytest_opprof.analysis import analyze

    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("gpu_probe", ROOT / "scripts" / "gpu_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    events = [step(1, 0, 100)] + [launch(1 + i, corr=10 + i) for i in range(5)]
    events += [kernel("k", 20 + i, 1, corr=10 + i) for i in range(2, 5)]  # the first 2 records lost
    assert probe.launches_and_records(analyze(events)) == (5, 3)


def test_the_gpu_script_keeps_to_its_budget_and_parses(tmp_path):
    """scripts/gpu_check.sh: valid bash; what lasts (the probe, the cuda tests, the recorded traces)
    runs first and the CPU examples last; it starts no step that could run past its budget (360 s by
    default: room for a rerun in 15 minutes of device time), saying so: with none left, each is
    skipped and the run exits 1 at once."""
    script = ROOT / "scripts" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert 'BUDGET="${GPU_CHECK_BUDGET:-360}"' in text
    lines = [line.strip() for line in text.splitlines()]
    order = [line.split()[1] for line in lines if line.startswith("step ")]
    assert order.index("probe") < order.index("cuda-tests") < order.index("record-traces") < order.index("observer")
    assert order[-1] == "examples"
    env = {**os.environ, "GPU_CHECK_BUDGET": "0", "GPU_CHECK_DEVICE": "cpu"}
    run = subprocess.run(["bash", str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    skipped = [line for line in run.stdout.splitlines() if line.startswith("== ") and ": skipped at " in line]
    assert run.returncode == 1 and len(skipped) == len(order) - 3  # all but the three install steps (none in a dry run)
    assert any(
        line.startswith("== probe: skipped at ") and line.endswith("(its limit of 40 s would pass the budget of 0 s)")
        for line in skipped
    )
    bad = subprocess.run(
        ["bash", str(script), str(tmp_path)], env={**env, "GPU_CHECK_BUDGET": "7m"}, capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr == (
        "gpu_check.sh: GPU_CHECK_BUDGET=7m is not a whole number of seconds; give one, e.g. 360\n"
    )


def test_install_from_source_registers_the_plugin_as_pip_would(tmp_path):
    """The GPU script's fallback when pip cannot build: a .pth line naming the checkout and a
    dist-info with the `pytest11` entry point and the `opprof` command; `--check` passes here
    (this checkout is installed) and names what is missing elsewhere."""
    from importlib.metadata import distributions

    script = ROOT / "scripts" / "install_from_source.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, capture_output=True)
    assert (tmp_path / "pytest_opprof_source.pth").read_text().strip() == str(ROOT)
    (dist,) = distributions(path=[str(tmp_path)])
    points = {(e.group, e.name): e.value for e in dist.entry_points}
    assert points == {
        ("pytest11", "opprof"): "pytest_opprof.plugin",
        ("console_scripts", "opprof"): "pytest_opprof.cli:main",
    }
    assert dist.version == __import__("pytest_opprof").__version__
    check = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    bare = subprocess.run([sys.executable, "-S", str(script), "--check"], capture_output=True, text=True)
    assert bare.returncode == 1 and "no pytest11 entry point named opprof" in bare.stdout


def test_the_compatibility_matrix_spans_the_declared_torch_range():
    """scripts/compat_check.sh: valid bash, and its matrix runs the oldest torch pyproject.toml
    admits and a torch below its ceiling, and pytest 8.0 (the floor) and 9.x."""
    import re

    script = ROOT / "scripts" / "compat_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    entries = re.findall(r'^\s*"(torch==[^"]+)"', script.read_text(), re.M)
    torches = sorted(tuple(map(int, re.search(r"torch==([\d.]+)", e).group(1).split("."))) for e in entries)
    pytests = {re.search(r"pytest==([\d.]+)", e).group(1) for e in entries}
    declared = re.search(r'"torch>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    floor, ceiling = (tuple(map(int, v.split("."))) for v in declared.groups())
    assert torches[0][:2] == floor and torches[-1][:2] < ceiling
    assert "8.0.0" in pytests and any(v.startswith("9.") for v in pytests)
