"""Device facts (torch, NVML through a fake pynvml), the device key, clock samples."""

from __future__ import annotations

import os
import platform
import sys
import threading
import uuid as uuid_module
import warnings
from types import SimpleNamespace

import fake_nvml
import pytest

from pytest_opprof import device
from pytest_opprof.device import ClockSample, Nvml, device_facts, device_key, unreliable_reason

NVML_FACTS = (
    "gpu_uuid",
    "driver",
    "cuda_driver",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "mem_clock_mhz",
    "mem_clock_max_mhz",
    "power_limit_w",
    "temperature_c",
    "persistence_mode",
    "mig_mode",
    "clock_event_reasons",
)


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch reports an H200; `install(module)` puts a fake pynvml in place."""
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu())

    def install(module):
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


def test_no_gpu_facts_and_key_on_this_machine(monkeypatch):
    """The real path without a GPU: GPU facts null, key cpu-<arch>, NVML never opened."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    nvml = Nvml()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning of any kind (-W error)
        facts, handle = device_facts(nvml)
    assert handle is None
    assert "pynvml" not in sys.modules  # NVML absence costs nothing: not even imported
    assert facts["gpu_count"] == 0
    assert all(facts[k] is None for k in ("gpu_name", "gpu_capability", *NVML_FACTS))
    assert facts["torch"] == torch.__version__
    assert facts["torch_threads"] == torch.get_num_threads()
    assert facts["cpu_count"] >= 1
    assert set(facts) == set(device.FACT_KEYS)
    assert device_key(facts) == f"cpu-{device.slug(platform.machine())}"


def test_fake_gpu_gives_every_nvml_fact_and_the_key(fake_gpu):
    module = fake_gpu(fake_nvml.make({"sm_clock": 1755, "reasons": 0x4 | 0x1}))
    nvml = Nvml()
    facts, handle = device_facts(nvml)
    assert handle is not None
    assert facts["gpu_name"] == "NVIDIA H200"
    assert facts["gpu_capability"] == "9.0"
    assert facts["gpu_uuid"] == fake_nvml.H200["uuid"]
    assert facts["driver"] == "550.54.15"
    assert facts["cuda_driver"] == "12.4"
    assert (facts["sm_clock_mhz"], facts["sm_clock_max_mhz"]) == (1755, 1980)
    assert (facts["mem_clock_mhz"], facts["mem_clock_max_mhz"]) == (3201, 3201)
    assert facts["power_limit_w"] == 700.0
    assert facts["temperature_c"] == 41
    assert facts["persistence_mode"] is True
    assert facts["mig_mode"] is False
    assert facts["clock_event_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert device_key(facts) == "nvidia-h200"
    # one NVML session for facts and clock samples, shut down once at the end
    nvml.clock_sample(handle)
    assert module.calls == {"init": 1, "shutdown": 0}
    nvml.close()
    assert module.calls == {"init": 1, "shutdown": 1}


def test_a_torch_without_the_gpus_uuid_gets_nvmls(fake_gpu, monkeypatch):
    """torch before 2.2 gives no UUID in the device properties: NVML opens the GPU by index and
    its UUID is the fact (a worker's GPU and a MIG slice are told apart by it)."""
    monkeypatch.setattr(device, "_torch_facts", lambda: {**fake_nvml.torch_gpu(), "gpu_uuid": None})
    fake_gpu(fake_nvml.make())
    facts, handle = device_facts(Nvml())
    assert handle is not None and facts["gpu_uuid"] == fake_nvml.H200["uuid"]


@pytest.mark.parametrize("error", ["LibraryNotFound", "NoPermission", "NotSupported"])
def test_nvml_failing_to_start_leaves_facts_null_without_warnings(fake_gpu, error):
    fake_gpu(fake_nvml.make(init_error=error))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        facts, handle = device_facts(Nvml())
    assert handle is None
    assert all(facts[k] is None for k in NVML_FACTS if k != "gpu_uuid")
    assert facts["gpu_name"] == "NVIDIA H200"  # torch's facts still there
    assert facts["gpu_uuid"] == fake_nvml.H200["uuid"]
    assert device_key(facts) == "nvidia-h200"


@pytest.mark.parametrize("error", ["NotSupported", "NoPermission"])
def test_a_call_the_driver_refuses_is_null_and_the_rest_is_read(fake_gpu, error):
    failing = {
        "nvmlDeviceGetPowerManagementLimit": error,
        "nvmlDeviceGetTemperature": error,
        "nvmlDeviceGetMigMode": error,
        "nvmlDeviceGetCurrentClocksEventReasons": error,
        "nvmlDeviceGetCurrentClocksThrottleReasons": error,
    }
    fake_gpu(fake_nvml.make(failing=failing))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        facts, _ = device_facts(Nvml())
    for key in ("power_limit_w", "temperature_c", "mig_mode", "clock_event_reasons"):
        assert facts[key] is None, key
    assert facts["driver"] == "550.54.15"
    assert facts["sm_clock_max_mhz"] == 1980


def test_older_nvidia_ml_py_reads_throttle_reasons(fake_gpu):
    fake_gpu(fake_nvml.make({"reasons": 0x40}, old_api=True))
    facts, _ = device_facts(Nvml())
    assert facts["clock_event_reasons"] == ["hw_thermal_slowdown"]


def test_gpu_found_by_uuid_not_by_index(fake_gpu, monkeypatch):
    """With CUDA_VISIBLE_DEVICES remapping, only the UUID says which NVML device torch uses."""
    fake_gpu(fake_nvml.make())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu(uuid="GPU-other"))
    facts, handle = device_facts(Nvml())
    assert handle is None  # unknown UUID, remapped indices: better no facts than another GPU's
    assert facts["driver"] is None


