"""Unit tests of the analysis on hand-built events: no torch needed."""

from __future__ import annotations

import pytest
from builders import annotation, kernel, launch, memcpy, memset, op, step, stepped

from pytest_opprof.analysis import OPPROF_SYNC_ANNOTATION, Dist, analyze
from pytest_opprof.events import SYNC, Event


def status(profile, name):
    found = [c for c in profile.checks if c.name == name]
    return found[0].status if found else None


def test_self_time_subtracts_direct_children_only():
    """Self CPU time is the op's duration minus its direct children's; totals are inclusive."""
    p = analyze(
        [
            op("aten::linear", 0, 100),
            op("aten::t", 5, 10),
            op("aten::transpose", 6, 4),
            op("aten::addmm", 20, 70),
        ]
    )
    linear, t, addmm = p.op("aten::linear"), p.op("aten::t"), p.op("aten::addmm")
    assert (linear.cpu_ns, linear.self_cpu_ns) == (100_000, 20_000)
    assert (t.cpu_ns, t.self_cpu_ns) == (10_000, 6_000)
    assert addmm.self_cpu_ns == 70_000


def test_nesting_is_per_thread():
    """An op on another thread is never the child of an op that happens to overlap it."""
    p = analyze([op("aten::mm", 0, 100, tid=1), op("aten::add", 10, 20, tid=2)])
    assert p.op("aten::mm").self_cpu_ns == 100_000


def test_recursive_op_counts_its_time_once():
    """An op nested in a call of the same name (beside a sibling) is a call, but its time is not added twice."""
    p = analyze([op("aten::copy_", 0, 50), op("aten::copy_", 10, 20), op("aten::empty", 35, 5)])
    copy = p.op("aten::copy_")
    assert copy.calls == 2
    assert copy.cpu_ns == 50_000
    assert copy.self_cpu_ns == 25_000 + 20_000


def test_redispatch_to_the_same_name_is_one_call_as_in_torch():
    """torch's rule: an op whose only CPU-op child has its name is one call; the child's children,
    self time and launches become the caller's."""
    p = analyze(
        [
            op("aten::upsample_bilinear2d", 0, 50),
            op("aten::upsample_bilinear2d", 5, 40),
            op("aten::contiguous", 10, 10),
            op("aten::copy_", 25, 10),
            launch(30, corr=3),
            kernel("upsample_kernel", 60, 8, corr=3),
        ]
    )
    up = p.op("aten::upsample_bilinear2d")
    assert (up.calls, up.cpu_ns, up.self_cpu_ns) == (1, 50_000, 50_000 - 10_000 - 10_000)
    assert p.op("aten::copy_").self_device_ns == 8_000 and up.self_device_ns == 0
    assert p.callers("aten::contiguous") == ("aten::upsample_bilinear2d",)
    chain = analyze([op("aten::mean", 0, 30), op("aten::mean", 1, 28), op("aten::mean", 2, 26), op("aten::sum", 3, 5)])
    assert chain.op("aten::mean").calls == 1 and chain.op("aten::mean").self_cpu_ns == 25_000


def test_kernel_attributed_to_innermost_op_through_correlation_and_rolled_up():
    """A kernel's launching op is the innermost CPU op around its runtime call; enclosing ops get it as device time."""
    p = analyze(
        [
            op("aten::linear", 0, 100),
            op("aten::addmm", 10, 50),
            launch(20, corr=7),
            kernel("sgemm", 30, 40, corr=7),
        ]
    )
    addmm, linear = p.op("aten::addmm"), p.op("aten::linear")
    assert (addmm.self_device_ns, addmm.device_ns) == (40_000, 40_000)
    assert (linear.self_device_ns, linear.device_ns) == (0, 40_000)
    assert p.kernels[0].op == "aten::addmm"
    assert addmm.on_device and addmm.time_per_step.samples == (40_000,)


def test_a_launch_at_the_edge_of_its_op_is_the_ops():
    """A trace in whole microseconds can start a launch at its op's end, or inside an op of 0 us:
    the kernel read `launched by -` and the op no device time. An op that ends as a call of 1 us or
    less starts still holds it; one that ended before does not, nor does a longer call, and a later op
    starting there takes it."""
    at_end = analyze(
        [op("aten::linear", 0, 100), op("aten::fill_", 10, 1), launch(11, corr=1, dur_us=0), kernel("k", 20, 5, corr=1)]
    )
    zero = analyze([op("aten::fill_", 10, 0), launch(10, corr=1, dur_us=0), kernel("k", 20, 5, corr=1)])
    for p in (at_end, zero):
        assert (p.kernels[0].op, p.op("aten::fill_").self_device_ns, p.unattributed_device_ns) == (
            "aten::fill_",
            5_000,
            0,
        )
    after = analyze(
        [op("aten::linear", 0, 100), op("aten::fill_", 10, 1), launch(12, corr=1), kernel("k", 20, 5, corr=1)]
    )
    assert after.kernels[0].op == "aten::linear"
    longer = analyze(
        [op("aten::linear", 0, 100), op("aten::fill_", 10, 1), launch(11, corr=1, dur_us=5), kernel("k", 20, 5, corr=1)]
    )
    assert longer.kernels[0].op == "aten::linear"  # a call of 5 us cannot lie inside an op that ended as it began
    next_op = analyze(
        [op("aten::fill_", 10, 1), op("aten::zero_", 11, 5), launch(11, corr=1), kernel("k", 20, 5, corr=1)]
    )
    assert next_op.kernels[0].op == "aten::zero_"


def test_a_name_the_profile_holds_is_found_whatever_its_spelling():
    """`op()` and `callers()` refuse a name the profiler never writes (`aten::add.Tensor`), but one
    that a hand-made trace holds is found: an assertion's message asks them of recorded names."""
    p = analyze([step(1, 0, 100), op("aten::linear", 5, 50), op("aten::add.Tensor", 10, 20)])
    assert p.op("aten::add.Tensor").calls == 1
    assert p.callers("aten::add.Tensor") == ("aten::linear",)


def test_launches_sharing_a_correlation_id_are_a_warning():
    """Two launches of one correlation id (a merged or edited trace) gave both kernels to the
    second op with every check ok: a `correlation` warning counts them; unique ids give none."""
    from pytest_opprof.errors import shared_correlation

    events = [op("aten::mm", 10, 20), launch(12, corr=5), op("aten::add", 40, 20), launch(42, corr=5)]
    p = analyze([step(1, 0, 100), *events, kernel("k", 50, 10, corr=5), kernel("k", 70, 10, corr=5)])
    (check,) = [c for c in p.checks if c.name == "correlation"]
    assert (check.status, check.message) == ("warning", shared_correlation(2, 1, 5))
    assert check.message.startswith("2 runtime calls share 1 correlation id between them (e.g. 5): ")
    unique = analyze([op("aten::mm", 10, 20), launch(12, corr=5), kernel("k", 50, 10, corr=5), launch(60, corr=6)])
    assert "correlation" not in {c.name for c in unique.checks}


def test_a_device_event_before_its_launch_is_a_clock_warning():
    """A kernel starting before the call that launched it printed a negative queue with every
    check ok: a `clock` warning names the worst; a microsecond of rounding is none."""
    early = analyze([step(1, 0, 100), op("aten::mm", 10, 20), launch(12, corr=1), kernel("k", 5, 3, corr=1)])
    (check,) = [c for c in early.checks if c.name == "clock"]
    assert (check.status, check.message) == (
        "warning",
        "1 device event starts before the runtime call that launched it (by up to 0.007 ms), which no device can: "
        "the tracer corrupted the records (CUPTI from CUDA 12.6 Update 2 to 13.0 does at a profiler session's "
        "start, pytorch/pytorch#192021; a CUPTI of CUDA 13.1 or later fixes it) or the device's clock is not "
        "aligned with the host's in this source; the queue (queue_ms) and the step each device event is counted "
        "in are off by as much",
    )
    rounded = analyze([op("aten::mm", 10, 20), launch(12, corr=1), kernel("k", 11, 3, corr=1)])
    assert "clock" not in {c.name for c in rounded.checks}


