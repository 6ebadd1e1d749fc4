"""Unit tests of the per-test decision: compare, confirm, write or keep. Pure: hand-built
documents, no torch, no pytest internals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from baseline_docs import threaded
from test_baseline import doc, loaded_pair, mlp_profile, profile

from pytest_opprof.decide import BaselineResult, Measurement, Slowed, decide
from pytest_opprof.verdicts import Machine, Rule


def measured(p, wait=None, gpu=None):
    return Measurement(doc(p), Machine(wait, gpu))


def unranged(written):
    """A written document without its ops' recorded ranges (what the measurement held)."""
    return written.replace(ops={n: dataclasses.replace(e, recorded_range=None) for n, e in written.ops.items()})


def test_no_baseline_is_missing_or_new_never_from_a_throttled_gpu():
    """No file: missing when comparing, written when updating, unless the GPU was throttled."""
    current = measured(profile())
    assert decide(current, None, Rule(), None).status == "missing"
    new = decide(current, None, Rule(), "changed")
    assert (new.status, new.write) == ("new", current.doc)
    throttled = decide(measured(profile(), gpu="hw_slowdown"), None, Rule(), "changed")
    assert (throttled.status, throttled.write) == ("unreliable", None)


def test_unchanged_code_keeps_its_file_even_when_slowed_by_contention():
    """Updating: identical numbers, or a slowdown the machine explains, write nothing."""
    base = doc(profile())
    assert decide(measured(profile()), base, Rule(), "changed").write is None
    slowed = decide(measured(profile(addmm_us=(3500,) * 8), wait=0.5), base, Rule(), "changed")
    assert (slowed.status, slowed.write) == ("kept", None)
    assert slowed.comparison.inconclusive


def test_structure_and_work_changes_are_written():
    """Updating: a structure or work change rewrites the baseline with the new document."""
    for current in (measured(profile(extra_ops=("aten::clone",))), measured(mlp_profile(2048))):
        base = doc(profile()) if "aten::clone" in current.doc.ops else doc(mlp_profile())
        outcome = decide(current, base, Rule(), "changed")
        assert (outcome.status, outcome.write) == ("changed", current.doc)


def test_a_faster_time_alone_is_written_only_when_confirmed():
    """Updating: a conclusive time change is measured again; a faster time is written when
    every confirmation agrees, kept when one does not (interference)."""
    base, fast = doc(profile(addmm_us=(1400,) * 8)), measured(profile())
    taken = []

    def again():
        taken.append(1)
        return measured(profile())

    confirmed = decide(fast, base, Rule(), "changed", again)
    assert (confirmed.status, confirmed.remeasured, unranged(confirmed.write)) == ("changed", "confirmed", fast.doc)
    assert (confirmed.measurements, confirmed.recorded_from, len(taken)) == (
        4,
        4,
        3,
    )  # the confirmations serve the ranges
    denied = decide(fast, base, Rule(), "changed", lambda: measured(profile(addmm_us=(1400,) * 8)))
    assert (denied.status, denied.remeasured, denied.write, denied.measurements) == ("kept", "not confirmed", None, 3)


def test_a_slower_time_alone_is_never_written_by_a_bare_recording_run():
    """Updating: a slowdown confirmed by every measurement is kept (it may be the machine's: a
    trial's bare re-recording of unchanged code inflated 5 of 16 runs' files); =all writes it,
    and a structure change beside it writes the file as before."""
    base, slow = doc(profile()), measured(profile(addmm_us=(1400,) * 8))
    kept = decide(slow, base, Rule(), "changed", lambda: slow)
    assert (kept.status, kept.remeasured, kept.write) == ("kept", "confirmed", None)
    assert unranged(decide(slow, base, Rule(), "all", lambda: slow).write) == slow.doc
    grown = measured(profile(addmm_us=(1400,) * 8, extra_ops=("aten::clone",)))
    assert unranged(decide(grown, base, Rule(), "changed", lambda: grown).write) == grown.doc


def test_confirmations_stop_at_the_first_that_clears_the_change():
    """A slow spell of the machine can outlast a measurement: up to three confirmations, the
    pooled samples judged after each; the first that no longer shows the change ends it."""
    base, slow = doc(profile()), measured(profile(addmm_us=(1400,) * 8))
    spells = [slow, slow, measured(profile())]  # the third confirmation after the spell passed
    outcome = decide(slow, base, Rule(), None, lambda: spells.pop(0))
    assert (outcome.remeasured, outcome.measurements, spells) == ("not confirmed", 4, [])
    assert outcome.comparison.failing(Rule()) == []
    taken = []

    def always_slow():
        taken.append(1)
        return slow

    outcome = decide(slow, base, Rule(), None, always_slow)
    assert (outcome.remeasured, outcome.measurements, len(taken)) == ("confirmed", 4, 3)
    assert outcome.comparison.failing(Rule())


def test_a_regression_is_measured_again_and_judged_on_both():
    """Comparing: a failing time verdict triggers one more measurement; the pooled samples decide."""
    base, slow = doc(profile()), measured(profile(addmm_us=(1400,) * 8))
    calls = []

    def again():
        calls.append(1)
        return measured(profile())

    outcome = decide(slow, base, Rule(), None, again)
    assert calls == [1] and outcome.remeasured == "not confirmed" and outcome.comparison.failing(Rule()) == []
    failing = decide(slow, base, Rule(), None, lambda: slow)
    assert failing.remeasured == "confirmed" and failing.comparison.failing(Rule())


def test_the_calmer_measurement_judges_the_pooled_samples():
    """A contended confirmation does not excuse a calm first measurement's slowdown."""
    base, slow = doc(profile()), measured(profile(addmm_us=(3500,) * 8), wait=0.0)
    outcome = decide(slow, base, Rule(), None, lambda: measured(profile(addmm_us=(3500,) * 8), wait=0.9))
    assert outcome.remeasured == "confirmed" and outcome.comparison.failing(Rule())


