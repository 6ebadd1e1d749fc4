"""End to end: pytest runs of a user project with our flags: registration, options, the plugin inert when off, the marker."""

from __future__ import annotations

import html
import importlib
import json
import sys

import pytest

torch = pytest.importorskip("torch")


from plugin_project import deterministic_fixture, project_fixture, run  # noqa: F401 (fixtures: used by name)

from pytest_opprof.errors import (  # noqa: E402
    NOT_FAILING,
    assertion_inside_capture,
    inert_summary,
    markers_stacked,
)

# -- registration, help, options -------------------------------------------------------------


def test_help_documents_every_option(pytester):
    """`pytest --help` lists each flag and its ini twin (typed keys where pytest has union types)."""
    result = run(pytester, "--help")
    out = result.stdout.str()
    unions = tuple(int(part) for part in pytest.__version__.split(".")[:2]) >= (9, 2)
    for flag, ini, kind in [
        ("--opprof", "opprof", "string | bool | int"),
        ("--opprof-top=N", "opprof_top", "string | int | float"),
        ("--opprof-json=PATH", "opprof_json", "string"),
        ("--opprof-trace-dir=DIR", "opprof_trace_dir", "string"),
        ("--opprof-trace=WHEN", "opprof_trace", "string"),
        ("--opprof-update-baseline=[WHICH]", "opprof_update_baseline", "string | bool | int"),
        ("--opprof-baseline-dir=DIR", "opprof_baseline_dir", "string"),
        ("--opprof-tolerance=PCT", "opprof_tolerance", "string | float | int"),
        ("--opprof-min-delta-ms=MS", "opprof_min_delta_ms", "string | float | int"),
        ("--opprof-fail-on=KINDS", "opprof_fail_on", "string"),
        ("--opprof-ignore-ops=GLOBS", "opprof_ignore_ops", "string"),
        ("--opprof-device-key=KEY", "opprof_device_key", "string"),
        ("--opprof-strict", "opprof_strict", "string | bool | int"),
        ("--opprof-require-baseline", "opprof_require_baseline", "string | bool | int"),
    ]:
        assert flag in out
        assert f"  {ini} ({kind if unions else 'string'}):" in out


def test_opprof_where_torch_cannot_be_imported_is_one_usage_error(pytester):
    """A contract trial's `--opprof` without an importable torch failed every measured test with
    a traceback ending in capture.py's `import torch`: it stops at start in one line; a plain run
    goes on (the plugin imports nothing there)."""
    pytester.makeconftest("import sys\nsys.modules['torch'] = None  # as where torch is not installed\n")
    pytester.makepyfile("def test_a(opprof):\n    opprof.run(lambda: None)\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --opprof: torch cannot be imported here (ModuleNotFoundError: import of torch halted; None in "
            "sys.modules); install torch in this environment, or run without --opprof"
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_plugin_can_be_disabled(pytester):
    """`-p no:opprof` removes the plugin: its flags are unknown."""
    result = run(pytester, "-p", "no:opprof", "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --opprof*"])


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--opprof-top", "many"], "", "--opprof-top: 'many' is not a whole number >= 1 (from command line)"),
        (["--opprof-top", "0"], "", "--opprof-top: '0' is not a whole number >= 1 (from command line)"),
        ([], "opprof_top = -3", "--opprof-top: '-3' is not a whole number >= 1 (from tox.ini)"),
        ([], "opprof = maybe", "--opprof: 'maybe' is not true or false (from tox.ini)"),
        (
            ["--opprof-trace", "sometimes"],
            "",
            "--opprof-trace: 'sometimes' is not 'failed' or 'all' (from command line)",
        ),
        ([], "opprof_trace = never", "--opprof-trace: 'never' is not 'failed' or 'all' (from tox.ini)"),
        (["-o", "opprof_top=x"], "", "--opprof-top: 'x' is not a whole number >= 1 (from -o opprof_top)"),
        (  # an empty value written down is judged as the flag's (a trial's `fail_on =` meant none, got the default)
            [],
            "opprof_fail_on =",
            "--opprof-fail-on: '' is not a comma list of structure, work, time, environment (or none) (from tox.ini)",
        ),
        (["-o", "opprof_baseline_dir="], "", "--opprof-baseline-dir: '' is not a path (from -o opprof_baseline_dir)"),
        (
            [],
            "opprof_require_baseline = sure",
            "--opprof-require-baseline: 'sure' is not true or false (from tox.ini)",
        ),
        # an ini value a flag overrides holds in the next run without it (a contract trial's passed)
        (
            ["--opprof-top=3"],
            "opprof_top = many",
            "--opprof-top: 'many' is not a whole number >= 1 (from opprof_top in tox.ini, which the command line "
            "overrides in this run only)",
        ),
        (["--opprof"], "opprof = maybe", "--opprof: 'maybe' is not true or false (from opprof in tox.ini, which the "),
        # so does a flag in addopts that a later one overrides (it had passed unread)
        (
            ["--opprof-top", "3"],
            "addopts = --opprof-top many",
            "--opprof-top: 'many' is not a whole number >= 1 (from addopts in tox.ini, which a later --opprof-top "
            "overrides)",
        ),
        # a flag whose value is optional takes the next argument, as argparse does (a review's passed)
        (
            ["--opprof-update-baseline=all"],
            "addopts = --opprof-update-baseline bogus",
            "--opprof-update-baseline: 'bogus' is not 'changed' (the default), 'all', or true/false (from addopts",
        ),
        (
            ["--opprof-top=6", "-o", "addopts=--opprof-top=many"],
            "",
            "'many' is not a whole number >= 1 (from -o addopts,",
        ),
        (
            ["--opprof-update-baseline"],
            "addopts = --opprof-update-baseline=sometimes",
            "--opprof-update-baseline: 'sometimes' is not 'changed' (the default), 'all', or true/false (from addopts",
        ),
        # pytest stops reading at --help: addopts' value holds, named as addopts' (had said "command line")
        (
            ["--help", "--opprof-top", "5"],
            "addopts = --opprof-top many",
            "--opprof-top: 'many' is not a whole number >= 1 (from addopts in tox.ini)",
        ),
        # a value in addopts the command line does not override is the one that holds: judged as that
        (
            [],
            "addopts = --opprof-fail-on=tme",
            "--opprof-fail-on: 'tme' is not a comma list of structure, work, time, ",
        ),
    ],
)
def test_bad_option_values_are_usage_errors_naming_the_source(pytester, args, ini, message):
    """A bad value, from CLI, ini or -o, stops pytest at start with one line naming flag, value and
    source; an ini value the command line overrides in this run too."""
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_x(): pass")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


