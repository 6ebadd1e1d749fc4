"""Real torch.compile (Inductor's C++ backend) under `pytest --opprof`: baselines that do not
depend on test order, the compile gates failing exactly on their deliberate breaks, fused ops
named. Captures are timed by the fake clock; compilation itself is real (a few seconds each)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
TORCH_RELEASE = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])

if shutil.which("g++") is None and shutil.which("c++") is None:  # Inductor's CPU backend compiles C++
    pytest.skip("torch.compile on CPU needs a C++ compiler", allow_module_level=True)

MODELS = """
import torch


class Mlp(torch.nn.Module):
    def __init__(self, graph_break=False):
        super().__init__()
        torch.manual_seed(0)
        self.l1, self.l2, self.graph_break = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64), graph_break

    def forward(self, x):
        y = torch.nn.functional.gelu(self.l1(x))
        if self.graph_break:
            torch._dynamo.graph_break()
        return torch.relu(self.l2(y) + 1)


class Other(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.l = torch.nn.Linear(64, 32)

    def forward(self, x):
        return torch.tanh(self.l(x)) * 2


X = torch.randn(8, 64)


def infer(model, x=X):
    with torch.no_grad():
        return model(x)
"""

ORDER_TESTS = """
import torch
from models import Mlp, Other, infer

BREAK = {graph_break}


def test_a(opprof):
    model = torch.compile(Mlp(graph_break=BREAK))
    opprof.run(infer, model, warmup=2, steps=5)


def test_b(opprof):
    model = torch.compile(Other())
    opprof.run(infer, model, warmup=2, steps=5)
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """In a fresh process, as CI runs it: Dynamo's frame numbers start again at 0 (and torch's
    compiler registers its caches once per process). Time verdicts are off (real clocks here):
    these tests are about names, structure and the gates."""
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--opprof-fail-on=structure,work", *args
    )


