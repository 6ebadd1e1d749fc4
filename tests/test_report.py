"""The run's JSON report written from the spool: the same bytes as the whole document dumped at
once, with no profile kept in memory. Hand-built records: no torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_opprof.analysis import Check
from pytest_opprof.jsontext import json_text
from pytest_opprof.results import TestRecord
from pytest_opprof.runfiles import ReportSpool, run_report_json, write_run_report


def record(nodeid: str, with_profile: bool = True) -> TestRecord:
    profile = {"schema": 1, "ops": [{"name": "aten::mm", "calls": 3, "per_step": {"calls": {"samples": [1, 1, 1]}}}]}
    return TestRecord(
        nodeid, "passed", profile if with_profile else None, (Check("events", "ok", "3 CPU ops"),), None,
        ({"sm_clock_mhz": 1},), None, 0.01, None, f"{nodeid} [passed]",
    )  # fmt: skip


def test_the_reports_summary_counts_each_test_once_by_its_last_run(tmp_path):
    """`summary`: tests, outcomes, baseline steps (`none` without one) and the tests with each
    verdict kind and status; a test run again (a rerun plugin) counts once, as its last run."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.verdicts import Verdict

    regressed = Verdict("time", "regressed", "aten::mm: slower", "aten::mm")
    failed = TestRecord(**{**record("t.py::a").__dict__, "outcome": "failed"})
    compared = BaselineResult(".opprof/cpu/t.py/b.json", "compared", verdicts=(regressed, regressed))
    spool = ReportSpool()
    for r in (failed, record("t.py::a"), TestRecord(**{**record("t.py::b").__dict__, "baseline": compared})):
        spool.add(r)
    write_run_report(tmp_path / "r.json", {}, "cpu-x86_64", spool)
    spool.close()
    assert json.loads((tmp_path / "r.json").read_text())["summary"] == {
        "tests": 2, "outcomes": {"passed": 2}, "baselines": {"none": 1, "compared": 1},
        "verdicts": {"time": {"regressed": 1}},
    }  # fmt: skip


@pytest.mark.parametrize("nodeids", [[], ["t.py::b", "t.py::a", "t.py::c[ü]"]])
def test_the_spooled_report_is_byte_identical_to_the_whole_document(tmp_path, nodeids):
    """Streaming the tests from the spool gives exactly the whole document's JSON text (jsontext:
    indented, keys sorted, a series on one line) + newline, tests sorted by node id; the kept records
    no longer hold their profiles."""
    spool = ReportSpool()
    records = [record(n) for n in nodeids]
    kept = [spool.add(r) for r in records]
    assert all(r.profile is None for r in kept)
    path = tmp_path / "r.json"
    write_run_report(path, {"cpu_model": "x"}, "cpu-x86_64", spool, ["o/t.py/test_gone.json"])
    whole = run_report_json(records, {"cpu_model": "x"}, "cpu-x86_64", ["o/t.py/test_gone.json"])
    expected = json_text(whole) + "\n"
    assert path.read_text() == expected
    assert json.loads(expected) == json.loads(json.dumps(whole))
    if nodeids:  # a profile's per-step series, one line each
        assert '"samples": [' in expected and '"samples": [\n' not in expected
    assert [t["nodeid"] for t in json.loads(path.read_text())["tests"]] == sorted(nodeids)
    spool.close()


def test_a_work_line_counts_ops_and_says_when_the_threads_changed_too():
    """Several work verdicts share one summary line counting the ops; the test-wide threads
    verdict (no op) is named, not counted as an op (a trial read `work changed in 11 ops`)."""
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Verdict

    threads = Verdict("work", "changed", "torch threads 1 -> 2 on the same machine setup (2 cpus): ...")
    ops = [Verdict("work", "changed", f"aten::op{i}: inputs ...", op=f"aten::op{i}") for i in range(2)]
    assert verdict_lines([threads, *ops]) == [
        "work changed in 2 ops and its torch threads: torch threads 1 -> 2 on the same machine setup (2 cpus): ...; "
        "and 2 more (-v or --opprof-json lists them all)"
    ]
    assert verdict_lines(ops) == [
        "work changed in 2 ops: aten::op0: inputs ...; and 1 more (-v or --opprof-json lists them all)"
    ]


def test_the_inconclusive_line_names_the_largest_move_first():
    """A training trial's +320% step wall sat among `and 5 more` behind three ops that moved a
    few microseconds: the line names the verdicts by how much they moved a step, largest first."""
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Verdict

    def moved(op: str, base: float, new: float) -> Verdict:
        return Verdict("time", "inconclusive", f"{op}: ...", op, base, new, 0.01, "CPU contention: ...", "rerun")

    group = [moved(f"aten::op{i}", 0.010, 0.012) for i in range(4)] + [moved("step wall", 0.852, 3.577)]
    group.insert(2, moved("aten::addmm", 0.5, 0.1))  # a faster one moves a step too
    (line,) = verdict_lines(group)
    # a faster one says so: the line's why alone read as a slowdown (a trial's ops ran 24% faster)
    assert line.startswith(
        "time inconclusive for step wall, aten::addmm (-80%, faster), aten::op0 and 3 more: CPU contention: ..."
    )
    one_step = Verdict("time", "inconclusive", "aten::mm: ran in 1 of 10 steps", "aten::mm", None, 100.0, None, "x")
    one_step_too = Verdict("time", "inconclusive", "aten::bmm: ran in 1 of 10 steps", "aten::bmm", 0.1, 0.2, None, "x")
    # an op of one step only: its whole cost is its move; another why is a line of its own
    (held,) = verdict_lines([moved("aten::mm", 0.5, 0.5)])  # no move either way: no word of one
    assert held.startswith("time inconclusive for aten::mm: CPU contention")
    (renumbered,) = verdict_lines([moved("aten::mm", 0.5, 0.9)], status="renumbered")
    assert "; its baseline's times were kept (an inconclusive measurement never replaces one);" in renumbered
    contended, other = verdict_lines([*group, one_step_too, one_step])
    assert contended.startswith("time inconclusive for step wall, aten::addmm (-80%, faster), aten::op0 and 3 more:")
    assert other.startswith("time inconclusive for aten::mm, aten::bmm: x;")


def test_contention_over_the_whole_capture_says_the_share_is_summed_over_threads():
    """Two threads each waiting most of the capture: 118% reads as a sum, not as a typo."""
    from test_baseline import addmm_verdict, doc, profile

    from pytest_opprof.verdicts import Machine

    verdict = addmm_verdict(doc(profile(addmm_us=(7000,) * 8)), doc(profile()), Machine(cpu_wait=1.18))
    assert verdict.why == "CPU contention: the test's threads waited for a CPU 118% of the capture (summed over them)"


