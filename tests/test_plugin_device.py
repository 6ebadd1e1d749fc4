"""End to end: the device key (option, ini, hook), the header's facts, a faked GPU with throttled
clocks (unreliable run), and environment differences against a baseline."""

from __future__ import annotations

import json
import sys

import fake_nvml
import pytest

pytest.importorskip("torch")

from pytest_opprof import device  # noqa: E402

MEASURED = """
import torch
def test_x(opprof):
    opprof.run(lambda: torch.ones(8).add(1), warmup=1, steps=3)
"""


@pytest.fixture(autouse=True)
def _deterministic(fake_clock):
    """Every capture in these runs is timed by the fake clock: no test here reads real time."""
    return fake_clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def keys_written(pytester: pytest.Pytester) -> list[str]:
    root = pytester.path / ".opprof"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_a_system_that_keeps_no_cpu_wait_says_contention_cannot_be_told(pytester, monkeypatch):
    """On macOS and Windows (no /proc) the threads' CPU wait is unknown: no contention warning can
    fire and a baseline recorded under load is not marked, so one line says so, once a run (a
    review: silent there); on Linux, where the wait is read, no such line."""
    if not device.cpu_wait_known():
        pytest.skip("this Linux kernel keeps no schedstat: the line is this machine's")
    from pytest_opprof.errors import NO_CPU_WAIT

    pytester.makepyfile(MEASURED)
    assert NO_CPU_WAIT not in run(pytester, "--opprof").stdout.str()
    monkeypatch.setattr(device, "cpu_wait_known", lambda: False)
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count(NO_CPU_WAIT) == 1
    assert NO_CPU_WAIT not in run(pytester).stdout.str()  # nothing measured, nothing to say


def test_a_test_on_apples_gpu_is_measured_with_a_warning_and_judged_by_its_steps(pytester, monkeypatch):
    """A model on Apple's GPU (MPS), which torch's profiler does not trace: the measured test passes
    with an mps_untraced warning line that says op times are the CPU's queueing and to judge the
    step; a CPU test beside it has none. (This machine has no MPS: torch says it holds tensors.)"""
    import torch

    from pytest_opprof.analysis.checks import mps_untraced_check

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 4096)
    monkeypatch.setattr(torch.mps, "synchronize", lambda: None)
    pytester.makepyfile(
        MEASURED + "    opprof.assert_total_below(ms=1000)\n",
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*::test_x: warning mps_untraced: {mps_untraced_check().message}"])
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 0)
    assert "mps_untraced" not in run(pytester, "--opprof").stdout.str()


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
        [
            "*--opprof-device-key: 'My GPU/1' is not a device key: a lowercase letter or digit, then lowercase *(from command line)"
        ]
    )


def test_hook_returning_a_bad_key_is_a_usage_error(pytester):
    """A bad key from the hook is one usage line naming the hook's file and line (an audit's named
    no file, where a hook that raised was named with its line)."""
    pytester.makeconftest("def pytest_opprof_device_key(config, facts):\n    return 'A100 box'\n")
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*pytest_opprof_device_key at conftest.py:1 returned 'A100 box': expected a device key*"]
    )
    assert keys_written(pytester) == []


def test_hook_that_raises_is_one_usage_line_naming_its_line(pytester):
    """A hook tripping over a fact that is None (cpu_model on some machines) stops the run with one
    line: the exception, the hook's file and line, the fix; no INTERNALERROR traceback."""
    pytester.makeconftest(
        """
        def pytest_opprof_device_key(config, facts):
            model = None
            return "ci-" + model.split()[0]
        """
    )
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    conftest = pytester.path / "conftest.py"
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest_opprof_device_key raised AttributeError: 'NoneType' object has no attribute 'split' "
            f"at {conftest}:3; fix the hook (a fact that cannot be read is None) or return None for the default key"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
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
            "time verdicts are inconclusive, and no baseline is recorded from it",
            "opprof: 1 baseline not written: unreliable GPU clocks (GPU clock event hw_thermal_slowdown)",
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


def recorded_with(pytester: pytest.Pytester, fact: str, value: str) -> object:
    """MEASURED's baseline recorded, then its environment `fact` edited to `value`; this machine's value."""
    pytester.makepyfile(MEASURED)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    data = json.loads(path.read_text())
    here, data["environment"][fact] = data["environment"][fact], value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return here


