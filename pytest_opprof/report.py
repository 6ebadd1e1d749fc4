"""A pytest run's report: a measured test's result in its worker (TestResult, which makes the
record every view reads: results.TestRecord) and the terminal summary (tables and lines). The
report files are runfiles', renamed tests renames'. Reads profiles and verdicts; never measures or
analyses (`opprof show/compare`'s tables: showtables)."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, TypeVar

from tabulate import tabulate

from .analysis import Check, Profile
from .analysis.checks import CONTENTION, CONTENTION_LIMIT
from .compare import EXCUSING_FACTS, MAX_LISTED
from .decide import SPEED, TIMES_WRITTEN, BaselineResult, OpRow, lets_pass
from .errors import (
    CUT_SHORT,
    KEPT_SLOWER,
    NOT_FAILING,
    ONE_MEASUREMENT,
    RECORD_AGAIN_FIX,
    RECORD_COMMAND,
    SAME_WORK_FIX,
    TRACER_RAN,
    TRACER_RECORD_FIX,
    TraceWriteError,
    capture_moved_compared,
    capture_moved_written,
    closest_names,
    other_work_measured,
    quiet_tables,
    record_if_intended,
    record_on_this_setup,
    repeats_disagreed,
    stale_trace_kept,
    wait_share,
    waited_for_cpu_up_to,
    with_its_id,
)
from .excuses import FASTER_FIX, QUIET_MACHINE_FIX
from .files import safe_name
from .htmlreport import test_section
from .opnames import is_glob, is_known_op
from .results import RECORDING, WRITTEN, TestRecord, export_trace_path, file_test
from .rules import DEFAULT_FAIL_ON, ENVIRONMENT, STRUCTURE, TIME, WORK
from .runfiles import csv_of_test
from .tables import (
    by_shown_time,
    median_wall_ns,
    ms_cell,
    of_step,
    profiler_cost_text,
    ranges_table,
    short,
    timeline_line,
    with_more_rows,
)
from .textout import shell_quote
from .timing import range_span
from .units import count_of, count_text, first_three
from .verdicts import CHANGED, CONTENTION_WHY, INCONCLUSIVE, MIN_TIME_STEPS, Verdict

_PHASE_OUTCOME = {"setup": "error", "call": "failed", "teardown": "error"}


@dataclass
class TestResult:
    """One measured test while it runs (on the worker that runs it, under xdist)."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str | None = None  # passed | failed | error | skipped
    profile: Profile | None = None
    trace_path: str | None = None
    trace_error: str | None = None  # why the trace wanted for this test could not be written
    baseline: BaselineResult | None = None
    clocks: list[dict[str, Any]] | None = None  # GPU clock samples around the capture
    unreliable: str | None = None  # why those clocks make the times incomparable
    cpu_wait: float | None = None  # share of the capture our threads waited for a CPU
    captures: int = 0  # finished captures in the test: the latest is the one reported
    failure: str | None = None  # why the test failed or erred (its first failing phase's message)
    cut_short: bool = False  # the profile is of a capture the test's exception ended (never judged)
    extra_checks: tuple[Check, ...] = ()  # the run's checks of this test (its start), beside the profile's
    worker: str | None = None  # the xdist worker that ran it (the CSV's `worker`)
    everywhere: bool = False  # `--dist each`: every worker runs it, and its header names the worker

    def export_trace(
        self,
        trace_dir: str | None,
        everything: bool,
        device_key: str | None = None,
        keep: bool = False,
        tag: str | None = None,
        environment: dict[str, Any] | None = None,
    ) -> None:
        """A Chrome/Perfetto trace of this test under `trace_dir`: when it failed or errored,
        or always with `everything` (--opprof-trace=all). Otherwise a trace an earlier session left
        there for this test is removed: it would pass for this run's (`keep`: it is of an earlier
        run of the test in this session, a rerun plugin's, and stays). `tag` ends the file's name
        (the worker of `--dist each`)."""
        if not trace_dir:
            return
        path = export_trace_path(Path(trace_dir), self.nodeid, tag)
        stale = [] if keep else _other_namings(Path(trace_dir), self.nodeid, tag)  # an earlier run's naming
        if self.profile is None or not (everything or self.outcome in ("failed", "error")):
            stale += [] if keep else [path]
        else:
            self._export_trace(path, device_key, environment)
        for old in stale:
            kept = _remove_stale(old)
            self.trace_error = self.trace_error or kept

    def _export_trace(self, path: Path, device_key: str | None, environment: dict[str, Any] | None) -> None:
        assert self.profile is not None
        try:
            self.profile.export_chrome_trace(
                str(path), device_key, environment, self.cpu_wait, self.nodeid, self.outcome, self.cut_short
            )
        except TraceWriteError as exc:  # the run goes on; the summary says why there is no trace
            self.trace_error = (
                f"{path} could not be written ({exc.reason}); give --opprof-trace-dir a folder you can write"
            )
        else:
            self.trace_path = str(path)

    def record_phase(self, when: str, outcome: str, message: str | None = None) -> None:
        """Fold one phase's report (setup/call/teardown) into the test's outcome; `message`: why
        a failing phase failed (the first is kept, for the HTML report)."""
        if outcome in ("failed", "error", "xfailed") and self.failure is None:
            self.failure = message
        if outcome == "error":
            self.outcome = "error"
        elif outcome == "failed":
            if self.outcome not in ("failed", "error"):
                self.outcome = _PHASE_OUTCOME[when]
        elif outcome in ("skipped", "xfailed", "xpassed") and self.outcome is None:
            self.outcome = outcome
        elif outcome == "passed" and when == "call" and self.outcome is None:
            self.outcome = "passed"

    def to_record(
        self, top: int, with_profile: bool = True, with_csv: bool = False, html_dir: Path | None = None
    ) -> TestRecord:
        """What the controller needs of this test: it prints and writes the run's report from
        these records alone. The full profile (every op's per-step samples) only when the JSON
        report wants it."""
        profile = self.profile
        named = self.worker if self.everywhere else None  # in the header and the HTML section
        return TestRecord(
            self.nodeid,
            self.outcome,
            profile.to_dict() if profile is not None and with_profile else None,
            (*profile.checks, *self.extra_checks) if profile is not None else self.extra_checks,
            self.trace_path,
            tuple(self.clocks or ()),
            self.unreliable,
            self.cpu_wait,
            self.baseline,
            _summary_block(self.nodeid, self.outcome, profile, top, self.baseline, self.cut_short, named)
            if profile is not None
            else None,
            self.trace_error,
            csv_of_test(profile, self.nodeid, self.baseline, self.outcome, self.worker) if with_csv else None,
            test_section(
                self.nodeid,
                self.outcome,
                profile,
                self.baseline,
                self.trace_path,
                html_dir,
                self.failure,
                self.cut_short,
                self.extra_checks,
                named,
            )
            if html_dir is not None
            else None,
            self.captures,
            self.cut_short,
            failure=self.failure,
            worker=self.worker,
        )


