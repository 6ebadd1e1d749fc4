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

from ..errors import FIXTURE_LEAKER, LEAKS_JOINED, SCOPED_LEAKER, XUNIT_LEAKER, settings_left_changed
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
        self.add(to_record(result, self.state.settings))

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


@dataclass(frozen=True, slots=True)
class _Frame:
    """A fixture whose setup changed torch's settings: its name in the messages, the settings
    before its setup and after it, whether it is wider than a function, and whether its setup raised."""

    leaker: str
    before: TorchState
    after: TorchState
    argname: str
    wider: bool
    failed: bool


@dataclass(frozen=True, slots=True)
class _Leak:
    """Settings left changed: by whom, in turn (tests, fixtures), the settings before and those
    left, and the leak's fixtures (id(FixtureDef)), which a test that sets one up runs on by its
    own doing."""

    leakers: tuple[str, ...]
    before: TorchState
    left: TorchState
    fixtures: frozenset[int] = frozenset()
    within: int | None = None  # id(FixtureDef) of the wider fixture whose scope it began in: it ends with it

    @property
    def named(self) -> str:
        return LEAKS_JOINED.join(self.leakers)


@dataclass
class _TestState:
    """What one test's setup, call and teardown did to torch's settings: each change in turn, as
    (who, the settings after it), and the fixtures that changed them in their setup."""

    nodeid: str = ""
    start: TorchState | None = None  # before its setup
    set_up: set[int] = field(default_factory=set)  # id(FixtureDef) of the fixtures set up for it
    opened: list[int] = field(default_factory=list)  # those that changed the count, in setup order
    closed: list[tuple[int, _Frame]] = field(default_factory=list)  # count-changing fixtures torn down in it
    steps: list[tuple[str, TorchState]] = field(default_factory=list)  # (who, the settings after): in turn
    last: TorchState | None = None  # the settings after the last step seen

    def saw(self, who: str, now: TorchState | None) -> None:
        """A point of the test where the settings are `now`: a change since the last is `who`'s."""
        if now is not None and self.last is not None and now != self.last:
            self.steps.append((who, now))
        self.last = now if now is not None else self.last


