"""Plugins the run registers beside the hooks: the records collector (each measured test's
record from its report, xdist's workers' too, and a crashed worker's test), and the watchers of
torch's settings (torchstate: the thread count, the default dtype, ...) and of a profiler a test
left running."""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..leakmessages import FIXTURE_LEAKER, LEAKS_JOINED, SCOPED_LEAKER, XUNIT_LEAKER
from ..settings import RunState
from .base import SETTINGS_LEFT_BY, add_check, is_measured, to_record

if TYPE_CHECKING:
    from ..baseline import Undo
    from ..results import TestRecord
    from ..torchstate import TorchState


class RecordCollector:
    """Collects each measured test's record from its report (from xdist workers too)."""

    def __init__(self, state: RunState, everywhere: bool = False) -> None:
        self.state = state
        self.everywhere = everywhere  # `--dist each`: a crashed test's record names its worker
        self.index: dict[tuple[str, str | None], int] = {}  # (nodeid, xdist worker) -> place in state.records
        self.running: set[tuple[str, str | None]] = set()  # measured tests whose xdist worker has not sent their record
        self.undo: dict[tuple[str, str | None], Undo] = {}  # their baseline writes, while they may still err

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A worker of `--dist each` runs every test: each is a measurement of its own.
        from ..baseline import Undo
        from ..results import TestRecord

        key = (report.nodeid, getattr(report, "worker_id", None))
        if getattr(report, "opprof_measured", False):
            self.running.add(key)
        elif report.when == "???":  # xdist's report of a worker that died
            self._crashed(report)
        undo = getattr(report, "opprof_undo", None)
        if undo is not None:
            self.undo[key] = Undo.from_dict(json.loads(undo))
        record = getattr(report, "opprof_record", None)
        if record is not None:
            self.running.discard(key)
            self.undo.pop(key, None)
            self.add(TestRecord.from_dict(json.loads(record)))

    def _crashed(self, report: pytest.TestReport) -> None:
        """A measured test whose xdist worker died while running it (a segfault, the OOM killer)
        sends no record: its line in the reports says so, with pytest's word, as a failure. A
        baseline file it wrote goes back as it was, as when a test errs in its teardown."""
        from ..report import TestResult

        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)
        key = (report.nodeid, worker)
        if key not in self.running:
            return
        self.running.discard(key)
        failure = str(report.longrepr)
        undo = self.undo.pop(key, None)
        if undo is not None:
            try:
                undo()
            except OSError as exc:
                failure += f"; its baseline {undo.path} stays as this run wrote it ({exc.strerror or exc})"
        result = TestResult(report.nodeid, "failed", failure=failure, worker=worker, everywhere=self.everywhere)
        self.add(to_record(result, self.state))

    def add(self, found: TestRecord) -> None:
        spool, records = self.state.spool, self.state.records
        key = (found.nodeid, found.worker)  # the worker's id is the report's
        place = self.index.get(key)
        if place is not None:  # run again in this session (pytest-rerunfailures...): the last run stands
            found = found.after(records[place])
        kept = spool.add(found) if spool is not None else found
        if place is None:
            self.index[key] = len(records)
            records.append(kept)
        else:
            records[place] = kept


Value = tuple[Any]  # one setting's value, as a 1-tuple: None is a value of its own (no default device)


@dataclass(frozen=True, slots=True)
class _Frame:
    """A fixture whose setup changed a setting: its name in the messages, the value before its
    setup and after it, whether it is wider than a function, and whether its setup raised."""

    leaker: str
    before: Value
    after: Value
    argname: str
    wider: bool
    failed: bool


@dataclass(frozen=True, slots=True)
class _Leak:
    """A setting left changed: by whom, in turn (tests, fixtures), the value before and the value
    left, and the leak's fixtures (id(FixtureDef)), which a test that sets one up runs on by its
    own doing."""

    leakers: tuple[str, ...]
    before: Value
    left: Value
    fixtures: frozenset[int] = frozenset()
    within: int | None = None  # id(FixtureDef) of the wider fixture whose scope it began in: it ends with it

    @property
    def named(self) -> str:
        return LEAKS_JOINED.join(self.leakers)