@pytest.fixture
def compiled_project(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the short summary's failure lines whole
    pytester.makepyfile(models=MODELS)
    return pytester


def record_order_tests(p: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> list[bytes]:
    """Record test_order.py's baselines in a fresh process with a cold Inductor cache of its own;
    the baseline files' bytes, sorted."""
    p.makepyfile(test_order=ORDER_TESTS.format(graph_break=False))
    p.makeconftest("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(p.path / "cache-recorded"))
    run(p, "--opprof-update-baseline", "--opprof-device-key=cpu", *args).assert_outcomes(passed=2 - len(args) // 2)
    return sorted(f.read_bytes() for f in (p.path / ".opprof").rglob("*.json"))


def test_baselines_of_compiled_models_pass_under_another_selection_and_order(compiled_project, monkeypatch):
    """Recorded on the whole file, the baselines pass when test_b runs first (selected by node
    id, as -k or a rerun of one failure does): its model gets another Dynamo frame number and,
    with a cold Inductor cache, as on a fresh CI runner, its kernels another graph number. The
    files are left as they were. (A split of one test that ran 90 s: xdist runs the halves side
    by side.)"""
    written = record_order_tests(compiled_project, monkeypatch)
    assert b"Torch-Compiled Region" in written[0] + written[1] and b"Region: " not in written[0] + written[1]
    assert b"graph_" not in written[0] + written[1] and b"cpp_fused" in written[0] + written[1]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(compiled_project.path / "cache-cold"))  # numbers start again
    result = run(
        compiled_project, "--opprof", "--opprof-device-key=cpu", "test_order.py::test_b", "test_order.py::test_a"
    )
    result.assert_outcomes(passed=2)
    assert "structure changed" not in result.stdout.str()
    assert sorted(f.read_bytes() for f in (compiled_project.path / ".opprof").rglob("*.json")) == written


def test_a_graph_break_added_to_a_compiled_model_is_a_structure_verdict(compiled_project, monkeypatch):
    """The same model recorded whole, then run with a graph break: two compiled regions where
    there was one, a structure failure naming the region."""
    record_order_tests(compiled_project, monkeypatch, "-k", "test_a")
    compiled_project.makepyfile(test_order=ORDER_TESTS.format(graph_break=True))
    result = run(compiled_project, "--opprof", "--opprof-device-key=cpu", "-k", "test_a")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Torch-Compiled Region*1 -> 2*"])


COLD_OR_WARM = """
import os
import torch
from models import Mlp, infer

MODEL = torch.compile(Mlp())


def test_y(opprof):
    opprof.run(infer, MODEL, warmup=int(os.environ["WARMUP"]), steps=6)
"""


def test_a_compilation_in_the_steps_is_no_time_verdict_on_what_it_ran(compiled_project, monkeypatch):
    """A trial's test compiled in its first step when run alone (warmed up by an earlier test
    when recorded): the dispatch wrappers torch runs a first call through (PythonDispatchMode)
    failed it as time, by test order. An op that ran only in a step torch.compile compiled in is
    inconclusive, naming the compilation and the warm-up. The fake clock times the captures (the
    wrapper 5 ms, every other op 10 us); compilation is real."""
    p = compiled_project
    p.makepyfile(test_cold=COLD_OR_WARM)
    tests = Path(__file__).parent
    p.makeconftest(
        "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"
        f"sys.path.insert(0, {str(tests)!r})\nimport fake_clock\n"
        "fake_clock.install_in_worker(costs={'PythonDispatchMode': 5_000_000})\n"
    )
    monkeypatch.setenv("WARMUP", "1")
    flags = ("-p", "no:cacheprovider", "-p", "no:randomly", "--opprof-device-key=cpu")
    p.runpytest_subprocess(*flags, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("WARMUP", "0")
    result = p.runpytest_subprocess(*flags, "--opprof")
    result.assert_outcomes(passed=1)
    if TORCH_RELEASE < (2, 11):  # torch 2.6 and 2.9 run no PythonDispatchMode outside the compilation
        assert not [line for line in result.stdout.lines if line.startswith("PythonDispatchMode ")]  # no row
        return
    result.stdout.fnmatch_lines(
        [
            "*time inconclusive for PythonDispatchMode*: it ran only in step 1, where torch.compile compiled: a first "
            "call runs through its dispatch wrappers (PythonDispatchMode), *; warm up with the inputs the steps use "
            "(opprof.run(fn, warmup=1))"
        ]
    )


GATE_TESTS = """
import itertools

import torch
from models import Mlp, X, infer

CLEAN = torch.compile(Mlp())


def test_clean_passes_every_gate(opprof):
    opprof.run(infer, CLEAN, warmup=2, steps=3)
    opprof.assert_no_graph_break()
    opprof.assert_no_recompile()
    opprof.assert_compiled()
    opprof.assert_kernel_count("*cpp_fused*", 2)


def test_fused_gelu_is_named(opprof):
    opprof.run(infer, CLEAN, warmup=2, steps=3)
    opprof.assert_op_count("aten::gelu", 1)


def test_a_graph_call_is_an_op_in_a_capture_too(opprof):
    infer(CLEAN)
    with opprof.capture():  # shapes recorded: torch writes the graph call as an annotation
        infer(CLEAN)
    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if release >= (2, 9):  # torch 2.6 and 2.7 write no graph call
        opprof.assert_op_count("CompiledFxGraph", 1)
    assert not [r.name for r in opprof.profile.ranges if "CompiledFxGraph" in r.name]


def test_graph_break(opprof):
    opprof.run(infer, torch.compile(Mlp(graph_break=True)), warmup=2, steps=3)
    opprof.assert_no_graph_break()


def branchy(x):
    y = torch.relu(x)
    if y.sum() > 0:
        y = y * 2
    return y + 1


def test_data_dependent_break(opprof):
    opprof.run(torch.compile(branchy), X, warmup=2, steps=3)
    opprof.assert_no_graph_break()


def test_recompile(opprof):
    fn = torch.compile(lambda x: torch.relu(x) + 1, dynamic=False)  # every new shape recompiles
    rows = itertools.count(4)
    opprof.run(lambda: fn(torch.ones(next(rows), 8)), warmup=2, steps=3)
    opprof.assert_no_recompile()


def test_eager_work(opprof):
    opprof.run(lambda: infer(CLEAN).sin(), warmup=2, steps=3)
    opprof.assert_compiled()


def test_recompile_limit(opprof):
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    try:
        fn = torch.compile(lambda x: torch.relu(x) * 5, dynamic=False)  # a new shape each call
        rows = itertools.count(4)
        opprof.run(lambda: fn(torch.ones(next(rows), 8)), warmup=2, steps=3)
    finally:
        torch._dynamo.config.recompile_limit = limit
    opprof.assert_compiled()


def test_limit_in_the_steps(opprof):
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    try:
        fn = torch.compile(lambda x: torch.relu(x) * 7, dynamic=False)  # a new shape each call after the 5th
        rows = itertools.chain([4] * 5, itertools.count(5))
        opprof.run(lambda: fn(torch.ones(next(rows), 8)), warmup=1, steps=4)
    finally:
        torch._dynamo.config.recompile_limit = limit
    opprof.assert_no_graph_break()


def test_compile_in_the_steps(opprof):
    fn = torch.compile(lambda x: torch.nn.functional.silu(x) * 3)
    opprof.run(fn, X, warmup=0, steps=2)
"""


def test_each_gate_fails_exactly_on_its_deliberate_break(compiled_project):
    """Real torch.compile: a clean model passes every gate; the fused op, the graph breaks (with
    torch's reason and, for a data-dependent branch, its line), the recompile and the eager work each
    fail their own gate; compiling in the steps is a warning and
    leaves no compiler rows."""
    p = compiled_project
    p.makepyfile(test_gates=GATE_TESTS)
    p.makeconftest("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    result = run(p, "--opprof", "--opprof-device-key=cpu", "-rf", "--tb=no")
    limit_counted = TORCH_RELEASE >= (2, 13)  # torch 2.13 counts the recompile limit's hit
    result.assert_outcomes(passed=3 + (not limit_counted), failed=6 + limit_counted)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "FAILED test_gates.py::test_fused_gelu_is_named - AssertionError: aten::gelu: no op of that name "
            "ran: aten::gelu ran inside compiled code, fused into *cpp_fused_gelu*",
        ],
        consecutive=False,
    )
    # each with its line: torch 2.13 words where a data-dependent branch computed its condition; the
    # line of an explicit break, and of any break on torch 2.6, comes from Dynamo's list of breaks
    result.stdout.fnmatch_lines(
        [
            "FAILED test_gates.py::test_graph_break - AssertionError: graph break: in step 1 Torch-Compiled Region */* "
            "resumed its frame in Torch-Compiled Region */*; 3 resumed regions in 3 steps; torch's reason: "
            "*graph_break*; at *models.py:* in forward: `torch._dynamo.graph_break()`*"
        ]
    )
    where = "its condition computed at" if TORCH_RELEASE >= (2, 13) else "at"
    result.stdout.fnmatch_lines(
        [
            "FAILED test_gates.py::test_data_dependent_break - AssertionError: *torch's reason: "
            f"*; {where} *test_gates.py:* in branchy: `if y.sum() > 0:`*"
        ]
    )
    assert "TORCH_LOGS=graph_breaks" not in out
    assert "torch names the reason" not in out
    result.stdout.fnmatch_lines(
        ["FAILED test_gates.py::test_recompile - AssertionError: compiled inside the measured steps: *"]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_gates.py::test_eager_work - AssertionError: *% of the steps' work ran eagerly*aten::sin*"]
    )
    result.stdout.fnmatch_lines(
        ["*test_compile_in_the_steps: warning compilation: torch.compile compiled inside the measured steps: *"]
    )
    if TORCH_RELEASE >= (2, 13):  # torch 2.13 counts the limit's hit (other releases: the message as before)
        result.stdout.fnmatch_lines(
            [
                "FAILED test_gates.py::test_recompile_limit - AssertionError: no torch.compile'd region ran in the "
                "measured steps, so there is nothing compiled to check; Dynamo hit its recompile limit (2) in this "
                "run and ran the frame eagerly from then on: *raise torch._dynamo.config.recompile_limit"
            ]
        )
        # no graph break, yet no graph in the steps after the limit (a compile trial's gate passed it)
        result.stdout.fnmatch_lines(
            [
                "FAILED test_gates.py::test_limit_in_the_steps - AssertionError: in the last * of 4 steps (*) no "
                "compiled region ran, after step * ran one: the model ran eagerly there; Dynamo hit its recompile "
                "limit (2) *"
            ]
        )
    table = out.split("test_gates.py::test_compile_in_the_steps [passed]")[1].split("\ntest_gates.py::")[0]
    clean = out.split("test_gates.py::test_clean_passes_every_gate [passed]")[1].split("\ntest_gates.py::")[0]
    assert "cpp_fused_mul_silu" in table
    if TORCH_RELEASE >= (2, 11):  # seen on 2.11, 2.13, 2.14; not an op on 2.6, 2.7, 2.9
        assert "CompiledFxGraph" in table and "CompiledFxGraph" in clean
    else:
        assert ("CompiledFxGraph" in table) == ("CompiledFxGraph" in clean)
    assert "dynamo" not in table and "compile" not in table.lower().replace("compiled", "")


LIBRARY_USE = """
import os, sys
import torch
from pytest_opprof import capture, measure
from models import Mlp, Other, infer

VARIABLE = "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"
{before}
profile = measure(infer, torch.compile(Mlp()), warmup=1, steps=1)
print("rows:", " ".join(op.name for op in profile.ops))
config = sys.modules["torch._inductor.config"]
print("after:", os.environ.get(VARIABLE), config.cpp.enable_kernel_profile)
later = torch.compile(Other())
infer(later)
with torch.profiler.profile() as prof:
    infer(later)
print("later:", " ".join(sorted(set(e.name for e in prof.events() if "cpp_fused" in e.name))) or "-")
print("warned:", " ".join(c.name for c in profile.checks if c.status == "warning") or "-")
again = measure(infer, later, warmup=1, steps=1)  # compiled before measure(), profiling as the caller left it
print("again:", " ".join(c.name for c in again.checks if c.status == "warning") or "-")
with capture() as cap:
    infer(later)
print("captured:", " ".join(c.name for c in cap.profile.checks if c.status == "warning") or "-")
"""


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "after: None False"),  # nothing set: nothing left set
        ("import torch._inductor.config", "after: None False"),  # Inductor loaded before: its flag restored
        ("os.environ[VARIABLE] = '1'", "after: 1 True"),  # the user's own setting is kept
    ],
)
def test_measure_profiles_compiled_kernels_without_leaving_profiling_on(pytester, monkeypatch, before, after):
    """`measure()` as a library profiles the kernels it compiles, and leaves Inductor's kernel
    profiling as it found it: a model the caller compiles afterwards is not slowed by it, and a
    later measure() or capture() of that model, whose kernels cannot show, warns that they do not."""
    monkeypatch.delenv("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", raising=False)  # the script's own start
    pytester.makepyfile(models=MODELS)
    pytester.makepyfile(use=LIBRARY_USE.replace("{before}", before))
    result = pytester.run(sys.executable, "use.py")
    assert result.ret == 0, result.stderr.str()
    rows = result.stdout.str()
    assert "cpp_fused_gelu" in rows.split("rows:")[1].split("\n")[0]
    result.stdout.fnmatch_lines([after])
    later = rows.split("later:")[1].split("\n")[0].strip()
    assert (later != "-") == (after == "after: 1 True"), later
    # a model compiled before measure() with the profiling off shows no kernel: a warning says so
    # (a library trial read only CompiledFxGraph, every check ok); not for what compiled inside
    assert "compiled_kernels" not in rows.split("warned:")[1].split("\n")[0]
    unprofiled = after != "after: 1 True" and TORCH_RELEASE >= (2, 11)  # before: no CompiledFxGraph op to read
    for line in ("again:", "captured:"):
        warned = rows.split(line)[1].split("\n")[0]
        assert ("compiled_kernels" in warned) == unprofiled, (line, warned)