def _other_namings(trace_dir: Path, nodeid: str, tag: str | None) -> list[Path]:
    """The test's trace files named the other way: a `--dist each` run (`tag`) leaves the plain
    name stale; a plain run leaves every worker's (`<name>.gw0.json.gz`), never another worker's
    file of its own run."""
    if tag is not None:
        return [export_trace_path(trace_dir, nodeid)]
    name = glob_escape(safe_name(nodeid))
    return sorted(trace_dir.glob(f"{name}.gw*.json.gz"))


def _remove_stale(path: Path) -> str | None:
    """Removes a trace an earlier run left for this test; why it could not (the run goes on, and
    the test's line says the file is not this run's: a trial's read-only folder kept it unsaid)."""
    try:
        if path.is_file():
            path.unlink()
    except OSError as exc:
        return stale_trace_kept(path, exc.strerror or str(exc))
    return None


T = TypeVar("T")


def _summary_block(
    nodeid: str,
    outcome: str | None,
    profile: Profile,
    top: int,
    baseline: BaselineResult | None = None,
    cut_short: bool = False,
    worker: str | None = None,
) -> str:
    """The test's header and tables; `worker`: the xdist worker named in the header (`--dist
    each`, where every worker runs the test)."""
    # the median step, as "of step" divides by it
    wall = f", {median_wall_ns(profile) / 1e6:.3f} ms/step wall" if profile.wall_ms is not None else ""
    steps = count_of(profile.steps, "step") + (f", {CUT_SHORT}" if cut_short else "")
    if profile.times_include_inputs:  # a one-step capture records them in its step
        wall += ", times include recording inputs"
    if profile.overhead is not None:  # best profiled step / best unprofiled one
        wall += f", {profiler_cost_text(profile.overhead)}"
    lines = [f"{nodeid} [{outcome}{f' on {worker}' if worker else ''}] ({steps}{wall})"]
    if timeline := timeline_line(profile):
        lines.append(timeline)
    tables = [_summary_table(profile, top, baseline)]
    if profile.ranges:  # the test's record_function blocks
        tables.append(ranges_table(profile, top))
    return "\n".join([*lines, "\n\n".join(tables)])


def format_summary(records: list[TestRecord]) -> str:
    """Per measured test, its top ops: calls/step, ms/step, device or CPU time, share of the step."""
    return "\n\n".join(r.summary for r in records if r.summary)


def _summary_table(profile: Profile, top: int, baseline: BaselineResult | None = None) -> str:
    median_wall = median_wall_ns(profile)
    compared = baseline is not None and baseline.compared
    base_rows = _base_rows(profile, baseline) if compared and baseline else {}
    rows = []
    for op in shown_ops(profile, top, _named_ops(profile, baseline, base_rows) if compared and baseline else set()):
        per = op.time_per_step
        own = op.self_device_per_step if op.on_device else op.self_cpu_per_step
        row = [
            short(op.name),
            count_text(op.calls_per_step.median),
            ms_cell(per.median / 1e6),
            ms_cell(own.median / 1e6),
            ms_cell(per.min / 1e6),
            "device" if op.on_device else "cpu",
            of_step(per.median, median_wall),
        ]
        if compared:
            cells = base_rows[op.name]
            row += [
                ms_cell(cells.base_min_ms) if cells.base_min_ms is not None else "new",
                f"{cells.delta_pct:+.0f}%" if cells.delta_pct is not None else "",
                cells.verdict,
            ]
        rows.append(row)
    shown = len(rows)
    if compared and baseline:
        rows += [
            [short(name), "0", "", "", "", "", "", ms_cell(cells.base_min_ms or 0.0), "", cells.verdict]
            for name, cells in baseline.removed_rows({op.name for op in profile.ops})
        ]  # fmt: skip
    headers = ["op", "calls/step", "ms/step", "self", "min", "time", "of step"]
    if compared:
        headers += ["baseline min", "delta", "verdict"]
    return with_more_rows(tabulate(rows, headers=headers, disable_numparse=True), len(profile.ops), shown, "op")


