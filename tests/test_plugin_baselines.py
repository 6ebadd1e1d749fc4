"""End to end: baselines recorded, compared, kept, and paired with renamed or moved tests, through pytest runs of a user project."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from fnmatch import fnmatch
from glob import escape as glob_escape
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fake_clock import WORKER_FAKE_CLOCK  # noqa: E402
from plugin_project import deterministic_fixture, project_fixture, run  # noqa: F401 (fixtures: used by name)

from pytest_opprof import device  # noqa: E402
from pytest_opprof.cli import main as cli_main  # noqa: E402
from pytest_opprof.device import python_tracer, thread_setup  # noqa: E402


def _run_kept(line: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs the `opprof mv` of a `keep its baseline:` line as written, from `cwd`."""
    argv = shlex.split(line.split("keep its baseline: ", 1)[1])
    assert argv[:2] == ["opprof", "mv"]
    with monkeypatch.context() as m:
        m.chdir(cwd)
        assert cli_main(argv[1:]) == 0


def _keep_renamed(result: pytest.RunResult, cwd: Path, monkeypatch: pytest.MonkeyPatch, renamed) -> list[str]:
    """Runs every `keep its baseline:` line's `opprof mv`, after checking each moves the file of the
    test `renamed(old node id)` names; the tests the lines name, sorted."""
    lines = sorted(line for line in result.stdout.lines if "keep its baseline" in line)
    for line in lines:
        old, nodeid = shlex.split(line.split("opprof mv ")[1])
        assert renamed(json.loads((cwd / old).read_text())["nodeid"]) == nodeid
        _run_kept(line, cwd, monkeypatch)
    return [line.split(" has no baseline")[0] for line in lines]


# -- baselines --------------------------------------------------------------------------------

ORPHAN_TESTS = """
import os
import pytest
from conftest import infer

@pytest.mark.parametrize("p", os.environ.get("OPPROF_T_PARAMS", "a,b").split(","))
def test_p(opprof, mlp, p):
    opprof.run(infer, *mlp, warmup=1, steps=2)

def test_other(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""


def test_a_recording_names_a_baseline_path_too_long_for_a_windows_checkout(project):
    """A test in a deep folder with a long parameter id records a baseline whose path a Windows
    checkout cannot hold (260 characters with its folder): the recording run names it, a
    comparing run does not; a short one beside it is not named."""
    folder = "d" * 90
    project.mkdir(folder)
    (project.path / folder / "test_deep.py").write_text(
        "import pytest\n"
        "from conftest import infer\n\n"
        f"@pytest.mark.parametrize('p', ['{'p' * 90}', 'short'])\n"
        "def test_x(opprof, mlp, p):\n"
        "    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    recorded = run(project, "--opprof-update-baseline")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(
        [f"opprof: 1 baseline file written with a path over 200 characters (the longest 2*: .opprof/*/{folder}/"
         "test_deep.py/test_x[[]ppp*].json): a Windows checkout of the repository fails on paths past 260 *"]
    )  # fmt: skip
    assert "over 200 characters" not in run(project, "--opprof").stdout.str()


@pytest.mark.parametrize("xdist", [False, True])
def test_a_renamed_tests_baseline_is_named_as_read_by_no_test(project, monkeypatch, xdist):
    """A parameter renamed b -> c leaves test_p[b].json read by no test: one summary line names
    it (from an xdist worker's collection too) and the file stays; tests left out by -k are still
    known, and a file whose tests a node id picked is not judged."""
    project.makepyfile(test_o=ORPHAN_TESTS)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=3)
    old = next(project.path.glob(".opprof/*/test_o.py/test_p[[]b].json"))
    monkeypatch.setenv("OPPROF_T_PARAMS", "a,c")
    out = project.path / "run.json"
    if xdist:
        pytest.importorskip("xdist")
        result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--opprof", f"--opprof-json={out}")
    else:
        result = run(project, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(passed=3)
    assert json.loads(out.read_text())["orphan_baselines"] == [old.relative_to(project.path).as_posix()]
    lines = [line for line in result.stdout.lines if "read by no test" in line]
    shown = old.relative_to(project.path).as_posix()
    assert lines == [
        f"opprof: 1 baseline file in the folders of the collected test files, or of test files that no longer exist, "
        f"is read by no test (renamed, moved or removed tests?): {shown}; it may be the baseline of a test below "
        f"that had none (renamed or moved: its line keeps it); if not, delete it (and commit the deletion): rm -- "
        f"'{shown}'",
        f"opprof: test_o.py::test_p[c] has no baseline, and {shown} is read by no test: if the test was "
        f"renamed, keep its baseline: opprof mv '{shown}' 'test_o.py::test_p[c]'",
    ]
    assert old.is_file()
    if xdist:
        return
    run(project, "--opprof", "-k", "test_other", f"--opprof-json={out}").assert_outcomes(passed=1)
    assert json.loads(out.read_text())["orphan_baselines"] == [shown]  # -k leaves test_p[a], [c] out, not unknown
    assert "read by no test" not in run(project, "--opprof", "test_o.py::test_other").stdout.str()
    monkeypatch.setenv("OPPROF_T_PARAMS", "a,b")
    assert "read by no test" not in run(project, "--opprof", "-k", "test_other").stdout.str()
    # run from a subfolder, the command reaches the files from there, and runs (a review's rm failed)
    monkeypatch.setenv("OPPROF_T_PARAMS", "a,c")
    (project.path / "sub").mkdir()
    monkeypatch.chdir(project.path / "sub")
    result = run(project, "--opprof", "--rootdir", str(project.path), str(project.path))
    (line,) = [line for line in result.stdout.lines if "read by no test (" in line]
    command = line.split("(and commit the deletion): ", 1)[1]
    assert command == f"rm -- '../{shown}'"
    subprocess.run(shlex.split(command), check=True)
    assert not old.exists()


SHARDER = """

def pytest_collection_modifyitems(config, items):
    # as pytest-shard does: the items of the other shards dropped, no pytest_deselected
    import os
    shard = os.environ.get("OPPROF_T_SHARD")
    if shard:
        i, n = map(int, shard.split("/"))
        if os.environ.get("OPPROF_T_SHARD_SAYS"):  # as pytest-split does
            config.hook.pytest_deselected(items=[item for k, item in enumerate(items) if k % n != i])
        items[:] = [item for k, item in enumerate(items) if k % n == i]
"""


@pytest.mark.parametrize(("xdist", "says"), [(False, ""), (True, ""), (False, "1")])
def test_a_shard_that_drops_the_other_shards_tests_calls_none_of_their_baselines_orphans(
    project, monkeypatch, xdist, says
):
    """A sharding trial: pytest-shard drops the other shards' items without pytest_deselected, and
    each shard called their baselines read by no test, offering `rm` for them, and told a test
    without a baseline to record with a bare `pytest --opprof-update-baseline`, which recorded every
    other shard's change too (pytest-split, which says it deselects, got the bare command alone).
    Tests a plugin drops are left out as -k leaves them: no orphan line, and the record command
    names the test."""
    from plugin_project import USER_CONFTEST

    monkeypatch.setenv("OPPROF_T_SHARD_SAYS", says)

    project.makeconftest(USER_CONFTEST + SHARDER)
    project.makepyfile(test_o=ORPHAN_TESTS)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=3)
    out = project.path / "run.json"
    run(project, "--opprof", f"--opprof-json={out}")
    assert json.loads(out.read_text())["partial"] is False  # a whole run
    monkeypatch.setenv("OPPROF_T_SHARD", "1/2")  # test_p[b] only
    assert "read by no test" not in run(project, "--opprof", f"--opprof-json={out}").stdout.str()
    assert json.loads(out.read_text())["partial"] is True  # a merge of shards' reports tells them apart
    for name in ("test_other", "test_p[[]a]"):  # every test of shard 0 without its baseline
        next(project.path.glob(f".opprof/*/test_o.py/{name}.json")).unlink()
    monkeypatch.setenv("OPPROF_T_SHARD", "0/2")  # test_p[a] and test_other
    if xdist:
        pytest.importorskip("xdist")
        result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--opprof")
    else:
        result = run(project, "--opprof")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "read by no test" not in out
    (line,) = [line for line in result.stdout.lines if line.startswith("opprof: no baseline for 2 tests")]
    assert line.endswith("pytest --opprof-update-baseline test_o.py::test_other 'test_o.py::test_p[a]'")


def test_a_renamed_test_a_run_left_out_keeps_its_baselines_move_not_an_rm(project, monkeypatch):
    """A sharding trial renamed a test and ran a shard without it (-k, --deselect, a pytest-split
    group): that shard offered `rm` for the old baseline, the shard that ran it `opprof mv`.
    A test left out without a baseline pairs with the orphan as one that ran does; a run that
    picked some tests says it may miss a test moved elsewhere."""
    project.makepyfile(test_o=ORPHAN_TESTS)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=3)
    shown = next(project.path.glob(".opprof/*/test_o.py/test_p[[]b].json")).relative_to(project.path).as_posix()
    monkeypatch.setenv("OPPROF_T_PARAMS", "a,c")  # test_p[b] renamed test_p[c]
    result = run(project, "--opprof", "-k", "test_other")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline file * is read by no test (*): *; this run picked some of the tests: a test moved "
            "to a file it did not collect is paired only by a run that does; it may be the baseline of a test below*",
            f"opprof: test_o.py::test_p[[]c] has no baseline, and {glob_escape(shown)} is read by no test: if the test "
            f"was renamed, keep its baseline: opprof mv '{glob_escape(shown)}' 'test_o.py::test_p[[]c]'",
        ]
    )
    assert "if not, delete it" in result.stdout.str()  # the rm stays conditional, the pair's line first


def test_a_folders_one_orphan_beside_one_test_left_out_without_a_baseline_is_said_as_either(project, monkeypatch):
    """A trial renamed test_drop -> test_drop2 and ran a shard without it: that shard offered `rm`
    for test_drop.json, the other `opprof mv`. A test left out pairs by name only (a GPU test left
    out of every CPU run is no rename of a deleted test's file), so a folder's one orphan and one
    such test get a line giving both: the `opprof mv` if it was renamed, the `rm` if not."""
    tests = (
        "from conftest import infer\n\n"
        "def test_other(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n\n"
        "def test_{name}(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    project.makepyfile(test_s=tests.format(name="drop"))
    run(project, "--opprof-update-baseline").assert_outcomes(passed=2)
    old = next(project.path.glob(".opprof/*/test_s.py/test_drop.json")).relative_to(project.path).as_posix()
    project.makepyfile(test_s=tests.format(name="drop2"))
    result = run(project, "--opprof", "-k", "not drop")
    result.assert_outcomes(passed=1)
    lines = [line for line in result.stdout.lines if "read by no test" in line]
    assert lines[-1] == (
        f"opprof: {old} is read by no test, and test_s.py::test_drop2, left out of this run, has no baseline: if it "
        f"was renamed from that test, keep its baseline: opprof mv {old} test_s.py::test_drop2; if not, delete the "
        f"file: rm -- {old}"
    )
    assert "it may be the baseline of a test below that had none" in lines[0]
    result = run(project, "--opprof")  # the run that runs it pairs it as ever
    assert (
        f"test_s.py::test_drop2 has no baseline, and {old} is read by no test: if the test was renamed"
        in result.stdout.str()
    )


def test_a_renamed_test_recorded_anew_is_told_to_compare_with_its_old_baseline(project, monkeypatch):
    """A sharding trial renamed a test and recorded: `1 new`, and an `rm` for the old file, whose
    times the recording never compared with (a slowdown in the same change went in unjudged).
    The new file's test and the old file pair up: one line gives the comparison of the two and
    the commands that keep either; both files stay. Each command runs as given."""
    project.makepyfile(test_o=ORPHAN_TESTS)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=3)
    folder = next(project.path.glob(".opprof/*/test_o.py"))
    old, new = (
        (folder / "test_p[b].json").relative_to(project.path),
        (folder / "test_p[c].json").relative_to(project.path),
    )
    monkeypatch.setenv("OPPROF_T_PARAMS", "a,c")
    result = run(project, "--opprof-update-baseline")
    result.assert_outcomes(passed=3)
    (line,) = [line for line in result.stdout.lines if "was recorded anew" in line]
    assert line == (
        f"opprof: test_o.py::test_p[c] was recorded anew, and {old.as_posix()} is read by no test: if the test was "
        f"renamed, the old file holds the times it had, not compared with this run's: opprof compare '{old.as_posix()}' "
        f"'{new.as_posix()}'; to keep the old one: rm -- '{new.as_posix()}', then opprof mv '{old.as_posix()}' "
        f"'test_o.py::test_p[c]'; else delete it: rm -- '{old.as_posix()}'"
    )
    assert (project.path / old).is_file() and (project.path / new).is_file()
    compare = line.split(": opprof compare ", 1)[1].split(";", 1)[0]
    assert cli_main(["compare", *shlex.split(compare)]) == 0
    keep = line.split("to keep the old one: ", 1)[1].split(";", 1)[0]
    for command in keep.split(", then "):
        argv = shlex.split(command)
        if argv[0] == "rm":
            subprocess.run(argv, check=True, cwd=project.path)
        else:
            monkeypatch.chdir(project.path)
            assert cli_main(argv[1:]) == 0
    assert json.loads((project.path / new).read_text())["nodeid"] == "test_o.py::test_p[c]"
    assert not (project.path / old).exists()


def test_last_failed_runs_name_no_orphans(project, monkeypatch):
    """--lf drops a file's passed tests without deselecting them: their baselines are not named
    as read by no test (a review's find: the line told to delete live baselines)."""
    project.makepyfile(
        test_lf="""
        import os, torch
        def test_pass(opprof):
            opprof.run(torch.mm, torch.ones(4, 4), torch.ones(4, 4), warmup=1, steps=2)
        def test_flaky(opprof):
            opprof.run(torch.mm, torch.ones(4, 4), torch.ones(4, 4), warmup=1, steps=2)
            assert not os.environ.get("FAILIT")
        """
    )
    lf = ("-p", "no:randomly")  # the cache provider on: --lf needs it
    project.runpytest(*lf, "--opprof-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAILIT", "1")
    project.runpytest(*lf, "--opprof").assert_outcomes(passed=1, failed=1)
    result = project.runpytest(*lf, "--opprof", "--lf")
    result.assert_outcomes(failed=1)
    assert "read by no test" not in result.stdout.str()
    assert (project.path / ".opprof").is_dir() and len(list(project.path.glob(".opprof/*/test_lf.py/*.json"))) == 2


BASELINE_TESTS = """
import os
import pytest
import torch

INJECT = os.environ.get("OPPROF_INJECT", "")


def make(width):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(), torch.nn.Linear(width, 256)).eval()


def infer(model, x):
    with (torch.enable_grad() if INJECT == "forgot_no_grad" else torch.no_grad()):
        y = model(x)
        if INJECT == "extra":
            y = y.clone()
        if "hook" in INJECT:  # the same ops; time outside them (the fake clock gives it its cost)
            with torch.autograd.profiler.record_function("slow_hook"):
                pass
        return y


def traced(fn):  # fn under a Python tracer when INJECT says so (as coverage, a debugger or cProfile would)
    if "traced" not in INJECT and "profiled" not in INJECT:
        return fn()
    import sys

    put, read = (sys.setprofile, sys.getprofile) if "profiled" in INJECT else (sys.settrace, sys.gettrace)
    before = read()
    put(lambda frame, event, arg: None)
    try:
        return fn()
    finally:
        put(before)


def limited(fn):  # fn on one thread, the count restored before it returns
    def call(*args):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args)
        finally:
            torch.set_num_threads(threads)

    return call


def test_big(opprof):
    width = 4096 if INJECT == "wide" else 1024  # "wide": same ops, 4x the matmul work
    threads = torch.get_num_threads()
    if INJECT == "threads":  # the same work on another number of threads, set by the test
        torch.set_num_threads(1 if threads > 1 else 2)
    try:
        fn = limited(infer) if INJECT == "limited" else infer
        traced(lambda: opprof.run(fn, make(width), torch.randn(64, 256), warmup=2, steps=6))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", ["float32", "a/b c"])
def test_tiny(opprof, dtype):
    # far below the 0.05 ms floor: only structure is ever compared
    opprof.run(lambda: torch.ones(4).add(1), warmup=2, steps=4)
"""


@pytest.fixture
def baselined(pytester, monkeypatch, fake_clock):
    """A project whose baselines were just recorded (aten::addmm 0.2 ms a call on the fake clock)."""
    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    fake_clock.costs["aten::addmm"] = 200_000
    pytester.makepyfile(test_base=BASELINE_TESTS)
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: baselines written: 3 new; kept 0 unchanged*",
            # test_big's run() of 6 steps; test_tiny's 4 steps are never judged on time: no range
            "opprof: 1 file written with the range of each op's time over 4 measurements*",
        ]
    )
    return pytester


def test_junitxml_carries_the_baseline_verdicts(baselined, monkeypatch):
    """DESIGN §8: junitxml carries the verdicts as properties (a trial found only the numbers):
    what the baseline step did, and each verdict by kind and op, `<status>: <message>`."""
    monkeypatch.setenv("OPPROF_INJECT", "extra")
    run(baselined, "--opprof", "--junitxml=junit.xml", "-k", "big").assert_outcomes(failed=1)
    (case,) = ET.parse(baselined.path / "junit.xml").iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["opprof.baseline"] == "compared"
    (structure,) = [k for k in props if k.startswith("opprof.verdict.structure")]
    assert props[structure].startswith("changed: ") and "aten::clone" in props[structure]
    monkeypatch.delenv("OPPROF_INJECT")
    run(baselined, "--opprof", "--junitxml=junit.xml", "-k", "big").assert_outcomes(passed=1)
    (case,) = ET.parse(baselined.path / "junit.xml").iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["opprof.baseline"] == "compared" and not [k for k in props if k.startswith("opprof.verdict.")]


def test_keys_of_a_teams_own_in_a_baseline_stay_when_a_recording_rewrites_it(baselined, monkeypatch):
    """A `"comment"` at a baseline's top and a note in an op's entry (the docs say such keys are
    read past) are kept when a recording rewrites the file for a work change: an upgrade trial's
    `"comment": "addmm budget agreed with perf team"` went in silence. The op's note goes with an
    op that no longer runs; nothing else of the old file is carried."""
    (path,) = [p for p in (baselined.path / ".opprof").rglob("*.json") if p.name == "test_big.json"]
    data = json.loads(path.read_text())
    data["comment"] = "addmm budget agreed with perf team, PR #12"
    data["ops"]["aten::addmm"]["note"] = "two Linear layers"
    data["ops"]["aten::relu"]["note"] = "kept"
    path.write_text(json.dumps(data, indent=2))
    monkeypatch.setenv("OPPROF_INJECT", "wide")  # 4x the matmul work: a work change, rewritten
    result = run(baselined, "--opprof-update-baseline", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 changed*"])
    written = json.loads(path.read_text())
    assert written["comment"] == "addmm budget agreed with perf team, PR #12"
    assert (written["ops"]["aten::addmm"]["note"], written["ops"]["aten::relu"]["note"]) == (
        "two Linear layers",
        "kept",
    )
    assert written["ops"]["aten::addmm"]["work"] != data["ops"]["aten::addmm"]["work"]  # the new measurement's
    assert set(written) - set(data) <= {"outside_ms", "workload_reference"} and set(data) - set(written) == set()


def test_an_added_op_says_where_it_ran(baselined, monkeypatch):
    """A structure verdict's added op says where it ran in this measurement, its callers and inputs
    (a CI log's `+ aten::clone (1/step)` named no caller: the reader opened the trace to find it);
    the junit property and the JSON report carry the same text."""
    monkeypatch.setenv("OPPROF_INJECT", "extra")  # y.clone() after the model
    out = baselined.path / "run.json"
    result = run(baselined, "--opprof", "-k", "big", f"--opprof-json={out}")
    result.assert_outcomes(failed=1)
    (line,) = [line for line in result.stdout.lines if line.startswith("test_base.py::test_big: structure changed")]
    assert "+ aten::clone (1/step, called from Python; inputs float[64,256])" in line
    (test,) = json.loads(out.read_text())["tests"]
    assert any(
        "+ aten::clone (1/step, called from Python; inputs float[64,256])" in v["message"]
        for v in test["baseline"]["verdicts"]
    )


def baseline_files(pytester):
    return sorted(p.relative_to(pytester.path).as_posix() for p in (pytester.path / ".opprof").rglob("*.json"))


def test_costly_work_in_one_step_fails_and_the_warning_names_it(pytester, monkeypatch):
    """A trial's 20 extra matmuls in one of 10 steps (100x a step) passed with only a warning:
    an op on one side only, in one step, is a time verdict when it costs more there than the
    time rule's tolerance of a step; the step_events warning names the uneven op, and the table
    shows it beyond --opprof-top (its median is 0)."""
    pytester.makepyfile(
        """
        import os
        import torch
        def test_once(opprof):
            w, profiled = torch.ones(8, 8), []
            def step():
                profiled.append(torch.autograd._profiler_enabled())
                y = torch.relu(w)
                if os.environ.get("OPPROF_INJECT") == "once" and sum(profiled) == 4 and profiled[-1]:
                    for _ in range(20):
                        y = w @ w
                return y
            opprof.run(step, warmup=1, steps=10)
        """
    )
    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_INJECT", "once")
    result = run(pytester, "--opprof", "--opprof-top", "1")
    result.assert_outcomes(failed=1)
    table = result.stdout.str().split("test_once [failed]")[1].split("\n\n")[0]
    # the top op, then those a verdict names (table rows: a name, then the calls column)
    rows = [m[1] for line in table.splitlines() if (m := re.match(r"(aten::\S+) {2,}\d", line))]
    assert rows == ["aten::relu", "aten::matmul", "aten::mm", "aten::resolve_conj"], table
    result.stdout.fnmatch_lines(
        [
            "*time: aten::matmul: ran in 1 of 10 steps, 1.000 ms there, where the baseline never ran it (limit 0.050 ms*",
            "*warning step_events: CPU ops per step differ between steps (*); calls per step of aten::matmul (0, 0, 0, 20, *",
        ]
    )


def test_a_test_that_errs_in_its_teardown_is_not_recorded(pytester, monkeypatch):
    """The baseline is written when the call passes; a teardown error after it puts the file back
    as it was (a trial's changed file was rewritten while the test showed ERROR), and a new one
    is removed: the summary names the test as not recorded."""
    pytester.makepyfile(
        """
        import os
        import pytest
        import torch
        @pytest.fixture
        def model():
            yield torch.nn.Linear(8, 8)
            if os.environ.get("OPPROF_INJECT") == "teardown":
                raise RuntimeError("could not release the model")
            if os.environ.get("OPPROF_INJECT") == "exit":
                pytest.exit("stopped in teardown")
        def test_td(opprof, model):
            def step():
                y = model(torch.ones(2, 8))
                return y.clone() if os.environ.get("OPPROF_EXTRA") else y
            opprof.run(step, warmup=1, steps=2)
        def test_new(opprof, model):
            opprof.run(lambda: model(torch.ones(2, 8)), warmup=1, steps=2)
        """
    )
    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    run(pytester, "--opprof-update-baseline", "-k", "test_td").assert_outcomes(passed=1)
    (td,) = (pytester.path / ".opprof").rglob("test_td.json")
    before = td.read_bytes()
    monkeypatch.setenv("OPPROF_INJECT", "teardown")
    monkeypatch.setenv("OPPROF_EXTRA", "1")
    result = run(pytester, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["opprof: 2 tests not recorded: they failed or erred *"])
    assert td.read_bytes() == before and not list((pytester.path / ".opprof").rglob("test_new*"))
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert [(t["outcome"], t["baseline"]) for t in tests] == [("error", None), ("error", None)]
    # a run stopped in the teardown (no teardown report) puts the file back too (a trial's was rewritten)
    # (pytest.exit; Ctrl-C takes the same path, and pytester would raise it into this session)
    monkeypatch.setenv("OPPROF_INJECT", "exit")
    result = run(pytester, "--opprof-update-baseline", "-k", "test_td")
    assert result.ret == pytest.ExitCode.INTERRUPTED and td.read_bytes() == before


STOPPING_TESTS = """
import os
import pytest
import torch
@pytest.fixture
def stopper():
    yield
    if os.environ.get("STOP") == "teardown":
        pytest.exit("stopped in teardown")
    if os.environ.get("STOP") == "ctrl-c":
        raise KeyboardInterrupt
def test_a(opprof):
    opprof.run(lambda: torch.ones(4) + 1, warmup=1, steps=2)
def test_b(opprof, stopper):
    opprof.run(lambda: torch.ones(4) * 2, warmup=1, steps=2)
    if os.environ.get("STOP") == "call":
        pytest.exit("stopped in the call")
def test_c(opprof):
    opprof.run(lambda: torch.ones(4) - 1, warmup=1, steps=2)
"""


@pytest.mark.parametrize(("stop", "finished"), [("teardown", ["test_a", "test_b"]), ("call", ["test_a"])])
def test_a_run_stopped_in_a_test_says_where_and_reports_what_got_that_far(pytester, monkeypatch, stop, finished):
    """A trial's pytest.exit or Ctrl-C in a fixture's teardown left the test, which pytest counted,
    out of every report, and the run read `no test was measured`. A test whose call ended is
    reported as it ended; one stopped in its call is not; the summary and the JSON say where the
    run stopped."""
    pytester.makepyfile(test_stop=STOPPING_TESTS)
    monkeypatch.setenv("STOP", stop)
    result = run(pytester, "--opprof", "--opprof-json=r.json", "--opprof-csv=r.csv")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    n = len(finished)
    result.stdout.fnmatch_lines(
        [
            f"opprof: the run stopped in test_stop.py::test_b (Ctrl-C or pytest.exit): {n} measured "
            f"test{'s' if n > 1 else ''} got that far; the reports hold {'them' if n > 1 else 'it'}, and the tests "
            "after it did not run"
        ]
    )
    assert "no test was measured" not in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["stopped_in"] == "test_stop.py::test_b"
    assert [(t["nodeid"].split("::")[1], t["outcome"]) for t in report["tests"]] == [(f, "passed") for f in finished]
    rows = (pytester.path / "r.csv").read_text().splitlines()[1:]
    assert sorted({row.split(",")[0].split("::")[1] for row in rows}) == finished


def test_a_ctrl_c_in_a_teardown_reports_the_test_and_where_the_run_stopped(pytester, monkeypatch):
    """Ctrl-C takes the path pytest.exit does (in a process of its own: pytester would raise it
    into this session): the test that passed its call is in the reports."""
    pytester.makepyfile(test_stop=STOPPING_TESTS)
    monkeypatch.setenv("STOP", "ctrl-c")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof", "--opprof-json=r.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["opprof: the run stopped in test_stop.py::test_b (Ctrl-C or pytest.exit): 2 *"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert (report["stopped_in"], [t["nodeid"] for t in report["tests"]]) == (
        "test_stop.py::test_b",
        ["test_stop.py::test_a", "test_stop.py::test_b"],
    )


def test_update_writes_one_file_per_test_under_the_device_key(baselined):
    """--opprof-update-baseline writes one JSON per measured test under one device-key folder."""
    files = baseline_files(baselined)
    assert len(files) == 3
    assert len({f.split("/")[1] for f in files}) == 1 and files[0].startswith(".opprof/cpu-")
    assert any(f.endswith("/test_base.py/test_big.json") for f in files)
    assert any("test_tiny[a_b_c]-" in f for f in files)  # parametrize id made safe, still unique


def test_rerun_passes_and_shows_baseline_columns(baselined, tmp_path):
    """With baselines in place a rerun passes; the table and the JSON carry the comparison."""
    out = tmp_path / "r.json"
    result = run(baselined, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["op * calls/step * ms/step * min * baseline min * delta * verdict"])
    test = next(t for t in json.loads(out.read_text())["tests"] if t["nodeid"].endswith("test_big"))
    assert test["baseline"]["status"] == "compared"
    assert test["baseline"]["path"].startswith(".opprof/cpu-")


def test_rerecording_unchanged_code_changes_no_file(baselined):
    """Re-recording within tolerance keeps the files byte-identical and says so."""
    tiny = [p for p in (baselined.path / ".opprof").rglob("*.json") if "test_tiny" in p.name]
    before = {p: p.read_bytes() for p in tiny}
    result = run(baselined, "--opprof-update-baseline", "-k", "tiny")
    result.stdout.fnmatch_lines(
        [
            "opprof: baselines written: none; kept 2 unchanged (no structure or work change, no conclusive time change; files untouched)"
        ]
    )
    assert {p: p.read_bytes() for p in tiny} == before


def test_update_all_rewrites_every_file(baselined):
    """--opprof-update-baseline=all rewrites even unchanged baselines."""
    tiny = next(p for p in (baselined.path / ".opprof").rglob("*.json") if "float32" in p.name)
    tiny.write_text(tiny.read_text().replace('"schema": 2', '"schema": 2 '))
    result = run(baselined, "--opprof-update-baseline=all", "-k", "tiny")
    result.stdout.fnmatch_lines(["opprof: baselines written: 2 rewritten; kept 0 unchanged*"])
    assert '"schema": 2,' in tiny.read_text()


def test_extra_op_fails_the_affected_tests_naming_it(baselined, monkeypatch):
    """One extra op per step fails the test that runs it, naming the op and the baseline file."""
    monkeypatch.setenv("OPPROF_INJECT", "extra")
    result = run(baselined, "--opprof")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*structure changed: + aten::clone (1/step, called from Python; *)*[[].opprof/cpu-*/test_base.py/test_big.json[]]"
        ]
    )
    # --opprof-top keeps the ops a structure verdict names in the table (it names them in its message only)
    result = run(baselined, "--opprof", "--opprof-top", "1", "-k", "big")
    table = result.stdout.str().split("test_big [failed]")[1].split("\n\n")[0]
    rows = [line.split()[0] for line in table.splitlines()[2:] if line.startswith("aten::")]
    assert rows == ["aten::linear", "aten::clone", "aten::copy_", "aten::empty_strided"], table


def test_a_recording_run_says_it_recorded_the_change(baselined, monkeypatch):
    """A recording run printed the change it wrote as a comparison does (`structure changed: ...`),
    which read like a failure in a passing run: its line says it was recorded."""
    monkeypatch.setenv("OPPROF_INJECT", "extra")
    result = run(baselined, "--opprof-update-baseline", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_big: recorded: structure changed: + aten::clone (1/step, called from Python; *"]
    )
    result = run(baselined, "--opprof", "-k", "big")  # recorded: the same code compares equal now
    result.assert_outcomes(passed=1)
    assert "structure changed" not in result.stdout.str()


def test_slower_matmul_fails_naming_addmm(baselined, fake_clock):
    """The same work taking 4x the time fails on time, naming aten::addmm in the baseline's numbers."""
    fake_clock.costs["aten::addmm"] = 800_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["aten::addmm: 1.700 ms/step vs baseline 0.500 ms (+240%, slower; limit +20%, p=*"])
    result.stdout.fnmatch_lines(["aten::addmm * 1.700 * 0.500 * +240% * slower"])  # the table: the same numbers
    result.stdout.fnmatch_lines(
        ["test_base.py::test_big: measured 4 times, with pauses between: each differs from the baseline; *"]
    )
    result.stdout.fnmatch_lines(  # a slower time may be the point (a larger model), as a structure change may;
        [  # only =all writes a slower time alone
            "test_base.py::test_big: if the change is intended, record it: pytest --opprof-update-baseline=all "
            "test_base.py::test_big (and commit the file)"
        ]
    )
    failure = result.stdout.str().split("_ test_big _")[1].split("\n=", 1)[0]  # the failure says it too
    assert failure.strip().splitlines()[-1] == (
        "if the change is intended, record it: pytest --opprof-update-baseline=all test_base.py::test_big "
        "(and commit the file)"
    )


def test_min_delta_ms_from_the_command_line_and_the_ini_spares_a_smaller_move(baselined, fake_clock):
    """aten::addmm +1.2 ms/step fails under the default 0.05 ms; a --opprof-min-delta-ms above the
    move passes it, and so does the ini key; one below it does not (a mutation trial: no test gave
    the option a value that reached a verdict, and a value read as None failed every test)."""
    fake_clock.costs["aten::addmm"] = 800_000
    run(baselined, "--opprof", "-k", "big", "--opprof-min-delta-ms=1.1").assert_outcomes(failed=1)
    result = run(baselined, "--opprof", "-k", "big", "--opprof-min-delta-ms=1.3")
    result.assert_outcomes(passed=1)
    assert "slower" not in result.stdout.str()
    baselined.makeini("[pytest]\nopprof_min_delta_ms = 1.3\n")
    run(baselined, "--opprof", "-k", "big").assert_outcomes(passed=1)


def test_a_slow_spell_only_the_tests_own_product_shows_is_inconclusive(baselined, monkeypatch, fake_clock):
    """The matmul and dispatch references steady, the test's own aten::addmm replayed alone 1.40x
    slower and the op +30% (a slow spell in the test's shapes: the noise bench's idle false
    failures): inconclusive, naming that reference; the baseline holds it. The op 4x slower is
    more than the spell explains: it fails."""
    from conftest import set_references

    base = json.loads(next((baselined.path / ".opprof").rglob("test_big.json")).read_text())
    assert base["workload_reference"]["op"] == "aten::addmm" and base["workload_reference"]["ms"] == 0.5
    set_references(monkeypatch, 1_000_000, 400_000, workload_ns=700_000)
    fake_clock.costs["aten::addmm"] = 800_000
    run(baselined, "--opprof", "-k", "big").assert_outcomes(failed=1)
    fake_clock.costs["aten::addmm"] = 260_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: time inconclusive for aten::addmm*: the machine ran 1.40x slower than when the "
            "baseline was recorded (aten::addmm on the test's inputs reference); *"
        ]
    )


