"""Plugins the run registers beside the hooks: the records collector (each measured test's
record from its report, xdist's workers' too, and a crashed worker's test), and the watchers of
torch's thread count and of a profiler a test left running."""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import FIXTURE_LEAKER, LEAKS_JOINED, XUNIT_LEAKER, threads_left_changed, threads_of_scope
from ..settings import RunState
from .base import THREADS_LEFT_BY, add_check, is_measured, to_record

if TYPE_CHECKING:
    from ..baseline import Undo
    from ..results import TestRecord


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
    """A fixture whose setup changed torch's thread count: its name in the messages, the count
    before its setup and after it, its argname and scope."""

    leaker: str
    before: int
    after: int
    argname: str = ""
    scope: str = "function"


@dataclass
class _TestState:
    """What one test's setup, call and teardown did to torch's thread count."""

    start: int | None = None  # before its setup
    set_up: set[int] = field(default_factory=set)  # id(FixtureDef) of the fixtures set up for it
    opened: list[int] = field(default_factory=list)  # those that changed the count, in setup order
    call: tuple[int, int] | None = None  # the count its call began and ended on, where it changed it
    closed: list[tuple[int, _Frame, int]] = field(default_factory=list)  # (id, frame, count after its teardown)
    changed_by_teardown: list[str] = field(default_factory=list)  # fixtures whose teardown alone changed it
    last: int | None = None  # the count after the last teardown step seen


