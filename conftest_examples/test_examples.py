"""pytest-opprof by example. Run: pytest --opprof conftest_examples -q

Without --opprof these tests run the model once each and check nothing about operators.
"""

import pytest
import torch


def infer(model, x):
    with torch.no_grad():
        return model(x)


def test_run_steps(opprof, mlp):
    """Profile 10 steps after 3 warm-ups, then state the budget per operator."""
    model, x = mlp
    y = opprof.run(infer, model, x, warmup=3, steps=10)
    assert y.shape == (64, 10)
    opprof.assert_op_count("aten::addmm", 2)  # two Linear layers: exactly 2 calls per step
    opprof.assert_op_below("aten::addmm", ms=50)  # median ms/step over the 10 steps
    opprof.assert_no_op("aten::_to_copy")  # no stray dtype/device casts
    opprof.assert_no_sync()  # no .item(), no device-to-host copies


def test_capture_block(opprof, mlp):
    """One step around a block of code."""
    model, x = mlp
    with opprof.capture():
        infer(model, x)
    opprof.assert_op_count("aten::*mm", min=1)


def test_whole_call(opprof, mlp):
    """No explicit capture: the whole test body is one step, assertions checked at its end."""
    opprof.assert_op_count("aten::relu", 1)
    model, x = mlp
    infer(model, x)


@pytest.mark.opprof
def test_marker_only(mlp):
    """Measured (and reported) with --opprof, with no fixture: the call is one step."""
    model, x = mlp
    infer(model, x)


def test_custom_check(opprof, mlp):
    """opprof.profile is the latest Profile for checks of your own."""
    model, x = mlp
    opprof.run(infer, model, x, warmup=1, steps=5)
    if opprof.profile is not None:  # None without --opprof
        addmm = opprof.profile.op("aten::addmm")
        assert addmm.calls_per_step.samples == (2,) * 5
