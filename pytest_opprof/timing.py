"""3. time: an op's and the step wall's time verdicts, a measurement vs its baseline. Pure.

An op's per-step minimum moved beyond the tolerance and the floor, the fastest half of the steps
says the move is real, and the machine cannot explain it (excuses.py); otherwise inconclusive.
The steps' wall time is judged the same way on what the slower ops do not account for (time
outside the operators). Why the minimum: docs/design.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from statistics import median
from typing import NamedTuple

from .analysis.model import WORKLOAD_OPS
from .documents import BaselineDoc, OpEntry
from .excuses import (
    RECORDS_LOST_FIX,
    REST_FIX,
    Excuse,
    capability_too_little,
    contention_too_small,
    explained_by_machine,
    machine_too_little,
    speed_words,
    threads_too_little,
    within_slowdown,
    workload_ratio,
)
from .rules import TIME, Rule
from .units import PERIODIC_STEPS, fixed_period, ordinal
from .verdicts import (
    ALPHA,
    CONTENTION_SLACK,
    IMPROVED,
    INCONCLUSIVE,
    MIN_TIME_STEPS,
    OP_SLACK,
    REGRESSED,
    REST_SHARE,
    SOMETIMES_STEPS,
    SPELL_LIMIT,
    STATE_NOISE,
    STEP_WALL,
    WALL_SLACK,
    Comparison,
    Machine,
    Verdict,
    ignored,
    largest_first,
    rank_test_p,
    step_cost_ms,
    steps_run,
)


def untimed_why(current: BaselineDoc, baseline: BaselineDoc) -> str | None:
    """Why this test's times are reported, never judged: too few steps on a side (the baseline's
    alone: a trial's test got its steps back, and its 3-step file kept the time check off, the
    message sending it to fix the test; a bare recording run keeps such a file)."""
    steps = min(current.steps, baseline.steps)
    if steps >= MIN_TIME_STEPS:
        return None
    captured = "a single-step capture" if steps == 1 else f"{steps} steps"
    if current.steps >= MIN_TIME_STEPS:
        return (
            f"time not judged: its baseline holds {captured}, this run {current.steps} (a time check needs "
            f"{MIN_TIME_STEPS}+ steps on both sides); record it again: pytest --opprof-update-baseline=all with the "
            "test's id"
        )
    return (
        f"time not judged: {captured} (a time check needs {MIN_TIME_STEPS}+ steps on both sides); "
        "measure with opprof.run(fn, ..., steps=10) for one"
    )


def _fastest_half(samples: list[float]) -> list[float]:
    ordered = sorted(samples)
    return ordered[: max(1, (len(ordered) + 1) // 2)]


def _significant(high: list[float], low: list[float]) -> tuple[bool, float]:
    """Whether `high` is really above `low`, judged on the fastest half of each: slow steps are
    interference (on a 2-core runner every other step was seen 4x slower), fast ones the code."""
    high_fast, low_fast = _fastest_half(high), _fastest_half(low)
    p = rank_test_p(high_fast, low_fast)
    return p < ALPHA or min(high_fast) > max(low_fast), p


OUTSIDE_WENT = {  # where the wall's own move went, measured outside the ops, by direction
    True: "the time went there (Python code, hooks, data preparation, a wait for another thread or process)",
    False: "the time was saved there (Python code, hooks, data preparation)",
}


OUTSIDE_OPS = {  # why the wall moved when no operator did, by direction
    True: "no operator got slower: the time went outside them (Python code, hooks, data preparation, a wait for another thread or process)",
    False: "no operator explains it: the time was saved outside them (Python code, hooks, data "
    "preparation) or in many small moves",
}


def time_verdicts(
    current: BaselineDoc, baseline: BaselineDoc, rule: Rule, machine: Machine, skip: set[str], where: str
) -> list[Verdict]:
    """A verdict per op whose time moved; when no structure or work changed, one on the steps'
    wall time outside the top-level ops: what the op times cannot show, a step slower outside
    its operators (a hook, a sleep). A baseline recorded before that time was (no `outside_ms`)
    judges the wall beyond what the ops' own slowdowns add to it (an op that got faster explains
    no slower wall; one 0.1 ms slower explains 0.1 ms of it, not a wall ten times the baseline's)."""
    verdicts: list[Verdict] = []
    for name in sorted(set(current.ops) & set(baseline.ops) - skip):
        if ignored(name, rule.ignore_ops):
            continue
        new, old = list(current.ops[name].judged_samples), list(baseline.ops[name].judged_samples)
        recorded = baseline.ops[name].recorded_range
        if _too_few_kept(current.ops[name], baseline.ops[name]):
            verdict = _lost_steps_verdict(name, current.ops[name], baseline.ops[name], rule, where)
        elif new and old and recorded is not None and _within_reach(min(new), recorded, rule):
            verdict = _within_range(name, min(new), min(old), recorded, rule, where)
        else:
            base, of = _said_base(old, recorded, rule)
            verdict = _judged(
                name, new, old, current.ops[name].on_device, (current, baseline), rule, machine, where, base=base, of=of
            )
        if verdict is None:
            lost = current.ops[name].lost_in_steps() if current.ops[name].on_device else ()
            verdict = _most_steps_slower(name, new, old, rule, machine, where, lost=lost)
        whole = len(new) == len(current.ops[name].time_samples) and len(old) == len(baseline.ops[name].time_samples)
        if verdict is None and whole:  # no step left out (lost kernel records): the gaps are the steps'
            verdict = _periodic_slower(name, new, old, rule, machine, where)
        if verdict is not None:
            verdicts.append(verdict)
    verdicts += _in_one_step(current, baseline, rule, machine, skip, where)
    if skip or ignored(STEP_WALL, rule.ignore_ops) or _wall_unjudged(current, baseline, rule):
        return verdicts
    new_wall, old_wall = list(current.wall_ms or ()), list(baseline.wall_ms or ())
    docs = (current, baseline)
    outside = None
    if current.outside_ms and baseline.outside_ms:
        outside = (list(current.outside_ms), list(baseline.outside_ms))
    # a baseline recorded before: the ops' own slowdowns, generously counted, account for the rest
    added = 0.0 if outside else _ops_added_ms(current, baseline)
    wall = _judged(
        STEP_WALL, new_wall, old_wall, False, docs, rule, machine, where, wall=True, explained_ms=added, outside=outside
    )
    if wall is None and outside is not None and new_wall and old_wall:  # the time outside the ops, by step
        step_ms = min(old_wall)
        wall = _most_steps_slower(STEP_WALL, *outside, rule, machine, where, step_ms=step_ms) or _periodic_slower(
            STEP_WALL, *outside, rule, machine, where, step_ms=step_ms
        )  # a regression trial's sleep every 3rd call: some steps, at a fixed period
    # the largest move first: a failure's first line and its short summary name what moved most (a
    # trial's 2 ms sleep, the step wall's +2.2 ms, came third after an LSTM's +0.12 ms: `and 2 more`)
    return largest_first(verdicts + ([wall] if wall is not None else []))


