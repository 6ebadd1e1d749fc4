"""The trust checks of a measurement, each a function: events present, device
events delivered, steps repeatable, timings within wall time, spread narrow enough, ops inside
the steps. A check that fires with `error` makes the measurement untrusted."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import compress, repeat
from operator import add, lt, sub

from ..errors import (
    benchmark_rounds,
    contended_capture,
    device_before_launch,
    not_compiled_text,
    ops_overrun,
    recompile_limit_hit_text,
    shared_correlation,
    shown_name,
    step_marked_twice,
    steps_not_compared,
    steps_overlap,
    waited_for_cpu,
)
from ..events import Event
from ..opmessages import asked
from ..units import PERIODIC_STEPS, count_of, first_three, fixed_period, ms_text, ns_to_ms, ordinal
from .compiled import FX_GRAPH, REGION
from .model import (
    ERROR,
    INDUCTOR_CPU_KERNEL,
    OK,
    WARNING,
    Check,
    Compilation,
    Dist,
    OpStats,
    OtherThread,
    Profile,
    RangeStats,
    StepSpan,
    union_ns,
)

# Timing consistency: CPU or device time may exceed the step's wall time only by clock skew
# between threads / device and host (a few microseconds) plus 2%.
WALL_MARGIN = 0.02
WALL_SLACK_NS = 20_000
SPREAD_LIMIT = 0.25  # IQR / median over steps
SPREAD_MIN_STEPS = 4
SPREAD_FLOOR_NS = 50_000  # ops faster than this per step are too small to judge spread

# Runtime calls that launch device work: seeing them without device events means the device
# tracer (CUPTI / roctracer) did not deliver.
_LAUNCH_CALL = re.compile(r"(LaunchKernel|LaunchCooperativeKernel|Memcpy|Memset|GraphLaunch)", re.I)
# Calls that launch kernels (a graph launch: one or more): each should have a kernel record.
_KERNEL_LAUNCH = re.compile(r"(LaunchKernel|LaunchCooperativeKernel|GraphLaunch)", re.I)


@dataclass(frozen=True, slots=True)
class CheckInputs:
    """The analysed ops' columns and the device and runtime events, as the checks read them."""

    pids: list[int]
    tids: list[int]
    starts: list[int]
    durs: list[int]
    names: list[str]
    parent: list[int]
    op_step: list[int]
    device: list[Event]
    runtime: list[Event]
    unnested: frozenset[int] = frozenset()  # ops whose end another thread recorded: no scope, at no top
    dropped: tuple[list[Event], list[Event]] | None = None  # dropped_launches, where already found

    @property
    def forked(self) -> bool:
        """Whether an op ended on another thread than its own: a TorchScript fork ran."""
        return bool(self.unnested)

    def top_level(self) -> list[bool]:
        """Per op, whether it is at the top of its thread's stack (an unnested op is at none)."""
        top = list(map(lt, self.parent, repeat(0)))
        for i in self.unnested:
            top[i] = False
        return top


def trust_checks(
    cols: CheckInputs,
    spans: list[StepSpan],
    busy_by_step: list[dict[int, list[tuple[int, int]]]],
    ops: list[OpStats],
    outside: int,
    wall_known: bool,
    compilations: tuple[Compilation, ...] = (),
    ranges: Sequence[RangeStats] = (),
    step_thread: tuple[int, int] | None = None,
    host_may_lead: bool = False,
) -> list[Check]:
    """Every check of a capture (`step_thread`: the thread that marks every step, if one does;
    `host_may_lead`: its steps are a user's loop, which need not wait for the device at their ends)."""
    n_events = len(cols.durs) + len(cols.device)
    with_ids = [r for r in cols.runtime if r.correlation]
    launched = {r.correlation: r.start_ns for r in with_ids}  # one pass serves both checks of ids
    found = [
        _events(len(cols.durs), len(cols.device), ranges),
        _durations(cols, spans, wall_known),
        _steps(spans) if wall_known else None,
        _nesting(cols, spans, wall_known, step_thread),
        _device_events(cols.device, cols.runtime),
        _kernel_records(cols.dropped or dropped_launches(cols.device, cols.runtime)),
        _correlation(with_ids, launched) if cols.device else None,
        _clock(cols.device, launched),
        _compilation(compilations),
        _looked_up_not_compiled(ops),
        _step_events(cols.op_step, len(spans), ops),
        _step_ranges(ranges, len(spans)),
        _wall_time(cols, spans, busy_by_step, step_thread, host_may_lead) if n_events else None,
        _spread(ops, spans),
        _outside_steps(outside, len(cols.durs)) if wall_known else None,
    ]
    return [c for c in found if c is not None]


def _fmt_ms(ns: float) -> str:
    return f"{ms_text(ns_to_ms(ns))} ms"