def test_a_record_crosses_from_an_xdist_worker_whole():
    """What a worker sends (`to_dict()` as JSON text) is the record the controller rebuilds: every
    field of the record and of its baseline result (the op rows stay on the worker)."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.verdicts import Ignore, Verdict

    verdict = Verdict("time", "inconclusive", "aten::mm: ...", "aten::mm", 1.0, 0.1, 0.001, "faster", "record again")
    baseline = BaselineResult(
        ".opprof/cpu/t.py/test_a.json", "rewritten", "confirmed", None, 2, (verdict,),
        ignores=(Ignore("aten::mmm", False, "aten::mm"),), lists_unrecorded=("aten::cat",), under_load=20.0,
        work_unrecorded=("aten::mm",),
    )  # fmt: skip
    sent = TestRecord(
        "t.py::test_a", "passed", None, (Check("events", "ok", "3 CPU ops"),), "tr/a.json.gz",
        ({"sm_clock_mhz": 1},), "throttled", 0.01, baseline, "t.py::test_a [passed]", None, "csv", "<html>", 2,
    )  # fmt: skip
    assert TestRecord.from_dict(json.loads(json.dumps(sent.to_dict()))) == sent


def test_a_baseline_recorded_with_over_100_percent_cpu_wait_says_it_is_summed():
    """Several threads waiting at once add up past 100%: the recording line says so, as the
    comparison's contention line does."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems

    written = BaselineResult(".opprof/cpu/t.py/test_a.json", "new")
    base = record("t.py::test_a")
    lines = format_problems([TestRecord(**{**base.__dict__, "cpu_wait": 1.06, "baseline": written})], recording=True)
    assert "waited for a CPU 106% of the capture (summed over them): its CPU times may be inflated" in lines


@pytest.mark.parametrize(
    ("status", "holds"),
    [("kept", "report and baseline hold"), ("new", "report and baseline hold"), ("unusable", "report holds"),
     ("missing", "report holds"), (None, "report holds")],
)  # fmt: skip
def test_several_captures_name_the_baseline_only_where_the_last_one_went_into_it(status, holds):
    """A baseline that was compared or written holds the last capture; a missing or unusable one does not."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems

    baseline = BaselineResult(".opprof/cpu/t.py/test_a.json", status) if status else None
    base = record("t.py::test_a")
    lines = format_problems([TestRecord(**{**base.__dict__, "captures": 2, "baseline": baseline})])
    assert f"t.py::test_a: 2 captures in one test: its {holds} the last;" in lines


@pytest.mark.parametrize(
    ("value", "text"),
    [(1_000_000, "1000000"), (2.0, "2"), (2.5, "2.5"), (4 / 3, "1.33"), (0, "0"), (2.999, "3"), (1 / 300, "0")],
)
def test_counts_print_whole_and_never_in_exponent_form(value, text):
    """A million calls per step is `1000000`, not `1e+06` (a trial's `opprof analyze` table); a
    median of counts keeps its half."""
    from pytest_opprof.units import count_text

    assert count_text(value) == text


@pytest.mark.parametrize(
    ("share", "text"),
    [(0, "0%"), (0.004, "<1%"), (0.005, "<1%"), (0.62, "62%"), (0.9964, ">99%"), (1, "100%")],
)
def test_shares_never_round_to_an_end_they_are_not_at(share, text):
    """99.64% of the host span idle read `100%` in a trial's timeline line, 0.4% read `0%`."""
    from pytest_opprof.units import share_text

    assert share_text(share) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0.000"),
        (0.35, "0.350"),
        (1.0, "1.000"),
        (145.0, "145.0"),
        (29950, "29950"),
        (-0.35, "-0.350"),
        (float("inf"), "inf"),
    ],
)
def test_a_stored_time_prints_to_the_digits_a_baseline_holds(ms, text):
    """A baseline's times hold 4 significant digits: `29950.000` claims a precision it lacks; a
    time of 0 (an op too short to time) is `0.000`, not a math domain error (a mutation trial)."""
    from pytest_opprof.units import stored_ms_text

    assert stored_ms_text(ms) == text


def test_a_long_name_is_cut_at_70_characters_with_an_ellipsis():
    """The tables' op column: 70 characters, a longer name cut to 69 and `…`."""
    from pytest_opprof.tables import short

    assert short("x" * 70) == "x" * 70
    assert short("x" * 71) == "x" * 69 + "\u2026"
    assert short("x" * 50, 40) == "x" * 39 + "\u2026"


def test_names_are_the_first_three_and_a_count_or_all_under_v():
    """A line names three tests or ops and counts the rest; under -v, every one of them."""
    from pytest_opprof.units import first_three

    names = ["aten::mm", "aten::add", "aten::relu", "aten::cat", "aten::sum"]
    assert first_three(names) == "aten::mm, aten::add, aten::relu and 2 more"
    assert first_three(names[:3]) == "aten::mm, aten::add, aten::relu"
    assert first_three(names, every=True) == ", ".join(names)


def test_a_compare_difference_below_the_shown_precision_is_zero_not_minus_zero():
    """A trial's `aten::copy_` 0.007 vs 0.007 ms showed `-0.000` in the diff column: a difference
    the table cannot show is `0.000`; one it can keeps its sign."""
    from pytest_opprof.showtables import side_by_side_table
    from pytest_opprof.sidebyside import SideRow

    rows = [
        SideRow("aten::copy_", 1, 1, 0.006543, 0.006512, "cpu", "cpu", "same"),
        SideRow("aten::mm", 1, 1, 0.35, 0.7, "cpu", "cpu", "slower"),
        SideRow("aten::add", 1, 1, 0.007, 0.006, "cpu", "cpu", "same"),
    ]
    cells = {line.split()[0]: line.split()[6] for line in side_by_side_table(rows).splitlines()[2:]}
    assert cells == {"aten::copy_": "0.000", "aten::mm": "+0.350", "aten::add": "-0.001"}


def test_an_inconclusive_line_says_why_its_baseline_was_written_all_the_same():
    """A trial read `(=all, or a structure or work change)` where a conclusive time change of
    another op had rewritten the file: the line says =all, or the changes its other lines name."""
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Verdict

    slow = Verdict("time", "inconclusive", "m", "aten::mm", 1.0, 1.5, 0.001, "CPU contention: ...", "rerun")
    faster = Verdict("time", "improved", "aten::relu: faster", "aten::relu", 1.0, 0.5, 0.001)
    changed = verdict_lines([slow, faster], status="changed")
    assert changed[0] == (
        "time inconclusive for aten::mm: CPU contention: ...; its baseline was changed all the same, for the "
        "changes its other lines name, with these times; its times are this run's, slower than the baseline's "
        "were: if the machine was loaded, record it again on a quiet machine (pytest "
        "--opprof-update-baseline=all with the test's id)"
    )
    assert changed[1].startswith("time: aten::relu: faster")
    (rewritten,) = verdict_lines([slow], status="rewritten")
    assert "its baseline was rewritten all the same, as =all asks, with these times" in rewritten


def test_a_trace_link_is_percent_encoded_relative_to_the_page(tmp_path):
    """A parametrized id's trace name holds `[`, `]`, `#` or a space: the HTML link was the raw
    name, and a `#` began the link's fragment. The href is percent-encoded; the text shows it as is."""
    from builders import op, step

    from pytest_opprof.analysis import analyze
    from pytest_opprof.htmlreport import test_section

    profile = analyze([step(1, 0, 100), op("aten::mm", 10, 20)])
    trace = str(tmp_path / "traces" / "t.py_test_x[a#b c]-0a1b.json.gz")
    page = test_section("t.py::test_x[a#b c]", "failed", profile, None, trace, tmp_path / "out")
    assert 'href="../traces/t.py_test_x%5Ba%23b%20c%5D-0a1b.json.gz"' in page
    assert f"({trace})" in page