def test_external_id_is_the_fallback_when_no_runtime_call_is_known():
    """Without a runtime call, a device event's External id names its op directly."""
    p = analyze([op("aten::mm", 0, 100, ext=42), kernel("gemm", 200, 10, ext=42)])
    assert p.op("aten::mm").self_device_ns == 10_000
    assert p.unattributed_device_ns == 0


def test_device_work_without_launching_op_is_kept_as_unattributed():
    """A kernel launched outside any op is counted in device time and reported as unattributed."""
    p = analyze([op("aten::mm", 0, 10), launch(50, corr=3), kernel("nccl", 60, 25, corr=3)])
    assert p.unattributed_device_ns == 25_000
    assert p.kernels[0].op is None
    assert p.device_ns == 25_000


def test_device_time_is_conserved():
    """Self device time over all ops plus unattributed device time equals the total device time."""
    events = [
        op("aten::linear", 0, 100),
        op("aten::addmm", 10, 50),
        launch(20, corr=1),
        kernel("sgemm", 30, 40, corr=1),
        op("aten::copy_", 60, 30),
        launch(65, corr=2, name="cudaMemcpyAsync"),
        memcpy("Memcpy HtoD (Pageable -> Device)", 70, 5, 4096, corr=2),
        launch(150, corr=3),
        kernel("orphan", 155, 3, corr=3),
        memset(160, 2, 64),
    ]
    p = analyze(events)
    attributed = sum(o.self_device_ns for o in p.ops)
    assert attributed + p.unattributed_device_ns == p.device_ns == (40 + 5 + 3 + 2) * 1000
    assert p.op("aten::linear").device_ns == 45_000  # roll-up of addmm's kernel and copy_'s memcpy


def test_memory_ops_keep_bytes():
    """Memcpy/memset rows sum their bytes and device time per kind."""
    p = analyze(
        [
            memcpy("Memcpy DtoH (Device -> Pageable)", 0, 2, 100),
            memcpy("Memcpy DtoH (Device -> Pageable)", 10, 3, 300),
            memset(20, 1, 8),
        ]
    )
    rows = {m.name: (m.calls, m.device_ns, m.bytes) for m in p.memory_ops}
    assert rows == {"Memcpy DtoH (Device -> Pageable)": (2, 5_000, 400), "Memset (Device)": (1, 1_000, 8)}


def test_device_busy_is_the_union_per_device_across_streams():
    """Overlapping kernels on two streams count once in busy time, fully in device time."""
    p = analyze(
        [
            kernel("a", 0, 10, stream=7),
            kernel("b", 5, 10, stream=8),  # overlaps a by 5
            kernel("c", 30, 5, stream=7),
            kernel("d", 0, 4, stream=7, device=1),  # another device: its own union
        ]
    )
    assert p.device_ns == 29_000
    assert p.device_busy_ns == 15_000 + 5_000 + 4_000


def test_steps_come_from_cpu_side_profiler_step_annotations():
    """ProfilerStep#N annotations split the events into steps with per-step samples."""
    events = [
        step(1, 0, 100),
        op("aten::mm", 10, 20),
        op("aten::mm", 40, 20),
        step(2, 100, 100),
        op("aten::mm", 110, 30),
    ]
    p = analyze(events)
    mm = p.op("aten::mm")
    assert p.steps == 2
    assert p.wall_ms == pytest.approx(0.2)
    assert mm.calls_per_step.samples == (2, 1)
    assert mm.cpu_per_step.samples == (40_000, 30_000)
    assert p.op("ProfilerStep#1") is None  # a step marker is not an op
    assert status(p, "step_events") == "warning"
    (check,) = [c for c in p.checks if c.name == "step_events"]
    assert check.message.startswith("CPU ops per step differ between steps (2, 1); calls per step of aten::mm (2, 1): ")


def test_gpu_side_step_annotation_is_not_another_step():
    """The device-side twin of ProfilerStep#N (gpu_user_annotation) does not add a step."""
    twin = Event("gpu_annotation", "ProfilerStep#1", 0, 50_000, 0, 7, 0, 7)
    p = analyze([step(1, 0, 100), op("aten::mm", 10, 20), twin])
    assert p.steps == 1


def test_device_work_counts_in_the_step_of_its_launch():
    """A kernel that runs after its step ended still belongs to the step that launched it."""
    events = [
        step(1, 0, 100),
        op("aten::mm", 10, 20),
        launch(15, corr=1),
        kernel("gemm", 95, 10, corr=1),  # spills past the step's end
        step(2, 100, 100),
        op("aten::mm", 110, 20),
        launch(115, corr=2),
        kernel("gemm", 120, 10, corr=2),
    ]
    p = analyze(events)
    assert p.op("aten::mm").device_per_step.samples == (10_000, 10_000)


def test_trace_without_step_markers_is_one_step_without_wall_time():
    """No ProfilerStep#N: one step spanning the events, and wall_ms is None."""
    p = analyze([op("aten::mm", 10, 20), op("aten::add", 40, 5)])
    assert p.steps == 1
    assert p.wall_ms is None
    assert p.to_dict()["wall_ms"] is None


def test_ops_outside_steps_count_in_totals_and_warn():
    """Ops outside every step annotation are in the totals, not the per-step numbers, with a warning."""
    p = analyze([step(1, 0, 100), op("aten::mm", 10, 20), op("aten::mm", 150, 20)])
    mm = p.op("aten::mm")
    assert mm.calls == 2
    assert mm.calls_per_step.samples == (1,)
    assert status(p, "outside_steps") == "warning"


def test_no_events_is_an_error():
    """A capture with no events is an error, never a pass."""
    p = analyze([step(1, 0, 100)])
    assert status(p, "events") == "error"


def test_launches_without_device_events_is_an_error():
    """Kernel launches with no device events mean the device tracer failed: an error."""
    p = analyze([step(1, 0, 100), op("aten::mm", 10, 20), launch(15, corr=1)])
    assert status(p, "device_events") == "error"
    assert "CUPTI" in [c for c in p.checks if c.name == "device_events"][0].message


def test_cpu_time_beyond_wall_time_is_an_error():
    """Top-level CPU op time larger than the step's wall time means broken units: an error."""
    # e.g. a duration written in ns but read as us: the op outlasts its step many times over
    p = analyze([step(1, 0, 100), op("aten::mm", 10, 20), op("aten::add", 40, 2000)])
    check = [c for c in p.checks if c.name == "wall_time"][0]
    assert check.status == "error"
    assert "step 1" in check.message


def test_device_busy_beyond_wall_time_is_an_error():
    """Device busy time larger than the step's wall time is an error."""
    events = [step(1, 0, 100), op("aten::mm", 10, 20), launch(15, corr=1), kernel("gemm", 20, 300, corr=1)]
    assert status(analyze(events), "wall_time") == "error"


def test_consistent_timings_pass_the_wall_check():
    """Ops and device work inside the step: the wall-time check is ok."""
    events = [step(1, 0, 100), op("aten::mm", 10, 20), launch(15, corr=1), kernel("gemm", 20, 50, corr=1)]
    assert status(analyze(events), "wall_time") == "ok"


