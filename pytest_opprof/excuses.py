"""Whether the machine explains a time move, and what to do for a time verdict: its reference
workloads, CPU capability, torch threads and CPU contention, this run's against the baseline's. Pure."""

from __future__ import annotations

import math
import shlex
from typing import NamedTuple

from .analysis.model import WORKLOAD_OPS
from .documents import BaselineDoc
from .errors import waited_for_cpu
from .units import count_of
from .verdicts import (
    CONTENTION_SLACK,
    CONTENTION_WHY,
    OP_SLACK,
    SMALL_SLACK,
    SMALL_SPELL,
    SPELL_LIMIT,
    STATE_NOISE,
    WORKLOAD_MIN_MS,
    Machine,
)


def thread_setup(doc: BaselineDoc) -> str | None:
    """What set torch's default thread count on that machine: CPUs and variables (environment)."""
    value = doc.environment.get("thread_setup")
    return value if isinstance(value, str) else None


def same_thread_setup(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    """The same thread setup on the same CPU model: torch's default thread count is the same."""
    setup, model = thread_setup(current), current.environment.get("cpu_model")
    return setup is not None and setup == thread_setup(baseline) and model == baseline.environment.get("cpu_model")


def threads_differ(current: BaselineDoc, baseline: BaselineDoc) -> bool:
    return current.threads is not None and baseline.threads is not None and current.threads != baseline.threads


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
    times their own (OP_SLACK for an op; a trial's x4 slower ops passed on a machine x1.24 slower),
    the small matmul reference less (_slack, _explaining).
    `blas`: a matrix product (aten::addmm, mm, bmm), whose BLAS kernels take no part in torch's
    CPU capability (the references speak for them: a review's addmm x4 slower beside an unmoved
    replay of its own product passed as inconclusive on AVX2 against AVX512).
    `added_ms`: what the move added to a step, which CPU contention explains only up to
    CONTENTION_SLACK times the ms the threads waited per step, as it must the whole step's
    slowdown (_contention_explains).

    Only a move in the machine's direction is excused: a slowdown on a slower or contended
    machine, a speed-up on a faster one. A GPU with throttled clocks excuses both; a Python
    tracer (coverage) a slower `python_time` (the step wall: the Python between the ops), which a
    run() capture then measures again without the tracer (decide._confirms). An op's time, which
    holds any Python run inside it (a tensor hook, a custom op: a trial's `AccumulateGrad` ran
    +165% under --cov), is judged as measured: a regressed one is confirmed without the tracer
    where it can be taken off, and where it cannot (a profiler function, sys.monitoring tools)
    an excuse would pass a real regression (a review's 3x aten::mm under cProfile)."""
    if machine.gpu_unreliable:
        return Excuse(f"unreliable GPU clocks ({machine.gpu_unreliable})")
    if python_time and slower and machine.python_tracer:
        return Excuse(f"a Python tracer ({machine.python_tracer}) slowed the Python between the ops", TRACER_FIX)
    if on_device:
        return None
    if threads_differ(current, baseline) and not python_time and _threads_explain(moved, current, baseline, slack):
        threads = count_of(current.threads or 0, "thread")
        fix = threads_fix(current, baseline, machine.env_set_inside)
        return Excuse(f"torch ran on {threads}, the baseline on {baseline.threads}", fix)
    if not python_time and not blas and _capability_explains(moved, current, baseline, slack):
        return Excuse(_capability_why(current, baseline), CAPABILITY_FIX)
    if slower and machine.contended and _contention_explains(machine, added_ms, current, baseline):
        return Excuse(f"{CONTENTION_WHY}: {waited_for_cpu(machine.cpu_wait or 0.0)}")
    for ratio, what, bounded in _reference_ratios(current, baseline, workload=not python_time, wall=python_time):
        explains = (
            _within(moved, ratio) if bounded else within_slowdown(moved, _explaining(what, ratio), _slack(what, slack))
        )
        if not explains:  # the op moved further than its own product did alone, or x4 on a machine x1.24
            continue
        if ratio > STATE_NOISE if slower else ratio < 1 / STATE_NOISE:
            why = f"the machine ran {speed_words(ratio)} than when the baseline was recorded ({what} reference)"
            return Excuse(why, _machine_fix(ratio, current, baseline, machine))
    return None


def _slack(what: str, slack: float) -> float:
    """How many times its own move a fixed reference explains: `slack`, at most SMALL_SLACK for the
    small matmul reference."""
    return min(slack, SMALL_SLACK) if what == SMALL_REFERENCE else slack


def _explaining(what: str, ratio: float) -> float:
    """A fixed reference's move as it explains others: its own, the small matmul reference's up to
    SMALL_SPELL either way (the spells it follows; a review's reading x2.13 excused a 3x addmm)."""
    return min(max(ratio, 1 / SMALL_SPELL), SMALL_SPELL) if what == SMALL_REFERENCE else ratio


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


def capability_too_little(moved: float, current: BaselineDoc, baseline: BaselineDoc, slack: float, name: str) -> str:
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


def threads_too_little(moved: float, current: BaselineDoc, baseline: BaselineDoc, slack: float) -> str:
    """For a slowdown that fails on another thread count: the clause saying it explains too little."""
    if not threads_differ(current, baseline):
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


def contention_too_small(machine: Machine, added_ms: float, current: BaselineDoc, baseline: BaselineDoc) -> str:
    """For a slowdown that fails under contention: the clause saying the wait cannot explain it
    (none where it could, and the slowdown failed for another reason)."""
    waited = machine.waited_ms_per_step
    if not machine.contended or waited is None or _contention_explains(machine, added_ms, current, baseline):
        return ""
    needed = _step_slowdown(added_ms, current, baseline)
    return (
        f"; {waited_for_cpu(machine.cpu_wait or 0.0)}, {waited:.3f} ms a step: too little to explain +{needed:.3f} ms"
    )


def machine_too_little(
    moved: float, current: BaselineDoc, baseline: BaselineDoc, slack: float, wall: bool = False
) -> str:
    """For a slowdown that fails on a slower machine: the clause saying that the machine's
    slowdown (its fixed references', beyond their noise, each as far as it explains: a bounded one
    its own move) explains too little of it,
    and for the `wall`, that a reference stalled alone explains none of it."""
    found = _reference_ratios(current, baseline, workload=False, wall=wall)
    stalled = _stall_clause(current, baseline) if wall else ""
    slower = [
        (r * STATE_NOISE if bounded else 1 + _slack(what, slack) * (_explaining(what, r) - 1), r, what)
        for r, what, bounded in found
        if r > STATE_NOISE
    ]
    if not slower:
        return stalled
    most, ratio, what = max(slower)  # the reference that explains the most (each its own slack)
    return f"; the machine ran {speed_words(ratio)} ({what} reference): {_reach(most, moved)}{stalled}"


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


def within_slowdown(moved: float | None, ratio: float, times: float) -> bool:
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
    For the `wall`, a reference that stalled alone is left out, and on the same machine setup the
    matmul references explain no more than their own move (_wall_bounded)."""
    stalled = {what for what, _, _ in _stalled_references(current, baseline)} if wall else set()
    bounded = _wall_bounded(current, baseline) if wall else set()
    found = [(r, what, what in bounded) for r, what in _fixed_ratios(current, baseline) if what not in stalled]
    replayed = workload_ratio(current, baseline) if workload else None
    if replayed is not None:
        op, ratio = replayed
        found.append((ratio, f"{op} on the test's inputs", True))  # bounded: see _within
    return found


def _fixed_ratios(current: BaselineDoc, baseline: BaselineDoc) -> list[tuple[float, str]]:
    """The fixed references both sides took (dispatch, matmul, small matmul): this run's time / the baseline's, its name."""
    return [(r, what) for key, what in REFERENCES if (r := _reference_ratio(current, baseline, key)) is not None]


def _wall_bounded(current: BaselineDoc, baseline: BaselineDoc) -> set[str]:
    """The fixed references that explain a step wall's move only up to their own (as the workload
    reference does an op's): on the same machine setup, where both sides timed the dispatch
    reference, every other one. The Python between the ops runs on one thread, as the dispatch
    reference does (it explains up to twice its move); the matmul references time BLAS on torch's
    threads, which a spell slows alone: excusing twice their move passed a trial's 0.5 ms sleep
    per step as `the machine ran 1.35x slower (matmul reference)`, the dispatch reference x1.00.
    Work outside the ops that runs on several threads (NumPy's BLAS, a thread pool) may slow with
    them, as far as they did (a review): bounded, not left out."""
    found = _fixed_ratios(current, baseline)
    if _same_machine(current, baseline) and any(what == "dispatch" for _, what in found):
        return {what for _, what in found if what != "dispatch"}
    return set()


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
    if threads_differ(current, baseline):
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


def workload_ratio(current: BaselineDoc, baseline: BaselineDoc) -> tuple[str, float] | None:
    """The op the workload reference replays and its replay's time ratio (new / baseline), where
    both sides replayed the same product on the same inputs, each in WORKLOAD_MIN_MS or more
    (a shorter replay is timer noise)."""
    mine, theirs = current.workload_reference, baseline.workload_reference
    if mine is None or theirs is None or not mine.same_product(theirs):
        return None
    if min(mine.ms, theirs.ms) < WORKLOAD_MIN_MS:
        return None
    return mine.op, mine.ms / theirs.ms


SMALL_REFERENCE = "small matmul"
REFERENCES = (
    ("dispatch_reference_ms", "dispatch"),
    ("reference_ms", "matmul"),
    ("small_reference_ms", SMALL_REFERENCE),
)
# a baseline recorded under load: both of these x2 (the small matmul reference stands for small products only,
# and files written before it have none)
LOAD_REFERENCES = tuple((key, what) for key, what in REFERENCES if what != SMALL_REFERENCE)


UNDER_LOAD = 2.0  # the same machine setup ran every reference this many times slower for the baseline


def recorded_under_load(current: BaselineDoc, baseline: BaselineDoc) -> float | None:
    """How many times slower the baseline's references ran than this run's, when it is
    UNDER_LOAD or more on both references, on the same machine setup (CPU model, thread setup,
    torch threads) and torch: the baseline was recorded under load and its times are inflated,
    hiding any slowdown smaller than that. None otherwise (another machine or another torch is
    no load of this one)."""
    same_torch = current.environment.get("torch") == baseline.environment.get("torch")
    if not same_torch or not same_thread_setup(current, baseline) or threads_differ(current, baseline):
        return None
    ratios = [r for key, _ in LOAD_REFERENCES if (r := _reference_ratio(current, baseline, key)) is not None]
    if len(ratios) < len(LOAD_REFERENCES) or max(ratios) > 1 / UNDER_LOAD:
        return None
    return 1 / max(ratios)


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


def setup_changes(old: str | None, new: str | None) -> list[str]:
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


def threads_fix(current: BaselineDoc, baseline: BaselineDoc, set_inside: tuple[str, ...] = ()) -> str:
    """What to do where torch ran on another thread count than the baseline: set the baseline's
    thread variables where the setups' differ (a trial's fix said to set OMP_NUM_THREADS, already
    set, where MKL_NUM_THREADS=1 had made the difference), else its count; or record there.
    `set_inside`: the variables this process set itself (pytest-env's `env`, a conftest), which
    the shell's `env` cannot change: the fix says where they are set."""
    (their_counts, theirs), (my_counts, mine) = (
        _setup_parts(thread_setup(baseline)),
        _setup_parts(thread_setup(current)),
    )
    record = "record the baseline on the machine that checks it (--opprof-update-baseline=all there)"
    moved = _moved(theirs, mine)
    if not moved or thread_setup(baseline) is None:
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
    if inside := [k for k in moved if k in set_inside]:
        it, is_ = ("it", "is") if len(inside) == 1 else ("them", "are")
        return (
            f"{record}, or run with the baseline's thread {what} ({wanted.replace('-u ', 'unset ')}): "
            f"{' and '.join(inside)} {is_} set inside the pytest process (pytest-env's env ini key, a conftest or a "
            f"plugin), where the shell's env cannot change {it}: change {it} there"
        )
    return f"{record}, or run with the baseline's thread {what}: env {wanted} pytest ..."
