"""Unit tests of the assertion checks and their messages, on hand-built profiles: no torch."""

from __future__ import annotations

import pytest
from builders import annotation, kernel, launch, memcpy, op, step, stepped

from pytest_opprof import assertions
from pytest_opprof.analysis import analyze
from pytest_opprof.errors import OpprofUsageError, closest_names
from pytest_opprof.opmessages import count_mismatch, no_match, over_limit


def three_steps(addmm_us=(100, 120, 140)):
    events = []
    for i, d in enumerate(addmm_us):
        base = i * 1000
        events += [
            step(i + 1, base, 1000),
            op("aten::linear", base + 10, 500),
            op("aten::addmm", base + 20, d),
            op("aten::addmm", base + 300, 50),
        ]
    return analyze(events)


def test_over_limit_message_format():
    """The message reads as DESIGN §4 shows it."""
    msg = over_limit("aten::addmm", 2.41e6, 2.0, "step", "median", (2.30e6, 2.41e6, 2.55e6))
    assert msg == "aten::addmm: 2.41 ms/step > limit 2.00 ms (median of 3 steps; min 2.30, max 2.55)"


@pytest.mark.parametrize(
    ("value_ns", "limit_ms", "shown"),
    [
        (100_000, 0.0999, "0.1000 ms/step > limit 0.0999 ms"),  # `0.10 > limit 0.100` read as equal (a review)
        (10_000, 0.00999, "0.01000 ms/step > limit 0.00999 ms"),
        (65_000, 0.0649999, "0.0650000 ms/step > limit 0.0649999 ms"),  # a trial's `0.065 > limit 0.065`
        (500_000, 0.065, "0.50 ms/step > limit 0.065 ms"),  # apart already: as _ms_of gives them
    ],
)
def test_over_limit_gives_the_decimals_that_tell_the_value_from_the_limit(value_ns, limit_ms, shown):
    assert over_limit("aten::mm", value_ns, limit_ms, "step", "median", (value_ns,)).startswith(f"aten::mm: {shown} (")


def test_op_below_uses_the_median_of_per_step_time_by_default():
    """The per-step median (not the total) is compared; min/max and per-call are selectable."""
    p = three_steps()  # per step: 0.15, 0.17, 0.19 ms
    assert assertions.op_below("aten::addmm", 0.17)(p) is None
    assert assertions.op_below("aten::addmm", 0.16)(p) == (
        "aten::addmm: 0.17 ms/step > limit 0.16 ms (median of 3 steps; min 0.15, max 0.19; over it in steps 2, 3)"
    )
    assert assertions.op_below("aten::addmm", 0.16, stat="min")(p) is None
    assert assertions.op_below("aten::addmm", 0.18, stat="max")(p).startswith("aten::addmm: 0.19 ms/step")
    assert assertions.op_below("aten::addmm", 0.085, per="call")(p) is None  # 0.085 ms per call, median
    assert "ms/call" in assertions.op_below("aten::addmm", 0.08, per="call")(p)


def test_per_call_divides_by_the_calls_the_time_is_of():
    """Under autocast aten::linear calls aten::linear (after a cast): 4 calls per step, 2 of them
    nested, and the time is the 2 outer calls' (a nested call is in its outer one's time). A time
    per call divides by those 2: a trial's per-call budget passed at half each layer's cost."""
    events = [step(1, 0, 1000)]
    for base in (10, 500):  # two layers, 0.2 ms each
        events += [
            op("aten::linear", base, 200),
            op("aten::to", base + 5, 20),
            op("aten::linear", base + 30, 160),
            op("aten::addmm", base + 40, 140),
        ]
    p = analyze(events)
    linear = p.op("aten::linear")
    assert linear.calls_per_step.samples == (4,) and linear.outer_calls_per_step.samples == (2,)
    assert linear.cpu_per_step.samples == (400_000,)
    assert assertions.op_below("aten::linear", 0.2, per="call")(p) is None
    assert assertions.op_below("aten::linear", 0.19, per="call")(p) == (
        "aten::linear: 0.20 ms/call > limit 0.19 ms (median of 1 step; min 0.20, max 0.20)"
    )
    assert p.to_dict()["ops"][0]["per_step"]["outer_calls"]["samples"] == [2]
    assert assertions.op_count("aten::linear", 2)(p) == (
        "aten::linear: 4 calls/step, expected 2 (per step: 4; 2 of them called inside aten::linear itself (torch "
        "calls it again inside: autocast after casting the inputs, vmap, a nested tensor or subclass); called from Python)"
    )


def test_glob_applies_the_limit_to_each_matching_op():
    """With a glob, every matching op must be under the limit; the failure names the ones over it."""
    p = three_steps()
    msg = assertions.op_below("aten::*", 0.3)(p)
    assert msg.startswith("aten::linear: 0.50 ms/step")
    assert "aten::addmm" not in msg


def test_op_share_below_judges_the_median_share_of_each_steps_own_wall():
    """The share is the op's time in a step over that step's wall time; the median over the steps
    is judged by default (a noisy step alone fails nothing), every step with stat="max": addmm
    takes 15%, 17% and 19% of its 1 ms steps."""
    p = three_steps()
    assert assertions.op_share_below("aten::addmm", 17)(p) is None
    assert assertions.op_share_below("aten::addmm", 16)(p) == (
        "aten::addmm: 17.0% of the step > limit 16% (median of 3 steps; min 15.0%, max 19.0%; over it in steps 2, 3)"
    )
    assert assertions.op_share_below("aten::addmm", 18, stat="max")(p) == (
        "aten::addmm: 19.0% of the step > limit 18% (max of 3 steps; min 15.0%, max 19.0%; over it in step 3)"
    )
    assert assertions.op_share_below("aten::addmm", 15, stat="min")(p) is None
    # a step half as long doubles the share of the same 0.1 ms: its own wall, not the median's
    events = [step(1, 0, 1000), op("aten::mm", 10, 100), step(2, 1000, 500), op("aten::mm", 1010, 100)]
    assert assertions.op_share_below("aten::mm", 15, stat="max")(analyze(events)) == (
        "aten::mm: 20.0% of the step > limit 15% (max of 2 steps; min 10.0%, max 20.0%; over it in step 2)"
    )


