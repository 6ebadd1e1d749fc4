"""Device facts, the device key and GPU clock samples. torch and NVML are imported lazily.

Facts come from the host (CPU model and count), from torch (versions, the GPU torch uses, its
capability) and, for an NVIDIA GPU torch can use, from NVML through the `nvidia-ml-py`
distribution (import name `pynvml`): name, UUID, driver, CUDA driver version, SM and memory
clocks (current and max), power limit, temperature, persistence and MIG mode, clock-event
(throttle) reasons. A fact that cannot be read is None: no exception, no warning.

The key names the hardware a measurement belongs to (`nvidia-h200`, `nvidia-tesla-t4`,
`amd-instinct-mi250`, `cpu-x86_64`): built from the device name alone, so clocks, temperature,
driver or torch version never change it.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import shown_value
from .units import count_of

T = TypeVar("T")

# Every fact, in the order the JSON report and `opprof show` list them.
FACT_KEYS = (
    "machine",
    "cpu_model",
    "cpu_capability",
    "cpu_count",
    "torch",
    "torch_threads",
    "thread_setup",
    "cuda",
    "hip",
    "gpu_count",
    "gpu_name",
    "gpu_capability",
    "gpu_arch",
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

# NVML's clock-event ("throttle") reason bits (nvml.h, stable ABI) and our names for them.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that slow the GPU below what it would run at: times taken under them do not compare.
SLOWDOWN_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
# The power cap is how a small GPU (a 70 W T4) runs under any load: only with its SM clock far below max.
POWER_CAP = "sw_power_cap"
# An SM clock below this share of its max (while the GPU is not idle) is "far below max".
CLOCK_FLOOR = 0.5

_NVML_CLOCK_SM, _NVML_CLOCK_MEM, _NVML_TEMPERATURE_GPU = 1, 2, 0


UNKNOWN_KEY = "unknown"  # the device key of what names no device (a plain torch.profiler trace's header)


def slug(text: str) -> str:
    """`NVIDIA H200` -> `nvidia-h200`; `Tesla T4` -> `tesla-t4`."""
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-") or UNKNOWN_KEY


_KEY_CHARS = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def valid_key(key: str) -> bool:
    """A device key is one lowercase path component: letters, digits, `.`, `_`, `-`."""
    return bool(_KEY_CHARS.match(key)) and len(key) <= 100


def _cpu_model() -> str | None:
    """The CPU's brand string, as Linux's /proc/cpuinfo gives it (`Intel(R) Xeon(R) ...`): from
    sysctl on macOS and the registry on Windows, where platform.processor() gives `arm` for every
    Apple chip, or a family and model number (a cross-platform review: an M1's baseline and an M3
    Max's run read as the same CPU)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _brand_string() or platform.processor() or None


def _brand_string() -> str | None:
    """The CPU's brand off Linux: macOS's `machdep.cpu.brand_string`, Windows' ProcessorNameString."""
    if sys.platform == "darwin":
        return _sysctl_brand()
    if sys.platform == "win32":
        return _registry_brand()
    return None


def _sysctl_brand() -> str | None:
    import subprocess

    try:
        done = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _registry_brand() -> str | None:
    try:
        winreg: Any = importlib.import_module("winreg")  # Windows only: typed as Any elsewhere
        where = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, where) as key:
            return str(winreg.QueryValueEx(key, "ProcessorNameString")[0]).strip() or None
    except (ImportError, OSError):
        return None


def empty_facts() -> dict[str, Any]:
    facts: dict[str, Any] = dict.fromkeys(FACT_KEYS)
    facts["gpu_count"] = 0
    return facts


