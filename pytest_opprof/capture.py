"""The live source: run code under torch.profiler, one profiler at a time, step by step.

run() and measure() (run_steps), the one-step captures (StepRecorder: capture() and the plugin's
whole-call capture), the profiler's start and stop, and what opprof's own profilers guard against
(another profiler inside, Kineto's chatter). The rest of the live source lives beside it:
`runargs` checks fn and its arguments; `kineto` reads a finished profiler's events into a
Profile (directly, torch 2.12+; older torch through Kineto's own trace of the capture);
`threadwatch` watches torch's thread counts and the other threads; `references` times the
machine's references and the profiler's overhead. torch's own `prof.events()` and
`key_averages()` build a Python object tree per event and cost ~20x more
(bench/bench_analysis.py). torch is imported lazily, so the rest of the package works without it.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import Any, TypeVar

from . import clock, device  # as modules: tests put fakes on device
from .analysis import OPPROF_SYNC_ANNOTATION, Profile
from .analysis.checks import (
    NOT_COMPILED,
    cuda_untraced_check,
    last_step_partial,
    mps_untraced_check,
    not_compiled_check,
    recompile_limit_check,
    unprofiled_kernels_check,
    with_other_threads,
)
from .analysis.model import OtherThread
from .breaks import BreaksSeen, breaks_seen, graphs_since, new_break_reasons, recompile_limit_hit
from .errors import (
    CaptureError,
    OpprofUsageError,
    captures_cannot_nest,
    profiler_already_running,
    profiler_inside_capture,
    profiler_off_thread,
    torch_missing,
)
from .kineto import SET_ASIDE, events_carry_category, read_profiler, release_results
from .opmessages import ran_no_op_in_run
from .owntorch import own
from .references import (
    keep_forked_children_working,
    take_references,
    with_overhead,
    with_reference,
    with_workload_reference,
    workload_choice,
)
from .runargs import fn_first, validate_run_args
from .threadwatch import ThreadWatch, threads_watched
from .torchstate import TorchState, mixed

T = TypeVar("T")


def _torch() -> Any:
    """torch; where it cannot be imported, one line saying so, not a traceback of the import."""
    try:
        import torch
    except ImportError as exc:
        raise OpprofUsageError(torch_missing(f"{type(exc).__name__}: {exc}")) from None
    return torch


def torch_import_problem() -> str | None:
    """Why torch cannot be imported here (`No module named 'torch'`, a broken install), or None."""
    try:
        import torch  # noqa: F401
    except Exception as exc:  # an ImportError, or what a broken install raises on import
        return f"{type(exc).__name__}: {exc}"
    return None


def _cuda_active(torch: Any) -> bool:
    """CUDA is traced when it is available and already initialised by the code under test."""
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def _mps_active(torch: Any) -> bool:
    """Apple's GPU (MPS) holds tensors of this process: the ops queue its work and return before
    it runs, and torch's profiler has no MPS activity to trace it (pytorch#99037), so a step's end
    waits for it. False where torch has no MPS, or cannot tell."""
    backend = getattr(getattr(torch, "backends", None), "mps", None)
    mps = getattr(torch, "mps", None)
    if backend is None or mps is None:
        return False
    try:
        return bool(backend.is_available()) and mps.current_allocated_memory() > 0
    except Exception:  # an MPS build that cannot say: taken as unused, as on a machine without one
        return False


def wait_for_devices(torch: Any, cuda: bool, mps: bool | None = None) -> None:
    """Wait for the device work queued so far: every GPU the code used where `cuda`, and Apple's
    GPU where the process holds tensors on it (`mps`, asked where None: a step that only queued its
    MPS work timed the queueing: its wall time, the time rule's and assert_total_below's, missed
    the GPU's)."""
    if cuda:
        sync_devices(torch)
    if _mps_active(torch) if mps is None else mps:
        torch.mps.synchronize()


def sync_devices(torch: Any) -> None:
    """Wait for the work of every GPU the code has used: `torch.cuda.synchronize()` waits for the
    current device's only, so a model on cuda:1 ran past each step's end (a review's erred
    `wall_time`: device 1 busy 5 ms in a 0.2 ms step). A GPU the process holds no context on ran
    nothing, and is left alone (syncing it would create one)."""
    count = torch.cuda.device_count()
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    if count <= 1 or has_context is None:
        torch.cuda.synchronize()
        return
    for index in range(count):
        if has_context(index):
            torch.cuda.synchronize(index)


def _profiler_running(torch: Any) -> bool:
    """Whether a torch profiler runs (False for a test's fake `torch` in sys.modules)."""
    enabled = getattr(getattr(getattr(torch, "_C", None), "_autograd", None), "_profiler_enabled", None)
    return bool(enabled()) if enabled is not None else False


def profiler_left_running() -> bool:
    """Whether a torch profiler that is not opprof's runs now (one a test started and left on);
    False before torch is imported."""
    torch = sys.modules.get("torch")
    return torch is not None and not _RUNNING and _profiler_running(torch)


def _read_own(prof: Any, aside: bool = False) -> Profile:
    """A profiler opprof started: read, and an error where it could not trace the GPU its code
    used (CUDA first initialised inside it), in place of the device tracer's (CUPTI's) blame.
    Then its results are let go (release_results)."""
    try:
        profile = read_profiler(prof, aside=aside, own=True)
        if _cuda_untraced(prof):
            kept = tuple(check for check in profile.checks if check.name != "device_events")
            profile = replace(profile, checks=(*kept, cuda_untraced_check()))
        if _mps_active(sys.modules["torch"]):
            profile = replace(profile, checks=(*profile.checks, mps_untraced_check()))
    finally:
        release_results(prof)
    return profile


def _cuda_untraced(prof: Any) -> bool:
    """Whether a profiler opprof started without the GPU's activity ends with CUDA in use: its
    code initialised CUDA after the start, and the GPU work it ran went unrecorded."""
    torch = sys.modules["torch"]
    return torch.profiler.ProfilerActivity.CUDA not in getattr(prof, "activities", ()) and _cuda_active(torch)


def new_profiler(torch: Any, cuda: bool, work: bool, torch_flops: bool = True) -> Any:
    """A torch.profiler.profile as opprof's captures make it (CPU, and CUDA where asked; inputs
    and FLOPs where `work`; `torch_flops` False: FLOPs counted from the inputs after the capture,
    not by torch as the ops run, flops.py): scripts/gpu_probe.py and record_gpu_traces.py record
    with this one too."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(
        activities=activities,
        record_shapes=work,
        with_flops=work and torch_flops,
        with_stack=False,
        profile_memory=False,
        experimental_config=_device_details(torch) if cuda else None,
    )


def _device_details(torch: Any) -> Any:
    """Where the events are read directly (torch 2.12 on), a config that keeps each device event's
    metadata, which holds a copy's bytes: torch fills it only when asked (pytorch#161624)."""
    if not events_carry_category():
        return None  # read through Kineto's trace, which holds the bytes
    return torch._C._profiler._ExperimentalConfig(expose_kineto_event_metadata=True)


def _start_profiler(torch: Any, work: bool = False, torch_flops: bool = True) -> tuple[Any, bool]:
    """Start a profiler (CUDA traced when initialised); refuse when another one is running.
    `work`: record op inputs and FLOPs too (record_shapes, with_flops: every op costs more;
    `torch_flops`: see new_profiler)."""
    _refuse_a_running_profiler(torch)
    cuda = _cuda_active(torch)
    wait_for_devices(torch, cuda)  # earlier work must not spill into the first step
    prof = new_profiler(torch, cuda, work, torch_flops)
    try:
        with quiet_profiler():
            prof.start()
    except BaseException:  # a timeout's signal or Ctrl-C mid-start: no profiler stays on for later tests
        _stop_quietly(torch, prof)
        raise
    _RUNNING.append(prof)
    _guard_inner_profilers(torch)
    return prof, cuda


_RUNNING: list[Any] = []  # the profilers opprof started and has not stopped (one at most: torch runs one)


_STEPS_ASIDE: list[StepRecorder] = []  # the whole-call capture while it runs: it gives way to the test's profiler


_RECORDING: list[StepRecorder] = []  # the one-step captures running now (a whole call, a capture() block)


@contextmanager
def set_aside() -> Iterator[None]:
    """Work that is pytest's, not the test's, run while a one-step capture records on this
    thread: left out of it. A failing assert's message is made inside the test call, and a
    trial's `assert y.sum() > 1e9` on a 16x16 tensor reported 535 `aten::item` calls of its
    repr. On the CPU a step that ends in such work ends where it began (events.without_spans)."""
    thread = threading.get_ident()
    recorder = next((r for r in _RECORDING if r.thread == thread and r.recording), None)
    if recorder is None:
        yield
        return
    recorder.had_aside = True
    with recorder.torch.autograd.profiler.record_function(SET_ASIDE):
        yield


def call_aside(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, in set_aside() when a one-step capture records."""
    if not _RECORDING:
        return fn(*args, **kwargs)
    with set_aside():
        return fn(*args, **kwargs)


def _stop_profiler(prof: Any) -> None:
    """Stop a profiler opprof started, once torch's pool threads are idle (_settle_torch_pools)."""
    try:
        _unguard_inner_profilers()
        _settle_torch_pools()
        with quiet_profiler():
            prof.stop()
    finally:
        if prof in _RUNNING:
            _RUNNING.remove(prof)


POOL_SETTLE_NS = 50_000_000  # the longest a stop waits for torch's pool threads to go idle


POOL_POLL_S = 0.0002


def _settle_torch_pools() -> None:
    """Wait, up to POOL_SETTLE_NS, until no torch pool thread runs: a TorchScript function that
    forks ends its forked task's record on the pool thread after its caller went on, and a
    profiler stopped before that record ends has its memory written after it was freed
    (bench/fork_exit.py: 30 of 30 processes crashed at exit without this wait, SIGSEGV or SIGABRT
    `corrupted size vs. prev_size`; 0 of 30 with it). One read of /proc where no pool thread runs;
    where there is no /proc to read (macOS, Windows), the whole wait: a review hid /proc and 6 of
    10 processes crashed."""
    deadline = clock.now_ns() + POOL_SETTLE_NS
    running = device.torch_pool_threads_running()
    if running is None:  # cannot tell: as long as a pool may need
        clock.sleep(POOL_SETTLE_NS / 1e9)
        return
    while running and clock.now_ns() < deadline:
        clock.sleep(POOL_POLL_S)
        running = device.torch_pool_threads_running()


def _guard_inner_profilers(torch: Any) -> None:
    """While a profiler of opprof's runs, a torch profiler the measured code starts is refused:
    torch runs one at a time, and a trial's `with torch.profiler.profile():` inside fn silently
    stopped opprof's, which then reported that fn ran no operator. Both torch.profiler.profile and
    the autograd profiler prepare through `_prepare_trace`. The whole-call capture steps aside
    for a profiler started on its thread (StepRecorder.give_way), which then goes through."""
    cls = torch.autograd.profiler.profile
    prepare = getattr(cls, "_prepare_trace", None)  # in every torch we admit; without it, no guard
    if prepare is None or getattr(prepare, "_opprof_guard", False):
        return

    def guarded(profiler: Any) -> Any:
        __tracebackhide__ = True  # the line that started the profiler shows, not ours
        for recorder in list(_STEPS_ASIDE):  # the whole-call capture (one at most) gives way on its own thread
            recorder.give_way()
        if _RUNNING:
            raise CaptureError(profiler_inside_capture())
        return prepare(profiler)

    guarded._opprof_guard = True  # type: ignore[attr-defined]
    guarded._opprof_guarded = (cls, prepare)  # type: ignore[attr-defined]
    cls._prepare_trace = guarded


def _unguard_inner_profilers() -> None:
    """Take the guard off torch's profiler class where it is still the outermost hook."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    hook = torch.autograd.profiler.profile._prepare_trace
    if getattr(hook, "_opprof_guard", False):
        cls, prepare = hook._opprof_guarded
        cls._prepare_trace = prepare


def _refuse_a_running_profiler(torch: Any) -> None:
    """One line when a profiler runs: opprof's own (a capture inside a capture) or the user's."""
    __tracebackhide__ = True  # the test's line shows, not ours (a trial saw two frames of plugin code)
    if _profiler_running(torch):
        raise CaptureError(captures_cannot_nest() if _RUNNING else profiler_already_running())


def _stop_quietly(torch: Any, prof: Any) -> None:
    """Stop a profiler whose start did not finish, if it runs; its own error is not the one to surface."""
    if _profiler_running(torch):
        with suppress(Exception):
            _stop_profiler(prof)


def torch_threads() -> int | None:
    """torch's intra-op thread count now; None before torch is imported (nothing is imported)."""
    torch = sys.modules.get("torch")
    return int(own(torch).get_num_threads()) if torch is not None else None


def torch_state() -> TorchState | None:
    """torch's settings a test can leave changed for the next (torchstate.TorchState) now; None
    before torch is imported, or where a test's fake stands in for it and cannot say (unknown: the
    watcher then judges nothing). About 4 us: torch's own getters where it has them (its
    `torch.backends` properties take 0.4-1 us each)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not _READER or _READER[0][0] is not torch:
            _READER[:] = [(torch, _settings_reader(torch))]
        return _READER[0][1]()
    except Exception:  # noqa: BLE001 (a fake torch in sys.modules: the watcher must not end the run)
        return None


_READER: list[tuple[Any, Callable[[], TorchState]]] = []  # (the torch module, its torch_state reader)


def _process_group() -> bool:
    """Whether torch.distributed's default process group is initialised (0.2 us; False where
    torch.distributed is not imported or not built)."""
    dist = sys.modules.get("torch.distributed")
    return dist is not None and bool(dist.is_available() and dist.is_initialized())


def _settings_reader(torch: Any) -> Callable[[], TorchState]:
    """A function that reads torch's settings, each by torch's fastest getter this version has."""
    backends, c, threads = torch.backends, torch._C, own(torch).get_num_threads
    flags = [
        _getter(c, "_get_cudnn_benchmark", lambda: backends.cudnn.benchmark),
        _getter(c, "_get_mkldnn_enabled", lambda: backends.mkldnn.enabled),
        _getter(c, "_get_cudnn_enabled", lambda: backends.cudnn.enabled),
        _getter(c, "_get_cudnn_deterministic", lambda: backends.cudnn.deterministic),
        _getter(c, "_get_cublas_allow_fp16_reduced_precision_reduction",
                lambda: backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
        _getter(c, "_get_cublas_allow_bf16_reduced_precision_reduction",
                lambda: backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
    ]  # fmt: skip

    def read() -> TorchState:
        benchmark, mkldnn, cudnn, deterministic, fp16, bf16 = (bool(flag()) for flag in flags)
        return TorchState(
            int(threads()), str(torch.get_default_dtype()).removeprefix("torch."),
            bool(torch.is_grad_enabled()), bool(torch.are_deterministic_algorithms_enabled()),
            bool(torch.is_anomaly_enabled()), _matmul_precision(torch), benchmark, _default_device(torch),
            mkldnn, cudnn, deterministic, _cudnn_tf32(backends), fp16, bf16, _fp32_precision(c), _process_group(),
        )  # fmt: skip

    return read


def _getter(c: Any, name: str, fallback: Callable[[], Any]) -> Callable[[], Any]:
    """torch._C's getter `name` where it gives a bool (2.13's cuBLAS ones give a pair), else
    `fallback` (a `torch.backends` property: 0.4-1 us a reading, against 0.03)."""
    found = getattr(c, name, None)
    try:
        return found if callable(found) and isinstance(found(), bool) else fallback
    except Exception:  # noqa: BLE001 (a getter that cannot say now: the property, guarded where read)
        return fallback


def _fp32_precision(c: Any) -> str | None:
    """torch.backends.fp32_precision (torch 2.9+: `none`, `tf32`, `ieee`), or None before it."""
    getter = getattr(c, "_get_fp32_precision_getter", None)
    return str(getter("generic", "all")) if callable(getter) else None


def _matmul_precision(torch: Any) -> str:
    """torch.get_float32_matmul_precision(), or where torch 2.9+'s fp32_precision API was set
    beside the legacy one and that getter raises (a break trial's conftest set
    `torch.backends.mkldnn.matmul.fp32_precision = "bf16"`: every test then erred in our hooks),
    the matmul backends' own values (torchstate.MIXED_MATMUL)."""
    try:
        return str(torch.get_float32_matmul_precision())
    except RuntimeError:
        backends = torch.backends
        return mixed(
            {"cuda.matmul": backends.cuda.matmul.fp32_precision, "mkldnn.matmul": backends.mkldnn.matmul.fp32_precision}
        )


