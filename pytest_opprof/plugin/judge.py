"""A measured test's fixture object and its baseline: the fixture made for the test, run()'s
measurement judged before it returns, and the baseline step after the call (compare or record,
with the undo that puts a written file back)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import stepped_aside_unmeasured
from ..layout import baseline_root, shown_path
from ..opnames import COLLECTIVE_PREFIX
from ..settings import RunState
from .base import CHECKS, SETTINGS_LEFT_BY, TEST, add_check, baseline_id, item_rule, runnable

if TYPE_CHECKING:
    from ..baseline import Undo
    from ..decide import BaselineResult, Judged, Measurement
    from ..fixture import OpprofFixture, Remeasured
    from ..torchstate import Left


def new_fixture(item: pytest.Item, state: RunState) -> OpprofFixture:
    """The test's fixture object, as the fixture or the marker makes it; kept in the item's stash."""
    from ..decide import RANGE_MEASUREMENTS
    from ..fixture import OpprofFixture

    fixture = OpprofFixture(item.nodeid, state.settings.measuring, _clock_sampler(state), pytest.fail)
    if state.settings.update_baseline:  # its run() takes the recorded ranges' measurements in the test's context
        fixture.measure_ahead = RANGE_MEASUREMENTS
        fixture.ranges_wanted = partial(_ranges_wanted, item, fixture, state)  # asked in run() only
    elif state.settings.measuring:  # and, comparing, a suspected time's confirmations
        fixture.judge_in_run = partial(_judge_in_run, item, fixture, state)
    fixture.pauses_idle = hasattr(item.config, "workerinput")  # other xdist workers measure beside it
    fixture.asked_by = _asked_by(item)
    item.stash[TEST] = fixture
    return fixture


def _asked_by(item: pytest.Item) -> str | None:
    """The fixture that asked for opprof where the test's own arguments do not (an autouse one),
    read from pytest's fixture info (None where the test asks, or that info is not there)."""
    info = getattr(item, "_fixtureinfo", None)
    own, defs = getattr(info, "argnames", None), getattr(info, "name2fixturedefs", None)
    if own is None or defs is None or "opprof" in own:
        return None
    return next((name for name, found in defs.items() if any("opprof" in d.argnames for d in found)), None)