def test_a_trace_on_another_drive_than_the_page_is_linked_by_its_file_uri(tmp_path, monkeypatch):
    """On Windows a trace folder on D: and the HTML page on C: have no relative path (relpath
    raises ValueError, as ntpath does there): the link is the trace's file URI, not an
    INTERNALERROR that lost the run's reports (a cross-platform review)."""
    from builders import op, step

    from pytest_opprof import htmlreport
    from pytest_opprof.analysis import analyze

    def other_drive(path, start=None):
        raise ValueError("path is on mount 'D:', start on mount 'C:'")

    monkeypatch.setattr(htmlreport.os.path, "relpath", other_drive)
    profile = analyze([step(1, 0, 100), op("aten::mm", 10, 20)])
    trace = str(tmp_path / "traces" / "t.py_test_x[a#b]-0a1b.json.gz")
    page = htmlreport.test_section("t.py::test_x[a#b]", "failed", profile, None, trace, tmp_path / "out")
    assert f'href="{Path(trace).as_uri()}"' in page


def test_a_written_change_reads_as_recorded_not_as_a_failure():
    """The structure and work lines of a file this run wrote say `recorded:`; a comparison's, a kept
    file's and a time line do not."""
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Verdict

    extra = Verdict("structure", "changed", "structure changed: + aten::clone (1/step) [b.json]")
    work = Verdict("work", "changed", "aten::mm: shapes changed", "aten::mm")
    faster = Verdict("time", "improved", "aten::relu: faster", "aten::relu", 1.0, 0.5, 0.001)
    assert verdict_lines([extra, work, faster], status="changed") == [
        "recorded: structure changed: + aten::clone (1/step) [b.json]",
        "recorded: work changed: aten::mm: shapes changed",
        "time: aten::relu: faster",
    ]
    assert verdict_lines([extra], verbose=True, status="rewritten") == [f"recorded: {extra.message}"]
    assert verdict_lines([extra, work]) == [extra.message, "work changed: aten::mm: shapes changed"]
    assert verdict_lines([extra], status="kept") == [extra.message]


def test_a_rewritten_baseline_of_a_quicker_run_is_not_told_to_be_rewritten_again():
    """A newcomer's `=all` run, made as a baseline recorded under load asked, ended with that same
    advice (`record it again, pytest --opprof-update-baseline=all`): the file now holds this run's
    times, so a quicker run's line says there is nothing more to do."""
    from pytest_opprof.excuses import LOADED_FIX
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Verdict

    quicker = Verdict(
        "time", "inconclusive", "m", "aten::mm", 14.4, 0.17, 0.001, "the machine ran 82.64x faster", LOADED_FIX
    )
    (rewritten,) = verdict_lines([quicker], status="rewritten")
    assert rewritten.endswith("with these times; nothing more to do: the file now holds this quicker run's times")
    assert "=all" not in rewritten.split("with these times")[1]
    (compared,) = verdict_lines([quicker])
    assert compared.endswith(LOADED_FIX)


def loaded(nodeid: str, wait: float, baseline=None) -> TestRecord:
    """A record whose threads waited for a CPU `wait` of the capture, with its contention warning."""
    from pytest_opprof.errors import contended_capture

    warning = Check("contention", "warning", contended_capture(wait))
    return TestRecord(**{**record(nodeid).__dict__, "cpu_wait": wait, "checks": (warning,), "baseline": baseline})


def inconclusive_result(status: str, why: str):
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.verdicts import Verdict

    verdict = Verdict("time", "inconclusive", "aten::mm: ...", "aten::mm", 0.2, 6.4, 0.01, why, "rerun quietly")
    return BaselineResult(".opprof/cpu/t.py/x.json", status, verdicts=(verdict,))


@pytest.mark.parametrize(
    ("status", "outcome"),
    [("compared", "neither passed nor failed"), ("kept", "their baselines were kept as they were")],
)
def test_contention_inconclusive_lines_of_several_tests_become_one(status, outcome):
    """Tests whose time was inconclusive for CPU contention share one line (the largest wait,
    the outcome, the fix, the tests); a test inconclusive for another reason keeps its own line,
    and a lone contended test keeps its line where its outcome differs."""
    from pytest_opprof.summarylines import format_problems

    contended = inconclusive_result(status, "CPU contention: the test's threads waited for a CPU 50% of the capture")
    records = [
        loaded("t.py::a", 0.5, contended),
        loaded("t.py::b[1-2]", 1.2, contended),
        loaded("t.py::c", 0.4, inconclusive_result(status, "GPU clocks throttled")),
    ]
    lines = format_problems(records).splitlines()[:3]  # a recording run's count of files follows
    own = {  # the per-test line's outcome, and the shared line's for several tests
        "compared": ("neither passed nor failed (--opprof-strict makes this an error)",) * 2,
        "kept": (
            "its baseline was kept as it was (an inconclusive measurement never replaces one)",
            "their baselines were kept as they were (an inconclusive measurement never replaces one)",
        ),
    }[status]
    assert own[1].startswith(outcome)
    assert lines == [
        f"t.py::c: time inconclusive for aten::mm: GPU clocks throttled; {own[0]}; rerun quietly",
        "t.py::c: warning contention: the test's threads waited for a CPU 40% of the capture: other load on the "
        "machine inflated its CPU times; time assertions judge them as measured (a baseline time verdict is "
        "inconclusive where the wait can explain the slowdown); rerun on a quiet machine",
        "opprof: time inconclusive in 2 tests for CPU contention: their threads waited for a CPU up to 120% of the "
        f"capture (summed over threads); {own[1]}; rerun quietly: t.py::a, t.py::b[1-2] (-v: each test's line)",
    ]
    every = format_problems(records, verbose=True)
    assert "in 2 tests" not in every and every.count("warning contention") == 3


