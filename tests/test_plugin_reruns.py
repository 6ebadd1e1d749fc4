"""A test that runs again in one session (pytest-rerunfailures, or any plugin that reruns an item):
the report, the summary and the JUnit properties hold its last run, and say how many there were."""

from __future__ import annotations

import csv
import importlib.util
import json
import xml.etree.ElementTree as ET
from fnmatch import fnmatch
from pathlib import Path

import pytest

from pytest_opprof.results import export_trace_path

torch = pytest.importorskip("torch")

# What pytest-rerunfailures does, in short: run a failing item's protocol again (up to 3 runs),
# logging each failed run's reports as "rerun", then the last run's as they are.
RERUN_CONFTEST = """
import pytest
from _pytest.runner import runtestprotocol

RUNS = 3


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for run in range(1, RUNS + 1):
        last = run == RUNS
        reports = runtestprotocol(item, nextitem=nextitem if last else None, log=False)
        again = not last and any(r.failed for r in reports)
        for report in reports:
            if again and report.failed:
                report.outcome = "rerun"
            item.ihook.pytest_runtest_logreport(report=report)
        if not again:
            break
        item._initrequest()
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_report_teststatus(report):
    if report.outcome == "rerun":
        return "rerun", "R", "RERUN"
"""

TESTS = """
import pytest
import torch

RUNS = {"flaky": 0}
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
x = torch.randn(4, 32)


def test_flaky(opprof):
    opprof.run(model, x, warmup=1, steps=3)
    RUNS["flaky"] += 1
    assert RUNS["flaky"] == 3, "fails twice, then passes"


@pytest.mark.opprof
def test_always_fails():
    with torch.no_grad():
        model(x)
    assert False, "always"


def test_steady(opprof):
    opprof.run(model, x, warmup=1, steps=2)
"""


@pytest.fixture
def reran(pytester: pytest.Pytester, fake_clock) -> tuple[pytest.RunResult, dict, ET.Element, str]:
    pytester.makeconftest(RERUN_CONFTEST)
    pytester.makepyfile(test_user=TESTS)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--opprof",
        "--opprof-json=r.json", "--opprof-csv=r.csv", "--opprof-html=r.html", "--junitxml=j.xml",
        "--opprof-trace-dir=traces",
    )  # fmt: skip
    report = json.loads((pytester.path / "r.json").read_text())
    return result, report, ET.parse(pytester.path / "j.xml").getroot(), (pytester.path / "r.csv").read_text()


def test_the_json_report_holds_one_entry_per_test_the_last_runs(reran):
    """One entry per test, the last run's, with how many runs and the earlier ones' outcomes."""
    result, report, _, _ = reran
    assert result.parseoutcomes() == {"passed": 2, "failed": 1, "rerun": 4}
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    assert [t["nodeid"] for t in report["tests"]] == sorted(t["nodeid"] for t in report["tests"])
    assert len(report["tests"]) == 3
    assert (tests["test_flaky"]["outcome"], tests["test_flaky"]["attempts"]) == ("passed", 3)
    assert tests["test_flaky"]["earlier_outcomes"] == ["failed", "failed"]
    assert (tests["test_always_fails"]["outcome"], tests["test_always_fails"]["attempts"]) == ("failed", 3)
    assert (tests["test_steady"]["attempts"], tests["test_steady"]["earlier_outcomes"]) == (1, [])


def test_the_summary_lists_a_rerun_test_once_and_says_it_ran_again(reran):
    """One table per test (it was one per run), and one line saying how many runs there were."""
    result, _, _, _ = reran
    out = result.stdout.str()
    assert out.count("test_user.py::test_flaky [passed] (3 steps") == 1
    assert out.count("test_user.py::test_always_fails [failed]") == 1
    result.stdout.fnmatch_lines(
        [
            "test_user.py::test_flaky: ran 3 times (rerun, or collected more than once): the report holds the last run (passed); "
            "the earlier ones: failed, failed",
            "test_user.py::test_always_fails: ran 3 times (rerun, or collected more than once): the report holds the last run (failed); "
            "the earlier ones: failed, failed",
        ]
    )
    assert "test_steady: ran" not in out
    assert "not judged for 3 tests" not in out  # each test counted once in the run's lines


def test_a_failed_runs_trace_stays_when_a_later_run_passes(reran, pytester):
    """The timeline of a flaky failure is what one wants: a passing rerun does not remove it."""
    result, report, _, _ = reran
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    flaky = tests["test_flaky"]
    assert flaky["trace"] is None  # the last run passed: no trace of its own
    assert fnmatch(flaky["earlier_trace"], "traces/test_user.py_test_flaky-*.json.gz")
    assert (pytester.path / flaky["earlier_trace"]).is_file()
    result.stdout.fnmatch_lines(["test_user.py::test_flaky: trace of an earlier run kept at traces/*test_flaky*"])
    failing = tests["test_always_fails"]
    assert failing["trace"] and failing["earlier_trace"] is None  # its own, the last run's
    assert tests["test_steady"]["trace"] is None and tests["test_steady"]["earlier_trace"] is None


