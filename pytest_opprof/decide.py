"""One measured test against its baseline: compare, confirm, write or keep.

`decide` is pure; `baseline_step` reads the file, decides, writes what was decided and returns
a typed `BaselineResult` that the plugin turns into a pytest outcome and the terminal summary
(summarylines, verdictlines) renders.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .baseline import (
    CONFLICT_FIX,
    UNUSABLE_FIX,
    UNUSABLE_WHILE_RECORDING_FIX,
    BaselineError,
    read_baseline,
    write_baseline,
)
from .compare import compare, merge_measurements, work_changes
from .documents import BaselineDoc
from .errors import (
    RECORD_AGAIN_FIX,
    RECORD_COMMAND,
    SAME_WORK_FIX,
    OpprofError,
    baseline_required,
    cannot_write,
    capture_moved,
    conflict_fix,
    raised_confirming,
    record_if_intended,
    strict_inconclusive,
    unconfirmable,
)
from .excuses import QUIET_MACHINE_FIX, TRACER_FIX, recorded_under_load
from .leakmessages import settings_left_fix, threads_left_fix
from .rules import STRUCTURE, TIME, WORK, Rule
from .textout import shell_quote
from .timing import judged_base, unconfirmed_slower
from .torchstate import Left
from .units import count_of, first_three
from .verdicts import CHANGED as VERDICT_CHANGED
from .verdicts import (
    MIN_TIME_STEPS,
    REGRESSED,
    SPELL_LIMIT,
    Comparison,
    Ignore,
    Machine,
    Places,
    Verdict,
    ignored,
    median_calls,
)

# Baseline statuses: what the baseline step found and did.
MISSING, NEW, UNRELIABLE, COMPARED, KEPT, CHANGED, REWRITTEN, RENUMBERED = (
    "missing",
    "new",
    "unreliable",
    "compared",
    "kept",
    "changed",
    "rewritten",
    "renumbered",  # its times kept, the number of the test's capture it holds written (CaptureMoved)
)
TIMES_WRITTEN = (NEW, CHANGED, REWRITTEN)  # statuses of a file this run wrote its times into


@dataclass(frozen=True, slots=True)
class Measurement:
    """A measurement as a baseline document, and the machine's state while it ran."""

    doc: BaselineDoc
    machine: Machine = field(default_factory=Machine)
    # where an op ran in the measurement (`in aten::to <- aten::linear; inputs float[4, 8]`), for a
    # structure verdict's added op; None where the measurement holds no events (a document alone)
    places: Places | None = None