def fails_then_inconclusive(baselined, monkeypatch, fake_clock, failing, passing) -> None:
    """`failing` and then `passing`: each (matmul ns, dispatch ns, {name: its cost ns}, the line
    the run prints), the first run failing test_big, the second passing it as inconclusive."""
    from conftest import set_references

    for (matmul, dispatch, costs, line), outcome in ((failing, {"failed": 1}), (passing, {"passed": 1})):
        set_references(monkeypatch, matmul, dispatch, workload_ns=None)
        fake_clock.costs.update(costs)
        result = run(baselined, "--opprof", "-k", "big")
        result.assert_outcomes(**outcome)
        result.stdout.fnmatch_lines([line])


def test_a_machine_slightly_slower_excuses_no_op_four_times_slower(baselined, monkeypatch, fake_clock):
    """A trial's ops x4 on a machine whose matmul reference ran 1.24x slower passed 5 of 6 runs as
    inconclusive: a slower machine explains an op up to four times its own slowdown (x1.96 here),
    so x3.4 fails, saying what the machine explains; x1.4 stays inconclusive."""
    fails_then_inconclusive(
        baselined, monkeypatch, fake_clock,
        (
            1_240_000, 400_000, {"aten::addmm": 800_000},
            "*aten::addmm: 1.700 ms/step vs baseline 0.500 ms (+240%, slower; limit +20%, p=*; the machine ran "
            "1.24x slower (matmul reference): that explains up to x1.96, not x3.40) *",
        ),
        (
            1_240_000, 400_000, {"aten::addmm": 300_000},
            "test_base.py::test_big: time inconclusive for aten::addmm, aten::linear: the machine ran 1.24x slower than *",
        ),
    )  # fmt: skip


def test_a_matmul_reference_stalled_alone_excuses_no_slower_step_wall(baselined, monkeypatch, fake_clock):
    """Beside two busy loops a trial's matmul reference ran 49x slower (both cores needed at once)
    while the dispatch reference held: it excused a step wall x57 (a 2 ms sleep), exit 0 in 3
    runs of 5. Stalled alone, it explains none of the Python between the ops (one thread), and the
    failure says why; with the dispatch reference past x4 too, the machine is slower and the
    wall inconclusive. An op keeps that excuse: it may run on torch's threads and stall alike."""
    monkeypatch.setenv("OPPROF_INJECT", "hook")
    fails_then_inconclusive(
        baselined, monkeypatch, fake_clock,
        (
            49_000_000, 400_000, {"slow_hook": 800_000},
            "*step wall: 0.800 ms/step outside the ops vs baseline 0.000 ms (*; the matmul reference ran 49.00x "
            "slower, but alone (the dispatch reference ran x1.00): a stall of its own reading, not the machine's "
            "speed) *",
        ),
        (
            49_000_000, 4_000_000, {"slow_hook": 800_000},
            "test_base.py::test_big: time inconclusive for step wall: the machine ran *x slower than *",
        ),
    )  # fmt: skip
    monkeypatch.setenv("OPPROF_INJECT", "")
    fails_then_inconclusive(
        baselined, monkeypatch, fake_clock,
        (1_000_000, 400_000, {"slow_hook": 0, "aten::addmm": 6_000_000}, "*aten::addmm: * (+*%, slower; limit +20%*"),
        (
            49_000_000, 400_000, {"aten::addmm": 6_000_000},
            "test_base.py::test_big: time inconclusive for *aten::addmm*: the machine ran 49.00x slower than *",
        ),
    )  # fmt: skip


def test_a_step_slower_outside_its_ops_fails_on_the_step_wall(baselined, monkeypatch, fake_clock):
    """The same ops, 0.8 ms more per step outside them (a slow hook): no op moved, the steps'
    wall time did; confirmed by a second measurement, the test fails saying where the time went."""
    monkeypatch.setenv("OPPROF_INJECT", "hook")
    fake_clock.costs["slow_hook"] = 800_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: measured 4 times, with pauses between: each differs from the baseline; *",
            "test_base.py::test_big: time: step wall: 0.800 ms/step outside the ops vs baseline 0.000 ms (+0.800 ms: +133% of "
            "its 0.600 ms step, slower; the time went there (Python code, hooks, data preparation, a wait for another thread or process); limit +20%, "
            "p=*) [[].opprof/cpu-*/test_big.json[]]",
        ]
    )
    fake_clock.costs["slow_hook"] = 0
    run(baselined, "--opprof", "-k", "big").assert_outcomes(passed=1)


@pytest.fixture
def real_tracer(fake_clock, monkeypatch):
    """The real device.python_tracer (fake_clock's reads None): these tests run code under one."""
    monkeypatch.setattr(device, "python_tracer", python_tracer)


def test_under_a_python_tracer_a_slowdown_is_judged_on_a_measurement_without_it(
    baselined, monkeypatch, fake_clock, real_tracer
):
    """Under a Python tracer (coverage, a debugger) a slower time may be the tracer's: the Python
    between the ops (the step wall) or inside an op (a hook, a custom op). run() measures again
    without it: what the tracer alone slowed passes, said so; what is slow without it fails. A
    trial under --cov: a hook's AccumulateGrad failed unchanged code 6 of 6 runs (+165%), and a
    3 ms sleep added to each step passed as inconclusive 3 of 3."""
    monkeypatch.setenv("OPPROF_INJECT", "hook traced")
    fake_clock.traced_costs.update({"slow_hook": 800_000, "aten::addmm": 600_000})  # slowed by the tracer only
    before = fake_clock.captures
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: the first measurement's time differed from the baseline's; a second one, after a "
            "pause, did not confirm it (the first ran under a Python tracer (test_base.traced.<locals>.<lambda>), the "
            "later ones without it), so its time passes"
        ]
    )
    assert fake_clock.captures - before == 2  # the first, traced, and one without the tracer
    fake_clock.traced_costs.clear()
    fake_clock.costs["slow_hook"] = 800_000  # slow with the tracer and without it: the code's own
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["test_base.py::test_big: time: step wall: 0.800 ms/step outside the ops vs baseline 0.000 ms (+0.800 ms:*"]
    )
    assert "inconclusive" not in result.stdout.str()


def test_under_a_python_tracer_that_cannot_be_taken_off_a_slower_op_fails(
    baselined, monkeypatch, fake_clock, real_tracer
):
    """Where no measurement without the tracer can be taken (a profiler function, sys.monitoring
    tools: coverage's default core on Python 3.14), an op's slowdown under it is judged as
    measured, confirmed under it: excusing it passed a review's 3x aten::mm under cProfile."""
    monkeypatch.setattr(device, "untraced", lambda run: (run(), device.python_tracer()))
    monkeypatch.setenv("OPPROF_INJECT", "traced")
    fake_clock.traced_costs["aten::addmm"] = 600_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["test_base.py::test_big: time: aten::addmm: 1.300 ms/step vs baseline 0.500 ms (+160%, slower;*"]
    )


def test_a_tracer_that_cannot_be_taken_off_is_not_measured_again_for_the_step_wall(
    baselined, monkeypatch, fake_clock, real_tracer
):
    """A slower step wall under a profiler function (cProfile; sys.monitoring tools alike) is the
    tracer's excuse with no measurement without it to judge it: none is taken, which would run
    traced again (a measurement's worth of the test's time for nothing)."""
    monkeypatch.setenv("OPPROF_INJECT", "hook profiled")
    fake_clock.traced_costs["slow_hook"] = 800_000  # the wall, slowed by the tracer
    before = fake_clock.captures
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: time inconclusive for step wall: a Python tracer (test_base.traced.<locals>.<lambda>)*"
        ]
    )
    assert fake_clock.captures - before == 1


TRACED_BUDGET = """
import sys

import torch


def test_budget(opprof):
    a = torch.randn(16, 16)
    before = sys.gettrace()
    sys.settrace(lambda frame, event, arg: None)  # as coverage under --cov
    try:
        opprof.run(torch.mm, a, a, warmup=1, steps=5)
    finally:
        sys.settrace(before)
    opprof.assert_op_below("aten::mm", ms=0.001)
"""


def test_a_time_budget_failing_under_a_python_tracer_says_it_ran(pytester, monkeypatch, fake_clock, real_tracer):
    """A time budget judged on a capture under a Python tracer: its failure says the tracer ran,
    as it says other load (a trial's budget failed under --cov only, with no word of coverage)."""
    pytester.makepyfile(test_traced=TRACED_BUDGET)
    result = run(pytester, "--opprof", "-k", "budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * aten::mm: 0.040 ms/step > limit 0.0010 ms (*); a Python tracer (test_traced.test_budget.<locals>."
            "<lambda>) ran in the capture, which slows the Python between the ops and inside them (a hook, a custom "
            "op, an autograd Function): measure without coverage or a debugger for a time budget"
        ]
    )


@pytest.mark.parametrize("mode", ["changed", "all", "new"])
def test_a_recording_under_a_python_tracer_writes_no_baseline(baselined, monkeypatch, fake_clock, mode, real_tracer):
    """A trial recorded under --cov: the file held the tracer's slower step wall, and a later
    run without it passed a 3x slower one. A measurement under a Python tracer is no reference:
    no file is written or rewritten (=all neither), and one line says why and how to record: in
    the run's own mode (a bare recording of the whole suite was told =all, rewriting every file)."""
    monkeypatch.setenv("OPPROF_INJECT", "extra traced")  # a structure change: a bare recording would write it
    (path,) = baselined.path.joinpath(".opprof").rglob("test_big.json")
    before = path.read_text()
    if mode == "new":
        path.unlink()
    flag = "--opprof-update-baseline" + ("=all" if mode == "all" else "")
    result = run(baselined, flag, "-k", "big", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline not written: a Python tracer ran (test_base.traced.<locals>.<lambda>): it slows the "
            "Python between the ops and inside them; record test_base.py::test_big in a run without it: "
            f"pytest {flag} test_base.py::test_big --no-cov (with pytest-cov; without a debugger)"
        ]
    )
    assert (path.read_text() == before) if mode != "new" else not path.exists()

    (test,) = json.loads((baselined.path / "r.json").read_text())["tests"]
    assert test["baseline"]["status"] == "unreliable"
    assert test["baseline"]["unrecordable"].startswith("a Python tracer ran (test_base.traced.")


def test_a_forgotten_no_grad_fails_as_work_naming_grad_mode(baselined, monkeypatch):
    """The same ops on the same inputs with grad mode on: a regression trial's forgotten
    torch.no_grad() passed every run on four models. Autograd recording the calls where it did not
    is a work change; a baseline written before it was read says nothing of it."""
    monkeypatch.setenv("OPPROF_INJECT", "forgot_no_grad")
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: work changed in 4 ops: aten::linear: autograd records its calls now (0 -> 2/step): grad "
            "mode was on as it ran, off in the baseline (a forgotten torch.no_grad() or torch.inference_mode()?)*"
        ]
    )
    (path,) = baselined.path.joinpath(".opprof").rglob("test_big.json")
    data = json.loads(path.read_text())
    for entry in data["ops"].values():
        if entry["work"]:
            del entry["work"]["autograd_calls_per_step"]
    path.write_text(json.dumps(data))
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    assert "autograd record" not in result.stdout.str()  # a comparing run: the CHANGELOG says it, no line every run
    line = (  # a recording run that keeps such a file says so, with the command that records it
        "opprof: 1 baseline kept holds no autograd record (written by an earlier pytest-opprof): grad mode is not "
        "compared for it (a forgotten torch.no_grad() is not caught); =all records it: pytest "
        "--opprof-update-baseline=all test_base.py::test_big"
    )
    run(baselined, "--opprof-update-baseline", "-k", "big").stdout.fnmatch_lines([line])
    run(baselined, "--opprof-update-baseline=all", "-k", "big").assert_outcomes(passed=1)
    assert "autograd_calls_per_step" in path.read_text()
    assert "autograd record" not in run(baselined, "--opprof-update-baseline", "-k", "big").stdout.str()


def test_a_wider_layer_fails_as_work_naming_flops_and_shapes(baselined, monkeypatch):
    """4x the hidden size (same ops, same calls): a work verdict names the FLOPs ratio and the
    shapes; deterministic, whatever the machine's timing."""
    monkeypatch.setenv("OPPROF_INJECT", "wide")
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*aten::addmm: 4x the FLOPs per step (67.1M -> 268.4M); inputs (float[[]1024], float[[]64,256], "
            "float[[]256,1024]) and (float[[]256], float[[]64,1024], float[[]1024,256]) -> (float[[]4096], *test_big.json[]]",
        ]
    )
    summary = result.stdout.str().split("= opprof =")[1]
    assert summary.count("test_base.py::test_big: work changed in ") == 1  # one line per verdict kind


