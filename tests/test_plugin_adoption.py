"""Adopting opprof in an existing suite: the ways a test reaches the fixture, plugins that
multiply a test's ids, where the device-key hook lives, names that shadow ours, ini typos."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pytest_opprof.cli import main as cli_main

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _deterministic(fake_clock):
    """Every capture in these runs is timed by the fake clock: no test here reads real time."""
    return fake_clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


LATE_FIXTURE = """
import os, torch

def f(x):
    y = x * 2
    if os.environ.get("REGRESS"):
        y = y + 1
    return y

def test_late(request):
    opprof = request.getfixturevalue("opprof")
    opprof.run(f, torch.ones(4), warmup=1, steps=3)
"""


def test_a_fixture_asked_for_in_the_body_is_compared_and_recorded(pytester, monkeypatch):
    """`request.getfixturevalue("opprof")` in the test body: its run() used to be measured but
    never compared or recorded, so a regression passed, even under --opprof-require-baseline."""
    pytester.makepyfile(test_late=LATE_FIXTURE)
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(errors=1)
    assert "test_late.py::test_late has no baseline" in result.stdout.str()
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert [p.name for p in pytester.path.glob(".opprof/*/test_late.py/*.json")] == ["test_late.json"]
    monkeypatch.setenv("REGRESS", "1")
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(failed=1)
    assert "structure changed" in result.stdout.str() and "+ aten::add" in result.stdout.str()
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert test["baseline"]["status"] == "compared"
    assert [(v["kind"], v["status"]) for v in test["baseline"]["verdicts"]] == [("structure", "changed")]


def test_a_marked_test_asking_for_the_fixture_late_is_compared(pytester, monkeypatch):
    """The marker and `request.getfixturevalue("opprof")` in the body: two fixture objects, and
    the late one's run() made the marker's whole-call capture step aside, so the baseline went
    uncompared in silence (a review's). They are one fixture: its run() replaces the whole call."""
    pytester.makepyfile(
        test_late="import pytest\n" + LATE_FIXTURE.replace("def test_late", "@pytest.mark.opprof\ndef test_late")
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("REGRESS", "1")
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(failed=1)
    assert "+ aten::add" in result.stdout.str()
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert test["baseline"]["status"] == "compared"
    assert "stepped_aside" not in json.dumps(test)


def test_a_fixture_asked_for_in_the_body_that_captured_nothing_says_so(pytester):
    """Asked for too late for the whole call, it measured nothing: a warning, and an error when
    --opprof-require-baseline expected a measurement."""
    pytester.makepyfile(
        test_late="import torch\ndef test_late(request):\n    request.getfixturevalue('opprof')\n    torch.ones(3) + 1\n"
    )
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert [(c["name"], c["status"]) for c in test["checks"]] == [("unmeasured", "warning")]
    assert "asked for the opprof fixture in its body (request.getfixturevalue)" in test["checks"][0]["message"]
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(errors=1)
    assert "name opprof in the test's arguments" in result.stdout.str()


# What pytest-repeat does with `--count 3`, in short: a last parametrization of every test by
# `__pytest_repeat_step_number` (trylast: its id comes last), with the ids `1-3`, `2-3`, `3-3`.
REPEAT_CONFTEST = """
import os
import pytest

COUNT = 3


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc):
    if not os.environ.get("REPEAT"):
        return
    metafunc.fixturenames.append("__pytest_repeat_step_number")
    metafunc.parametrize(
        "__pytest_repeat_step_number", range(COUNT), indirect=True, ids=lambda i: f"{i + 1}-{COUNT}"
    )


@pytest.fixture
def __pytest_repeat_step_number(request):
    return request.param
"""

REPEATED = """
import os, pytest, torch

def f(x):
    return x * 2 + 1 if os.environ.get("REGRESS") else x * 2

def test_x(opprof):
    opprof.run(f, torch.ones(4), warmup=1, steps=3)

@pytest.mark.parametrize("n", [4, 8])
def test_p(opprof, n):
    opprof.run(f, torch.ones(n), warmup=1, steps=3)
"""


def _baselines(pytester: pytest.Pytester) -> list[str]:
    return sorted(p.name for p in pytester.path.glob(".opprof/*/test_rep.py/*.json"))


def _repeats_share_the_tests_baseline(pytester: pytest.Pytester, monkeypatch, *repeat: str) -> None:
    pytester.makepyfile(test_rep=REPEATED)
    if not repeat:
        monkeypatch.setenv("REPEAT", "1")
    result = run(pytester, "--opprof", *repeat)  # 9 runs of 3 tests: 3 baselines missing, not 9
    assert (
        "opprof: no baseline for 3 tests (test_rep.py::test_x, test_rep.py::test_p[4], test_rep.py::test_p[8]) in "
    ) in result.stdout.str()
    monkeypatch.delenv("REPEAT", raising=False)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)  # recorded without repeats
    if not repeat:
        monkeypatch.setenv("REPEAT", "1")
    before = {p: p.read_bytes() for p in pytester.path.glob(".opprof/*/test_rep.py/*.json")}
    result = run(pytester, "--opprof", "--opprof-require-baseline", *repeat)
    result.assert_outcomes(passed=9)
    assert "read by no test" not in result.stdout.str() and "no baseline" not in result.stdout.str()
    run(pytester, "--opprof-update-baseline", *repeat).assert_outcomes(passed=9)
    assert _baselines(pytester) == ["test_p[4].json", "test_p[8].json", "test_x.json"]
    assert {p: p.read_bytes() for p in before} == before  # unchanged code: no file rewritten
    monkeypatch.setenv("REGRESS", "1")
    result = run(pytester, "--opprof", *repeat)
    result.assert_outcomes(failed=9)
    assert "FAILED test_rep.py::test_p[8-3-3] - Failed: structure changed" in result.stdout.str()


def test_repeats_of_pytest_repeat_share_the_tests_baseline(pytester, monkeypatch):
    """`--count 3` ids (`test_x[1-3]`, `test_p[4-2-3]`) are the test they repeat: judged against
    its baseline, recording into it; the baseline is no orphan, and no `test_x[1-3].json` is made."""
    pytester.makeconftest(REPEAT_CONFTEST)
    _repeats_share_the_tests_baseline(pytester, monkeypatch)


def test_with_pytest_repeat_itself(pytester, monkeypatch):
    """The same with the real plugin, where it is installed (not a test dependency)."""
    pytest.importorskip("pytest_repeat")
    _repeats_share_the_tests_baseline(pytester, monkeypatch, "--count", "3")


def test_a_renamed_test_under_pytest_repeat_gets_the_mv_of_the_test_it_repeats(pytester, monkeypatch):
    """A renamed test run with `--count 3` was named by its first repeat: the `keep its baseline`
    line gave `opprof mv ... 'test_rep.py::test_y[1-3]'`, which wrote a file no repeat reads."""
    pytester.makeconftest(REPEAT_CONFTEST)
    pytester.makepyfile(test_rep=REPEATED)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=3)
    (pytester.path / "test_rep.py").write_text(REPEATED.replace("def test_x(", "def test_y("))
    monkeypatch.setenv("REPEAT", "1")
    result = run(pytester, "--opprof")
    [line] = [line for line in result.stdout.lines if "keep its baseline" in line]
    argv = shlex.split(line.split("keep its baseline: ", 1)[1])
    assert argv[1:] == ["mv", argv[2], "test_rep.py::test_y"]
    assert line.startswith("opprof: test_rep.py::test_y has no baseline, and ")
    monkeypatch.chdir(pytester.path)
    assert cli_main(argv[1:]) == 0
    result = run(pytester, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(passed=9)
    assert "read by no test" not in result.stdout.str() and "no baseline" not in result.stdout.str()


def test_a_device_key_hook_loaded_while_collecting_is_refused(pytester):
    """A key hook in tests/gpu/conftest.py ran only when the paths given reached tests/gpu: the
    baselines were recorded under its key and checked under the machine's. Refused, naming the
    file; in the rootdir's conftest, the key is the same whatever the paths."""
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    hook = "def pytest_opprof_device_key(config, facts):\n    return 'ci-pool'\n"
    gpu = pytester.path / "tests" / "gpu"
    gpu.mkdir(parents=True)
    (gpu / "conftest.py").write_text(hook)
    (gpu / "test_k.py").write_text(
        "import torch\ndef test_k(opprof):\n    opprof.run(torch.add, torch.ones(3), torch.ones(3), warmup=1, steps=3)\n"
    )
    result = run(pytester, "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*the pytest_opprof_device_key hook in tests/gpu/conftest.py came after opprof chose the device key "
            "(*): pytest loads that conftest.py only when it collects its folder*; put the hook in the rootdir's "
            "conftest.py (or an installed plugin)"
        ]
    )
    run(pytester, "--opprof", "tests/gpu").assert_outcomes(passed=1)  # loaded at start: the key stands
    run(pytester, "--opprof", "--opprof-device-key=pinned").assert_outcomes(passed=1)  # the hook is not asked
    result = run(pytester, "--opprof", "-n", "2")
    result.assert_outcomes(errors=1)
    assert "came after opprof chose the device key" in result.stdout.str()
    (gpu / "conftest.py").unlink()
    (pytester.path / "conftest.py").write_text(hook)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    assert [p.name for p in (pytester.path / ".opprof").iterdir()] == ["ci-pool"]