NATIVE_TOML_CASES = [
    # pytest 9's [tool.pytest] table: numbers and switches are TOML values, read as the flag reads text
    ("opprof_top = 2", None),
    ("opprof_tolerance = 25", None),
    ("opprof_tolerance = 12.5", None),
    ("opprof_min_delta_ms = 0", None),
    ("opprof_strict = true", None),
    ("opprof_update_baseline = false", None),
    ('opprof_fail_on = "structure,work"', None),
    ('opprof_ignore_ops = ""', None),  # empty ignores none, as --opprof-ignore-ops= does
    (
        'opprof_fail_on = ""',
        "--opprof-fail-on: '' is not a comma list of structure, work, time, environment (or none) (from pyproject.toml)",
    ),
    ("opprof_top = 0", "--opprof-top: 0 is not a whole number >= 1 (from pyproject.toml)"),
    # a whole number written 5.0, a switch written 1: our parser names the flag, the file and what it
    # takes (an audit's `opprof_top = 5.0` read pytest's `expects one of string | int, got float`)
    ("opprof_top = 2.5", "--opprof-top: 2.5 is not a whole number >= 1 (from pyproject.toml)"),
    ("opprof_top = 5.0", "--opprof-top: 5.0 is not a whole number >= 1 (from pyproject.toml)"),
    ("opprof_strict = 1", None),
    ("opprof_strict = 2", "--opprof-strict: 2 is not true or false (from pyproject.toml)"),
    (
        "opprof_tolerance = 0.2",
        '--opprof-tolerance: 0.2 is not a percentage like 20%: a bare 0.2 is ambiguous; write "20%" or "0.2%" (from pyproject.toml)',
    ),
    (
        "opprof_min_delta_ms = -1",
        "--opprof-min-delta-ms: -1 is not a finite number of milliseconds >= 0 (from pyproject.toml)",
    ),
    ("opprof_tolerance = true", "config option 'opprof_tolerance' expects one of string | float | int, got bool: True"),
    ("opprof_top = [5]", "config option 'opprof_top' expects one of string | int | float, got list: [5]"),
    ("opprof_json = 5", "config option 'opprof_json' expects a string, got int: 5"),
    (  # what people write for a list; pytest's refusal gains the line to write
        'opprof_ignore_ops = ["aten::copy_", "aten::t"]',
        "config option 'opprof_ignore_ops' expects a string, got list: ['aten::copy_', 'aten::t']; write the list "
        'as one comma-separated string: opprof_ignore_ops = "aten::copy_, aten::t"',
    ),
]


@pytest.mark.parametrize(("line", "message"), NATIVE_TOML_CASES)
def test_native_toml_table_takes_typed_values(pytester, line, message):
    """`[tool.pytest]` (pytest 9): `opprof_top = 2` is a number, not refused as "not a string"; a
    bad value stops the run at start with one line naming the key and the fix."""
    if tuple(int(p) for p in pytest.__version__.split(".")[:2]) < (9, 2):
        pytest.skip("typed ini values need pytest 9.2 (union ini types)")
    pytester.makepyprojecttoml(f"[tool.pytest]\nopprof = true\n{line}\n")
    pytester.makepyfile("def test_x(): pass")
    result = run(pytester)
    if message is None:
        result.assert_outcomes(passed=1)
        assert "opprof: device key" in result.stdout.str()  # opprof = true (a TOML bool) took effect
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].endswith(message), lines  # nothing after it (a fix for another key)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("opprof_top = [5]", "--opprof-top: [5] is not a whole number >= 1 (from pyproject.toml)"),
        ('opprof_ignore_ops = ["aten::copy_", "aten::t"]', None),
    ],
)
def test_a_toml_list_in_ini_options_under_warnings_as_errors_is_no_internal_error(pytester, line, message):
    """`[tool.pytest.ini_options]` with `filterwarnings = ["error"]`: a TOML list under an opprof
    key is judged by our parser (one usage line, or a list of globs taken), not pytest's
    deprecation warning turned into an INTERNALERROR traceback (a trial's find)."""
    pytester.makepyprojecttoml(f'[tool.pytest.ini_options]\nfilterwarnings = ["error"]\nopprof = true\n{line}\n')
    pytester.makepyfile("def test_x(): pass")
    result = run(pytester)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    if message is None:
        result.assert_outcomes(passed=1)
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].endswith(message), lines  # nothing after it (a fix for another key)