def test_deprecated_pynvml_distribution_warning_is_silenced(fake_gpu, tmp_path, monkeypatch):
    """The deprecated `pynvml` distribution warns on import; under -W error that must not raise."""
    (tmp_path / "pynvml.py").write_text(
        "import warnings\n"
        "warnings.warn('pynvml is deprecated', FutureWarning)\n"
        "def nvmlInit(): pass\n"
        "def nvmlShutdown(): pass\n"
    )
    monkeypatch.setitem(sys.modules, "pynvml", None)  # undone at the end: the stub must not outlive the test
    monkeypatch.delitem(sys.modules, "pynvml")
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nvml = Nvml()
        assert nvml.lib is not None
        assert nvml.call("nvmlDeviceGetCount") is None  # missing function: null, no exception


@pytest.mark.parametrize(
    ("name", "hip", "key"),
    [
        ("NVIDIA H200", None, "nvidia-h200"),
        ("Tesla T4", None, "nvidia-tesla-t4"),
        ("NVIDIA A10", None, "nvidia-a10"),
        ("NVIDIA A100-SXM4-80GB", None, "nvidia-a100-sxm4-80gb"),
        ("AMD Instinct MI250X / MI250", "6.2", "amd-instinct-mi250"),
        ("AMD Instinct MI300X", "6.2", "amd-instinct-mi300x"),
    ],
)
def test_device_key_slugs(name, hip, key):
    assert device_key({"gpu_name": name, "hip": hip}) == key


def test_device_key_ignores_volatile_facts(fake_gpu):
    keys = set()
    for gpu in ({}, {"sm_clock": 345, "temperature": 83, "reasons": 0x20}, {"driver": "560.1", "power_limit_mw": 1}):
        fake_gpu(fake_nvml.make(gpu))
        facts, _ = device_facts(Nvml())
        keys.add(device_key(facts))
    assert keys == {"nvidia-h200"}
    assert device_key({"machine": "x86_64", "cpu_model": "A", "cpu_count": 2}) == device_key(
        {"machine": "x86_64", "cpu_model": "B", "cpu_count": 64}
    )


def test_a_cpu_key_is_the_same_for_one_cpu_kind_on_every_os():
    """Windows names x86-64 `AMD64` (`x64` elsewhere), where Linux and macOS say `x86_64`: one CPU
    kind, one key (a cross-platform review read `cpu-amd64` beside `cpu-x86_64`)."""
    keys = {device_key({"machine": machine}) for machine in ("x86_64", "AMD64", "amd64", "x64")}
    assert keys == {"cpu-x86_64"}
    assert device_key({"machine": "aarch64"}) == "cpu-aarch64"  # left as each OS names it: see the README