def test_op_share_below_fails_an_op_that_ran_in_under_half_the_steps_over_the_limit():
    """An op that runs every third step has a median share of 0: a step that ran it over the
    limit fails the test rather than pass behind that 0, naming stat="max"."""
    events = []
    for n in range(1, 5):
        events += [step(n, (n - 1) * 1000, 1000), op("aten::relu", (n - 1) * 1000 + 10, 50)]
    events.append(op("aten::mm", 10 + 100, 600))  # in step 1 only: 60% of it
    p = analyze(events)
    assert assertions.op_share_below("aten::mm", 50)(p) == (
        "aten::mm: 60.0% of a step > limit 50%; it ran in 1 of 4 steps, so its median share is 0 whatever it costs; "
        'assert it by stat="max"'
    )
    assert assertions.op_share_below("aten::mm", 70)(p) is None
    assert assertions.op_share_below("aten::mm", 60)(p) is None  # at the limit is within it
    assert assertions.op_share_below("aten::mm", 50, stat="max")(p).startswith(
        "aten::mm: 60.0% of the step > limit 50%"
    )
    third = [step(n, (n - 1) * 1000, 1000) for n in (1, 2, 3)] + [op("aten::mm", 110, 600)]  # 1 of 3: under half
    assert "it ran in 1 of 3 steps" in assertions.op_share_below("aten::mm", 50)(analyze(third))
    half = analyze([step(n, (n - 1) * 1000, 1000) for n in (1, 2)] + [op("aten::mm", 110, 600)])  # 1 of 2 steps
    assert assertions.op_share_below("aten::mm", 50)(half) is None  # its median, 30%, holds it: not hidden
    assert assertions.op_share_below("aten::mm", 25)(half).startswith("aten::mm: 30.0% of the step > limit 25%")


def test_op_share_below_says_the_decimals_that_tell_the_share_from_the_limit():
    """`50.0% > limit 50%` would read as equal: a share just over its limit gets the digits."""
    p = analyze([step(1, 0, 10000), op("aten::mm", 10, 5001)])
    assert assertions.op_share_below("aten::mm", 50)(p).startswith("aten::mm: 50.01% of the step > limit 50% (")
    assert assertions.op_share_below("aten::mm", 50.01)(p) is None


def test_op_share_below_applies_the_limit_to_each_matching_op():
    """A glob judges each op apart, as op_below does (summed, aten::linear and the aten::addmm
    inside it would count twice); the failure names each op over it, the worst first."""
    p = three_steps()  # linear 50% a step, addmm 15-19%
    assert assertions.op_share_below("aten::*", 50)(p) is None
    message = assertions.op_share_below("aten::*", 16)(p)
    assert message.startswith("aten::linear: 50.0% of the step > limit 16% (median of 3 steps;")
    assert "; aten::addmm: 17.0% of the step > limit 16%" in message


def test_op_share_below_reads_device_time_for_ops_that_ran_on_a_device():
    """aten::mm's 10 us on the CPU launched a 40 us kernel: 40% of its 100 us step, as the `of step`
    column shows it."""
    p = device_profile()
    assert assertions.op_share_below("aten::mm", 40)(p) is None
    assert assertions.op_share_below("aten::mm", 39)(p).startswith("aten::mm: 40.0% of the step > limit 39% (")


def test_op_share_below_on_a_name_that_matches_nothing_names_the_closest():
    """As op_below: an op that did not run fails naming the closest ops, a range's name says so, and
    a capture without step markers (no wall time) fails rather than pass."""
    p = three_steps()
    assert assertions.op_share_below("aten::adddmm", 50)(p) == no_match("aten::adddmm", [o.name for o in p.ops])
    ranged = analyze([step(1, 0, 1000), annotation("encoder", 10, 500), op("aten::mm", 20, 100)])
    assert assertions.op_share_below("encoder", 50)(ranged).startswith(
        "encoder: a range (a record_function block or annotation), not an op; assert_range_below"
    )
    unstepped = analyze([op("aten::mm", 0, 100)])
    assert assertions.op_share_below("aten::mm", 50)(unstepped) == (
        "aten::mm: the capture has no step markers, so no share of a step's wall time can be judged"
    )


@pytest.mark.parametrize(
    ("op", "pct", "stat", "message"),
    [
        ("aten::mm", -1, "median", "pct=-1: expected a percentage between 0 and 100"),
        ("aten::mm", 101, "median", "pct=101: expected a percentage between 0 and 100"),
        (
            "aten::mm",
            0.5,
            "median",
            "pct=0.5: expected a percentage between 0 and 100, not a fraction: write 50 for 50%",
        ),
        ("aten::mm", "50%", "median", "pct='50%': expected a percentage between 0 and 100"),
        ("aten::mm", True, "median", "pct=True: expected a percentage between 0 and 100"),
        ("aten::mm", float("nan"), "median", "pct=nan: expected a percentage between 0 and 100"),
        ("aten::mm", 50, "mean", "stat='mean': expected 'median' or 'min' or 'max'"),
        (3, 50, "median", "op=3: expected an op name or glob"),
        ("", 50, "median", "op='': expected an op name or glob"),
    ],
)
def test_op_share_below_refuses_bad_arguments_in_one_line(op, pct, stat, message):
    """A percentage outside 0-100, a fraction, a non-number, an unknown statistic, a non-string
    op: OpprofUsageError naming the value, when the check is made (before any capture)."""
    with pytest.raises(OpprofUsageError) as raised:
        assertions.op_share_below(op, pct, stat)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assertions.op_share_below("aten::mm", 0)  # 0 is a percentage, not a fraction
    assertions.op_share_below("aten::mm", 100)


def test_op_count_exact_and_ranges():
    """Calls per step must equal n in every step, or lie within min/max; globs sum their matches."""
    p = three_steps()
    assert assertions.op_count("aten::addmm", 2)(p) is None
    assert (
        assertions.op_count("aten::addmm", 1)(p)
        == "aten::addmm: 2 calls/step, expected 1 (per step: 2, 2, 2; in aten::linear)"
    )
    assert assertions.op_count("aten::*", 3)(p) is None
    assert assertions.op_count("aten::addmm", min=1, max=2)(p) is None
    assert assertions.op_count("aten::addmm", max=1)(p).endswith(
        "expected at most 1 (per step: 2, 2, 2; in aten::linear)"
    )
    assert assertions.op_count("aten::conv2d", 0)(p) is None  # zero expected, none seen


