"""End to end: the three capture modes and the assertions, captures made in fixtures and on other threads, through pytest runs of a user project."""

from __future__ import annotations

import gzip
import json
import os
import re
import xml.etree.ElementTree as ET
from fnmatch import fnmatch
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from plugin_project import USER_CONFTEST, deterministic_fixture, project_fixture, run  # noqa: F401 (fixtures: used by name)

from pytest_opprof.cli import main as cli_main  # noqa: E402
from pytest_opprof.errors import (  # noqa: E402
    cut_short_trace,
)

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
    # as a plain run says it (a trial's typo read two ways: `no op of that name ran ...; closest:`)
    "test_fail_typo": "*AssertionError: aten::adddmm: not an operator torch knows; did you mean aten::addmm*",
    # made in the body of a whole-call capture, checked when it returns: it names its line
    "test_fail_deferred": "test_user.py:*: aten::relu: 1 calls/step, expected 5 (per step: 1; called from Python; inputs float[[]4,64])",
    "test_fail_bad_argument": "*OpprofUsageError: ms=-1: expected a finite number of milliseconds >= 0",
    "test_fail_bad_steps": "*OpprofUsageError: steps=0: expected a whole number >= 1",
}


def test_an_abbreviated_op_name_is_offered_the_op_it_abbreviates(pytester):
    """An LLM trial's `assert_op_count("aten::sdpa", 2)` read `not an operator torch knows`, no
    more: initials of an op's words name it first."""
    pytester.makepyfile(
        test_abbr="""
        import torch

        q = torch.randn(1, 2, 4, 8)

        def test_sdpa(opprof):
            opprof.run(torch.nn.functional.scaled_dot_product_attention, q, q, q, warmup=1, steps=2)
            opprof.assert_op_count("aten::sdpa", 1)
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E *: aten::sdpa: not an operator torch knows; did you mean aten::scaled_dot_product_attention?"]
    )


def test_a_typo_of_an_op_of_another_namespace_that_ran_fails_assert_no_op(pytester):
    """A trial's `assert_no_op("quantized::linear_dynamc")` passed beside the
    `quantized::linear_dynamic` it meant: where an op of the namespace ran, the name is checked as
    an aten name is; so is a namespace a letter from one whose op of that name ran (a trial's
    `mylb::myop` beside mylib::myop). A namespace none of whose ops ran (a label's) cannot be checked."""
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

        def test_namespace_slip(opprof):
            opprof.run(model, x, warmup=1, steps=2)
            opprof.assert_no_op("quantizd::linear_dynamic")
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["*quantized::linear_dynamc: not an operator torch knows*did you mean quantized::linear_dynamic?*"]
    )
    result.stdout.fnmatch_lines(
        ["*quantizd::linear_dynamic: not an operator torch knows*did you mean quantized::linear_dynamic?*"]
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


SHARE_TESTS = """
from conftest import infer


def test_share_within(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=4)
    opprof.assert_op_share_below("aten::addmm", 99)
    opprof.assert_op_share_below("aten::relu", 5)


def test_share_over(opprof, mlp):
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=4)
    opprof.assert_op_share_below("aten::addmm", 50)


def test_share_whole_call(opprof, mlp):
    opprof.assert_op_share_below("aten::addmm", 50)
    infer(*mlp)


def test_share_typo(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
    opprof.assert_op_share_below("aten::addmn", 50)


def test_share_fraction(opprof):
    opprof.assert_op_share_below("aten::addmm", 0.5)


def test_share_keyword(opprof):
    opprof.assert_op_share_below("aten::addmm", percent=50)
"""


def test_op_share_below_through_the_plugin(project, fake_clock, monkeypatch):
    """assert_op_share_below under --opprof: addmm's 1 ms calls take 95.5% of each step on the
    fake clock, so a 99% limit passes and a 50% one fails with the median of the steps' shares,
    in a run() and in a whole call; a typo names the op it meant. A fraction or a wrong keyword fails in
    one line with or without --opprof, and a plain run refuses the typo too (torch is imported)."""
    monkeypatch.setenv("COLUMNS", "1000")
    fake_clock.costs["aten::addmm"] = 1_000_000
    project.makepyfile(test_share=SHARE_TESTS)
    lines = SHARE_TESTS.strip("\n").splitlines()  # makepyfile dedents and strips the text
    whole_call = 1 + lines.index(
        '    opprof.assert_op_share_below("aten::addmm", 50)', lines.index("def test_share_whole_call(opprof, mlp):")
    )
    result = run(project, "--opprof")
    result.assert_outcomes(passed=1, failed=5)
    result.stdout.fnmatch_lines_random(
        [
            "E *AssertionError: aten::addmm: 95.5% of the step > limit 50% (median of 4 steps; min 95.5%, max 95.5%)",
            f"test_share.py:{whole_call}: aten::addmm: 95.5% of the step > limit 50% (median of 1 step; "
            "min 95.5%, max 95.5%)",
            "E *AssertionError: aten::addmn: not an operator torch knows; did you mean aten::addmm*",
            "E *OpprofUsageError: pct=0.5: expected a percentage between 0 and 100, not a fraction: write 50 for 50%",
            "E *OpprofUsageError: opprof.assert_op_share_below() takes no keyword 'percent'; did you mean pct=50? "
            "(it takes op, pct, stat='median')",
        ]
    )
    plain = run(project)  # nothing measured: only the arguments are checked
    plain.assert_outcomes(passed=3, failed=3)
    plain.stdout.fnmatch_lines_random(
        [
            "E *OpprofUsageError: aten::addmn: not an operator torch knows; did you mean aten::addmm*",
            "E *OpprofUsageError: pct=0.5: expected a percentage between 0 and 100, not a fraction: write 50 for 50%",
            "E *OpprofUsageError: opprof.assert_op_share_below() takes no keyword 'percent'; did you mean pct=50? *",
        ]
    )


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
    without --opprof. `limit` and `count`, docs/bad-input.md's examples, named no keyword (an audit): the
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
                "E *OpprofUsageError: opprof.assert_no_op(): too many positional arguments (it takes op, *, dtype=None)",
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


def test_the_profiler_cost_of_steps_that_did_other_work_is_unknown(pytester):
    """A data trial's cycled batches read `profiler x0.52`: the fastest profiled step ran the
    cheapest batch, the unprofiled calls others. Where the steps did other work the header says the
    cost is unknown, and why."""
    pytester.makepyfile(
        test_cycle="""
        import itertools
        import torch

        batches = itertools.cycle([torch.randn(8, 8), torch.randn(64, 64), torch.randn(8, 8)])

        def fn(x):
            y = x
            for _ in range(1 if x.shape[0] == 8 else 6):
                y = torch.relu(y @ x)
            return y

        def test_cycle(opprof):
            opprof.run(lambda: fn(next(batches)), warmup=1, steps=6)
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_cycle.py::test_cycle [[]passed[]] (6 steps, *.* ms/step wall, profiler cost unknown (the steps did other work: x*))"
        ]
    )


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

def test_suspended_block(opprof, mlp):  # an async test's block, suspended at an await a timeout ended
    def coroutine():
        with opprof.capture():
            infer(*mlp)
            yield
    suspended = coroutine()
    next(suspended)
    pytest.fail("Timeout (>1.0s) from pytest-timeout.")  # raised in the event loop, outside the block

def test_after_the_suspended_block():
    assert not torch.autograd._profiler_enabled()
"""


def test_a_test_failing_in_a_capture_leaves_the_timeline_up_to_its_failure(project, capsys):
    """A capture the test's exception ended (the whole call, a block, run()'s steps) is the failing
    test's trace, table and JSON profile, said to be cut short; it writes no baseline. So is a block
    a failure left open (an async test suspended in it that pytest-timeout ended: a trial's got no
    line), and the profiler is stopped before the next test."""
    project.makepyfile(test_cut=CUT_SHORT_TESTS)
    result = run(
        project, "--opprof-update-baseline", "--opprof-trace-dir=traces", "--opprof-json=r.json", "--junitxml=j.xml"
    )
    result.assert_outcomes(passed=2, failed=7, skipped=1)
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    failing = ("test_marker", "test_whole_call", "test_block", "test_run", "test_signature", "test_suspended_block")
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
    assert len(list((project.path / "traces").iterdir())) == 7
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


def test_a_long_test_ids_trace_keeps_the_test_name_and_the_earlier_naming_goes(project):
    """A long id's trace name keeps its start and its end, the test's name (a scripting trial's
    `tests_dddd...-f8468d97.json.gz` kept a long folder's name only); the file an earlier release
    named by the start alone is removed as this test's stale trace."""
    from pytest_opprof.files import safe_name

    folder = project.mkpydir("d" * 120)
    (folder / "test_deep.py").write_text(
        "from conftest import infer\n"
        "def test_fails(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n    assert False\n"
        "def test_passes(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    traces = project.path / "traces"
    traces.mkdir()
    former = safe_name(f"{folder.name}/test_deep.py::test_passes")
    for name in (f"{former}.json.gz", f"{former}.gw1.json.gz"):  # and a `--dist each` worker's
        (traces / name).write_bytes(b"an earlier release's trace")
    run(project, "--opprof", "--opprof-trace-dir=traces").assert_outcomes(passed=1, failed=1)
    [trace] = [f.name for f in traces.iterdir()]
    assert trace.startswith("d" * 30 + "...") and "_test_deep.py_test_fails-" in trace and len(trace) <= 117


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
                "(assert_op_below, assert_total_below) read that load, and the run takes longer; op counts are exact "
                f"as ever. For times, run without -n, or *OMP_NUM_THREADS={share}*, recording and checking alike (a "
                "thread count changes how some ops split their work: record the baselines with the setting that checks "
                "them)"
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
    traceback through `pytest_opprof/plugin.py` (then _ThreadLeaks.pytest_runtest_call), also for a
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
    assert not re.search(r"pytest_opprof/plugin[/\w]*\.py", result.stdout.str())


# -- a test that spies on or mocks torch's functions: opprof's own calls go past it --------------

MOCKING_TESTS = """
from unittest import mock

import torch


def scale_and_project(a, w):
    return torch.mm(torch.add(a, 1.0), w)


def test_spy_sees_its_own_calls(opprof):
    a, w = torch.randn(8, 8), torch.randn(8, 4)
    with mock.patch("torch.mm", wraps=torch.mm) as mm, mock.patch("torch.add", wraps=torch.add) as add:
        with opprof.capture():
            scale_and_project(a, w)
    assert (mm.call_count, add.call_count) == (1, 1)


def test_add_made_to_raise(opprof):
    a = torch.randn(8, 8)
    with mock.patch("torch.add", side_effect=RuntimeError("add is not to be called here")):
        opprof.run(torch.mm, a, a, warmup=1, steps=5)


def test_thread_count_mocked(opprof):
    a = torch.randn(8, 8)
    with mock.patch("torch.get_num_threads", return_value=97), mock.patch("torch.set_num_threads"):
        opprof.run(torch.mm, a, a, warmup=1, steps=5)


def test_thread_count_bare_mock(opprof):
    a = torch.randn(8, 8)
    with mock.patch("torch.get_num_threads"):
        opprof.run(torch.mm, a, a, warmup=1, steps=5)
"""


def test_a_tests_spies_and_mocks_of_torch_see_its_own_calls_and_opprof_reads_the_machine(project):
    """A test that spies on or mocks torch.mm, torch.add or torch.get_num_threads (pytest-mock,
    monkeypatch) sees its own calls only, and opprof's references and thread count stay true: a
    trial's spy counted 169 calls of torch.mm around a capture of one, a torch.add made to raise
    failed with a traceback from opprof's dispatch reference, a bare mock of get_num_threads with
    a TypeError from opprof's thread watch, and one returning 8 recorded 8 threads on a 2-CPU
    machine. (This project's clock and references are fake: the references under mocks are
    test_capture's test_the_references_and_the_busy_pause_go_past_a_tests_mocks_of_torch.)"""
    project.makepyfile(test_mocking=MOCKING_TESTS)
    result = run(project, "--opprof-update-baseline")
    result.assert_outcomes(passed=4)
    assert "Traceback" not in result.stdout.str()
    baselines = sorted((project.path / ".opprof").rglob("test_thread_count*.json"))
    assert len(baselines) == 2
    for path in baselines:
        assert json.loads(path.read_text())["capture"]["threads"] == torch.get_num_threads(), path
    result = run(project, "--opprof")
    result.assert_outcomes(passed=4)