SPLIT_TESTS = """
import os
import torch

SPLIT = int(os.environ.get("OPPROF_SPLIT", "192"))


def halves(x):  # the same output whatever SPLIT is: only torch.cat's inputs differ
    return torch.cat([x[:, :SPLIT], x[:, SPLIT:]], 1) * 2


def test_split(opprof):
    opprof.run(halves, torch.randn(64, 256), warmup=1, steps=5)
"""


@pytest.mark.skipif(
    # torch itself, not records_list_shapes(): a wrong answer there must fail this test, not skip it
    hasattr(torch._C._autograd._KinetoEvent, "activity_type")
    and not hasattr(torch._C._autograd._KinetoEvent, "structured_input_shapes"),
    reason="this torch's live captures give a list of tensors as [] (no structured input shapes)",
)
def test_a_tensor_lists_shapes_are_work_and_an_old_baseline_without_them_says_so(pytester, fake_clock, monkeypatch):
    """torch.cat of other slices (same output, FLOPs and slice inputs) fails as work naming the
    list's shapes; a baseline whose lists were recorded as `[]` passes, with a line saying so."""
    monkeypatch.delenv("OPPROF_SPLIT", raising=False)
    pytester.makepyfile(test_split=SPLIT_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_SPLIT", "64")
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*aten::cat: inputs (TensorList[[][[]64,192],[[]64,64]]) -> (TensorList[[][[]64,64],[[]64,192]]) [[]*"]
    )
    path = next((pytester.path / ".opprof").rglob("test_split.json"))
    data = json.loads(path.read_text())
    assert data["capture"]["list_shapes"] is True
    del data["capture"]["list_shapes"]  # as an earlier pytest-opprof recorded it: lists as []
    for sig in data["ops"]["aten::cat"]["work"]["signatures"]:
        sig["shapes"][0] = []
    path.write_text(json.dumps(data))
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: the shapes of tensor-list inputs (aten::cat) were not compared in 1 test: the baseline or this "
            "capture lacks them (a baseline from an earlier pytest-opprof, or a torch without structured input "
            "shapes); record those baselines again on a quiet machine: "
            "pytest --opprof-update-baseline=all test_split.py::test_split"
        ]
    )


def test_a_test_that_sets_its_own_threads_fails_as_work_until_recorded(baselined, monkeypatch):
    """torch.set_num_threads in the test: a work verdict naming both counts (deterministic: the
    references ran on those threads too and cannot judge the time), the table says which rows
    it moved, and recording it makes it the baseline."""
    default = torch.get_num_threads()
    other = 1 if default > 1 else 2
    monkeypatch.setenv("OPPROF_INJECT", "threads")
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "aten::addmm * threads changed",
            f"test_base.py::test_big: work changed: torch threads {default} -> {other} on the same machine setup "
            f"({thread_setup()}): torch.set_num_threads in the test, the code it calls, a conftest or an earlier "
            "test; CPU times not compared [[].opprof/cpu-*/test_big.json[]]",
        ]
    )
    assert torch.get_num_threads() == default
    run(baselined, "--opprof-update-baseline", "-k", "big").stdout.fnmatch_lines(
        ["opprof: baselines written: 1 changed (test_base.py::test_big); kept 0 unchanged*"]
    )
    run(baselined, "--opprof", "-k", "big").assert_outcomes(passed=1)


def test_a_thread_limit_the_step_restores_fails_as_work_too(baselined, monkeypatch):
    """fn sets one thread and restores the count before it returns: the capture saw it (found by
    a trial: read only as the capture ended, it passed as work and failed only on time)."""
    default = torch.get_num_threads()
    if default < 2:
        pytest.skip("one torch thread: there is no fewer to limit to")
    monkeypatch.setenv("OPPROF_INJECT", "limited")
    result = run(baselined, "--opprof", "-k", "big", "--opprof-fail-on=structure,work")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"test_base.py::test_big: work changed: torch threads {default} -> 1 on the same machine setup*"]
    )


def threads_conftest(pytester, threads, default):
    """A conftest that sets torch's threads as it is imported (before the plugin reads its facts)."""
    pytester.makeconftest(
        f"import torch\ntorch.set_num_threads({threads})\n\n\n"
        f"def pytest_unconfigure(config):\n    torch.set_num_threads({default})\n"
    )


def test_threads_set_in_a_conftest_are_the_projects_work_not_the_machines(baselined):
    """A conftest that sets the threads on an unchanged machine is the project's doing: work,
    failing (found by a trial: read as the machine's default, it passed as environment)."""
    default = torch.get_num_threads()
    other = 1 if default > 1 else 2
    threads_conftest(baselined, other, default)
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"test_base.py::test_big: work changed: torch threads {default} -> {other} on the same machine*"]
    )
    assert torch.get_num_threads() == default


def test_another_machine_thread_setup_is_environment_and_its_times_inconclusive(baselined, fake_clock, monkeypatch):
    """Another thread setup (OMP_NUM_THREADS here; more CPUs on another machine): an environment
    line, and a CPU slowdown is inconclusive with its own fix, not a failure."""
    default = torch.get_num_threads()
    other = 1 if default > 1 else 2
    threads_conftest(baselined, other, default)
    recorded = next((baselined.path / ".opprof").rglob("test_big.json")).read_text()
    setup = json.loads(recorded)["environment"]["thread_setup"]
    monkeypatch.setenv("OMP_NUM_THREADS", str(other))
    monkeypatch.setattr(device, "_STARTED", [dict(os.environ)])  # as the shell set it (this run is in-process)
    fake_clock.costs["aten::addmm"] = 800_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    was = dict(part.split("=", 1) for part in setup.split(", ") if "=" in part).get("OMP_NUM_THREADS")
    assert was != str(other) and f"OMP_NUM_THREADS={other}" in thread_setup()
    result.stdout.fnmatch_lines(
        [
            f"test_base.py::test_big: time inconclusive for aten::addmm*: torch ran on {other} thread*, the baseline on "
            f"{default}; neither passed nor failed (--opprof-strict makes this an error); record the baseline on the "
            "machine that checks it (--opprof-update-baseline=all there), or run with the baseline's thread "
            f"variables: env {'OMP_NUM_THREADS=' + was if was else '-u OMP_NUM_THREADS'} pytest ...",
            f"test_base.py::test_big: environment differs from the baseline: torch threads {default} -> {other} (another "
            f"machine setup: OMP_NUM_THREADS {was or 'unset'} -> {other})*",
        ]
    )
    # set inside the pytest process (pytest-env's `env`, a conftest): the shell's env cannot undo it
    started = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    monkeypatch.setattr(device, "_STARTED", [{**started, **({"OMP_NUM_THREADS": was} if was else {})}])
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: time inconclusive for aten::addmm*: OMP_NUM_THREADS is set inside the pytest process*"
        ]
    )
    assert torch.get_num_threads() == default


def test_a_thread_variable_the_xdist_controller_set_is_named_as_set_inside_on_its_workers(
    pytester, fake_clock, monkeypatch
):
    """pytest-env sets its `env` in xdist's controller, whose workers start with it: a worker's own
    start called it the shell's, and its fix said `env -u OMP_NUM_THREADS pytest ...`, which
    pytest-env undoes. The controller tells its workers which it set."""
    default = torch.get_num_threads()
    other = 1 if default > 1 else 2
    pytester.makeconftest(WORKER_FAKE_CLOCK)
    pytester.makepyfile(test_t=BASELINE_TESTS)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(device, "_STARTED", [dict(os.environ)])  # the controller (this process) started without it
    fake_clock.costs["aten::addmm"] = 200_000
    run(pytester, "--opprof-update-baseline", "-k", "big").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_FAKE_WORKER_COSTS", json.dumps({"aten::addmm": 800_000}))
    monkeypatch.setenv("OMP_NUM_THREADS", str(other))  # set inside the controller, as pytest-env's `env` is
    result = run(pytester, "--opprof", "-k", "big", "-n", "1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_t.py::test_big: time inconclusive for aten::addmm*: torch ran on "
            f"{other} thread*, the baseline on {default}*OMP_NUM_THREADS is set inside the pytest process*"
        ]
    )
    assert "pytest ..." not in result.stdout.str()  # no shell fix


ELEMENTWISE_TESTS = """
import torch

def test_sig(opprof):
    x = torch.ones(64)
    opprof.run(lambda: x.sigmoid(), warmup=1, steps=6)

def test_exp(opprof):
    x = torch.ones(64)
    opprof.run(lambda: x.sigmoid().exp(), warmup=1, steps=6)
"""


def test_baselines_of_other_cpu_kernels_make_a_cpu_slowdown_inconclusive_up_to_their_bound(pytester, fake_clock):
    """Baselines recorded where torch's CPU kernels ran with other vector instructions (a mixed
    fleet's AVX2-only runner beside AVX512 ones, one key): the file holds the capability, an
    elementwise op's slowdown within their bound is inconclusive with the fix, the run line for
    the tests alike says so (a team trial's read that their times were judged across it), and
    one past it fails."""
    fake_clock.costs["aten::sigmoid"] = 200_000
    pytester.makepyfile(test_elementwise=ELEMENTWISE_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=2)
    now = torch.backends.cpu.get_cpu_capability()
    was = "DEFAULT" if now != "DEFAULT" else "AVX2"
    for path in (pytester.path / ".opprof").rglob("test_*.json"):
        data = json.loads(path.read_text())
        assert data["environment"]["cpu_capability"] == now
        data["environment"]["cpu_capability"] = was
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    fake_clock.costs["aten::sigmoid"] = 600_000  # x3: within any pair's bound (x5 at least)
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"test_elementwise.py::test_sig: time inconclusive for aten::sigmoid: torch's CPU kernels ran with {now} "
            f"instructions, the baseline's with {was}; neither passed nor failed (--opprof-strict makes this an "
            "error); record baselines per CPU kind: give each kind its device key (the pytest_opprof_device_key "
            "hook), or record the baseline on the machines that check it (--opprof-update-baseline=all there)",
            f"opprof: environment differs from the baselines of 2 tests: cpu_capability {was} -> {now}; their times are "
            "judged across it, a CPU time's move it explains inconclusive, not a failure (a structure change *",
        ]
    )
    fake_clock.costs["aten::sigmoid"] = 200_000 * 25  # past x13, the widest pair's bound
    result = run(pytester, "--opprof", "-k", "test_sig")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["test_elementwise.py::test_sig: time: aten::sigmoid: *slower*CPU kernels ran with*"])


def test_a_measured_tests_captures_are_freed_when_it_ends_not_at_a_full_collection(pytester):
    """A scale trial's suite of 25k-event captures climbed +235 MiB a test to 2.4 GiB: torch's
    profiler and the opprof fixture each refer to themselves, so their captures waited for a full
    garbage collection, which counts objects, not bytes. After each test nothing of its capture is
    left for the collector: no event table, profile or fixture (a run(), a block, the whole call,
    a failure's cut-short capture), and each torch profiler opprof made has let go of its results."""
    pytester.makeconftest(
        """
        import gc

        def pytest_sessionstart(session):
            gc.collect()  # what earlier tests of this process left

        def pytest_runtest_logfinish(nodeid, location):
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            gc.set_debug(0)
            kinds = {type(o).__name__ for o in gc.garbage}
            left = sorted(kinds & {"EventTable", "Profile", "OpprofFixture", "StepRecorder"})
            held = [o for o in gc.garbage if type(o).__name__ == "profile" and getattr(o, "profiler", None) is not None]
            with open("left.txt", "a") as f:
                f.write(f"{nodeid} {left} {len(held)}\\n")
            del held
            gc.garbage.clear()
            gc.collect()  # saved, the cycles stayed: now freed
        """
    )
    pytester.makepyfile(
        test_free="""
        import torch

        def test_run(opprof):
            opprof.run(lambda: torch.ones(8).add(1), warmup=1, steps=3)

        def test_block(opprof):
            with opprof.capture():
                torch.ones(8).mul(2)

        def test_whole_call(opprof):
            torch.ones(8).sub(1)

        def test_fails(opprof):
            def boom():
                torch.ones(8).add(1)
                raise ValueError("boom")
            opprof.run(boom, warmup=0, steps=2)
        """
    )
    run(pytester, "--opprof").assert_outcomes(passed=3, failed=1)
    left = (pytester.path / "left.txt").read_text().splitlines()
    assert len(left) == 4 and all(line.endswith(" [] 0") for line in left), left


def test_qq_leaves_out_the_tables_of_tests_that_passed_with_nothing_to_say(baselined, monkeypatch):
    """A scale trial's 80 passing tests printed 1,127 lines, -q, -qq or not. Under -qq a test that
    passed with no line of their own keeps no table, counted in one line; one that failed keeps its
    table and lines; -q keeps every table (the README's first run shows one)."""
    header = "test_base.py::test_big [[]passed[]] (6 steps*"
    result = run(baselined, "--opprof", "-qq")  # -qq prints no outcome counts: the exit code says
    assert result.ret == 0 and " [passed] (" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "opprof: 3 measured tests passed with no line of their own: their tables are left out under -qq (run with -q or "
            "without it to see them; --opprof-json and --opprof-html hold them always)"
        ]
    )
    run(baselined, "--opprof", "-q").stdout.fnmatch_lines([header])
    monkeypatch.setenv("OPPROF_INJECT", "extra")  # a clone more per step: test_big fails on structure
    result = run(baselined, "--opprof", "-qq")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big [[]failed[]] (6 steps*",
            "test_base.py::test_big: structure changed: *",
            "opprof: 2 measured tests passed with no line of their own: their tables are left out under -qq *",
        ]
    )


def test_qq_leaves_out_the_tables_of_passing_tests_whose_only_lines_are_warnings(baselined, fake_clock):
    """A scale trial's -qq run printed the tables of passing tests for a `spread` warning: the
    warning's line stays, the table goes, and the count says there were warnings."""
    fake_clock.unprofiled_ns = 10_000  # the profiled steps x20 the unprofiled: an overhead warning
    result = run(baselined, "--opprof", "-qq", "-k", "big")
    assert result.ret == 0 and " [passed] (" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: warning overhead: profiled steps took x* the time of unprofiled ones*",
            "opprof: 1 measured test passed with no verdict or error to show (with a warning, above): its table is left out "
            "under -qq *",
        ]
    )
    assert " [passed] (" in run(baselined, "--opprof", "-q", "-k", "big").stdout.str()


def test_a_tests_own_environment_line_gives_the_command_that_adopts_the_setup(baselined):
    """A baseline of another CPU model: each run (a bare recording too, which keeps the file) said
    so with no fix, a team trial's line every run; its own line now gives the =all command, which,
    run as written, makes the line go."""
    path = next((baselined.path / ".opprof").rglob("test_big.json"))
    data = json.loads(path.read_text())
    data["environment"]["cpu_model"] = "AMD EPYC 7763"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    fix = (
        "test_base.py::test_big: where this is the setup from now on, record the baseline on it (a bare recording "
        "keeps the file): pytest --opprof-update-baseline=all test_base.py::test_big"
    )
    for flag in ("--opprof", "--opprof-update-baseline"):
        result = run(baselined, flag, "-k", "big")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(
            ["test_base.py::test_big: environment differs from the baseline: cpu_model AMD *", fix]
        )
        assert "AMD EPYC 7763" in path.read_text()
    run(baselined, *shlex.split(fix.split(": pytest ")[1])).assert_outcomes(passed=1)
    assert "AMD EPYC 7763" not in path.read_text()
    result = run(baselined, "--opprof", "-k", "big")
    assert "environment differs" not in result.stdout.str() and "setup from now on" not in result.stdout.str()


def test_a_faster_time_names_the_test_in_the_command_that_records_it(baselined, fake_clock):
    """A diagnosis trial's `-k attention` run read `pytest --opprof-update-baseline records the
    faster times`; run as written, it recorded the tests `-k` had left out. The command names the
    test, and run as written records that test alone."""
    tiny = sorted((baselined.path / ".opprof").rglob("test_tiny*.json"))
    before = [p.read_bytes() for p in tiny]
    fake_clock.costs["aten::addmm"] = 40_000  # 5x faster
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    command = "pytest --opprof-update-baseline test_base.py::test_big"
    result.stdout.fnmatch_lines(
        [f"test_base.py::test_big: time: aten::addmm*faster*; {command} records the faster times"]
    )
    result = run(baselined, *shlex.split(command)[1:])
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 changed*"])
    assert [p.read_bytes() for p in tiny] == before


def test_a_spell_only_the_small_matmul_reference_sees_is_inconclusive_and_only_then(pytester, fake_clock, monkeypatch):
    """A spell that slows small products and the ops made of them while the matmul and dispatch
    references hold (a model zoo's LSTM +35% in 2 of 20 idle runs: docs/devices.md): an op x1.4
    slower while the small matmul reference ran x1.33 is inconclusive and names it; the same
    slowdown with every reference steady fails."""
    from conftest import set_references

    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    pytester.makepyfile(test_base=BASELINE_TESTS)
    fake_clock.costs["aten::addmm"] = 500_000
    set_references(monkeypatch, 1_000_000, 400_000, small_ns=150_000)
    run(pytester, "--opprof-update-baseline", "-k", "big").assert_outcomes(passed=1)
    fake_clock.costs["aten::addmm"] = 700_000
    set_references(monkeypatch, 1_000_000, 400_000, small_ns=200_000)
    result = run(pytester, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: time inconclusive for aten::addmm, aten::linear: the machine ran 1.33x slower "
            "than when the baseline was recorded (small matmul reference); neither passed nor failed *"
        ]
    )
    set_references(monkeypatch, 1_000_000, 400_000, small_ns=150_000)
    run(pytester, "--opprof", "-k", "big").assert_outcomes(failed=1)


def test_a_baseline_recorded_under_load_is_named_with_the_command_that_records_it_again(
    pytester, fake_clock, monkeypatch
):
    """Recorded while the machine ran 20x slower (references and ops): a calm rerun is inconclusive
    with the fix to record it again (not "a quiet machine": it is one), and a summary line names
    the command; re-recording keeps it; =all with the test's id records it, and then a slowdown the
    inflated baseline hid fails. That =all run tells no one to run =all again (a newcomer's did)."""
    from conftest import set_references

    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    pytester.makepyfile(test_base=BASELINE_TESTS)
    fake_clock.costs["aten::addmm"] = 4_000_000
    set_references(monkeypatch, 20_000_000, 8_000_000)  # every reference 20x slower: a slow spell
    run(pytester, "--opprof-update-baseline", "-k", "big").assert_outcomes(passed=1)
    fake_clock.costs["aten::addmm"] = 200_000
    set_references(monkeypatch, 1_000_000, 400_000)
    result = run(pytester, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: time inconclusive for aten::addmm*: the machine ran 20.00x faster than when the "
            "baseline was recorded (dispatch reference); neither passed nor failed (--opprof-strict makes this an "
            "error); its baseline was recorded under load (its inflated times hide slowdowns): record it again on a "
            "quiet machine, pytest --opprof-update-baseline=all test_base.py::test_big",
            "opprof: 1 baseline recorded under load (the same machine setup and torch ran the references up to 20.0x "
            "slower than now): their inflated times hide slowdowns, and re-recording keeps them; record them again "
            "on a quiet machine: pytest --opprof-update-baseline=all test_base.py::test_big",
        ]
    )
    run(pytester, "--opprof-update-baseline", "-k", "big").stdout.fnmatch_lines(["*kept 1 unchanged*"])
    fake_clock.costs["aten::addmm"] = 800_000  # a 4x slowdown the inflated baseline hides
    run(pytester, "--opprof", "-k", "big").assert_outcomes(passed=1)
    fake_clock.costs["aten::addmm"] = 200_000
    rewritten = run(pytester, "--opprof-update-baseline=all", "test_base.py::test_big")
    rewritten.assert_outcomes(passed=1)
    rewritten.stdout.fnmatch_lines(["*rewritten all the same, as =all asks, with these times; nothing more to do*"])
    assert "record it again" not in rewritten.stdout.str() and "recorded under load" not in rewritten.stdout.str()
    fake_clock.costs["aten::addmm"] = 800_000
    run(pytester, "--opprof", "-k", "big").assert_outcomes(failed=1)


def test_a_recording_under_load_its_threads_did_not_wait_for_says_so_when_written(
    pytester, fake_clock, monkeypatch, tmp_path
):
    """A spell of other load the CPU wait does not show (another tenant of the VM's host): the
    references ran 20x slower. Where only the first measurement ran in it, the file holds the
    first calm one and says so; where every one did, =all writes it as asked, and says it ran 20x
    slower than the baseline it replaced, with the command that records it again (a trial's
    recording under load wrote a 5.278 ms workload reference, 0.065 ms calm, and said nothing)."""
    from conftest import set_references

    from pytest_opprof import references

    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    pytester.makepyfile(test_base=BASELINE_TESTS)
    set_references(monkeypatch, 1_000_000, 400_000)
    run(pytester, "--opprof-update-baseline", "-k", "big").assert_outcomes(passed=1)
    set_references(monkeypatch, 20_000_000, 8_000_000)  # the ops' times held: no time line says it
    out = tmp_path / "run.json"
    result = run(pytester, "--opprof-update-baseline=all", "-k", "big", f"--opprof-json={out}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: baseline recorded while the machine ran its references 20.0x slower than for the "
            "baseline it replaced (other load, or a slow spell of the machine): its CPU times may be inflated and hide "
            "later slowdowns; record it again on a quiet machine: pytest --opprof-update-baseline=all "
            "test_base.py::test_big"
        ]
    )
    (test,) = json.loads(out.read_text())["tests"]
    assert test["baseline"]["written_slowed"] == {"factor": 20.0, "than": "replaced"}
    # where the ops slowed with them, the time line says it and how to record again: once (a review)
    set_references(monkeypatch, 1_000_000, 400_000)
    run(pytester, "--opprof-update-baseline=all", "-k", "big").assert_outcomes(passed=1)
    fake_clock.costs["aten::addmm"] = 4_000_000
    set_references(monkeypatch, 20_000_000, 8_000_000)
    result = run(pytester, "--opprof-update-baseline=all", "-k", "big")
    result.stdout.fnmatch_lines(
        ["test_base.py::test_big: time inconclusive for aten::addmm*if the machine was loaded*"]
    )
    assert "recorded while the machine ran" not in result.stdout.str()
    spell = iter([20_000_000] * 2)  # the first capture's two readings, before and after it

    def spell_then_calm(torch):
        return next(spell, 1_000_000)

    monkeypatch.setattr(references, "machine_reference_ns", spell_then_calm)
    dispatch = iter([8_000_000] * 2)
    monkeypatch.setattr(references, "dispatch_reference_ns", lambda torch: next(dispatch, 400_000))
    fake_clock.costs["aten::addmm"] = 200_000
    result = run(pytester, "--opprof-update-baseline=all", "-k", "big", f"--opprof-json={out}")
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: baseline written from measurement 2, whose references ran 20.0x faster than the "
            "first's: the first ran under other load or a slow spell (the op table shows the first)"
        ]
    )
    assert "recorded while the machine ran" not in result.stdout.str()
    (test,) = json.loads(out.read_text())["tests"]
    assert (test["baseline"]["written_from"], test["baseline"]["first_slowed"]) == (2, 20.0)
    written = json.loads(next((pytester.path / ".opprof").rglob("test_big.json")).read_text())
    assert test["baseline"][
        "written_references"
    ] == {  # the written file's: the run's lines hold them against each other
        "dispatch_ms": written["dispatch_reference_ms"],
        "matmul_ms": written["reference_ms"],
    }