def test_count_mismatch_shows_varying_steps():
    """Steps that differ show as a range and the per-step list."""
    assert count_mismatch("aten::mm", (1, 2, 2), "2") == "aten::mm: 1-2 calls/step, expected 2 (per step: 1, 2, 2)"


def test_a_name_that_matches_nothing_never_passes():
    """op_below and op_count on an unknown name fail and name the closest op."""
    p = three_steps()
    assert assertions.op_below("aten::adddmm", 5)(p) == no_match("aten::adddmm", [o.name for o in p.ops])
    assert "closest: aten::addmm" in assertions.op_count("aten::adddmm", 2)(p)


def test_a_time_limit_on_a_name_torch_does_not_know_says_so_as_a_plain_run_and_op_count_do():
    """A trial's `aten::adddmm` read `not an operator torch knows; did you mean aten::addmm?` in a
    plain run and `no op of that name ran ...; closest: aten::addmm` under --opprof: op_below and
    op_share_below, told which names torch knows, say the first as op_count does; a name torch
    knows that did not run still gets the closest ops that ran."""
    from pytest_opprof.opmessages import unknown_op_name

    p = three_steps()
    unknown, known = (lambda name: False), (lambda name: True)
    for check in (assertions.op_below, assertions.op_share_below):
        told = check("aten::adddmm", 5, is_known=unknown, known_names=lambda: ["aten::addmm", "aten::conv2d"])(p)
        assert told == unknown_op_name("aten::adddmm", ["aten::addmm"])
        assert told == assertions.op_count("aten::adddmm", 2, is_known=unknown, known_names=lambda: [])(p)
        assert check("aten::adddmm", 5, is_known=known)(p) == no_match("aten::adddmm", [o.name for o in p.ops])


def test_an_op_assertion_given_a_ranges_name_in_another_case_names_the_range():
    """A trial's assert_op_below("Optimizer.step#SGD.Step") read `no similar name` beside the
    range Optimizer.step#SGD.step: the range is named, with the assertion that checks it; a
    close op name still wins over a merely similar range."""
    events = [
        e
        for i in range(2)
        for e in (
            step(i + 1, i * 1000, 900),
            annotation("Optimizer.step#SGD.step", i * 1000 + 10, 300),
            op("aten::addmm", i * 1000 + 20, 100),
        )
    ]
    p = analyze(events)
    message = assertions.op_below("Optimizer.step#SGD.Step", 5)(p)
    assert message == (
        "Optimizer.step#SGD.Step: no op of that name ran in the measured code; a range of a close name ran: "
        "Optimizer.step#SGD.step (a record_function block: assert_range_below checks it)"
    )
    assert "a range of a close name ran: Optimizer.step#SGD.step" in assertions.op_count("Optimizer.step#SGD.Step", 1)(
        p
    )
    assert assertions.op_below("aten::addmn", 5)(p).endswith("closest: aten::addmm")
    # an absence asserted so passed forever (a trial's assert_no_op("my_block") beside my_Block)
    assert assertions.no_op("optimizer.step#sgd.step")(p) == (
        "optimizer.step#sgd.step: no op of that name ran, but the range Optimizer.step#SGD.step did (a "
        "record_function block, not an op), so asserting it is absent proves nothing; assert_range_below checks ranges"
    )
    assert "so counting zero calls of it proves nothing" in assertions.op_count("optimizer.STEP#sgd.step", 0)(p)
    assert assertions.op_count("optimizer.step#*", 0)(p) is None  # a glob matches no op (test_ranges: a review's)
    assert assertions.no_op("aten::relu")(p) is None


def test_no_op_and_unknown_names():
    """no_op fails on a match, passes on none, and rejects an exact name torch does not know."""
    p = three_steps()
    assert (
        assertions.no_op("aten::addmm")(p)
        == "aten::addmm: expected no calls, found aten::addmm (2/step, in aten::linear)"
    )
    assert assertions.no_op("aten::copy_", lambda name: True)(p) is None
    typo = assertions.no_op("aten::copyy_", lambda name: False)(p)
    assert typo.startswith("aten::copyy_: not an operator torch knows")


def test_an_unknown_names_hint_looks_among_the_names_torch_knows_too():
    """A trial's `assert_no_op("aten::gelux")` beside a relu was asked `did you mean aten::relu?`:
    the hint looked only among the ops that ran. The names torch knows come first where closer."""
    p = three_steps()  # ran aten::copy_, aten::mm ...
    known = lambda: ["aten::gelu", "aten::elu"]  # noqa: E731
    unknown = lambda name: False  # noqa: E731
    assert assertions.no_op("aten::gelux", unknown, known)(p).endswith("did you mean aten::gelu, aten::elu?")
    counted = assertions.op_count("aten::gelux", 0, is_known=unknown, known_names=known)(p)
    assert counted.endswith("did you mean aten::gelu, aten::elu?")


def test_a_count_that_admits_zero_on_an_unknown_name_is_an_error():
    """assert_op_count(typo, 0) (or min=0) would pass forever: like no_op, an exact name torch
    does not know fails, and so does a glob matching no op torch knows; a known name or a count
    that needs calls behave as before."""
    p = three_steps()
    unknown = lambda name: False  # noqa: E731
    for check in (
        assertions.op_count("aten::nonexistent", 0, is_known=unknown),
        assertions.op_count("aten::nonexistent", min=0, max=3, is_known=unknown),
        assertions.op_count("aten::nonexistent", max=3, is_known=unknown),
    ):
        assert check(p).startswith("aten::nonexistent: not an operator torch knows, so counting zero calls of it")
    assert assertions.op_count("aten::copy_", 0, is_known=lambda name: True)(p) is None
    assert assertions.op_count("aten::nonexist*", 0, is_known=unknown)(p).startswith(
        "aten::nonexist*: matches no operator torch knows, so counting zero calls of it proves nothing"
    )
    assert assertions.op_count("aten::nonexist*", 0, is_known=lambda name: True)(p) is None
    # a `[` without a `]` is a literal character (as fnmatch reads it), not a glob: checked as a name
    assert assertions.op_count("aten::[", 0, is_known=unknown)(p).startswith("aten::[: not an operator torch knows")
    assert not assertions.is_glob("aten::[") and assertions.is_glob("aten::[ab]mm")
    assert assertions.op_count("aten::nonexistent", 2, is_known=unknown)(p) == (
        "aten::nonexistent: not an operator torch knows"  # as a plain run says it
    )
    assert "no op of that name ran" in assertions.op_count("aten::nonexistent", 2, is_known=lambda name: True)(p)