def _events(n_ops: int, n_device: int, ranges: Sequence[RangeStats] = ()) -> Check:
    if n_ops + n_device == 0 and ranges:
        names = first_three([r.name for r in ranges])
        return Check(
            "events",
            ERROR,
            f"no operator or device events were recorded, only ranges ({names}): the ops ran where "
            "torch.profiler does not record them (a thread the step started, a pool made before the capture)",
        )
    if n_ops + n_device == 0:
        return Check("events", ERROR, "no operator or device events were recorded: nothing ran under the profiler")
    return Check("events", OK, f"{n_ops} CPU ops, {n_device} device events")


def _step_ranges(ranges: Sequence[RangeStats], n_steps: int) -> Check | None:
    """Ranges whose calls differ between steps: their median per step hides the steps that ran
    them (a 20 ms block every third step has a median of 0 ms)."""
    uneven = _uneven(ranges) if n_steps >= 2 else []
    if not uneven:
        return None
    return Check(
        "step_ranges",
        WARNING,
        f"ranges whose calls per step differ between steps: {_listed(uneven, n_steps)}; their time per step is a "
        'median over all the steps: check them per call (per="call") or by stat="max"',
    )


def _uneven(items: Sequence[OpStats | RangeStats]) -> list[OpStats | RangeStats]:
    """The ops or ranges whose calls differ between steps, costliest step first."""
    found = [i for i in items if len(set(i.calls_per_step.samples)) > 1]
    return sorted(found, key=lambda i: -max(i.time_per_step.samples, default=0))


def _listed(uneven: Sequence[OpStats | RangeStats], n_steps: int) -> str:
    """The first three with their calls per step: `aten::matmul (0, 0, 0, 20, ...)`."""
    listed = "; ".join(
        f"{r.name} ({', '.join(map(str, r.calls_per_step.samples[:10]))}{', ...' if n_steps > 10 else ''})"
        for r in uneven[:3]
    )
    return listed + (f"; and {len(uneven) - 3} more" if len(uneven) > 3 else "")


def _durations(cols: CheckInputs, spans: list[StepSpan], wall_known: bool = True) -> Check | None:
    """A negative duration is no measurement: every number built on it is wrong (a step marker's
    too: its wall time; not the one step of a trace without markers, spanning its events)."""
    negative = sum(1 for d in cols.durs if d < 0) + sum(1 for e in cols.device if e.dur_ns < 0)
    negative += sum(1 for s in spans if s.wall_ns < 0) if wall_known else 0
    if not negative:
        return None
    have = "has a negative duration" if negative == 1 else "have negative durations"
    return Check(
        "durations",
        ERROR,
        f"{count_of(negative, 'event')} {have}: the source is broken; export the trace again",
    )


NEST_SLACK_NS = 1_000  # a trace in whole microseconds rounds a child's end up to 1 us past its parent's


def _steps(spans: list[StepSpan]) -> Check | None:
    """Steps that overlap, or a step number marked twice: a profiler's steps follow one another on
    one thread, so the source merges several profilers' (ranks, processes) or was edited, and
    every per-step number is wrong (a trial's merge of two ranks read as 4 steps of half the calls,
    with a warning at most)."""
    over = _overlaps(spans)
    numbers = Counter(s.number for s in spans)
    repeated = sorted(n for n, times in numbers.items() if times > 1)
    if not over and not repeated:
        return None
    if repeated:  # a merge's own sign, overlapping or not
        what = step_marked_twice(repeated[0], numbers[repeated[0]], len(repeated))
    else:
        a, b = over[0]
        what = steps_overlap(a.number, b.number, _fmt_ms(a.end_ns - b.start_ns), len(over))
    return Check("steps", ERROR, what)


def _overlaps(spans: list[StepSpan]) -> list[tuple[StepSpan, StepSpan]]:
    """(a step, a later one starting before it ends): each step against the one that ends last
    of those before it (a long first step holds several)."""
    found, last = [], None
    for span in spans:  # in start order
        if last is not None and span.start_ns < last.end_ns - NEST_SLACK_NS:
            found.append((last, span))
        if last is None or span.end_ns > last.end_ns:
            last = span
    return found


