"""The plugin while a test runs: the call's hook wrapper (the whole-call capture, subtests,
unittest outcomes), its reports (an untrusted measurement an error, the profile taken, the record
on the teardown report), a stopped run, the profiler's first start before the tests."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from contextlib import contextmanager, suppress
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import asked_late_unmeasured, profiler_left_on, subtests_failed
from .base import (
    BAD_MARKER,
    CHECKS,
    IN_CALL,
    MARKER,
    RUN,
    TEST,
    add_check,
    carries,
    is_measured,
    runnable,
    to_record,
)
from .judge import JUDGED, UNDO, judge_call, measured_nothing, new_fixture

if TYPE_CHECKING:
    from ..analysis.model import Check
    from ..baseline import Undo
    from ..fixture import OpprofFixture
    from ..report import TestResult
    from ..results import TestRecord


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # An item that runs again (a rerun plugin) keeps its user_properties: an earlier run's figures go.
    item.user_properties[:] = [p for p in item.user_properties if not str(p[0]).startswith("opprof.")]
    problem = item.stash.get(BAD_MARKER, None)
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Before the fixtures' teardowns: the test's capture is taken; a capture now is refused."""
    fixture = item.stash.get(TEST, None)
    if fixture is not None:
        fixture.call_ended = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """torch's first profiler start, paid before the tests (on each xdist worker) when one of
    them is measured: not in the first measured test's time, nor under its timeout."""
    state = session.config.stash.get(RUN, None)
    if state is None or not state.settings.measuring or session.config.option.collectonly:
        return
    from ..capture import warm_profiler

    state.ran_tests = True
    if any(carries(item) for item in session.items):
        warm_profiler()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    state = item.config.stash[RUN]
    if not state.settings.measuring:
        return (yield)
    from ..capture import profiler_left_running

    fixture = item.stash.get(TEST, None)
    if fixture is None and item.get_closest_marker(MARKER) is not None:
        fixture = new_fixture(item, state)
    if (
        fixture is not None and not fixture.captures and profiler_left_running()
    ):  # before the whole call: not the test's
        pytest.fail(profiler_left_on(state.profiler_left_by), pytrace=False)
    if fixture is None:
        with _calling(item):
            result = yield
        late = item.stash.get(TEST, None)  # the test asked for it in its body: request.getfixturevalue("opprof")
        if late is not None and _call_passed(item):
            if late.profile is None and not late.error_messages:
                measured_nothing(item, late, state, asked_late_unmeasured, "unmeasured")
            judge_call(item, late, state)
        return result
    if fixture.captures:  # a fixture of the test measured: its capture is the test's, and the body's
        fixture.body_uncaptured = True
        with _calling(item):
            result = yield  # ops are not captured (the review's numerics check after a fixture's gate
        if _call_passed(item):  # became the test's baseline); a run() in the body measures
            judge_call(item, fixture, state)
        return result
    fixture.start_whole_call()
    try:
        with _calling(item):
            result = yield
    except BaseException as exc:
        fixture.end_whole_call(raised=exc)
        raise
    whole = fixture.whole_call_running
    fixture.end_whole_call(raised=_unittest_outcome(item))
    if whole and BENCHMARK_FIXTURE in getattr(item, "fixturenames", ()):
        from ..analysis.checks import benchmark_check

        add_check(item, benchmark_check())
    if _call_passed(item):
        judge_call(item, fixture, state)
    return result


BENCHMARK_FIXTURE = "benchmark"  # pytest-benchmark's: it picks its rounds by timing


_SUBTESTS_FAILED = pytest.StashKey[int]()  # the call's failed subtests: the test fails at its end


@contextmanager
def _calling(item: pytest.Item) -> Iterator[None]:
    item.stash[IN_CALL], item.stash[_SUBTESTS_FAILED] = True, 0
    try:
        yield
    finally:
        item.stash[IN_CALL] = False