@pytest.mark.parametrize("name", ["ATEN::ADDMM", "Aten::addmm", "aten ::addmm", " aten::addmm", "addmm", "aten::*MM"])
def test_an_absence_asserted_with_a_slip_beside_the_op_it_meant_fails(name):
    """A trial's assert_no_op("ATEN::ADDMM"), ("addmm"), ("aten::*MM")... passed beside aten::addmm:
    names match exactly, so a name that misses an op that ran only by letter case, spaces around
    `::` or the `aten::` namespace fails, naming it (known or not to torch: the slip is the point)."""
    p = three_steps()
    known = lambda name: True  # noqa: E731
    message = assertions.no_op(name, known)(p)
    hint = "write the glob in the names' own letters" if "*" in name else "did you mean aten::addmm?"
    assert message.endswith(
        "no op of exactly that name ran, but aten::addmm did (names match exactly: letter case, spaces and "
        f"the `aten::` namespace count), so asserting it is absent proves nothing; {hint}"
    ), message
    assert message.startswith(repr(name) if name.startswith(" ") else name)
    counted = assertions.op_count(name, 0, is_known=known)(p)
    assert "but aten::addmm did" in counted and "so counting zero calls of it proves nothing" in counted
    # what is not a slip still passes: another op's name, a range's glob, a name nothing resembles
    for other in ("aten::mm", "aten::add", "mm", "## forward*"):
        assert assertions.no_op(other, known)(p) is None


@pytest.mark.parametrize("name", ["Aten::addmm", "aten ::addmm", "addmm", "aten::*MM"])
def test_a_count_or_a_time_asked_with_a_slip_names_the_op_it_missed(name):
    """An audit's assert_op_count("aten::*MM", 1) beside aten::addmm was told `no similar name; the
    costliest ops were ...`: a count or a time limit on a name that misses an op only by letter
    case, spaces or the namespace says so, as an absence does."""
    p = three_steps()
    hint = "write the glob in the names' own letters" if "*" in name else "did you mean aten::addmm?"
    expected = (
        f"{name}: no op of exactly that name ran, but aten::addmm did (names match exactly: letter case, "
        f"spaces and the `aten::` namespace count); {hint}"
    )
    assert assertions.op_count(name, 1, is_known=lambda n: True)(p) == expected
    assert assertions.op_below(name, 1.0)(p) == expected
    assert "the costliest ops were" in assertions.op_below("aten::conv*", 1.0)(p)  # no slip: as before


@pytest.mark.parametrize("name", ["memcpy dtoh*", "Memcpy DtoH (device -> pageable)"])
def test_an_absent_memory_op_asserted_with_a_slip_fails(name):
    """A review's assert_no_op("memcpy dtoh*") passed beside `Memcpy DtoH (Device -> Pageable)`:
    memory ops are matched as ops are, letter case aside."""
    p = analyze(
        [
            step(1, 0, 1000),
            op("aten::copy_", 10, 100, ext=1),
            launch(20, 1),
            memcpy("Memcpy DtoH (Device -> Pageable)", 30, 20, 64, corr=1),
        ]
    )
    message = assertions.no_op(name, lambda n: True)(p)
    assert "no op of exactly that name ran, but Memcpy DtoH (Device -> Pageable) did" in message
    assert assertions.no_op("Memcpy HtoD*", lambda n: True)(p) is None
    # a count or a time limit never matches a memory op: it is offered none (a review's `did you
    # mean` the very name typed)
    for check in (assertions.op_count(name, 1, is_known=lambda n: True), assertions.op_below(name, 1.0)):
        assert "did you mean" not in check(p) and "exactly that name" not in check(p)


def test_a_stream_waiting_on_another_is_no_host_sync():
    """cudaStreamWaitEvent / hipStreamWaitEvent order two streams and never block the host: side-
    stream prefetch passes assert_no_sync (a trial found it counted as a sync)."""
    events = [step(1, 0, 1000), op("aten::add", 10, 20)]
    events += [launch(40, corr=0, name="cudaStreamWaitEvent"), launch(60, corr=0, name="hipStreamWaitEvent")]
    assert assertions.no_sync()(analyze(events)) is None
    synced = analyze([*events, launch(80, corr=0, name="cudaEventSynchronize")])
    assert assertions.no_sync()(synced).startswith("host-device syncs: cudaEventSynchronize")


def test_no_sync_finds_item_runtime_syncs_and_dtoh_copies():
    """Host-device syncs: aten::item, *Synchronize runtime calls and DtoH copies are all named."""
    events = [
        step(1, 0, 1000),
        op("aten::item", 10, 20),
        op("aten::_local_scalar_dense", 12, 10),
        launch(14, corr=1, name="cudaMemcpyAsync"),
        memcpy("Memcpy DtoH (Device -> Pageable)", 15, 2, 4, corr=1),
        launch(40, corr=0, name="cudaStreamSynchronize"),
    ]
    msg = assertions.no_sync()(analyze(events))
    for name in [
        "aten::item",
        "aten::_local_scalar_dense",
        "cudaStreamSynchronize",
        "Memcpy DtoH (Device -> Pageable)",
    ]:
        assert name in msg
    assert assertions.no_sync()(three_steps()) is None


def test_a_cpu_scalar_read_after_the_threads_last_launch_is_no_sync_on_a_device():
    """On a device capture, a `loss.item()` that copied from the device, then an Adam step count's
    `.item()` after every runtime call of its thread: one sync a step, no IndexError looking past
    the thread's last call."""
    events = [
        step(1, 0, 1000),
        op("aten::item", 10, 20),
        launch(14, corr=4, name="cudaMemcpyAsync"),
        memcpy("Memcpy DtoH (Device -> Pageable)", 15, 2, 4, 4),
        op("aten::item", 500, 20),
    ]
    message = assertions.no_sync()(analyze(events))
    assert message.startswith("host-device syncs: aten::item (1/step, called from Python)")