def _cudnn_tf32(backends: Any) -> bool | str:
    """torch.backends.cudnn.allow_tf32, or where its convolutions and RNNs were given different
    fp32_precision values (torch 2.9+) and that getter raises, those values."""
    try:
        return bool(backends.cudnn.allow_tf32)
    except RuntimeError:
        return mixed({"cudnn.conv": backends.cudnn.conv.fp32_precision, "cudnn.rnn": backends.cudnn.rnn.fp32_precision})


def _default_device(torch: Any) -> str | None:
    """torch.set_default_device's device, or None where none is set (torch's own global: its
    getter names "cpu" for none too, and takes twice as long as the rest together)."""
    context = getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)
    return str(context.device) if context is not None and hasattr(context, "device") else None


_WARMED: list[bool] = []  # a profiler was started and stopped in this process (warm_profiler)


def warm_profiler() -> None:
    """Start and stop a CPU profiler once per process, so that no test pays for torch's first
    start (it imports Inductor: 1.1-1.7 s here, into the first measured test's time and its
    timeout) and no measurement's steps for its first-time setup. Any error is left for the first
    capture to report."""
    if _WARMED:
        return
    try:
        torch = _torch()
        if _profiler_running(torch):
            return
        prof = new_profiler(torch, cuda=False, work=False)
        try:
            with quiet_profiler():
                prof.start()
        finally:
            _stop_quietly(torch, prof)
            release_results(prof)
        _WARMED.append(True)
    except Exception:
        pass