def test_a_fixture_or_argument_of_the_tests_own_named_opprof_is_not_ours(pytester):
    """The count of tests carrying checks (and what --opprof measures) follows the plugin's
    fixture, not its name: a test's own `opprof` fixture or parametrize argument is not measured;
    a wrapper fixture that requests ours is."""
    pytester.makepyfile(
        test_shadow="""
        import pytest, torch

        class TestOwn:
            @pytest.fixture
            def opprof(self):
                return "our own helper"

            def test_own(self, opprof):
                assert opprof == "our own helper"

        @pytest.mark.parametrize("opprof", ["fast", "slow"])
        def test_param(opprof):
            assert opprof

        class TestWrap:
            @pytest.fixture
            def opprof(self, opprof):
                return opprof

            def test_wrap(self, opprof):
                opprof.run(torch.add, torch.ones(3), torch.ones(3), warmup=1, steps=3)
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=4)
    assert "opprof: 1 test carries operator checks, not measured" in result.stdout.str()
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=4)
    assert [t["nodeid"] for t in json.loads((pytester.path / "r.json").read_text())["tests"]] == [
        "test_shadow.py::TestWrap::test_wrap"
    ]


def test_a_moved_test_keeps_its_baseline_by_the_recipe_the_error_gives(pytester):
    """`git mv` of a test file and its baseline folder: the error names the old and new node ids
    and how to keep the file; done so, the moved test is compared with its old baseline."""
    body = "import torch\ndef test_x(opprof):\n    opprof.run(torch.add, torch.ones(3), torch.ones(3), warmup=1, steps=3)\n"
    old = pytester.path / "tests" / "old"
    old.mkdir(parents=True)
    (old / "test_a.py").write_text(body)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    (recorded,) = pytester.path.glob(".opprof/*/tests/old/test_a.py/test_x.json")
    new = pytester.path / "tests" / "new"
    old.rename(new)
    moved = recorded.parents[2] / "new" / "test_a.py" / "test_x.json"
    moved.parent.mkdir(parents=True)
    recorded.rename(moved)
    result = run(pytester, "--opprof")
    result.assert_outcomes(errors=1)
    (line,) = [line for line in result.stdout.lines if line.startswith("opprof: ") and "belongs to" in line]
    assert (
        "belongs to 'tests/old/test_a.py::test_x', not 'tests/new/test_a.py::test_x'; if the test was moved or "
        f"renamed and the file moved with it, keep it: opprof mv {moved} tests/new/test_a.py::test_x; else delete it"
    ) in line
    command = shlex.split(line.split("keep it: ")[1].split("; else")[0])  # run as written, from anywhere
    assert command[:2] == ["opprof", "mv"] and cli_main(command[1:]) == 0
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert test["baseline"]["status"] == "compared"


def test_verbose_names_every_test_without_a_baseline_and_every_orphan(pytester):
    """Three names and a count by default; every one with -v."""
    tests = "".join(
        f"def test_{i}(opprof):\n    opprof.run(torch.add, torch.ones(3), torch.ones(3), warmup=1, steps=3)\n"
        for i in range(5)
    )
    pytester.makepyfile(test_many="import torch\n" + tests)
    result = run(pytester, "--opprof")
    result.stdout.fnmatch_lines(["opprof: no baseline for 5 tests (*::test_0, *::test_1, *::test_2 and 2 more) in *"])
    result = run(pytester, "--opprof", "-v")
    result.stdout.fnmatch_lines(
        ["opprof: no baseline for 5 tests (*::test_0, *::test_1, *::test_2, *::test_3, *::test_4) in *"]
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=5)
    pytester.makepyfile(test_many="import torch\n" + tests.replace("def test_", "def test_renamed_"))
    result = run(pytester, "--opprof", "-v")
    result.stdout.fnmatch_lines(
        [
            "opprof: 5 baseline files * read by no test *: *test_0.json, *test_1.json, *test_2.json, *test_3.json, *test_4.json; *"
        ]
    )


def test_a_mistyped_opprof_ini_key_is_a_usage_error_naming_the_closest(pytester):
    """pytest only warns of an unknown ini key, and the run went on with the default tolerance."""
    pytester.makeini("[pytest]\nopprof_tolerence = 50%\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: opprof_tolerence (in tox.ini): no pytest-opprof option has that name, so it would be ignored; "
            "did you mean opprof_tolerance?"
        ]
    )
    result = run(pytester, "--help")  # it lists the options the line points to, their % intact
    assert result.ret == pytest.ExitCode.OK
    assert "an op may get (default 20%) [ini: opprof_tolerance]" in " ".join(result.stdout.str().split())
    pytester.makeini("[pytest]\noprof_top = 3\nopprof_tolerence = 50%\n")  # the package's name mistyped too
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: opprof_tolerence (in tox.ini): *", "oprof_top (in tox.ini): *did you mean opprof_top?"]
    )  # each on its own line
    pytester.makeini("[pytest]\n")
    result = run(pytester, "-o", "opprof_topp=3")  # pytest < 9 does not even warn of it
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: opprof_topp (given with -o): *did you mean opprof_top?"])
    run(pytester, "-o", "opprof_top=3").assert_outcomes(passed=1)
    pytester.makeini("[pytest]\ntimeout = 5\n")  # another plugin's key (not installed here): not ours to refuse
    run(pytester, "-o", "opprof_top=3").assert_outcomes(passed=1)


def test_paths_relative_to_a_rootdir_elsewhere_say_so(pytester):
    """With `--rootdir=tests`, `.opprof/...` in the summary is tests/.opprof: one line says the
    baseline paths are the rootdir's, not the folder pytest ran in (where a real .opprof may sit)."""
    tests = pytester.path / "tests"
    tests.mkdir()
    (tests / "test_k.py").write_text(
        "import torch\ndef test_k(opprof):\n    opprof.run(torch.add, torch.ones(3), torch.ones(3), warmup=1, steps=3)\n"
    )
    result = run(pytester, "--opprof", "--rootdir=tests", "tests")
    result.stdout.fnmatch_lines(
        [
            "opprof: no baseline for 1 test (test_k.py::test_k) in .opprof/* (no such folder)*",
            f"opprof: baseline paths (.opprof/...) are relative to the rootdir, {tests}, not to the folder pytest ran in",
        ]
    )
    assert "relative to the rootdir" not in run(pytester, "--opprof", "tests").stdout.str()
    absolute = f"--opprof-baseline-dir={pytester.path / 'elsewhere'}"  # relative to nothing
    assert "relative to the rootdir" not in run(pytester, "--opprof", "--rootdir=tests", absolute, "tests").stdout.str()
    run(pytester, "--opprof-update-baseline", "--rootdir=tests", "tests").assert_outcomes(passed=1)
    result = run(pytester, "--opprof", "--rootdir=tests", "tests")  # no line shows a baseline path
    assert ".opprof" not in result.stdout.str() and "relative to the rootdir" not in result.stdout.str()
    # --opprof-json names the rootdir, so a script resolves its baseline paths (a trial's could not)
    run(pytester, "--opprof", "--rootdir=tests", "--opprof-json=r.json", "tests").assert_outcomes(passed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["rootdir"] == str(tests)
    assert (Path(report["rootdir"]) / report["tests"][0]["baseline"]["path"]).is_file()


def test_a_device_key_hook_of_a_plugin_registered_late_is_named_by_its_module(pytester):
    """A plugin object registered after opprof asked for the key: named by its module's file,
    never by an object address, and not called a conftest loaded while collecting."""
    pytester.makeconftest(
        """
        import pytest

        class KeyPlugin:
            def pytest_opprof_device_key(self, config, facts):
                return "ci-pool"

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            config.pluginmanager.register(KeyPlugin(), "keys")
        """
    )
    pytester.makepyfile(test_k="def test_k(opprof):\n    pass\n")
    result = run(pytester, "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*the pytest_opprof_device_key hook in conftest.py came after opprof chose the device key (*): it was "
            "registered after opprof's pytest_configure, which asks for the key; put the hook in the rootdir's *"
        ]
    )


def test_the_faq_recipe_for_a_strict_xfail_on_an_opprof_assertion(pytester):
    """`opprof.enabled` skips the plain run (where assertions check only their arguments, so a
    strict xfail would XPASS) and is on under --opprof and `opprof = true` alike."""
    pytester.makepyfile(
        test_x="""
        import pytest, torch

        @pytest.mark.xfail(reason="known", strict=True)
        def test_x(opprof):
            if not opprof.enabled:
                pytest.skip("measured only with --opprof")
            torch.ones(3) + 1
            opprof.assert_op_count("aten::add", 7)
        """
    )
    run(pytester).assert_outcomes(skipped=1)
    run(pytester, "--opprof").assert_outcomes(xfailed=1)
    pytester.makeini("[pytest]\nopprof = true\n")
    run(pytester).assert_outcomes(xfailed=1)


def test_a_time_budget_failing_under_contention_says_so(pytester, fake_clock, monkeypatch):
    """A trial's 0.15 ms addmm budget failed at 23 ms/step on a machine two other processes loaded,
    with every check `ok`. It still fails (the budget is the user's), saying the test's threads
    waited for a CPU; a `contention` warning says it for every test measured so; a count
    assertion's failure gets no such clause (load does not change counts), nor a budget's on a
    name that did not run."""
    from pytest_opprof import device

    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)  # half of every ns
    fake_clock.costs["aten::mm"] = 800_000
    pytester.makepyfile(
        test_b="""
        import torch

        def test_budget(opprof):
            opprof.run(torch.mm, torch.ones(4, 4), torch.ones(4, 4), warmup=1, steps=3)
            opprof.assert_op_below("aten::mm", ms=0.5)

        def test_count(opprof):
            opprof.run(torch.mm, torch.ones(4, 4), torch.ones(4, 4), warmup=1, steps=3)
            opprof.assert_op_count("aten::mm", 2)

        def test_missing(opprof):
            opprof.run(torch.mm, torch.ones(4, 4), torch.ones(4, 4), warmup=1, steps=3)
            opprof.assert_op_below("aten::addmm", ms=0.5)

        def inductor_cpu_kernel():  # as Inductor's C++ kernels are recorded: timed on the CPU
            with torch._C._profiler._RecordFunctionFast("cpp_fused_mm_0"):
                torch.mm(torch.ones(4, 4), torch.ones(4, 4))

        def test_kernel_budget(opprof):  # a contributor's review: its line said nothing of the load
            opprof.run(inductor_cpu_kernel, warmup=1, steps=3)
            opprof.assert_kernel_below("cpp_fused_*", ms=0.5)
        """
    )
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert (
        "ms/step > limit 0.50 ms (median of 3 steps; min 0.83, max 0.83); the test's threads "
        "waited for a CPU 50% of the capture: other load slowed it"
    ) in out
    raised = [line for line in out.splitlines() if line.startswith("E ")]  # never cut to the terminal's width
    counts = [line for line in raised if "calls/step, expected 2 (per step: 1, 1, 1" in line]
    budgets = [line for line in raised if "ms/step > limit 0.50 ms" in line]
    assert counts and not [line for line in counts if "other load" in line]  # load does not change counts
    assert len(budgets) == 2 and all(line.endswith("other load slowed it") for line in budgets)
    assert [line for line in budgets if "cpp_fused_mm_0: 0." in line]
    missing = [line for line in raised if "aten::addmm: no op of that name ran" in line]  # a trial's: no time at all
    assert missing and not [line for line in missing if "waited for a CPU" in line]
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    for test in tests:
        (check,) = [c for c in test["checks"] if c["name"] == "contention"]
        assert check["status"] == "warning" and check["message"].startswith(
            "the test's threads waited for a CPU 50% of the capture: other load on the machine inflated"
        )


