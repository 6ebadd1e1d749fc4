"""The run's opprof summary in the terminal: each test's tables, then the problems (each test's own
lines, then what a load or a faster machine explains for several tests at once, then the run's
lines: runlines), then the xdist note."""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Callable, Collection
from dataclasses import dataclass

from .analysis import Check
from .analysis.checks import COMPILATION, CONTENTION, CONTENTION_LIMIT
from .compare import EXCUSING_FACTS
from .decide import RUN, TIMES_WRITTEN, BaselineResult, References, Slowed
from .errors import (
    COMPILED_IN_STEPS,
    KEPT_SLOWER,
    RECORD_AGAIN_FIX,
    SAME_WORK_FIX,
    capture_moved_compared,
    capture_moved_written,
    checks_alike,
    other_work_measured,
    quiet_tables,
    record_if_intended,
    record_on_this_setup,
    recorded_slowed,
    recorded_slowed_shared,
    wait_share,
    waited_for_cpu_up_to,
    with_its_id,
    within_ranges_shared,
    written_later,
)
from .excuses import FASTER_FIX, QUIET_MACHINE_FIX
from .report import format_summary
from .results import WRITTEN, TestRecord
from .rules import ENVIRONMENT, STRUCTURE, WORK
from .runlines import LEAK_CHECKS, RECORD_ALL, kept_slower, listed_ids, run_lines, whole_run_commands
from .structurelines import SharedStructure, shared_structure
from .textout import shell_quote
from .timing import MOST_STEPS_WHY, RANGE_FIX, range_span
from .units import count_of, first_three
from .verdictlines import SHARED_OUTCOME, verdict_lines
from .verdicts import CHANGED, CONTENTION_WHY, INCONCLUSIVE, Verdict, largest_first


def format_problems(
    records: list[TestRecord],
    verbose: bool = False,
    recording: bool | str = False,
    looked_in: str | None = None,
    unjudged_globs: Collection[str] = (),
    strict: bool = False,
    picked: bool = True,
) -> str:
    """After the tables: per test at most one line per verdict kind (every verdict with
    `verbose`), trust warnings and errors, traces written; then the run's lines on baselines
    (`looked_in`: the baseline folder the 'no baseline' line names; `unjudged_globs`: ignore globs
    not said to match nothing, as the run's own in a run narrowed by -k: the rest of the suite
    may hold their ops; `picked`: whether the run picked some tests, so a command naming all it
    measured is no bare one)."""
    records = run_spells(records)
    shared = _Shared() if verbose else _shared_environment(records, _shared_load(records, strict))
    structure = shared_structure(records, picked)  # -v too: each test's lines, and the one command
    if verbose:
        shared = dataclasses.replace(shared, lines=structure.lines)
    else:
        checks, alike = _shared_checks(records)
        said = shared.lines + structure.lines + checks
        shared = dataclasses.replace(shared, lines=said, structure=structure, checks=alike)
    lines = []
    for record in records:
        lines += _test_lines(record, verbose, shared, strict)
    run = list(shared.lines) + run_lines(records, recording, looked_in, unjudged_globs, verbose)
    return "\n".join(lines + whole_run_commands(run, records, picked))


def _test_lines(record: TestRecord, verbose: bool, shared: _Shared | None = None, strict: bool = False) -> list[str]:
    """A test's lines after the tables: its measurement, its verdicts, how it ran, its checks
    and traces (`shared`: the run's lines that stand for some of them)."""
    shared = shared or _Shared()
    lines = _measurement_lines(record) + _baseline_lines_of(record, verbose, shared, strict) + _run_of_lines(record)
    lines = [with_its_id(line, record.nodeid) for line in lines]
    shown = [c for c in record.checks if c.status != "ok" and c.name not in LEAK_CHECKS]  # one line for the run
    contention_said = _said_contention(record.baseline) or _recorded_contended(record) or record.nodeid in shared.warned
    if not verbose and contention_said:
        shown = [c for c in shown if c.name != CONTENTION]  # a newcomer's loaded run: said once, not twice a test
    lines += [f"{c.status} {c.name}: {c.message}" for c in shown if _check_key(c) not in shared.checks]
    if record.trace:
        lines.append(f"trace written to {record.trace}")
    if record.trace_error:
        lines.append(f"trace {record.trace_error}")
    if record.earlier_trace:
        lines.append(f"trace of an earlier run kept at {record.earlier_trace}")
    return [f"{record.nodeid}: {line}" for line in lines]


