"""The run's report files: --opprof-json (schema 1) spooled test by test (ReportSpool), and the
--opprof-csv table of ops (and `opprof analyze --csv`'s)."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .analysis import Profile
from .decide import BaselineResult
from .files import write_output
from .jsontext import json_text
from .results import TestRecord
from .textout import file_bytes, os_text
from .units import positional

REPORT_SCHEMA = 1


def run_report_json(
    records: list[TestRecord],
    device: dict[str, Any],
    device_key: str | None,
    orphans: Sequence[str] = (),
    rootdir: str | None = None,
    stopped_in: str | None = None,
    partial: bool = False,
) -> dict[str, Any]:
    """The --opprof-json document (schema 1): device facts, the rootdir (that baseline paths are
    relative to), the baseline files no collected test reads, the test a Ctrl-C or pytest.exit
    stopped the run in (`stopped_in`, null for a whole run), whether the run picked some of the
    project's tests (`partial`: a shard, -k, test paths; a sharding trial's merge tool could not
    tell a shard's report from a whole run's) and, per measured test, nodeid, outcome, profile
    (Profile.to_dict()), checks and trace path."""
    tests = [_json_part(r) for r in sorted(records, key=lambda r: r.nodeid)]
    found = {"schema": REPORT_SCHEMA, "device_key": device_key, "device": device, "orphan_baselines": list(orphans)}
    found["summary"] = report_counts(records)
    return {**found, "rootdir": rootdir, "stopped_in": stopped_in, "partial": partial, "tests": tests}


def report_counts(records: Iterable[TestRecord]) -> dict[str, Any]:
    """The run's totals, that a script reads without walking the tests (a scale trial's CI summed
    144 entries with jq): the tests listed, by outcome, by what their baseline step did (`none`
    where none ran), and per verdict kind the tests with a verdict of each status."""
    outcomes: Counter[str] = Counter()
    baselines: Counter[str] = Counter()
    verdicts: dict[str, Counter[str]] = {}
    listed = 0
    for record in records:
        listed += 1
        outcomes[record.outcome or "unknown"] += 1
        baselines[record.baseline.status if record.baseline else "none"] += 1
        for kind, status in {(v.kind, v.status) for v in (record.baseline.verdicts if record.baseline else ())}:
            verdicts.setdefault(kind, Counter())[status] += 1
    return {
        "tests": listed, "outcomes": dict(outcomes), "baselines": dict(baselines),
        "verdicts": {kind: dict(statuses) for kind, statuses in verdicts.items()},
    }  # fmt: skip


class ReportSpool:
    """Each test's part of the --opprof-json report, as JSON text in a temporary file as soon as
    it arrives: a long run keeps no profile in memory (500 tests held ~75 MB as objects)."""

    def __init__(self, json: bool = True, csv: bool = False, html: bool = False) -> None:
        self.json, self.csv, self.html = json, csv, html
        self._file = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115  # closed by close()
        # (nodeid, xdist worker) -> (offset, length): a test that runs again (a rerun plugin) replaces its part
        self._parts: dict[tuple[str, str], tuple[int, int]] = {}
        self._csv_parts: dict[tuple[str, str], tuple[int, int]] = {}
        self._html_parts: dict[tuple[str, str], tuple[int, int]] = {}
        self._records: dict[tuple[str, str], TestRecord] = {}

    def add(self, record: TestRecord) -> TestRecord:
        """Spool the record's JSON part; give back the record without its profile."""
        key = (record.nodeid, record.worker or "")
        if self.json:
            self._parts[key] = self._spool(json_text(_json_part(record)))
        self._keep(self._csv_parts, key, record.csv if self.csv else None)
        self._keep(self._html_parts, key, record.html if self.html else None)
        kept = dataclasses.replace(record, profile=None, csv=None, html=None)
        self._records[key] = kept
        return kept

    def records(self) -> list[TestRecord]:
        """The records spooled, without their profiles: a test run again once, its last run's."""
        return list(self._records.values())

    def _keep(self, parts: dict[tuple[str, str], tuple[int, int]], key: tuple[str, str], text: str | None) -> None:
        """The test's part (none without text): an earlier run's of the same test goes."""
        parts.pop(key, None)
        if text:
            parts[key] = self._spool(text)

    def _spool(self, text: str) -> tuple[int, int]:
        data = file_bytes(text)
        offset = self._file.seek(0, os.SEEK_END)
        self._file.write(data)
        return offset, len(data)

    def tests(self) -> Iterator[str]:
        """Each test's JSON text, sorted by node id."""
        return self._read(self._parts)

    def csv_rows(self) -> Iterator[str]:
        """Each test's CSV rows, sorted by node id."""
        return self._read(self._csv_parts)

    def html_sections(self) -> Iterator[str]:
        """Each test's HTML section, sorted by node id."""
        return self._read(self._html_parts)

    @property
    def count_html(self) -> int:
        return len(self._html_parts)

    def _read(self, parts: dict[tuple[str, str], tuple[int, int]]) -> Iterator[str]:
        for _, (offset, length) in sorted(parts.items()):
            self._file.seek(offset)
            yield self._file.read(length).decode()  # file_bytes wrote valid UTF-8

    def close(self) -> None:
        self._file.close()


