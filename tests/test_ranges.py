"""Ranges: record_function blocks and other annotations, by name (hand-built events; the shared
GPU traces against a sweep of their raw events written apart from the analysis)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal

import pytest
from builders import annotation, kernel, launch, op, step, stepped
from conftest import SHARED_TRACES

from pytest_opprof import assertions, load_trace
from pytest_opprof.analysis import analyze
from pytest_opprof.opmessages import collective_over_limit
from pytest_opprof.opnames import gloo_ranges_of


def test_a_range_has_its_calls_wall_time_and_launched_device_time_per_step():
    """Two steps; `blk` holds a launch (a 5 us kernel) and, nested in it, another `blk` (a call
    whose time the outer one holds); `other` on another thread gets none of thread 1's launches;
    one `blk` outside the steps counts in the totals only; step markers, opprof's step sync and
    torch.compile's stages are not ranges."""
    events = stepped(
        2,
        100,
        lambda i, base: [
            annotation("blk", base + 10, 40),
            annotation("blk", base + 15, 5),  # nested, same name
            op("aten::mm", base + 20, 20),
            launch(base + 21, corr=i + 1),
            kernel("gemm", base + 30, 5, corr=i + 1),
            annotation("other", base + 10, 30, tid=2),
            annotation("opprof::step_sync", base + 90, 5),
            annotation("dynamo_data: compile_id=0/0", base + 60, 5),
        ],
    )
    events.append(annotation("blk", 300, 10))
    profile = analyze(events)
    # by time: device time for a range that launched device work (blk: 10 us), else wall (other: 60 us)
    assert [r.name for r in profile.ranges] == ["other", "blk"]
    other, blk = profile.ranges
    assert (blk.calls, blk.cpu_ns, blk.device_ns) == (5, 90_000, 10_000)
    assert blk.calls_per_step.samples == (2, 2) and blk.cpu_per_step.samples == (40_000, 40_000)
    assert blk.device_per_step.samples == (5000, 5000) and blk.on_device
    assert blk.time_per_step.samples == (5000, 5000)
    assert (other.calls, other.cpu_ns, other.device_ns, other.on_device) == (2, 60_000, 0, False)
    assert profile.to_dict()["ranges"][1] == {
        "name": "blk", "calls": 5, "cpu_ms": 0.09, "device_ms": 0.01, "on_device": True,
        "per_step": {
            "calls": {"median": 2, "min": 2, "max": 2, "samples": [2, 2]},
            "outer_calls": {"median": 1, "min": 1, "max": 1, "samples": [1, 1]},  # one blk nested in a blk
            "cpu_ms": {"median": 0.04, "min": 0.04, "max": 0.04, "samples": [0.04, 0.04]},
            "device_ms": {"median": 0.005, "min": 0.005, "max": 0.005, "samples": [0.005, 0.005]},
        },
    }  # fmt: skip
    assert "range (record_function)" in profile.table() and "blk " in profile.table()


def test_a_profile_without_ranges_has_an_empty_list_and_no_table():
    profile = analyze([step(1, 0, 10), op("aten::add", 1, 2)])
    assert profile.ranges == () and profile.to_dict()["ranges"] == []
    assert "range (record_function)" not in profile.table()


SHARED_GPU = ["gpu-sampled-steps.json.gz", "a100-alexnet.json.gz", "mi250-minitoy-train.json.gz"]