def test_an_in_process_measured_run_leaves_kernel_profiling_as_it_found_it(pytester, monkeypatch):
    """`pytest --opprof` turns Inductor's kernel profiling on for its session and back off at
    its end: an in-process run (pytester's, or an IDE's) does not leave it on for its host."""
    import os

    monkeypatch.delenv("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", raising=False)
    pytester.makepyfile(
        "def test_x(opprof):\n    import os, torch\n    torch.ones(2).add(1)\n    assert os.environ['TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE'] == '1'\n"
    )
    pytester.runpytest("-p", "no:cacheprovider", "--opprof").assert_outcomes(passed=1)
    assert "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE" not in os.environ
    monkeypatch.setenv("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "0")  # the user's own setting is kept
    pytester.makepyfile(
        "def test_x(opprof):\n    import os, torch\n    torch.ones(2).add(1)\n    assert os.environ['TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE'] == '0'\n"
    )
    pytester.runpytest("-p", "no:cacheprovider", "--opprof").assert_outcomes(passed=1)
    assert os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] == "0"


SIZED_TESTS = """
import os

import pytest
import torch


@pytest.fixture(autouse=True)
def low_limit():
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    if os.environ.get("OPPROF_T_RESET"):
        torch._dynamo.reset()  # each test its own compilation, as the warnings advise
    yield
    torch._dynamo.config.recompile_limit = limit


class Sized(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.l = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.l(x))


@pytest.mark.parametrize("n", [8, 9, 10, 11])
def test_sized(opprof, n):
    opprof.run(torch.compile(Sized(n), backend="eager", dynamic=False), torch.ones(4, n), warmup=1, steps=2)


class Wrapped(Sized):
    def forward(self, x):
        return torch.relu(self.l(x)) + 1


@pytest.mark.parametrize("n", [8, 9, 10, 11])
def test_wrapped(opprof, n):  # a lambda around the compiled model: only Dynamo's cache lookup tells
    model, x = torch.compile(Wrapped(n), backend="eager", dynamic=False), torch.ones(4, n)
    opprof.run(lambda: model(x), warmup=1, steps=2)
"""