def test_the_cpu_brand_is_read_off_linux_where_platform_names_only_the_architecture(monkeypatch):
    """Without /proc/cpuinfo, macOS's sysctl and Windows' registry give the CPU's brand, as Linux's
    `model name` does: platform.processor() said `arm` for every Apple chip (an M1's baseline and
    an M3 Max's run read as one CPU) and a family/model code on Windows."""
    import builtins
    import subprocess

    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(device.platform, "processor", lambda: "arm")
    monkeypatch.setattr(device.sys, "platform", "darwin")
    ran = []

    def sysctl(args, **kwargs):
        ran.append(args)
        return SimpleNamespace(stdout="Apple M3 Max\n")

    monkeypatch.setattr(subprocess, "run", sysctl)
    assert device._cpu_model() == "Apple M3 Max"
    assert ran == [["sysctl", "-n", "machdep.cpu.brand_string"]]

    def missing(args, **kwargs):
        raise FileNotFoundError("sysctl")

    monkeypatch.setattr(subprocess, "run", missing)
    assert device._cpu_model() == "arm"  # no sysctl: platform's word, as before

    monkeypatch.setattr(device.sys, "platform", "win32")
    opened = []

    class Key:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    values = {"ProcessorNameString": ("Intel(R) Core(TM) i7-1185G7 @ 3.00GHz  ", 1)}
    registry = SimpleNamespace(
        HKEY_LOCAL_MACHINE="HKLM",
        OpenKey=lambda root, where: opened.append((root, where)) or Key(),
        QueryValueEx=lambda key, name: values[name],
    )
    monkeypatch.setitem(sys.modules, "winreg", registry)
    assert device._cpu_model() == "Intel(R) Core(TM) i7-1185G7 @ 3.00GHz"
    assert opened == [("HKLM", r"HARDWARE\DESCRIPTION\System\CentralProcessor\0")]
    monkeypatch.setitem(sys.modules, "winreg", None)  # a Python without it: platform's word, no exception
    assert device._cpu_model() == "arm"


def test_the_cpu_model_is_linuxs_model_name_line(monkeypatch):
    """On Linux the brand is /proc/cpuinfo's `model name` (the first), whatever platform says."""
    import builtins
    import io

    real_open = builtins.open
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU  \n"

    def fake(path, *args, **kwargs):
        return io.StringIO(cpuinfo + cpuinfo) if str(path) == "/proc/cpuinfo" else real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake)
    monkeypatch.setattr(device.platform, "processor", lambda: "x86_64")
    assert device._cpu_model() == "Intel(R) Xeon(R) Platinum 8375C CPU"


def test_key_from_trace_metadata():
    assert device.key_from_trace_metadata({"deviceProperties": [{"name": "NVIDIA A100-PG509-200"}]}) == (
        "nvidia-a100-pg509-200"
    )
    assert device.key_from_trace_metadata({"deviceProperties": [{"name": "AMD Radeon Graphics", "warpSize": 64}]}) == (
        "amd-radeon-graphics"
    )
    assert device.key_from_trace_metadata({"deviceProperties": []}) is None
    assert device.key_from_trace_metadata({}) is None
    arch = {"name": "AMD Radeon Graphics", "warpSize": 64, "gcnArchName": "gfx942:sramecc+:xnack-"}
    assert device.key_from_trace_metadata({"deviceProperties": [arch]}) == "amd-radeon-graphics-gfx942"
    # ROCm's name without the vendor: its 64-wide wavefront says AMD; an NVIDIA GPU's warp is 32
    unnamed = {"name": "Radeon Graphics", "warpSize": 64, "gcnArchName": "gfx942:sramecc+:xnack-"}
    assert device.key_from_trace_metadata({"deviceProperties": [unnamed]}) == "amd-radeon-graphics-gfx942"