def test_the_calmer_measurement_brings_its_own_wait_per_step():
    """Pooled samples are judged by the calmer measurement's wait share and its milliseconds of
    wait per step together, never one measurement's share with the other's milliseconds; the
    machine says its samples are pooled (the median rule leaves pooled samples alone)."""
    from pytest_opprof.decide import calmer

    first = Measurement(doc(profile()), Machine(cpu_wait=0.5, waited_ms_per_step=9.0))
    second = Measurement(doc(profile()), Machine(cpu_wait=0.2, waited_ms_per_step=0.3))
    assert calmer(first, second) == Machine(cpu_wait=0.2, waited_ms_per_step=0.3, pooled=True, pooled_steps=(8, 8))
    assert calmer(second, first) == Machine(cpu_wait=0.2, waited_ms_per_step=0.3, pooled=True, pooled_steps=(8, 8))
    unknown = Measurement(doc(profile()), Machine())
    assert calmer(unknown, first) == Machine(cpu_wait=0.5, waited_ms_per_step=9.0, pooled=True, pooled_steps=(8, 8))


def test_pooled_with_a_measurement_without_the_tracer_the_untraced_ones_wait_judges():
    """A first measurement under a Python tracer and a confirmation without it: the pooled samples
    are judged by the untraced one's CPU wait, even where the traced one's share was lower: the
    tracer's longer steps inflated its ms waited per step, which excused a real x2 as CPU
    contention (a review); and no tracer excuses the pooled samples."""
    from pytest_opprof.decide import calmer

    traced = Measurement(doc(profile()), Machine(cpu_wait=0.15, waited_ms_per_step=6.0, python_tracer="coverage"))
    untraced = Measurement(doc(profile()), Machine(cpu_wait=0.2, waited_ms_per_step=0.2))
    assert calmer(traced, untraced) == Machine(cpu_wait=0.2, waited_ms_per_step=0.2, pooled=True, pooled_steps=(8, 8))
    assert calmer(untraced, traced) == Machine(cpu_wait=0.2, waited_ms_per_step=0.2, pooled=True, pooled_steps=(8, 8))
    both = Measurement(doc(profile()), Machine(cpu_wait=0.1, waited_ms_per_step=1.0, python_tracer="coverage"))
    assert calmer(traced, both) == Machine(0.1, None, "coverage", 1.0, pooled=True, pooled_steps=(8, 8))


def test_a_recording_under_a_python_tracer_takes_no_further_measurement():
    """A recording under a tracer writes nothing (unrecordable): its slower step wall, excused by
    the tracer, asks no measurement without it (a review's fn ran 58 times where 16 did)."""
    from baseline_docs import walled

    from pytest_opprof.decide import ranges_serve

    base = walled(doc(profile()), 10.0)
    traced = Measurement(walled(doc(profile()), 30.0), Machine(python_tracer="coverage"))  # the wall x3
    asked = []
    for update in ("changed", "all", "new"):
        decide(traced, base, Rule(), update, lambda update=update: asked.append(update))
    assert asked == []
    assert decide(traced, base, Rule(), None, lambda: asked.append("compare")).remeasured is None
    assert asked == ["compare"]  # a comparing run measures it again without the tracer
    for update in ("changed", "all"):  # nor does a recording run measure ahead for the ranges
        assert not ranges_serve(Path("absent.json"), "t", "t.py::t", traced, Rule(), update)


def test_a_tracer_excused_step_wall_is_measured_again_only_where_time_can_fail_the_test():
    """A slower step wall excused by a Python tracer is measured again without it where a time
    verdict can fail the test; with time out of fail_on nothing it says could, and the further
    measurement would only cost the test's time."""
    from baseline_docs import walled

    base = walled(doc(profile()), 10.0)
    traced = Measurement(walled(doc(profile()), 30.0), Machine(python_tracer="coverage"))
    asked = []
    decide(traced, base, Rule(fail_on=frozenset({"structure", "work"})), None, lambda: asked.append("no time"))
    assert asked == []
    untraced = Measurement(walled(doc(profile()), 30.0), Machine())  # no tracer to excuse it: failing as measured
    decide(untraced, base, Rule(), None, lambda: asked.append("untraced"))
    decide(traced, base, Rule(), None, lambda: asked.append("time"))
    assert asked == ["untraced", "time"]
    staying = Measurement(traced.doc, Machine(python_tracer="cProfile", tracer_stays=True))  # traced again if taken
    decide(staying, base, Rule(), None, lambda: asked.append("stays"))
    assert asked == ["untraced", "time"]


def test_pooled_samples_keep_the_thread_variables_set_inside_the_process():
    """The variables pytest-env or a conftest set inside the process hold for both measurements of
    one test: the pooled samples' fix still says to change them there, not with the shell's env."""
    from pytest_opprof.decide import calmer

    inside = ("OMP_NUM_THREADS",)
    first = Measurement(doc(profile()), Machine(cpu_wait=0.5, env_set_inside=inside))
    second = Measurement(doc(profile()), Machine(cpu_wait=0.1, env_set_inside=inside))
    assert calmer(first, second).env_set_inside == inside
    assert calmer(second, first).env_set_inside == inside


def test_update_all_rewrites_without_confirming_and_measures_the_ranges():
    """=all writes every baseline, changed or not, confirming nothing: its only further
    measurements are the three for the ops' recorded ranges."""
    base, current = doc(profile()), measured(profile(addmm_us=(1400,) * 8))
    taken = []

    def again():
        taken.append(1)
        return current

    outcome = decide(current, base, Rule(), "all", again)
    assert (outcome.status, unranged(outcome.write), outcome.measurements, len(taken)) == (
        "changed", current.doc, 1, 3
    )  # fmt: skip
    assert outcome.write.ops["aten::addmm"].recorded_range == (1.4, 1.4)
    assert decide(measured(profile()), base, Rule(), "all").status == "rewritten"


def test_a_time_change_whose_confirmation_failed_is_kept():
    """Updating: when the second measurement cannot be used (untrusted), the time change is
    unconfirmed and the baseline is kept."""
    base, slow = doc(profile()), measured(profile(addmm_us=(1400,) * 8))
    outcome = decide(slow, base, Rule(), "changed", lambda: None)
    assert (outcome.status, outcome.write) == ("kept", None)