def _base_rows(profile: Profile, baseline: BaselineResult) -> dict[str, OpRow]:
    """Each op's baseline columns (its baseline min, delta and verdict word)."""
    return {
        op.name: baseline.op_row(op.name, op.calls_per_step.median, op.time_per_step.min / 1e6, op.on_device)
        for op in profile.ops
    }


def _named_ops(profile: Profile, baseline: BaselineResult, base_rows: dict[str, OpRow]) -> set[str]:
    """The ops a verdict is about, which --opprof-top keeps in the table: those a time or work
    verdict names, and those whose calls changed or that the baseline lacks (a structure verdict
    names them in its message only)."""
    named = {v.op for v in baseline.verdicts if v.op and v.status != "improved"}
    return named | {name for name, row in base_rows.items() if row.verdict in ("calls changed", "added")}


def shown_ops(profile: Profile, top: int | None, named: Collection[str] = ()) -> list[Any]:
    """The `top` ops by the median time per step the table shows (device time for ops that ran
    on a device, CPU time otherwise), largest first; then the ops a verdict names that the top
    left out (an op that ran in one step only has a median of 0)."""
    ordered = by_shown_time(profile.ops)
    if not top:
        return ordered
    return ordered[:top] + [op for op in ordered[top:] if op.name in named]


