"""End to end: pytest runs of a user project with our flags, asserting outcomes and output."""

from __future__ import annotations

import gzip
import html
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from fnmatch import fnmatch
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fake_clock import WORKER_FAKE_CLOCK  # noqa: E402

from pytest_opprof import device  # noqa: E402
from pytest_opprof.cli import main as cli_main  # noqa: E402
from pytest_opprof.device import python_tracer, thread_setup  # noqa: E402
from pytest_opprof.errors import (  # noqa: E402
    NOT_FAILING,
    assertion_inside_capture,
    cut_short_trace,
    inert_summary,
    markers_stacked,
)

USER_CONFTEST = (
    """
import pytest
import torch


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    return model, torch.randn(4, 32)


def infer(model, x):
    with torch.no_grad():
        return model(x)
"""
    + WORKER_FAKE_CLOCK
)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(USER_CONFTEST)
    return pytester


@pytest.fixture(autouse=True)
def _deterministic(fake_clock, monkeypatch):
    """Every capture in these runs is timed by the fake clock: no test here reads real time, also
    in the xdist workers of a run under `-n` (its conftest, USER_CONFTEST, installs the clock
    there; a worker's real timing once failed the CSV test's baseline on its step wall)."""
    monkeypatch.setenv("OPPROF_FAKE_CLOCK_DIR", str(Path(__file__).parent))
    monkeypatch.setenv("OPPROF_FAKE_CLOCK_OUTER_RUN", os.environ.get("PYTEST_XDIST_TESTRUNUID", ""))
    return fake_clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def _run_kept(line: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs the `opprof mv` of a `keep its baseline:` line as written, from `cwd`."""
    argv = shlex.split(line.split("keep its baseline: ", 1)[1])
    assert argv[:2] == ["opprof", "mv"]
    with monkeypatch.context() as m:
        m.chdir(cwd)
        assert cli_main(argv[1:]) == 0


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
    plugin = importlib.import_module("pytest_opprof.plugin")
    calls = []
    monkeypatch.setattr(plugin, "warm_profiler", lambda: calls.append("warmed"))
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
    assert len(calls) == warmed


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
    assert "test_p.py::test_param[lenient]: structure changed: + aten::mul (1/step), " in out
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


# -- the three capture modes and the assertions -----------------------------------------------

USER_TESTS = """
import pytest
import torch
from conftest import infer


def test_run_mode(opprof, mlp):
    model, x = mlp
    y = opprof.run(infer, model, x, warmup=1, steps=4)
    assert y.shape == (4, 8)
    assert opprof.profile.steps == 4
    opprof.assert_op_count("aten::addmm", 2)
    opprof.assert_op_count("aten::*mm", min=1, max=2)
    opprof.assert_op_below("aten::addmm", ms=1000)
    opprof.assert_op_below("aten::addmm", ms=1000, per="call", stat="max")
    opprof.assert_no_op("aten::conv2d")
    opprof.assert_no_op("aten::conv*")
    opprof.assert_no_sync()
    opprof.assert_total_below(ms=1000)


def test_capture_mode(opprof, mlp):
    model, x = mlp
    with opprof.capture():
        infer(model, x)
        infer(model, x)
    assert opprof.profile.steps == 1
    opprof.assert_op_count("aten::addmm", 4)


def test_whole_call_mode(opprof, mlp):
    opprof.assert_op_count("aten::relu", 2)  # deferred: checked when the body returns
    model, x = mlp
    infer(model, x)
    infer(model, x)


def test_latest_capture_wins(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=0, steps=2)
    with opprof.capture():
        torch.ones(2).sum()
    opprof.assert_no_op("aten::addmm")


def test_fail_below(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=3)
    opprof.assert_op_below("aten::addmm", ms=0)


def test_fail_count(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=3)
    opprof.assert_op_count("aten::addmm", 3)


def test_fail_count_range(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=3)
    opprof.assert_op_count("aten::relu", min=2)


def test_fail_no_op(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=2)
    opprof.assert_no_op("aten::add*")


def test_fail_unknown_op(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=2)
    opprof.assert_no_op("aten::copyy_")


def test_fail_no_sync(opprof, mlp):
    model, x = mlp
    opprof.run(lambda: infer(model, x).sum().item(), warmup=1, steps=2)
    opprof.assert_no_sync()


def test_fail_total(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=2)
    opprof.assert_total_below(ms=0)


def test_fail_typo(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=2)
    opprof.assert_op_below("aten::adddmm", ms=5)


def test_fail_deferred(opprof, mlp):
    opprof.assert_op_count("aten::relu", 5)
    model, x = mlp
    infer(model, x)


def test_fail_bad_argument(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=2)
    opprof.assert_op_below("aten::addmm", ms=-1)


def test_fail_bad_steps(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, steps=0)


def test_error_nothing_measured(opprof):
    pass
"""


@pytest.fixture
def user_run(project, tmp_path_factory):
    """The user project above, run once with --opprof and a JSON report."""
    project.makepyfile(test_user=USER_TESTS)
    out = tmp_path_factory.mktemp("report") / "run.json"
    result = run(project, "--opprof", f"--opprof-json={out}", "-rA")
    return result, json.loads(out.read_text())


def test_user_project_outcomes(user_run):
    """Every capture mode and assertion gives exactly the expected outcome."""
    result, _ = user_run
    result.assert_outcomes(passed=4, failed=11, errors=1)  # the error is not also counted as a pass
    for name in ["test_run_mode", "test_capture_mode", "test_whole_call_mode", "test_latest_capture_wins"]:
        result.stdout.fnmatch_lines([f"PASSED test_user.py::{name}"])


EXPECTED_MESSAGES = {
    "test_fail_below": "*aten::addmm: *.* ms/step > limit 0.00 ms (median of 3 steps; min *.*, max *.*)",
    "test_fail_count": "*aten::addmm: 2 calls/step, expected 3 (per step: 2, 2, 2; in aten::linear; inputs float[[]64], float[[]4,32], float[[]32,64] (+1 other signature))",
    "test_fail_count_range": "*aten::relu: 1 calls/step, expected at least 2 (per step: 1, 1, 1; called from Python; inputs float[[]4,64])",
    "test_fail_no_op": "*aten::add*: expected no calls, found aten::addmm (2/step, in aten::linear; inputs float[[]*], float[[]*], float[[]*] (+1 other signature))",
    "test_fail_unknown_op": "*aten::copyy_: not an operator torch knows*did you mean aten::copy_?",
    "test_fail_no_sync": "*host-device syncs: aten::item (1/step, called from Python), aten::_local_scalar_dense (1/step, "
    "in aten::item); a CPU-only capture: these reads wait for no device here, *",
    "test_fail_total": "*total: *.* ms/step > limit 0.00 ms (median of 2 steps*",
    "test_fail_typo": "*aten::adddmm: no op of that name ran in the measured code; closest: aten::addmm*",
    # made in the body of a whole-call capture, checked when it returns: it names its line
    "test_fail_deferred": "test_user.py:*: aten::relu: 1 calls/step, expected 5 (per step: 1; called from Python; inputs float[[]4,64])",
    "test_fail_bad_argument": "*OpprofUsageError: ms=-1: expected a finite number of milliseconds >= 0",
    "test_fail_bad_steps": "*OpprofUsageError: steps=0: expected a whole number >= 1",
}


def test_a_typo_of_an_op_of_another_namespace_that_ran_fails_assert_no_op(pytester):
    """A trial's `assert_no_op("quantized::linear_dynamc")` passed beside the
    `quantized::linear_dynamic` it meant: where an op of the namespace ran, the name is checked as
    an aten name is. A namespace none of whose ops ran (a label's) cannot be checked."""
    pytester.makepyfile(
        test_q="""
        import torch

        model = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(8, 8)), dtype=torch.qint8)
        x = torch.randn(2, 8)

        def test_typo(opprof):
            opprof.run(model, x, warmup=1, steps=2)
            opprof.assert_no_op("quantized::linear_dynamc")

        def test_label(opprof):
            opprof.run(model, x, warmup=1, steps=2)
            opprof.assert_no_op("my_lib::never_ran")
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*quantized::linear_dynamc: not an operator torch knows*did you mean quantized::linear_dynamic?*"]
    )


def test_failure_messages(user_run):
    """Each failing assertion fails its own test with its one clear message."""
    result, _ = user_run
    out = result.stdout.str()
    for test, line in EXPECTED_MESSAGES.items():
        section = out.split(f"_ {test} _", 1)[1].split("\n_", 1)[0]
        assert any(fnmatch(s, line) for s in section.splitlines()), f"{test}:\n{section}"
        result.stdout.fnmatch_lines([f"FAILED test_user.py::{test} - *"])
    lines = USER_TESTS.strip("\n").splitlines()  # makepyfile dedents and strips the text
    deferred = 1 + next(i for i, line in enumerate(lines) if 'assert_op_count("aten::relu", 5)' in line)
    assert f"test_user.py:{deferred}: aten::relu: 1 calls/step, expected 5" in out


def test_an_absence_asserted_with_a_slip_fails_through_the_plugin(pytester):
    """A trial's assert_no_op("ATEN::ADDMM"), ("addmm"), ("aten::*MM") and assert_op_count("Aten::addmm", 0)
    passed beside aten::addmm, with --opprof and without: each now fails naming the op it meant."""
    pytester.makepyfile(
        test_slip="""
        import pytest, torch

        @pytest.mark.parametrize("name", ["ATEN::ADDMM", "addmm", "aten::*MM", "aten ::addmm"])
        def test_no_op(opprof, name):
            opprof.run(torch.nn.Linear(8, 8), torch.randn(4, 8), warmup=1, steps=2)
            opprof.assert_no_op(name)

        def test_count(opprof):
            opprof.run(torch.nn.Linear(8, 8), torch.randn(4, 8), warmup=1, steps=2)
            opprof.assert_op_count("Aten::addmm", 0)
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=5)
    for name in ("ATEN::ADDMM", "addmm", "aten::[*]MM", "aten ::addmm"):
        result.stdout.fnmatch_lines([f"E *{name}: no op of exactly that name ran, but aten::addmm did *"])
    result.stdout.fnmatch_lines(["E *Aten::addmm: no op of exactly that name ran, but aten::addmm did *zero calls*"])
    plain = run(pytester)  # without --opprof, torch's namespace in another case or spaced is refused at once
    plain.assert_outcomes(passed=1, failed=4)
    for name in ("ATEN::ADDMM", "aten ::addmm", "Aten::addmm"):
        plain.stdout.fnmatch_lines(
            [f"E *OpprofUsageError: {name}: not an operator torch knows; did you mean aten::addmm*"]
        )
    # and a glob matching none of aten's ops (a plain run cannot see which ran: no case hint)
    plain.stdout.fnmatch_lines(["E *OpprofUsageError: aten::[*]MM: matches no operator torch knows; did you mean *"])


def test_error_is_reported_as_error_not_pass(user_run):
    """An untrusted measurement is an error, not a pass; the JSON says error."""
    result, report = user_run
    result.stdout.fnmatch_lines(["ERROR test_user.py::test_error_nothing_measured - opprof: the measurement*"])
    assert "PASSED test_user.py::test_error_nothing_measured" not in result.stdout.str()
    outcomes = {t["nodeid"].split("::")[1]: t["outcome"] for t in report["tests"]}
    assert outcomes["test_error_nothing_measured"] == "error"
    assert outcomes["test_run_mode"] == "passed"
    assert outcomes["test_fail_count"] == "failed"


def test_a_capture_that_ran_no_op_says_which_and_the_fix(pytester):
    """A trial's `run(lambda: (i for i in ...))` and an assertion in a body that ran nothing both
    erred with `nothing ran under the profiler` alone: the error now says which capture ran no
    op and what to do."""
    pytester.makepyfile(
        test_empty="""
        def test_generator(opprof):
            opprof.run(lambda: (i for i in range(3)), steps=4)

        def test_block(opprof):
            with opprof.capture():
                pass

        def test_body(opprof):
            opprof.assert_op_count("aten::mm", 5)

        def test_thread(opprof):  # a trial's model ran in a thread of fn's: no op recorded either
            import threading, torch

            def in_thread():
                t = threading.Thread(target=lambda: torch.mm(torch.ones(2, 2), torch.ones(2, 2)))
                t.start()
                t.join()

            opprof.run(in_thread, steps=2)
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines_random(
        [
            "opprof: the measurement cannot be trusted, * nothing ran under the profiler; opprof.run()'s fn "
            "(test_generator.<locals>.<lambda>) ran no torch operator in its 4 profiled steps: it returned a "
            "generator, whose work had not run; make fn do the work: pass lambda: list(fn(...))",
            "opprof: the measurement cannot be trusted, * opprof.run()'s fn (test_thread.<locals>.in_thread) ran no "
            "torch operator in its 2 profiled steps: *nor hand it to another thread or process (threading, a pool, "
            "multiprocessing, mp.spawn: *",
            "opprof: the measurement cannot be trusted, * nothing ran under the profiler; the `with opprof.capture():` "
            "block ran no torch operator: put the model's call inside it, on the test's own thread (the profiler "
            "records that thread: a model run in another thread or process is not seen)",
            "opprof: the measurement cannot be trusted, * nothing ran under the profiler; the test's body ran no torch "
            "operator, and called neither opprof.run() nor opprof.capture(): measure the model with opprof.run(fn, *args) "
            "(the profiler records the test's own thread: a model run in another thread or process is not seen), "
            "or where the test has nothing to measure (no GPU, say) call pytest.skip(reason) instead of returning",
        ]
    )


def test_a_body_that_ran_nothing_names_the_fixture_that_asked_for_opprof(pytester):
    """A conftest's autouse fixture that takes `opprof` measures every test in its scope: a
    trial's torch-free tests erred with `the test's body ran no torch operator`, which did not
    say why they were measured at all. The error names the fixture; a test asking for opprof
    itself keeps the plain message."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(autouse=True)
        def profiled(opprof):
            yield opprof
        """
    )
    pytester.makepyfile(test_a="def test_config():\n    assert 1 + 1 == 2\n")
    result = run(pytester, "--opprof")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*the test's body ran no torch operator, and called neither opprof.run() nor opprof.capture(); the test does "
         "not ask for opprof itself, its fixture 'profiled' does, so the test is measured: ask for opprof in the tests "
         "that measure (not in an autouse fixture), or call pytest.skip(reason) in this one"]
    )  # fmt: skip


def test_a_time_in_another_unit_and_a_missing_fn_get_the_call_that_works(pytester, monkeypatch):
    """An audit's `assert_op_below(op, s=0.002)` was told `did you mean ms=0.002?`, a limit 1000x
    too tight; `opprof.run()` and `run(fn=model)` raised Python's bare TypeError; a method of no
    arguments said `(it takes )`; `opprof.capture(steps=3)` raised a TypeError. Each is one
    usage error with the call that works, with or without --opprof."""
    monkeypatch.setenv("COLUMNS", "1000")
    pytester.makepyfile(
        test_kw="""
        import torch
        from pytest_opprof import measure

        def test_seconds(opprof):
            opprof.assert_op_below("aten::mm", s=0.002)

        def test_microseconds(opprof):
            opprof.assert_total_below(us=200)

        def test_no_fn(opprof):
            opprof.run()

        def test_fn_keyword(opprof):
            opprof.run(fn=torch.nn.Linear(2, 2))

        def test_measure_no_fn():
            measure(fn=torch.nn.Linear(2, 2))

        def test_no_arguments(opprof):
            opprof.assert_no_sync("aten::item")

        def test_capture_steps(opprof):
            with opprof.capture(steps=3):
                pass
        """
    )
    for flags in ([], ["--opprof"]):
        result = run(pytester, *flags)
        result.assert_outcomes(failed=7)
        result.stdout.fnmatch_lines_random(
            [
                "E *OpprofUsageError: opprof.assert_op_below() takes no keyword 's'; did you mean ms=2 (s=0.002)? *",
                "E *OpprofUsageError: opprof.assert_total_below() takes no keyword 'us'; did you mean ms=0.2 (us=200)? *",
                "E *OpprofUsageError: opprof.run() takes the function to profile as its first argument, positionally: "
                "opprof.run(model, x, warmup=3, steps=10) profiles model(x)",
                "E *OpprofUsageError: opprof.run() takes the function to profile as its first argument, positionally "
                "(a keyword fn= goes to that function, *",
                "E *OpprofUsageError: measure() takes the function to profile as its first argument, positionally (*",
                "E *OpprofUsageError: opprof.assert_no_sync(): too many positional arguments (it takes no arguments)",
                "E *OpprofUsageError: opprof.capture() takes no keyword 'steps' (it takes no arguments: `with "
                "opprof.capture():` profiles its block as one step; *",
            ]
        )
        assert "TypeError" not in result.stdout.str()


def test_an_assertions_wrong_keyword_is_a_usage_error_naming_what_it_takes(pytester, monkeypatch):
    """A trial's `assert_op_below(op, limit=100)`, `assert_total_below(ms=100, per="call")` and
    `assert_op_count(op, count=1)` raised Python's bare TypeError, with no fix: each is now a
    usage error naming the keyword, the one it looks like, and what the method takes, with or
    without --opprof. `limit` and `count`, the README's examples, named no keyword (an audit): the
    words a user reaches for now name the parameter (ms, n, min_pct)."""
    monkeypatch.setenv("COLUMNS", "1000")
    pytester.makepyfile(
        test_kw="""
        import torch

        def test_limit(opprof):
            opprof.assert_op_below("aten::mm", limit=100)

        def test_mss(opprof):
            opprof.assert_op_below("aten::mm", mss=100)

        def test_per(opprof):
            opprof.assert_total_below(ms=100, per="call")

        def test_mni(opprof):
            opprof.assert_kernel_count("*gemm*", mni=1)

        def test_count(opprof):
            opprof.assert_op_count("aten::mm", count=1)

        def test_percent(opprof):
            opprof.assert_overlap(percent=50)

        def test_percent_is_no_per(opprof):
            opprof.assert_op_below("aten::mm", 2, percent=50)

        def test_max_ms_is_no_max(opprof):
            opprof.assert_op_count("aten::mm", max_ms=2)

        def test_op_of_a_kernel(opprof):
            opprof.assert_kernel_count(op="*gemm*", n=1)

        def test_limit_beside_ms(opprof):
            opprof.assert_op_below("aten::mm", 2, limit=3)

        def test_threshold(opprof):
            opprof.assert_device_busy_above(threshold=50)

        def test_missing(opprof):
            opprof.assert_op_below("aten::mm")

        def test_extra(opprof):
            opprof.assert_no_op("aten::mm", 3)
        """
    )
    for flags in ([], ["--opprof"]):
        result = run(pytester, *flags)
        result.assert_outcomes(failed=13)
        result.stdout.fnmatch_lines_random(
            [
                "E *OpprofUsageError: opprof.assert_op_below() takes no keyword 'limit'; did you mean ms=100? "
                "(it takes op, ms, per='step', stat='median')",
                "E *OpprofUsageError: opprof.assert_op_count() takes no keyword 'count'; did you mean n=1? (it takes *)",
                "E *OpprofUsageError: opprof.assert_overlap() takes no keyword 'percent'; did you mean min_pct=50? *",
                "E *OpprofUsageError: opprof.assert_op_below() takes no keyword 'percent' (it takes *)",
                "E *OpprofUsageError: opprof.assert_op_count() takes no keyword 'max_ms' (it takes *)",
                "E *OpprofUsageError: opprof.assert_kernel_count() takes no keyword 'op'; did you mean kernel='*gemm*'? *",
                "E *OpprofUsageError: opprof.assert_op_below() takes no keyword 'limit' (it takes *)",
                "E *OpprofUsageError: opprof.assert_device_busy_above() takes no keyword 'threshold'; did you mean pct=50? *",
                "E *OpprofUsageError: opprof.assert_op_below() takes no keyword 'mss'; did you mean ms=100? (it takes *)",
                "E *OpprofUsageError: opprof.assert_total_below() takes no keyword 'per' (it takes ms, stat='median')",
                "E *OpprofUsageError: opprof.assert_kernel_count() takes no keyword 'mni'; did you mean min=1? "
                "(it takes kernel, n=None, *, min=None, max=None)",
                "E *OpprofUsageError: opprof.assert_op_below(): missing a required argument: 'ms' (it takes *)",
                "E *OpprofUsageError: opprof.assert_no_op(): too many positional arguments (it takes op)",
            ]
        )
        assert "TypeError" not in result.stdout.str()


def test_a_torch_profiler_inside_fn_or_a_block_is_named_and_later_tests_measure(pytester, monkeypatch):
    """A trial's `with torch.profiler.profile():` inside run()'s fn stopped opprof's profiler: the
    test erred saying fn ran no torch operator, in a `1 step` header for steps=2. The inner
    profiler is now refused at its line; the whole call still steps aside for one in the body."""
    monkeypatch.setenv("COLUMNS", "1000")
    pytester.makepyfile(
        test_inner="""
        import torch

        X, W = torch.randn(16, 32), torch.randn(32, 8)

        def fn(x):
            with torch.profiler.profile():
                return x @ W

        def test_inner_run(opprof):
            opprof.run(fn, X, warmup=1, steps=2)

        def test_inner_block(opprof):
            with opprof.capture():
                fn(X)

        def test_own_profiler_in_the_body(opprof):
            fn(X)

        def test_after_run(opprof):
            opprof.run(lambda: X @ W, warmup=1, steps=2)
            opprof.assert_op_count("aten::mm", 1)
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2, failed=2)
    for name in ("test_inner_run", "test_inner_block"):
        result.stdout.fnmatch_lines(
            [f"FAILED test_inner.py::{name} - *CaptureError: a torch profiler started inside an opprof capture *"]
        )
    result.stdout.fnmatch_lines(["*warning stepped_aside: the test started a profiler of its own*"])
    assert "ran no torch operator" not in result.stdout.str() and "capture.py" not in result.stdout.str()


THREAD_TESTS = """
import threading

import torch

X, W = torch.randn(16, 32), torch.randn(32, 8)


def f(x):
    return torch.relu(x @ W)


def in_thread(call):
    raised = []

    def target():
        try:
            call()
        except Exception as exc:
            raised.append(exc)

    thread = threading.Thread(target=target, name="loader")
    thread.start()
    thread.join()
    return raised


def test_run_in_a_thread(opprof):
    raised = in_thread(lambda: opprof.run(f, X, warmup=1, steps=2))
    assert [type(e).__name__ for e in raised] == ["OpprofUsageError"], raised


def test_capture_in_a_thread_swallowed(opprof):
    def block():
        with opprof.capture():
            f(X)

    in_thread(block)  # the thread swallows the refusal: the test errs all the same


def test_profiler_in_a_thread(opprof):
    def own():
        with torch.profiler.profile():
            f(X)

    in_thread(own)  # a review: it stopped the whole-call profiler from there, as run() did
    f(X)


def test_measure_in_a_thread(opprof):
    from pytest_opprof import measure

    in_thread(lambda: measure(f, X, warmup=0, steps=2))


def test_after_run(opprof):
    opprof.run(f, X, warmup=1, steps=2)
    opprof.assert_op_count("aten::mm", 1)


def test_after_body(opprof):
    f(X)
    opprof.assert_op_count("aten::mm", 1)


def test_after_own_profiler():
    with torch.profiler.profile():
        f(X)
"""


@pytest.mark.parametrize("flag", ["--opprof", "-p no:randomly"])
def test_a_capture_begun_in_another_thread_is_refused_and_later_tests_measure(pytester, monkeypatch, flag):
    """A trial's run() and capture() from a thread of the test's stopped the whole-call profiler
    from there, which left it running on the test's thread: every later test failed, blaming
    another profiler, and the offending test passed; a review's own profiler or measure() in a
    thread did the same. All are now refused under --opprof (run() and capture() without it too),
    and the test errs, also when its thread swallows the refusal."""
    monkeypatch.setenv("COLUMNS", "1000")  # the short summary's lines whole
    pytester.makepyfile(test_thr=THREAD_TESTS)
    result = run(pytester, *flag.split())
    if flag == "--opprof":
        result.assert_outcomes(passed=3, errors=4)
        result.stdout.fnmatch_lines_random(
            [
                "ERROR test_thr.py::test_run_in_a_thread - opprof.run() called from thread loader, not the test's own*",
                *(
                    f"ERROR test_thr.py::{name} - a torch profiler started on thread loader while opprof captured the "
                    "test call on the test's own: torch runs one profiler at a time, and stopping opprof's from "
                    "another thread would leave it running into the tests after; start the profiler (or measure()) "
                    "on the test's thread"
                    for name in ("test_profiler_in_a_thread", "test_measure_in_a_thread")
                ),
                "ERROR test_thr.py::test_capture_in_a_thread_swallowed - opprof.capture() called from thread loader, "
                "not the test's own: opprof's profiler runs on the test's thread, and a capture begun on another "
                "would leave it running into the tests after; call opprof.capture() in the test's body",
            ]
        )
    else:
        result.assert_outcomes(passed=7)
    assert "already running" not in result.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]])
def test_an_untrusted_measurement_names_its_reason_in_the_short_summary(pytester, xdist):
    """`-rE` names why the measurement was untrusted, in-process and from an xdist worker (whose
    report reaches the controller with its long repr as text), on every pytest 8 and 9."""
    pytester.makepyfile(test_u="def test_nothing_measured(opprof):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof", "-rE", *xdist)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["ERROR test_u.py::test_nothing_measured - opprof: the measurement*"])


def test_json_report_has_every_measured_test_with_per_step_counts(user_run):
    """--opprof-json: device facts, and per test nodeid, outcome, profile with per-step op counts, checks."""
    _, report = user_run
    assert report["schema"] == 1
    assert report["device_key"].startswith("cpu-")
    assert report["device"]["torch"]
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    assert tests["test_fail_bad_steps"]["profile"] is None  # listed, but nothing was captured
    run_mode = tests["test_run_mode"]["profile"]
    addmm = next(o for o in run_mode["ops"] if o["name"] == "aten::addmm")
    assert addmm["per_step"]["calls"]["samples"] == [2, 2, 2, 2]
    assert tests["test_capture_mode"]["profile"]["steps"] == 1
    whole = tests["test_whole_call_mode"]["profile"]
    assert next(o for o in whole["ops"] if o["name"] == "aten::relu")["calls"] == 2
    assert all({"nodeid", "outcome", "profile", "checks", "failure"} <= t.keys() for t in report["tests"])
    assert {t["worker"] for t in report["tests"]} == {None}  # no xdist
    # why each failed, for a script (a trial's graph break showed nowhere in the JSON)
    assert tests["test_run_mode"]["failure"] is None
    assert fnmatch(tests["test_fail_typo"]["failure"], EXPECTED_MESSAGES["test_fail_typo"].replace("[[]", "["))
    assert fnmatch(
        tests["test_fail_bad_steps"]["failure"], EXPECTED_MESSAGES["test_fail_bad_steps"].replace("[[]", "[")
    )
    assert tests["test_error_nothing_measured"]["failure"].startswith("opprof: the measurement")


def test_terminal_summary_shows_top_ops(user_run):
    """The summary has, per measured test, a table of its top ops."""
    result, _ = user_run
    result.stdout.fnmatch_lines(
        [
            "*= opprof =*",
            # the fake clock's unprofiled calls take longer than its profiled steps: a disturbed cost
            "test_user.py::test_run_mode [[]passed[]] (4 steps, *.* ms/step wall, profiler cost unknown (the "
            "unprofiled calls were disturbed: x0.*))",
            "op * calls/step * ms/step * time * of step",
        ]
    )
    result.stdout.fnmatch_lines(["test_user.py::test_error_nothing_measured: error events: no operator*"])


def test_a_bad_value_in_pytest_addopts_a_later_flag_overrides_is_refused(pytester, monkeypatch):
    """PYTEST_ADDOPTS holds in the next run without the flag: its value is judged now; `--flag value`
    and `--flag=value` both."""
    pytester.makepyfile("def test_x(): pass")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--opprof-tolerance fast")
    result = run(pytester, "--opprof-tolerance=20%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--opprof-tolerance: 'fast' is not a percentage like 20% (from PYTEST_ADDOPTS, which a later *"]
    )
    monkeypatch.setenv("PYTEST_ADDOPTS", "--opprof-tolerance=30% --opprof-top 2")  # good values: no word
    assert run(pytester, "--opprof-tolerance=20%", "--opprof-top=4").ret == pytest.ExitCode.OK
    monkeypatch.setenv(
        "PYTEST_ADDOPTS",
        "--opprof-update-baseline test_a_bad_value_in_pytest_addopts_a_later_flag_overrides_is_refused.py",
    )
    assert run(pytester, "--opprof-update-baseline=all").ret == pytest.ExitCode.OK  # a test path after it: no value


def test_top_option_from_cli_and_ini(project):
    """--opprof-top and opprof_top limit the rows per test (CLI wins over ini)."""
    project.makepyfile(
        """
        from conftest import infer
        def test_x(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )

    def rows(result):
        lines = result.stdout.str().split("test_x [passed]")[1].splitlines()
        return sum(1 for line in lines[3:] if line.startswith("aten::"))

    assert rows(run(project, "--opprof", "--opprof-top", "2")) == 2
    project.makeini("[pytest]\nopprof = true\nopprof_top = 3\n")
    assert rows(run(project)) == 3
    assert rows(run(project, "--opprof-top", "1")) == 1
    # given twice (addopts, then the command line), the last holds, as for every pytest flag
    project.makeini("[pytest]\nopprof = true\naddopts = --opprof-top 3\n")
    assert rows(run(project, "--opprof-top", "2")) == 2


def test_json_and_traces_from_ini(project):
    """opprof_json, opprof_trace_dir and opprof_trace = all work from the ini file."""
    project.makeini(
        "[pytest]\nopprof = true\nopprof_json = out/r.json\nopprof_trace_dir = traces\nopprof_trace = all\n"
    )
    project.makepyfile(
        """
        from conftest import infer
        def test_ok(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    run(project).assert_outcomes(passed=1)
    assert json.loads((project.path / "out" / "r.json").read_text())["tests"][0]["outcome"] == "passed"
    (trace,) = (project.path / "traces").iterdir()
    assert trace.name.endswith(".json.gz")


def test_traces_for_failing_tests_only_by_default(project):
    """--opprof-trace-dir writes a Chrome trace per failing test; it opens as JSON with the ops."""
    project.makepyfile(
        """
        from conftest import infer
        def test_ok(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)

        def test_bad(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
            opprof.assert_op_count("aten::addmm", 7)
        """
    )
    result = run(project, "--opprof", "--opprof-trace-dir", "traces")
    result.assert_outcomes(passed=1, failed=1)
    (trace,) = (project.path / "traces").iterdir()
    assert "test_bad" in trace.name
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert sum(e["name"] == "aten::addmm" for e in events) == 4
    result.stdout.fnmatch_lines([f"*test_bad: trace written to traces/{trace.name}"])
    run(project, "--opprof", "--opprof-trace-dir", "all-traces", "--opprof-trace", "all")
    assert len(list((project.path / "all-traces").iterdir())) == 2


def test_every_test_gets_its_own_trace_file(project):
    """Parameter ids that sanitise alike (`a::b`, `a.b`, `a/b`, `a b`, `a?b`, accents, 300
    characters) each get their own trace: 14 tests, 14 files, none overwritten."""
    ids = ["a::b", "a.b", "a/b", "a b", "a?b", "a_b", "ä.b", "a..b", "a:b", "A.B", "x" * 300, "x" * 301, "", "-"]
    project.makepyfile(
        f"""
        import pytest
        import torch
        @pytest.mark.parametrize("p", {ids!r}, ids={ids!r})
        def test_p(opprof, p):
            opprof.run(lambda: torch.ones(2).add(1), warmup=0, steps=1)
        """
    )
    result = run(project, "--opprof", "--opprof-trace-dir", "traces", "--opprof-trace", "all")
    result.assert_outcomes(passed=14)
    files = list((project.path / "traces").iterdir())
    assert len(files) == 14 and all(len(f.name) < 200 for f in files)


CUT_SHORT_TESTS = """
import pytest
import torch
from conftest import infer

@pytest.mark.opprof
def test_marker(mlp):
    infer(*mlp)
    raise ValueError("model output wrong")

def test_whole_call(opprof, mlp):
    infer(*mlp)
    pytest.fail("model output wrong")

def test_block(opprof, mlp):
    with opprof.capture():
        infer(*mlp)
        raise ValueError("model output wrong")

def test_run(opprof, mlp):
    profiled = []
    def step():
        profiled.append(torch.autograd._profiler_enabled())
        if sum(profiled) == 2:  # the 2nd profiled step
            raise ValueError("model output wrong")
        return infer(*mlp)
    opprof.run(step, warmup=1, steps=4)

def test_signature(opprof, mlp):
    profiled = []
    def step():
        profiled.append(torch.autograd._profiler_enabled())
        if sum(profiled) == 5:  # after the 4 timed steps: the untimed signature step
            raise ValueError("model output wrong")
        return infer(*mlp)
    opprof.run(step, warmup=1, steps=4)

def test_caught(opprof, mlp):
    with pytest.raises(ValueError):
        with opprof.capture():
            raise ValueError("expected")
    with opprof.capture():
        infer(*mlp)

def test_caught_then_fails(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
    with pytest.raises(ValueError):
        with opprof.capture():
            torch.relu(torch.ones(2))
            raise ValueError("expected")
    assert False, "a later failure"

def test_skip_in_block(opprof, mlp):
    with opprof.capture():
        infer(*mlp)
        pytest.skip("not here")
"""


def test_a_test_failing_in_a_capture_leaves_the_timeline_up_to_its_failure(project, capsys):
    """A capture the test's exception ended (the whole call, a block, run()'s steps) is the failing
    test's trace, table and JSON profile, said to be cut short; it writes no baseline."""
    project.makepyfile(test_cut=CUT_SHORT_TESTS)
    result = run(
        project, "--opprof-update-baseline", "--opprof-trace-dir=traces", "--opprof-json=r.json", "--junitxml=j.xml"
    )
    result.assert_outcomes(passed=1, failed=6, skipped=1)
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    failing = ("test_marker", "test_whole_call", "test_block", "test_run", "test_signature")
    for name in failing:
        assert tests[name]["cut_short"] is True and tests[name]["outcome"] == "failed"
        ops = {op["name"]: op for op in tests[name]["profile"]["ops"]}
        events = json.loads(gzip.decompress(Path(tests[name]["trace"]).read_bytes()))["traceEvents"]
        assert ops["aten::addmm"]["calls"] == sum(e["name"] == "aten::addmm" for e in events) > 0
        result.stdout.fnmatch_lines([f"test_cut.py::{name} [[]failed[]] (* cut short by the test's exception*"])
    assert tests["test_run"]["profile"]["steps"] == 2  # one whole step, and the one that raised
    # The step that raised is partial: that the steps differ is the cut, not the code.
    checks = {c["name"]: c for c in tests["test_run"]["checks"]}
    assert checks["step_events"] == {
        "name": "step_events", "status": "ok", "message": "not compared: the test's exception ended step 2 part way"
    }  # fmt: skip
    assert "test_run: warning step_events" not in result.stdout.str()
    assert tests["test_signature"]["profile"]["steps"] == 4  # the timed steps stand
    cases = {c.get("name"): c for c in ET.parse(project.path / "j.xml").iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_block"].iter("property")}
    assert props["opprof.cut_short"] == "true" and props["opprof.steps"] == "1"
    assert tests["test_skip_in_block"]["outcome"] == "skipped" and tests["test_skip_in_block"]["profile"] is None
    assert tests["test_caught"]["cut_short"] is False and tests["test_caught"]["profile"]["steps"] == 1
    later = tests["test_caught_then_fails"]  # the failure is not the caught exception: its run() is shown
    assert later["cut_short"] is False and later["profile"]["steps"] == 2
    assert len(list((project.path / "traces").iterdir())) == 6
    assert [p.name for p in (project.path / ".opprof").rglob("*.json")] == ["test_caught.json"]
    # The trace says it was cut short: opprof compare refuses it (a trial's compared, exit 0 or 1 by chance)
    cut, whole = tests["test_run"]["trace"], tests["test_caught_then_fails"]["trace"]
    header = json.loads(gzip.decompress(Path(cut).read_bytes()))["opprof"]
    assert header["cut_short"] is True and header["outcome"] == "failed"
    assert json.loads(gzip.decompress(Path(whole).read_bytes()))["opprof"]["cut_short"] is False
    capsys.readouterr()
    assert cli_main(["compare", whole, cut]) == 2
    err = capsys.readouterr().err
    assert err == f"opprof: error: {cut_short_trace(cut)}\n"
    assert cli_main(["analyze", cut]) == 0
    assert "2 steps, cut short by the test's exception, " in capsys.readouterr().out
    # the trace's checks are the run's: its partial step compared with none (a trial's read a warning)
    assert header["cut_in_step"] is True
    assert cli_main(["analyze", cut, "--json"]) == 0
    analyzed = json.loads(capsys.readouterr().out)
    assert {c["name"]: c for c in analyzed["checks"]}["step_events"] == checks["step_events"]
    # and a script reads it there too, with the test it was of (a dashboard took it for a whole one)
    assert analyzed["trace"] == {
        "cut_short": True,
        "device_key": header["device_key"],
        "nodeid": "test_cut.py::test_run",
        "outcome": "failed",
    }
    assert json.loads(gzip.decompress(Path(whole).read_bytes()))["opprof"]["cut_in_step"] is False


def test_xfail_tests_are_reported_xfailed_and_xpassed_not_skipped(project):
    """An xfail test that failed its budget ran and was measured: `xfailed` in the table, JSON and
    HTML (it read `skipped`, as pytest's report has it); one that passed is `xpassed`."""
    project.makepyfile(
        test_xf="""
        import pytest
        from conftest import infer

        @pytest.fixture
        def not_yet():
            pytest.xfail("the fused kernel is not in this torch")

        @pytest.mark.xfail(reason="known: 2 addmm, budget says 1")
        def test_over_budget(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
            opprof.assert_op_count("aten::addmm", 1)

        @pytest.mark.xfail(reason="fixed since")
        def test_fixed(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)

        def test_at_setup(not_yet, opprof):
            pass
        """
    )
    result = run(project, "--opprof", "--opprof-json=r.json", "--opprof-html=r.html", "--opprof-trace-dir=traces")
    result.assert_outcomes(xfailed=2, xpassed=1)
    outcomes = {
        t["nodeid"].split("::")[1]: t["outcome"] for t in json.loads((project.path / "r.json").read_text())["tests"]
    }
    assert outcomes == {"test_over_budget": "xfailed", "test_fixed": "xpassed", "test_at_setup": "xfailed"}
    result.stdout.fnmatch_lines(["test_xf.py::test_over_budget [[]xfailed[]] (2 steps, *"])
    assert '<span class="outcome xfailed">xfailed</span>' in (project.path / "r.html").read_text()
    assert not (project.path / "traces").exists()  # an expected failure is no failure of the run


def test_a_misuse_of_opprof_ends_the_test_without_a_cut_short_table_or_trace(project):
    """`opprof.run(model(x))` (a result, not a callable), a capture nested in run(): the usage
    error is the test's failure, and the body before it (the model being built) is no measurement:
    no table, no trace (a trial's failure came with a table of `aten::uniform_`...)."""
    project.makepyfile(
        test_misuse="""
        import torch
        from conftest import infer

        def test_result_not_fn(opprof, mlp):
            model, x = mlp
            opprof.run(infer(model, x), warmup=1, steps=2)

        def test_nested(opprof, mlp):
            def step():
                infer(*mlp)
                with opprof.capture():
                    pass
            opprof.run(step, warmup=0, steps=2)
        """
    )
    result = run(project, "--opprof", "--opprof-trace-dir=traces", "--opprof-json=r.json")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*OpprofUsageError: fn=<tensor of shape (4, 8)>*"])
    assert "cut short" not in result.stdout.str()
    tests = json.loads((project.path / "r.json").read_text())["tests"]
    assert [(t["cut_short"], t["profile"], t["trace"]) for t in tests] == [(False, None, None)] * 2
    assert not (project.path / "traces").exists() or not list((project.path / "traces").iterdir())


def test_a_trace_an_earlier_run_left_for_a_test_is_removed_when_the_test_passes(project):
    """The trace folder holds this run's traces: a passing test's trace from an earlier run goes
    (it would pass for this failure's), other files stay."""
    project.makepyfile(
        """
        from conftest import infer
        def test_ok(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    run(project, "--opprof", "--opprof-trace-dir=traces", "--opprof-trace=all").assert_outcomes(passed=1)
    (project.path / "traces" / "notes.txt").write_text("mine")
    run(project, "--opprof", "--opprof-trace-dir=traces").assert_outcomes(passed=1)
    assert [f.name for f in (project.path / "traces").iterdir()] == ["notes.txt"]


def test_reports_are_written_when_nothing_was_measured(project):
    """--opprof-json, -csv and -html replace an earlier run's also when no test was measured: the
    files say so (no tests), as does the summary."""
    project.makepyfile(
        """
        from conftest import infer
        def test_measured(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        def test_plain():
            pass
        """
    )
    outputs = ("--opprof-json=r.json", "--opprof-csv=r.csv", "--opprof-html=r.html")
    run(project, "--opprof", *outputs).assert_outcomes(passed=2)
    assert "test_measured" in (project.path / "r.csv").read_text()
    result = run(project, "--opprof", *outputs, "-k", "test_plain")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["opprof: no test was measured (*", "opprof: wrote r.json"])
    assert json.loads((project.path / "r.json").read_text())["tests"] == []
    assert "test_measured" not in (project.path / "r.csv").read_text()
    assert "0 measured tests" in (project.path / "r.html").read_text()
    # --collect-only runs nothing: it leaves the reports as they were (a CI trial's was emptied)
    run(project, "--opprof", *outputs).assert_outcomes(passed=2)
    before = {name: (project.path / name).read_bytes() for name in ("r.json", "r.csv", "r.html")}
    result = run(project, "--opprof", *outputs, "--collect-only")
    result.stdout.fnmatch_lines(["opprof: --collect-only ran no test: no report written *"])
    assert {name: (project.path / name).read_bytes() for name in before} == before


def test_reports_are_written_without_pytests_terminal_plugin(project):
    """`-p no:terminal` (quiet machine-readable output) runs no terminal summary, where the reports
    were written: an audit's CI run got no JSON or CSV, exit 0, not a word. They are written; a
    report that cannot be, said on stderr, the only line."""
    project.makepyfile(
        """
        import os
        from conftest import infer
        def test_measured(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
            os.rmdir("taken")  # the html report's folder becomes a file while the run goes on
            open("taken", "w").close()
        """
    )
    (project.path / "taken").mkdir()
    outputs = ("--opprof-json=r.json", "--opprof-csv=r.csv", "--opprof-html=taken/r.html")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:terminal", "--opprof", *outputs)
    assert result.ret == 0
    assert [t["nodeid"] for t in json.loads((project.path / "r.json").read_text())["tests"]] == [
        "test_reports_are_written_without_pytests_terminal_plugin.py::test_measured"
    ]
    assert "test_measured" in (project.path / "r.csv").read_text()
    assert result.stdout.str() == ""
    assert len(result.errlines) == 1
    assert result.errlines[0].startswith("opprof: --opprof-html: could not write taken/r.html (")
    assert result.errlines[0].endswith("/taken is a file, not a folder); give --opprof-html a path you can write")
    # an exit code pytest runs no summary for (a review's pytest.exit(returncode=3)): written too
    project.makepyfile(
        test_exit="""
        import pytest
        from conftest import infer
        def test_measured(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        def test_stops():
            pytest.exit("enough", returncode=3)
        """
    )
    (project.path / "r.json").unlink()
    result = run(project, "--opprof", "--opprof-json=r.json", "-p", "no:randomly", "test_exit.py")
    assert result.ret == 3
    report = json.loads((project.path / "r.json").read_text())
    assert [t["nodeid"] for t in report["tests"]] == ["test_exit.py::test_measured"]
    # no test loop (--help), or an internal error (a hook's exception): the report stays as it was
    before = (project.path / "r.json").read_bytes()
    assert run(project, "--opprof", "--opprof-json=r.json", "--help").ret == 0
    project.makeconftest(
        project.path.joinpath("conftest.py").read_text()
        + "\ndef pytest_runtest_logfinish(nodeid, location):\n    raise RuntimeError('a broken hook')\n"
    )
    assert run(project, "--opprof", "--opprof-json=r.json", "test_exit.py::test_measured").ret == 3
    assert (project.path / "r.json").read_bytes() == before


def test_a_measured_test_that_ended_before_it_ran_is_in_the_report(project):
    """A skip marker skips, or a fixture fails, before the opprof fixture exists: the test is still
    in --opprof-json, skipped or an error."""
    project.makepyfile(
        test_skip="""
        import pytest
        @pytest.mark.skipif(True, reason="no GPU")
        def test_fixture(opprof):
            pass
        @pytest.mark.opprof
        @pytest.mark.skip(reason="no GPU")
        def test_marker():
            pass
        def test_plain_skip():
            pytest.skip("not measured")
        @pytest.fixture
        def broken():
            raise RuntimeError("no model file")
        def test_setup_error(broken, opprof):
            pass
        """
    )
    run(project, "--opprof", "--opprof-json=r.json", "--opprof-html=r.html").assert_outcomes(skipped=3, errors=1)
    page = (project.path / "r.html").read_text()  # the page lists them too, the error with its reason
    assert "3 measured tests" in page and page.count("nothing measured: the test was skipped") == 3
    assert "RuntimeError: no model file" in page.split("test_setup_error")[-1]
    tests = json.loads((project.path / "r.json").read_text())["tests"]
    assert [(t["nodeid"], t["outcome"]) for t in tests] == [
        ("test_skip.py::test_fixture", "skipped"),
        ("test_skip.py::test_marker", "skipped"),
        ("test_skip.py::test_setup_error", "error"),
    ]


def test_junitxml_carries_the_numbers(project):
    """junitxml gets per-test properties: steps, wall, ops' calls and ms per step."""
    project.makepyfile(
        """
        from conftest import infer
        def test_x(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=3)
        """
    )
    run(project, "--opprof", "--junitxml=junit.xml").assert_outcomes(passed=1)
    props = {p.get("name"): p.get("value") for p in ET.parse(project.path / "junit.xml").iter("property")}
    assert props["opprof.steps"] == "3"
    # the fake clock makes every step the same: the total is 3 steps of the per-step wall
    assert float(props["opprof.wall_ms"]) == pytest.approx(3 * float(props["opprof.wall_ms_per_step"]), abs=1e-3)
    assert float(props["opprof.wall_ms_per_step"]) > 0
    assert props["opprof.op.aten::addmm.calls_per_step"] == "2"
    assert float(props["opprof.op.aten::addmm.ms_per_step"]) > 0
    assert "opprof.outcome" not in props


def test_junitxml_marks_an_opprof_error(project):
    """junitxml writes an error of a test's call as a <failure> (a CI trial's dashboard counted
    7 errors as failures): the property `opprof.outcome` says it is an error."""
    project.makepyfile("def test_nothing(opprof):\n    pass\n")
    run(project, "--opprof", "--junitxml=junit.xml").assert_outcomes(errors=1)
    (case,) = ET.parse(project.path / "junit.xml").iter("testcase")
    assert case.find("failure").get("message").startswith("opprof: the measurement cannot be trusted")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["opprof.outcome"] == "error"


SUBTESTS = """
import os, torch
LAYERS = int(os.environ.get("LAYERS", "1"))

def test_budget(opprof, subtests):
    m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(LAYERS)]).eval()
    opprof.run(m, torch.ones(2, 8), warmup=1, steps=3)
    for i in range(3):
        with subtests.test(i=i):
            opprof.assert_op_count("aten::addmm", 1)
"""


@pytest.mark.skipif(not hasattr(pytest, "Subtests"), reason="pytest 9's subtests fixture")
def test_a_failed_subtest_fails_the_test_for_opprof_too(project, monkeypatch):
    """A subtest's report is made during the call: a trial's test with a failed subtest was
    recorded (`recorded: structure changed`), listed as passed, and its junit properties were
    written once per subtest. Now it is not recorded, the JSON says why it failed, and the
    properties are the call's, once."""
    project.makepyfile(test_s=SUBTESTS)
    run(project, "--opprof-update-baseline", "--junitxml=j.xml").assert_outcomes(passed=1)
    steps = [p for p in ET.parse(project.path / "j.xml").iter("property") if p.get("name") == "opprof.steps"]
    assert len(steps) == 1
    (path,) = (project.path / ".opprof").rglob("test_budget.json")
    recorded = path.read_bytes()
    monkeypatch.setenv("LAYERS", "2")
    result = run(project, "--opprof-update-baseline", "--opprof-json=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["opprof: 1 test not recorded: it failed or erred *: test_s.py::test_budget"])
    assert path.read_bytes() == recorded
    (test,) = json.loads((project.path / "r.json").read_text())["tests"]
    assert (test["outcome"], test["failure"]) == ("failed", "contains 3 failed subtests")


def test_a_call_a_plugin_fails_in_its_report_is_not_recorded(project, monkeypatch):
    """pytest-check's soft assertions fail a test in its call's report, after the call passed: a
    trial's failing test was recorded (`recorded: structure changed`). Its file is put back as
    it was, and it is named as not recorded, as a failing test is. (The conftest's wrapper is
    pytest-check's: `hookwrapper=True, trylast=True` on pytest_runtest_makereport.)"""
    project.makeconftest(
        USER_CONFTEST
        + """
import os

@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call" and os.environ.get("SOFT_FAIL") and report.passed:
        report.outcome, report.longrepr = "failed", "FAILURE: check 2 == 1"
    return report
"""
    )
    project.makepyfile(
        test_soft="""
        import os, torch
        def test_soft(opprof):
            m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(int(os.environ.get("LAYERS", "1")))])
            opprof.run(m, torch.ones(2, 8), warmup=1, steps=3)
        """
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (project.path / ".opprof").rglob("test_soft.json")
    recorded = path.read_bytes()
    monkeypatch.setenv("LAYERS", "2")
    monkeypatch.setenv("SOFT_FAIL", "1")
    result = run(project, "--opprof-update-baseline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["opprof: 1 test not recorded: it failed or erred *: test_soft.py::test_soft"])
    assert path.read_bytes() == recorded
    path.unlink()  # a new file goes too
    run(project, "--opprof-update-baseline").assert_outcomes(failed=1)
    assert not path.exists()


def test_a_whole_call_that_fails_as_expected_keeps_its_capture_as_far_as_it_went(project):
    """A trial: a whole-call test that xfails (pytest's xfail, unittest's expectedFailure) kept no
    measurement (`profile: null`), where a failing one keeps its cut-short capture."""
    project.makepyfile(
        test_xf="""
        import unittest, pytest, torch

        @pytest.mark.opprof
        @pytest.mark.xfail(reason="known")
        def test_marked():
            torch.ones(4) + 1
            assert False

        @pytest.mark.opprof
        class TestU(unittest.TestCase):
            @unittest.expectedFailure
            def test_xf(self):
                torch.ones(4) + 1
                self.assertEqual(1, 2)
        """
    )
    result = run(project, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(xfailed=2)
    for test in json.loads((project.path / "r.json").read_text())["tests"]:
        assert (test["outcome"], test["cut_short"]) == ("xfailed", True), test["nodeid"]
        assert any(op["name"] == "aten::add" for op in test["profile"]["ops"]), test["nodeid"]


def test_a_whole_call_assertion_inside_a_subtest_names_the_subtest(project):
    """A whole-call test's assertions are checked when it returns: a trial's two made in a
    `self.subTest` loop failed with the same line twice, naming neither subtest. pytest 8 runs
    unittest's subTest as a plain block (its result supports no subtests): there is no subtest to
    name, and each assertion is its own line all the same."""
    project.makepyfile(
        test_sub="""
        import unittest, pytest, torch

        @pytest.mark.opprof
        class TestU(unittest.TestCase):
            @pytest.fixture(autouse=True)
            def _opprof(self, opprof):
                self.opprof = opprof

            def test_loop(self):
                for i in range(2):
                    with self.subTest(i=i):
                        torch.ones(4) + 1
                        self.opprof.assert_op_count("aten::add", 1)
        """
    )
    result = run(project, "--opprof")
    named = hasattr(pytest, "Subtests")  # pytest 9 runs subTest as subtests
    where = [" in subTest (i=0)", " in subTest (i=1)"] if named else ["", ""]
    result.stdout.fnmatch_lines([f"*test_sub.py:13{w}: aten::add: 2 calls/step, expected 1*" for w in where])


UNITTEST = """
import os, unittest, pytest, torch
LAYERS = int(os.environ.get("LAYERS", "1"))

class TestModel(unittest.TestCase):
    @pytest.fixture(autouse=True)
    def _opprof(self, opprof):
        self.opprof = opprof

    def test_fails(self):
        m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(LAYERS)]).eval()
        self.opprof.run(m, torch.ones(2, 8), warmup=1, steps=3)
        self.assertEqual(LAYERS, 1)

    def test_subtest(self):
        m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(LAYERS)]).eval()
        self.opprof.run(m, torch.ones(2, 8), warmup=1, steps=3)
        with self.subTest("budget"):
            self.opprof.assert_op_count("aten::addmm", 1)

    @unittest.expectedFailure
    def test_expected(self):
        m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(LAYERS)]).eval()
        self.opprof.run(m, torch.ones(2, 8), warmup=1, steps=3)
        self.assertEqual(LAYERS, 3)

    @unittest.skip("not today")
    def test_skipped(self):
        pass

    def test_skips(self):
        self.skipTest("no GPU")
"""


def test_a_unittest_test_that_fails_skips_or_xfails_is_not_recorded(project, monkeypatch):
    """pytest's unittest plugin keeps a TestCase's failure on the item until the report, so the
    call raised nothing: a trial's failing TestCase test was recorded, its expected failure too,
    and its skipped tests erred as `no operator or device events`. Now they are not recorded,
    and a skipped one gets no line."""
    project.makepyfile(test_u=UNITTEST)
    first = run(project, "--opprof-update-baseline")
    first.assert_outcomes(passed=2, skipped=2, xfailed=1)
    assert "error events" not in first.stdout.str()
    files = {p: p.read_bytes() for p in (project.path / ".opprof").rglob("*.json")}
    assert sorted(p.name for p in files) == ["TestModel.test_fails.json", "TestModel.test_subtest.json"]
    monkeypatch.setenv("LAYERS", "2")
    result = run(project, "--opprof-update-baseline", "--opprof-json=r.json")
    apart = hasattr(pytest, "Subtests")  # pytest 9 reports a failed subTest apart (SUBFAILED), the test passed
    result.assert_outcomes(failed=2, passed=1 if apart else 0, skipped=2, xfailed=1)
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    assert tests["test_u.py::TestModel::test_subtest"]["failure"] == (
        "contains 1 failed subtest (pytest reports a unittest test passed beside its SUBFAILED lines)"
        if apart
        else "AssertionError: aten::addmm: 2 calls/step, expected 1 (per step: 2, 2, 2; in aten::linear; inputs "
        "float[8], float[2,8], float[8,8])"
    )
    # pytest's xfail of an expectedFailure names no exception: not `_pytest.outcomes.XFailed` (a trial's)
    assert tests["test_u.py::TestModel::test_expected"]["failure"] == (
        "failed as @unittest.expectedFailure expects (unittest hands pytest no exception to name)"
    )
    result.stdout.fnmatch_lines(
        ["opprof: 2 tests not recorded: they failed or erred *: test_u.py::TestModel::test_fails, *test_subtest"]
    )
    assert {p: p.read_bytes() for p in (project.path / ".opprof").rglob("*.json")} == files


def test_warnings_go_to_the_summary(project):
    """A trust warning (steps that differ) is listed in the summary, and the test still passes."""
    project.makepyfile(
        """
        import torch
        def test_x(opprof):
            n = iter(range(1, 10))
            opprof.run(lambda: [torch.ones(2).add(1) for _ in range(next(n))], warmup=0, steps=3)
        """
    )
    result = run(project, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_x: warning step_events: CPU ops per step differ between steps*"])


@pytest.mark.parametrize("threads", ["1", "cpus"])
def test_xdist_workers_measure_and_the_controller_reports(project, tmp_path, monkeypatch, threads):
    """Under -n 2 every measured test reaches the one JSON report and summary, written once. Where
    the workers' torch threads outnumber the CPUs, the note says they contend, and the fix (a
    trial's -n 2 of 2 threads each on 2 CPUs failed its own time limits, the threads waiting 99%)."""
    pytest.importorskip("xdist")
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", str(cpus) if threads == "cpus" else "1")
    project.makepyfile(
        **{
            f"test_w{i}": f"""
from conftest import infer
def test_{i}(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
    opprof.assert_op_count("aten::addmm", 2)
"""
            for i in range(4)
        }
    )
    out = tmp_path / "run.json"
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--opprof", f"--opprof-json={out}")
    result.assert_outcomes(passed=4)
    tests = json.loads(out.read_text())["tests"]
    assert sorted(t["nodeid"].split("::")[1] for t in tests) == ["test_0", "test_1", "test_2", "test_3"]
    assert result.stdout.str().count("opprof: wrote") == 1
    if threads == "1" and cpus >= 2:
        result.stdout.fnmatch_lines(["opprof: measured under pytest-xdist (-n 2): timings on shared CPUs are noisier*"])
    elif threads == "cpus":
        share = max(1, cpus // 2)
        result.stdout.fnmatch_lines(
            [
                f"opprof: measured under pytest-xdist (-n 2): 2 workers of {cpus} torch thread* each share {cpus} CPU*, "
                "so a test's ops may wait for CPUs another worker holds: its times and time assertions "
                "(assert_op_below, assert_total_below) read that load; op counts are exact as ever. For times, "
                f"run without -n, or *OMP_NUM_THREADS={share}*, recording and checking alike"
            ]
        )
    assert {t["worker"] for t in tests} <= {"gw0", "gw1"}


def test_a_measured_test_whose_xdist_worker_died_is_in_the_reports_as_failed(project, tmp_path):
    """A worker that dies in a measured test (a segfault, the OOM killer) sends no record: the test
    was missing from --opprof-json and --opprof-html while pytest failed it. It is there, failed,
    with xdist's word as its failure; a test that is not measured gets no entry."""
    project.makepyfile(
        test_c="""
import os
from conftest import infer

def test_dies(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
    os._exit(3)

def test_plain_dies():
    os._exit(3)

def test_ok(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""
    )
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    result = run(project, "-n", "1", "--opprof", f"--opprof-json={out}", f"--opprof-html={page}")
    result.assert_outcomes(passed=1, failed=2)
    tests = {t["nodeid"]: t for t in json.loads(out.read_text())["tests"]}
    assert sorted(tests) == ["test_c.py::test_dies", "test_c.py::test_ok"]
    died = tests["test_c.py::test_dies"]
    assert (died["outcome"], died["profile"]) == ("failed", None)
    assert died["failure"] == "worker 'gw0' crashed while running 'test_c.py::test_dies'"
    assert "crashed while running" in page.read_text()
    assert "measured under pytest-xdist" not in result.stdout.str()  # one worker shares its CPUs with none


TEARDOWN_CRASH_TESTS = """
import os
import pytest
import torch

LAYERS = int(os.environ.get("OPPROF_T_LAYERS", "1"))
model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(LAYERS)])
x = torch.randn(4, 16)

@pytest.fixture
def dies_after():
    yield
    if os.environ.get("OPPROF_T_CRASH"):
        os._exit(4)

def test_changed(opprof, dies_after):
    opprof.run(model, x, warmup=1, steps=2)

@pytest.mark.skipif(not os.environ.get("OPPROF_T_CRASH"), reason="new in the crashing run")
def test_new(opprof, dies_after):
    opprof.run(model, x, warmup=1, steps=2)
"""


def test_a_baseline_written_before_its_xdist_worker_died_in_teardown_goes_back(pytester, monkeypatch):
    """A test that errs in its teardown is not recorded: its file goes back as it was. Its
    xdist worker dying there (os._exit, a segfault) left the file rewritten, while the summary
    said `files as they were` (a trial). The controller puts it back; a new file goes."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_t=TEARDOWN_CRASH_TESTS)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1, skipped=1)
    (path,) = pytester.path.glob(".opprof/*/test_t.py/test_changed.json")
    before = path.read_bytes()
    monkeypatch.setenv("OPPROF_T_LAYERS", "2")
    monkeypatch.setenv("OPPROF_T_CRASH", "1")
    result = run(pytester, "--opprof-update-baseline", "-n", "1")
    result.assert_outcomes(passed=2, failed=2)  # each call passed; each teardown killed its worker
    result.stdout.fnmatch_lines(["opprof: 2 tests not recorded: * files as they were*"])
    assert path.read_bytes() == before
    assert not list(pytester.path.glob(".opprof/*/test_t.py/test_new.json"))


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
        f"that has none (renamed or moved: its line keeps it); if not, delete it (and commit the deletion): rm -- "
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
    with torch.no_grad():
        y = model(x)
        if INJECT == "extra":
            y = y.clone()
        if "hook" in INJECT:  # the same ops; time outside them (the fake clock gives it its cost)
            with torch.autograd.profiler.record_function("slow_hook"):
                pass
        return y


def traced(fn):  # fn under a Python tracer when INJECT says so (as coverage or a debugger would)
    if "traced" not in INJECT:
        return fn()
    import sys

    before = sys.gettrace()
    sys.settrace(lambda frame, event, arg: None)
    try:
        return fn()
    finally:
        sys.settrace(before)


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
        ["*structure changed: + aten::clone (1/step)*[[].opprof/cpu-*/test_base.py/test_big.json[]]"]
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
    result.stdout.fnmatch_lines(["*test_big: recorded: structure changed: + aten::clone (1/step)*"])
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
            "test_base.py::test_big: time inconclusive for aten::linear, aten::addmm: the machine ran 1.24x slower than *",
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
            "test_base.py::test_big: time: step wall: 0.800 ms/step outside the ops vs baseline 0.000 ms (+133% of "
            "its 0.600 ms step, slower; the time went there (Python code, hooks, data preparation, a wait for another thread or process); limit +20%, "
            "p=*) [[].opprof/cpu-*/test_big.json[]]",
        ]
    )
    fake_clock.costs["slow_hook"] = 0
    run(baselined, "--opprof", "-k", "big").assert_outcomes(passed=1)


def test_under_a_python_tracer_a_slower_step_wall_is_inconclusive(baselined, monkeypatch, fake_clock):
    """The same slow hook under a Python tracer (coverage, a debugger): the wall's slowdown may be
    the tracer's, so it is inconclusive with its own fix, and the test passes."""
    monkeypatch.setattr(device, "python_tracer", python_tracer)  # the real one (fake_clock's reads None)
    monkeypatch.setenv("OPPROF_INJECT", "hook traced")
    fake_clock.costs["slow_hook"] = 800_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_base.py::test_big: time inconclusive for step wall: a Python tracer (test_base.traced.<locals>.<lambda>) "
            "slowed the Python between the ops; neither passed nor failed (--opprof-strict makes this an error); "
            "measure without coverage or a debugger (a pytest --opprof run of its own) for a time verdict"
        ]
    )


@pytest.mark.parametrize("mode", ["changed", "all", "new"])
def test_a_recording_under_a_python_tracer_writes_no_baseline(baselined, monkeypatch, fake_clock, mode):
    """A trial recorded under --cov: the file held the tracer's slower step wall, and a later
    run without it passed a 3x slower one. A measurement under a Python tracer is no reference:
    no file is written or rewritten (=all neither), and one line says why and how to record."""
    monkeypatch.setattr(device, "python_tracer", python_tracer)  # the real one (fake_clock's reads None)
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
            "Python between the ops; record test_base.py::test_big in a run without it: pytest "
            "--opprof-update-baseline --no-cov (with pytest-cov; without a debugger)"
        ]
    )
    assert (path.read_text() == before) if mode != "new" else not path.exists()
    (test,) = json.loads((baselined.path / "r.json").read_text())["tests"]
    assert test["baseline"]["status"] == "unreliable"
    assert test["baseline"]["unrecordable"].startswith("a Python tracer ran (test_base.traced.")


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
    not importlib.import_module("pytest_opprof.kineto").records_list_shapes(),
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
    fake_clock.costs["aten::addmm"] = 800_000
    result = run(baselined, "--opprof", "-k", "big")
    result.assert_outcomes(passed=1)
    was = dict(part.split("=", 1) for part in setup.split(", ") if "=" in part).get("OMP_NUM_THREADS")
    assert was != str(other) and f"OMP_NUM_THREADS={other}" in thread_setup()
    result.stdout.fnmatch_lines(
        [
            f"test_base.py::test_big: time inconclusive for aten::*addmm: torch ran on {other} thread*, the baseline on "
            f"{default}; neither passed nor failed (--opprof-strict makes this an error); record the baseline on the "
            "machine that checks it (--opprof-update-baseline=all there), or run with the baseline's thread "
            f"variables: env {'OMP_NUM_THREADS=' + was if was else '-u OMP_NUM_THREADS'} pytest ...",
            f"test_base.py::test_big: environment differs from the baseline: torch threads {default} -> {other} (another "
            f"machine setup: OMP_NUM_THREADS {was or 'unset'} -> {other})*",
        ]
    )
    assert torch.get_num_threads() == default


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
            "(try/finally); measured after it: test_t.py::test_after, test_t.py::test_after_too"
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
    plugin = importlib.import_module("pytest_opprof.plugin")
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    pytester.makepyfile(**{"tests/test_a": "def test_x(): pass", "tests/test_b": "def test_y(): pass"})
    assert plugin._picked_some(pytester.parseconfig(*args)) is picked


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
            "that range is inconclusive, not a failure (README: Recorded ranges)",
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
            "nor widening a recorded range; make each call of fn do the same work (README: Confirmation by more "
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
    import sys

    pytester.makepyfile(test_re=RAISES_PAST_FIRST)
    result = run(pytester, "--opprof-update-baseline")
    result.assert_outcomes(failed=1)
    if sys.version_info >= (3, 11):
        result.stdout.fnmatch_lines(
            ["*opprof: raised while run()'s fn was measured again for its baseline's recorded ranges*"]
        )
    assert not (pytester.path / ".opprof").exists() or not list((pytester.path / ".opprof").rglob("*.json"))


def test_fn_raising_in_a_confirmation_fails_the_test_saying_so(remeasure_project, fake_clock):
    """fn that fails once called more often than its first measurement's calls: the test fails
    with fn's own error, and a note says it was raised in a confirmation (a review: nothing did)."""
    import sys

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


# -- hostile paths: nothing written outside the tree, one line instead of a traceback ----------


def test_a_symlinked_baseline_folder_never_sends_files_outside(project, tmp_path_factory):
    """A device-key folder that is a symlink to somewhere else: recording refuses with one line,
    the test is an error, and nothing is written there."""
    outside = tmp_path_factory.mktemp("outside")
    (project.path / ".opprof").mkdir()
    (project.path / ".opprof" / "cpu-x86_64").symlink_to(outside, target_is_directory=True)
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    result = run(project, "--opprof-update-baseline", "--opprof-device-key=cpu-x86_64")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*test_x.json: its folder resolves to {outside}*, outside *.opprof (a symlink?)*"])
    assert list(outside.rglob("*")) == []


def test_planted_symlinks_never_overwrite_a_file_outside(project, tmp_path_factory):
    """A repository that commits symlinks under `.opprof/` named like temporary files (every pid
    of the old `.<name>.<pid>.tmp` scheme near ours) pointing at a file outside: recording a new
    baseline and then rewriting it with `=all` (under xdist too) leave the outside file
    byte-identical and write a real file inside the tree."""
    outside = tmp_path_factory.mktemp("outside") / "precious.txt"
    outside.write_text("do not touch")
    folder = project.path / ".opprof" / "cpu-x86_64" / "test_x.py"
    folder.mkdir(parents=True)
    for pid in range(max(os.getpid() - 2000, 1), os.getpid() + 2000):
        (folder / f".test_x.json.{pid}.tmp").symlink_to(outside)
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    for update in ("--opprof-update-baseline", "--opprof-update-baseline=all"):
        result = run(project, update, "--opprof-device-key=cpu-x86_64", "-n", "2")
        result.assert_outcomes(passed=1)
        assert outside.read_text() == "do not touch"
        written = folder / "test_x.json"
        assert not written.is_symlink() and json.loads(written.read_text())["schema"] == 2
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 rewritten*"])


def test_a_baseline_file_symlinked_outside_the_folder_is_an_error_and_left_alone(project, tmp_path_factory):
    """A baseline file that is a symlink to a file outside `.opprof/`: neither read nor
    replaced (=all replaced the link with a file before, silently): the test errs naming it."""
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (written,) = (project.path / ".opprof").rglob("test_x.json")
    outside = tmp_path_factory.mktemp("outside") / "test_x.json"
    outside.write_bytes(written.read_bytes())
    written.unlink()
    written.symlink_to(outside)
    for flag in ("--opprof", "--opprof-update-baseline=all"):
        result = run(project, flag)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            [f"*test_x.json: a symlink to {outside}, outside *.opprof; nothing was read or written*"]
        )
        assert written.is_symlink() and outside.read_bytes().startswith(b"{")


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_a_baseline_file_that_is_a_broken_symlink_is_an_error_and_left_alone(project, link):
    """A trial's baseline file made a symlink loop: the test failed with `RuntimeError: Symlink
    loop` and a traceback; a symlink to nothing passed as a test without a baseline. Each now
    errs with one line naming it, under every flag, and the link stays as it was."""
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (written,) = (project.path / ".opprof").rglob("test_x.json")
    written.unlink()
    if link == "loop":
        written.symlink_to("loopx")
        (written.parent / "loopx").symlink_to(written.name)
        line = "*test_x.json: a symlink loop (to loopx, which leads back); point it at the baseline file, or delete it"
    else:
        written.symlink_to("nothere.json")
        line = (
            "*test_x.json: a symlink to nothere.json, which does not exist; point it at the baseline file, or delete it"
        )
    for flag in ("--opprof", "--opprof-update-baseline", "--opprof-update-baseline=all"):
        result = run(project, flag)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines([line])
        assert "Traceback" not in result.stdout.str() and "RuntimeError" not in result.stdout.str()
        assert written.is_symlink() and not written.exists()


def test_a_baseline_that_cannot_be_written_is_an_error_naming_it(project, monkeypatch):
    """A disk that refuses the write (injected: no space left): the test is an error with one
    line naming the file, no traceback; no file appears."""
    from pytest_opprof import baseline

    def full_disk(path, data, inside=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(baseline, "write_atomic", full_disk)
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    result = run(project, "--opprof-update-baseline", "--opprof-device-key=cpu-x86_64")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*test_x.json: cannot write the baseline (No space left on device); make its folder writable*"]
    )
    assert not (project.path / ".opprof").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--opprof-json", "."], "--opprof-json: '.' is not a file path: it names a folder (from command line)"),
        (  # a CI trial's `out/` became a file named out, which an upload step of the folder missed
            ["-o", "opprof_csv=out/"],
            "--opprof-csv: 'out/' is not a file path: it ends in /, as a folder does; name a file in that folder "
            "(from -o opprof_csv)",
        ),
        (
            ["--opprof-trace-dir", "plain.txt"],
            "--opprof-trace-dir: 'plain.txt' is not a folder: plain.txt is a file*",
        ),
        (["--opprof-trace=all"], "--opprof-trace=all: no --opprof-trace-dir to write the traces to*"),
        (
            ["-o", "opprof_tolerance=0.2"],
            "--opprof-tolerance: '0.2' is not a percentage like 20%: a bare 0.2 is ambiguous*",
        ),
    ],
)
def test_bad_outputs_are_usage_errors_before_any_test_runs(pytester, args, message):
    """An output that cannot be written or a 100x-off number stops pytest at start, one line."""
    pytester.makepyfile("def test_x(): pass")
    (pytester.path / "plain.txt").write_text("x")
    result = run(pytester, "--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_outputs_that_become_unwritable_during_the_run_are_one_summary_line(project):
    """The test itself puts a file where the report's and the traces' folders should be (as a
    full disk or a cleanup job would): the run goes on, each output is one summary line, no
    traceback, and the exit code is the tests' own (1: one failed)."""
    project.makepyfile(
        """
        from pathlib import Path
        from conftest import infer
        def test_bad(opprof, mlp):
            Path("out").write_text("in the way")
            Path("traces").write_text("in the way")
            opprof.run(infer, *mlp, warmup=1, steps=2)
            opprof.assert_op_count("aten::addmm", 7)
        """
    )
    result = run(project, "--opprof", "--opprof-json", "out/r.json", "--opprof-trace-dir", "traces")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines(
        ["*::test_bad: trace traces/*test_bad-*.json.gz could not be written (*); give --opprof-trace-dir a folder *"]
    )
    result.stdout.fnmatch_lines(["opprof: --opprof-json: could not write out/r.json (*); give --opprof-json a path *"])
    assert (project.path / "out").read_text() == "in the way"


def test_an_earlier_runs_trace_that_cannot_be_removed_is_said_not_to_be_this_runs(project, monkeypatch):
    """A trial's read-only trace folder kept the trace of a test's earlier failure after the test
    passed, unsaid: an old file must never pass for this run's. The test's line and the JSON's
    `trace_error` name it; the run goes on."""
    project.makepyfile(
        """
        import os
        from conftest import infer
        def test_x(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
            assert os.environ.get("FIXED"), "not yet"
        """
    )
    run(project, "--opprof", "--opprof-trace-dir=traces").assert_outcomes(failed=1)
    (old,) = (project.path / "traces").iterdir()
    real_unlink = Path.unlink

    def refused(self, *args, **kwargs):  # as a read-only folder refuses a user without root
        if self.parent.name == "traces":
            raise PermissionError(13, "Permission denied", str(self))
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", refused)
    monkeypatch.setenv("FIXED", "1")
    result = run(project, "--opprof", "--opprof-trace-dir=traces", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    line = f"traces/{old.name} is an earlier run's and could not be removed (Permission denied): it is not this run's; delete it"
    result.stdout.fnmatch_lines([f"*::test_x: trace {line}"])
    (test,) = json.loads((project.path / "r.json").read_text())["tests"]
    assert (test["trace"], test["trace_error"]) == (None, line)
    assert old.exists()


def test_a_path_after_the_update_flag_stays_a_path(project):
    """`pytest --opprof-update-baseline test_x.py` records the tests of test_x.py only, instead
    of refusing 'test_x.py' as the flag's value."""
    source = "from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    project.makepyfile(test_x=source, test_y=source.replace("test_x", "test_y"))
    result = run(project, "--opprof-update-baseline", "test_x.py")
    result.assert_outcomes(passed=1)
    assert [p.name for p in (project.path / ".opprof").rglob("*.json")] == ["test_x.json"]
    result = run(project, "--opprof-update-baseline", "test_x.py::test_x", "test_y.py")
    result.assert_outcomes(passed=2)


def test_a_profiler_of_the_tests_own_is_left_alone(pytester):
    """A test that runs its own torch.profiler: the whole-call capture steps aside (the test
    passes as without --opprof, the user's profiler keeps its events, opprof.run inside it is
    refused with one line); assertions left for the whole call make the test an error."""
    pytester.makepyfile(
        test_own="""
        import pytest
        import torch
        from pytest_opprof import CaptureError

        def profiled():
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                torch.ones(3).add(1)
            return p

        @pytest.mark.opprof
        def test_marker_only():
            assert len(profiled().events()) > 0

        def test_fixture_unused(opprof):
            assert len(profiled().events()) > 0

        def test_run_inside(opprof):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                with pytest.raises(CaptureError, match="a torch profiler is already running"):
                    opprof.run(lambda: torch.ones(3).add(1), steps=2)
                torch.ones(2).mul(2)
            assert len(p.events()) > 0

        def test_deferred(opprof):
            opprof.assert_op_count("aten::add", 1)
            assert len(profiled().events()) > 0
        """
    )
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        ["opprof: the test started a profiler of its own*1 operator assertion could not be checked*"]
    )
    # Measured nothing, with no baseline expecting a measurement: a warning, in the summary and the JSON
    result.stdout.fnmatch_lines(
        ["test_own.py::test_marker_only: warning stepped_aside: the test started a profiler of its own (*), "
         "so the whole-call capture stepped aside and measured nothing; measure with opprof.run(...)*"]
    )  # fmt: skip
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert [c["name"] for c in tests["test_fixture_unused"]["checks"]] == ["stepped_aside"]


def test_a_profiler_an_earlier_test_left_running_is_named(pytester):
    """A debug `prof.start()` whose test failed before `prof.stop()` left the profiler on: each
    later measured test failed with `a torch profiler is already running ... stop the other
    profiler`, naming no profiler of theirs, and with a frame of the plugin's. Now one line says
    which test left it; a profiler started before the test by no test (a fixture) is said so."""
    pytester.makepyfile(
        test_leak="""
        import pytest, torch

        def test_a_debug():
            prof = torch.profiler.profile()
            prof.start()
            assert torch.ones(2).sum() == 3  # fails before prof.stop()

        def test_b(opprof):
            opprof.run(lambda: torch.ones(2) + 1, steps=2)

        def test_stops():  # the profiler test_a_debug left, stopped
            torch._C._autograd._disable_profiler()

        @pytest.fixture
        def profiled():
            with torch.profiler.profile():
                yield

        def test_c(profiled, opprof):
            torch.ones(2) + 1
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: a torch profiler was already running when this test began, left running by "
            "test_leak.py::test_a_debug, which started it and did not stop it; opprof cannot measure inside another "
            "profiler (torch runs one at a time): stop it where it starts (prof.stop() in a finally, or `with "
            "torch.profiler.profile():`)",
            "opprof: a torch profiler was already running when this test began, started before it (by a fixture or a "
            "conftest?); *",
        ]
    )
    assert "pytest_opprof/" not in result.stdout.str()


def test_a_fixtures_profiler_is_no_test_left_running_and_a_fixtures_capture_keeps_it(pytester):
    """A review: a module fixture's profiler, still running after an unmeasured test, was blamed
    on that test (`left running by test_first`); and a test whose capture a fixture took (its
    body is not captured) failed beside a profiler another fixture ran, where it had passed."""
    pytester.makepyfile(
        test_fix="""
        import pytest, torch

        @pytest.fixture(scope="module")
        def profiled_module():
            with torch.profiler.profile():
                yield

        def test_first(profiled_module):
            torch.ones(2) + 1

        def test_second(profiled_module, opprof):
            torch.ones(2) + 1
        """,
        test_gate="""
        import pytest, torch

        @pytest.fixture
        def measured(opprof):
            opprof.run(lambda: torch.ones(2) + 1, steps=2)
            return opprof

        @pytest.fixture
        def debug_profiler():
            with torch.profiler.profile():
                yield

        def test_gate(measured, debug_profiler):
            assert measured.profile.op("aten::add").calls == 2
        """,
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*opprof: a torch profiler was already running when this test began, started before it (by a fixture or a "
         "conftest?); *"]
    )  # fmt: skip
    assert "left running by" not in result.stdout.str()


def test_the_librarys_measure_and_capture_in_a_measured_test_step_the_whole_call_aside(pytester):
    """pytest_opprof.measure() or capture() in the body of a test with the fixture: a trial's was
    refused as `an opprof capture is already running: captures cannot nest`, though the test
    nested nothing (the capture running was the plugin's whole-call one). It steps aside for
    them as for a torch profiler of the test's own, and says so."""
    pytester.makepyfile(
        test_lib="""
        import torch
        from pytest_opprof import capture, measure

        def test_measure(opprof):
            profile = measure(lambda: torch.ones(4) + 1, warmup=1, steps=3)
            assert profile.op("aten::add").calls == 3

        def test_capture(opprof):
            with capture() as cap:
                torch.ones(4) + 1
            assert cap.profile.op("aten::add").calls == 1
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["test_lib.py::test_measure: warning stepped_aside: the test started a profiler of its own (torch.profiler, "
         "or pytest_opprof's measure() or capture()), so the whole-call capture stepped aside and measured nothing*",
         "test_lib.py::test_capture: warning stepped_aside: *"]
    )  # fmt: skip


def test_a_profiler_of_the_tests_own_does_not_switch_its_baseline_off_in_silence(pytester, monkeypatch):
    """A debug profiler left in a test that has a baseline: the whole call measured nothing, so the
    baseline (its only gate) went uncompared, and the test passed while the model changed. Now an
    error naming the file; likewise under --opprof-require-baseline without a file."""
    source = """
        import os
        import pytest
        import torch

        @pytest.mark.opprof
        def test_marker():
            x = torch.ones(4, 4)
            if os.environ.get("DEBUG_PROFILER"):
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
                    (x @ x) @ x
            else:
                x @ x
        """
    pytester.makepyfile(test_own=source)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("DEBUG_PROFILER", "1")
    result = run(pytester, "--opprof")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*opprof: the test started a profiler of its own (*), so the whole-call capture stepped aside and "
         "measured nothing: its baseline .opprof/cpu-*/test_own.py/test_marker.json was not compared; *"]
    )  # fmt: skip
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)  # recording keeps the file: no error
    shutil.rmtree(pytester.path / ".opprof")
    run(pytester, "--opprof").assert_outcomes(passed=1)  # nothing expected a measurement
    run(pytester, "--opprof", "--opprof-require-baseline").assert_outcomes(errors=1)


def test_the_baseline_dir_is_checked_where_it_is_used_against_the_rootdir(project, monkeypatch):
    """Run from a subfolder: --opprof-baseline-dir resolves against the rootdir, so a file in the
    way there is a usage error at start, and a file of that name in the current folder is not."""
    project.makeini("[pytest]\n")
    (project.path / "blk").write_text("a file")
    sub = project.path / "tests"
    sub.mkdir()
    (sub / "bl").write_text("a file here, not at the rootdir")
    (sub / "test_a.py").write_text(
        "from conftest import infer\ndef test_a(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    monkeypatch.chdir(sub)
    result = run(project, "--opprof", "--opprof-baseline-dir", "blk")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--opprof-baseline-dir: 'blk' is not a folder: */blk is a file (from command line; as resolved against "
            "the rootdir: */blk); name a folder, or move the file"
        ]
    )
    # a plain run judges the value given too (a contract trial's ini value passed until --opprof)
    project.makeini("[pytest]\nopprof_baseline_dir = blk\n")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--opprof-baseline-dir: 'blk' is not a folder: */blk is a file (from tox.ini; *"])
    project.makeini("[pytest]\n")
    result = run(project, "--opprof-update-baseline", "--opprof-baseline-dir", "bl/x")
    result.assert_outcomes(passed=1)
    assert list((project.path / "bl" / "x").rglob("test_a.json"))


def test_a_record_command_suggested_in_a_subfolder_names_the_tests_as_typed_there(project, monkeypatch):
    """Node ids are relative to the rootdir: run from `tests/`, the suggested `pytest
    --opprof-update-baseline tests/test_m.py::test_a` found no such file there (a trial). The ids
    in a record command are given as pytest takes them in the folder it ran in; run there, the
    commands record, and the next run passes."""
    project.makeini("[pytest]\n")
    sub = project.path / "tests"
    sub.mkdir()
    source = (
        "import os, torch\nfrom conftest import infer\n"
        "def step(model, x):\n    y = infer(model, x)\n    return torch.sigmoid(y) if os.environ.get('MORE') else y\n"
        "def test_a(opprof, mlp):\n    opprof.run(step, *mlp, warmup=1, steps=5)\n"
    )
    (sub / "test_m.py").write_text(source)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (sub / "test_n.py").write_text(source.replace("test_a", "test_b"))
    monkeypatch.setenv("MORE", "1")
    monkeypatch.chdir(sub)
    result = run(project, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(failed=1, errors=1)
    commands = [
        line.split(prefix, 1)[1].split(suffix, 1)[0]
        for line in result.stdout.lines
        for prefix, suffix in (("record it: ", " (and commit"), ("record it with ", " and commit"))
        if prefix in line
    ]
    assert sorted(set(commands)) == [
        "pytest --opprof-update-baseline test_m.py::test_a",
        "pytest --opprof-update-baseline test_n.py::test_b",
    ]
    for command in set(commands):
        run(project, *shlex.split(command)[1:]).assert_outcomes(passed=1)
    run(project, "--opprof", "--opprof-require-baseline").assert_outcomes(passed=2)


def test_the_observer_effect_is_in_the_report_and_far_above_the_usual_is_a_warning(project, fake_clock):
    """run() times unprofiled steps after the profiled ones: the header shows profiled/unprofiled
    (here the fake clock's 10 us unprofiled step against its profiled one), the JSON carries it,
    and above x3 it is a trust warning naming the fix."""
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=3)\n"
    )
    fake_clock.unprofiled_ns = 10_000
    result = run(project, "--opprof", "--opprof-json", "r.json")
    result.assert_outcomes(passed=1)
    data = json.loads((project.path / "r.json").read_text())["tests"][0]
    overhead = data["profile"]["overhead"]
    wall_ms = data["profile"]["step_wall_ms"]["min"]
    assert overhead == pytest.approx(wall_ms / 0.01, rel=1e-3) and overhead > 3
    result.stdout.fnmatch_lines(
        [
            f"test_x.py::test_x [[]passed[]] (3 steps, *.* ms/step wall, profiler x{overhead:.2f})",
            f"test_x.py::test_x: warning overhead: profiled steps took x{overhead:.1f} the time of unprofiled ones*",
        ]
    )
    fake_clock.unprofiled_ns = int(wall_ms * 1e6)  # the profiler costs nothing
    result = run(project, "--opprof")
    assert "warning overhead" not in result.stdout.str()
    result.stdout.fnmatch_lines(["test_x.py::test_x [[]passed[]] (3 steps, *.* ms/step wall, profiler x1.00)"])
    fake_clock.unprofiled_ns = int(wall_ms * 1e6 * 10)  # a stall hit the unprofiled steps: x0.10 is no measure
    result = run(project, "--opprof", "--opprof-html=r.html")
    assert "profiler cost unknown (the unprofiled calls were disturbed: x0.10)" in (project.path / "r.html").read_text()
    result.stdout.fnmatch_lines(
        [
            "test_x.py::test_x [[]passed[]] (3 steps, *.* ms/step wall, profiler cost unknown (the unprofiled calls "
            "were disturbed: x0.10))"
        ]
    )


def test_an_overhead_seen_under_load_does_not_blame_the_profiler(project, fake_clock, monkeypatch, tmp_path):
    """A loaded runner read `profiled steps took x620.5 the time of unprofiled ones: the profiler
    distorted the run`: where the test's threads waited for a CPU, the warning says the load may
    have slowed the profiled steps too (in the summary and the JSON); a calm run keeps the fix."""
    from pytest_opprof import device

    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=3)\n"
    )
    fake_clock.unprofiled_ns = 10_000
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)  # half of every ns
    traces = tmp_path / "tr"
    result = run(
        project,
        "--opprof",
        f"--opprof-json={tmp_path / 'r.json'}",
        f"--opprof-trace-dir={traces}",
        "--opprof-trace=all",
        f"--opprof-html={tmp_path / 'r.html'}",
    )
    result.stdout.fnmatch_lines(
        [
            "test_x.py::test_x: warning overhead: profiled steps took x*.* the time of unprofiled ones (above x3) "
            "while the test's threads waited for a CPU 50% of the capture: other load may have slowed the profiled "
            "steps as much as the profiler did; rerun on a quiet machine to tell them apart"
        ]
    )
    assert "the profiler distorted the run" not in result.stdout.str()
    (check,) = [
        c for c in json.loads((tmp_path / "r.json").read_text())["tests"][0]["checks"] if c["name"] == "overhead"
    ]
    assert "other load may have slowed the profiled steps" in check["message"]
    (trace,) = traces.rglob("*.json.gz")  # its trace carries the wait: analyze judges it alike
    assert json.loads(gzip.decompress(trace.read_bytes()))["opprof"]["cpu_wait"] == pytest.approx(0.5, abs=0.01)
    shown = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "analyze", str(trace)], capture_output=True, text=True
    )
    assert re.search(
        r"overhead +profiled steps took x[\d.]+ the time of unprofiled ones \(above x3\) while", shown.stdout
    )
    assert "while the test's threads waited for a CPU 50% of the capture: other load may have" in shown.stdout
    # the contention warning itself, there and on the page (a trial's loaded failure said nothing of it)
    assert re.search(r"warning +contention +the test's threads waited for a CPU 50% of the capture", shown.stdout)
    page = (tmp_path / "r.html").read_text()
    assert "warning contention: the test&#x27;s threads waited for a CPU 50% of the capture" in page


# -- CSV and HTML reports -----------------------------------------------------------------------

REPORT_TESTS = """
from conftest import infer
def test_a(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=5)
def test_b(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=5)
    opprof.assert_op_count("aten::addmm", 3)
"""


def _csv_rows(path):
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_csv_report_has_a_row_per_test_and_op_with_the_baseline_columns(project, xdist):
    """--opprof-csv: every measured test's ops with the numbers of the terminal table (and of
    --opprof-json), the baseline's min and delta where there is one; the same under xdist."""
    project.makepyfile(test_r=REPORT_TESTS)
    run(project, "--opprof-update-baseline", "-k", "test_a").assert_outcomes(passed=1)
    result = run(project, "--opprof", "--opprof-csv", "out/r.csv", "--opprof-json", "r.json", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["opprof: wrote out/r.csv"])
    rows = _csv_rows(project.path / "out" / "r.csv")
    tests = json.loads((project.path / "r.json").read_text())["tests"]
    assert [r["test"] for r in rows] == sorted(r["test"] for r in rows)
    for test in tests:
        ops = test["profile"]["ops"]
        mine = [r for r in rows if r["test"] == test["nodeid"]]
        assert [r["op"] for r in mine] == [o["name"] for o in ops]
        for r, o in zip(mine, ops):
            assert float(r["calls_per_step"]) == o["per_step"]["calls"]["median"]
            assert float(r["cpu_ms_per_step"]) == pytest.approx(o["per_step"]["cpu_ms"]["median"])
            assert r["time"] == ("device" if o["on_device"] else "cpu")
    workers = {r["worker"] for r in rows}  # the xdist worker that ran each test's rows
    assert (workers and workers <= {"gw0", "gw1"}) if xdist else workers == {""}
    compared = [r for r in rows if r["test"].endswith("test_a")]
    assert all(float(r["baseline_min_ms_per_step"]) > 0 and r["delta_pct"] != "" for r in compared)
    assert {r["delta_pct"] for r in compared} == {"0.0"}  # the fake clock's times, in xdist's workers too
    assert all(r["baseline_min_ms_per_step"] == "" for r in rows if r["test"].endswith("test_b"))
    # each row says how its test ended (a trial's failed test read `ok` in every row)
    assert {r["outcome"] for r in compared} == {"passed"}
    assert {r["outcome"] for r in rows if r["test"].endswith("test_b")} == {"failed"}


def test_csv_report_has_a_row_for_each_test_without_ops_and_no_exponents(pytester, fake_clock):
    """A data-consumer trial's CSV-only dashboard never saw a test that erred with no op rows (a
    capture that ran no op) nor a skipped one: each has one row, `op` empty, with its outcome.
    Small times are positional (`0.000086`): a column mixing `8.6e-05` misordered under sort -n."""
    pytester.makepyfile(
        test_e="""
        import pytest, torch
        def test_ops(opprof):
            opprof.run(torch.ones, 2, warmup=1, steps=2)
        def test_no_op(opprof):
            opprof.run(lambda: None, warmup=1, steps=2)
        def test_skip(opprof):
            pytest.skip("not here")
        """
    )
    fake_clock.costs.update({"aten::ones": 86, "aten::empty": 0, "aten::fill_": 0})  # 8.6e-05 ms, as repr writes it
    run(pytester, "--opprof", "--opprof-csv=r.csv").assert_outcomes(passed=1, errors=1, skipped=1)
    rows = _csv_rows(pytester.path / "r.csv")
    assert {r["ms_per_step"] for r in rows if r["op"] == "aten::ones"} == {"0.000086"}
    opless = {r["test"]: r for r in rows if r["op"] == ""}
    assert sorted(opless) == ["test_e.py::test_no_op", "test_e.py::test_skip"]
    assert (opless["test_e.py::test_no_op"]["outcome"], opless["test_e.py::test_skip"]["outcome"]) == (
        "error",
        "skipped",
    )
    assert all(v == "" for r in opless.values() for k, v in r.items() if k not in ("test", "outcome"))
    assert {r["op"] for r in rows if r["test"] == "test_e.py::test_ops"} >= {"aten::ones"}
    assert not any("e-" in cell for r in rows for cell in r.values() if cell[:1].isdigit())


def test_an_op_that_no_longer_runs_has_a_row_in_every_table(project, monkeypatch):
    """A vanished op (a sigmoid taken out) was in no table: the terminal's, the CSV's and the
    HTML's rows all read `ok` while the test failed on it (a trial). It gets a row of its own: 0
    calls, its baseline min, `removed` (`ignored` where an ignore glob matches it), also under
    --opprof-top."""
    project.makepyfile(
        test_v="""
        import os, torch
        from conftest import infer
        def step(model, x):
            y = infer(model, x)
            return y if os.environ.get("NO_SIGMOID") else torch.sigmoid(y)
        def test_v(opprof, mlp):
            opprof.run(step, *mlp, warmup=1, steps=5)
        """
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("NO_SIGMOID", "1")
    result = run(project, "--opprof", "--opprof-top=2", "--opprof-csv=r.csv", "--opprof-html=r.html")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*structure changed: - aten::sigmoid (was 1/step)*"])
    (row,) = [line.split() for line in result.stdout.lines if line.startswith("aten::sigmoid ")]
    assert (row[1], row[-1]) == ("0", "removed") and float(row[2]) > 0  # its baseline min
    (gone,) = [r for r in _csv_rows(project.path / "r.csv") if r["op"] == "aten::sigmoid"]
    assert (gone["calls_per_step"], gone["ms_per_step"], gone["verdict"], gone["outcome"]) == (
        "0",
        "",
        "removed",
        "failed",
    )
    assert float(gone["baseline_min_ms_per_step"]) > 0
    page = (project.path / "r.html").read_text()
    assert "<tr><td>aten::sigmoid</td><td>0</td>" in page and page.count('<td class="verdict">removed</td>') == 1
    run(project, "--opprof", "--opprof-ignore-ops=aten::sigmoid", "--opprof-csv=r.csv").assert_outcomes(passed=1)
    (gone,) = [r for r in _csv_rows(project.path / "r.csv") if r["op"] == "aten::sigmoid"]
    assert gone["verdict"] == "ignored"


def test_html_report_is_one_self_contained_page(project):
    """--opprof-html: one file, no external resource, a section per test with its op table,
    top-op bars and baseline columns, and a relative link to the test's trace."""
    project.makepyfile(test_r=REPORT_TESTS)
    run(project, "--opprof-update-baseline", "-k", "test_a").assert_outcomes(passed=1)
    result = run(project, "--opprof", "--opprof-html", "out/r.html", "--opprof-trace-dir", "traces")
    result.stdout.fnmatch_lines(["opprof: wrote out/r.html"])
    page = (project.path / "out" / "r.html").read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "http://" not in page and "https://" not in page and "<link" not in page and " src=" not in page
    assert page.count('<section class="test"') == 2
    assert 'data-nodeid="test_r.py::test_a"' in page and "baseline compared" in page
    (trace,) = (project.path / "traces").iterdir()
    assert f'href="../traces/{trace.name}"' in page
    assert '<span class="outcome failed">failed</span>' in page and "aten::addmm" in page
    # the terminal table's columns, `self` among them
    assert "<th>op</th><th>calls/step</th><th>ms/step</th><th>self</th><th>min</th><th>time</th>" in page


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_the_html_page_says_why_each_test_failed(project, xdist, monkeypatch):
    """A failed test's section shows pytest's reason (the assertion's message, the verdicts the
    test failed on) and lists every verdict; a trial saw 8 failed badges and no reason at all."""
    extra = """
        import os, torch
        from conftest import infer
        def step(model, x):
            y = infer(model, x)
            return torch.relu(y) if os.environ.get("EXTRA") else y
        def test_a(opprof, mlp):
            opprof.run(step, *mlp, warmup=1, steps=5)
        def test_b(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=5)
            opprof.assert_op_count("aten::addmm", 3)
        """
    project.makepyfile(test_r=extra)
    run(project, "--opprof-update-baseline", "-k", "test_a").assert_outcomes(passed=1)
    monkeypatch.setenv("EXTRA", "1")
    run(project, "--opprof", "--opprof-html", "r.html", *xdist).assert_outcomes(failed=2)
    page = (project.path / "r.html").read_text()
    sections = {s.split('"', 1)[0]: s for s in page.split('<section class="test" data-nodeid="')[1:]}
    a, b = sections["test_r.py::test_a"], sections["test_r.py::test_b"]
    failure = a.split('<pre class="failure">Failed: structure changed: ', 1)[1].split("</pre>")[0]
    assert "aten::clamp_min 1 -&gt; 2/step" in failure and "aten::relu 1 -&gt; 2/step" in failure
    assert '<pre class="failure">AssertionError: aten::addmm: 2 calls/step, expected 3 (per step: 2, 2' in b
    # the verdicts the failure says already are not listed again (under xdist the workers time
    # for real: inconclusive time verdicts may be listed, each with its fix)
    assert "structure changed" not in a.split("</pre>", 1)[1] and "<li>" not in b


def test_bad_csv_and_html_paths_are_usage_errors(pytester):
    """A folder given as --opprof-csv or --opprof-html is a usage error at start."""
    pytester.makepyfile("def test_x(): pass")
    for flag in ("--opprof-csv", "--opprof-html"):
        result = run(pytester, "--opprof", flag, ".")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{flag}: '.' is not a file path: it names a folder (from command line)*"])


def test_no_stray_lines_from_torch_or_kineto_but_the_users_own_warnings_stay(pytester):
    """A measured run (in a subprocess: Kineto writes to the process's stderr, torch warns at
    import) shows no Kineto USDT/STAGE lines and no "Failed to initialize NumPy" warning, even
    in a failing test's captured stderr and with torch imported by the rootdir conftest; the
    user's own warning is still reported."""
    pytester.makeconftest("import torch\n")
    pytester.makepyfile(
        """
        import warnings
        import torch
        def test_fails(opprof):
            warnings.warn("the user's own warning", UserWarning, stacklevel=1)
            opprof.run(lambda: torch.ones(3) + 1, warmup=1, steps=2)
            opprof.assert_op_count("aten::add", 5)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof", "-rA")
    result.assert_outcomes(failed=1)
    text = result.stdout.str() + result.stderr.str()
    assert "USDT:" not in text and "STAGE:" not in text and "profiler_start" not in text
    assert "Failed to initialize NumPy" not in text
    assert "the user's own warning" in text


def test_quiet_profiler_keeps_every_other_line_written_to_stderr(capfd):
    """Around a profiler start or stop only Kineto's USDT and STAGE lines, and its no-driver line
    of a CUDA build without a GPU, are dropped from stderr; torch's one-cycle warning is dropped
    too, and every other warning kept."""
    import os
    import warnings

    from pytest_opprof.capture import quiet_profiler

    lines = [
        b"USDT:2026-11-30 14:46:05 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n",
        b"ERROR: CUPTI could not be initialised\n",
        b"STAGE:2026-11-30 14:46:07 1:1 SyncActivityProfilerHandler.cpp:51] Completed Stage: Warm Up\n",
        b"ERROR:2026-11-30 15:56:10 13453:13453 DeviceProperties.cpp:48] gpuGetDeviceCount failed with code 35\n",
    ]
    torch_211 = (
        "Warning: Profiler clears events at the end of each cycle.Only events from the current cycle "
        "will be reported.To keep events across cycles, set acc_events=True."
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_profiler():
            for line in lines:
                os.write(2, line)
            warnings.warn(torch_211, UserWarning, stacklevel=1)
            warnings.warn("the user's own warning", UserWarning, stacklevel=1)
    assert capfd.readouterr().err == "ERROR: CUPTI could not be initialised\n"
    assert [str(w.message) for w in caught] == ["the user's own warning"]


def test_a_path_after_the_update_flag_is_a_path_before_the_conftests_load(project):
    """`--opprof-update-baseline sub/test_x.py`: pytest loads the conftest of sub/ at start (as
    for `pytest sub/test_x.py`), not those of the default test paths."""
    project.makeini("[pytest]\ntestpaths = other\n")
    project.mkdir("other").joinpath("conftest.py").write_text(
        "def pytest_configure(config):\n    open('other-conftest-loaded', 'w').close()\n"
    )
    sub = project.mkdir("sub")
    sub.joinpath("conftest.py").write_text(
        "def pytest_configure(config):\n    open('sub-conftest-loaded', 'w').close()\n"
    )
    sub.joinpath("test_x.py").write_text(
        "import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(2) + 1, steps=2)\n"
    )
    result = run(project, "--opprof-update-baseline", "sub/test_x.py")
    result.assert_outcomes(passed=1)
    assert (project.path / "sub-conftest-loaded").exists()
    assert not (project.path / "other-conftest-loaded").exists()
    # the same path also given to another flag before it: that flag keeps its value
    result = run(project, "--deselect", "sub/test_x.py", "--opprof-update-baseline", "sub/test_x.py")
    result.assert_outcomes(deselected=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--opprof-json", ".opprof/cpu/test_x.py/test_x.json"],
            "--opprof-json: '.opprof/cpu/test_x.py/test_x.json' is inside the device-key folder */.opprof/cpu of the "
            "baselines; write it elsewhere*",
        ),
        (
            ["--opprof-trace-dir", ".opprof/cpu/traces"],
            "--opprof-trace-dir: '.opprof/cpu/traces' is inside the device-key folder*",
        ),
        (  # a key folder itself: traces among the committed baselines (a trial's, from the ini too)
            ["--opprof-trace-dir", ".opprof/cpu/"],
            "--opprof-trace-dir: '.opprof/cpu/' is the device-key folder */.opprof/cpu of the baselines; write the "
            "traces elsewhere (--opprof-trace-dir=opprof-traces): they would sit among committed baselines",
        ),
        (  # any other folder in it (a trial's .opprof/traces was accepted)
            ["--opprof-trace-dir", ".opprof/traces"],
            "--opprof-trace-dir: '.opprof/traces' is inside the baseline folder */.opprof; write the traces elsewhere "
            "(--opprof-trace-dir=opprof-traces): they would sit among committed baselines",
        ),
        (  # the baseline folder itself
            ["--opprof-trace-dir", ".opprof"],
            "--opprof-trace-dir: '.opprof' is the baseline folder */.opprof; write the traces elsewhere *",
        ),
        (  # this run's key folder, before it holds a baseline
            ["--opprof-device-key", "ci-box", "--opprof-trace-dir", "./.opprof/ci-box"],
            "--opprof-trace-dir: './.opprof/ci-box' is the device-key folder */.opprof/ci-box of the baselines; *",
        ),
        (
            ["--opprof-json", ".opprof/r.json"],
            "--opprof-json: '.opprof/r.json' is inside the baseline folder */.opprof, where opprof show and compare "
            "read every .json as a baseline; write it elsewhere",
        ),
        (
            ["--junitxml", "out/r.xml", "--opprof-json", "out/r.xml"],
            "--opprof-json: 'out/r.xml' is also --junitxml's path, which it would overwrite; give each report its own file",
        ),
        (
            ["--opprof-json", "out/same", "--opprof-csv", "out/./same"],
            "--opprof-csv: 'out/./same' is also --opprof-json's path, which it would overwrite; give each report its own file",
        ),
    ],
)
def test_reports_that_would_replace_a_baseline_or_each_other_are_refused_at_start(pytester, args, message):
    """A report path inside the baseline folder (a committed baseline would be replaced) or
    shared by two reports is a usage error at start, one line; nothing runs or is written."""
    pytester.makepyfile("def test_x(opprof): pass")
    baseline = pytester.path / ".opprof" / "cpu" / "test_x.py" / "test_x.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text('{"committed": true}\n')
    result = run(pytester, "--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert baseline.read_text() == '{"committed": true}\n' and not (pytester.path / "out").exists()


def test_reports_go_into_pipes_and_through_a_symlink_as_the_shell_would(project):
    """--opprof-json and --opprof-html into FIFOs are written into them (readers get the
    documents; the FIFOs stay FIFOs: /dev/stdout and /dev/null work the same way), a symlinked
    CSV path writes its target and the link stays a link. (Never tried on a real device here:
    a regression would replace it.)"""
    import os
    import stat
    import threading

    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    got: dict[str, bytes] = {}
    readers = []
    for name in ("json", "html"):
        os.mkfifo(project.path / name)
        read = (lambda n: lambda: got.__setitem__(n, (project.path / n).read_bytes()))(name)
        readers.append(threading.Thread(target=read, daemon=True))  # daemon: a regression must not hang the run
        readers[-1].start()
    (project.path / "real.csv").write_text("test,op,calls_per_step\n")  # an earlier report
    (project.path / "link.csv").symlink_to("real.csv")
    result = run(project, "--opprof", "--opprof-json", "json", "--opprof-csv", "link.csv", "--opprof-html", "html")
    for reader in readers:
        reader.join(timeout=30)
    result.assert_outcomes(passed=1)
    assert json.loads(got["json"])["tests"][0]["nodeid"].endswith("test_x.py::test_x")
    assert got["html"].startswith(b"<!doctype html>")
    assert all(stat.S_ISFIFO((project.path / name).stat().st_mode) for name in ("json", "html"))
    assert (project.path / "link.csv").is_symlink() and (project.path / "real.csv").read_text().startswith("test,op,")
    result.stdout.fnmatch_lines(["opprof: wrote json", "opprof: wrote link.csv", "opprof: wrote html"])


def test_a_node_id_pytest_leaves_unescaped_is_recorded_and_shown_escaped(project, capsys):
    """With pytest's id escaping turned off, a test id holds a raw tab: a review's run failed
    with a traceback when the reader refused it. It records and compares; `opprof show` prints
    it escaped."""
    project.makeini("[pytest]\ndisable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n")
    project.makepyfile(
        test_x="""
        import pytest
        from conftest import infer

        @pytest.mark.parametrize("n", [1], ids=["tab\\there"])
        def test_x(opprof, mlp, n):
            opprof.run(infer, *mlp, steps=2)
        """
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    result = run(project, "--opprof")
    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str()
    from pytest_opprof.cli import main

    capsys.readouterr()
    assert main(["show", str(project.path / ".opprof")]) == 0
    assert "test_x.py::test_x[tab\\there]" in capsys.readouterr().out


def test_a_report_at_a_symlink_loop_is_refused_and_the_links_left_alone(project):
    """A trial's `--opprof-json=l1` (l1 -> l2 -> l1) said `wrote l1` and replaced the link with a
    file; the shell's `>` fails there, and so does the run, before any test."""
    project.makepyfile(test_x="def test_x():\n    pass\n")
    (project.path / "l1").symlink_to("l2")
    (project.path / "l2").symlink_to("l1")
    result = run(project, "--opprof", "--opprof-json=l1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --opprof-json: 'l1': a symlink loop (to l2, which leads back); point the symlink at a file, or remove it"
        ]
    )
    assert (project.path / "l1").is_symlink() and os.readlink(project.path / "l1") == "l2"


def test_two_reports_may_share_a_pipe_but_not_a_file(tmp_path):
    """The start-up check of report paths: one FIFO (or device) may take two reports, one file
    may not; a report inside the baseline folder is refused."""
    import os

    from pytest_opprof.settings import Settings, output_paths_problem

    os.mkfifo(tmp_path / "pipe")
    shared = Settings(json_path=str(tmp_path / "pipe"), csv_path=str(tmp_path / "pipe"))
    assert output_paths_problem(shared, tmp_path / ".opprof") is None
    # /dev/fd/1 may be a log file or an unnamed pipe behind it: written through the descriptor, shareable
    own = Settings(json_path="/dev/fd/1", csv_path="/dev/fd/1")
    assert output_paths_problem(own, tmp_path / ".opprof") is None
    clash = Settings(json_path=str(tmp_path / "r"), csv_path=str(tmp_path / "r"))
    assert "is also --opprof-json's path" in (output_paths_problem(clash, tmp_path / ".opprof") or "")
    junit = output_paths_problem(
        Settings(json_path=str(tmp_path / "r.xml")), tmp_path / ".opprof", str(tmp_path / "r.xml")
    )
    assert "is also --junitxml's path" in (junit or "")
    inside = Settings(html_path=str(tmp_path / ".opprof" / "cpu" / "r.html"))
    assert "inside the device-key folder" in (output_paths_problem(inside, tmp_path / ".opprof") or "")
    beside = Settings(html_path=str(tmp_path / "r.html"))  # --opprof-baseline-dir=. : reports beside the key folders
    assert output_paths_problem(beside, tmp_path) is None
    read_as_baseline = Settings(json_path=str(tmp_path / "r.json"))  # ... but not a .json: show would read it
    assert "where opprof show and compare read every .json" in (output_paths_problem(read_as_baseline, tmp_path) or "")


def test_recording_names_the_tests_it_did_not_record_because_they_failed(project):
    """--opprof-update-baseline skips a test that failed its own assertions (its file is kept,
    its JSON baseline is null) and says so in one line; a passing test is recorded."""
    project.makepyfile(test_r=REPORT_TESTS)  # test_a passes, test_b fails its count
    out = project.path / "r.json"
    result = run(project, "--opprof-update-baseline", f"--opprof-json={out}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: baselines written: 1 new; *",
            "opprof: 1 test not recorded: it failed or erred (a baseline records code that passes its own checks; "
            "files as they were): test_r.py::test_b",
        ]
    )
    assert [p.name for p in (project.path / ".opprof").rglob("*.json")] == ["test_a.json"]
    tests = {t["nodeid"]: t for t in json.loads(out.read_text())["tests"]}
    assert tests["test_r.py::test_b"]["baseline"] is None and tests["test_r.py::test_a"]["baseline"]
    assert "not recorded" not in run(project, "--opprof").stdout.str()  # only when recording


def test_a_report_path_after_a_space_outside_the_project_is_refused(pytester, tmp_path_factory):
    """`--opprof-json /elsewhere/r.json` with a space, the file existing: pytest took it for a
    test path when it chose the rootdir (before it knew the option) and moved the rootdir, so
    baselines would be looked for and written elsewhere. Refused with the fix; `=` works, and so
    does the space when the rootdir did not move."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_x="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
    )
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "r.json"
    elsewhere.touch()  # an existing path (empty: an earlier report may be replaced)
    result = run(pytester, "--opprof", "--opprof-json", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --opprof-json {elsewhere}: write --opprof-json={elsewhere} (with '='): before it knows this option*"]
    )
    run(pytester, "--opprof", f"--opprof-json={elsewhere}").assert_outcomes(passed=1)
    run(pytester, "--opprof", "--opprof-json", "inside.json").assert_outcomes(passed=1)  # not an existing path
    # With a test path, pytest finds the project's ini from it: the rootdir did not move, no refusal
    run(pytester, "test_x.py", "--opprof", "--opprof-json", str(elsewhere)).assert_outcomes(passed=1)


@pytest.mark.parametrize("flag", ["--opprof-json", "--opprof-csv", "--opprof-html"])
def test_a_report_path_naming_a_file_that_is_no_report_is_refused_and_the_file_kept(pytester, flag):
    """`pytest --opprof --opprof-json tests/test_model.py`, the report's path forgotten: the test
    file was overwritten with JSON (a trial's real test file), as `requirements.txt` or a
    `package.json` would be. An existing file is replaced only when it is an earlier report."""
    source = "import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
    written = {
        "test_x.py": pytester.makepyfile(test_x=source),
        "requirements.txt": pytester.makefile(".txt", requirements="torch==2.13.0"),
        "package.json": pytester.makefile(".json", package='{"name": "x"}'),
    }
    before = {name: path.read_text() for name, path in written.items()}
    suffix = {"--opprof-json": ".json", "--opprof-csv": ".csv", "--opprof-html": ".html"}[flag]
    for target in written:
        result = run(pytester, "--opprof", flag, target)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: {flag}: '{target}' is an existing file, not an opprof report, *({flag}=report{suffix})"]
        )
    assert {name: path.read_text() for name, path in written.items()} == before
    for _ in range(2):  # an earlier report of its own is replaced, run after run
        run(pytester, "--opprof", f"{flag}=report{suffix}").assert_outcomes(passed=1)
    # another kind of report is kept too, and named as one (a trial's JSON report given to --opprof-csv)
    other = "--opprof-csv" if flag == "--opprof-json" else "--opprof-json"
    result = run(pytester, "--opprof", f"{other}=report{suffix}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {other}: 'report{suffix}' is an existing file, an opprof report of another kind ({flag}'s), *"]
    )
    (pytester.path / f"empty{suffix}").touch()
    run(pytester, "--opprof", f"{flag}=empty{suffix}").assert_outcomes(passed=1)


def test_the_report_heads_the_guard_knows_are_how_the_reports_begin(tmp_path):
    """The guard above tells an earlier report by its first bytes: they must be the writers'."""
    from pytest_opprof.htmlreport import page_head
    from pytest_opprof.runfiles import CSV_HEADER_LINE, ReportSpool, write_run_report
    from pytest_opprof.settings import REPORT_HEAD

    spool = ReportSpool()
    write_run_report(tmp_path / "r.json", {"torch": "2.13.0"}, "cpu-x86_64", spool)
    spool.close()
    assert (tmp_path / "r.json").read_bytes().startswith(REPORT_HEAD["--opprof-json"])
    assert CSV_HEADER_LINE.encode().startswith(REPORT_HEAD["--opprof-csv"])
    assert page_head({}, None, 0).encode().startswith(REPORT_HEAD["--opprof-html"])


def test_a_path_after_a_space_that_hides_the_ini_turning_opprof_on_is_refused(pytester, tmp_path_factory):
    """`opprof = true` in the ini, no --opprof on the command line: the moved rootdir meant the ini
    was never read, and the run went by unmeasured with exit 0 (a trial's CI line, failing test
    passing). Refused as when --opprof is given."""
    pytester.makeini("[pytest]\nopprof = true\n")
    pytester.makepyfile(
        test_x="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
        "    opprof.assert_op_count('aten::add', 5)\n"
    )
    artifacts = tmp_path_factory.mktemp("artifacts")
    result = run(pytester, "--opprof-trace-dir", str(artifacts))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --opprof-trace-dir {artifacts}: write --opprof-trace-dir={artifacts} *"])
    run(pytester, f"--opprof-trace-dir={artifacts}").assert_outcomes(failed=1)  # measured: the ini was read


def test_a_pipe_nobody_reads_is_one_summary_line_not_a_hang(project):
    """--opprof-json into a FIFO with no reader would block the run at its end for ever (CI
    jobs hang): one line says so, the run ends with the tests' own exit code."""
    import os

    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    os.mkfifo(project.path / "pipe")
    result = run(project, "--opprof", "--opprof-json=pipe")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["opprof: --opprof-json: could not write pipe (no process reads this pipe); *"])


RANGE_TESTS = """
import torch
from conftest import infer

def blocks(model, x):
    with torch.profiler.record_function("encoder"):
        y = infer(model, x)
    with torch.profiler.record_function("head"):
        return torch.relu(y)

def test_ranges_pass(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_range_below("encoder", ms=1000)
    opprof.assert_range_below("*", ms=1000, per="call", stat="max")

def test_range_over(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_range_below("head", ms=0.000001)

def test_op_assertion_on_a_range(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_op_count("encoder", 1)

def test_range_typo(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_range_below("encodr", ms=1)
"""


def test_record_function_ranges_are_reported_and_asserted(project):
    """A test's record_function blocks: a range table under its op table, `ranges` in the JSON and
    the HTML, assert_range_below on their time, and an op assertion given a range's name says so
    (it said "no op of that name ran", as if the block had not run)."""
    project.makepyfile(test_r=RANGE_TESTS)
    result = run(project, "--opprof", "--opprof-json", "r.json", "--opprof-html", "r.html")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "E * head: 0.* ms/step > limit 0.000001 ms (median of 3 steps; *",
            "E * encoder: a range (a record_function block or annotation), not an op; "
            "assert_range_below('encoder', ...) checks it",
            "E * encodr: no range of that name ran in the measured code; closest: encoder",
            "test_r.py::test_ranges_pass [[]passed] *",
            "range (record_function)*calls/step*cpu ms/step*device ms/step*of step",
            "encoder *1 *0.* -*",
        ]
    )
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    ranges = {r["name"]: r for r in tests["test_r.py::test_ranges_pass"]["profile"]["ranges"]}
    assert set(ranges) == {"encoder", "head"}
    assert ranges["encoder"]["per_step"]["calls"]["samples"] == [1, 1, 1] and ranges["encoder"]["cpu_ms"] > 0
    assert not ranges["encoder"]["on_device"] and ranges["encoder"]["device_ms"] == 0
    page = (project.path / "r.html").read_text()
    assert page.count('<table class="ranges">') == 4 and "<td>encoder</td><td>1</td>" in page


def test_a_run_in_a_fixture_is_the_tests_capture(pytester):
    """A trial's fixture that called opprof.run() made its test an error (`the test's body ran no
    torch operator, and called neither opprof.run() nor opprof.capture()`): the whole-call capture
    started after setup found nothing and replaced the fixture's. The fixture's capture is the
    test's: its assertions check it at once (pytest.raises and xfail see their AssertionError), and
    it is reported and recorded. The body is not captured: a review's numerics check after the
    gate (`torch.isfinite(y).all()`) replaced the fixture's capture in the report and baseline, and
    an audit's `assert_no_op("aten::zeros")` passed beside a report listing the body's zeros. A
    run() in the body measures, as a second capture."""
    pytester.makepyfile(
        test_fx="""
        import pytest, torch

        @pytest.fixture
        def measured(opprof):
            opprof.run(lambda: torch.mm(torch.ones(4, 4), torch.ones(4, 4)), warmup=1, steps=3)
            return opprof

        def test_ok(measured):
            measured.assert_op_count("aten::mm", 1)

        def test_wrong(measured):
            measured.assert_op_count("aten::mm", 2)

        def test_body_runs_ops(measured):  # the gate, then a numerics check: the fixture's capture stays
            measured.assert_op_count("aten::mm", 1)
            assert torch.isfinite(torch.ones(3).double()).all()
            measured.assert_no_op("aten::isfinite")

        def test_raises(measured):
            with pytest.raises(AssertionError, match="expected 5"):
                measured.assert_op_count("aten::mm", 5)

        def test_body_measures(measured):
            measured.run(torch.ones, 3, warmup=1, steps=2)
            measured.assert_no_op("aten::mm")

        def test_body_asserts_on_its_own_ops(measured):
            torch.ones(3).double()
            measured.assert_op_count("aten::_to_copy", 1)
        """
    )
    result = run(pytester, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        [
            "E *aten::_to_copy: no op of that name ran in the measured code* (checked on the fixture's capture: the "
            "test body is not captured; measure it with opprof.run() or `with opprof.capture():`)"
        ]
    )
    result.stdout.fnmatch_lines(["E *aten::mm: 1 calls/step, expected 2*"])
    assert "ran no torch operator" not in result.stdout.str()
    result.stdout.fnmatch_lines(["test_fx.py::test_body_measures: 2 captures in one test: *"])
    assert "test_body_runs_ops: 2 captures" not in result.stdout.str()
    tests = {t["nodeid"]: t for t in json.loads((pytester.path / "r.json").read_text())["tests"]}
    for name in ("test_ok", "test_body_runs_ops"):
        ops = {op["name"] for op in tests[f"test_fx.py::{name}"]["profile"]["ops"]}
        assert tests[f"test_fx.py::{name}"]["profile"]["steps"] == 3 and "aten::mm" in ops
        assert not ops & {"aten::isfinite", "aten::_to_copy"}
    body = {op["name"] for op in tests["test_fx.py::test_body_measures"]["profile"]["ops"]}
    assert "aten::ones" in body and "aten::mm" not in body
    assert (pytester.path / ".opprof").exists() and list((pytester.path / ".opprof").rglob("test_body_runs_ops.json"))
    run(pytester, "--opprof").assert_outcomes(passed=4, failed=2)


@pytest.mark.parametrize("flag", [None, "--opprof", "--opprof-update-baseline"])
def test_a_capture_in_a_fixtures_teardown_is_refused_and_an_assertion_there_checks_the_call(pytester, flag):
    """A trial's yield fixture measured after the test: its capture was never reported nor
    recorded (the body's was), and without --opprof a body's assertions were said to come `before
    opprof.run()`. Under --opprof refused, naming the test and the fix; no file is written; an
    assertion in a teardown still checks the test's capture (`yield; opprof.assert_no_op(...)`).
    Without --opprof run() calls fn once, as DESIGN has it, and says nothing of the body's."""
    pytester.makepyfile(
        test_td="""
        import pytest, torch

        @pytest.fixture
        def after(opprof):
            yield
            opprof.run(torch.ones, 3, warmup=1, steps=2)

        @pytest.fixture
        def block_after(opprof):
            yield
            with opprof.capture():
                torch.ones(3)

        def test_run_after(after, opprof):
            torch.ones(2)
            opprof.assert_op_count("aten::ones", 1)

        def test_block_after(block_after):
            torch.ones(2)

        @pytest.fixture
        def no_mm(opprof):
            yield
            opprof.assert_no_op("aten::mm")

        def test_checked_after(no_mm):
            torch.mm(torch.ones(2, 2), torch.ones(2, 2))

        def test_clean_after(no_mm):
            torch.ones(2) + 1
        """
    )
    result = run(pytester, *([flag] if flag else []))
    measuring = flag is not None
    result.assert_outcomes(passed=4, errors=3 if measuring else 0)  # without --opprof run() calls fn once (DESIGN)
    assert "before opprof.run()" not in result.stdout.str()  # the body's assertions came before no capture
    if not measuring:
        return
    for what, test in (("run()", "test_run_after"), ("capture()", "test_block_after")):
        result.stdout.fnmatch_lines(
            [
                f"E   *OpprofUsageError: opprof.{what} in the teardown of test_td.py::{test}: a test's capture is "
                "judged, recorded and reported when its call ends, so one made after it would count for nothing; "
                "measure before the fixture's `yield`, or in the test body"
            ]
        )
    assert "before opprof.run()" not in result.stdout.str()
    if measuring:
        result.stdout.fnmatch_lines(["ERROR test_td.py::test_checked_after - AssertionError: aten::mm: *"])
    assert not (pytester.path / ".opprof").exists() or flag == "--opprof-update-baseline"
    recorded = {p.stem for p in (pytester.path / ".opprof").rglob("*.json")} if flag else set()
    assert "test_run_after" not in recorded and "test_block_after" not in recorded


def test_an_async_fn_inside_a_running_event_loop_is_told_the_fix_that_works_there(pytester):
    """A trial's async test followed `pass lambda: asyncio.run(fn(...))` and got `asyncio.run()
    cannot be called from a running event loop`. Inside a running loop the fix is a capture
    block around the awaits, which then measures (asyncio.run stands in for pytest-asyncio)."""
    pytester.makepyfile(
        test_aio="""
        import asyncio, torch

        async def step():
            await asyncio.sleep(0)
            return torch.ones(3) + 1

        def test_told(opprof):
            async def body():
                opprof.run(step, steps=2)
            asyncio.run(body())

        def test_the_fix(opprof):
            async def body():
                with opprof.capture():
                    await step()
                opprof.assert_op_count("aten::add", 1)
            asyncio.run(body())
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E  *OpprofUsageError: fn=<function step at *>: expected a function that does its work when called, not "
            "an async def (a call only makes a coroutine); an event loop runs here (an async test), where asyncio.run "
            "cannot: measure the awaits as one step, with opprof.capture(): await fn(...)"
        ]
    )


def test_a_failure_outside_the_tests_code_shows_no_frame_of_ours(pytester):
    """A trial's hypothesis health check (raised in hypothesis's wrapper, not the test) showed its
    traceback through `pytest_opprof/plugin.py` (_ThreadLeaks.pytest_runtest_call), also for a
    test without opprof: our hook wrappers hide their frames."""
    pytester.makepyfile(
        wrapper="""
        import functools
        def checked(fn):
            @functools.wraps(fn)
            def wrapped(*args, **kwargs):
                raise RuntimeError("refused by the wrapper")
            return wrapped
        """,
        test_w="""
        import torch
        from wrapper import checked

        @checked
        def test_plain():
            pass

        @checked
        def test_measured(opprof):
            torch.ones(2)
        """,
    )
    result = run(pytester, "--opprof", "--tb=long")
    result.assert_outcomes(failed=2)
    assert result.stdout.str().count("RuntimeError: refused by the wrapper") >= 2
    assert "pytest_opprof/plugin.py" not in result.stdout.str()


def test_a_measured_test_file_outside_the_rootdir_is_refused_at_start(pytester):
    """pytest gives tests in files outside the rootdir node ids without the file (`::test_x`): a
    trial's two such files shared one baseline, each compared with the other's. Refused at start
    under --opprof, one line a file; a plain run (no baselines) runs them."""
    root = pytester.mkdir("proj")
    (root / "pytest.ini").write_text("[pytest]\n")
    for name in ("a", "b"):
        folder = pytester.mkdir(f"other_{name}")
        (folder / f"test_{name}.py").write_text(
            "import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(2) + 1, steps=2)\n"
        )
    args = ("--rootdir", str(root), "-c", str(root / "pytest.ini"), "other_a/test_a.py", "other_b/test_b.py")
    result = run(pytester, "--opprof-update-baseline", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: opprof: */other_a/test_a.py lies outside the rootdir */proj: its tests' node ids (*) are no "
            "paths under the rootdir, so their baselines would be shared with other tests of that name *",
            "opprof: */other_b/test_b.py lies outside the rootdir *",
        ]
    )
    assert not list(pytester.path.rglob("*.json"))
    run(pytester, *args).assert_outcomes(passed=2)
    run(pytester, "--opprof", "-k", "nothing", *args).assert_outcomes(deselected=2)  # judged after -k
    # a test file linked into the rootdir (a Bazel runfiles tree) has a node id under it: measured
    (root / "tests").mkdir()
    (root / "tests" / "test_link.py").symlink_to(pytester.path / "other_a" / "test_a.py")
    linked = ("--rootdir", str(root), "-c", str(root / "pytest.ini"), str(root / "tests" / "test_link.py"))
    run(pytester, "--opprof-update-baseline", *linked).assert_outcomes(passed=1)
    assert list((root / ".opprof").rglob("tests/test_link.py/test_x.json"))


def test_package_test_files_outside_the_rootdir_are_refused_at_start(pytester):
    """Test files of packages outside the rootdir get node ids from their package's parent: a
    trial's `../a/test_same.py` and `../b/test_same.py` were both `test_same.py::test_x`, and
    shared one baseline (each later run failed one of them). Refused at start, by the file's path."""
    root = pytester.mkdir("proj")
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, layers in (("a", 1), ("b", 2)):
        folder = pytester.path / "other" / name
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "test_same.py").write_text(
            "import torch\n"
            "def test_x(opprof):\n"
            f"    m = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range({layers})])\n"
            "    opprof.run(m, torch.ones(2, 4), steps=2)\n"
        )
    args = ("--rootdir", str(root), "-c", str(root / "pytest.ini"), "other/a", "other/b")
    result = run(pytester, "--opprof-update-baseline", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: opprof: */other/a/test_same.py lies outside the rootdir */proj: its tests' node ids "
            "('test_same.py::test_x') are no paths under the rootdir*",
            "opprof: */other/b/test_same.py lies outside the rootdir *",
        ]
    )
    assert not list(pytester.path.rglob("*.json"))


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
    lines = sorted(line for line in result.stdout.lines if "keep its baseline" in line)
    assert [line.split(" has no baseline")[0] for line in lines] == [
        "opprof: test_r.py::test_params[a b]",
        "opprof: test_r.py::test_params[c]",
        "opprof: test_r.py::test_params[x/y]",
    ]
    for line in lines:
        old, nodeid = shlex.split(line.split("opprof mv ")[1])
        was = json.loads((pytester.path / old).read_text())["nodeid"]  # the same id, of the old name
        assert was.replace("::test_param[", "::test_params[") == nodeid
        _run_kept(line, pytester.path, monkeypatch)
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=3)
    assert "no baseline" not in result.stdout.str() and "read by no test" not in result.stdout.str()
    monkeypatch.setenv("NAME", "test_other")
    monkeypatch.setenv("LAST", "d")  # renamed, and an id changed: not the same tests
    result = run(pytester, "--opprof")
    assert "keep its baseline" not in result.stdout.str() and "read by no test" in result.stdout.str()


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


def test_an_exported_trace_names_its_test_and_compare_warns_of_two(project, capsys):
    """A trial's six long parametrized ids gave six files named alike but for a hash, and
    `opprof compare` of two unrelated traces said nothing: the header carries the node id and
    the outcome, and comparing traces of two tests says so."""
    from pytest_opprof.cli import main

    project.makepyfile(
        test_t="""
        import pytest
        from conftest import infer

        @pytest.mark.parametrize("n", [1, 2])
        def test_x(opprof, mlp, n):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    run(project, "--opprof", "--opprof-trace-dir=tr", "--opprof-trace=all").assert_outcomes(passed=2)
    traces = sorted((project.path / "tr").glob("*.json.gz"))
    headers = [json.loads(gzip.decompress(t.read_bytes()))["opprof"] for t in traces]
    assert sorted((h["nodeid"], h["outcome"]) for h in headers) == [
        ("test_t.py::test_x[1]", "passed"),
        ("test_t.py::test_x[2]", "passed"),
    ]
    capsys.readouterr()
    main(["compare", str(traces[0]), str(traces[1])])
    out = capsys.readouterr().out
    assert "warning: A and B are traces of two tests (test_t.py::test_x[" in out


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


def test_a_model_run_on_a_pool_thread_is_warned_of_and_its_missing_op_says_where_it_went(pytester):
    """A trial's fn ran the model in a ThreadPoolExecutor: its ops were missing, and the test's
    `no op of that name` failure gave no clue. The test's line warns of the pool's thread, the
    JSON report holds the warning, and the failure names the thread."""
    pytester.makepyfile(
        test_pool="""
        from concurrent.futures import ThreadPoolExecutor
        import torch

        def test_pool(opprof):
            x = torch.ones(8, 8)

            def fn():
                with ThreadPoolExecutor(1, thread_name_prefix="model") as pool:
                    return pool.submit(torch.sin, x).result().add(1)  # the add on the test's thread

            opprof.run(fn, warmup=1, steps=3)
            opprof.assert_op_below("aten::sin", ms=5)
        """
    )
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * aten::sin: no op of that name ran in the measured code; *; other Python threads ran during the "
            "capture (model_0 (3 threads)), and torch.profiler does not record their ops",
            "test_pool.py::test_pool: warning other_threads: 3 other Python threads ran during the capture (model_0 "
            "(3 threads): started in it): torch.profiler records the ops of the thread that runs the steps only, *",
        ]
    )
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert [c["status"] for c in test["checks"] if c["name"] == "other_threads"] == ["warning"]


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