def _unittest_outcome(item: pytest.Item) -> BaseException | None:
    """What ended a unittest TestCase's test, which raises nothing to pytest_runtest_call: pytest's
    unittest plugin keeps its failure, skip or expected failure on the item (`_excinfo`) until the
    call's report (a trial's failing TestCase test was recorded, its skipped ones erred as empty)."""
    kept = getattr(item, "_excinfo", None)
    return kept[0].value if isinstance(kept, list) and kept else None


UNITTEST_XFAILED = "_pytest.outcomes.XFailed"  # the short summary of an xfail() without a reason

UNITTEST_XFAIL_WHY = "failed as @unittest.expectedFailure expects (unittest hands pytest no exception to name)"


def _is_unittest(item: pytest.Item) -> bool:
    """A unittest.TestCase's test (pytest's TestCaseFunction), told by its class, not its attributes."""
    return any(cls.__name__ == "TestCaseFunction" for cls in type(item).__mro__)


def _call_passed(item: pytest.Item) -> bool:
    """The call raised nothing, and fails at its end for no failed subtest (pytest's `subtests`,
    unittest's `subTest`) and no unittest outcome: its assertions and baseline are judged (a
    trial's test with a failed subtest was recorded)."""
    return not item.stash.get(_SUBTESTS_FAILED, 0) and _unittest_outcome(item) is None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "call" and item.stash.get(IN_CALL, False):  # a subtest's, made during the call
        if report.failed:
            item.stash[_SUBTESTS_FAILED] = item.stash.get(_SUBTESTS_FAILED, 0) + 1
        return report  # the call's own report comes at its end, once
    fixture = item.stash.get(TEST, None)
    if fixture is None and call.when == "setup" and not report.passed and is_measured(item):
        _ended_at_setup(item, report)
    if call.when == "setup" and report.passed and hasattr(item.config, "workerinput") and is_measured(item):
        report.opprof_measured = True  # the controller: a crash is a measured test's
    if fixture is None or not fixture.enabled:
        return report
    if call.when == "call" and report.passed and fixture.error_messages:
        # Untrusted numbers or an unusable baseline are neither a pass nor a fail: an error.
        report.outcome = "failed"
        report.longrepr = UntrustedRepr(runnable(item.config, "\n".join(fixture.error_messages)))
        report.opprof_untrusted = True
        # junitxml writes a call's error as a <failure>: a property tells a dashboard it is an error
        item.user_properties.append(("opprof.outcome", "error"))
    from ..report import TestResult

    result = item.stash.setdefault(_RESULT, TestResult(item.nodeid))
    outcome, failure = _outcome_word(report), _failure_message(report)
    if outcome == "xfailed" and _is_unittest(item) and failure == UNITTEST_XFAILED:
        failure = UNITTEST_XFAIL_WHY  # pytest's xfail of an expectedFailure, which carries no message
    if call.when == "call" and outcome == "passed" and (failed := item.stash.get(_SUBTESTS_FAILED, 0)):
        # pytest fails it after this hook (its `subtests` fixture); a unittest test it reports passed
        outcome, failure = "failed", subtests_failed(failed, unittest=_is_unittest(item))
    result.record_phase(call.when, outcome, failure if outcome not in ("passed", "xpassed") else None)
    if call.when == "call":
        _take_profile(item, call, report, fixture, result)
        if UNDO in item.stash and outcome in ("failed", "error", "xfailed"):  # failed after its call passed
            _put_back(item.stash[UNDO], fixture)
            del item.stash[UNDO]
        if UNDO in item.stash and hasattr(item.config, "workerinput"):  # the controller undoes it if this worker dies
            report.opprof_undo = json.dumps(item.stash[UNDO].to_dict())
    if call.when == "teardown":
        undo = item.stash.get(UNDO, None)
        if undo is not None and report.failed:
            _put_back(undo, fixture)
        result.baseline = fixture.baseline
        _finish_test(item, report, result)
        # Items live for the whole session: let the test's events and profile go now.
        del item.stash[_RESULT], item.stash[TEST]
        fixture._release()  # the plugin owns the fixture's life
        if undo is not None:
            del item.stash[UNDO]
        if JUDGED in item.stash:
            del item.stash[JUDGED]
    return report


