"""Training loops under opprof: backward nodes by name, steps that differ by phase (gradient
accumulation), optimizers' scalar reads, what a training step's failure says."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _deterministic(fake_clock):
    """Every capture in these runs is timed by the fake clock: no test here reads real time."""
    return fake_clock


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


TRAINER = """
import itertools, os
import torch

def trainer(accumulate=1):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
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

        def test_the_real_name(opprof):
            opprof.run(trainer(), warmup=1, steps=2)
            opprof.assert_op_count("AddmmBackward0", 2)
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "E * AddmmBackward: not an operator torch knows, so asserting it is absent proves nothing; "
            "did you mean AddmmBackward0*",
            "E * autograd::engine::evaluate_function: AddmmBackward: not an operator torch knows, so counting "
            "zero calls of it proves nothing; did you mean autograd::engine::evaluate_function: AddmmBackward0*",
        ]
    )
