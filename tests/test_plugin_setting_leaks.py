"""End to end: torch settings other than the thread count (the default dtype, grad mode, the
matmul precision...) that a test or fixture changed and left for the tests after it, through
pytest runs of a user project. The thread count's own cases: test_plugin_baselines.py."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from plugin_project import deterministic_fixture, project_fixture, run  # noqa: E402, F401 (fixtures: used by name)

GRADCHECK = """
import os
import torch
from conftest import infer

def test_a_gradcheck():  # a numerical check in float64, the default dtype left so where OPPROF_LEAK is set
    torch.set_default_dtype(torch.float64)
    x = torch.randn(3, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
    if not os.environ.get("OPPROF_LEAK"):
        torch.set_default_dtype(torch.float32)

def test_b_after(opprof, mlp):  # mlp builds its model and input in the default dtype
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""


def run_restoring(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, leak: bool, *args: str):
    """An in-process run (OPPROF_LEAK set where `leak`), torch's settings (the thread count too)
    put back after it for the tests of this process."""
    if leak:
        monkeypatch.setenv("OPPROF_LEAK", "1")
    else:
        monkeypatch.delenv("OPPROF_LEAK", raising=False)
    saved = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_float32_matmul_precision())
    threads = torch.get_num_threads()
    matmuls = (torch.backends.cuda.matmul, torch.backends.mkldnn.matmul)
    new_api = [m.fp32_precision for m in matmuls]  # torch 2.9+'s own per backend
    try:
        return run(project, *args, "-p", "no:xdist")
    finally:
        torch.set_default_dtype(saved[0])
        torch.set_grad_enabled(saved[1])
        torch.set_float32_matmul_precision(saved[2])
        for backend, value in zip(matmuls, new_api):
            backend.fp32_precision = value
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)


def _tests(project: pytest.Pytester) -> dict[str, dict]:
    return {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}


def test_a_default_dtype_left_by_an_earlier_test_is_named_and_no_baseline_is_recorded_on_it(project, monkeypatch):
    """A trial's gradcheck test left the default dtype float64: the test after it recorded double
    ops in the full run without a word, and run alone failed `work changed: double -> float` with
    `record it`, which recorded float and made the full run fail: a flip-flop. The leak is named,
    nothing is recorded on it, and the victim's failure names the fix in the leaking test."""
    project.makepyfile(test_l=GRADCHECK)
    run_restoring(project, monkeypatch, False, "--opprof-update-baseline").assert_outcomes(passed=2)
    (after,) = (project.path / ".opprof").rglob("test_b_after.json")
    before = after.read_bytes()
    leak_line = (
        "opprof: test_l.py::test_a_gradcheck changed torch's default dtype float32 -> float64 and did not put it "
        "back: the tests after it ran with the default dtype float64, so their measurements depend on test order *; "
        "restore it in that test (try/finally: torch.set_default_dtype(torch.float32)); measured after it: "
        "test_l.py::test_b_after"
    )
    recorded = run_restoring(project, monkeypatch, True, "--opprof-update-baseline=all")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline not written: it ran with the default dtype float64 that test_l.py::test_a_gradcheck "
            "left (a baseline recorded on it would depend on test order): restore it in that test (try/finally: "
            "torch.set_default_dtype(torch.float32)), then record",
            leak_line,
        ]
    )
    assert after.read_bytes() == before
    compared = run_restoring(project, monkeypatch, True, "--opprof", "--opprof-json=r.json")
    compared.assert_outcomes(passed=1, failed=1)
    fix = (
        "it ran with the default dtype float64 that test_l.py::test_a_gradcheck left (it ran earlier and did not put "
        "it back): restore it in that test (try/finally: torch.set_default_dtype(torch.float32)) and run again; "
        "recording this test would record it, not undo it"
    )
    compared.stdout.fnmatch_lines(["work changed: aten::*(float*) -> (double*", fix])  # the failure
    compared.stdout.fnmatch_lines([f"test_l.py::test_b_after: {fix}", leak_line])  # the summary
    assert "record it: pytest --opprof-update-baseline test_l.py::test_b_after" not in compared.stdout.str()
    victim = _tests(project)["test_l.py::test_b_after"]
    assert victim["baseline"]["settings_left"] == [
        {"by": "test_l.py::test_a_gradcheck", "changed": {"dtype": ["float32", "float64"]}}
    ]
    assert [c["name"] for c in victim["checks"] if c["name"] in ("threads", "settings")] == ["settings"]
    # the leak fixed: the same baseline passes, and nothing is said
    fixed = run_restoring(project, monkeypatch, False, "--opprof")
    fixed.assert_outcomes(passed=2)
    assert "default dtype" not in fixed.stdout.str()