MEDIAN_MOVE = 3.0  # identical code's per-step medians ranged x1.9 between idle runs (DESIGN §6)


def _most_steps_slower(
    name: str,
    new_s: list[float],
    old_s: list[float],
    rule: Rule,
    machine: Machine,
    where: str,
    step_ms: float | None = None,
    lost: tuple[float, ...] = (),
) -> Verdict | None:
    """The time rule judges per-step minima, which a slowdown of most steps but not the fastest
    leaves where it was: a trial's DataLoader whose workers got x13 slower kept one step a step
    whose batch was ready, and passed 6 runs in 8 with its median step x6. Where the median moved
    past MEDIAN_MOVE times the baseline's and the floor, beyond every baseline step, on a machine
    that explains none of it (a CPU wait, a tracer, a throttled GPU, compilation in the steps),
    the test is inconclusive on it, saying so: never a failure (the fastest step held), never a
    pass in silence. A CPU wait explains it up to CONTENTION_SLACK times the ms it waited a step
    (the trial's own DataLoader workers made it wait 2 ms of a 9 ms step). `step_ms`: the samples
    are the steps' time outside the ops, and the move must pass the margin of the baseline's
    fastest step as the wall rule's does (a review's 0.1 -> 0.4 ms outside a 10 ms step read x4).
    `lost`: the current side's kernel records lost per step, whose steps `new_s` leaves out."""
    if min(len(new_s), len(old_s)) < MIN_TIME_STEPS or machine.python_tracer or machine.gpu_unreliable:
        return None
    measurements = _measurements(new_s, machine, lost)
    new_ms, old_ms = median(new_s), median(old_s)
    settled, top_ms = _settled(old_s)
    floor = rule.min_delta_ms if step_ms is None else _margin(step_ms, rule)
    if measurements is None or not all(_median_beyond(m, old_ms, top_ms, floor, rule) for m in measurements):
        return None
    waited = machine.waited_ms_per_step  # a wait that can explain the move (the trial's workers' 2 ms of 9 cannot)
    if machine.compiled_in or (machine.contended and (waited is None or new_ms - old_ms <= CONTENTION_SLACK * waited)):
        return None
    what = " outside the ops" if step_ms is not None else ""
    each = f" in each of {len(measurements)} measurements" if len(measurements) > 1 else ""
    warming = (
        f", but for its first {_steps(len(old_s) - settled)}, still warming up: up to {max(old_s):.3f} ms"
        if settled < len(old_s)
        else ""
    )
    why = (
        f"{MOST_STEPS_WHY}{each} (up to {top_ms:.3f} ms{warming}) while the fastest steps did not fail the time rule "
        f"({min(new_s):.3f} vs {min(old_s):.3f} ms), and time is judged on the fastest: a wait in some steps (for example "
        "for data from worker processes, or a cache that misses)"
    )
    ratio = f"x{new_ms / old_ms:.1f} " if old_ms > 0 else ""
    message = f"{name}: {new_ms:.3f} ms/step{what} median vs baseline {old_ms:.3f} ms ({ratio}slower; inconclusive: {why}){where}"
    return Verdict(TIME, INCONCLUSIVE, message, name, old_ms, new_ms, None, why, SOME_STEPS_FIX)