def test_recordings_under_load_of_several_tests_say_so_in_one_line(pytester, fake_clock, monkeypatch):
    """Every test rewritten under a spell of other load: one line names them all with the command
    (not one per test, as a loaded runner's contention lines once were); -v keeps each test's; -k
    names the tests."""
    from conftest import set_references

    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    pytester.makepyfile(test_base=BASELINE_TESTS)
    set_references(monkeypatch, 1_000_000, 400_000)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)
    set_references(monkeypatch, 5_000_000, 2_000_000)
    result = run(pytester, "--opprof-update-baseline=all")
    result.stdout.fnmatch_lines(
        [
            "opprof: 3 baselines recorded while the machine ran their references up to 5.0x slower than for the "
            "baselines they replaced (other load, or a slow spell of the machine): their CPU times may be inflated "
            "and hide later slowdowns; record them again on a quiet machine: pytest --opprof-update-baseline=all"
        ]  # the whole run: no ids (they are every test it measured)
    )
    assert "test_big: baseline recorded while" not in result.stdout.str()
    set_references(monkeypatch, 1_000_000, 400_000)
    run(pytester, "--opprof-update-baseline=all").assert_outcomes(passed=3)  # calm again: the bases to compare
    set_references(monkeypatch, 5_000_000, 2_000_000)
    picked = run(pytester, "--opprof-update-baseline=all", "-k", "tiny").stdout.str()
    assert "opprof: 2 baselines recorded while the machine ran their references up to 5.0x slower " in picked
    assert "=all 'test_base.py::test_tiny[a/b c]' 'test_base.py::test_tiny[float32]'\n" in picked
    set_references(monkeypatch, 1_000_000, 400_000)
    run(pytester, "--opprof-update-baseline=all").assert_outcomes(passed=3)
    set_references(monkeypatch, 5_000_000, 2_000_000)
    verbose = run(pytester, "--opprof-update-baseline=all", "-v").stdout.str()
    assert verbose.count("baseline recorded while the machine ran its references 5.0x slower") == 3
    # their threads waited for a CPU too: that line says it, not this one as well
    set_references(monkeypatch, 1_000_000, 400_000)
    run(pytester, "--opprof-update-baseline=all").assert_outcomes(passed=3)
    set_references(monkeypatch, 5_000_000, 2_000_000)
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    waited = run(pytester, "--opprof-update-baseline=all").stdout.str()
    assert "recorded while their threads waited for a CPU" in waited and "while the machine ran" not in waited


def test_time_verdicts_can_be_told_not_to_fail(baselined, fake_clock):
    """--opprof-fail-on=structure, a marker tolerance, or ignored ops let a slower op pass."""
    fake_clock.costs["aten::addmm"] = 800_000
    run(baselined, "--opprof", "-k", "big", "--opprof-fail-on=structure").assert_outcomes(passed=1)
    run(baselined, "--opprof", "-k", "big", "--opprof-ignore-ops=aten::*").assert_outcomes(passed=1)
    baselined.makeini("[pytest]\nopprof = true\nopprof_tolerance = 9000%\n")
    run(baselined, "-k", "big").assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_an_ignore_glob_that_matches_no_op_is_named_with_the_op_it_looks_like(baselined, tmp_path, xdist):
    """A typo in --opprof-ignore-ops ignores nothing: the summary says so once for the run, naming
    the op it looks like (the closest of any test's); a glob that matched in any test, or the step
    wall, says nothing. (xdist workers run on real time, not the fake clock: time cannot fail here.)"""
    out = tmp_path / "run.json"
    globs = "--opprof-ignore-ops=aten::addmmm, aten::add*, step wall, aten::relu aten::t"
    result = run(baselined, "--opprof", f"--opprof-json={out}", globs, "--opprof-fail-on=structure,work", *xdist)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: ignore glob 'aten::addmmm' matched no op in the 3 compared tests: it ignores nothing; "
            "did you mean aten::addmm? use op names as the tables and opprof show list them",
            # two globs run together (an audit was told `did you mean aten::t?`, which drops the other)
            "opprof: ignore glob 'aten::relu aten::t' matched no op in the 3 compared tests: it ignores nothing; "
            "write several as a comma list: aten::relu, aten::t",
        ]
    )
    assert result.stdout.str().count("matched no op") == 2
    ignores = json.loads(out.read_text())["tests"][0]["baseline"]["ignores"]
    assert {i["glob"]: i["matched"] for i in ignores} == {
        "aten::addmmm": False, "aten::add*": True, "step wall": True, "aten::relu aten::t": False
    }  # fmt: skip


def test_a_thread_count_a_test_left_changed_is_named_with_the_measured_tests_that_ran_on_it(project):
    """A test that changes torch.set_num_threads and does not put it back makes the tests after it
    measure (and record) on that count: order-dependent times, a flake under pytest-randomly. One
    summary line names it and the measured tests that ran on it (`threads` in their JSON checks).
    A test that sets its own count inside and restores it, and fixtures that set the count and put
    it back (a session-wide one too), are no leak."""
    project.makepyfile(
        test_t="""
        import pytest
        import torch
        from conftest import infer

        @pytest.fixture(scope="module", autouse=True)
        def module_threads():
            before = torch.get_num_threads()
            torch.set_num_threads(before + 2)
            yield
            torch.set_num_threads(before)

        def test_own_count(opprof, mlp):
            before = torch.get_num_threads()
            torch.set_num_threads(before + 1)
            try:
                opprof.run(infer, *mlp, warmup=1, steps=2)
            finally:
                torch.set_num_threads(before)

        def test_on_the_modules_count(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)

        def test_leaves_it_changed():
            torch.set_num_threads(torch.get_num_threads() + 1)

        def test_after(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)

        def test_after_too(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    threads = torch.get_num_threads()
    try:
        result = run(project, "--opprof", "--opprof-json=r.json", "--junitxml=j.xml", "-p", "no:xdist")
    finally:
        torch.set_num_threads(threads)
    result.assert_outcomes(passed=5)
    module = threads + 2
    result.stdout.fnmatch_lines(
        [
            f"opprof: test_t.py::test_leaves_it_changed changed torch's thread count {module} -> {module + 1} and "
            f"did not put it back: the tests after it ran on {module + 1}, *; restore the count in that test "
            f"(try/finally: torch.set_num_threads({module})); measured after it: test_t.py::test_after, "
            "test_t.py::test_after_too"
        ]
    )
    assert result.stdout.str().count("did not put it back") == 1
    tests = json.loads((project.path / "r.json").read_text())["tests"]
    warned = sorted(t["nodeid"] for t in tests if "threads" in [c["name"] for c in t["checks"]])
    assert warned == ["test_t.py::test_after", "test_t.py::test_after_too"]
    # junitxml carries the test's own checks as the profile's (a trial's dashboard found none)
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "j.xml").iter("testcase")
    }
    assert props["test_after"]["opprof.check.threads"].startswith("warning: test_t.py::test_leaves_it_changed changed")
    assert "opprof.check.threads" not in props["test_on_the_modules_count"]


def run_leaking(project, monkeypatch, *args):
    """A run with OPPROF_LEAK set (the project's tests leak torch's thread count), the count put back after."""
    threads = torch.get_num_threads()
    monkeypatch.setenv("OPPROF_LEAK", "1")
    try:
        return run(project, *args, "-p", "no:xdist")
    finally:
        torch.set_num_threads(threads)


LEAKING = """
import os
import pytest
import torch
from conftest import infer

def test_a_leaker():  # leaves torch's thread count one higher where OPPROF_LEAK is set
    if os.environ.get("OPPROF_LEAK"):
        torch.set_num_threads(torch.get_num_threads() + 1)

def test_b_after(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""


LEAK_SCENARIOS = {
    # a test puts back the count a leak began from: the tests after it are no victims
    "restored": """
def test_a_leak():
    if LEAK:
        torch.set_num_threads(torch.get_num_threads() + 1)

def test_b_restore():
    if LEAK:
        torch.set_num_threads(torch.get_num_threads() - 1)
""",
    # an autouse fixture puts the count back after each test; a test's own fixture sets one
    "fixtures": """
@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)

@pytest.fixture
def own_count():
    n = torch.get_num_threads()
    torch.set_num_threads(n + 1 if LEAK else n)
    yield

def test_a_leak():
    if LEAK:
        torch.set_num_threads(torch.get_num_threads() + 1)

def test_b_fixture(own_count, opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
""",
    # two fixtures that each put the count back, torn down in one teardown (a trial: a false leak)
    "two_scopes": """
@pytest.fixture(scope="class")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1 if LEAK else before)
    yield
    torch.set_num_threads(before)

@pytest.fixture
def more_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS + 1 if LEAK else before)
    yield
    torch.set_num_threads(before)

class TestBoth:
    def test_a_both(self, one_thread, more_threads):
        pass


def test_a_second():  # the scenarios hold two tests
    pass
""",
    # the call sets the count a fixture's teardown then puts back (a trial: the call's change was a leak)
    "call_undone": """
@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1 if LEAK else before)
    yield
    torch.set_num_threads(before)

def test_a_call(one_thread):
    torch.set_num_threads(THREADS)

def test_a_second():  # the scenarios hold two tests
    pass
""",
    # a later fixture sets back the count an earlier one changed; neither puts anything back
    "set_back": """
@pytest.fixture
def more():
    torch.set_num_threads(THREADS + 1 if LEAK else THREADS)
    yield

@pytest.fixture
def back(more):
    torch.set_num_threads(THREADS)
    yield

def test_a_back(back):
    pass

def test_a_second():  # the scenarios hold two tests
    pass
""",
    # a test sets the count its measurement runs on, inside, and puts the leaked one back
    "pinned": """
def test_a_leak():
    if LEAK:
        torch.set_num_threads(torch.get_num_threads() + 1)

def test_b_pin(opprof, mlp):
    left = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        opprof.run(infer, *mlp, warmup=1, steps=2)
    finally:
        torch.set_num_threads(left)
""",
}


AFTER = "\ndef test_c_after(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"


@pytest.mark.parametrize("scenario", sorted(LEAK_SCENARIOS))
def test_no_thread_leak_is_read_where_the_count_was_put_back_or_set_for_the_measurement(project, monkeypatch, scenario):
    """A trial's test that put back the session's count was blamed as a leak, and the tests after
    it, on the right count, were not recorded; a fixture's own count after a leak an autouse
    fixture undid read as the leak's; a test that set its own count for its measurement was no
    victim either. Each records, with no `threads` check and no leak line."""
    head = "import os\nimport pytest\nimport torch\nfrom conftest import infer\nLEAK = os.environ.get('OPPROF_LEAK')\n"
    threads = torch.get_num_threads()
    after = "" if scenario == "pinned" else AFTER  # after the pin, the leaked count is back: a victim
    project.makepyfile(test_l=f"{head}THREADS = {threads}\n{LEAK_SCENARIOS[scenario]}{after}")
    tests = 3 if after else 2
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=tests)
    result = run_leaking(project, monkeypatch, "--opprof-update-baseline=all", "--opprof-json=r.json")
    result.assert_outcomes(passed=tests)
    found = json.loads((project.path / "r.json").read_text())["tests"]
    measured = [t for t in found if t["baseline"]]
    assert measured and all(t["baseline"]["status"] in ("rewritten", "changed") for t in measured)
    assert not [t["nodeid"] for t in found if "threads" in [c["name"] for c in t["checks"]]]
    assert "did not put it back" not in result.stdout.str()


def leaking_head(threads):
    """A leaking project's imports and first test, which leaves torch's thread count one above
    `threads` where OPPROF_LEAK is set (indented as the sources after it: pytester dedents)."""
    return f"""
        import os
        import pytest
        import torch
        from conftest import infer

        def test_a_leak():
            if os.environ.get("OPPROF_LEAK"):
                torch.set_num_threads({threads + 1})

"""


def test_a_leak_outlives_a_wider_fixture_that_pins_another_count(project, monkeypatch):
    """A review's class-scoped fixture that pinned its own count for its tests, then put the leaked
    one back, made the tracker drop the leak: the test after it recorded the leaked count; so did a
    test of the class changing the fixture's count. A leak ends only where its count is put back;
    the test after the class is its victim, not recorded."""
    threads = torch.get_num_threads()
    project.makepyfile(
        test_l=leaking_head(threads)
        + f"""
        @pytest.fixture(scope="class")
        def pinned():
            before = torch.get_num_threads()
            torch.set_num_threads({threads + 2})
            yield
            torch.set_num_threads(before)

        @pytest.mark.usefixtures("pinned")
        class TestPinned:
            def test_one(self):
                pass

            def test_two(self):  # changes the fixture's count, which the fixture then puts back
                torch.set_num_threads({threads + 3})

        def test_c_after(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=4)
    result = run_leaking(project, monkeypatch, "--opprof-update-baseline=all")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            f"opprof: 1 baseline not written: it ran on the torch thread count {threads + 1} that test_l.py::test_a_leak left *"
        ]
    )


def test_a_fixture_that_leaves_the_count_changed_is_named_and_its_victims_not_recorded(project, monkeypatch):
    """A fixture that sets torch's thread count and never puts it back (a review found it unseen:
    the tests after it failed `work changed: torch threads` with a `record it` line, which run
    alone records nothing): the summary names the fixture and where it is defined, the fix is in
    its teardown, and the tests after it are not recorded; a test that asks for the fixture runs
    on its count by its own doing, and a module fixture's tests are no victims of it."""
    threads = torch.get_num_threads()
    head = "import os\nimport pytest\nimport torch\nfrom conftest import infer\n"
    project.makepyfile(
        test_f=head
        + f"""
@pytest.fixture
def one_more():
    if os.environ.get("OPPROF_LEAK"):
        torch.set_num_threads({threads + 1})
    yield

def test_a_uses(one_more):
    pass

def test_b_after(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)

def test_c_asks(one_more, opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
""",
        test_g=head
        + f"""
@pytest.fixture(scope="module", autouse=True)
def module_count():
    if os.environ.get("OPPROF_LEAK"):
        torch.set_num_threads({threads + 2})
    yield

def test_in_module(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
""",
        test_h=head + "\ndef test_next_module(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n",
    )
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=5)
    result = run_leaking(project, monkeypatch, "--opprof-update-baseline=all", "--opprof-json=r.json")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            f"opprof: fixture one_more (test_f.py:6) changed torch's thread count {threads} -> {threads + 1} and did "
            f"not put it back: the tests after it ran on {threads + 1}, *; restore the count in that fixture's "
            "teardown (after its yield, or in a finalizer it adds before anything can raise: "
            f"torch.set_num_threads({threads})); measured after it: test_f.py::test_b_after",
            # the module's fixture began on the count the first left: one leak, in turn
            f"opprof: fixture one_more (test_f.py:6) then fixture module_count (test_g.py:6) changed torch's thread "
            f"count {threads} -> {threads + 2} *; restore the count in those fixtures' teardowns (after their yield: "
            f"torch.set_num_threads({threads})); measured after them: test_h.py::test_next_module",
        ]
    )
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    statuses = {nodeid: t["baseline"]["status"] for nodeid, t in tests.items() if t["baseline"]}
    assert statuses["test_f.py::test_b_after"] == statuses["test_h.py::test_next_module"] == "unreliable"
    assert "fixture one_more (test_f.py:6)" in tests["test_f.py::test_b_after"]["baseline"]["unrecordable"]
    assert statuses["test_f.py::test_c_asks"] != "unreliable" and statuses["test_g.py::test_in_module"] != "unreliable"
    # comparing: the victim's `torch threads` change names the fixture as its fix, not a recording
    compared = run_leaking(project, monkeypatch, "--opprof", "-k", "test_a_uses or test_b_after")
    compared.stdout.fnmatch_lines(
        ["*the count is the one fixture one_more (test_f.py:6) left (it ran earlier and did not put it back): "
         "restore it in that fixture's teardown*"]
    )  # fmt: skip
    assert "pytest --opprof-update-baseline" not in compared.stdout.str().split("restore it in")[1].split("\n")[0]


VICTIM_SCENARIOS = {
    # two fixtures each change it, neither puts it back: both named, in setup order, 2 -> 4
    "two_fixtures": (
        """
@pytest.fixture
def more():
    torch.set_num_threads(THREADS + 1)
    yield

@pytest.fixture
def most():
    torch.set_num_threads(THREADS + 2)
    yield

def test_a(more, most):
    pass
""",
        "fixture more (test_v.py:6) then fixture most (test_v.py:11) changed torch's thread count {t} -> {t2} *",
    ),
    # a fixture whose teardown alone changes the count
    "teardown": (
        """
@pytest.fixture
def after():
    yield
    torch.set_num_threads(THREADS + 2)

def test_a(after):
    pass
""",
        "fixture after (test_v.py:6) changed torch's thread count {t} -> {t2} *",
    ),
    # a parametrized fixture leaks twice in turn: named once
    "parametrized": (
        """
@pytest.fixture(params=[1, 2])
def more(request):
    torch.set_num_threads(THREADS + request.param)
    yield

def test_a(more):
    pass
""",
        "fixture more (test_v.py:6) changed torch's thread count {t} -> {t2} *",
    ),
    # a review: the test's own change, undone by one fixture's teardown, then another's teardown
    # leaves the count changed: that one alone is named (it named all three)
    "teardown_after_restore": (
        """
@pytest.fixture
def late():
    yield
    torch.set_num_threads(THREADS + 2)

@pytest.fixture
def keep():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)

def test_a(late, keep):
    torch.set_num_threads(THREADS + 1)
""",
        "fixture late (test_v.py:6) changed torch's thread count {t} -> {t2} *",
    ),
    # a module fixture that changes the count, then skips its tests: a leak at once, its fix a finalizer
    "skipping": (
        """
@pytest.fixture(scope="module")
def gpu_only():
    torch.set_num_threads(THREADS + 2)
    pytest.skip("no GPU")

def test_a(gpu_only):
    pass
""",
        "fixture gpu_only (test_v.py:6) changed torch's thread count {t} -> {t2} *, or in a finalizer it adds before "
        "anything can raise: *",
    ),
    # a review: the test's own finalizer was blamed on the fixture torn down after it
    "finalizer": (
        """
def test_a(request, mlp):
    request.addfinalizer(lambda: torch.set_num_threads(THREADS + 2))
""",
        "test_v.py::test_a changed torch's thread count {t} -> {t2} *",
    ),
    # xunit's setup_class: pytest runs it as a fixture of its own, named as the method
    "xunit": (
        """
class TestA:
    @classmethod
    def setup_class(cls):
        torch.set_num_threads(THREADS + 2)

    def test_a(self):
        pass
""",
        "setup method setup_class of TestA changed torch's thread count {t} -> {t2} *; restore the count in its "
        "teardown method (teardown_module, teardown_function, tearDownClass, ...: torch.set_num_threads({t})); *",
    ),
}