def _host_facts() -> dict[str, Any]:
    return {
        "machine": platform.machine() or None,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "thread_setup": thread_setup(),
    }


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cpus() -> int | None:
    """The CPUs this process may run on (its affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count()


def thread_setup() -> str:
    """What gives torch its default thread count, read from the machine, not from torch (a
    conftest may have set torch's already): the CPUs this process may use, the physical cores
    among them where they are fewer (torch's default is the cores), and the variables."""
    try:
        usable = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        usable = list(range(os.cpu_count() or 0))
    cores = _physical_cores(usable)
    parts = [f"{len(usable)} cpus"] + ([count_of(cores, "core")] if cores and cores != len(usable) else [])
    found = [f"{name}={os.environ[name]}" for name in THREAD_VARIABLES if name in os.environ]
    return ", ".join(parts + found)


def set_in_process(names: Iterable[str], by_controller: Iterable[str] = ()) -> tuple[str, ...]:
    """Which of these environment variables this process set or changed itself since it started
    (pytest-env's `env` ini key, a conftest, a plugin), which the shell's `env -u NAME` or
    `NAME=value` before the command cannot change: a trial's fix `env -u OMP_NUM_THREADS pytest`
    ran on the same 1 thread, pytest-env setting it again. Linux only (/proc/self/environ holds
    the environment the process started with); () where that cannot be read. `by_controller`:
    those xdist's controller set (its workers start with them, so their own start says nothing)."""
    started = _started_environ()
    inherited = set(by_controller)
    return tuple(
        n
        for n in names
        if os.environ.get(n) is not None
        and (n in inherited or (started is not None and os.environ.get(n) != started.get(n)))
    )


_STARTED: list[dict[str, str] | None] = []


def _started_environ() -> dict[str, str] | None:
    """The environment this process started with (read once), or None where Linux does not say."""
    if not _STARTED:
        try:
            with open("/proc/self/environ", "rb") as f:
                pairs = [entry.split(b"=", 1) for entry in f.read().split(b"\0") if b"=" in entry]
            _STARTED.append({k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs})
        except OSError:
            _STARTED.append(None)
    return _STARTED[0]


def _physical_cores(cpus: list[int]) -> int | None:
    """How many cores those CPUs are (SMT siblings counted once); None where Linux does not say."""
    siblings = set()
    for cpu in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list", encoding="ascii") as f:
                siblings.add(f.read().strip())
        except OSError:
            return None
    return len(siblings) or None


def worker_gpu(worker: str, names: Sequence[str]) -> int | None:
    """The GPU an xdist worker measures on, where several are visible (DESIGN: one GPU per
    worker): worker gwN takes the Nth of the GPUs named as GPU 0 is, wrapping around (a GPU of
    another model would give the worker, and its baselines, a device key of their own, and tests
    go to whichever worker is free). None for one GPU, or a worker id not `gw<N>`."""
    number = worker[2:] if worker.startswith("gw") else ""
    same = [index for index, name in enumerate(names) if name == names[0]] if names else []
    if len(same) < 2 or not number.isdigit():
        return None
    return same[int(number) % len(same)]


def gpus_like_first() -> int:
    """How many of the visible GPUs are named as GPU 0 is: those xdist workers spread over."""
    try:
        import torch

        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        return names.count(names[0]) if names else 0
    except Exception:  # a broken driver: no spreading said
        return 0


def use_worker_gpu(worker: str) -> int | None:
    """Make the worker's GPU (worker_gpu) torch's current device, before anything reads the
    device facts; None where it chose none: not a worker's, CUDA unavailable, or already
    initialised (the code or a conftest chose its device: that choice stands)."""
    try:
        import torch

        if not torch.cuda.is_available() or torch.cuda.is_initialized():
            return None
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        index = worker_gpu(worker, names)
        if index is not None:
            torch.cuda.set_device(index)
        return index
    except Exception:  # a broken driver must not break the run: the facts say what torch uses
        return None


def _torch_facts() -> dict[str, Any]:
    """What torch says: versions, threads, and the GPU it uses (its current device)."""
    from . import owntorch  # here: a plain run imports no measuring module

    try:
        import torch
    except ImportError:
        return {}
    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_threads": owntorch.own(torch).get_num_threads(),  # keeps torch's functions: before any test
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cpu_capability": _cpu_capability(torch),
    }
    try:
        if torch.cuda.is_available():
            index = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(index)
            facts["gpu_count"] = torch.cuda.device_count()
            facts["gpu_name"] = props.name
            facts["gpu_capability"] = f"{props.major}.{props.minor}"
            arch = getattr(props, "gcnArchName", None)  # ROCm: `gfx90a:sramecc+:xnack-`
            if facts["hip"] and arch:
                facts["gpu_arch"] = str(arch).split(":", 1)[0]
            uuid = getattr(props, "uuid", None)
            if uuid is not None and not facts["hip"]:
                text = str(uuid)
                facts["gpu_uuid"] = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    except Exception:  # a broken driver must not break the test run; the facts stay None
        pass
    return facts


def _cpu_capability(torch: Any) -> str | None:
    """The vector instructions torch's CPU kernels run with (`AVX512`, `AVX2`, `DEFAULT`): the CPU's
    best, or less where ATEN_CPU_CAPABILITY says. A team trial's elementwise ops ran x4.7 slower
    with `DEFAULT` than with `AVX512` on one machine, where the matmul reference (BLAS) did not move."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # an older or partial torch: unrecorded
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def reason_names(mask: int | None) -> list[str] | None:
    """NVML's clock-event bitmask as names, lowest bit first; unknown bits as hex."""
    if mask is None:
        return None
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_REASONS)
    if rest:
        names.append(f"0x{rest:x}")
    return names