class SettingLeaks:
    """Finds the tests whose calls, and the fixtures whose setup or teardown, changed torch's
    settings (torchstate.TorchState: the thread count, the default dtype, grad mode, ...) and left
    them so, and marks the measured tests that then ran on them (order-dependent times and work: a
    trial's gradcheck test left the default dtype float64, the test after it recorded double ops
    and failed `work changed` alone, told to record itself). "The count" below: the settings.

    Each test is judged once its teardown is over, on the count it leaves against the count it
    should leave: the one before its setup, or where a wider fixture's scope began in it, that
    fixture's count, or where one ended in it, the count before that fixture (a trial's two
    fixtures that each put the count back, torn down in one teardown, read as a leak, as did a
    call's change a fixture's teardown undid). The leakers named are those whose changes came
    after the count was last where it should be. Leaks nest: one inside a wider fixture's scope
    stands beside the one before it (a review's was dropped). A count put back to where a leak
    began ends it, and those after it. A test that set up a fixture of the leak runs on its
    count by its own doing, as does a rerun of the leaking test: no victim; a test in a wider
    fixture's scope that does not ask for it is that fixture's victim."""

    def __init__(self) -> None:
        self.leaks: list[_Leak] = []  # the live leaks, the latest last
        self._frames: dict[int, _Frame] = {}  # id(FixtureDef) -> its frame, while it is set up
        self._test = _TestState()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from ..capture import torch_state

        start = torch_state()
        self._test = _TestState(item.nodeid, start=start, last=start)
        self._put_back(start)  # since, before this test's fixtures ran

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
        """A fixture set up for the test: a frame where it changed the count, and a mark of the
        count as its teardown begins (its finalizer runs first: last in, first out)."""
        test, fid = self._test, id(fixturedef)
        test.set_up.add(fid)
        if before is not None and after is not None and after != before:
            name, argname = _fixture_name(fixturedef, request), str(getattr(fixturedef, "argname", ""))
            wider = getattr(fixturedef, "scope", "function") != "function"
            self._frames[fid] = _Frame(name, before, after, argname, wider, failed)
            test.opened.append(fid)
            test.saw(name, after)
        with suppress(Exception):  # a pytest without FixtureDef.addfinalizer: teardowns are told apart less finely
            fixturedef.addfinalizer(self._teardown_begins)

    def _teardown_begins(self) -> None:
        from ..capture import torch_state

        self._test.saw(self._test.nodeid, torch_state())  # a change since: the test's own finalizers

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True  # a failure outside the test's code (hypothesis's health check) shows no frame of ours
        from ..analysis.model import WARNING, Check
        from ..capture import torch_state
        from ..runlines import SETTINGS, THREADS
        from ..torchstate import threads_only

        start = torch_state()
        victim = self._victim_of(item, start) if is_measured(item) else None
        if victim is not None:
            message = settings_left_changed(victim.named, victim.before, victim.left)
            add_check(item, Check(THREADS if threads_only(victim.before, victim.left) else SETTINGS, WARNING, message))
            item.stash[SETTINGS_LEFT_BY] = (victim.named, victim.before, victim.left)
        try:
            return (yield)
        finally:
            self._test.saw(item.nodeid, torch_state())

    def _victim_of(self, item: pytest.Item, start: TorchState | None) -> _Leak | None:
        """The leak whose count the test's call starts on, where that is not its own doing: a
        wider fixture's it does not ask for, or the latest leak that left this count (not one of
        its fixtures', nor its own: a rerun)."""
        scoped = self._scoped(item, start)
        if scoped is not None:
            return _Leak((scoped.leaker + SCOPED_LEAKER,), scoped.before, scoped.after)
        leak = next((leak for leak in reversed(self.leaks) if leak.left == start), None)
        own = leak is not None and (bool(leak.fixtures & self._test.set_up) or leak.leakers[-1] == item.nodeid)
        return None if own else leak

    def _scoped(self, item: pytest.Item, start: TorchState | None) -> _Frame | None:
        """The innermost wider fixture, set up before this test and not asked for by it, whose
        count its call starts on (a trial's module fixture set the count for the tests asking for
        it, and the test after them there that did not recorded that count; run alone, it failed)."""
        asked = _asked_for(item)
        alive = [(fid, f) for fid, f in self._frames.items() if f.wider and fid not in self._test.set_up]
        if not alive or alive[-1][1].after != start or alive[-1][1].failed:
            return None
        fid, frame = alive[-1]
        names = set(getattr(item, "fixturenames", ()))
        return None if (fid in asked if asked is not None else frame.argname in names) else frame

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        from ..capture import torch_state

        frame = self._frames.pop(id(fixturedef), None)
        name = frame.leaker if frame is not None else _fixture_name(fixturedef, request)
        if frame is not None:
            self._test.closed.append((id(fixturedef), frame))
            self.leaks = [leak for leak in self.leaks if leak.within != id(fixturedef)]  # its scope's count is gone
        self._test.saw(name, torch_state())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        from ..capture import torch_state

        try:
            return (yield)
        finally:
            self._test.saw(item.nodeid, torch_state())  # a change after the last fixture: the test's
            self._judge(item.nodeid)

    def _judge(self, nodeid: str) -> None:
        """After a test's teardown: whether what it left is a leak (it begins, grows or ends), and
        who left it: those whose changes came after the count was last where it should be."""
        test = self._test
        expected, end = self._expected(test), test.last
        if expected is None or end is None or end == expected:
            return
        since = max((i + 1 for i, (_, count) in enumerate(test.steps) if count == expected), default=0)
        leakers = tuple(dict.fromkeys(who for who, _ in test.steps[since:])) or (nodeid,)
        fixtures = frozenset(fid for fid, frame in test.closed if frame.leaker in leakers)
        wider = [fid for fid, frame in self._frames.items() if frame.wider and not frame.failed]
        self._ended(_Leak(leakers, expected, end, fixtures, wider[-1] if wider else None))

    def _expected(self, test: _TestState) -> TorchState | None:
        """The count the test should leave: a wider fixture's it set up that is still set up, or
        where one set up before it ended in its teardown, the count before that fixture, else the
        count before its setup."""
        # a fixture whose setup raised (pytest.skip too) opened no scope: its count is a leak at once
        alive = [fid for fid in test.opened if fid in self._frames and not self._frames[fid].failed]
        if alive:
            return self._frames[alive[-1]].after
        earlier = [frame for fid, frame in test.closed if fid not in test.opened]
        return earlier[-1].before if earlier else test.start

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

    def _put_back(self, count: TorchState | None) -> bool:
        """Where `count` is one a leak began from: that leak and those after it end."""
        for index, leak in enumerate(self.leaks):
            if leak.before == count:
                del self.leaks[index:]
                return True
        return False


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
