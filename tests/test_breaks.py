"""Torch's graph-break reasons as Dynamo records them, read from a stand-in for
`torch._dynamo.utils` (its counters and its list of breaks), as torch 2.6 and 2.13 fill them."""

from __future__ import annotations

import sys
import traceback
from types import SimpleNamespace

import pytest

from pytest_opprof.assertions import break_reason
from pytest_opprof.breaks import breaks_seen, new_break_reasons, recompile_limit_hit


def listed(reason: str, line: int = 4, code: str = "if y.sum() > 0:") -> SimpleNamespace:
    """One entry of Dynamo's `graph_break_reasons` list: its reason and the user's frames."""
    outer = traceback.FrameSummary("/p/models.py", 30, "forward", line="return branchy(x)")
    inner = traceback.FrameSummary("/p/models.py", line, "branchy", line=code)
    return SimpleNamespace(reason=reason, user_stack=[outer, inner])


@pytest.fixture
def dynamo(monkeypatch):
    utils = SimpleNamespace(counters={"graph_break": {}, "unimplemented": {}}, graph_break_reasons=[])
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", utils)
    return utils


def test_reasons_come_from_the_graph_break_counter_else_from_unimplemented(dynamo):
    """torch 2.13 counts a data-dependent branch only as `unimplemented` (a trial's break read no
    reason), but that counter also holds what breaks no graph (a recompile limit, a review): its
    reasons are taken only where the `graph_break` counter has none new."""
    dynamo.counters["graph_break"]["Call to `torch._dynamo.graph_break()`"] = 1
    before = breaks_seen()
    dynamo.counters["unimplemented"] = {"Data-dependent branching": 1}
    assert new_break_reasons(before) == ["Data-dependent branching"]
    dynamo.counters["unimplemented"]["Dynamo recompile limit exceeded"] = 1
    dynamo.counters["graph_break"]["Failed to trace builtin operator"] = 1
    assert new_break_reasons(before) == ["Failed to trace builtin operator"]
    assert new_break_reasons(breaks_seen()) == []


def test_a_recompile_limit_hit_since_the_start_is_read_with_its_value(dynamo):
    """torch 2.13 counts the limit's hit as `unimplemented` (no graph break): a shape changing each
    call fell back to eager, and `assert_compiled` said only `nothing compiled`. Read with the
    value torch names; an earlier hit, or none, is None."""
    dynamo.counters["unimplemented"]["Dynamo recompile limit exceeded\n  Explanation: old"] = 1
    before = breaks_seen()
    assert recompile_limit_hit(before) is None
    dynamo.counters["unimplemented"]["Data-dependent branching"] = 1
    assert recompile_limit_hit(before) is None
    dynamo.counters["unimplemented"][
        "Dynamo recompile limit exceeded\n  Explanation: ... (currently set to 2). ..."
    ] = 1
    assert recompile_limit_hit(before) == "2"
    assert new_break_reasons(before) == ["Data-dependent branching"]  # no graph break
    dynamo.counters["unimplemented"] = {"cache_size_limit reached": 1}  # words of no value: ""
    assert recompile_limit_hit(before) == ""