@dataclass(frozen=True)
class ClockSample:
    """One look at a GPU's clocks: MHz, and the clock-event reasons active at that moment."""

    sm_mhz: int | None
    sm_max_mhz: int | None
    reasons: tuple[str, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sm_clock_mhz": self.sm_mhz,
            "sm_clock_max_mhz": self.sm_max_mhz,
            "clock_event_reasons": list(self.reasons) if self.reasons is not None else None,
        }


def unreliable_reason(samples: Iterable[ClockSample | None]) -> str | None:
    """Why GPU times taken between these samples do not compare, or None when nothing says so.

    Unreliable: a slowdown reason (thermal, hardware slowdown, power brake) was set, or the SM
    clock was below half its max while the GPU was not idle or under its power cap (DESIGN: clocks
    far below max). The power cap alone is no slowdown: a T4 (70 W) runs under it at any load, and
    every test there was unreliable, none recordable. Unknown facts say nothing.
    """
    problems: list[str] = []
    for sample in samples:
        if sample is None:
            continue
        reasons = sample.reasons or ()
        slow = sorted(SLOWDOWN_REASONS.intersection(reasons))
        for name in slow:
            if f"GPU clock event {name}" not in problems:
                problems.append(f"GPU clock event {name}")
        if (
            sample.sm_mhz is not None
            and sample.sm_max_mhz
            and ("gpu_idle" not in reasons or POWER_CAP in reasons)
            and sample.sm_mhz < CLOCK_FLOOR * sample.sm_max_mhz
        ):
            capped = f" (GPU clock event {POWER_CAP})" if POWER_CAP in reasons else ""
            problems.append(f"SM clock {sample.sm_mhz} MHz, far below its max {sample.sm_max_mhz} MHz{capped}")
    return "; ".join(problems) or None


def wait_share(first: tuple[int, int | None], last: tuple[int, int | None]) -> float | None:
    """The share of the time between two (wall ns, cpu_wait_ns()) readings that this process's
    threads waited for a CPU, summed over threads (so it can exceed 1); None when unknown."""
    (t0, w0), (t1, w1) = first, last
    if w0 is None or w1 is None or t1 <= t0:
        return None
    return round((w1 - w0) / (t1 - t0), 4)


def waited_ms(first: tuple[int, int | None], last: tuple[int, int | None]) -> float | None:
    """The milliseconds this process's threads waited for a CPU between two (wall ns,
    cpu_wait_ns()) readings, summed over threads; None when unknown."""
    (_, w0), (_, w1) = first, last
    return None if w0 is None or w1 is None else max(0, w1 - w0) / 1e6


def python_tracer() -> str | None:
    """What traces Python in this thread (coverage, a debugger, a profiler; sys.settrace,
    sys.setprofile or sys.monitoring), by name; None when nothing does. It slows the Python
    between operators, not the operators."""
    tracer = sys.gettrace() or sys.getprofile()
    if tracer is not None:
        kind = tracer if callable(tracer) and hasattr(tracer, "__qualname__") else type(tracer)
        return f"{getattr(kind, '__module__', None) or '?'}.{getattr(kind, '__qualname__', '?')}"
    monitoring: Any = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's sys.monitoring core
    names = [monitoring.get_tool(tool) for tool in range(6)] if monitoring is not None else []
    return next((str(name) for name in names if name), None)