def test_a_fixture_that_turns_grad_mode_off_and_leaves_it_is_named_with_its_restore(project, monkeypatch):
    """Grad mode off left by a fixture's setup (no teardown) makes every later forward pass
    record no autograd graph: faster, and order-dependent. The fixture is named where it is
    defined, with the call that puts it back; no baseline is recorded from the tests after it."""
    project.makepyfile(
        test_g="""
        import os
        import pytest
        import torch

        @pytest.fixture
        def inference():
            if os.environ.get("OPPROF_LEAK"):
                torch.set_grad_enabled(False)

        def test_a_uses(inference):
            pass

        def test_b_forward(opprof, mlp):
            model, x = mlp
            opprof.run(model, x, warmup=1, steps=2)
        """
    )
    result = run_restoring(project, monkeypatch, True, "--opprof-update-baseline")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline not written: it ran with grad mode off that fixture inference (test_g.py:5) left *",
            "opprof: fixture inference (test_g.py:5) changed torch's grad mode on -> off and did not put it back: *; "
            "restore it in that fixture's teardown (after its yield, or in a finalizer it adds before anything can "
            "raise: torch.set_grad_enabled(True)); measured after it: test_g.py::test_b_forward",
        ]
    )
    assert not list(project.path.rglob("test_b_forward.json"))


