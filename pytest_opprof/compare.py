"""A measurement vs its baseline -> verdicts. Pure: both sides are baseline documents.

In order of trust, each a function below:
1. structure (exact): an op's calls per step changed, an op appeared or vanished;
2. work (exact): an op's input signatures, FLOPs, kernels or copied bytes per step changed, or
   the test ran its ops on another number of torch threads than its baseline;
3. time: an op's per-step minimum moved beyond the tolerance and the floor, the fastest half of
   the steps says the move is real, and the machine cannot explain it; otherwise inconclusive.
   The steps' wall time is judged the same way on what the slower ops do not account for (time
   outside the operators);
4. environment: device key or software versions differ (reported).

Why the minimum, why "inconclusive" instead of a widened limit: docs/design.md.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from statistics import median
from typing import Any, NamedTuple, TypeVar

from .analysis import inputs_text
from .analysis.checks import CONTENTION_LIMIT
from .analysis.compiled import FX_GRAPH, REGION
from .analysis.model import WORKLOAD_OPS
from .device import same_device_key
from .documents import BaselineDoc, KernelEntry, KernelShare, MemoryEntry, OpEntry, WorkEntry
from .errors import closest_names, compiled_regions_moved, unrecordable_gpu, unrecordable_tracer, waited_for_cpu
from .events import TENSOR_LIST
from .units import count_of, count_text

STRUCTURE, WORK, TIME, ENVIRONMENT = "structure", "work", "time", "environment"
KINDS = (STRUCTURE, WORK, TIME, ENVIRONMENT)
REGRESSED, IMPROVED, CHANGED, INCONCLUSIVE = "regressed", "improved", "changed", "inconclusive"
DEFAULT_TOLERANCE = 0.20  # how much slower than its baseline an op may get
DEFAULT_MIN_DELTA_MS = 0.05  # time changes smaller than this (ms per step) are never verdicts
DEFAULT_FAIL_ON = frozenset({STRUCTURE, WORK, TIME})
ALPHA = 0.01  # one-sided significance for the rank test
MIN_TIME_STEPS = 5  # steps on each side for a time verdict: the fastest half must hold 3
CONTENTION_WHY = "CPU contention"  # how an inconclusive verdict's why begins when the wait explains it
CONTENTION_SLACK = 1.5  # ...up to this times the ms they waited: a 20% wait explains no x3.7 step
STATE_NOISE = 1.15  # a reference's own spread on a steady machine; beyond it the machine moved
WALL_SLACK = 2.0  # a slower machine explains a slower step up to this times its own slowdown (x1.4: +80%)
# ...and an op up to this: memory-bound ops (a convolution, x2.12) slow further than the cache-resident
# references (x1.38) in a slow spell, and a trial's ops x4 on a machine x1.24 are not the machine
OP_SLACK = 4.0
REST_SHARE = 0.2  # the rest of a step (outside the op judged) must be this share of it to be a reference
# A step slowed as a whole by more than this is no spell of the machine (a 2-vCPU VM's ran x1.5-3,
# bench/spells.py): a newcomer trial's denormal weights slowed every matmul x80, the rest of the
# step x23.5, and each op was excused by the others, every run
SPELL_LIMIT = 4.0
WORKLOAD_MIN_MS = 0.05  # a workload reference replayed faster than this is timer noise, no reference


@dataclass(frozen=True, slots=True)
class Rule:
    """How a measurement is compared; set per run and per test."""

    tolerance: float = DEFAULT_TOLERANCE
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS
    ignore_ops: tuple[str, ...] = ()
    fail_on: frozenset[str] = DEFAULT_FAIL_ON


@dataclass(frozen=True, slots=True)
class Machine:
    """What the time rule knows of the machine during a measurement (the references are in the
    documents): the share of the capture our threads waited for a CPU, and why the GPU clocks
    make device times incomparable (None: they do not)."""

    cpu_wait: float | None = None
    gpu_unreliable: str | None = None
    python_tracer: str | None = None  # what traced Python during the capture (coverage, a debugger)
    waited_ms_per_step: float | None = None  # what cpu_wait is in ms, per step: the most it can add to one
    compiled_in: tuple[int, ...] = ()  # the steps torch.compile compiled in, by position (0: the first)
    pooled: bool = False  # the samples are several measurements' (a confirmation's), not one's steps

    @property
    def contended(self) -> bool:
        """Our threads waited for a CPU beyond CONTENTION_LIMIT of the capture: other load."""
        return self.cpu_wait is not None and self.cpu_wait > CONTENTION_LIMIT

    @property
    def unrecordable(self) -> str | None:
        """Why no baseline is written from this measurement, or None: throttled GPU clocks, or a
        Python tracer (coverage, a debugger), which slows the Python between the ops: a trial's
        baseline recorded under --cov held that slower step wall, and a 3x slower one passed."""
        if self.gpu_unreliable:
            return unrecordable_gpu(self.gpu_unreliable)
        if self.python_tracer:
            return unrecordable_tracer(self.python_tracer)
        return None


@dataclass(frozen=True, slots=True)
class Change:
    """One op (or memory op) of a structure verdict: its median calls per step in the baseline
    (`was`) and now, its time per step (ms: the baseline's, this run's for an added op; what orders
    the list, the same for every run against one baseline), and the verdict's words for it
    (`- aten::sdpa (was 1/step)`)."""

    op: str
    was: float
    now: float
    ms: float
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "was": self.was, "now": self.now, "ms_per_step": round(self.ms, 6), "text": self.text}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Change:
        return cls(data["op"], data["was"], data["now"], data["ms_per_step"], data["text"])


@dataclass(frozen=True, slots=True)
class Differs:
    """One fact of an environment verdict: what it was when the baseline was recorded, and now
    (`torch`, `2.11.0`, `2.13.0`; `none` where a side has no such thing, as in the message)."""

    fact: str  # device, torch, cuda, hip, driver, cuda_driver, torch threads
    was: str
    now: str

    def to_dict(self) -> dict[str, Any]:
        return {"fact": self.fact, "was": self.was, "now": self.now}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Differs:
        return cls(data["fact"], data["was"], data["now"])


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # structure | work | time | environment
    status: str  # regressed | improved | changed | inconclusive
    message: str
    op: str | None = None  # None: the whole test (a work verdict without an op: its torch threads)
    base_ms: float | None = None
    new_ms: float | None = None
    p_value: float | None = None
    why: str | None = None  # an inconclusive verdict: what about the machine made it so; environment: what differs
    fix: str | None = None  # and what to do for a time verdict
    changes: tuple[Change, ...] = ()  # a structure verdict: every op whose calls changed, costliest first
    differs: tuple[Differs, ...] = ()  # an environment verdict: each fact that differs

    @property
    def titled(self) -> str:
        """The message led by its kind where it does not say it (`work changed: aten::mm: ...`: an
        op's work verdict names only the op; a trial's short summary read `Failed: aten::mm: 8x ...`)."""
        if self.status == CHANGED and not self.message.startswith(f"{self.kind} "):
            return f"{self.kind} changed: {self.message}"
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": [c.to_dict() for c in self.changes],
            "differs": [d.to_dict() for d in self.differs],
            "kind": self.kind,
            "status": self.status,
            "op": self.op,
            "message": self.message,
            "baseline_ms": self.base_ms,
            "ms": self.new_ms,
            "p": self.p_value,
            "why": self.why,
            "fix": self.fix,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            data["kind"], data["status"], data["message"], data.get("op"), data.get("baseline_ms"),
            data.get("ms"), data.get("p"), data.get("why"), data.get("fix"),
            tuple(Change.from_dict(c) for c in data.get("changes") or ()),
            tuple(Differs.from_dict(d) for d in data.get("differs") or ()),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Ignore:
    """One ignore glob of a test's rule: whether it matched an op of the test (either side), and
    if not, the op it looks like (a typo: `aten::matmull` ignores nothing)."""

    glob: str
    matched: bool
    near: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"glob": self.glob, "matched": self.matched, "near": self.near}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ignore:
        return cls(data["glob"], bool(data["matched"]), data.get("near"))


@dataclass(frozen=True)
class Comparison:
    verdicts: tuple[Verdict, ...] = field(default_factory=tuple)
    untimed: str | None = None  # why no time verdict was possible for the whole test
    ignores: tuple[Ignore, ...] = ()  # the rule's ignore globs, and what they matched
    lists_unrecorded: tuple[str, ...] = ()  # ops whose list-of-tensors shapes a side lacks: not compared
    under_load: float | None = None  # the baseline's references ran this many times slower (recorded_under_load)
    work_unrecorded: tuple[str, ...] = ()  # ops whose work this run recorded and the baseline holds none of
    short_baseline: bool = False  # untimed: the baseline alone holds too few steps (this run has enough)
    graph_call_unread: bool = False  # the baseline was recorded before graph calls were read as ops: not compared
    # kernel launches with no kernel record in this run's capture and in the baseline's
    # (capture.kernels_dropped): each op's own are allowed for (OpEntry.records_lost)
    kernels_dropped: tuple[int, int] = (0, 0)

    @property
    def changes(self) -> list[Verdict]:
        """The verdicts worth a new baseline: structure and work changes, conclusive time changes.
        An inconclusive one is not: recording it would inflate the baseline."""
        return [v for v in self.verdicts if v.kind in (STRUCTURE, WORK, TIME) and v.status != INCONCLUSIVE]

    @property
    def unchanged(self) -> bool:
        """Nothing worth a new baseline."""
        return not self.changes

    @property
    def inconclusive(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == INCONCLUSIVE]

    def failing(self, rule: Rule) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind in rule.fail_on and v.status in (REGRESSED, CHANGED)]


def ignored(name: str, patterns: Iterable[str]) -> bool:
    """Whether an ignore glob of the rule matches the op (never judged)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def median_calls(entry: OpEntry | KernelEntry | MemoryEntry) -> float:
    """An entry's calls per step: the median over its steps."""
    return float(median(entry.calls_per_step or (0,)))