WORK_TESTS = """
import os, torch

N = int(os.environ.get("N", "1000"))

def test_one(opprof):
    opprof.run(torch.sum, torch.ones(N), warmup=1, steps=3)

def test_many(opprof):
    def f(x):
        return (x * 2 + 1).sin().cos().sum()
    opprof.run(f, torch.ones(N), warmup=1, steps=3)
"""


def test_work_changes_are_labelled_counted_and_say_how_to_record_them(pytester, monkeypatch):
    """A trial's input-size change read `aten::sum: inputs (float[1000]) -> (float[2000])` with no
    word for what it was, and a dtype change failed with 24 lines; neither said how to accept it."""
    pytester.makepyfile(test_w=WORK_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("N", "2000")
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "test_w.py::test_one: work changed: aten::sum: inputs (float[1000]) -> (float[2000])" in out
    for test in ("test_one", "test_many"):
        assert (
            f"test_w.py::{test}: if the change is intended, record it: pytest --opprof-update-baseline "
            f"test_w.py::{test} (and commit the file)"
        ) in out
    failure = out.split("_ test_many _")[1].split("opprof ===")[0]
    listed = [line for line in failure.splitlines() if line.startswith("work changed: aten::")]
    assert len(listed) == 3 and all("-> (float[2000]" in line for line in listed), failure
    # the failure says how to record it too: a CI log's failure section is what a person reads
    hint = "if the change is intended, record it: pytest --opprof-update-baseline test_w.py::test_many (and commit"
    assert f"\nwork changed in 2 more ops (--opprof-json lists every verdict)\n{hint}" in failure
    result.stdout.fnmatch_lines(["FAILED test_w.py::test_one - Failed: work changed: aten::sum: inputs*"])
    result = run(pytester, "--opprof-update-baseline")
    assert "if the change is intended" not in result.stdout.str()  # recorded: nothing to accept
    run(pytester, "--opprof").assert_outcomes(passed=2)


def test_recording_set_in_the_ini_file_is_said_and_never_meets_a_required_baseline(pytester, monkeypatch):
    """A CI trial's pyproject gained `opprof_update_baseline = true`: the CI command (`--opprof
    --opprof-require-baseline`) recorded every regression as the new baseline and exited 0.
    Recording that the project or the environment sets (the ini file, its addopts,
    PYTEST_ADDOPTS) meets a required baseline as a usage error, and alone says in the summary
    that it compared nothing. Recording asked for on the command line is the person's own:
    a standing `opprof_require_baseline` does not hold it."""
    pytester.makepyfile(test_x="import torch\ndef test_x(opprof):\n    opprof.run(torch.ones, 3, steps=2)\n")
    pytester.makeini("[pytest]\nopprof_update_baseline = true\n")
    refused = run(pytester, "--opprof", "--opprof-require-baseline")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            "ERROR: --opprof-require-baseline (from command line) checks that the baselines exist, and "
            "--opprof-update-baseline (from tox.ini) records them: this run would compare nothing; remove the "
            "recording from tox.ini, and pass --opprof-update-baseline on the command line when you mean to record"
        ]
    )
    recorded = run(pytester, "--opprof")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(
        ["opprof: recording baselines, as tox.ini says (--opprof-update-baseline): this run compared nothing, *"]
    )
    pytester.makeini("[pytest]\naddopts = --opprof-update-baseline\n")
    refused = run(pytester, "--opprof", "--opprof-require-baseline")
    refused.stderr.fnmatch_lines(["*--opprof-update-baseline (from addopts in tox.ini) records them*"])
    pytester.makeini("[pytest]\nopprof_require_baseline = true\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--opprof-update-baseline")
    refused = run(pytester, "--opprof")
    refused.stderr.fnmatch_lines(["*--opprof-update-baseline (from PYTEST_ADDOPTS) records them*"])
    monkeypatch.delenv("PYTEST_ADDOPTS")
    asked = run(pytester, "--opprof-update-baseline=all")  # the person's own recording
    asked.assert_outcomes(passed=1)
    assert "recording baselines, as" not in asked.stdout.str()