def _why_unconfirmed(baseline: BaselineResult | None) -> str:
    """What may have slowed a first measurement that later ones did not confirm."""
    if baseline is not None and baseline.traced_first:
        return f"the first ran under a Python tracer ({baseline.traced_first}), the later ones without it"
    return "interference, or a slow spell of the machine"


def _measurement_lines(record: TestRecord) -> list[str]:
    """What to make of the measurement itself: unreliable clocks, a second measurement."""
    lines = []
    if record.unreliable:
        lines.append(
            f"unreliable measurement: {record.unreliable}; time verdicts are inconclusive, and no baseline is "
            "recorded from it"
        )
    baseline = record.baseline
    remeasured, n = (baseline.remeasured, baseline.measurements) if baseline else (None, 1)
    if remeasured == "not confirmed":
        later = "a second one" if n == 2 else f"measurement {n}"
        if baseline and any(v.why and v.why.startswith(MOST_STEPS_WHY) for v in baseline.verdicts):
            outcome = "on its fastest steps, but most steps of each were slower (its time line)"
        else:
            so = "its time passes" if baseline and baseline.status == "compared" else "the file was kept"
            outcome = f"({_why_unconfirmed(baseline)}), so {so}"
        lines.append(
            f"the first measurement's time differed from the baseline's; {later}, after a pause, did not confirm it "
            f"{outcome}"
        )
    elif remeasured == "confirmed":
        lines.append(
            f"measured {_times(n)}, with pauses between: each differs from the baseline; the time line judges "
            "their pooled steps, the op table shows the first"
        )
    said = baseline and any(v.fix == SAME_WORK_FIX for v in baseline.verdicts)  # the inconclusive line says it
    if baseline and baseline.unrepeated and not said:
        lines.append(other_work_measured(first_three(list(baseline.unrepeated))))
    return lines + _capture_moved_lines(baseline)


def _capture_moved_lines(baseline: BaselineResult | None) -> list[str]:
    """A baseline of another of the test's captures than its latest: written for that, or, comparing,
    what it costs (unless the inconclusive line of a slowdown says it)."""
    moved = baseline.capture_moved if baseline else None
    if baseline is None or moved is None:
        return []
    if baseline.status in WRITTEN:
        return [capture_moved_written(moved.was, moved.now, baseline.status == "renumbered")]
    said = any(v.fix == RECORD_AGAIN_FIX for v in baseline.verdicts)
    if baseline.status != "compared" or moved.was is None or said:
        return []
    return [capture_moved_compared(moved.was, moved.now, baseline.time_fails)]


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


