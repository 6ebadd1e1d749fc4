"""Hand-built events for unit tests: times in microseconds for readability, stored as ns."""

from __future__ import annotations

from collections.abc import Callable

from pytest_opprof.events import ANNOTATION, CPU_OP, KERNEL, MEMCPY, MEMSET, RUNTIME, Event

US = 1000


def op(
    name: str, start_us: float, dur_us: float, tid: int = 1, ext: int = 0, shapes=(), dtypes=(), flops: int = 0
) -> Event:
    return Event(
        CPU_OP,
        name,
        int(start_us * US),
        int(dur_us * US),
        100,
        tid,
        external_id=ext,
        shapes=shapes,
        dtypes=dtypes,
        flops=flops,
    )


def step(n: int, start_us: float, dur_us: float, tid: int = 1) -> Event:
    return Event(ANNOTATION, f"ProfilerStep#{n}", int(start_us * US), int(dur_us * US), 100, tid)


def stepped(n: int, period_us: float, body: Callable[[int, float], list[Event]]) -> list[Event]:
    """`n` steps of `period_us` each: a step marker, then body(i, base) for step i (0-based)
    starting at `base` us."""
    return [e for i in range(n) for e in (step(i + 1, i * period_us, period_us), *body(i, i * period_us))]


def annotation(name: str, start_us: float, dur_us: float, tid: int = 1) -> Event:
    return Event(ANNOTATION, name, int(start_us * US), int(dur_us * US), 100, tid)


def launch(start_us: float, corr: int, tid: int = 1, name: str = "cudaLaunchKernel", dur_us: float = 1) -> Event:
    return Event(RUNTIME, name, int(start_us * US), int(dur_us * US), 100, tid, correlation=corr)


def kernel(
    name: str, start_us: float, dur_us: float, corr: int = 0, stream: int = 7, device: int = 0, ext: int = 0
) -> Event:
    return Event(KERNEL, name, int(start_us * US), int(dur_us * US), device, stream, device, stream, corr, ext)


def memcpy(name: str, start_us: float, dur_us: float, nbytes: int, corr: int = 0, stream: int = 7) -> Event:
    return Event(MEMCPY, name, int(start_us * US), int(dur_us * US), 0, stream, 0, stream, corr, 0, nbytes)


def memset(start_us: float, dur_us: float, nbytes: int, corr: int = 0, stream: int = 7) -> Event:
    return Event(MEMSET, "Memset (Device)", int(start_us * US), int(dur_us * US), 0, stream, 0, stream, corr, 0, nbytes)
