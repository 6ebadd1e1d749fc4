"""The device's timeline, on hand-built events whose figures can be worked out by hand."""

from __future__ import annotations

from builders import kernel, launch, memcpy, op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.events import KERNEL, Event


def two_steps():
    """Per step (100 us): an add whose kernel (10 us) is shorter than its launch (20 us), a
    copy (30 us) overlapping a matmul kernel (40 us) by 10 us, an NCCL kernel on stream 9
    overlapping the matmul by 5 us; the host runs ops for 60 us of the step."""
    events = []
    for n, t0 in ((1, 0), (2, 100)):
        c = n * 10
        events += [
            step(n, t0, 100),
            op("aten::add", t0 + 0, 25),
            launch(t0 + 2, corr=c, dur_us=20),
            op("aten::mm", t0 + 30, 10),
            launch(t0 + 31, corr=c + 1, dur_us=2),
            op("aten::copy_", t0 + 42, 8),
            launch(t0 + 43, corr=c + 2, name="cudaMemcpyAsync", dur_us=2),
            op("nccl:all_reduce", t0 + 51, 9),
            launch(t0 + 52, corr=c + 3, dur_us=2),
            kernel("vectorized_add", t0 + 24, 10, corr=c),  # 24-34
            kernel("gemm", t0 + 40, 40, corr=c + 1),  # 40-80
            memcpy("Memcpy HtoD (Pageable -> Device)", t0 + 70, 30, 4096, corr=c + 2),  # 70-100
            kernel("ncclKernel_AllReduce", t0 + 75, 10, corr=c + 3, stream=9),  # 75-85
        ]
    return events


def test_the_figures_of_a_capture_and_of_each_step():
    """Span, busy, idle, compute, comm, memory, overlaps, queue and streams, worked out by hand."""
    t = analyze(two_steps()).timeline
    # device intervals per step: 24-34, 40-100 -> busy 70 us; span 24-200 over both steps
    assert (t.total.span_ns, t.total.busy_ns, t.total.idle_ns) == (176_000, 140_000, 36_000)
    assert (t.total.compute_ns, t.total.comm_ns, t.total.memory_ns) == (100_000, 20_000, 60_000)
    assert (t.total.compute_comm_overlap_ns, t.total.compute_memory_overlap_ns) == (10_000, 20_000)
    assert [(f.span_ns, f.busy_ns, f.compute_memory_overlap_ns) for f in t.per_step] == [(76_000, 70_000, 10_000)] * 2
    # queue: kernel start - launch start: add 22, gemm 9, nccl 23 (memcpy is not a kernel)
    assert t.total.queue == (22_000, 23_000, 23_000)
    assert [(s.device, s.stream, s.busy_ns, s.kernels, s.memory_ops) for s in t.streams] == [
        (0, 7, 140_000, 4, 2),
        (0, 9, 20_000, 2, 0),
    ]


def test_host_bound_time_and_launch_bound_ops():
    """The device idle while the host ran ops, and the op whose kernels are shorter than their launches."""
    t = analyze(two_steps()).timeline
    # host ops 0-25, 30-40, 42-50, 51-60; device idle 0-24, 34-40 -> 24 + 6 us per step
    assert t.host_bound_ns == 60_000
    assert t.host_bound_share == 0.3
    ((bound),) = t.launch_bound
    assert (bound.op, bound.kernels, bound.kernel_ns, bound.launch_ns) == ("aten::add", 2, 10_000, 20_000)


def test_the_timeline_line_names_three_launch_bound_ops_and_counts_the_rest():
    """Five ops whose one kernel (2 us) is shorter than its launch (10 us): the line names the
    costliest three and counts two more."""
    from pytest_opprof.tables import timeline_line

    events = [step(1, 0, 200)]
    for i in range(5):
        t0 = i * 30
        events += [
            op(f"aten::op{i}", t0, 12),
            launch(t0 + 1, corr=i + 1, dur_us=10),
            kernel(f"k{i}", t0 + 15, 2, corr=i + 1),
        ]
    line = timeline_line(analyze(events))
    assert line is not None
    bound = line.split("; launch-bound: ")[1]
    assert bound.count("(kernel 0.0020 < launch 0.0100 ms)") == 3 and bound.endswith(" and 2 more")