def test_native_toml_numbers_take_effect(project):
    """`opprof_top = 2` in `[tool.pytest]` limits the report to 2 rows, as --opprof-top 2 does."""
    if tuple(int(p) for p in pytest.__version__.split(".")[:2]) < (9, 2):
        pytest.skip("typed ini values need pytest 9.2 (union ini types)")
    project.makepyfile(
        """
        from conftest import infer
        def test_x(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    project.makepyprojecttoml("[tool.pytest]\nopprof = true\nopprof_top = 2\n")
    lines = run(project).stdout.str().split("test_x [passed]")[1].splitlines()
    assert sum(1 for line in lines[3:] if line.startswith("aten::")) == 2
    assert any(line.endswith(" more ops)") and line.startswith("(") for line in lines)  # the rows left out, counted


def test_report_header_names_the_device(project):
    """With --opprof the header shows the device key and facts; without, says it is off."""
    project.makepyfile("def test_x(): pass")
    on = run(project, "--opprof")
    on.stdout.fnmatch_lines(
        [
            "opprof: device key cpu-*; CPU ops always, CUDA when initialised",
            "opprof: torch 2.*, * x*, * torch thread*",
        ]
    )
    off = run(project)
    off.stdout.fnmatch_lines(["opprof: off (pytest --opprof measures tests with the opprof fixture or marker)"])


# -- inert when off ---------------------------------------------------------------------------


def test_inert_without_flag(pytester):
    """Off: no torch import, no profiler, no files; run() calls fn once; assertions skipped; one summary line."""
    pytester.makeconftest(
        """
        import sys
        def pytest_sessionfinish(session):
            with open("modules.txt", "w") as f:
                f.write("torch" if "torch" in sys.modules else "no torch")
        """
    )
    pytester.makepyfile(
        """
        import pytest
        calls = []

        def test_run_calls_once(opprof):
            assert opprof.run(lambda a: calls.append(a) or "done", 7, warmup=5, steps=9) == "done"
            assert calls == [7]
            opprof.assert_op_below("aten::nothing", ms=1)  # not evaluated when off
            opprof.assert_op_count("aten::addmm", 99)
            opprof.assert_no_sync()
            assert opprof.profile is None

        @pytest.mark.opprof
        def test_marked():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([inert_summary(2)])
    assert (pytester.path / "modules.txt").read_text() == "no torch"
    written = [p.name for p in pytester.path.rglob("*") if "opprof" in p.name or p.suffix in (".json", ".gz")]
    assert written == []
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "marked")  # a trial read 40 of 1 run
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines([inert_summary(1)])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")  # a trial's -n 2 run: no line
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([inert_summary(2)])


# What a run without --opprof may import of the package: its options, their checks and messages.
# The measuring modules (the analysis, captures, baselines, verdicts, reports) cost a plain run
# 100 ms before (bench/inert_cost.py); a test that asks for the fixture imports them, as it asks.
INERT_MODULES = {
    "device",
    "errors",
    "events",
    "files",
    "hooks",
    "layout",
    "leakmessages",
    "opnames",
    "plugin",
    "plugin.base",
    "plugin.collect",
    "plugin.judge",
    "plugin.options",
    "plugin.run",
    "plugin.summary",
    "plugin.watch",
    "rules",
    "settings",
    "textout",
    "units",
}


def test_a_run_without_opprof_imports_none_of_the_measuring_modules(pytester):
    """Without --opprof, pytest's start, collection, a marked test, the summary line, an idle
    report flag, the plugin's unconfigure and pytest's cleanups import only the options' modules
    of the package, and no other package (a review measured the plugin at 134 ms of a one-test
    run's 353, for modules a plain run never calls); with --opprof the analysis loads."""
    pytester.makeconftest(
        """
        import atexit, sys
        def _write():  # at the process's end: after every hook and cleanup
            with open("modules.txt", "w") as f:
                f.write(" ".join(sorted(sys.modules)))
        atexit.register(_write)
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.opprof(tolerance="50%")
        def test_marked():
            pass

        def test_plain():
            pass
        """
    )

    def imported(*args: str) -> set[str]:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)
        assert result.ret == 0, result.stdout.str()
        # the hook modules pytest_plugins names are imported by pytest first (a trial's editable
        # install warned in every run that their asserts could not be rewritten)
        assert "PytestAssertRewriteWarning" not in result.stdout.str()
        return set((pytester.path / "modules.txt").read_text().split())

    without_plugin = imported("-p", "no:opprof")
    found = imported("--opprof-json=r.json")
    ours = {m.split(".", 1)[1] for m in found if m.startswith("pytest_opprof.")}
    assert sorted(ours - INERT_MODULES) == []
    others = {m.split(".")[0] for m in found - without_plugin if not m.startswith("pytest_opprof")}
    assert sorted(others - set(sys.stdlib_module_names)) == []  # no tabulate, torch, pynvml...
    pytest.importorskip("torch")
    measured = imported("--opprof", "-k", "plain")
    assert {"pytest_opprof.analysis", "pytest_opprof.capture", "pytest_opprof.baseline", "torch"} <= measured