def test_wide_spread_over_steps_warns():
    """An op whose per-step time varies widely gets a spread warning naming it."""
    durations = [100, 100, 300, 100, 400, 100]
    events = []
    for i, d in enumerate(durations):
        events += [step(i + 1, i * 1000, 1000), op("aten::mm", i * 1000 + 10, d)]
    p = analyze(events)
    check = [c for c in p.checks if c.name == "spread"][0]
    assert check.status == "warning" and "aten::mm" in check.message


def _mm_steps(calls: list[int], durations: list[int]) -> list:
    """Steps of 1 ms, step i holding calls[i] aten::mm of durations[i] ns each."""
    events = []
    for i, (n, d) in enumerate(zip(calls, durations)):
        events.append(step(i + 1, i * 1_000_000, 1_000_000))
        events += [op("aten::mm", i * 1_000_000 + 10 + j * (d + 10), d) for j in range(n)]
    return events


@pytest.mark.parametrize(
    ("calls", "durations", "fired"),
    [
        ([1, 1, 1, 0], [80] * 4, set()),  # only the cut step differs: the cut, not the code
        ([1, 2, 1, 0], [80] * 4, {"step_events"}),  # whole steps differ: data-dependent code
        ([1, 1], [80] * 2, set()),  # one whole step: nothing to compare it with
        ([1] * 6, [60_000, 60_000, 200_000, 60_000, 200_000, 1], {"spread"}),
        ([1] * 6, [60_000] * 5 + [1], set()),
    ],
)
def test_the_step_comparisons_the_whole_steps_before_a_cut_bear_out(calls, durations, fired):
    """A capture an exception ended inside its last step: which of step_events and spread fire on
    the steps before it (those stand; the rest said only that the last step was partial)."""
    from pytest_opprof.analysis.checks import differ_before_the_last_step

    profile = analyze(_mm_steps(calls, durations))
    assert differ_before_the_last_step(profile.ops, profile.steps) == fired


@pytest.mark.parametrize(
    ("calls", "fix"),
    [
        ([3, 1, 1, 1, 1, 1], "the first step differs from the rest: raise warmup"),
        ([3, 2, 1, 1, 1, 1], "the first 2 steps differ from the rest: raise warmup"),
        # a reset every 3rd step (an LLM trial's cache) is no warm-up: more warmup changes nothing
        ([1, 1, 3, 1, 1, 3], "check for data-dependent code (work that changes with the data or with state fn keeps"),
        ([3, 3, 3, 3, 1, 1], "check for data-dependent code"),  # most steps: no warm-up of a few
    ],
)
def test_uneven_steps_are_told_to_warm_up_only_where_the_first_steps_differ(calls, fix):
    profile = analyze(_mm_steps(calls, [80] * len(calls)))
    (check,) = [c for c in profile.checks if c.name == "step_events"]
    assert check.status == "warning" and f"the steps do not repeat the same work; {fix}" in check.message


def test_steady_steps_do_not_warn_on_spread():
    """Equal per-step times give an ok spread check."""
    events = []
    for i in range(5):
        events += [step(i + 1, i * 1000, 1000), op("aten::mm", i * 1000 + 10, 100)]
    assert status(analyze(events), "spread") == "ok"


def test_capture_sync_is_not_reported_as_a_user_sync():
    """The capture's own step-boundary synchronisation is left out of the runtime calls."""
    events = [
        step(1, 0, 100),
        op("aten::mm", 10, 20),
        annotation(OPPROF_SYNC_ANNOTATION, 80, 10),
        launch(81, corr=0, name="cudaDeviceSynchronize"),
        launch(40, corr=0, name="cudaStreamSynchronize"),
    ]
    names = [r.name for r in analyze(events).runtime]
    assert names == ["cudaStreamSynchronize"]


def test_sync_events_do_not_count_as_device_work():
    """CUPTI's cuda_sync records are waits, not device work."""
    wait = Event(SYNC, "Stream Sync", 0, 9_000, 0, 7, 0, 7)
    p = analyze([op("aten::item", 0, 20), wait])
    assert p.device_ns == 0


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("aten::addmm", ["aten::addmm"]),
        ("aten::*mm", ["aten::addmm", "aten::mm"]),
        ("aten::[am]*", ["aten::addmm", "aten::mm"]),
        ("aten::conv*", []),
    ],
)
def test_match_takes_exact_names_and_globs(pattern, expected):
    """Profile.match finds an op by exact name or glob."""
    p = analyze([op("aten::addmm", 0, 30), op("aten::mm", 40, 20), op("aten::relu", 70, 5)])
    assert sorted(o.name for o in p.match(pattern)) == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: p.match(None), "op=None: expected an op name or glob"),
        (lambda p: p.match("aten::mm.default"), "a name without its overload, as the profiler records it: 'aten::mm'"),
        (lambda p: p.match_ranges(3), "pattern=3: expected a range name or glob"),
        (lambda p: p.match_kernels(""), "pattern='': expected a kernel name or glob"),
        (lambda p: p.match_memory_ops(None), "pattern=None: expected a memory op name or glob"),
    ],
)
def test_match_refuses_what_is_no_name_in_one_line(call, message):
    """Profile.match(None) raised a TypeError, and `aten::mm.default` matched nothing in silence
    where the fixture refuses it: one OpprofUsageError naming the value."""
    from pytest_opprof.errors import OpprofUsageError

    with pytest.raises(OpprofUsageError) as info:
        call(analyze([op("aten::mm", 0, 30)]))
    assert message in str(info.value)


def test_dist_statistics():
    """Dist gives median, min, max and IQR of its samples."""
    d = Dist((1, 2, 3, 4, 100))
    assert (d.median, d.min, d.max) == (3, 1, 100)
    assert d.iqr == 2.0
    assert d.to_dict(1e6)["samples"] == [1e-6, 2e-6, 3e-6, 4e-6, 1e-4]


def test_dist_to_dict_keeps_whole_counts_whole():
    """An even number of steps with equal middle counts gives median 577, not 577.0; halves stay."""
    assert repr(Dist((577, 577, 577, 578)).to_dict()["median"]) == "577"
    assert Dist((1, 2)).to_dict()["median"] == 1.5
    assert repr(Dist((2_000_000, 2_000_000)).to_dict(1e6)["median"]) == "2.0"


def test_to_dict_has_the_documented_keys():
    """Profile.to_dict() carries every key DESIGN §7 promises, with per-step distributions."""
    d = analyze([step(1, 0, 100), op("aten::mm", 10, 20), launch(12, 1), kernel("k", 20, 5, corr=1)]).to_dict()
    assert {"schema", "steps", "wall_ms", "ops", "kernels", "memory_ops", "device_busy_ms", "checks"} <= d.keys()
    assert {"name", "calls", "cpu_ms", "self_cpu_ms", "device_ms", "self_device_ms", "per_step"} <= d["ops"][0].keys()
    assert {"median", "min", "max", "samples"} <= d["ops"][0]["per_step"]["cpu_ms"].keys()
    assert d["kernels"][0] == {**d["kernels"][0], "name": "k", "op": "aten::mm", "calls": 1, "device_ms": 0.005}


