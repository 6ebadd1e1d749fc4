"""Training loops under opprof: backward nodes by name, steps that differ by phase (gradient
accumulation), optimizers' scalar reads, what a training step's failure says."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("fake_clock")  # every capture here is timed by the fake clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


TRAINER = """
import itertools, os
import torch

def trainer(accumulate=1):
    torch.manual_seed(0)
    width = int(os.environ.get("WIDTH", "32"))
    model = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    calls = itertools.count(1)

    def micro_step():
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if next(calls) % accumulate == 0:  # the optimizer steps every `accumulate` calls
            opt.step()
            opt.zero_grad()
    return micro_step
"""


def test_a_backward_node_name_without_its_number_fails_naming_the_real_one(pytester):
    """A training trial's `assert_no_op("ToCopyBackward")` passed beside 7 `ToCopyBackward0` a
    step: torch numbers its backward nodes, so the name without its number never runs."""
    pytester.makepyfile(trainer=TRAINER)
    pytester.makepyfile(
        test_nodes="""
        import torch
        from trainer import trainer

        def test_typo(opprof):
            opprof.run(trainer(), warmup=1, steps=2)
            opprof.assert_no_op("AddmmBackward")

        def test_typo_with_the_engine_prefix(opprof):
            opprof.run(trainer(), warmup=1, steps=2)
            opprof.assert_op_count("autograd::engine::evaluate_function: AddmmBackward", 0)

        def test_a_custom_function_node_is_not_refused(opprof):
            opprof.run(trainer(), warmup=1, steps=2)
            opprof.assert_no_op("MyScaleBackward")

        class Exp(torch.autograd.Function):  # its node, ExpBackward, is no typo of torch's ExpBackward0
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        def test_a_custom_function_named_as_torchs_is_not_refused(opprof):
            x = torch.ones(3, requires_grad=True)
            opprof.run(lambda: Exp.apply(x).sum().backward(), warmup=1, steps=2)
            opprof.assert_op_count("ExpBackward", 1)

        def test_the_real_name(opprof):
            opprof.run(trainer(), warmup=1, steps=2)
            opprof.assert_op_count("AddmmBackward0", 2)

        def test_slips(opprof):  # a training trial's: each passed beside the node it meant
            x = torch.ones(3, 4, requires_grad=True)
            opprof.run(lambda: Exp.apply(x.t()).sum().backward(), warmup=1, steps=2)
            for name in ("ToCopyBackwards0", "AddmBackward0", "ExpBackwards", "tbackward0", "expBackward"):
                try:
                    opprof.assert_no_op(name)
                except AssertionError as e:
                    print("SLIP", e)
                else:
                    print("PASSED", name)
        """
    )
    run(pytester).assert_outcomes(passed=3, failed=3)  # a plain run refuses the same names
    result = run(pytester, "--opprof", "-s")
    result.assert_outcomes(passed=4, failed=2)
    assert "PASSED" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*SLIP ToCopyBackwards0: not an operator torch knows, so asserting it is absent proves nothing; "
            "did you mean ToCopyBackward0*",
            "SLIP AddmBackward0: not an operator torch knows*did you mean AddmmBackward0*",
            "SLIP ExpBackwards: not an operator torch knows*did you mean ExpBackward*",
            "SLIP tbackward0: no op of exactly that name ran, but TBackward0 did*",
            "SLIP expBackward: no op of exactly that name ran, but ExpBackward did*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E * AddmmBackward: not an operator torch knows, so asserting it is absent proves nothing; "
            "did you mean AddmmBackward0*",
            "E * autograd::engine::evaluate_function: AddmmBackward: not an operator torch knows, so counting "
            "zero calls of it proves nothing; did you mean autograd::engine::evaluate_function: AddmmBackward0*",
        ]
    )


ACCUMULATING = """
import os
from trainer import trainer

def test_micro_step(opprof):
    opprof.run(trainer(accumulate=4), warmup=int(os.environ.get("WARMUP", "3")), steps=8)