# Kineto's lines at every profiler start and stop, and its one line at the first stop of a CUDA
# build of torch on a machine without a GPU driver (the capture then runs on the CPU, as the
# report's device says).
_KINETO_CHATTER = re.compile(rb"^(USDT|STAGE):[^\n]*\] |^ERROR:[^\n]*\] gpuGetDeviceCount failed with code ")


# torch 2.10-2.11 warn at every first start that a profiler "clears events at the end of each
# cycle": true of every capture, which runs one cycle.
_ONE_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


@contextmanager
def quiet_profiler() -> Iterator[None]:
    """Kineto writes `USDT: ... profiler_start` and `STAGE: ... Completed Stage` lines to the
    process's stderr at every profiler start and stop, which nobody asked for (they fill every
    failing test's captured stderr). Around a start or stop, stderr (fd 2) goes to a temporary
    file; every other line (a Kineto error, anything else written meanwhile) is written back.
    torch's warning that a profiler keeps one cycle's events is dropped too."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_ONE_CYCLE_WARNING, category=UserWarning)
        with _stderr_filtered(_KINETO_CHATTER):
            yield


@contextmanager
def _stderr_filtered(drop: re.Pattern[bytes]) -> Iterator[None]:
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to redirect
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().splitlines(keepends=True) if not drop.match(line)]
            if kept:
                os.write(2, b"".join(kept))


def _end_step_sync(torch: Any, cuda: bool) -> None:
    """Synchronise at the step boundary only, inside the step so the step's wall time covers its
    device work; the annotation keeps it out of assert_no_sync(). Only where a device has work
    queued (CUDA traced, or Apple's GPU in use): a CPU step records no annotation."""
    mps = _mps_active(torch)
    if not cuda and not mps:
        return
    with torch.autograd.profiler.record_function(OPPROF_SYNC_ANNOTATION):
        wait_for_devices(torch, cuda, mps)


class StepRecorder:
    """A one-step capture that can be started and stopped from different places (the plugin
    starts one around the whole test call and abandons it when the test captures by itself)."""

    def __init__(self, probe: Callable[[], None] | None = None, step_aside: bool = False) -> None:
        self._probe = probe  # called just before the profiler starts and just after it stops
        self._torch: Any = None
        self._prof: Any = None
        self._step: Any = None
        self._cuda = False
        # The whole-call capture steps aside when the test starts a profiler of its own: torch
        # runs one at a time, and stopping ours later would empty the user's.
        self._step_aside = step_aside
        self._threads: ThreadWatch | None = None
        self.stepped_aside = False
        self.refused: list[str] = []  # profilers refused on another thread (their thread may swallow it)
        self.thread = 0  # the thread the capture started on
        self.had_aside = False  # whether work of pytest's ran in set_aside() during it

    def start(self) -> None:
        __tracebackhide__ = True  # a refusal shows the test's line
        torch = self._torch = _torch()
        _refuse_a_running_profiler(torch)  # before the reference: fail without measuring anything
        if self._probe is not None:
            self._probe()
        # One step carries both: its times include the cost of recording inputs (one-step
        # captures are reported, never judged on time). Its FLOPs are counted after it: torch's
        # with_flops would fix the dynamic sizes of what torch.export or torch.compile trace in it.
        prof, self._cuda = _start_profiler(torch, work=True, torch_flops=False)
        self._prof = prof
        self._threads = ThreadWatch(torch)
        self._threads.start()
        try:
            self._step = torch.autograd.profiler.record_function("ProfilerStep#1")
            self._step.__enter__()
        except BaseException:
            self._prof = None
            self._threads.stop()
            _stop_profiler(prof)
            raise
        self.thread = threading.get_ident()
        _RECORDING.append(self)
        if self._step_aside:
            _STEPS_ASIDE.append(self)

    def give_way(self) -> None:
        """A profiler the test starts itself: on the thread ours started on, ours ends (dropped);
        on another, it is refused: stopping ours from there left it running on this one, into
        every later test (a review)."""
        __tracebackhide__ = True  # the line that started the profiler shows, not ours
        if threading.get_ident() != self.thread:
            message = profiler_off_thread(threading.current_thread().name)
            self.refused.append(message)
            raise CaptureError(message)
        self.stepped_aside = True
        self.stop(keep=False)

    def stop(self, keep: bool = True) -> Profile | None:
        """End the step and the profiler; the Profile when `keep`, else the capture is dropped."""
        prof = self._end()
        if prof is None or not keep:
            if prof is not None:
                release_results(prof)  # dropped: its results go now, not at the next full collection
            return None
        # References only for a kept capture, after it: a whole call that run() abandons costs none.
        assert self._threads is not None  # set with _prof
        profile = with_other_threads(_read_own(prof, aside=self.had_aside), self._threads.others)
        return with_reference(profile, self._threads.fewest, take_references(self._torch))

    def stop_cut_short(self) -> Profile | None:
        """End a capture that the test's exception interrupted: what it recorded, for the
        failure's report (no machine references: it is never judged). None when it cannot be
        read: the test's own exception is what must surface, not ours."""
        try:
            prof = self._end()
        except Exception:
            return None
        others = self._threads.others if self._threads is not None else ()
        return _cut_with_others(_read_cut_short(prof, aside=self.had_aside), others)

    @property
    def torch(self) -> Any:
        return self._torch

    @property
    def recording(self) -> bool:
        return self._prof is not None

    def _end(self) -> Any:
        """End the step and the profiler; the stopped profiler, or None when none was running."""
        for running in (_STEPS_ASIDE, _RECORDING):
            if self in running:
                running.remove(self)
        prof, self._prof = self._prof, None
        if prof is None:
            return None
        torch, threads = self._torch, self._threads
        assert threads is not None  # set with _prof
        threads.stop()
        try:
            _end_step_sync(torch, self._cuda)
            self._step.__exit__(None, None, None)
        finally:
            _stop_profiler(prof)
        if self._probe is not None:
            self._probe()
        return prof


@contextmanager
def _profiling(torch: Any, work: bool = False) -> Iterator[tuple[Any, bool]]:
    prof, cuda = _start_profiler(torch, work)
    try:
        yield prof, cuda
    finally:
        _stop_profiler(prof)  # whatever happened in the body


@contextmanager
def _step(torch: Any, number: int, cuda: bool) -> Iterator[None]:
    with torch.autograd.profiler.record_function(f"ProfilerStep#{number}"):
        yield
        _end_step_sync(torch, cuda)


_SETTLE_ELEMENTS = 1 << 20  # 4 MB of float: parallel on torch's threads, ~0.1 ms an add


def settle_cpus(seconds: float, threads: int | None = None) -> None:
    """Keep torch's threads busy for `seconds` (a parallel add, again and again), on `threads`
    threads where given. Run before a confirmation: on a 2-vCPU VM, a parallel op measured
    0.3 s after the process idled ran 1.5-3x slower in 16 of 30 windows, after 0.5 s of this in
    9 of 30 (after a busy Python loop on one thread: 16 of 30; python bench/spells.py)."""
    torch = own(_torch())  # not a test's spy or mock of torch.add
    keep_forked_children_working(torch)
    with torch.no_grad(), _on_threads(torch, threads):
        ones = torch.ones(_SETTLE_ELEMENTS, device="cpu")  # not the test's default device
        out = torch.empty_like(ones)
        end = clock.now_ns() + int(seconds * 1e9)
        while clock.now_ns() < end:  # the real clock: a test's frozen one never moved (freezegun)
            torch.add(ones, 1.0, out=out)


UNPROFILED_STEPS = 2  # steps of run() timed without the profiler (the best one is compared)


def unprofiled_step_ns(torch: Any, fn: Callable[..., Any], args: Any, kwargs: Any) -> int:
    """The wall time of one call of fn without the profiler (device work included)."""
    cuda = _cuda_active(torch)
    wait_for_devices(torch, cuda)
    start = clock.now_ns()
    fn(*args, **kwargs)
    wait_for_devices(torch, cuda)
    return clock.now_ns() - start


def run_steps(
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    warmup: int,
    steps: int,
    probe: Callable[[], None] | None = None,
    work: bool = True,
    threads: int | None = None,
    cut_short: Callable[[Profile, BaseException], None] | None = None,
    signature: bool = False,
    workload: bool = False,
) -> tuple[Profile, T]:
    """Call fn `warmup` times unprofiled, then `steps` times profiled, one step each, then (with
    `work` or `signature`) once more profiled apart for the ops' inputs and FLOPs (the signature
    step, untimed; a further measurement takes it to tell whether fn ran the first's work).
    With `work`, UNPROFILED_STEPS more calls are timed without the profiler (before the profiled
    steps, after them with no warmup) for the profile's `overhead`. Returns the profile and fn's
    last result. When fn raises in a profiled step (or after the steps), `cut_short` is given
    what was recorded up to then and the exception, for the failure's report, before the
    exception goes on. `probe` (the plugin's CPU-wait and GPU clock sampler) is called just
    before the first profiled step and just after the last.
    `threads`: torch's thread count for the call (a confirmation runs on its first measurement's
    threads, which the test may have restored since), put back afterwards. With `work`, after the
    signature step, the workload reference is timed (workload_choice). A confirmation takes none:
    it runs only when the first measurement's references excused nothing, and pooling keeps the
    faster of each. `workload`: a further measurement of a recording takes one all the same, as
    the file may hold it (decide._calm_base: a review's calm one was written without one)."""
    __tracebackhide__ = True  # a failure in fn shows the user's frames, not the loop calling it
    validate_run_args(fn, warmup, steps, args, kwargs)
    torch = _torch()
    _refuse_a_running_profiler(torch)  # before warmup: fail without running the user's code
    with compiled_kernel_profiling(), _on_threads(torch, threads):
        return _run_steps(torch, fn, args, kwargs, warmup, steps, probe, work, cut_short, signature, workload)


def by_failure(exc: BaseException | None) -> bool:
    """Whether an exception that ended a capture is the test failing (or skipping), whose report
    may show what the capture recorded: not an interrupt (Ctrl-C) or SystemExit."""
    return exc is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit))


