"""What each output of a run says, field by field: the JSON and CSV reports, the junit properties, the
Chrome trace, the HTML page and the terminal table. Each test fails on a one-line change to
report.py, runfiles.py, chrome.py, htmlreport.py or results.py that the unit tests let through (a
mutation trial; 27 of the 36 passed the plugin tests that reach them too). Hand-built events: no
torch run, so a wrong field fails here in a second, not in a pytester run."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import re

from builders import kernel, launch, op, step

from pytest_opprof.analysis import Check, analyze
from pytest_opprof.chrome import write_trace
from pytest_opprof.decide import BaselineResult
from pytest_opprof.htmlreport import page_head
from pytest_opprof.htmlreport import test_section as html_section
from pytest_opprof.report import TestResult
from pytest_opprof.results import TestRecord, format_junit_properties, format_junit_verdicts
from pytest_opprof.runfiles import ReportSpool, csv_of_test, op_csv, run_report_json, write_csv_report, write_run_report
from pytest_opprof.summarylines import format_problems
from pytest_opprof.verdicts import Verdict

NODE = "tests/test_x.py::test_mm"


def three_steps(mm_us: float = 10, add_us: float = 5):
    """Three 100 us steps, each one aten::mm (`mm_us`) and one aten::add (`add_us`)."""
    events = []
    for i in range(3):
        t0 = i * 100
        events += [step(i + 1, t0, 100), op("aten::mm", t0 + 10, mm_us), op("aten::add", t0 + 40, add_us)]
    return analyze(events)


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def read_trace(path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)


# -- junit properties (results.py) ---------------------------------------------------------------


def test_junit_properties_of_a_capture_without_step_markers_name_no_wall_time():
    """No step markers: no wall time, so no `opprof.wall_ms` property (and no TypeError
    formatting None)."""
    profile = analyze([op("aten::mm", 0, 10), op("aten::mm", 20, 10)])
    assert profile.wall_ms is None
    props = dict(format_junit_properties(profile, 5))
    assert "opprof.wall_ms" not in props and "opprof.wall_ms_per_step" not in props
    assert props["opprof.op.aten::mm.calls_per_step"] == "2"


def test_junit_properties_name_the_top_ops():
    """--opprof-top 2: both ops' calls and ms per step, then nothing of a third."""
    props = dict(format_junit_properties(three_steps(), 2))
    assert props["opprof.steps"] == "3" and props["opprof.wall_ms_per_step"] == "0.1"
    assert props["opprof.op.aten::mm.ms_per_step"] == "0.01" and props["opprof.op.aten::add.ms_per_step"] == "0.005"
    assert len(dict(format_junit_properties(three_steps(), 1))) == len(props) - 2


def test_junit_verdict_properties_are_name_value_pairs():
    """Each verdict is an `opprof.verdict.<kind>.<op>` = `<status>: <message>` pair (junitxml
    unpacks each property as two)."""
    verdict = Verdict("time", "regressed", "aten::mm: 2.0x slower", "aten::mm")
    whole = Verdict("work", "changed", "torch threads 1 -> 2")
    props = format_junit_verdicts(BaselineResult("b.json", "compared", verdicts=(verdict, whole)))
    assert props == [
        ("opprof.baseline", "compared"),
        ("opprof.verdict.time.aten::mm", "regressed: aten::mm: 2.0x slower"),
        ("opprof.verdict.work", "changed: torch threads 1 -> 2"),
    ]


# -- CSV (runfiles.py) ---------------------------------------------------------------------------


def test_csv_delta_is_rounded_to_two_decimals():
    """delta_pct: 100 * (0.010 - 0.003) / 0.003 = 233.333...: the CSV says 233.33."""
    baseline = BaselineResult("b.json", "compared", rows={"aten::mm": (0.003, [1.0]), "aten::add": (0.005, [1.0])})
    rows = {r["op"]: r for r in csv_rows(op_csv(three_steps(), NODE, baseline, outcome="passed"))}
    assert rows["aten::mm"]["delta_pct"] == "233.33"
    assert rows["aten::mm"]["baseline_min_ms_per_step"] == "0.003"
    assert rows["aten::add"]["delta_pct"] == "0.0"