def rank_test_p(new: list[float], base: list[float]) -> float:
    """One-sided Mann-Whitney U: the probability of ranks this extreme if `new` were not larger.
    Normal approximation with tie correction; exact enough for a gate at 1%."""
    n1, n2 = len(new), len(base)
    if not n1 or not n2:
        return 1.0
    pooled = sorted([(v, 0) for v in new] + [(v, 1) for v in base])
    ranks = [0.0] * len(pooled)
    i = 0
    ties = 0.0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u = r1 - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 0.5
    z = (u - mean - 0.5) / math.sqrt(var)  # continuity correction
    return 0.5 * math.erfc(z / math.sqrt(2))


def compare(
    current: BaselineDoc, baseline: BaselineDoc, rule: Rule, path: str = "", machine: Machine | None = None
) -> Comparison:
    """Verdicts for `current` against `baseline`, both baseline documents. Time is judged only for
    ops whose structure and work are unchanged, and only where `machine` cannot explain a move."""
    where = f" [{path}]" if path else ""
    unread = {FX_GRAPH} if graph_call_unread(current, baseline) else set()  # not compared
    structure, recounted = _structure(current, baseline, rule, where, unread)
    threads = _threads_set_by_test(current, baseline, where)
    work = threads + _work(current, baseline, rule, recounted, where)
    untimed = _untimed(current, baseline)
    skip = recounted | {v.op for v in work if v.op}
    if threads:  # its CPU times moved with the threads: the work verdict says why
        skip |= {name for name, op in current.ops.items() if not op.on_device}
    timed = [] if untimed else _time(current, baseline, rule, machine or Machine(), skip, where)
    if structure or any(v.op for v in work):  # an op around a changed one takes its time: not the machine's range
        timed = [replace(v, fix=AROUND_CHANGE_FIX) if v.fix == RANGE_FIX else v for v in timed]
    verdicts = tuple(structure + work + timed + _environment(current, baseline, where))
    return Comparison(
        verdicts,
        untimed,
        ignores(current, baseline, rule),
        _lists_unrecorded(current, baseline),
        recorded_under_load(current, baseline),
        _work_unrecorded(current, baseline, unread),
        baseline.steps < MIN_TIME_STEPS <= current.steps,
        bool(unread),
        (current.kernels_dropped, baseline.kernels_dropped),
    )


def work_verdicts(current: BaselineDoc, baseline: BaselineDoc, kernels: bool = True) -> list[Verdict]:
    """`opprof compare`'s work verdicts of `current` (B) against `baseline` (A), as the plugin
    gives them; without the kernels' names where `kernels` is False (two devices launch their
    own kernels by design: every op of a T4 vs A10 comparison would read as changed)."""
    if not kernels:
        current, baseline = _without_kernels(current), _without_kernels(baseline)
    return [
        v for v in compare(current, baseline, Rule()).verdicts if v.kind == WORK and v.op
    ]  # an op's, not the threads'


def _without_kernels(doc: BaselineDoc) -> BaselineDoc:
    ops = {
        name: replace(op, work=replace(op.work, kernels={})) if op.work is not None else op
        for name, op in doc.ops.items()
    }
    return replace(doc, ops=ops)