@dataclass(frozen=True, slots=True)
class CaptureMoved:
    """The baseline holds another of the test's captures than its latest: `was` (None: the file
    did not say, a later capture is then its own), `now`."""

    was: int | None
    now: int

    def to_dict(self) -> dict[str, Any]:
        return {"was": self.was, "now": self.now}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CaptureMoved | None:
        return None if data is None else cls(data.get("was"), data["now"])


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the baseline step decided for one test."""

    status: str
    comparison: Comparison = field(default_factory=Comparison)
    remeasured: str | None = None  # "confirmed" | "not confirmed": later measurements were judged
    write: BaselineDoc | None = None  # the document to write to the baseline file; None: leave it
    old_schema: int | None = None  # the baseline file's schema, when one was compared
    measurements: int = 1  # the first and its confirmations
    unconfirmed: tuple[str, ...] = ()  # ops the first measurement's time verdicts named, not confirmed
    recorded_from: int = 0  # the measurements the written document's recorded ranges span (0: none written)
    unrepeated: tuple[str, ...] = ()  # ops whose calls differed in a further measurement, left out for it
    capture_moved: CaptureMoved | None = None  # the baseline held another of the test's captures
    written_from: int = 1  # which measurement the written document is: a later one where the first waited for a CPU
    written_wait: float | None = None  # the written measurement's share of CPU wait
    unrecordable: str | None = None  # UNRELIABLE: why nothing was written (Machine.unrecordable)
    written_slowed: Slowed | None = None  # the written measurement's references ran slower than a calm one's
    first_slowed: float | None = None  # written from a later one: how much slower the first's references ran
    traced_first: str | None = None  # the Python tracer the first measurement ran under, its confirmations without it


def decide(
    current: Measurement,
    old: BaselineDoc | None,
    rule: Rule,
    update: str | None,
    remeasure: Callable[[], Measurement | None] | None = None,
    path: str = "",
) -> Outcome:
    """The outcome for `current` against the baseline document `old` (None: no baseline).

    `update`: None compares only, "changed" writes new and changed baselines, "all" every one.
    `remeasure` measures the test once more (run() captures only); it is called when a time
    verdict alone would fail the test or rewrite its baseline, and before a baseline is written
    (RANGE_MEASUREMENTS times: `recorded`)."""
    if old is not None and current.machine.settings_left and old.threads == current.doc.threads:
        # on a leaked count that is the baseline's own (the test sets it itself): recording keeps it
        kept = tuple(_but_threads_of(found, old.threads) for found in current.machine.settings_left)
        current = replace(current, machine=replace(current.machine, settings_left=tuple(k for k in kept if k)))
    if old is None:
        if not update:
            return Outcome(MISSING)
        if current.machine.unrecordable:  # never record throttled or traced numbers as the reference
            return Outcome(UNRELIABLE, unrecordable=current.machine.unrecordable)
        further = Further(remeasure)
        new = recorded(current, further, rule.ignore_ops)
        return Outcome(
            NEW, write=new.doc, recorded_from=new.span, unrepeated=new.doc.unrepeated,
            written_from=new.position, written_wait=new.wait, written_slowed=new.slowed, first_slowed=new.first_slowed,
        )  # fmt: skip
    comparison = compare(current.doc, old, rule, path, current.machine, places=current.places)
    moved = moved_capture(old, current.doc, update)
    if moved is not None and not update and TIME in rule.fail_on:  # run() judged no capture: none to confirm
        why = capture_moved(old.number or 1, moved.now)
        comparison = unconfirmed_slower(comparison, why, RECORD_AGAIN_FIX, path)
    confirmation = Confirmation(comparison)
    updating = update == "changed" and not current.machine.unrecordable
    further = Further(remeasure)  # the confirmations' measurements serve the ranges too
    if remeasure is not None and update != "all" and _confirms(comparison, rule, updating, current.machine, not update):
        confirmation = _confirm(current, old, rule, path, further, updating, comparison)
    first_slower = slower(comparison)  # a slow state of the machine: nothing is written from it
    comparison, remeasured = confirmation.comparison, confirmation.remeasured
    write = _to_write(comparison, update, current, remeasured, first_slower)
    status = _status(comparison, update, current, write, moved)
    written: Written | None = None
    if write is not None:
        written = recorded(current, further, rule.ignore_ops, old)  # the first (or first calm), with its ops' ranges
        write = written.doc
    elif (
        status == RENUMBERED
    ):  # the number alone: the times stay the baseline's (a slow first measurement inflates none)
        write = old.replace(number=current.doc.number)
    # the confirmations' and the ranges' (the written file's, where one was written from them)
    unrepeated = write.unrepeated if written and write else _unrepeated_in(current, further, rule.ignore_ops)
    unconfirmed = confirmation.unconfirmed
    untraced = remeasured is not None and all(m.machine.python_tracer is None for m in further.taken)
    return Outcome(
        status, comparison, remeasured, write, old.schema, confirmation.measurements, unconfirmed,
        written.span if written else 0, unrepeated, moved,
        written_from=written.position if written else 1, written_wait=written.wait if written else None,
        unrecordable=current.machine.unrecordable if status == UNRELIABLE else None,
        written_slowed=written.slowed if written else None, first_slowed=written.first_slowed if written else None,
        traced_first=current.machine.python_tracer if untraced else None,
    )  # fmt: skip


def moved_capture(old: BaselineDoc, current: BaselineDoc, update: str | None) -> CaptureMoved | None:
    """Where the baseline holds another of the test's captures than `current`, its latest. A
    file without a number is older than numbers: comparing, it is taken as this capture (every
    run() is judged, as before); recording, a later capture than the first writes its number."""
    now = current.number or 1
    if old.number == now or (old.number is None and (not update or now == 1)):
        return None
    return CaptureMoved(old.number, now)


RANGE_MEASUREMENTS = 3  # more measurements of a test whose baseline is written, for its ops' recorded ranges


class Further:
    """The further measurements of one test, each taken once, in order: the confirmations and
    the recorded ranges share them (a recording run's run() took them ahead, in the test's
    context). `at(i)` is None past the last one `remeasure` could take."""

    def __init__(self, remeasure: Callable[[], Measurement | None] | None) -> None:
        self._remeasure, self._taken, self._ended = remeasure, list[Measurement](), remeasure is None

    @property
    def taken(self) -> tuple[Measurement, ...]:
        """The further measurements taken so far."""
        return tuple(self._taken)

    def at(self, index: int) -> Measurement | None:
        while len(self._taken) <= index and not self._ended and self._remeasure is not None:
            again = self._remeasure()
            if again is None:
                self._ended = True
            else:
                self._taken.append(again)
        return self._taken[index] if index < len(self._taken) else None

    @property
    def possible(self) -> bool:
        return self._remeasure is not None


# Slowed.than: the baseline a recording replaced, another measurement, the run's other recordings
REPLACED, MEASURED, RUN = "replaced", "measured", "run"


@dataclass(frozen=True, slots=True)
class Slowed:
    """A written measurement's machine references (matmul and dispatch) ran `factor` times slower
    than those of `than` (REPLACED: the baseline the recording replaced, on the same machine setup
    and torch; MEASURED: another measurement of the test in this recording): a spell of other
    load its threads' CPU wait did not show, which inflated its times. A trial's recording under
    load wrote a workload reference of 5.278 ms (0.065 ms calm) and said nothing; only the next
    run did."""

    factor: float
    than: str

    def to_dict(self) -> dict[str, Any]:
        return {"factor": self.factor, "than": self.than}

    @classmethod
    def from_dict(cls, data: Any) -> Slowed | None:
        if not isinstance(data, dict) or not isinstance(data.get("factor"), (int, float)):
            return None
        return cls(float(data["factor"]), str(data.get("than") or MEASURED))


@dataclass(frozen=True, slots=True)
class References:
    """A written document's fixed machine references (ms; None: not taken), which the run's lines
    hold against its other recordings' (summarylines.run_spells)."""

    dispatch_ms: float | None
    matmul_ms: float | None

    @classmethod
    def of(cls, doc: BaselineDoc) -> References:
        return cls(doc.dispatch_reference_ms, doc.reference_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"dispatch_ms": self.dispatch_ms, "matmul_ms": self.matmul_ms}

    @classmethod
    def from_dict(cls, data: Any) -> References | None:
        if not isinstance(data, dict):
            return None
        found = [data.get(key) for key in ("dispatch_ms", "matmul_ms")]
        return cls(*(float(v) if isinstance(v, (int, float)) else None for v in found))


@dataclass(frozen=True, slots=True)
class Written:
    """What a recording writes: the document, how many measurements its ops' ranges span (1:
    none), which measurement it is (1: the first), that one's share of CPU wait, whether its
    references ran slower than a calm one's, and where it is a later one, how much slower the
    first's did (None: the first was passed over for waiting for a CPU, or is written)."""

    doc: BaselineDoc
    span: int
    position: int = 1
    wait: float | None = None
    slowed: Slowed | None = None
    first_slowed: float | None = None