@pytest.mark.parametrize("scenario", sorted(VICTIM_SCENARIOS))
def test_fixtures_that_leave_the_count_changed_are_named_as_they_are_written(project, scenario):
    """A trial's leaks by fixtures: two fixtures of one test were named as one with the other's
    count, a fixture whose teardown alone set the count went unseen, a parametrized fixture was
    named twice (`fixture more then fixture more`), and xunit's setup_function was named by
    pytest's own fixture in site-packages. The test after each is the leak's victim."""
    threads = torch.get_num_threads()
    head = f"import pytest\nimport torch\nfrom conftest import infer\nTHREADS = {threads}\n"
    source, line = VICTIM_SCENARIOS[scenario]
    project.makepyfile(
        test_v=head + source + "\ndef test_b(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    try:
        result = run(project, "--opprof", "--opprof-json=r.json", "-p", "no:xdist")
    finally:
        torch.set_num_threads(threads)
    result.stdout.fnmatch_lines(["opprof: " + line.format(t=threads, t2=threads + 2)])
    assert result.stdout.str().count("did not put it back") == 1
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    assert "threads" in [c["name"] for c in tests["test_v.py::test_b"]["checks"]]


def test_a_test_in_a_wider_fixtures_scope_that_does_not_ask_for_it_is_its_victim(project, monkeypatch):
    """A trial: a module fixture set the count for the tests asking for it, and a test after them
    in the module that did not ask recorded that count; run alone it failed `torch threads 3 -> 2
    ... record it`, and recording it so failed the whole run: a flip-flop. It is now that fixture's
    victim, not recorded, whether or not the fixture puts the count back at the module's end; the
    tests asking for it are not."""
    threads = torch.get_num_threads()
    project.makepyfile(
        test_m=f"""
import os
import pytest
import torch
from conftest import infer

@pytest.fixture(scope="module")
def more():
    before = torch.get_num_threads()
    torch.set_num_threads({threads + 1} if os.environ.get("OPPROF_LEAK") else before)
    yield
    torch.set_num_threads(before)

def test_a1(more, opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)

def test_a2(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)

def test_a3(more, opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""
    )
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=3)
    result = run_leaking(project, monkeypatch, "--opprof-update-baseline=all", "--opprof-json=r.json")
    result.stdout.fnmatch_lines(
        [
            f"opprof: fixture more (test_m.py:6), set up by an earlier test, changed torch's thread count {threads} -> "
            f"{threads + 1} for its scope, and tests there that do not ask for it ran on {threads + 1}: *; ask for the "
            "fixture in those tests, *; measured on it without asking for it: test_m.py::test_a2"
        ]
    )
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    statuses = {n: t["baseline"]["status"] for n, t in tests.items()}
    assert statuses == {
        "test_m.py::test_a1": "changed",
        "test_m.py::test_a2": "unreliable",
        "test_m.py::test_a3": "changed",
    }
    result.stdout.fnmatch_lines(
        [f"opprof: 1 baseline not written: it ran on the torch thread count {threads + 1} that fixture more "
         "(test_m.py:6) sets for its scope, without asking for it *: ask for the fixture in this test, *, then record"]
    )  # fmt: skip
    compared = run_leaking(project, monkeypatch, "--opprof")  # the baseline holds the session's count
    compared.stdout.fnmatch_lines(
        ["*the count is the one fixture more (test_m.py:6) sets for its scope, which this test does not ask for *"]
    )


def test_a_leak_inside_a_wider_fixtures_scope_stands_beside_the_one_before(project):
    """A review: a test leaked the count inside a class fixture's scope while an earlier leak was
    live, and the tracker dropped it: the test after it there recorded the leaked count. Each
    leak now has its victims: the class's test after the inner one, the module's test after the
    class (back on the outer leak's count)."""
    threads = torch.get_num_threads()
    project.makepyfile(
        test_n=f"""
import pytest
import torch
from conftest import infer

def test_a_leak():
    torch.set_num_threads({threads + 1})

class TestFour:
    @pytest.fixture(autouse=True, scope="class")
    def four(self):
        before = torch.get_num_threads()
        torch.set_num_threads({threads + 2})
        yield
        torch.set_num_threads(before)

    def test_x_leaks(self):
        torch.set_num_threads(1)

    def test_y(self, opprof, mlp):
        opprof.run(infer, *mlp, warmup=1, steps=2)

def test_z(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""
    )
    try:
        result = run(project, "--opprof", "--opprof-json=r.json", "-p", "no:xdist")
    finally:
        torch.set_num_threads(threads)
    checks = {
        t["nodeid"]: [c["message"] for c in t["checks"] if c["name"] == "threads"]
        for t in json.loads((project.path / "r.json").read_text())["tests"]
    }
    assert checks["test_n.py::TestFour::test_y"][0].startswith("test_n.py::TestFour::test_x_leaks changed"), (
        result.stdout.str()
    )
    assert checks["test_n.py::test_z"][0].startswith(
        f"test_n.py::test_a_leak changed torch's thread count {threads} -> "
    )
    # recording: each test not written is named with its reason (a break trial read `it ran ...; it ran ...`)
    try:
        recorded = run(project, "--opprof-update-baseline", "-p", "no:xdist")
    finally:
        torch.set_num_threads(threads)
    recorded.stdout.fnmatch_lines(
        [
            "opprof: 2 baselines not written: test_n.py::TestFour::test_y: it ran on the torch thread count 1 that "
            f"test_n.py::TestFour::test_x_leaks left *; test_n.py::test_z: it ran on the torch thread count {threads + 1} "
            "that test_n.py::test_a_leak left *"
        ]
    )


def test_a_wider_fixture_asked_for_at_run_time_or_overridden_is_told_by_identity(project):
    """A review: the wider-scope rule matched fixture names: a test whose autouse fixture asked
    for the module's fixture at run time (request.getfixturevalue) was its victim, and a test of
    a class overriding that name with a fixture of its own was not. It is now by the fixture
    itself: the first is none, the second is one."""
    threads = torch.get_num_threads()
    project.makepyfile(
        test_i=f"""
import pytest
import torch
from conftest import infer

@pytest.fixture(scope="module")
def three():
    before = torch.get_num_threads()
    torch.set_num_threads({threads + 1})
    yield
    torch.set_num_threads(before)

@pytest.fixture(autouse=True)
def dynamic(request):
    if request.node.name == "test_at_run_time":
        request.getfixturevalue("three")
    yield

def test_a(three):
    pass

def test_at_run_time(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)

class TestOverride:
    @pytest.fixture
    def three(self):
        yield

    def test_overridden(self, three, opprof, mlp):
        opprof.run(infer, *mlp, warmup=1, steps=2)
"""
    )
    try:
        run(project, "--opprof", "--opprof-json=r.json", "-p", "no:xdist")
    finally:
        torch.set_num_threads(threads)
    tests = json.loads((project.path / "r.json").read_text())["tests"]
    victims = [t["nodeid"] for t in tests if "threads" in [c["name"] for c in t["checks"]]]
    assert victims == ["test_i.py::TestOverride::test_overridden"]


def test_a_fixture_of_the_same_name_elsewhere_is_no_leaker_s_own(project):
    """A trial: a folder's `model` fixture left the count changed, and a test of another folder
    asking for its own, unrelated `model` fixture was taken to run on it by its own doing (names
    matched, not fixtures): it is a victim; a test of the first folder asking for it is not."""
    threads = torch.get_num_threads()
    project.mkdir("a")
    project.mkdir("b")
    (project.path / "a" / "conftest.py").write_text(
        f"import pytest\nimport torch\n\n@pytest.fixture\ndef model():\n    torch.set_num_threads({threads + 1})\n    yield\n"
    )
    (project.path / "b" / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef model():\n    yield\n")
    body = "\n\ndef test_{name}(model, opprof, mlp):\n    opprof.run(lambda m, x: m(x), *mlp, warmup=1, steps=2)\n"
    (project.path / "a" / "test_a.py").write_text("import torch" + body.format(name="a1") + body.format(name="a2"))
    (project.path / "b" / "test_b.py").write_text("import torch" + body.format(name="b"))
    try:
        result = run(project, "--opprof", "--opprof-json=r.json", "-p", "no:xdist", "--rootdir", str(project.path))
    finally:
        torch.set_num_threads(threads)
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    victims = sorted(n for n, t in tests.items() if "threads" in [c["name"] for c in t["checks"]])
    assert victims == ["b/test_b.py::test_b"], result.stdout.str()


def test_a_test_that_sets_the_leaked_count_itself_is_recorded(project, monkeypatch):
    """A review's test set the count a leak had left, for its own measurement, as its baseline
    holds it: recording on it keeps that count, so the recording is written."""
    threads = torch.get_num_threads()
    project.makepyfile(
        test_l=leaking_head(threads)
        + f"""
        def test_b_own(opprof, mlp):
            before = torch.get_num_threads()
            torch.set_num_threads({threads + 1})
            try:
                opprof.run(infer, *mlp, warmup=1, steps=2)
            finally:
                torch.set_num_threads(before)
        """
    )
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=2)
    result = run_leaking(project, monkeypatch, "--opprof-update-baseline=all")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 rewritten*"])
    assert "not written" not in result.stdout.str()


def test_a_chain_of_thread_leaks_names_every_leaking_test(project, monkeypatch):
    """A trial's two leaks in turn (2 -> 1, then 1 -> 3) left the victim told `record it`, which
    did nothing: the fix names both tests, back to the count its baseline holds."""
    threads = torch.get_num_threads()
    project.makepyfile(
        test_l=f"""
        import os
        import torch
        from conftest import infer

        LEAK = os.environ.get("OPPROF_LEAK")

        def test_a_leak():
            if LEAK:
                torch.set_num_threads({threads + 1})

        def test_b_leak():
            if LEAK:
                torch.set_num_threads({threads + 2})

        def test_c_after(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=3)
    result = run_leaking(project, monkeypatch, "--opprof")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_l.py::test_c_after: the count is the one test_l.py::test_a_leak then test_l.py::test_b_leak left "
            "(they ran earlier and did not put it back): restore it in those tests (try/finally) and run again; *",
            f"opprof: test_l.py::test_a_leak then test_l.py::test_b_leak changed torch's thread count {threads} -> "
            f"{threads + 2} and did not put it back: the tests after them ran on {threads + 2}, *; restore the count "
            f"in those tests (try/finally: torch.set_num_threads({threads})); measured after them: test_l.py::test_c_after",
        ]
    )


def test_a_recording_writes_no_baseline_from_a_test_on_a_thread_count_an_earlier_test_left(project, monkeypatch):
    """A review's recording beside a thread leak wrote `recorded: work changed: torch threads 2 ->
    3`: the file held the leaked count, and the test then depended on test order. No file is
    written from such a test, new or changed (=all too); one line says why and what to do."""
    project.makepyfile(
        test_l=LEAKING
        + "\ndef test_c_new(opprof, mlp):\n"
        + "    if not os.environ.get('OPPROF_LEAK'):\n"
        + "        pytest.skip('a test added later')\n"
        + "    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    threads = torch.get_num_threads()
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=2, skipped=1)
    (after,) = (project.path / ".opprof").rglob("test_b_after.json")
    before = after.read_bytes()
    for mode in ("--opprof-update-baseline", "--opprof-update-baseline=all"):
        result = run_leaking(project, monkeypatch, mode, "--opprof-json=r.json")
        result.assert_outcomes(passed=3)
        result.stdout.fnmatch_lines(
            [
                f"opprof: 2 baselines not written: they ran on the torch thread count {threads + 1} that "
                "test_l.py::test_a_leaker left (a baseline recorded on it would depend on test order): restore the "
                f"count in that test (try/finally: torch.set_num_threads({threads})), then record"
            ]
        )
        assert after.read_bytes() == before and not list((project.path / ".opprof").rglob("test_c_new.json"))
        tests = {t["nodeid"]: t["baseline"] for t in json.loads((project.path / "r.json").read_text())["tests"]}
        assert tests["test_l.py::test_b_after"]["status"] == "unreliable"
        assert tests["test_l.py::test_c_new"]["unrecordable"].startswith("it ran on the torch thread count")


def test_a_test_on_a_thread_count_an_earlier_test_left_is_told_to_fix_that_test_not_to_record(project, monkeypatch):
    """A diagnosis trial's victim of a thread leak was told `record it: pytest
    --opprof-update-baseline <victim>`: run alone it recorded nothing (its own count was right) and
    the next run failed again. Its fix names the test that left the count; the JSON report too."""
    project.makepyfile(test_l=LEAKING)
    threads = torch.get_num_threads()
    monkeypatch.delenv("OPPROF_LEAK", raising=False)
    run(project, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=2)
    result = run_leaking(project, monkeypatch, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=1, failed=1)
    fix = (
        "the count is the one test_l.py::test_a_leaker left (it ran earlier and did not put it back): restore it in "
        "that test (try/finally) and run again; recording this test would record that count, not undo it"
    )
    result.stdout.fnmatch_lines([f"work changed: torch threads {threads} -> {threads + 1} *", fix])  # the failure
    result.stdout.fnmatch_lines([f"test_l.py::test_b_after: {fix}"])  # the summary
    assert "record it: pytest --opprof-update-baseline test_l.py::test_b_after" not in result.stdout.str()
    (after,) = [t for t in json.loads((project.path / "r.json").read_text())["tests"] if t["nodeid"].endswith("after")]
    assert after["baseline"]["threads_left_by"] == "test_l.py::test_a_leaker"
    # a baseline recorded on another count than the one before the leak: restoring the count
    # would not make it pass (a review's was told to fix the leak, then to record): record it
    monkeypatch.delenv("OPPROF_LEAK")
    torch.set_num_threads(threads + 2)
    try:
        run(project, "--opprof-update-baseline=all", "-p", "no:xdist").assert_outcomes(passed=2)
    finally:
        torch.set_num_threads(threads)
    result = run_leaking(project, monkeypatch, "--opprof")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"work changed: torch threads {threads + 2} -> {threads + 1} *",
            "if the change is intended, record it: pytest --opprof-update-baseline test_l.py::test_b_after *",
        ]
    )
    assert "the count is the one" not in result.stdout.str()


def test_an_op_added_in_some_steps_says_its_cost_there_and_where_it_ran(project, monkeypatch):
    """A diagnosis trial's matmul added in 4 of 10 steps read `+ aten::mm (in 4 of 10 steps)`, and
    `0 0.000` in every table (its median per step), and assert_no_op said `found aten::mm (0/step)`.
    The structure line gives its costliest step and its caller, a line under the table its time
    where it ran, and assert_no_op its calls there."""
    project.makepyfile(
        test_s="""
        import os
        import torch
        from conftest import infer

        def sometimes():
            calls = [0]

            def fn(model, x):
                calls[0] += 1
                if os.environ.get("OPPROF_SOME") and calls[0] % 3 == 0:
                    torch.mm(x.t(), x)
                return infer(model, x)

            return fn

        def test_some(opprof, mlp):
            opprof.run(sometimes(), *mlp, warmup=2, steps=10)

        def test_asserts(opprof, mlp):
            opprof.run(sometimes(), *mlp, warmup=2, steps=10)
            opprof.assert_no_op("aten::mm")
        """
    )
    monkeypatch.delenv("OPPROF_SOME", raising=False)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("OPPROF_SOME", "1")
    result = run(project, "--opprof")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*aten::mm: expected no calls, found aten::mm (1/step in [34] of 10 steps, called from Python*",
            "*ran in some steps only (their medians per step are 0): *aten::mm in [34] of 10 steps (* ms cpu there)*",
            "test_s.py::test_some: structure changed: *+ aten::mm (in [34] of 10 steps, up to * ms a step, called from "
            "Python*",
        ]
    )


def test_require_baseline_makes_a_test_without_one_an_error_naming_the_fix(project):
    """CI with a baseline not committed, or a mistyped --opprof-baseline-dir, passed every test
    with exit 0; --opprof-require-baseline (ini opprof_require_baseline) makes each such test an
    error. Recording runs are not held to it; a test with its baseline passes."""
    project.makepyfile(
        test_r="from conftest import infer\ndef test_a(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    result = run(project, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*opprof: --opprof-require-baseline: test_r.py::test_a has no baseline "
            "(.opprof/cpu-*/test_r.py/test_a.json does not exist); record it with "
            "pytest --opprof-update-baseline test_r.py::test_a and commit it, or check --opprof-baseline-dir*"
        ]
    )
    run(project, "--opprof-update-baseline", "--opprof-require-baseline").assert_outcomes(passed=1)
    run(project, "--opprof", "--opprof-require-baseline").assert_outcomes(passed=1)
    project.makeini("[pytest]\nopprof = true\nopprof_require_baseline = true\n")
    run(project, "--opprof-baseline-dir=.opprf").assert_outcomes(errors=1)  # mistyped


def test_a_suggested_record_command_repeats_the_runs_own_baseline_location(project):
    """A run with --opprof-baseline-dir / --opprof-device-key on its command line suggested
    `pytest --opprof-update-baseline <id>`, which records under .opprof/<device> instead (a trial
    copied it and the next run still lacked the baseline). The suggestion repeats the flags the
    person gave (command line, -o), and running it makes the next run pass; ini values, which the
    next run reads again, are not repeated."""
    project.makepyfile(
        test_r="from conftest import infer\ndef test_a(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    located = ["--opprof-baseline-dir", "perf base", "--opprof-device-key=ci-a10"]
    result = run(project, "--opprof", "--opprof-require-baseline", *located)
    result.assert_outcomes(errors=1)
    # the error's own line (under CI=true pytest's short summary repeats it whole)
    (line,) = [x for x in result.stdout.lines if x.startswith("opprof: --opprof-require-baseline")]
    command = line.split("record it with ", 1)[1].split(" and commit it", 1)[0]
    expected = (
        "pytest --opprof-update-baseline '--opprof-baseline-dir=perf base' --opprof-device-key=ci-a10 test_r.py::test_a"
    )
    assert command == expected
    run(project, *shlex.split(command)[1:]).assert_outcomes(passed=1)
    assert (project.path / "perf base" / "ci-a10" / "test_r.py" / "test_a.json").is_file()
    assert not (project.path / ".opprof").exists()
    run(project, "--opprof", "--opprof-require-baseline", *located).assert_outcomes(passed=1)

    project.makeini("[pytest]\nopprof_baseline_dir = perf base\n")
    result = run(project, "--opprof", "-o", "opprof_device_key=ci-t4")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: no baseline for 1 test (test_r.py::test_a) in perf base/ci-t4 (*); record it: pytest "
            "--opprof-update-baseline --opprof-device-key=ci-t4 test_r.py::test_a"
        ]
    )
    # the summary's command, with an existing absolute folder: with `=`, or opprof refuses it (a trial)
    (project.path / "abs").mkdir()
    result = run(project, "--opprof", f"--opprof-baseline-dir={project.path / 'abs'}")
    (line,) = [x for x in result.stdout.lines if x.startswith("opprof: no baseline")]
    command = line.split("; record it: ", 1)[1]
    assert command == f"pytest --opprof-update-baseline --opprof-baseline-dir={project.path / 'abs'} test_r.py::test_a"
    run(project, *shlex.split(command)[1:]).assert_outcomes(passed=1)
    run(
        project, "--opprof", "--opprof-require-baseline", f"--opprof-baseline-dir={project.path / 'abs'}"
    ).assert_outcomes(passed=1)


def test_the_runs_own_ignore_glob_is_not_judged_in_a_run_that_picked_some_tests(baselined):
    """A project-wide glob (ini, command line) for ops of some tests only warned on every -k or
    node-id run that left those tests out (a trial's `aten::zero_`, used by the train tests); a
    marker's glob belongs to its test, which ran: still judged."""
    source = (baselined.path / "test_base.py").read_text()
    baselined.makepyfile(
        test_base=source.replace(
            "def test_big(opprof):", "@pytest.mark.opprof(ignore_ops='aten::relu_')\ndef test_big(opprof):"
        )
    )
    globs = "--opprof-ignore-ops=aten::addmmm"
    picks = (["-k", "big"], ["test_base.py::test_big"], ["--deselect", "test_base.py::test_tiny"], ["test_base.py"])
    for picked in picks:
        out = run(baselined, "--opprof", globs, *picked).stdout.str()
        assert "'aten::addmmm' matched no op" not in out, picked
        assert "'aten::relu_' matched no op in test_base.py::test_big" in out, picked
    for whole in ([], ["."]):  # the whole suite: the rootdir, no testpaths here
        assert "'aten::addmmm' matched no op" in run(baselined, "--opprof", globs, *whole).stdout.str()
    # a real op no test runs: a precaution (an op other hardware runs), not a typo; a line on
    # every run could not be silenced (a trial), so it is said with -v only
    result = run(baselined, "--opprof", "--opprof-ignore-ops=aten::zero_")
    assert "aten::zero_" not in result.stdout.str()
    result = run(baselined, "--opprof", "--opprof-ignore-ops=aten::zero_", "-v")
    result.stdout.fnmatch_lines(
        [
            "opprof: ignore glob 'aten::zero_' matched no op in the * compared tests: it ignores nothing; "
            "torch knows that op, but no test it applied to ran it (a precaution: said only with -v)"
        ]
    )
    result = run(baselined, "--opprof", "--opprof-ignore-ops=myns::zero_")  # a namespace torch cannot check
    result.stdout.fnmatch_lines(["*'myns::zero_' matched no op in * it ignores nothing; use op names as the tables*"])


@pytest.mark.parametrize(
    ("args", "picked"),
    [
        ([], False),
        (["tests"], False),  # the testpaths
        (["."], False),  # more than the testpaths
        (["tests/test_a.py"], True),
        (["tests/test_a.py::test_x"], True),
        (["-k", "x"], True),
        (["--ignore=tests/test_b.py"], True),
    ],
)
def test_a_run_picked_some_tests_unless_its_paths_cover_the_testpaths(pytester, args, picked):
    """What leaves the run's own ignore globs unjudged: a selection, or paths short of the testpaths."""
    summary = importlib.import_module("pytest_opprof.plugin.summary")
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    pytester.makepyfile(**{"tests/test_a": "def test_x(): pass", "tests/test_b": "def test_y(): pass"})
    assert summary.picked_some(pytester.parseconfig(*args)) is picked


def test_a_marker_ignore_glob_that_matches_no_op_names_its_test(baselined):
    """A marker's glob applies to its test only: the line names that test."""
    source = (baselined.path / "test_base.py").read_text()
    baselined.makepyfile(
        test_base=source.replace(
            "def test_big(opprof):", "@pytest.mark.opprof(ignore_ops='aten::relu_')\ndef test_big(opprof):"
        )
    )
    result = run(baselined, "--opprof")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: ignore glob 'aten::relu_' matched no op in test_base.py::test_big: it ignores nothing; did you mean aten::relu?*"
        ]
    )
    baselined.makepyfile(  # the wall's name is among the suggestions
        test_base=source.replace(
            "def test_big(opprof):", "@pytest.mark.opprof(ignore_ops='step-wall')\ndef test_big(opprof):"
        )
    )
    result = run(baselined, "--opprof")
    result.stdout.fnmatch_lines(
        ["opprof: ignore glob 'step-wall' matched no op in *: it ignores nothing; did you mean step wall?*"]
    )


def test_marker_overrides_the_rule_per_test(pytester, monkeypatch):
    """@pytest.mark.opprof(ignore_ops=..., tolerance=...) applies to that test only."""
    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    source = BASELINE_TESTS.replace(
        "def test_big(opprof):",
        "@pytest.mark.opprof(ignore_ops=['aten::clone', 'aten::copy_', 'aten::empty*'], tolerance='50%')\ndef test_big(opprof):",
    )
    pytester.makepyfile(test_base=source)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)
    monkeypatch.setenv("OPPROF_INJECT", "extra")
    result = run(pytester, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    (row,) = [line for line in result.stdout.lines if line.startswith("aten::clone ")]
    assert row.split()[-1] == "ignored"  # a trial's ignored op read `added` beside its pass


def test_no_baseline_passes_and_says_how_to_record(project):
    """Without a baseline the test passes and the summary says how to create one."""
    project.makepyfile("from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n")
    result = run(project, "--opprof")
    result.assert_outcomes(passed=1)
    key = device.device_key(device.device_facts()[0])
    result.stdout.fnmatch_lines(
        [
            f"opprof: no baseline for 1 test (test_no_baseline_passes_and_says_how_to_record.py::test_x) in .opprof/{key} (no such folder); record it: pytest --opprof-update-baseline test_no_baseline_passes_and_says_how_to_record.py::test_x"
        ]
    )
    assert not (project.path / ".opprof").exists()


def test_the_no_baseline_command_records_only_the_tests_without_one(project, monkeypatch):
    """The line's command was a bare `pytest --opprof-update-baseline`, which also records every
    other test's structure change: an audit ran it for a new test and accepted another test's
    regression with it. The command names the tests without a baseline; run, it leaves the
    regressed test's file as it was."""
    project.makepyfile(
        test_m="""
        import os, torch
        def test_fwd(opprof):
            m = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(int(os.environ.get("LAYERS", "1")))])
            opprof.run(m, torch.ones(2, 4), steps=2)

        if os.environ.get("NEW"):
            def test_new(opprof):
                opprof.run(lambda: torch.ones(4) + 1, steps=2)
        """
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (fwd,) = (project.path / ".opprof").rglob("test_fwd.json")
    recorded = fwd.read_bytes()
    monkeypatch.setenv("LAYERS", "2")
    monkeypatch.setenv("NEW", "1")
    result = run(project, "--opprof")
    (line,) = [x for x in result.stdout.lines if x.startswith("opprof: no baseline")]
    command = line.split("; record it: ", 1)[1]
    assert command == "pytest --opprof-update-baseline test_m.py::test_new"
    run(project, *shlex.split(command)[1:]).assert_outcomes(passed=1)
    assert fwd.read_bytes() == recorded
    assert list((project.path / ".opprof").rglob("test_new.json"))


def test_no_baseline_line_names_the_keys_a_missing_folder_has_instead(project):
    """Baselines recorded under another device key, or a mistyped --opprof-baseline-dir, would pass
    every test quietly: the line names the folder looked in and the keys the baseline folder holds;
    a test new to an existing key folder gets the folder alone."""
    project.makepyfile("from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n")
    run(project, "--opprof-update-baseline", "--opprof-device-key=ci-a10").assert_outcomes(passed=1)
    run(project, "--opprof-update-baseline", "--opprof-device-key=ci-t4").assert_outcomes(passed=1)
    result = run(project, "--opprof", "--opprof-device-key=ci-h200")
    result.stdout.fnmatch_lines(
        [
            "opprof: no baseline for 1 test (*::test_x) in .opprof/ci-h200 (no such folder; .opprof holds baselines of "
            "ci-a10, ci-t4); record it: pytest --opprof-update-baseline --opprof-device-key=ci-h200 *::test_x"
        ]
    )
    result = run(project, "--opprof", "--opprof-device-key=ci-a10", "--opprof-baseline-dir=.oprof")
    result.stdout.fnmatch_lines(  # the default folder, which holds them, is named
        [
            "opprof: no baseline for 1 test (*::test_x) in .oprof/ci-a10 (no such folder; .opprof holds baselines of "
            "ci-a10, ci-t4: --opprof-baseline-dir mistyped?); record it: *"
        ]
    )
    project.makepyfile(
        test_new="from conftest import infer\ndef test_y(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    result = run(project, "--opprof", "--opprof-device-key=ci-a10")
    result.stdout.fnmatch_lines(
        [
            "opprof: no baseline for 1 test (test_new.py::test_y) in .opprof/ci-a10; record it: pytest --opprof-update-baseline *test_new.py::test_y"
        ]
    )
    other = project.path / "etc"  # a trial's opprof_baseline_dir = "/etc" named its 80 folders as keys
    for name in ("apache2", "X11", "ssl", "python3"):
        (other / name).mkdir(parents=True)
        (other / name / "some.conf").write_text("x")
    for key in ("k1", "k2", "k3", "k4"):
        (other / key / "t.py").mkdir(parents=True)
        (other / key / "t.py" / "test_a.json").write_text("{}")
    result = run(project, "--opprof", "--opprof-device-key=ci-a10", "--opprof-baseline-dir=etc")
    result.stdout.fnmatch_lines(
        ["*in etc/ci-a10 (no such folder; etc holds baselines of k1, k2, k3 and 1 more); record them: *"]
    )


def test_no_baseline_line_names_a_baseline_folder_above_the_rootdir(pytester, monkeypatch):
    """A newcomer's project without an ini file, recorded from its top and run from `tests/`: the
    rootdir became `tests/`, and the line said `no such folder`, nothing of why. It names the
    folder above that holds baselines, and how pytest chooses the rootdir."""
    tests = pytester.mkdir("tests")
    (tests / "test_top.py").write_text(
        "import torch\ndef test_x(opprof):\n    opprof.run(torch.ones(4).add, 1, warmup=1, steps=2)\n"
    )
    run(pytester, "--opprof-update-baseline", "--opprof-device-key=ci-a10", "tests").assert_outcomes(passed=1)
    assert (pytester.path / ".opprof" / "ci-a10" / "tests" / "test_top.py").is_dir()
    monkeypatch.chdir(tests)
    result = run(pytester, "--opprof", "--opprof-device-key=ci-a10")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"opprof: no baseline for 1 test (test_top.py::test_x) in .opprof/ci-a10 (no such folder; "
            f"{pytester.path.resolve() / '.opprof'} holds baselines of ci-a10: the rootdir moved? pytest takes it from an "
            "ini file (pytest.ini, pyproject.toml), else from the paths given: give the project one at its top); record it: *"
        ]
    )


@pytest.mark.parametrize("update", [False, True])
def test_corrupt_baseline_is_an_error_naming_the_file_and_left_intact(baselined, update):
    """A corrupt baseline makes the test an error naming the file; the file is not touched."""
    path = next(p for p in (baselined.path / ".opprof").rglob("test_big.json"))
    path.write_text("{oops")
    flag = "--opprof-update-baseline" if update else "--opprof"
    result = run(baselined, flag, "-k", "big")
    result.assert_outcomes(errors=1)
    # named as the run's other lines name baselines, relative to the rootdir (it was absolute)
    fix = (
        "fix it, or delete it and run this command again: a recording never replaces a file it cannot read"
        if update  # a trial read `run pytest --opprof-update-baseline` while running just that
        else "fix or delete it and run pytest --opprof-update-baseline test_base.py::test_big"
    )
    result.stdout.fnmatch_lines([f"opprof: {path.relative_to(baselined.path)}: not valid JSON (line 1); {fix}"])
    assert path.read_text() == "{oops"
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 1234\n"
    path.write_text(pointer)  # a checkout without `git lfs pull`: said as such, in either run
    result = run(baselined, flag, "-k", "big")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"opprof: {path.relative_to(baselined.path)}: a Git LFS pointer, not the baseline it stands for; fetch *"]
    )
    assert path.read_text() == pointer