def test_on_a_device_a_scalar_read_that_copied_nothing_from_it_is_no_sync():
    """Adam's step counts are CPU tensors (unless capturable): on a GPU their `.item()` launches
    nothing and waits for nothing. On a device capture only a scalar read that copied from the
    device counts; on a CPU-only capture every one does, with a line saying what that means,
    and each names where it ran (a training trial's message named no place)."""
    step_body = [
        step(1, 0, 1000),
        annotation("Optimizer.step#Adam.step", 5, 100),
        op("aten::item", 10, 20),
        op("aten::_local_scalar_dense", 12, 10),
    ]
    cpu_only = assertions.no_sync()(analyze(step_body))
    assert cpu_only.startswith(
        "host-device syncs: aten::item (1/step, called from Python inside Optimizer.step#Adam.step), "
        "aten::_local_scalar_dense (1/step, in aten::item inside Optimizer.step#Adam.step); a CPU-only capture: "
        "these reads wait for no device here, and sync where their tensor is on one"
    )
    on_gpu = [*step_body, op("aten::mm", 200, 20), launch(205, corr=3), kernel("gemm", 210, 50, corr=3)]
    assert assertions.no_sync()(analyze(on_gpu)) is None
    copied = [
        *on_gpu,
        launch(14, corr=4, name="cudaMemcpyAsync"),
        memcpy("Memcpy DtoH (Device -> Pageable)", 30, 2, 4, 4),
    ]
    message = assertions.no_sync()(analyze(copied))
    assert message.startswith(
        "host-device syncs: aten::item (1/step, called from Python inside Optimizer.step#Adam.step)"
    )
    assert "CPU-only" not in message
    # by call: a loss.item() that copied beside two CPU reads in Adam's range counts one, named
    # where it ran (a review found all three counted, placed in Adam's range)
    mixed = [
        step(1, 0, 1000),
        annotation("Optimizer.step#Adam.step", 5, 100),
        op("aten::item", 10, 20),
        op("aten::item", 40, 20),
        op("aten::mm", 200, 20),
        launch(205, corr=3),
        kernel("gemm", 210, 50, corr=3),
        op("aten::item", 300, 20),
        launch(305, corr=4, name="cudaMemcpyAsync"),
        memcpy("Memcpy DtoH (Device -> Pageable)", 310, 2, 4, 4),
    ]
    assert assertions.no_sync()(analyze(mixed)).startswith(
        "host-device syncs: aten::item (1/step, called from Python),"
    )


def test_total_below_uses_step_wall_time():
    """total_below compares the step's wall time."""
    p = three_steps()
    assert assertions.total_below(1.0)(p) is None
    assert (
        assertions.total_below(0.5)(p) == "total: 1.00 ms/step > limit 0.50 ms (median of 3 steps; min 1.00, max 1.00)"
    )


def test_a_limit_equal_to_the_measured_time_passes():
    """`ms=` the measured time in ms passes: the limit was scaled to ns (0.000249 * 1e6 < 249), and
    a trial's `ms=op.time_per_step.median / 1e6` failed as `0.065 ms/step > limit 0.065 ms`."""
    events = [step(1, 0, 10), op("aten::mm", 1, 0.249), step(2, 10, 10), op("aten::mm", 11, 0.249)]
    profile = analyze(events)
    median_ns = profile.op("aten::mm").time_per_step.median
    assert median_ns == 249 and median_ns / 1e6 * 1e6 < median_ns
    for check in (assertions.op_below("aten::mm", median_ns / 1e6), assertions.op_below("aten::mm", 0.000249)):
        assert check(profile) is None
    assert assertions.op_below("aten::mm", 0.000248)(profile).startswith(
        "aten::mm: 0.000249 ms/step > limit 0.000248 ms"  # as many decimals as tell them apart
    )
    assert assertions.op_below("aten::mm", 0.0002)(profile).startswith("aten::mm: 0.00025 ms/step > limit 0.00020 ms")
    wall_ns = profile.step_spans[0].wall_ns
    assert assertions.total_below(wall_ns / 1e6)(profile) is None


@pytest.mark.parametrize(
    "check",
    [
        lambda name: assertions.op_below("aten::" + name, 1),
        lambda name: assertions.op_count("aten::" + name, 1),
        lambda name: assertions.op_below("aten::m*" + name, 1),
        lambda name: assertions.kernel_below(name, 1),
        lambda name: assertions.kernel_count(name, 1),
        lambda name: assertions.range_below(name, 1),
    ],
)
def test_a_long_name_asked_for_is_cut_in_its_message(check):
    """A trial's 4,000-character op name made a 4,084-character failure line: the name asked for
    is cut to 100 characters (a real name the profile holds is not)."""
    message = check("x" * 4000)(three_steps())
    assert len(message) < 400 and "x" * 90 + "…: no " in message and message.count("x") < 100


@pytest.mark.parametrize("ms", [10**400, -(10**400)])
def test_an_integer_past_floats_range_is_a_bad_limit(ms):
    """A trial's `ms=10**400` raised OverflowError from inside the plugin."""
    with pytest.raises(OpprofUsageError, match=r"^ms=-?100000.*: expected a finite number of milliseconds >= 0$"):
        assertions.op_below("aten::mm", ms)