def _measurements(samples: list[float], machine: Machine, lost: tuple[float, ...] = ()) -> list[list[float]] | None:
    """The samples of each measurement: one, or where confirmations were pooled, each one's steps
    (every one must show the move: one measurement's slow spell beside a calm one is what
    confirmations clear, but a slower peer rank slowed each of a trial's while a step of each found
    it done), less the steps that lost kernel records (`lost`, per pooled step: the samples leave
    them out); None where the pooled samples cannot be told apart, or one holds too few steps."""
    if not machine.pooled:
        return [samples]
    steps = sum(machine.pooled_steps)
    kept = [not x for x in lost] if any(lost) else [True] * steps
    if len(kept) != steps or sum(kept) != len(samples):
        return None
    parts, at, step = [], 0, 0
    for n in machine.pooled_steps:
        count = sum(kept[step : step + n])
        parts.append(samples[at : at + count])
        at, step = at + count, step + n
    return parts if all(len(part) >= MIN_TIME_STEPS for part in parts) else None


def _steps(n: int) -> str:
    """`step`, `2 steps`: what follows `its first`."""
    return "step" if n == 1 else f"{n} steps"


def _median_beyond(samples: list[float], old_ms: float, top_ms: float, floor: float, rule: Rule) -> bool:
    """Whether the samples' median moved past MEDIAN_MOVE times the baseline's median (`old_ms`),
    past the floor, and beyond its slowest settled step (`top_ms`)."""
    new_ms = median(samples)
    return new_ms >= MEDIAN_MOVE * old_ms and new_ms - old_ms > floor and new_ms > top_ms + _margin(top_ms, rule)


def _settled(old_s: list[float]) -> tuple[int, float]:
    """The baseline's steps after the first ones that were still warming up (fewer than a third of
    them, each over MEDIAN_MOVE times the median of the rest): their number and slowest. A trial's
    baseline began with two 39 ms steps of its ~1.3 ms, a peer rank still starting, and no slower
    step could be beyond every one."""
    first = 0
    while 3 * (first + 1) < len(old_s) and old_s[first] > MEDIAN_MOVE * median(old_s[first + 1 :]):
        first += 1
    return len(old_s) - first, max(old_s[first:])


MOST_STEPS_WHY = "most steps slowed beyond every baseline step"  # how _most_steps_slower's why begins
PERIODIC_WHY = "some steps slowed beyond every baseline step, at a fixed period"  # _periodic_slower's
REST_WHY = "the rest of the step slowed alike"  # how _rest_slowed_alike's why begins