def test_a_committed_merge_conflict_is_resolved_by_the_command_its_error_gives(baselined):
    """A baseline committed with a merge conflict's markers: the error names the test's id and a
    fix that works once the merge is committed (a team trial's `git checkout --ours`, the fix it
    was given, did nothing there); a recording leaves the file as it is and says to delete it."""
    path = next(p for p in (baselined.path / ".opprof").rglob("test_big.json"))
    ours = path.read_text()
    conflicted = f"<<<<<<< HEAD\n{ours}=======\n{{}}\n>>>>>>> b\n"
    path.write_text(conflicted)
    shown = path.relative_to(baselined.path)
    result = run(baselined, "--opprof-update-baseline=all", "-k", "big")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            f"opprof: {shown}: holds a merge conflict's markers (*); resolve it: delete the file and run this command again *"
        ]
    )
    assert path.read_text() == conflicted
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(errors=1)
    # the error's own line (under CI=true pytest's short summary repeats it whole, `ERROR ... - opprof: ...`)
    (line,) = [line for line in result.outlines if line.startswith("opprof: ") and "merge conflict" in line]
    assert line.startswith(f"opprof: {shown}: holds a merge conflict's markers (<<<<<<< at line ")
    assert path.read_text() == conflicted
    command = line.split("delete the file and run ", 1)[1].split(" (while the merge", 1)[0]
    argv = shlex.split(command)
    assert argv == ["pytest", "--opprof-update-baseline", "test_base.py::test_big"]
    path.unlink()
    run(baselined, *argv[1:]).assert_outcomes(passed=1)
    assert "<<<<<<<" not in path.read_text()
    run(baselined, "--opprof", "--opprof-require-baseline", "-k", "big").assert_outcomes(passed=1)


def test_a_recording_takes_no_range_measurements_for_a_file_it_cannot_read(pytester, fake_clock):
    """A recording leaves an unreadable baseline as it is, so run() takes none of the ranges'
    further measurements for it (they cost 1.5 s of pauses and 3 more measurements for nothing)."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_ctx=NO_GRAD_TESTS)
    run(pytester, "--opprof-update-baseline", "-k", "test_mm").assert_outcomes(passed=1)
    assert fake_clock.captures == 4  # the first and the ranges' three
    (path,) = (pytester.path / ".opprof").rglob("test_mm.json")
    path.write_text("{oops")
    fake_clock.captures, fake_clock.pauses[:] = 0, []
    result = run(pytester, "--opprof-update-baseline", "-k", "test_mm")
    result.assert_outcomes(errors=1)
    assert fake_clock.captures == 1 and fake_clock.pauses == []
    result.stdout.fnmatch_lines(["*test_mm.json: not valid JSON (line 1); fix it, or delete it*"])
    assert path.read_text() == "{oops"


def test_a_recording_takes_range_measurements_only_for_a_file_it_may_write(pytester, fake_clock):
    """A bare recording of unchanged code keeps each file as it is: the ranges' three further
    measurements (and 1.5 s of pauses) served nothing, 1.6 s a test in a scale trial's re-recording
    of 80 unchanged tests. Now they are taken for a new file, under =all, and where the first
    measurement alone does not keep the file (a slower time asks its confirmations)."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_ctx=NO_GRAD_TESTS)
    run(pytester, "--opprof-update-baseline", "-k", "test_mm").assert_outcomes(passed=1)
    assert fake_clock.captures == 4  # new: the first and the ranges' three
    (path,) = (pytester.path / ".opprof").rglob("test_mm.json")
    recorded = path.read_bytes()
    fake_clock.captures, fake_clock.pauses[:] = 0, []
    result = run(pytester, "--opprof-update-baseline", "-k", "test_mm")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: baselines written: none; kept 1 unchanged*"])
    assert (fake_clock.captures, fake_clock.pauses, path.read_bytes()) == (1, [], recorded)
    fake_clock.captures = 0
    run(pytester, "--opprof-update-baseline=all", "-k", "test_mm").assert_outcomes(passed=1)
    assert fake_clock.captures == 4
    fake_clock.costs["aten::mm"] = 600_000  # x3: a time the first measurement cannot settle alone
    fake_clock.captures = 0
    result = run(pytester, "--opprof-update-baseline", "-k", "test_mm")
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 4


def test_a_renumbered_recording_takes_no_range_measurements(pytester, fake_clock, monkeypatch):
    """A capture added before the test's run(): a bare recording renumbers the file, its times
    kept, so the ranges' measurements served nothing (a review)."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(
        test_renum="""
        import os, torch

        def test_mm(opprof):
            if os.environ.get("BLOCK"):
                with opprof.capture():
                    torch.ones(4).add(1)
            a = torch.ones(8, 8)
            opprof.run(lambda: a.mm(a), warmup=1, steps=6)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert fake_clock.captures == 4
    monkeypatch.setenv("BLOCK", "1")
    fake_clock.captures, fake_clock.pauses[:] = 0, []
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 renumbered*"])
    assert (fake_clock.captures, fake_clock.pauses) == (1, [])  # run()'s first (the block's has inputs): no ranges


def test_baseline_dir_option(pytester, monkeypatch):
    """--opprof-baseline-dir puts the baselines elsewhere."""
    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    pytester.makepyfile(test_base=BASELINE_TESTS)
    run(pytester, "--opprof-update-baseline", "--opprof-baseline-dir", "perf/base", "-k", "tiny")
    assert len(list((pytester.path / "perf" / "base").rglob("*.json"))) == 2
    assert not (pytester.path / ".opprof").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--opprof-tolerance", "fast"], "--opprof-tolerance: 'fast' is not a percentage like 20% (from command line)"),
        (["--opprof-min-delta-ms", "-1"], "--opprof-min-delta-ms: '-1' is not a finite number of milliseconds >= 0"),
        (["--opprof-min-delta-ms", "1e400"], "--opprof-min-delta-ms: '1e400' is not a finite number of milliseconds"),
        (
            ["--opprof-tolerance", "100000%"],
            "--opprof-tolerance: '100000%' is not a percentage like 20%, from 0% to under 10000% (from command line)",
        ),
        (
            ["--opprof-fail-on", "speed"],
            "--opprof-fail-on: 'speed' is not a comma list of structure, work, time, environment (or none) (from",
        ),
        (
            ["--opprof-fail-on", "time,speed,structur,tme"],
            "--opprof-fail-on: 'time,speed,structur,tme' is not a comma list of structure, work, time, environment "
            "(or none); not a kind: 'speed', 'structur' (did you mean structure?), 'tme' (did you mean time?) (from "
            "command line)",
        ),
        (
            ["--opprof-update-baseline", "alll"],
            "--opprof-update-baseline: 'alll' is not 'changed' (the default), 'all', or true/false; did you mean all?",
        ),
        (  # a mistyped test path where the mode goes (an existing one is taken as a path)
            ["--opprof-update-baseline", "tests/test_mpl.py::test_a"],
            "--opprof-update-baseline: 'tests/test_mpl.py::test_a' is not 'changed' (the default), 'all', or "
            "true/false; it looks like a test path (tests/test_mpl.py does not exist): check it, and give the mode "
            "first: --opprof-update-baseline=changed tests/test_mpl.py::test_a (from command line)",
        ),
        (
            ["--opprof-update-baseline=some"],
            "--opprof-update-baseline: 'some' is not 'changed' (the default), 'all', or true/false (from command line)",
        ),
        (
            ["--opprof-update-baseline="],
            "--opprof-update-baseline: '' is not 'changed' (the default), 'all', or true/false",
        ),
    ],
)
def test_bad_baseline_options(pytester, args, message):
    """Bad comparison options are usage errors naming flag, value and source."""
    pytester.makepyfile("def test_x(): pass")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_bad_marker_rule_value(project):
    """A bad marker value is a usage error naming the keyword and what it expects."""
    project.makepyfile("import pytest\n@pytest.mark.opprof(tolerance='lots')\ndef test_x(): pass")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*@pytest.mark.opprof(tolerance='lots'): expected a percentage like 20%"])


LIMITED_TESTS = """
import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)
SEEN = []


def mm():
    SEEN.append(torch.get_num_threads())
    return torch.mm(a, b)


def test_mm(opprof):
    default = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        opprof.run(mm, warmup=2, steps=6)
    finally:
        torch.set_num_threads(default)


def test_seen():  # after test_mm's confirmations
    assert SEEN[-8:] == [1] * 8, SEEN
"""


def test_a_confirmation_measures_on_the_first_measurements_threads(pytester, fake_clock):
    """A test that limits torch's threads around run() and restores them: the confirmations
    measure on the first measurement's thread count (a review: one run after the test body
    pooled samples taken on 2 threads with those taken on 1; run() now takes them, and they
    still name the first measurement's threads)."""
    if torch.get_num_threads() < 2:
        pytest.skip("one torch thread: there is no fewer to limit to")
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_limited=LIMITED_TESTS)
    run(pytester, "--opprof-update-baseline", "-k", "test_mm").assert_outcomes(passed=1)
    fake_clock.costs["aten::mm"] = 800_000
    result = run(pytester, "--opprof", "-p", "no:randomly")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["test_limited.py::test_mm: measured 4 times, with pauses between: each differs from the baseline; *"]
    )


def test_a_slower_time_that_fails_no_test_says_it_was_measured_once(remeasure_project, fake_clock):
    """Where time fails no test (--opprof-fail-on without it), a slowdown is not measured again:
    its line says it comes from one measurement (a trial read an unconfirmed +200% with no word)."""
    fake_clock.plan = [3.0]
    result = run(remeasure_project, "--opprof", "--opprof-fail-on=structure,work")
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 1
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: time: aten::mm: * (+200%, slower*; measured once, not confirmed: time does "
            "not fail this test (--opprof-fail-on, or its marker's)"
        ]
    )
    fake_clock.plan, fake_clock.captures = [3.0, 3.0, 3.0, 3.0], 0
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(failed=1)
    assert "measured once" not in result.stdout.str()


def test_suspected_time_regression_is_measured_again(remeasure_project, fake_clock):
    """A slowdown seen once (interference) passes after a second measurement, taken after a
    pause; one that outlasts two more pauses too (a slow spell of the machine) passes after the
    fourth; one seen in all four fails. The table's row says the first one's slowdown was not
    confirmed (a trial read `+28% ok` past a 20% limit)."""
    fake_clock.plan = [8.0, 1.0]  # the first measurement 8x slow, its confirmation as recorded
    fake_clock.signature_captures = 0
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "aten::mm * +700% * not confirmed",
            "test_re.py::test_mm: the first measurement's time differed from the baseline's; a second one, after a pause, "
            "did not confirm it (interference, or a slow spell of the machine), so its time passes",
        ]
    )
    assert (fake_clock.captures, fake_clock.pauses) == (2, [0.5])
    # run()'s signature step and the confirmation's (it tells whether fn ran the first's work;
    # the whole call was abandoned before its capture was read)
    assert fake_clock.signature_captures == 2
    fake_clock.plan, fake_clock.captures, fake_clock.pauses[:] = [8.0, 8.0, 8.0, 1.0], 0, []
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_re.py::test_mm: *; measurement 4, after a pause, did not confirm it*"])
    assert (fake_clock.captures, fake_clock.pauses) == (4, [0.5, 0.5, 0.5])
    fake_clock.plan, fake_clock.pauses[:] = [], []
    fake_clock.costs["aten::mm"] = 800_000
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: measured 4 times, with pauses between: each differs from the baseline; the time line "
            "judges their pooled steps, the op table shows the first",
            "*aten::mm: 0.830 ms/step vs baseline 0.230 ms*",
            "test_re.py::test_mm: if the change is intended, record it: pytest --opprof-update-baseline=all test_re.py::test_mm*",
        ]
    )
    assert fake_clock.pauses == [0.5, 0.5, 0.5]
    # A bare recording run keeps the file (a slower time alone may be the machine's) and says how
    # to record it; =all writes it.
    (path,) = (remeasure_project.path / ".opprof").rglob("*.json")
    before = path.read_bytes()
    result = run(remeasure_project, "--opprof-update-baseline")
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: baseline kept: --opprof-update-baseline never writes a slower time alone*; "
            "if the change is intended, record it: pytest --opprof-update-baseline=all test_re.py::test_mm*",
            "opprof: baselines written: none; kept 0 unchanged *; kept 1 slower (test_re.py::test_mm): never written "
            "without =all",
        ]
    )
    assert path.read_bytes() == before
    run(remeasure_project, "--opprof-update-baseline=all", "test_re.py::test_mm")
    assert path.read_bytes() != before


def test_a_baseline_holds_each_ops_range_over_four_measurements_and_judges_by_it(pytester, fake_clock):
    """Recording a run() test measures it 3 more times (with pauses) and writes the first
    measurement with each op's range of per-step minima: a slow spell seen while recording
    (here the second measurement, 3x) widens it. A later run slower within that range is
    inconclusive, said with the range and how to record a steadier baseline, --opprof-strict
    makes it an error; beyond it, the test fails as before."""
    from conftest import REMEASURE_TESTS

    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_re=REMEASURE_TESTS)
    fake_clock.plan = [1.0, 3.0, 1.0, 1.0]  # the second measurement in a slow spell
    result = run(pytester, "--opprof-update-baseline")
    result.stdout.fnmatch_lines(
        [
            "opprof: baselines written: 1 new; *",
            "opprof: 1 file written with the range of each op's time over 4 measurements: a later time within "
            "that range is inconclusive, not a failure (pytest-opprof's docs/verdicts.md: Recorded ranges)",
        ]
    )
    assert (fake_clock.captures, fake_clock.pauses, fake_clock.idle_pauses) == (4, [0.5, 0.5, 0.5], [])
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    mm = json.loads(path.read_text())["ops"]["aten::mm"]
    assert (min(mm["cpu_ms"]), mm["recorded_range_ms"]) == (0.23, [0.23, 0.69])  # the first written
    fake_clock.plan, fake_clock.captures, fake_clock.pauses[:] = [2.5] * 4, 0, []
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work,time")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: time inconclusive for aten::mm: its baseline's measurements of the same code ranged "
            "0.230-0.690 ms on this machine; this time is within the slowest and its tolerance (up to 0.828 ms); "
            "neither passed nor failed *; to judge a "
            "move this size, record the baseline again where the op's time holds steadier *: pytest "
            "--opprof-update-baseline=all test_re.py::test_mm",  # the id written out: a trial had to type it
        ]
    )
    assert fake_clock.captures == 1  # an inconclusive time is not measured again
    fake_clock.plan, fake_clock.captures = [2.5] * 4, 0
    run(pytester, "--opprof", "--opprof-strict", "-o", "opprof_fail_on=structure,work,time").assert_outcomes(errors=1)
    fake_clock.plan, fake_clock.captures = (
        [4.0] * 4,
        0,
    )  # 0.920 ms: beyond the slowest recorded 0.690 ms and the tolerance
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work,time")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*aten::mm: 0.920 ms/step vs baseline 0.230 ms (+300%, slower; limit +20%*"])


NO_GRAD_TESTS = """
import torch

seen = []
a, b = torch.randn(64, 64), torch.randn(64, 64)


@torch.no_grad()
def test_mm(opprof, tmp_path):
    with open(tmp_path / "log.txt", "w") as log:
        def step():
            seen.append(torch.is_grad_enabled())
            log.write("step\\n")
            return torch.mm(a, b)

        opprof.run(step, warmup=2, steps=6)


def test_seen():
    assert len(seen) > 8 and not any(seen), seen
"""


def test_recording_measures_the_ranges_inside_run_in_the_tests_own_context(pytester, fake_clock):
    """A review: the ranges' further measurements ran after the test body returned, outside its
    `torch.no_grad()` (a transformer took another path there, so no range was kept) and its open
    file (`I/O operation on closed file`). run() now takes them before it returns."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_ctx=NO_GRAD_TESTS)
    result = run(pytester, "--opprof-update-baseline", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert fake_clock.captures == 4
    (path,) = (pytester.path / ".opprof").rglob("test_mm.json")
    assert "recorded_range_ms" in json.loads(path.read_text())["ops"]["aten::mm"]


CONTEXT_TESTS = """
import torch

seen = []
a, b = torch.randn(64, 64), torch.randn(64, 64)


@torch.no_grad()
def test_mm(opprof, tmp_path):
    with open(tmp_path / "log.txt", "w") as log, torch.autocast("cpu", dtype=torch.bfloat16):
        def step():
            seen.append((torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))
            log.write("step\\n")
            return torch.mm(a, b)

        opprof.run(step, warmup=2, steps=6)


def test_seen():
    assert len(seen) > 8 and set(seen) == {(False, True)}, seen
"""


@pytest.mark.parametrize("context", ["file", "autocast"])
def test_a_confirmation_runs_inside_run_in_the_tests_own_context(pytester, fake_clock, context):
    """A comparing run's confirmation of a suspected time ran after the test body returned, outside
    its context: fn writing to a file the test opened around run() failed with `I/O operation on
    closed file`, and one under `torch.autocast` was measured without it. run() now judges its
    measurement against the baseline and takes a suspected time's confirmations before it returns."""
    fake_clock.costs["aten::mm"] = 200_000
    tests = CONTEXT_TESTS
    if context == "autocast":  # no file: the autocast alone
        tests = tests.replace('open(tmp_path / "log.txt", "w") as log, ', "").replace('log.write("step\\n")', "pass")
    pytester.makepyfile(test_ctx=tests)
    run(pytester, "--opprof-update-baseline", "-p", "no:randomly").assert_outcomes(passed=2)
    fake_clock.plan, fake_clock.captures = [8.0, 1.0], 0  # slow first: confirmed once, cleared
    result = run(pytester, "--opprof", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert fake_clock.captures == 2
    result.stdout.fnmatch_lines(["test_ctx.py::test_mm: the first measurement's time differed*did not confirm it*"])


TWO_CAPTURE_TESTS = """
import os

import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)
data = iter(range(int(os.environ.get("FIRST_CALLS", "1000000"))))


def first():  # its data runs out: it cannot be called for a confirmation
    next(data)
    return torch.mm(a, b)


def test_two(opprof, tmp_path):
    if os.environ.get("FIRST_CALLS"):
        opprof.run(first, warmup=2, steps=6)
    with open(tmp_path / "log.txt", "w") as log:
        def second():
            log.write("step\\n")
            return torch.mm(a, b)

        opprof.run(second, warmup=2, steps=6)
"""


def recorded_of_two_captures(pytester, fake_clock, monkeypatch):
    """TWO_CAPTURE_TESTS recorded with both captures (its file holds capture 2; each run() took its
    ranges' measurements), then run with one: the baseline file."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_two=TWO_CAPTURE_TESTS)
    monkeypatch.setenv("FIRST_CALLS", "1000000")
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.delenv("FIRST_CALLS")
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    return path


def test_run_judges_only_the_capture_its_baseline_holds(pytester, fake_clock, monkeypatch):
    """A test that captures twice keeps its latest capture as its baseline, which now says which
    capture it was (`capture.number`). Before, each run() was judged as it returned: the first,
    slower than the second's baseline, paid confirmations, and a fn whose data ran out failed the
    test. Now only the second is judged and confirmed, in the test's context (its file still open)."""
    path = recorded_of_two_captures(pytester, fake_clock, monkeypatch)
    assert json.loads(path.read_text())["capture"]["number"] == 2
    monkeypatch.setenv("FIRST_CALLS", "11")  # one measurement: warmup, steps, 2 unprofiled, the signature step
    fake_clock.plan, fake_clock.captures = [8.0], 0
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work,time")
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 2  # the first run() was not judged, so not confirmed
    assert "did not confirm" not in result.stdout.str()
    fake_clock.plan, fake_clock.captures = [1.0, 8.0], 0  # the second slower: confirmed in run()
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work,time")
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 3
    result.stdout.fnmatch_lines(["test_two.py::test_two: the first measurement's time differed*did not confirm it*"])


TIME_FAILS = ("-o", "opprof_fail_on=structure,work,time")


def test_a_baseline_of_another_capture_says_so_and_a_slowdown_is_inconclusive(pytester, fake_clock, monkeypatch):
    """The test's captures changed since its recording (its capture 2 is now its only one): run()
    judged no capture, and nothing is measured after the body (fn's file is closed there), so a
    slowdown is inconclusive, said with the fix, and each comparing run says what the stale file
    costs (its slowdown part only where time fails the test)."""
    recorded_of_two_captures(pytester, fake_clock, monkeypatch)
    time_fails = TIME_FAILS
    result = run(pytester, "--opprof", *time_fails)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_two.py::test_two: its baseline holds the test's capture 2 and its latest is now capture 1 (the "
            "test's captures changed since it was recorded): a slowdown of this capture cannot be confirmed, so it "
            "would be inconclusive, not failed; record the baseline again: pytest --opprof-update-baseline "
            "test_two.py::test_two",
        ]
    )
    fake_clock.plan, fake_clock.captures = [8.0], 0
    result = run(pytester, "--opprof", *time_fails)
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 1
    result.stdout.fnmatch_lines(
        [
            "test_two.py::test_two: time inconclusive for aten::mm*: its baseline holds the test's capture 2 and its "
            "latest is now capture 1: the test's captures changed since it was recorded, and run() confirms a "
            "slowdown only in the capture its baseline holds, so this one measurement's slowdown could not be "
            "confirmed; neither passed nor failed*; record the baseline again: pytest --opprof-update-baseline "
            "test_two.py::test_two",
        ]
    )
    assert "(the test's captures changed since it was recorded): a slowdown" not in result.stdout.str()
    fake_clock.plan, fake_clock.captures = [8.0], 0
    run(pytester, "--opprof", "--opprof-strict", *time_fails).assert_outcomes(errors=1)
    fake_clock.plan, fake_clock.captures = [8.0], 0
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work")  # time fails no test: measured once
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_two.py::test_two: its baseline holds the test's capture 2 and its latest is now capture 1 (*",
            "test_two.py::test_two: time: aten::mm: *measured once, not confirmed: time does not fail this test*",
        ]
    )
    assert "this one measurement's slowdown could not be confirmed" not in result.stdout.str()
    assert "a slowdown of this capture cannot be confirmed" not in result.stdout.str()  # time fails no test
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)  # of capture 1 now
    monkeypatch.setenv("FIRST_CALLS", "1000000")  # a capture added before it: the last is capture 2
    fake_clock.plan, fake_clock.captures = [], 0
    result = run(pytester, "--opprof", *time_fails)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_two.py::test_two: its baseline holds the test's capture 1 and its latest is now capture 2 (*",
            "test_two.py::test_two: 2 captures in one test: its report holds the last; *",  # not its baseline
        ]
    )