def test_a_limit_of_minus_zero_reads_as_zero():
    """`ms=-0.0` is 0, and its limit prints as `0.00 ms`, not `-0.00 ms` (a trial's find)."""
    message = assertions.total_below(-0.0)(three_steps())
    assert "limit 0.00 ms" in message and "-0.00" not in message


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: assertions.op_below("aten::mm", -1), "ms=-1: expected a finite number of milliseconds >= 0"),
        (lambda: assertions.op_below("aten::mm", "2"), "ms='2': expected a finite number of milliseconds >= 0"),
        (lambda: assertions.op_below("aten::mm", float("nan")), "ms=nan: expected a finite number"),
        (
            lambda: assertions.op_below("aten::mm", float("inf")),
            "ms=inf: expected a finite number of milliseconds >= 0",
        ),
        (lambda: assertions.op_below("aten::mm", 1, per="op"), "per='op': expected 'step' or 'call'"),
        (lambda: assertions.op_below("aten::mm", 1, stat="mean"), "stat='mean': expected 'median' or 'min' or 'max'"),
        (lambda: assertions.op_below("", 1), "op='': expected an op name or glob"),
        (lambda: assertions.op_count("aten::mm"), "n=None: expected a call count, or min= and/or max="),
        (lambda: assertions.op_count("aten::mm", 2, max=3), "n=2: expected either n or min=/max=, not both"),
        (lambda: assertions.op_count("aten::mm", -1), "n=-1: expected a whole number >= 0"),
        (lambda: assertions.total_below(ms=None), "ms=None: expected a finite number of milliseconds >= 0"),
    ],
)
def test_bad_arguments_raise_one_line(build, message):
    """Bad assertion arguments raise OpprofUsageError at once, naming the value."""
    with pytest.raises(OpprofUsageError) as info:
        build()
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("wanted", "seen", "expected"),
    [
        ("aten::matmull", ["aten::t", "aten::matmul", "aten::mm"], ["aten::matmul"]),
        ("aten::adddmm", ["aten::addmm", "aten::empty"], ["aten::addmm"]),
        ("aten::conv2d", ["aten::linear", "aten::relu"], []),
        ("aten:mm", ["aten::mm", "aten::addmm", "aten::t"], ["aten::mm"]),  # a slip of the `::`
        ("aten.mm", ["aten::mm", "aten::t"], ["aten::mm"]),
        ("torch::autograd::accumulategrad", ["torch::autograd::AccumulateGrad"], ["torch::autograd::AccumulateGrad"]),
        # in another namespace only a close likeness: a trial's prim::Nope was offered aten::ne
        ("prim::Nope", ["aten::ne", "aten::mm"], []),
        ("prims::add", ["aten::add", "aten::mm"], ["aten::add"]),
        ("aten::nope", ["aten::ne"], ["aten::ne"]),
        # the initials of an op's words, first: an LLM trial's aten::sdpa was offered nothing
        (
            "aten::sdpa",
            ["aten::linear", "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::scaled_dot_product_attention"],
            ["aten::scaled_dot_product_attention"],
        ),
        # a public op before a private one, without its in-place twin (a review's aten::bn: bitwise_not_ too)
        ("aten::SDPA", ["aten::_s_d_p_a", "aten::s_d_p_a_", "aten::s_d_p_a"], ["aten::s_d_p_a", "aten::_s_d_p_a"]),
        ("aten::ne", ["aten::new_empty", "aten::not_equal"], []),  # 2 letters: ne is an op of its own
        ("prim::sdpa", ["aten::scaled_dot_product_attention"], []),  # another namespace: no initials
        ("aten::s", ["aten::scaled_dot_product_attention", "aten::sin"], []),  # one letter abbreviates nothing
    ],
)
def test_closest_names_compare_without_the_namespace(wanted, seen, expected):
    """Suggestions compare op names without 'aten::', so the shared prefix does not mislead."""
    assert closest_names(wanted, seen) == expected


def test_count_and_no_op_failures_name_the_caller_and_the_inputs():
    """A cast torch does inside div_ on a 0-dim scalar is told apart: the message names the
    op's callers (innermost first) and its input signature."""
    events = [
        step(1, 0, 1000),
        op("aten::mean", 10, 300, shapes=((4, 4), ()), dtypes=("float", "")),
        op("aten::div_", 100, 200, shapes=((), ()), dtypes=("float", "Scalar")),
        op("aten::to", 120, 100, shapes=((), (), (), (), ()), dtypes=("long int", "Scalar", "Scalar", "Scalar", "")),
        op(
            "aten::_to_copy",
            130,
            80,
            shapes=((), (), (), (), (), (), ()),
            dtypes=("long int", "Scalar", "", "", "", "Scalar", ""),
        ),
        op("aten::relu", 500, 10),
    ]
    p = analyze(events)
    assert assertions.no_op("aten::_to_copy")(p) == (
        "aten::_to_copy: expected no calls, found aten::_to_copy (1/step, in aten::to <- aten::div_; inputs long int[])"
    )
    assert assertions.op_count("aten::relu", 2)(p) == (
        "aten::relu: 1 calls/step, expected 2 (per step: 1; called from Python; no tensor inputs)"
    )


def test_an_op_in_some_steps_is_found_with_its_calls_there_and_why_it_has_no_inputs():
    """An op in 2 of 5 steps has a median of 0 calls: assert_no_op said `found aten::_to_copy
    (0/step)` (a diagnosis trial). It says its calls where it ran and, where the step that
    recorded the inputs did not run it, why it names none; the tables say its time there."""
    from pytest_opprof.tables import profile_tables

    def body(i, base):
        found = [op("aten::relu", base + 10, 20)]
        if i in (1, 3):
            found += [op("aten::_to_copy", base + 100 + 100 * k, 50) for k in range(2)]
        return found

    signature = analyze([step(1, 0, 1000), op("aten::relu", 10, 20, shapes=((4, 4),), dtypes=("float",))])
    p = analyze(stepped(5, 1000, body)).with_work({o.name: o.work for o in signature.ops if o.work}, 1, False)
    assert assertions.no_op("aten::_to_copy")(p) == (
        "aten::_to_copy: expected no calls, found aten::_to_copy (2/step in 2 of 5 steps, called from Python; "
        "inputs not recorded: it did not run in the step that recorded them)"
    )
    assert assertions.no_op("aten::relu")(p) == (
        "aten::relu: expected no calls, found aten::relu (1/step, called from Python; inputs float[4,4])"
    )
    text = profile_tables(p)
    assert (
        "ran in some steps only (their medians per step are 0): aten::_to_copy in 2 of 5 steps (0.100 ms cpu "
        "there)" in text.splitlines()
    )
    assert "some steps" not in profile_tables(analyze(stepped(5, 1000, lambda i, base: body(1, base))))