def recorded(
    current: Measurement, further: Further, ignore: tuple[str, ...] = (), old: BaselineDoc | None = None
) -> Written:
    """The document to write for `current`, with its ops' recorded ranges.

    One measurement is one spell of the machine: on a 2-vCPU VM a parallel op ran x1.5-3 slower
    in spells (bench/spells.py), and a baseline recorded in a fast one failed later runs of
    unchanged code that all fell in slow ones (3 of 24 idle runs). So a run() capture judged on
    time is measured up to RANGE_MEASUREMENTS more times, and each op keeps the range of its
    per-step minima over them (`with_recorded_ranges`). The written one is the first, or the
    first calm one where the first was loaded (`_calm_base`: contended, or its references ran x2
    slower than another's). A measurement on throttled GPU clocks, or one contended by other load
    or whose references ran x4 slower than another's (beyond this VM's spells), is left out of the
    ranges: it tells of the other load, not of this machine, and would widen them (a loaded
    written one gets none). `old`: the baseline the recording replaces,
    whose references tell whether the written one ran under load (Written.slowed)."""
    if not further.possible or current.doc.steps < MIN_TIME_STEPS:
        slowed = _slowed_than(current, [], old)
        return Written(_with_wait(current.doc, current.machine), 1, 1, current.machine.cpu_wait, slowed)
    taken = [current, *_further_taken(further)]
    usable = [i for i, m in enumerate(taken) if i == 0 or not m.machine.gpu_unreliable]
    at = usable[_calm_base([taken[i] for i in usable], ignore)]
    base, others = taken[at], [taken[i] for i in usable if i != at]
    ranging = _ranging([base, *others])
    docs = [base.doc] + [m.doc for m, ranges in zip(others, ranging[1:]) if ranges and ranging[0]]
    doc, span = with_recorded_ranges(docs, ignore)
    doc = doc.replace(unrepeated=_unrepeated_in(current, further, ignore))  # later runs' work verdicts say it
    passed_over = None if at == 0 or current.machine.contended else _slowed(current, [base, *others])
    first_slowed = round(passed_over, 1) if passed_over else None  # as _calm_base read it
    slowed = _slowed_than(base, others, old)
    return Written(_with_wait(doc, base.machine), span, at + 1, base.machine.cpu_wait, slowed, first_slowed)


def _slowed(measurement: Measurement, others: Iterable[Measurement]) -> float | None:
    """How many times slower `measurement`'s references ran than the calmest of `others`' on the
    same machine setup and torch, where x2 or more on both fixed references
    (excuses.recorded_under_load); None where they ran alike as far as they tell."""
    found = [f for o in others if (f := recorded_under_load(o.doc, measurement.doc))]
    return max(found, default=None)


def _slowed_than(written: Measurement, taken: list[Measurement], old: BaselineDoc | None) -> Slowed | None:
    """Whether the written measurement ran under load by its references: against the baseline
    it replaces first (what the user knows the machine for), else the test's other measurements."""
    replaced = recorded_under_load(old, written.doc) if old is not None else None
    if replaced:
        return Slowed(round(replaced, 1), REPLACED)
    measured = _slowed(written, taken)
    return Slowed(round(measured, 1), MEASURED) if measured else None


def _loaded(measurement: Measurement, among: Iterable[Measurement]) -> bool:
    """Whether a measurement ran under other load: its threads waited for a CPU (contended), or
    its references ran x2 slower than another measurement's of the test (a spell the CPU wait did
    not see: another tenant of the VM's host)."""
    return measurement.machine.contended or _slowed(measurement, among) is not None


def _with_wait(doc: BaselineDoc, machine: Machine) -> BaselineDoc:
    """The document to write, holding its measurement's CPU wait where that was contended: a
    later run names the baseline as recorded under load (a trial's said so only while recording)."""
    wait = float(f"{machine.cpu_wait:.4g}") if machine.contended and machine.cpu_wait is not None else None
    return doc.replace(recorded_wait=wait)


def _further_taken(further: Further) -> list[Measurement]:
    """The further measurements a recording takes: up to RANGE_MEASUREMENTS, fewer where they end."""
    taken = []
    for index in range(RANGE_MEASUREMENTS):
        again = further.at(index)
        if again is None:
            break
        taken.append(again)
    return taken


def _calm_base(measurements: list[Measurement], ignore: tuple[str, ...]) -> int:
    """Which measurement to write: the first, or where it ran under load (`_loaded`: its threads
    waited for a CPU, or its references ran x2 slower than another's), the first later one that
    did not and measured the same work. A trial recorded on a loaded
    2-vCPU runner: the file held the first, contended measurement (aten::addmm 11.56 ms against
    0.39 ms in a calm one), and every later slowdown up to it passed as inconclusive."""
    first = measurements[0]
    if not _loaded(first, measurements):
        return 0
    for index, again in enumerate(measurements[1:], 1):
        if not _loaded(again, measurements) and not unrepeated(first.doc, again.doc, ignore):
            return index
    return 0


def _ranging(taken: list[Measurement]) -> list[bool]:
    """Whether each measurement may take part in the written one's ranges (the written one first:
    where it may not, none may): calm, its threads not waiting for a CPU nor its references running
    SPELL_LIMIT times slower than another measurement's. A contended measurement tells of the other load, not of this machine's spells:
    a trial recording beside four CPU hogs on 2 cores wrote `aten::sigmoid` 0.109-7.152 ms from
    four contended ones, and a real x4.7 slowdown then passed as inconclusive in every calm run.
    One whose references ran x2-4 slower widens them: that is within this VM's slow spells
    (x1.5-3), which the ranges are there to hold where a later run's references miss the spell (a
    review: dropping them failed such a run of unchanged code)."""
    return [not m.machine.contended and (_slowed(m, taken) or 0.0) < SPELL_LIMIT for m in taken]


def with_recorded_ranges(docs: list[BaselineDoc], ignore: tuple[str, ...] = ()) -> tuple[BaselineDoc, int]:
    """The first of measurements of one test, each op with its recorded range: the fastest and
    slowest of its per-step minima over the measurements whose ops, calls and inputs are the first's.
    A later run's slower time within the range is then inconclusive, said with the range, not a
    failure. The first is written, not the fastest: it was taken as a later run's first is, with no
    pause before it, and the machine references written with the times are its own (a fastest
    one's faster references would excuse a later run's slowdowns further)."""
    first = docs[0]
    alike = [doc for doc in docs if not unrepeated(first, doc, ignore)]
    ops = {}
    for name, entry in first.ops.items():
        minima = [min(d.ops[name].judged_samples) for d in alike if name in d.ops and d.ops[name].judged_samples]
        span = (min(minima), max(minima)) if len(minima) > 1 else None
        ops[name] = replace(entry, recorded_range=span)
    return first.replace(ops=ops), len(alike)


def _calls(doc: BaselineDoc) -> dict[str, float]:
    return {name: median_calls(entry) for name, entry in doc.ops.items()}


