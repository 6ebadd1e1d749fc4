"""What a comparison yields and the rule it follows: verdict kinds and statuses, Rule, Machine,
Verdict, Comparison, and the per-step readings of a baseline entry that every verdict uses. Pure."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from .analysis.checks import CONTENTION_LIMIT
from .documents import KernelEntry, MemoryEntry, OpEntry
from .errors import unrecordable_gpu, unrecordable_tracer
from .leakmessages import unrecordable_settings
from .rules import STRUCTURE, TIME, WORK, Rule  # the rule a run or marker sets: rules.py
from .torchstate import Left

REGRESSED, IMPROVED, CHANGED, INCONCLUSIVE = "regressed", "improved", "changed", "inconclusive"


ALPHA = 0.01  # one-sided significance for the rank test


MIN_TIME_STEPS = 5  # steps on each side for a time verdict: the fastest half must hold 3


CONTENTION_WHY = "CPU contention"  # how an inconclusive verdict's why begins when the wait explains it


CONTENTION_SLACK = 1.5  # ...up to this times the ms they waited: a 20% wait explains no x3.7 step


STATE_NOISE = 1.15  # a reference's own spread on a steady machine; beyond it the machine moved


WALL_SLACK = 2.0  # a slower machine explains a slower step up to this times its own slowdown (x1.4: +80%)


# ...and an op up to this: memory-bound ops (a convolution, x2.12) slow further than the cache-resident
# references (x1.38) in a slow spell, and a trial's ops x4 on a machine x1.24 are not the machine
OP_SLACK = 4.0

# ...but by the small matmul reference, which stands for small products only (a review: at x2.13 it
# excused a 3x addmm), an op up to this: in a model zoo's 20 runs its 40 excuses of ops (ops x1.45-1.89
# beside it x1.22-1.38) were all within three times its move, 35 within twice
SMALL_SLACK = 3.0
SMALL_SPELL = 1.5  # ...and counting a move of its own up to this either way (its spells ran x1.22-1.38)


REST_SHARE = 0.2  # the rest of a step (outside the op judged) must be this share of it to be a reference


# A step slowed as a whole by more than this is no spell of the machine (a 2-vCPU VM's ran x1.5-3,
# bench/spells.py): a newcomer trial's denormal weights slowed every matmul x80, the rest of the
# step x23.5, and each op was excused by the others, every run
SPELL_LIMIT = 4.0


WORKLOAD_MIN_MS = 0.05  # a workload reference replayed faster than this is timer noise, no reference


@dataclass(frozen=True, slots=True)
class Places:
    """Where an op ran in a measurement, from its events, for a structure verdict: `added`, an
    op's place (`in aten::to <- aten::linear; inputs float[4, 8]`); `spread`, where an op's calls
    ran in several places, each with its calls per step (`20/step inside
    Optimizer.step#AdamW.step, 1/step outside every range`), "" where in one."""

    added: Callable[[str], str]
    spread: Callable[[str], str] = lambda name: ""


UNPLACED = Places(lambda name: "")  # a measurement without events: no op's place known


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
    pooled_steps: tuple[int, ...] = ()  # with pooled: each measurement's steps, in the samples' order
    settings_left: tuple[Left, ...] = ()  # torch ran on settings (the thread count, the default dtype...) tests left
    env_set_inside: tuple[str, ...] = ()  # thread variables the process set itself (pytest-env): no shell fix for them
    tracer_stays: bool = (
        False  # python_tracer cannot be taken off (cProfile, sys.monitoring): a confirmation is traced too
    )

    @property
    def contended(self) -> bool:
        """Our threads waited for a CPU beyond CONTENTION_LIMIT of the capture: other load."""
        return self.cpu_wait is not None and self.cpu_wait > CONTENTION_LIMIT

    @property
    def unrecordable(self) -> str | None:
        """Why no baseline is written from this measurement, or None: throttled GPU clocks, or a
        Python tracer (coverage, a debugger), which slows the Python between the ops: a trial's
        baseline recorded under --cov held that slower step wall, and a 3x slower one passed; or
        a thread count or other torch settings an earlier test left (a review's recording wrote it,
        and the test then depended on test order)."""
        if self.gpu_unreliable:
            return unrecordable_gpu(self.gpu_unreliable)
        if self.python_tracer:
            return unrecordable_tracer(self.python_tracer)
        if self.settings_left:
            return "; ".join(unrecordable_settings(found) for found in self.settings_left)
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
    renumbered_from: str | None = None  # the baseline's name of a compiled kernel renumbered in its graph

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op, "was": self.was, "now": self.now, "ms_per_step": round(self.ms, 6), "text": self.text,
            "renumbered_from": self.renumbered_from,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Change:
        return cls(data["op"], data["was"], data["now"], data["ms_per_step"], data["text"], data.get("renumbered_from"))


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
    differs: tuple[
        Differs, ...
    ] = ()  # an environment verdict: each fact that differs; a torch threads work verdict: the counts

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
    # the baseline holds its ops' work but no autograd record (an earlier pytest-opprof) where this
    # capture has one: grad mode is not compared (a forgotten no_grad() not caught)
    grad_unrecorded: bool = False

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


SOMETIMES_STEPS = 2  # an op on one side only, in fewer steps than half, counts from this many (1: sporadic)


def steps_run(entry: OpEntry | MemoryEntry) -> int:
    """In how many steps the op ran."""
    return sum(1 for c in entry.calls_per_step if c)


def step_cost_ms(entry: OpEntry | MemoryEntry) -> float:
    """The op's time in its costliest step: its shown time (device or CPU), a memory op's device time."""
    samples = entry.time_samples if isinstance(entry, OpEntry) else entry.device_ms
    return max(samples, default=0.0)


STEP_WALL = "step wall"  # the name of the time verdict on the steps' wall time


def added_ms(verdict: Verdict) -> float:
    """What a time verdict's move added to a step (ms, negative for a speed-up): an op that ran
    in one step only holds no baseline time, its whole cost added; 0 where it holds no times."""
    if verdict.new_ms is None:
        return 0.0
    return verdict.new_ms - (verdict.base_ms or 0.0)


def largest_first(group: Iterable[Verdict]) -> list[Verdict]:
    """Time verdicts, the largest move first, either way, ties in their order (a trial's +320%
    step wall sat among `and 5 more` behind three ops that moved a few microseconds)."""
    return sorted(group, key=lambda v: round(abs(added_ms(v)), 6), reverse=True)  # equal moves: in their order