def test_every_table_gets_an_ops_baseline_columns_from_one_rule():
    """BaselineResult.op_row: the terminal, CSV and HTML tables show the same baseline min,
    delta and verdict word for an op (new, recounted, slower, work changed, ok)."""
    from pytest_opprof.decide import BaselineResult, OpRow
    from pytest_opprof.verdicts import Verdict

    result = BaselineResult(
        "b.json",
        "compared",
        verdicts=(
            Verdict("time", "regressed", "aten::mm slower", op="aten::mm"),
            Verdict("work", "changed", "aten::addmm 2x the FLOPs", op="aten::addmm"),
        ),
        rows={"aten::mm": (0.5, [1, 1]), "aten::addmm": (1.0, [2, 2]), "aten::relu": (0.1, [1, 1])},
    )
    assert result.compared
    assert result.op_row("aten::mm", 1, 0.75) == OpRow(0.5, 50.0, "slower")
    assert result.op_row("aten::addmm", 2, 1.0) == OpRow(1.0, 0.0, "work changed")
    assert result.op_row("aten::relu", 2, 0.1) == OpRow(0.1, 0.0, "calls changed")
    assert result.op_row("aten::new", 1, 0.3) == OpRow(None, None, "added")
    from pytest_opprof.verdicts import Ignore

    ignoring = dataclasses.replace(result, ignores=(Ignore("aten::re*", True), Ignore("aten::new", True)))
    assert ignoring.op_row("aten::relu", 2, 0.1) == OpRow(0.1, 0.0, "ignored")  # not `calls changed`
    assert ignoring.op_row("aten::new", 1, 0.3) == OpRow(None, None, "ignored")  # not `added`
    assert BaselineResult("b.json", "missing").compared is False


def test_a_thread_change_marks_the_cpu_rows_it_moved_but_not_an_ops_own_verdict():
    """The test-wide work verdict (torch threads, no op): CPU rows say `threads changed`; a row
    with a verdict of its own, a recounted row and a device row keep theirs."""
    from pytest_opprof.decide import BaselineResult, OpRow
    from pytest_opprof.verdicts import Verdict

    result = BaselineResult(
        "b.json",
        "compared",
        verdicts=(
            Verdict("work", "changed", "torch threads 2 -> 1 (...)"),
            Verdict("work", "changed", "aten::addmm 2x the FLOPs", op="aten::addmm"),
        ),
        rows={"aten::mm": (0.5, [1, 1]), "aten::addmm": (1.0, [2, 2]), "aten::relu": (0.1, [1, 1])},
    )
    assert result.op_row("aten::mm", 1, 0.9) == OpRow(0.5, 80.0, "threads changed")
    assert result.op_row("aten::mm", 1, 0.9, on_device=True) == OpRow(0.5, 80.0, "ok")
    assert result.op_row("aten::addmm", 2, 1.0) == OpRow(1.0, 0.0, "work changed")
    assert result.op_row("aten::relu", 2, 0.1) == OpRow(0.1, 0.0, "calls changed")
    assert result.op_row("aten::new", 1, 0.1) == OpRow(None, None, "added")


def test_the_rows_of_a_capture_too_short_for_a_time_verdict_say_not_judged():
    """A one-step capture's deltas are shown, never judged: its rows said `ok` at -24% (a trial)."""
    from pytest_opprof.decide import BaselineResult, OpRow
    from pytest_opprof.verdicts import Verdict

    untimed = "1 step (a single-step capture); time needs 5 or more on both sides"
    structure = Verdict("structure", "changed", "+ aten::clone", op="aten::clone")
    result = BaselineResult("b.json", "compared", untimed=untimed, verdicts=(structure,), rows={"aten::mm": (0.5, [1])})
    assert result.op_row("aten::mm", 1, 0.38) == OpRow(0.5, -24.0, "not judged")
    assert result.op_row("aten::clone", 1, 0.1) == OpRow(None, None, "structure changed")
    assert (
        BaselineResult("b.json", "compared", rows={"aten::mm": (0.5, [1])}).op_row("aten::mm", 1, 0.38).verdict == "ok"
    )


def test_a_baseline_recorded_under_load_is_kept_by_re_recording():
    """Updating (changed): a baseline recorded under load is kept, calm machine or not (the
    contract: only a structure, work or conclusive time change rewrites a file); the comparison
    carries the factor, for the summary line naming the command that records it again."""
    calm, base = loaded_pair()
    for wait in (0.01, 0.5, None):
        outcome = decide(Measurement(calm, Machine(wait)), base, Rule(), "changed")
        assert (outcome.status, outcome.write) == ("kept", None)
        assert outcome.comparison.under_load == pytest.approx(70)
    assert decide(Measurement(calm, Machine(0.01)), base, Rule(), "all").status == "rewritten"  # as asked


def _two_ops(mm_us, add_us, steps=8):
    """Steps of aten::mm and aten::add, each `mm_us` and `add_us` long."""
    from builders import op, step

    from pytest_opprof.analysis import analyze

    events, base = [], 0
    for i in range(steps):
        base += 20_000
        events += [step(i + 1, base, 19_000), op("aten::mm", base + 10, mm_us), op("aten::add", base + 5000, add_us)]
    return analyze(events)


def test_a_first_measurement_slower_anywhere_is_never_written_by_a_bare_recording_run():
    """A review: the first measurement had aten::mm 40% slower and aten::add 30% faster; the
    confirmations cleared mm and confirmed add, and the file got the first measurement's slow mm.
    The file would hold the first measurement's times: it is kept."""
    base = doc(_two_ops(1000, 1000))
    first = measured(_two_ops(1400, 700))
    outcome = decide(first, base, Rule(), "changed", lambda: measured(_two_ops(1000, 700)))
    assert (outcome.status, outcome.write) == ("kept", None)
    faster = measured(_two_ops(1000, 700))  # faster only: confirmed and written
    assert unranged(decide(faster, base, Rule(), "changed", lambda: faster).write) == faster.doc


def test_a_throttled_confirmation_is_left_out_of_the_pool():
    """A review: a 2x device slowdown seen twice, with a third measurement on throttled GPU
    clocks, read `not confirmed` (the throttle made the pool inconclusive) and passed."""
    from test_baseline import on_device

    base = on_device(doc(profile()))
    slow = Measurement(on_device(doc(profile(addmm_us=(1400,) * 8))), Machine(0.0, None))
    throttled = Measurement(slow.doc, Machine(0.0, "hw_slowdown"))
    again = [slow, throttled, slow]
    outcome = decide(slow, base, Rule(), None, lambda: again.pop(0))
    assert (outcome.remeasured, outcome.measurements, again) == ("confirmed", 3, [])
    assert "aten::addmm" in [v.op for v in outcome.comparison.failing(Rule())]


# -- recorded ranges ------------------------------------------------------------------------