def _baseline_lines_of(record: TestRecord, verbose: bool, shared: _Shared, strict: bool) -> list[str]:
    """The baseline verdicts (those a shared line names left out), and a recording's caveat."""
    nodeid, baseline, lines = record.nodeid, record.baseline, []
    if baseline:
        verdicts = [v for v in baseline.verdicts if v.status != INCONCLUSIVE or nodeid not in shared.inconclusive]
        if nodeid in shared.environment:
            verdicts = [v for v in verdicts if v.kind != ENVIRONMENT]
        said_alike = shared.structure.says(record)  # and its record command: the shared line has one for all
        if said_alike:
            verdicts = [v for v in verdicts if v.kind != STRUCTURE]
        status = "strict" if _strict_error(record, strict) else baseline.status
        lines += verdict_lines(verdicts, verbose, status, frozenset(baseline.fails), nodeid)
        changed = any(v.kind in (STRUCTURE, WORK) and v.status == CHANGED for v in baseline.verdicts)
        torch = _torch_moved(baseline)
        if changed and torch:  # a trial's upgrade: `aten::reshape 15 -> 16/step` beside an unlinked torch line
            lines.append(f"torch differs from the baseline's ({torch}): the change may be torch's own, not the code's")
        if changed and any(c.name == COMPILATION for c in record.checks):
            lines.append(COMPILED_IN_STEPS)
        lines += _fix_lines(record, verdicts, changed, said_alike)
    wait = _written_wait(record)
    if _recorded_contended(record) and wait is not None and nodeid not in shared.recorded:
        lines.append(
            f"baseline recorded while its threads waited for a CPU {wait_share(wait)}: its CPU times may be "
            "inflated and hide later slowdowns; record it again on a quiet machine (without -n on a small "
            f"runner): pytest --opprof-update-baseline=all {shell_quote(nodeid)}"
        )
    elif baseline and baseline.status in TIMES_WRITTEN and baseline.written_from > 1:
        if baseline.first_slowed is not None or record.cpu_wait is not None:
            lines.append(written_later(baseline.written_from, baseline.first_slowed, record.cpu_wait))
    slowed = _recorded_slowed(record)
    if slowed is not None and nodeid not in shared.slowed:
        lines.append(recorded_slowed(slowed.factor, slowed.than, f"{RECORD_ALL} {shell_quote(nodeid)}"))
    return lines


def _fix_lines(record: TestRecord, verdicts: list[Verdict], changed: bool, said_alike: bool) -> list[str]:
    """What to do about a compared test's changes: the fix in the tests that left torch's settings
    changed, else record it (not where a line for the tests that changed alike has the command), a
    kept slower file's =all, or adopt this setup."""
    baseline, nodeid = record.baseline, record.nodeid
    assert baseline is not None
    slower = baseline.slower
    fixes = baseline.leak_fixes(baseline.verdicts) if (changed or slower) and baseline.status == "compared" else []
    if fixes and baseline.leaks_explain(baseline.verdicts):
        return fixes  # the fix is in the tests that left the settings, not a recording
    if said_alike:
        return fixes
    if (changed or slower) and baseline.status == "compared":  # a recording run has recorded it
        # a slower time alone is written only by =all (it may be intended too: a larger model)
        return [*fixes, record_if_intended(nodeid, everything=slower and not changed)]
    if baseline.status in ("kept", "renumbered") and kept_slower(baseline):
        return [*fixes, KEPT_SLOWER + "; " + record_if_intended(nodeid, everything=True)]
    if baseline.status in ("compared", "kept") and any(v.kind == ENVIRONMENT for v in verdicts):
        return [*fixes, record_on_this_setup(nodeid)]  # a team trial's cpu_model line came every run, with no fix
    return fixes


# a written file's reference this many times the median of the run's other written files': a
# slow spell of the machine during its recording (the matmul reference, on torch's threads, moves
# more: x1.15+ in most comparisons of a regression trial's)
RUN_SPELLS = (("dispatch_ms", 1.5), ("matmul_ms", 2.0))
RUN_SPELL_FILES = 3  # written files needed for a run's median


def run_spells(records: list[TestRecord]) -> list[TestRecord]:
    """The records, those of files this run wrote in a slow spell of the machine marked so
    (written_slowed, RUN): a reference x1.5 (dispatch) or x2 (matmul) the median of the files the
    run wrote. A regression trial's training step was written with its dispatch reference at 0.82 ms,
    the run's six others at 0.46-0.48: its times inflated, it read `improved` on unchanged code and
    hid a 2 ms sleep per step, and nothing said so (the baseline's own measurements all ran in the
    spell; recorded_under_load needs both references x2). Files already marked keep their word."""
    written = [refs for r in records if (refs := _written_references(r)) is not None]
    medians = {}
    for key, _ in RUN_SPELLS:
        values = [v for refs in written if (v := getattr(refs, key)) is not None]
        if len(values) >= RUN_SPELL_FILES:
            medians[key] = statistics.median(values)
    if not medians:
        return records
    return [_spelled(r, medians) for r in records]