def test_the_jsons_per_step_figures_add_up_to_its_totals():
    """Each op's and range's per-step distributions, in ms as the totals are (a mutation trial
    halved `per_step.self_cpu_ms` and no test noticed): over identical steps, the samples sum to
    the total; the self times are the op's own (mm 40 us, 10 of them in its add)."""
    events = []
    for n, t0 in ((1, 0), (2, 100)):
        events += [
            step(n, t0, 100),
            annotation("block", t0 + 1, 60),
            op("aten::mm", t0 + 5, 40),
            op("aten::add", t0 + 10, 10),
            launch(t0 + 12, corr=n),
            kernel("k", t0 + 20, 5, corr=n),
            op("aten::copy_", t0 + 50, 5),
            launch(t0 + 51, corr=10 + n, name="cudaMemcpyAsync"),
            memcpy("Memcpy HtoD", t0 + 60, 8, 64, corr=10 + n),
            op("CUDAGraph.replay", t0 + 70, 5),
            launch(t0 + 71, corr=20 + n, name="cudaGraphLaunch"),
            kernel("g", t0 + 80, 3, corr=20 + n),
        ]
    d = analyze(events).to_dict()
    assert d["step_wall_ms"] == {"median": 0.1, "min": 0.1, "max": 0.1, "samples": [0.1, 0.1]}
    for row in d["kernels"] + d["memory_ops"] + d["graph_launches"]:
        assert sum(row["per_step"]["device_ms"]["samples"]) == pytest.approx(row["device_ms"]), row
    assert [len(d[key]) for key in ("kernels", "memory_ops", "graph_launches")] == [2, 1, 1]
    assert set(d["kernels"][0]["per_step"]) == set(d["memory_ops"][0]["per_step"]) == {"calls", "device_ms"}
    assert set(d["graph_launches"][0]["per_step"]) == {"calls", "kernels", "device_ms"}
    rows = {row["name"]: row for row in d["ops"] + d["ranges"]}
    assert (rows["aten::mm"]["cpu_ms"], rows["aten::mm"]["self_cpu_ms"]) == (0.08, 0.06)
    assert (rows["aten::mm"]["device_ms"], rows["aten::mm"]["self_device_ms"]) == (0.01, 0.0)
    for name in ("aten::mm", "aten::add", "block"):
        for key, dist in rows[name]["per_step"].items():
            if key.endswith("_ms"):
                assert sum(dist["samples"]) == pytest.approx(rows[name][key]), (name, key)
                assert dist["median"] == dist["min"] == dist["max"] == dist["samples"][0], (name, key)


def test_callers_are_the_innermost_first_up_to_the_depth_asked():
    """`callers` names the ops above an op, innermost first, `depth` of them (2 by default)."""
    p = analyze(
        [
            step(1, 0, 100),
            op("aten::linear", 1, 50),
            op("aten::addmm", 2, 40),
            op("aten::copy_", 3, 10),
            op("aten::as_strided", 4, 2),
        ]
    )
    assert p.callers("aten::as_strided") == ("aten::copy_", "aten::addmm")
    assert p.callers("aten::as_strided", depth=3) == ("aten::copy_", "aten::addmm", "aten::linear")
    assert p.callers("aten::as_strided", depth=9) == ("aten::copy_", "aten::addmm", "aten::linear")
    assert p.callers("aten::linear") == () and p.callers("aten::nope") == ()


def test_inputs_read_as_tensors_with_shapes_and_other_kinds_by_name():
    """A signature's inputs as the tables and messages print them: tensors with their shapes; a
    device, layout or dtype argument by its kind alone; scalars and absent inputs only in full."""
    from pytest_opprof.analysis.model import inputs_text

    shapes = ((2, 3), (), (), (), (), ((4,), (5,)))
    dtypes = ("float", "Scalar", "Device", "Layout", "ScalarType", "TensorList")
    assert inputs_text(shapes, dtypes) == "float[2,3], Device, Layout, ScalarType, TensorList[[4],[5]]"
    assert inputs_text(shapes, dtypes, full=True).startswith("float[2,3], Scalar, Device, ")
    assert inputs_text((), ("Scalar",)) == "no tensor inputs"


def test_a_profiles_table_shows_the_20_costliest_rows_unless_told():
    """`profile.table()` cuts each table at 20 rows and counts the rest; `top=None` shows all."""
    p = analyze([step(1, 0, 1000)] + [op(f"aten::op{i:02d}", 10 + i * 30, 30 - i) for i in range(25)])
    assert "(5 more ops)" in p.table() and "aten::op19" in p.table() and "aten::op20" not in p.table()
    assert "more ops" not in p.table(top=None) and "aten::op24" in p.table(top=None)


def test_negative_durations_make_the_measurement_untrusted():
    """An op or kernel with a negative duration is an error check, not a -0.005 ms/step op."""
    p = analyze([op("aten::mm", 0, 10), op("aten::add", 20, -5)])
    assert [(c.name, c.status) for c in p.errors] == [("durations", "error")]
    assert p.errors[0].message.startswith("1 event has a negative duration: ")
    alone = analyze([op("aten::add", 20, -5)])  # the one step of a trace without markers is not counted (said 2)
    assert alone.errors[0].message.startswith("1 event has a negative duration: ")
    two = analyze([op("aten::mm", 0, -10), op("aten::add", 20, -5)])
    assert two.errors[0].message.startswith("2 events have negative durations: ")


def test_an_op_running_past_the_op_it_started_in_makes_the_measurement_untrusted():
    """A hand-edited `dur` that runs an op past its parent swallowed the ops after it (they
    nested inside it and folded away as redispatches: 27 aten::mm calls read 0 ms) while every
    check said ok. Ops on one thread nest, so that is a broken duration: an error naming it."""

    def body(i, base):
        mm_us = 900 if i == 0 else 20  # step 1's mm outlasts its matmul (40 us) and its step (100 us)
        return [op("aten::matmul", base + 5, 40), op("aten::mm", base + 10, mm_us)]

    broken = analyze(stepped(3, 100, body))
    assert [(c.name, c.status) for c in broken.errors] == [("nesting", "error")]
    assert broken.errors[0].message == (
        "1 op runs past the end of the op it started in (aten::mm in step 1 ends 0.865 ms after aten::matmul): "
        "ops on one thread nest, so a duration is broken; export the trace again"
    )
    sound = analyze(stepped(3, 100, lambda i, base: [op("aten::matmul", base + 5, 40), op("aten::mm", base + 10, 20)]))
    assert "nesting" not in {c.name for c in sound.checks}


def test_a_same_name_op_running_past_the_one_it_started_in_is_not_folded_away():
    """torch folds a same-name only child into its caller (a redispatch): an op whose broken `dur`
    swallowed the next of its name (one `aten::mm` starting inside another and ending past it)
    folded away before the nesting check, which then said ok. It is left for the check."""
    swallowed = analyze([step(1, 0, 100), op("aten::mm", 10, 60), op("aten::mm", 50, 30), step(2, 100, 100)])
    assert [(c.name, c.status) for c in swallowed.errors] == [("nesting", "error")]
    redispatch = analyze([step(1, 0, 100), op("aten::mm", 10, 60), op("aten::mm", 20, 30), step(2, 100, 100)])
    assert redispatch.errors == [] and redispatch.op("aten::mm").calls == 1  # inside it: folded, as torch does


def test_nesting_allows_a_microsecond_of_rounding_and_names_every_overrun():
    """A trace in whole microseconds can end a child up to 1 us after its parent: no error. Two
    overruns are counted, the larger named; another thread's ops nest on their own."""
    rounded = analyze([op("aten::matmul", 0, 10), op("aten::mm", 2, 9)])
    assert "nesting" not in {c.name for c in rounded.checks}
    other_thread = analyze([op("aten::matmul", 0, 10), op("aten::mm", 2, 50, tid=2)])
    assert "nesting" not in {c.name for c in other_thread.checks}
    two = analyze([op("aten::matmul", 0, 10), op("aten::mm", 2, 12), op("aten::add", 20, 10), op("aten::mul", 21, 30)])
    assert two.errors[0].message.startswith(
        "2 ops run past the end of the ops they started in (aten::mul ends 0.021 ms after aten::add): "
    )