def test_json_has_the_fields_and_cpu_profiles_have_zeros():
    """The JSON fields, per step too; on CPU zeros and nulls, the same fields."""
    d = analyze(two_steps()).to_dict()["timeline"]
    assert (
        d["busy_ms"] == 0.14
        and d["idle_ms"] == 0.036
        and d["queue_ms"] == {"median": 0.022, "p90": 0.023, "max": 0.023}
    )
    assert d["host_bound_pct"] == 30.0
    assert d["launch_bound"] == [{"op": "aten::add", "kernels": 2, "kernel_ms": 0.01, "launch_ms": 0.02}]
    assert len(d["per_step"]) == 2 and set(d["per_step"][0]) == set(d) - {
        "streams",
        "per_step",
        "host_bound_ms",
        "host_bound_pct",
        "launch_bound",
    }
    cpu = analyze([step(1, 0, 10), op("aten::add", 1, 2)]).to_dict()["timeline"]
    assert cpu["busy_ms"] == 0 and cpu["queue_ms"] is None and cpu["host_bound_pct"] is None
    assert cpu["streams"] == [] and len(cpu["per_step"]) == 1


def test_two_devices_are_each_their_own_timeline_summed():
    """Two GPUs busy at once are two busy GPUs (busy equals Profile.device_busy_ns), and compute
    on one does not overlap communication on the other."""
    events = [
        step(1, 0, 100),
        Event(KERNEL, "gemm", 10_000, 20_000, 0, 7, 0, 7),
        Event(KERNEL, "ncclKernel_AllReduce", 15_000, 20_000, 1, 7, 1, 7),
    ]
    profile = analyze(events)
    t = profile.timeline
    assert (t.total.span_ns, t.total.busy_ns, t.total.idle_ns) == (40_000, 40_000, 0)
    assert t.total.busy_ns == profile.device_busy_ns
    assert (t.total.compute_ns, t.total.comm_ns, t.total.compute_comm_overlap_ns) == (20_000, 20_000, 0)
    assert [s.busy_ns for s in t.streams] == [20_000, 20_000]


def test_a_cuda_graph_replay_is_not_launch_bound_and_queues_once():
    """One 15 us cudaGraphLaunch replaying 8 kernels of 5 us: the one call feeds them all (not
    launch-bound), and the queue counts the launch once, by its first kernel."""
    events = [step(1, 0, 200), op("CUDAGraph::replay", 1, 20), launch(2, corr=5, name="cudaGraphLaunch", dur_us=15)]
    events += [kernel(f"k{i}", 20 + 6 * i, 5, corr=5) for i in range(8)]
    t = analyze(events).timeline
    assert t.launch_bound == ()
    assert t.total.queue == (18_000, 18_000, 18_000)


def test_the_tables_name_the_timeline_figures():
    """The tables' timeline line, and none without device work."""
    text = analyze(two_steps()).table()
    assert (
        "timeline: device busy 80% of 0.176 ms; idle while the host ran ops 30% of the steps; "
        "compute/memory overlap 0.020 ms; compute/comm overlap 0.010 ms; queue median 0.022 ms; "
        "launch-bound: aten::add (kernel 0.0100 < launch 0.0200 ms)"
    ) in text
    assert "timeline:" not in analyze([step(1, 0, 10), op("aten::add", 1, 2)]).table()