def _spelled(record: TestRecord, medians: dict[str, float]) -> TestRecord:
    """The record, its written file marked as written in a slow spell where a reference says so."""
    baseline, refs = record.baseline, _written_references(record)
    if baseline is None or refs is None or baseline.written_slowed is not None:
        return record
    ratios = [
        value / medians[key]
        for key, limit in RUN_SPELLS
        if key in medians
        and medians[key] > 0
        and (value := getattr(refs, key)) is not None
        and value >= limit * medians[key]
    ]
    if not ratios:
        return record
    slowed = Slowed(round(max(ratios), 1), RUN)
    return dataclasses.replace(record, baseline=dataclasses.replace(baseline, written_slowed=slowed))


def _written_references(record: TestRecord) -> References | None:
    """The machine references of the file this run wrote for the test, or None."""
    baseline = record.baseline
    return baseline.written_references if baseline and baseline.status in TIMES_WRITTEN else None


def _recorded_slowed(record: TestRecord) -> Slowed | None:
    """A baseline this run wrote from a measurement whose references ran x2 slower than a calm
    one's (decide.Slowed), where no other line says so already: its threads' CPU wait, or a slower
    time's inconclusive line, whose fix is to record it again on a quiet machine if it was loaded
    (a review found the two lines one under the other)."""
    baseline = record.baseline
    if baseline is None or baseline.status not in TIMES_WRITTEN or _recorded_contended(record):
        return None
    return None if _slower_inconclusive(baseline) else baseline.written_slowed


def _slower_inconclusive(baseline: BaselineResult | None) -> bool:
    """Whether a time inconclusive line of the test names a slower time (its fix, written: record
    it again on a quiet machine if the machine was loaded)."""
    verdicts = baseline.verdicts if baseline else ()
    return any(v.status == INCONCLUSIVE and (v.new_ms or 0.0) > (v.base_ms or 0.0) for v in verdicts)


def _written_wait(record: TestRecord) -> float | None:
    """The CPU-wait share of the measurement the test's written file holds: the first's, or the
    later calm one's that decide.recorded wrote in place of a contended first."""
    baseline = record.baseline
    return baseline.written_wait if baseline and baseline.written_from > 1 else record.cpu_wait


def _run_of_lines(record: TestRecord) -> list[str]:
    """How the test ran: reruns, several captures."""
    lines = []
    if record.attempts > 1:
        lines.append(
            f"ran {record.attempts} times (rerun, or collected more than once): the report holds the last run ({record.outcome}); "
            f"the earlier ones: {', '.join(record.earlier_outcomes)}"
        )
    if record.captures > 1 and not record.cut_short:
        baseline = record.baseline
        recorded = baseline is not None and (baseline.compared or baseline.status == "new")
        recorded = recorded and not (baseline and baseline.capture_moved and baseline.status == "compared")
        kept = "report and baseline hold" if recorded else "report holds"
        lines.append(
            f"{record.captures} captures in one test: its {kept} the last; the earlier ones were "
            "checked only by the assertions made right after them (a test of its own keeps each)"
        )
    return lines


def _said_contention(baseline: BaselineResult | None) -> bool:
    """Whether a time inconclusive line of the test names CPU contention already."""
    verdicts = baseline.verdicts if baseline else ()
    return any(v.status == INCONCLUSIVE and (v.why or "").startswith(CONTENTION_WHY) for v in verdicts)


def _contended(record: TestRecord) -> bool:
    """Whether the test's threads waited for a CPU long enough for a `contention` warning."""
    return record.cpu_wait is not None and record.cpu_wait > CONTENTION_LIMIT


def _recorded_contended(record: TestRecord) -> bool:
    """A baseline this run wrote from a capture whose threads waited for a CPU."""
    wait = _written_wait(record)
    return record.baseline_status in TIMES_WRITTEN and wait is not None and wait > CONTENTION_LIMIT