@dataclass
class _TestState:
    """What one test's setup, call and teardown did to a setting: each change in turn, as (who,
    the value after it), and the fixtures that changed it in their setup."""

    nodeid: str = ""
    start: Value | None = None  # before its setup (None: unknown, torch not imported)
    set_up: set[int] = field(default_factory=set)  # id(FixtureDef) of the fixtures set up for it (every lane's)
    opened: list[int] = field(default_factory=list)  # those that changed the value, in setup order
    closed: list[tuple[int, _Frame]] = field(default_factory=list)  # value-changing fixtures torn down in it
    steps: list[tuple[str, Value]] = field(default_factory=list)  # (who, the value after): each change in turn
    last: Value | None = None  # the value after the last step seen

    def saw(self, who: str, now: Value | None) -> None:
        """A point of the test where the value is `now`: a change since the last is `who`'s."""
        if now is not None and self.last is not None and now != self.last:
            self.steps.append((who, now))
        self.last = now if now is not None else self.last


class _Fixture:
    """A fixture as the lanes see it: id(FixtureDef), its argname, whether it is wider than a
    function, and its name in the messages (read from its code once a lane needs it)."""

    __slots__ = ("_name", "_request", "argname", "fixturedef", "fid", "wider")

    def __init__(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        self.fixturedef, self._request, self._name = fixturedef, request, ""
        self.fid, self.argname = id(fixturedef), str(getattr(fixturedef, "argname", ""))
        self.wider = getattr(fixturedef, "scope", "function") != "function"

    @property
    def name(self) -> str:
        if not self._name:
            self._name = _fixture_name(self.fixturedef, self._request)
        return self._name


class _Lane:
    """One setting's leaks: the tests whose calls, and the fixtures whose setup or teardown,
    changed its value ("the count") and left it so.

    Each test is judged once its teardown is over, on the count it leaves against the count it
    should leave: the one before its setup, or where a wider fixture's scope began in it, that
    fixture's count, or where one ended in it, the count before that fixture (a trial's two
    fixtures that each put the count back, torn down in one teardown, read as a leak, as did a
    call's change a fixture's teardown undid). The leakers named are those whose changes came
    after the count was last where it should be; where it never was in the test and a wider
    fixture's scope ended in it, that fixture first (a trial's module fixture that never put the
    dtype back was blamed on the module's last test). Leaks nest: one inside a wider fixture's
    scope stands beside the one before it (a review's was dropped). A count put back to where a
    leak began ends it, and those after it. A test that set up a fixture of the leak runs on its
    count by its own doing, as does a rerun of the leaking test: no victim; a test in a wider
    fixture's scope that does not ask for it is that fixture's victim."""

    def __init__(self, name: str) -> None:
        self.name = name  # a TorchState field
        self.leaks: list[_Leak] = []  # the live leaks, the latest last
        self.frames: dict[int, _Frame] = {}  # id(FixtureDef) -> its frame, while it is set up
        self.test = _TestState()

    def begin(self, nodeid: str, start: Value | None, set_up: set[int]) -> None:
        """A test's setup begins on `start`: a leak it puts back ends (before its fixtures ran)."""
        self.test = _TestState(nodeid, start=start, set_up=set_up, last=start)
        self._put_back(start)

    def set_up(self, fixture: _Fixture, before: Value | None, after: Value | None, failed: bool) -> None:
        """A fixture set up for the test (in the set every lane shares): a frame where it changed the count."""
        test = self.test
        if before is not None and after is not None and after != before:
            self.frames[fixture.fid] = _Frame(fixture.name, before, after, fixture.argname, fixture.wider, failed)
            test.opened.append(fixture.fid)
            test.saw(fixture.name, after)

    def victim_of(self, item: pytest.Item, start: Value | None, asked: set[int] | None) -> _Leak | None:
        """The leak whose count the test's call starts on, where that is not its own doing: a
        wider fixture's it does not ask for, or the latest leak that left this count (not one of
        its fixtures', nor its own: a rerun)."""
        scoped = self._scoped(item, start, asked)
        if scoped is not None:
            return _Leak((scoped.leaker + SCOPED_LEAKER,), scoped.before, scoped.after)
        leak = next((leak for leak in reversed(self.leaks) if leak.left == start), None)
        own = leak is not None and (bool(leak.fixtures & self.test.set_up) or leak.leakers[-1] == item.nodeid)
        return None if own else leak

    def _scoped(self, item: pytest.Item, start: Value | None, asked: set[int] | None) -> _Frame | None:
        """The innermost wider fixture, set up before this test and not asked for by it, whose
        count its call starts on (a trial's module fixture set the count for the tests asking for
        it, and the test after them there that did not recorded that count; run alone, it failed)."""
        alive = [(fid, f) for fid, f in self.frames.items() if f.wider and fid not in self.test.set_up]
        if not alive or alive[-1][1].after != start or alive[-1][1].failed:
            return None
        fid, frame = alive[-1]
        names = set(getattr(item, "fixturenames", ()))
        return None if (fid in asked if asked is not None else frame.argname in names) else frame

    def torn_down(self, fixture: _Fixture, now: Value | None) -> None:
        """A fixture's teardown is over (pytest_fixture_post_finalizer), the count `now`."""
        frame = self.frames.pop(fixture.fid, None)
        if frame is not None:
            self.test.closed.append((fixture.fid, frame))
            self.leaks = [leak for leak in self.leaks if leak.within != fixture.fid]  # its scope's count is gone
        if now != self.test.last:  # its teardown changed the count (the name only then: a 600-test trial)
            self.test.saw(frame.leaker if frame is not None else fixture.name, now)

    def judge(self) -> None:
        """After a test's teardown: whether what it left is a leak (it begins, grows or ends), and
        who left it: those whose changes came after the count was last where it should be."""
        test = self.test
        (expected, ended), end = self._expected(test), test.last
        if expected is None or end is None or end == expected:
            return
        since = max((i + 1 for i, (_, count) in enumerate(test.steps) if count == expected), default=0)
        first: tuple[str, ...] = ()
        if since == 0 and ended is not None:  # never where it should be: the fixture that ended left it
            first = (ended.leaker,)  # and those after the count was last its (not one that put its own back)
            since = max((i + 1 for i, (_, count) in enumerate(test.steps) if count == ended.after), default=0)
        leakers = tuple(dict.fromkeys(first + tuple(who for who, _ in test.steps[since:])))
        restored = {frame.leaker for _, frame in test.closed if self._put_own_back(test, frame)}
        leakers = tuple(who for who in leakers if who not in restored) or leakers or (test.nodeid,)
        fixtures = frozenset(fid for fid, frame in test.closed if frame.leaker in leakers)
        wider = [fid for fid, frame in self.frames.items() if frame.wider and not frame.failed]
        self._ended(_Leak(leakers, expected, end, fixtures, wider[-1] if wider else None))

    @staticmethod
    def _put_own_back(test: _TestState, frame: _Frame) -> bool:
        """Whether a fixture torn down in the test left the count where its setup found it (its
        last change): no leaker, though its changes fall in the chain (a review's function
        fixture that put its precision back was named beside a module one that never did)."""
        own = [count for who, count in test.steps if who == frame.leaker]
        return bool(own) and own[-1] == frame.before

    def _expected(self, test: _TestState) -> tuple[Value | None, _Frame | None]:
        """The count the test should leave: a wider fixture's it set up that is still set up, or
        where one set up before it ended in its teardown, the count before that fixture (and that
        fixture), else the count before its setup."""
        # a fixture whose setup raised (pytest.skip too) opened no scope: its count is a leak at once
        alive = [fid for fid in test.opened if fid in self.frames and not self.frames[fid].failed]
        if alive:
            return self.frames[alive[-1]].after, None
        earlier = [frame for fid, frame in test.closed if fid not in test.opened]
        return (earlier[-1].before, earlier[-1]) if earlier else (test.start, None)

    def _ended(self, found: _Leak) -> None:
        """A test that left `found.left` where `found.before` was due: it puts back the count a
        leak began from (that leak ends, and those after it), takes the latest leak further, or
        begins a leak of its own (inside a wider fixture's scope: beside the one before)."""
        top = self.leaks[-1] if self.leaks else None
        if top is not None and top.left == found.before:
            if self._put_back(found.left):
                return
            chain = top.leakers + tuple(n for n in found.leakers if n != top.leakers[-1])  # a rerun, a parameter
            self.leaks[-1] = replace(top, leakers=chain, left=found.left, fixtures=top.fixtures | found.fixtures)
        else:
            self.leaks.append(found)

    def _put_back(self, count: Value | None) -> bool:
        """Where `count` is one a leak began from: that leak and those after it end."""
        for index, leak in enumerate(self.leaks):
            if leak.before == count:
                del self.leaks[index:]
                return True
        return False


def _values(state: TorchState | None) -> dict[str, Value | None]:
    """Each setting's value in `state` for its lane (None for each where torch is not imported)."""
    from ..torchstate import SETTING_NAMES

    return {name: (getattr(state, name),) if state is not None else None for name in SETTING_NAMES}


class SettingLeaks:
    """Finds the tests whose calls, and the fixtures whose setup or teardown, changed torch's
    settings (torchstate.TorchState: the thread count, the default dtype, grad mode, ...) and left
    them so, and marks the measured tests that then ran on them (order-dependent times and work: a
    trial's gradcheck test left the default dtype float64, the test after it recorded double ops
    and failed `work changed` alone, told to record itself). Each setting has a lane of its own
    (_Lane): a trial's chain named a test that had only put the dtype back as a leaker of grad
    mode, a victim whose fixture set the thread count went unseen as the dtype's, and a module
    fixture that put its dtype back was named for a test's grad mode inside its scope."""

    def __init__(self) -> None:
        from ..torchstate import SETTING_NAMES

        self.lanes = [_Lane(name) for name in SETTING_NAMES]
        self._last: TorchState | None = None  # the settings at the last point every lane saw
        self._set_up_ids: set[int] = set()  # id(FixtureDef) of the fixtures set up for this test (the lanes')

    def _saw(self, state: TorchState | None) -> None:
        """Each lane's value at a point of the test: a change since is the test's (its call, its finalizers)."""
        if state is None or state == self._last:  # nothing changed, for any lane
            return
        self._last, values = state, _values(state)
        for lane in self.lanes:
            lane.test.saw(lane.test.nodeid, values[lane.name])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from ..capture import torch_state

        self._last = start = torch_state()
        values, self._set_up_ids = _values(start), set()
        for lane in self.lanes:
            lane.begin(item.nodeid, values[lane.name], self._set_up_ids)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any, Any]:
        from ..capture import torch_state

        before, failed = torch_state(), True
        try:
            result = yield
            failed = False
            return result
        finally:
            self._set_up(fixturedef, request, before, torch_state(), failed)

    def _set_up(
        self,
        fixturedef: Any,
        request: pytest.FixtureRequest,
        before: TorchState | None,
        after: TorchState | None,
        failed: bool,
    ) -> None:
        """A fixture set up for the test: to each lane, and a mark of the settings as its teardown
        begins (its finalizer runs first: last in, first out)."""
        self._set_up_ids.add(id(fixturedef))
        if before != after:  # a frame in the lanes of what it changed (most fixtures change nothing)
            fixture, was, now = _Fixture(fixturedef, request), _values(before), _values(after)
            for lane in self.lanes:
                lane.set_up(fixture, was[lane.name], now[lane.name], failed)
        self._last = after if before == self._last else None  # a change before it (another plugin's): lanes read next
        with suppress(Exception):  # a pytest without FixtureDef.addfinalizer: teardowns are told apart less finely
            fixturedef.addfinalizer(self._teardown_begins)

    def _teardown_begins(self) -> None:
        from ..capture import torch_state

        self._saw(torch_state())  # a change since: the test's own finalizers

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True  # a failure outside the test's code (hypothesis's health check) shows no frame of ours
        from ..capture import torch_state

        start = torch_state()
        if SETTINGS_LEFT_BY in item.stash:  # an earlier run of this test (pytest-rerunfailures)
            del item.stash[SETTINGS_LEFT_BY]
        if is_measured(item) and start is not None:
            self._mark_victim(item, start)
        try:
            return (yield)
        finally:
            self._saw(torch_state())

    def _mark_victim(self, item: pytest.Item, start: TorchState) -> None:
        """Where the test's call starts on settings earlier tests left: a check per leaker (those
        of several settings in one), and the leaks in the stash (SETTINGS_LEFT_BY)."""
        from ..runlines import leak_check

        values, asked = _values(start), _asked_for(item)
        by: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # leaker -> (values before, values left)
        for lane in self.lanes:
            leak = lane.victim_of(item, values[lane.name], asked)
            if leak is not None:
                before, left = by.setdefault(leak.named, ({}, {}))
                before[lane.name], left[lane.name] = leak.before[0], leak.left[0]
        found = tuple((named, replace(start, **before), replace(start, **left)) for named, (before, left) in by.items())
        for named, before_state, left_state in found:
            add_check(item, leak_check(named, before_state, left_state))
        if found:
            item.stash[SETTINGS_LEFT_BY] = found

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        from ..capture import torch_state

        state, fixture = torch_state(), _Fixture(fixturedef, request)
        if state is not None and state == self._last and all(fixture.fid not in lane.frames for lane in self.lanes):
            return  # no lane's frame, nothing changed
        self._last, now = state if state is not None else self._last, _values(state)
        for lane in self.lanes:
            lane.torn_down(fixture, now[lane.name])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        from ..capture import torch_state

        try:
            return (yield)
        finally:
            self._saw(torch_state())  # a change after the last fixture: the test's
            for lane in self.lanes:
                lane.judge()


