"""What ran beside a capture: torch's intra-op thread counts the capturing thread set
(ThreadWatch), and the other Python threads that ran during it (PythonThreadWatch)."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from . import clock, device  # as modules: tests put fakes on device
from .analysis.model import OtherThread
from .breaks import in_torch
from .owntorch import own


class ThreadWatch:
    """torch's intra-op thread counts during a capture, on the capturing thread: the count at its
    start and at its end, and each count that thread sets through torch.set_num_threads
    meanwhile, so a limit the code restores before the capture ends is still seen. The setting is
    per thread (a DataLoader's pin-memory thread sets 1 for itself): other threads' calls do not
    count. `fewest` is what the capture records; `others`, the other Python threads that ran
    during it (PythonThreadWatch)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._original: Any = None
        self._wrapper: Any = None
        self._python = PythonThreadWatch()
        self._read = own(torch).get_num_threads  # not a test's mock of it
        self.seen = [self._read()]

    @property
    def others(self) -> tuple[OtherThread, ...]:
        return self._python.found

    def start(self) -> None:
        self._python.start()
        torch, seen, me = self._torch, self.seen, threading.get_ident()
        original = self._original = torch.set_num_threads

        def set_num_threads(n: int) -> None:
            original(n)
            if threading.get_ident() == me:
                seen.append(self._read())

        torch.set_num_threads = self._wrapper = set_num_threads

    def stop(self) -> None:
        if self._original is not None and self._torch.set_num_threads is self._wrapper:
            self._torch.set_num_threads = self._original  # not when the test replaced it meanwhile
        self._original = self._wrapper = None
        self.seen.append(self._read())
        self._python.stop()

    @property
    def fewest(self) -> int:
        return min(self.seen)


OTHER_THREAD_MS = 0.1  # CPU a Python thread used in a capture from which it ran in it (with OTHER_THREAD_SHARE)


OTHER_THREAD_SHARE = 0.05  # of the capture's wall: a heartbeat's 2.2 ms in a 500 ms capture is no work of it


# CPU a thread started in the capture that is not the code's own (a Timer, torch's) must use to be
# named: its start alone passed the floor beside a busy loop (a cancelled Timer, 1 run in 12)
STARTED_ASIDE_MS = 1.0


class PythonThreadWatch:
    """The Python threads besides the capturing one that ran during a capture, whose ops
    torch.profiler does not record. Given the capture's work: a thread the code started in it
    (a hook `threading` gives each new thread while it runs), and a ThreadPoolExecutor's worker
    that ran an item the code submitted in it (its `submit` is watched: a pool made before whose
    0.1 ms items the CPU rule missed 5 runs in 6). torch's own are not the code's: a pool torch
    submits to (Inductor compiles in one: a review's cold-cache run failed an absence on it), a
    thread whose target is torch's, a Timer (a cancelled one runs nothing). Besides, any other
    alive at its end that used OTHER_THREAD_MS and OTHER_THREAD_SHARE of its wall in CPU, or,
    started in it, STARTED_ASIDE_MS (its start alone may pass the floor on a loaded machine) (a queue
    worker of the code's own). The hooks pass straight through once it stopped, should the code
    have kept them (a test's monkeypatch put one back as the method it found)."""

    def __init__(self) -> None:
        self._me = self._wall = 0
        self._active = False
        self._before: dict[int, tuple[str, int]] = {}
        self._started: list[tuple[threading.Thread, bool]] = []  # each started, and whether the code's own
        self._ran: dict[int, threading.Thread] = {}  # by id(): pool workers that ran an item the code submitted
        self._previous: Any = None
        self._hook: Any = None
        self._submit: Any = None
        self._original_submit: Any = None
        self.found: tuple[OtherThread, ...] = ()

    def start(self) -> None:
        self._me, self._wall = threading.get_ident(), clock.now_ns()
        self._before = device.python_threads_cpu_ns(self._me)
        self._started, self._ran, self._active = [], {}, True
        self._watch_new_threads()
        self._watch_pools()

    def _watch_new_threads(self) -> None:
        self._previous = previous = threading.getprofile()
        started = self._started

        def first_call(frame: Any, event: Any, arg: Any) -> None:
            if self._active:
                thread = threading.current_thread()
                started.append((thread, _the_codes_own(thread)))
            sys.setprofile(previous)  # seen: the thread goes on as it would have
            if previous is not None:
                previous(frame, event, arg)

        self._hook = first_call
        threading.setprofile(first_call)

    def _watch_pools(self) -> None:
        ran = self._ran
        original = self._original_submit = ThreadPoolExecutor.submit

        def submit(executor: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            if not self._active or in_torch(sys._getframe(1).f_code.co_filename):
                return original(executor, fn, *args, **kwargs)

            def item(*a: Any, **k: Any) -> Any:
                thread = threading.current_thread()
                ran[id(thread)] = thread
                return fn(*a, **k)

            return original(executor, item, *args, **kwargs)

        self._submit = submit
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]

    def stop(self) -> None:
        self._active = False
        if threading.getprofile() is self._hook:  # not one the code set since
            threading.setprofile(self._previous)
        if ThreadPoolExecutor.submit is self._submit:  # not one the code set since
            ThreadPoolExecutor.submit = self._original_submit  # type: ignore[method-assign]
        wall = clock.now_ns() - self._wall
        self.found = self._found(device.python_threads_cpu_ns(self._me), wall)
        self._started.clear()  # the hooks' own lists: nothing of them is kept
        self._ran.clear()

    def _found(self, after: dict[int, tuple[str, int]], wall_ns: int) -> tuple[OtherThread, ...]:
        """Threads are told apart as objects, not idents: an ended thread's ident is reused (a
        review's joined `alpha` went unnamed beside a later `beta` of its ident)."""
        floor = max(OTHER_THREAD_MS * 1e6, OTHER_THREAD_SHARE * wall_ns)
        started = {id(t) for t, _ in self._started}
        given = {id(t) for t, own in self._started if own} | set(self._ran)
        alive = {t.ident: t for t in threading.enumerate()}
        found, gone = [], Counter[str]()
        for ident, (name, ns) in after.items():
            thread = alive.get(ident)
            new = thread is not None and id(thread) in started
            used = ns - (0 if new else self._before.get(ident, (name, ns))[1])
            worked = thread is not None and id(thread) in given
            if worked or used >= (max(floor, STARTED_ASIDE_MS * 1e6) if new else floor):
                found.append(OtherThread(name, round(used / 1e6, 3), given_work=worked))
        ended = [t for t, _ in self._started if id(t) in given] + [
            t for key, t in self._ran.items() if key not in started
        ]
        for thread in ended:  # gone by the end, or unread (no /proc)
            if alive.get(thread.ident) is not thread or thread.ident not in after:
                gone[thread.name] += 1
        return tuple(found + [OtherThread(name, None, count) for name, count in gone.items()])


# multiprocessing's own threads, which move data between processes and run no torch op: a queue's
# feeder (a trial's DataLoader test warned of 10 `QueueFeederThread`s it could neither stop nor run
# on the calling thread) and a process pool's handlers. A ThreadPool's workers run the code's work.
_MULTIPROCESSING_PLUMBING = frozenset(
    {
        ("multiprocessing.queues", "Queue._feed"),
        ("multiprocessing.pool", "Pool._handle_workers"),
        ("multiprocessing.pool", "Pool._handle_tasks"),
        ("multiprocessing.pool", "Pool._handle_results"),
    }
)


def _the_codes_own(thread: threading.Thread) -> bool:
    """Whether a thread started in a capture is the code's own: not a Timer (a cancelled one runs
    nothing), not a pool's worker (whose items say: PythonThreadWatch._ran), not torch's."""
    if isinstance(thread, threading.Timer):
        return False
    target = getattr(thread, "_target", None)
    target = getattr(target, "func", target)  # a functools.partial
    if getattr(target, "__module__", None) == "concurrent.futures.thread":
        return False
    if (getattr(target, "__module__", None), getattr(target, "__qualname__", None)) in _MULTIPROCESSING_PLUMBING:
        return False
    if type(thread).__module__ == "concurrent.futures.process":  # a process pool's manager thread
        return False
    code = getattr(target, "__code__", None)  # torch's Python, not an op of torch's the code runs (torch.sin)
    return not (code is not None and in_torch(code.co_filename))


@contextmanager
def threads_watched(torch: Any) -> Iterator[ThreadWatch]:
    watch = ThreadWatch(torch)
    watch.start()
    try:
        yield watch
    finally:
        watch.stop()