def format_problems(
    records: list[TestRecord],
    verbose: bool = False,
    recording: bool = False,
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
    shared = _Shared() if verbose else _shared_environment(records, _shared_load(records, strict))
    lines = []
    for record in records:
        lines += _test_lines(record, verbose, shared, strict)
    run = list(shared.lines) + _run_lines(records, recording, looked_in, unjudged_globs, verbose)
    return "\n".join(lines + _whole_run_commands(run, records, picked))


def _test_lines(record: TestRecord, verbose: bool, shared: _Shared | None = None, strict: bool = False) -> list[str]:
    """A test's lines after the tables: its measurement, its verdicts, how it ran, its checks
    and traces (`shared`: the run's lines that stand for some of them)."""
    shared = shared or _Shared()
    lines = _measurement_lines(record) + _baseline_lines_of(record, verbose, shared, strict) + _run_of_lines(record)
    lines = [with_its_id(line, record.nodeid) for line in lines]
    shown = [c for c in record.checks if c.status != "ok" and c.name != THREADS]  # threads: one line for the run
    contention_said = _said_contention(record.baseline) or _recorded_contended(record) or record.nodeid in shared.warned
    if not verbose and contention_said:
        shown = [c for c in shown if c.name != CONTENTION]  # a newcomer's loaded run: said once, not twice a test
    lines += [f"{c.status} {c.name}: {c.message}" for c in shown]
    if record.trace:
        lines.append(f"trace written to {record.trace}")
    if record.trace_error:
        lines.append(f"trace {record.trace_error}")
    if record.earlier_trace:
        lines.append(f"trace of an earlier run kept at {record.earlier_trace}")
    return [f"{record.nodeid}: {line}" for line in lines]


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
        so = "its time passes" if baseline and baseline.status == "compared" else "the file was kept"
        lines.append(
            f"the first measurement's time differed from the baseline's; {later}, after a pause, did not confirm it "
            f"(interference, or a slow spell of the machine), so {so}"
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
        status = "strict" if _strict_error(record, strict) else baseline.status
        lines += verdict_lines(verdicts, verbose, status, frozenset(baseline.fails))
        changed = any(v.kind in (STRUCTURE, WORK) and v.status == CHANGED for v in baseline.verdicts)
        slower = baseline.slower
        torch = _torch_moved(baseline)
        if changed and torch:  # a trial's upgrade: `aten::reshape 15 -> 16/step` beside an unlinked torch line
            lines.append(f"torch differs from the baseline's ({torch}): the change may be torch's own, not the code's")
        if (changed or slower) and baseline.status == "compared":  # a recording run has recorded it
            # a slower time alone is written only by =all (it may be intended too: a larger model)
            lines.append(record_if_intended(nodeid, everything=slower and not changed))
        elif baseline.status in ("kept", "renumbered") and _kept_slower(baseline):
            lines.append(KEPT_SLOWER + "; " + record_if_intended(nodeid, everything=True))
        elif baseline.status in ("compared", "kept") and any(v.kind == ENVIRONMENT for v in verdicts):
            lines.append(record_on_this_setup(nodeid))  # a team trial's cpu_model line came every run, with no fix
    wait = _written_wait(record)
    if _recorded_contended(record) and wait is not None and nodeid not in shared.recorded:
        lines.append(
            f"baseline recorded while its threads waited for a CPU {wait_share(wait)}: its CPU times may be "
            "inflated and hide later slowdowns; record it again on a quiet machine (without -n on a small "
            f"runner): pytest --opprof-update-baseline=all {shell_quote(nodeid)}"
        )
    elif baseline and baseline.status in TIMES_WRITTEN and baseline.written_from > 1 and record.cpu_wait is not None:
        lines.append(
            f"baseline written from measurement {baseline.written_from}, the first whose threads did not wait "
            f"for a CPU: the first waited {wait_share(record.cpu_wait)} (the op table shows the first)"
        )
    return lines


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


_MORE = "-v or --opprof-json lists them all"


def verdict_lines(
    verdicts: list[Verdict],
    verbose: bool = False,
    status: str | None = None,
    fails: frozenset[str] = DEFAULT_FAIL_ON,
) -> list[str]:
    """One line per verdict kind (conclusive time and inconclusive time apart), or every
    verdict's message when `verbose`. `status`: what the baseline step did (kept, rewritten...),
    or `strict` where --opprof-strict made the test an error; `fails`: the verdict kinds that
    fail the test."""
    time_fails = TIME in fails
    if verbose:  # a structure verdict's cut list in full; an op's work change led by its kind
        return [_recorded(v.titled + _every_change(v), v, status, fails) for v in verdicts]
    groups: dict[str, list[Verdict]] = {}
    for v in verdicts:  # inconclusive apart by why: a trial's three ops read the first op's range
        key = f"inconclusive: {_why_kind(v)}" if v.status == INCONCLUSIVE else v.kind
        groups.setdefault(key, []).append(v)
    lines = []
    for key, group in groups.items():
        if key.startswith("inconclusive"):
            lines.append(_inconclusive_line(group, status, time_fails))
        elif key == TIME:
            lines.append(_time_line(group, status, time_fails))
        elif len(group) == 1:  # a structure verdict says what it is; one op's work verdict gets the word
            lines.append(_recorded(group[0].titled, group[0], status, fails))
        else:
            line = f"{_changed_in(key, group)}: {group[0].message}; and {len(group) - 1} more ({_MORE})"
            lines.append(_recorded(line, group[0], status, fails))
    return lines


def _recorded(line: str, verdict: Verdict, status: str | None, fails: frozenset[str] = DEFAULT_FAIL_ON) -> str:
    """`recorded: structure changed: ...` where this run wrote the change into the baseline: the
    bare line, the one a failing comparison prints, read like a failure in a recording run; and,
    comparing, `...; does not fail this test` where --opprof-fail-on leaves its kind out (a
    passing test's `structure changed` line read like its failure)."""
    if verdict.kind not in (STRUCTURE, WORK) or verdict.status != CHANGED:
        return line
    if status in ("changed", "rewritten"):
        return f"recorded: {line}"
    compared = status in ("compared", "strict")  # strict: a compared test --opprof-strict made an error
    return f"{line}; {NOT_FAILING}" if lets_pass(verdict, fails, compared) else line


def _every_change(verdict: Verdict) -> str:
    """`; every change: ...` for a structure verdict whose message names only the first changes."""
    if len(verdict.changes) <= MAX_LISTED:
        return ""
    return "; every change: " + ", ".join(c.text for c in verdict.changes)


def _changed_in(kind: str, group: list[Verdict]) -> str:
    """`work changed in 3 ops`, `... and its torch threads`: a verdict without an op is the test's."""
    ops = sum(1 for v in group if v.op)
    return f"{kind} changed in {count_of(ops, 'op')}" + (" and its torch threads" if ops < len(group) else "")


def _time_line(group: list[Verdict], status: str | None = None, time_fails: bool = True) -> str:
    """Conclusive time verdicts, the slower first; comparing, how to record faster times (a
    recording run has done so, or kept them unconfirmed: a trial's =all run was told to record),
    and, where time fails no test, that they come from one measurement (none is confirmed then: a
    trial read an unconfirmed slowdown with no word of it)."""
    first, *others = sorted(group, key=lambda v: v.status != "regressed")  # slower ones first
    counts = Counter(SPEED[v.status] for v in others)
    more = f"; and {', '.join(f'{n} more {word}' for word, n in counts.items())} ({_MORE})" if others else ""
    faster = first.status == "improved" and status not in RECORDING
    keep = "; pytest --opprof-update-baseline records the faster times" if faster else ""
    once = f"; {ONE_MEASUREMENT}" if not (time_fails or status in RECORDING) else ""
    return f"time: {first.message}{more}{keep}{once}"


def _added_ms(verdict: Verdict) -> float:
    """What a time verdict's move added to a step (ms, negative for a speed-up): an op that ran
    in one step only holds no baseline time, its whole cost added; 0 where it holds no times."""
    if verdict.new_ms is None:
        return 0.0
    return verdict.new_ms - (verdict.base_ms or 0.0)


def _largest_first(group: Iterable[Verdict]) -> list[Verdict]:
    """Time verdicts, the largest move first, either way (a trial's +320% step wall sat among
    `and 5 more` behind three ops that moved a few microseconds)."""
    return sorted(group, key=lambda v: abs(_added_ms(v)), reverse=True)


def _why_kind(verdict: Verdict) -> str:
    """What an inconclusive verdict's lines are grouped by: its why, or `recorded range` for every
    op a recorded range made inconclusive (each its own numbers: one line names them all)."""
    return "recorded range" if range_span(verdict.why) else verdict.why or ""


def _inconclusive_why(group: list[Verdict]) -> str:
    """The why of one line of inconclusive verdicts: theirs, or each op's recorded range."""
    if len(group) > 1 and range_span(group[0].why):
        spans = first_three([f"{v.op} {range_span(v.why)}" for v in group])
        return f"each is within the slowest of its baseline's measurements of the same code on this machine and its tolerance ({spans})"
    return group[0].why or ""


def _op_moved(verdict: Verdict) -> str:
    """An inconclusive verdict's op, with its move where it got faster: the line's why alone (`the
    machine ran 1.69x faster ...`) read as a slowdown to a trial whose ops ran 24% faster."""
    base, new = verdict.base_ms, verdict.new_ms
    if base is None or new is None or not 0 <= new < base:
        return verdict.op or ""
    return f"{verdict.op} ({100 * (new - base) / base:+.0f}%, faster)"


def _inconclusive_line(group: list[Verdict], status: str | None = None, time_fails: bool = True) -> str:
    """The inconclusive time verdicts in one line, the largest move named first."""
    group = _largest_first(group)
    ops = first_three([_op_moved(v) for v in group])
    fix = group[0].fix or QUIET_MACHINE_FIX
    if status in TIMES_WRITTEN:  # --opprof-update-baseline=all, or a structure, work or conclusive time change besides
        why = "as =all asks" if status == "rewritten" else "for the changes its other lines name"
        outcome = f"its baseline was {status} all the same, {why}, with these times"
        fix = _written_fix(group)
    elif status == "renumbered":
        outcome = "its baseline's times were kept (an inconclusive measurement never replaces one)"
    elif status in RECORDING:
        outcome = "its baseline was kept as it was (an inconclusive measurement never replaces one)"
    elif status == "strict":
        outcome = STRICT_OUTCOME
    else:
        outcome = _SHARED_OUTCOME["compared" if time_fails else "reported"]
    return f"time inconclusive for {ops}: {_inconclusive_why(group)}; {outcome}; {fix}"


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
                f"from now on, record them on it (-v: each test's line): pytest --opprof-update-baseline=all {_ids(ids)}"
            )
            said.update(ids)
    return dataclasses.replace(shared, lines=tuple(lines), environment=frozenset(said))


# What the tests a shared line names came to: by baseline status, or an error of --opprof-strict
_SHARED_OUTCOME = {
    "compared": "neither passed nor failed (--opprof-strict makes this an error)",
    # time is not among the checks that fail (--opprof-fail-on): a trial's --opprof-strict did nothing
    "reported": "neither passed nor failed (time does not fail this test: --opprof-fail-on, or its marker's)",
    "kept": "their baselines were kept as they were (an inconclusive measurement never replaces one)",
    "strict": "--opprof-strict made each an error",
}


STRICT_OUTCOME = "--opprof-strict made the test an error"  # a test's own line, where it did


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
            f"runner): pytest --opprof-update-baseline=all {_ids(r.nodeid for r in recorded)}"
        )
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
                f"{_SHARED_OUTCOME[outcome]}; {fix}: {first_three(ids)} (-v: each test's line)"
            )
            said.update(ids)
    faster_lines, faster_said = _faster_shared(records, strict)
    return lines + faster_lines, said | faster_said


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
                f"than when their baselines were recorded; {_SHARED_OUTCOME[outcome]}; this run was the quicker one, "
                "so a rerun changes nothing: their baselines were recorded on a slower machine or spell; where this "
                "speed is the runner's usual, record them again (-v: each test's line): "
                f"pytest --opprof-update-baseline=all {_ids(ids)}"
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
    group = _largest_first(v for v in baseline.verdicts if v.status == INCONCLUSIVE)
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