def tracer_stays() -> bool:
    """Whether something traces Python that untraced() cannot take off: a profiler function
    (sys.setprofile: cProfile), sys.monitoring's tools (coverage's default core on Python 3.14),
    a tracer that cannot be called back in. A measurement under it would be traced again."""
    trace = sys.gettrace()
    if sys.getprofile() is not None or (trace is not None and not callable(trace)):
        return True
    monitoring: Any = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(tool) for tool in range(6))


def untraced(run: Callable[[], T]) -> tuple[T, str | None]:
    """`run()` with this thread's Python tracer (coverage's, a debugger's: sys.settrace) off, and
    the one threading gives the threads it starts, each put back after; and what traced Python
    during it (python_tracer(): a profiler function, sys.monitoring's tools or a tracer that
    cannot be called back in stay on, and are named).

    For a run() capture's confirmations: under --cov, Python inside an op (a hook, a custom op)
    made unchanged code fail on time, and the tracer's excuse of the step wall passed a real
    slowdown, each measured only traced. The code already ran traced in the first measurement,
    so coverage loses only lines that run in these calls alone (a path taken every 20th call).
    The tracer is taken off and put back in this one frame, and frames begun while it was off
    end before it is back: coverage keeps a stack of the frames it saw, which a frame it saw
    begin but not end would shift."""
    __tracebackhide__ = True  # a failure of fn in a further measurement shows the test's frames
    trace = sys.gettrace()
    if trace is None or not callable(trace):
        return run(), python_tracer()
    for_threads = threading.gettrace()
    sys.settrace(None)
    threading.settrace(None)
    try:
        result = run()
        during = python_tracer()
    finally:
        sys.settrace(trace)
        threading.settrace(for_threads)
        _called()
    return result, during


def _called() -> None:
    """A Python call right after sys.settrace(tracer): a C tracer put back through sys.settrace
    (coverage's CTracer) takes its own place again at a call's event; till then this frame's
    events go to no one."""


def child_cpu_ticks() -> dict[str, int] | None:
    """The CPU time (clock ticks) each child process of this one has used so far, by pid (Linux
    /proc: each thread's `children`, a child's `stat`); zombies left out. None where /proc does
    not say. Read around a capture: the children whose CPU grew in it ran beside it (DataLoader
    workers, ranks), not an idle one (multiprocessing's resource tracker lives on for the session)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    pids: set[str] = set()
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as file:
                pids.update(file.read().split())
        except OSError:  # a thread gone meanwhile, or a kernel without the file
            continue
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()  # after the name, which may hold spaces
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":  # state; utime and stime are fields 14 and 15 of the whole line
            found[pid] = int(fields[11]) + int(fields[12])
    return found


def busy_children(before: dict[str, int] | None, after: dict[str, int] | None) -> int:
    """How many child processes used CPU between two child_cpu_ticks readings (one started in
    between counts by what it used)."""
    if before is None or after is None:
        return 0
    return sum(1 for pid, ticks in after.items() if ticks > before.get(pid, 0))


def cpu_wait_ns() -> int | None:
    """Nanoseconds this process's threads have spent runnable but waiting for a CPU (Linux
    schedstat, summed over threads); None where the kernel does not say."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    found = False
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[1])
                found = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total if found else None


def cpu_wait_known() -> bool:
    """Whether this system keeps each thread's wait for a CPU (Linux's schedstat), which
    cpu_wait_ns reads: not macOS nor Windows, nor a Linux kernel built without it."""
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat")


TORCH_POOL_THREAD = (
    "PTThreadPool"  # the name torch gives its pools' threads (the inter-op pool runs torch.jit.fork's tasks)
)


def torch_pool_threads_running() -> int | None:
    """How many of torch's pool threads are running or waiting for a CPU now, not idle (Linux
    /proc; None where the kernel does not say: macOS, Windows)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    running = 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                running += pool_thread_running(f.read())
        except OSError:
            continue  # a thread that just ended
    return running


def pool_thread_running(stat: str) -> bool:
    """Whether a thread's /proc stat line (`tid (name) state ...`; the name may hold spaces and
    parentheses: the state follows the last `)`) is a torch pool thread's, running or runnable."""
    name_end = stat.rfind(")")
    name = stat[stat.find("(") + 1 : name_end]
    return name == TORCH_POOL_THREAD and stat[name_end + 2 : name_end + 3] == "R"