def test_a_plain_run_refuses_op_names_torch_lacks_and_assertions_before_a_capture(pytester):
    """A training trial's `assert_op_below("aten:mm", ms=50)` and an assertion made before run()
    passed in plain runs (they fail under --opprof): a plain run now refuses both in one line, as
    it refuses bad argument values, where the test imported torch (the plugin imports nothing)."""
    pytester.makepyfile(
        test_plain="""
        import torch

        def mm():
            return torch.mm(torch.ones(2, 2), torch.ones(2, 2))

        def test_separator(opprof):
            opprof.run(mm)
            opprof.assert_op_below("aten:mm", ms=50)

        def test_backward_node(opprof):
            opprof.run(mm)
            opprof.assert_no_op("MmBackward")

        def test_before_run(opprof):
            opprof.assert_op_count("aten::mm", 1)
            opprof.run(mm)

        def test_before_capture(opprof):
            opprof.assert_no_op("aten::addmm")
            with opprof.capture():
                mm()

        def test_glob_typo(opprof):
            opprof.run(mm)
            opprof.assert_no_op("aten::copyy*")

        def test_fine(opprof):
            opprof.run(mm)
            opprof.assert_op_count("aten::mm", 1)
            opprof.assert_no_op("aten::addmm")
            opprof.assert_op_below("aten::*mm", ms=5)
            opprof.assert_no_op("my_block")
            opprof.assert_no_op("aten::copy_*")
            opprof.assert_no_op("*copyy*")

        def test_whole_call(opprof):
            mm()
            opprof.assert_op_count("aten::mm", 1)
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=2, failed=5)
    result.stdout.fnmatch_lines_random(
        [
            "E *OpprofUsageError: aten:mm: not an operator torch knows; did you mean aten::mm*",
            "E *OpprofUsageError: aten::copyy[*]: matches no operator torch knows; did you mean aten::copy, aten::copy_*",
            "E *OpprofUsageError: MmBackward: not an operator torch knows; did you mean MmBackward0*",
            "E *OpprofUsageError: 1 assertion made before opprof.run() (test_plain.py:*) had no capture of the code "
            "before to check: *",
            "E *OpprofUsageError: 1 assertion made before `with opprof.capture():` (test_plain.py:*) had no capture *",
        ]
    )


def test_a_glob_matching_no_op_torch_knows_fails_an_absence_under_opprof(pytester):
    """A contract trial's `assert_no_op("aten::copyy*")` and `assert_op_count("aten::copyy*", 0)`
    passed forever, matching nothing: a glob with its namespace written out that matches no op
    torch knows fails the absence it asserts; one that does, or one without a namespace, passes."""
    pytester.makepyfile(
        test_globs="""
        import torch

        def mm():
            return torch.mm(torch.ones(2, 2), torch.ones(2, 2))

        def test_no_op_typo(opprof):
            opprof.run(mm, warmup=1, steps=2)
            opprof.assert_no_op("aten::copyy*")

        def test_count_typo(opprof):
            opprof.run(mm, warmup=1, steps=2)
            opprof.assert_op_count("aten::copyy*", min=0)

        def test_fine(opprof):
            opprof.run(mm, warmup=1, steps=2)
            opprof.assert_no_op("aten::copy_*")
            opprof.assert_op_count("aten::*conv*", 0)
            opprof.assert_no_op("*copyy*")
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*aten::copyy[*]: matches no operator torch knows, so asserting it is absent proves nothing; did you "
            "mean aten::copy, aten::copy_*",
            "*aten::copyy[*]: matches no operator torch knows, so counting zero calls of it proves nothing*",
        ]
    )


def test_an_op_name_from_a_graph_dump_is_refused_in_both_runs(pytester):
    """`torch.ops.aten._to_copy.default` (as FX and Inductor dumps print ops) passed assert_no_op
    beside two calls a step, with and without --opprof: refused, naming the profiler's name."""
    pytester.makepyfile(
        test_dump="""
        import torch

        def test_cast(opprof):
            opprof.run(lambda x: x.double().float(), torch.ones(4), warmup=1, steps=2)
            opprof.assert_no_op("torch.ops.aten._to_copy.default")
        """
    )
    for args in ((), ("--opprof",)):
        result = run(pytester, *args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            [
                "E *OpprofUsageError: op='torch.ops.aten._to_copy.default': expected the op's name as the profiler "
                "records it: 'aten::_to_copy'"
            ]
        )


@pytest.mark.parametrize(
    ("args", "warmed"),
    [
        (["--opprof"], 1),
        ([], 0),  # off
        (["--opprof", "-k", "plain"], 0),  # no measured test left to run
        (["--opprof", "--collect-only"], 0),
    ],
)
def test_torchs_first_profiler_start_is_paid_before_the_tests_only_when_one_is_measured(
    project, monkeypatch, args, warmed
):
    """torch's first profiler start imports Inductor (1.1-1.7 s here): before the first test, so that
    it falls in no test's time or timeout; never in a run that measures nothing."""
    capture_module = importlib.import_module("pytest_opprof.capture")  # the plugin imports it when it runs
    calls = []
    # by whom: run()'s own first measurement warms too (capture._run_steps), after the test began
    monkeypatch.setattr(capture_module, "warm_profiler", lambda: calls.append(sys._getframe(1).f_code.co_name))
    project.makepyfile(
        """
        from conftest import infer

        def test_measured(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)

        def test_plain():
            pass
        """
    )
    run(project, *args)
    assert calls.count("pytest_runtestloop") == warmed
    assert calls == [] or calls[0] == "pytest_runtestloop"  # before any test; none where nothing is measured


def test_output_flags_without_the_flag_say_nothing_was_written(pytester, tmp_path):
    """--opprof-json, -html, -trace-dir on the command line without --opprof: one line says nothing
    was measured or written (a CI artifact missing without a word is worse); the same keys in the
    ini file are the project's standing choice for --opprof runs and say nothing."""
    pytester.makepyfile("def test_x(opprof):\n    opprof.run(lambda: None)\n")
    out = tmp_path / "r.json"
    result = run(pytester, f"--opprof-json={out}", f"--opprof-html={tmp_path / 'r.html'}", "--opprof-trace-dir=tr")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            inert_summary(1),
            "opprof: --opprof-json, --opprof-html, --opprof-trace-dir without --opprof: nothing measured, "
            "checked or written; add --opprof",
        ]
    )
    assert not out.exists() and not (pytester.path / "tr").exists()
    # an earlier run's report at the path would pass for this run's (a scripting trial's dashboard
    # read one): removed, and said; someone's file there, a report of another kind, stays
    csv = tmp_path / "r.csv"
    run(pytester, "--opprof", f"--opprof-json={out}", f"--opprof-csv={csv}")
    (tmp_path / "notes.json").write_text("{}")
    result = run(pytester, f"--opprof-json={out}", "--collect-only")  # runs nothing: the files stay (as with --opprof)
    assert out.exists() and "removed" not in result.stdout.str()
    kept = (f"--opprof-csv={tmp_path / 'notes.json'}", f"--opprof-html={csv}")  # someone's file; a CSV report
    result = run(pytester, f"--opprof-json={out}", *kept)
    result.stdout.fnmatch_lines(
        [
            f"opprof: --opprof-json, --opprof-csv, --opprof-html without --opprof: nothing measured, checked or "
            f"written; the earlier report {out} removed: not this run's; add --opprof"
        ]
    )
    assert not out.exists() and csv.read_text().startswith("test,op,") and (tmp_path / "notes.json").read_text() == "{}"
    # a CI trial's gates, given without --opprof, passed a regression with exit 0 and no word of them
    result = run(pytester, "--opprof-fail-on=structure,work", "--opprof-require-baseline", "--opprof-strict")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: --opprof-fail-on, --opprof-strict, --opprof-require-baseline without --opprof: nothing "
            "measured, checked or written; add --opprof"
        ]
    )
    pytester.makeini(f"[pytest]\nopprof_json = {out}\nopprof_require_baseline = true\n")
    result = run(pytester)
    assert "nothing measured" not in result.stdout.str()
    pytester.makeini("[pytest]\naddopts = --opprof-tolerance=30% --opprof-fail-on=structure,work\n")
    result = run(pytester)  # the project's standing flags: no line in every plain run (a review's finding)
    result.assert_outcomes(passed=1)
    assert "nothing measured" not in result.stdout.str()


