"""Plugins the run registers beside the hooks: the records collector (each measured test's
record from its report, xdist's workers' too, and a crashed worker's test), and the watchers of
torch's thread count and of a profiler a test left running."""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import FIXTURE_LEAKER, LEAKS_JOINED, threads_left_changed
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
class _Undone:
    """A fixture whose setup changed torch's thread count, torn down: its name for the messages,
    its argname and the count before its setup."""

    leaker: str
    argname: str
    before: int


class ThreadLeaks:
    """Finds the tests whose calls, and the fixtures whose setup, changed torch's thread count and
    left it so (one after another: each changed what the one before left), and marks the measured
    tests that then ran on that count (order-dependent times). A call that sets the count the first
    of them found puts it back; so does anything that sets it before a test's own fixtures run (a
    fixture's teardown, autouse or not): fixtures that set the count and put it back (any scope)
    are no leak (a trial's test that restored the session's count was blamed, and a fixture's own
    count read as a leak's). A wider fixture's own count in between leaves the leak as it was (a
    review's class fixture). A fixture's leak begins once the test's teardown (its scope's last
    test's, for a wider one) is over with the count still its own; a test that asks for that
    fixture runs on the fixture's count by its own doing: no victim."""

    def __init__(self) -> None:
        self.leak: tuple[str, int, int] | None = None  # (the leaking tests, `a then b`; count before; count left)
        self.leak_fixtures: frozenset[str] = frozenset()  # the leak's fixtures' argnames
        self._set: dict[int, tuple[str, int]] = {}  # id(FixtureDef) -> (its name in messages, the count before it)
        self._undone: list[_Undone] = []  # the count-setting fixtures torn down in this test's teardown

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any, Any]:
        from ..capture import torch_threads

        before = torch_threads()
        try:
            return (yield)
        finally:
            after = torch_threads()
            if before is not None and after is not None and after != before:
                self._set[id(fixturedef)] = (_fixture_name(fixturedef, request), before)

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        found = self._set.pop(id(fixturedef), None)
        if found is not None:
            self._undone.append(_Undone(found[0], str(getattr(fixturedef, "argname", "")), found[1]))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        from ..capture import torch_threads

        try:
            return (yield)
        finally:
            undone, self._undone = self._undone, []
            end = torch_threads()
            left = [u for u in undone if end is not None and end != u.before]
            if left:  # the last torn down that changed it: its setup set the count the test's teardown left
                self._ended(left[-1].leaker, left[-1].before, end, left[-1].argname)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from ..capture import torch_threads

        if self.leak is not None and torch_threads() == self.leak[1]:
            self.leak, self.leak_fixtures = None, frozenset()  # put back since, before this test's fixtures ran

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True  # a failure outside the test's code (hypothesis's health check) shows no frame of ours
        from ..analysis.model import WARNING, Check
        from ..capture import torch_threads

        start = torch_threads()
        # it sets the count itself: by a fixture of the leak, or as the leak's last test (run again: a rerun plugin)
        own = self.leak is not None and (
            bool(self.leak_fixtures & set(getattr(item, "fixturenames", ())))
            or self.leak[0].rsplit(LEAKS_JOINED, 1)[-1] == item.nodeid
        )
        if self.leak is not None and start == self.leak[2] and is_measured(item) and not own:
            add_check(item, Check("threads", WARNING, threads_left_changed(*self.leak)))
            item.stash[THREADS_LEFT_BY] = self.leak
        try:
            return (yield)
        finally:
            self._ended(item.nodeid, start, torch_threads())

    def _ended(self, leaker: str, start: int | None, end: int | None, fixture: str = "") -> None:
        """After a call (or a fixture's setup to its teardown) that began on `start` and left
        `end`: a leak begins, grows or ends."""
        if start is None or end is None or end == start:
            return
        if self.leak is not None and start != self.leak[2]:
            return  # it began on a wider fixture's count, which that fixture puts back: the live leak stands
        fixtures = frozenset([fixture] if fixture else [])
        if self.leak is None:
            self.leak, self.leak_fixtures = (leaker, start, end), fixtures
        elif end == self.leak[1]:
            self.leak, self.leak_fixtures = None, frozenset()  # put back the count the leaks began from
        else:
            self.leak = (f"{self.leak[0]}{LEAKS_JOINED}{leaker}", self.leak[1], end)
            self.leak_fixtures |= fixtures


def _fixture_name(fixturedef: Any, request: pytest.FixtureRequest) -> str:
    """`fixture one_thread (conftest.py:12)`: a fixture as the leak messages name it, with where
    it is defined (relative to the rootdir where it can be)."""
    name = f"{FIXTURE_LEAKER}{getattr(fixturedef, 'argname', '?')}"
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