def test_overlapping_or_repeated_steps_make_the_measurement_untrusted():
    """A trial's merged or edited traces read as more steps of fewer calls with a warning at most:
    nested and overlapping steps, one step marked on two threads, two ranks' steps. A profiler's
    steps follow one another on one thread, so each is an error; a microsecond of rounding is not."""
    from pytest_opprof.errors import STEPS_FOLLOW

    assert STEPS_FOLLOW.startswith("a profiler's steps follow one another on one thread, so this source merges ")
    nested = analyze([step(1, 0, 200), step(2, 50, 100), op("aten::mm", 60, 5)])
    assert [(c.name, c.message) for c in nested.errors] == [
        ("steps", f"ProfilerStep#2 starts 0.150 ms before ProfilerStep#1 ends: {STEPS_FOLLOW}")
    ]
    overlap = analyze([step(1, 0, 100), step(2, 50, 100), step(3, 120, 100), op("aten::mm", 60, 5)])
    assert overlap.errors[0].message.startswith(
        "ProfilerStep#2 starts 0.050 ms before ProfilerStep#1 ends (2 steps start before an earlier one ends): "
    )
    long_first = analyze([step(1, 0, 300), step(2, 50, 50), step(3, 150, 50), op("aten::mm", 60, 5)])
    assert long_first.errors[0].message.startswith(
        "ProfilerStep#2 starts 0.250 ms before ProfilerStep#1 ends (2 steps start before an earlier one ends): "
    )
    threads = analyze([step(1, 0, 100), step(1, 0, 100, tid=2), op("aten::mm", 10, 20), op("aten::mm", 10, 20, tid=2)])
    assert threads.errors[0].message == f"ProfilerStep#1 is marked 2 times: {STEPS_FOLLOW}"
    ranks = [
        e._replace(pid=rank)
        for rank in (1, 2)
        for n in (1, 2)
        for e in (step(n, (n - 1) * 100, 100), op("aten::mm", (n - 1) * 100 + 10, 50))
    ]
    merged = analyze(ranks)
    assert merged.errors[0].message.startswith("ProfilerStep#1 is marked 2 times (2 step numbers are): ")
    rounded = analyze([step(1, 0, 101), op("aten::mm", 10, 20), step(2, 100, 100), op("aten::mm", 110, 20)])
    assert (rounded.errors, rounded.steps) == ([], 2)


def test_an_op_running_past_its_step_on_the_steps_thread_makes_the_measurement_untrusted():
    """An op of the thread that marks the steps, starting in step 1 and ending in step 2, was
    counted whole in step 1 with a warning at most. Ops nest in their step on that thread (its
    annotation is a scope too); another thread's ops do not, and a microsecond of rounding is
    allowed."""
    body = [
        step(1, 0, 100),
        op("aten::mm", 10, 20),
        op("aten::big", 90, 60),
        step(2, 100, 100),
        op("aten::mm", 110, 20),
    ]
    p = analyze(body)
    assert [(c.name, c.message) for c in p.errors] == [
        (
            "nesting",
            "1 op runs past the end of the step it started in (aten::big ends 0.050 ms after ProfilerStep#1): "
            "ops on one thread nest in their step, so a duration is broken; export the trace again",
        )
    ]
    pool = analyze([step(1, 0, 100), op("aten::mm", 10, 20), op("aten::big", 90, 60, tid=2), step(2, 100, 100)])
    assert pool.errors == []
    rounded = analyze([step(1, 0, 100), op("aten::mm", 90, 11), step(2, 101, 100), op("aten::mm", 110, 20)])
    assert rounded.errors == []
    after_the_last = analyze([step(1, 0, 100), op("aten::mm", 10, 20), op("aten::after", 100, 50)])  # starts as it ends
    assert after_the_last.errors == []


def test_a_step_with_a_negative_duration_makes_the_measurement_untrusted():
    """A `ProfilerStep#N` with a negative duration (a hand-edited trace) is the same error:
    its wall time is no measurement (`opprof compare` crashed on it, `analyze` exited 0)."""
    p = analyze([step(1, 0, -1), op("aten::mm", 0, 10), step(2, 100, 50), op("aten::mm", 110, 10)])
    assert [(c.name, c.status) for c in p.errors] == [("durations", "error")]


def test_only_keeps_what_matches_and_the_kernels_run_inside_a_chosen_op():
    """Profile.only: ops, ranges, memory ops and runtime calls by name or glob; a kernel by its
    name or by a chosen op it ran inside (however deep); totals untouched."""
    events = [
        step(1, 0, 1000),
        annotation("forward", 5, 500),
        op("aten::linear", 10, 300),
        op("aten::addmm", 20, 200),
        launch(30, corr=1),
        kernel("sgemm_128x64", 40, 150, corr=1),
        op("aten::copy_", 400, 50),
        launch(410, corr=2, name="cudaMemcpyAsync"),
        memcpy("Memcpy HtoD (Pageable -> Device)", 420, 5, 4096, corr=2),
        op("aten::relu", 600, 50),
    ]
    p = analyze(events)
    linear = p.only(["aten::linear"])
    assert [o.name for o in linear.ops] == ["aten::linear"]
    assert [k.name for k in linear.kernels] == ["sgemm_128x64"]
    assert (linear.memory_ops, linear.ranges, linear.runtime) == ((), (), ())
    assert linear.device_ns == p.device_ns and linear.step_spans == p.step_spans
    others = p.only(["forward", "Memcpy*", "cuda*Memcpy*", "aten::r*"])
    assert [o.name for o in others.ops] == ["aten::relu"] and others.kernels == ()
    assert [r.name for r in others.ranges] == ["forward"]
    assert [m.name for m in others.memory_ops] == ["Memcpy HtoD (Pageable -> Device)"]
    assert [r.name for r in others.runtime] == ["cudaMemcpyAsync"]
    assert {"aten::linear", "sgemm_128x64", "forward", "cudaLaunchKernel"} <= p.names()


def test_the_time_outside_the_ops_is_each_steps_wall_less_its_top_level_ops():
    """Per step, the wall outside the ops of the thread that marks the steps: nested ops count
    once (in their caller), an op's time in the step it starts in (as its time does; a child
    starting in the next step counts there), an op outside every step and another thread's op
    outside the steps not at all. None where an op in a step ran on another thread (a pool's work
    would read as time outside the ops), the steps are marked on several threads, or unmarked."""
    events = [
        op("aten::empty", -500, 100),  # before the first step
        step(1, 0, 1000),
        op("aten::linear", 100, 300),
        op("aten::addmm", 110, 250),  # inside linear
        op("aten::relu", 500, 100),
        op("aten::copy_", 950, 100),  # runs into step 2: its time counts in step 1
        step(2, 1000, 1000),
        op("aten::to", 1900, 150),
        op("aten::_to_copy", 2005, 20),  # inside aten::to, starting in no step: counted nowhere
    ]
    profile = analyze(events)
    assert profile.outside_ops_ns == (500_000, 870_000)  # aten::to's self time, 130 us, in step 2
    assert profile.to_dict()["outside_ops_ms"]["median"] == 0.685
    elsewhere = analyze([*events, op("aten::mm", -400, 200, tid=2)])  # another thread, outside the steps
    assert elsewhere.outside_ops_ns == profile.outside_ops_ns
    pool = analyze([*events, op("aten::mm", 200, 600, tid=2)])  # another thread's op in a step
    assert pool.outside_ops_ns is None and pool.to_dict()["outside_ops_ms"] is None
    two_markers = analyze([step(1, 0, 1000), op("aten::relu", 10, 100), step(2, 1000, 1000, tid=2)])
    assert two_markers.outside_ops_ns is None
    assert analyze([op("aten::relu", 10, 100)]).outside_ops_ns is None  # no step markers: no wall