def test_an_earlier_report_that_cannot_be_removed_is_said_not_to_be_this_runs(pytester, tmp_path, monkeypatch):
    """A run without --opprof that cannot remove the earlier report at its path names it and why:
    it is not this run's (a dashboard would read it as one)."""
    import pathlib

    pytester.makepyfile("def test_x(opprof):\n    opprof.run(lambda: None)\n")
    out = tmp_path / "r.json"
    run(pytester, "--opprof", f"--opprof-json={out}")

    def refused(self, missing_ok=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pathlib.Path, "unlink", refused)
    result = run(pytester, f"--opprof-json={out}")
    result.stdout.fnmatch_lines(
        [
            f"opprof: --opprof-json without --opprof: nothing measured, checked or written; the earlier report {out} "
            "(Permission denied) could not be removed: not this run's; add --opprof"
        ]
    )
    assert out.exists()


def test_bad_arguments_fail_without_the_flag_too(pytester):
    """Off, an assertion or run() with a bad argument fails its test with the same one line as
    under --opprof (a typo must not wait for the first measured run), still without torch; a
    capture nested in a capture is refused under --opprof in one line, not as 'a profiler is
    already running'."""
    pytester.makeconftest(
        """
        import sys
        def pytest_sessionfinish(session):
            with open("modules.txt", "w") as f:
                f.write("torch" if "torch" in sys.modules else "no torch")
        """
    )
    pytester.makepyfile(
        """
        def test_ms(opprof):
            opprof.assert_op_below("aten::mm", ms=-1)

        def test_range(opprof):
            opprof.assert_op_count("aten::mm", min=3, max=1)

        def test_steps(opprof):
            opprof.run(lambda: None, steps=0)

        def test_fn(opprof):
            opprof.run(42)

        def test_async(opprof):
            async def step():
                pass
            opprof.run(step)

        def test_generator(opprof):
            def step():
                yield 1
            opprof.run(step)

        def test_nested(opprof):
            with opprof.capture():
                opprof.run(print)

        def test_inside(opprof):
            with opprof.capture():
                opprof.assert_no_sync()

        class AsyncModel:
            async def __call__(self):
                pass

        def test_async_call(opprof):
            opprof.run(AsyncModel())

        def test_inside_fn(opprof):
            opprof.run(lambda: opprof.assert_no_sync(), steps=2)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf", "-W", "error::RuntimeWarning")
    result.assert_outcomes(failed=10)
    result.stdout.fnmatch_lines_random(
        [
            "E  *OpprofUsageError: ms=-1: expected a finite number of milliseconds >= 0",
            "E  *OpprofUsageError: min=3: expected at most max=1*",
            "E  *OpprofUsageError: steps=0: expected a whole number >= 1",
            "E  *OpprofUsageError: fn=42: expected a callable*",
            "E  *OpprofUsageError: fn=<function *step at *>: expected a function that does its work when called, not an "
            "async def (a call only makes a coroutine); pass lambda: asyncio.run(fn(...))",
            "E  *OpprofUsageError: fn=<function *step at *>: expected a function that does its work when called, not a "
            "generator (a call only makes one); pass lambda: list(fn(...))",
            "E  *OpprofUsageError: opprof.run() inside `with opprof.capture():`: captures cannot nest*",
            f"E  *OpprofUsageError: {assertion_inside_capture()}",
            "E  *OpprofUsageError: fn=<*AsyncModel object at *>: expected a function that does its work when called, "
            "not an async def*",
            "E  *OpprofUsageError: an assertion inside opprof.run()'s fn would check a capture that has not ended "
            "(or an earlier one); assert after run()",
        ]
    )
    assert (pytester.path / "modules.txt").read_text() == "no torch"


def test_slips_with_big_values_fail_in_one_short_line(pytester):
    """The likeliest slips quote the value in one short line, however big it is: fn's result passed
    instead of fn (a tensor), a huge list as fn or as a count, a tensor as a marker value; fn with
    a required `steps` parameter says that opprof took the keyword, not Python's TypeError."""
    pytester.makepyfile(
        """
        import pytest
        import torch

        model = torch.nn.Linear(4, 4)
        x = torch.ones(2, 4)

        def test_result_instead_of_fn(opprof):
            opprof.run(model(x))

        def test_huge_list(opprof):
            opprof.run(list(range(100000)))

        def test_huge_count(opprof):
            opprof.assert_op_count("aten::mm", {"a": list(range(100000))})

        def test_fn_with_own_steps(opprof):
            def fn(x, steps):
                return x
            opprof.run(fn, x, steps=2)
        """
    )
    for flags in ((), ("--opprof",)):
        result = run(pytester, "-rf", *flags)
        result.assert_outcomes(failed=4)
        result.stdout.fnmatch_lines_random(
            [
                "E  *OpprofUsageError: fn=<tensor of shape (2, 4)>: expected a callable (a model, a function): pass "
                "it and its arguments, run(fn, *args), not what a call of it returned",
                "E  *OpprofUsageError: fn=?0, 1, 2, 3, 4, 5, ...?: expected a callable*",  # ? for [ and ]
                "E  *OpprofUsageError: n={'a': ?0, 1, 2, 3, 4, 5, ...?}: expected a whole number >= 0",
                "E  *OpprofUsageError: fn's parameter 'steps' has no value: opprof takes the keyword steps= for "
                "itself (the number of profiled calls); pass fn's own through a lambda: "
                "run(lambda: fn(..., steps=...), steps=...)",
            ]
        )
        assert "tensor([[" not in result.stdout.str()
        assert max(len(line) for line in result.stdout.lines) < 400
    pytester.makepyfile(
        """
        import pytest
        import torch

        @pytest.mark.opprof(tolerance=torch.ones(20, 20))
        def test_marker(opprof):
            pass
        """
    )
    result = run(pytester, "--opprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*@pytest.mark.opprof(tolerance=<tensor of shape (20, 20)>): expected*"])
    assert "tensor([[" not in result.stderr.str()