class ThreadLeaks:
    """Finds the tests whose calls, and the fixtures whose setup or teardown, changed torch's
    thread count and left it so (one after another: each changed what the one before left), and
    marks the measured tests that then ran on that count (order-dependent times).

    Each test is judged once its teardown is over, on the count it leaves against the count it
    should leave: the one before its setup, or where a wider fixture's scope began in it, that
    fixture's count, or where one ended in it, the count before that fixture (a trial's two
    fixtures that each put the count back, torn down in one teardown, read as a leak, as did a
    call's change a fixture's teardown undid). A call that sets the count the leak began from
    ends it; so does anything that sets it before a test's own fixtures run. A test that set up a
    fixture of the leak runs on its count by its own doing, as does a rerun of the leaking test:
    no victim."""

    def __init__(self) -> None:
        self.leak: tuple[str, int, int] | None = None  # (the leakers, `a then b`; count before; count left)
        self.leak_fixtures: frozenset[int] = frozenset()  # id(FixtureDef) of the leak's fixtures
        self._frames: dict[int, _Frame] = {}  # id(FixtureDef) -> its frame, while it is set up
        self._test = _TestState()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from ..capture import torch_threads

        self._test = _TestState(start=torch_threads())
        if self.leak is not None and self._test.start == self.leak[1]:
            self.leak, self.leak_fixtures = None, frozenset()  # put back since, before this test's fixtures ran

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any, Any]:
        from ..capture import torch_threads

        before = torch_threads()
        try:
            return (yield)
        finally:
            after = torch_threads()
            self._test.set_up.add(id(fixturedef))
            if before is not None and after is not None and after != before:
                name, argname = _fixture_name(fixturedef, request), str(getattr(fixturedef, "argname", ""))
                scope = str(getattr(fixturedef, "scope", "function"))
                self._frames[id(fixturedef)] = _Frame(name, before, after, argname, scope)
                self._test.opened.append(id(fixturedef))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True  # a failure outside the test's code (hypothesis's health check) shows no frame of ours
        from ..analysis.model import WARNING, Check
        from ..capture import torch_threads

        start = torch_threads()
        scoped = self._scoped_count(item, start)
        if scoped is not None and is_measured(item):
            add_check(item, Check("threads", WARNING, threads_of_scope(scoped.leaker, scoped.before, scoped.after)))
            item.stash[THREADS_LEFT_BY] = (scoped.leaker, scoped.before, scoped.after)
        elif self.leak is not None and start == self.leak[2] and is_measured(item) and not self._own(item):
            add_check(item, Check("threads", WARNING, threads_left_changed(*self.leak)))
            item.stash[THREADS_LEFT_BY] = self.leak
        try:
            return (yield)
        finally:
            end = torch_threads()
            if start is not None and end is not None and end != start:
                self._test.call = (start, end)

    def _scoped_count(self, item: pytest.Item, start: int | None) -> _Frame | None:
        """The wider fixture, set up by an earlier test and not asked for by this one, whose count
        this test's call starts on (a trial's module fixture set the count for the tests asking for
        it, and the test after them there recorded that count; run alone, it failed)."""
        names = set(getattr(item, "fixturenames", ()))
        alive = [f for fid, f in self._frames.items() if fid not in self._test.set_up and f.scope != "function"]
        latest = alive[-1] if alive else None  # the innermost: the count is its
        if latest is None or latest.after != start or latest.argname in names:
            return None
        return latest

    def _own(self, item: pytest.Item) -> bool:
        """Whether the test runs on the leaked count by its own doing: it set up a fixture of the
        leak, or it is the leak's last test run again (a rerun plugin)."""
        assert self.leak is not None
        return bool(self.leak_fixtures & self._test.set_up) or self.leak[0].rsplit(LEAKS_JOINED, 1)[-1] == item.nodeid

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        from ..capture import torch_threads

        now, test = torch_threads(), self._test
        frame = self._frames.pop(id(fixturedef), None)
        if frame is not None:
            test.closed.append((id(fixturedef), frame, now if now is not None else frame.before))
        elif now is not None and test.last is not None and now != test.last:
            test.changed_by_teardown.append(_fixture_name(fixturedef, request))
        test.last = now

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        from ..capture import torch_threads

        self._test.last = torch_threads()
        try:
            return (yield)
        finally:
            self._judge(item.nodeid, torch_threads())

    def _judge(self, nodeid: str, end: int | None) -> None:
        """After a test's teardown: whether what it left is a leak (it begins, grows or ends)."""
        test = self._test
        expected = self._expected(test)
        if expected is None or end is None or end == expected:
            return
        unrestored = [(fid, frame) for fid, frame, after in reversed(test.closed) if after != frame.before]
        leakers = [frame.leaker for _, frame in unrestored]
        leakers += [nodeid] if test.call is not None else []
        leakers += test.changed_by_teardown
        fixtures = frozenset(fid for fid, _ in unrestored)
        self._ended(LEAKS_JOINED.join(dict.fromkeys(leakers or [nodeid])), expected, end, fixtures)

    def _expected(self, test: _TestState) -> int | None:
        """The count the test should leave: a wider fixture's it set up that is still set up, or
        where one set up before it ended in its teardown, the count before that fixture, else the
        count before its setup."""
        alive = [fid for fid in test.opened if fid in self._frames]
        if alive:
            return self._frames[alive[-1]].after
        earlier = [frame for fid, frame, _ in test.closed if fid not in test.opened]
        return earlier[-1].before if earlier else test.start

    def _ended(self, leaker: str, start: int, end: int, fixtures: frozenset[int] = frozenset()) -> None:
        """After a test whose setup, call or teardown left `end` where `start` was expected: a leak
        begins, grows or ends."""
        if self.leak is not None and start != self.leak[2]:
            return  # it began on a wider fixture's count, which that fixture puts back: the live leak stands
        if self.leak is None:
            self.leak, self.leak_fixtures = (leaker, start, end), fixtures
        elif end == self.leak[1]:
            self.leak, self.leak_fixtures = None, frozenset()  # put back the count the leaks began from
        else:
            chain = self.leak[0].split(LEAKS_JOINED)
            chain += [name for name in leaker.split(LEAKS_JOINED) if name != chain[-1]]  # a rerun, a parameter
            self.leak = (LEAKS_JOINED.join(chain), self.leak[1], end)
            self.leak_fixtures |= fixtures


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