def test_context_names_the_callers_of_the_signature_it_shows():
    """An op called in two places: the message pairs the most frequent input signature with the
    callers of that signature's call; a glob labels each matching op."""
    events = [
        step(1, 0, 1000),
        op("aten::div_", 10, 100, shapes=((), ()), dtypes=("float", "Scalar")),
        op("aten::_to_copy", 20, 50, shapes=((),), dtypes=("long int",)),
        op("aten::to", 200, 100, shapes=((4, 4),), dtypes=("float",)),
        op("aten::_to_copy", 210, 50, shapes=((4, 4),), dtypes=("float",)),
        op("aten::to", 400, 100, shapes=((4, 4),), dtypes=("float",)),
        op("aten::_to_copy", 410, 50, shapes=((4, 4),), dtypes=("float",)),
    ]
    p = analyze(events)
    assert assertions.context(p, "aten::_to_copy") == "in aten::to; inputs float[4,4] (+1 other signature)"
    message = assertions.op_count("aten::*", 1)(p)
    assert "aten::_to_copy in aten::to; inputs float[4,4]" in message and "aten::div_ called from Python" in message


def test_a_count_range_that_no_count_fits_is_refused():
    """min=3, max=1 can never pass: an argument error at once, not a failure later."""
    with pytest.raises(OpprofUsageError, match=r"min=3: expected at most max=1"):
        assertions.op_count("aten::mm", min=3, max=1)


def test_a_name_with_an_invisible_character_is_shown_quoted():
    """'aten::addmm' + a zero-width space matches nothing; the message quotes it with its escape,
    so it does not read like the op it names as closest."""
    p = three_steps()
    message = assertions.op_below("aten::addmm\u200b", 5)(p)
    assert message.startswith("'aten::addmm\\u200b': no op of that name ran") and "closest: aten::addmm" in message
    typo = assertions.no_op("aten::copy_\u200b", lambda name: False)(p)
    assert typo.startswith("'aten::copy_\\u200b': not an operator torch knows")


@pytest.mark.parametrize("name", ["aten::mm.default", "aten::add.Tensor", "prim::add.int", "aten::add.*"])
def test_an_overload_qualified_name_is_a_usage_error(name):
    """torch's schema names (`aten::mm.default`) never appear in a profile, which names ops
    without their overload: assert_no_op / count 0 on one would pass forever. Refused, naming
    the name to use."""
    bare = name.split(".")[0]
    for make in (
        lambda: assertions.no_op(name),
        lambda: assertions.op_count(name, 0),
        lambda: assertions.op_below(name, 1),
    ):
        with pytest.raises(OpprofUsageError) as info:
            make()
        assert (
            str(info.value)
            == f"op={name!r}: expected a name without its overload, as the profiler records it: {bare!r}"
        )
    assertions.no_op("mylib.layer1::block")  # other namespaces and record_function labels keep their dots


@pytest.mark.parametrize(
    "name", ["torch.ops.aten._to_copy.default", "torch.ops.aten._to_copy", "ops.aten._to_copy", "at::_to_copy"]
)
def test_an_op_spelled_as_python_or_cpp_name_it_is_a_usage_error(name):
    """FX and Inductor graph dumps print `torch.ops.aten._to_copy.default`; C++ writes
    `at::_to_copy`. No profile holds either: a trial's assert_no_op and count of 0 of them passed
    beside two calls a step. Refused, naming the profiler's name."""
    for make in (
        lambda: assertions.no_op(name),
        lambda: assertions.op_count(name, max=0),
        lambda: assertions.op_below(name, 1),
    ):
        with pytest.raises(OpprofUsageError) as info:
            make()
        assert str(info.value) == f"op={name!r}: expected the op's name as the profiler records it: 'aten::_to_copy'"


def test_a_kernel_count_that_fails_where_the_tracer_dropped_records_says_they_may_be_why():
    """A capture that lost 4 of its 6 kernel records (CUPTI at a later profiler session's start):
    assert_kernel_count(..., 6) fails, as the launches recorded are 2, and says the dropped records
    may be why (a review's failed naming only the counts)."""
    events = [step(1, 0, 1000)]
    for j in range(6):
        t = 10 + 100 * j
        events += [op("aten::addmm", t, 80), launch(t + 10, corr=j + 1)]
        if j >= 4:
            events.append(kernel("sm90_gemm", t + 30, 40, corr=j + 1))
    message = assertions.kernel_count("sm90_gemm", 6)(analyze(events))
    assert message is not None and message.endswith(
        "(the device tracer dropped 4 kernel records in this capture, which may be why: see its kernel_records warning)"
    )
    whole = [e for e in events if e.name != "cudaLaunchKernel" or e.correlation > 4]
    assert "dropped" not in (assertions.kernel_count("sm90_gemm", 6)(analyze(whole)) or "")
    too_many = assertions.kernel_count("sm90_gemm", 1)(analyze(events))  # 2 where 1 is asked: no loss makes more
    assert too_many is not None and "dropped" not in too_many


def test_an_op_name_with_letters_that_are_not_ascii_says_which():
    """An audit's `assert_no_op("aten::\u0430ddmm")` (a Cyrillic a) was told `did you mean
    aten::addmm?`: two names that look the same. The name says which letter is not ASCII; a
    range's name, which may be any text, is shown as it is."""
    from pytest_opprof.opmessages import asked, unknown_op

    assert unknown_op("aten::\u0430ddmm", ["aten::addmm"]).startswith(
        "aten::\u0430ddmm (it holds '\u0430' U+0430, not ASCII as op names are): not an operator torch knows"
    )
    assert asked("\u0424\u0430\u0437\u0430") == "\u0424\u0430\u0437\u0430"


# -- the edges a mutation trial of assertions.py found unpinned -----------------------------------


def test_an_op_in_exactly_half_the_steps_is_judged_by_its_median():
    """In 2 of 4 steps its median is half its time, not 0 (the `hidden by median` rule is for an
    op in fewer than half): a limit between half and all of it passes."""
    events = []
    for i in range(4):
        events.append(step(i + 1, i * 1000, 1000))
        if i % 2 == 0:
            events.append(op("aten::mul", i * 1000 + 10, 100))
        events.append(op("aten::add", i * 1000 + 200, 10))
    assert assertions.op_below("aten::mul", 0.08)(analyze(events)) is None


@pytest.mark.parametrize("n", [True, 1.5])
def test_a_count_must_be_a_whole_number(n):
    """A bool or a float count is refused: `n=True` would read as 1."""
    with pytest.raises(OpprofUsageError, match="a whole number >= 0"):
        assertions.op_count("aten::mm", n)