def test_cases_that_share_dynamos_cache_past_its_limit_are_warned(compiled_project, monkeypatch):
    """A parametrized test compiling one model class at 12 sizes passed alone and, in the suite, ran
    eagerly from its 9th case on without a word (Dynamo's recompile limit is per function, counted
    over the process): the case that hits the limit says earlier tests compiled the function, each
    later case that its compiled model ran no compiled region; each test its own compilation
    (torch._dynamo.reset()) silences both."""
    p = compiled_project
    p.makepyfile(test_sized=SIZED_TESTS)
    result = run(p, "--opprof", "--opprof-device-key=cpu")
    result.assert_outcomes(passed=8)
    for test in ("test_sized", "test_wrapped"):
        result.stdout.fnmatch_lines(
            [
                f"test_sized.py::{test}[[]10[]]: warning recompile_limit: Dynamo hit its recompile limit (2) in this "
                "run and ran the frame eagerly from then on, after this run compiled 0 graphs: earlier tests or calls "
                "in this process compiled the same function *torch._dynamo.reset() in an autouse fixture*",
                f"test_sized.py::{test}[[]11[]]: warning not_compiled: a torch.compile'd model or function ran eagerly "
                "in the steps: no compiled region ran*",
            ]
        )
        ninth = [line for line in result.stdout.lines if line.startswith(f"test_sized.py::{test}[9]: warning ")]
        assert not [line for line in ninth if " warning contention:" not in line], ninth  # load may warn; Dynamo not
        assert f"test_sized.py::{test}[10]: warning not_compiled" not in result.stdout.str()  # the limit's says it
    monkeypatch.setenv("OPPROF_T_RESET", "1")
    result = run(p, "--opprof", "--opprof-device-key=cpu")
    result.assert_outcomes(passed=8)
    assert "recompile_limit" not in result.stdout.str() and "not_compiled" not in result.stdout.str()


