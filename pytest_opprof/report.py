"""A measured test's result in its worker (TestResult, which makes the record every view reads:
results.TestRecord) and its tables in the terminal. Reads profiles and verdicts; never measures or
analyses. The lines under the tables: summarylines."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from .analysis import Check, Profile
from .decide import BaselineResult, OpRow
from .errors import (
    CUT_SHORT,
    TraceWriteError,
    stale_trace_kept,
)
from .files import safe_name
from .htmlreport import test_section
from .results import TestRecord, export_trace_path
from .runfiles import csv_of_test
from .tables import (
    by_shown_time,
    fitted_to,
    grid,
    ms_cell,
    of_step,
    profiler_cost_text,
    ranges_table,
    short,
    some_steps_line,
    steps_differ,
    timeline_line,
    with_more_rows,
)
from .units import count_of, count_text

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
        self,
        top: int,
        with_profile: bool = True,
        with_csv: bool = False,
        html_dir: Path | None = None,
        width: int | None = None,
    ) -> TestRecord:
        """What the controller needs of this test: it prints and writes the run's report from
        these records alone. The full profile (every op's per-step samples) only when the JSON
        report wants it. `width`: the terminal's, which the summary's tables fit (tables.grid)."""
        profile = self.profile
        named = self.worker if self.everywhere else None  # in the header and the HTML section
        with fitted_to(width):
            summary = (
                _summary_block(self.nodeid, self.outcome, profile, top, self.baseline, self.cut_short, named)
                if profile is not None
                else None
            )
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
            summary,
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
    file of its own run. A long id's file as releases before 2026-12-07 named it (its start only)."""
    name, former = safe_name(nodeid, keep_end=True), safe_name(nodeid)
    older = _named(trace_dir, former, plain=True) if former != name else []
    return [trace_dir / f"{name}.json.gz", *older] if tag is not None else [*_named(trace_dir, name), *older]


def _named(trace_dir: Path, name: str, plain: bool = False) -> list[Path]:
    """The traces of that file-safe name: each worker's (`<name>.gw0.json.gz`), and the plain one."""
    workers = sorted(trace_dir.glob(f"{glob_escape(name)}.gw*.json.gz"))
    return [trace_dir / f"{name}.json.gz", *workers] if plain else workers


def _remove_stale(path: Path) -> str | None:
    """Removes a trace an earlier run left for this test; why it could not (the run goes on, and
    the test's line says the file is not this run's: a trial's read-only folder kept it unsaid)."""
    try:
        if path.is_file():
            path.unlink()
    except OSError as exc:
        return stale_trace_kept(path, exc.strerror or str(exc))
    return None


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
    wall = f", {profile.median_wall_ns / 1e6:.3f} ms/step wall" if profile.wall_ms is not None else ""
    steps = count_of(profile.steps, "step") + (f", {CUT_SHORT}" if cut_short else "")
    if profile.times_include_inputs:  # a one-step capture records them in its step
        wall += ", times include recording inputs"
    if profile.overhead is not None:  # best profiled step / best unprofiled one
        wall += f", {profiler_cost_text(profile.overhead, steps_differ(profile))}"
    lines = [f"{nodeid} [{outcome}{f' on {worker}' if worker else ''}] ({steps}{wall})"]
    if timeline := timeline_line(profile):
        lines.append(timeline)
    tables = [_summary_table(profile, top, baseline)]
    if some := some_steps_line(profile):
        tables[0] += "\n" + some
    if profile.ranges:  # the test's record_function blocks
        tables.append(ranges_table(profile, top))
    return "\n".join([*lines, "\n\n".join(tables)])


def format_summary(records: list[TestRecord]) -> str:
    """Per measured test, its top ops: calls/step, ms/step, device or CPU time, share of the step."""
    return "\n\n".join(r.summary for r in records if r.summary)


def _summary_table(profile: Profile, top: int, baseline: BaselineResult | None = None) -> str:
    median_wall = profile.median_wall_ns
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
    return with_more_rows(grid(rows, headers), len(profile.ops), shown, "op")


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