def _periodic_slower(
    name: str,
    new_s: list[float],
    old_s: list[float],
    rule: Rule,
    machine: Machine,
    where: str,
    step_ms: float | None = None,
) -> Verdict | None:
    """A slowdown of some steps at a fixed period, each past MEDIAN_MOVE times the baseline's
    slowest step and the floor: the fastest steps hold it (the rule's) and the median does too
    (_most_steps_slower's), so a diagnosis trial's 16x input every 3rd call passed in silence. At
    least PERIODIC_STEPS such steps, at one gap of 2 or more, and not all but 2 of the steps; not
    where the machine explains a slow step (a CPU wait, a tracer, throttled GPU clocks,
    compilation) nor on pooled measurements, nor where the baseline holds too few steps to have
    shown the period twice. Inconclusive, never a failure: the fastest held. `step_ms`: the
    samples are the steps' time outside the ops, each slow step past the margin of the baseline's
    fastest step (as _most_steps_slower's): a regression trial's 5 ms sleep every 3rd call passed
    in silence, 4 of 10 steps x10."""
    if min(len(new_s), len(old_s)) < MIN_TIME_STEPS or machine.python_tracer or machine.gpu_unreliable:
        return None
    if machine.pooled or machine.compiled_in or machine.contended:
        return None
    top = max(old_s)
    margin = _margin(top if step_ms is None else step_ms, rule)
    slow = [i for i, t in enumerate(new_s) if t >= MEDIAN_MOVE * top and t > top + margin]
    period = fixed_period(slow)
    if len(slow) < PERIODIC_STEPS or len(slow) > len(new_s) - 2 or period is None:
        return None
    if len(old_s) < 2 * period:  # a baseline shorter than two periods may have missed its slow steps
        return None
    slow_ms = [new_s[i] for i in slow]
    why = (
        f"{PERIODIC_WHY} ({len(slow)} of {len(new_s)} steps, every {ordinal(period)}: "
        f"{min(slow_ms):.3f}-{max(slow_ms):.3f} ms vs up to {top:.3f} ms) while the fastest steps did not fail the "
        "time rule, and time is judged on the fastest: steps that do other work (an input that grows every few "
        "calls, a branch taken every few steps)"
    )
    what = " outside the ops" if step_ms is not None else ""
    message = f"{name}: up to {max(slow_ms):.3f} ms in a step{what} vs baseline up to {top:.3f} ms (inconclusive: {why}){where}"
    return Verdict(TIME, INCONCLUSIVE, message, name, top, median(slow_ms), None, why, SOME_STEPS_FIX)


SOME_STEPS_FIX = (
    "find the slow steps in its trace (--opprof-trace=all --opprof-trace-dir DIR); if the change is intended, record "
    "it: pytest --opprof-update-baseline=all with the test's id"
)


def _too_few_kept(new: OpEntry, old: OpEntry) -> bool:
    """Whether leaving out the steps that lost kernel records left too few on a side for a time
    verdict (MIN_TIME_STEPS), where each side had enough."""
    if (
        not (any(new.records_lost) or any(old.records_lost))
        or min(len(new.time_samples), len(old.time_samples)) < MIN_TIME_STEPS
    ):
        return False
    return min(len(new.judged_samples), len(old.judged_samples)) < MIN_TIME_STEPS


def _lost_steps_verdict(name: str, new: OpEntry, old: OpEntry, rule: Rule, where: str) -> Verdict | None:
    """An op too few of whose steps kept their kernel records: inconclusive where its median time
    moved beyond the tolerance and floor, saying why (a review's x10 slowdown passed in silence
    where a side lost records in all steps but one; with one step left a side, a noisy one failed)."""
    new_ms, old_ms = (median(e.judged_samples or e.time_samples) for e in (new, old))
    if abs(new_ms - old_ms) <= _margin(old_ms, rule):
        return None
    kept = min(len(new.judged_samples), len(old.judged_samples))
    why = (
        f"the device tracer lost kernel records in its steps, {kept} left to judge on a side ({MIN_TIME_STEPS} needed)"
    )
    message = f"{name}: {new_ms:.3f} ms/step vs baseline {old_ms:.3f} ms (medians of the steps kept); inconclusive: {why}{where}"
    return Verdict(TIME, INCONCLUSIVE, message, name, old_ms, new_ms, None, why, RECORDS_LOST_FIX)


