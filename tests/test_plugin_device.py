"""End to end: the device key (option, ini, hook), the header's facts, a faked GPU with throttled
clocks (unreliable run), and environment differences against a baseline."""

from __future__ import annotations

import json
import sys
import time

import fake_nvml
import pytest

pytest.importorskip("torch")

from pytest_opprof import device  # noqa: E402

MEASURED = """
import torch
def test_x(opprof):
    opprof.run(lambda: torch.ones(8).add(1), warmup=1, steps=3)
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def keys_written(pytester: pytest.Pytester) -> list[str]:
    root = pytester.path / ".opprof"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_hook_chooses_the_device_key(pytester):
    pytester.makeconftest(
        """
        def pytest_opprof_device_key(config, facts):
            assert facts["cpu_count"] >= 1
            return "lab-" + facts["machine"].lower().replace("_", "-")
        """
    )
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    key = "lab-" + device.platform.machine().lower().replace("_", "-")
    result.stdout.fnmatch_lines([f"opprof: device key {key} (from pytest_opprof_device_key hook); *"])
    assert keys_written(pytester) == [key]


def test_option_wins_over_hook_and_ini(pytester):
    pytester.makeconftest("def pytest_opprof_device_key(config, facts):\n    return 'from-hook'\n")
    pytester.makeini("[pytest]\nopprof_device_key = from-ini\n")
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof-update-baseline", "--opprof-device-key=ci-a10")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: device key ci-a10 (from --opprof-device-key); *"])
    assert keys_written(pytester) == ["ci-a10"]
    # the ini twin is the same setting: it also wins over the hook
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert keys_written(pytester) == ["ci-a10", "from-ini"]


def test_bad_device_key_option_is_a_usage_error(pytester):
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof", "--opprof-device-key=My GPU/1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--opprof-device-key: 'My GPU/1' is not a device key: lowercase letters, digits, *(from command line)"]
    )


def test_hook_returning_a_bad_key_is_a_usage_error(pytester):
    pytester.makeconftest("def pytest_opprof_device_key(config, facts):\n    return 'A100 box'\n")
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_opprof_device_key returned 'A100 box': expected a device key*"])
    assert keys_written(pytester) == []


def test_hook_is_not_called_when_off(pytester):
    pytester.makeconftest("def pytest_opprof_device_key(config, facts):\n    raise RuntimeError('called')\n")
    pytester.makepyfile(MEASURED)
    run(pytester).assert_outcomes(passed=1)


@pytest.fixture
def throttled_gpu(monkeypatch):
    """torch reports an H200 and NVML says its clocks are held down by heat."""
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    module = fake_nvml.make({"sm_clock": 1110, "reasons": 0x40, "temperature": 92})
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_faked_gpu_facts_in_header_and_json(throttled_gpu, pytester, tmp_path):
    pytester.makepyfile(MEASURED)
    out = tmp_path / "run.json"
    result = run(pytester, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: device key nvidia-h200; *",
            "opprof: NVIDIA H200 (capability 9.0), driver 550.54.15, CUDA driver 12.4, SM clock 1110/1980 MHz, "
            "92 C, torch 2.13.0 (CUDA 12.4), *",
        ]
    )
    report = json.loads(out.read_text())
    assert report["device_key"] == "nvidia-h200"
    assert report["device"]["power_limit_w"] == 700.0
    assert report["device"]["clock_event_reasons"] == ["hw_thermal_slowdown"]
    assert throttled_gpu.calls == {"init": 1, "shutdown": 1}


def test_throttled_gpu_run_is_flagged_and_not_recorded(throttled_gpu, pytester, tmp_path):
    pytester.makepyfile(MEASURED)
    out = tmp_path / "run.json"
    result = run(pytester, "--opprof-update-baseline", f"--opprof-json={out}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_x: unreliable measurement: GPU clock event hw_thermal_slowdown; "
            "time verdicts are reported, not failed, and no baseline is recorded from it",
            "opprof: 1 baseline not written: unreliable GPU clocks (see above)",
        ]
    )
    assert keys_written(pytester) == []
    test = json.loads(out.read_text())["tests"][0]
    assert test["unreliable"] == "GPU clock event hw_thermal_slowdown"
    # sampled after the warm-up and after the capture
    assert (
        test["clocks"]
        == [{"sm_clock_mhz": 1110, "sm_clock_max_mhz": 1980, "clock_event_reasons": ["hw_thermal_slowdown"]}] * 2
    )
    assert test["baseline"]["status"] == "unreliable"


def test_healthy_gpu_clocks_are_not_flagged(monkeypatch, pytester, tmp_path):
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.make({"sm_clock": 1755}))
    pytester.makepyfile(MEASURED)
    out = tmp_path / "run.json"
    run(pytester, "--opprof-update-baseline", f"--opprof-json={out}").assert_outcomes(passed=1)
    test = json.loads(out.read_text())["tests"][0]
    assert test["unreliable"] is None and len(test["clocks"]) == 2
    assert keys_written(pytester) == ["nvidia-h200"]


def test_baseline_from_other_software_is_reported_not_failed(pytester):
    pytester.makepyfile(MEASURED)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    data = json.loads(path.read_text())
    data["environment"]["torch"] = "2.4.0"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    import torch

    result.stdout.fnmatch_lines(
        [f"*test_x: environment differs from the baseline: torch 2.4.0 -> {torch.__version__} [.opprof/*"]
    )


def test_cpu_contention_reaches_the_verdict(steady_references, pytester, monkeypatch, tmp_path):
    """The share of the capture our threads waited for a CPU goes into the JSON and widens the
    CPU-time limit: a 32x heavier matmul still fails, saying by how much the limit grew."""
    from test_plugin import REMEASURE_TESTS

    monkeypatch.delenv("OPPROF_MODE", raising=False)
    pytester.makepyfile(test_re=REMEASURE_TESTS)
    out = tmp_path / "run.json"
    run(pytester, "--opprof-update-baseline", f"--opprof-json={out}").assert_outcomes(passed=1)
    assert json.loads(out.read_text())["tests"][0]["cpu_wait"] >= 0  # summed over threads: may exceed 1
    # as if our threads waited for a CPU half of every nanosecond
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: time.perf_counter_ns() // 2)
    monkeypatch.setenv("OPPROF_MODE", "slow")
    result = run(pytester, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*aten::mm: * ms/step vs baseline * ms (*limit widened to +140% for CPU contention: threads waited*50%*"]
    )
    assert json.loads(out.read_text())["tests"][0]["cpu_wait"] == pytest.approx(0.5, abs=0.01)


def test_a_baseline_recorded_under_contention_is_called_out(pytester, monkeypatch):
    """Recording while threads waited for a CPU half the capture writes the baseline (its
    structure is exact) and says its CPU times may be inflated; a calm recording says nothing."""
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: time.perf_counter_ns() // 2)
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*::test_x: baseline recorded while its threads waited for a CPU 50% of the capture: its CPU times "
            "may be inflated and hide later slowdowns; record it again on a quiet machine (without -n on a small runner)",
            "opprof: baselines written: 1 new; *",
        ]
    )
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: 0)
    result = run(pytester, "--opprof-update-baseline=all")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 rewritten; *"])
    assert "waited for a CPU" not in result.stdout.str()


def test_confirmation_is_judged_by_the_calmer_measurements_cpu_wait(steady_references, pytester, monkeypatch, tmp_path):
    """A first measurement with threads waiting 90% of it (limit +1100%) and 32x slower triggers
    a second one, 4x slower without any wait: the pooled minimum comes from the second, so it is
    judged by the plain +20% and fails, confirmed."""
    from test_plugin import REMEASURE_TESTS

    monkeypatch.setattr(device, "cpu_wait_ns", lambda: 0)
    monkeypatch.delenv("OPPROF_MODE", raising=False)
    pytester.makepyfile(test_re=REMEASURE_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    readings = []

    def first_capture_waits() -> int:
        # read around each capture: after the warm-up and after the steps; the test file counts
        # its calls, and the first measurement ends with call 8
        calls = sys.modules["test_re"].calls["n"] if "test_re" in sys.modules else 0
        readings.append(calls)
        return time.perf_counter_ns() * 9 // 10 if calls <= 8 else 0

    monkeypatch.setattr(device, "cpu_wait_ns", first_capture_waits)
    monkeypatch.setenv("OPPROF_MODE", "burst-4x")
    out = tmp_path / "run.json"
    result = run(pytester, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["test_re.py::test_mm: measured twice: both slower than the baseline"])
    (test,) = json.loads(out.read_text())["tests"]
    assert test["cpu_wait"] == pytest.approx(0.9, abs=0.01)  # the report shows the first measurement
    (verdict,) = [v for v in test["baseline"]["verdicts"] if v["op"] == "aten::mm"]
    assert verdict["status"] == "regressed" and "widened" not in verdict["message"]
    assert readings[-4:] == [2, 8, 10, 16]  # both measurements were read


def test_gpu_throttled_during_the_confirmation_makes_time_verdicts_warnings(steady_references, pytester, monkeypatch):
    """Healthy clocks in the first measurement, a thermal throttle in the second one: the pooled
    samples are not trusted either, so the slowdown is a warning and the test passes."""
    from test_plugin import REMEASURE_TESTS

    monkeypatch.setattr(device, "cpu_wait_ns", lambda: 0)
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    module = fake_nvml.make({"sm_clock": 1755})
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.delenv("OPPROF_MODE", raising=False)
    pytester.makepyfile(test_re=REMEASURE_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)

    def reasons(handle: object) -> int:  # hw_thermal_slowdown after the first measurement (8 calls)
        return 0x40 if "test_re" in sys.modules and sys.modules["test_re"].calls["n"] > 8 else 0

    monkeypatch.setattr(module, "nvmlDeviceGetCurrentClocksEventReasons", reasons)
    monkeypatch.setenv("OPPROF_MODE", "slow")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*aten::mm: * ms/step vs baseline * (*not failed: unreliable run (GPU clock event hw_thermal_slowdown))*"]
    )
    monkeypatch.setattr(module, "nvmlDeviceGetCurrentClocksEventReasons", lambda handle: 0)
    run(pytester, "--opprof").assert_outcomes(failed=1)  # the same slowdown with healthy clocks fails


def test_no_warnings_under_w_error(pytester, monkeypatch):
    """Device facts, NVML (faked here, with refused calls) and the capture raise no warning."""
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    refused = {"nvmlDeviceGetPowerManagementLimit": "NoPermission", "nvmlDeviceGetMigMode": "NotSupported"}
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.make(failing=refused))
    pytester.makepyfile(MEASURED)
    # (-p no:benchmark: pytest-benchmark, where installed, warns at configure under xdist)
    result = run(pytester, "-W", "error", "-p", "no:benchmark", "--opprof")
    result.assert_outcomes(passed=1, warnings=0)  # a warning under -W error would be an error