def test_csv_has_a_row_for_each_baseline_op_that_did_not_run():
    """An op of the compared baseline that this run did not run: a row of its own, 0 calls,
    its baseline min and `removed`."""
    baseline = BaselineResult("b.json", "compared", rows={"aten::mm": (0.01, [1.0]), "aten::gone": (0.02, [2.0])})
    rows = csv_rows(op_csv(three_steps(), NODE, baseline, outcome="failed", worker="gw1"))
    (gone,) = [r for r in rows if r["op"] == "aten::gone"]
    assert gone["test"] == NODE and gone["calls_per_step"] == "0" and gone["baseline_min_ms_per_step"] == "0.02"
    assert (gone["verdict"], gone["outcome"], gone["worker"]) == ("removed", "failed", "gw1")
    assert [r["op"] for r in rows] == ["aten::mm", "aten::add", "aten::gone"]


def test_the_csv_file_header_names_every_column_of_its_rows(tmp_path):
    """--opprof-csv: the header and every row (a measured test's ops, a test without a profile)
    have the same columns, baseline columns included."""
    spool = ReportSpool(json=False, csv=True)
    baseline = BaselineResult("b.json", "compared", rows={"aten::mm": (0.01, [1.0])})
    for nodeid, profile, outcome in ((NODE, three_steps(), "passed"), ("t.py::test_skip", None, "skipped")):
        text = csv_of_test(profile, nodeid, baseline if profile else None, outcome, "gw0")
        spool.add(TestRecord(nodeid, outcome, None, (), None, (), None, None, None, None, csv=text))
    path = tmp_path / "ops.csv"
    write_csv_report(path, spool)
    spool.close()
    lines = list(csv.reader(io.StringIO(path.read_text())))
    assert lines[0][-5:] == ["baseline_min_ms_per_step", "delta_pct", "verdict", "outcome", "worker"]
    assert {len(line) for line in lines} == {len(lines[0])} == {16}
    rows = csv_rows(path.read_text())
    assert [(r["test"], r["op"], r["verdict"], r["outcome"], r["worker"]) for r in rows] == [
        ("t.py::test_skip", "", "", "skipped", "gw0"),  # sorted by node id
        (NODE, "aten::mm", "ok", "passed", "gw0"),
        (NODE, "aten::add", "added", "passed", "gw0"),
    ]


# -- JSON (runfiles.py) --------------------------------------------------------------------------


JSON_TEST_KEYS = {
    "nodeid", "outcome", "profile", "checks", "trace", "clocks", "unreliable", "cpu_wait", "baseline", "trace_error",
    "captures", "cut_short", "attempts", "earlier_outcomes", "earlier_trace", "failure", "worker",
}  # fmt: skip


def full_record():
    """A record with every field set (none at its default)."""
    baseline = BaselineResult("b.json", "compared", nodeid=NODE)  # its rows stay on the worker (csv, html)
    return TestRecord(
        NODE, "failed", {"schema": 1}, (Check("events", "warn", "few"),), "tr/t.json.gz", ({"sm_clock_mhz": 1},),
        "clocks moved", 0.25, baseline, "summary text", "tr/x.json.gz could not be written (EACCES)", "csv text",
        "<section>", 3, True, ("failed",), "tr/old.json.gz", "AssertionError: x", "gw1",
    )  # fmt: skip


def test_a_record_crosses_from_an_xdist_worker_whole():
    """TestRecord.to_dict -> from_dict (the worker -> controller path) keeps every field."""
    record = full_record()
    assert TestRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_rerun_counts_an_earlier_run_without_an_outcome_as_not_run():
    """A rerun plugin's earlier run that never got an outcome: `not run` in earlier_outcomes."""
    record = full_record()
    before = dataclasses.replace(record, outcome=None, earlier_outcomes=(), trace=None, earlier_trace="tr/a.json.gz")
    again = dataclasses.replace(record, earlier_outcomes=(), trace=None).after(before)
    assert again.earlier_outcomes == ("not run",) and again.attempts == 2
    assert again.earlier_trace == "tr/a.json.gz"  # this run wrote none: the earlier run's stays named