def test_baseline_from_other_software_is_reported_not_failed(pytester):
    recorded_with(pytester, "torch", "2.4.0")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    import torch

    result.stdout.fnmatch_lines(
        [f"*test_x: environment differs from the baseline: torch 2.4.0 -> {torch.__version__} [.opprof/*"]
    )


def test_a_baseline_from_another_cpu_model_under_the_key_is_reported(pytester):
    """Every x86-64 CPU shares `cpu-x86_64`: a baseline recorded on another CPU model says so
    (a trial's failed on time with no word of the machine); one fact may be unknown (`null`)."""
    here = recorded_with(pytester, "cpu_model", "Intel Xeon Platinum 8375C")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"*test_x: environment differs from the baseline: cpu_model Intel Xeon Platinum 8375C -> {here or 'none'} [*"]
    )


UPGRADED = """
import os
import torch
def test_a(opprof):
    opprof.run(lambda: torch.ones(8).add(1), warmup=1, steps=3)
def test_b(opprof):
    def step():
        torch.ones(8).add(1)
        if os.environ.get("EXTRA"):
            torch.ones(8).mul(2)  # what a new torch may add as well as new code
    opprof.run(step, warmup=1, steps=3)
def test_c(opprof):
    opprof.run(lambda: torch.ones(4).add(1), warmup=1, steps=3)
"""


def test_a_torch_upgrade_is_one_run_line_and_named_beside_a_structure_change(pytester, monkeypatch):
    """Baselines recorded on another torch: one run line for the tests alike, with the command
    that records them on this setup (a trial's upgrade printed the same line for each of 13
    tests, every run), each test's own with -v; a structure change says torch differs too."""
    import torch

    pytester.makepyfile(test_up=UPGRADED)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)
    for path in (pytester.path / ".opprof").rglob("test_[ab].json"):  # test_c keeps this torch
        data = json.loads(path.read_text())
        data["environment"]["torch"] = "2.11.0"
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    monkeypatch.setenv("EXTRA", "1")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_up.py::test_b: torch differs from the baseline's (2.11.0 -> *): the change may be torch's own, not the code's",
            "test_up.py::test_b: if the change is intended, record it: pytest --opprof-update-baseline test_up.py::test_b *",
            f"opprof: environment differs from the baselines of 2 tests: torch 2.11.0 -> {torch.__version__}; their times "
            "are judged across it (a structure change may be the new setup's own); where this is the setup from now on, "
            "record them on it (-v: each test's line): pytest --opprof-update-baseline=all test_up.py::test_a test_up.py::test_b",
        ]
    )
    assert "test_up.py::test_a: environment differs" not in result.stdout.str()
    assert "test_up.py::test_c: environment" not in result.stdout.str()
    # every test the run measured, a run that picked none: the bare command records the same tests
    for path in (pytester.path / ".opprof").rglob("test_c.json"):
        data = json.loads(path.read_text())
        data["environment"]["torch"] = "2.11.0"
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    monkeypatch.delenv("EXTRA")
    whole = run(pytester, "--opprof").stdout.str()
    assert whole.count("record them on it (-v: each test's line): pytest --opprof-update-baseline=all\n") == 1
    picked = run(pytester, "--opprof", "-k", "test_").stdout.str()  # -k picks (all three, as it happens)
    assert "pytest --opprof-update-baseline=all test_up.py::test_a test_up.py::test_b test_up.py::test_c\n" in picked
    for path in (pytester.path / ".opprof").rglob("test_c.json"):
        data = json.loads(path.read_text())
        data["environment"]["torch"] = torch.__version__
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    monkeypatch.setenv("EXTRA", "1")
    verbose = run(pytester, "--opprof", "-v").stdout.str()
    assert "test_up.py::test_a: environment differs from the baseline: torch 2.11.0 -> " in verbose
    assert "opprof: environment differs from the baselines of" not in verbose
    # the =all run that records them on this torch is not told to run =all (a review)
    recorded = run(pytester, "--opprof-update-baseline=all")
    assert "opprof: environment differs from the baselines of" not in recorded.stdout.str()
    assert "environment differs" not in run(pytester, "--opprof").stdout.str()