def test_amd_gpus_torch_names_alike_get_keys_of_their_own(monkeypatch):
    """torch names an MI250 and an MI300X alike `AMD Radeon Graphics` (the shared MI250 trace
    does): one key would judge one's times against the other's. A name without a model number is
    followed by the architecture torch gives (`gcnArchName`); a name with one keeps its key."""
    torch = pytest.importorskip("torch")

    props = SimpleNamespace(name="AMD Radeon Graphics", major=9, minor=4, gcnArchName="gfx942:sramecc+:xnack-")
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    facts = device._torch_facts()
    assert facts["gpu_arch"] == "gfx942" and device_key(facts) == "amd-radeon-graphics-gfx942"
    assert device_key({**facts, "gpu_arch": "gfx90a"}) == "amd-radeon-graphics-gfx90a"
    assert device_key({**facts, "gpu_name": "AMD Instinct MI300X"}) == "amd-instinct-mi300x"
    assert device_key({"gpu_name": "NVIDIA H200", "gpu_arch": "gfx942"}) == "nvidia-h200"


@pytest.mark.parametrize(
    ("uuid", "expected"),
    [
        (uuid_module.UUID("5f0e6c2a-0000-1111-2222-333344445555"), "GPU-5f0e6c2a-0000-1111-2222-333344445555"),
        ("MIG-1a2b3c4d-0000-1111-2222-333344445555", "MIG-1a2b3c4d-0000-1111-2222-333344445555"),
        ("GPU-5f0e6c2a-0000-1111-2222-333344445555", "GPU-5f0e6c2a-0000-1111-2222-333344445555"),
    ],
)
def test_torchs_cuda_facts_name_the_gpu_by_nvmls_uuid(monkeypatch, uuid, expected):
    """torch's device properties give the UUID NVML opens the GPU by (the worker's GPU, a MIG
    slice): torch writes a bare UUID, NVML `GPU-...`; a MIG slice's `MIG-...` stays as it is. A
    CUDA path no CPU run reaches (#16): the properties faked as an H200's."""
    torch = pytest.importorskip("torch")

    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, uuid=uuid)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    facts = device._torch_facts()
    assert (facts["gpu_name"], facts["gpu_capability"], facts["gpu_count"]) == ("NVIDIA H200", "9.0", 2)
    assert facts["gpu_uuid"] == expected and "gpu_arch" not in facts
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    assert "gpu_uuid" not in device._torch_facts()  # ROCm's uuid is no NVML one


def test_the_clock_event_reasons_are_nvmls_own_bits(monkeypatch):
    """Each reason's bit is the one nvidia-ml-py names it by (a mutation trial moved
    `hw_slowdown` to 0x10, `sync_boost`'s, and no test noticed): a bit read wrong would excuse
    a slowdown by another reason, or miss the GPU's own."""
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)  # the installed module, no fake or stub
    pynvml = pytest.importorskip("pynvml")

    names = {
        "gpu_idle": "GpuIdle",
        "applications_clocks_setting": "ApplicationsClocksSetting",
        "sw_power_cap": "SwPowerCap",
        "hw_slowdown": "HwSlowdown",
        "sync_boost": "SyncBoost",
        "sw_thermal_slowdown": "SwThermalSlowdown",
        "hw_thermal_slowdown": "HwThermalSlowdown",
        "hw_power_brake_slowdown": "HwPowerBrakeSlowdown",
        "display_clock_setting": "DisplayClockSetting",
    }
    assert sorted(device.CLOCK_EVENT_REASONS.values()) == sorted(names)
    for bit, name in device.CLOCK_EVENT_REASONS.items():
        # newer nvidia-ml-py names them ClocksEventReason*, older ones ClocksThrottleReason* only
        found = getattr(pynvml, f"nvmlClocksEventReason{names[name]}", None)
        assert (found if found is not None else getattr(pynvml, f"nvmlClocksThrottleReason{names[name]}")) == bit, name


def test_the_wait_for_a_cpu_is_in_milliseconds_between_two_readings():
    """The ms the threads waited between two (wall ns, wait ns) readings: what a slowdown is
    weighed against (a wait of 2 ms a step cannot explain an op 9 ms slower)."""
    assert device.waited_ms((0, 1_000_000), (9, 3_500_000)) == 2.5
    assert device.waited_ms((0, 3_500_000), (9, 1_000_000)) == 0  # a counter that went back: none
    assert device.waited_ms((0, None), (9, 3_500_000)) is None
    assert device.waited_ms((0, 1), (9, None)) is None