def test_settings_a_test_or_fixture_puts_back_are_no_leak(project, monkeypatch):
    """No false leak: a context manager (no_grad, set_detect_anomaly), a try/finally and a
    fixture's teardown that put the settings back leave nothing for the next test, whose
    baseline is written."""
    project.makepyfile(
        test_n="""
        import pytest
        import torch
        from conftest import infer

        @pytest.fixture
        def doubles():
            torch.set_default_dtype(torch.float64)
            yield
            torch.set_default_dtype(torch.float32)

        def test_a_contexts(doubles):
            with torch.no_grad(), torch.autograd.set_detect_anomaly(True):
                torch.ones(2).sum()
            before = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("medium")
            try:
                torch.ones(2, 2) @ torch.ones(2, 2)
            finally:
                torch.set_float32_matmul_precision(before)

        def test_b_after(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 new*"])
    assert "did not put" not in result.stdout.str()
    assert not [c for c in _tests(project)["test_n.py::test_b_after"]["checks"] if c["name"] == "settings"]


def test_a_test_that_sets_its_own_dtype_for_its_measurement_is_no_victim(project, monkeypatch):
    """A test that sets the default dtype itself around its measurement (try/finally) after a leak
    measured its own setting: it is recorded, and named nowhere as the leak's victim."""
    project.makepyfile(
        test_o=GRADCHECK
        + """
def test_c_own(opprof):
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        model = torch.nn.Linear(8, 8)
        opprof.run(model, torch.randn(2, 8), warmup=1, steps=2)
    finally:
        torch.set_default_dtype(before)
"""
    )
    result = run_restoring(project, monkeypatch, True, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 new*", "*measured after it: test_o.py::test_b_after"])
    assert list(project.path.rglob("test_c_own.json"))
    assert not [c for c in _tests(project)["test_o.py::test_c_own"]["checks"] if c["name"] == "settings"]


def test_a_test_in_a_module_fixtures_scope_that_does_not_ask_for_it_is_its_victim(project, monkeypatch):
    """A module fixture sets the float32 matmul precision for the tests asking for it (and puts it
    back at the module's end): a test there that does not ask for it ran on it only because an
    earlier test did. It is named as that fixture's victim, with the fix for its scope."""
    project.makepyfile(
        test_m="""
        import pytest
        import torch
        from conftest import infer

        @pytest.fixture(scope="module")
        def fast_matmul():
            torch.set_float32_matmul_precision("medium")
            yield
            torch.set_float32_matmul_precision("highest")

        def test_a_asks(fast_matmul):
            pass

        def test_b_does_not(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "opprof: 1 baseline not written: it ran with the float32 matmul precision medium that fixture fast_matmul "
            "(test_m.py:5) sets for its scope, without asking for it *: ask for the fixture in this test, or set it "
            "in a function-scoped fixture that puts it back, then record",
            "opprof: fixture fast_matmul (test_m.py:5), set up by an earlier test, changed torch's float32 matmul "
            "precision highest -> medium for its scope, and tests there that do not ask for it ran with the float32 "
            "matmul precision medium: *; measured on it without asking for it: test_m.py::test_b_does_not",
        ]
    )


def test_a_fake_torch_in_sys_modules_during_a_test_ends_no_run(project, monkeypatch):
    """A test that puts a fake `torch` in sys.modules (to test code without it) ran the watchers'
    readings on the fake: it failed with an AttributeError from the plugin's profiler watcher.
    The settings are unknown there, the profiler not running, and the test passes."""
    project.makepyfile(
        test_f="""
        import sys
        import types
        from conftest import infer

        def test_a_without_torch(monkeypatch):
            monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="0"))
            assert sys.modules["torch"].__version__ == "0"

        def test_b_after(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=2)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert list(project.path.rglob("test_b_after.json"))


MLP_TEST = """
def test_mlp(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=2)
"""


def _leak_lines(result: pytest.RunResult) -> list[str]:
    leaking = ("did not put", "set up by an earlier test")
    return [line for line in result.stdout.lines if line.startswith("opprof: ") and any(w in line for w in leaking)]


def test_torchs_fp32_precision_api_beside_the_legacy_one_ends_no_test_and_its_leak_is_named(project, monkeypatch):
    """A break trial's conftest set `torch.backends.mkldnn.matmul.fp32_precision = "bf16"`, the
    API of torch 2.9+: torch's legacy getter then raises, and every test erred in our hooks. Set
    for the whole run (at import) it is no leak; set by a test and left, it is named, with the
    legacy call that puts the precision back."""
    project.makepyfile(
        test_p="""
        import torch
        from conftest import infer

        torch.backends.mkldnn.matmul.fp32_precision = "bf16"  # for the whole run

        def test_a(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    whole = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    whole.assert_outcomes(passed=1)
    assert not _leak_lines(whole)
    (project.path / "test_p.py").unlink()
    project.makepyfile(
        test_q="import torch\nfrom conftest import infer\n\n"
        + "def test_a_leaks():\n"
        + '    torch.backends.mkldnn.matmul.fp32_precision = "bf16"\n'
        + MLP_TEST
    )
    leaked = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    leaked.assert_outcomes(passed=2)
    leaked.stdout.fnmatch_lines(
        [
            "opprof: test_q.py::test_a_leaks changed torch's float32 matmul precision highest -> cuda.matmul=*/"
            "mkldnn.matmul=bf16 and did not put it back: the tests after it ran with the float32 matmul precision "
            "cuda.matmul=*/mkldnn.matmul=bf16, so their measurements depend on test order (a flake under -k or "
            "pytest-randomly) and no baseline is recorded from them; restore it in that test (try/finally: "
            'torch.set_float32_matmul_precision("highest")); measured after it: test_q.py::test_mlp'
        ]
    )


def test_a_wider_fixture_or_setup_method_that_never_puts_a_setting_back_is_named_not_its_scopes_last_test(
    project, monkeypatch
):
    """A break trial: a module fixture that set the dtype and never put it back was named as the
    module's last test (`test_a.py::test_two changed torch's default dtype ...`), a test that
    touched nothing; two setup methods as two tests, told `try/finally`."""
    project.makepyfile(
        test_a="""
        import pytest
        import torch

        @pytest.fixture(scope="module")
        def double():
            torch.set_default_dtype(torch.float64)

        def test_one(double):
            pass

        def test_two():
            pass
        """,
        test_b="""
        import torch

        def setup_module():
            torch.set_grad_enabled(False)

        def test_one():
            pass

        def test_two():
            pass
        """,
        test_c="from conftest import infer\n" + MLP_TEST,
    )
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=5)
    lines = _leak_lines(result)
    assert [line.split(" changed ")[0] for line in lines] == [
        "opprof: fixture double (test_a.py:4)",
        "opprof: setup method setup_module of test_b",
    ], lines
    assert lines[1].endswith(
        "restore it in its teardown method (teardown_module, teardown_function, tearDownClass, ...: "
        "torch.set_grad_enabled(True)); measured after it: test_c.py::test_mlp"
    )


SESSION_AND_MODULE_FIXTURES = """
        import pytest
        import torch

        @pytest.fixture(scope="session")
        def double():
            torch.set_default_dtype(torch.float64)
            yield
            torch.set_default_dtype(torch.float32)

        @pytest.fixture(scope="module")
        def det():
            torch.use_deterministic_algorithms(True)
            yield
            torch.use_deterministic_algorithms(False)
        """

LANES_TEST_A = """
        import pytest
        import torch
        from conftest import infer
        from conftest_extra import det, double

        @pytest.fixture(scope="module")
        def restoring():
            torch.set_num_threads(torch.get_num_threads() + 1)
            yield
            torch.set_num_threads(torch.get_num_threads() - 1)

        def test_1_both():
            torch.set_default_dtype(torch.float64)
            torch.set_grad_enabled(False)

        def test_2_dtype_back():
            torch.set_default_dtype(torch.float32)

        def test_3_in_scope(restoring):
            torch.set_grad_enabled(True)
            torch.set_default_dtype(torch.float16)

        def test_4_in_scope(restoring):
            pass

        @pytest.fixture
        def one_thread():
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            yield
            torch.set_num_threads(before)

        def test_5_victim(one_thread, opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """

LANES_TEST_B = """
        import torch
        from conftest import infer
        from conftest_extra import det, double

        def test_1_first(double, det):
            pass

        def test_2_victim(det, opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """


def test_each_setting_has_its_own_leakers_and_victims(project, monkeypatch):
    """A break trial, on one tracker of all the settings at once: a test that only put the dtype
    back was named a leaker of grad mode (`test_a then test_b changed torch's grad mode`), a
    module fixture that put its dtype back was named for a test's grad mode inside its scope, a
    victim of the dtype whose own fixture set the thread count went unseen (its baseline held
    double and failed alone), and so did a victim of a session fixture's dtype that asked only for
    a module fixture of another setting. Each setting is tracked on its own now."""
    project.makepyfile(conftest_extra=SESSION_AND_MODULE_FIXTURES, test_a=LANES_TEST_A, test_b=LANES_TEST_B)
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=7)
    assert [line.split(" and did not")[0].split(", set up by")[0] for line in _leak_lines(result)] == [
        # test_2 put test_1's dtype back (that leak ended), test_3 left its own inside the module
        # fixture's scope, which only changed the thread count: it outlives that scope
        "opprof: test_a.py::test_3_in_scope changed torch's default dtype float32 -> float16",
        "opprof: fixture double (conftest_extra.py:4)",
    ], result.stdout.str()
    assert "grad mode" not in result.stdout.str()  # test_1 turned it off, test_3 on again: no leak
    assert not list(project.path.rglob("test_*_victim.json"))  # both victims, neither recorded


def test_an_autouse_module_fixture_that_never_restores_leaves_no_victim_among_the_modules_it_sets(project, monkeypatch):
    """A break trial's conftest module fixture (autouse) set the dtype and never put it back: its
    first module's last test was named the leaker, and the next module's measured test, which its
    own instance of that fixture sets to the same dtype, was not recorded as the leak's victim
    (recorded alone it held double too). The fixture is the leaker, and a test that sets it up
    runs on its dtype by its own doing."""
    sub = project.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\nimport torch\n\n\n"
        '@pytest.fixture(scope="module", autouse=True)\n'
        "def double():\n"
        "    torch.set_default_dtype(torch.float64)\n"
    )
    (sub / "test_a.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    (sub / "test_b.py").write_text("from conftest import infer\n" + MLP_TEST)
    tail = project.mkpydir("tail")  # after sub: outside the fixture's reach, its victim
    (tail / "test_c.py").write_text("from conftest import infer\n" + MLP_TEST.replace("test_mlp", "test_after"))
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=4)
    lines = _leak_lines(result)
    assert [line.split(" changed ")[0] for line in lines] == ["opprof: fixture double (sub/conftest.py:5)"]
    assert lines[0].endswith("measured after it: tail/test_c.py::test_after")
    result.stdout.fnmatch_lines(["opprof: 1 baseline not written: it ran with the default dtype float64 that fixture*"])
    assert list(project.path.rglob("test_mlp.json")) and not list(project.path.rglob("test_after.json"))


TWO_LEAKERS = """
import os
import torch
from conftest import infer

def test_a_threads():
    if os.environ.get("LEAK_THREADS"):
        torch.set_num_threads(1)

def test_b_dtype():
    if os.environ.get("OPPROF_LEAK"):
        torch.set_default_dtype(torch.float64)

def test_c_deterministic():
    if os.environ.get("OPPROF_LEAK"):
        torch.use_deterministic_algorithms(True)

def test_d_own_dtype(opprof):  # builds and measures its model in float32 itself
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        opprof.run(torch.nn.Linear(8, 8), torch.randn(2, 8), warmup=1, steps=2)
    finally:
        torch.set_default_dtype(before)

def test_e_pins_dtype_late(opprof, mlp):  # its model was built by mlp, in the leaked dtype
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        opprof.run(infer, *mlp, warmup=1, steps=2)
    finally:
        torch.set_default_dtype(before)
"""


def test_a_victim_is_named_for_the_part_of_each_leak_its_measurement_ran_on(project, monkeypatch):
    """A review: a victim of two leakers that measured its own dtype was still named the dtype
    leaker's victim (its check and the run line) while its JSON named the other; a test that set
    float32 around run() on a model its fixture had built in the leaked float64 was exempt, and
    recorded double. The dtype is judged by the inputs its ops took; each leaker has one line,
    with no per-test copy of it."""
    project.makepyfile(test_t=TWO_LEAKERS)
    result = run_restoring(project, monkeypatch, True, "--opprof-update-baseline", "--opprof-json=r.json")
    result.assert_outcomes(passed=5)
    lines = _leak_lines(result)
    assert [line.split(" and did not")[0] for line in lines] == [
        "opprof: test_t.py::test_c_deterministic changed torch's deterministic algorithms off -> on",
        "opprof: test_t.py::test_b_dtype changed torch's default dtype float32 -> float64",
    ], lines
    assert lines[0].endswith("measured after it: test_t.py::test_d_own_dtype, test_t.py::test_e_pins_dtype_late")
    assert lines[1].endswith("measured after it: test_t.py::test_e_pins_dtype_late")
    assert "warning settings" not in result.stdout.str()  # said once, in the run's lines
    tests = _tests(project)
    own = tests["test_t.py::test_d_own_dtype"]
    assert [c["message"].split(" changed")[0] for c in own["checks"] if c["name"] == "settings"] == [
        "test_t.py::test_c_deterministic"
    ]
    assert [found["by"] for found in own["baseline"]["settings_left"]] == ["test_t.py::test_c_deterministic"]
    assert not list(project.path.rglob("test_e_pins_dtype_late.json"))


def test_a_failure_on_two_leakers_settings_names_both_fixes(project, monkeypatch):
    """A review's victim of a thread-count leaker and a dtype leaker was told only the dtype's fix."""
    project.makepyfile(test_t=TWO_LEAKERS)
    run_restoring(project, monkeypatch, False, "--opprof-update-baseline").assert_outcomes(passed=5)
    monkeypatch.setenv("LEAK_THREADS", "1")
    result = run_restoring(project, monkeypatch, True, "--opprof", "-k", "a_threads or b_dtype or e_pins")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_t.py::test_e_pins_dtype_late: the count is the one test_t.py::test_a_threads left *",
            "test_t.py::test_e_pins_dtype_late: it ran with the default dtype float64 that test_t.py::test_b_dtype left *",
        ]
    )
    assert "record it: pytest --opprof-update-baseline test_t.py::test_e" not in result.stdout.str()


HIGH_AND_MEDIUM = """
        import pytest
        import torch

        @pytest.fixture(scope="module")
        def high():
            torch.set_float32_matmul_precision("high")

        @pytest.fixture
        def medium():
            before = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("medium")
            yield
            torch.set_float32_matmul_precision(before)
"""  # a module fixture that never puts the precision back, a function one that does


def test_a_fixture_that_puts_its_own_change_back_is_no_co_leaker_of_a_wider_one(project, monkeypatch):
    """A review: where a module fixture that never put the precision back ended in a test that
    also used a function fixture putting its own change back, both were named (`fixture high
    then fixture medium`). The chain now begins where the count was last the wider fixture's.
    A chain that begins with a fixture gives the code that puts the setting back too."""
    project.makepyfile(
        test_n=HIGH_AND_MEDIUM
        + """
        def test_1(high):
            pass

        def test_2_last(high, medium):
            pass

        def test_3_more():
            torch.set_float32_matmul_precision("medium")
        """,
        test_z="from conftest import infer\n" + MLP_TEST,
    )
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=4)
    (line,) = _leak_lines(result)
    assert line.startswith(
        "opprof: fixture high (test_n.py:4) then test_n.py::test_3_more changed torch's float32 matmul precision "
        "highest -> medium"
    ), line
    assert line.endswith(
        "restore it in each of them (a test: try/finally; a fixture: after its yield) with "
        'torch.set_float32_matmul_precision("highest"); measured after them: test_z.py::test_mlp'
    ), line


def test_a_fixture_set_up_beside_a_never_restoring_wider_one_in_one_test_is_no_co_leaker(project, monkeypatch):
    """A recheck: where both fixtures were first set up in the same test (the module's only one),
    the function fixture that put back what it found was still named beside the module fixture
    that never put its precision back."""
    project.makepyfile(
        test_n=HIGH_AND_MEDIUM
        + """
        def test_only(high, medium):
            pass
        """,
        test_z="from conftest import infer\n" + MLP_TEST,
    )
    result = run_restoring(project, monkeypatch, False, "--opprof-update-baseline")
    result.assert_outcomes(passed=2)
    (line,) = _leak_lines(result)
    assert line.startswith("opprof: fixture high (test_n.py:4) changed torch's float32 matmul precision"), line


def test_one_leaker_of_the_count_and_the_dtype_gets_one_fix_line(project, monkeypatch):
    """A recheck: a test that left both the thread count and the dtype was given two lines for
    the count, the count's own and the combined one."""
    project.makepyfile(test_t=TWO_LEAKERS.replace('os.environ.get("OPPROF_LEAK")', 'os.environ.get("LEAK_BOTH")'))
    source = (project.path / "test_t.py").read_text()
    (project.path / "test_t.py").write_text(
        source.replace(
            "def test_a_threads():\n",
            "def test_a_threads():\n    if os.environ.get('LEAK_BOTH'):\n"
            "        torch.set_default_dtype(torch.float64)\n",
        )
    )
    run_restoring(project, monkeypatch, False, "--opprof-update-baseline").assert_outcomes(passed=5)
    monkeypatch.setenv("LEAK_THREADS", "1")
    monkeypatch.setenv("LEAK_BOTH", "1")
    result = run_restoring(project, monkeypatch, False, "--opprof", "-k", "a_threads or e_pins")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["test_t.py::test_e_pins_dtype_late: it ran with the thread count 1 and the default dtype float64 that *"]
    )
    assert "the count is the one test_t.py::test_a_threads left" not in result.stdout.str()


PROCESS_GROUP = """
import os
import tempfile
import torch
import torch.distributed as dist

def test_a_init():
    if not dist.is_initialized():
        where = os.path.join(tempfile.mkdtemp(), "pg")
        dist.init_process_group("gloo", init_method="file://" + where, rank=0, world_size=1)
    if not os.environ.get("OPPROF_LEAK"):
        dist.destroy_process_group()

def test_b_reduces(opprof):  # all-reduces only where a group is up, as a trial's did
    t = torch.ones(64)
    def step():
        if dist.is_initialized():
            dist.all_reduce(t)
        return t * 2
    opprof.run(step, warmup=1, steps=2)

def test_c_plain(opprof):
    x = torch.ones(8, 8)
    opprof.run(torch.mm, x, x, warmup=1, steps=2)
"""


def test_a_process_group_left_initialised_is_named_in_the_tests_that_ran_collectives_on_it(project, monkeypatch):
    """A trial's test called init_process_group and no destroy_process_group: a later test that
    all-reduces where a group is up failed `+ c10d::allreduce_` run alone or on another xdist
    worker and was told to record it, which broke the full run. The leaker is named with
    destroy_process_group(), the victim not told to record, nothing recorded on the leak; a test
    that ran no collective is no victim of it."""
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch built without torch.distributed")
    project.makepyfile(test_pg=PROCESS_GROUP)
    try:
        run_restoring(project, monkeypatch, False, "--opprof-update-baseline").assert_outcomes(passed=3)
        compared = run_restoring(project, monkeypatch, True, "--opprof")
        compared.assert_outcomes(passed=2, failed=1)
        fix = (
            "it ran with torch.distributed's default process group initialised that test_pg.py::test_a_init left (it "
            "ran earlier and did not put it back): restore it in that test (try/finally: "
            "torch.distributed.destroy_process_group()) and run again; recording this test would record it, not undo it"
        )
        compared.stdout.fnmatch_lines(["*structure changed: + c10d::allreduce_*", f"test_pg.py::test_b_reduces: {fix}"])
        compared.stdout.fnmatch_lines(
            [
                "opprof: test_pg.py::test_a_init changed torch's distributed default process group not "
                "initialised -> initialised and did not put it back*measured after it: test_pg.py::test_b_reduces"
            ]
        )
        out = compared.stdout.str()
        assert "record it: pytest --opprof-update-baseline test_pg.py::test_b_reduces" not in out
        assert "test_pg.py::test_c_plain: it ran with" not in out
        dist.destroy_process_group()
        (b_file,) = (project.path / ".opprof").rglob("test_b_reduces.json")
        before = b_file.read_bytes()
        recorded = run_restoring(project, monkeypatch, True, "--opprof-update-baseline=all")
        recorded.assert_outcomes(passed=3)
        recorded.stdout.fnmatch_lines(["opprof: 1 baseline not written: it ran with torch.distributed's default *"])
        assert b_file.read_bytes() == before
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
