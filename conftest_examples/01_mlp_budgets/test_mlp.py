"""Budgets and counts for an MLP, in each way of capturing.

pytest --opprof conftest_examples/01_mlp_budgets
"""

import pytest
from conftest import infer


def test_budgets(opprof, mlp):
    """10 profiled steps after 3 warm-ups, then the operator budget: counts are exact, times
    are medians per step (generous here: the point is the shape of a budget)."""
    model, x = mlp
    y = opprof.run(infer, model, x, warmup=3, steps=10)
    assert y.shape == (64, 10)
    opprof.assert_op_count("aten::addmm", 2)  # two Linear layers: exactly 2 calls per step
    opprof.assert_op_below("aten::addmm", ms=50)
    opprof.assert_total_below(ms=200)  # the whole step
    opprof.assert_no_op("aten::_to_copy")  # no stray dtype or device casts
    opprof.assert_no_sync()  # no .item(), no device-to-host copies


def test_capture_block(opprof, mlp):
    """One step around a block of code."""
    model, x = mlp
    with opprof.capture():
        infer(model, x)
    opprof.assert_op_count("aten::*mm", min=1)


def test_whole_call(opprof, mlp):
    """No explicit capture: the whole test body is one step, checked when it returns."""
    opprof.assert_op_count("aten::relu", 1)
    model, x = mlp
    infer(model, x)


@pytest.mark.opprof
def test_marker_only(mlp):
    """Measured and reported under --opprof without the fixture (the call is one step)."""
    model, x = mlp
    infer(model, x)


def test_custom_check(opprof, mlp):
    """opprof.profile is the latest Profile, for checks of your own."""
    model, x = mlp
    opprof.run(infer, model, x, warmup=2, steps=5)
    if opprof.profile is not None:  # None without --opprof
        matmuls = opprof.profile.match("aten::*mm")
        assert sum(op.calls_per_step.median for op in matmuls) == 2