def test_a_second_capture_replaces_the_first_and_says_so(project, tmp_path):
    """Two run()s in one test: an assertion checks the latest (its failure says so), and the
    summary says the table and baseline hold the last; an assertion inside a capture block is
    refused (it would check an earlier capture, or none)."""
    project.makepyfile(
        test_two="""
        import torch
        from conftest import infer
        def test_two(opprof, mlp):
            opprof.run(infer, *mlp, steps=2)
            opprof.assert_op_count("aten::addmm", 2)
            opprof.run(lambda: torch.ones(3) + 1, steps=2)
            opprof.assert_op_count("aten::addmm", 2)

        def test_inside(opprof, mlp):
            opprof.run(infer, *mlp, steps=2)
            with opprof.capture():
                infer(*mlp)
                opprof.assert_op_count("aten::addmm", 2)
        """
    )
    result = run(project, "--opprof", "-rf", f"--opprof-json={tmp_path / 'r.json'}")
    result.assert_outcomes(failed=2)
    tests = json.loads((tmp_path / "r.json").read_text())["tests"]
    assert {t["nodeid"].split("::")[1]: t["captures"] for t in tests} == {"test_inside": 1, "test_two": 2}
    result.stdout.fnmatch_lines_random(
        [
            "E  *aten::addmm: *(checked on the latest of 2 captures)",
            f"E  *OpprofUsageError: {assertion_inside_capture()}",
            "test_two.py::test_two: 2 captures in one test: its report holds the last; the earlier ones were "
            "checked only by the assertions made right after them (a test of its own keeps each)",
        ]
    )


def test_a_block_that_cannot_start_leaves_the_fixture_usable(project):
    """`with opprof.capture():` inside the test's own profiler cannot start; the fixture is not
    left "inside a capture" (a review's find: every later run() was refused as nested)."""
    project.makepyfile(
        test_s="""
        import pytest, torch
        from pytest_opprof import CaptureError
        def test_after_a_failed_block(opprof):
            with torch.profiler.profile():
                with pytest.raises(CaptureError, match="already running"):
                    with opprof.capture():
                        pass
            opprof.run(torch.mm, torch.ones(4, 4), torch.ones(4, 4), warmup=1, steps=2)
            opprof.assert_op_count("aten::mm", 1)
        """
    )
    run(project, "--opprof").assert_outcomes(passed=1)


def test_nested_captures_are_refused_in_one_line(project):
    """capture() in capture(), and run() in capture(): one line at the test's own line, naming
    the nesting (not torch's 'a profiler is already running', which blames another profiler)."""
    project.makepyfile(
        test_n="""
        from conftest import infer
        def test_capture_in_capture(opprof, mlp):
            with opprof.capture():
                with opprof.capture():
                    infer(*mlp)

        def test_run_in_capture(opprof, mlp):
            with opprof.capture():
                opprof.run(infer, *mlp, steps=2)

        def test_run_in_run(opprof, mlp):
            opprof.run(lambda: opprof.run(infer, *mlp, steps=2), steps=2)

        def test_capture_in_run(opprof, mlp):
            def step():
                with opprof.capture():
                    infer(*mlp)
            opprof.run(step, steps=2)
        """
    )
    result = run(project, "--opprof", "-rf")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines_random(
        [
            "E  *OpprofUsageError: opprof.capture() inside `with opprof.capture():`: captures cannot nest*",
            "E  *OpprofUsageError: opprof.run() inside `with opprof.capture():`: captures cannot nest*",
            "E  *OpprofUsageError: opprof.run() inside opprof.run()'s fn: captures cannot nest*",
            "E  *OpprofUsageError: opprof.capture() inside opprof.run()'s fn: captures cannot nest*",
        ]
    )
    out = result.stdout.str()
    assert "already running" not in out and "pytest_opprof/capture.py" not in out and "fixture.py" not in out


def test_a_capture_inside_the_users_own_profiler_fails_at_the_tests_line(project):
    """opprof.capture() or run() inside the test's own torch.profiler.profile(): one error at the
    test's line (a trial's showed two frames of capture.py before it)."""
    project.makepyfile(
        test_p="""
        import torch
        from conftest import infer
        def test_capture(opprof, mlp):
            with torch.profiler.profile():
                with opprof.capture():
                    infer(*mlp)

        def test_run(opprof, mlp):
            with torch.profiler.profile():
                opprof.run(infer, *mlp, steps=2)
        """
    )
    result = run(project, "--opprof")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["E  *CaptureError: a torch profiler is already running*"])
    out = result.stdout.str()
    assert "pytest_opprof/capture.py" not in out and "fixture.py" not in out, out