def test_tests_inconclusive_on_a_faster_machine_share_one_line():
    """A newcomer's first run of the examples on another CPU printed a long 'the machine ran
    faster' line for each of six tests: tests whose every inconclusive time says so share one
    line (the speeds, the outcome, the one command for them); a test inconclusive for that and
    another reason, or alone, keeps its lines; -v keeps each test's."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.excuses import FASTER_FIX
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.verdicts import Verdict

    def faster(speed: str, *more: Verdict) -> BaselineResult:
        why = f"the machine ran {speed}x faster than when the baseline was recorded (dispatch reference)"
        verdict = Verdict("time", "inconclusive", "aten::mm: ...", "aten::mm", 0.4, 0.2, 0.01, why, FASTER_FIX)
        return BaselineResult(".opprof/cpu/t.py/x.json", "compared", verdicts=(verdict, *more))

    other = Verdict("time", "inconclusive", "m", "aten::add", 0.4, 0.2, 0.01, "GPU clocks throttled", "rerun quietly")
    records = [
        TestRecord(**{**record("t.py::a").__dict__, "baseline": faster("1.74")}),
        TestRecord(**{**record("t.py::b[x y]").__dict__, "baseline": faster("3.07")}),
        TestRecord(**{**record("t.py::c").__dict__, "baseline": faster("2.00", other)}),
    ]
    lines = format_problems(records).splitlines()
    assert lines[-1] == (
        "opprof: time inconclusive in 2 tests: the machine ran 1.74x to 3.07x faster than when their baselines "
        "were recorded; neither passed nor failed (--opprof-strict makes this an error); this run was the quicker one, so a rerun changes nothing: their baselines were recorded on a "
        "slower machine or spell; where this speed is the runner's usual, record them again (-v: each test's line): pytest "
        "--opprof-update-baseline=all t.py::a 't.py::b[x y]'"
    )
    assert len(lines) == 3 and all(line.startswith("t.py::c: time inconclusive for aten::") for line in lines[:2])
    every = format_problems(records, verbose=True)
    assert "in 2 tests" not in every and every.count(": aten::mm: ...") == 3
    (line,) = format_problems(records[:1]).splitlines()
    assert line.startswith("t.py::a: time inconclusive for aten::mm (-50%, faster): the machine ran 1.74x faster")


def test_a_shared_lines_command_names_every_test_or_none():
    """A CI trial's environment line for fifteen tests ended `... t3 ... (-v: each test's line)`:
    pasted, it recorded three tests or failed on `...`. The command names every test; where they
    are every test a run that picked none measured, it is the bare command."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.errors import orphans_line
    from pytest_opprof.excuses import FASTER_FIX
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.verdicts import Verdict

    why = "the machine ran 2.00x faster than when the baseline was recorded (dispatch reference)"
    verdict = Verdict("time", "inconclusive", "aten::mm: ...", "aten::mm", 0.4, 0.2, 0.01, why, FASTER_FIX)
    faster = BaselineResult(".opprof/cpu/t.py/x.json", "compared", verdicts=(verdict,))
    ids = [f"t.py::t{i}" for i in range(5)]
    records = [TestRecord(**{**record(i).__dict__, "baseline": faster}) for i in ids]
    command = "(-v: each test's line): pytest --opprof-update-baseline=all t.py::t0 t.py::t1 t.py::t2 t.py::t3 t.py::t4"
    assert format_problems(records).endswith(command)  # picked (the default): every id
    assert format_problems(records, picked=False).endswith(
        "record them again (-v: each test's line): pytest --opprof-update-baseline=all"
    )
    calm = TestRecord(
        **{**record("t.py::calm").__dict__, "baseline": BaselineResult(".opprof/cpu/t.py/c.json", "compared")}
    )
    assert format_problems([*records, calm], picked=False).endswith(command)  # not every test: each named
    paths = [f".opprof/cpu/t.py/t[{i}].json" for i in range(4)]
    line = orphans_line(paths)
    assert ": .opprof/cpu/t.py/t[0].json, .opprof/cpu/t.py/t[1].json, .opprof/cpu/t.py/t[2].json and 1 more;" in line
    assert line.endswith("delete them (and commit the deletion): rm -- " + " ".join(f"'{p}'" for p in paths))
    here = orphans_line(paths, here=[f"../{p}" for p in paths])  # pytest ran in a subfolder (a review)
    assert line.split("; if")[0] == here.split("; if")[0] and here.endswith(" '../.opprof/cpu/t.py/t[3].json'")
    # files a test without a baseline may be (renamed or moved, their own lines keep them) are left
    # out of the rm (a trial's moved file was told `rm` and `git mv` for the same files)
    mixed = orphans_line(paths, here=[f"../{p}" for p in paths], paired={paths[0], paths[2]})
    assert mixed.endswith(
        "2 of them may be the baselines of tests below that had none (renamed or moved: their lines keep them); "
        "if the tests of the other 2 are gone, delete those (and commit the deletion): "
        "rm -- '../.opprof/cpu/t.py/t[1].json' '../.opprof/cpu/t.py/t[3].json'"
    )


def test_the_xdist_note_gives_each_worker_its_share_or_fewer_workers():
    """A review: -n 3 of 1 thread each on 2 CPUs was told to set OMP_NUM_THREADS=1, the setting in
    force. Where the workers outnumber the CPUs, fewer workers are the fix."""
    from pytest_opprof.summarylines import xdist_noise_note

    assert xdist_noise_note(2, 1, 2).endswith("timings on shared CPUs are noisier; op counts are exact as ever")
    alike = (
        "recording and checking alike (a thread count changes how some ops split their work: record the baselines "
        "with the setting that checks them)"
    )
    assert xdist_noise_note(2, 2, 2).endswith(
        f"For times, run without -n, or give each worker 1 torch thread (OMP_NUM_THREADS=1), {alike}"
    )
    assert xdist_noise_note(2, 8, 8).endswith(f"give each worker 4 torch threads (OMP_NUM_THREADS=4), {alike}")
    assert xdist_noise_note(3, 1, 2).endswith(
        f"For times, run without -n, or with -n 2 or fewer and OMP_NUM_THREADS=1, {alike}"
    )
    assert xdist_noise_note(3, None, 2).endswith("noisier; op counts are exact as ever")  # threads unknown


def test_contention_warnings_of_several_tests_become_one_and_a_lone_one_stays():
    """Two contended tests with no baseline verdict to say it: one run line; one such test: its own."""
    from pytest_opprof.summarylines import format_problems

    lines = format_problems([loaded("t.py::a", 0.5), loaded("t.py::b", 0.7)]).splitlines()
    assert lines == [
        "opprof: warning contention in 2 tests: their threads waited for a CPU up to 70% of the capture: other "
        "load on the machine inflated their CPU times; time assertions judge them as measured; rerun on a quiet "
        "machine: t.py::a, t.py::b"
    ]
    (line,) = format_problems([loaded("t.py::a", 0.5)]).splitlines()
    assert line.startswith("t.py::a: warning contention: the test's threads waited for a CPU 50% of the capture")


def test_a_baseline_recorded_under_contention_says_it_once():
    """The 'recorded while its threads waited' line says what the contention warning says, and
    more: the warning is left out; two such baselines share one line, ids quoted for the shell."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems

    written = BaselineResult(".opprof/cpu/t.py/x.json", "new")
    line, written_line = format_problems([loaded("t.py::a", 0.5, written)], recording=True).splitlines()
    assert line.startswith("t.py::a: baseline recorded while its threads waited for a CPU 50% of the capture")
    assert written_line.startswith("opprof: baselines written: 1 new")
    lines = format_problems([loaded("t.py::a", 0.5, written), loaded("t.py::b[x y]", 0.6, written)], recording=True)
    assert lines.splitlines()[:-1] == [
        "opprof: 2 baselines recorded while their threads waited for a CPU up to 60% of the capture: their CPU "
        "times may be inflated and hide later slowdowns; record them again on a quiet machine (without -n on a "
        "small runner): pytest --opprof-update-baseline=all t.py::a 't.py::b[x y]'"
    ]


def test_the_commands_errors_give_quote_a_parametrized_id_for_the_shell():
    """`pytest --opprof-update-baseline t.py::test_a[x y]` runs nothing in bash and is refused
    by zsh (bare brackets): the commands the messages give are copied as they stand."""
    from pytest_opprof.errors import baseline_required, record_if_intended

    assert "pytest --opprof-update-baseline 't.py::test_a[x y]' and commit" in baseline_required(
        "t.py::test_a[x y]", "p"
    )
    assert "pytest --opprof-update-baseline 't.py::test_a[1]' (and commit" in record_if_intended("t.py::test_a[1]")
    assert "pytest --opprof-update-baseline t.py::test_a and commit" in baseline_required("t.py::test_a", "p")


def test_a_rename_or_move_is_suggested_only_where_one_test_and_one_file_pair_up():
    """One test without a baseline and one unread file in its folder: a rename, whatever the
    names; of the same name in two folders: a move. Two tests beside one file, or two files of
    that name: no guess (the summary's two lines stand)."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.renames import renamed_lines, renamed_pairs

    def missing(nodeid: str, path: str) -> TestRecord:
        return TestRecord(**{**record(nodeid).__dict__, "baseline": BaselineResult(path, "missing")})

    one = [missing("t.py::test_x[b]", ".opprof/k/t.py/test_x[b].json")]
    (line,) = renamed_lines(renamed_pairs(one, [".opprof/k/t.py/test_x[a].json"]))
    assert "was renamed" in line and line.endswith(
        "keep its baseline: opprof mv '.opprof/k/t.py/test_x[a].json' 't.py::test_x[b]'"
    )
    (line,) = renamed_lines(renamed_pairs(one, [".opprof/k/t.py/test_y[a].json"]))  # a renamed function
    assert "was renamed" in line
    assert renamed_lines(renamed_pairs(one, [".opprof/k/u.py/test_x[a].json"])) == []  # another file's, another name
    (line,) = renamed_lines(renamed_pairs(one, [".opprof/k/u.py/test_x[b].json"]))  # the same name in another file's
    assert "was moved" in line and line.endswith("opprof mv '.opprof/k/u.py/test_x[b].json' 't.py::test_x[b]'")
    assert (
        renamed_lines(renamed_pairs(one, [".opprof/k/u.py/test_x[b].json", ".opprof/k/v.py/test_x[b].json"])) == []
    )  # which?
    two = [*one, missing("t.py::test_x[c]", ".opprof/k/t.py/test_x[c].json")]
    assert renamed_lines(renamed_pairs(two, [".opprof/k/t.py/test_x[a].json"])) == []  # which one?
    # a renamed id beside a deleted test: the function's one of each pair up, the other file stays an orphan
    beside = [".opprof/k/t.py/test_old.json", ".opprof/k/t.py/test_x[a].json"]
    assert [(new, old) for _, new, old in renamed_pairs(one, beside)] == [
        (".opprof/k/t.py/test_x[b].json", ".opprof/k/t.py/test_x[a].json")
    ]
    assert renamed_pairs(one, [".opprof/k/t.py/test_old.json", ".opprof/k/t.py/test_y[a].json"]) == []  # which?
    assert renamed_pairs(two, [*beside, ".opprof/k/t.py/test_x[d].json"]) == []  # two of each: no guess


def test_a_renamed_class_beside_a_renamed_function_pairs_each_with_its_baseline():
    """An upgrade trial renamed `test_mlp` -> `test_mlp_small` and class `TestBlocks` ->
    `TestConvBlocks` in one file: two of each in the folder paired neither, and the lines offered
    `rm` for both files. The method keeps its name: it pairs first, and the function is then one
    of each. Two classes renamed with the same method: no guess."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.renames import renamed_pairs

    def missing(nodeid: str, path: str) -> TestRecord:
        return TestRecord(**{**record(nodeid).__dict__, "baseline": BaselineResult(path, "missing")})

    tests = [
        missing("t.py::test_mlp_small", ".opprof/k/t.py/test_mlp_small.json"),
        missing("t.py::TestConvBlocks::test_conv", ".opprof/k/t.py/TestConvBlocks.test_conv.json"),
    ]
    orphans = [".opprof/k/t.py/test_mlp.json", ".opprof/k/t.py/TestBlocks.test_conv.json"]
    assert sorted((new, old) for _, new, old in renamed_pairs(tests, orphans)) == [
        (".opprof/k/t.py/TestConvBlocks.test_conv.json", ".opprof/k/t.py/TestBlocks.test_conv.json"),
        (".opprof/k/t.py/test_mlp_small.json", ".opprof/k/t.py/test_mlp.json"),
    ]
    params = [missing("t.py::TestB::test_c[x]", ".opprof/k/t.py/TestB.test_c[x].json")]
    assert [
        old
        for _, _, old in renamed_pairs(params, [".opprof/k/t.py/TestA.test_c[x].json", ".opprof/k/t.py/test_d.json"])
    ] == [".opprof/k/t.py/TestA.test_c[x].json"]
    two = [*tests, missing("t.py::TestOther::test_conv", ".opprof/k/t.py/TestOther.test_conv.json")]
    both = [*orphans, ".opprof/k/t.py/TestGone.test_conv.json"]
    assert [new for _, new, _ in renamed_pairs(two, both) if "test_conv" in new] == []  # which class is which?


def test_a_test_left_out_pairs_by_its_name_only_and_a_hashed_method_name_pairs_too():
    """A review: a GPU test left out of every CPU run (`-m "not gpu"`) claimed a deleted test's
    file in the folder's one of each, in every run; a test that did not run pairs by its name only
    (a parametrize id, a class, a move). A method whose file name carries safe_name's hash (an id
    with `:`) pairs by its method and ids, the hash being of the whole id, class and all."""
    from pytest_opprof.renames import renamed_pairs

    deleted = [".opprof/k/t.py/test_deleted.json"]
    assert renamed_pairs([], deleted, [(".opprof/k/t.py/test_on_gpu.json", "t.py::test_on_gpu")]) == []
    unrun_id = [(".opprof/k/t.py/test_x[c].json", "t.py::test_x[c]")]
    assert renamed_pairs([], [".opprof/k/t.py/test_x[b].json"], unrun_id) == [
        ("t.py::test_x[c]", ".opprof/k/t.py/test_x[c].json", ".opprof/k/t.py/test_x[b].json")
    ]
    hashed = [(".opprof/k/t.py/TestB.test_conv[cuda_0]-1a2b3c4d.json", "t.py::TestB::test_conv[cuda:0]")]
    old = ".opprof/k/t.py/TestA.test_conv[cuda_0]-9f8e7d6c.json"
    assert [o for _, _, o in renamed_pairs([], [old, *deleted], hashed)] == [old]


def test_shared_contention_lines_count_a_test_once_and_say_what_strict_made_of_them():
    """`--dist each` runs a test on every worker (two records of one node id): it is one test in
    the shared lines. Under --opprof-strict, tests it made errors are said to be so."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems

    written = BaselineResult(".opprof/cpu/t.py/x.json", "new")
    twice = [loaded("t.py::a", 0.5, written), loaded("t.py::a", 0.6, written)]
    lines = format_problems(twice, recording=True).splitlines()
    assert lines[0].startswith("t.py::a: baseline recorded while its threads waited")  # one test: its own line
    assert not [line for line in lines if "2 baselines" in line]
    contended = inconclusive_result(
        "compared", "CPU contention: the test's threads waited for a CPU 50% of the capture"
    )
    errored = [TestRecord(**{**loaded(n, 0.5, contended).__dict__, "outcome": "error"}) for n in ("t.py::a", "t.py::b")]
    (line,) = [line for line in format_problems(errored, strict=True).splitlines() if line.startswith("opprof:")]
    assert "; --opprof-strict made each an error; rerun quietly: t.py::a, t.py::b" in line
    (line,) = [line for line in format_problems(errored).splitlines() if line.startswith("opprof:")]
    assert "; neither passed nor failed (--opprof-strict makes this an error);" in line  # errors of their own


def test_a_baseline_written_with_a_path_too_long_for_a_windows_checkout_says_so():
    """A baseline path past 200 characters in the repository (deep test folders, long parameter ids)
    breaks every Windows checkout of it (260 characters with the checkout's folder, git's
    core.longpaths off by default): a recording run says so in one line, naming the longest; a file
    read, not written, or a baseline folder outside the repository (an absolute path) is not named."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.runlines import WINDOWS_PATH_BUDGET
    from pytest_opprof.summarylines import format_problems

    def at(path: str, status: str = "new") -> TestRecord:
        return TestRecord(**{**record("t.py::test_x").__dict__, "baseline": BaselineResult(path, status)})

    deep = ".opprof/cpu-x86_64/tests/" + "d" * 80 + "/test_m.py/test_x[" + "p" * 90 + "].json"
    just = deep[: WINDOWS_PATH_BUDGET - 5] + ".json"  # 200 characters: within
    assert (len(deep), len(just)) == (219, 200)
    lines = format_problems([at(deep), at(just), at(deep.replace("d" * 80, "e" * 80), "changed")], recording=True)
    (line,) = [x for x in lines.splitlines() if "over 200" in x]
    assert line.startswith(f"opprof: 2 baseline files written with a path over 200 characters (the longest 219: {deep}")
    assert "a Windows checkout of the repository fails on paths past 260 characters" in line
    for quiet in ([at(deep, "kept")], [at("/srv/baselines/" + deep)], [at("D:\\b\\" + deep)], [at(just)]):
        assert "over 200" not in format_problems(quiet, recording=True)


def test_a_file_written_by_one_record_is_not_counted_kept_slower_by_another():
    """A review: with pytest-repeat or `--dist each`, one record of a test wrote a faster time
    and another found the file slower: the summary read `kept -1 unchanged ...; kept 1 slower`."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.verdicts import TIME, Verdict

    path = ".opprof/cpu/t.py/test_x.json"
    slower = Verdict(TIME, "regressed", "aten::mm: slower", "aten::mm")
    wrote = TestRecord(**{**record("t.py::test_x").__dict__, "baseline": BaselineResult(path, "changed")})
    kept = BaselineResult(path, "kept", "confirmed", verdicts=(slower,), measurements=4)
    found = TestRecord(**{**record("t.py::test_x").__dict__, "baseline": kept})
    (line,) = [x for x in format_problems([wrote, found], recording=True).splitlines() if "baselines written" in x]
    assert line.startswith("opprof: baselines written: 1 changed (t.py::test_x); kept 0 unchanged ")
    assert "slower" not in line
    alone = format_problems([found], recording=True)
    assert "kept 0 unchanged (" in alone and "; kept 1 slower (t.py::test_x): never written without =all" in alone


def test_a_file_kept_slower_with_no_confirmation_pooled_is_counted_slower():
    """A slower time kept by a recording run that pooled no confirmation (each one on throttled
    GPU clocks) is a kept slower file, not one `unchanged (... no conclusive time change)`."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.verdicts import TIME, Verdict

    slower = Verdict(TIME, "regressed", "aten::mm: slower", "aten::mm")
    kept = BaselineResult(".opprof/cpu/t.py/test_x.json", "kept", None, verdicts=(slower,))
    lines = format_problems([TestRecord(**{**record("t.py::test_x").__dict__, "baseline": kept})], recording=True)
    assert "kept 0 unchanged (" in lines and "; kept 1 slower (t.py::test_x): never written without =all" in lines


def test_a_change_that_fails_no_test_says_so_only_where_compared():
    """`; does not fail this test` where a comparison left the kind out of fail_on: not in a
    recording run, nor where a throttled GPU kept its file (a review: the terminal said it, the
    HTML did not); `-v` leads an op's work change with its kind, as the one-line form does."""
    from pytest_opprof.errors import NOT_FAILING
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import STRUCTURE, WORK, Verdict

    work = Verdict(WORK, "changed", "aten::mm: inputs (float[4,4]) -> (float[8,8])", "aten::mm")
    structure = Verdict(STRUCTURE, "changed", "structure changed: + aten::tanh (1/step)")
    only_time = frozenset({"time"})
    for status in ("compared", "strict"):
        lines = verdict_lines([structure, work], status=status, fails=only_time)
        assert all(line.endswith(f"; {NOT_FAILING}") for line in lines), lines
    for status in ("unreliable", "kept", "renumbered"):
        assert not any(NOT_FAILING in line for line in verdict_lines([structure, work], status=status, fails=only_time))
    assert verdict_lines([work], verbose=True) == ["work changed: aten::mm: inputs (float[4,4]) -> (float[8,8])"]


def test_ops_inconclusive_for_their_recorded_ranges_each_name_their_own_range():
    """A trial's line named three ops and the first op's range (`aten::linear`'s 0.547-75.230 ms
    for aten::sigmoid too). Ops a recorded range made inconclusive share a line naming each range;
    one inconclusive for another reason gets a line of its own."""
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Verdict

    def ranged(op, low, high, limit, now):
        why = (
            f"its baseline's measurements of the same code ranged {low:.3f}-{high:.3f} ms on this machine; "
            f"this time is within the slowest and its tolerance (up to {limit:.3f} ms)"
        )
        return Verdict("time", "inconclusive", f"{op}: ...", op, low, now, None, why, "record again")

    linear, sigmoid = (
        ranged("aten::linear", 0.547, 75.23, 90.276, 2.0),
        ranged("aten::sigmoid", 0.139, 15.87, 19.044, 0.9),
    )
    loaded = Verdict(
        "time", "inconclusive", "aten::mm: ...", "aten::mm", 0.2, 0.3, None, "CPU contention: ...", "rerun"
    )
    first, second = verdict_lines([sigmoid, linear, loaded])
    assert first.startswith(
        "time inconclusive for aten::linear, aten::sigmoid: each is within the slowest of its baseline's measurements "
        "of the same code on this machine and its tolerance (aten::linear 0.547-75.230 ms, up to 90.276 ms, "
        "aten::sigmoid 0.139-15.870 ms, up to 19.044 ms); "
    )
    assert second.startswith("time inconclusive for aten::mm: CPU contention: ...; ")
    (alone,) = verdict_lines([sigmoid])
    assert alone.startswith(f"time inconclusive for aten::sigmoid: {sigmoid.why}; ")


def test_baselines_recorded_under_load_are_named_in_every_later_run_once():
    """A file's capture.cpu_wait (recorded while its threads waited for a CPU) is named in one
    run line with the command; one whose references already say it was recorded under load has
    that line only; a file written in this run is not named (its own line says it)."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems

    def read(nodeid, status="compared", **facts):
        return TestRecord(**{**record(nodeid).__dict__, "baseline": BaselineResult(f"{nodeid}.json", status, **facts)})

    lines = format_problems(
        [
            read("t.py::a", recorded_wait=1.27),
            read("t.py::b", recorded_wait=0.5, under_load=3.0),
            read("t.py::c", "new", recorded_wait=0.4),
        ]
    ).splitlines()
    waited = [line for line in lines if "(capture.cpu_wait)" in line]
    assert waited == [
        "opprof: 1 baseline recorded while its threads waited for a CPU 127% of the capture (summed over them) "
        "(capture.cpu_wait): its times may be inflated and hide slowdowns, and re-recording keeps it; record it "
        "again on a quiet machine: pytest --opprof-update-baseline=all t.py::a"
    ]
    assert [line for line in lines if "recorded under load" in line and "t.py::b" in line]
    # never judged on time (under 5 steps): no call to record them again (a trial's single-step suite
    # read one for 30 tests under `time not judged for 33 tests`, every run)
    untimed = "1 step: time is judged on 5 or more"
    quiet = format_problems(
        [read("t.py::d", recorded_wait=1.27, untimed=untimed), read("t.py::e", under_load=3.0, untimed=untimed)]
    )
    assert "cpu_wait" not in quiet and "recorded under load" not in quiet and "time not judged for 2 tests" in quiet


def test_contention_names_the_threads_that_ran_the_captures_work_though_unmeasured():
    """A review: a pool started and shut down in each step (its threads' CPU unread) left the
    contention warning blaming other load; a thread that ran the capture's work is named."""
    from pytest_opprof.analysis.checks import contention_check
    from pytest_opprof.analysis.model import OtherThread

    check = contention_check(0.4, (OtherThread("model_0", None, 3), OtherThread("idle", 0.2, given_work=False)))
    assert "the test's own Python threads (model_0 (3 threads): started in it), or other load" in check.message
    assert (
        "other load on the machine inflated"
        in contention_check(0.4, (OtherThread("idle", 0.2, given_work=False),)).message
    )


def test_csv_numbers_are_positional_to_the_digits_repr_gives():
    """`sort -n` misordered a CSV column mixing `0.000104` and `8.6e-05` (a data-consumer trial)."""
    from pytest_opprof.runfiles import _csv_text

    assert _csv_text([["a", 8.6e-05, 0.000104, 1.5, 2, "", 1e16, 1.2345678901234e-07]]) == (
        "a,0.000086,0.000104,1.5,2,,10000000000000000,0.00000012345678901234\r\n"
    )


def test_junit_times_keep_six_significant_digits():
    """4 decimals gave a 0.104 us op as `0.0001` in junit beside the CSV's `0.000104`."""
    from builders import op, stepped

    from pytest_opprof.analysis import analyze
    from pytest_opprof.results import format_junit_properties

    profile = analyze(
        stepped(3, 5000, lambda i, base: [op("aten::tiny", base + 1, 0.104), op("aten::big", base + 2, 1234.567)])
    )
    props = dict(format_junit_properties(profile, 5))
    assert props["opprof.op.aten::tiny.ms_per_step"] == "0.000104"
    assert props["opprof.op.aten::big.ms_per_step"] == "1.23457"
    assert props["opprof.wall_ms"] == "15.0"


def test_ops_most_of_whose_steps_slowed_share_one_line():
    """A diagnosis trial's conv2d read four `most steps slowed` lines, one per op of its call chain
    (conv2d, convolution, _convolution, mkldnn_convolution), each its own numbers: one line names
    them, the largest move first, with its figures; -v lists each."""
    from pytest_opprof.rules import Rule
    from pytest_opprof.timing import _most_steps_slower
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import Machine

    slow = [0.3, 0.28, 6.0, 6.5, 7.0, 6.0, 5.5, 6.2]
    conv2d = _most_steps_slower("aten::conv2d", slow, [0.3] * 8, Rule(), Machine(), "")
    inner = _most_steps_slower("aten::convolution", [t * 0.9 for t in slow], [0.27] * 8, Rule(), Machine(), "")
    assert conv2d is not None and inner is not None
    assert conv2d.why.startswith(
        "most steps slowed beyond every baseline step (up to 0.300 ms) while the fastest steps did not fail the time "
        "rule (0.280 vs 0.300 ms), and time is judged on the fastest: a wait in some steps"
    )
    (line,) = verdict_lines([inner, conv2d])
    assert line.startswith(
        f"time inconclusive for aten::conv2d, aten::convolution: {conv2d.why} (the figures of aten::conv2d; -v or "
        "--opprof-json gives each op's); neither passed nor failed"
    )
    assert len(verdict_lines([inner, conv2d], verbose=True)) == 2


def test_ops_the_rest_of_whose_step_slowed_alike_share_one_line():
    """An LLM trial's step slowed by a sleep read a `the rest of the step slowed alike` line for
    each op it excused (aten::embedding, aten::index_select, each its own ratio): one line names
    them, the largest move first, with its figures; -v lists each."""
    from pytest_opprof.excuses import REST_FIX
    from pytest_opprof.timing import REST_WHY
    from pytest_opprof.verdictlines import verdict_lines
    from pytest_opprof.verdicts import INCONCLUSIVE, TIME, Verdict

    def excused(op: str, ratio: float, old: float, new: float) -> Verdict:
        why = f"{REST_WHY} ({ratio:.2f}x slower outside {op}, with the same calls and work): the machine, or a change to more than this op"
        return Verdict(TIME, INCONCLUSIVE, f"{op}: ... ({why})", op, old, new, None, why, REST_FIX)

    embedding, select = excused("aten::embedding", 2.91, 0.1, 0.3), excused("aten::index_select", 2.90, 0.05, 0.1)
    (line,) = verdict_lines([select, embedding])
    assert line.startswith(
        f"time inconclusive for aten::embedding, aten::index_select: {embedding.why} (the figures of "
        "aten::embedding; -v or --opprof-json gives each op's); neither passed nor failed"
    )
    assert len(verdict_lines([select, embedding], verbose=True)) == 2


def test_a_recording_under_a_tracer_is_told_the_command_of_its_own_mode():
    """The tests a recording under a Python tracer did not write are recorded again in the run's
    own mode: a bare recording of the whole suite under --cov was told `=all`, which rewrites
    every unchanged file with new numbers; an =all run keeps =all; a run that picked its tests
    names them."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.errors import unrecordable_tracer
    from pytest_opprof.summarylines import format_problems

    def traced(nodeid):
        result = BaselineResult(f".opprof/cpu/{nodeid}.json", "unreliable", unrecordable=unrecordable_tracer("cov"))
        return TestRecord(**{**record(nodeid).__dict__, "baseline": result})

    records = [traced("t.py::a"), traced("t.py::b")]

    def fix(mode, picked):
        (line,) = [
            x for x in format_problems(records, recording=mode, picked=picked).splitlines() if "not written" in x
        ]
        return line.split("in a run without it: ")[1]

    assert fix("changed", False) == "pytest --opprof-update-baseline --no-cov (with pytest-cov; without a debugger)"
    assert fix("all", False) == "pytest --opprof-update-baseline=all --no-cov (with pytest-cov; without a debugger)"
    assert fix("changed", True).startswith("pytest --opprof-update-baseline t.py::a t.py::b --no-cov")
    assert fix("all", True).startswith("pytest --opprof-update-baseline=all t.py::a t.py::b --no-cov")


def test_a_file_written_in_a_slow_spell_of_the_run_is_named_with_its_command():
    """A regression trial's training step was written with its dispatch reference at 0.82 ms, the
    run's six other files at 0.46-0.48 ms: its times were inflated, it read `improved` on unchanged
    code and hid a 2 ms sleep, and nothing said so. A file whose reference ran x1.5 (dispatch) or x2
    (matmul) the median of the files the run wrote is named; under that, with fewer than three
    files, or where another word already stands, nothing more is said."""
    from pytest_opprof.decide import BaselineResult, References, Slowed
    from pytest_opprof.summarylines import format_problems

    def wrote(nodeid, dispatch, matmul=1.0, slowed=None):
        result = BaselineResult(
            f".opprof/cpu/{nodeid}.json", "new", written_references=References(dispatch, matmul), written_slowed=slowed
        )
        return TestRecord(**{**record(nodeid).__dict__, "baseline": result})

    calm = [wrote(f"t.py::c{i}", ms) for i, ms in enumerate((0.46, 0.47, 0.48))]
    lines = format_problems([*calm, wrote("t.py::spell", 0.82)], recording="changed").splitlines()
    assert (
        "t.py::spell: baseline recorded while the machine ran its references 1.7x slower than for the other baselines "
        "this run wrote (other load, or a slow spell of the machine): its CPU times may be inflated and hide later "
        "slowdowns; record it again on a quiet machine: pytest --opprof-update-baseline=all t.py::spell"
    ) in lines
    assert not [x for x in lines if "t.py::c" in x and "slower than" in x]
    for quiet in (
        [*calm, wrote("t.py::x", 0.68)],  # x1.45 of the median: within
        [*calm, wrote("t.py::x", 0.47, matmul=1.9)],  # the matmul reference x1.9: within its x2
        [calm[0], wrote("t.py::x", 0.82)],  # two files: no run to hold it against
    ):
        assert "slower than for the other baselines" not in format_problems(quiet, recording="changed")
    measured = format_problems([*calm, wrote("t.py::x", 0.82, slowed=Slowed(2.5, "measured"))], recording="changed")
    assert "2.5x slower than in another measurement of the test" in measured and "other baselines" not in measured
    back = BaselineResult.from_dict(wrote("t.py::x", 0.82).baseline.to_dict())
    assert back.written_references == References(0.82, 1.0)


def test_a_check_that_reads_alike_in_three_tests_is_one_line():
    """A parametrized compiled test's later cases each printed the same `not_compiled` warning:
    three tests or more whose check reads the same word for word share one line naming them; two,
    or another message, keep their own lines; -v keeps each test's."""
    from pytest_opprof.summarylines import format_problems

    def warned(nodeid: str, message: str = "no compiled region ran") -> TestRecord:
        checks = (Check("events", "ok", "3 CPU ops"), Check("not_compiled", "warning", message))
        return TestRecord(**{**record(nodeid).__dict__, "checks": checks})

    records = [warned(f"t.py::c[{i}]") for i in range(4)] + [warned("t.py::d", "another message")]
    lines = format_problems(records).splitlines()
    assert lines == [
        "t.py::d: warning not_compiled: another message",
        "opprof: warning not_compiled in 4 tests (t.py::c[0], t.py::c[1], t.py::c[2] and 1 more; -v: each test's "
        "line): no compiled region ran",
    ]
    assert format_problems(records[:2]).splitlines() == [
        "t.py::c[0]: warning not_compiled: no compiled region ran",
        "t.py::c[1]: warning not_compiled: no compiled region ran",
    ]
    assert format_problems(records, verbose=True).count("warning not_compiled: no compiled region ran") == 4
    from pytest_opprof.summarylines import summary_lines

    # -qq: the tests a shared line names had warnings too (a review: `no line of their own` under it)
    assert summary_lines(records, verbose=False, quiet=True)[-1].startswith(
        "opprof: 5 measured tests passed with no verdict or error to show (5 of them with warnings, above)"
    )


def test_tests_inconclusive_within_their_recorded_ranges_share_one_line():
    """A noisy runner's suite printed, per test, a `within the slowest of its baseline's
    measurements` line with its own =all command: three tests or more whose every inconclusive
    time is within its ops' recorded ranges share one line and one command; two, or a test with
    another inconclusive why besides, keep their own lines; -v keeps each test's."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.timing import RANGE_FIX
    from pytest_opprof.verdicts import Verdict

    why = (
        "its baseline's measurements of the same code ranged 0.195-0.286 ms on this machine; this time is "
        "within the slowest and its tolerance (up to 0.343 ms)"
    )
    within = Verdict("time", "inconclusive", f"aten::mm: ... ({why})", "aten::mm", 0.2, 0.3, None, why, RANGE_FIX)
    other = Verdict("time", "inconclusive", "m", "aten::add", 0.4, 0.5, 0.01, "GPU clocks throttled", "rerun quietly")

    def noisy(nodeid: str, *more: Verdict) -> TestRecord:
        baseline = BaselineResult(".opprof/cpu/t.py/x.json", "compared", verdicts=(within, *more))
        return TestRecord(**{**record(nodeid).__dict__, "baseline": baseline})

    records = [noisy(f"t.py::t[{i}]") for i in range(3)] + [noisy("t.py::u", other)]
    lines = format_problems(records).splitlines()
    assert lines[-1] == (
        "opprof: time inconclusive in 3 tests: each op's time is within the slowest of its baseline's measurements of "
        "the same code on this machine and its tolerance; neither passed nor failed (--opprof-strict makes this an "
        "error); to judge moves this size, record them again where their times hold steadier (a dedicated runner, "
        "not a shared VM; -v: each test's line with its ranges): pytest --opprof-update-baseline=all 't.py::t[0]' "
        "'t.py::t[1]' 't.py::t[2]'"
    )
    assert all(line.startswith("t.py::u: time inconclusive for aten::") for line in lines[:-1]) and len(lines) == 3
    assert "in 3 tests" not in format_problems(records, verbose=True)
    assert "in 2 tests" not in format_problems(records[:2]) and len(format_problems(records[:2]).splitlines()) == 2