def _read_cut_short(prof: Any, aside: bool = False) -> Profile | None:
    """A stopped profiler's capture, cut short by the test's exception; None when there is none
    or it cannot be read (the test's own exception is what must surface, not ours)."""
    if prof is None:
        return None
    try:
        return _read_own(prof, aside=aside)
    except Exception:
        return None


@contextmanager
def _on_threads(torch: Any, threads: int | None) -> Iterator[None]:
    torch = own(torch)
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _with_dynamo_facts(
    timed: Profile, given: tuple[Any, ...], breaks_before: BreaksSeen, steps_before: BreaksSeen
) -> Profile:
    """The run's profile with what Dynamo did in it: the graph breaks it found, with torch's reasons;
    where it hit its recompile limit, when and after how many graphs; and a warning where compiled
    code ran eagerly in the steps (`given`: fn and what it was handed): the `recompile_limit`
    warning where the limit was hit in the run, else `not_compiled`. Not where the steps ran compiled
    throughout (a limit hit by another frame, or by shapes the steps do not use: a trial's), nor
    where eager was the user's choice (the force_eager and eager_on_recompile stances)."""
    new_breaks = new_break_reasons(breaks_before)
    if new_breaks:
        timed = replace(timed, metadata={**timed.metadata, "graph_break_reasons": new_breaks})
    checks = [c for c in timed.checks if c.name != NOT_COMPILED]
    if _eager_chosen():
        return replace(timed, checks=tuple(checks))
    eager = len(checks) < len(timed.checks) or _given_ran_none(timed, given)
    limit = recompile_limit_hit(breaks_before)
    if limit is not None:
        compiled = graphs_since(breaks_before)  # fewer than the limit: earlier calls in the process compiled it
        in_steps = recompile_limit_hit(steps_before) is not None  # (or after them: the unprofiled calls)
        found = {"recompile_limit_hit": limit, "limit_in_steps": in_steps, "graphs_in_run": compiled}
        said = [recompile_limit_check(limit, compiled)] if eager else []
        return replace(timed, metadata={**timed.metadata, **found}, checks=(*checks, *said))
    if eager and len(checks) == len(timed.checks):  # the events showed none: what run() was given did
        return replace(timed, checks=(*timed.checks, not_compiled_check()))
    return timed


