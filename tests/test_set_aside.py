"""Work that is pytest's, not the test's, left out of a one-step capture: the events filter
(pure, on hand-built events) and a failing assert's message through `pytest --opprof`."""

from __future__ import annotations

import re

import pytest
from builders import annotation, kernel, launch, op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.events import EventTable, without_spans

ASIDE = "opprof::set_aside"


def kept(events, trimmed=""):
    return without_spans(EventTable.from_events(events), ASIDE, trimmed).to_events()


def test_the_work_inside_a_set_aside_span_on_its_thread_is_left_out():
    """Ops (nested ones too) and runtime calls that start inside, and the kernels those
    launched; another thread's ops at the same time and kernels launched before stay."""
    events = [
        step(1, 0, 100),
        op("aten::mm", 1, 10),
        launch(2, corr=7),
        kernel("gemm", 20, 30, corr=7),  # launched before the span, ran during it: the test's
        annotation(ASIDE, 40, 50),
        op("aten::item", 41, 5),
        op("aten::_local_scalar_dense", 42, 2),
        annotation(ASIDE, 45, 3),  # nested: merged into the outer one
        launch(50, corr=8),
        kernel("copy", 51, 2, corr=8),
        op("aten::add", 60, 5, tid=2),  # another thread
    ]
    assert [e.name for e in kept(events)] == ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "gemm", "aten::add"]


def test_without_a_set_aside_span_the_table_is_the_same_object():
    table = EventTable.from_events([step(1, 0, 10), op("aten::mm", 1, 2)])
    assert without_spans(table, ASIDE, "ProfilerStep#") is table


def test_a_step_that_ends_in_set_aside_work_ends_where_it_began():
    """A failing assert's message is the last thing the step does: the wall is the test's."""
    events = [step(1, 0, 100), op("aten::mm", 1, 10), annotation(ASIDE, 40, 55), op("aten::item", 41, 5)]
    profile = analyze(kept(events, "ProfilerStep#"))
    assert profile.wall_ms == 0.040 and [o.name for o in profile.ops] == ["aten::mm"]


def test_a_step_that_goes_on_after_set_aside_work_keeps_its_end():
    """A test that caught the AssertionError and went on: its later op is its own."""
    events = [step(1, 0, 100), annotation(ASIDE, 40, 10), op("aten::item", 41, 5), op("aten::add", 70, 5)]
    profile = analyze(kept(events, "ProfilerStep#"))
    assert profile.wall_ms == 0.100 and [o.name for o in profile.ops] == ["aten::add"]


TENSOR_ASSERT = """
import pytest, torch

@pytest.mark.opprof
def test_marker():
    x = torch.ones(16, 16)
    y = x @ x
    assert y.sum() > 1e9, "on purpose"

def test_block(opprof):
    x = torch.ones(16, 16)
    with opprof.capture():
        y = x @ x
        assert (y > 1e9).all()

@pytest.mark.opprof
def test_own_message():
    x = torch.ones(16, 16)
    y = x @ x
    if y.sum() < 1e9:
        raise AssertionError(f"small: {y.sum().item()}")
"""


@pytest.mark.usefixtures("fake_clock")
def test_a_failing_asserts_message_is_not_the_tests_work(pytester):
    """A trial's failing `assert y.sum() > 1e9` (a marker test) reported 535 `aten::item` and
    532 `aten::select` calls a step: pytest's repr of the tensor in the message, made inside the
    test call. They are left out; a message the test makes itself is its own work."""
    pytester.makepyfile(test_t=TENSOR_ASSERT)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--opprof", "--opprof-top=50")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    tables = {
        name: out.split(f"test_t.py::{name} [failed]")[1].split("\n\n")[0] for name in ("test_marker", "test_block")
    }
    for name, table in tables.items():  # the repr's; the one `aten::item` is the test's `if` on a tensor
        assert "aten::mm" in table and "aten::is_nonzero" in table, name
        assert "aten::select" not in table and "aten::unbind" not in table, name
        assert re.search(r"^aten::item +1 ", table, re.M), name
    own = out.split("test_t.py::test_own_message [failed]")[1].split("\n\n")[0]
    assert "aten::item" in own  # the test's own `.item()`
    assert "opprof::set_aside" not in out