def test_a_break_inside_torchs_own_code_is_named_at_the_users_call_once(dynamo, monkeypatch):
    """A trial's compiled `opt.step()` broke at torch's own `torch._dynamo.graph_break()` in
    torch/optim/optimizer.py: the reason came twice, once at the user's line with torch's hint
    `Remove the torch._dynamo.graph_break() call`, once at torch's line. Now once: the user's line,
    and where in torch the break is, without a hint meant for torch's code."""
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(__file__="/site/torch/__init__.py"))
    reason = (
        "Call to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break.\n  Hint: Remove the call."
    )
    user = traceback.FrameSummary("/p/train.py", 8, "opt_step", line="opt.step()")
    step = traceback.FrameSummary("/site/torch/optim/optimizer.py", 530, "wrapper", line="out = func(*args)")
    inner = traceback.FrameSummary(
        "/site/torch/optim/optimizer.py", 79, "_use_grad", line="torch._dynamo.graph_break()"
    )
    before = breaks_seen()
    dynamo.graph_break_reasons += [
        SimpleNamespace(reason=reason, user_stack=[user, step, inner]),
        SimpleNamespace(reason=reason, user_stack=[step, inner]),  # the resumed frame inside torch
    ]
    (found,) = new_break_reasons(before)
    assert break_reason(found) == (
        "Call to `torch._dynamo.graph_break()`: User-inserted graph break; at /p/train.py:8 in opt_step: "
        "`opt.step()`; the break is inside torch's own code, torch/optim/optimizer.py:79 in _use_grad"
    )
    # a disabled submodule in an nn.Sequential: Sequential.forward is call machinery, not where it broke
    skipped = "Skip calling `torch.compiler.disable()`d function\n  Hint: Remove the `torch.compiler.disable` call."
    sequential = traceback.FrameSummary(
        "/site/torch/nn/modules/container.py", 253, "forward", line="input = module(input)"
    )
    before = breaks_seen()
    dynamo.graph_break_reasons.append(SimpleNamespace(reason=skipped, user_stack=[user, sequential]))
    (found,) = new_break_reasons(before)
    assert break_reason(found).endswith(
        "at /p/train.py:8 in opt_step: `opt.step()`; hint: Remove the `torch.compiler.disable` call"
    )
    # one frame of torch's below the user's: that frame is where it broke
    before = breaks_seen()
    dynamo.graph_break_reasons.append(SimpleNamespace(reason=reason, user_stack=[user, inner]))
    (found,) = new_break_reasons(before)
    assert break_reason(found).endswith(
        "the break is inside torch's own code, torch/optim/optimizer.py:79 in _use_grad"
    )


def test_without_dynamo_there_is_no_reason(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)
    before = breaks_seen()
    assert new_break_reasons(before) == []
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", SimpleNamespace(counters=None, graph_break_reasons=None))
    assert new_break_reasons(before) == []


def test_a_branch_torch_2_6_counts_nowhere_is_read_from_the_list_with_its_line(dynamo):
    """torch 2.6 counts a data-dependent `if` in neither counter (the compat run's break read
    `torch names the reason when the model compiles inside opprof.run()`, which it had); its list
    of breaks holds it, terse, with the user's innermost frame."""
    dynamo.graph_break_reasons.append(listed("an earlier test's break", line=9))
    before = breaks_seen()
    dynamo.graph_break_reasons.append(listed("generic_jump TensorVariable()"))
    (found,) = new_break_reasons(before)
    assert break_reason(found) == "generic_jump TensorVariable(); at /p/models.py:4 in branchy: `if y.sum() > 0:`"


def test_the_line_named_is_the_innermost_outside_torchs_files(dynamo, monkeypatch):
    """Dynamo's stack holds the frames it traced, torch's own among them: a trial's break at a
    `torch.compiler.disable`d submodule was named at torch/nn/modules/module.py's `_call_impl`.
    The innermost frame outside the torch package that runs is named; where every frame is
    torch's, the innermost; without torch loaded, the innermost."""
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(__file__="/venv/site-packages/torch/__init__.py"))
    module_py = traceback.FrameSummary(
        "/venv/site-packages/torch/nn/modules/module.py",
        1789,
        "_call_impl",
        line="return forward_call(*args, **kwargs)",
    )
    skip = "Skip calling `torch.compiler.disable()`d function"
    entry = listed(skip, line=9, code="return self.b(x)")
    entry.user_stack.append(module_py)
    before = breaks_seen()
    dynamo.graph_break_reasons.append(entry)
    (found,) = new_break_reasons(before)
    assert break_reason(found) == f"{skip}; at /p/models.py:9 in branchy: `return self.b(x)`"
    inside_torch = SimpleNamespace(reason=skip, user_stack=[module_py])
    dynamo.graph_break_reasons.append(inside_torch)
    assert [break_reason(r) for r in new_break_reasons(before)][1] == (
        f"{skip}; at /venv/site-packages/torch/nn/modules/module.py:1789 in _call_impl: "
        "`return forward_call(*args, **kwargs)`"
    )
    monkeypatch.delitem(sys.modules, "torch")
    dynamo.graph_break_reasons[:] = [entry]
    assert break_reason(new_break_reasons(before)[0]).startswith(f"{skip}; at /venv/site-packages/torch/nn/modules/")