def _in_one_step(
    current: BaselineDoc, baseline: BaselineDoc, rule: Rule, machine: Machine, skip: set[str], where: str
) -> list[Verdict]:
    """An op that ran in one step where the baseline never ran it is no structure (a background
    thread's op can land in a step by its timing), nor seen by the per-step minima; one that cost
    more there than the tolerance of the baseline's fastest step and the floor is a time verdict,
    which the machine may excuse (a trial's 20 matmuls in one of 10 steps, 100x a step, passed)."""
    walls = baseline.wall_ms or ()
    if len(walls) < SOMETIMES_STEPS:
        return []
    step_ms = min(walls)
    limit = _margin(step_ms, rule)
    found = []
    for name in sorted(set(current.ops) - set(baseline.ops) - skip):  # skip: times moved with the threads
        entry, cost = current.ops[name], step_cost_ms(current.ops[name])
        if steps_run(entry) != 1 or cost <= limit or ignored(name, rule.ignore_ops):
            continue
        change = f"{name}: ran in 1 of {len(entry.calls_per_step)} steps, {cost:.3f} ms there, where the baseline never ran it"
        compiling = _compiling_step(entry, machine)
        if compiling is not None:  # torch's dispatch wrappers around a first call (the compilation warning)
            why = f"it ran only in step {compiling + 1}, where torch.compile compiled: {COMPILED_STEP_WHY}"
            found.append(
                Verdict(
                    TIME,
                    INCONCLUSIVE,
                    f"{change} (inconclusive: {why}){where}",
                    name,
                    None,
                    cost,
                    None,
                    why,
                    WARM_UP_FIX,
                )
            )
            continue
        stretch = 1 + cost / step_ms if step_ms > 0 else math.inf  # what it made of its step
        excuse = explained_by_machine(
            True, entry.on_device, current, baseline, machine, moved=stretch,
            added_ms=cost / len(entry.calls_per_step), slack=WALL_SLACK, blas=name in WORKLOAD_OPS,
        )  # fmt: skip
        if excuse:
            message = f"{change} (inconclusive: {excuse.why}){where}"
            found.append(Verdict(TIME, INCONCLUSIVE, message, name, None, cost, None, excuse.why, excuse.fix))
        else:
            too_little = (
                ""
                if entry.on_device
                else (
                    threads_too_little(stretch, current, baseline, WALL_SLACK)
                    + capability_too_little(stretch, current, baseline, WALL_SLACK, name)
                    + machine_too_little(stretch, current, baseline, WALL_SLACK)
                )
            )
            message = f"{change} (limit {limit:.3f} ms in a step{too_little}){where}"
            found.append(Verdict(TIME, REGRESSED, message, name, None, cost))
    return found


COMPILED_STEP_WHY = (
    "a first call runs through its dispatch wrappers (PythonDispatchMode), so what ran there depends on what "
    "compiled before (test order, -k)"
)


WARM_UP_FIX = "warm up with the inputs the steps use (opprof.run(fn, warmup=1))"


def _compiling_step(entry: OpEntry, machine: Machine) -> int | None:
    """The step (by position) an op that ran in one step ran in, where torch.compile compiled in it."""
    ran = next((i for i, calls in enumerate(entry.calls_per_step) if calls), None)
    return ran if ran is not None and ran in machine.compiled_in else None


def _ops_added_ms(current: BaselineDoc, baseline: BaselineDoc) -> float:
    """What the ops' own slowdowns add to a step: each op's per-step minimum over the baseline's,
    summed over the ops that got slower by any amount (within the tolerance or the floor, ignored
    or not) and nested ones too (`aten::linear` and the `aten::addmm` inside it): a generous
    account, so that only time outside every op is judged on the wall (a +21% addmm under the
    floor failed a trial's unchanged code on the wall)."""
    added = 0.0
    for name in set(current.ops) & set(baseline.ops):
        new, old = current.ops[name].time_samples, baseline.ops[name].time_samples
        if new and old:
            added += max(0.0, min(new) - min(old))
    return added


def _wall_unjudged(current: BaselineDoc, baseline: BaselineDoc, rule: Rule) -> bool:
    """Whether the wall is not judged: for a baseline without the time outside the ops, an op
    whose time is ignored ran on one side only (its time is unknown on the other); or on a device
    the wall holds the wait for the device's work,
    other processes' kernels included (xdist workers sharing a GPU), which no CPU-side reading
    excuses."""
    if current.on_device or baseline.on_device:
        return True
    if current.outside_ms and baseline.outside_ms:
        return False  # the time outside the ops holds no op's, ignored or not
    return any(ignored(name, rule.ignore_ops) for name in set(current.ops) ^ set(baseline.ops))