def unrepeated(first: BaselineDoc, again: BaselineDoc, ignore: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The ops whose calls per step or inputs differ between two measurements of one test,
    sorted, but for those the rule ignores (`ignore`: its globs). A further measurement that ran
    other ops, calls or inputs than the first measured other work: fn's work changed from call
    to call (an EMA update after step 20, a growing cache, a schedule). Pooled with the first, a
    trial's EMA op read as a structure change, and a recording run rewrote a baseline with 3x
    slower times on it; such a measurement is left out of the pooling and the ranges. An op of
    the first in under half its steps (a median of 0 calls) and not in `again` is no other work:
    a one-off of the first measurement, which its own verdicts judge (a trial's 20 matmuls in one
    step fail on time)."""
    a, b = _calls(first), _calls(again)

    def differs(name: str) -> bool:
        return a.get(name, 0.0) != b.get(name, 0.0) or name not in a or _other_inputs(first, again, name)

    return tuple(sorted(name for name in a.keys() | b.keys() if not ignored(name, ignore) and differs(name)))


def _other_inputs(first: BaselineDoc, again: BaselineDoc, name: str) -> bool:
    """Both measurements recorded the op's work, and it differs: a growing cache ran the same
    ops on larger inputs (a trial's KV cache widened a recorded range to 1.0-6.4 ms, and a real
    x4.9 passed within it)."""
    x, y = first.ops.get(name), again.ops.get(name)
    if x is None or y is None or x.work is None or y.work is None:
        return False
    return bool(work_changes(y.work, x.work, lost=(y.lost_per_step, x.lost_per_step)))


def _unrepeated_in(current: Measurement, further: Further, ignore: tuple[str, ...]) -> tuple[str, ...]:
    """The ops whose calls or inputs differed in any further measurement taken of `current`'s test."""
    return tuple(sorted(set().union(*(unrepeated(current.doc, again.doc, ignore) for again in further.taken))))


@dataclass(frozen=True, slots=True)
class Confirmation:
    """What the confirmations of a suspected time change came to."""

    comparison: Comparison  # the pooled samples of every measurement, judged
    remeasured: str | None = None  # "confirmed" | "not confirmed"; None: not measured again
    measurements: int = 1  # the first and its confirmations
    unconfirmed: tuple[str, ...] = ()  # the ops the first one's time verdicts named, when not confirmed


CONFIRMATIONS = 3  # at most this many more measurements of a suspected time change


def _confirm(
    current: Measurement,
    old: BaselineDoc,
    rule: Rule,
    path: str,
    further: Further,
    updating: bool,
    comparison: Comparison,
) -> Confirmation:
    """Measure a suspected time change again, up to CONFIRMATIONS times, judging the pooled
    samples of every measurement so far after each: the first after which the change no longer
    shows ends it, not confirmed.

    Why several: on a 2-vCPU VM a parallel op ran 1.5-3x slower in spells of 0.5-4 s (torch's
    OpenMP workers woken late), every reference unmoved; a single confirmation right after the
    first measurement shared its spell, and an idle trial's unchanged code failed in 4 of 8
    runs. The fixture keeps the CPUs busy before each (fixture.CONFIRM_SETTLE_S), and the pooled
    minimum takes the fastest spell: a slowdown of the code shows in every one."""
    suspected = tuple(v.op for v in [*comparison.changes, *_tracer_excused(comparison)] if v.kind == TIME and v.op)
    tracer_only = not _time_decides(comparison, rule, updating)  # what a tracer excused: judged without it
    pooled, remeasured, measurements, other_work = current, None, 1, set[str]()
    for index in range(CONFIRMATIONS):
        again = further.at(index)
        if again is None or (tracer_only and again.machine.python_tracer):
            break  # traced again (a tracer opprof cannot take off): it tells nothing the first did not
        if again.machine.gpu_unreliable and not current.machine.gpu_unreliable:
            continue  # throttled clocks tell nothing of the code: pooled, they made a real 2x inconclusive (a review)
        if differing := unrepeated(current.doc, again.doc, rule.ignore_ops):
            other_work.update(differing)  # other work than the first's: no confirmation of it
            continue
        measurements += 1
        pooled = Measurement(merge_measurements(pooled.doc, again.doc), calmer(pooled, again), current.places)
        comparison = compare(pooled.doc, old, rule, path, pooled.machine, places=current.places)
        if not _time_decides(comparison, rule, updating):
            return Confirmation(comparison, "not confirmed", measurements, suspected)
        remeasured = "confirmed"
    if measurements == 1 and other_work:  # nothing confirmed or cleared it: one spell is no verdict
        comparison = unconfirmed_slower(comparison, unconfirmable(first_three(sorted(other_work))), SAME_WORK_FIX, path)
    return Confirmation(comparison, remeasured, measurements)


def _confirms(comparison: Comparison, rule: Rule, updating: bool, machine: Machine, comparing: bool) -> bool:
    """Whether to measure a run() capture again: a time verdict alone would decide (_time_decides:
    a regressed op, which under --cov may be a hook's or a custom op's Python, traced: a trial's
    failed unchanged code 6 of 10 runs), or, comparing, a Python tracer (coverage) excused a slower
    step wall (a 3 ms sleep added to each step passed as inconclusive 3 of 3 under --cov). The
    fixture's confirmations run without the tracer, and judge it; one that cannot be taken off
    (cProfile, sys.monitoring) would trace the confirmation too, which then excuses nothing more."""
    if _time_decides(comparison, rule, updating):
        return True
    if not comparing:  # a recording under a tracer writes nothing: no measurement to take (a review's 58 calls)
        return False
    traced = machine.python_tracer is not None and not machine.tracer_stays
    return traced and TIME in rule.fail_on and bool(_tracer_excused(comparison))


def _tracer_excused(comparison: Comparison) -> list[Verdict]:
    """The slower times a Python tracer made inconclusive."""
    return [v for v in comparison.inconclusive if v.kind == TIME and v.fix == TRACER_FIX]


def _time_decides(comparison: Comparison, rule: Rule, updating: bool) -> bool:
    """A conclusive time verdict alone would fail the test, or (updating) rewrite its baseline."""
    if updating:
        return {v.kind for v in comparison.changes} == {TIME}
    return any(v.kind == TIME and v.status == REGRESSED for v in comparison.failing(rule))


def calmer(first: Measurement, second: Measurement) -> Machine:
    """The pooled samples of two measurements are judged by the calmer one's state: a contended
    first measurement must not excuse a clean second one's slowdown (seen: a real 2x missed)."""
    a, b = first.machine, second.machine
    # where one ran under a Python tracer and the other not, the untraced one's wait: the tracer's
    # longer steps inflated the other's ms waited per step, which then excused a real x2 (a review)
    untraced = [m for m in (a, b) if not m.python_tracer] if bool(a.python_tracer) != bool(b.python_tracer) else [a, b]
    waits = [m for m in untraced if m.cpu_wait is not None]
    calm = min(waits, key=lambda m: m.cpu_wait or 0.0) if waits else None
    return Machine(
        calm.cpu_wait if calm else None,
        a.gpu_unreliable or b.gpu_unreliable,
        a.python_tracer if b.python_tracer else None,  # one measured untraced: the tracer explains no pooled minimum
        calm.waited_ms_per_step if calm else None,
        # the pooled steps: the first's, then the second's
        a.compiled_in + tuple(first.doc.steps + step for step in b.compiled_in),
        pooled=True,
        pooled_steps=(a.pooled_steps or (first.doc.steps,)) + (second.doc.steps,),
        settings_left=a.settings_left or b.settings_left,
        env_set_inside=a.env_set_inside,
    )


def _but_threads_of(found: Left, threads: int | None) -> Left | None:
    """A leak the measurement ran on, but for its thread count where that is `threads` (the
    baseline's: the test sets it itself), or None where nothing else is left."""
    return found.without_threads() if found.after.threads == threads != found.before.threads else found


def _status(
    comparison: Comparison,
    update: str | None,
    current: Measurement,
    write: BaselineDoc | None,
    moved: CaptureMoved | None,
) -> str:
    """What happened to the file: compared only, not recorded (throttled GPU), kept, renumbered
    (kept, but of another capture of the test: `moved`), or written (changed, also for `moved`;
    or rewritten unchanged by =all)."""
    if not update:
        return COMPARED
    if current.machine.unrecordable:
        return UNRELIABLE
    if write is None:  # unchanged, inconclusive, or a time change the confirmation did not back
        return KEPT if moved is None else RENUMBERED
    return REWRITTEN if comparison.unchanged and moved is None else CHANGED  # moved: its number changed too


def _to_write(
    comparison: Comparison, update: str | None, current: Measurement, remeasured: str | None, first_slower: bool
) -> BaselineDoc | None:
    """Rewrite only for a structure or work change or a confirmed faster time (or =all): an
    inconclusive or unconfirmed measurement never replaces a baseline, nor does a slower time
    alone (it may be the machine's: a trial's bare re-recording of unchanged code wrote slower
    times into 5 of 16 runs' files; =all with the test's id records an intended slowdown). A
    first measurement that was slower anywhere writes nothing, though its confirmations cleared
    that op and confirmed another's faster time (a review: the file got its slow time then; it
    is now written from fresh measurements, `recorded`, and the guard stays)."""
    if not update or current.machine.unrecordable:
        return None
    if update == "all":
        return current.doc
    kinds = {v.kind for v in comparison.changes}
    if not kinds or (kinds == {TIME} and (remeasured != "confirmed" or first_slower or slower(comparison))):
        return None
    return current.doc


def slower(comparison: Comparison) -> bool:
    """Some conclusive time verdict says slower."""
    return any(v.kind == TIME and v.status == REGRESSED for v in comparison.changes)


UNUSABLE, UNWRITABLE = "unusable", "unwritable"


SPEED = {"regressed": "slower", "improved": "faster"}


def verdict_word(verdict: Verdict) -> str:
    """The verdict column: slower / faster / inconclusive / work changed."""
    if verdict.kind == TIME:
        return SPEED.get(verdict.status, verdict.status)
    return f"{verdict.kind} {verdict.status}"


@dataclass(frozen=True, slots=True)
class OpRow:
    """An op's baseline columns: the baseline's min ms per step (None: the op is new), the
    delta of this run's min in %, and the verdict word."""

    base_min_ms: float | None
    delta_pct: float | None
    verdict: str


WORK_LISTED = 3  # work changes a test's failure lists before a count of the rest


def lets_pass(verdict: Verdict, fails: frozenset[str], compared: bool) -> bool:
    """A structure or work change that a comparison (not a recording run) found and that fail_on
    (`fails`) leaves out: its line says it does not fail the test. The one rule of the terminal,
    the HTML report and BaselineResult."""
    changed = verdict.kind in (STRUCTURE, WORK) and verdict.status == VERDICT_CHANGED
    return changed and compared and verdict.kind not in fails


@dataclass(frozen=True, slots=True)
class BaselineResult:
    """What the baseline step found and did for one test: what the report shows and the JSON
    report and xdist carry (as `to_dict()`)."""

    path: str  # as shown: relative to the rootdir where it can be
    status: str  # missing | new | unreliable | compared | kept | changed | rewritten | renumbered | unusable
    remeasured: str | None = None
    untimed: str | None = None  # why time was not judged
    schema: int | None = None  # the compared file's schema
    verdicts: tuple[Verdict, ...] = ()
    rows: dict[str, tuple[float, list[float]]] = field(default_factory=dict)  # op -> (min ms, calls per step)
    error: str | None = None  # an unusable file: the message that makes the test an error
    ignores: tuple[Ignore, ...] = ()  # the rule's ignore globs and what they matched (when compared)
    lists_unrecorded: tuple[str, ...] = ()  # ops whose list-of-tensors shapes were not compared
    under_load: float | None = None  # the compared baseline's references ran this many times slower
    work_unrecorded: tuple[str, ...] = ()  # ops whose work the baseline lacks: not compared
    measurements: int = 1  # the first and the confirmations of a suspected time change
    unconfirmed: tuple[str, ...] = ()  # ops whose time change the confirmations did not back
    fails: tuple[str, ...] = (STRUCTURE, WORK, TIME)  # the verdict kinds that fail the test (its rule's fail_on)
    recorded_from: int = 0  # a written file: the measurements its ops' recorded ranges span
    unrepeated: tuple[str, ...] = ()  # ops whose calls differed in a further measurement, left out for it
    capture_moved: CaptureMoved | None = None  # the baseline held another of the test's captures
    short_baseline: bool = False  # untimed: the baseline alone holds too few steps
    graph_call_unread: bool = False  # recorded before graph calls were read as ops: CompiledFxGraph not compared
    kernels_dropped: tuple[int, int] = (0, 0)  # launches without a kernel record: this run's, the baseline's
    written_from: int = 1  # a written file: which measurement it holds (a later one where the first waited for a CPU)
    written_wait: float | None = None  # a written file: its measurement's share of CPU wait (None: unknown)
    recorded_wait: float | None = None  # the file read: its capture.cpu_wait (recorded under load), or None
    unrecordable: str | None = None  # status unreliable: why nothing was written (GPU clocks, a Python tracer)
    nodeid: str = ""  # the node id the file is named by and holds (a pytest-repeat repeat's: the test it repeats)
    threads_left_by: str | None = None  # the earlier test that left torch's thread count this test ran on
    settings_left: tuple[Left, ...] = ()  # other torch settings earlier tests left that it ran on
    written_slowed: Slowed | None = None  # a written file: its references ran x2+ slower than a calm one's
    first_slowed: float | None = None  # written from a later measurement: how much slower the first's references ran
    traced_first: str | None = None  # the Python tracer the first measurement ran under, its confirmations without it
    written_references: References | None = None  # a written file: its machine references (ms)
    grad_unrecorded: bool = False  # the file compared holds no autograd record (Comparison.grad_unrecorded)

    @property
    def slower(self) -> bool:
        """Some conclusive time verdict says slower."""
        return slower(Comparison(self.verdicts))

    @property
    def time_fails(self) -> bool:
        """Time is among the checks that fail the test (its rule's fail_on)."""
        return TIME in self.fails

    def lets_pass(self, verdict: Verdict) -> bool:
        """A structure or work change this comparison found that the rule's fail_on leaves out."""
        return lets_pass(verdict, frozenset(self.fails), self.status == COMPARED)

    @property
    def compared(self) -> bool:
        """A baseline was compared with (its rows and verdicts belong in the op tables)."""
        return self.status in ("compared", "kept", "changed", "rewritten", "renumbered")

    def op_row(self, op: str, calls_per_step: float, min_ms: float, on_device: bool = False) -> OpRow:
        """The baseline columns of one op's row in every table (terminal, CSV, HTML)."""
        base, base_calls = self.rows.get(op) or (None, None)
        delta = 100 * (min_ms - base) / base if base else None
        own = next((verdict_word(v) for v in self.verdicts if v.op == op), None)
        if ignored(op, (i.glob for i in self.ignores)):
            verdict = "ignored"  # by the rule's ignore globs: never judged (a trial's read `added` beside a pass)
        elif base_calls is not None and statistics.median(base_calls) != calls_per_step:
            verdict = "calls changed"
        elif (
            own is None
            and base is not None
            and not on_device
            and any(v.kind == WORK and not v.op for v in self.verdicts)
        ):
            verdict = "threads changed"  # the test-wide work verdict: its CPU times were not judged
        elif own is None and op in self.unconfirmed:
            verdict = "not confirmed"  # the row's delta is the first measurement's (a trial: `+28% ok`)
        elif own is None and base is not None and self.untimed:
            verdict = "not judged"  # too few steps for a time verdict: its delta is shown, not judged
        else:
            verdict = own or ("ok" if base is not None else "added")
        return OpRow(base, delta, verdict)

    def removed_rows(self, present: Collection[str]) -> list[tuple[str, OpRow]]:
        """The baseline's ops this run did not run (0 calls), for a row of their own in every
        table (a trial found a vanished op in no table, CSV or HTML: a structure verdict names it
        in its message only): (op, its columns: baseline min, no delta, `removed`, or `ignored`
        where an ignore glob matches it), the costliest first."""
        gone = sorted(((base, name) for name, (base, _) in self.rows.items() if name not in present), reverse=True)
        globs = [i.glob for i in self.ignores]
        return [(name, OpRow(base, None, "ignored" if ignored(name, globs) else "removed")) for base, name in gone]

    def failing(self, rule: Rule, nodeid: str) -> list[str]:
        """The failing verdicts' messages, the test's failure: the first WORK_LISTED work changes
        (the costliest ops first, each led by `work changed:`: an op's message names only the op),
        then a count of the rest (a dtype change touches every op), and how to record the change
        if it was intended (a trial's CI log showed the failure, the hint sat in the summary), or
        where it ran on torch settings an earlier test left, the fix in that test."""
        failing = Comparison(self.verdicts).failing(rule)
        work = [v for v in failing if v.kind == WORK]
        listed = [v.titled for v in failing if v.kind != WORK or v in work[:WORK_LISTED]]
        if len(work) > WORK_LISTED:
            more = count_of(len(work) - WORK_LISTED, "more op")
            listed.append(f"work changed in {more} (--opprof-json lists every verdict)")
        changed = any(v.kind in (STRUCTURE, WORK) for v in failing)
        fixes = self.leak_fixes(failing) if failing else []
        listed += fixes  # the fix is in the tests that left the settings it ran on
        explained = bool(fixes) and self.leaks_explain(failing)
        if not explained and (changed or any(v.kind == TIME for v in failing)):  # not an environment change alone
            listed.append(record_if_intended(nodeid, everything=not changed))
        return listed

    def leak_fixes(self, verdicts: Iterable[Verdict]) -> list[str]:
        """The fixes in the tests that left the settings this test ran on: the thread count's
        where `verdicts` change it (threads_left_by), and each other leak's (settings_left; a
        review's victim of two leakers was told only one)."""
        changes = [v for v in verdicts if v.kind in (STRUCTURE, WORK) and v.status == VERDICT_CHANGED]
        threads = self.threads_left_by is not None and any(v.kind == WORK and not v.op for v in changes)
        # one leaker of the count and more: its own line says both (a recheck read the count twice)
        threads = threads and not any(f.by == self.threads_left_by and not f.threads_only for f in self.settings_left)
        fixes = [threads_left_fix(self.threads_left_by or "")] if threads else []
        return fixes + [settings_left_fix(found) for found in self.settings_left]

    def leaks_explain(self, verdicts: Iterable[Verdict]) -> bool:
        """Whether the leaks this test ran on account for `verdicts` (no `record it`): any where
        settings other than the count were left (a dtype changes every op's work, grad mode its
        times), else where the structure and work changes are only the leaked thread count: a
        trial's victim test, told to record itself, recorded nothing and failed again."""
        if self.settings_left:
            return True
        changes = [v for v in verdicts if v.kind in (STRUCTURE, WORK) and v.status == VERDICT_CHANGED]
        return self.threads_left_by is not None and bool(changes) and all(v.kind == WORK and not v.op for v in changes)

    def error_messages(
        self, nodeid: str, rule: Rule, strict: bool, recording: bool, require_baseline: bool = False
    ) -> list[str]:
        """What makes the test an error: an unusable file; with strict, when comparing, an
        inconclusive time check where time may fail the test; with `require_baseline`, when
        comparing, no baseline file."""
        if self.error:
            return [self.error]
        if require_baseline and not recording and self.status == MISSING:
            return [baseline_required(nodeid, self.path)]
        if strict and not recording and TIME in rule.fail_on and self.inconclusive:
            first = self.inconclusive[0]
            return [strict_inconclusive(nodeid, first.message, first.fix or QUIET_MACHINE_FIX)]
        return []

    @property
    def inconclusive(self) -> list[Verdict]:
        return Comparison(self.verdicts).inconclusive

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`rows` stay on the worker: they only feed its summary table)."""
        return {
            "path": self.path,
            "status": self.status,
            "remeasured": self.remeasured,
            "untimed": self.untimed,
            "schema": self.schema,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "ignores": [i.to_dict() for i in self.ignores],
            "lists_unrecorded": list(self.lists_unrecorded),
            "under_load": self.under_load,
            "work_unrecorded": list(self.work_unrecorded),
            "measurements": self.measurements,
            "unconfirmed": list(self.unconfirmed),
            "time_fails": self.time_fails,
            "fails": list(self.fails),
            "recorded_from": self.recorded_from,
            "unrepeated": list(self.unrepeated),
            "capture_moved": self.capture_moved.to_dict() if self.capture_moved else None,
            "short_baseline": self.short_baseline,
            "graph_call_unread": self.graph_call_unread,
            "kernels_dropped": {"now": self.kernels_dropped[0], "baseline": self.kernels_dropped[1]},
            "written_from": self.written_from if self.status in TIMES_WRITTEN else None,  # null: none written
            "written_wait": self.written_wait,
            "recorded_wait": self.recorded_wait,
            "unrecordable": self.unrecordable,
            "nodeid": self.nodeid,
            "threads_left_by": self.threads_left_by,
            "settings_left": [found.to_dict() for found in self.settings_left],
            "written_slowed": self.written_slowed.to_dict() if self.written_slowed else None,
            "first_slowed": self.first_slowed,
            "traced_first": self.traced_first,
            "written_references": self.written_references.to_dict() if self.written_references else None,
            "grad_unrecorded": self.grad_unrecorded,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaselineResult:
        """The inverse of to_dict (what crossed from an xdist worker)."""
        verdicts = tuple(Verdict.from_dict(v) for v in data.get("verdicts", []))
        ignores = tuple(Ignore.from_dict(i) for i in data.get("ignores", []))
        return cls(
            data["path"], data["status"], data.get("remeasured"), data.get("untimed"), data.get("schema"), verdicts,
            ignores=ignores, lists_unrecorded=tuple(data.get("lists_unrecorded", ())), under_load=data.get("under_load"),
            work_unrecorded=tuple(data.get("work_unrecorded", ())), measurements=data.get("measurements", 1),
            unconfirmed=tuple(data.get("unconfirmed", ())), fails=tuple(data.get("fails", (STRUCTURE, WORK, TIME))),
            recorded_from=data.get("recorded_from", 0), unrepeated=tuple(data.get("unrepeated", ())),
            capture_moved=CaptureMoved.from_dict(data.get("capture_moved")),
            short_baseline=bool(data.get("short_baseline")),
            graph_call_unread=bool(data.get("graph_call_unread")),
            kernels_dropped=_dropped_pair(data.get("kernels_dropped")),
            written_from=data.get("written_from") or 1, written_wait=data.get("written_wait"),
            recorded_wait=data.get("recorded_wait"), unrecordable=data.get("unrecordable"),
            nodeid=data.get("nodeid") or "", threads_left_by=data.get("threads_left_by"),
            settings_left=tuple(found for d in data.get("settings_left") or () if (found := Left.from_dict(d))),
            written_slowed=Slowed.from_dict(data.get("written_slowed")), first_slowed=data.get("first_slowed"),
            traced_first=data.get("traced_first"), written_references=References.from_dict(data.get("written_references")),
            grad_unrecorded=bool(data.get("grad_unrecorded")),
        )  # fmt: skip


def _dropped_pair(value: Any) -> tuple[int, int]:
    """BaselineResult.kernels_dropped from its to_dict form."""
    found = value if isinstance(value, dict) else {}
    return int(found.get("now") or 0), int(found.get("baseline") or 0)


def _fails(rule: Rule) -> dict[str, Any]:
    """What a result says of the rule's fail_on (`--opprof-json`: `fails`, and `time_fails` from it)."""
    return {"fails": tuple(sorted(rule.fail_on))}


