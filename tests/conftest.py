from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# The shared real-world traces live beside the repository (../shared/traces); never copied in.
SHARED_TRACES = Path(os.environ.get("OPPROF_SHARED_TRACES", Path(__file__).resolve().parents[2] / "shared" / "traces"))
SHARED_TRACE_FILES = sorted(SHARED_TRACES.glob("*.json*")) if SHARED_TRACES.is_dir() else []


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACE_FILES:
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


def set_references(
    monkeypatch: pytest.MonkeyPatch,
    matmul_ns: int,
    dispatch_ns: int,
    workload_ns: int | None = 500_000,
    small_ns: int = 150_000,
) -> None:
    """From now on the matmul, dispatch, small matmul and workload references read these (a
    machine in one state; `workload_ns` None: no workload reference is taken)."""
    import importlib

    references = importlib.import_module("pytest_opprof.references")
    monkeypatch.setattr(references, "machine_reference_ns", lambda torch: matmul_ns)
    monkeypatch.setattr(references, "dispatch_reference_ns", lambda torch: dispatch_ns)
    monkeypatch.setattr(references, "small_reference_ns", lambda torch: small_ns)
    monkeypatch.setattr(references, "workload_reference_ns", lambda torch, choice: workload_ns)


@pytest.fixture
def steady_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """The matmul and dispatch references read the same every time: a steady machine."""
    set_references(monkeypatch, 1_000_000, 400_000)


@pytest.fixture
def uncontended(steady_references: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests of the time rule itself: steady references and CPU contention unknown (as on a
    kernel without schedstat). Under `-n 2` on 2 cores both guards rightly turn time failures
    into warnings; they have their own tests."""
    from pytest_opprof import device

    monkeypatch.setattr(device, "cpu_wait_ns", lambda: None)
    monkeypatch.setattr(device, "python_tracer", lambda: None)  # also when the suite runs under coverage


@pytest.fixture
def fake_clock(uncontended: None, monkeypatch: pytest.MonkeyPatch):
    """Live captures timed by a fixed cost table (tests/fake_clock.py) on a steady, uncontended
    machine: tests of the time rule, deterministic under any load."""
    import importlib

    from fake_clock import FakeClock

    capture = importlib.import_module("pytest_opprof.capture")  # the module, not the function
    kineto = importlib.import_module("pytest_opprof.kineto")
    clock = FakeClock()
    read = kineto.table_of

    def timed(results, with_shapes=False, own_flops=False):
        return clock.apply(read(results, with_shapes, own_flops), with_shapes)

    monkeypatch.setattr(kineto, "table_of", timed)

    def unprofiled(torch, fn, args, kwargs):  # a step without the profiler: clock.unprofiled_ns
        fn(*args, **kwargs)
        return clock.unprofiled_ns

    monkeypatch.setattr(capture, "unprofiled_step_ns", unprofiled)
    fixture = importlib.import_module("pytest_opprof.fixture")
    monkeypatch.setattr(fixture, "host_ns", clock.host_ns)
    monkeypatch.setattr(fixture, "confirmation_pause", lambda s, threads=None: clock.pauses.append(s))
    monkeypatch.setattr(fixture, "idle_pause", lambda s: clock.idle_pauses.append(s))
    return clock


@pytest.fixture(autouse=True)
def no_confirmation_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A confirmation's pause and a recorded range's run on the real clock: no test waits for
    them (fake_clock records them)."""
    import importlib

    fixture = importlib.import_module("pytest_opprof.fixture")
    monkeypatch.setattr(fixture, "confirmation_pause", lambda seconds, threads=None: None)
    monkeypatch.setattr(fixture, "idle_pause", lambda seconds: None)


REMEASURE_TESTS = """
import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)


def test_mm(opprof):
    opprof.run(lambda: torch.mm(a, b), warmup=2, steps=6)
"""


@pytest.fixture
def remeasure_project(pytester, fake_clock):
    """A run() test of one matmul, 0.2 ms a call on the fake clock, its baseline recorded."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_re=REMEASURE_TESTS)
    pytester.runpytest("-p", "no:cacheprovider", "--opprof-update-baseline").assert_outcomes(passed=1)
    fake_clock.captures = 0
    fake_clock.pauses.clear()  # the recording's own: three more measurements for the ops' ranges
    return pytester


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    # pytester's in-process runs drop the modules first imported inside them. torch.profiler
    # imports ~800 modules lazily on first use (torch._inductor among them), and torch cannot
    # register its operator libraries twice; so we use the profiler once here, up front.
    # torch before 2.7 imports torch._dynamo (and its `_inductor_test` library) only at an
    # optimizer's first step, not with the profiler: so we import it here too (free on 2.13).
    import warnings

    try:
        with warnings.catch_warnings():  # torch without numpy warns at import: not ours to show
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
            import torch
    except ImportError:
        return
    import torch._dynamo  # noqa: F401

    from pytest_opprof.capture import quiet_profiler
    from pytest_opprof.owntorch import keep

    keep(torch)  # opprof's own calls of torch's functions, kept before any test monkeypatches them

    with quiet_profiler():  # Kineto's USDT lines at start and stop
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            torch.ones(1).add(1)
