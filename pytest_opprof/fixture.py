"""The `opprof` fixture object: captures (run, capture, the whole call) and deferred assertions.

No pytest here: the plugin creates it, drives the whole-call capture, and passes `pytest.fail`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, NoReturn, TypeVar, cast

from . import (
    assertions,
    clock,
    device,  # as a module: tests put fakes on it (cpu_wait_ns, ...)
)
from .analysis.checks import CONTENTION_LIMIT, overhead_check
from .capture import StepRecorder, by_failure, run_steps, settle_cpus, torch_state
from .decide import BaselineResult
from .errors import (
    REPEATABLE_FIX,
    OpprofUsageError,
    assertion_inside_capture,
    assertions_before_capture,
    bad_call,
    capture_after_call,
    capture_off_thread,
    closest_names,
    stepped_aside,
    traced_budget,
    waited_for_cpu,
)
from .opmessages import (
    RAN_NO_OP_IN_BLOCK,
    ran_no_op_in_body,
    ran_no_op_in_run,
    unknown_op_name,
    untrusted_earlier,
    untrusted_measurement,
)
from .opnames import is_known_op, known_op_names
from .runargs import fn_first, validate_run_args
from .torchstate import TorchState
from .verdicts import MIN_TIME_STEPS

Timed = Callable[[Any], bool]  # whether a time budget's failure is of time: what it limits ran in the profile

host_ns = clock.now_ns  # the wall clock of the CPU-wait share (tests put a fake here)


def _usage_error(message: str) -> NoReturn:
    raise OpprofUsageError(message)


def _wait_of(host: list[tuple[int, int | None]]) -> float | None:
    """The CPU-wait share between the first and last host sample of a capture."""
    return device.wait_share(host[0], host[-1]) if len(host) >= 2 else None


def _waited_per_step(host: list[tuple[int, int | None]], profile: Any) -> float | None:
    """The ms our threads waited for a CPU in a capture, per step of it: the most that other
    load can have added to a step (excuses.explained_by_machine)."""
    waited = device.waited_ms(host[0], host[-1]) if len(host) >= 2 else None
    steps = getattr(profile, "steps", 0)
    return None if waited is None or not steps else waited / steps


# Seconds torch's threads keep the CPUs busy before each confirmation of a suspected time
# change. On a 2-vCPU VM a parallel op ran 1.5-3x slower, every reference unmoved, in spells
# that follow idle time (torch's OpenMP workers on a vCPU the host let go): a window measured
# 0.3 s after the process idled was slow in 16 of 30 tries, after 0.5 s of busy torch threads in
# 9 of 30 (`python bench/spells.py --rounds 30`). A test pays it when its first measurement
# looked slower, and, recording, before each of the recorded ranges' measurements.
CONFIRM_SETTLE_S = 0.5


CONFIRMATION_RAISED = (
    "opprof: raised while run()'s fn was measured again to confirm a suspected time change (pytest-opprof's docs/verdicts.md: "
    "Confirmation by more measurements): fn is called up to 3 x (warmup + steps + 1) more times; " + REPEATABLE_FIX
)
AHEAD_RAISED = (
    "opprof: raised while run()'s fn was measured again for its baseline's recorded ranges (pytest-opprof's docs/verdicts.md: "
    "Recorded ranges): a recording run calls fn 3 x (warmup + steps + 1) more times; " + REPEATABLE_FIX
)


def confirmation_pause(seconds: float, threads: int | None = None) -> None:
    """Settle the CPUs before a confirmation (the tests replace it: no test waits on the real clock)."""
    settle_cpus(seconds, threads)


def idle_pause(seconds: float) -> None:
    """Idle before a further measurement (a confirmation, a recorded range's) in an xdist worker
    (the tests replace it): a busy pause there inflated another worker's recording x100 (a
    transformer layer's 0.8 ms step read 100 ms under `-n 2`). Elsewhere the busy pause is used:
    idle pauses met more slow spells, and the ranges widened (`bench/idle_runs.py`: an op failed
    past a median x1.57 of its fastest recorded time, x1.30 with busy pauses)."""
    clock.sleep(seconds)


class Remeasured(NamedTuple):
    """A confirmation measurement and the state of the machine during it."""

    profile: Any
    cpu_wait: float | None
    unreliable: str | None
    python_tracer: str | None
    cpu_waited_ms: float | None = None  # per step
    result: Any = None  # fn's last result in it (run() returns the latest; dropped once it has)


def _caller_line() -> str:
    """`tests/test_x.py:12`: the first frame outside this package (the test's assertion)."""
    frame = sys._getframe(1)
    package = os.path.dirname(__file__)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == package:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?"
    path = frame.f_code.co_filename
    try:
        path = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        pass
    return f"{path}:{frame.f_lineno}{_in_subtest(frame.f_locals.get('self'))}"


def _in_subtest(test: object) -> str:
    """` in subTest (i=1)` for an assertion made inside a unittest `self.subTest` (the TestCase
    keeps the one running as `_subtest`): checked when the test returns, its failure names the
    subtest it was made in (a trial's read the same line twice, naming neither)."""
    subtest = getattr(test, "_subtest", None)
    describe = getattr(subtest, "_subDescription", None)
    if subtest is None or not callable(describe):
        return ""
    return f" in subTest {describe()}"


def _overhead_under_load(profile: Any, wait: float | None) -> Any:
    """The profile, its overhead warning saying other load was seen where the threads waited for
    a CPU (that load, not only the profiler, may have slowed the profiled steps)."""
    if wait is None or wait <= CONTENTION_LIMIT or not any(c.name == "overhead" for c in profile.checks):
        return profile
    loaded = overhead_check(profile.overhead, wait)
    return dataclasses.replace(profile, checks=tuple(loaded if c.name == "overhead" else c for c in profile.checks))


M = TypeVar("M", bound=Callable[..., Any])


def _arguments_checked(method: M) -> M:
    """A method whose arguments are checked first: a keyword it does not take, a missing or extra
    argument, is a usage error naming it and what the method takes (a trial's
    `assert_op_below(op, limit=100)` raised Python's bare TypeError, with no fix)."""
    signature = inspect.signature(method)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    takes = (_parameters_text(params) or "no arguments") + _TAKES_MORE.get(method.__name__, "")
    what = f"opprof.{method.__name__}()"

    @functools.wraps(method)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        try:
            signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            wrong = next((k for k in kwargs if k not in signature.parameters), str(exc))
            given = {p.name for p in params[: len(args)]} | set(kwargs)
            close = _meant(wrong, [p.name for p in params if p.name not in given]) if wrong in kwargs else []
            raise OpprofUsageError(bad_call(what, takes, wrong, kwargs, close, _in_ms(wrong, close, kwargs))) from None
        return method(self, *args, **kwargs)

    return cast(M, checked)


_TAKES_MORE = {  # what a method's parameters do not say
    "capture": ": `with opprof.capture():` profiles its block as one step; opprof.run(fn, *args, warmup=3, "
    "steps=10) profiles steps of fn",
}
_MS_PER = {  # a keyword naming another time unit -> milliseconds per unit: `s=0.002` is ms=2, not ms=0.002
    **dict.fromkeys(("s", "sec", "secs", "seconds", "max_s", "time_s"), 1000.0),
    **dict.fromkeys(("us", "usec", "usecs", "microseconds", "max_us", "time_us"), 0.001),
    **dict.fromkeys(("ns", "nanoseconds", "max_ns", "time_ns"), 0.000001),
}


def _in_ms(wrong: str, close: list[str], given: dict[str, Any]) -> float | None:
    """The value of a keyword in another time unit, in the ms the method takes (None: not that)."""
    value, per = given.get(wrong), _MS_PER.get(wrong.lower())
    if close != ["ms"] or per is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(f"{value * per:.6g}")


def _meant(wrong: str, names: list[str]) -> list[str]:
    """The parameter (of `names`, those not given) a keyword a method does not take stands for:
    the word a user reaches for (`limit=2` for ms, `count=1` for n, an audit's two), else a close
    spelling (`mss`). A word with a meaning gets no spelling match: `percent` is no `per`, and
    `max_ms` no `max` (a review's)."""
    if wrong.lower() in _SYNONYMS:
        return [name for name in _SYNONYMS[wrong.lower()] if name in names][:1]
    return closest_names(wrong, names, limit=1)


_SYNONYMS = {  # a word -> the parameters it may stand for, the first a method takes
    **dict.fromkeys(("limit", "threshold"), ("ms", "pct", "min_pct")),
    **dict.fromkeys(("max_ms", "budget", "time", "ms_per_step", "milliseconds", "time_ms", *_MS_PER), ("ms",)),
    **dict.fromkeys(("count", "calls", "times", "expected", "exactly", "number"), ("n",)),
    **dict.fromkeys(("percent", "percentage", "min_percent", "busy"), ("pct", "min_pct")),
    **dict.fromkeys(("statistic", "reduce", "aggregate"), ("stat",)),
    **dict.fromkeys(("name", "op_name", "operator"), ("op", "kernel")),
    **dict.fromkeys(("op", "range", "range_name"), ("name", "kernel")),
    **dict.fromkeys(("at_least", "minimum"), ("min",)),
    **dict.fromkeys(("at_most", "maximum"), ("max",)),
}


def _parameters_text(params: list[inspect.Parameter]) -> str:
    """`op, n=None, *, min=None, max=None`: what a method takes, as its help spells it."""
    parts: list[str] = []
    for param in params:
        if param.kind == param.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        parts.append(param.name if param.default is param.empty else f"{param.name}={param.default!r}")
    return ", ".join(parts)


class OpprofFixture:
    """The `opprof` fixture: capture operators and assert on them.

    Three ways to capture; the latest finished capture wins:
    `run(fn, ...)`, `with capture():`, or nothing (the whole test call is one step, and
    assertions made in the body are checked when it returns).
    Without --opprof, `run` calls fn once and assertions only check their arguments.
    """

    def __init__(
        self,
        nodeid: str,
        enabled: bool,
        sampler: Callable[[], Any] | None = None,
        fail: Callable[[str], NoReturn] = _usage_error,
    ) -> None:
        self.nodeid = nodeid
        self.enabled = enabled
        self.asked_by: str | None = None  # the fixture that asked for this one, where the test did not
        self._fail = fail  # how a misuse fails the test (the plugin passes pytest.fail)
        self._sampler = sampler  # GPU clock sample (device.ClockSample) or None
        self._clocks: list[Any] = []  # samples around the capture in progress
        self.clocks: list[dict[str, Any]] = []  # those of the latest finished capture
        self.unreliable: str | None = None  # why the GPU clocks make its times incomparable
        self._host: list[tuple[int, int | None]] = []  # (wall ns, CPU wait ns) around the capture
        self._children: list[dict[str, int] | None] = []  # child processes' CPU ticks at its start and end
        self.child_processes = 0  # those that used CPU in the latest finished capture
        self.cpu_wait: float | None = None  # share of the capture our threads waited for a CPU
        self.cpu_waited_ms: float | None = None  # and the ms they waited, per step
        self.python_tracer: str | None = None  # what traced Python during it (coverage, a debugger)
        self.tracer_stays = False  # and whether that tracer cannot be taken off for a confirmation
        self.settings: TorchState | None = None  # torch's settings as its latest capture began (torchstate)
        self._remeasure: Callable[[], Remeasured] | None = None  # measures run()'s fn again, for confirmation
        self.measure_ahead = 0  # recording: further measurements run() takes before it returns (recorded ranges)
        self.ranges_wanted: Callable[[], bool] = lambda: True  # recording: whether the file can take them
        # comparing: judges run()'s measurement against its baseline, calling the function it is
        # given for each confirmation of a suspected time (the plugin's; None: nothing to judge)
        self.judge_in_run: Callable[[Callable[[], Remeasured | None]], None] | None = None
        self.pauses_idle = False  # further measurements pause idle (an xdist worker: others measure beside it)
        self._ahead: list[Remeasured] = []  # those run() took, for the baseline step (in its caller's context)
        self._profile: Any = None
        self._whole_call: Any = None  # StepRecorder around the test call, until a capture of its own
        self._deferred: list[tuple[assertions.Assertion, str, Timed | None]] = []  # where the test made it; timed
        self._plain_captured = False  # without --opprof: a run() or capture() was called
        self.error_messages: list[str] = []  # make the test an error: untrusted numbers, unusable baseline
        self.baseline: BaselineResult | None = None  # what the baseline step found and did
        self._inside: str | None = None  # the capture in progress: `with opprof.capture():` or run()'s fn
        self._block: Any = None  # the StepRecorder of the `with opprof.capture():` block in progress
        self._trust: list[str] = []  # the latest capture's trust errors
        self._unchecked: list[str] = []  # earlier untrusted captures whose assertions were skipped: the test errs
        self.captures = 0  # finished captures (run()s, blocks, the whole call): the latest is kept
        self.body_uncaptured = False  # a fixture's capture is the test's: the body runs uncaptured (the plugin's)
        self._cut_short: tuple[Any, BaseException] | None = None  # the latest capture an exception ended, and it
        self.stepped_aside = False  # the whole-call capture gave way to the test's own torch profiler
        self._thread = threading.get_ident()  # the test's: captures begin and end on it
        self.call_ended = False  # the test's call ended (the plugin's): a capture now would count for nothing

    @property
    def profile(self) -> Any:
        """The latest finished capture (a pytest_opprof.Profile), or None."""
        return self._profile

    def _release(self) -> None:
        """Let go of the test's captures once its report is made (the plugin's, at teardown). The
        fixture refers to itself (judge_in_run holds it), so what it held waited for a full garbage
        collection: a scale trial's tests of 25k events each left +35 MiB a test until one came."""
        self._profile = self._whole_call = self._block = self._cut_short = None
        self.judge_in_run = self._remeasure = None
        self.ranges_wanted = lambda: True
        self._ahead = []

    # capture ----------------------------------------------------------------------------------
    @fn_first("opprof.run")
    def run(self, fn: Callable[..., Any], /, *args: Any, warmup: int = 3, steps: int = 10, **kwargs: Any) -> Any:
        """Profile `steps` calls of fn after `warmup` unprofiled ones; return fn's last result.
        `fn` is positional only: a keyword of that name goes to fn."""
        __tracebackhide__ = True
        validate_run_args(fn, warmup, steps, args, kwargs)  # with or without --opprof
        self._refuse_other_thread("opprof.run()")
        self._refuse_after_call("opprof.run()")
        self._refuse_nesting("opprof.run()")
        self._inside = "opprof.run()'s fn"  # with or without --opprof, as argument checks are
        try:
            self._drop_whole_call("opprof.run()")
            if not self.enabled:
                self._plain_captured = True
                return fn(*args, **kwargs)
            self._begin_capture()
            profile, result = run_steps(fn, args, kwargs, warmup, steps, probe=self._probe, cut_short=self._cut)
        finally:
            self._inside = None
        self._finish(profile, ran_no_op_in_run(fn, steps, result))
        self._remeasure = partial(self._measure_again, fn, args, kwargs, warmup, steps)
        ahead = self._measured_ahead(steps)
        if ahead:  # fn ran again after the first measurement: its last result, as run() promises
            result = ahead[-1].result  # (a trial's decode cache held another call's result)
        # recording, the baseline step takes the ranges' measurements; comparing, it gives the
        # decision run() took, and keeps none of its confirmations' profiles (a review)
        self._ahead = [again._replace(result=None) for again in ahead] if self.measure_ahead else []
        return result

    def _measured_ahead(self, steps: int) -> list[Remeasured]:
        """The further measurements of fn, taken here, while the test's own context (a `with`
        block around run(), an open file fn writes to, `torch.autocast`) still holds: after the
        test body fn would run outside it (a comparing run's confirmation failed with `I/O
        operation on closed file`). Recording: the recorded ranges' measurements, for the baseline
        step; comparing: a suspected time's confirmations, pooled by the decision judge_in_run
        takes here (the baseline step gives that decision)."""
        __tracebackhide__ = True  # a failure of fn in a further measurement shows the test's frames
        if self._profile is None or self.error_messages:
            return []
        if self.measure_ahead:
            return self._for_ranges(steps)
        if self.judge_in_run is None:
            return []
        taken: list[Remeasured] = []

        def confirmation() -> Remeasured | None:
            __tracebackhide__ = True
            again = self.measure_again()
            if again is not None:
                taken.append(again)
            return again

        self.judge_in_run(confirmation)
        return taken

    def _for_ranges(self, steps: int) -> list[Remeasured]:
        """Recording: the recorded ranges' measurements (none for a run() too short to judge on time,
        nor where the recording leaves the test's file as it is: unreadable)."""
        __tracebackhide__ = True  # a failure of fn in a further measurement shows the test's frames
        if steps < MIN_TIME_STEPS or not self.ranges_wanted():
            return []
        ahead = []
        for _ in range(self.measure_ahead):
            again = self.measure_again(AHEAD_RAISED)
            if again is None:
                break
            ahead.append(again)  # one with trust errors too: it ends the ranges (the baseline step's `remeasure`)
            if again.profile.errors:
                break
        return ahead

    def next_measurement(self) -> Remeasured | None:
        """The next further measurement run() took before it returned, in the test's context; None
        past the last. None is taken after the test body: fn would run outside that context."""
        return self._ahead.pop(0) if self._ahead else None

    @property
    def can_measure_again(self) -> bool:
        """Whether the latest capture can be repeated (a run(), not a block or the whole call)."""
        return self._remeasure is not None

    def measure_again(self, note: str = CONFIRMATION_RAISED) -> Remeasured | None:
        """The latest run() once more, after CONFIRM_SETTLE_S of busy CPUs (a slow spell that
        followed idle time may be over by then), or as long idle (idle_pause) with `pauses_idle`:
        to confirm a suspected time change, or, recording, for the recorded ranges."""
        __tracebackhide__ = True  # a failure of fn in a further measurement shows the test's frames
        if self._remeasure is None:
            return None
        threads = self._profile.threads if self._profile is not None else None  # the first measurement's
        if self.pauses_idle:
            idle_pause(CONFIRM_SETTLE_S)
        else:
            confirmation_pause(CONFIRM_SETTLE_S, threads)
        try:
            return self._remeasure()
        except Exception as exc:  # fn's own failure, said to be a further measurement's (a review: nothing said so)
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(note)
            raise

    @_arguments_checked
    def capture(self) -> CaptureBlock:
        """Profile the block as one step: `with opprof.capture(): ...` (each `with` is a capture)."""
        return CaptureBlock(self)

    def _begin_block(self) -> None:
        __tracebackhide__ = True
        self._refuse_other_thread("opprof.capture()")
        self._refuse_after_call("opprof.capture()")
        self._refuse_nesting("opprof.capture()")  # with or without --opprof, as argument checks are
        self._drop_whole_call("`with opprof.capture():`")
        if not self.enabled:
            self._inside, self._plain_captured = "`with opprof.capture():`", True
            return
        self._begin_capture()
        self._remeasure = None  # a block cannot be run again
        recorder = StepRecorder(self._probe)
        recorder.start()  # may raise (another profiler runs): then no block is in progress
        self._inside, self._block = "`with opprof.capture():`", recorder

    def _end_block(self, raised: BaseException | None) -> None:
        """The block ended; a block that raised keeps its capture only for the failure's report."""
        self._inside = None
        recorder, self._block = self._block, None
        if recorder is None:
            return
        if raised is not None:
            self._stop_raised(recorder, raised)
            return
        self._finish(recorder.stop(), RAN_NO_OP_IN_BLOCK)

    def end_open_block(self, failure: BaseException) -> None:
        """A `with opprof.capture():` block still open when the test's call ended by `failure`: a
        coroutine suspended in it that a timeout ended (pytest-timeout raises in the event loop, not
        in the block, which closes later, if ever: a trial's async test got no line at all). Ended
        now, cut short by that failure."""
        if self._block is not None and threading.get_ident() == self._thread:
            self._end_block(raised=failure)

    def _refuse_other_thread(self, what: str) -> None:
        """A capture begun on a thread of the test's would stop the whole-call profiler from there,
        which leaves it running on the test's thread (a trial: every later test then failed). The
        test errs too, in case the thread swallows the exception."""
        __tracebackhide__ = True
        if threading.get_ident() != self._thread:
            message = capture_off_thread(what, threading.current_thread().name)
            self._errs_first(message)
            raise OpprofUsageError(message)

    def _refuse_after_call(self, what: str) -> None:
        """A capture in a fixture's teardown came after the test's capture was judged, recorded and
        reported: it would count for nothing (a trial's was never reported, and a body that made
        assertions without --opprof was told they came `before opprof.run()`)."""
        __tracebackhide__ = True
        if self.call_ended and self.enabled:  # without --opprof run() calls fn once, as DESIGN has it
            raise OpprofUsageError(capture_after_call(what, self.nodeid))

    def _refuse_nesting(self, what: str) -> None:
        __tracebackhide__ = True
        if self._inside:
            raise OpprofUsageError(
                f"{what} inside {self._inside}: captures cannot nest (torch runs one profiler at a time); "
                "move it out, or measure the inner code alone"
            )

    # assertions -------------------------------------------------------------------------------
    @_arguments_checked
    def assert_op_below(self, op: str, ms: float, per: str = "step", stat: str = "median") -> None:
        """Each op matching `op` takes at most `ms` ms per step (or per call), by `stat` over steps.
        Time is device time for ops that ran on a GPU, CPU time otherwise."""
        __tracebackhide__ = True
        check = assertions.op_below(op, ms, per, stat, is_known=self._is_known, known_names=known_op_names)
        self._check(check, timed=lambda profile: bool(profile.match(op)))
        self._plain_name_check(op)

    @_arguments_checked
    def assert_op_share_below(self, op: str, pct: float, stat: str = "median") -> None:
        """Each op matching `op` takes at most `pct`% of the step's wall time, by `stat` over the
        steps' shares (stat="max": in every step). Device time for ops that ran on a GPU, CPU
        time otherwise."""
        __tracebackhide__ = True
        check = assertions.op_share_below(op, pct, stat, is_known=self._is_known, known_names=known_op_names)
        self._check(check, timed=lambda profile: bool(profile.match(op)))
        self._plain_name_check(op)

    @_arguments_checked
    def assert_op_count(
        self, op: str, n: int | None = None, *, min: int | None = None, max: int | None = None, dtype: Any = None
    ) -> None:
        """Calls per step of the ops matching `op`: exactly `n` in every step, or within min/max;
        with `dtype` (torch.float32, "bfloat16"), only the calls that took a tensor of that dtype."""
        __tracebackhide__ = True
        check = assertions.op_count(
            op, n, min=min, max=max, is_known=self._is_known, known_names=known_op_names, dtype=dtype
        )
        self._check(check)
        self._plain_name_check(op)

    @_arguments_checked
    def assert_no_op(self, op: str, *, dtype: Any = None) -> None:
        """No op or memory op matching `op` ran (e.g. "aten::copy_", "Memcpy DtoH*"); with `dtype`
        (torch.bfloat16, "float32"), no call of one took a tensor of that dtype."""
        __tracebackhide__ = True
        self._check(assertions.no_op(op, self._is_known, known_op_names, dtype=dtype))
        self._plain_name_check(op)

    @_arguments_checked
    def assert_no_sync(self) -> None:
        """No host-device synchronisation: cuda/hip *Synchronize calls, aten::item,
        aten::_local_scalar_dense, device-to-host copies."""
        __tracebackhide__ = True
        self._check(assertions.no_sync())

    @_arguments_checked
    def assert_total_below(self, ms: float, stat: str = "median") -> None:
        """The step's wall time is at most `ms` ms, by `stat` over steps."""
        __tracebackhide__ = True
        self._check(assertions.total_below(ms, stat), timed=lambda profile: True)

    @_arguments_checked
    def assert_no_graph_break(self) -> None:
        """Each compiled call ran as one torch.compile'd region: no graph break split it (the
        message names the regions and, when the model compiled inside run(), torch's reason)."""
        __tracebackhide__ = True
        self._check(assertions.no_graph_break())

    @_arguments_checked
    def assert_no_recompile(self) -> None:
        """No torch.compile compilation inside the measured steps, and each compiled frame ran
        as the same compilations in every step."""
        __tracebackhide__ = True
        self._check(assertions.no_recompile())

    @_arguments_checked
    def assert_compiled(self) -> None:
        """The steps' work ran inside compiled code: no op ran eagerly outside it."""
        __tracebackhide__ = True
        self._check(assertions.compiled())

    @_arguments_checked
    def assert_kernel_count(
        self, kernel: str, n: int | None = None, *, min: int | None = None, max: int | None = None
    ) -> None:
        """Launches per step of the kernels matching `kernel` (a name or glob): exactly `n`, or
        within min/max. Device kernels, and Inductor's C++ kernels on CPU."""
        __tracebackhide__ = True
        self._check(assertions.kernel_count(kernel, n, min=min, max=max))

    @_arguments_checked
    def assert_kernel_below(self, kernel: str, ms: float, per: str = "step", stat: str = "median") -> None:
        """Each kernel matching `kernel` takes at most `ms` ms per step (or per launch: per="call"),
        by `stat` over steps: device time, or CPU time for Inductor's C++ kernels."""
        __tracebackhide__ = True
        check = assertions.kernel_below(kernel, ms, per, stat)
        # an Inductor CPU kernel is timed on the CPU, which other load slows (a device kernel's time is not)
        self._check(check, timed=lambda profile: any(not k.on_device for k in profile.match_kernels(kernel)))

    @_arguments_checked
    def assert_range_below(self, name: str, ms: float, per: str = "step", stat: str = "median") -> None:
        """Each range matching `name` (a `torch.profiler.record_function` block, or an annotation
        torch or a library adds) takes at most `ms` ms per step (or per call: per="call"), by
        `stat` over steps: the device time launched inside it when it launched device work, else
        its wall time on its thread."""
        __tracebackhide__ = True
        self._check(assertions.range_below(name, ms, per, stat), timed=lambda profile: bool(profile.match_ranges(name)))

    @_arguments_checked
    def assert_overlap(self, kinds: tuple[str, str] = ("compute", "memory"), min_pct: float = 50.0) -> None:
        """In every step, at least `min_pct`% of the shorter of the two kinds of device work
        (compute and memory, or compute and comm) ran at the same time as the other."""
        __tracebackhide__ = True
        self._check(assertions.overlap(kinds, min_pct))

    @_arguments_checked
    def assert_device_busy_above(self, pct: float) -> None:
        """In every step, the device worked at least `pct`% of the step's wall time."""
        __tracebackhide__ = True
        self._check(assertions.device_busy_above(pct))

    @_arguments_checked
    def assert_no_launch_bound(self) -> None:
        """No op's kernels are shorter (median) than the host calls that launch them."""
        __tracebackhide__ = True
        self._check(assertions.no_launch_bound())

    # machinery --------------------------------------------------------------------------------
    def _is_known(self, name: str) -> bool:
        """is_known_op, another namespace checked where an op of it ran in the latest capture."""
        profile = self._profile
        return is_known_op(name, [o.name for o in profile.ops] if profile is not None else ())

    def _plain_name_check(self, op: str) -> None:
        """Without --opprof, an op name torch does not know (`aten:mm`, `aten::adddmm`,
        `ToCopyBackward`, a glob matching none of aten's ops: `aten::copyy*`) is refused as a bad
        argument is: a typo shows on the first plain run.
        Only where the test imported torch itself (the plugin imports nothing in a plain run)."""
        __tracebackhide__ = True
        if self.enabled or "torch" not in sys.modules or is_known_op(op):
            return
        raise OpprofUsageError(unknown_op_name(op, closest_names(op, known_op_names())))

    def _check(self, check: assertions.Assertion, timed: Timed | None = None) -> None:
        """Run a check now against the latest capture, or at the end of the test call when the
        whole call is being captured. Arguments were already validated by building `check`;
        `timed`: a time budget, whose failure says when other load slowed the capture, where it
        holds for the profile: what it limits ran (a missing name is no time: a trial's `no op of
        that name` failure went on `; the test's threads waited for a CPU 98%`)."""
        __tracebackhide__ = True
        if self._inside:  # with or without --opprof, as nesting is refused
            raise OpprofUsageError(assertion_inside_capture(self._inside))
        if not self.enabled:  # arguments checked all the same: a typo shows without --opprof too
            if not self._plain_captured:  # and one made before a run() or capture() (refused there)
                self._deferred.append((check, _caller_line(), timed))
            return
        if self._profile is None:
            if self._whole_call is None:
                self._fail("nothing was captured yet: call opprof.run(...) or use `with opprof.capture():` first")
            self._deferred.append((check, _caller_line(), timed))
            return
        if self._trust:  # untrusted numbers: the test becomes an error instead of passing or failing,
            earlier = untrusted_earlier(self.captures, self._trust)  # also when a later capture is trusted
            if earlier not in self._unchecked:
                self._unchecked.append(earlier)
            return
        message = check(self._profile)
        if message is not None:
            raise AssertionError(message + self._checked_on() + self._contended(timed))

    def _checked_on(self) -> str:
        """Which capture a failing assertion checked, where that may not be the code above it."""
        if self.body_uncaptured:  # a review: `no op of that name ran` beside the body's own aten::mm
            return (
                " (checked on the fixture's capture: the test body is not captured; measure it with opprof.run() "
                "or `with opprof.capture():`)"
            )
        return f" (checked on the latest of {self.captures} captures)" if self.captures > 1 else ""

    def _contended(self, timed: Timed | None) -> str:
        """For a failing time budget (`timed` holds for the profile: what it limits ran), the clauses
        saying other load, or a Python tracer (coverage: a trial's budget failed under --cov only,
        with no word of it), slowed the capture; or ''."""
        if timed is None or not timed(self._profile):
            return ""
        wait = self.cpu_wait
        loaded = (
            f"; {waited_for_cpu(wait)}: other load slowed it" if wait is not None and wait > CONTENTION_LIMIT else ""
        )
        return loaded + (f"; {traced_budget(self.python_tracer)}" if self.python_tracer else "")

    def _probe(self) -> None:
        self._sample(self._host, self._clocks)
        self._children.append(device.child_cpu_ticks())

    def _sample(self, host: list[tuple[int, int | None]], clocks: list[Any]) -> None:
        """Host time and CPU wait, and a GPU clock sample, just before or after a capture."""
        host.append((host_ns(), device.cpu_wait_ns()))
        if self._sampler is not None:
            clocks.append(self._sampler())

    def _measure_again(self, fn: Callable[..., Any], args: Any, kwargs: Any, warmup: int, steps: int) -> Remeasured:
        """run()'s measurement once more, with its own CPU-wait share and GPU clock verdict (the
        report keeps the first one's), without a Python tracer where one ran (device.untraced:
        coverage's slows the Python inside and between the ops)."""
        __tracebackhide__ = True
        host: list[tuple[int, int | None]] = []
        clocks: list[Any] = []
        # Its signature step tells whether fn ran the first's work (decide.unrepeated: a growing
        # cache runs the same ops on larger inputs); only the times are pooled.
        threads = self._profile.threads if self._profile is not None else None  # the first measurement's
        probe = partial(self._sample, host, clocks)
        recording = self.measure_ahead > 0  # the file may hold this one (its workload reference too)
        steps_run = partial(
            run_steps, fn, args, kwargs, warmup, steps, probe=probe, work=False, threads=threads, signature=True,
            workload=recording,
        )  # fmt: skip
        (profile, result), tracer = device.untraced(steps_run)
        return Remeasured(
            profile, _wait_of(host), device.unreliable_reason(clocks), tracer, _waited_per_step(host, profile), result,
        )  # fmt: skip

    def _cut(self, profile: Any, raised: BaseException) -> None:
        """A capture that `raised` ended: shown if the test fails by that exception, never judged
        (one that recorded nothing is not shown, nor one that a misuse of opprof ended, as when a
        run() refused its arguments: that is no measurement of the code)."""
        if isinstance(raised, OpprofUsageError):
            return
        if profile is not None and (profile.ops or profile.kernels or profile.memory_ops):
            self._cut_short = (profile, raised)

    def cut_short(self, failure: BaseException | None) -> Any:
        """The capture the test's `failure` ended as far as it went, for its report; None when
        another exception (one the test caught) ended it, or none did."""
        if self._cut_short is None or failure is None or self._cut_short[1] is not failure:
            return None
        return self._cut_short[0]

    def _stop_raised(self, recorder: StepRecorder, raised: BaseException) -> None:
        if by_failure(raised):
            self._cut(recorder.stop_cut_short(), raised)
        else:
            recorder.stop(keep=False)

    def _finish(self, profile: Any, ran_nothing: str) -> None:
        """A capture ended: keep it, with the machine's state and the trust checks' errors;
        `ran_nothing`: what to say when it recorded no event at all (which capture, the fix)."""
        self._profile, self._cut_short = profile, None
        self.captures += 1
        self.body_uncaptured = False  # a capture in the body: the assertions after it check it
        self.clocks = [c.to_dict() for c in self._clocks if c is not None]
        self.unreliable = device.unreliable_reason(self._clocks)
        self.cpu_wait = _wait_of(self._host)
        self.cpu_waited_ms = _waited_per_step(self._host, profile)
        self.child_processes = device.busy_children(self._children[0], self._children[-1]) if self._children else 0
        self._profile = profile = _overhead_under_load(profile, self.cpu_wait)
        self.python_tracer = device.python_tracer()
        self.tracer_stays = self.python_tracer is not None and device.tracer_stays()
        self._trust = [f"{c.name}: {c.message}" for c in profile.errors]
        if profile.recorded_nothing:
            self._trust.append(ran_nothing)
        self.error_messages = [*self._unchecked, *([untrusted_measurement(self._trust)] if self._trust else [])]

    # the whole test call as one step, driven by the plugin's pytest_runtest_call ----------------
    def _drop_whole_call(self, replaced_by: str) -> None:
        """A capture of the test's own ends the whole-call capture; assertions made during it had
        the code before as their subject, and would be checked on the code after: refused."""
        __tracebackhide__ = True
        if self._whole_call is not None:
            self._whole_call.stop(keep=False)
            self._take_refusals(self._whole_call)
            self._whole_call = None
        if self._deferred and not self.call_ended:  # after the call (a teardown, without --opprof) they were the body's
            made, self._deferred = [where for _, where, _ in self._deferred], []
            raise OpprofUsageError(assertions_before_capture(made, replaced_by))

    def _begin_capture(self) -> None:
        """Before a capture: its clock, CPU and child-process samples start anew; torch's settings."""
        self._clocks, self._host, self._children = [], [], []
        self.settings = torch_state()

    @property
    def whole_call_running(self) -> bool:
        """Whether the whole-call capture still runs: the test started no capture of its own."""
        return self._whole_call is not None

    def start_whole_call(self) -> None:
        """Capture the test call as one step, until a run() or capture() of its own replaces it."""
        self._begin_capture()
        self._whole_call = StepRecorder(self._probe, step_aside=True)
        self._whole_call.start()

    def end_whole_call(self, raised: BaseException | None = None) -> None:
        """End the whole-call capture: its profile, or, when the call `raised`, the capture as far
        as it went for the failure's report."""
        recorder, self._whole_call = self._whole_call, None
        if recorder is None:
            return
        if raised is not None:
            self._stop_raised(recorder, raised)
        elif (profile := recorder.stop()) is not None and not (self.captures and profile.recorded_nothing):
            self._finish(
                profile, ran_no_op_in_body(self.asked_by)
            )  # a body that ran nothing after a fixture's capture keeps it
        self._take_refusals(recorder)
        self.stepped_aside = recorder.stepped_aside and self._profile is None
        if self.stepped_aside and self._deferred:
            self.error_messages.append(stepped_aside(len(self._deferred)))

    def _take_refusals(self, recorder: StepRecorder) -> None:
        """A profiler the whole-call capture refused on a thread of the test's makes the test err
        (its thread may have swallowed the CaptureError)."""
        for message in recorder.refused[:1]:
            self._errs_first(message)

    def _errs_first(self, message: str) -> None:
        """A misuse that makes the test err, kept across its later captures, as the error's first
        line: the cause (before the `ran no torch operator` it leads to)."""
        if message not in self._unchecked:
            self._unchecked.insert(0, message)
            self.error_messages.insert(0, message)

    def deferred_failures(self) -> list[str]:
        """The messages of the assertions made during a whole-call capture that fail."""
        if self._profile is None or self._trust:
            return []
        return [
            f"{where}: {m}{self._contended(timed)}"
            for check, where, timed in self._deferred
            if (m := check(self._profile)) is not None
        ]


class CaptureBlock:
    """What `opprof.capture()` returns: a context manager whose `with` profiles its block as one
    step; entered again, it captures again (a generator-based one raised an AttributeError)."""

    __slots__ = ("_fixture",)

    def __init__(self, fixture: OpprofFixture) -> None:
        self._fixture = fixture

    def __enter__(self) -> None:
        __tracebackhide__ = True
        self._fixture._begin_block()

    def __exit__(self, kind: object, value: BaseException | None, traceback: object) -> None:
        self._fixture._end_block(raised=value)  # an exception from the block goes on
