"""The machine's references, timed around every capture and stored with baselines: a fixed
matmul, the dispatch path and a replay of the capture's own costliest product (time moves in the
machine's direction are then inconclusive: excuses.py), and the profiler's overhead. Each takes
torch as an argument."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from typing import Any, NamedTuple

from . import clock  # as a module: tests put a fake clock on it
from .analysis import Profile
from .analysis.checks import (
    overhead_check,
)
from .analysis.model import WORKLOAD_DTYPES, WORKLOAD_OPS, WorkloadReference, workload_problem
from .owntorch import own

_REFERENCE_SIZE = 256


_REFERENCE_REPS = 8


_DISPATCH_OPS = 100


def _best_ns(work: Callable[[], Any], reps: int = _REFERENCE_REPS) -> int:
    """The best of `reps` timings of `work`: interference only adds time."""
    best = None
    for _ in range(reps):
        start = clock.now_ns()
        work()
        elapsed = clock.now_ns() - start
        best = elapsed if best is None else min(best, elapsed)
    return int(best or 0)


def machine_reference_ns(torch: Any) -> int:
    """The best of 8 timings of a fixed CPU workload (a 256x256 float matmul, torch's threads).

    Taken around every capture and stored with baselines: a time move in the machine's direction
    is then inconclusive (excuses.explained_by_machine; measurements in docs/design.md).
    """
    torch = own(torch)  # not a test's spy or mock of torch.mm
    a = torch.ones(_REFERENCE_SIZE, _REFERENCE_SIZE)
    with torch.no_grad():
        return _best_ns(lambda: torch.mm(a, a))


def dispatch_reference_ns(torch: Any) -> int:
    """The best of 8 timings of 100 one-element torch additions: the dispatch path, scalar code.

    Scalar code notices a core shared with another tenant that the vector matmul barely does
    (docs/design.md); a slowdown while it ran slower is inconclusive.
    """
    torch = own(torch)
    one = torch.ones(1)

    def work() -> None:
        for _ in range(_DISPATCH_OPS):
            torch.add(one, 1)

    with torch.no_grad():
        return _best_ns(work)


_SMALL_SHAPES = ((4, 64), (64, 256))  # 70 KB of operands: in a core's own caches on any CPU


_SMALL_PRODUCTS = 20


def small_reference_ns(torch: Any) -> int:
    """The best of 8 timings of 20 small float matmuls (4x64 @ 64x256, on torch's threads).

    On a shared 2-vCPU VM small products, and the ops made of them (an LSTM, an attention
    layer, a small MLP), run x1.2-1.5 slower in spells of seconds to minutes while the 256x256
    matmul and the dispatch path hold: in 240 s of one process, the 14 four-second windows where an
    LSTM, a transformer layer and an MLP ran over x1.2 slower were the 14 where this ran over
    x1.15 (x1.30-1.33), and it moved in no other (docs/design.md, "A small product reference").
    It explains less than the other two (excuses._slack, _explaining).
    """
    torch = own(torch)
    a, b = torch.ones(*_SMALL_SHAPES[0]), torch.ones(*_SMALL_SHAPES[1])

    def work() -> None:
        for _ in range(_SMALL_PRODUCTS):
            torch.mm(a, b)

    with torch.no_grad():
        return _best_ns(work)


class References(NamedTuple):
    """One reading of the fixed machine references (ns)."""

    matmul: int
    dispatch: int
    small: int


def take_references(torch: Any) -> References:
    keep_forked_children_working(torch)
    return References(machine_reference_ns(torch), dispatch_reference_ns(torch), small_reference_ns(torch))


_FORK_HOOKED: list[bool] = []  # once per process: os.register_at_fork hooks cannot be taken back


def keep_forked_children_working(torch: Any) -> None:
    """Before opprof runs parallel torch work of its own (the references, settling the CPUs): a
    child forked after it gets one torch thread. GNU OpenMP does not survive a fork: once the
    parent ran a parallel region, a forked child's next one waits for the parent's pool threads,
    which the child has not, for ever (a trial's test forking after run() hung under --opprof
    only: its own 64x64 products ran no parallel region, the 256x256 reference did). One thread
    runs no team; DataLoader workers set it so too. A child that exec()s is untouched."""
    if _FORK_HOOKED or not hasattr(os, "register_at_fork"):
        return
    _FORK_HOOKED.append(True)
    os.register_at_fork(after_in_child=functools.partial(_one_thread, torch))


def _one_thread(torch: Any) -> None:
    torch = own(torch)
    with suppress(Exception):  # a child must not fail for this
        if torch.get_num_threads() > 1:
            torch.set_num_threads(1)


WORKLOAD_BUDGET_NS = 20_000_000  # a large product is replayed fewer times (one call past this)


def workload_choice(profile: Profile) -> WorkloadReference | None:
    """The op and inputs a workload reference replays: the costliest aten::addmm/mm/bmm on the
    CPU with recorded inputs, its most called signature, when its tensors are of a float type."""
    ops = [o for o in profile.ops if o.name in WORKLOAD_OPS and o.work is not None and o.work.signatures]
    ops = [o for o in ops if not o.on_device]
    if not ops:
        return None
    op = max(ops, key=lambda o: (o.cpu_ns, o.name))
    assert op.work is not None
    n = WORKLOAD_OPS[op.name]
    replayable = [s for s in op.work.signatures if workload_problem(op.name, s.shapes[:n], s.dtypes[:n]) is None]
    if not replayable:
        return None
    # the costliest signature: its product's size times its calls (not a tiny, dispatch-bound one)
    sig = max(
        replayable, key=lambda s: math.prod(s.shapes[n - 1]) * s.shapes[n - 2][-2] * sum(s.calls_per_step.samples)
    )
    return WorkloadReference(op.name, tuple(sig.shapes[:n]), tuple(sig.dtypes[:n]), 0)


def workload_reference_ns(torch: Any, choice: WorkloadReference) -> int | None:
    """The best of up to 8 timings of the chosen product on new CPU tensors of its shapes and
    types (torch's threads, no grad): as many as fit WORKLOAD_BUDGET_NS, at least 2, or the one
    call of a product longer than that; None when they do not make a valid product (a bias that
    does not broadcast)."""
    torch = own(torch)
    try:
        tensors = [
            torch.ones(shape, dtype=getattr(torch, WORKLOAD_DTYPES[t]), device="cpu")
            for shape, t in zip(choice.shapes, choice.dtypes)
        ]
        product = getattr(torch, choice.op.split("::")[1])
        keep_forked_children_working(torch)
        with torch.no_grad():
            start = clock.now_ns()
            product(*tensors)  # a shape mismatch raises here, before any timing
            first = max(clock.now_ns() - start, 1)
            if first > WORKLOAD_BUDGET_NS:  # a large product: its one call is the sample
                return first
            return _best_ns(lambda: product(*tensors), max(2, min(_REFERENCE_REPS, WORKLOAD_BUDGET_NS // first)))
    except (RuntimeError, TypeError, ValueError):
        return None


def with_workload_reference(torch: Any, profile: Profile, choice: WorkloadReference | None) -> Profile:
    """The profile with its workload reference timed now (workload_choice took a CPU product
    only: whether CUDA is up, which depends on the tests before, changes nothing)."""
    if choice is None:
        return profile
    ns = workload_reference_ns(torch, choice)
    return replace(profile, workload_reference=replace(choice, ns=ns)) if ns else profile


def with_overhead(profile: Profile, unprofiled: list[int]) -> Profile:
    """The observer effect: the best profiled step's wall time / the best unprofiled one's (the
    best: interference only adds time, and the first calls after a pause wake thread pools), and
    a trust warning when it is far above the usual."""
    walls = [s.wall_ns for s in profile.step_spans]
    if not walls or not unprofiled or min(unprofiled) <= 0:
        return profile
    ratio = min(walls) / min(unprofiled)
    compiling = profile.compiled is not None and any(c.step >= 0 for c in profile.compiled.compilations)
    # the compilation warning says why the steps were slow; a step of no op has no distortion to
    # speak of (a trial's fn that returned a generator got `give each step more work` beside its error)
    check = None if compiling or not profile.ops else overhead_check(ratio)
    return replace(profile, overhead=round(ratio, 3), checks=profile.checks + ((check,) if check else ()))


def with_reference(profile: Profile, threads: int, *references: References) -> Profile:
    """The best of each reference taken around the capture, and the fewest torch threads it ran
    on (the references run on torch's threads: compare.py compares them only at equal counts)."""
    return replace(
        profile,
        reference_ns=min(r.matmul for r in references),
        dispatch_reference_ns=min(r.dispatch for r in references),
        small_reference_ns=min(r.small for r in references),
        threads=threads,
    )