def test_junit_properties_are_the_runs_own_not_piled_up(reran):
    """The item keeps its user_properties between runs: each run's testcase has its own figures."""
    _, _, junit, _ = reran
    for case in junit.iter("testcase"):
        names = [p.get("name") for p in case.iter("property")]
        assert len(names) == len(set(names)), case.get("name")
        assert names.count("opprof.op.aten::addmm.ms_per_step") == 1


def test_csv_and_html_hold_one_runs_rows_per_test(reran, pytester):
    """The CSV and the HTML page, like the JSON, hold the last run's rows and section only."""
    _, _, _, table = reran
    rows = [line.split(",") for line in table.splitlines()[1:]]
    flaky_ops = [row[1] for row in rows if row[0].endswith("::test_flaky")]
    assert flaky_ops and len(flaky_ops) == len(set(flaky_ops))
    page = (pytester.path / "r.html").read_text()
    assert page.count('data-nodeid="test_user.py::test_flaky"') == 1


@pytest.mark.skipif(importlib.util.find_spec("pytest_rerunfailures") is None, reason="pytest-rerunfailures absent")
def test_with_pytest_rerunfailures_itself(pytester, fake_clock):
    """The real plugin, where installed (CI does not install it: the simulation above stands in)."""
    pytester.makepyfile(test_user=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "--opprof", "--reruns", "2", "--opprof-json=r.json")
    assert result.parseoutcomes() == {"passed": 2, "failed": 1, "rerun": 4}
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert len(tests) == 3
    assert (tests["test_flaky"]["outcome"], tests["test_flaky"]["earlier_outcomes"]) == ("passed", ["failed", "failed"])


SETUP_FAILS_LATER = """
import pytest
import torch

RUNS = {"n": 0}


@pytest.fixture
def flaky_resource():
    RUNS["n"] += 1
    if RUNS["n"] > 1:
        raise RuntimeError("resource gone")


def test_x(flaky_resource, opprof):
    opprof.run(lambda: torch.ones(3) + 1, warmup=1, steps=2)
    assert False, "first run fails in its call"
"""


def test_a_last_run_that_ends_at_setup_carries_no_earlier_runs_figures(pytester, fake_clock):
    """Run 1 measured and failed; runs 2 and 3 failed at setup: the last testcase has no figures of
    run 1 (its properties were only replaced by a run that measured)."""
    pytester.makeconftest(RERUN_CONFTEST)
    pytester.makepyfile(test_user=SETUP_FAILS_LATER)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--opprof", "--junitxml=j.xml")
    assert result.parseoutcomes() == {"errors": 1, "rerun": 2}
    cases = list(ET.parse(pytester.path / "j.xml").getroot().iter("testcase"))
    first, last = (
        [p.get("name") for p in cases[0].iter("property")],
        [p.get("name") for p in cases[-1].iter("property")],
    )
    assert "opprof.wall_ms" in first and not [name for name in last if name.startswith("opprof.")]


