"""A fake clock for live captures: the ops that really ran, timed by a fixed cost table.

Tests of the time rule must not depend on this machine's timing. The `fake_clock` fixture
(conftest.py) rewrites every live capture's CPU timestamps: each op or annotation costs its
self time from `costs` (default 10 us), and spans its children. Nesting, counts and inputs stay
as torch recorded them; the times are exact and the same on a loaded CI machine.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_opprof.events import ANNOTATION, CPU_OP, RUNTIME, EventTable

DEFAULT_COST_NS = 10_000
_TIMED = (CPU_OP, ANNOTATION, RUNTIME)


@dataclass
class FakeClock:
    """Self cost in ns per op name; `plan` scales the costs of successive timed captures
    (the first run() measurement, its confirmation, ...); after the plan, 1.0."""

    costs: dict[str, int] = field(default_factory=dict)
    # the costs, where different, of a capture whose steps ran under a Python tracer (coverage): read
    # where the capture is read, on the thread and in the state its steps ran in
    traced_costs: dict[str, int] = field(default_factory=dict)
    plan: list[float] = field(default_factory=list)
    captures: int = 0  # timed captures rewritten so far
    signature_captures: int = 0  # captures with inputs recorded (run()'s signature steps, one-step captures)
    host_reads: list[int] = field(default_factory=list)  # the plugin's wall-clock reads around captures
    pauses: list[float] = field(default_factory=list)  # the seconds each confirmation's pause would have taken
    idle_pauses: list[float] = field(default_factory=list)  # and each idle one (xdist workers)
    unprofiled_ns: int = 1_000_000  # a step of run() timed without the profiler (the observer effect)
    host_step_ns: int = 1_000_000  # how far the plugin's wall clock moves from one read to the next

    def host_ns(self) -> int:
        """The plugin's wall clock around captures: `host_step_ns` (1 ms) further at each read."""
        self.host_reads.append((self.host_reads[-1] if self.host_reads else 0) + self.host_step_ns)
        return self.host_reads[-1]

    @property
    def now_ns(self) -> int:
        return self.host_reads[-1] if self.host_reads else 0

    def cost(self, name: str, scale: float) -> int:
        if name.startswith("ProfilerStep#") or name.startswith("opprof::"):
            return 0
        traced = self.traced_costs if (sys.gettrace() or sys.getprofile()) is not None else {}
        return int(traced.get(name, self.costs.get(name, DEFAULT_COST_NS)) * scale)

    def apply(self, table: EventTable, with_shapes: bool) -> EventTable:
        """Rewrite the CPU-side times of one capture (a signature step is not a timed capture)."""
        scale = 1.0
        if with_shapes:
            self.signature_captures += 1
        else:
            scale = self.plan[self.captures] if self.captures < len(self.plan) else 1.0
            self.captures += 1
        retime(table, lambda name: self.cost(name, scale))
        return table


def retime(table: EventTable, cost: Callable[[str], int]) -> None:
    """Give each CPU-side event a start and duration from a fake clock, per thread: an event
    starts when its predecessors' costs are spent and lasts its own cost plus its children's."""
    threads: dict[tuple[int, int], list[int]] = {}
    for i, kind in enumerate(table.kind):
        if kind in _TIMED:
            threads.setdefault((table.pid[i], table.tid[i]), []).append(i)
    clock = 1_000_000
    for rows in threads.values():
        rows.sort(key=lambda i: (table.start_ns[i], -table.dur_ns[i]))
        clock = _retime_thread(table, rows, cost, clock)


def _retime_thread(table: EventTable, rows: list[int], cost: Callable[[str], int], clock: int) -> int:
    stack: list[tuple[int, int]] = []  # (row, real end)
    starts: dict[int, int] = {}

    def close(row: int) -> None:
        table.dur_ns[row] = clock - starts[row]
        table.start_ns[row] = starts[row]

    for i in rows:
        real_start = table.start_ns[i]
        while stack and stack[-1][1] <= real_start:
            close(stack.pop()[0])
        starts[i] = clock
        clock += cost(table.name[i]) if table.kind[i] != RUNTIME else 1_000
        stack.append((i, real_start + table.dur_ns[i]))
    while stack:
        close(stack.pop()[0])
    return clock


def install_in_worker(costs: dict[str, int] | None = None, pauses: bool = False) -> FakeClock:
    """In an xdist worker that a test's own pytester run started, which the `fake_clock` fixture
    (an in-process monkeypatch) does not reach: the same clock (`costs` as the test's), steady
    references and contention unknown, for the worker's life; its pauses skipped unless
    `pauses` (a test that logs them patches them itself)."""
    import importlib

    from pytest_opprof import device

    capture = importlib.import_module("pytest_opprof.capture")  # the module, not the function
    kineto = importlib.import_module("pytest_opprof.kineto")
    references = importlib.import_module("pytest_opprof.references")
    fixture = importlib.import_module("pytest_opprof.fixture")
    clock = FakeClock(costs=dict(costs or {}))
    read = kineto.table_of
    kineto.table_of = lambda results, with_shapes=False, own_flops=False: clock.apply(
        read(results, with_shapes, own_flops), with_shapes
    )
    capture.unprofiled_step_ns = lambda torch, fn, args, kwargs: (fn(*args, **kwargs), clock.unprofiled_ns)[1]
    references.machine_reference_ns = lambda torch: 1_000_000
    references.dispatch_reference_ns = lambda torch: 400_000
    references.small_reference_ns = lambda torch: 150_000
    references.workload_reference_ns = lambda torch, choice: 500_000
    fixture.host_ns = clock.host_ns
    if not pauses:
        fixture.confirmation_pause = lambda seconds, threads=None: None
        fixture.idle_pause = lambda seconds: None
    device.cpu_wait_ns = lambda: None
    device.python_tracer = lambda: None
    return clock


# For a pytester project's conftest.py: its xdist workers (a new test run's, not the outer
# suite's own, whose workers the fixtures reach) time their captures on the fake clock too, with
# the costs OPPROF_FAKE_WORKER_COSTS gives (JSON, op name -> ns) over the defaults.
WORKER_FAKE_CLOCK = """
import json as _json
import os as _os
import sys as _sys

if _os.environ.get("PYTEST_XDIST_WORKER") and _os.environ.get("OPPROF_FAKE_CLOCK_DIR") and _os.environ.get(
    "PYTEST_XDIST_TESTRUNUID"
) != _os.environ.get("OPPROF_FAKE_CLOCK_OUTER_RUN"):
    _sys.path.insert(0, _os.environ["OPPROF_FAKE_CLOCK_DIR"])
    import fake_clock as _fake_clock

    _fake_clock.install_in_worker(_json.loads(_os.environ.get("OPPROF_FAKE_WORKER_COSTS", "{}")))
"""