def test_torchs_cpu_capability_is_a_fact_of_a_cpu_run():
    """The kernels torch's CPU ops run (`AVX512`, `AVX2`, `DEFAULT`): a baseline judged under
    another capability is told so."""
    torch = pytest.importorskip("torch")
    facts = device._torch_facts()
    assert facts["cpu_capability"] == str(torch.backends.cpu.get_cpu_capability())
    assert facts["cpu_capability"]


def test_unreliable_reasons():
    fine = ClockSample(1980, 1980, ())
    idle_low = ClockSample(345, 1980, ("gpu_idle",))
    assert unreliable_reason([fine, idle_low, None]) is None
    assert unreliable_reason([]) is None
    assert unreliable_reason([ClockSample(None, None, None)]) is None
    thermal = ClockSample(1400, 1980, ("hw_thermal_slowdown",))
    assert unreliable_reason([fine, thermal]) == "GPU clock event hw_thermal_slowdown"
    low = ClockSample(600, 1980, ())
    assert unreliable_reason([low]) == "SM clock 600 MHz, far below its max 1980 MHz"
    braked = ClockSample(1500, 1980, ("hw_power_brake_slowdown",))
    assert unreliable_reason([braked, braked]) == "GPU clock event hw_power_brake_slowdown"  # said once
    # the power cap is how a T4 runs under load: only with the clock far below max
    assert unreliable_reason([ClockSample(1500, 1590, ("sw_power_cap",))]) is None
    assert unreliable_reason([ClockSample(585, 1590, ("sw_power_cap",))]) == (
        "SM clock 585 MHz, far below its max 1590 MHz (GPU clock event sw_power_cap)"
    )
    assert unreliable_reason([ClockSample(None, None, ("sw_power_cap",))]) is None


def test_reason_names_keep_unknown_bits():
    assert device.reason_names(0x1 | 0x80 | 0x10000) == ["gpu_idle", "hw_power_brake_slowdown", "0x10000"]
    assert device.reason_names(0) == []
    assert device.reason_names(None) is None


def test_valid_key():
    assert device.valid_key("nvidia-h200")
    assert device.valid_key("ci_runner.2")
    for bad in ("", "Nvidia", "a/b", "..", "-x", "x" * 101, "a b"):
        assert not device.valid_key(bad), bad


def test_cpu_wait_is_read_from_schedstat():
    if not os.path.exists("/proc/self/task"):
        pytest.skip("no /proc")
    first = device.cpu_wait_ns()
    assert isinstance(first, int) and first >= 0
    assert device.cpu_wait_ns() >= first  # cumulative


def test_wait_share():
    assert device.wait_share((0, 0), (1_000, 500)) == 0.5
    assert device.wait_share((0, 0), (1_000, 1_500)) == 1.5  # two threads waiting
    assert device.wait_share((0, None), (1_000, 5)) is None
    assert device.wait_share((7, 0), (7, 5)) is None


def _tracer(frame, event, arg):
    return None


class _Monitoring:
    """sys.monitoring (Python 3.12+) as coverage uses it: one tool id taken, by name."""

    @staticmethod
    def get_tool(tool):
        return "coverage.py" if tool == 1 else None


def test_python_tracer_names_what_traces_python_or_says_none(monkeypatch):
    """sys.settrace / sys.setprofile (coverage's C tracer, a debugger) and sys.monitoring tools
    are named; nothing tracing is None."""
    monkeypatch.setattr(sys, "gettrace", lambda: None)
    monkeypatch.setattr(sys, "getprofile", lambda: None)
    monkeypatch.delattr(sys, "monitoring", raising=False)
    assert device.python_tracer() is None
    monkeypatch.setattr(sys, "monitoring", _Monitoring(), raising=False)
    assert device.python_tracer() == "coverage.py"
    monkeypatch.setattr(sys, "getprofile", lambda: _tracer)
    assert device.python_tracer() == "test_device._tracer"
    monkeypatch.setattr(sys, "gettrace", lambda: fake_nvml)  # an object: named by its type
    assert device.python_tracer() == "builtins.module"