def test_a_new_baseline_is_its_first_measurement_with_each_ops_range_over_more():
    """Recording: up to three more measurements; the file gets the first, and each op the
    fastest and slowest of its per-step minima over them all (a fast spell and a slow one of
    the machine, both seen)."""
    spells = [measured(profile(addmm_us=(1400,) * 8)), measured(profile(addmm_us=(600,) * 8)), None]
    first = measured(profile())
    outcome = decide(first, None, Rule(), "changed", lambda: spells.pop(0))
    assert (outcome.status, outcome.recorded_from, spells) == ("new", 3, [])  # None: no more measurements
    assert unranged(outcome.write) == first.doc
    assert outcome.write.ops["aten::addmm"].recorded_range == (0.6, 1.4)
    assert outcome.write.ops["aten::linear"].recorded_range == (0.7, 1.5)


def test_no_range_without_a_repeatable_capture_or_a_time_verdict_to_serve():
    """A capture that cannot be run again (a block, the whole call), or of fewer steps than a
    time verdict needs, is written as measured, from one measurement, with no range."""
    first = measured(profile(addmm_us=(700,) * 4))
    untaken = lambda: (_ for _ in ()).throw(AssertionError("measured"))  # noqa: E731
    short = decide(first, None, Rule(), "changed", untaken)
    assert (short.write, short.recorded_from) == (first.doc, 1)
    assert short.write.ops["aten::addmm"].recorded_range is None
    single = decide(measured(profile()), None, Rule(), "changed", None)
    assert single.recorded_from == 1 and single.write.ops["aten::addmm"].recorded_range is None
    assert decide(measured(profile()), None, Rule(), None).recorded_from == 0  # nothing written


def test_a_measurement_of_other_calls_throttled_clocks_or_other_load_takes_no_part_in_the_range():
    """A measurement whose ops or calls differ from the first's (the code is not repeatable) is
    neither written nor in a range; one on throttled GPU clocks is left out, as is one contended
    by other load (it would widen the range by the other load's doing), whatever the first's."""
    first = measured(profile(), wait=0.01)
    others = [
        measured(profile(addmm_us=(100,) * 8, extra_ops=("aten::clone",))),
        measured(profile(addmm_us=(100,) * 8), gpu="hw_slowdown"),
        measured(profile(addmm_us=(900,) * 8)),
    ]
    outcome = decide(first, None, Rule(), "changed", lambda: others.pop(0))
    assert (outcome.recorded_from, others) == (2, [])  # the first and the 0.9 ms one: the ranges' measurements
    assert "aten::clone" not in outcome.write.ops
    assert outcome.write.ops["aten::addmm"].recorded_range == (0.7, 0.9)
    others = [measured(profile(addmm_us=(3000,) * 8), wait=0.6), measured(profile(addmm_us=(900,) * 8)), None]
    outcome = decide(first, None, Rule(), "changed", lambda: others.pop(0))
    assert (outcome.recorded_from, outcome.write.ops["aten::addmm"].recorded_range) == (2, (0.7, 0.9))
    loaded = [measured(profile(addmm_us=(900,) * 8), wait=0.6)] * 3  # every one contended: none counts
    outcome = decide(measured(profile(), wait=0.5), None, Rule(), "changed", lambda: loaded.pop(0))
    assert (outcome.recorded_from, outcome.write.ops["aten::addmm"].recorded_range) == (1, None)


def referenced(p, matmul_ms, dispatch_ms, wait=None):
    """A measurement of `p` whose machine references read these (ms)."""
    measured_doc = threaded(doc(p), 2).replace(reference_ms=matmul_ms, dispatch_reference_ms=dispatch_ms)
    return Measurement(measured_doc, Machine(wait))


def test_a_first_measurement_whose_references_ran_slower_gives_way_to_a_calm_one():
    """A spell of other load its threads' CPU wait did not show (another tenant of the VM's host):
    the first measurement's references ran 20x slower than a later one's, and its ops 4x. The file
    holds the first later one whose references ran at the machine's speed (one in the spell too is
    passed over), says how much faster they ran (rounded as the JSON shows it), and its ranges leave
    out a measurement whose references ran x4 slower than another's: beyond this VM's spells."""
    first = referenced(profile(addmm_us=(2800,) * 8), 3.3, 6.6, wait=0.01)
    calm = [
        referenced(profile(addmm_us=(2800,) * 8), 3.3, 6.6),  # still in the spell: passed over
        referenced(profile(addmm_us=(700,) * 8), 0.2, 0.4),
        referenced(profile(addmm_us=(900,) * 8), 0.3, 0.6),
    ]
    outcome = decide(first, None, Rule(), "changed", lambda: calm.pop(0) if calm else None)
    assert (outcome.written_from, outcome.first_slowed, outcome.written_slowed) == (3, 16.5, None)
    assert (outcome.recorded_from, outcome.write.ops["aten::addmm"].recorded_range) == (2, (0.7, 0.9))
    assert outcome.write.reference_ms == 0.2
    # both contended and slowed: the CPU wait's line says why it was passed over, not the references'
    contended = dataclasses.replace(first, machine=Machine(0.5))
    calm = [referenced(profile(addmm_us=(700,) * 8), 0.2, 0.4), None]
    outcome = decide(contended, None, Rule(), "changed", lambda: calm.pop(0))
    assert (outcome.written_from, outcome.first_slowed, outcome.written_wait) == (2, None, None)


def test_references_within_this_vms_spells_widen_the_recorded_ranges():
    """A review: a further measurement in one of this VM's slow spells (its references x2, addmm
    x2.5) left out of the ranges made a later run of unchanged code in such a spell, its own
    references missing it, fail. References x2-4 slower than another's still widen the ranges;
    a first measurement faster than the rest is written with theirs in its ranges."""
    first = referenced(profile(), 0.2, 0.4)
    spell = [referenced(profile(addmm_us=(1750,) * 8), 0.4, 0.8), referenced(profile(addmm_us=(720,) * 8), 0.2, 0.4)]
    outcome = decide(first, None, Rule(), "changed", lambda: spell.pop(0) if spell else None)
    assert (outcome.written_from, outcome.recorded_from, outcome.first_slowed) == (1, 3, None)
    assert outcome.write.ops["aten::addmm"].recorded_range == (0.7, 1.75)
    later = referenced(profile(addmm_us=(1600,) * 8), 0.2, 0.4)  # the spell again, the references calm
    statuses = [v.status for v in decide(later, outcome.write, Rule(), None).comparison.verdicts]
    assert set(statuses) == {"inconclusive"}  # within the range: not the review's regressed
    fast = referenced(profile(), 0.1, 0.2)  # the first in a fast spell: the rest at the machine's usual speed
    usual = [referenced(profile(addmm_us=(1500,) * 8), 0.25, 0.5), None]
    outcome = decide(fast, None, Rule(), "changed", lambda: usual.pop(0))
    assert (outcome.written_from, outcome.recorded_from, outcome.written_slowed) == (1, 2, None)
    assert outcome.write.ops["aten::addmm"].recorded_range == (0.7, 1.5)