def write_run_report(
    path: Path,
    device: dict[str, Any],
    device_key: str | None,
    spool: ReportSpool,
    orphans: Sequence[str] = (),
    rootdir: str | None = None,
    stopped_in: str | None = None,
    partial: bool = False,
) -> None:
    """The --opprof-json document (schema 1), streamed from the spool: the same bytes as
    jsontext.json_text of the whole document ("tests" sorts last)."""
    found = run_report_json([], device, device_key, orphans, rootdir, stopped_in, partial)
    found["summary"] = report_counts(spool.records())
    del found["tests"]
    head = json_text(found)

    def chunks() -> Iterator[str]:
        yield head[:-2] + ',\n  "tests": ['
        first = True
        for text in spool.tests():
            yield ("\n" if first else ",\n") + textwrap.indent(text, "    ")
            first = False
        yield "]\n}\n" if first else "\n  ]\n}\n"

    write_output(path, chunks())


def write_csv_report(path: Path, spool: ReportSpool) -> None:
    """The --opprof-csv table: one row per measured test and op, streamed from the spool."""
    write_output(path, [CSV_HEADER_LINE, *spool.csv_rows()])


def _json_part(record: TestRecord) -> dict[str, Any]:
    part = {k: v for k, v in record.to_dict().items() if k not in ("summary", "csv", "html")}
    part["nodeid"] = os_text(part["nodeid"])  # a C locale's reading of test_é.py as the baseline names it
    return part


CSV_COLUMNS = [
    "op", "calls_per_step", "ms_per_step", "min_ms_per_step", "time", "of_step_pct", "cpu_ms_per_step",
    "self_cpu_ms_per_step", "device_ms_per_step", "self_device_ms_per_step",
]  # fmt: skip


# outcome: the test's; worker: the xdist worker that ran it (`--dist each` runs every test on each)
CSV_BASELINE_COLUMNS = ["baseline_min_ms_per_step", "delta_pct", "verdict", "outcome", "worker"]


def _whole(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _csv_text(rows: list[list[Any]]) -> str:
    """Rows as CSV, each float in positional notation (`0.000086`, not `8.6e-05`: a data-consumer
    trial's `sort -n` misordered a column that mixed the two), to the digits repr gives it."""
    out = io.StringIO()
    csv.writer(out).writerows([[positional(cell) for cell in row] for row in rows])
    return out.getvalue()


def csv_of_test(
    profile: Profile | None, nodeid: str, baseline: BaselineResult | None, outcome: str | None, worker: str | None
) -> str:
    """A test's rows of the --opprof-csv table: its ops (op_csv), or, for a test with none (an
    error before or in its capture, a skip, a capture that ran no op), one row with an empty
    `op` and its outcome: a trial's CSV-only dashboard never saw such errors."""
    rows = (
        op_csv(profile, nodeid, baseline, header=False, outcome=outcome, worker=worker) if profile is not None else ""
    )
    return rows or _csv_text(
        [[nodeid, *[""] * (len(CSV_COLUMNS) + len(CSV_BASELINE_COLUMNS) - 2), outcome, worker or ""]]
    )


CSV_HEADER_LINE = _csv_text([["test", *CSV_COLUMNS, *CSV_BASELINE_COLUMNS]])


def op_csv(
    profile: Profile,
    nodeid: str | None = None,
    baseline: BaselineResult | None = None,
    header: bool = True,
    outcome: str | None = None,
    worker: str | None = None,
) -> str:
    """Every op of a profile as CSV rows, the numbers of the terminal table unrounded (medians
    over the steps; ms): with a `test` column, the baseline's columns and the test's `outcome`
    when `nodeid` is given (--opprof-csv: a trial's failed test read `ok` in every row), without
    them for one trace (opprof analyze --csv)."""
    median_wall = profile.median_wall_ns
    rows: list[list[Any]] = []
    if header:
        rows.append(["test", *CSV_COLUMNS, *CSV_BASELINE_COLUMNS] if nodeid is not None else CSV_COLUMNS)
    for op in profile.ops:
        per = op.time_per_step
        row: list[Any] = [
            op.name, _whole(op.calls_per_step.median), per.median / 1e6, per.min / 1e6, "device" if op.on_device else "cpu",
            round(100 * per.median / median_wall, 2) if median_wall else "", op.cpu_per_step.median / 1e6,
            op.self_cpu_per_step.median / 1e6, op.device_per_step.median / 1e6, op.self_device_per_step.median / 1e6,
        ]  # fmt: skip
        if nodeid is not None:
            cells = (
                baseline.op_row(op.name, op.calls_per_step.median, per.min / 1e6, op.on_device)
                if baseline is not None and baseline.compared
                else None
            )
            if cells is None:
                row = [nodeid, *row, "", "", "", outcome or "", worker or ""]
            else:
                base, delta = cells.base_min_ms, cells.delta_pct
                row = [
                    nodeid,
                    *row,
                    "" if base is None else base,
                    "" if delta is None else round(delta, 2),
                    cells.verdict,
                    outcome or "",
                    worker or "",
                ]
        rows.append(row)
    if nodeid is not None and baseline is not None and baseline.compared:
        blank = [""] * (len(CSV_COLUMNS) - 2)  # no time of this run's
        rows += [
            [nodeid, name, 0, *blank, cells.base_min_ms, "", cells.verdict, outcome or "", worker or ""]
            for name, cells in baseline.removed_rows({op.name for op in profile.ops})
        ]
    return _csv_text(rows)