def _unusable(exc: BaselineError, path: Path, shown: str, update: str | None, nodeid: str) -> str:
    """An unusable baseline file's message, naming it as shown, with the fix for this run (the
    test's id in the command, where the fix names one)."""
    message = _shown_in(str(exc), path, shown)
    # recording: not "... and run pytest --opprof-update-baseline", the command running
    if update is not None and message.endswith(UNUSABLE_FIX):
        message = message.removesuffix(UNUSABLE_FIX) + UNUSABLE_WHILE_RECORDING_FIX
    if message.endswith(CONFLICT_FIX):
        message = message.removesuffix(CONFLICT_FIX) + conflict_fix(nodeid, recording=update is not None)
    if message.endswith(RECORD_COMMAND):  # the test's id: a bare command records every other test's change too
        message += f" {shell_quote(nodeid)}"
    return message


def _shown_in(message: str, path: Path, shown: str) -> str:
    """A message about a baseline file, naming it as the run's other lines do (relative to the rootdir)."""
    return shown + message[len(str(path)) :] if message.startswith(f"{path}: ") else message


@dataclass(frozen=True, slots=True)
class Judged:
    """A comparing run's decision, taken before the test body ended (`judged_early`)."""

    old: BaselineDoc
    outcome: Outcome


def judged_early(
    path: Path,
    shown: str,
    nodeid: str,
    current: Measurement,
    rule: Rule,
    remeasure: Callable[[], Measurement | None],
    root: Path | None = None,
) -> Judged | None:
    """Comparing: the decision for `current` against the test's baseline, taken as soon as it is
    measured, so that `remeasure` (a suspected time's confirmations) runs fn in the test's own
    context; None where there is no usable baseline (the baseline step says so), or where the
    baseline holds another of the test's captures (`capture.number`: an earlier run() of a test
    that captures twice paid confirmations against its later capture's baseline, and a fn that
    could not be called again failed the test)."""
    try:
        old = read_baseline(path, nodeid, inside=root)
    except BaselineError:
        return None
    if old is None or not same_capture(old, current.doc):
        return None
    baseline = old

    def confirmation() -> Measurement | None:
        try:
            return remeasure()
        except Exception as exc:  # fn's own: the note names what it was confirming
            if hasattr(exc, "add_note"):  # Python 3.11+
                suspected = compare(current.doc, baseline, rule, shown, current.machine, places=current.places).failing(
                    rule
                )
                exc.add_note(raised_confirming([v.message for v in suspected if v.kind == TIME]))
            raise

    return Judged(old, decide(current, old, rule, None, confirmation, shown))