def test_a_recording_whose_references_ran_slower_than_a_calm_one_says_so():
    """Every measurement ran under load: the written one's references ran 20x slower than those
    of the baseline it replaces (=all on a loaded machine) or, new, than another measurement's
    of other work, so not written (x2 on both fixed references). It is written, as asked, and
    `written_slowed` says so; a baseline recorded on another machine setup or thread count tells
    nothing of this one's load, nor does one without references (written before them)."""
    base = referenced(profile(), 0.2, 0.4).doc
    loaded = referenced(profile(addmm_us=(2800,) * 8), 4.0, 8.0)
    outcome = decide(loaded, base, Rule(), "all")
    assert (outcome.status, outcome.written_slowed) == ("rewritten", Slowed(20.0, "replaced"))
    for other in (
        base.replace(environment={**base.environment, "cpu_model": "another"}),
        base.replace(threads=1),
        base.replace(reference_ms=None, dispatch_reference_ms=None),
    ):
        assert decide(loaded, other, Rule(), "all").written_slowed is None
    other_work = [referenced(profile(addmm_us=(700,) * 8, extra_ops=("aten::clone",)), 0.2, 0.4), None]
    outcome = decide(loaded, None, Rule(), "changed", lambda: other_work.pop(0))
    assert (outcome.written_from, outcome.written_slowed, outcome.first_slowed) == (1, Slowed(20.0, "measured"), None)
    one_reference = [referenced(profile(addmm_us=(2800,) * 8), 0.4, 8.0), None]  # the matmul alone: a stall
    outcome = decide(loaded, None, Rule(), "changed", lambda: one_reference.pop(0))
    assert (outcome.written_from, outcome.written_slowed, outcome.recorded_from) == (1, None, 2)
    result = BaselineResult("b.json", "rewritten", written_slowed=Slowed(20.0, "replaced"), first_slowed=3.5)
    assert BaselineResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_a_contended_first_measurement_gives_way_to_the_first_calm_one_of_the_same_work():
    """A trial recorded on a loaded runner: the first measurement waited for a CPU (aten::addmm
    11.56 ms against 0.39 ms calm) and the file held it, its range up to the loaded time, so
    every later slowdown up to it passed as inconclusive. The file now holds the first calm
    measurement of the same work, its ranges over the calm ones only; with none calm, the first."""
    first = measured(profile(addmm_us=(3000,) * 8), wait=0.5)
    others = [
        measured(profile(addmm_us=(600,) * 8, extra_ops=("aten::clone",)), wait=0.0),  # other work: not it
        measured(profile(addmm_us=(700,) * 8), wait=0.01),
        measured(profile(addmm_us=(5000,) * 8), wait=0.6),  # loaded again: not in the written one's range
    ]
    outcome = decide(first, None, Rule(), "changed", lambda: others.pop(0) if others else None)
    assert (outcome.status, outcome.written_from, outcome.written_wait) == ("new", 3, 0.01)
    assert outcome.write.ops["aten::addmm"].recorded_range is None  # the one calm measurement of that work
    assert (outcome.recorded_from, "aten::clone" in outcome.write.ops) == (1, False)
    # the file names the op that other work ran (a later change in it says fn keeps state)
    assert unranged(outcome.write) == doc(profile(addmm_us=(700,) * 8)).replace(unrepeated=("aten::clone",))
    calm = [measured(profile(addmm_us=(700,) * 8), wait=0.01), measured(profile(addmm_us=(900,) * 8)), None]
    outcome = decide(first, None, Rule(), "changed", lambda: calm.pop(0))
    assert (outcome.written_from, outcome.recorded_from) == (2, 2)
    assert outcome.write.ops["aten::addmm"].recorded_range == (0.7, 0.9)
    # none calm: the first, as before, with no ranges (a trial's beside four CPU hogs: addmm
    # 0.468-35.11 ms from four contended measurements, and a x4.7 slowdown passed, inconclusive)
    loaded = [measured(profile(addmm_us=(900,) * 8), wait=0.6), None]
    outcome = decide(first, None, Rule(), "changed", lambda: loaded.pop(0))
    assert (outcome.written_from, outcome.written_wait, outcome.recorded_from) == (1, 0.5, 1)
    assert outcome.write.ops["aten::addmm"].recorded_range is None
    base = doc(profile(addmm_us=(700,) * 8, extra_ops=("aten::relu",)))  # a structure change rewrites
    calm = [measured(profile(addmm_us=(800,) * 8), wait=0.0), None]
    outcome = decide(first, base, Rule(), "changed", lambda: calm.pop(0))
    assert (outcome.status, outcome.written_from) == ("changed", 2)
    assert unranged(outcome.write) == doc(profile(addmm_us=(800,) * 8))


def test_other_work_in_a_further_measurement_is_named_but_a_one_off_of_the_first_and_ignored_ops_are_not():
    """`unrepeated`: the ops whose calls differ in a further measurement, or that only it ran
    (a trial's EMA `aten::lerp_` in 3 of 8 steps): it measured other work. An op the first ran
    in under half its steps and the further one not at all is the first's one-off, which its own
    verdicts judge; the rule's ignored ops are not compared."""
    from pytest_opprof.decide import unrepeated

    first = doc(profile())
    assert unrepeated(first, doc(profile(addmm_us=(900,) * 8))) == ()  # slower, the same work
    assert unrepeated(first, doc(profile(extra_ops=("aten::clone",)))) == ("aten::clone",)
    assert unrepeated(first, doc(profile(extra_ops=("aten::clone",))), ignore=("aten::cl*",)) == ()
    assert unrepeated(first, doc(profile(linear=False))) == ("aten::linear",)  # the first ran it every step
    entry = first.ops["aten::addmm"]
    once = first.replace(
        ops={**first.ops, "aten::copy_": dataclasses.replace(entry, calls_per_step=(1.0,) + (0.0,) * 7)}
    )
    assert unrepeated(once, first) == ()  # the first's one-off, in one step of eight
    assert unrepeated(first, once) == ("aten::copy_",)  # in the further one only: other work
    # the same ops and calls on other inputs (a trial's growing KV cache): other work too
    wide, narrow = doc(mlp_profile(hidden=1024)), doc(mlp_profile(hidden=512))
    assert unrepeated(wide, doc(mlp_profile(hidden=1024))) == ()
    assert unrepeated(wide, narrow) == tuple(sorted(n for n in wide.ops if wide.ops[n].work is not None))
    assert unrepeated(wide, narrow) != ()