def device_profile(copy_at_us: float = 70):
    """Two steps: a matmul (a 40 us kernel launched in 2 us: not launch-bound) and a 30 us copy
    under the kernel for 80 - copy_at_us us."""
    events = []
    for n, t0 in ((1, 0), (2, 100)):
        c = n * 10
        events += [
            step(n, t0, 100),
            op("aten::mm", t0 + 30, 10),
            launch(t0 + 31, corr=c + 1, dur_us=2),
            op("aten::copy_", t0 + 42, 8),
            launch(t0 + 43, corr=c + 2, name="cudaMemcpyAsync", dur_us=2),
            kernel("gemm", t0 + 40, 40, corr=c + 1),
            memcpy("Memcpy HtoD (Pageable -> Device)", t0 + copy_at_us, 30, 4096, corr=c + 2),
        ]
    return analyze(events)


def test_no_launch_bound_passes_where_no_op_is_launch_bound():
    """A device capture without a launch-bound op passes (only a CPU capture had been tried, which
    stops earlier as `no device work`)."""
    assert assertions.no_launch_bound()(device_profile()) is None


def test_overlap_defaults_to_half():
    """20 of the copy's 30 us under compute (67%) passes the default min_pct=50; 10 of 30 fails."""
    assert assertions.overlap()(device_profile(copy_at_us=60)) is None
    assert assertions.overlap()(device_profile(copy_at_us=70)) is not None


def test_zero_percent_is_no_fraction():
    """0 is a percentage, not an ambiguous fraction (0.5 is)."""
    assertions.device_busy_above(0)
    assertions.overlap(min_pct=0)
    with pytest.raises(OpprofUsageError, match="not a fraction"):
        assertions.overlap(min_pct=0.5)


def test_a_kernel_glob_is_taken_as_written():
    """A glob asked absent is not checked for typos (`write a glob` is the typo check's way out)."""
    profile = analyze([step(1, 0, 100), op("aten::mm", 1, 10), launch(2, corr=1), kernel("gemm_[ab]", 20, 5, corr=1)])
    assert assertions.kernel_count("gemmm_[ab]", 0)(profile) is None


CUDA_FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)


def cuda_fill_profile():
    """The fill kernel and one whose name its pointers' `*`, read as wildcards, would span."""
    other = CUDA_FILL.replace("Array<char*, 1> >", "Array<char**, 1> >", 1)
    return analyze(
        [
            step(1, 0, 100),
            op("aten::fill_", 1, 10),
            launch(2, corr=1),
            kernel(CUDA_FILL, 20, 5, corr=1),
            op("aten::zero_", 30, 10),
            launch(31, corr=2),
            kernel(other, 50, 5, corr=2),
        ]
    )


def test_an_exact_cuda_kernel_name_is_no_glob():
    """A CUDA kernel's C++ name holds pointers (`char*`; 103 of the 213 kernel names in the shared
    A100 and MI250 traces): taken for a glob, a typo of one asserted absent passed forever, and the
    name matched other kernels its `*` spanned. The name of a kernel that ran matches it alone; a
    doubled letter fails naming the kernel that ran."""
    profile = cuda_fill_profile()
    typo = CUDA_FILL.replace("vectorized", "vectorizzed")
    failure = assertions.kernel_count(typo, 0)(profile)
    assert failure is not None and f"no kernel of that name ran, but {CUDA_FILL} did: a typo of it" in failure
    assert [k.name for k in profile.match_kernels(CUDA_FILL)] == [CUDA_FILL]
    assert assertions.kernel_count(CUDA_FILL, 1)(profile) is None
    assert len(profile.match_kernels("*FillFunctor*")) == 2
    assert assertions.kernel_count(typo + "*", 0)(profile) is None  # a glob, taken as written
    # the name of a kernel that did not run is a glob: its `*` span what they span, the failure names it
    absent = CUDA_FILL.replace("Array<char*, 1>)", "Array<char*, 1>, int*)")
    assert profile.match_kernels(absent) == [] and assertions.kernel_count(absent, 0)(profile) is None


def test_a_wildcard_where_a_pointer_could_stand_is_a_wildcard():
    """A review: `CUDAFunctor_*>` in place of a template argument is a user's glob, though its `*`
    sits where a pointer's could: it matches the kernels it spans (read as an exact name it
    matched none, and `n=0` passed forever)."""
    add, mul = "void k<CUDAFunctor_add<float> >(int)", "void k<CUDAFunctor_mul<float> >(int)"
    profile = analyze(
        [step(1, 0, 100), op("aten::add", 1, 10), launch(2, corr=1), kernel(add, 20, 5, corr=1)]
        + [op("aten::mul", 30, 10), launch(31, corr=2), kernel(mul, 50, 5, corr=2)]
    )
    spanning = "void k<CUDAFunctor_*> >(int)"
    assert sorted(k.name for k in profile.match_kernels(spanning)) == [add, mul]
    assert assertions.kernel_count(spanning, 0)(profile).startswith("void k<CUDAFunctor_*> >(int): 2 launches/step")


def test_a_limit_message_names_ten_steps_over_it_and_counts_the_rest():
    """Of 13 steps, 12 over the limit: the first ten are named and the others counted, in the ms
    and the share messages alike (a line stays readable for a run of 100 steps)."""
    from pytest_opprof.opmessages import over_limit, share_over_limit

    samples = (100_000.0,) + (300_000.0,) * 12  # ns: 0.1 ms, then 0.3 ms
    assert over_limit("aten::mm", 300_000, 0.2, "step", "median", samples).endswith(
        "; over it in steps 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more)"
    )
    shares = [10.0] + [30.0] * 12
    assert share_over_limit("aten::mm", 30.0, 20, "median", shares).endswith(
        "; over it in steps 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more)"
    )
    eleven = [10.0] + [30.0] * 11  # one past ten: counted, not named
    assert share_over_limit("aten::mm", 30.0, 20, "median", eleven).endswith(
        "; over it in steps 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 1 more)"
    )
    ten = [10.0] + [30.0] * 10
    assert share_over_limit("aten::mm", 30.0, 20, "median", ten).endswith(
        "; over it in steps 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)"
    )