def test_a_counted_reason_without_a_line_takes_the_lists(dynamo):
    """torch 2.6 words an explicit break `'skip function graph_break in file .../decorators.py'`,
    which names torch's file, not the user's line; its list entry, of the same words, has it."""
    skip = "'skip function graph_break in file /torch/_dynamo/decorators.py'"
    before = breaks_seen()
    dynamo.counters["graph_break"][skip] = 1
    dynamo.graph_break_reasons.append(listed(skip, line=12, code="torch._dynamo.graph_break()"))
    found = new_break_reasons(before)
    assert [break_reason(r) for r in found] == [f"{skip}; at /p/models.py:12 in branchy: `torch._dynamo.graph_break()`"]


def test_a_data_dependent_branch_torch_2_11_words_without_its_line_takes_the_lists(dynamo):
    """torch 2.11's `unimplemented` counter words the branch but names no line (its text as the
    compat run read it); its list entry is `generic_jump X` for the counter's `jump with X`."""
    worded = (
        "Data-dependent branching\n  Explanation: Detected data-dependent branching.\n"
        "  Hint: Use `torch.cond` to express dynamic control flow.\n\n"
        "  Developer debug context: attempted to jump with TensorVariable()\n"
    )
    before = breaks_seen()
    dynamo.counters["unimplemented"][worded] = 1
    dynamo.graph_break_reasons.append(listed("generic_jump TensorVariable()"))
    (found,) = new_break_reasons(before)
    assert break_reason(found) == (
        "Data-dependent branching: Detected data-dependent branching; at /p/models.py:4 in branchy: "
        "`if y.sum() > 0:`; hint: Use `torch.cond` to express dynamic control flow"
    )


def test_every_listed_break_is_named_in_order_with_torchs_words_where_it_has_some(dynamo):
    """A review's `print("hi")` then `if y.sum() > 0:` (torch 2.13) read only the print: the
    `graph_break` counter's news hid the branch, worded only in `unimplemented`. Each break
    Dynamo listed is named, in its order; a counted reason no break listed (a recompile limit in
    `unimplemented`) is not, and a counted `graph_break` the list lacks still is."""
    printed = "Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace `print`"
    branch = "Data-dependent branching\n  Developer debug context: attempted to jump with TensorVariable()\n"
    before = breaks_seen()
    dynamo.counters["graph_break"].update({printed: 1, "a break the list lacks": 1})
    dynamo.counters["unimplemented"].update({branch: 1, "Dynamo recompile limit exceeded": 1})
    dynamo.graph_break_reasons.append(listed(printed, line=3, code='print("hi")'))
    dynamo.graph_break_reasons.append(listed("generic_jump TensorVariable()"))
    dynamo.graph_break_reasons.append(listed("generic_jump SymNodeVariable()", line=9, code="if n > 2:"))
    assert [break_reason(r) for r in new_break_reasons(before)] == [
        "Failed to trace builtin operator: Dynamo does not know how to trace `print`; at /p/models.py:3 in branchy: "
        '`print("hi")`',
        "Data-dependent branching; at /p/models.py:4 in branchy: `if y.sum() > 0:`",
        "generic_jump SymNodeVariable(); at /p/models.py:9 in branchy: `if n > 2:`",
        "a break the list lacks",
    ]


def test_a_counted_reason_that_names_its_line_is_kept_as_torch_wrote_it(dynamo):
    worded = 'Data-dependent branching\n  # File "/p/m.py", line 4, in branchy, code: if y.sum() > 0:'
    before = breaks_seen()
    dynamo.counters["unimplemented"][worded] = 1
    dynamo.graph_break_reasons.append(listed(worded, line=99))
    assert new_break_reasons(before) == [worded]