def _ranged(addmm_us, low, high):
    """A baseline whose ops' recorded ranges run from `low` to `high` times each op's own minimum."""
    base = doc(profile(addmm_us=(addmm_us,) * 8))
    spans = {n: (low * min(e.cpu_ms), high * min(e.cpu_ms)) for n, e in base.ops.items()}
    return base.replace(ops={n: dataclasses.replace(e, recorded_range=spans[n]) for n, e in base.ops.items()})


def _addmm(now_us, baseline):
    from pytest_opprof.compare import compare

    return [
        v for v in compare(doc(profile(addmm_us=(now_us,) * 8)), baseline, Rule()).verdicts if v.op == "aten::addmm"
    ]


def test_a_recorded_range_makes_a_slowdown_up_to_its_slowest_inconclusive():
    """Against its range (0.600-1.500 ms, written 0.600): within the tolerance of the baseline,
    no verdict; up to the slowest plus its tolerance (1.800 ms), inconclusive, said with the
    range and the limit, not a failure; beyond, a regression. Without a range the same time fails."""
    from pytest_opprof.timing import RANGE_FIX, range_span
    from pytest_opprof.verdicts import INCONCLUSIVE, REGRESSED

    ranged = _ranged(600, 1.0, 2.5)
    assert _addmm(710, ranged) == []  # within 0.600 + 20%
    (verdict,) = _addmm(730, ranged)
    assert verdict.status == INCONCLUSIVE  # past 0.600 + 20%
    (verdict,) = _addmm(1790, ranged)  # past the slowest, within its tolerance
    assert (verdict.status, verdict.fix) == (INCONCLUSIVE, RANGE_FIX)
    assert verdict.message.startswith("aten::addmm: 1.790 ms/step vs baseline 0.600 ms (+198%, slower; inconclusive: ")
    assert verdict.why == (
        "its baseline's measurements of the same code ranged 0.600-1.500 ms on this machine; this time is within "
        "the slowest and its tolerance (up to 1.800 ms)"
    )
    assert range_span(verdict.why) == "0.600-1.500 ms, up to 1.800 ms"  # what a line of several ops names
    assert [v.status for v in _addmm(1850, ranged)] == [REGRESSED]
    assert [v.status for v in _addmm(1790, doc(profile(addmm_us=(600,) * 8)))] == [REGRESSED]  # no range


def test_a_time_within_the_range_beside_a_changed_structure_is_not_told_to_record_on_a_steadier_machine():
    """A trial's doubled MLP failed on work, and the op around the changed one (its autograd
    node's evaluate_function) read `inconclusive: its baseline's measurements of the same code
    ranged ...; record the baseline again where the op's time holds steadier (a dedicated
    runner)`: its time moved with the change, not with the machine. It says so."""
    from pytest_opprof.compare import compare
    from pytest_opprof.timing import AROUND_CHANGE_FIX, RANGE_FIX
    from pytest_opprof.verdicts import INCONCLUSIVE

    ranged = _ranged(600, 1.0, 2.5)
    current = doc(profile(addmm_us=(1790,) * 8))
    added = current.replace(ops={**current.ops, "aten::dropout": next(iter(current.ops.values()))})
    for now, fix in ((current, RANGE_FIX), (added, AROUND_CHANGE_FIX)):
        (verdict,) = [v for v in compare(now, ranged, Rule()).verdicts if v.op == "aten::addmm"]
        assert (verdict.status, verdict.fix) == (INCONCLUSIVE, fix)
    assert any(v.kind == "structure" for v in compare(added, ranged, Rule()).verdicts)


def test_a_baseline_written_in_a_slow_spell_still_sees_a_slowdown_from_its_ranges_fastest():
    """A review: the first measurement 1.4 ms (a slow spell), the range's others 0.7 ms. Judged
    from the written 1.4 ms, a real 0.7 -> 1.3 ms passed in silence; from the range's fastest it
    is inconclusive. Back at 0.7 ms there is no verdict, and a time beyond the fastest's
    tolerance below it is a gain."""
    from pytest_opprof.compare import compare
    from pytest_opprof.verdicts import INCONCLUSIVE

    slow_first = _ranged(1400, 0.5, 1.0)
    (verdict,) = _addmm(1300, slow_first)
    assert verdict.status == INCONCLUSIVE and verdict.message.startswith(
        "aten::addmm: 1.300 ms/step vs the fastest of its baseline's measurements (the file's 1.400 ms came in a "
        "slow spell) 0.700 ms (+86%, slower; inconclusive: "
    )
    assert _addmm(700, slow_first) == [] and _addmm(570, slow_first) == []  # 0.700 less 20% is 0.560
    assert [v.status for v in _addmm(550, slow_first)] == ["improved"]
    kept = decide(measured(profile(addmm_us=(700,) * 8)), slow_first, Rule(), "changed", lambda: None)
    assert (kept.status, kept.write) == ("kept", None)  # no change worth a new file
    assert compare(doc(profile(addmm_us=(700,) * 8)), slow_first, Rule()).unchanged