_RESULT = pytest.StashKey["TestResult"]()

_TRACED = pytest.StashKey[bool]()  # this item wrote a trace in this session


def _take_profile(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    report: pytest.TestReport,
    fixture: OpprofFixture,
    result: TestResult,
) -> None:
    """The call's profile for the reports: the latest finished capture, or, when the test failed
    by the exception that ended a capture, that capture as far as it went (its timeline)."""
    from ..analysis.checks import contention_check
    from ..results import format_junit_properties

    ended = report.failed or _outcome_word(report) == "xfailed"  # an xfail's capture as far as it went too
    if ended and call.excinfo is not None:
        fixture.end_open_block(call.excinfo.value)
    cut_short = fixture.cut_short(call.excinfo.value) if ended and call.excinfo is not None else None
    if cut_short is not None:
        result.profile, result.cut_short = cut_short, True
        item.user_properties.append(("opprof.cut_short", "true"))
    elif fixture.profile is not None:
        result.profile = fixture.profile
        result.clocks, result.unreliable = fixture.clocks, fixture.unreliable
        result.cpu_wait = fixture.cpu_wait
        if contended := contention_check(fixture.cpu_wait, fixture.profile.other_threads, fixture.child_processes):
            add_check(item, contended)
    if result.profile is not None:
        result.captures = fixture.captures
        item.user_properties.extend(format_junit_properties(result.profile, item.config.stash[RUN].settings.top))
        worker = getattr(item.config, "workerinput", {}).get("workerid")
        if worker is not None:  # `--dist each` lists a test once per worker: the JSON and CSV say which, so does this
            item.user_properties.append(("opprof.worker", worker))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """A run stopped (pytest.exit, Ctrl-C) after the test's file was written and before its
    teardown finished gives no teardown report: the file goes back as it was here (a trial's
    `pytest.exit` in a fixture's teardown left it rewritten, and no line said so)."""
    try:
        return (yield)
    except BaseException as exc:
        undo = item.stash.get(UNDO, None)
        fixture = item.stash.get(TEST, None)
        if undo is not None:
            del item.stash[UNDO]
            with suppress(OSError):  # the run is stopping: its own exception is the one to show
                undo()
                if fixture is not None:
                    fixture.baseline = None  # not recorded: the file is as it was
        if isinstance(exc, (KeyboardInterrupt, pytest.exit.Exception)):
            _stopped_in(item)
        raise


def _stopped_in(item: pytest.Item) -> None:
    """A run stopped in a test (Ctrl-C, pytest.exit): the summary and the JSON say where, and a
    test whose call had ended is recorded as it ended, as pytest's own summary counts it (a trial's
    stop in a fixture's teardown left a failed test out of every report, which then read `no test
    was measured`). Not on an xdist worker: its controller reports."""
    state = item.config.stash.get(RUN, None)
    if state is None or not state.settings.measuring or hasattr(item.config, "workerinput"):
        return
    state.stopped_in = state.stopped_in or item.nodeid
    result, fixture = item.stash.get(_RESULT, None), item.stash.get(TEST, None)
    collector = item.config.pluginmanager.get_plugin("opprof-records")
    if result is None or fixture is None or result.outcome is None or collector is None:
        return  # its call never ended: it has no outcome to report
    result.baseline = fixture.baseline
    collector.add(_finished(item, result)[0])