def test_a_list_cleared_since_by_dynamo_reset_is_read_whole(dynamo):
    dynamo.graph_break_reasons.extend([listed("old", line=1), listed("old", line=2)])
    before = breaks_seen()
    dynamo.graph_break_reasons[:] = [listed("generic_jump TensorVariable()")]
    assert [r.splitlines()[0] for r in new_break_reasons(before)] == ["generic_jump TensorVariable()"]


def test_an_entry_without_frames_gives_its_reason_alone(dynamo):
    before = breaks_seen()
    dynamo.graph_break_reasons.append(SimpleNamespace(reason="r", user_stack=[]))
    dynamo.graph_break_reasons.append(SimpleNamespace(reason="r", user_stack=None))
    assert new_break_reasons(before) == ["r"]


def test_the_graphs_compiled_since_a_moment_and_the_limits_two_causes(dynamo):
    """Dynamo's `unique_graphs` stat counts the graphs it compiled (unknown without its stats, or
    after a reset that cleared them); a limit hit after fewer graphs in the run than the limit is
    earlier code's in the process, else (or unknown) the run's own new shapes."""
    from pytest_opprof.breaks import graphs_since
    from pytest_opprof.errors import recompile_limit_hit_text

    before = breaks_seen()
    assert graphs_since(before) is None  # no stats kept: unknown, not 0 (a review's)
    dynamo.counters["stats"] = {}
    before = breaks_seen()
    dynamo.counters["stats"] = {"unique_graphs": 3}
    assert graphs_since(before) == 3 and graphs_since(breaks_seen()) == 0
    before = breaks_seen()
    dynamo.counters["stats"] = {}  # torch._dynamo.reset() in the run: the count no longer tells
    assert graphs_since(before) is None
    earlier = recompile_limit_hit_text("8", 0)
    assert "after this run compiled 0 graphs: earlier tests or calls in this process" in earlier
    for own in (recompile_limit_hit_text("2", 2), recompile_limit_hit_text("", 0), recompile_limit_hit_text("2")):
        assert "each new input shape or Python value compiled it anew" in own and "earlier tests" not in own


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own imports
def test_a_compiled_callable_is_told_in_each_of_its_forms():
    """torch.compile(module), torch.compile(function) and module.compile() are compiled; a plain
    module, a function or a lambda around a compiled model are not (nothing says so there), nor
    torch.compiler.disable's, nor any under the force_eager stance (a review's false warnings)."""
    torch = pytest.importorskip("torch")
    from pytest_opprof.capture import compiled_callable

    compiled_method = torch.nn.Linear(2, 2)
    compiled_method.compile()
    compiled = [torch.compile(torch.nn.Linear(2, 2)), torch.compile(lambda x: x + 1), compiled_method]
    assert all(compiled_callable(fn) for fn in compiled)
    assert not any(compiled_callable(fn) for fn in (torch.nn.Linear(2, 2), torch.relu, lambda x: compiled[0](x)))
    # what is meant to run eagerly: torch.compiler.disable's (marked as a compiled one is), Dynamo off
    disabled = [torch.compiler.disable(lambda x: x + 1), torch.compiler.disable(torch.nn.Linear(2, 2))]
    assert not any(compiled_callable(fn) for fn in disabled)
    with torch.compiler.set_stance("force_eager"):
        assert not any(compiled_callable(fn) for fn in compiled)


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own imports
def test_what_run_was_handed_is_read_safely():
    """run()'s fn and arguments are looked through for compiled code: an empty closure cell (a name
    the lambda reads before it is bound) and an object whose attributes raise are none, no crash."""
    torch = pytest.importorskip("torch")
    from pytest_opprof.capture import _compiled_safely, _reachable

    def outer():
        fn = lambda: later  # noqa: E731, F821 - `later` is bound after: its cell is empty now
        assert fn.__closure__ is not None
        return fn
        later = 1  # noqa: F841

    class Hostile:
        def __getattr__(self, name):
            raise RuntimeError(name)

    compiled = torch.compile(torch.nn.Linear(2, 2))
    found = _reachable((outer(), Hostile(), lambda: compiled))
    assert not any(_compiled_safely(obj) for obj in found[:-2]) and any(_compiled_safely(obj) for obj in found)