def ranges_serve(
    path: Path, shown: str, nodeid: str, current: Measurement, rule: Rule, update: str, root: Path | None = None
) -> bool:
    """Recording: whether the recorded ranges' further measurements (1.5 s of pauses and three
    runs of fn) can serve the test's file: it is absent, or usable and the first measurement alone
    does not keep it as it is (decide asks no confirmation and writes nothing: a scale trial's
    re-recording of 80 unchanged tests spent 1.6 s a test on measurements no file took)."""
    if current.machine.unrecordable:  # a Python tracer, throttled clocks: no file is written from it
        return False
    try:
        old = read_baseline(path, nodeid, inside=root)
    except BaselineError:
        return False  # a recording leaves an unusable file as it is
    if old is None or update == "all":
        return True
    asked: list[bool] = []

    def remeasure() -> Measurement | None:
        asked.append(True)
        return None

    return decide(current, old, rule, update, remeasure, shown).status in TIMES_WRITTEN or bool(asked)


def same_capture(old: BaselineDoc, current: BaselineDoc) -> bool:
    """Whether `current` is the capture of the test the baseline holds, comparing (moved_capture)."""
    return moved_capture(old, current, None) is None


def baseline_step(
    path: Path,
    shown: str,
    nodeid: str,
    current: Measurement,
    rule: Rule,
    update: str | None,
    remeasure: Callable[[], Measurement | None] | None,
    root: Path | None = None,
    before_write: Callable[[], None] | None = None,
    judged: Judged | None = None,
) -> BaselineResult:
    """Read the test's baseline, decide, write what was decided (never outside `root`; just
    before, `before_write` is called). An unusable file is never touched, and one that cannot be
    written is left as it was: the result carries the error that makes the test an error.
    `judged`: the comparing decision `judged_early` took for `current`, used as it is."""
    old: BaselineDoc | None
    if judged is not None:
        old, outcome = judged.old, judged.outcome
    else:
        try:
            old = read_baseline(path, nodeid, inside=root)
        except BaselineError as exc:
            return BaselineResult(
                shown,
                UNUSABLE,
                error=f"opprof: {_unusable(exc, path, shown, update, nodeid)}",
                nodeid=nodeid,
                **_fails(rule),
            )
        outcome = decide(current, old, rule, update, remeasure, shown)
    if outcome.write is not None:
        if before_write is not None:
            before_write()
        try:
            write_baseline(path, outcome.write, root)
        except OSError as exc:
            error = f"opprof: {cannot_write(shown, exc)}"
            return BaselineResult(shown, UNWRITABLE, error=error, nodeid=nodeid, **_fails(rule))
        except OpprofError as exc:
            return BaselineResult(shown, UNWRITABLE, error=f"opprof: {exc}", nodeid=nodeid, **_fails(rule))
    rows = {  # the baseline time each op is judged from (a slow spell's file minimum gives way to its range's fastest)
        name: (judged_base(min(samples), op.recorded_range, rule), list(op.calls_per_step))
        for name, op in (old.ops if old is not None else {}).items()
        if (samples := op.judged_samples)
    }
    untimed = outcome.comparison.untimed if old is not None else None
    comparison = outcome.comparison
    return BaselineResult(
        shown, outcome.status, outcome.remeasured, untimed, outcome.old_schema, comparison.verdicts, rows,
        ignores=comparison.ignores, lists_unrecorded=comparison.lists_unrecorded,
        under_load=round(comparison.under_load, 1) if comparison.under_load else None,
        work_unrecorded=comparison.work_unrecorded, measurements=outcome.measurements,
        unconfirmed=outcome.unconfirmed, recorded_from=outcome.recorded_from, **_fails(rule),
        unrepeated=outcome.unrepeated, capture_moved=outcome.capture_moved,
        short_baseline=bool(untimed) and comparison.short_baseline,
        graph_call_unread=comparison.graph_call_unread,
        kernels_dropped=comparison.kernels_dropped if old is not None else (current.doc.kernels_dropped, 0),
        written_from=outcome.written_from, written_wait=outcome.written_wait,
        recorded_wait=old.recorded_wait if old is not None else None, unrecordable=outcome.unrecordable,
        nodeid=nodeid, written_slowed=outcome.written_slowed, first_slowed=outcome.first_slowed,
        traced_first=outcome.traced_first,
        written_references=References.of(outcome.write) if outcome.status in TIMES_WRITTEN and outcome.write else None,
        grad_unrecorded=comparison.grad_unrecorded,
    )  # fmt: skip