GIVEN_TESTS = """
import itertools

import pytest
import torch

X = torch.randn(16, 32)


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()


class Looped(torch.nn.Module):  # a graph break inside a loop: Dynamo skips the whole frame
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum().item() > 1e9:
                x = x * 0
        return x


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.l(x))


def infer(model, x):
    with torch.no_grad():
        return model(x)


def test_skipped_through_a_helper(opprof):
    opprof.run(infer, torch.compile(Looped(), backend="eager"), X, warmup=2, steps=5)


def test_half_eager(opprof):
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    try:
        model = torch.compile(Plain(), backend="eager", dynamic=False)
        for n in (2, 3):
            model(torch.randn(n, 32))
        a, b = torch.randn(2, 32), torch.randn(20, 32)  # a cached shape, and one past the limit
        opprof.run(lambda: (model(a), model(b)), warmup=2, steps=5)
    finally:
        torch._dynamo.config.recompile_limit = limit


def test_eager_on_recompile_is_a_choice(opprof):
    model = torch.compile(Plain(), backend="eager", dynamic=False)
    model(X)
    with torch.compiler.set_stance("eager_on_recompile"):
        opprof.run(model, torch.randn(7, 32), warmup=2, steps=5)


def test_limit_hit_by_shapes_the_steps_do_not_use(opprof):
    model, x1, calls = torch.compile(Plain(), backend="eager", dynamic=False), torch.randn(1, 32), itertools.count()

    def fn():
        if next(calls) == 0:
            for n in range(1, 12):
                model(torch.randn(n, 32))
        return model(x1)

    opprof.run(fn, warmup=2, steps=5)
"""