@dataclass(frozen=True)
class _Shared:
    """The run's lines on CPU contention that stand for several tests' own (a loaded runner
    printed the same two lines for each of its tests), and the tests whose lines they stand for:
    their inconclusive time line, their 'recorded while waiting' line, their contention warning."""

    lines: tuple[str, ...] = ()
    inconclusive: frozenset[str] = frozenset()
    recorded: frozenset[str] = frozenset()
    warned: frozenset[str] = frozenset()
    environment: frozenset[str] = frozenset()  # tests whose environment line a run line stands for
    slowed: frozenset[str] = frozenset()  # tests whose 'recorded while the references ran slower' line one stands for
    structure: SharedStructure = SharedStructure()  # the tests' structure lines and commands one stands for
    checks: frozenset[tuple[str, str, str]] = frozenset()  # (status, name, message) of checks a run line says


SHARED_CHECK_TESTS = 3  # tests whose check reads alike that share one line


def _check_key(check: Check) -> tuple[str, str, str]:
    return check.status, check.name, check.message


def _shared_checks(records: list[TestRecord]) -> tuple[tuple[str, ...], frozenset[tuple[str, str, str]]]:
    """One line for a check that reads the same, word for word, in three tests or more (a
    parametrized compiled test's 136 cases each printed the same `not_compiled` warning), naming
    the tests; and the checks it stands for (not contention's, which its own run lines say)."""
    alike: dict[tuple[str, str, str], list[str]] = {}
    for record in {r.nodeid: r for r in records}.values():
        for check in record.checks:
            if check.status != "ok" and check.name not in LEAK_CHECKS and check.name != CONTENTION:
                alike.setdefault(_check_key(check), []).append(record.nodeid)
    lines: list[str] = []
    said: set[tuple[str, str, str]] = set()
    for (status, name, message), ids in alike.items():
        if len(ids) >= SHARED_CHECK_TESTS:
            lines.append(checks_alike(status, name, len(ids), first_three(ids), message))
            said.add((status, name, message))
    return tuple(lines), frozenset(said)


def _folded_ids(records: list[TestRecord]) -> set[str]:
    """The tests a shared check line names (_shared_checks)."""
    _, keys = _shared_checks(records)
    return {r.nodeid for r in records if any(_check_key(c) in keys for c in r.checks)}


def _torch_moved(baseline: BaselineResult) -> str | None:
    """`2.11.0 -> 2.13.0` where the environment verdict says torch differs from the baseline's."""
    moved = [d for v in baseline.verdicts if v.kind == ENVIRONMENT for d in v.differs if d.fact == "torch"]
    return f"{moved[0].was} -> {moved[0].now}" if moved else None


def _shared_environment(records: list[TestRecord], shared: _Shared) -> _Shared:
    """One line for two tests or more whose baselines differ from this run's environment alike
    (a trial's torch upgrade printed the same line for each of its 13 tests, every run)."""
    alike: dict[str, list[str]] = {}
    excusing: dict[str, bool] = {}
    for record in {r.nodeid: r for r in records}.values():
        if record.baseline is None or record.baseline.status in WRITTEN:  # this run recorded it on this setup
            continue
        for verdict in record.baseline.verdicts:
            if verdict.kind == ENVIRONMENT and verdict.why:
                alike.setdefault(verdict.why, []).append(record.nodeid)
                excusing[verdict.why] = any(d.fact in EXCUSING_FACTS for d in verdict.differs)
    lines, said = list(shared.lines), set(shared.environment)
    for what, ids in alike.items():
        if len(ids) > 1:
            # a team trial's tests each said `time inconclusive ... torch ran on 1 thread` under a
            # line that said only that their times were judged across it
            explained = ", a CPU time's move it explains inconclusive, not a failure" if excusing[what] else ""
            lines.append(
                f"opprof: environment differs from the baselines of {count_of(len(ids), 'test')}: {what}; their times are "
                f"judged across it{explained} (a structure change may be the new setup's own); where this is the setup "
                f"from now on, record them on it (-v: each test's line): pytest --opprof-update-baseline=all {listed_ids(ids)}"
            )
            said.update(ids)
    return dataclasses.replace(shared, lines=tuple(lines), environment=frozenset(said))