def _nesting(
    cols: CheckInputs, spans: list[StepSpan], wall_known: bool, step_thread: tuple[int, int] | None = None
) -> Check | None:
    """An op that runs past the end of the op it started in: ops on one thread nest (each is a
    scope), so its duration is broken, and the ops after it would nest inside it (a trial's
    hand-edited `dur` hid 27 `aten::mm` calls that way, and every check said ok). Ops at the top
    of the steps' thread nest in their step so (a trial's op straddling two steps counted whole in
    the first)."""
    ends = list(map(add, cols.starts, cols.durs))
    ends.append(max(ends, default=0) + NEST_SLACK_NS + 1)  # parent -1: the sentinel never overrun
    overruns = list(map(sub, ends, map(ends.__getitem__, cols.parent)))
    if not overruns or max(overruns) <= NEST_SLACK_NS:
        return _past_their_step(cols, ends, spans, step_thread) if wall_known else None
    bad = [i for i, over in enumerate(overruns) if over > NEST_SLACK_NS]
    worst = max(bad, key=overruns.__getitem__)
    s = cols.op_step[worst]
    # not the one step of a trace without markers
    where = f" in step {spans[s].number}" if s >= 0 and wall_known else ""
    inside = shown_name(cols.names[cols.parent[worst]])
    message = ops_overrun(len(bad), shown_name(cols.names[worst]), where, _fmt_ms(overruns[worst]), inside)
    return Check("nesting", ERROR, message)


def _past_their_step(
    cols: CheckInputs, ends: list[int], spans: list[StepSpan], thread: tuple[int, int] | None
) -> Check | None:
    """Top-level ops of the thread that marks the steps, ending past the step they started in
    (`ends`: each op's end, and the sentinel last). Only top-level ops are looked at, picked at C
    speed: an op inside another ends within it (_nesting checked that first)."""
    if thread is None:
        return None
    step_ends = [s.end_ns for s in spans]
    step_ends.append(max(ends, default=0))  # step -1 (outside every step): never overrun
    pid, tid = thread
    found = [
        (ends[i] - step_ends[cols.op_step[i]], i)
        for i in compress(range(len(ends) - 1), cols.top_level())
        if ends[i] - step_ends[cols.op_step[i]] > NEST_SLACK_NS
        and cols.tids[i] == tid
        and cols.pids[i] == pid  # another thread's pool: no scope
        # one starting in its step's last microsecond may start after it (a trace in whole us): no verdict
        and cols.starts[i] < step_ends[cols.op_step[i]] - NEST_SLACK_NS
    ]
    if not found:
        return None
    over, worst = max(found)
    step = f"ProfilerStep#{spans[cols.op_step[worst]].number}"
    message = ops_overrun(len(found), shown_name(cols.names[worst]), "", _fmt_ms(over), step, "step")
    return Check("nesting", ERROR, message)


def _device_events(device: list[Event], runtime: list[Event]) -> Check | None:
    launches = sum(1 for r in runtime if _LAUNCH_CALL.search(r.name))
    if launches and not device:
        return Check(
            "device_events",
            ERROR,
            f"{launches} kernel/memory launches but no device events: the device tracer "
            "(CUPTI/roctracer) delivered nothing; check CUPTI is installed and not in use by another profiler",
        )
    if device:
        return Check("device_events", OK, f"{len(device)} device events for {launches} launches")
    return None