def test_a_step_marker_with_a_number_no_int_reads_is_no_step():
    """A trial's trace named a step `ProfilerStep#` + 5,000 digits: `int()` refused it (past
    Python's 4,300-digit limit) and `opprof analyze` printed a traceback. torch numbers steps
    from 1; a number over 18 digits is no step of torch's, and reads as a user range."""
    huge = "ProfilerStep#" + "9" * 5000
    profile = analyze([step(1, 0, 10), op("aten::mm", 1, 2), annotation(huge, 20, 10), op("aten::add", 21, 2)])
    assert profile.steps == 1 and [r.name for r in profile.ranges] == [huge]


def _forking_steps() -> list[Event]:
    """Two steps of a TorchScript function that forks (as torch records it): `forward` starts
    on the steps' thread and its end lands on the pool thread that finished its work, past its
    step and into the next step's `forward`; the forked function on the pool thread ends late."""
    return [
        step(1, 0, 100),
        op("forward", 10, 120),  # ends at 130: inside step 2's forward
        op("aten::linear", 20, 30),
        op("<forked function>", 15, 200, tid=3),  # 200 us from a 100 us step: past its step
        op("aten::linear", 16, 30, tid=3),
        step(2, 110, 100),
        op("forward", 120, 60),
        op("aten::linear", 125, 30),
        op("<forked function>", 220, 20, tid=3),
    ]


def test_an_op_whose_end_another_thread_recorded_encloses_nothing():
    """A trial's jit.fork model erred `nesting` (and `wall_time`, `units broken`) in most 300-step
    runs: torch records a forking function's end on the thread that finished it, after its caller
    went on. Such an op (EventTable.end_threads) encloses nothing, as in torch's own tree: no
    parent, no children, no self time, and no top-level time; a pool thread's op may outlive its
    step. Without the mark, the same events are refused."""
    from pytest_opprof.events import EventTable

    events = _forking_steps()
    refused = analyze(events)
    assert {c.name for c in refused.errors} == {"nesting", "wall_time"}
    table = EventTable.from_events(events)
    table.end_threads = {1: 3, 6: 3}  # both forwards
    p = analyze(table)
    assert p.errors == []
    forward, linear = p.op("forward"), p.op("aten::linear")
    assert (forward.calls, forward.cpu_ns, forward.self_cpu_ns) == (2, 180_000, 0)
    assert (linear.calls, linear.self_cpu_ns) == (3, 90_000)
    assert p.op_tree[1][:3] == [-1, -1, -1]  # forward, and the linear it called: no parent


def test_a_fork_pools_ops_are_not_held_to_the_steps():
    """Where a TorchScript fork ran (an op ended on another thread), a thread other than the
    steps' is not held to the steps' wall (its pool ends a `<forked function>` when it gets the
    CPU back: a CI run's 0.480 ms in a 0.139 ms step). Without a fork, or on the steps' thread,
    the step's wall bounds them (broken units)."""
    from pytest_opprof.events import EventTable

    def judged(events: list[Event], forked: bool) -> set[str]:
        table = EventTable.from_events([*events, op("forward", 1, 5), step(3, 600, 100)])
        if forked:
            table.end_threads = {len(events): 4}  # the forward ended on thread 4, another of the pool
        return {c.name for c in analyze(table).errors}

    outlived = [step(1, 0, 100), op("aten::mm", 10, 20), op("<forked function>", 50, 500, tid=3), step(2, 300, 100)]
    assert judged(outlived, forked=True) == set()
    assert judged(outlived, forked=False) == {"wall_time"}  # no fork ran
    own = [step(1, 0, 100), op("aten::mm", 10, 20), op("aten::big", 50, 200), step(2, 300, 100)]
    assert "wall_time" in judged(own, forked=True)  # the steps' thread: the step bounds it


def test_a_fork_pools_records_may_overlap_as_torch_reads_them():
    """Nested forks: a pool thread runs a forked task while another's record is open (that task
    waits), and torch ends the first record before the second's: a trial's nested forks erred
    `nesting` in 5 of 5 runs. On a fork's pool thread an op that ends past the one it starts in
    is not its child (torch's rule); without a fork, or on the steps' thread, it is refused."""
    from pytest_opprof.events import EventTable

    def analysed(forked: bool, tid: int = 3):
        events = [
            step(1, 0, 200),
            op("forward", 5, 150),
            op("<forked function>", 10, 130, tid=tid),
            op("<forked function>", 40, 105, tid=tid),  # starts in the first, ends 15 us after it
            op("aten::linear", 50, 20, tid=tid),
            step(2, 200, 200),
        ]
        table = EventTable.from_events(events)
        if forked:
            table.end_threads = {1: 4}  # the forward ended on another thread of the pool
        return analyze(table)

    p = analysed(forked=True)
    assert p.errors == []
    assert p.op("<forked function>").calls == 2 and p.op_tree[1][:4] == [-1, -1, -1, 2]  # the linear in the second
    assert {c.name for c in analysed(forked=False).errors} == {"nesting"}
    assert {c.name for c in analysed(forked=True, tid=1).errors} == {"nesting"}  # the steps' thread


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            "trace.json",
            "analyze(): events='trace.json' is not a list of pytest_opprof.Event records; read a trace file "
            "with load_trace(path), a finished torch profiler with from_profiler(prof)",
        ),
        (None, "analyze(): events=None is not a list of pytest_opprof.Event records; "),
        ({"traceEvents": []}, "analyze(): events={'traceEvents': []} is not a list of "),
        (
            [("cpu_op", "aten::mm", 0, 5)],
            "analyze(): events[0]: ('cpu_op', 'aten::mm', 0, 5) is not an Event; "
            "build each as Event(kind, name, start_ns, dur_ns, ...)",
        ),
        (
            [Event("cpu_op", "aten::mm", 0, 5), Event("banana", "x", 0, 1)],
            "analyze(): events[1]: kind 'banana' is not one of cpu_op, annotation, gpu_annotation, kernel, ",
        ),
        ([Event("cpu_op", None, 10, 500)], "analyze(): events[0]: name None is not a str; "),  # type: ignore[arg-type]
        (
            [Event("cpu_op", "aten::mm", 1.5, 5)],
            "analyze(): events[0]: start_ns 1.5 is not an integer of nanoseconds; ",
        ),  # type: ignore[arg-type]
        (
            [Event("cpu_op", "aten::mm", 0, "5")],  # a negative one is the `durations` check's
            "analyze(): events[0]: dur_ns '5' is not an integer of nanoseconds; ",
        ),
        (
            [Event("cpu_op", "aten::mm", True, 5)],
            "analyze(): events[0]: start_ns True is not an integer of nanoseconds; ",
        ),  # type: ignore[arg-type]
    ],
)
def test_analyze_refuses_what_is_not_events_in_one_line(events, message):
    """A library trial's analyze("trace.json"), analyze(prof) and analyze([Event(CPU_OP, None, ...)])
    raised TypeErrors and AttributeErrors from deep inside, analyze(None) gave an empty Profile and
    an unknown kind was dropped in silence: each is one OpprofUsageError naming the value and the fix."""
    from pytest_opprof import OpprofUsageError

    with pytest.raises(OpprofUsageError) as info:
        analyze(events)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_analyze_reads_events_built_from_the_public_event():
    """`from pytest_opprof import Event, analyze`: events built with it (kinds as plain strings)
    and given as a list or a tuple analyse as the builders' do."""
    from pytest_opprof import Event as PublicEvent

    events = [PublicEvent("cpu_op", "aten::mm", 0, 5_000, 1, 1), PublicEvent("cpu_op", "aten::mm", 10_000, 3_000, 1, 1)]
    for given in (events, tuple(events)):
        profile = analyze(given)
        assert profile.op("aten::mm").calls == 2 and profile.op("aten::mm").cpu_ns == 8_000
    assert analyze([]).ops == ()

    class Name(str):  # numpy.str_ is one: a review's raised a bare StopIteration
        pass

    class Ns(int):
        pass

    subclassed = [PublicEvent("cpu_op", Name("aten::mm"), Ns(0), Ns(5_000), 1, 1)]
    assert analyze(subclassed).op("aten::mm").calls == 1