def _shared_load(records: list[TestRecord], strict: bool = False) -> _Shared:
    """One line for what two tests or more said of CPU contention alike (not with -v, which keeps
    each test's): time inconclusive for it, baselines recorded under it, the warning itself. A
    test is counted once (`--dist each` runs it on every worker)."""
    records = list({r.nodeid: r for r in records}.values())
    lines, said = _inconclusive_shared(records, strict)
    recorded = [r for r in records if _recorded_contended(r)]
    if len(recorded) > 1:
        lines.append(
            f"opprof: {count_of(len(recorded), 'baseline')} recorded while {_most_waited(recorded, _written_wait)}: their CPU times "
            "may be inflated and hide later slowdowns; record them again on a quiet machine (without -n on a small "
            f"runner): pytest --opprof-update-baseline=all {listed_ids(r.nodeid for r in recorded)}"
        )
    slowed = [(r.nodeid, s) for r in records if (s := _recorded_slowed(r)) is not None]
    if len(slowed) > 1:
        command = f"{RECORD_ALL} {listed_ids(nodeid for nodeid, _ in slowed)}"
        factor = max(s.factor for _, s in slowed)
        lines.append(recorded_slowed_shared(len(slowed), factor, {s.than for _, s in slowed}, command))
    warned = [r for r in records if _contended(r) and not _said_contention(r.baseline) and not _recorded_contended(r)]
    warned = [r for r in warned if any(c.name == CONTENTION for c in r.checks)]
    if len(warned) > 1:
        lines.append(
            f"opprof: warning {CONTENTION} in {count_of(len(warned), 'test')}: {_most_waited(warned)}: other load on "
            "the machine inflated their CPU times; time assertions judge them as measured; rerun on a quiet machine: "
            f"{first_three([r.nodeid for r in warned])}"
        )
    return _Shared(
        tuple(lines),
        frozenset(said),
        frozenset(r.nodeid for r in recorded) if len(recorded) > 1 else frozenset(),
        frozenset(r.nodeid for r in warned) if len(warned) > 1 else frozenset(),
        slowed=frozenset(nodeid for nodeid, _ in slowed) if len(slowed) > 1 else frozenset(),
    )


def _inconclusive_shared(records: list[TestRecord], strict: bool) -> tuple[list[str], set[str]]:
    """The shared lines of tests inconclusive for CPU contention alike (same outcome and fix), and
    the tests they name."""
    alike: dict[tuple[str, str], list[TestRecord]] = {}
    for record in records:
        key = _contention_inconclusive(record, strict)
        if key:
            alike.setdefault(key, []).append(record)
    lines, said = [], set()
    for (outcome, fix), group in alike.items():
        if len(group) > 1:
            ids = [r.nodeid for r in group]
            lines.append(
                f"opprof: time inconclusive in {count_of(len(ids), 'test')} for {CONTENTION_WHY}: {_most_waited(group)}; "
                f"{SHARED_OUTCOME[outcome]}; {fix}: {first_three(ids)} (-v: each test's line)"
            )
            said.update(ids)
    faster_lines, faster_said = _faster_shared(records, strict)
    range_lines, range_said = _range_shared(records, strict)
    return lines + faster_lines + range_lines, said | faster_said | range_said


def _range_shared(records: list[TestRecord], strict: bool) -> tuple[list[str], set[str]]:
    """One line for three tests or more whose every inconclusive time is within its ops' recorded
    ranges, with one outcome (a noisy runner's suite printed a line and an =all command per test)."""
    alike: dict[str, list[str]] = {}
    for record in {r.nodeid: r for r in records}.values():
        outcome = _range_inconclusive(record, strict)
        if outcome:
            alike.setdefault(outcome, []).append(record.nodeid)
    lines, said = [], set()
    for outcome, ids in alike.items():
        if len(ids) >= SHARED_CHECK_TESTS:
            lines.append(within_ranges_shared(len(ids), SHARED_OUTCOME[outcome], f"{RECORD_ALL} {listed_ids(ids)}"))
            said.update(ids)
    return lines, said