def test_the_json_report_holds_each_tests_fields_and_not_its_terminal_csv_or_html_text(tmp_path):
    """Each test of --opprof-json: its record's fields, without `summary`, `csv` and `html`."""
    record = full_record()
    spool = ReportSpool()
    spool.add(record)
    path = tmp_path / "r.json"
    write_run_report(path, {"cpu_model": "x"}, "cpu-x", spool, rootdir="/r", stopped_in="t.py::t")
    spool.close()
    doc = json.loads(path.read_text())
    assert set(doc) == {
        "schema",
        "device_key",
        "device",
        "orphan_baselines",
        "rootdir",
        "stopped_in",
        "partial",
        "summary",
        "tests",
    }
    assert doc["partial"] is False  # the default: a whole run
    assert (doc["device_key"], doc["rootdir"], doc["stopped_in"]) == ("cpu-x", "/r", "t.py::t")
    (test,) = doc["tests"]
    assert set(test) == JSON_TEST_KEYS
    assert test["trace_error"] == "tr/x.json.gz could not be written (EACCES)"
    assert (test["attempts"], test["earlier_outcomes"], test["captures"]) == (2, ["failed"], 3)
    assert (test["unreliable"], test["cpu_wait"], test["worker"]) == ("clocks moved", 0.25, "gw1")


def test_the_json_report_says_its_schema(tmp_path):
    assert run_report_json([], {}, None)["schema"] == 1
    spool = ReportSpool()
    write_run_report(tmp_path / "r.json", {}, None, spool)
    spool.close()
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == 1


# -- Chrome trace (chrome.py) --------------------------------------------------------------------


def test_trace_writes_no_correlation_for_events_without_one(tmp_path):
    path = tmp_path / "t.json"
    write_trace(path, [op("aten::mm", 0, 10), launch(2, corr=7), kernel("gemm", 5, 3, corr=7)], {})
    records = [r for r in read_trace(path)["traceEvents"] if r["ph"] == "X"]
    args = {r["name"]: r["args"] for r in records}
    assert "correlation" not in args["aten::mm"]
    assert "flops" not in args["aten::mm"] and "bytes" not in args["gemm"]
    assert (args["gemm"]["device"], args["gemm"]["stream"]) == (0, 7)
    assert args["cudaLaunchKernel"]["correlation"] == 7 and args["gemm"]["correlation"] == 7