# -- the trust checks' edges (a mutation trial: each of these moved a check and no test noticed) ---


def statuses(checks, names):
    return {c.name: c.status for c in checks if c.name in names}


def test_a_cut_short_last_step_excuses_only_the_step_comparisons_it_distorts():
    """A capture the test's exception ended inside its last step: only the step comparisons
    (step_events, ...) that the partial step makes differ are told apart; an error of another
    check (a negative duration) and a lost kernel record still stand."""
    from pytest_opprof.analysis.checks import last_step_partial

    events = stepped(
        3,
        1000,
        lambda i, b: (
            [op("aten::mm", b + 1, 50), launch(b + 2, corr=i + 1)]
            + ([kernel("gemm", b + 5, 5, corr=i + 1)] if i else [])
        ),
    )
    profile = analyze([*events, op("aten::bad", 2500, -5)])
    names = {"durations", "kernel_records", "step_events"}
    assert statuses(profile.checks, names) == {
        "durations": "error",
        "kernel_records": "warning",
        "step_events": "warning",
    }
    after = last_step_partial(profile.checks, profile.ops, len(profile.step_spans))
    assert statuses(after, names) == {"durations": "error", "kernel_records": "warning", "step_events": "ok"}


def test_two_whole_steps_that_differ_keep_their_warning_when_the_last_is_cut_short():
    """3 steps, the last cut short by the test's exception: the two whole steps ran other ops
    (aten::mul in step 2 only), so their step_events warning is real and stays."""
    from pytest_opprof.analysis.checks import last_step_partial

    per_step = {0: ["aten::mm"], 1: ["aten::mm", "aten::mul"], 2: []}
    profile = analyze(stepped(3, 1000, lambda i, b: [op(n, b + 1 + 100 * k, 50) for k, n in enumerate(per_step[i])]))
    after = last_step_partial(profile.checks, profile.ops, len(profile.step_spans))
    assert statuses(after, {"step_events"}) == {"step_events": "warning"}


def test_ops_past_their_steps_wall_by_more_than_the_two_percent_margin_are_an_error():
    """A pool thread's top-level op of 1.05 ms in a 1 ms step is 5% over its wall, past the 2%
    margin for clock rounding: the units or the attribution are broken."""
    profile = analyze([step(1, 0, 1000), op("aten::mm", 10, 900), op("aten::add", 10, 1050, tid=2)])
    (wall,) = [c for c in profile.checks if c.name == "wall_time"]
    assert wall.status == "error" and "take 1.050 ms in a 1.000 ms step" in wall.message
    within = analyze([step(1, 0, 1000), op("aten::mm", 10, 900), op("aten::add", 10, 1015, tid=2)])
    assert statuses(within.checks, {"wall_time"}) == {"wall_time": "ok"}


def test_a_compilation_in_step_0_is_warned_as_in_any_step():
    """torch.profiler without a schedule numbers its first step ProfilerStep#0 (from_profiler and
    trace files): a compilation there is inside the measured steps like any other."""
    from test_compiled import compilation_in_step_1

    renumbered = {"ProfilerStep#1": "ProfilerStep#0", "ProfilerStep#2": "ProfilerStep#1"}
    profile = analyze([e._replace(name=renumbered.get(e.name, e.name)) for e in compilation_in_step_1()])
    assert [s.number for s in profile.step_spans] == [0, 1]
    (compilation,) = [c for c in profile.checks if c.name == "compilation"]
    assert compilation.status == "warning" and "0/1 in step 0" in compilation.message


def test_a_synchronize_call_with_its_own_correlation_id_is_no_lost_kernel():
    """torch gives every runtime call a correlation id; a cudaStreamSynchronize launches no kernel,
    so its id without a kernel record is no lost record."""
    profile = analyze(
        [
            step(1, 0, 100),
            op("aten::mm", 10, 20),
            launch(12, corr=1),
            kernel("gemm", 15, 30, corr=1),
            launch(50, corr=2, name="cudaStreamSynchronize", dur_us=40),
        ]
    )
    assert profile.kernels_dropped == 0 and statuses(profile.checks, {"kernel_records"}) == {}  # no check: none lost


def test_one_kernel_under_an_op_and_without_one_is_listed_twice_without_error():
    """The same kernel, as long, launched once under aten::mm and once by no op: two rows, the
    op-less one first (the sort of equal times reads `None` as "")."""
    profile = analyze(
        [
            step(1, 0, 100),
            op("aten::mm", 10, 20),
            launch(12, corr=1),
            kernel("gemm", 15, 5, corr=1),
            launch(50, corr=2),
            kernel("gemm", 55, 5, corr=2),
        ]
    )
    assert [(k.name, k.op, k.device_ns) for k in profile.kernels] == [("gemm", None, 5000), ("gemm", "aten::mm", 5000)]


def test_a_child_a_little_past_its_parent_leaves_the_parents_self_time_at_zero_and_others_alone():
    """A child rounded 0.3 us past its parent (within the nesting slack): the parent's self CPU
    time is 0, not negative, and another op's is its own."""
    profile = analyze(
        [step(1, 0, 100), op("aten::linear", 0, 10), op("aten::addmm", 0.5, 10.3), op("aten::relu", 20, 30)]
    )
    assert {o.name: (o.cpu_ns, o.self_cpu_ns) for o in profile.ops} == {
        "aten::linear": (10_000, 0),
        "aten::addmm": (10_300, 10_300),
        "aten::relu": (30_000, 30_000),
    }


def test_a_user_loops_last_step_keeps_an_op_that_starts_in_its_markers_microsecond():
    """A user's loop (its last prof.step() may open a stray step): the last step's only op starts
    in the step marker's own microsecond; it is that step's, not the first's."""
    profile = analyze(
        [step(1, 0, 100), op("aten::mm", 10, 20), step(2, 100, 100), op("aten::mm", 100, 20)], stray_step=True
    )
    assert [s.number for s in profile.step_spans] == [1, 2]
    assert profile.op("aten::mm").calls_per_step.samples == (1, 1)
    # and one of no duration at the marker's very end (the step's bounds hold both ends)
    at_end = analyze(
        [step(1, 0, 100), op("aten::mm", 10, 20), step(2, 100, 100), op("aten::mm", 200, 0)], stray_step=True
    )
    assert at_end.op("aten::mm").calls_per_step.samples == (1, 1)


def spread_status(per_step_us):
    profile = analyze(stepped(len(per_step_us), 1000, lambda i, b: [op("aten::mm", b + 1, per_step_us[i])]))
    return statuses(profile.checks, {"spread"}).get("spread")


def test_a_per_step_spread_past_a_quarter_of_the_median_warns_from_four_steps_and_50_us_on():
    """IQR/median 0.50 (and 0.67 at a 90 us median) warns; 3 steps are too few to tell, 4 are
    enough; an op under 50 us a step is below the floor."""
    assert spread_status([100, 100, 150, 200, 100, 150, 200, 100]) == "warning"
    assert spread_status([60, 60, 120, 120, 60, 120]) == "warning"
    assert spread_status([100, 150, 200]) is None
    assert spread_status([100, 100, 200, 200]) == "warning"
    assert spread_status([20, 20, 40, 40, 20, 40]) == "ok"  # below the floor: the check passes