def _judged(
    name: str,
    new_s: list[float],
    old_s: list[float],
    on_device: bool,
    docs: tuple[BaselineDoc, BaselineDoc],
    rule: Rule,
    machine: Machine,
    where: str,
    wall: bool = False,
    explained_ms: float = 0.0,
    outside: tuple[list[float], list[float]] | None = None,
    base: float | None = None,
    of: str = "baseline",
) -> Verdict | None:
    """One time verdict on per-step samples (an op's, or with `wall` the steps' wall times), None
    when the move is within the tolerance or the floor, or not significant. For the wall, the
    move judged is its time outside the top-level ops (`outside`: each side's per step), or for
    a baseline without them, what is left of its slowdown beyond `explained_ms`, what slower ops
    add to each step. `base`, `of`: the baseline time the message and the verdict give, and what
    they call it, where that is not the file's minimum (_said_base): the move is judged, and
    excused, on the file's own measurement, whose machine references and step walls are its own."""
    if not new_s or not old_s:
        return None
    new_min, old_min = min(new_s), min(old_s)
    move = _own_move(new_s, old_s, explained_ms, outside)
    own = move.own
    if abs(own) <= _margin(old_min, rule):
        return None  # a baseline of 0 ms (a hand edit, or device time in no step) is judged: any move is beyond it
    slower = own > 0
    real, p = _significant(move.new, move.old) if slower else _significant(move.old, move.new)
    if not real:
        return None
    moved = (old_min + own) / old_min if old_min > 0 else math.inf
    slack = WALL_SLACK if wall else OP_SLACK
    excuse = explained_by_machine(
        slower, on_device, *docs, machine, python_time=wall, moved=moved, added_ms=own, slack=slack,
        blas=name in WORKLOAD_OPS,
    )  # fmt: skip
    traced = machine.python_tracer is not None  # a tracer slows the Python in the rest of the step
    steady = ""
    if excuse is None and slower and not wall and not on_device and not traced:
        excuse = _rest_slowed_alike(name, *docs, new_min, old_min, moved, rule)
        if excuse is not None and (steady := _steady_product(name, *docs)):
            excuse = None  # the step slowed as a whole where the machine, on the test's own product, did not
    if base is not None:  # past its recorded range, said from the range's fastest, as the op table shows it
        old_min = base
    change = _change_text(name, new_min, old_min, move, outside is not None, rule.tolerance, of)
    if outside is not None:  # the verdict's figures are the time outside the ops, as its message leads with
        new_min, old_min = min(move.new), min(move.old)
    if excuse:
        message = f"{change}; inconclusive: {excuse.why}){where}"
        return Verdict(TIME, INCONCLUSIVE, message, name, old_min, new_min, p, excuse.why, excuse.fix)
    limit = (
        f"{_wall_clause(slower, explained_ms, outside is not None)}; " if wall else ""
    ) + f"limit {'+' if slower else '-'}{100 * rule.tolerance:.0f}%, p={p:.3g}"
    if slower and not on_device:
        limit += (
            ("" if wall else threads_too_little(moved, *docs, slack) + capability_too_little(moved, *docs, slack, name))
            + contention_too_small(machine, own, *docs)
            + machine_too_little(moved, *docs, slack, wall)
            + steady
        )
    return Verdict(TIME, REGRESSED if slower else IMPROVED, f"{change}; {limit}){where}", name, old_min, new_min, p)


def _within_reach(new_min: float, recorded: tuple[float, float], rule: Rule) -> bool:
    """Whether an op's time is judged by its recorded range (OpEntry.recorded_range): no faster
    than the range's fastest less its tolerance and floor, no slower than its slowest plus them.
    Beyond either end the plain rule judges (a gain; a regression, confirmed)."""
    fastest, slowest = recorded
    return fastest - _margin(fastest, rule) <= new_min <= slowest + _margin(slowest, rule)


def _within_range(
    name: str, new_min: float, old_min: float, recorded: tuple[float, float], rule: Rule, where: str
) -> Verdict | None:
    """An op's time within reach of its recorded range: within the tolerance and the floor of its
    baseline, or faster, no verdict (nothing gained); slower than that, an inconclusive verdict.
    The baseline judged from is the written first measurement, or where that came in a slow
    spell (beyond the tolerance of the range's fastest) the fastest: judged from such a first,
    a real x1.86 passed in silence (a review); judged always from the fastest, 51 of 192 idle
    test runs read inconclusive (`python bench/idle_runs.py`)."""
    fastest, slowest = recorded
    base = judged_base(old_min, recorded, rule)
    limit = slowest + _margin(slowest, rule)
    if new_min <= base + _margin(base, rule):
        return None
    percent = _pct(100 * (new_min - base) / base, rule.tolerance) if base > 0 else "from 0"
    of = "baseline" if base == old_min else _slow_spell_base(old_min)
    why = (
        f"its baseline's measurements of the same code ranged {fastest:.3f}-{slowest:.3f} ms on this machine; "
        f"this time is within the slowest and its tolerance (up to {limit:.3f} ms)"
    )
    message = f"{name}: {new_min:.3f} ms/step vs {of} {base:.3f} ms ({percent}, slower; inconclusive: {why}){where}"
    return Verdict(TIME, INCONCLUSIVE, message, name, base, new_min, None, why, RANGE_FIX)