def test_assertions_skipped_on_an_untrusted_capture_keep_the_test_an_error(project):
    """Assertions made after an untrusted capture were not checked: a trusted capture after it
    does not turn the test into a pass (a trial's test passed with `assert_op_count("aten::mm", 5)`
    never checked)."""
    project.makepyfile(
        test_u="""
        import torch
        def test_untrusted_then_good(opprof):
            opprof.run(lambda: None, warmup=0, steps=2)
            opprof.assert_op_count("aten::mm", 5)
            with opprof.capture():
                torch.mm(torch.ones(4, 4), torch.ones(4, 4))
            opprof.assert_op_count("aten::mm", 1)

        def test_untrusted_without_assertions_then_good(opprof):
            opprof.run(lambda: None, warmup=0, steps=2)
            with opprof.capture():
                torch.mm(torch.ones(4, 4), torch.ones(4, 4))
            opprof.assert_op_count("aten::mm", 1)
        """
    )
    result = run(project, "--opprof")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at call of test_untrusted_then_good*",
            "opprof: capture 1 of this test cannot be trusted, so the assertions made after it were not checked: "
            "events: no operator*",
        ]
    )


def test_assertions_made_before_a_capture_of_the_tests_own_are_refused(project):
    """An assertion made during the whole-call capture is about the code before it; run() or
    capture() after it ends that capture, and the assertion would check the code after: the test
    fails naming the assertion's line (it passed, checked on an unrelated run())."""
    project.makepyfile(
        test_b="""
        import torch
        def test_before_run(opprof):
            x = torch.ones(8, 8)
            x.clone()
            opprof.assert_no_op("aten::clone")
            opprof.run(torch.mm, x, x, warmup=1, steps=3)

        def test_before_block(opprof):
            x = torch.ones(8, 8)
            opprof.assert_op_count("aten::mm", 4)
            with opprof.capture():
                torch.mm(x, x)
        """
    )
    result = run(project, "--opprof", "-rf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "E  *OpprofUsageError: 1 assertion made before opprof.run() (test_b.py:5) had no capture of the code "
            "before to check: the whole-call capture ends where opprof.run() starts*",
            "E  *OpprofUsageError: 1 assertion made before `with opprof.capture():` (test_b.py:10) had no capture*",
        ]
    )


def test_a_capture_block_entered_twice_captures_twice_and_fn_is_positional_only(project):
    """One `opprof.capture()` object used in two `with` statements captures each block (it raised
    contextlib's AttributeError); `run(f, fn=...)` passes `fn` on to f (it was "multiple values")."""
    project.makepyfile(
        test_r="""
        import torch
        def test_block_twice(opprof):
            block = opprof.capture()
            with block:
                torch.mm(torch.ones(4, 4), torch.ones(4, 4))
            opprof.assert_op_count("aten::mm", 1)
            with block:
                torch.ones(4).add_(1)
            opprof.assert_op_count("aten::add_", 1)
            opprof.assert_no_op("aten::mm")
            assert opprof.captures == 2

        def test_fn_keyword(opprof):
            assert opprof.run(lambda fn: torch.mm(fn, fn), fn=torch.ones(2, 2), warmup=0, steps=2).sum() == 8
        """
    )
    run(project, "--opprof").assert_outcomes(passed=2)


def test_no_summary_line_without_operator_checks(pytester):
    """Off, and no test uses opprof: nothing is printed about it."""
    pytester.makepyfile("def test_x(): pass")
    result = run(pytester)
    assert "operator checks" not in result.stdout.str()


# -- the marker -------------------------------------------------------------------------------


def test_marker_is_registered_for_strict_markers(project):
    """@pytest.mark.opprof passes --strict-markers."""
    project.makepyfile("import pytest\n@pytest.mark.opprof\ndef test_x(): pass")
    run(project, "--strict-markers").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("opprof(tolerence='20%')", "got an unknown keyword 'tolerence'"),
        ("opprof(5)", "takes keyword arguments only, got (5,)"),
    ],
)
def test_bad_marker_arguments_are_errors(project, marker, message):
    """A misspelt or positional marker argument is a usage error naming it, at collection."""
    project.makepyfile(f"import pytest\n@pytest.mark.{marker}\ndef test_x(): pass")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_bad_marker_arguments_are_errors.py::test_x: @pytest.mark.opprof {message}*"])


def test_every_bad_marker_is_named_at_once(project):
    """Five bad markers were five runs, each naming the next one; now one run names them all."""
    project.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.opprof(tolerence="20%")
        def test_a(): pass

        @pytest.mark.opprof("structure")
        def test_b(): pass

        @pytest.mark.opprof(tolerance="20%")
        def test_fine(): pass

        @pytest.mark.opprof(tolerance=0.5)
        def test_c(): pass
        """
    )
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_m.py::test_a: @pytest.mark.opprof got an unknown keyword 'tolerence'; *",
            "test_m.py::test_b: @pytest.mark.opprof takes keyword arguments only, got ('structure',)",
            "test_m.py::test_c: @pytest.mark.opprof(tolerance=0.5): *",
        ]
    )
    assert "test_fine" not in result.stderr.str()


def test_markers_not_read_are_checked_and_two_on_one_level_are_refused(project):
    """A trial's typo in a class's marker, shadowed by the method's own, passed, as did two
    markers stacked on one function (only one was read): every opprof marker is checked, and two
    on one level are a usage error."""
    project.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.opprof(tolerence="20%")
        class TestShadowed:
            @pytest.mark.opprof(tolerance="20%")
            def test_a(self): pass

        @pytest.mark.opprof(fail_on="none")
        @pytest.mark.opprof(tolerance="50%")
        def test_stacked(): pass

        @pytest.mark.opprof(tolerance="20%")
        def test_fine(): pass
        """
    )
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_m.py::TestShadowed::test_a: @pytest.mark.opprof got an unknown keyword 'tolerence'; *",
            f"{markers_stacked('test_m.py::test_stacked', 2, 'function')}",
        ]
    )
    assert "test_fine" not in result.stderr.str()