def _written_fix(group: list[Verdict]) -> str:
    """What to do once the file holds this run's times: nothing where the run was the quicker
    one (a trial's =all run was told to run =all again), else record on a quiet machine if
    what slowed it was load."""
    if all(_added_ms(v) <= 0 for v in group):
        return "nothing more to do: the file now holds this quicker run's times"
    return (
        "its times are this run's, slower than the baseline's were: if the machine was loaded, record it "
        "again on a quiet machine (pytest --opprof-update-baseline=all with the test's id)"
    )


def _run_lines(
    records: list[TestRecord],
    recording: bool = False,
    looked_in: str | None = None,
    unjudged_globs: Collection[str] = (),
    verbose: bool = False,
) -> list[str]:
    """The run's lines (tests named three at a time, all with `verbose`): tests not judged on time,
    old baselines, then missing and written ones
    (and, when recording, the tests that were not recorded because they failed)."""
    lines = []
    lines += _untimed_lines(records, recording, verbose)
    # What the files read say of themselves, for those this run left as they were: a file it
    # wrote holds this run's times and work (an =all run was told to run =all again).
    standing = [r for r in records if r.baseline and r.baseline.status not in TIMES_WRITTEN]
    old = sum(1 for r in standing if r.baseline and r.baseline.schema == 1)
    if old:
        lines.append(
            f"opprof: {count_of(old, 'baseline')} of schema 1 (no work signatures, counts before "
            "torch's redispatch rule): compared on structure and time, and on work only where they hold it; "
            "pytest --opprof-update-baseline=all records them again as schema 2"
        )
    lines += (
        _work_lines(standing)
        + _dropped_lines(standing)
        + _graph_call_lines(standing)
        + _lists_lines(standing)
        + _loaded_lines(standing)
        + _recorded_loaded_lines(standing)
        + _baseline_lines(records, looked_in, verbose)
        + _ignore_lines(records, unjudged_globs, verbose)
        + _thread_leak_lines(records)
    )
    unrecorded = [r.nodeid for r in records if r.baseline is None and r.outcome in ("failed", "error")]
    if recording and unrecorded:
        lines.append(
            f"opprof: {count_of(len(unrecorded), 'test')} not recorded: {'it' if len(unrecorded) == 1 else 'they'} failed "
            f"or erred (a baseline records code that passes its own checks; files as they were): {first_three(unrecorded)}"
        )
    return lines


def _by_test(records: list[TestRecord], fact: Callable[[BaselineResult], T]) -> dict[str, T]:
    """Node id -> one fact of its baseline result, for the tests where it is set."""
    return {r.nodeid: value for r in records if r.baseline and (value := fact(r.baseline))}