def test_tracer_stays_says_whether_untraced_can_take_the_tracer_off(monkeypatch):
    """A sys.settrace tracer can be taken off for a confirmation; a profiler function, a
    sys.monitoring tool or a tracer that cannot be called back in cannot."""
    monkeypatch.setattr(sys, "gettrace", lambda: _tracer)
    monkeypatch.setattr(sys, "getprofile", lambda: None)
    monkeypatch.delattr(sys, "monitoring", raising=False)
    assert not device.tracer_stays()
    monkeypatch.setattr(sys, "monitoring", _Monitoring(), raising=False)
    assert device.tracer_stays()
    monkeypatch.delattr(sys, "monitoring")
    monkeypatch.setattr(sys, "getprofile", lambda: _tracer)
    assert device.tracer_stays()
    monkeypatch.setattr(sys, "getprofile", lambda: None)
    monkeypatch.setattr(sys, "gettrace", lambda: object())
    assert device.tracer_stays()


class _StackTracer:
    """A Python tracer as coverage's keeps it: a stack of the frames it saw begin, popped as they end."""

    def __init__(self):
        self.stack, self.lines = [], []

    def __call__(self, frame, event, arg):
        if event == "call":
            self.stack.append(frame.f_code.co_name)
        elif event == "return":
            self.stack.pop()
        elif event == "line":
            self.lines.append((frame.f_code.co_name, frame.f_lineno - frame.f_code.co_firstlineno))
        return self


def _untraced_inside():
    return sys.gettrace(), threading.gettrace()


def _after_the_pause():
    return 2


def _pausing(tracer):
    (inside, threads_inside), during = device.untraced(_untraced_inside)
    after = _after_the_pause()
    return inside, threads_inside, during, after, sys.gettrace() is tracer


def test_untraced_runs_with_the_python_tracer_off_and_puts_it_back_keeping_its_frames_whole():
    """A run() capture's confirmations run without a Python tracer (coverage under --cov), put
    back after in the frame that took it off: a tracer that keeps a stack of frames (coverage's)
    sees every frame it saw begin end, and the lines after the pause (a shifted stack loses them)."""
    tracer = _StackTracer()
    for_threads, before = threading.gettrace(), sys.gettrace()  # a run of this suite under --cov: coverage's
    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        inside, threads_inside, during, after, back = _pausing(tracer)
    finally:
        sys.settrace(before)
        threading.settrace(for_threads)
    assert (inside, threads_inside, during) == (None, None, None)
    assert back and after == 2 and threading.gettrace() is for_threads
    assert tracer.stack == []  # every frame it saw begin, it saw end
    assert ("_pausing", 2) in tracer.lines and ("_after_the_pause", 1) in tracer.lines
    assert not [name for name, _ in tracer.lines if name == "_untraced_inside"]
    assert device.untraced(lambda: 5) == (5, device.python_tracer())  # nothing traced: as it is