def test_overlap_busy_and_launch_bound_assertions():
    """The three timeline assertions pass and fail on figures worked out by hand, name the worst
    step, and check their arguments."""
    import pytest

    from pytest_opprof.assertions import device_busy_above, no_launch_bound, overlap
    from pytest_opprof.errors import OpprofUsageError

    profile = analyze(two_steps())
    # memory 30 us per step, 10 of them under compute: 33% of the shorter kind
    assert overlap(("compute", "memory"), min_pct=30)(profile) is None
    assert overlap(("memory", "compute"), min_pct=50)(profile) == (
        "compute/memory overlap: 33% < 50% in step 1 (the worst): 0.010 ms of compute 0.050 ms and memory "
        "0.030 ms ran at once; run the memory work on another stream (non_blocking copies from pinned memory)"
    )
    assert overlap(("compute", "comm"), min_pct=50)(profile) is None  # comm 10 us, 5... within gemm: 50%
    assert device_busy_above(70)(profile) is None
    assert device_busy_above(75)(profile) == (
        "device busy 70% < 75% of step 1 (the worst): 0.070 ms of a 0.100 ms step; "
        "the host ran ops while it was idle 30% of the steps"
    )
    assert no_launch_bound()(profile).startswith(
        "launch-bound: aten::add (2 kernels of 0.0100 ms < launch 0.0200 ms): the host cannot launch"
    )
    cpu = analyze([step(1, 0, 10), op("aten::add", 1, 2)])
    for check in (overlap(), device_busy_above(10), no_launch_bound()):
        assert check(cpu).startswith("no device work was recorded")
    for make, fragment in [
        (lambda: overlap(("memory", "comm")), "kinds=('memory', 'comm')"),
        (lambda: overlap(min_pct=120), "min_pct=120"),
        (lambda: device_busy_above("90%"), "pct='90%'"),
        # a fraction would pass as a percentage of it (a trial's 0.5 read as 0.5%)
        (lambda: device_busy_above(0.5), "pct=0.5: expected a percentage between 0 and 100, not a fraction: write 50"),
        (lambda: overlap(min_pct=0.25), "min_pct=0.25: .* write 25 for 25%"),
    ]:
        with pytest.raises(OpprofUsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            make()


def test_the_terminal_summary_has_the_timeline_line_for_device_work():
    """A test with device work gets a timeline line under its header in the summary; a CPU test none."""
    from pytest_opprof.report import TestResult

    result = TestResult("t.py::test_gpu", outcome="passed", profile=analyze(two_steps()))
    summary = result.to_record(10).summary
    assert summary.splitlines()[1].startswith("timeline: device busy 80% of 0.176 ms; idle while the host ran ops 30%")
    cpu = TestResult("t.py::test_cpu", outcome="passed", profile=analyze([step(1, 0, 10), op("aten::add", 1, 2)]))
    assert "timeline:" not in cpu.to_record(10).summary


def test_a_launch_that_loaded_its_module_is_no_launch_cost():
    """A first launch loads its kernel's module (CUDA's lazy loading: 6.5 ms in a real MI250
    trace, whose `aten::add_` then read launch-bound at 3.27 ms, the median of 12 us and 6.5 ms);
    a launch past 1 ms is no launch cost. An op launched only so is not judged; a launch of 20 us
    before a kernel of 3 us still is launch-bound."""

    def steps(first_us: float) -> list[Event]:
        events = []
        for n, t0 in ((1, 0), (2, 10_000)):
            c, took = n * 10, first_us if n == 1 else 3
            events += [
                step(n, t0, 9_000),
                op("aten::add_", t0, took + 10),
                launch(t0 + 1, corr=c, dur_us=took),
                kernel("vectorized_add", t0 + took + 2, 4.6, corr=c),  # longer than its 3 us launch
                op("aten::fill_", t0 + 8_000, 30),
                launch(t0 + 8_001, corr=c + 1, dur_us=20),
                kernel("fill", t0 + 8_030, 3, corr=c + 1),
            ]
        return events

    bound = analyze(steps(6_500)).timeline.launch_bound
    assert [(b.op, b.launch_ns) for b in bound] == [("aten::fill_", 20_000)]
    assert [b.op for b in analyze(steps(6_500)[:4]).timeline.launch_bound] == []  # its one launch loaded
    # of two launches, the cost is the lower: 3 us and 50 us before kernels of 4.6 us are no flood
    assert "aten::add_" not in {b.op for b in analyze(steps(50)).timeline.launch_bound}