def _work_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose baselines hold no work for ops this run recorded it of."""
    ops = _by_test(records, lambda b: b.work_unrecorded if b.schema != 1 else ())  # schema 1: its own line
    if not ops:
        return []
    return [
        f"opprof: the work (inputs, FLOPs) of {first_three(sorted({op for names in ops.values() for op in names}))} "
        f"was not compared in {count_of(len(ops), 'test')}: the baseline holds none of it (work null or missing: "
        "an edit, a merge); record those baselines again: "
        f"pytest --opprof-update-baseline=all {_ids(ops)}"
    ]


def _dropped_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose baselines lost kernel records when recorded (the device tracer
    dropped them): a recording keeps such a file where this run changed nothing it compares."""
    ids = _tests_of_files(records, lambda b: b.kernels_dropped[1] > 0)
    if not ids:
        return []
    return [
        f"opprof: {count_of(len(ids), 'baseline')} lost kernel records when recorded (the device tracer dropped "
        "them): the steps that lost some are left out of their ops' device times, and as many fewer kernels are "
        f"no work change; record them again where none are lost: pytest --opprof-update-baseline=all {_ids(ids)}"
    ]


def _graph_call_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose baselines predate graph calls read as ops in every capture."""
    ids = _tests_of_files(records, lambda b: b.graph_call_unread and b.status not in WRITTEN)
    if not ids:
        return []
    return [
        f"opprof: {count_of(len(ids), 'baseline')} recorded before pytest-opprof read torch.compile's graph call "
        "(CompiledFxGraph) as an op in every capture: its calls and work were not compared; record them again: "
        f"pytest --opprof-update-baseline=all {_ids(ids)}"
    ]


def _lists_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose list-of-tensors inputs were not compared on shapes."""
    ops = _by_test(records, lambda b: b.lists_unrecorded)
    if not ops:
        return []
    return [
        f"opprof: the shapes of tensor-list inputs ({first_three(sorted({op for names in ops.values() for op in names}))}) "
        f"were not compared in {count_of(len(ops), 'test')}: the baseline or this capture lacks them (a baseline "
        "from an earlier pytest-opprof, or a torch without structured input shapes); record those baselines "
        "again on a quiet machine: "
        f"pytest --opprof-update-baseline=all {_ids(ops)}"
    ]


def _untimed_lines(records: list[TestRecord], recording: bool, verbose: bool) -> list[str]:
    """The tests whose time was not judged: those measured in under MIN_TIME_STEPS steps, and
    those whose baseline alone holds too few (a bare recording run keeps it: =all records it)."""
    untimed = [(r.nodeid, r.baseline) for r in records if r.baseline and r.baseline.untimed]
    # a short baseline this run wrote holds this run's steps now: neither line
    short = list(dict.fromkeys(n for n, b in untimed if b.short_baseline and b.status not in WRITTEN))
    few = list(dict.fromkeys(n for n, b in untimed if not b.short_baseline))
    lines = []
    if few:
        lines.append(
            f"opprof: time not judged for {count_of(len(few), 'test')} with under {MIN_TIME_STEPS} steps "
            f"(a whole call, capture(), the marker, a short run()): {first_three(few, verbose)}; "
            "structure and work (where recorded) were checked; measure with opprof.run(fn, ..., steps=10) "
            "for a time check"
        )
    if short:
        kept = "; this recording run did not rewrite them" if recording else ""
        lines.append(
            f"opprof: time not judged for {count_of(len(short), 'test')} whose baseline holds under "
            f"{MIN_TIME_STEPS} steps (this run measured enough): {first_three(short, verbose)}{kept}; "
            f"record them again: pytest --opprof-update-baseline=all {_ids(short)}"
        )
    return lines


def _ids(nodeids: Iterable[str]) -> str:
    """The node ids as command-line arguments, each of them: a command cut at three with `...` ran
    three tests or none (a CI trial's fifteen). A command naming every test of a run that picked
    none becomes a bare one (_whole_run_commands)."""
    return " ".join(shell_quote(i) for i in sorted(set(nodeids)))


RECORD_ALL = f"{RECORD_COMMAND}=all"


def _whole_run_commands(lines: list[str], records: list[TestRecord], picked: bool) -> list[str]:
    """A record command naming every measured test of a run that picked none (no -k, node id, ...)
    as the bare command, which records the same tests: fifteen ids made a line no one reads."""
    every = {r.nodeid for r in records}
    if picked or len(every) < 2:
        return lines
    commands = [(f"{command} {_ids(every)}", command) for command in (RECORD_ALL, RECORD_COMMAND)]
    for named, bare in commands:
        lines = [line.replace(named, bare) for line in lines]
    return lines


def _recorded_loaded_lines(records: list[TestRecord]) -> list[str]:
    """One line for the baselines read whose recording waited for a CPU (their capture.cpu_wait):
    a trial's recording beside CPU hogs said so once, and no later run did. A baseline whose
    references say it was recorded under load has that line (_loaded_lines), not this one too."""
    waited = _by_test(records, lambda b: 0.0 if b.under_load else b.recorded_wait or 0.0)
    if not waited:
        return []
    one = len(waited) == 1
    return [
        f"opprof: {count_of(len(waited), 'baseline')} recorded while {'its' if one else 'their'} threads waited for a "
        f"CPU {'' if one else 'up to '}{wait_share(max(waited.values()), 'them' if one else 'threads')} "
        f"(capture.cpu_wait): {'its' if one else 'their'} times may be inflated and hide slowdowns, and re-recording "
        f"keeps {'it' if one else 'them'}; record {'it' if one else 'them'} again on a quiet machine: "
        f"pytest --opprof-update-baseline=all {_ids(waited)}"
    ]


def _loaded_lines(records: list[TestRecord]) -> list[str]:
    """One line for the baselines recorded under load (excuses.recorded_under_load), with the
    command that records them again: re-recording keeps them (their times are inconclusive)."""
    loaded = _by_test(records, lambda b: b.under_load or 0.0)
    if not loaded:
        return []
    return [
        f"opprof: {count_of(len(loaded), 'baseline')} recorded under load (the same machine setup and torch ran "
        f"the references up to {max(loaded.values()):.1f}x slower than now): their inflated times hide slowdowns, "
        f"and re-recording keeps them; record them again on a quiet machine: pytest --opprof-update-baseline=all {_ids(loaded)}"
    ]