def test_a_baseline_without_work_says_its_work_was_not_compared(pytester, monkeypatch, tmp_path):
    """A CI trial deleted every op's `work` from a baseline (or set it to null, as a bad merge
    might): a float -> double change then passed for good, in silence. The work of those ops is
    still not compared (the file holds none), but one summary line names them and the command
    that records them again, and the JSON lists them."""
    pytester.makepyfile(
        test_w="""
        import os, torch
        def test_w(opprof):
            dtype = torch.float64 if os.environ.get("DOUBLE") else torch.float32
            a, b = torch.ones(4, 4, dtype=dtype), torch.ones(4, 4, dtype=dtype)
            opprof.run(torch.mm, a, b, warmup=1, steps=3)
        """
    )
    assert run(pytester, "--opprof-update-baseline").ret == 0
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    doc = json.loads(path.read_text())
    for i, entry in enumerate(doc["ops"].values()):
        if i % 2:
            entry["work"] = None
        else:
            del entry["work"]
    path.write_text(json.dumps(doc, indent=2))
    monkeypatch.setenv("DOUBLE", "1")
    out = tmp_path / "r.json"
    result = run(pytester, "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: the work (inputs, FLOPs) of aten::mm* was not compared in 1 test: the baseline holds none of "
            "it (work null or missing: an edit, a merge); record those baselines again: "
            "pytest --opprof-update-baseline=all test_w.py::test_w"
        ]
    )
    (test,) = json.loads(out.read_text())["tests"]
    assert "aten::mm" in test["baseline"]["work_unrecorded"]
    rewritten = run(pytester, "--opprof-update-baseline=all", "test_w.py::test_w")
    assert "rewritten" in rewritten.stdout.str() and "was not compared" not in rewritten.stdout.str()
    assert all(entry["work"] for entry in json.loads(path.read_text())["ops"].values())