def test_each_worker_of_dist_each_keeps_its_own_record(pytester):
    """`-n 2 --dist each` runs every test on each worker: two measurements, not a rerun, each
    entry of the JSON report naming its worker (a script could not tell them apart)."""
    pytester.makepyfile(
        test_user="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--opprof", "-n", "2", "--dist", "each", "--opprof-json=r.json",
        "--opprof-csv=r.csv", "--opprof-html=r.html", "--junitxml=j.xml",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert [(t["nodeid"], t["attempts"]) for t in tests] == [("test_user.py::test_x", 1)] * 2
    cases = ET.parse(pytester.path / "j.xml").getroot().iter("testcase")  # junit's two cases too (a trial)
    workers = [p.get("value") for case in cases for p in case.iter("property") if p.get("name") == "opprof.worker"]
    assert sorted(workers) == ["gw0", "gw1"]
    assert [t["worker"] for t in tests] == ["gw0", "gw1"]
    # the CSV's rows, the terminal's and the HTML's headers say which worker's run they are of
    with open(pytester.path / "r.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["worker"] for r in rows} == {"gw0", "gw1"}
    assert sorted(r["op"] for r in rows if r["worker"] == "gw0") == sorted(
        r["op"] for r in rows if r["worker"] == "gw1"
    )
    result.stdout.fnmatch_lines_random(
        ["test_user.py::test_x [[]passed on gw0] (*", "test_user.py::test_x [[]passed on gw1] (*"]
    )
    page = (pytester.path / "r.html").read_text()
    assert '<span class="worker">on gw0</span>' in page and '<span class="worker">on gw1</span>' in page
    assert "ran 2 times" not in result.stdout.str()


def test_recording_under_dist_each_counts_each_baseline_file_once(pytester):
    """`--dist each` records every test on each worker: the first writes the file, the other
    finds it unchanged. A CI trial's 3 tests read `3 changed; kept 3 unchanged`: one count per
    file, as written."""
    pytester.makepyfile(
        test_user="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
        "def test_y(opprof):\n    opprof.run(lambda: torch.ones(3) * 2, steps=2)\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--opprof-update-baseline", "-n", "2", "--dist", "each")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["opprof: baselines written: 2 new; kept 0 unchanged *"])


def test_each_worker_of_dist_each_writes_its_own_trace(pytester):
    """Each worker's failing run keeps its timeline: one file per worker, each named in the JSON."""
    pytester.makepyfile(
        test_user="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
        "    assert False, 'fails on each worker'\n"
    )
    flags = "-p no:cacheprovider --opprof -n 2 --dist each --opprof-json=r.json --opprof-trace-dir=traces"
    result = pytester.runpytest(*flags.split())
    result.assert_outcomes(failed=2)
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    expected = [export_trace_path(Path("traces"), "test_user.py::test_x", f"gw{i}") for i in (0, 1)]
    assert sorted(Path(t["trace"]) for t in tests) == expected
    assert sorted(p.relative_to(pytester.path) for p in (pytester.path / "traces").iterdir()) == expected


def test_a_passing_run_removes_the_tests_traces_of_the_other_naming(pytester, monkeypatch):
    """A plain run's passing test removes the `.gwN` traces a `--dist each` run left, and the
    other way round: an old file never passes for this run's."""
    pytester.makepyfile(
        test_user="import os, torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
        "    assert not os.environ.get('FAILIT')\n"
    )
    traces = pytester.path / "traces"
    each = ("-p", "no:cacheprovider", "--opprof", "--opprof-trace-dir=traces", "-n", "2", "--dist", "each")
    plain = ("-p", "no:cacheprovider", "--opprof", "--opprof-trace-dir=traces")
    monkeypatch.setenv("FAILIT", "1")
    pytester.runpytest(*each).assert_outcomes(failed=2)
    assert len(list(traces.iterdir())) == 2
    monkeypatch.delenv("FAILIT")
    pytester.runpytest(*plain).assert_outcomes(passed=1)
    assert list(traces.iterdir()) == []
    monkeypatch.setenv("FAILIT", "1")
    pytester.runpytest(*plain).assert_outcomes(failed=1)
    assert [p.name for p in traces.iterdir()] == [export_trace_path(traces, "test_user.py::test_x").name]
    monkeypatch.delenv("FAILIT")
    pytester.runpytest(*each).assert_outcomes(passed=2)
    assert list(traces.iterdir()) == []


def test_a_rerun_without_opprof_gets_a_fixture_of_its_own(pytester):
    """A plain run leaves the test's fixture in its item's stash: a review found a rerun given that
    earlier run's fixture, whose ended call let a misuse (an assertion before run()) pass. Each run
    gets its own, and the misuse fails every time."""
    pytester.makeconftest(RERUN_CONFTEST)
    pytester.makepyfile(
        test_misuse="""
        import torch

        def test_assert_before_run(opprof):
            opprof.assert_op_count("aten::mm", 1)
            opprof.run(torch.mm, torch.ones(2, 2), torch.ones(2, 2))
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.parseoutcomes() == {"failed": 1, "rerun": 2}
    result.stdout.fnmatch_lines(["*OpprofUsageError: 1 assertion made before opprof.run()*"])


def test_a_rerun_of_a_test_that_set_its_own_count_is_no_victim_of_itself(pytester, fake_clock):
    """A review: a test that sets torch's thread count for its measurement and leaves it so, run
    again after a failure (pytest-rerunfailures), was told it ran on the count `it` left, as a
    victim of its own leak, and its baseline was not written. Its rerun is its own; the test
    after it is the leak's victim."""
    threads = torch.get_num_threads()
    pytester.makeconftest(RERUN_CONFTEST)
    pytester.makepyfile(
        test_user=f"""
import torch

RUNS = {{"n": 0}}
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
x = torch.randn(4, 32)


def test_pins(opprof):
    torch.set_num_threads({threads + 1})
    opprof.run(model, x, warmup=1, steps=3)
    RUNS["n"] += 1
    assert RUNS["n"] > 1, "flaky"


def test_after(opprof):
    opprof.run(model, x, warmup=1, steps=3)
"""
    )
    try:
        result = pytester.runpytest("-p", "no:cacheprovider", "--opprof-update-baseline", "--opprof-json=r.json")
    finally:
        torch.set_num_threads(threads)
    result.assert_outcomes(passed=2)
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert tests["test_pins"]["earlier_outcomes"] == ["failed"]
    assert tests["test_pins"]["baseline"]["status"] == "new"
    assert "threads" not in [c["name"] for c in tests["test_pins"]["checks"]]
    assert tests["test_after"]["baseline"]["status"] == "unreliable"
    result.stdout.fnmatch_lines(
        ["opprof: test_user.py::test_pins changed torch's thread count * test_user.py::test_after"]
    )