def unconfirmed_slower(comparison: Comparison, why: str, fix: str, path: str = "") -> Comparison:
    """`comparison` with its slower time verdicts inconclusive, for `why` with `fix`: one
    measurement, maybe in a slow spell, is all there is (every confirmation ran other work than
    the first, or none could be taken). Failing on it would fail unchanged code in a slow spell."""
    where = f" [{path}]" if path else ""

    def made(v: Verdict) -> Verdict:
        if v.kind != TIME or v.status != REGRESSED:
            return v
        message = f"{v.message.removesuffix(where)}; inconclusive: {why}{where}"
        return replace(v, status=INCONCLUSIVE, message=message, why=why, fix=fix)

    return replace(comparison, verdicts=tuple(made(v) for v in comparison.verdicts))


def _said_base(old_s: list[float], recorded: tuple[float, float] | None, rule: Rule) -> tuple[float | None, str]:
    """The baseline time a verdict past an op's recorded range gives, and what it calls it: None
    (the file's minimum), or where that came in a slow spell (judged_base) the range's fastest, as
    the op tables' delta and a verdict within the range give it (a trial's failure said `+42%` vs
    the file's 0.306 ms where the table beside it said `+94%` vs the range's 0.249). Whether there
    is a verdict, and what excuses it, stays the file's measurement's to say: a review found an
    excuse lost where the file's step walls met the range's fastest."""
    old_min = min(old_s) if old_s else 0.0
    base = judged_base(old_min, recorded, rule)
    if base == old_min or old_min <= 0:
        return None, "baseline"
    return base, _slow_spell_base(old_min)


def _slow_spell_base(old_min: float) -> str:
    return f"the fastest of its baseline's measurements (the file's {old_min:.3f} ms came in a slow spell)"


def judged_base(old_min: float, recorded: tuple[float, float] | None, rule: Rule) -> float:
    """The baseline time an op is judged from: the file's minimum, or where its recorded range
    shows that came in a slow spell (beyond the tolerance of the range's fastest), the fastest:
    the op tables show it too (a newcomer trial's read `+17%` where the verdict judged +101%)."""
    if recorded is None:
        return old_min
    fastest = recorded[0]
    return old_min if old_min <= fastest + _margin(fastest, rule) else fastest


def _margin(ms: float, rule: Rule) -> float:
    """How far a time may move from `ms` unjudged: the tolerance's share of it, or the floor."""
    return max(rule.min_delta_ms, rule.tolerance * ms)


_RANGE_WHY = re.compile(
    r"^its baseline's measurements of the same code ranged (?P<span>[\d.]+-[\d.]+ ms) on this machine; "
    r"this time is within the slowest and its tolerance \(up to (?P<limit>[\d.]+ ms)\)$"
)


def range_span(why: str | None) -> str | None:
    """`0.547-75.230 ms, up to 90.276 ms` of an inconclusive verdict's `why` that a recorded range
    gave (_within_recorded_range), for a line naming several ops' ranges; None for another why."""
    found = _RANGE_WHY.match(why or "")
    return f"{found['span']}, up to {found['limit']}" if found else None


AROUND_CHANGE_FIX = (
    "the test's structure or work changed too, and an op around a changed one takes its time: judge it again "
    "once the change is recorded (pytest --opprof-update-baseline with the test's id)"
)


RANGE_FIX = (
    "to judge a move this size, record the baseline again where the op's time holds steadier (a dedicated "
    "runner, not a shared VM): pytest --opprof-update-baseline=all with the test's id"
)


class _Move(NamedTuple):
    """What a time verdict judges: the move in ms (+ slower), and the samples that show it."""

    own: float
    new: list[float]
    old: list[float]


def _own_move(
    new_s: list[float], old_s: list[float], explained_ms: float, outside: tuple[list[float], list[float]] | None
) -> _Move:
    """The per-step time outside the top-level ops, where both sides have it (the wall's own
    move, exactly); else the samples' move beyond what slower ops add (`explained_ms`)."""
    if outside is not None:
        new_out, old_out = outside
        return _Move(min(new_out) - min(old_out), new_out, old_out)
    delta = min(new_s) - min(old_s)
    own = max(0.0, delta - explained_ms) if delta > 0 else delta  # what no slower op accounts for
    return _Move(own, [x - explained_ms for x in new_s] if own > 0 else new_s, old_s)