def test_cpu_contention_reaches_the_verdict(remeasure_project, fake_clock, monkeypatch, tmp_path):
    """The share of the capture our threads waited for a CPU goes into the JSON; a slowdown
    under it is inconclusive, with the reason, in the JSON's verdicts too."""
    fake_clock.host_step_ns = 100_000_000  # 50 ms waited: enough to explain the slowdown
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)  # half of every ns
    fake_clock.costs["aten::mm"] = 6_400_000
    out = tmp_path / "run.json"
    result = run(remeasure_project, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(passed=1)
    (test,) = json.loads(out.read_text())["tests"]
    assert test["cpu_wait"] == pytest.approx(0.5, abs=0.01)
    (verdict,) = [v for v in test["baseline"]["verdicts"] if v["op"] == "aten::mm"]
    assert verdict["status"] == "inconclusive"
    assert verdict["why"] == "CPU contention: the test's threads waited for a CPU 50% of the capture"
    assert verdict["fix"].startswith("rerun on a quiet machine")  # what to do, in the JSON report too


def test_a_baseline_recorded_under_contention_is_called_out(pytester, monkeypatch, fake_clock):
    """Recording while threads waited for a CPU half the capture writes the baseline (its
    structure is exact) and says its CPU times may be inflated; a calm recording says nothing. A
    test whose time is never judged (under 5 steps) is not asked to record again in later runs."""
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    pytester.makepyfile(MEASURED.replace("steps=3", "steps=5"))
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*::test_x: baseline recorded while its threads waited for a CPU 50% of the capture: its CPU times "
            "may be inflated and hide later slowdowns; record it again on a quiet machine (without -n on a small "
            "runner): pytest --opprof-update-baseline=all test_a_baseline_recorded_under_contention_is_called_out.py::test_x",
            "opprof: baselines written: 1 new; *",
        ]
    )
    (written,) = (pytester.path / ".opprof").rglob("test_x.json")
    assert json.loads(written.read_text())["capture"]["cpu_wait"] == 0.5
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: 0)
    result = run(pytester, "--opprof")  # a later calm run says it too (a trial's said so only while recording)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline recorded while its threads waited for a CPU 50% of the capture (capture.cpu_wait): "
            "its times may be inflated and hide slowdowns, and re-recording keeps it; record it again on a quiet "
            "machine: pytest --opprof-update-baseline=all *::test_x",
        ]
    )
    result = run(pytester, "--opprof-update-baseline=all")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 rewritten; *"])
    assert "waited for a CPU" not in result.stdout.str()
    assert "cpu_wait" not in json.loads(written.read_text())["capture"]
    assert "waited for a CPU" not in run(pytester, "--opprof").stdout.str()
    pytester.makepyfile(MEASURED)  # 3 steps: its times judge nothing
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    run(pytester, "--opprof-update-baseline=all").assert_outcomes(passed=1)
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: 0)
    result = run(pytester, "--opprof")
    assert "waited for a CPU" not in result.stdout.str() and "time not judged for 1 test" in result.stdout.str()


def test_contention_beside_a_busy_thread_of_the_tests_own_names_it(pytester, monkeypatch, fake_clock):
    """A trial's test ran a busy Python thread of its own, and the contention warning blamed
    other load on the machine and asked for a quiet one: the thread (its CPU time faked here) is
    named as a cause, with the fix to stop it, in the run and in the trace read back."""
    used = iter(range(0, 10**12, 100_000_000))  # 100 ms of CPU more at each reading
    monkeypatch.setattr(device, "python_threads_cpu_ns", lambda skip: {5: ("busy-loop", next(used))})
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    pytester.makepyfile(MEASURED.replace("steps=3", "steps=3); assert False, ('fail'"))
    result = run(pytester, "--opprof", "--opprof-trace-dir=traces")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*::test_x: warning contention: the test's threads waited for a CPU 50% of the capture: the test's own "
            "Python threads (busy-loop: 100.0 ms of CPU), or other load on the machine, inflated its CPU times; "
            "*; stop those threads before the capture, or rerun on a quiet machine",
        ]
    )
    (trace,) = (pytester.path / "traces").rglob("*.json*")
    from pytest_opprof import load_trace

    (check,) = [c for c in load_trace(trace).checks if c.name == "contention"]
    assert "the test's own Python threads (busy-loop: 100.0 ms of CPU)" in check.message