@pytest.mark.parametrize("flag", [None, "--opprof", "--opprof-update-baseline"])
def test_a_hypothesis_given_test_that_carries_opprof_errs_saying_why(pytester, flag):
    """A trial's @given test recorded its last drawn example, and every later run, drawing
    another, failed on a work change (whole-call captures summed the examples). Under --opprof
    such a test errs at setup, one line; a hypothesis test without opprof runs. Told by
    the attribute @given sets or by the marker hypothesis's pytest plugin adds (faked here:
    hypothesis is no dependency)."""
    pytester.makeini("[pytest]\nmarkers =\n    hypothesis: hypothesis's own\n")
    pytester.makepyfile(
        test_h="""
        import pytest, torch

        def given(fn):  # what hypothesis.given leaves on the test
            fn.is_hypothesis_test = True
            return fn

        @given
        def test_drawn(opprof):
            opprof.run(torch.ones, 3, warmup=1, steps=3)

        @pytest.mark.hypothesis
        @pytest.mark.opprof
        def test_marked():
            torch.ones(2)

        @given
        def test_plain():
            torch.ones(2)
        """
    )
    result = run(pytester, *([flag] if flag else []))
    if flag is None:  # without --opprof run() calls fn once, as DESIGN has it: nothing is measured
        result.assert_outcomes(passed=3)
        return
    result.assert_outcomes(passed=1, errors=2)
    for name in ("test_drawn", "test_marked"):
        result.stdout.fnmatch_lines(
            [
                f"test_h.py::{name}: a hypothesis @given test runs its body once per drawn example, so opprof would "
                "measure, compare and record whichever example ran last (*); measure fixed inputs in a test of its own"
            ]
        )
    assert "Traceback" not in result.stdout.str() and not (pytester.path / ".opprof").exists()