def test_a_baseline_of_another_capture_is_renumbered_by_a_plain_recording(pytester, fake_clock, monkeypatch):
    """A plain recording run writes the number of the test's latest capture into a file of another,
    its times kept (a review: only =all repaired it, and a +16000% slowdown passed as inconclusive
    run after run; then a slow recording read as written): a slowdown fails again. A file from
    before numbers gets the number of a later capture than the first, once."""
    path = recorded_of_two_captures(pytester, fake_clock, monkeypatch)
    time_fails = TIME_FAILS
    times = json.loads(path.read_text())["ops"]["aten::mm"]["cpu_ms"]
    fake_clock.plan, fake_clock.captures = [8.0] * 8, 0  # a slow recording: its times are not written
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_two.py::test_two: its baseline held the test's capture 2 and now holds capture 1, the test's "
            "latest (the test's captures changed): its number written, its times kept",
            "opprof: baselines written: 1 renumbered (capture.number alone, times kept); kept 0 unchanged*",
        ]
    )
    assert "all the same" not in result.stdout.str()  # no line says this run's times were written
    data = json.loads(path.read_text())
    assert (data["capture"]["number"], data["ops"]["aten::mm"]["cpu_ms"]) == (1, times)
    fake_clock.plan, fake_clock.captures = [8.0] * 4, 0  # renumbered, run() confirms a slowdown: it fails again
    result = run(pytester, "--opprof", *time_fails)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["test_two.py::test_two: measured 4 times, with pauses between: each differs*"])
    assert "captures changed" not in result.stdout.str()
    fake_clock.plan, fake_clock.captures = [], 0
    monkeypatch.setenv("FIRST_CALLS", "1000000")  # two captures again, in a file from before numbers
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    data = json.loads(path.read_text())
    assert data["capture"]["number"] == 2
    del data["capture"]["number"]
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = run(pytester, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_two.py::test_two: its baseline now says which of the test's captures it holds, capture 2 "
            "(capture.number; a file from before numbers did not say): its number written, its times kept, so "
            "that only that capture's run() is judged and confirmed",
        ]
    )
    assert json.loads(path.read_text())["capture"]["number"] == 2
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert (test["baseline"]["status"], test["baseline"]["capture_moved"]) == ("renumbered", {"was": None, "now": 2})
    before = path.read_bytes()
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert path.read_bytes() == before


OTHER_WORK_TESTS = """
import os

import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)
calls = []
AFTER = int(os.environ.get("OTHER_WORK_AFTER", "1000000"))


def step():
    calls.append(1)
    out = torch.mm(a, b)
    if len(calls) > AFTER:  # state the test keeps: one more op past the first measurement's calls
        torch.add(a, b)
    return out


def test_mm(opprof):
    opprof.run(step, warmup=2, steps=6)
"""


def test_a_confirmation_that_ran_other_ops_is_left_out_and_said(pytester, fake_clock, monkeypatch):
    """fn whose work changes past its first measurement's calls (an EMA update after step 20): a
    trial's confirmations, pooled with the first measurement, failed the test on a structure change
    the first never made (`+ aten::lerp_`) beside `did not confirm it`. Such a confirmation is left
    out, and a line says why; with every one left out, the first measurement's slowdown, maybe a
    slow spell, is inconclusive (--opprof-strict: an error). An op the rule ignores is not
    compared: a confirmation that differs only there clears the slowdown as any other."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_other=OTHER_WORK_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OTHER_WORK_AFTER", "12")
    fake_clock.plan, fake_clock.captures = [8.0], 0
    time_fails = ("-o", "opprof_fail_on=structure,work,time")
    result = run(pytester, "--opprof", *time_fails)
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 4  # the first and three confirmations, each with aten::add
    out = result.stdout.str()
    assert "structure changed" not in out and "did not confirm" not in out, out
    assert "further measurements of run()'s fn" not in out  # the inconclusive line says it
    result.stdout.fnmatch_lines(
        [
            "test_other.py::test_mm: time inconclusive for aten::mm*: each further measurement ran other work than "
            "the first (other ops, calls per step or inputs of aten::add): fn's work changes from call to call, so "
            "this one measurement's slowdown could not be confirmed; neither passed nor failed *; make each call of "
            "fn do the same work*",
        ]
    )
    fake_clock.plan, fake_clock.captures = [8.0], 0
    run(pytester, "--opprof", "--opprof-strict", *time_fails).assert_outcomes(errors=1)
    fake_clock.plan, fake_clock.captures = [8.0], 0
    result = run(pytester, "--opprof", "--opprof-ignore-ops=aten::add", *time_fails)
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 2  # the first confirmation, aten::add ignored, cleared it
    result.stdout.fnmatch_lines(["test_other.py::test_mm: the first measurement's time differed*did not confirm it*"])
    assert "ran other ops" not in result.stdout.str()


def test_a_recording_never_writes_from_a_confirmation_that_ran_other_ops(pytester, fake_clock, monkeypatch):
    """A trial: a bare recording run whose slow first measurement was "not confirmed" by
    measurements that ran one more op rewrote the baseline with 3x slower times, on a structure
    change only they made. They are left out: the file stays byte for byte."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_other=OTHER_WORK_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    before = path.read_bytes()
    monkeypatch.setenv("OTHER_WORK_AFTER", "12")
    fake_clock.plan, fake_clock.captures = [3.0], 0
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    assert path.read_bytes() == before
    result.stdout.fnmatch_lines(
        [
            "test_other.py::test_mm: time inconclusive for aten::mm*: each further measurement ran other work than "
            "the first (other ops, calls per step or inputs of aten::add)*; its baseline was kept as it was*",
            "opprof: baselines written: none; kept 1 unchanged (no structure or work change, no conclusive time "
            "change; files untouched)",
        ]
    )


def test_a_recordings_measurements_that_ran_other_ops_widen_no_range_and_are_said(pytester, fake_clock, monkeypatch):
    """Recording a test whose fn adds an op past its first measurement's calls: its three further
    measurements ran other work, so the file is written from the first alone, without ranges,
    and a line names the op (`--opprof-json`: `unrepeated`)."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_other=OTHER_WORK_TESTS)
    monkeypatch.setenv("OTHER_WORK_AFTER", "12")
    result = run(pytester, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_other.py::test_mm: further measurements of run()'s fn ran other work than the first (other ops, "
            "calls per step or inputs of aten::add): fn's work changes from call to call (state it keeps: an EMA "
            "update after some steps, a growing cache), so each such one was left out, neither confirming a time "
            "nor widening a recorded range; make each call of fn do the same work (pytest-opprof's docs/verdicts.md: Confirmation by more "
            "measurements)",
        ]
    )
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    ops = json.loads(path.read_text())["ops"]
    assert "aten::add" not in ops and "recorded_range_ms" not in ops["aten::mm"]
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert (test["baseline"]["unrepeated"], test["baseline"]["recorded_from"]) == (["aten::add"], 1)


GROWING_CACHE_TESTS = """
import torch

cache = [torch.randn(1, 64)]
q = torch.randn(64, 1)


def step():
    cache.append(torch.randn(1, 64))  # a KV cache: one row more at each call
    return torch.mm(torch.cat(cache), q)


def test_decode(opprof):
    opprof.run(step, warmup=2, steps=6)
"""


def test_a_work_change_in_ops_that_varied_when_recorded_says_fn_keeps_state(pytester, fake_clock, monkeypatch):
    """An LLM trial's decode step (a growing KV cache) failed `work changed` on `warmup=3` -> `4`
    alone, its inputs read after the steps: the file keeps the ops whose work varied in the
    recording's further measurements (`capture.unrepeated`), and a later work change in them says
    fn keeps state."""
    pytester.makepyfile(test_grow=GROWING_CACHE_TESTS.replace("warmup=2", "warmup=int(os.environ['WARMUP'])"))
    pytester.makeconftest("import os, builtins\nbuiltins.os = os")
    monkeypatch.setenv("WARMUP", "2")
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    assert "aten::mm" in json.loads(path.read_text())["capture"]["unrepeated"]
    monkeypatch.setenv("WARMUP", "3")
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_grow.py::test_decode: work changed in * ops: aten::mm: *inputs (*) -> (*); when the baseline was "
            "recorded, run()'s fn did other work from call to call in aten::mm* (the data it reads, or state it keeps "
            "such as a growing cache), so warmup=, steps=, -k and the order of tests change what is measured; make "
            "each call of fn do the same work *",
        ]
    )
    # once a test, not on each op's line: the failure and the summary (and pytest's short summary
    # line, which CI=true prints in full)
    said = [line for line in result.stdout.lines if "state it keeps" in line and not line.startswith("FAILED ")]
    assert len(said) == 2 and said[1].startswith("test_grow.py::test_decode: "), said
    data = json.loads(path.read_text())
    del data["capture"]["unrepeated"]  # a file recorded before: the change alone
    path.write_text(json.dumps(data))
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    assert "work changed" in result.stdout.str() and "state it keeps" not in result.stdout.str()


def test_a_growing_caches_further_measurements_are_other_work(pytester, fake_clock):
    """A KV cache that grows at each call runs the same ops on larger inputs: a trial's further
    measurements widened a recorded range to 1.0-6.4 ms, within which a real x4.9 then passed.
    Each further measurement records its inputs (one signature step) and is left out where they
    differ: the file gets no range, and a slowdown whose every confirmation ran other inputs is
    inconclusive, not passed within a range of other work."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_grow=GROWING_CACHE_TESTS)
    result = run(pytester, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*further measurements of run()'s fn ran other work than the first (*aten::mm*"])
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    assert "recorded_range_ms" not in json.loads(path.read_text())["ops"]["aten::mm"]
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert "aten::mm" in test["baseline"]["unrepeated"] and test["baseline"]["recorded_from"] == 1
    fake_clock.plan, fake_clock.captures = [5.0], 0
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work,time")
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 4
    result.stdout.fnmatch_lines(
        ["test_grow.py::test_decode: time inconclusive for *aten::mm*: each further measurement ran other work*"]
    )


LAST_RESULT_TESTS = """
import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)
calls = []


def step():
    calls.append(torch.mm(a, b))
    return len(calls)


def test_mm(opprof):
    assert opprof.run(step, warmup=2, steps=6) == len(calls)  # fn's last result
"""


COMPARING_KEEPS_NOTHING = """
import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)


def test_mm(opprof):
    opprof.run(torch.mm, a, b, warmup=2, steps=6)
    assert opprof._ahead == []  # a review: three confirmation profiles were held until teardown
"""


def test_a_comparing_run_keeps_no_confirmation_profiles(pytester, fake_clock):
    """Comparing, run() takes a suspected time's confirmations and the baseline step gives the
    decision they made: run() keeps none of their profiles (they were held to teardown)."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_keep=COMPARING_KEEPS_NOTHING.replace("    assert opprof._ahead == []", "    pass"))
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    pytester.makepyfile(test_keep=COMPARING_KEEPS_NOTHING)
    fake_clock.plan, fake_clock.captures = [8.0, 8.0, 8.0, 8.0], 0
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    assert fake_clock.captures == 4
    result.stdout.fnmatch_lines(["test_keep.py::test_mm: measured 4 times, with pauses between*"])
    assert "AssertionError" not in result.stdout.str()


def test_run_returns_fns_last_result_after_its_further_measurements(pytester, fake_clock):
    """run() returns fn's last result, also when it measured fn again before returning (a
    recording's ranges, a comparing run's confirmations): a trial's decode cache held another
    call's result than the one run() returned (`run() returned fn's result #11 of 35 calls`)."""
    fake_clock.costs["aten::mm"] = 200_000
    pytester.makepyfile(test_last=LAST_RESULT_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert fake_clock.captures == 4
    fake_clock.plan, fake_clock.captures = [8.0, 1.0], 0
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    assert fake_clock.captures == 2
    run(pytester).assert_outcomes(passed=1)  # and without --opprof


RUN_THEN_BLOCK = """
import torch

a, b = torch.randn(64, 64), torch.randn(64, 64)


def test_mm(opprof):
    opprof.run(torch.mm, a, b, warmup=2, steps=6)
    with opprof.capture():
        torch.add(a, b)
"""


def test_a_later_capture_is_judged_not_the_run_before_it(pytester, fake_clock):
    """run() judges its measurement against the baseline before it returns; a capture after it
    is the test's latest, and the baseline step judges that one (the baseline is the block's:
    run()'s decision, an mm against an add, would fail the test on structure)."""
    pytester.makepyfile(test_later=RUN_THEN_BLOCK)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    assert "aten::add" in json.loads(path.read_text())["ops"]
    run(pytester, "--opprof").assert_outcomes(passed=1)


RAISES_PAST_FIRST = """
import torch
a, b = torch.randn(64, 64), torch.randn(64, 64)
calls = []

def mm():
    calls.append(1)
    if len(calls) > 12:  # past the first measurement's calls (2 warmup, 6 steps, 2 unprofiled, 1 signature)
        raise RuntimeError("out of data")
    return torch.mm(a, b)

def test_mm(opprof):
    opprof.run(mm, warmup=2, steps=6)
"""


def test_fn_raising_in_a_recordings_further_measurement_fails_the_test_saying_so(pytester, fake_clock):
    """fn that fails past its first measurement's calls fails a recording run's test with its
    own error, and a note says it came from the recorded ranges' measurements."""

    pytester.makepyfile(test_re=RAISES_PAST_FIRST)
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(failed=1)
    if sys.version_info >= (3, 11):
        result.stdout.fnmatch_lines(
            ["*opprof: raised while run()'s fn was measured again for its baseline's recorded ranges*"]
        )
    assert not (pytester.path / ".opprof").exists() or not list((pytester.path / ".opprof").rglob("*.json"))
    # the test's frames only (a data trial's StopIteration showed 6 of pytest-opprof's)
    frames = [line for line in result.stdout.lines if re.match(r"^\S+\.py:\d+: ", line)]
    assert any(line.startswith("test_re.py:") for line in frames), frames
    assert not any("pytest_opprof" in line for line in frames), frames


def test_fn_raising_in_a_confirmation_fails_the_test_saying_so(remeasure_project, fake_clock):
    """fn that fails once called more often than its first measurement's calls: the test fails
    with fn's own error, and a note says it was raised in a confirmation (a review: nothing did)."""

    remeasure_project.makepyfile(test_re=RAISES_PAST_FIRST)
    fake_clock.plan = [8.0]
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: out of data*"])
    if sys.version_info >= (3, 11):
        result.stdout.fnmatch_lines(
            [
                "*opprof: raised while run()'s fn was measured again to confirm a suspected time change*"
                "make fn repeatable (cycle its data with itertools.cycle, or make its inputs outside fn)",
                # what it was confirming (a trial's +200% showed nowhere beside a loader's StopIteration)
                "*opprof: the suspected change, neither confirmed nor passed: aten::mm: * ms/step vs baseline "
                "* ms (+*%, slower*",
            ]
        )


def test_rerecording_under_contention_keeps_every_baseline_byte_identical(remeasure_project, fake_clock, monkeypatch):
    """--opprof-update-baseline on unchanged code whose times a loaded machine inflated (threads
    waiting for a CPU half the capture): the slowdown is inconclusive, the file is kept as it was."""
    from pytest_opprof import device

    (path,) = (remeasure_project.path / ".opprof").rglob("*.json")
    before = path.read_bytes()
    fake_clock.host_step_ns = 100_000_000  # 50 ms waited: enough to explain the slowdown
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    fake_clock.plan = [5.0, 5.0]
    result = run(remeasure_project, "--opprof-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: time inconclusive for aten::mm*: CPU contention: the test's threads waited for a CPU 50%*"
        ]
    )
    result.stdout.fnmatch_lines(["opprof: baselines written: none; kept 1 unchanged*"])
    assert path.read_bytes() == before
    fake_clock.plan, fake_clock.captures = [5.0] * 4, 0  # the recording's own further measurements, too
    result = run(remeasure_project, "--opprof-update-baseline=all")  # =all rewrites it, and says so
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: time inconclusive for aten::mm*; its baseline was rewritten all the same, as =all "
            "asks, with these times; *",
            "opprof: baselines written: 1 rewritten*",
        ]
    )
    assert "kept as it was" not in result.stdout.str()


def test_inconclusive_time_is_one_summary_line_and_strict_makes_it_an_error(remeasure_project, fake_clock, monkeypatch):
    """A slowdown under contention neither passes silently nor fails: one line with the reason
    and the fix, which stands for the `contention` warning (a newcomer's loaded run said the wait
    twice a test; `-v` and the JSON keep the warning); --opprof-strict (or ini opprof_strict)
    makes the test an error."""
    from pytest_opprof import device

    fake_clock.host_step_ns = 100_000_000  # 50 ms waited: enough to explain the slowdown
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)
    fake_clock.costs["aten::mm"] = 800_000
    result = run(remeasure_project, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: time inconclusive for aten::mm*: CPU contention: the test's threads waited for a "
            "CPU 50% of the capture; neither passed nor failed (--opprof-strict makes this an error); rerun on a quiet machine *"
        ]
    )
    assert "warning contention" not in result.stdout.str()
    (test,) = json.loads((remeasure_project.path / "r.json").read_text())["tests"]
    assert [c["status"] for c in test["checks"] if c["name"] == "contention"] == ["warning"]
    run(remeasure_project, "--opprof", "-v").stdout.fnmatch_lines(["test_re.py::test_mm: warning contention: *"])
    for args in (["--opprof-strict"], ["-o", "opprof_strict=true"]):
        result = run(remeasure_project, "--opprof", *args)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*--opprof-strict: a time check of test_re.py::test_mm was inconclusive*"])
        result.stdout.fnmatch_lines(  # the summary line says what it came to, not "neither passed nor failed"
            ["test_re.py::test_mm: time inconclusive for aten::mm*; --opprof-strict made the test an error; rerun *"]
        )
    # strict follows --opprof-fail-on: time that may not fail the test may not error it either,
    # and the line does not offer it (a trial's --opprof-strict did nothing it had been told)
    result = run(remeasure_project, "--opprof", "--opprof-strict", "--opprof-fail-on=structure,work")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_re.py::test_mm: time inconclusive for aten::mm*; neither passed nor failed (time does not fail this "
            "test: --opprof-fail-on, or its marker's); rerun *"
        ]
    )
    assert "--opprof-strict makes this an error" not in result.stdout.str()
    result = run(remeasure_project, "--opprof-update-baseline", "--opprof-strict")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*time inconclusive for aten::mm*; its baseline was kept as it was*"])


def test_contention_excuses_no_slowdown_larger_than_the_wait(remeasure_project, fake_clock, monkeypatch, tmp_path):
    """A training trial's step 3.7x slower by 2 ms of Python passed 12 of 12 runs beside a busy
    loop, `inconclusive` on a 20% CPU wait (0.7 ms a step). The threads' wait bounds what other
    load can add to a step (1.5 times it, for slack): beyond that the slowdown is the code's, and
    fails (confirmed by a second measurement), saying the wait was too little to explain it."""
    from pytest_opprof import device

    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)  # 1 ms windows: 0.5 ms waited
    fake_clock.costs["aten::mm"] = 800_000  # +0.6 ms a step, over 6 steps: 3.6 ms of slowdown
    out = tmp_path / "run.json"
    result = run(remeasure_project, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "aten::mm: 0.830 ms/step vs baseline 0.230 ms (+261%, slower; limit +20%, p=*; the test's threads "
            "waited for a CPU 50% of the capture, 0.083 ms a step: too little to explain +0.600 ms) [[].opprof/*",
        ]
    )
    (test,) = json.loads(out.read_text())["tests"]
    (verdict,) = [v for v in test["baseline"]["verdicts"] if v["op"] == "aten::mm"]
    assert verdict["status"] == "regressed" and verdict["why"] is None