def test_contention_beside_the_tests_own_child_processes_names_them(pytester, monkeypatch, fake_clock):
    """A trial's DataLoader workers and second rank made the test's threads wait for a CPU, and
    the warning blamed other load on the machine and asked for a quiet one, which none is: the
    test's own child processes (counted around the capture) are named, with a fix that helps."""
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    readings = iter(range(10**6))  # each reading: two children that used CPU since the last, one idle
    monkeypatch.setattr(device, "child_cpu_ticks", lambda: {"7": next(readings), "8": next(readings), "9": 1})
    pytester.makepyfile(MEASURED)
    result = run(pytester, "--opprof")
    result.stdout.fnmatch_lines(
        [
            "*::test_x: warning contention: the test's threads waited for a CPU 50% of the capture: the test's own 2 "
            "child processes (DataLoader workers, ranks it started), or other load on the machine, inflated its CPU "
            "times; *; give them fewer CPUs than the machine has (num_workers), or rerun on a quiet machine",
        ]
    )
    monkeypatch.setattr(device, "child_cpu_ticks", lambda: None)  # no /proc: as before
    assert "child process" not in run(pytester, "--opprof").stdout.str()


def test_a_contended_first_measurement_is_not_what_the_recording_writes(pytester, monkeypatch, fake_clock):
    """A trial on a loaded runner: the first measurement waited for a CPU and the file held it.
    The recording's further measurements were calm: the file holds the first of them, and the
    run says so (the first measurement's contention warning stays: its assertions judged it)."""

    def waited() -> int:  # half the wall in CPU wait until the first measurement's events are read
        return fake_clock.now_ns // 2 if fake_clock.captures == 0 else 0

    monkeypatch.setattr(device, "cpu_wait_ns", waited)
    pytester.makepyfile(
        """
        import torch
        def test_x(opprof):
            opprof.run(torch.mm, torch.ones(16, 16), torch.ones(16, 16), warmup=1, steps=8)
        """
    )
    out = pytester.path / "r.json"
    result = run(pytester, "--opprof-update-baseline", f"--opprof-json={out}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*::test_x: baseline written from measurement 2, the first whose threads did not wait for a CPU: the "
            "first waited 50% of the capture (the op table shows the first)",
        ]
    )
    assert "baseline recorded while" not in result.stdout.str()
    (test,) = json.loads(out.read_text())["tests"]
    assert (test["cpu_wait"], test["baseline"]["written_from"], test["baseline"]["written_wait"]) == (0.5, 2, 0.0)
    (written,) = (pytester.path / ".opprof").rglob(
        "test_x.json"
    )  # the calm one's own workload reference (a review's had none)
    assert json.loads(written.read_text())["workload_reference"]["op"] == "aten::mm"
    # a run that writes nothing says so: null, not the `1` of a file written from the first (a data-consumer trial)
    run(pytester, "--opprof", f"--opprof-json={out}").assert_outcomes(passed=1)
    (test,) = json.loads(out.read_text())["tests"]
    assert test["baseline"]["status"] == "compared"
    assert (test["baseline"]["written_from"], test["baseline"]["written_wait"], test["baseline"]["recorded_from"]) == (
        None,
        None,
        0,
    )


def test_confirmation_is_judged_by_the_calmer_measurements_cpu_wait(
    remeasure_project, fake_clock, monkeypatch, tmp_path
):
    """A calm first measurement 32x slower triggers confirmations, each 4x slower while our
    threads waited for a CPU 90% of it: the pooled samples are judged by the calmer
    measurement's wait, so the contended confirmations excuse nothing and the test fails,
    confirmed."""
    reads = fake_clock.host_reads  # 1 ms apart; from here, 2 around each capture:
    recorded = len(reads)  # the fixture's recording's

    def wait_ns() -> int:  # the abandoned whole call, the first measurement, then the confirmations
        return 900_000 * max(0, (len(reads) - recorded - 4) // 2)  # 90% of each confirmation's 1 ms

    monkeypatch.setattr(device, "cpu_wait_ns", wait_ns)
    fake_clock.plan = [32.0, 4.0, 4.0, 4.0]
    out = tmp_path / "run.json"
    result = run(remeasure_project, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["test_re.py::test_mm: measured 4 times, with pauses between: each differs from the baseline; *"]
    )
    assert len(reads) - recorded == 10
    (test,) = json.loads(out.read_text())["tests"]
    (verdict,) = [v for v in test["baseline"]["verdicts"] if v["op"] == "aten::mm"]
    assert verdict["status"] == "regressed" and verdict["why"] is None


def test_gpu_throttled_during_the_confirmation_makes_time_inconclusive(remeasure_project, fake_clock, monkeypatch):
    """Healthy clocks in the first measurement, a thermal throttle in the second one: the pooled
    samples are not trusted either, so the slowdown is inconclusive and the test passes."""
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    module = fake_nvml.make({"sm_clock": 1755})
    monkeypatch.setitem(sys.modules, "pynvml", module)
    remeasure_project.path.joinpath(".opprof", "cpu-x86_64").rename(remeasure_project.path / ".opprof" / "nvidia-h200")
    samples = {"n": 0}

    def reasons(handle: object) -> int:  # hw_thermal_slowdown from the third sample (the confirmation)
        samples["n"] += 1
        return 0x40 if samples["n"] > 2 else 0

    monkeypatch.setattr(module, "nvmlDeviceGetCurrentClocksEventReasons", reasons)
    fake_clock.costs["aten::mm"] = 800_000
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*time inconclusive for aten::mm*: unreliable GPU clocks (GPU clock event hw_thermal_slowdown)*"]
    )
    monkeypatch.setattr(module, "nvmlDeviceGetCurrentClocksEventReasons", lambda handle: 0)
    run(remeasure_project, "--opprof").assert_outcomes(failed=1)  # the same slowdown with healthy clocks fails