def _change_text(
    name: str, new_min: float, old_min: float, move: _Move, outside: bool, tolerance: float, of: str = "baseline"
) -> str:
    """`aten::addmm: 1.700 ms/step vs baseline 0.500 ms (+240%, slower`; for the wall judged
    outside the ops, its time there and its move as a share of the baseline's step
    (`step wall: 1.430 ms/step outside the ops vs baseline 0.300 ms (+1.130 ms: +103% of its 1.100 ms step, slower`)."""
    way = "slower" if move.own > 0 else "faster"
    if outside:
        # with the ms: the share alone read as the time outside's own change (a trial)
        share = (
            f": {_pct(100 * move.own / old_min, tolerance)} of its {old_min:.3f} ms step" if old_min > 0 else " from 0"
        )
        share = f"{move.own:+.3f} ms{share}"
        return f"{name}: {min(move.new):.3f} ms/step outside the ops vs baseline {min(move.old):.3f} ms ({share}, {way}"
    percent = _pct(100 * (new_min - old_min) / old_min, tolerance) if old_min > 0 else "from 0"
    return f"{name}: {new_min:.3f} ms/step vs {of} {old_min:.3f} ms ({percent}, {way}"


def _pct(percent: float, tolerance: float) -> str:
    """`+24%`; with a decimal where whole percents would read as the limit itself (a trial's
    `+20%, slower; limit +20%` was +20.4%)."""
    whole = f"{percent:+.0f}%"
    return f"{percent:+.1f}%" if round(abs(percent)) == round(100 * tolerance) else whole


def _wall_clause(slower: bool, explained_ms: float, outside: bool) -> str:
    if outside:
        return OUTSIDE_WENT[slower]
    return _outside_ops(slower, explained_ms)


def _rest_slowed_alike(
    name: str, current: BaselineDoc, baseline: BaselineDoc, new_min: float, old_min: float, moved: float, rule: Rule
) -> Excuse | None:
    """The test's own control: the rest of its step (the fastest step's wall outside this op, nested
    ops included in the op) slowed beyond the tolerance, and by at least half as much as the op
    (WALL_SLACK) or by more milliseconds than the op, and by no more than SPELL_LIMIT: the whole step slowed together, with the same
    calls and work, as on a machine in a slow spell that the references, small enough to stay in
    cache, do not see (a trial's 18 ms convolution step: +33% with the step's other ops, in 12 of 20
    idle runs of unchanged code; its memory-bound ReLU x3.7, +1.7 ms of the step's +10). A change to
    this op alone leaves the rest as it was. None where the rest is too small a part of the step to
    tell (an op that is the whole step), or the wall was not measured."""
    new_walls, old_walls = current.wall_ms, baseline.wall_ms
    if not new_walls or not old_walls:
        return None
    rest_old, rest_new = min(old_walls) - old_min, min(new_walls) - new_min
    if rest_old < REST_SHARE * min(old_walls) or rest_old <= 0 or rest_new - rest_old <= rule.min_delta_ms:
        return None
    ratio = rest_new / rest_old
    alike = within_slowdown(moved, ratio, WALL_SLACK) or new_min - old_min <= rest_new - rest_old
    if ratio - 1 <= rule.tolerance or not alike or ratio > SPELL_LIMIT:
        return None
    why = (
        f"{REST_WHY} ({speed_words(ratio)} outside {name}, with the same calls and work): "
        "the machine, or a change to more than this op"
    )
    return Excuse(why, REST_FIX)


def _steady_product(name: str, current: BaselineDoc, baseline: BaselineDoc) -> str:
    """For the op the workload reference replays (the test's costliest product, alone on its
    inputs), where the replay ran within its noise of the baseline's: the clause saying the
    machine did not slow that op, so a step slower as a whole is the code's doing (a trial's
    `set_detect_anomaly(True)` made every op slower, each excused by the others as "the rest of
    the step slowed alike"). Empty for other ops (a cache-resident replay does not see a spell
    that slows a memory-bound convolution), where there is no such reference, or it moved."""
    replayed = workload_ratio(current, baseline)
    if replayed is None or replayed[0] != name or not 1 / STATE_NOISE <= replayed[1] <= STATE_NOISE:
        return ""
    return (
        f"; the whole step slowed, but the test's {name} replayed alone on its inputs ran {replayed[1]:.2f}x its "
        "baseline time: not the machine"
    )


def _outside_ops(slower: bool, explained_ms: float) -> str:
    if slower and explained_ms > 0:
        return (
            f"the ops' own slowdowns account for {explained_ms:.3f} ms of it: the rest went outside "
            "them (Python code, hooks, data preparation, a wait for another thread or process)"
        )
    return OUTSIDE_OPS[slower]