def test_a_parameter_sets_marker_overrides_the_functions(pytester, monkeypatch):
    """`pytest.param(..., marks=pytest.mark.opprof(fail_on="none"))` loosens one case: it is read
    before the function's marker (a trial's was dropped, and the case failed on structure)."""
    monkeypatch.delenv("OPPROF_INJECT", raising=False)
    pytester.makepyfile(
        test_p="""
        import os
        import pytest
        import torch

        @pytest.mark.opprof(tolerance="50%")
        @pytest.mark.parametrize("n", [pytest.param(2, marks=pytest.mark.opprof(fail_on="none"), id="lenient"), 3])
        def test_param(opprof, n):
            def step():
                y = torch.ones(n, n) @ torch.ones(n, n)
                return y * 2 if os.environ.get("OPPROF_INJECT") else y
            opprof.run(step, warmup=1, steps=2)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("OPPROF_INJECT", "extra")
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_p.py::test_param[[]3[]] - *structure changed*"])
    # the passing case's line says so (a trial read `structure changed` beside a pass as its failure)
    out = result.stdout.str()
    assert "test_p.py::test_param[lenient]: structure changed: + aten::mul (1/step, called from Python; " in out
    lenient = next(line for line in out.splitlines() if line.startswith("test_p.py::test_param[lenient]: structure"))
    assert lenient.endswith(f"; {NOT_FAILING}")
    failing = next(line for line in out.splitlines() if line.startswith("test_p.py::test_param[3]: structure"))
    assert NOT_FAILING not in failing


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]])
def test_a_work_change_that_fails_no_test_says_so(pytester, monkeypatch, tmp_path, xdist):
    """--opprof-fail-on=structure: a work change is shown and the test passes; its line says the
    change does not fail the test, in the terminal and (as the kinds that do) in the JSON report,
    also from an xdist worker; a recording run's line says it was recorded, not that."""
    monkeypatch.setenv("OPPROF_N", "4")
    pytester.makepyfile(
        test_w="""
        import os
        import torch

        def test_work(opprof):
            n = int(os.environ["OPPROF_N"])
            opprof.run(lambda: torch.ones(n, n) @ torch.ones(n, n), warmup=1, steps=2)
        """
    )
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_N", "8")
    out = tmp_path / "r.json"
    page = tmp_path / "r.html"
    flags = ("--opprof-fail-on=structure", f"--opprof-json={out}", f"--opprof-html={page}")
    result = run(pytester, "--opprof", *flags, *xdist)
    result.assert_outcomes(passed=1)
    line = next(x for x in result.stdout.str().splitlines() if x.startswith("test_w.py::test_work: work changed"))
    assert line.endswith(f"; {NOT_FAILING}")
    (item,) = [i for i in page.read_text().split("<li>")[1:] if i.startswith("work changed: aten::mm: 8x the FLOPs")]
    assert f"; {html.escape(NOT_FAILING)}" in item.split("</li>")[0]
    (test,) = json.loads(out.read_text())["tests"]
    assert test["baseline"]["fails"] == ["structure"]
    assert test["baseline"]["time_fails"] is False
    result = run(pytester, "--opprof", f"--opprof-json={out}", f"--opprof-html={page}", *xdist)  # work fails it
    result.assert_outcomes(failed=1)
    assert NOT_FAILING not in result.stdout.str()
    assert html.escape(NOT_FAILING) not in page.read_text()
    assert json.loads(out.read_text())["tests"][0]["baseline"]["fails"] == ["structure", "time", "work"]
    result = run(pytester, "--opprof-update-baseline", "--opprof-fail-on=none", *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_w.py::test_work: recorded: work changed*"])
    assert NOT_FAILING not in result.stdout.str()


def test_bad_markers_past_twenty_are_counted_not_listed(project):
    """A file of bad markers (a renamed keyword everywhere) gives 20 lines and a count, not hundreds."""
    tests = "".join(f"@pytest.mark.opprof(tolerence='20%')\ndef test_{i}(): pass\n" for i in range(25))
    project.makepyfile(test_m="import pytest\n" + tests)
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.str().count("got an unknown keyword 'tolerence'") == 20
    result.stderr.fnmatch_lines(["... and 5 more bad markers"])


@pytest.mark.parametrize("flags", [[], ["--opprof"]])
def test_a_bad_marker_under_xdist_is_that_tests_error_not_an_internal_error(project, flags):
    """xdist workers collect, and cannot stop the run: there a bad marker makes its test an
    error with the same one line (the other tests run), never an INTERNALERROR."""
    project.makepyfile(
        test_m="import pytest\n@pytest.mark.opprof(bogus=1)\ndef test_bad(): pass\ndef test_ok(): pass\n"
    )
    result = run(project, "-n", "1", *flags)
    result.assert_outcomes(passed=1, errors=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        ["test_m.py::test_bad: @pytest.mark.opprof got an unknown keyword 'bogus'; it takes: fail_on, *"]
    )


def test_marked_test_is_measured_without_the_fixture(project, tmp_path):
    """A marked test without the fixture is measured as one whole-call step."""
    project.makepyfile(
        """
        import pytest
        import torch

        @pytest.mark.opprof
        def test_marked():
            torch.ones(3).add(1).mul(2)
        """
    )
    out = tmp_path / "run.json"
    run(project, "--opprof", f"--opprof-json={out}").assert_outcomes(passed=1)
    (test,) = json.loads(out.read_text())["tests"]
    ops = {o["name"]: o["per_step"]["calls"]["samples"] for o in test["profile"]["ops"]}
    assert ops["aten::add"] == [1] and ops["aten::mul"] == [1]
    assert test["profile"]["steps"] == 1