def test_set_in_process_names_the_variables_this_process_set_itself(monkeypatch):
    """A variable the process set or changed since it started (pytest-env, a conftest) is named;
    one the shell gave it, as it gave it, is not; where Linux does not say, none is."""
    monkeypatch.setattr(device, "_STARTED", [{"MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "4"}])
    monkeypatch.setenv("MKL_NUM_THREADS", "1")  # as the shell gave it
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # changed inside
    assert device.set_in_process(device.THREAD_VARIABLES) == ("OMP_NUM_THREADS",)
    monkeypatch.delenv("OMP_NUM_THREADS")  # unset inside: the shell's env cannot set it back either, but none is set
    assert device.set_in_process(device.THREAD_VARIABLES) == ()
    monkeypatch.setattr(device, "_STARTED", [None])
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert device.set_in_process(device.THREAD_VARIABLES) == ()
    # an xdist worker starts with what its controller set: the controller's word names it
    assert device.set_in_process(device.THREAD_VARIABLES, ["OMP_NUM_THREADS", "MKL_NUM_THREADS"]) == (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    )
    monkeypatch.delenv("MKL_NUM_THREADS")  # the controller's, unset since: none
    assert device.set_in_process(device.THREAD_VARIABLES, ["MKL_NUM_THREADS"]) == ()


def test_thread_setup_is_read_from_the_machine_not_from_torch(monkeypatch):
    """The CPUs this process may use and the thread variables: what gives torch its default,
    whatever a conftest did to torch's count since."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert device.thread_setup() == "3 cpus"
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert device.thread_setup() == "3 cpus, OMP_NUM_THREADS=1, MKL_NUM_THREADS=2"
    assert device_facts()[0]["thread_setup"] == "3 cpus, OMP_NUM_THREADS=1, MKL_NUM_THREADS=2"
    monkeypatch.setattr(device, "_physical_cores", lambda cpus: 1)  # SMT: torch's default is the cores
    assert device.thread_setup() == "3 cpus, 1 core, OMP_NUM_THREADS=1, MKL_NUM_THREADS=2"


@pytest.mark.parametrize(
    ("stat", "running"),
    [
        ("4242 (PTThreadPool) R 1 2 3", True),
        ("4242 (PTThreadPool) S 1 2 3", False),
        ("4242 (python) R 1 2 3", False),
        ("4242 (a (odd) name) R 1", False),  # the name may hold spaces and parentheses
        ("4242 (PTThreadPool) D 1", False),
        ("", False),
    ],
)
def test_a_torch_pool_thread_is_running_by_its_proc_stat(stat, running):
    """The state after the name's last `)`, of a thread named as torch names its pools'."""
    assert device.pool_thread_running(stat) is running


def test_a_mig_instance_reads_the_facts_of_the_gpu_that_holds_it(fake_gpu, monkeypatch):
    """torch gives a MIG instance's UUID bare (read as `GPU-<uuid>`), NVML names it `MIG-<uuid>`:
    the lookup failed and every NVML fact was null (no clocks, no clock check). The instance is
    found as MIG, and the facts are its parent GPU's."""
    module = fake_nvml.make({"sm_clock": 1700})
    parent = module.nvmlDeviceGetHandleByIndex(0)
    mig = object()
    by_uuid = module.nvmlDeviceGetHandleByUUID
    module.nvmlDeviceGetHandleByUUID = lambda uuid: mig if uuid == "MIG-1234-abcd" else by_uuid(uuid)
    module.nvmlDeviceIsMigDeviceHandle = lambda handle: handle is mig
    module.nvmlDeviceGetDeviceHandleFromMigDeviceHandle = lambda handle: parent if handle is mig else None
    fake_gpu(module)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-1234-abcd")
    monkeypatch.setattr(device, "_torch_facts", lambda: fake_nvml.torch_gpu(uuid="GPU-1234-abcd"))
    facts, handle = device_facts(Nvml())
    assert handle is parent and facts["sm_clock_mhz"] == 1700 and facts["driver"] is not None


def test_busy_children_counts_the_children_that_used_cpu_in_between():
    """The test's own processes beside a capture (DataLoader workers, ranks) are read from /proc
    for the contention warning: a child that used CPU between two readings counts; an idle one
    (multiprocessing's resource tracker lives on for the session) and a zombie do not (a review
    found both counted as the test's own)."""
    import subprocess
    import sys
    import time

    from pytest_opprof.device import busy_children, child_cpu_ticks

    if not sys.platform.startswith("linux"):
        pytest.skip("no /proc here")
    before = child_cpu_ticks()
    assert before is not None  # Linux has /proc: a reading that found nothing read no children
    spin = "import time\nwhile time.process_time() < 0.05:\n    pass\nprint('spun', flush=True)\ntime.sleep(30)"
    busy = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert busy.stdout is not None and busy.stdout.readline() == "spun\n"
        for _ in range(2000):  # exited, not waited for (poll() would reap it): a zombie
            with open(f"/proc/{done.pid}/stat") as file:
                if file.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        after = child_cpu_ticks()
        assert after is not None and str(done.pid) not in after
        assert str(busy.pid) in after and str(idle.pid) in after
        assert 1 <= after[str(busy.pid)] < 100 * 3600  # its CPU ticks (>= 0.05 s), not another field of stat
        started = {**before, str(idle.pid): after[str(idle.pid)]}  # idle: its start-up before the first reading
        assert busy_children(started, after) == 1
        assert busy_children(None, after) == 0
    finally:
        for child in (busy, idle, done):
            child.kill()
            child.wait()