"""


def test_an_op_that_runs_in_some_steps_only_is_no_work_change_when_the_phase_moves(pytester, monkeypatch):
    """Gradient accumulation: the optimizer steps every 4th call, so whether the one call that
    reads the ops' inputs holds its step depends on where the cycle stands, which `warmup`, `-k`
    or test order move. A training trial's unchanged code failed with `work changed: aten::copy_:
    inputs (none) -> (float[], double[]) x6`. A real change to an op of every step still fails."""
    pytester.makepyfile(trainer=TRAINER, test_accumulating=ACCUMULATING)
    assert run(pytester, "--opprof-update-baseline").ret == 0
    for warmup in ("4", "5", "6"):  # every phase of the cycle against the baseline's
        monkeypatch.setenv("WARMUP", warmup)
        moved = run(pytester, "--opprof")
        assert moved.ret == 0, moved.stdout.str()
    monkeypatch.setenv("WIDTH", "48")
    wider = run(pytester, "--opprof")
    wider.assert_outcomes(failed=1)
    wider.stdout.fnmatch_lines(["*work changed in * ops: aten::addmm: 1.5x the FLOPs per step*float[[]8,48]*"])


SHARED_NAME = """
import itertools, os
import torch

def test_accumulating(opprof):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    bias = torch.zeros(8, 4) if os.environ.get("MATRIX") else torch.zeros(4)
    calls = itertools.count(1)

    def micro_step():
        out = model(x)
        out.add_(bias)  # the forward's in-place add: the optimizer's aten::add_ shares its name
        torch.nn.functional.cross_entropy(out, y).backward()
        if next(calls) % 4 == 0:
            opt.step()
            opt.zero_grad()

    opprof.run(micro_step, warmup=int(os.environ.get("WARMUP", "3")), steps=8)
"""


def test_an_input_replaced_in_an_op_of_some_steps_is_a_work_change(pytester, monkeypatch):
    """An op whose calls differ between steps (the optimizer's aten::add_ every 4th call) is
    judged on inputs replaced, not added or dropped by where the cycle stood: a forward add_
    of the same name whose bias went from [4] to [8,4] fails (a review found it passed), and a
    moved cycle alone does not."""
    pytester.makepyfile(test_shared=SHARED_NAME)
    assert run(pytester, "--opprof-update-baseline").ret == 0
    for warmup in ("4", "5", "6"):
        monkeypatch.setenv("WARMUP", warmup)
        moved = run(pytester, "--opprof")
        assert moved.ret == 0, moved.stdout.str()
    monkeypatch.setenv("MATRIX", "1")
    changed = run(pytester, "--opprof")
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        [
            "*aten::add_: inputs (float[[]8,4], float[[]4]), (float[[]4], float[[]4]) and 1 more -> (float[[]8,4], float[[]8,4]) (in the steps that ran it: *"
        ]
    )


ADAM_STEP = """
import os
import torch

def test_adam_step(opprof):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.Adam(model.parameters(), foreach=False)
    x = torch.randn(4, 8)

    def train_step():
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss.item() if os.environ.get("ITEM") else None

    opprof.run(train_step, warmup=2, steps=int(os.environ.get("STEPS", "3")))
    if os.environ.get("NO_SYNC"):
        opprof.assert_no_sync()
"""


def test_a_scalar_read_in_an_optimizer_step_is_named_where_it_ran(pytester, monkeypatch):
    """Adam reads its step counts with `.item()`: on a CPU-only machine assert_no_sync fails (it
    stands in for a device run), and the failure says where the reads ran and that a scalar kept
    on the CPU never syncs, where a training trial's said only `aten::item (12/step)`; a read of
    the test's own beside them is said apart (another's `loss.item()` read as inside the
    optimizer's range)."""
    pytester.makepyfile(test_adam=ADAM_STEP)
    monkeypatch.setenv("NO_SYNC", "1")
    monkeypatch.setenv("STEPS", "2")
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    monkeypatch.setenv("ITEM", "1")
    with_item = run(pytester, "--opprof")
    with_item.assert_outcomes(failed=1)
    # its own read said apart from Adam's (a training trial's `loss.item()` read as inside the optimizer)
    with_item.stdout.fnmatch_lines(
        [
            "E * host-device syncs: aten::item (3/step, by place: 2/step inside Optimizer.step#Adam.step, "
            "1/step outside every range), *"
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E * host-device syncs: aten::item (*/step, called from Python inside Optimizer.step#Adam.step*), "
            "aten::_local_scalar_dense (*/step, in aten::item inside Optimizer.step#Adam.step*); a CPU-only capture: "
            "these reads wait for no device here, and sync where their tensor is on one (a scalar kept on the CPU, "
            "such as a non-capturable optimizer's step count, never does)"
        ]
    )


def test_a_run_keyword_misspelled_is_refused_before_the_warm_up(pytester):
    """`opprof.run(step, x, y, step=3)`: the keyword goes to fn, which does not take it, and a
    trial's test died with fn's own TypeError after the warm-up. A keyword fn does not take that
    looks like steps= or warmup= is refused at once, with or without --opprof, naming the fix;
    one fn takes (or swallows in **kwargs) still goes to it."""
    pytester.makepyfile(
        test_slip="""
        import torch

        model = torch.nn.Linear(4, 2)
        x = torch.randn(3, 4)

        def train_step(x, scale=1.0):
            (model(x) * scale).sum().backward()

        def test_step(opprof):
            opprof.run(train_step, x, step=3)

        def test_warm_up(opprof):
            opprof.run(model, x, warm_up=1)

        def test_fns_own(opprof):
            opprof.run(train_step, x, scale=2.0, steps=2)

        def test_swallowed(opprof):
            opprof.run(lambda x, **kw: train_step(x), x, step=3, steps=2)
        """
    )
    for args in ([], ["--opprof"]):
        result = run(pytester, *args)
        result.assert_outcomes(passed=2, failed=2)
        result.stdout.fnmatch_lines_random(
            [
                "E *OpprofUsageError: step=3: fn takes no keyword 'step', and opprof.run() passes every keyword but "
                "warmup= and steps= to fn; did you mean steps=3?",
                "E *OpprofUsageError: warm_up=1: fn takes no keyword 'warm_up', * did you mean warmup=1?",
            ]
        )


def test_a_count_change_of_an_op_run_in_several_places_says_each(pytester, monkeypatch):
    """A training trial added `loss.item()` beside Adam's step-count reads: the structure verdict
    read `aten::item 20 -> 21/step` and nothing of where. Where the op's calls ran in several
    places, the change says each with its calls per step."""
    pytester.makepyfile(test_adam=ADAM_STEP)
    assert run(pytester, "--opprof-update-baseline").ret == 0
    monkeypatch.setenv("ITEM", "1")
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*structure changed: aten::item 2 -> 3/step (2/step inside Optimizer.step#Adam.step, "
            "1/step outside every range)*"
        ]
    )


CHECKPOINTED = """
import os
import torch
from torch.utils.checkpoint import checkpoint

def test_train_step(opprof):
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    head = torch.nn.Linear(16, 4)
    x = torch.randn(8, 16)

    def train_step():
        h = checkpoint(block, x, use_reentrant=False) if os.environ.get("CHECKPOINT") else block(x)
        head(h).sum().backward()

    opprof.run(train_step, warmup=2, steps=3)
"""


def test_ops_activation_checkpointing_recomputes_are_said_in_the_backward_pass(pytester, monkeypatch):
    """Checkpointing a block recomputes its forward ops in the backward pass: a training trial's
    structure verdict read `aten::addmm 3 -> 5/step` and nothing of where the new calls ran."""
    pytester.makepyfile(test_ckpt=CHECKPOINTED)
    assert run(pytester, "--opprof-update-baseline").ret == 0
    monkeypatch.setenv("CHECKPOINT", "1")
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*structure changed: *aten::addmm 3 -> 5/step (3/step outside the backward pass, "
         "2/step in the backward pass)*"]
    )  # fmt: skip


AUTOCAST_TEST = """
import os
import torch

def test_mixed(opprof):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=os.environ.get("OPPROF_T_AUTOCAST") == "1"):
            return model(x)

    opprof.run(step, warmup=1, steps=5)
"""


@pytest.mark.parametrize(("recorded", "now", "words"), [("1", "0", "removed"), ("0", "1", "added")])
def test_autocast_removed_or_added_is_named_on_the_structure_line(pytester, monkeypatch, recorded, now, words):
    """A training trial's autocast removed read `aten::linear 4 -> 2/step, - aten::to (was 5/step), ...`,
    the cause only in the work lines: the structure line says the reduced-precision inputs ran on one
    side only, and what its counts are."""
    pytester.makepyfile(test_mixed=AUTOCAST_TEST)
    monkeypatch.setenv("OPPROF_T_AUTOCAST", recorded)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_T_AUTOCAST", now)
    result = run(pytester, "--opprof")
    result.assert_outcomes(failed=1)
    side = (
        "the baseline's ops took c10::BFloat16 (torch.bfloat16) inputs, none here: the model or its inputs in "
        "another dtype now"
        if words == "removed"
        else "the ops take c10::BFloat16 (torch.bfloat16) inputs here, none in the baseline: the model or its inputs "
        "cast to it now"
    )
    result.stdout.fnmatch_lines(
        [
            f"test_mixed.py::test_mixed: structure changed: {side} (model.to(...), a cast), or autocast {words} (its "
            "casts and re-dispatched calls, an op called inside itself, * in these counts); the ops: *aten::to*"
        ]
    )