def _ranges_wanted(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> bool:
    """Recording: whether run() takes the recorded ranges' measurements (decide.ranges_serve): not
    for an unusable file, nor for one the first measurement keeps as it is."""
    from ..decide import ranges_serve

    if state.device_key is None or not state.settings.update_baseline:
        return True
    nodeid, (path, shown, root) = baseline_id(item), _baseline_place(item, state)
    current = _measurement(fixture, item, state, fixture.captures)
    return ranges_serve(
        path, shown, nodeid, current, item_rule(item, state.settings), state.settings.update_baseline, root
    )


def _clock_sampler(state: RunState) -> Callable[[], Any] | None:
    """Samples the clocks of the GPU torch uses, when NVML can see it."""
    nvml, handle = state.nvml, state.gpu_handle
    if nvml is None or handle is None:
        return None
    return lambda: nvml.clock_sample(handle)


def judge_call(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> None:
    """After a call that passed: the assertions deferred to its end, then the baseline's verdicts."""
    failures = fixture.deferred_failures()
    if failures:
        _fail(item, failures)
    if fixture.stepped_aside and not fixture.error_messages:
        measured_nothing(item, fixture, state, stepped_aside_unmeasured, "stepped_aside")
    failing = _baseline_step(item, fixture, state)
    if failing:
        _fail(item, failing)


def _fail(item: pytest.Item, messages: list[str]) -> None:
    pytest.fail(runnable(item.config, "\n".join(messages)), pytrace=False)


def measured_nothing(
    item: pytest.Item, fixture: OpprofFixture, state: RunState, why: Callable[[str | None], str], check: str
) -> None:
    """A measured test that measured nothing (the whole-call capture stepped aside for the test's
    own profiler, or the test asked for the fixture too late for it), with no assertion left to say
    so: an error when a baseline (or --opprof-require-baseline) expected a measurement, which would
    otherwise go uncompared in silence; else a warning check named `check`. `why(baseline)`: the line."""
    from ..analysis.model import WARNING, Check

    settings = state.settings
    path, shown, _ = _baseline_place(item, state)
    comparing = not settings.update_baseline
    if comparing and state.device_key is not None and (path.is_file() or settings.require_baseline):
        fixture.error_messages.append(f"opprof: {why(shown)}")
    else:
        add_check(item, Check(check, WARNING, why(None)))


def _baseline_place(item: pytest.Item, state: RunState) -> tuple[Path, str, Path]:
    """The test's baseline file, that path as the run's lines show it (relative to the rootdir),
    and the baseline folder it is read and written inside."""
    from ..baseline import baseline_file

    settings, rootpath = state.settings, item.config.rootpath
    path = baseline_file(rootpath, settings.baseline_dir, state.device_key or "", baseline_id(item))
    return path, shown_path(path, rootpath), baseline_root(rootpath, settings.baseline_dir)


def _measurement(measured: Any, item: pytest.Item, state: RunState, number: int) -> Measurement:
    """A capture (the fixture, or a Remeasured) of the test `item` as its baseline document and the
    machine's state; `number`: which of the test's captures it is (or measures again)."""
    from .. import device
    from ..assertions import context, spread_places
    from ..baseline import baseline_from_profile
    from ..decide import Measurement
    from ..verdicts import Machine, Places

    profile = measured.profile
    doc = baseline_from_profile(profile, baseline_id(item), state.device_key or "", state.device, number)
    machine = Machine(
        measured.cpu_wait, measured.unreliable, measured.python_tracer, measured.cpu_waited_ms,
        profile.compiled_in, settings_left=_leak_ran_on(item, profile),
        env_set_inside=device.set_in_process(
            device.THREAD_VARIABLES, getattr(item.config, "workerinput", {}).get("opprof_env_set_inside", ())
        ),
        tracer_stays=getattr(measured, "tracer_stays", False),
    )  # fmt: skip
    places = None
    if profile.event_table is not None:
        places = Places(partial(context, profile, say_unread=False), partial(spread_places, profile))
    return Measurement(doc, machine, places)


def _leak_ran_on(item: pytest.Item, profile: Any) -> tuple[Left, ...]:
    """The parts of the settings leaks the test started its call on (SETTINGS_LEFT_BY) that
    `profile` ran on (torchstate.seen_in: its thread count, the dtypes its ops took, the others
    as its capture began): a test that sets its own count for its measurement is no victim (a
    trial's test pinned 2 inside try/finally after a leak of 1, and was not recorded)."""
    from ..torchstate import Left, seen_in

    fixture = item.stash.get(TEST, None)
    now = fixture.settings if fixture is not None else None
    found, dtypes = item.stash.get(SETTINGS_LEFT_BY, ()), _input_dtypes(profile)
    collectives = any(op.name.startswith(COLLECTIVE_PREFIX) for op in getattr(profile, "ops", ()))
    ran = ((by, before, seen_in(before, left, now, profile.threads, dtypes, collectives)) for by, before, left in found)
    return tuple(Left(by, before, seen) for by, before, seen in ran if seen != before)


def _input_dtypes(profile: Any) -> frozenset[str] | None:
    """The input types of the profile's ops as the profiler names them (`double`), or None where
    it recorded no op's inputs."""
    works = [op.work for op in getattr(profile, "ops", ()) if getattr(op, "work", None) is not None]
    return frozenset(d for work in works for sig in work.signatures for d in sig.dtypes) if works else None


def _remeasured(again: Any, item: pytest.Item, state: RunState, number: int) -> Measurement | None:
    """A further measurement for `decide`: None past the last, or for one with trust errors."""
    return None if again is None or again.profile.errors else _measurement(again, item, state, number)


def _judge_in_run(
    item: pytest.Item, fixture: OpprofFixture, state: RunState, again: Callable[[], Remeasured | None]
) -> None:
    """Comparing: judge run()'s measurement against the test's baseline before run() returns,
    calling `again` for each confirmation a suspected time asks, so that fn runs in the test's own
    context (after the body, a file it opened around run() was closed). The baseline step, after
    the body, gives this decision while run()'s capture is still the latest."""
    from ..decide import judged_early

    if state.device_key is None:
        return
    nodeid, (path, shown, root) = baseline_id(item), _baseline_place(item, state)
    current = _measurement(fixture, item, state, fixture.captures)
    remeasure = lambda: _remeasured(again(), item, state, fixture.captures)  # noqa: E731
    judged = judged_early(path, shown, nodeid, current, item_rule(item, state.settings), remeasure, root)
    item.stash[JUDGED] = RunJudged(fixture.captures, current, judged)  # judged None: no usable baseline


@dataclass(frozen=True, slots=True)
class RunJudged:
    """A capture (by its number among the test's), its measurement and, where run() judged it,
    the decision (not the profile: a later capture would leave it held until teardown)."""

    capture: int
    current: Measurement
    judged: Judged | None


JUDGED = pytest.StashKey[RunJudged]()


def _baseline_step(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> list[str]:
    """Compare with the test's baseline, or record it; return the failing verdicts' messages."""
    from ..baseline import Undo, file_bytes
    from ..decide import baseline_step
    from ..results import WRITTEN, format_junit_verdicts

    profile = fixture.profile
    if profile is None or fixture.error_messages or state.device_key is None:
        return []
    settings, nodeid = state.settings, baseline_id(item)
    path, shown, root = _baseline_place(item, state)
    left = _leak_ran_on(item, profile)
    if SETTINGS_LEFT_BY in item.stash:  # its checks say what it ran on: not what it set itself (a count, a dtype)
        _recheck(item, left)

    def remeasure() -> Measurement | None:  # recording: the ranges' measurements run() took
        return _remeasured(fixture.next_measurement(), item, state, fixture.captures)

    rule = item_rule(item, settings)
    early = item.stash.get(JUDGED, None)
    if early is None or early.capture != fixture.captures:  # none, or a later capture replaced it
        early = RunJudged(fixture.captures, _measurement(fixture, item, state, fixture.captures), None)

    def keep_undo() -> None:  # put the file back should the test still err (in its teardown)
        item.stash[UNDO] = Undo(path, file_bytes(path), root)

    result = baseline_step(
        path, shown, nodeid, early.current, rule, settings.update_baseline,
        # comparing, run() took the confirmations (none where the baseline holds another capture)
        remeasure if fixture.can_measure_again and settings.update_baseline else None, root, keep_undo, early.judged,
    )  # fmt: skip
    threads = next((found for found in left if found.after.threads != found.before.threads), None)
    if threads is not None and _threads_were(result, threads.before.threads):
        result = replace(result, threads_left_by=threads.by)  # the fix is there, not a recording
    others = tuple(found for found in left if found.without_threads() is not None)
    if others:  # the default dtype, grad mode...: the same
        result = replace(result, settings_left=others)
    if result.status not in WRITTEN and UNDO in item.stash:  # the write failed: nothing to put back
        del item.stash[UNDO]
    fixture.baseline = result
    item.user_properties.extend(format_junit_verdicts(result))
    fixture.error_messages.extend(
        result.error_messages(nodeid, rule, settings.strict, bool(settings.update_baseline), settings.require_baseline)
    )
    return [] if settings.update_baseline else result.failing(rule, nodeid)


def _recheck(item: pytest.Item, left: tuple[Left, ...]) -> None:
    """The test's leak checks again, from the parts of the leaks its measurement ran on (a
    review's victim that set its own dtype was still named the dtype leaker's victim beside
    another leaker's)."""
    from ..runlines import LEAK_CHECKS, leak_check

    checks = [c for c in item.stash.get(CHECKS, []) if c.name not in LEAK_CHECKS]
    item.stash[CHECKS] = checks + [leak_check(found.by, found.before, found.after) for found in left]
    if not left:
        del item.stash[SETTINGS_LEFT_BY]


def _threads_were(result: BaselineResult, count: int) -> bool:
    """Whether the baseline's torch thread count, as its threads verdict says, is `count`: the
    count before an earlier test changed it, whose leak then is the change (a review's baseline,
    recorded on another count, was told to fix the leak, then to record)."""
    return any(d.fact == "torch threads" and d.was == str(count) for v in result.verdicts for d in v.differs)


UNDO: pytest.StashKey[Undo] = pytest.StashKey()  # puts the baseline file this test wrote back as it was