def _known_op(glob: str) -> bool:
    """Whether a glob is a plain aten/prim op name torch knows (is_known_op, given no ops that
    ran, takes any other namespace as known, unchecked; never True without torch)."""
    if is_glob(glob) or glob.partition("::")[0] not in ("aten", "prim"):
        return False
    try:
        return is_known_op(glob)
    except ImportError:
        return False


THREADS = "threads"  # the check on a test that ran on a thread count an earlier test left


def _thread_leak_lines(records: list[TestRecord]) -> list[str]:
    """A line per test that left torch's thread count changed, naming the measured tests that
    ran on it (their `threads` checks, one per test in the JSON, say the same)."""
    ran_on: dict[str, list[str]] = {}
    for record in records:
        for check in record.checks:
            if check.name == THREADS:
                ran_on.setdefault(check.message, []).append(record.nodeid)
    return [f"opprof: {message}; measured after it: {first_three(ids)}" for message, ids in ran_on.items()]


def _ignore_lines(records: list[TestRecord], unjudged: Collection[str] = (), verbose: bool = False) -> list[str]:
    """A line per ignore glob that matched no op in any compared test it applied to: a typo
    (`aten::matmull`) ignores nothing, and the changes it was meant to hide still fail. An op torch
    knows, with no close name among the ops run, is a precaution (an op only other hardware runs):
    said only with `verbose`, as a line on every run could not be silenced."""
    applied: dict[str, list[str]] = {}
    matched: set[str] = set()
    near: dict[str, set[str]] = {}  # each test's closest op: the run's is the closest of them
    for record in records:
        for ignore in record.baseline.ignores if record.baseline else ():
            applied.setdefault(ignore.glob, []).append(record.nodeid)
            if ignore.matched:
                matched.add(ignore.glob)
            elif ignore.near:
                near.setdefault(ignore.glob, set()).add(ignore.near)
    lines = []
    for glob, nodeids in applied.items():
        if glob in matched or glob in unjudged:
            continue
        where = nodeids[0] if len(nodeids) == 1 else f"the {count_of(len(nodeids), 'compared test')}"
        closest = closest_names(glob, sorted(near.get(glob, ())), limit=1)
        several = glob.split()
        if len(several) > 1 and all("::" in part for part in several):  # `aten::addmm aten::t`: two globs
            hint = f"write several as a comma list: {', '.join(several)}"
        elif closest:
            hint = f"did you mean {closest[0]}? use op names as the tables and opprof show list them"
        elif _known_op(glob):
            if not verbose:
                continue
            hint = "torch knows that op, but no test it applied to ran it (a precaution: said only with -v)"
        else:
            hint = "use op names as the tables and opprof show list them"
        lines.append(f"opprof: ignore glob {glob!r} matched no op in {where}: it ignores nothing; {hint}")
    return lines


def _unrecorded_line(records: list[TestRecord], n: int, verbose: bool) -> str:
    """The files a recording run did not write from throttled or traced measurements, and why:
    a Python tracer's (`--cov`) with the run that records them."""
    why = {r.baseline.unrecordable: None for r in records if r.baseline and r.baseline.unrecordable}
    traced = sorted(
        {file_test(r) for r in records if r.baseline and (r.baseline.unrecordable or "").startswith(TRACER_RAN)}
    )
    line = f"opprof: {count_of(n, 'baseline')} not written: {'; '.join(why) or 'unreliable GPU clocks (see above)'}"
    if traced:
        line += f"; record {first_three(traced, verbose)} in a run without it: {TRACER_RECORD_FIX}"
    return line


def _baseline_lines(records: list[TestRecord], looked_in: str | None, verbose: bool = False) -> list[str]:
    lines = []
    # One baseline file each: `--dist each` measures a test per worker, pytest-repeat's repeats share one.
    by_file: dict[str, str] = {}
    for record in records:
        if record.baseline and record.baseline.status == "missing":
            by_file.setdefault(record.baseline.path, file_test(record))
    missing = list(by_file.values())
    statuses = Counter(_file_statuses(records).values())
    if missing:  # their ids in the command: a bare one also records every other test's structure change
        lines.append(
            f"opprof: no baseline for {count_of(len(missing), 'test')} ({first_three(missing, verbose)})"
            f"{f' in {looked_in}' if looked_in else ''}; record {'it' if len(missing) == 1 else 'them'}: "
            f"{RECORD_COMMAND} {_ids(missing)}"
        )
    written = {k: statuses.get(k, 0) for k in WRITTEN}
    if statuses.get("unreliable"):
        lines.append(_unrecorded_line(records, statuses["unreliable"], verbose))
    if any(written.values()) or statuses.get("kept"):
        changed = _tests_of_files(records, lambda b: b.status == "changed")
        files = _file_statuses(records)  # a file another record of the test wrote is not kept
        slower = _tests_of_files(records, lambda b: files.get(b.path) == "kept" and _kept_slower(b))
        notes = {"changed": f" ({first_three(changed, verbose)})", "renumbered": " (capture.number alone, times kept)"}
        parts = [f"{v} {k}{notes.get(k, '')}" for k, v in written.items() if v]
        kept = statuses.get("kept", 0) - len(slower)
        lines.append(
            f"opprof: baselines written: {', '.join(parts) or 'none'}; "
            f"kept {kept} unchanged (no structure or work change, no conclusive time change; files untouched)"
            + (
                f"; kept {len(slower)} slower ({first_three(slower, verbose)}): never written without =all"
                if slower
                else ""
            )
        )
    return lines + _ranges_line(records) + _rewritten_by_repeats(records, verbose) + _long_path_lines(records)