def test_compiled_code_that_ran_eagerly_is_warned_and_eager_by_choice_is_not(compiled_project):
    """A compile trial's misses: a model Dynamo skipped (a graph break in a loop) handed to a
    helper, `run(infer, model, x)`, and a step half of whose calls ran eagerly past the limit; its
    false warnings: the eager_on_recompile stance, and a limit hit in the warm-up by shapes the
    compiled steps never use."""
    p = compiled_project
    p.makepyfile(test_given=GIVEN_TESTS)
    result = run(p, "--opprof", "--opprof-device-key=cpu")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "test_given.py::test_skipped_through_a_helper: warning not_compiled: a torch.compile'd model or "
            "function ran eagerly in the steps: no compiled region ran *TORCH_LOGS=recompiles,graph_breaks*",
            "test_given.py::test_half_eager: warning recompile_limit: Dynamo hit its recompile limit (2) in this run*",
        ]
    )
    out = result.stdout.str()
    for test in ("test_eager_on_recompile_is_a_choice", "test_limit_hit_by_shapes_the_steps_do_not_use"):
        assert f"{test}: warning recompile_limit" not in out and f"{test}: warning not_compiled" not in out


DYNAMIC_TESTS = """
import json

import pytest
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).eval()


def test_exported_in_the_body(opprof):
    batch = torch.export.Dim("batch", max=1024)
    exported = torch.export.export(mlp(), (torch.randn(32, 128),), dynamic_shapes=({0: batch},)).module()
    opprof.run(exported, torch.randn(64, 128), warmup=1, steps=2)


def test_compiled_dynamic_in_a_whole_call(opprof):
    compiled = torch.compile(mlp(), backend="eager")
    x = torch.randn(32, 128)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        compiled(x)
        compiled(torch.randn(40, 128))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1


@pytest.mark.opprof
def test_flops_of_a_whole_call():
    with torch.no_grad():
        mlp()(torch.randn(8, 128))


@pytest.mark.opprof
def test_a_conv2d_that_raises():  # torch's count of it wraps: no negative FLOPs (a review's failed the test)
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv2d(torch.randn(1, 3, 1, 10), torch.randn(5, 3, 3, 3))
"""


def test_what_export_and_compile_trace_in_a_one_step_capture_keeps_its_dynamic_sizes(compiled_project):
    """The whole-call capture records the ops' inputs; torch's with_flops, reading the fake tensors'
    sizes, fixed a dynamic dimension: torch.export with a Dim erred `Constraints violated` and
    mark_dynamic compiled a graph per size, only under --opprof (a trial's). The FLOPs are counted
    after the capture, torch's numbers: 2 x 8 x 128 x 256 and 2 x 8 x 256 x 64 for the two Linears."""
    compiled_project.makepyfile(test_dynamic=DYNAMIC_TESTS)
    result = run(compiled_project, "--opprof", "--opprof-json=report.json")
    result.assert_outcomes(passed=4)
    report = json.loads((compiled_project.path / "report.json").read_text())
    test = next(t for t in report["tests"] if t["nodeid"].endswith("test_flops_of_a_whole_call"))
    ops = {op["name"]: op for op in test["profile"]["ops"]}
    assert ops["aten::addmm"]["flops"] == 2 * 8 * 128 * 256 + 2 * 8 * 256 * 64