def test_single_step_captures_never_fail_on_time_and_say_how_to_get_a_check(pytester, fake_clock):
    """Whole-call, capture() and marker captures 10x slower than their baselines pass; one line
    names them and says how to get a time check."""
    pytester.makepyfile(
        test_one="""
        import pytest
        import torch

        a = torch.randn(64, 64)

        def test_whole(opprof):
            torch.mm(a, a)

        def test_block(opprof):
            with opprof.capture():
                torch.mm(a, a)

        @pytest.mark.opprof
        def test_marked():
            torch.mm(a, a)
        """
    )
    fake_clock.costs["aten::mm"] = 200_000
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)
    fake_clock.costs["aten::mm"] = 2_000_000
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: time not judged for 3 tests with under 5 steps (a whole call, capture(), the marker, a short "
            "run()): test_one.py::test_whole, test_one.py::test_block, test_one.py::test_marked; structure and "
            "work (where recorded) were checked; measure with opprof.run(fn, ..., steps=10) for a time check"
        ]
    )
    result.stdout.fnmatch_lines(
        ["test_one.py::test_block [[]passed] (1 step, * ms/step wall, times include recording inputs)"]
    )


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]])
def test_a_baseline_of_too_few_steps_is_named_with_the_command_that_records_it(
    pytester, monkeypatch, fake_clock, tmp_path, xdist
):
    """A trial's test went back to 6 steps, its 3-step baseline kept the time check off, and the
    line sent it to fix the test; a bare recording run keeps such a file (no structure or work
    change). The line names the baseline as the short side, with the command that records it
    again; =all does, and time is judged from then on (in this process, where the costs reach)."""
    monkeypatch.setenv("STEPS", "3")
    pytester.makeconftest(WORKER_FAKE_CLOCK)
    pytester.makepyfile(
        test_s="""
        import os
        import torch

        def test_x(opprof):
            opprof.run(torch.mm, torch.ones(8, 8), torch.ones(8, 8), warmup=1, steps=int(os.environ["STEPS"]))
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("STEPS", "6")
    fake_clock.costs["aten::mm"] = 2_000_000  # 10x slower: not judged
    out = tmp_path / "r.json"
    result = run(pytester, "--opprof", f"--opprof-json={out}", *xdist)
    result.assert_outcomes(passed=1)
    line = (
        "opprof: time not judged for 1 test whose baseline holds under 5 steps (this run measured enough): "
        "test_s.py::test_x{}; record them again: pytest --opprof-update-baseline=all test_s.py::test_x"
    )
    result.stdout.fnmatch_lines([line.format("")])
    assert "with under 5 steps (a whole call" not in result.stdout.str()
    untimed = json.loads(out.read_text())["tests"][0]["baseline"]["untimed"]
    assert untimed.startswith("time not judged: its baseline holds 3 steps, this run 6 (a time check needs 5+")
    result = run(pytester, "--opprof-update-baseline", *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([line.format("; this recording run did not rewrite them")])
    run(pytester, "--opprof-update-baseline=all", *xdist).assert_outcomes(passed=1)
    if xdist:  # the worker's clock has its own costs: the line and JSON crossed from it above
        return
    fake_clock.costs["aten::mm"] = 20_000_000  # 10x slower again: judged now
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    assert "time not judged" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*aten::mm: * ms/step vs baseline * ms (+*%, slower; limit +20%*"])


def test_a_changed_call_count_reads_calls_changed_in_the_table(remeasure_project):
    """An op whose calls per step changed says so in the verdict column (its time is not judged)."""
    (path,) = (remeasure_project.path / ".opprof").rglob("*.json")
    data = json.loads(path.read_text())
    data["ops"]["aten::mm"]["calls_per_step"] = [2] * 6
    path.write_text(json.dumps(data))
    result = run(remeasure_project, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["aten::mm * calls changed"])


def test_a_baseline_that_lost_kernel_records_says_so_until_recorded_again(baselined):
    """A file whose capture lost kernel records (`capture.kernels_dropped`, CUPTI of CUDA 12.6
    Update 2 to 13.0 at a later profiler session's start) is compared without its kernels, and one
    run line says so with the command that records it again; `=all` writes it without the loss."""
    path = next((baselined.path / ".opprof").rglob("test_big.json"))
    data = json.loads(path.read_text())
    data["capture"]["kernels_dropped"] = 3
    path.write_text(json.dumps(data))
    result = run(baselined, "--opprof")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline lost kernel records when recorded (the device tracer dropped them): the steps that "
            "lost some are left out of their ops' device times, and as many fewer kernels are no work change; record "
            "them again where none are lost: pytest --opprof-update-baseline=all test_base.py::test_big"
        ]
    )
    run(baselined, "--opprof-update-baseline=all", "test_base.py::test_big").assert_outcomes(passed=1)
    assert "kernels_dropped" not in json.loads(path.read_text())["capture"]
    assert "lost kernel records" not in run(baselined, "--opprof").stdout.str()


PAUSES_CONFTEST = """
import os

import pytest_opprof.fixture as fixture


def _logged(kind):
    def pause(seconds, threads=None):
        with open(os.environ["OPPROF_PAUSES_LOG"], "a") as log:
            log.write(kind + "\\n")

    return pause


fixture.confirmation_pause, fixture.idle_pause = _logged("busy"), _logged("idle")
"""


def pauses_project(pytester, monkeypatch, conftest: str, size: int) -> Path:
    """A test of one run() of a size x size matmul, its conftest logging each pause's kind to
    the file returned."""
    log = pytester.path / "pauses.log"
    monkeypatch.setenv("OPPROF_PAUSES_LOG", str(log))
    pytester.makeconftest(conftest)
    pytester.makepyfile(
        test_p=f"""
        import torch
        def test_mm(opprof):
            a = torch.randn({size}, {size})
            opprof.run(lambda: a @ a, warmup=1, steps=5)
        """
    )
    return log


@pytest.mark.parametrize(("xdist", "kind"), [((), "busy"), (("-n", "1"), "idle")])
def test_the_recorded_ranges_pauses_are_idle_in_an_xdist_worker(pytester, monkeypatch, xdist, kind):
    """Recording, the ranges' measurements follow the confirmation's busy pause, but in an xdist
    worker an idle one: a busy pause there inflated another worker's recording x100 (a
    transformer layer's 0.8 ms step read 100 ms under -n 2)."""
    log = pauses_project(pytester, monkeypatch, PAUSES_CONFTEST, 32)
    run(pytester, "--opprof-update-baseline", *xdist).assert_outcomes(passed=1)
    assert log.read_text().split() == [kind] * 3


# In an xdist worker, which the `fake_clock` fixture does not reach: the same fake clock,
# contention unknown and steady references, as `fake_clock` makes them in-process (a loaded
# runner's real timing once made the worker's slowdown inconclusive, with no confirmation).
STEADY_PAUSES_CONFTEST = (
    PAUSES_CONFTEST
    + """
import sys

if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("PYTEST_XDIST_TESTRUNUID") != os.environ.get(
    "OPPROF_FAKE_CLOCK_OUTER_RUN"
):  # this run's workers, not the outer suite's (see fake_clock.WORKER_FAKE_CLOCK)
    sys.path.insert(0, os.environ["OPPROF_FAKE_CLOCK_DIR"])
    from fake_clock import install_in_worker

    install_in_worker({"aten::mm": 200_000}, pauses=True)  # the pauses stay logged
"""
)


@pytest.mark.parametrize(("xdist", "kind"), [((), "busy"), (("-n", "1"), "idle")])
def test_a_confirmations_pauses_are_idle_in_an_xdist_worker(pytester, monkeypatch, fake_clock, xdist, kind):
    """Comparing, a suspected time's confirmations follow the busy pause, but in an xdist worker
    an idle one, as the recorded ranges' do (a busy pause loads the CPUs another worker measures
    on). The baseline is cut to a hundredth of the time: every confirmation backs the slowdown
    (on the fake clock, in-process and in the worker)."""
    fake_clock.costs["aten::mm"] = 200_000
    monkeypatch.setenv("OPPROF_FAKE_CLOCK_DIR", str(Path(__file__).parent))
    log = pauses_project(pytester, monkeypatch, STEADY_PAUSES_CONFTEST, 32)
    run(pytester, "--opprof-update-baseline", "-p", "no:xdist").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    doc = json.loads(path.read_text())
    for entry in doc["ops"].values():
        entry.pop("recorded_range_ms", None)
        for key in ("cpu_ms", "device_ms"):
            if key in entry:
                entry[key] = [t / 100 for t in entry[key]]
    path.write_text(json.dumps(doc))
    log.unlink()
    result = run(pytester, "--opprof", "-o", "opprof_fail_on=structure,work,time", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*measured 4 times, with pauses between: each differs from the baseline*"])
    assert log.read_text().split() == [kind] * 3


def test_a_renamed_parametrize_id_is_named_with_the_move_that_keeps_its_baseline(pytester, monkeypatch):
    """A trial renamed a parametrize id: the run said `no baseline for test_x[b]` and, apart,
    `test_x[a].json is read by no test`. Alone in one file's folder, of one function, they get a
    line with the `git mv` and the `nodeid` that keep the baseline; done, the test compares."""
    pytester.makepyfile(
        test_r="""
        import os, pytest, torch

        @pytest.mark.parametrize("n", [4], ids=[os.environ.get("ID", "a")])
        def test_x(opprof, n):
            opprof.run(lambda: torch.ones(n) + 1, warmup=1, steps=3)

        if not os.environ.get("ID"):  # deleted beside the rename: its file stays an orphan of its own
            def test_old(opprof):
                opprof.run(lambda: torch.ones(2) + 1, warmup=1, steps=3)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("ID", "b")
    result = run(pytester, "--opprof")
    (orphans,) = [line for line in result.stdout.lines if "are read by no test" in line]
    assert "1 of them may be the baselines of tests below" in orphans
    assert fnmatch(
        orphans, "*; if the tests of the other 1 are gone, delete those *: rm -- .opprof/*/test_r.py/test_old.json"
    )
    old = ".opprof/*/test_r.py/test_x[[]a[]].json"
    result.stdout.fnmatch_lines(
        [
            f"opprof: test_r.py::test_x[[]b[]] has no baseline, and {old} is read by no test: if the test "
            "was renamed, keep its baseline: opprof mv '{old}' 'test_r.py::test_x[[]b[]]'".replace("{old}", old)
        ]
    )
    (line,) = [line for line in result.stdout.lines if "keep its baseline" in line]
    _run_kept(line, pytester.path, monkeypatch)  # the line's command, as written
    assert [p.name for p in pytester.path.joinpath(".opprof").rglob("test_x*.json")] == ["test_x[b].json"]
    next(pytester.path.joinpath(".opprof").rglob("test_old.json")).unlink()
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    assert "no baseline" not in result.stdout.str() and "read by no test" not in result.stdout.str()


def test_a_renamed_tests_baselines_under_other_device_keys_get_their_mv_too(pytester, monkeypatch):
    """A team trial renamed a test on a laptop: the run's `opprof mv` line named its own key's file
    only, and the CI key's went stale in silence. Each other key holding the old baseline gets a
    line of its own, whose command, run as written, keeps that key's baseline too."""
    pytester.makepyfile(
        test_r="""
        import os, torch

        exec(f"def test_{os.environ.get('NAME', 'old')}(opprof):\\n"
             "    opprof.run(lambda: torch.ones(4) + 1, warmup=1, steps=3)")
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    run(pytester, "--opprof-update-baseline", "--opprof-device-key=ci-large").assert_outcomes(passed=1)
    run(pytester, "--opprof-update-baseline", "--opprof-device-key=ci-small").assert_outcomes(passed=1)
    monkeypatch.setenv("NAME", "new")
    run(pytester, "--opprof-update-baseline", "--opprof-device-key=ci-small").assert_outcomes(passed=1)
    result = run(pytester, "--opprof")
    kept = [line for line in result.stdout.lines if "keep its baseline" in line]
    assert len(kept) == 2, result.stdout.str()  # ci-small already holds the new name's: no command there
    assert kept[0].startswith("opprof: test_r.py::test_new has no baseline, and .opprof/cpu-")
    assert kept[1] == (
        "opprof: under device key ci-large too, keep its baseline: opprof mv .opprof/ci-large/test_r.py/test_old.json "
        "test_r.py::test_new"
    )
    for line in kept:
        _run_kept(line, pytester.path, monkeypatch)
    for key in ((), ("--opprof-device-key=ci-large",)):
        run(pytester, "--opprof", "--opprof-require-baseline", *key).assert_outcomes(passed=1)


def test_a_renamed_parametrized_function_pairs_each_id_with_its_baseline(pytester, monkeypatch):
    """A CI trial renamed a parametrized function (`test_param` -> `test_params`, six ids, some
    hashed file names): six `no baseline` lines and six files read by no test, none paired (one of
    each per folder only). A function's files and another's tests with the same ids pair, one
    each; where the ids differ too, nothing is paired (a review: ids alone would pair unrelated
    tests)."""
    pytester.makepyfile(
        test_r="""
        import os, pytest, torch

        def body(opprof, n):
            opprof.run(lambda: torch.ones(n) + 1, warmup=1, steps=3)

        NAME = os.environ.get("NAME", "test_param")
        globals()[NAME] = pytest.mark.parametrize("n", [4, 5, 6], ids=["a b", "x/y", os.environ.get("LAST", "c")])(body)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)
    monkeypatch.setenv("NAME", "test_params")
    result = run(pytester, "--opprof")
    # the same id, of the old name
    assert _keep_renamed(
        result, pytester.path, monkeypatch, lambda was: was.replace("::test_param[", "::test_params[")
    ) == [
        "opprof: test_r.py::test_params[a b]",
        "opprof: test_r.py::test_params[c]",
        "opprof: test_r.py::test_params[x/y]",
    ]
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=3)
    assert "no baseline" not in result.stdout.str() and "read by no test" not in result.stdout.str()
    monkeypatch.setenv("NAME", "test_other")
    monkeypatch.setenv("LAST", "d")  # renamed, and an id changed: not the same tests
    result = run(pytester, "--opprof")
    assert "keep its baseline" not in result.stdout.str() and "read by no test" in result.stdout.str()


def test_an_id_part_renamed_in_every_case_pairs_each_with_its_baseline(pytester, monkeypatch):
    """A scale trial renamed `id="fp32"` to `"f32"` in a function of 2 x 2 cases: no case paired
    (one of each per folder only), and `rm` was offered for every file. The one replacement of an
    id part that maps every orphan onto a test without a baseline pairs them; where two parts
    changed, nothing is paired."""
    pytester.makepyfile(
        test_r="""
        import os, pytest, torch

        DT = os.environ.get("DT", "fp32")

        @pytest.mark.parametrize("n", [4, 5], ids=["b1", "b2"])
        @pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=[DT, "fp64"])
        def test_m(opprof, n, dtype):
            opprof.run(lambda: torch.ones(n, dtype=dtype) + 1, warmup=1, steps=3)

        @pytest.mark.parametrize("dtype", [torch.float32], ids=[DT])
        def test_one(opprof, dtype):
            opprof.run(lambda: torch.ones(3, dtype=dtype) * 2, warmup=1, steps=3)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=5)
    monkeypatch.setenv("DT", "f32")
    result = run(pytester, "--opprof")
    assert _keep_renamed(result, pytester.path, monkeypatch, lambda was: was.replace("fp32", "f32")) == [
        "opprof: test_r.py::test_m[f32-b1]",
        "opprof: test_r.py::test_m[f32-b2]",
        "opprof: test_r.py::test_one[f32]",  # one of each: paired as before
    ], result.stdout.str()
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=5)
    assert "no baseline" not in result.stdout.str() and "read by no test" not in result.stdout.str()
    monkeypatch.setenv("DT", "fp16")  # back to one name, then another part too: not the same tests
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=5)
    pytester.path.joinpath("test_r.py").write_text(
        pytester.path.joinpath("test_r.py").read_text().replace('ids=["b1", "b2"]', 'ids=["c1", "c2"]')
    )
    monkeypatch.setenv("DT", "f16")
    result = run(pytester, "--opprof")
    assert "test_m[f16-c1] has no baseline, and" not in result.stdout.str()


def test_tests_whose_baseline_files_differ_only_in_case_are_named(pytester):
    """A CI trial's ids `[A]` and `[a]` (or tests `test_A`, `test_a`) get files that differ only
    in letter case: one file on macOS or Windows, where one recording overwrites the other's
    baseline. Each run names them; other ids do not."""
    pytester.makepyfile(
        test_c="""
        import pytest, torch

        @pytest.mark.parametrize("n", [4, 5, 6], ids=["A", "a", "b"])
        def test_x(opprof, n):
            opprof.run(lambda: torch.ones(n) + 1, warmup=1, steps=3)
        """
    )
    for args in (["--opprof-update-baseline"], ["--opprof"]):
        result = run(pytester, *args)
        result.assert_outcomes(passed=3)
        result.stdout.fnmatch_lines(
            [
                "opprof: the baseline files of test_c.py::test_x[[]A[]] and test_c.py::test_x[[]a[]] differ only in "
                "letter case: on a case-insensitive file system (macOS, Windows) they are one file, and one test's "
                "recording overwrites the other's baseline; rename one of the tests (or its parametrize id)"
            ]
        )
        assert "test_x[b] and" not in result.stdout.str()


def test_a_renamed_or_moved_test_and_a_moved_test_file_are_paired_with_their_baselines(pytester, monkeypatch):
    """A trial renamed a test function, moved a test to another file and moved a whole test file:
    each gave `no baseline` and, apart or not at all (the old file's folder was never looked at),
    `read by no test`. Now each missing baseline is paired with its orphan, and the folder of a
    test file that no longer exists is looked at."""
    body = "    opprof.run(lambda: torch.ones(4) + 1, warmup=1, steps=3)\n"
    pytester.makepyfile(
        test_a="import torch\ndef test_old(opprof):\n" + body + "def test_stays(opprof):\n" + body,
        test_b="import torch\ndef test_moving(opprof):\n" + body,
        test_c="import torch\ndef test_c(opprof):\n" + body,
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=4)
    pytester.makepyfile(
        test_a="import torch\ndef test_new(opprof):\n" + body + "def test_stays(opprof):\n" + body,
        test_b="import torch\ndef test_other(opprof):\n" + body,
        test_d="import torch\ndef test_moving(opprof):\n" + body,
    )
    sub = pytester.mkpydir("sub")
    (pytester.path / "test_c.py").rename(sub / "test_c.py")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=5)
    key = next(pytester.path.joinpath(".opprof").iterdir()).name
    lines = sorted(line for line in result.stdout.lines if line.startswith("opprof: ") and "has no baseline" in line)
    assert lines == [
        f"opprof: sub/test_c.py::test_c has no baseline, and .opprof/{key}/test_c.py/test_c.json is read by no test: "
        f"if the test was moved, keep its baseline: opprof mv .opprof/{key}/test_c.py/test_c.json sub/test_c.py::test_c",
        f"opprof: test_a.py::test_new has no baseline, and .opprof/{key}/test_a.py/test_old.json is read by no test: "
        f"if the test was renamed, keep its baseline: opprof mv .opprof/{key}/test_a.py/test_old.json "
        "test_a.py::test_new",
        f"opprof: test_d.py::test_moving has no baseline, and .opprof/{key}/test_b.py/test_moving.json is read by no "
        f"test: if the test was moved, keep its baseline: opprof mv .opprof/{key}/test_b.py/test_moving.json "
        "test_d.py::test_moving",
    ]
    result.stdout.fnmatch_lines(
        [
            "opprof: 3 baseline files in the folders of the collected test files, or of test files "
            "that no longer exist, are read by no test *"
        ]
    )
    _run_kept(
        lines[0], pytester.path, monkeypatch
    )  # the line's command runs as written (a trial's git mv found no folder)
    assert (pytester.path / f".opprof/{key}/sub/test_c.py/test_c.json").is_file()
    # run from a subfolder, the command's path is reached from there, as the rm's are (a review's
    # `git mv .opprof/...` failed there: `fatal: bad source`)
    monkeypatch.chdir(sub)
    result = run(pytester, "--opprof", str(pytester.path))
    (line,) = [line for line in result.stdout.lines if "test_d.py::test_moving has no baseline" in line]
    assert line.endswith(f"opprof mv ../.opprof/{key}/test_b.py/test_moving.json test_d.py::test_moving")
    _run_kept(line, sub, monkeypatch)
    assert (pytester.path / f".opprof/{key}/test_d.py/test_moving.json").is_file()
    monkeypatch.chdir(pytester.path)
    result = run(pytester, "--opprof")
    assert (
        "test_c has no baseline" not in result.stdout.str() and "test_moving has no baseline" not in result.stdout.str()
    )
    assert [line for line in result.stdout.lines if "has no baseline" in line] == [
        line for line in lines if "test_a.py::test_new" in line
    ]


ALIKE_TESTS = """
import os
import pytest
import torch
from conftest import infer

@pytest.mark.parametrize("b", [1, 2, 4])
def test_p(opprof, mlp, b):
    model, x = mlp
    def step():
        y = infer(model, x.repeat(b, 1))
        return y * 2 if os.environ.get("OPPROF_T_EXTRA") else y
    opprof.run(step, warmup=1, steps=2)

def test_other(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""


def test_one_regression_in_many_tests_reads_as_one_line_with_one_command(project, monkeypatch):
    """A scale trial's one regression failed 24 tests, each with its structure line and its own
    record command: the cases that changed alike share one line, whose command (the function's id:
    the run picked no tests) records them all, as written; the other test is untouched."""
    project.makepyfile(test_alike=ALIKE_TESTS)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=4)
    monkeypatch.setenv("OPPROF_T_EXTRA", "1")
    result = run(project, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=1, failed=3)
    summary = json.loads((project.path / "r.json").read_text())["summary"]  # a script's totals, no walk
    assert summary == {
        "tests": 4, "outcomes": {"failed": 3, "passed": 1}, "baselines": {"compared": 4},
        "verdicts": {"structure": {"changed": 3}},
    }  # fmt: skip
    (line,) = [line for line in result.stdout.lines if "changed alike" in line]
    assert line.startswith("opprof: structure changed alike in 3 tests: + aten::mul (1/step), ")
    assert "aten::copy_ 3 -> 4/step" in line and "inputs" not in line.split("; each test's line")[0]
    assert line.endswith("record them: pytest --opprof-update-baseline test_alike.py::test_p (and commit the files)")
    assert not [x for x in result.stdout.lines if x.startswith("test_alike.py::test_p[") and "structure" in x]
    summary = result.stdout.str().split("opprof ====")[1].split("short test summary info")[0]
    assert "record it" not in summary  # the FAILURES section has each test's (the short summary too, under CI)
    other = next((project.path / ".opprof").rglob("test_other.json"))
    before = other.read_text()
    argv = shlex.split(line.split("record them: ")[1].removesuffix(" (and commit the files)"))
    run(project, *argv[1:]).assert_outcomes(passed=3)
    assert other.read_text() == before
    run(project, "--opprof").assert_outcomes(passed=4)


PEER_WAITS = """
import itertools
import os
import torch
from torch.profiler import record_function

a, b = torch.randn(64, 64), torch.randn(64, 64)
calls = itertools.count()


def step():  # a slower peer rank: a wait in most steps, none where it was done first
    torch.mm(a, b)
    if os.environ.get("OPPROF_PEER_SLOW") and next(calls) % 5:
        with record_function("peer_wait"):
            pass


def test_wait(opprof):
    opprof.run(step, warmup=2, steps=8)
"""


def test_most_steps_slower_in_every_confirmation_is_inconclusive_not_a_pass(pytester, fake_clock, monkeypatch):
    """A distributed trial's slower peer rank made most steps wait while a step of each
    measurement found it done: the first measurement's suspected time was cleared by the pooled
    minimum, `did not confirm it (interference...), so its time passes`. Where each measurement's
    median waited, the step wall is inconclusive, and the confirmation line says the fastest steps
    did not confirm it, most steps did; --opprof-strict makes it an error."""
    fake_clock.costs.update({"aten::mm": 200_000, "peer_wait": 5_000_000})
    pytester.makepyfile(test_peer=PEER_WAITS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_PEER_SLOW", "1")
    fake_clock.plan, fake_clock.captures = [8.0, 1.0], 0  # the first measurement slower in every op: confirmed
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_peer.py::test_wait: the first measurement's time differed from the baseline's; a second one, after a "
            "pause, did not confirm it on its fastest steps, but most steps of each were slower (its time line)",
            "test_peer.py::test_wait: time inconclusive for step wall: *most steps slowed beyond every baseline step in "
            "each of 2 measurements*",
        ]
    )
    assert "so its time passes" not in result.stdout.str()
    fake_clock.plan, fake_clock.captures = [8.0, 1.0], 0
    run(pytester, "--opprof", "--opprof-strict").assert_outcomes(errors=1)
