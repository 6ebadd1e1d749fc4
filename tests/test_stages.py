"""Unit tests of the analysis stages one by one, on hand-built events: no torch."""

from __future__ import annotations

from builders import kernel, launch, op, step

from pytest_opprof.analysis import stages
from pytest_opprof.events import EventTable


def staged(events, stray_step=False):
    t = EventTable.from_events(events)
    rows = stages.select_rows(t)
    steps = stages.find_steps(rows, t, stray_step)
    ops = stages.op_columns(t, rows)
    return t, rows, steps, ops


def test_rows_and_steps():
    """Step markers become steps (sorted), ops and runtime calls are told apart."""
    events = [step(2, 100, 50), step(1, 0, 50), op("aten::mm", 10, 5), launch(12, corr=1), op("aten::mm", 110, 5)]
    _, rows, steps, ops = staged(events)
    assert [s.number for s in steps.spans] == [1, 2] and steps.wall_known
    assert ops.names == ["aten::mm"] * 2 and [r.name for r in rows.runtime] == ["cudaLaunchKernel"]
    assert (steps.of(10_000), steps.of(120_000), steps.of(70_000)) == (0, 1, -1)


def test_a_last_step_in_which_nothing_started_is_no_step_of_a_users_profiler():
    """A loop's final prof.step() opens a step just before the user's profiler stops: it held no
    work, and would read as a step of none (a profile of one's own scheduled profiler had `(1, 1, 0)`
    calls). An empty step between steps with work stays, and so do steps where nothing ran at all.
    opprof's own captures (no stray step) keep an empty last step: fn did nothing there."""
    ending_empty = [step(1, 0, 50), op("aten::mm", 10, 5), step(2, 100, 50), op("aten::mm", 110, 5), step(3, 200, 1)]
    assert [s.number for s in staged(ending_empty, stray_step=True)[2].spans] == [1, 2]
    assert [s.number for s in staged(ending_empty)[2].spans] == [1, 2, 3]
    empty_between = [step(1, 0, 50), op("aten::mm", 10, 5), step(2, 100, 50), step(3, 200, 50), op("aten::mm", 210, 5)]
    assert [s.number for s in staged(empty_between, stray_step=True)[2].spans] == [1, 2, 3]
    assert [s.number for s in staged([step(1, 0, 50), step(2, 100, 50)], stray_step=True)[2].spans] == [1, 2]


def test_nesting_finds_parents_launchers_and_steps_in_any_order_and_thread():
    """Parents per thread, the op around each runtime call, the step each op starts in;
    events given out of order, a second thread apart."""
    events = [
        op("aten::addmm", 20, 10),
        op("aten::linear", 10, 30),
        op("aten::relu", 60, 5),
        op("aten::mm", 15, 4, tid=2),
        launch(22, corr=7),
        step(1, 0, 100),
    ]
    _, rows, steps, ops = staged(events)
    tree = stages.nest(ops, rows.runtime, steps)
    by_name = dict(zip(ops.names, range(len(ops))))
    assert tree.parent[by_name["aten::addmm"]] == by_name["aten::linear"]
    assert tree.parent[by_name["aten::linear"]] == -1 and tree.parent[by_name["aten::mm"]] == -1
    assert tree.launcher_of_runtime == [by_name["aten::addmm"]]
    assert tree.child_ns[by_name["aten::linear"]] == 10_000
    assert tree.op_step == [0, 0, 0, 0]


def test_fold_keeps_the_caller_and_remaps_children_and_launches():
    """A chain of same-name ops folds into the outermost; its grandchildren and launches move up."""
    events = [
        op("aten::mean", 0, 30),
        op("aten::mean", 1, 28),
        op("aten::sum", 2, 5),
        op("aten::div_", 10, 5),
        launch(3, corr=1),
        step(1, 0, 40),
    ]
    _, rows, steps, ops = staged(events)
    tree = stages.nest(ops, rows.runtime, steps)
    folded_ops, folded = stages.fold_redispatches(ops, tree)
    assert folded_ops.names == ["aten::mean", "aten::sum", "aten::div_"]
    assert folded.parent == [-1, 0, 0]
    assert folded.launcher_of_runtime == [1]  # aten::sum, inside the folded inner mean
    assert folded.child_ns[0] == 5_000 + 5_000  # the caller's children are now sum and div_


def test_cpu_statistics_per_name_and_step():
    """Calls, inclusive and self CPU time per name, totals and per step; ops outside counted."""
    events = [step(1, 0, 100), step(2, 100, 100), op("aten::linear", 10, 30), op("aten::addmm", 15, 20)]
    events += [op("aten::linear", 110, 40), op("aten::addmm", 115, 20), op("aten::relu", 300, 5)]
    _, rows, steps, ops = staged(events)
    tree = stages.nest(ops, rows.runtime, steps)
    cpu = stages.cpu_statistics(ops, tree, steps.count)
    linear = cpu.name_index["aten::linear"]
    assert cpu.calls[linear] == 2 and cpu.cpu_ns[linear] == 70_000 and cpu.self_cpu_ns[linear] == 30_000
    assert cpu.cpu_per_step[linear * 2 : linear * 2 + 2] == [30_000, 40_000]
    assert cpu.outside == 1  # the relu after both steps


def test_device_attribution_self_inclusive_and_unattributed():
    """A kernel's time goes to its launching op (self) and once to each enclosing name; one
    without a launcher is unattributed; the two add up to the total."""
    events = [
        step(1, 0, 100),
        op("aten::linear", 10, 30),
        op("aten::addmm", 15, 20),
        launch(20, corr=5),
        kernel("gemm", 40, 8, corr=5),
        kernel("orphan", 60, 2),
    ]
    t, rows, steps, ops = staged(events)
    tree = stages.nest(ops, rows.runtime, steps)
    cpu = stages.cpu_statistics(ops, tree, steps.count)
    device = stages.attribute_device_time(rows, t, ops, tree, cpu, steps)
    addmm, linear = cpu.name_index["aten::addmm"], cpu.name_index["aten::linear"]
    assert (device.self_dev_ns[addmm], device.dev_ns[addmm], device.dev_ns[linear]) == (8_000, 8_000, 8_000)
    assert device.self_dev_ns[linear] == 0 and device.unattributed_ns == 2_000
    assert device.total_ns == sum(device.self_dev_ns) + device.unattributed_ns
    assert [(k.name, k.op) for k in device.kernel_stats(1)] == [("gemm", "aten::addmm"), ("orphan", None)]


def test_runtime_calls_without_any_cpu_op():
    """A trace with runtime calls and kernels but no CPU op analyses (all device time unattributed)."""
    from pytest_opprof.analysis import analyze

    profile = analyze([launch(10, corr=1), kernel("gemm", 20, 5, corr=1)])
    assert profile.ops == () and profile.unattributed_device_ns == 5_000