def _asked_for(item: pytest.Item) -> set[int] | None:
    """id(FixtureDef) of every fixture the test's request resolved (its closure, overrides, those
    asked for at run time), or None where pytest keeps no such record (pytest's private
    `_fixture_defs`: the names are read then)."""
    defs = getattr(getattr(item, "_request", None), "_fixture_defs", None)
    return {id(d) for d in defs.values()} if isinstance(defs, dict) else None


_XUNIT = re.compile(r"_(?:xunit_(?P<x>setup_\w+?)|unittest_(?P<u>\w+?))_fixture_(?P<of>.+)")  # pytest's own fixtures


def _fixture_name(fixturedef: Any, request: pytest.FixtureRequest) -> str:
    """`fixture one_thread (conftest.py:12)`: a fixture as the leak messages name it, with where
    it is defined (relative to the rootdir where it can be); a setup method (xunit's
    `setup_module`, unittest's `setUpClass`), which pytest runs as a fixture of its own, as
    `setup_module of test_x` (a trial was shown pytest's fixture in site-packages)."""
    argname = str(getattr(fixturedef, "argname", "?"))
    xunit = _XUNIT.fullmatch(argname)
    if xunit:
        return f"{XUNIT_LEAKER}{xunit['x'] or xunit['u']} of {xunit['of']}"
    name = f"{FIXTURE_LEAKER}{argname}"
    code = getattr(getattr(fixturedef, "func", None), "__code__", None)
    if code is None:
        return name
    path = Path(code.co_filename)
    try:
        path = path.relative_to(request.config.rootpath)
    except ValueError:
        pass
    return f"{name} ({path.as_posix()}:{code.co_firstlineno})"


class ProfilerLeaks:
    """Finds a test whose call started a torch profiler and left it running (a debug `prof.start()`
    whose test failed before `prof.stop()`): a later measured test names it. A profiler a fixture
    started (any scope) runs before the call: no test's (a review's first version blamed the test
    after which a module fixture's profiler still ran)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True
        from ..capture import profiler_left_running

        before = profiler_left_running()
        if not before:  # stopped since (a fixture's teardown): no longer blamed
            self.state.profiler_left_by = None
        try:
            return (yield)
        finally:
            after = profiler_left_running()
            if before != after:  # started by this call (blamed), or stopped by it (no longer)
                self.state.profiler_left_by = item.nodeid if after else None