def test_run_judges_early_only_the_capture_its_baseline_holds(tmp_path):
    """judged_early: a baseline of the test's second capture (capture.number 2) is not the first
    run()'s: no decision, and no confirmation asked (an earlier run() paid them against its later
    capture's baseline); the second is judged and confirmed. A file without a number (written
    before numbers) judges every run(), as before."""
    from pytest_opprof.baseline import write_baseline
    from pytest_opprof.decide import judged_early

    path, base = tmp_path / "b.json", doc(profile())
    write_baseline(path, base.replace(number=2))
    taken = []

    def again():
        taken.append(1)
        return measured(profile())

    def at(number, p):
        m = measured(p)
        return Measurement(m.doc.replace(number=number), m.machine)

    slow = profile(addmm_us=(1400,) * 8)
    assert judged_early(path, "b.json", base.nodeid, at(1, slow), Rule(), again) is None and taken == []
    second = judged_early(path, "b.json", base.nodeid, at(2, slow), Rule(), again)
    assert second is not None and second.outcome.remeasured == "not confirmed" and taken == [1]
    write_baseline(path, base)  # capture 1's
    assert judged_early(path, "b.json", base.nodeid, at(1, slow), Rule(), again) is not None and taken == [1, 1]
    assert judged_early(path, "b.json", base.nodeid, at(3, slow), Rule(), again) is None
    write_baseline(path, base.replace(number=None))  # from before numbers
    assert judged_early(path, "b.json", base.nodeid, at(3, slow), Rule(), again) is not None


def test_a_baseline_of_another_capture_is_renumbered_by_recording_and_said_by_comparing():
    """moved_capture: recording writes the number of the test's latest capture into a file of
    another, its times kept ("renumbered": a slow first measurement inflates nothing), or the whole
    measurement where the file changes anyway; a file from before numbers gets the number of a
    later capture than the first. Comparing takes a file without a number as this capture, and,
    time failing, makes a slowdown of another capture inconclusive: run() confirmed none."""
    from pytest_opprof.decide import CaptureMoved
    from pytest_opprof.verdicts import INCONCLUSIVE, TIME

    def at(number, p=None):
        return Measurement(doc(p or profile()).replace(number=number), measured(profile()).machine)

    base, slow = doc(profile()), profile(addmm_us=(1400,) * 8)
    moved = decide(at(1, slow), base.replace(number=2), Rule(), "changed", lambda: None)
    assert (moved.status, moved.write, moved.capture_moved) == ("renumbered", base, CaptureMoved(2, 1))
    grown = decide(at(1, profile(extra_ops=("aten::clone",))), base.replace(number=2), Rule(), "changed")
    assert (grown.status, grown.write.number, "aten::clone" in grown.write.ops) == ("changed", 1, True)
    upgraded = decide(at(2), base.replace(number=None), Rule(), "changed")
    assert (upgraded.status, upgraded.write, upgraded.capture_moved) == (
        "renumbered",
        base.replace(number=2),
        CaptureMoved(None, 2),
    )
    assert decide(at(1), base.replace(number=None), Rule(), "changed").status == "kept"
    assert decide(at(2), base.replace(number=2), Rule(), "changed").status == "kept"
    assert decide(at(2), base.replace(number=None), Rule(), None).capture_moved is None
    compared = decide(at(1, slow), base.replace(number=2), Rule(), None)
    assert compared.capture_moved == CaptureMoved(2, 1) and compared.comparison.failing(Rule()) == []
    assert {v.status for v in compared.comparison.verdicts if v.kind == TIME} == {INCONCLUSIVE}
    reported = Rule(fail_on=frozenset({"structure", "work"}))
    untouched = decide(at(1, slow), base.replace(number=2), reported, None)
    assert INCONCLUSIVE not in {v.status for v in untouched.comparison.verdicts if v.kind == TIME}


@pytest.mark.parametrize("content", ["{oops", None])
def test_every_result_says_which_kinds_fail_the_test(tmp_path, content):
    """`fails` and `time_fails` (`--opprof-json`) are the rule's, also for an unusable file (a
    review: an unusable one said the default kinds, unsorted) and a missing one."""
    from pytest_opprof.decide import baseline_step

    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content)
    rule = Rule(fail_on=frozenset({"time", "environment"}))
    result = baseline_step(path, "t.json", "t.py::test_x", Measurement(doc(profile())), rule, None, None)
    assert result.status == ("unusable" if content else "missing")
    assert result.fails == ("environment", "time") and result.time_fails


def test_a_time_beyond_the_range_is_judged_from_its_fastest_where_the_file_came_in_a_slow_spell():
    """A trial's failure read `aten::addmm: 0.433 ms/step vs baseline 0.306 ms (+42%` while the
    table beside it read baseline 0.249, +94%: past its range the plain rule judged from the file's
    minimum, which came in a slow spell. It judges, and says, what the table and a time within the
    range judge from: the range's fastest. A file written at its range's fastest reads as before."""
    from pytest_opprof.verdicts import IMPROVED, REGRESSED

    spell = _ranged(1400, 0.5, 1.0)  # written 1.4 ms, its range 0.7-1.4: a slow spell
    (verdict,) = _addmm(2000, spell)  # past 1.4 + 20%
    assert verdict.status == REGRESSED
    assert verdict.message.startswith(
        "aten::addmm: 2.000 ms/step vs the fastest of its baseline's measurements (the file's 1.400 ms came in a "
        "slow spell) 0.700 ms (+186%, slower; limit +20%"
    )
    assert (verdict.base_ms, verdict.new_ms) == (0.7, 2.0)
    (faster,) = _addmm(500, spell)  # past 0.7 - 20%: a gain from the fastest, not from the slow first
    assert (faster.status, faster.base_ms) == (IMPROVED, 0.7)
    assert "(-29%, faster" in faster.message
    (plain,) = _addmm(2000, _ranged(700, 1.0, 1.1))  # written at its range's fastest
    assert plain.message.startswith("aten::addmm: 2.000 ms/step vs baseline 0.700 ms (+186%, slower")
    sub_ms = _ranged(700, 0.5, 1.0)  # written 0.7 ms, its range 0.35-0.7 (a trial's were 0.25-0.41 ms)
    (verdict,) = _addmm(1000, sub_ms)
    assert verdict.message.startswith(
        "aten::addmm: 1.000 ms/step vs the fastest of its baseline's measurements (the file's 0.700 ms came in a "
        "slow spell) 0.350 ms (+186%, slower"
    )
    uneven = doc(profile(addmm_us=(1400,) * 7 + (1700,)))  # its fastest step is the file's time
    entry = dataclasses.replace(uneven.ops["aten::addmm"], recorded_range=(0.7, 1.4))
    (verdict,) = _addmm(2000, uneven.replace(ops={**uneven.ops, "aten::addmm": entry}))
    assert "(the file's 1.400 ms came in a slow spell) 0.700 ms" in verdict.message