def test_repeats_that_change_one_baseline_in_turn_are_named(pytester, monkeypatch):
    """A trial's `--count 3` recording of a test whose calls alternate: repeat [1-3] wrote
    `aten::add 1 -> 2`, then [2-3] `2 -> 1`, and the summary said only `1 changed`. One line
    names the file and its writes; a steady test's repeats (compared, kept) are not named."""
    pytester.makeconftest(REPEAT_CONFTEST)
    pytester.makepyfile(
        test_flip="""
        import torch

        RUNS = []

        def test_flip(opprof):
            RUNS.append(1)
            x = torch.ones(4)
            extra = len(RUNS) % 2 == 0  # every other run adds a call
            opprof.run(lambda: (x + 1) + (x + 1 if extra else 0), warmup=1, steps=3)

        def test_steady(opprof):
            opprof.run(lambda: torch.ones(4) * 2, warmup=1, steps=3)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=2)  # run 1: one add
    monkeypatch.setenv("REPEAT", "1")
    result = run(pytester, "--opprof-update-baseline")  # runs 1..3: one add, two, one
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "opprof: .opprof/*/test_flip.py/test_flip.json was written 2 times in this run (test_flip.py::test_flip[[]2-3[]], "
            "test_flip.py::test_flip[[]3-3[]]), each run finding the one before changed: the test does not run alike "
            "each time (its calls or inputs vary), so the file holds whichever ran last and later runs fail by "
            "chance; make it run alike each time"
        ]
    )
    assert "test_steady.json was written" not in result.stdout.str()
    assert "1 changed (test_flip.py::test_flip); kept " in result.stdout.str()  # the file's test, not a repeat


def test_pytest_benchmarks_fixture_in_a_whole_call_capture_is_warned(pytester):
    """A trial's marker test around pytest-benchmark's `benchmark(model, x)` recorded, then failed
    `structure changed: aten::addmm 6580 -> 8520/step`: benchmark picks its rounds by timing. A
    whole-call capture of a test that used the fixture says so; a run() of the test's own does not
    (faked here: pytest-benchmark is no dependency)."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def benchmark():  # as pytest-benchmark's: calls the function as many rounds as it picks
            def bench(fn, *args):
                for _ in range(3):
                    result = fn(*args)
                return result
            return bench
        """
    )
    pytester.makepyfile(
        test_b="""
        import pytest, torch

        @pytest.mark.opprof
        def test_marked(benchmark):
            benchmark(torch.ones, 3)

        def test_whole(opprof, benchmark):
            benchmark(torch.ones, 3)

        def test_own_run(opprof, benchmark):
            benchmark(torch.ones, 3)
            opprof.run(torch.ones, 3, warmup=1, steps=2)
        """
    )
    result = run(pytester, "--opprof", "-v")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    for name in ("test_marked", "test_whole"):
        assert f"test_b.py::{name}: warning benchmark_rounds: pytest-benchmark's benchmark fixture ran" in out
    assert "test_own_run: warning benchmark_rounds" not in out