def test_no_warnings_under_w_error(pytester, monkeypatch):
    """Device facts, NVML (faked here, with refused calls) and the capture raise no warning."""
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    refused = {"nvmlDeviceGetPowerManagementLimit": "NoPermission", "nvmlDeviceGetMigMode": "NotSupported"}
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.make(failing=refused))
    pytester.makepyfile(MEASURED)
    # (-p no:benchmark: pytest-benchmark, where installed, warns at configure under xdist)
    result = run(pytester, "-W", "error", "-p", "no:benchmark", "--opprof")
    result.assert_outcomes(passed=1, warnings=0)  # a warning under -W error would be an error


def test_a_baseline_copied_into_another_device_keys_folder_is_compared_and_the_key_reported(pytester):
    """A file recorded as `ci-a10` found in the `ci-t4` folder (copied by hand as a starting
    point): compared, and the device key difference reported as an environment verdict, not
    failed (design: environment differences are reported); the file is kept."""
    pytester.makepyfile(MEASURED)
    run(pytester, "--opprof-update-baseline", "--opprof-device-key=ci-a10").assert_outcomes(passed=1)
    (recorded,) = (pytester.path / ".opprof" / "ci-a10").rglob("*.json")
    copied = pytester.path / ".opprof" / "ci-t4" / recorded.relative_to(pytester.path / ".opprof" / "ci-a10")
    copied.parent.mkdir(parents=True)
    copied.write_bytes(recorded.read_bytes())
    result = run(pytester, "--opprof", "--opprof-device-key=ci-t4")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_x: environment differs from the baseline: device ci-a10 -> ci-t4 [.opprof/ci-t4/*"]
    )
    assert copied.read_bytes() == recorded.read_bytes()


def test_traces_the_plugin_writes_carry_its_device_key_for_compare(pytester, capsys):
    """A trace exported under --opprof-trace-dir names the run's device key in its header, so
    `opprof compare` of two such traces says which machine each came from (it said `unknown`
    for every CPU trace, and for GPU traces of live captures)."""
    from pytest_opprof.cli import main

    pytester.makepyfile(MEASURED)
    run(pytester, "--opprof", "--opprof-trace=all", "--opprof-trace-dir=traces", "--opprof-device-key=ci-box")
    (trace,) = (pytester.path / "traces").iterdir()
    capsys.readouterr()
    assert main(["compare", str(trace), str(trace), "--json"]) == 0
    sides = json.loads(capsys.readouterr().out)
    assert sides["a"]["device_key"] == sides["b"]["device_key"] == "ci-box"
    # and its machine and torch facts, as a baseline's (a trial's compare --json had them all null)
    import torch

    facts = sides["a"]["environment"]
    assert facts["torch"] == torch.__version__ and facts["cpu_model"] and facts["thread_setup"]


LOADED_PAIR = """
import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)


def test_one(opprof):
    opprof.run(lambda: torch.mm(a, b), warmup=2, steps=6)


def test_two(opprof):
    opprof.run(lambda: torch.mm(a, b), warmup=2, steps=6)
"""


def test_a_loaded_run_says_contention_once_for_its_tests(pytester, fake_clock, monkeypatch):
    """A trial's loaded runner printed two lines per test saying the same wait: recording under
    contention, and the comparison's inconclusive verdicts, now each get one run line naming the
    tests (the command that records them again, quoted for the shell); -v keeps each test's line."""
    fake_clock.costs["aten::mm"] = 200_000
    fake_clock.host_step_ns = 100_000_000  # 50 ms waited a step: enough to explain the slowdown
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)  # half of every ns
    pytester.makepyfile(test_pair=LOADED_PAIR)
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "opprof: 2 baselines recorded while their threads waited for a CPU up to 50% of the capture: their CPU "
            "times may be inflated and hide later slowdowns; record them again on a quiet machine (without -n on a "
            "small runner): pytest --opprof-update-baseline=all",  # every test of a run that picked none
        ]
    )
    picked = run(pytester, "--opprof-update-baseline=all", "-x")  # -x may stop before tests it then left out
    picked.stdout.fnmatch_lines(
        ["*small runner): pytest --opprof-update-baseline=all test_pair.py::test_one test_pair.py::test_two"]
    )
    out = result.stdout.str()
    assert "::test_one: baseline recorded while" not in out and "warning contention" not in out
    fake_clock.costs["aten::mm"] = 6_400_000
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "opprof: time inconclusive in 2 tests for CPU contention: their threads waited for a CPU up to 50% of "
            "the capture; neither passed nor failed (--opprof-strict makes this an error); rerun on a quiet machine "
            "(no other load, no -n on a small runner) for a time verdict: test_pair.py::test_one, "
            "test_pair.py::test_two (-v: each test's line)",
        ]
    )
    assert "test_pair.py::test_one: time inconclusive" not in result.stdout.str()
    result = run(pytester, "--opprof", "-v")
    result.stdout.fnmatch_lines(
        ["test_pair.py::test_one: aten::mm: *inconclusive: CPU contention: the test's threads waited for a CPU 50%*"]
    )
    assert "opprof: time inconclusive in 2 tests" not in result.stdout.str()


FAKE_GPUS = """
import os
from types import SimpleNamespace

import torch

# three GPUs, the third of another model; CUDA reads as never initialised, so captures stay on the CPU
NAMES = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "Tesla T4"]
state = {"current": 0}
torch.cuda.is_available = lambda: True
torch.cuda.is_initialized = lambda: False
torch.cuda.device_count = lambda: len(NAMES)
torch.cuda.get_device_name = lambda index=None: NAMES[state["current"] if index is None else index]
torch.cuda.set_device = lambda index: state.update(current=index)
torch.cuda.current_device = lambda: state["current"]
torch.cuda.get_device_properties = lambda i: SimpleNamespace(name=NAMES[i], major=9, minor=0, uuid=None)
"""

ON_WHICH_GPU = """
import os
import torch

def test_x(opprof):
    opprof.run(lambda: torch.ones(8).add(1), warmup=1, steps=3)
    worker = os.environ["PYTEST_XDIST_WORKER"]
    open(f"gpu-{worker}.txt", "w").write(str(torch.cuda.current_device()))
"""


def test_each_xdist_worker_measures_on_a_gpu_of_its_own(pytester, monkeypatch):
    """DESIGN: one GPU per worker when several are visible. Worker gwN takes the Nth GPU of
    those named as GPU 0 (the T4 would give its tests a device key of their own), before the
    facts are read; the header says so, counting those GPUs. A project that chose its GPU itself
    keeps it."""
    import torch

    pytest.importorskip("xdist")
    pytester.makeconftest(FAKE_GPUS)
    pytester.makepyfile(test_gpu=ON_WHICH_GPU)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof", "-n", "3", "--dist", "each")
    result.assert_outcomes(passed=3)
    chosen = {w: (pytester.path / f"gpu-{w}.txt").read_text() for w in ("gw0", "gw1", "gw2")}
    assert chosen == {"gw0": "0", "gw1": "1", "gw2": "0"}
    result.stdout.fnmatch_lines(
        [
            "opprof: 2 GPUs named NVIDIA H100 80GB HBM3: each xdist worker measures on one of them (worker gwN on the Nth*"
        ]
    )
    # where CUDA is already initialised (a conftest called torch.cuda.set_device), that choice stands
    chosen_by_project = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", chosen_by_project.append)
    assert device.use_worker_gpu("gw1") is None and chosen_by_project == []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA A10")
    assert device.use_worker_gpu("gw1") == 1 and chosen_by_project == [1]


@pytest.mark.parametrize(
    ("worker", "names", "gpu"),
    [
        ("gw0", ["A100", "A100"], 0),
        ("gw3", ["A100", "A100"], 1),
        ("gw2", ["A100", "A100", "T4"], 0),  # the T4 is left out: another model, another key
        ("gw1", ["A100"], None),
        ("gw1", [], None),
        ("master", ["A100", "A100"], None),
    ],
)
def test_the_gpu_a_worker_takes(worker, names, gpu):
    """Worker gwN: the Nth of the GPUs named as GPU 0, wrapping around; none for one GPU or a
    worker id that is not gw<N>."""
    assert device.worker_gpu(worker, names) == gpu


FORMER_KEYS = [
    (
        {**fake_nvml.torch_gpu("AMD Radeon Graphics", hip="6.2.41133"), "gpu_arch": "gfx90a"},
        None,
        "amd-radeon-graphics",
        "amd-radeon-graphics-gfx90a",
        "which holds AMD baselines under this GPU's former key; its key is amd-radeon-graphics-gfx90a now, which "
        "keeps AMD GPUs torch names alike apart: where they were recorded on this GPU's kind, git mv "
        ".opprof/amd-radeon-graphics .opprof/amd-radeon-graphics-gfx90a)*",
    ),
    (
        {"torch": "2.13.0", "cuda": None, "hip": None},
        "AMD64",
        "cpu-amd64",
        "cpu-x86_64",
        "which holds baselines under this CPU's former key; its key is cpu-x86_64 now, Windows' AMD64 and Linux's "
        "and macOS's x86_64 being one kind of CPU: git mv .opprof/cpu-amd64 .opprof/cpu-x86_64)*",
    ),
]


@pytest.mark.parametrize(("facts", "machine", "former", "key", "header"), FORMER_KEYS, ids=["amd-gpu", "windows-cpu"])
def test_baselines_under_a_devices_former_key_are_kept_and_told_how_to_move(
    pytester, monkeypatch, facts, machine, former, key, header
):
    """An AMD GPU torch names without a model number is keyed by its architecture now
    (`amd-radeon-graphics-gfx90a`), a Windows x86-64 CPU (`AMD64`) by `cpu-x86_64`, as Linux's. A
    project whose baselines lie under the former key keeps reading and writing them, the header
    naming the `git mv` that moves them (upgrade trials' runs found no baseline: every test passed
    uncompared, and was told to record all anew); moved, they compare with no environment line."""
    monkeypatch.setattr(device, "_torch_facts", lambda: facts)
    pytester.makepyfile(test_m=MEASURED)
    run(pytester, "--opprof-update-baseline", "--opprof-device-key", former).assert_outcomes(passed=1)
    if machine:
        monkeypatch.setattr(device.platform, "machine", lambda: machine)
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"opprof: device key {former} (from .opprof/{former}, {header}"])
    assert keys_written(pytester) == [former]
    (pytester.path / ".opprof" / former).rename(pytester.path / ".opprof" / key)
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"opprof: device key {key}; CPU ops always*"])
    assert "environment differs" not in result.stdout.str()


def test_an_nvml_fact_that_could_not_be_read_is_no_environment_difference(pytester, monkeypatch):
    """A baseline recorded where NVML could not read the driver (a MIG instance before opprof found
    its GPU) holds `driver: null`: read now, that is no difference (an upgrade trial's every test
    said `driver none -> 550.54.15`, and only =all cleared it). torch's own facts stay compared."""
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml.make({"sm_clock": 1755}))
    pytester.makepyfile(test_m=MEASURED)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    path = next((pytester.path / ".opprof").rglob("test_x.json"))
    data = json.loads(path.read_text())
    assert data["environment"]["driver"] is not None
    data["environment"]["driver"] = data["environment"]["cuda_driver"] = None
    path.write_text(json.dumps(data))
    result = run(pytester, "--opprof")
    assert "environment differs" not in result.stdout.str()
    data["environment"]["torch"] = "2.11.0"
    path.write_text(json.dumps(data))
    run(pytester, "--opprof").stdout.fnmatch_lines(["*environment differs from the baseline*torch 2.11.0 -> 2.13.0*"])