def _range_inconclusive(record: TestRecord, strict: bool) -> str | None:
    """The outcome of a compared test whose every inconclusive time verdict is within its op's
    recorded range (and asks for the range's fix); None for any other."""
    baseline = record.baseline
    if not baseline or baseline.status != "compared":
        return None
    group = [v for v in baseline.verdicts if v.status == INCONCLUSIVE]
    if not group or not all(range_span(v.why) and v.fix == RANGE_FIX for v in group):
        return None
    return "strict" if _strict_error(record, strict) else "compared" if baseline.time_fails else "reported"


def _faster_shared(records: list[TestRecord], strict: bool) -> tuple[list[str], set[str]]:
    """One line for the tests whose every inconclusive time is excused by a faster machine (a
    newcomer's first run of the examples on another CPU printed a long line for each of six): the
    same outcome and the same fix, record them again where this speed is the runner's usual."""
    alike: dict[str, list[tuple[str, float]]] = {}
    for record in records:
        found = _faster_inconclusive(record, strict)
        if found:
            alike.setdefault(found[0], []).append((record.nodeid, found[1]))
    lines, said = [], set()
    for outcome, group in alike.items():
        if len(group) > 1:
            ids = [nodeid for nodeid, _ in group]
            speeds = sorted(speed for _, speed in group)
            lines.append(
                f"opprof: time inconclusive in {count_of(len(ids), 'test')}: the machine ran {_span_of(speeds)} faster "
                f"than when their baselines were recorded; {SHARED_OUTCOME[outcome]}; this run was the quicker one, "
                "so a rerun changes nothing: their baselines were recorded on a slower machine or spell; where this "
                "speed is the runner's usual, record them again (-v: each test's line): "
                f"pytest --opprof-update-baseline=all {listed_ids(ids)}"
            )
            said.update(ids)
    return lines, said


def _span_of(speeds: list[float]) -> str:
    """`1.74x to 3.07x`, or `1.74x` where they read alike."""
    low, high = f"{speeds[0]:.2f}x", f"{speeds[-1]:.2f}x"
    return low if low == high else f"{low} to {high}"


_FASTER = re.compile(r"^the machine ran (\d+(?:\.\d+)?)x faster than when the baseline was recorded")


def _faster_inconclusive(record: TestRecord, strict: bool) -> tuple[str, float] | None:
    """(outcome, how much faster the machine ran) of a test whose every inconclusive time verdict
    says the machine ran faster than at its recording, with that fix: None for any other."""
    baseline = record.baseline
    if not baseline or baseline.status != "compared":
        return None
    group = [v for v in baseline.verdicts if v.status == INCONCLUSIVE]
    found = [_FASTER.match(v.why or "") if v.fix == FASTER_FIX else None for v in group]
    if not group or not all(found):
        return None
    outcome = "strict" if _strict_error(record, strict) else "compared" if baseline.time_fails else "reported"
    return outcome, max(float(match[1]) for match in found if match)


def _contention_inconclusive(record: TestRecord, strict: bool) -> tuple[str, str] | None:
    """(outcome, fix) of a test whose time inconclusive line leads with CPU contention, where a
    line for several tests can say its outcome (compared, an error of --opprof-strict, or kept by
    a recording run)."""
    baseline = record.baseline
    if not baseline or baseline.status not in ("compared", "kept"):
        return None
    group = largest_first(v for v in baseline.verdicts if v.status == INCONCLUSIVE)
    if not group or not (group[0].why or "").startswith(CONTENTION_WHY):
        return None
    outcome = "strict" if _strict_error(record, strict) else baseline.status
    if outcome == "compared" and not baseline.time_fails:
        outcome = "reported"
    return outcome, group[0].fix or QUIET_MACHINE_FIX