def _given_ran_none(timed: Profile, given: tuple[Any, ...]) -> bool:
    """run() was given torch.compile'd code (as fn, an argument, or in fn's closure: `run(infer,
    model, x)`, `run(lambda: model(x))`) and no compiled region ran in the steps, though ops did."""
    if "torch._dynamo.eval_frame" not in sys.modules:  # nothing was compiled in this process
        return False
    ran = timed.compiled is not None and any(r.step >= 0 for r in timed.compiled.regions)
    return not ran and bool(timed.ops) and any(_compiled_safely(obj) for obj in _reachable(given))


def _compiled_safely(obj: Any) -> bool:
    """compiled_callable of any object a test hands run(): one whose attributes raise (a mock, a
    proxy) is none."""
    try:
        return compiled_callable(obj)
    except Exception:
        return False


def _reachable(given: tuple[Any, ...]) -> list[Any]:
    """The objects a run() hands its steps: fn, its arguments, fn's closure and bound object, a
    partial's function and arguments (one level: enough for a lambda or a helper around a model)."""
    found: list[Any] = []
    for obj in given:
        found.append(obj)
        try:  # an object whose attributes raise (a mock, a proxy) hands nothing more
            found.extend(_cell_contents(cell) for cell in getattr(obj, "__closure__", None) or ())
            found.append(getattr(obj, "__self__", None))  # `model.forward` of a module whose .compile() was called
            if isinstance(obj, functools.partial):
                found += [obj.func, *obj.args, *obj.keywords.values()]
        except Exception:
            continue
    return found