def _spread_message(durations_us: list[int], first: int = 1) -> str:
    """The spread check's message for an op of these durations, a call a step (none at 0), its
    steps numbered from `first` (torch.profiler's own numbering starts at 0)."""
    events = []
    for i, d in enumerate(durations_us):
        events.append(step(first + i, i * 2000, 2000))
        events += [op("aten::addmm", i * 2000 + 10, d)] if d else []
    (check,) = [c for c in analyze(events).checks if c.name == "spread"]
    return check.message


def test_a_spread_of_two_levels_says_which_steps_and_a_period_says_it_is_the_codes():
    """A diagnosis trial's matmul on a 16x input every 3rd call (4 of 10 steps ~x9) read `use more
    warmup or steps, or a quieter machine`, and passed: time is judged on the fastest steps. Some
    steps x3 or more the others say which and at what times; a fixed period names the code's
    work; a spread without two levels keeps the noise wording."""
    every_third = _spread_message([1400, 150, 110, 1000, 120, 130, 1260, 140, 210, 1350])
    assert every_third.endswith(
        "; aten::addmm took x9.7 the other steps' time in 4 of 10 steps (1, 4, 7, 10: 1.000-1.400 vs 0.110-0.210 "
        "ms), every 3rd step: steps that do other work (an input that grows every few calls, a branch taken every "
        "few steps), which time verdicts judge by the fastest steps (against a baseline without them, 4 or more at "
        "a fixed period read inconclusive); make every step do the same work, or measure those steps in a test of "
        "their own"
    )
    three = _spread_message([1400, 150, 1000, 120, 1260, 140, 210])  # every 2nd, 3 times: chance's too
    assert "(1, 3, 5: 1.000-1.400 vs 0.120-0.210 ms): a slow spell of the machine, or steps that do other" in three
    assert "every 2nd" not in three  # a trial's loaded machine read `every 2nd step: steps that do other work`
    spell = _spread_message([150, 140, 1200, 1300, 110, 130, 120, 140, 210, 150])
    assert "(3, 4: 1.200-1.300 vs 0.110-0.210 ms): a slow spell of the machine, or steps that do other work" in spell
    assert spell.endswith("find them in a trace of the steps (pytest --opprof-trace=all keeps each test's)")
    noisy = _spread_message([100, 100, 150, 200, 100, 150, 200, 100])
    assert noisy.endswith("use more warmup or steps, or a quieter machine") and "took x" not in noisy
    one_slow = _spread_message([100, 100, 100, 400, 100, 300, 100, 100])  # x3 from the fastest half: 2 steps
    assert "(4, 6: 0.300-0.400 vs 0.100 ms)" in one_slow
    from_zero = _spread_message([1400, 150, 110, 1000, 120, 130, 1260, 140, 210, 1350], first=0)
    assert "in 4 of 10 steps (0, 3, 6, 9: " in from_zero  # as the trace names them (a review read `1, 3, 6, 9`)
    # an op absent from some steps (a review's divided by zero): a warning, no level to compare with
    for absent in ([0, 0, 1000, 1500, 1500, 1500, 1500, 1500], [1000, 0, 1600, 1500, 0, 1550, 1500, 1600]):
        assert _spread_message(absent).startswith("per-step time spread: aten::addmm")


def test_ordinals():
    from pytest_opprof.units import ordinal

    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th",
    ]  # fmt: skip


def test_device_time_goes_to_the_op_and_step_that_launched_it():
    """A kernel tied to its op by External id alone (no correlation id) that runs after its step
    ended is the launching op's, in that op's step; a copy launched from another thread than the
    op running meanwhile is no op's; an op's copy bytes are per the step that launched them (a copy
    outside every step is in none); runtime calls after opprof's step sync are still counted."""
    from builders import memcpy

    ext = analyze(
        [
            step(1, 0, 100),
            op("aten::mm", 10, 20, ext=5),
            step(2, 100, 100),
            op("aten::add", 110, 20, ext=6),
            kernel("gemm", 150, 30, corr=0, ext=5),
            kernel("add_k", 185, 5, corr=0, ext=6),
        ]
    )
    assert {o.name: o.device_per_step.samples for o in ext.ops} == {"aten::mm": (30000, 0), "aten::add": (0, 5000)}
    other = analyze(
        [
            step(1, 0, 100),
            op("aten::mm", 10, 50),
            launch(20, corr=1, tid=2, name="cudaMemcpyAsync"),
            memcpy("Memcpy HtoD", 25, 5, 64, corr=1),
        ]
    )
    assert other.op("aten::mm").device_ns == 0 and other.unattributed_device_ns == 5000
    copy = {"shapes": ((4,),), "dtypes": ("float",)}
    copies = analyze(
        [
            step(1, 0, 100),
            op("aten::copy_", 10, 20, **copy),
            launch(12, corr=1),
            memcpy("Memcpy HtoD", 15, 5, 4096, corr=1),
            step(2, 100, 100),
            op("aten::copy_", 110, 20, **copy),
            op("aten::copy_", 300, 20, **copy),
            launch(302, corr=2),
            memcpy("Memcpy HtoD", 305, 5, 1024, corr=2),
        ]
    )
    work = copies.op("aten::copy_").work
    assert work is not None and work.bytes_per_step == (("Memcpy HtoD", Dist(samples=(4096, 0))),)
    synced = analyze(
        [
            step(1, 0, 100),
            op("aten::mm", 10, 20),
            launch(12, corr=1),
            kernel("gemm", 15, 5, corr=1),
            annotation(OPPROF_SYNC_ANNOTATION, 90, 8),
            launch(91, corr=9, name="cudaDeviceSynchronize", dur_us=5),
            step(2, 100, 100),
            op("aten::mm", 110, 20),
            launch(112, corr=2),
            kernel("gemm", 115, 5, corr=2),
        ]
    )
    assert [(r.name, r.calls, r.calls_per_step.samples) for r in synced.runtime] == [("cudaLaunchKernel", 2, (1, 1))]


def test_the_captures_last_op_past_its_steps_end_is_a_nesting_error():
    """The last op of the capture runs 0.07 ms past its step's end: an error as for any op."""
    profile = analyze(
        [step(1, 0, 100), op("aten::mm", 10, 20), step(2, 100, 100), op("aten::mm", 110, 20), op("aten::add", 150, 120)]
    )
    (nesting,) = [c for c in profile.checks if c.name == "nesting"]
    assert nesting.status == "error" and "aten::add ends 0.070 ms after ProfilerStep#2" in nesting.message


def test_calls_text_says_the_steps_an_op_ran_in_where_it_skipped_some():
    """`0/step` (a median of 0) and `0.5/step` (one call in 5 of 10 steps) read as no call and half
    a call, in two trials' assert_no_op messages."""
    from pytest_opprof.units import calls_text

    assert calls_text((2, 2, 2)) == "2/step"
    assert calls_text((1, 0) * 5) == "1/step in 5 of 10 steps"
    assert calls_text((0, 2, 0, 0, 3, 0, 0, 2)) == "2/step in 3 of 8 steps"
    assert calls_text((1, 1, 1, 0)) == "1/step in 3 of 4 steps"
    assert calls_text((0, 0)) == calls_text(()) == "0/step"


def test_fixed_period_is_one_gap_of_two_or_more():
    from pytest_opprof.units import fixed_period

    assert fixed_period([0, 3, 6, 9]) == 3 and fixed_period([1, 3]) == 2
    assert fixed_period([1, 2, 3]) is None and fixed_period([1, 4, 8]) is None
    assert fixed_period([5]) is None and fixed_period([]) is None
