"""Work that is pytest's, not the test's, left out of a one-step capture: the events filter
(pure, on hand-built events) and a failing assert's message through `pytest --opprof`."""

from __future__ import annotations

import gzip
import importlib.util
import re

import pytest
from builders import annotation, kernel, launch, op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.events import GPU_ANNOTATION, Event, EventTable, without_spans

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


def test_without_spans_keeps_the_end_threads_of_the_ops_it_keeps():
    """An op whose end another thread recorded (a TorchScript fork) keeps that mark, at its new
    row, when set-aside work before it is left out (mutants: the remap in without_spans dropped or
    inverted); a dropped op's mark goes with it."""
    events = [
        step(1, 0, 100),
        annotation(ASIDE, 5, 10),
        op("aten::item", 6, 2),  # left out, and its mark with it
        op("forward", 20, 50),  # ends on thread 3
        op("aten::linear", 25, 10),
    ]
    table = EventTable.from_events(events)
    table.end_threads = {2: 3, 3: 3}
    left = without_spans(table, ASIDE)
    assert left.name == ["ProfilerStep#1", "forward", "aten::linear"]
    assert left.end_threads == {1: 3}


def test_a_step_ending_in_set_aside_work_is_trimmed_whatever_runs_on_other_threads_or_the_device():
    """The step's own last host work decides where its tail starts: a kernel still running on the
    device, or another thread's op, after the message began does not keep the message in the
    step (mutant: `and` -> `or` in _trim_tails' filter of the step's own events)."""
    events = [
        step(1, 0, 100),
        op("aten::mm", 1, 10),
        annotation(ASIDE, 40, 55),
        op("aten::item", 41, 5),
        kernel("gemm", 45, 20),  # launched by aten::mm, still running
        op("aten::add", 50, 5, tid=2),  # another thread
    ]
    table = kept(events, "ProfilerStep#")
    (marker,) = [e for e in table if e.name == "ProfilerStep#1"]
    assert marker.dur_ns == 40_000
    assert analyze(table).wall_ms == 0.040


def test_set_aside_spans_nested_in_a_later_one_are_merged_into_it():
    """Three set-aside spans, the third inside the second: an op after the nested one ends but
    inside the outer one is set aside too (mutant: merged against the first span's end)."""
    events = [
        step(1, 0, 200),
        annotation(ASIDE, 5, 5),
        annotation(ASIDE, 20, 50),
        annotation(ASIDE, 30, 5),
        op("aten::item", 40, 2),
        op("aten::mm", 80, 5),
    ]
    assert [e.name for e in kept(events)] == ["ProfilerStep#1", "aten::mm"]


def test_a_caught_failure_then_a_last_one_trims_at_the_last_message():
    """A test that caught a failed assert, went on, and failed another (a review: the step kept
    28 ms of reprs against 0.5 ms of its own ops): the last message is trimmed; the earlier
    one's time stays in the step, which went on after it."""
    events = [
        step(1, 0, 100),
        annotation(ASIDE, 10, 20),
        op("aten::add", 40, 5),
        annotation(ASIDE, 60, 35),
        op("aten::item", 61, 5),
    ]
    profile = analyze(kept(events, "ProfilerStep#"))
    assert profile.wall_ms == 0.060 and [o.name for o in profile.ops] == ["aten::add"]


def test_on_a_gpu_the_step_keeps_its_closing_synchronisation_and_its_end():
    """The step's own synchronisation follows the message on a GPU: the step is not trimmed;
    the set-aside range's copy on the device's stream is left out with it."""
    events = [
        step(1, 0, 100),
        op("aten::mm", 1, 10),
        annotation(ASIDE, 40, 50),
        Event(GPU_ANNOTATION, ASIDE, 40_000, 50_000, 0, 7, 0, 7),
        annotation("opprof::step_sync", 95, 3),
        launch(95.5, corr=0, name="cudaDeviceSynchronize"),
    ]
    table = kept(events, "ProfilerStep#")
    assert ASIDE not in [e.name for e in table]
    assert analyze(table).wall_ms == 0.100


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
    pytest.importorskip("torch")  # its run or script measures torch ops
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


