"""The plugin's own clock and sleep: the real ones, out of reach of a test that freezes or mocks
time. freezegun (`@freeze_time`) and `mock.patch("time.perf_counter")` replace the `time`
module's functions, and freezegun every module attribute that is one of them; a busy pause that
read a frozen clock never ended (a trial's recording spun both cores for 15 minutes), and a
profiler's cost read from a mocked one vanished. Held as a class's attributes, which neither
reaches."""

from __future__ import annotations

import time


class _Real:
    perf_counter_ns = staticmethod(time.perf_counter_ns)
    sleep = staticmethod(time.sleep)


def now_ns() -> int:
    """The real monotonic clock, in ns (time.perf_counter_ns as it was at import)."""
    return _Real.perf_counter_ns()


def sleep(seconds: float) -> None:
    """The real time.sleep, as it was at import."""
    _Real.sleep(seconds)