def dropped_launches(device: Sequence[Event], runtime: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """The kernel launches (a graph launch included) and those of them with no kernel record of
    their correlation id: the tracer dropped it, and its time is missing. None where the source
    has no device events (_device_events speaks) or no correlation ids (nothing to pair)."""
    recorded = {d.correlation for d in device if d.correlation}
    if not recorded:
        return [], []
    launches = [r for r in runtime if r.correlation and _KERNEL_LAUNCH.search(r.name)]
    return launches, [r for r in launches if r.correlation not in recorded]


def _kernel_records(dropped: tuple[list[Event], list[Event]]) -> Check | None:
    """Every kernel launch has at least one kernel record with its correlation id (`dropped`:
    dropped_launches, the launches and those without one)."""
    launches, missing = dropped
    if not missing:
        return None
    names = Counter(r.name for r in missing)
    listed = ", ".join(f"{n} x{c}" for n, c in names.most_common(3))
    return Check(
        "kernel_records",
        WARNING,
        f"{len(missing)} of {len(launches)} kernel launches have no kernel record ({listed}): the device "
        "tracer dropped them, so device times are too low (against a baseline, the steps that lost some are left "
        "out of their ops' device times, and as many fewer kernels are no work change); "
        f"{_why_dropped(launches, missing)}",
    )


def _correlation(with_ids: list[Event], launched: dict[int, int]) -> Check | None:
    """Runtime calls that share a correlation id: CUPTI gives each call its own, so the source
    merges several processes' traces or was edited, and a device event of that id goes to one of
    the calls only (a trial's two launches of one id gave both kernels to the second op, and every
    check said ok). `launched`: each id once, so it is shorter only where ids repeat."""
    if len(launched) == len(with_ids):  # the common case: no count needed
        return None
    ids = Counter(r.correlation for r in with_ids)
    shared = [(corr, n) for corr, n in ids.items() if n > 1]
    if not shared:
        return None
    calls = sum(n for _, n in shared)
    return Check("correlation", WARNING, shared_correlation(calls, len(shared), shared[0][0]))


def _clock(device: list[Event], launched: dict[int, int]) -> Check | None:
    """Device events that start before the call that launched them, which no device can: corrupt
    records (CUPTI's at a session's start) or a device clock not aligned with the host's, so the
    queue (a negative one) and the step of each device event are off by as much. `launched`: each
    correlation id's runtime call start."""
    if not launched:
        return None
    early = [
        launched[d.correlation] - d.start_ns
        for d in device
        if d.correlation in launched and launched[d.correlation] - d.start_ns > NEST_SLACK_NS
    ]
    if not early:
        return None
    return Check("clock", WARNING, device_before_launch(len(early), _fmt_ms(max(early))))


def _why_dropped(launches: list[Event], missing: list[Event]) -> str:
    """The likely cause and fix: the capture's first CUDA launches alone lost (CUPTI's bug at a
    profiler session's start), else a full buffer."""
    first = sorted(launches, key=lambda r: r.start_ns)[: len(missing)]
    cuda = all(r.name.startswith("cu") for r in missing)  # cudaLaunchKernel, cuLaunchKernel; not ROCm's hip*
    if cuda and len(launches) > len(missing) and {id(r) for r in first} == {id(r) for r in missing}:
        return (
            f"they are the capture's first {len(missing)}, likely CUPTI's bug: from CUDA 12.6 Update 2 to 13.0 it "
            "loses a growing number of kernel records at each profiler session's start in a process "
            "(pytorch/pytorch#192021, fixed in CUDA 13.1's CUPTI); use a CUPTI of CUDA 13.1 or later (a torch "
            "built for it)"
        )
    return "profile fewer steps or raise the tracer's buffer size"


CACHE_LOOKUP = "TorchDynamo Cache Lookup"


def _looked_up_not_compiled(ops: Sequence[OpStats]) -> Check | None:
    """Dynamo looked up its compiled code in the steps more often than a compiled region ran: those
    calls of a compiled model or function ran eagerly (a lambda around a compiled model, in a suite
    whose earlier cases had used up Dynamo's recompile limit for its forward: no word of it, a
    trial's; a step of one cached shape and one new shape past the limit: half of it eager). A
    graph break's resumed code is looked up and runs as a region too: the counts stay equal."""
    looked_up = ran = 0
    for op in ops:  # every capture's analysis: the two rows' calls only
        if op.name == CACHE_LOOKUP:
            looked_up = sum(op.calls_per_step.samples)
        elif op.name == REGION:
            ran = sum(op.calls_per_step.samples)
    return not_compiled_check(looked_up - ran, looked_up) if looked_up > ran else None


def _compilation(compilations: tuple[Compilation, ...]) -> Check | None:
    """A torch.compile compilation inside the steps: its compiler ops are set apart, but the
    step's wall time (and anything timed around it) includes it."""
    inside = [c for c in compilations if c.step >= 0]
    if not inside:
        return None
    listed = ", ".join(f"{c.compile_id} in step {c.step} ({_fmt_ms(c.dur_ns)})" for c in inside[:3])
    more = f" and {len(inside) - 3} more" if len(inside) > 3 else ""
    return Check(
        COMPILATION,
        WARNING,
        f"torch.compile compiled inside the measured steps: {listed}{more}; its compiler ops are left out "
        "of the op table, but the step's wall time includes it and the first call after it runs through "
        "torch's dispatch wrappers (PythonDispatchMode, each op twice), so the step's ops depend on what "
        "compiled before (test order, -k); warm up with the inputs the steps use (opprof.run(fn, warmup=1))",
    )


def _step_events(op_step: list[int], n_steps: int, ops: Sequence[OpStats] = ()) -> Check | None:
    if n_steps < 2:
        return None
    in_step = Counter(op_step)
    per_step = [in_step[s] for s in range(n_steps)]
    if len(set(per_step)) > 1:
        uneven = _uneven(ops)
        which = f"; calls per step of {_listed(uneven, n_steps)}" if uneven else ""
        return Check(
            "step_events",
            WARNING,
            f"CPU ops per step differ between steps ({', '.join(map(str, per_step))}){which}: "
            f"the steps do not repeat the same work; {_uneven_steps_fix(per_step)}",
        )
    return Check("step_events", OK, f"{per_step[0]} CPU ops in each of {n_steps} steps")


def _uneven_steps_fix(per_step: list[int]) -> str:
    """Raise warmup where only the first steps differ and the rest repeat one count (a lazy first
    call); else the work depends on the data or on state: an LLM trial's cache reset every 8th
    decode step was told to raise warmup."""
    settled = len(per_step) - 1
    while settled > 0 and per_step[settled - 1] == per_step[-1]:
        settled -= 1
    if 0 < settled <= len(per_step) // 2:
        first = "the first step differs" if settled == 1 else f"the first {settled} steps differ"
        return f"{first} from the rest: raise warmup"
    return "check for data-dependent code (work that changes with the data or with state fn keeps, such as a periodic reset)"


def _wall_time(
    cols: CheckInputs,
    spans: list[StepSpan],
    busy_by_step: list[dict[int, list[tuple[int, int]]]],
    step_thread: tuple[int, int] | None = None,
    host_may_lead: bool = False,
) -> Check:
    """The worst step where top-level CPU op time on a thread, or device busy time, exceeds
    the step's wall time: units or attribution are broken. opprof's own steps wait for the device
    at their ends; a user's loop (`host_may_lead`: a trace, from_profiler) need not, and its host
    runs ahead of a GPU-bound model (`for ...: model(x); prof.step()`, torch's own example): there
    a step's device work is held to the time from the step's start to that work's end (a review's
    trace of 4 ms of kernels launched in a 0.3 ms step erred, and `opprof analyze` exited 2). Where a TorchScript fork ran (an op
    ended on another thread: cols.forked), a thread other than the steps' is not held to the
    steps: its pool ends a `<forked function>` when it gets the CPU back, steps later on a busy
    machine (a trial's erred `wall_time` in 1 of 10 runs; a CI run's 0.480 ms in a 0.139 ms
    step); nor do its records nest (see stages._sweep)."""
    worst: tuple[float, str] | None = None

    def consider(total: int, s: int, what: str, wall: int | None = None) -> None:
        nonlocal worst
        wall = spans[s].wall_ns if wall is None else wall
        if total > wall * (1 + WALL_MARGIN) + WALL_SLACK_NS:
            ratio = total / wall if wall else float("inf")
            if worst is None or ratio > worst[0]:
                worst = (ratio, f"step {spans[s].number}, {what} {_fmt_ms(total)} in a {_fmt_ms(wall)} step")

    for (s, pid, tid), total in _top_level_per_thread(cols).items():
        if not cols.forked or (pid, tid) == step_thread:
            consider(total, s, f"thread {tid}: top-level CPU ops take")
    ahead = set()
    for s, per_device in enumerate(busy_by_step):
        for dev, intervals in per_device.items():
            window = _device_window(spans[s], intervals) if host_may_lead else None
            if window is not None and window > spans[s].wall_ns:
                ahead.add(s)
            consider(union_ns(intervals), s, f"device {dev}: device busy", window)
    if worst is not None:
        return Check("wall_time", ERROR, f"{worst[1]}: timings exceed wall time, so units or attribution are broken")
    if ahead:
        return Check(
            "wall_time",
            OK,
            f"CPU time within each step's wall time; the device ran the work of {len(ahead)} of {len(spans)} "
            "steps past their ends (the loop did not wait for it), within the time from each step's start",
        )
    return Check("wall_time", OK, "CPU and device time within each step's wall time")


def _device_window(span: StepSpan, intervals: list[tuple[int, int]]) -> int:
    """The time a step's device work had, where the host need not wait for it: from the step's
    start to the step's end or that work's, whichever is later."""
    return max(span.end_ns, max(end for _, end in intervals)) - span.start_ns


def _top_level_per_thread(cols: CheckInputs) -> dict[tuple[int, int, int], int]:
    """(step, pid, tid) -> summed duration of the ops at the top of that thread's stack."""
    top_level: dict[tuple[int, int, int], int] = {}
    is_top = cols.top_level()
    keys = zip(compress(cols.op_step, is_top), compress(cols.pids, is_top), compress(cols.tids, is_top))
    for key, dur in zip(keys, compress(cols.durs, is_top)):
        if key[0] >= 0:
            top_level[key] = top_level.get(key, 0) + dur
    return top_level


def _wide(dist: Dist) -> bool:
    """Whether per-step times spread too far to read their median: IQR/median over the limit."""
    return dist.median >= SPREAD_FLOOR_NS and dist.iqr / dist.median > SPREAD_LIMIT


def _spread(ops: list[OpStats], spans: Sequence[StepSpan]) -> Check | None:
    if len(spans) < SPREAD_MIN_STEPS:
        return None
    spread = [op for op in ops if _wide(op.time_per_step)]
    wide = [f"{op.name} (IQR/median {op.time_per_step.iqr / op.time_per_step.median:.2f})" for op in spread]
    if not wide:
        return Check(
            "spread",
            OK,
            f"per-step spread within IQR/median {SPREAD_LIMIT} for every op of {SPREAD_FLOOR_NS / 1e6:g} ms/step "
            "or more (faster ones are too small to judge)",
        )
    more = f" and {len(wide) - 3} more" if len(wide) > 3 else ""
    levels = _two_levels(spread, spans)
    if levels is None:
        return Check(
            "spread",
            WARNING,
            f"per-step time spread: {', '.join(wide[:3])}{more}: their medians (the assertions' default stat) are "
            "noisy, the baseline's time verdicts (fastest steps) less so; use more warmup or steps, or a quieter machine",
        )
    return Check("spread", WARNING, f"per-step time spread: {', '.join(wide[:3])}{more}; {levels}")


TWO_LEVELS = 3  # slow steps of a two-level spread took this many times the fastest half's median or more


def _slow_steps(samples: Sequence[int]) -> list[int] | None:
    """The steps (indexes) of a two-level spread: 2 or more, all but 2 at most, each x3 or more
    the median of the fastest half of the steps; None where the spread is no such split."""
    fastest = sorted(samples)[: len(samples) // 2]
    low = statistics.median(fastest) if fastest else 0
    if low <= 0:
        return None
    slow = [i for i, t in enumerate(samples) if t >= TWO_LEVELS * low]
    return slow if 2 <= len(slow) <= len(samples) - 2 else None


def _two_levels(spread: list[OpStats], spans: Sequence[StepSpan]) -> str | None:
    """Where an op's spread is two levels (some steps x3 or more the others), which steps, at
    what times and, where they recur at a fixed period, that they are the code's: a diagnosis
    trial's matmul on a 16x input every 3rd call read `use ... a quieter machine`, and passed
    (time is judged on the fastest steps). The costliest such op; None where none is."""
    found = [(op, slow) for op in spread if (slow := _slow_steps(op.time_per_step.samples)) is not None]
    if not found:
        return None
    op, slow = max(found, key=lambda f: f[0].time_per_step.max)
    samples = op.time_per_step.samples
    slow_set = set(slow)
    fast = [t for i, t in enumerate(samples) if i not in slow_set]
    slow_ms = [samples[i] for i in slow]
    if statistics.median(fast) <= 0:  # an op absent from most of its other steps: no level to compare with
        return None
    steps = ", ".join(str(spans[i].number) for i in slow)  # as the trace names them (ProfilerStep#0 too)
    times = f"{_ms_span(slow_ms)} vs {_ms_span(fast)} ms"
    period = fixed_period(slow)
    ratio = statistics.median(slow_ms) / statistics.median(fast)
    where = (
        f"{op.name} took x{ratio:.1f} the other steps' time in {len(slow)} of {len(samples)} steps ({steps}: {times})"
    )
    if len(slow) >= PERIODIC_STEPS and period is not None:  # 3 fall at one gap by chance (a trial's, under load)
        return (
            f"{where}, every {ordinal(period)} step: steps that do other work (an input that grows every few calls, a "
            "branch taken every few steps), which time verdicts judge by the fastest steps (against a baseline "
            "without them, 4 or more at a fixed period read inconclusive); make every step do the same work, or "
            "measure those steps in a test of their own"
        )
    return (
        f"{where}: a slow spell of the machine, or steps that do other work (an input that changes by step), which "
        "time verdicts, judged on the fastest steps, do not see; find them in a trace of the steps (pytest --opprof-trace=all keeps each test's)"
    )


def _ms_span(values: Sequence[int]) -> str:
    """`0.110-0.210` (ms, of ns values), or one value."""
    low, high = ms_text(min(values) / 1e6), ms_text(max(values) / 1e6)
    return low if low == high else f"{low}-{high}"


STEP_COMPARISONS = ("step_events", "spread")  # the checks that compare the steps with each other


def last_step_partial(checks: Sequence[Check], ops: Sequence[OpStats], n_steps: int) -> tuple[Check, ...]:
    """The checks of a capture the test's exception ended inside its last step: that step is
    partial, so a warning that the steps differ because of it says nothing of the code (it blamed
    data-dependent code for a timeout) and reads `not compared`; one that the whole steps before it
    bear out stands. The live capture's rule, and the trace reader's for the trace it wrote."""
    real = differ_before_the_last_step(ops, n_steps)
    return tuple(
        Check(c.name, OK, steps_not_compared(n_steps))
        if c.name in STEP_COMPARISONS and c.status == WARNING and c.name not in real
        else c
        for c in checks
    )


def differ_before_the_last_step(ops: Sequence[OpStats], n_steps: int) -> set[str]:
    """Of the step comparisons, those that still fire on the steps before the last: for a capture
    an exception ended inside its last step, which is partial."""
    whole = n_steps - 1
    fired = set()
    if whole >= 2 and any(len(set(op.calls_per_step.samples[:whole])) > 1 for op in ops):
        fired.add("step_events")
    if whole >= SPREAD_MIN_STEPS and any(_wide(Dist(op.time_per_step.samples[:whole])) for op in ops):
        fired.add("spread")
    return fired


def _outside_steps(outside: int, n_ops: int) -> Check | None:
    if not outside:
        return None
    return Check(
        "outside_steps",
        WARNING,
        f"{outside} of {n_ops} CPU ops lie outside the ProfilerStep annotations: "
        "counted in the totals, not in the per-step numbers",
    )


OVERHEAD_LIMIT = 3.0  # profiled / unprofiled step time above which the profiler distorted the run
CONTENTION_LIMIT = 0.10  # threads waiting for a CPU over this share of a capture: times unjudgeable
COMPILATION = "compilation"  # torch.compile compiled inside the measured steps
NOT_COMPILED = "not_compiled"  # a compiled model's run() ran no compiled region: Dynamo ran it eagerly
RECOMPILE_LIMIT = "recompile_limit"  # Dynamo gave up compiling a frame in a run(): eager from then on
CONTENTION = "contention"  # the warning of a capture whose threads waited for a CPU past it (the plugin's)


BUSY_THREAD_MS = 1.0  # CPU an other Python thread used in a capture from which it is named a cause of contention


BENCHMARK = "benchmark_rounds"


def benchmark_check() -> Check:
    """A whole-call capture of a test that used pytest-benchmark's `benchmark` fixture (benchmark_rounds)."""
    return Check(BENCHMARK, WARNING, benchmark_rounds())


def contention_check(
    cpu_wait: float | None, threads: Sequence[OtherThread] = (), child_processes: int = 0
) -> Check | None:
    """The `contention` warning of a capture whose threads waited for a CPU over CONTENTION_LIMIT
    of it (the plugin's, and read back from an exported trace's header); `threads`: the other
    Python threads that ran in it, those that used CPU named as a cause besides other load;
    `child_processes`: the test's own processes alive around it (DataLoader workers, ranks: a
    trial's were called other load on the machine, and the fix a quiet machine)."""
    if cpu_wait is None or cpu_wait <= CONTENTION_LIMIT:
        return None
    busy = [other_thread_words(t) for t in threads if (t.cpu_ms or 0) >= BUSY_THREAD_MS or _ran_unmeasured(t)]
    return Check(CONTENTION, WARNING, contended_capture(cpu_wait, busy, child_processes))


def overhead_check(ratio: float, cpu_wait: float | None = None) -> Check | None:
    """The observer effect of one run(): its profiled steps took `ratio` times the unprofiled ones.
    `cpu_wait`: the share of the capture its threads waited for a CPU; over CONTENTION_LIMIT, other
    load may have slowed the profiled steps as well (a loaded runner read x620, the profiler blamed)."""
    if ratio <= OVERHEAD_LIMIT:
        return None
    took = f"profiled steps took x{ratio:.1f} the time of unprofiled ones (above x{OVERHEAD_LIMIT:g})"
    if cpu_wait is not None and cpu_wait > CONTENTION_LIMIT:
        return Check(
            "overhead",
            WARNING,
            f"{took} while {waited_for_cpu(cpu_wait)}: other load may have slowed the profiled steps as much as the profiler did; "
            "rerun on a quiet machine to tell them apart",
        )
    return Check(
        "overhead",
        WARNING,
        f"{took}: the profiler distorted the run, so op times are mostly its own; give each step more work (a "
        "larger batch, more calls per step)",
    )


OTHER_THREADS = "other_threads"  # the warning of a capture during which other Python threads ran


def other_threads_check(threads: Sequence[OtherThread]) -> Check | None:
    """The `other_threads` warning: Python threads besides the capturing one ran during the
    capture, and torch.profiler records the ops of the thread that started it only (a trial's
    ThreadPoolExecutor ran the model, and its ops were missing from the profile, unsaid)."""
    if not threads:
        return None
    named = first_three([other_thread_words(t) for t in threads])
    return Check(
        OTHER_THREADS,
        WARNING,
        f"{count_of(sum(t.count for t in threads), 'other Python thread')} ran during the capture ({named}): torch.profiler "
        "records the ops of the thread that runs the steps only, so any torch work of theirs is not in this "
        "profile; run it on the calling thread to measure it",
    )


def with_other_threads(profile: Profile, others: tuple[OtherThread, ...]) -> Profile:
    """The profile with the other Python threads that ran during its capture, and their warning
    (the profile itself where none ran: every capture passes here)."""
    if not others and not profile.other_threads:
        return profile
    check = other_threads_check(others)
    return replace(profile, other_threads=others, checks=profile.checks + ((check,) if check else ()))


def _ran_unmeasured(thread: OtherThread) -> bool:
    """A thread that ran the capture's work and was gone by its end, its CPU unread (a review:
    a pool started and shut down in each step left the contention blamed on other load)."""
    return thread.cpu_ms is None and thread.given_work


def other_thread_words(thread: OtherThread) -> str:
    """`ThreadPoolExecutor-0_0: 4.1 ms of CPU`, `worker (6 threads): started in it` (and ended, or
    its CPU time unknown)."""
    used = "started in it" if thread.cpu_ms is None else f"{thread.cpu_ms:.1f} ms of CPU"
    many = f" ({thread.count} threads)" if thread.count > 1 else ""
    return f"{asked(thread.name)}{many}: {used}"  # cut, as a name asked for is: a header's may be long


def cuda_untraced_check() -> Check:
    """A capture that did not trace the GPU, which its code then used: CUDA was first initialised
    inside it (a device is traced only when CUDA is initialised as the capture starts)."""
    return Check(
        "cuda_untraced",
        ERROR,
        "CUDA was first used inside this capture, so its GPU work was not traced (opprof traces a GPU only when "
        "CUDA is initialised as a capture starts): initialise it before, with a warmup step (warmup=1) or "
        "torch.cuda.init()",
    )


def recompile_limit_check(limit: str, compiled: int | None) -> Check:
    """Dynamo gave up compiling a frame in a run() (`limit`: the limit as torch words it; `compiled`:
    the graphs the run compiled, None where unknown): its steps from then on ran eagerly, which the op table shows as if
    it were the compiled model's (a parametrized test's 9th case in the suite recorded eager code)."""
    return Check(RECOMPILE_LIMIT, WARNING, recompile_limit_hit_text(limit, compiled))


def not_compiled_check(eager: int = 0, looked_up: int = 0) -> Check:
    """Calls of torch.compile'd code in the steps that ran eagerly (`eager` of the `looked_up`
    calls Dynamo looked up its code for; none counted: a run() given compiled code that ran no
    compiled region), as Dynamo does without a word for a function that hit its recompile limit
    earlier in the process (a parametrized test's 10th case and on, in the suite; alone, each
    compiled), or one it skipped."""
    return Check(NOT_COMPILED, WARNING, not_compiled_text(eager, looked_up))


def mps_untraced_check() -> Check:
    """A capture in a process that holds tensors on Apple's GPU (MPS), which torch's profiler does
    not trace: its ops' times there are the CPU's queueing of their GPU work. The process's, not the
    capture's: torch tells only how much MPS memory the process holds (a module fixture's tensors
    count for a CPU test after it)."""
    return Check(
        "mps_untraced",
        WARNING,
        "this process holds tensors on Apple's GPU (MPS), which torch's profiler does not trace: an op's time there "
        "is the CPU's time to queue its GPU work, not the GPU's; each step's wall time includes the GPU's work (opprof "
        "waits for it at the step's end): judge the step (assert_total_below), not an op's time",
    )


def unprofiled_kernels_check(profile: Profile) -> Check | None:
    """Compiled graphs ran on the CPU and none of their kernels shows: Inductor compiled them
    without its C++ kernel profiling (before measure(), which turns it on only for what compiles
    inside it), so their kernels' time sits in the graph call's self time (a library trial's
    `torch.compile(g)` called once before measure() read only `CompiledFxGraph`, every check ok).
    Asked only where the profiling was off when the capture began. A graph of library calls only
    has no kernel of Inductor's either, which a profile cannot tell apart: the warning says both."""
    graph = profile.op(FX_GRAPH)
    if graph is None or not graph.calls or profile.kernels:
        return None
    if any(INDUCTOR_CPU_KERNEL.match(op.name) for op in profile.ops):
        return None
    own = 100 * graph.self_cpu_ns / max(graph.cpu_ns, 1)
    return Check(
        "compiled_kernels",
        WARNING,
        f"compiled code ran ({FX_GRAPH} x{graph.calls}) and no kernel of Inductor's shows: it was compiled without "
        f"Inductor's kernel profiling, their time then in {FX_GRAPH}'s self time ({own:.0f}% of its time), or it "
        "has none (a graph of library calls only, one matmul say); to show them, set "
        "torch._inductor.config.cpp.enable_kernel_profile = True before compiling (measure() does so for what "
        "compiles inside it)",
    )


def copy_bytes_check(copies: int) -> Check | None:
    """Memory copies and sets a torch 2.12+ profiler gave without their bytes: it keeps a device
    event's details (its metadata) only when made to expose them."""
    if not copies:
        return None
    return Check(
        "copy_bytes",
        WARNING,
        f"{copies} memory copies/sets without their bytes (0 here): this torch keeps a copy's bytes only for a "
        "profiler made with experimental_config=torch._C._profiler._ExperimentalConfig("
        "expose_kineto_event_metadata=True) (opprof's own are); make yours so, or read its exported trace with "
        "load_trace()",
    )


def cycles_check(cycles: int) -> Check | None:
    """A scheduled torch profiler that completed `cycles` active cycles: torch keeps only the
    last one's events, so a profile of it holds that cycle alone."""
    if cycles <= 1:
        return None
    return Check(
        "cycles",
        WARNING,
        f"the profiler's schedule completed {cycles} cycles and torch keeps the events of the last one only "
        "(acc_events accumulates torch's own averages, not the events): this profile is that cycle; read each "
        "cycle with on_trace_ready=lambda p: profiles.append(from_profiler(p))",
    )