@pytest.mark.usefixtures("fake_clock")
def test_an_assertion_pass_hooks_work_is_not_the_tests(pytester):
    """With enable_assertion_pass_hook, a conftest's pytest_assertion_pass runs inside the test
    call after each passing assert: its ops (a review's `aten::ones`, `aten::sum`) are not the
    test's and would have gone into its baseline."""
    pytest.importorskip("torch")  # its run or script measures torch ops
    pytester.makeini("[pytest]\nenable_assertion_pass_hook = true\n")
    pytester.makeconftest(
        "import torch\n\ndef pytest_assertion_pass(item, lineno, orig, expl):\n    torch.ones(3).cumsum(0)\n"
    )
    pytester.makepyfile(
        test_t="""
        import pytest, torch

        @pytest.mark.opprof
        def test_passes():
            y = torch.ones(4, 4) @ torch.ones(4, 4)
            assert y.shape == (4, 4)
            assert y.shape[0] == 4
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--opprof", "--opprof-top=50")
    result.assert_outcomes(passed=1)
    table = result.stdout.str().split("test_t.py::test_passes [passed]")[1].split("\n\n")[0]
    assert "aten::mm" in table and "aten::cumsum" not in table


CUDA_ASSERT = """
import pytest, torch

@pytest.mark.opprof
def test_marker():
    x = torch.ones(16, 16, device="cuda")
    y = x @ x
    assert y.sum() > 1e9, "on purpose"
"""


@pytest.mark.cuda
def test_on_a_gpu_a_failing_asserts_message_and_its_copies_are_not_the_tests(pytester):
    """On a GPU the repr copies the tensor to the host: that copy, and the ops, are pytest's; the
    set-aside range's copy on the device's stream is left out of the failing test's trace."""
    pytester.makepyfile(test_t=CUDA_ASSERT)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--opprof", "--opprof-top=50", "--opprof-trace-dir=traces"
    )
    result.assert_outcomes(failed=1)
    table = result.stdout.str().split("test_t.py::test_marker [failed]")[1].split("\n\n")[0]
    assert "aten::mm" in table and "aten::select" not in table and "aten::unbind" not in table
    assert re.search(r"^aten::item +1 ", table, re.M)
    (trace,) = (pytester.path / "traces").glob("*.json.gz")
    assert b"opprof::set_aside" not in gzip.decompress(trace.read_bytes())


def test_the_librarys_capture_in_a_plain_run_leaves_out_a_caught_asserts_message(pytester):
    """Without --opprof a test may still use the library's `capture()`: pytest's repr of a tensor
    in a failing assert's message (caught by pytest.raises) stays out of it, as under --opprof (a
    review's plain run counted 790 `aten::item` calls where the test made 1)."""
    pytest.importorskip("torch")  # the inner test measures torch ops
    pytester.makepyfile(
        test_t="""
        import pytest, torch
        from pytest_opprof import capture

        def test_library_capture():
            x = torch.ones(16, 16)
            with capture() as cap:
                y = x @ x
                with pytest.raises(AssertionError):
                    assert y.sum() > 1e9
            item = cap.profile.op("aten::item")
            assert item is not None and item.calls == 1  # the `>`'s own, not the message's
            assert cap.profile.op("aten::select") is None
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1)


def test_pytests_own_assert_explanation_stays_whole_with_and_without_opprof(pytester):
    """The plugin wraps pytest's assert-message helpers in every run: outside any capture they
    must give pytest's explanation as it is, whether the capture module was imported (a measuring
    run) or not (a plain run, which must not import it for them)."""
    pytester.makepyfile(
        test_t="""
        def test_plain():
            x = {"a": 1}
            assert x == {"a": 2}, "the dicts differ"
        """
    )
    measuring = [("--opprof",)] if importlib.util.find_spec("torch") else []  # without torch it is refused
    for args in [(), *measuring]:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["E       AssertionError: the dicts differ", "E       assert {'a': 1} == {'a': 2}*"]
        )