WINDOWS_PATH_BUDGET = 200  # of Windows' 260 characters (MAX_PATH), leaving 60 for the checkout's folder


def _long_path_lines(records: list[TestRecord]) -> list[str]:
    """One line for the baseline files this run wrote whose paths in the repository run past
    WINDOWS_PATH_BUDGET characters: a Windows checkout of the repository (git's core.longpaths off,
    as it is by default there) fails on a path past 260 characters with its folder, every file of
    the checkout, not only the test's. A baseline folder outside the rootdir (an absolute path) is
    not the repository's."""
    written = {r.baseline.path for r in records if r.baseline and r.baseline.status in WRITTEN}
    outside = {p for p in written if PurePosixPath(p).is_absolute() or PureWindowsPath(p).is_absolute()}
    long = sorted((p for p in written - outside if len(p) > WINDOWS_PATH_BUDGET), key=lambda p: (-len(p), p))
    if not long:
        return []
    return [
        f"opprof: {count_of(len(long), 'baseline file')} written with a path over {WINDOWS_PATH_BUDGET} characters "
        f"(the longest {len(long[0])}: {long[0]}): a Windows checkout of the repository fails on paths past 260 "
        "characters with its folder (git's core.longpaths is off there by default); shorten the test's folders or "
        "its parameter ids (pytest.mark.parametrize(..., ids=...))"
    ]


def _rewritten_by_repeats(records: list[TestRecord], verbose: bool) -> list[str]:
    """Files that a test's repeats (pytest-repeat, reruns) changed more than once in one process,
    each finding the one before changed: a trial's `--count 3` recorded `aten::linear 2 -> 3`,
    then `3 -> 2`, and the summary said `1 changed`. Not `--dist each`'s workers (each writes
    the file it found) nor `=all`'s rewrites (no change found)."""
    writes: dict[tuple[str, str | None], list[tuple[str, str]]] = {}  # (file, worker) -> (test, status)
    for r in records:
        if r.baseline and r.baseline.status in ("new", "changed"):
            writes.setdefault((r.baseline.path, r.worker), []).append((r.nodeid, r.baseline.status))
    flaky = [
        (path, [test for test, _ in found])
        for (path, _), found in sorted(writes.items(), key=lambda item: item[0][0])
        if len(found) > 1 and any(status == "changed" for _, status in found)
    ]
    return [repeats_disagreed(path, tests, verbose) for path, tests in flaky]


def _ranges_line(records: list[TestRecord]) -> list[str]:
    """How the files of run() tests were written: with each op's range over several measurements
    (pytest-opprof's docs/verdicts.md: Recorded ranges)."""
    files = {r.baseline.path: r.baseline.recorded_from for r in records if r.baseline and r.baseline.status in WRITTEN}
    ranged = sorted(n for n in files.values() if n > 1)  # measurements used: 1 has no range
    if not ranged:
        return []
    over = f"{ranged[0]}" if ranged[0] == ranged[-1] else f"{ranged[0]}-{ranged[-1]}"
    return [
        f"opprof: {count_of(len(ranged), 'file')} written with the range of each op's time over {over} "
        "measurements: a later time within that range is inconclusive, not a failure (pytest-opprof's docs/verdicts.md: Recorded ranges)"
    ]


def _kept_slower(baseline: BaselineResult) -> bool:
    """A recording run kept the file though the time was slower (only =all writes that):
    confirmed, or with no confirmation pooled (each on throttled GPU clocks), which was counted
    `unchanged (... no conclusive time change)` beside its `slower` line."""
    return baseline.slower


def _tests_of_files(records: list[TestRecord], which: Callable[[BaselineResult], bool]) -> list[str]:
    """The tests whose baseline file the run left as `which` says, one test a file."""
    found: dict[str, str] = {}
    for record in records:
        if record.baseline and which(record.baseline):
            found.setdefault(record.baseline.path, file_test(record))
    return list(found.values())


def _file_statuses(records: list[TestRecord]) -> dict[str, str]:
    """What the run did to each baseline file: a file `--dist each` records once per worker (the
    first writes it, the others find it unchanged) or pytest-repeat's repeats share counts once,
    as written if any record wrote it."""
    found: dict[str, str] = {}
    for baseline in (r.baseline for r in records if r.baseline):
        if baseline.path not in found or baseline.status in WRITTEN:
            found[baseline.path] = baseline.status
    return found


def summary_lines(
    records: list[TestRecord],
    verbose: bool,
    workers: object = None,
    recording: bool = False,
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
        lines.append(quiet_tables(len({r.nodeid for r in records} - {r.nodeid for r in shown})))
    if isinstance(workers, int) and workers > 1:  # one worker shares its CPUs with no other
        lines.append(xdist_noise_note(workers, *shares))
    return lines


def _worth_a_table(record: TestRecord, problems: str) -> bool:
    """Under -qq: a test that did not pass, or one a line of the problems names."""
    return record.outcome not in ("passed", None) or f"{record.nodeid}: " in problems


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
            "and time assertions (assert_op_below, assert_total_below) read that load; op counts are exact as ever. "
            f"For times, {fix}, recording and checking alike"
        )
    return (
        f"opprof: measured under pytest-xdist (-n {workers}): timings on shared CPUs are noisier; "
        "op counts are exact as ever"
    )