def _cell_contents(cell: Any) -> Any:
    """A closure cell's object; None for an empty one (a name the function reads before it is bound)."""
    try:
        return cell.cell_contents
    except ValueError:
        return None


def _eager_chosen() -> bool:
    """Whether eager runs are the user's choice now: Dynamo off, or the eager_on_recompile stance."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and (_dynamo_off(eval_frame) or _stance(eval_frame) == "eager_on_recompile")


def compiled_callable(fn: Any) -> bool:
    """Whether `fn` is torch.compile's, to run compiled: a compiled module, a compiled function, or a
    module whose .compile() was called; not one torch.compiler.disable made (its marks are a compiled
    one's), nor any while Dynamo is off (torch.compiler.set_stance("force_eager"), config.disable)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None or _dynamo_off(eval_frame) or getattr(fn, "_torchdynamo_disable", False):
        return False
    optimized = getattr(eval_frame, "OptimizedModule", None)
    if isinstance(optimized, type) and isinstance(fn, optimized):
        disabled = getattr(eval_frame, "DisableContext", None)
        return not (isinstance(disabled, type) and isinstance(getattr(fn, "dynamo_ctx", None), disabled))
    return (
        callable(getattr(fn, "_torchdynamo_orig_callable", None))
        or getattr(fn, "_compiled_call_impl", None) is not None
    )


def _dynamo_off(eval_frame: Any) -> bool:
    """Whether Dynamo runs compiled code eagerly by the user's choice: the force_eager stance, or
    torch._dynamo.config.disable."""
    config = sys.modules.get("torch._dynamo.config")
    return _stance(eval_frame) == "force_eager" or bool(getattr(config, "disable", False))


def _stance(eval_frame: Any) -> str | None:
    """Dynamo's stance now (torch.compiler.set_stance): `default`, `force_eager`, ..."""
    return getattr(getattr(eval_frame, "_stance", None), "stance", None)


def _run_steps(
    torch: Any,
    fn: Callable[..., T],
    args: Any,
    kwargs: dict[str, Any],
    warmup: int,
    steps: int,
    probe: Callable[[], None] | None,
    work: bool,
    cut_short: Callable[[Profile, BaseException], None] | None = None,
    signature: bool = False,
    workload: bool = False,
) -> tuple[Profile, T]:
    __tracebackhide__ = True
    warm_profiler()  # the Python API's first measure() too: torch's first profiler start is no step's
    breaks_before = breaks_seen()
    # The machine references first: right after them compiled code ran slow for several calls (a
    # trial's 643, 185, 98 us against 75), which the warm-up now absorbs instead of the timed calls.
    before = take_references(torch)
    for _ in range(warmup):
        fn(*args, **kwargs)
    # The observer effect: steps timed without the profiler, warm, just before the profiled ones
    # (after them when there is no warmup: the first profiled step is then the cold call asked for).
    observed = UNPROFILED_STEPS if work else 0  # a confirming measurement reads only the times
    unprofiled = [unprofiled_step_ns(torch, fn, args, kwargs) for _ in range(observed if warmup else 0)]
    steps_before = breaks_seen()
    prof, threads, result = _profiled_steps(torch, fn, args, kwargs, steps, cut_short, probe)
    try:
        with _cut_short_as(
            cut_short, lambda: _cut_with_others(_read_cut_short(prof), threads.others)
        ):  # fn may still raise: the steps stand
            unprofiled += [unprofiled_step_ns(torch, fn, args, kwargs) for _ in range(0 if warmup else observed)]
    except BaseException:
        release_results(prof)  # read for the failure's report or not
        raise
    timed = with_overhead(with_reference(_read_own(prof), threads.fewest, before, take_references(torch)), unprofiled)
    timed = with_other_threads(timed, threads.others)
    timed = _with_dynamo_facts(timed, (fn, *args, *kwargs.values()), breaks_before, steps_before)
    if not (work or signature):
        return timed, result
    with _cut_short_as(cut_short, lambda: timed):
        signed, result = _signature_step(torch, fn, args, kwargs)
    recorded = {op.name: op.work for op in signed.ops if op.work}
    timed = timed.with_work(recorded, signed.work_steps, signed.list_shapes)
    if not (work or workload):  # a further measurement: its references are pooled with the first's, the faster kept
        return timed, result
    return with_workload_reference(torch, timed, workload_choice(timed)), result


def _profiled_steps(
    torch: Any,
    fn: Callable[..., T],
    args: Any,
    kwargs: Any,
    steps: int,
    cut_short: Callable[[Profile, BaseException], None] | None,
    probe: Callable[[], None] | None = None,
) -> tuple[Any, ThreadWatch, T]:
    """`steps` profiled calls of fn, one step each: the stopped profiler, the threads watched and
    fn's last result. When fn raises, `cut_short` gets what was recorded up to then. `probe` is
    called just before the first step and just after the last, the profiler running: the CPU
    wait it reads is the steps', not the profiler's start and stop (a third of a 30 ms capture)."""
    __tracebackhide__ = True
    result: Any = None
    prof: Any = None
    watched: list[ThreadWatch] = []  # the threads the failure's profile names, once the watch stopped

    def cut() -> Profile | None:
        return _cut_with_others(_cut_in_step(_read_cut_short(prof)), watched[0].others if watched else ())

    try:
        with _cut_short_as(cut_short, cut):
            with _profiling(torch) as (prof, cuda), threads_watched(torch) as threads:
                watched.append(threads)
                if probe is not None:
                    probe()
                for number in range(1, steps + 1):
                    with _step(torch, number, cuda):
                        result = fn(*args, **kwargs)
                if probe is not None:
                    probe()
    except BaseException:
        if prof is not None:  # read for the failure's report or not, its results go (release_results)
            release_results(prof)
        raise
    return prof, threads, result


def _cut_with_others(profile: Profile | None, others: tuple[OtherThread, ...]) -> Profile | None:
    """A capture a failure cut short, with the other Python threads that ran in it: the failure's
    report and trace say them as a kept capture's do (a review's failing twin lost the warning)."""
    return with_other_threads(profile, others) if profile is not None else None


def _cut_in_step(profile: Profile | None) -> Profile | None:
    """A capture the test's exception ended inside a step: that step is partial, so a warning
    that the steps differ because of it says nothing of the code (it blamed data-dependent code
    for a timeout); one that the whole steps before it bear out stands."""
    if profile is None:
        return None
    checks = last_step_partial(profile.checks, profile.ops, len(profile.step_spans))
    return replace(profile, checks=checks, cut_in_step=True)


@contextmanager
def _cut_short_as(
    cut_short: Callable[[Profile, BaseException], None] | None, recorded: Callable[[], Profile | None]
) -> Iterator[None]:
    """When fn raises inside, `cut_short` is given what was `recorded` (for the failure's report)
    before the exception goes on."""
    __tracebackhide__ = True
    try:
        yield
    except BaseException as exc:
        if cut_short is not None and by_failure(exc) and (profile := recorded()) is not None:
            cut_short(profile, exc)
        raise


def _signature_step(torch: Any, fn: Callable[..., T], args: Any, kwargs: Any) -> tuple[Profile, T]:
    """One untimed call profiled with record_shapes and with_flops: the work signatures.

    Recording inputs costs every op time, so it never shares a profiler with the timed steps.
    It comes after them: warm whatever `warmup` is, and the timed steps are as they were."""
    __tracebackhide__ = True  # a failure in fn shows the user's frames
    prof = None
    try:
        with _profiling(torch, work=True) as (prof, cuda):
            with _step(torch, 1, cuda):
                result = fn(*args, **kwargs)
    except BaseException:
        if prof is not None:
            release_results(prof)
        raise
    return _read_own(prof), result


@fn_first("measure", method=False)
def measure(fn: Callable[..., Any], /, *args: Any, warmup: int = 3, steps: int = 10, **kwargs: Any) -> Profile:
    """Profile `steps` calls of fn(*args, **kwargs) after `warmup` unprofiled ones."""
    validate_run_args(fn, warmup, steps, args, kwargs, call="measure")
    _whole_call_gives_way()
    unprofiled = kernel_profiling_off()
    profile, result = run_steps(fn, args, kwargs, warmup, steps)
    return _with_kernels_check(_why_empty(profile, fn, steps, result), unprofiled)


def _whole_call_gives_way() -> None:
    """The library's measure() or capture() in a measured test's body: the plugin's whole-call
    capture gives way, as to a torch profiler the test starts (a trial's was refused as nested).
    Not for the fixture's own run() or capture() (of a fixture asked for late, beside the marker's
    whole call, a review's): they stay refused as nested."""
    for recorder in list(_STEPS_ASIDE):
        recorder.give_way()


def kernel_profiling_off() -> bool:
    """Whether Inductor is loaded with its C++ kernel profiling off: what it compiled so far shows
    no kernel in a profile (checks.unprofiled_kernels_check)."""
    config = sys.modules.get("torch._inductor.config")
    return config is not None and not config.cpp.enable_kernel_profile


def _with_kernels_check(profile: Profile, unprofiled: bool) -> Profile:
    """A library capture's profile, warned where its compiled code's kernels went unprofiled."""
    found = unprofiled_kernels_check(profile) if unprofiled else None
    return replace(profile, checks=(*profile.checks, found)) if found else profile


def _why_empty(profile: Profile, fn: Callable[..., Any], steps: int, result: object) -> Profile:
    """A profile that recorded no event at all, its `events` error saying why, as opprof.run()'s
    does (a library trial's fn returned a `map`, its work not done, and read only `nothing ran
    under the profiler`)."""
    if not profile.recorded_nothing:
        return profile
    why = ran_no_op_in_run(fn, steps, result, call="measure")
    return replace(profile, checks=tuple(replace(c, message=why) if c.name == "events" else c for c in profile.checks))


class Capture:
    """What `capture()` returns: a context manager whose `with` profiles its block as one step;
    `.profile` is the latest block's, set when it ends without an exception (None before, and
    after a block that raised).
    Entered again, it captures again (a generator-based one raised AttributeError, and its
    `.profile` did not exist before the block)."""

    profile: Profile | None

    def __init__(self) -> None:
        self.profile = None
        self._recorder: StepRecorder | None = None
        self._unprofiled = False  # Inductor's kernel profiling was off at the block's start

    def __enter__(self) -> Capture:
        if self._recorder is not None:
            raise CaptureError(captures_cannot_nest())
        self.profile = None  # a block that raises leaves none: not the block before's
        _whole_call_gives_way()
        recorder = StepRecorder()
        recorder.start()  # may raise (another profiler runs): then no block is in progress
        self._recorder = recorder
        self._unprofiled = kernel_profiling_off()
        return self

    def __exit__(self, kind: object, raised: BaseException | None, traceback: object) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        if raised is not None:
            recorder.stop(keep=False)
            return  # the exception goes on
        profile = recorder.stop()
        if profile is not None:
            self.profile = _with_kernels_check(profile, self._unprofiled or kernel_profiling_off())


def capture() -> Capture:
    """Profile the block as one step: `with capture() as cap: ...; cap.profile`."""
    return Capture()


INDUCTOR_KERNEL_PROFILE = "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"


def enable_compiled_kernel_profiling() -> None:
    """Inductor's C++ kernels show in a profile only when compiled with kernel profiling on:
    switch it on for code compiled from now on (unless the user set it to 0). Nothing is
    imported; a config already loaded is set too. Used through compiled_kernel_profiling()."""
    os.environ.setdefault(INDUCTOR_KERNEL_PROFILE, "1")
    config = sys.modules.get("torch._inductor.config")
    if config is not None and os.environ[INDUCTOR_KERNEL_PROFILE] == "1":
        config.cpp.enable_kernel_profile = True


@contextmanager
def compiled_kernel_profiling() -> Iterator[None]:
    """Kernel profiling on for what compiles inside the block only (`measure()` used as a
    library): the variable and Inductor's flag are as they were after it, so models the caller
    compiles later are not slowed by it. Kernels compiled inside keep their profiling."""
    variable = os.environ.get(INDUCTOR_KERNEL_PROFILE)
    loaded = sys.modules.get("torch._inductor.config")
    flag = loaded.cpp.enable_kernel_profile if loaded is not None else None
    enable_compiled_kernel_profiling()
    try:
        yield
    finally:
        if variable is None:
            os.environ.pop(INDUCTOR_KERNEL_PROFILE, None)
        config = sys.modules.get("torch._inductor.config")  # maybe loaded inside: it read the variable
        if config is not None:
            config.cpp.enable_kernel_profile = flag if loaded is not None else variable == "1"