def independent_ranges(path) -> dict[str, tuple[int, int, int]]:
    """Per range name: calls, summed ns, and ns of device work whose launching runtime call started
    inside the range on its thread, computed from the raw events with Decimal; a range nested in
    one of its name on its thread is a call whose time the outer one holds."""
    with gzip.open(path, "rt") as f:
        events = [e for e in json.load(f, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]

    def ns(v) -> int:
        return int(Decimal(v) * 1000)

    device = defaultdict(int)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            device[e["args"].get("correlation")] += ns(e["dur"])
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    outer_end: dict[tuple, int] = {}
    annotations = [e for e in events if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")]
    for a in sorted(annotations, key=lambda a: (ns(a["ts"]), -ns(a["dur"]))):
        start, end = ns(a["ts"]), ns(a["ts"]) + ns(a["dur"])
        row = out[a["name"]]
        row[0] += 1
        key = (a["name"], a["pid"], a["tid"])
        if start < outer_end.get(key, start):
            continue  # nested in a range of its name: the outer one holds its time
        outer_end[key] = end
        row[1] += end - start
        row[2] += sum(
            device[r["args"].get("correlation")]
            for r in runtime
            if (r["pid"], r["tid"]) == (a["pid"], a["tid"]) and start <= ns(r["ts"]) < end
        )
    return {k: tuple(v) for k, v in out.items()}


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="the shared traces are not here")
@pytest.mark.parametrize("name", SHARED_GPU)
def test_ranges_of_shared_gpu_traces_agree_with_an_independent_sweep(name):
    path = SHARED_TRACES / name
    expected = independent_ranges(path)
    got = {r.name: (r.calls, r.cpu_ns, r.device_ns) for r in load_trace(path).ranges}
    assert got == expected and got


def three_steps(*extra):
    events = []
    for i in range(3):
        events += [step(i + 1, i * 100, 100), op("aten::add", i * 100 + 1, 1)]
    return events + list(extra)


def test_a_range_in_some_steps_only_is_warned_about_and_caught_per_call():
    """A 20 us block in one step of three: a median of 0 per step, which passed assert_range_below
    whatever the block cost (a trial's optimizer update every 4th call passed 0.0001 ms). A
    step_ranges warning names it; the median assertion fails where a step that ran it is over the
    limit, saying to assert it per="call" or by stat="max", which catch it too."""
    from pytest_opprof.opmessages import hidden_by_median

    profile = analyze(three_steps(annotation("rare", 110, 20)))
    (check,) = [c for c in profile.checks if c.name == "step_ranges"]
    assert check.status == "warning" and "rare (0, 1, 0)" in check.message and 'per="call"' in check.message
    assert assertions.range_below("rare", ms=0.01)(profile) == hidden_by_median("rare", 1, 3, 20_000, 0.01)
    assert hidden_by_median("rare", 1, 3, 20_000, 0.01) == (
        "rare: 0.020 ms in a step > limit 0.010 ms; it ran in 1 of 3 steps, so its median per step is 0 whatever it "
        'costs; assert it per="call" or by stat="max"'
    )
    assert assertions.range_below("rare", ms=0.03)(profile) is None  # no step over the limit
    ops = analyze(three_steps(op("aten::mul", 120, 20)))  # an op in one step of three: the same
    assert assertions.op_below("aten::mul", ms=0.01)(ops).startswith("aten::mul: 0.020 ms in a step > limit 0.010 ms")
    assert "rare: 0.020 ms/call > limit 0.01" in assertions.range_below("rare", ms=0.01, per="call")(profile)
    assert "rare: 0.020 ms/step > limit 0.01" in assertions.range_below("rare", ms=0.01, stat="max")(profile)
    assert not [c for c in analyze(three_steps()).checks if c.name == "step_ranges"]


def test_per_call_time_of_a_recursive_range_is_per_outermost_call():
    """A block opened 4 times recursively in each step: 4 calls per step, one 40 us outer call;
    per call is 40 us (a quarter of it was reported, and a limit of 30 us passed)."""

    nested = [annotation("tree", i * 100 + 10 + d, 40 - 2 * d) for i in range(3) for d in range(4)]
    profile = analyze(three_steps(*nested))
    (tree,) = profile.ranges
    assert tree.calls_per_step.samples == (4, 4, 4) and tree.outer_calls_per_step.samples == (1, 1, 1)
    assert "tree: 0.040 ms/call > limit 0.03" in assertions.range_below("tree", ms=0.03, per="call")(profile)


def test_op_assertions_given_a_range_name_and_range_assertions_on_compiled_code():
    """assert_no_op of a range's name fails naming the range assertion (it passed: no op of that
    name); a range assertion where compiled code ran says torch.compile drops blocks inside it."""
    from pytest_opprof import assertions

    profile = analyze(three_steps(annotation("blk", 10, 5)))
    assert "blk: a range (a record_function block or annotation), not an op" in assertions.no_op("blk")(profile)
    assert assertions.no_op("bl*")(profile) is None  # a glob: no op matches
    assert assertions.op_count("bl*", 0)(profile) is None  # likewise (a review found it failing)
    compiled = analyze(three_steps(op("Torch-Compiled Region: 0/0", 50, 10)))
    message = assertions.range_below("inside", ms=1)(compiled)
    assert "torch.compile drops record_function blocks inside it" in message


def test_a_capture_of_ranges_only_says_where_the_ops_went():
    """Ranges but no op (the ops ran on a thread torch.profiler does not record): the events
    error names the ranges and the reason, not "nothing ran"."""
    profile = analyze([step(1, 0, 100), annotation("main_block", 10, 50)])
    (events,) = [c for c in profile.checks if c.name == "events"]
    assert events.status == "error" and "only ranges (main_block)" in events.message
    assert "a thread the step started" in events.message


def test_the_html_section_says_a_trust_error_once_and_shows_no_empty_op_table():
    """The failure shows pytest's message, which holds the trust error: the numbers line below it
    does not repeat it, and a capture without ops has no empty op table (a trial's page did both)."""
    from pytest_opprof.htmlreport import test_section

    profile = analyze([step(1, 0, 100), annotation("main_block", 10, 50)])
    (error,) = [c.message for c in profile.checks if c.status == "error"]
    page = test_section("t.py::t", "error", profile, None, None, None, f"measurement cannot be trusted: {error}")
    assert page.count("only ranges (main_block)") == 1
    assert "<th>op</th>" not in page and '<table class="ranges">' in page


def test_annotations_inside_a_compilation_are_its_stages_not_ranges():
    """torch 2.6 marks compile stages with annotations without a compile id (`compiler
    (dynamo_timed)`, ...) inside its compile root: they are not ranges (the compatibility run on
    torch 2.6 listed them in the range table); a block outside the compilation is."""
    profile = analyze(
        three_steps(
            annotation("_compile.compile_inner (dynamo_timed)", 10, 60),
            annotation("compiler (dynamo_timed)", 20, 30),
            annotation("blk", 75, 10),
            annotation("gc (dynamo_timed)", 90, 2),  # torch 2.7: between compile stages, outside the root
        )
    )
    assert [r.name for r in profile.ranges] == ["blk"]


# -- where an op ran, by its ranges (mutation trial F) -------------------------------------------


def test_an_op_is_placed_in_the_two_innermost_ranges_around_each_call():
    """Three ranges enclose aten::relu's first call, innermost first (of two starting together, the
    shorter) and two at most; a range that ended before it, or that starts after it, is not named.
    Its calls in other places are each said with their calls per step (a training trial's added
    `loss.item()` read as inside the optimizer's range, where 20 other calls ran)."""
    from pytest_opprof import assertions

    events = [
        step(1, 0, 1000),
        annotation("before", 5, 10),
        annotation("outer", 20, 300),
        annotation("middle", 40, 200),  # starts with `inner`, ends after it: around it
        annotation("inner", 40, 100),
        op("aten::relu", 40, 10),  # starts with `inner` and `middle`, as a trace in whole microseconds may
        annotation("after", 70, 10),
        op("aten::relu", 500, 10),
    ]
    assert assertions.op_count("aten::relu", 1)(analyze(events)) == (
        "aten::relu: 2 calls/step, expected 1 (per step: 2; by place: 1/step inside inner <- middle, "
        "1/step outside every range)"
    )
    alike = [e for e in events if e.start_ns != 500_000] + [op("aten::relu", 60, 5)]
    assert assertions.op_count("aten::relu", 1)(analyze(alike)) == (
        "aten::relu: 2 calls/step, expected 1 (per step: 2; called from Python inside inner <- middle)"
    )


def test_an_ops_places_count_its_calls_as_its_count_does():
    """An op whose only child is a call of its own name is one call (torch's rule): PowBackward0's
    aten::mul calls aten::mul. Its places count it once too (a trial read `5/step in the backward
    pass, 1/step outside the backward pass` beside a count of 5)."""
    from pytest_opprof import assertions

    events = [
        step(1, 0, 1000),
        op("aten::mul", 10, 10),
        op("autograd::engine::evaluate_function: PowBackward0", 100, 100),
        op("aten::mul", 110, 20),
        op("aten::mul", 112, 10),  # the only child of the call above: folded into it
        op("aten::mul", 140, 10),
    ]
    assert assertions.op_count("aten::mul", 2)(analyze(events)) == (
        "aten::mul: 3 calls/step, expected 2 (per step: 3; by place: 2/step in the backward pass, "
        "1/step outside the backward pass)"
    )


def test_an_ops_calls_in_the_backward_pass_are_said_apart():
    """Activation checkpointing recomputes forward ops inside the backward pass: a training trial's
    count change named no place. Calls inside an autograd engine's node call are said apart, with
    the ranges around them; all calls there, the place is said alone."""
    from pytest_opprof import assertions

    events = [
        step(1, 0, 1000),
        op("aten::addmm", 10, 10),
        op("aten::addmm", 30, 10),
        annotation("bwd", 100, 200),
        op("autograd::engine::evaluate_function: AddmmBackward0", 110, 100),
        op("aten::addmm", 120, 10),
    ]
    assert assertions.op_count("aten::addmm", 2)(analyze(events)) == (
        "aten::addmm: 3 calls/step, expected 2 (per step: 3; by place: 2/step outside the backward "
        "pass, 1/step in the backward pass inside bwd)"
    )
    backward = [e for e in events if e.start_ns >= 100_000 or e.name.startswith("ProfilerStep")]
    assert assertions.op_count("aten::addmm", 2)(analyze(backward)) == (
        "aten::addmm: 1 calls/step, expected 2 (per step: 1; in autograd::engine::evaluate_function: AddmmBackward0 "
        "in the backward pass inside bwd)"
    )


def test_a_place_that_ran_in_some_steps_only_says_in_how_many():
    """Each place's calls are its median per step, as the headline's; a place that ran in under
    half the steps says in how many (a review's 20 reads in one step of four read `5/step`)."""
    from pytest_opprof import assertions

    events = []
    for n in range(4):
        base = n * 1000
        events += [step(n + 1, base, 900), op("aten::item", base + 10, 5), op("aten::item", base + 20, 5)]
        if n == 3:
            events += [annotation("opt", base + 100, 500)]
            events += [op("aten::item", base + 110 + 10 * k, 5) for k in range(20)]
    assert assertions.op_count("aten::item", 2)(analyze(events)) == (
        "aten::item: 2-22 calls/step, expected 2 (per step: 2, 2, 2, 22; by place: in 1 of 4 steps inside "
        "opt, 2/step outside every range)"
    )


def test_a_call_spanning_its_engine_call_exactly_is_in_the_backward_pass():
    """A trace in whole microseconds gives an engine call and the node and op inside it one
    span: they ran in the backward pass (a review's `aten::t` read outside it); the engine call
    itself, alone, is not inside another."""
    from pytest_opprof.analysis.ranges import in_backward_each, op_calls

    events = [
        step(1, 0, 1000),
        op("autograd::engine::evaluate_function: TBackward0", 100, 5),
        op("TBackward0", 100, 5),
        op("aten::t", 100, 5),
        op("aten::t", 300, 5),
    ]
    table = analyze(events).event_table
    assert in_backward_each(table, op_calls(table, "aten::t")) == [True, False]
    assert in_backward_each(table, op_calls(table, "TBackward0")) == [True]
    assert in_backward_each(table, op_calls(table, "autograd::engine::evaluate_function: TBackward0")) == [False]


def test_an_annotation_inside_a_compilation_is_no_range_whatever_its_name():
    """A compiler stage named as no rule of is_range knows (`fx_codegen_and_compile`), inside a
    `dynamo` compilation, is no range; the same name outside the compilation is one."""
    profile = analyze(
        three_steps(
            op("dynamo", 10, 60),
            annotation("dynamo_data: compile_id=0/0", 11, 1),
            annotation("fx_codegen_and_compile", 20, 30),
            annotation("fx_codegen_and_compile", 80, 5, tid=2),
        )
    )
    assert [(r.name, r.calls) for r in profile.ranges] == [("fx_codegen_and_compile", 1)]


def test_device_work_without_a_correlation_is_launched_by_no_range():
    """A kernel record without a correlation id (0) and a runtime call without one inside `blk`:
    nothing links them, so `blk` launched no device time (its wall time stands)."""
    profile = analyze(three_steps(annotation("blk", 10, 20), launch(12, corr=0), kernel("orphan", 40, 50, corr=0)))
    (blk,) = profile.ranges
    assert (blk.name, blk.device_ns, blk.cpu_ns) == ("blk", 0, 20_000)


def test_back_to_back_ranges_of_one_name_are_two_calls_not_one_nested():
    """`blk` ending at 30 us and the next `blk` starting at 30 us (a loop's ranges in a trace of
    whole microseconds): two outer calls, both times counted."""
    (blk,) = analyze(three_steps(annotation("blk", 10, 20), annotation("blk", 30, 20))).ranges
    assert (blk.calls, blk.cpu_ns, blk.outer_calls_per_step.samples[0]) == (2, 40_000, 2)


def test_a_range_inside_one_of_its_name_starting_with_it_is_the_nested_call():
    """`blk` inside `blk`, both starting at 10 us (a recursion in a trace of whole microseconds),
    the inner one listed first: the outer one's time counts, the inner is the nested call."""
    (blk,) = analyze(three_steps(annotation("blk", 10, 5), annotation("blk", 10, 20))).ranges
    assert (blk.calls, blk.cpu_ns, blk.outer_calls_per_step.samples[0]) == (2, 20_000, 1)


def test_a_compile_stage_named_with_its_compile_id_is_no_range():
    """torch's compile stages carry their compile id in the name (`... compile_id=[0/0]`): not the
    code's ranges, wherever they run; a range that merely mentions compile_id stays one."""
    profile = analyze(
        three_steps(
            annotation("OutputGraph.call_user_compiler compile_id=[0/0]", 10, 5), annotation("compile_id=x", 20, 5)
        )
    )
    assert [r.name for r in profile.ranges] == ["compile_id=x"]


def test_a_range_nested_twice_in_one_of_its_name_is_two_nested_calls():
    """`blk` 10-60 us holding two `blk` calls (15-20, 30-35): both nested, the outer's 50 us the
    time (the first nested one does not end the outer one)."""
    (blk,) = analyze(three_steps(annotation("blk", 10, 50), annotation("blk", 15, 5), annotation("blk", 30, 5))).ranges
    assert (blk.calls, blk.cpu_ns, blk.outer_calls_per_step.samples[0]) == (3, 50_000, 1)


def test_an_op_limit_on_a_gloo_collective_holds_for_the_collective_gloo_ran_on_its_threads():
    """A trial's assert_op_below("c10d::allreduce_", ms=1) passed an all-reduce that waited 409 ms
    a step for a slower rank: the op's own time is its launch; gloo runs the collective on its own
    threads, in a range of its name (gloo:all_reduce). The op's limit holds for that range too,
    per step and per call; a collective within it, or another op's range, passes."""
    events = stepped(
        3,
        1000,
        lambda i, base: [
            op("c10d::allreduce_", base + 10, 40),  # the launch
            annotation("gloo:all_reduce", base + 20, 400 + 100 * i, tid=7),  # the collective, on gloo's thread
            op("c10d::broadcast_", base + 500, 5),
            annotation("gloo:broadcast", base + 505, 10, tid=7),
        ],
    )
    profile = analyze(events)
    failed = assertions.op_below("c10d::allreduce_", ms=0.3)(profile)
    assert failed == collective_over_limit(
        ["c10d::allreduce_"],
        [],
        "gloo:all_reduce",
        "gloo:all_reduce: 0.50 ms/step > limit 0.30 ms (median of 3 steps; min 0.40, max 0.60)",
    )
    assert failed.startswith("c10d::allreduce_ launched a collective that gloo ran on its own threads")
    assert "gloo:all_reduce: 0.50 ms/call" in assertions.op_below("c10d::*", ms=0.3, per="call")(profile)
    assert assertions.op_below("c10d::allreduce_", ms=0.7)(profile) is None  # the collective within it too
    assert assertions.op_below("c10d::broadcast_", ms=0.02)(profile) is None  # its own range: 10 us
    assert "gloo:broadcast" in assertions.op_below("c10d::broadcast_", ms=0.008)(profile)
    both = assertions.op_below("c10d::allreduce_", ms=0.03)(profile)  # the launch over too: both said
    assert both.startswith("c10d::allreduce_: 0.040 ms/step > limit 0.030 ms (median of 3 steps; min 0.040, max")
    assert "; c10d::allreduce_ launched a collective that gloo ran on its own threads, over the op's limit" in both


def test_a_gloo_range_that_other_collectives_ran_in_too_holds_each_ones_part_untold():
    """gloo runs a reduce-scatter as an all-reduce, and an all_gather_into_tensor in all_gather's
    range: a review's small all_gather was charged a large all_gather_into_tensor's 100 ms. Within
    the limit together, each part is: a pass; over it, the failure says the parts are not told
    apart and how to budget them together, once per range where a glob matched several."""
    events = stepped(
        3,
        1000,
        lambda i, base: [
            op("c10d::allgather_", base + 10, 5),
            annotation("gloo:all_gather", base + 20, 10, tid=7),
            op("c10d::_allgather_base_", base + 100, 5),
            annotation("gloo:all_gather", base + 110, 500, tid=7),
        ],
    )
    profile = analyze(events)
    assert assertions.op_below("c10d::allgather_", ms=0.6)(profile) is None  # 0.51 ms together
    failed = assertions.op_below("c10d::allgather_", ms=0.1)(profile)
    assert failed == collective_over_limit(
        ["c10d::allgather_"],
        ["c10d::_allgather_base_"],
        "gloo:all_gather",
        "gloo:all_gather: 0.51 ms/step > limit 0.10 ms (median of 3 steps; min 0.51, max 0.51)",
    )
    assert failed.startswith(
        "c10d::allgather_ launched collectives that gloo ran on its own threads in gloo:all_gather with those of "
        "c10d::_allgather_base_, which gloo names alike, over the op's limit together: "
    )
    assert failed.endswith(
        'each one\'s part is not told apart: budget them together (assert_range_below("gloo:all_gather", ms=...))'
    )
    both = assertions.op_below("c10d::*", ms=0.1)(profile)  # one clause for the range both ran in
    assert both.count("gloo:all_gather: 0.51 ms/step") == 1
    assert "c10d::_allgather_base_, c10d::allgather_ launched collectives" in both  # as matched


@pytest.mark.parametrize(
    ("op_name", "found"),
    [
        ("c10d::allreduce_", ("gloo:all_reduce", "gloo:sparse_all_reduce")),
        ("c10d::reduce_scatter_", ("gloo:all_reduce",)),  # gloo runs a reduce-scatter as an all-reduce
        ("c10d::_reduce_scatter_base_", ("gloo:all_reduce",)),
        ("c10d::_allgather_base_", ("gloo:all_gather",)),
        ("c10d::alltoall_base_", ("gloo:all_to_all",)),
        ("c10d::barrier", ("gloo:barrier",)),
        ("c10d::monitored_barrier_", ()),  # no range of its own
        ("aten::mm", ()),
    ],
)
def test_a_collectives_gloo_ranges_are_torchs_names(op_name, found):
    assert gloo_ranges_of(op_name) == found