def python_threads_cpu_ns(skip: int) -> dict[int, tuple[str, int]]:
    """Each live Python thread but `skip` (a threading ident), by ident: its name and the CPU time
    it has used so far in ns (Linux schedstat of its native id); empty where the kernel does not
    say. torch's own threads (intra-op pools, autograd's device threads) are no Python threads."""
    found = {}
    for thread in threading.enumerate():
        if thread.ident is None or thread.ident == skip or thread.native_id is None:
            continue
        try:
            with open(f"/proc/self/task/{thread.native_id}/schedstat", encoding="ascii") as f:
                found[thread.ident] = (thread.name, int(f.read().split()[0]))
        except (OSError, ValueError, IndexError):
            continue  # not Linux, or a thread that just ended
    return found


class Nvml:
    """One NVML session: initialised on first use, shut down by close(). Nothing here raises:
    a missing library, a missing GPU, a call the driver does not support or forbids -> None."""

    def __init__(self) -> None:
        self._lib: Any = None
        self._tried = False

    @property
    def lib(self) -> Any:
        if not self._tried:
            self._tried = True
            try:
                with warnings.catch_warnings():  # the deprecated `pynvml` distribution warns on import
                    warnings.simplefilter("ignore")
                    import pynvml
                pynvml.nvmlInit()
                self._lib = pynvml
            except Exception:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
                self._lib = None
        return self._lib

    def call(self, function: str, *args: Any) -> Any:
        """lib.function(*args), or None when NVML is absent or the call fails."""
        lib = self.lib
        if lib is None:
            return None
        try:
            return getattr(lib, function)(*args)
        except Exception:  # NVMLError (NotSupported, NoPermission, ...), or an older nvidia-ml-py
            return None

    def handle(self, uuid: str | None, torch_index: int | None = 0, gpu_count: int = 1) -> Any:
        """The NVML handle of the GPU torch uses: by UUID; by index only when that is unambiguous
        (one GPU visible to both, no CUDA_VISIBLE_DEVICES remapping). On a MIG instance (torch
        gives its UUID bare, NVML as `MIG-...`), the GPU that holds it: its clocks and limits."""
        if uuid:
            found = self.call("nvmlDeviceGetHandleByUUID", uuid)
            if found is None and uuid.startswith("GPU-"):
                found = self.call("nvmlDeviceGetHandleByUUID", f"MIG-{uuid[4:]}")
            if found is not None and self.call("nvmlDeviceIsMigDeviceHandle", found):
                found = self.call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", found)
            if found is not None:
                return found
        if gpu_count == 1 and self.call("nvmlDeviceGetCount") == 1 and not os.environ.get("CUDA_VISIBLE_DEVICES"):
            return self.call("nvmlDeviceGetHandleByIndex", torch_index or 0)
        return None

    def clock_sample(self, handle: Any) -> ClockSample | None:
        if handle is None or self.lib is None:
            return None
        mask = self.call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mask is None:  # nvidia-ml-py before 12.535 knows the older name only
            mask = self.call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return ClockSample(
            sm_mhz=self.call("nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_SM),
            sm_max_mhz=self.call("nvmlDeviceGetMaxClockInfo", handle, _NVML_CLOCK_SM),
            reasons=tuple(reason_names(mask) or ()) if mask is not None else None,
        )

    def facts(self, handle: Any) -> dict[str, Any]:
        """NVML's facts about one GPU; each None when it cannot be read."""
        if handle is None:
            return {}
        cuda_driver = self.call("nvmlSystemGetCudaDriverVersion")
        power_mw = self.call("nvmlDeviceGetPowerManagementLimit", handle)
        persistence = self.call("nvmlDeviceGetPersistenceMode", handle)
        mig = self.call("nvmlDeviceGetMigMode", handle)
        sample = self.clock_sample(handle)
        return {
            "gpu_name": _text(self.call("nvmlDeviceGetName", handle)),
            "gpu_uuid": _text(self.call("nvmlDeviceGetUUID", handle)),
            "driver": _text(self.call("nvmlSystemGetDriverVersion")),
            "cuda_driver": f"{cuda_driver // 1000}.{cuda_driver % 1000 // 10}"
            if isinstance(cuda_driver, int)
            else None,
            "sm_clock_mhz": sample.sm_mhz if sample else None,
            "sm_clock_max_mhz": sample.sm_max_mhz if sample else None,
            "mem_clock_mhz": self.call("nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_MEM),
            "mem_clock_max_mhz": self.call("nvmlDeviceGetMaxClockInfo", handle, _NVML_CLOCK_MEM),
            "power_limit_w": round(power_mw / 1000, 1) if isinstance(power_mw, (int, float)) else None,
            "temperature_c": self.call("nvmlDeviceGetTemperature", handle, _NVML_TEMPERATURE_GPU),
            "persistence_mode": bool(persistence) if persistence is not None else None,
            "mig_mode": bool(mig[0]) if isinstance(mig, (list, tuple)) and mig else None,
            "clock_event_reasons": list(sample.reasons) if sample and sample.reasons is not None else None,
        }

    def close(self) -> None:
        if self._lib is not None:
            try:
                self._lib.nvmlShutdown()
            except Exception:
                pass
        self._lib = None


def device_facts(nvml: Nvml | None = None) -> tuple[dict[str, Any], Any]:
    """(facts, NVML handle of the GPU torch uses or None). NVML is only opened when torch can
    use an NVIDIA GPU: on a CPU machine it costs nothing."""
    facts = empty_facts()
    facts.update(_host_facts())
    facts.update(_torch_facts())
    handle = None
    if nvml is not None and facts["gpu_count"] and not facts["hip"]:
        handle = nvml.handle(facts.get("gpu_uuid"), 0, facts["gpu_count"])
        for key, value in nvml.facts(handle).items():
            if value is not None and not (key == "gpu_name" and facts["gpu_name"]):  # torch's name wins
                facts[key] = value
    return facts, handle


# Windows names x86-64 `AMD64` where Linux and macOS say `x86_64`: one CPU kind, one key (a review
# read `cpu-amd64` on the Windows side of a machine whose Linux side was `cpu-x86_64`)
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64"}


def device_key(facts: dict[str, Any]) -> str:
    """The GPU name as a vendor-prefixed slug when torch uses a GPU, else `cpu-<arch>`.

    `NVIDIA H200` -> `nvidia-h200`, `Tesla T4` -> `nvidia-tesla-t4`,
    `AMD Instinct MI250X / MI250` -> `amd-instinct-mi250` (the last of listed alternatives);
    a name without a model number, `AMD Radeon Graphics`, is followed by the GPU's architecture
    where known: `amd-radeon-graphics-gfx90a`.
    """
    name = facts.get("gpu_name")
    if not name:
        machine = str(facts.get("machine") or "unknown")
        return f"cpu-{slug(_MACHINE_ALIASES.get(machine.lower(), machine))}"
    name = str(name)
    if " / " in name:  # ROCm lists the variants a device may be: "AMD Instinct MI250X / MI250"
        first, *_, last = name.split(" / ")
        family = first.rsplit(" ", 1)[0] if " " in first else ""
        name = f"{family} {last}" if " " not in last.strip() else last
    key = slug(name)
    vendor = "amd" if facts.get("hip") else "nvidia"
    if not key.startswith(vendor):
        key = f"{vendor}-{key}"
    arch = facts.get("gpu_arch")
    if vendor == "amd" and arch and not any(c.isdigit() for c in name):
        key = f"{key}-{slug(str(arch))}"  # torch names an MI250 and an MI300X alike `AMD Radeon Graphics`
    return key


_ARCH_KEY = re.compile(r"^(amd-[a-z-]+)-gfx[0-9a-z]+$")


# Windows' x86-64 CPUs (`AMD64`) were keyed `cpu-amd64` before they shared Linux's and macOS's key
_FORMER_CPU_KEYS = {"cpu-x86_64": "cpu-amd64"}


def former_key(key: str) -> str | None:
    """The key a device had before: an AMD GPU torch names without a model number, before keys
    named its architecture (`amd-radeon-graphics-gfx90a` -> `amd-radeon-graphics`); a Windows
    x86-64 CPU, before it shared `cpu-x86_64` (`cpu-amd64`: an upgrade trial's Windows team found
    no baseline, and was told to record them all anew); else None."""
    if key in _FORMER_CPU_KEYS:
        return _FORMER_CPU_KEYS[key]
    found = _ARCH_KEY.match(key)
    return found.group(1) if found else None


def same_device_key(current: str | None, baseline: str | None) -> bool:
    """The same key, or the baseline's is this one's former key (a file moved to the new key's folder)."""
    return current == baseline or (current is not None and baseline is not None and former_key(current) == baseline)


def key_from_trace_metadata(metadata: dict[str, Any]) -> str | None:
    """The device key of a trace: the one opprof wrote into the header of a trace it exported,
    else that of its first GPU (`deviceProperties`), else None (a CPU trace from torch)."""
    opprof = metadata.get("opprof")
    written = opprof.get("device_key") if isinstance(opprof, dict) else None
    if isinstance(written, str) and valid_key(written):
        return written
    props = metadata.get("deviceProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict) or not props[0].get("name"):
        return None
    name = str(props[0]["name"])
    hip = "amd" in name.lower() or props[0].get("warpSize") == 64
    arch = props[0].get("gcnArchName")
    arch = str(arch).split(":", 1)[0] if arch else None
    return device_key({"gpu_name": name, "hip": "rocm" if hip else None, "gpu_arch": arch})


def describe(facts: dict[str, Any]) -> str:
    """One line of the main facts, for the report header."""
    parts = []
    if facts.get("gpu_name"):
        gpu = f"{facts['gpu_name']}"
        if facts.get("gpu_capability"):
            gpu += f" (capability {facts['gpu_capability']})"
        if facts.get("gpu_count", 0) > 1:
            gpu += f", {facts['gpu_count']} visible"
        parts.append(gpu)
        if facts.get("driver"):
            parts.append(f"driver {facts['driver']}")
        if facts.get("cuda_driver"):
            parts.append(f"CUDA driver {facts['cuda_driver']}")
        if facts.get("sm_clock_max_mhz"):
            parts.append(f"SM clock {facts.get('sm_clock_mhz')}/{facts['sm_clock_max_mhz']} MHz")
        if facts.get("temperature_c") is not None:
            parts.append(f"{facts['temperature_c']} C")
        if facts.get("mig_mode"):
            parts.append("MIG on")
    software = f"torch {facts.get('torch')}"
    if facts.get("cuda"):
        software += f" (CUDA {facts['cuda']})"
    if facts.get("hip"):
        software += f" (HIP {facts['hip']})"
    parts.append(software)
    parts.append(
        f"{facts.get('cpu_model') or 'unknown CPU'} x{facts.get('cpu_count')}, {_torch_threads(facts.get('torch_threads'))}"
    )
    return ", ".join(parts)


def resolve_key(option_key: str | None, hooked: object, facts: dict[str, Any], hook_at: str = "") -> tuple[str, str]:
    """The device key and where it came from: --opprof-device-key > the pytest_opprof_device_key
    hook's answer > the facts. A bad hook answer raises ValueError with the one-line reason, naming
    the hook's place (`hook_at`: `conftest.py:3`) where it is known."""
    if option_key:
        return option_key, "--opprof-device-key"
    if hooked is not None:
        if not isinstance(hooked, str) or not valid_key(hooked):
            msg = (
                f"pytest_opprof_device_key{f' at {hook_at}' if hook_at else ''} returned {shown_value(hooked)}: "
                "expected a device key of lowercase letters, "
                "digits, '.', '_' or '-' (e.g. 'nvidia-a10'), or None for the default"
            )
            raise ValueError(msg)
        return hooked, "pytest_opprof_device_key hook"
    return device_key(facts), "device"


def _torch_threads(count: object) -> str:
    """`1 torch thread`, `2 torch threads` (a count it cannot say as `? torch threads`)."""
    return count_of(count, "torch thread") if isinstance(count, int) else f"{count or '?'} torch threads"