def test_past_its_range_an_op_is_still_excused_on_the_files_own_measurement():
    """A review of the change above: judged on the range's fastest, the rest of the step (the file's
    step walls less the op) grew by the op's slow-spell excess, and an op the rest of the step
    excused (inconclusive) failed. The verdict, and what excuses it, stay the file's measurement's
    (its walls and machine references are its own); only the time it is said from is the range's."""
    from baseline_docs import walled

    from pytest_opprof.compare import compare

    base = walled(doc(profile(addmm_us=(1400,) * 8)), 2.0)
    entry = dataclasses.replace(base.ops["aten::addmm"], recorded_range=(0.7, 1.4))  # 1.4: a slow spell
    base = base.replace(ops={**base.ops, "aten::addmm": entry})
    whole = walled(doc(profile(addmm_us=(2000,) * 8)), 2.9)  # addmm x1.43, the step outside it 0.6 -> 0.9 ms
    (verdict,) = [v for v in compare(whole, base, Rule()).verdicts if v.op == "aten::addmm"]
    assert verdict.status == "inconclusive" and verdict.why.startswith("the rest of the step slowed alike (1.50x")
    assert verdict.message.startswith(
        "aten::addmm: 2.000 ms/step vs the fastest of its baseline's measurements (the file's 1.400 ms came in a "
        "slow spell) 0.700 ms (+186%, slower; inconclusive: the rest of the step slowed alike"
    )


def test_the_op_tables_show_the_baseline_time_the_verdict_judges_from(tmp_path):
    """A newcomer trial's table read `baseline min 0.146, +17%` where the verdict judged +101%
    from its range's fastest (the file's 0.146 came in a slow spell): the tables' baseline column
    is the time judged from; a file within its range's tolerance shows its own minimum."""
    from test_baseline import NODE

    from pytest_opprof.baseline import write_baseline
    from pytest_opprof.decide import baseline_step

    path = tmp_path / "t.json"
    write_baseline(path, _ranged(1400, 0.5, 1.0))  # written 1.4 ms, its range 0.7-1.4: a slow spell
    result = baseline_step(path, "t.json", NODE, measured(profile(addmm_us=(750,) * 8)), Rule(), None, None)
    row = result.op_row("aten::addmm", 1, 0.75)
    assert (row.base_min_ms, round(row.delta_pct), row.verdict) == (0.7, 7, "ok")
    write_baseline(path, _ranged(700, 1.0, 1.1))  # written at its range's fastest
    result = baseline_step(path, "t.json", NODE, measured(profile(addmm_us=(750,) * 8)), Rule(), None, None)
    assert result.op_row("aten::addmm", 1, 0.75).base_min_ms == 0.7


def test_a_recorded_range_spans_each_measurements_fastest_step_not_its_slowest():
    """Four recordings of unchanged code, each with one slow step (2.8 ms beside 0.7 ms): the
    range is of their fastest steps, (0.7, 0.7), so a later x3.5 slowdown of every step fails; a
    range of the slow steps would have called it inconclusive (a mutation trial)."""
    from pytest_opprof.compare import compare
    from pytest_opprof.decide import with_recorded_ranges

    written, _ = with_recorded_ranges([doc(profile(addmm_us=(700,) * 7 + (2800,))) for _ in range(4)])
    assert written.ops["aten::addmm"].recorded_range == (0.7, 0.7)
    slower = compare(doc(profile(addmm_us=(2450,) * 8)), written, Rule())
    assert [(v.op, v.status) for v in slower.verdicts] == [("aten::addmm", "regressed"), ("aten::linear", "regressed")]


def test_strict_mode_gives_the_inconclusive_checks_own_fix():
    """--opprof-strict's error ends with the first inconclusive verdict's fix (record again, for a
    baseline recorded under load); the quiet-machine fix only where the verdict has none."""
    from pytest_opprof.compare import compare
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.excuses import LOADED_FIX, QUIET_MACHINE_FIX

    (first, *_) = compare(*loaded_pair(), Rule()).inconclusive
    assert first.fix == LOADED_FIX
    result = BaselineResult("b.json", "compared", verdicts=(first,))
    [error] = result.error_messages("t.py::x", Rule(), strict=True, recording=False)
    assert LOADED_FIX.split(" with the test's id")[0] in error and QUIET_MACHINE_FIX not in error
    fixless = BaselineResult("b.json", "compared", verdicts=(dataclasses.replace(first, fix=None),))
    [error] = fixless.error_messages("t.py::x", Rule(), strict=True, recording=False)
    assert QUIET_MACHINE_FIX in error
    assert result.error_messages("t.py::x", Rule(), strict=False, recording=False) == []


def test_only_a_structure_or_work_change_that_fail_on_leaves_out_is_let_pass():
    """lets_pass: a changed structure or work verdict of a comparison whose fail_on leaves its kind
    out; never an environment verdict (it fails nothing anyway, and its line says nothing of
    passing), a time verdict, a recording run's, or a kind fail_on names."""
    from pytest_opprof.decide import lets_pass
    from pytest_opprof.verdicts import Verdict

    time_only = frozenset({"time"})
    work = Verdict("work", "changed", "aten::mm: 2x the FLOPs", op="aten::mm")
    assert lets_pass(work, time_only, compared=True)
    assert not lets_pass(work, time_only, compared=False)
    assert not lets_pass(work, frozenset({"work"}), compared=True)
    assert not lets_pass(Verdict("environment", "changed", "torch 2.11 -> 2.13"), time_only, compared=True)
    assert not lets_pass(Verdict("time", "regressed", "aten::mm slower", op="aten::mm"), time_only, compared=True)


def test_a_failure_lists_three_work_changes_then_counts_the_rest():
    """A dtype change touches every op: the failure lists the three costliest work changes and
    counts the others, with the command that records the change if intended."""
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.verdicts import Verdict

    work = tuple(Verdict("work", "changed", f"aten::op{i}: inputs float -> half", op=f"aten::op{i}") for i in range(5))
    lines = BaselineResult("b.json", "compared", verdicts=work).failing(Rule(), "t.py::x")
    assert [line for line in lines if "aten::op" in line] == [
        f"work changed: aten::op{i}: inputs float -> half" for i in range(3)
    ]
    assert "work changed in 2 more ops (--opprof-json lists every verdict)" in lines
    three = BaselineResult("b.json", "compared", verdicts=work[:3]).failing(Rule(), "t.py::x")
    assert not [line for line in three if "more op" in line]
