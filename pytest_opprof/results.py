"""A measured test's record as the views read it (TestRecord: the plain JSON a pytest-xdist worker
sends its controller, from which the controller prints and writes everything), and the test's
junit properties."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .analysis import Check, Profile
from .decide import TIMES_WRITTEN, BaselineResult
from .files import safe_name
from .units import count_text, positional

WRITTEN = (*TIMES_WRITTEN, "renumbered")  # and of every file it wrote (renumbered: the capture's number alone)


RECORDING = (*WRITTEN, "kept")  # statuses of a run that updated baselines


@dataclass(frozen=True)
class TestRecord:
    """One measured test as the controller sees it (from an xdist worker too: as `to_dict()` on
    the teardown report); the summary and the JSON report are made from these."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str | None
    profile: dict[str, Any] | None  # Profile.to_dict(), when the JSON report wants it
    checks: tuple[Check, ...]
    trace: str | None
    clocks: tuple[dict[str, Any], ...]  # GPU clock samples around the capture
    unreliable: str | None  # why those clocks make the times incomparable
    cpu_wait: float | None  # share of the capture our threads waited for a CPU
    baseline: BaselineResult | None
    summary: str | None  # the test's header and table in the terminal summary
    trace_error: str | None = None  # the trace this test wanted, and why it could not be written
    csv: str | None = None  # the test's rows of the --opprof-csv table (made where the baseline rows are)
    html: str | None = None  # the test's section of the --opprof-html page (likewise)
    captures: int = 0  # finished captures in the test (run()s and capture() blocks): the latest is reported
    cut_short: bool = False  # the profile is of a capture the test's exception ended
    earlier_outcomes: tuple[str, ...] = ()  # of the test's earlier runs in this session (a rerun plugin)
    earlier_trace: str | None = None  # the trace of the latest earlier run that wrote one, when this run wrote none
    failure: str | None = None  # why the test failed or erred: its first failing phase's message, as pytest says it
    worker: str | None = None  # the xdist worker that ran it (`--dist each` lists a test once per worker)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "profile": self.profile,
            "checks": [c.to_dict() for c in self.checks],
            "trace": self.trace,
            "clocks": list(self.clocks),
            "unreliable": self.unreliable,
            "cpu_wait": self.cpu_wait,
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "summary": self.summary,
            "trace_error": self.trace_error,
            "csv": self.csv,
            "html": self.html,
            "captures": self.captures,
            "cut_short": self.cut_short,
            "attempts": self.attempts,
            "earlier_outcomes": list(self.earlier_outcomes),
            "earlier_trace": self.earlier_trace,
            "failure": self.failure,
            "worker": self.worker,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestRecord:
        baseline = data.get("baseline")
        return cls(
            data["nodeid"],
            data.get("outcome"),
            data.get("profile"),
            tuple(Check.from_dict(c) for c in data.get("checks", [])),
            data.get("trace"),
            tuple(data.get("clocks") or ()),
            data.get("unreliable"),
            data.get("cpu_wait"),
            BaselineResult.from_dict(baseline) if baseline else None,
            data.get("summary"),
            data.get("trace_error"),
            data.get("csv"),
            data.get("html"),
            int(data.get("captures", 0)),
            bool(data.get("cut_short", False)),
            tuple(data.get("earlier_outcomes", ())),
            data.get("earlier_trace"),
            data.get("failure"),
            data.get("worker"),
        )

    @property
    def attempts(self) -> int:
        """The times the test ran in this session; the record is the last run's."""
        return len(self.earlier_outcomes) + 1

    def after(self, before: TestRecord) -> TestRecord:
        """This run's record, when `before` is the record of the same test's earlier run in this
        session (a rerun plugin): it counts that run, and keeps its trace when this run wrote none."""
        return dataclasses.replace(
            self,
            earlier_outcomes=(*before.earlier_outcomes, before.outcome or "not run"),
            earlier_trace=None if self.trace else (before.trace or before.earlier_trace),
        )

    @property
    def baseline_status(self) -> str | None:
        return self.baseline.status if self.baseline else None


def export_trace_path(trace_dir: Path, nodeid: str, tag: str | None = None) -> Path:
    """`DIR/<node id, file-system safe>[.gw0].json.gz`; a long id cut in its middle."""
    return trace_dir / f"{safe_name(nodeid, keep_end=True)}{f'.{tag}' if tag else ''}.json.gz"


def format_junit_properties(profile: Profile, top: int) -> list[tuple[str, str]]:
    """The per-test numbers as junitxml properties: steps, wall, and the top ops' ms/step."""
    props = [("opprof.steps", str(profile.steps))]
    if profile.wall_ms is not None:
        props.append(("opprof.wall_ms", _ms_text(profile.wall_ms)))  # over all the steps, as the JSON's
        props.append(("opprof.wall_ms_per_step", _ms_text(profile.median_wall_ns / 1e6)))  # the median step
    for op in profile.ops[:top]:
        props.append((f"opprof.op.{op.name}.calls_per_step", count_text(op.calls_per_step.median)))
        props.append((f"opprof.op.{op.name}.ms_per_step", _ms_text(op.time_per_step.median / 1e6)))
    return props + format_junit_checks(profile.checks)


def _ms_text(ms: float) -> str:
    """A time to 6 significant digits, positional (`0.000104`, `12.3457`): 4 decimals gave a
    0.104 us op as `0.0001` (a data-consumer trial), 2 digits against the CSV's."""
    return str(positional(float(f"{ms:.6g}")))


def format_junit_checks(checks: Iterable[Check]) -> list[tuple[str, str]]:
    """`opprof.check.<name>` = `<status>: <message>` for each check that is not ok: the profile's,
    and those the plugin adds to a test (contention, threads, unmeasured)."""
    return [(f"opprof.check.{c.name}", f"{c.status}: {c.message}") for c in checks if c.status != "ok"]


def format_junit_verdicts(baseline: BaselineResult) -> list[tuple[str, str]]:
    """The baseline step as junitxml properties: what it did (`opprof.baseline`: compared, new,
    kept...) and each verdict, `opprof.verdict.<kind>[.<op>]` = `<status>: <message>`."""
    props = [("opprof.baseline", baseline.status)]
    for verdict in baseline.verdicts:
        key = f"opprof.verdict.{verdict.kind}" + (f".{verdict.op}" if verdict.op else "")
        props.append((key, f"{verdict.status}: {verdict.message}"))
    return props


def file_test(record: TestRecord) -> str:
    """The test a record's baseline file is named by: a pytest-repeat repeat's (`test_x[2-3]`)
    is the test it repeats (`test_x`), which its file holds; a summary named a repeat."""
    return (record.baseline.nodeid if record.baseline else "") or record.nodeid