def test_trace_keeps_an_ops_flops_and_inputs(tmp_path):
    path = tmp_path / "t.json.gz"
    write_trace(path, [op("aten::mm", 0, 10, flops=2048, shapes=((4, 8), (8, 16)), dtypes=("float", "float"))], {})
    (record,) = [r for r in read_trace(path)["traceEvents"] if r["ph"] == "X"]
    assert record["args"] == {"flops": 2048, "Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}


def test_trace_sorts_the_gpu_process_after_the_host(tmp_path):
    """Track names: the host `host (pid 100)` sorts first (0), GPU 0 after it (1 + device)."""
    path = tmp_path / "t.json"
    write_trace(path, [op("aten::mm", 0, 10), launch(2, corr=7), kernel("gemm", 5, 3, corr=7, device=0)], {})
    meta = [r for r in read_trace(path)["traceEvents"] if r["ph"] == "M"]
    order = {r["pid"]: r["args"]["sort_index"] for r in meta if r["name"] == "process_sort_index"}
    names = {r["pid"]: r["args"]["name"] for r in meta if r["name"] == "process_name"}
    assert names == {0: "GPU 0", 100: "host (pid 100)"}
    assert order[100] < order[0]
    assert order == {100: 0, 0: 1}


# -- the worker's TestResult and the terminal table (report.py) ----------------------------------


def test_a_phase_error_makes_the_test_an_error_whatever_follows():
    """An untrusted measurement (call `error`) or a setup error: the test's outcome is `error`,
    in every view; the first failing phase's message is kept."""
    result = TestResult(NODE)
    result.record_phase("setup", "passed")
    result.record_phase("call", "error", "measurement cannot be trusted: x")
    result.record_phase("teardown", "failed", "teardown boom")
    assert (result.outcome, result.failure) == ("error", "measurement cannot be trusted: x")
    result = TestResult(NODE)
    result.record_phase("setup", "error", "fixture boom")
    result.record_phase("teardown", "passed")
    assert (result.outcome, result.failure) == ("error", "fixture boom")
    assert result.to_record(5).outcome == "error"


def summary_of(baseline=None, top=5):
    result = TestResult(NODE, "passed", three_steps(), baseline=baseline)
    return result.to_record(top).summary


def test_the_terminal_table_names_each_column():
    summary = summary_of()
    header = summary.splitlines()[1].split()
    assert header == ["op", "calls/step", "ms/step", "self", "min", "time", "of", "step"]
    (mm,) = [line.split() for line in summary.splitlines() if line.startswith("aten::mm")]
    assert mm == ["aten::mm", "1", "0.010", "0.010", "0.010", "cpu", "10.0%"]


def test_a_baseline_not_compared_adds_no_columns_and_no_removed_rows():
    """A baseline read but not compared with (unreliable: GPU clocks, a Python tracer): the
    table has no baseline columns and lists none of the baseline's ops this run lacks."""
    unreliable = BaselineResult("b.json", "unreliable", rows={"aten::mm": (0.01, [1.0]), "aten::gone": (0.02, [1.0])})
    summary = summary_of(unreliable)
    assert "aten::gone" not in summary and "baseline min" not in summary
    compared = BaselineResult("b.json", "compared", rows={"aten::mm": (0.01, [1.0]), "aten::gone": (0.02, [1.0])})
    lines = summary_of(compared).splitlines()
    assert lines[1].split()[-5:] == ["step", "baseline", "min", "delta", "verdict"]
    (gone,) = [line.split() for line in lines if line.startswith("aten::gone")]
    assert gone == ["aten::gone", "0", "0.020", "removed"]
    (add,) = [line.split() for line in lines if line.startswith("aten::add")]
    assert add[-2:] == ["new", "added"]
    (mm,) = [line.split() for line in lines if line.startswith("aten::mm")]
    assert mm[-4:] == ["10.0%", "0.010", "+0%", "ok"]


# -- HTML (htmlreport.py) ------------------------------------------------------------------------


def html_cells(section: str, op_name: str) -> list[str]:
    (row,) = [r for r in re.findall(r"<tr>(.*?)</tr>", section) if r.startswith(f"<td>{op_name}</td>")]
    return re.findall(r"<td[^>]*>(.*?)</td>", row)


def test_the_html_op_table_shows_the_baseline_columns():
    """Compared: each op's baseline min and delta (`new` and no delta for an op the baseline
    lacks), its verdict, and a row for the baseline's op this run did not run."""
    baseline = BaselineResult("b.json", "compared", rows={"aten::mm": (0.003, [1.0]), "aten::gone": (0.02, [1.0])})
    section = html_section(NODE, "passed", three_steps(), baseline, None, None)
    assert html_cells(section, "aten::mm") == [
        "aten::mm",
        "1",
        "0.010",
        "0.010",
        "0.010",
        "cpu",
        "10.0%",
        "0.003",
        "+233%",
        "ok",
    ]
    assert html_cells(section, "aten::add")[-3:] == ["new", "", "added"]
    assert html_cells(section, "aten::gone") == ["aten::gone", "0", "", "", "", "", "", "0.020", "", "removed"]


def test_the_html_section_of_a_baseline_not_compared_lists_no_removed_ops():
    unreliable = BaselineResult("b.json", "unreliable", rows={"aten::mm": (0.01, [1.0]), "aten::gone": (0.02, [1.0])})
    section = html_section(NODE, "passed", three_steps(), unreliable, None, None)
    assert "aten::gone" not in section and "removed" not in section
    assert html_cells(section, "aten::mm")[-3:] == ["", "", ""]


def test_the_html_section_meta_line_says_steps_and_median_wall():
    section = html_section(NODE, "passed", three_steps(), None, None, None)
    assert '<div class="meta">3 steps; 0.100 ms/step wall (median)' in section


def test_the_html_page_head_leaves_out_device_facts_without_a_value():
    head = page_head({"cpu_model": "x", "cuda": None, "gpus": [], "driver": ""}, "cpu-x", 2)
    assert "pytest-opprof: 2 measured tests" in head
    assert "device key cpu-x; cpu_model: x</div>" in head


def test_a_test_without_a_capture_records_none():
    """A skipped test (no profile): 0 captures in its record and the JSON."""
    record = TestResult(NODE, "skipped").to_record(5)
    assert record.captures == 0 and record.to_dict()["captures"] == 0


def test_the_terminal_header_says_the_profiler_cost():
    profile = dataclasses.replace(three_steps(), overhead=1.25)
    header = TestResult(NODE, "passed", profile).to_record(5).summary.splitlines()[0]
    assert header == f"{NODE} [passed] (3 steps, 0.100 ms/step wall, profiler x1.25)"


def test_the_lines_after_the_tables_name_the_trace_written_and_the_trace_not_written():
    record = dataclasses.replace(full_record(), baseline=None, checks=(), earlier_trace=None)
    text = format_problems([record])
    assert "trace written to tr/t.json.gz" in text
    assert "trace tr/x.json.gz could not be written (EACCES)" in text