def _put_back(undo: Undo, fixture: OpprofFixture) -> None:
    """A test that errs in its teardown after its baseline was written is not recorded: the file
    goes back as it was (a baseline records code that passes its own checks). So is one whose
    call a plugin failed in its report after the call passed (pytest-check's soft assertions: a
    trial's failing test was recorded)."""
    try:
        undo()
    except OSError:  # the file stays written, and the summary counts it so
        return
    fixture.baseline = None


def _outcome_word(report: pytest.TestReport) -> str:
    """A phase's outcome for our reports: pytest's, with an untrusted measurement an error and
    an xfail test's run `xfailed` or `xpassed` (pytest reports an expected failure as skipped)."""
    if getattr(report, "opprof_untrusted", False):
        return "error"
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed" if report.passed else report.outcome
    return report.outcome


def _ended_at_setup(item: pytest.Item, report: pytest.TestReport) -> None:
    """A measured test that a skip marker skipped, or a fixture failed, before the opprof fixture
    existed still has its line in the reports, as one that ended while running has."""
    from ..report import TestResult

    result = TestResult(item.nodeid)
    outcome = "error" if report.failed else _outcome_word(report)
    result.record_phase("setup", outcome, _failure_message(report) if outcome == "error" else None)
    _finish_test(item, report, result)


def _failure_message(report: pytest.TestReport) -> str | None:
    """Why a phase failed, as pytest's short summary says it: the exception's message (an
    assertion's, or the verdicts opprof failed the test with), else the report's text."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return message if isinstance(message, str) and message else (report.longreprtext or None)


class UntrustedRepr:
    """The long report of an untrusted measurement: its text, and the `reprcrash` through which
    pytest 8's short summary shows the reason (pytest 9 shows a plain string's too)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = SimpleNamespace(message=text)

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:  # what xdist carries to its controller, and JUnit XML writes
        return self.text


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # xdist carries a report's long repr to its controller as text: an untrusted one gets back the
    # reprcrash through which pytest 8's short summary names the reason.
    if getattr(report, "opprof_untrusted", False) and isinstance(report.longrepr, str):
        report.longrepr = UntrustedRepr(report.longrepr)  # type: ignore[assignment]  # read duck-typed


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, Any] | None:
    if getattr(report, "opprof_untrusted", False):
        # A plain word, red from the failed outcome: pytest < 8.3's short summary printed a
        # (word, markup) pair as a tuple.
        return "error", "E", "ERROR"
    return None


def _finish_test(item: pytest.Item, report: pytest.TestReport, result: TestResult) -> None:
    from ..results import format_junit_checks

    record, checks = _finished(item, result)
    # junitxml reads the teardown report's properties: the test's own checks beside its profile's
    report.user_properties.extend(format_junit_checks(checks))
    # The record rides on the teardown report, so that the xdist controller receives it too.
    # As compact JSON text: xdist carries it, and pytest keeps every report until the end of the
    # run (as dicts, 500 tests' profiles held ~75 MB).
    report.opprof_record = json.dumps(record.to_dict(), separators=(",", ":"))  # type: ignore[attr-defined]


def _finished(item: pytest.Item, result: TestResult) -> tuple[TestRecord, list[Check]]:
    """The test's record, its trace written, and the run's checks of it."""
    from ..baseline import stable_facts

    state = item.config.stash[RUN]
    settings = state.settings
    result.worker = getattr(item.config, "workerinput", {}).get("workerid")
    result.everywhere = state.trace_tag is not None
    checks: list[Check] = item.stash.get(CHECKS, [])
    result.extra_checks = tuple(checks)
    item.stash[CHECKS] = []
    traced = item.stash.get(_TRACED, False)  # by an earlier run of this item (a rerun plugin's): it stays
    result.export_trace(
        settings.trace_dir, settings.trace == "all", state.device_key,
        keep=traced, tag=state.trace_tag, environment=stable_facts(state.device),
    )  # fmt: skip
    item.stash[_TRACED] = traced or result.trace_path is not None
    return to_record(result, state), checks