def graph_call_unread(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """Whether the baseline holds compiled code but not its graph calls as this run reads them: a
    file recorded before pytest-opprof read `## Call CompiledFxGraph` as an op where torch writes
    it as an annotation (a single-step capture; the untimed step run() takes the work from; torch
    2.9). Its CompiledFxGraph, added or without work, is no change of the code (a review: every
    such test failed as `+ CompiledFxGraph` after the upgrade)."""
    new, old = current.ops.get(FX_GRAPH), baseline.ops.get(FX_GRAPH)
    if new is None or REGION not in baseline.ops:
        return False
    return old is None or (old.work is None and new.work is not None)


def ignores(current: BaselineDoc, baseline: BaselineDoc, rule: Rule) -> tuple[Ignore, ...]:
    """What each ignore glob matched among the names it applies to: ops, memory ops, the wall."""
    names = {*current.ops, *baseline.ops, *current.memory_ops, *baseline.memory_ops}
    found = []
    for glob in rule.ignore_ops:
        matched = fnmatch.fnmatchcase(STEP_WALL, glob) or any(fnmatch.fnmatchcase(n, glob) for n in names)
        near = None if matched else next(iter(closest_names(glob, [*sorted(names), STEP_WALL], limit=1)), None)
        found.append(Ignore(glob, matched, near))
    return tuple(found)


# -- 1. structure ------------------------------------------------------------------------------


def _structure(
    current: BaselineDoc, baseline: BaselineDoc, rule: Rule, where: str, unread: Collection[str] = ()
) -> tuple[list[Verdict], set[str]]:
    """One verdict listing every op and memory op whose calls per step changed, the costliest
    first (a trial's vanished attention op sat in `and 4 more` behind alphabetical small ones);
    and their names."""
    changes: list[Change] = []
    names: set[str] = set()
    sections: tuple[tuple[Mapping[str, OpEntry | MemoryEntry], Mapping[str, OpEntry | MemoryEntry]], ...] = (
        (current.ops, baseline.ops),
        (current.memory_ops, baseline.memory_ops),
    )
    for new_ops, old_ops in sections:
        for name in sorted(set(new_ops) | set(old_ops)):
            if ignored(name, rule.ignore_ops) or name in unread:
                continue
            new_calls = median_calls(new_ops[name]) if name in new_ops else 0
            old_calls = median_calls(old_ops[name]) if name in old_ops else 0
            if new_calls == old_calls and not _sometimes_on_one_side(name, new_ops, old_ops):
                continue
            names.add(name)
            if new_calls == old_calls:  # on one side only, in under half its steps (a median of 0)
                added = name in new_ops
                text = _sometimes(name, (new_ops if added else old_ops)[name], added)
            elif not old_calls:
                text = f"+ {name} ({count_text(new_calls)}/step)"
            elif not new_calls:
                text = f"- {name} (was {count_text(old_calls)}/step)"
            else:
                text = f"{name} {count_text(old_calls)} -> {count_text(new_calls)}/step"
            ms = _median_ms(old_ops[name] if name in old_ops else new_ops[name])  # the baseline's: a stable order
            changes.append(Change(name, float(old_calls), float(new_calls), ms, text))
    if not changes:
        return [], names
    changes.sort(key=lambda c: (-c.ms, c.op))
    shown = ", ".join(c.text for c in changes[:MAX_LISTED])
    more = f" and {len(changes) - MAX_LISTED} more ({EVERY_CHANGE})" if len(changes) > MAX_LISTED else ""
    mode = DISPATCH_MODE_HINT if DISPATCH_MODE in set(current.ops) - set(baseline.ops) else ""
    mode += _compiled_hint(current, baseline, rule)
    if _threads_differ(current, baseline):  # a verdict trial's one thread read as a structure change first
        mode += (
            f"; torch ran on {count_of(current.threads or 0, 'thread')}, the baseline on {baseline.threads}: "
            "a thread count changes how some ops split their work"
        )
    return [
        Verdict(STRUCTURE, CHANGED, f"structure changed: {shown}{more}{mode}{where}", changes=tuple(changes))
    ], names


EVERY_CHANGE = "-v or --opprof-json lists every change"


def _compiled_hint(current: BaselineDoc, baseline: BaselineDoc, rule: Rule) -> str:
    """What a change in the compiled regions per step means, in words (a trial read `Torch-Compiled
    Region 1 -> 2/step` and `- Torch-Compiled Region` among op names and had to work it out)."""
    if ignored(REGION, rule.ignore_ops):
        return ""
    old, new = (median_calls(doc.ops[REGION]) if REGION in doc.ops else 0 for doc in (baseline, current))
    return "" if old == new else "; " + compiled_regions_moved(old, new, count_text(old), count_text(new))


def _median_ms(entry: OpEntry | MemoryEntry | None) -> float:
    """An op's median time per step (device time where it ran on a device), 0 where absent."""
    if entry is None:
        return 0.0
    samples = entry.time_samples if isinstance(entry, OpEntry) else entry.device_ms
    return float(median(samples)) if samples else 0.0


DISPATCH_MODE = "PythonDispatchMode"  # the profiler's event of a TorchDispatchMode handling an op
DISPATCH_MODE_HINT = (
    "; a TorchDispatchMode now runs (PythonDispatchMode): the profiler records each op it handles and "
    "calls again, so counts double without more work"
)
MAX_LISTED = 12  # changes a structure verdict names; a baseline of 20k made-up ops made a 600 KB line


SOMETIMES_STEPS = 2  # an op on one side only, in fewer steps than half, counts from this many (1: sporadic)


def _sometimes_on_one_side(name: str, new_ops: Mapping[str, Any], old_ops: Mapping[str, Any]) -> bool:
    """An op that one side ran in some steps (2 or more: a background thread's op landing in one
    step by its timing is not the code's structure; a costly one is a time verdict) and the
    other never."""
    if (name in new_ops) == (name in old_ops):
        return False
    entry = new_ops[name] if name in new_ops else old_ops[name]
    return steps_run(entry) >= SOMETIMES_STEPS


def steps_run(entry: OpEntry | MemoryEntry) -> int:
    """In how many steps the op ran."""
    return sum(1 for c in entry.calls_per_step if c)


def step_cost_ms(entry: OpEntry | MemoryEntry) -> float:
    """The op's time in its costliest step: its shown time (device or CPU), a memory op's device time."""
    samples = entry.time_samples if isinstance(entry, OpEntry) else entry.device_ms
    return max(samples, default=0.0)


def _sometimes(name: str, entry: OpEntry | MemoryEntry, added: bool) -> str:
    """An op that ran in some steps of one side only: `+ aten::matmul (in 2 of 10 steps)`."""
    steps = f"in {steps_run(entry)} of {len(entry.calls_per_step)} steps"
    return f"+ {name} ({steps})" if added else f"- {name} (was {steps})"


# -- 2. work -----------------------------------------------------------------------------------


def _work(current: BaselineDoc, baseline: BaselineDoc, rule: Rule, skip: set[str], where: str) -> list[Verdict]:
    """A verdict per op whose work changed (both sides recorded it; its call count did not change;
    of one whose calls differ between steps, only replaced inputs: _steady), those whose FLOPs
    changed first, each group the costliest first (the baseline's fastest step): the op that
    carries the step heads the failure, not an `aten::add` of 0.4% of it that sorts first by name
    (a trial's doubled LSTM), and `aten::addmm: 1.8x the FLOPs` before the 13 inputs of the
    transformer layer's fused op that called it (a trial's wider feed-forward)."""
    found = []
    cost = {name: min(entry.time_samples, default=0.0) for name, entry in baseline.ops.items()}
    for name in set(current.ops) & set(baseline.ops):
        new, old = current.ops[name].work, baseline.ops[name].work
        if name in skip or not new or not old or ignored(name, rule.ignore_ops):
            continue
        lists = current.list_shapes and baseline.list_shapes
        steady = _steady(current.ops[name]) and _steady(baseline.ops[name])
        lost = (current.ops[name].lost_per_step, baseline.ops[name].lost_per_step)
        parts = work_changes(new, old, lists, lost) if steady else _inputs_replaced(new, old, lists)
        if parts:
            flops_same = not steady or new.flops_per_step == old.flops_per_step
            found.append(
                ((flops_same, -cost[name], name), Verdict(WORK, CHANGED, f"{name}: {'; '.join(parts)}{where}", name))
            )
    return [verdict for _, verdict in sorted(found, key=lambda f: f[0])]


def _thread_setup(doc: BaselineDoc) -> str | None:
    """What set torch's default thread count on that machine: CPUs and variables (environment)."""
    value = doc.environment.get("thread_setup")
    return value if isinstance(value, str) else None


def _same_thread_setup(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """The same thread setup on the same CPU model: torch's default thread count is the same."""
    setup, model = _thread_setup(current), current.environment.get("cpu_model")
    return setup is not None and setup == _thread_setup(baseline) and model == baseline.environment.get("cpu_model")


def _threads_differ(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    return current.threads is not None and baseline.threads is not None and current.threads != baseline.threads


def _threads_set_by_test(current: BaselineDoc, baseline: BaselineDoc, where: str) -> list[Verdict]:
    """A work verdict when the capture ran on another number of torch threads on the same
    thread setup (CPUs, OMP_NUM_THREADS/MKL_NUM_THREADS): the project set them (torch.set_num_threads
    in the test, the code it calls, a conftest or an earlier test). Another setup is another
    machine: _environment says so."""
    if not _threads_differ(current, baseline) or not _same_thread_setup(current, baseline):
        return []
    message = (
        f"torch threads {baseline.threads} -> {current.threads} on the same machine setup ({_thread_setup(current)}): "
        "torch.set_num_threads in the test, the code it calls, a conftest or an earlier test; "
        f"CPU times not compared{where}"
    )
    return [Verdict(WORK, CHANGED, message)]


def _steady(entry: OpEntry) -> bool:
    """Whether an op's recorded work stands for its steps: it made as many calls in every step,
    and in the call its inputs were read from (run()'s signature step, one call of fn). An op of
    an optimizer that steps every 4th call of a gradient-accumulation step does not: which call
    the inputs were read from decides what they hold, and `-k`, `warmup` or test order move it
    (a training trial's unchanged code failed with `aten::copy_: inputs (none) -> (float[],
    double[]) x6`). Its structure (calls per step) is still judged, and its work on replaced
    inputs only (_inputs_replaced)."""
    counts = set(entry.calls_per_step)
    if len(counts) > 1:
        return False
    if entry.work is None or not entry.work.signatures or not counts:
        return True
    read = sum(s.calls_per_step for s in entry.work.signatures)
    return math.isclose(read, counts.pop(), rel_tol=1e-6)


def _inputs_replaced(new: WorkEntry, old: WorkEntry, lists: bool) -> list[str]:
    """The work change of an op whose calls differ between steps (not _steady): only inputs one
    side lacks where the other has new ones. Which call its inputs were read from adds or drops
    signatures (an optimizer's `aten::add_` in one call of four), never replaces one; a forward
    `add_` whose bias went from [4] to [8,4], sharing the name, does (a review's case)."""
    sig_new, sig_old = _signatures(new, not lists), _signatures(old, not lists)
    gone = {k: v for k, v in sig_old.items() if k not in sig_new}
    came = {k: v for k, v in sig_new.items() if k not in sig_old}
    if not gone or not came:
        return []
    return [
        f"inputs {_listed(gone, came)} -> {_listed(came, gone)} (in the steps that ran it: its calls differ between steps)"
    ]


def work_changes(new: WorkEntry, old: WorkEntry, lists: bool = True, lost: tuple[float, float] = (0, 0)) -> list[str]:
    """What changed in one op's work, in words: FLOPs, input signatures, kernels, bytes.
    `lists`: both sides hold the shapes of lists of tensors (else compared as unrecorded);
    `lost`: the kernel records each side (new, old) lost under it per step, which explain as many
    fewer kernels on that side (_lost_explain)."""
    parts = []
    if new.flops_per_step != old.flops_per_step:
        parts.append(_flops_change(old.flops_per_step, new.flops_per_step))
    sig_new, sig_old = _signatures(new, not lists), _signatures(old, not lists)
    if sig_new != sig_old:
        parts.append(f"inputs {_listed(sig_old, sig_new)} -> {_listed(sig_new, sig_old)}")
    tables = (
        ("kernels", old.kernels, new.kernels, count_text),
        ("bytes per step", old.bytes_per_step, new.bytes_per_step, si),
    )
    for what, a, b, fmt in tables:
        if what == "kernels" and any(lost) and _lost_explain(b, a, lost):
            continue
        if a != b:
            changed = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
            shown = ", ".join(f"{n} {fmt(a.get(n, 0))} -> {fmt(b.get(n, 0))}" for n in changed[:3])
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            parts.append(f"{what}: {shown}{more}")
    return parts


def _lost_explain(new: dict[str, float], old: dict[str, float], lost: tuple[float, float]) -> bool:
    """Whether kernel records a side lost explain how its kernels differ: only fewer on that side,
    and no more than it lost (a one-step capture that lost 4 of 6 read `sm90_gemm 6 -> 2`). A
    kernel the other side lacks, or more of one, is a change all the same."""
    names = set(new) | set(old)
    fewer_now = sum(max(0.0, old.get(n, 0) - new.get(n, 0)) for n in names)
    fewer_before = sum(max(0.0, new.get(n, 0) - old.get(n, 0)) for n in names)
    # a loss only takes records away: the side that lost more holds some of the other's, no others
    # (both sides losing 4 of 6 hid sm90_gemm renamed sm80_gemm, a review's)
    return (fewer_before == 0 and fewer_now <= lost[0]) or (fewer_now == 0 and fewer_before <= lost[1])


def _flops_change(old: float, new: float) -> str:
    """`1.8x the FLOPs per step (6.1k -> 11.0k)`; a change too small for 3 digits is given in
    more (a trial read `1x the FLOPs per step (32.8M -> 32.8M)` for a Linear of 1000 -> 1001)."""
    shown = (si(old), si(new))
    shown = shown if shown[0] != shown[1] else (f"{old:,.10g}", f"{new:,.10g}")
    if old and new:
        ratio = f"{new / old:.3g}"
        ratio = ratio if ratio != "1" else f"{new / old:.6g}"
        return f"{ratio}x the FLOPs per step ({shown[0]} -> {shown[1]})"
    return f"FLOPs per step {shown[0]} -> {shown[1]}"


def si(value: float) -> str:
    """134217728 -> 134.2M: counts and bytes at a glance."""
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:g}"


def _work_unrecorded(current: BaselineDoc, baseline: BaselineDoc, unread: Collection[str] = ()) -> tuple[str, ...]:
    """The ops (in both, running alike in each step) whose work this run recorded and the
    baseline holds none of: a schema-1 file, or one edited (`"work": null`, or no `work`), whose
    work was never compared again and never said so (a CI trial's float -> double change passed)."""
    found = []
    for name in sorted(set(current.ops) & set(baseline.ops) - set(unread)):
        new, old = current.ops[name], baseline.ops[name]
        if new.work and new.work.signatures and old.work is None and _steady(new) and _steady(old):
            found.append(name)
    return tuple(found)


def _lists_unrecorded(current: BaselineDoc, baseline: BaselineDoc) -> tuple[str, ...]:
    """The ops with a list-of-tensors input whose shapes are not compared: one side was recorded
    without them (capture.list_shapes false: an earlier pytest-opprof, or a torch without
    structured input shapes)."""
    if current.list_shapes and baseline.list_shapes:
        return ()
    found = []
    for name in sorted(set(current.ops) & set(baseline.ops)):
        new, old = current.ops[name].work, baseline.ops[name].work
        if new and old and any(TENSOR_LIST in sig.dtypes for sig in (*new.signatures, *old.signatures)):
            found.append(name)
    return tuple(found)


def _signatures(work: WorkEntry, blank_lists: bool = False) -> dict[str, tuple[str, float]]:
    """Input signature (exact: its shapes and types as JSON) -> (readable text, calls per step).
    `blank_lists`: tensor-list inputs as if unrecorded (`[]`), to compare with a side without them."""
    found: dict[str, tuple[str, float]] = {}
    for sig in work.signatures:
        shapes = sig.shapes
        if blank_lists:
            shapes = [[] if i < len(sig.dtypes) and sig.dtypes[i] == TENSOR_LIST else s for i, s in enumerate(shapes)]
        key = json.dumps([shapes, list(sig.dtypes)])
        calls = found.get(key, ("", 0.0))[1] + sig.calls_per_step
        found[key] = (inputs_text(_tuples(shapes), sig.dtypes), calls)
    return found


def _full_text(key: str) -> str:
    shapes, dtypes = json.loads(key)
    return inputs_text(_tuples(shapes), tuple(dtypes), full=True)


def _tuples(value: Any) -> Any:
    return tuple(map(_tuples, value)) if isinstance(value, list) else value


def _listed(these: dict[str, tuple[str, float]], others: dict[str, tuple[str, float]], limit: int = 2) -> str:
    """The signatures of `these` that `others` lacks (or calls differently), with their calls;
    in full (every input position) where the short texts of the two sides would read alike."""
    differ = [(key, text, calls) for key, (text, calls) in these.items() if others.get(key, (None, None))[1] != calls]
    if not differ:
        return "(none)"
    other_texts = {text for text, _ in others.values()}
    shown = [
        f"({_full_text(key) if text in other_texts else text})" + (f" x{count_text(calls)}" if calls != 1 else "")
        for key, text, calls in differ[:limit]
    ]
    # `(a) and (b)`: side by side, `(a) (b)` read as one signature (a newcomer's trial)
    if len(differ) > limit:
        return ", ".join(shown) + f" and {len(differ) - limit} more"
    return " and ".join(shown)


# -- 3. time -----------------------------------------------------------------------------------


def _untimed(current: BaselineDoc, baseline: BaselineDoc) -> str | None:
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


STEP_WALL = "step wall"  # the name of the time verdict on the steps' wall time
OUTSIDE_WENT = {  # where the wall's own move went, measured outside the ops, by direction
    True: "the time went there (Python code, hooks, data preparation, a wait for another thread or process)",
    False: "the time was saved there (Python code, hooks, data preparation)",
}
OUTSIDE_OPS = {  # why the wall moved when no operator did, by direction
    True: "no operator got slower: the time went outside them (Python code, hooks, data preparation, a wait for another thread or process)",
    False: "no operator explains it: the time was saved outside them (Python code, hooks, data "
    "preparation) or in many small moves",
}


def _time(
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
            verdict = _judged(name, new, old, current.ops[name].on_device, (current, baseline), rule, machine, where)
        if verdict is None:
            verdict = _most_steps_slower(name, new, old, rule, machine, where)
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
    if wall is None and outside is not None and new_wall and old_wall:
        wall = _most_steps_slower(STEP_WALL, *outside, rule, machine, where, step_ms=min(old_wall))
    return verdicts + ([wall] if wall is not None else [])


MEDIAN_MOVE = 3.0  # identical code's per-step medians ranged x1.9 between idle runs (DESIGN §6)


def _most_steps_slower(
    name: str,
    new_s: list[float],
    old_s: list[float],
    rule: Rule,
    machine: Machine,
    where: str,
    step_ms: float | None = None,
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
    fastest step as the wall rule's does (a review's 0.1 -> 0.4 ms outside a 10 ms step read x4)."""
    if min(len(new_s), len(old_s)) < MIN_TIME_STEPS or machine.python_tracer or machine.gpu_unreliable:
        return None
    if machine.pooled:  # one measurement's slow spell beside a calm one is what confirmations clear
        return None
    new_ms, old_ms, top_ms = median(new_s), median(old_s), max(old_s)
    if (
        new_ms < MEDIAN_MOVE * old_ms
        or new_ms - old_ms <= (rule.min_delta_ms if step_ms is None else _margin(step_ms, rule))
        or new_ms <= top_ms + _margin(top_ms, rule)
    ):
        return None
    waited = machine.waited_ms_per_step  # a wait that can explain the move (the trial's workers' 2 ms of 9 cannot)
    if machine.compiled_in or (machine.contended and (waited is None or new_ms - old_ms <= CONTENTION_SLACK * waited)):
        return None
    what = " outside the ops" if step_ms is not None else ""
    why = (
        f"most steps slowed beyond every baseline step (up to {top_ms:.3f} ms) while the fastest held "
        f"({min(new_s):.3f} vs {min(old_s):.3f} ms), and time is judged on the fastest: a wait in some steps (for "
        "data from worker processes, a cache that misses)"
    )
    ratio = f"x{new_ms / old_ms:.1f} " if old_ms > 0 else ""
    message = f"{name}: {new_ms:.3f} ms/step{what} median vs baseline {old_ms:.3f} ms ({ratio}slower; inconclusive: {why}){where}"
    return Verdict(TIME, INCONCLUSIVE, message, name, old_ms, new_ms, None, why, SOME_STEPS_FIX)


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
                    _threads_too_little(stretch, current, baseline, WALL_SLACK)
                    + _capability_too_little(stretch, current, baseline, WALL_SLACK, name)
                    + _machine_too_little(stretch, current, baseline, WALL_SLACK)
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
) -> Verdict | None:
    """One time verdict on per-step samples (an op's, or with `wall` the steps' wall times), None
    when the move is within the tolerance or the floor, or not significant. For the wall, the
    move judged is its time outside the top-level ops (`outside`: each side's per step), or for
    a baseline without them, what is left of its slowdown beyond `explained_ms`, what slower ops
    add to each step."""
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
    change = _change_text(name, new_min, old_min, move, outside is not None, rule.tolerance)
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
            (
                ""
                if wall
                else _threads_too_little(moved, *docs, slack) + _capability_too_little(moved, *docs, slack, name)
            )
            + _contention_too_small(machine, own, *docs)
            + _machine_too_little(moved, *docs, slack, wall)
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
    of = (
        "baseline"
        if base == old_min
        else f"the fastest of its baseline's measurements (the file's {old_min:.3f} ms came in a slow spell)"
    )
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


def _change_text(name: str, new_min: float, old_min: float, move: _Move, outside: bool, tolerance: float) -> str:
    """`aten::addmm: 1.700 ms/step vs baseline 0.500 ms (+240%, slower`; for the wall judged
    outside the ops, its time there and its move as a share of the baseline's step
    (`step wall: 1.430 ms/step outside the ops vs baseline 0.300 ms (+103% of its 1.100 ms step, slower`)."""
    way = "slower" if move.own > 0 else "faster"
    if outside:
        share = f"{_pct(100 * move.own / old_min, tolerance)} of its {old_min:.3f} ms step" if old_min > 0 else "from 0"
        return f"{name}: {min(move.new):.3f} ms/step outside the ops vs baseline {min(move.old):.3f} ms ({share}, {way}"
    percent = _pct(100 * (new_min - old_min) / old_min, tolerance) if old_min > 0 else "from 0"
    return f"{name}: {new_min:.3f} ms/step vs baseline {old_min:.3f} ms ({percent}, {way}"


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
    alike = _within_slowdown(moved, ratio, WALL_SLACK) or new_min - old_min <= rest_new - rest_old
    if ratio - 1 <= rule.tolerance or not alike or ratio > SPELL_LIMIT:
        return None
    why = (
        f"the rest of the step slowed alike ({speed_words(ratio)} outside {name}, with the same calls and work): "
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
    replayed = _workload_ratio(current, baseline)
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


def _reference_ratio(current: BaselineDoc, baseline: BaselineDoc, key: str) -> float | None:
    """A reference workload's time in this run over the baseline's (None when either lacks it)."""
    new, old = getattr(current, key), getattr(baseline, key)
    if not new or not old:
        return None
    return float(new / old)


def speed_words(ratio: float) -> str:
    """A time ratio in words: 45.6x slower, 1.3x faster."""
    return f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"


RECORDS_LOST_FIX = (
    "use a torch built for CUDA 13.1 or later, whose CUPTI keeps them (pytorch/pytorch#192021: CUDA 12.6 Update 2 "
    "to 13.0 lose some at each profiler session's start)"
)
QUIET_MACHINE_FIX = "rerun on a quiet machine (no other load, no -n on a small runner) for a time verdict"
TRACER_FIX = "measure without coverage or a debugger (a pytest --opprof run of its own) for a time verdict"
REST_FIX = (
    "rerun on a quiet machine for a time verdict; a slowdown that stays across reruns, with the rest of the "
    "step, comes from a change to more than this op (a setting, a library, the data)"
)
FASTER_FIX = (
    "this run was the quicker one, so a rerun changes nothing: the baseline was recorded on a slower "
    "machine or spell; where this speed is the runner's usual, record it again, pytest "
    "--opprof-update-baseline=all with the test's id"
)
SLOWER_MACHINE_FIX = (
    "no other load was seen (the test's threads seldom waited for a CPU): the machine itself ran slower, a slow "
    "spell or process state of a shared VM, or another runner; rerun for a time verdict, and where it stays "
    "this slow, record the baseline on this runner (pytest --opprof-update-baseline=all with the test's id)"
)
LOADED_FIX = (
    "its baseline was recorded under load (its inflated times hide slowdowns): record it again on a quiet "
    "machine, pytest --opprof-update-baseline=all with the test's id"
)


class Excuse(NamedTuple):
    """Why the machine may have moved a time, and what to do for a time verdict."""

    why: str
    fix: str = QUIET_MACHINE_FIX


def explained_by_machine(
    slower: bool,
    on_device: bool,
    current: BaselineDoc,
    baseline: BaselineDoc,
    machine: Machine,
    python_time: bool = False,
    moved: float | None = None,
    added_ms: float | None = None,
    slack: float = OP_SLACK,
    blas: bool = False,
) -> Excuse | None:
    """Why the machine, not the code, may have moved an op's time this way; None if it cannot.
    `moved`: the op's (or the step wall's) time ratio, new / baseline: the workload reference
    explains a move no larger than its own, the dispatch and matmul references one up to `slack`
    times their own (OP_SLACK for an op; a trial's x4 slower ops passed on a machine x1.24 slower).
    `blas`: a matrix product (aten::addmm, mm, bmm), whose BLAS kernels take no part in torch's
    CPU capability (the references speak for them: a review's addmm x4 slower beside an unmoved
    replay of its own product passed as inconclusive on AVX2 against AVX512).
    `added_ms`: what the move added to a step, which CPU contention explains only up to
    CONTENTION_SLACK times the ms the threads waited per step, as it must the whole step's
    slowdown (_contention_explains).

    Only a move in the machine's direction is excused: a slowdown on a slower or contended
    machine, a speed-up on a faster one. A GPU with throttled clocks excuses both; a Python
    tracer (coverage) a slower `python_time` (the step wall: the Python between the ops)."""
    if machine.gpu_unreliable:
        return Excuse(f"unreliable GPU clocks ({machine.gpu_unreliable})")
    if python_time and slower and machine.python_tracer:
        return Excuse(f"a Python tracer ({machine.python_tracer}) slowed the Python between the ops", TRACER_FIX)
    if on_device:
        return None
    if _threads_differ(current, baseline) and not python_time and _threads_explain(moved, current, baseline, slack):
        threads = count_of(current.threads or 0, "thread")
        return Excuse(f"torch ran on {threads}, the baseline on {baseline.threads}", threads_fix(current, baseline))
    if not python_time and not blas and _capability_explains(moved, current, baseline, slack):
        return Excuse(_capability_why(current, baseline), CAPABILITY_FIX)
    if slower and machine.contended and _contention_explains(machine, added_ms, current, baseline):
        return Excuse(f"{CONTENTION_WHY}: {waited_for_cpu(machine.cpu_wait or 0.0)}")
    for ratio, what, bounded in _reference_ratios(current, baseline, workload=not python_time, wall=python_time):
        explains = _within(moved, ratio) if bounded else _within_slowdown(moved, ratio, slack)
        if not explains:  # the op moved further than its own product did alone, or x4 on a machine x1.24
            continue
        if ratio > STATE_NOISE if slower else ratio < 1 / STATE_NOISE:
            why = f"the machine ran {speed_words(ratio)} than when the baseline was recorded ({what} reference)"
            return Excuse(why, _machine_fix(ratio, current, baseline, machine))
    return None


def _threads_explain(moved: float | None, current: BaselineDoc, baseline: BaselineDoc, slack: float) -> bool:
    """Whether another torch thread count explains an op's move: one either way up to 1 + `slack`
    x (the threads' ratio - 1) (1 -> 2 threads: an op up to x5 slower or faster). A trial's
    baseline recorded with OMP_NUM_THREADS=1 excused a 50x slower addmm on 2 threads, and every
    later run's. Never the step wall: the Python between the ops runs on one thread either way."""
    if moved is None or moved <= 0:
        return False
    return max(moved, 1 / moved) <= 1 + slack * (_threads_ratio(current, baseline) - 1)


# The vector width of each CPU capability torch names, relative to its DEFAULT build's (SSE2 or
# NEON, 128 bits). Two capabilities are read as at least x2 apart (their kernels differ whatever
# the widths; one not named here counts as 2).
VECTOR_WIDTH = {"DEFAULT": 1, "NO AVX": 1, "VSX": 1, "Z VECTOR": 1, "AVX2": 2, "SVE256": 2, "AVX512": 4}
CAPABILITY_FIX = (
    "record baselines per CPU kind: give each kind its device key (the pytest_opprof_device_key hook), or record "
    "the baseline on the machines that check it (--opprof-update-baseline=all there)"
)


def _capabilities(current: BaselineDoc, baseline: BaselineDoc) -> tuple[str, str] | None:
    """The baseline's and this run's CPU capability where both were recorded and differ."""
    was, now = baseline.environment.get("cpu_capability"), current.environment.get("cpu_capability")
    if not isinstance(was, str) or not isinstance(now, str) or was == now:
        return None
    return was, now


def _capability_reach(current: BaselineDoc, baseline: BaselineDoc, slack: float) -> float | None:
    """How far torch's CPU kernels built for other vector instructions may move an op's time,
    either way: 1 + `slack` x (the widths' ratio - 1) (AVX512 -> AVX2: x5; -> DEFAULT: x13); None
    where the capabilities agree or one is unrecorded. A team trial's elementwise ops failed on
    time on one machine under ATEN_CPU_CAPABILITY=default: the matmul and dispatch references,
    BLAS and dispatch, did not move with them (as on a mixed fleet's AVX2-only runner)."""
    pair = _capabilities(current, baseline)
    if pair is None:
        return None
    widths = sorted(VECTOR_WIDTH.get(c, 2) for c in pair)
    return 1 + slack * (max(2.0, widths[1] / widths[0]) - 1)


def _capability_explains(moved: float | None, current: BaselineDoc, baseline: BaselineDoc, slack: float) -> bool:
    reach = _capability_reach(current, baseline, slack)
    return reach is not None and moved is not None and moved > 0 and max(moved, 1 / moved) <= reach


def _capability_too_little(moved: float, current: BaselineDoc, baseline: BaselineDoc, slack: float, name: str) -> str:
    """For a slowdown that fails on other CPU kernels: the clause saying they explain too little
    (none for a matrix product, which they do not explain at all: explained_by_machine's `blas`)."""
    reach = _capability_reach(current, baseline, slack)
    if name in WORKLOAD_OPS:
        return ""
    if reach is None and "cpu_capability" not in baseline.environment and current.environment.get("cpu_capability"):
        # a file older than the fact: an upgrade trial's x6.8 slower clamp_min on DEFAULT kernels said nothing of it
        return (
            f"; the baseline predates cpu_capability, so whether it ran other CPU kernels than this run's "
            f"{current.environment['cpu_capability']} cannot be told"
        )
    if reach is None:
        return ""
    return f"; {_capability_why(current, baseline)}: {_reach(reach, moved)}"


def _capability_why(current: BaselineDoc, baseline: BaselineDoc) -> str:
    was, now = _capabilities(current, baseline) or ("?", "?")
    return f"torch's CPU kernels ran with {now} instructions, the baseline's with {was}"


def _threads_ratio(current: BaselineDoc, baseline: BaselineDoc) -> float:
    """The larger thread count over the smaller (1.0 where either is unknown)."""
    counts = sorted(n for n in (current.threads, baseline.threads) if n)
    return counts[-1] / counts[0] if len(counts) == 2 else 1.0


def _threads_too_little(moved: float, current: BaselineDoc, baseline: BaselineDoc, slack: float) -> str:
    """For a slowdown that fails on another thread count: the clause saying it explains too little."""
    if not _threads_differ(current, baseline):
        return ""
    threads = count_of(current.threads or 0, "thread")
    reach = _reach(1 + slack * (_threads_ratio(current, baseline) - 1), moved)
    return f"; torch ran on {threads}, the baseline on {baseline.threads}: {reach}"


def _reach(most: float, moved: float) -> str:
    """`that explains up to x1.96, not x3.40`: what a cause explains of a move, and the move."""
    return f"that explains up to x{most:.2f}" + (f", not x{moved:.2f}" if math.isfinite(moved) else "")


def _contention_explains(machine: Machine, added_ms: float | None, current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """Whether the ms the threads waited for a CPU can account for what a slowdown added to a
    step, and what the whole step got slower by (_step_slowdown): a thread waiting delays a step
    by at most its wait (summed over threads, the bound is generous). A training trial's step
    3.7x slower by 2 ms of Python passed in 12 of 12 runs beside a busy loop, as `inconclusive`,
    on a 20% wait (0.7 ms a step)."""
    waited = machine.waited_ms_per_step
    if added_ms is None or waited is None:
        return True
    return _step_slowdown(added_ms, current, baseline) <= CONTENTION_SLACK * waited


def _step_slowdown(added_ms: float, current: BaselineDoc, baseline: BaselineDoc) -> float:
    """What a wait must explain of a slowdown that added `added_ms`: that, or what the fastest
    step got slower by when more (0 where a side has no step walls), so that two ops each within
    the bound but together beyond it are not both excused (a review's addmm and mm, +0.6 ms each
    on a 0.75 ms bound)."""
    new, old = current.wall_ms, baseline.wall_ms
    return max(added_ms, min(new) - min(old)) if new and old else added_ms


def _contention_too_small(machine: Machine, added_ms: float, current: BaselineDoc, baseline: BaselineDoc) -> str:
    """For a slowdown that fails under contention: the clause saying the wait cannot explain it
    (none where it could, and the slowdown failed for another reason)."""
    waited = machine.waited_ms_per_step
    if not machine.contended or waited is None or _contention_explains(machine, added_ms, current, baseline):
        return ""
    needed = _step_slowdown(added_ms, current, baseline)
    return (
        f"; {waited_for_cpu(machine.cpu_wait or 0.0)}, {waited:.3f} ms a step: too little to explain +{needed:.3f} ms"
    )


def _machine_too_little(
    moved: float, current: BaselineDoc, baseline: BaselineDoc, slack: float, wall: bool = False
) -> str:
    """For a slowdown that fails on a slower machine: the clause saying that the machine's
    slowdown (its dispatch or matmul reference's, beyond their noise) explains too little of it,
    and for the `wall`, that a reference stalled alone explains none of it."""
    found = [(r, what) for r, what, _ in _reference_ratios(current, baseline, workload=False, wall=wall)]
    ratio, what = max(found, default=(1.0, ""))
    stalled = _stall_clause(current, baseline) if wall else ""
    if ratio <= STATE_NOISE:
        return stalled
    reach = _reach(1 + slack * (ratio - 1), moved)
    return f"; the machine ran {speed_words(ratio)} ({what} reference): {reach}{stalled}"


def _machine_fix(ratio: float, current: BaselineDoc, baseline: BaselineDoc, machine: Machine) -> str:
    """What to do for a time verdict when a reference moved by `ratio` (new / baseline): on a
    slower machine, find a quiet one where other load was seen, else rerun (an idle VM's slow
    process state: a trial's idle run was told to find a quiet machine); on a faster one, the
    baseline is what was slow."""
    if recorded_under_load(current, baseline):
        return LOADED_FIX
    if ratio < 1:
        return FASTER_FIX
    return QUIET_MACHINE_FIX if machine.cpu_wait is None or machine.contended else SLOWER_MACHINE_FIX


def _within(moved: float | None, ratio: float) -> bool:
    """Whether an op's time ratio (new / baseline) is no further from 1 than the workload
    reference's `ratio`, give or take its noise: a x1.16 replay explains +20%, never +900%."""
    if moved is None:
        return False
    return moved <= ratio * STATE_NOISE if ratio >= 1 else moved >= ratio / STATE_NOISE


def _within_slowdown(moved: float | None, ratio: float, times: float) -> bool:
    """Whether a time ratio (new / baseline) moved no more than `times` the machine's own move:
    a machine x1.4 slower explains a wall up to x1.8 (+80%), x0.8 one down to x1/1.5."""
    if moved is None or moved <= 0:
        return False
    if ratio >= 1:
        return moved <= 1 + times * (ratio - 1)
    return 1 / moved <= 1 + times * (1 / ratio - 1)


def _reference_ratios(
    current: BaselineDoc, baseline: BaselineDoc, workload: bool = True, wall: bool = False
) -> list[tuple[float, str, bool]]:
    """Each machine reference both sides took: this run's time / the baseline's, its name, and
    whether it is bounded. The workload reference counts only where both replayed the same
    product on the same inputs (the test's own shapes: it follows slow spells that leave the
    fixed matmul untouched); it excuses only a move no larger than its own (`bounded`: it is the
    same work), and never the step wall (`workload` False): the wall is judged on the time
    outside the ops (or, for an older baseline, on what the slower ops do not account for), which
    a slower product does not explain (it excused 3 of 20 steps slowed by Python in the noise bench).
    For the `wall`, a reference that stalled alone is left out (_stalled_references)."""
    stalled = {what for what, _, _ in _stalled_references(current, baseline)} if wall else set()
    found = [(r, what, False) for r, what in _fixed_ratios(current, baseline) if what not in stalled]
    replayed = _workload_ratio(current, baseline) if workload else None
    if replayed is not None:
        op, ratio = replayed
        found.append((ratio, f"{op} on the test's inputs", True))  # bounded: see _within
    return found


def _fixed_ratios(current: BaselineDoc, baseline: BaselineDoc) -> list[tuple[float, str]]:
    """The fixed references both sides took (dispatch, matmul): this run's time / the baseline's, its name."""
    return [(r, what) for key, what in REFERENCES if (r := _reference_ratio(current, baseline, key)) is not None]


def _stalled_references(current: BaselineDoc, baseline: BaselineDoc) -> list[tuple[str, float, str]]:
    """On the same machine setup and thread count, the fixed references that moved past
    SPELL_LIMIT (no spell of this VM did) while the other stayed within it: a stall of that
    reference's own reading, which says nothing of the Python between the ops (one thread). Each
    as (its name, its ratio, the other's words). Beside two busy loops on 2 cores, a trial's
    2-thread matmul reference ran 49x slower in every timing (it needs both cores at once) while
    the dispatch reference ran x1.05 and the test's threads never waited: it excused a step wall
    x57 (a 2 ms sleep), 3 runs in 5. An op may run on torch's threads and stall alike (a compiled
    trial's 2-thread kernels did, under load its threads' CPU wait did not show), so ops keep that
    excuse. Another CPU model or thread setup may move one reference alone that far (its BLAS,
    its threads): there nothing is left out."""
    if not _same_machine(current, baseline):
        return []
    found = _fixed_ratios(current, baseline)
    within = [(r, what) for r, what in found if 1 / SPELL_LIMIT <= r <= SPELL_LIMIT]
    if not within:
        return []
    other = f"the {within[0][1]} reference ran x{within[0][0]:.2f}"
    # the matmul runs on torch's threads and stalls when it cannot have them all at once; the
    # dispatch reference runs on one thread, as the Python between the ops does (a review)
    return [(what, r, other) for r, what in found if what == "matmul" and (r > SPELL_LIMIT or r < 1 / SPELL_LIMIT)]


def _same_machine(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """The same CPU model and thread setup where both sides recorded them, and the same torch
    thread count (a baseline of before the thread setup was recorded: by what it holds)."""
    if _threads_differ(current, baseline):
        return False
    for key in ("cpu_model", "thread_setup"):  # not cpu_capability: BLAS's matmul ignores it (a review)
        mine, theirs = current.environment.get(key), baseline.environment.get(key)
        if mine is not None and theirs is not None and mine != theirs:
            return False
    return True


def _stall_clause(current: BaselineDoc, baseline: BaselineDoc) -> str:
    """For a slowdown a stalled reference did not excuse: the clause saying so (none where none
    stalled slower: a baseline's stalled reading, faster now, has no bearing on a slowdown)."""
    return "".join(
        f"; the {what} reference ran {speed_words(r)}, but alone ({other}): a stall of its own reading, not the "
        "machine's speed"
        for what, r, other in _stalled_references(current, baseline)
        if r > 1
    )


def _workload_ratio(current: BaselineDoc, baseline: BaselineDoc) -> tuple[str, float] | None:
    """The op the workload reference replays and its replay's time ratio (new / baseline), where
    both sides replayed the same product on the same inputs, each in WORKLOAD_MIN_MS or more
    (a shorter replay is timer noise)."""
    mine, theirs = current.workload_reference, baseline.workload_reference
    if mine is None or theirs is None or not mine.same_product(theirs):
        return None
    if min(mine.ms, theirs.ms) < WORKLOAD_MIN_MS:
        return None
    return mine.op, mine.ms / theirs.ms


REFERENCES = (("dispatch_reference_ms", "dispatch"), ("reference_ms", "matmul"))
UNDER_LOAD = 2.0  # the same machine setup ran every reference this many times slower for the baseline


def recorded_under_load(current: BaselineDoc, baseline: BaselineDoc) -> float | None:
    """How many times slower the baseline's references ran than this run's, when it is
    UNDER_LOAD or more on both references, on the same machine setup (CPU model, thread setup,
    torch threads) and torch: the baseline was recorded under load and its times are inflated,
    hiding any slowdown smaller than that. None otherwise (another machine or another torch is
    no load of this one)."""
    same_torch = current.environment.get("torch") == baseline.environment.get("torch")
    if not same_torch or not _same_thread_setup(current, baseline) or _threads_differ(current, baseline):
        return None
    ratios = [r for key, _ in REFERENCES if (r := _reference_ratio(current, baseline, key)) is not None]
    if len(ratios) < len(REFERENCES) or max(ratios) > 1 / UNDER_LOAD:
        return None
    return 1 / max(ratios)


# -- 4. environment ----------------------------------------------------------------------------


SOFTWARE_FACTS = ("torch", "cuda", "hip", "driver", "cuda_driver")
# read through NVML: null where it could not be read (a MIG instance before opprof found its GPU,
# no permission), which is no difference (an upgrade's every test read `driver none -> 550.54.15`)
NVML_READ = frozenset({"driver", "cuda_driver"})
# the hardware under one device key: a key names a GPU or a CPU architecture (every x86-64 CPU
# is `cpu-x86_64`), and a hook or --opprof-device-key may give several machines one key
HARDWARE_FACTS = ("gpu_name", "gpu_capability", "cpu_model", "cpu_capability")
# the environment differences that excuse a CPU time's move within a bound (explained_by_machine)
EXCUSING_FACTS = frozenset({"torch threads", "cpu_capability"})


def _environment(current: BaselineDoc, baseline: BaselineDoc, where: str) -> list[Verdict]:
    """What differs between the machine setups: device key, software versions, the hardware the
    key stands for, and the torch threads where another machine setup gave torch another count
    (one verdict, each fact in `differs`)."""
    differs = []
    if not same_device_key(current.device_key, baseline.device_key):
        differs.append(Differs("device", str(baseline.device_key), str(current.device_key)))
    for key in SOFTWARE_FACTS:
        was, now = baseline.environment.get(key), current.environment.get(key)
        if was != now and not (key in NVML_READ and (was is None or now is None)):
            differs.append(Differs(key, _fact(baseline, key), _fact(current, key)))
    for key in HARDWARE_FACTS:  # a file that does not hold one (a hand-made one) is not told apart on it
        if key in baseline.environment and baseline.environment[key] != current.environment.get(key):
            differs.append(Differs(key, _fact(baseline, key), _fact(current, key)))
    words = [f"{d.fact} {d.was} -> {d.now}" for d in differs]
    if _threads_differ(current, baseline) and not _same_thread_setup(current, baseline):
        differs.append(Differs("torch threads", str(baseline.threads), str(current.threads)))
        words.append(
            f"torch threads {baseline.threads} -> {current.threads} ({_other_setup(current, baseline, differs)})"
        )
    if not differs:
        return []
    what = ", ".join(words)  # also as `why`: one run line can stand for the tests alike
    message = f"environment differs from the baseline: {what}{where}"
    return [Verdict(ENVIRONMENT, CHANGED, message, why=what, differs=tuple(differs))]


def _other_setup(current: BaselineDoc, baseline: BaselineDoc, differs: list[Differs]) -> str:
    """Which machine setup gave torch its other thread count: what differs in the thread setups
    (`MKL_NUM_THREADS unset -> 1`: the whole setups read `2 cpus -> 2 cpus, MKL_NUM_THREADS=1`
    to a trial), or the CPU models where those agree (once: a cpu_model already named is not
    named again)."""
    old, new = _thread_setup(baseline), _thread_setup(current)
    if old != new:
        return f"another machine setup: {', '.join(_setup_changes(old, new))}"
    if any(d.fact == "cpu_model" for d in differs):
        return "another machine setup: the other CPU"
    return f"another machine setup: CPU {_fact(baseline, 'cpu_model')} -> {_fact(current, 'cpu_model')}"


def _setup_parts(setup: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """A thread setup (device.thread_setup: `4 cpus, 2 cores, OMP_NUM_THREADS=2`) in parts: the
    CPU and core counts by their unit, and the variables by name."""
    counts, variables = {}, {}
    for part in (setup or "").split(", "):
        name, equals, value = part.partition("=")
        if equals:
            variables[name] = value
        elif part:
            count, _, unit = part.partition(" ")
            counts[(unit or part).removesuffix("s")] = count  # `1 core`, `2 cores`: one part
    return counts, variables


def _setup_changes(old: str | None, new: str | None) -> list[str]:
    """What differs between two thread setups, part by part: `2 cpus -> 4 cpus`,
    `MKL_NUM_THREADS unset -> 1`."""
    (counts_a, vars_a), (counts_b, vars_b) = _setup_parts(old), _setup_parts(new)
    for mine, other in ((counts_a, counts_b), (counts_b, counts_a)):
        if "core" in other and "cpu" in mine:  # thread_setup names the cores only where they are fewer
            mine.setdefault("core", mine["cpu"])
    changes = [
        f"{_counted(counts_a.get(unit), unit)} -> {_counted(counts_b.get(unit), unit)}"
        for unit in dict.fromkeys([*counts_a, *counts_b])
        if counts_a.get(unit) != counts_b.get(unit)
    ]
    changes += [f"{name} {vars_a.get(name, 'unset')} -> {vars_b.get(name, 'unset')}" for name in _moved(vars_a, vars_b)]
    return changes or [f"{old} -> {new}"]


def _counted(count: str | None, unit: str) -> str:
    """`1 core`, `2 cores`, `? cores` (a part one setup does not name)."""
    return f"{count or '?'} {unit}{'' if count == '1' else 's'}"


def _moved(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """The keys whose values differ between two dicts (one side lacking it counts), in order."""
    return [key for key in dict.fromkeys([*a, *b]) if a.get(key) != b.get(key)]


def threads_fix(current: BaselineDoc, baseline: BaselineDoc) -> str:
    """What to do where torch ran on another thread count than the baseline: set the baseline's
    thread variables where the setups' differ (a trial's fix said to set OMP_NUM_THREADS, already
    set, where MKL_NUM_THREADS=1 had made the difference), else its count; or record there."""
    (their_counts, theirs), (my_counts, mine) = (
        _setup_parts(_thread_setup(baseline)),
        _setup_parts(_thread_setup(current)),
    )
    record = "record the baseline on the machine that checks it (--opprof-update-baseline=all there)"
    moved = _moved(theirs, mine)
    if not moved or _thread_setup(baseline) is None:
        return f"{record}, or set OMP_NUM_THREADS={baseline.threads} (the baseline's count)"
    if _moved(their_counts, my_counts):  # the baseline's variables on other CPUs: another count still
        moved = [k for k in moved if k != "OMP_NUM_THREADS"]
        theirs = {**theirs, "OMP_NUM_THREADS": str(baseline.threads)}
        moved.append("OMP_NUM_THREADS")
        what = "count"
    else:
        what = "variables"
    unset = [f"-u {k}" for k in moved if k not in theirs]
    wanted = " ".join([*unset, *(f"{k}={shlex.quote(theirs[k])}" for k in moved if k in theirs)])
    return f"{record}, or run with the baseline's thread {what}: env {wanted} pytest ..."


def _fact(doc: BaselineDoc, key: str) -> str:
    """An environment fact in words: `none` (no CUDA on that side), `unrecorded` (a hand-edited file)."""
    if key not in doc.environment:
        return "unrecorded"
    value = doc.environment[key]
    return "none" if value is None else str(value)


def merge_measurements(first: BaselineDoc, second: BaselineDoc) -> BaselineDoc:
    """Two measurements of the same test as one: every op's per-step samples from both.

    Confirms a suspected time change: interference rarely hits twice, a slowdown shows in both.
    Pooled unscaled, keeping the faster of each reference (the less excused; docs/design.md).
    """

    def pooled_op(a: OpEntry, b: OpEntry) -> OpEntry:
        lost = a.records_lost or b.records_lost
        return replace(
            a,
            calls_per_step=a.calls_per_step + b.calls_per_step,
            cpu_ms=a.cpu_ms + b.cpu_ms,
            device_ms=a.device_ms + b.device_ms,
            records_lost=a.lost_in_steps() + b.lost_in_steps() if lost else (),
        )

    def pooled_kernel(a: KernelEntry, b: KernelEntry) -> KernelEntry:
        return replace(
            a,
            calls_per_step=a.calls_per_step + b.calls_per_step,
            device_ms=a.device_ms + b.device_ms,
            ops=tuple(sorted({*a.ops, *b.ops})),
            by_op=_pooled_shares(a, b),
        )

    def pooled_memory(a: MemoryEntry, b: MemoryEntry) -> MemoryEntry:
        return replace(a, calls_per_step=a.calls_per_step + b.calls_per_step, device_ms=a.device_ms + b.device_ms)

    events = first.events_per_step + second.events_per_step
    return replace(
        first,
        ops=_pooled(first.ops, second.ops, pooled_op),
        kernels=_pooled(first.kernels, second.kernels, pooled_kernel),
        memory_ops=_pooled(first.memory_ops, second.memory_ops, pooled_memory),
        wall_ms=first.wall_ms + second.wall_ms if first.wall_ms and second.wall_ms else first.wall_ms,
        outside_ms=first.outside_ms + second.outside_ms if first.outside_ms and second.outside_ms else None,
        events_per_step=events,
        steps=len(events),
        reference_ms=_faster(first.reference_ms, second.reference_ms),
        dispatch_reference_ms=_faster(first.dispatch_reference_ms, second.dispatch_reference_ms),
    )


def _pooled_shares(a: KernelEntry, b: KernelEntry) -> dict[str, KernelShare]:
    """Each launching op's share over both measurements (zeros for the steps it launched none);
    none where one op launched every call on both sides. Nothing reads a merged document's
    shares today (it is judged, never written); pooled so that it stays a valid document."""
    if not a.by_op and not b.by_op and a.ops == b.ops and len(a.ops) <= 1:
        return {}

    def zeros(entry: KernelEntry) -> KernelShare:
        return KernelShare((0,) * len(entry.calls_per_step), (0.0,) * len(entry.device_ms))

    first, second = a.shares(), b.shares()
    return {
        op: KernelShare(
            first.get(op, zeros(a)).calls_per_step + second.get(op, zeros(b)).calls_per_step,
            first.get(op, zeros(a)).device_ms + second.get(op, zeros(b)).device_ms,
        )
        for op in sorted({*first, *second})
    }


E = TypeVar("E")


def _pooled(a: Mapping[str, E], b: Mapping[str, E], pool: Callable[[E, E], E]) -> dict[str, E]:
    """Entries of both; an entry on one side only is kept as it is."""
    return {name: pool(a[name], b[name]) if name in a and name in b else a.get(name) or b[name] for name in {**a, **b}}


def _faster(a: float | None, b: float | None) -> float | None:
    known = [v for v in (a, b) if v]
    return min(known) if known else None