def _strict_error(record: TestRecord, strict: bool) -> bool:
    """Whether --opprof-strict made the compared test an error (where time may fail it)."""
    return strict and record.outcome == "error" and record.baseline_status == "compared"


def _most_waited(records: list[TestRecord], wait: Callable[[TestRecord], float | None] = lambda r: r.cpu_wait) -> str:
    """`their threads waited for a CPU up to 151% of the capture`, over tests that waited."""
    return waited_for_cpu_up_to(max(wait(r) or 0.0 for r in records))


def summary_lines(
    records: list[TestRecord],
    verbose: bool,
    workers: object = None,
    recording: bool | str = False,
    looked_in: str | None = None,
    unjudged_globs: Collection[str] = (),
    strict: bool = False,
    picked: bool = True,
    shares: tuple[int | None, int | None] = (None, None),
    quiet: bool = False,
) -> list[str]:
    """The run's opprof summary: per-test tables, then the problems, then the xdist note
    (`shares`: the torch threads of a worker and the CPUs they share). `quiet` (pytest -qq): the
    tables of tests that passed with no line of their own are left out, counted in one line (a scale
    trial's 80 passing tests printed 1,127 lines, -q, -qq or not)."""
    problems = format_problems(records, verbose, recording, looked_in, unjudged_globs, strict, picked)
    shown = [r for r in records if _worth_a_table(r, problems)] if quiet else records
    tables = format_summary(shown)
    lines = [tables] if tables else []  # none when every measured test was skipped
    if problems:
        lines.append(problems)
    if len(shown) < len(records):
        left = {r.nodeid for r in records} - {r.nodeid for r in shown}
        folded = set() if verbose else _folded_ids(records)  # their warning is in a line for several tests
        lines.append(quiet_tables(len(left), sum(1 for n in left if f"{n}: " in problems or n in folded)))
    if isinstance(workers, int) and workers > 1:  # one worker shares its CPUs with no other
        lines.append(xdist_noise_note(workers, *shares))
    return lines


def _worth_a_table(record: TestRecord, problems: str) -> bool:
    """Under -qq: a test that did not pass, or one a line of the problems names other than a check's
    warning (a scale trial's -qq run printed the tables of passing tests for a `spread` warning:
    the warning's own line says it)."""
    if record.outcome not in ("passed", None):
        return True
    prefix = f"{record.nodeid}: "
    own = [line[len(prefix) :] for line in problems.splitlines() if line.startswith(prefix)]
    return any(not line.startswith("warning ") for line in own)


def xdist_noise_note(workers: int, threads: int | None = None, cpus: int | None = None) -> str:
    """Under -n 2 and more: timings are noisier; where the workers' torch threads outnumber the
    CPUs, they contend (a trial's -n 2 of 2 threads each on 2 CPUs: its own 20 ms limits failed
    at 30 ms on 0.1 ms addmms, the threads waiting 99% of the capture), said with the fix: each
    worker's share of the CPUs, or fewer workers where they outnumber the CPUs themselves."""
    if threads and cpus and workers * threads > cpus:
        if workers > cpus:
            fix = f"run without -n, or with -n {cpus} or fewer and OMP_NUM_THREADS=1"
        else:
            share = cpus // workers
            fix = f"run without -n, or give each worker {count_of(share, 'torch thread')} (OMP_NUM_THREADS={share})"
        return (
            f"opprof: measured under pytest-xdist (-n {workers}): {workers} workers of {count_of(threads, 'torch thread')} "
            f"each share {count_of(cpus, 'CPU')}, so a test's ops may wait for CPUs another worker holds: its times "
            "and time assertions (assert_op_below, assert_total_below) read that load, and the run takes longer; op "
            f"counts are exact as ever. For times, {fix}, recording and checking alike (a thread count changes how "
            "some ops split their work: record the baselines with the setting that checks them)"
        )
    return (
        f"opprof: measured under pytest-xdist (-n {workers}): timings on shared CPUs are noisier; "
        "op counts are exact as ever"
    )
