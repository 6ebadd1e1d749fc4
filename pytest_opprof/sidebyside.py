"""Two measurements side by side, op by op (`opprof compare A B`): e.g. the same tests on two
devices. Time and calls, keyed by operator name (stable across GPUs and vendors), with each op's
kernels; the verdicts of a test against its baseline are compare.py's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from statistics import median
from typing import Any

from .documents import BaselineDoc, KernelShare
from .excuses import REFERENCES
from .opnames import inductor_kernel_stem
from .rules import DEFAULT_MIN_DELTA_MS, DEFAULT_TOLERANCE
from .units import stored_ms_text
from .verdicts import STATE_NOISE, STEP_WALL, median_calls, step_cost_ms, steps_run

SIDE_STATS = ("median", "min")


@dataclass(frozen=True)
class SideRow:
    """One operator in A and B: calls and ms per step, B/A ratio, and what changed."""

    op: str
    a_calls: float | None
    b_calls: float | None
    a_ms: float | None
    b_ms: float | None
    a_time: str | None  # "device" or "cpu": which time the ms are, on that side
    b_time: str | None
    status: str  # added | removed | slower | faster | same
    kernels_a: tuple[tuple[str, float, float], ...] = ()  # (kernel, calls/step, device ms/step)
    kernels_b: tuple[tuple[str, float, float], ...] = ()
    a_steps: tuple[int, int] | None = None  # (steps the op ran in, steps) on that side; None: not there
    b_steps: tuple[int, int] | None = None
    a_peak_ms: float | None = None  # the op's time in its costliest step on that side
    b_peak_ms: float | None = None
    b_median_ms: float | None = None  # B's median over its steps, whatever the stat (an added op's cost)
    a_median_ms: float | None = None
    renumbered_from: str | None = None  # A's name of the Inductor kernel B renumbered in its graph

    @property
    def in_some_steps(self) -> str:
        """`in 2 of 6 steps, up to 7.969 ms` for an op on one side only that ran in only some of
        them (its median can be 0); `A in 3 of 10 steps` for one both ran, on each side where it
        missed steps; "" otherwise (_steps_note)."""
        sides = (("A", self.a_steps, self.a_peak_ms), ("B", self.b_steps, self.b_peak_ms))
        return ", ".join(_steps_note(side, s, peak, self.status) for side, s, peak in sides if s and s[0] < s[1])

    @property
    def judged_by_median(self) -> str:
        """`median 0.070 ms` for an op only B has where the column shows another figure (`--stat
        min`): its cost is judged by the median (a trial's row read 0.030 ms, under the 0.05 ms
        floor, beside `B regressed`); "" where the column is that median."""
        if self.status != "added" or self.b_median_ms is None or self.b_ms is None:
            return ""
        median_text = stored_ms_text(self.b_median_ms)
        return "" if median_text == stored_ms_text(self.b_ms) else f"median {median_text} ms"

    @property
    def diff_ms(self) -> float:
        return (self.b_ms or 0.0) - (self.a_ms or 0.0)

    @property
    def ratio(self) -> float | None:
        if self.a_ms is None or self.b_ms is None or self.a_ms <= 0:
            return None
        return self.b_ms / self.a_ms

    @property
    def calls_changed(self) -> bool:
        return self.a_calls is not None and self.b_calls is not None and self.a_calls != self.b_calls

    def to_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "op": self.op,
            "status": self.status,
            "a": _side_dict(self.a_calls, self.a_ms, self.a_time, self.a_steps, self.a_peak_ms, self.a_median_ms),
            "b": _side_dict(self.b_calls, self.b_ms, self.b_time, self.b_steps, self.b_peak_ms, self.b_median_ms),
            "diff_ms": _r(self.diff_ms),
            "ratio": float(f"{ratio:.4g}") if ratio is not None else None,  # 4 significant digits
            "calls_changed": self.calls_changed,
            "renumbered_from": self.renumbered_from,
            "kernels": {
                side: [{"name": n, "calls_per_step": _n(c), "device_ms_per_step": _r(ms)} for n, c, ms in kernels]
                for side, kernels in (("a", self.kernels_a), ("b", self.kernels_b))
            },
        }


def _steps_note(side: str, steps: tuple[int, int], peak: float | None, status: str) -> str:
    """`B in 3 of 10 steps`; of an op on one side only `in 2 of 6 steps, up to 7.969 ms` (`was in`
    when removed); `outside the steps` for one that ran between them only (a review read `in 0 of
    6 steps, up to 0.000 ms`)."""
    ran, total = steps
    one_side = status in ("added", "removed")
    if ran == 0:
        return "outside the steps" if one_side else f"{side} outside the steps"
    if one_side:
        was = "was " if status == "removed" else ""
        return f"{was}in {ran} of {total} steps, up to {stored_ms_text(peak or 0.0)} ms"
    return f"{side} in {ran} of {total} steps"


def _side_dict(
    calls: float | None,
    ms: float | None,
    time: str | None,
    steps: tuple[int, int] | None,
    peak: float | None,
    median_ms: float | None,
) -> dict[str, Any]:
    """One side of a row in the JSON; `steps_run`: in how many of the side's steps the op ran;
    `max_ms`: its time in the costliest of them; `median_ms`: its median over them, whatever the
    stat (an op only B has is judged by it)."""
    return {
        "calls_per_step": _n(calls),
        "ms_per_step": _r(ms),
        "median_ms": _r(median_ms),
        "max_ms": _r(peak),
        "time": time,
        "steps_run": steps[0] if steps else None,
        "steps": steps[1] if steps else None,
    }


def _n(value: float | None) -> float | int | None:
    """Calls per step: a whole number as an int."""
    return int(value) if value is not None and value == int(value) else value


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _stat(samples: list[float], stat: str) -> float:
    return min(samples) if stat == "min" else median(samples)


def _kernels_by_op(doc: BaselineDoc, stat: str) -> dict[str, list[tuple[str, float, float]]]:
    """Kernels (named per architecture) under the op that launched them."""
    by_op: dict[str, list[tuple[str, float, float]]] = {}
    for name, k in doc.kernels.items():
        shares = k.shares() or {"(no launching op)": KernelShare(k.calls_per_step, k.device_ms)}
        for op, share in shares.items():  # each op's own launches, not the kernel's sum under each
            calls, ms = float(median(share.calls_per_step or (0,))), _stat(list(share.device_ms or (0.0,)), stat)
            by_op.setdefault(op, []).append((name, calls, ms))
    for rows in by_op.values():
        rows.sort(key=lambda r: (-r[2], r[0]))
    return by_op


def side_by_side(
    a: BaselineDoc,
    b: BaselineDoc,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS,
    stat: str = "median",
) -> list[SideRow]:
    """Every op of two baseline documents, keyed by operator name (stable across devices), and
    the `step wall` outside the ops, sorted by the absolute difference in ms per step, largest first.

    ms per step: device time for an op that ran on a device, else CPU time; `stat` over the
    steps. slower/faster: beyond `tolerance` and `min_delta_ms`; added/removed: on one side only.
    """
    if stat not in SIDE_STATS:
        raise ValueError(f"stat must be one of {', '.join(SIDE_STATS)}")
    ka, kb = _kernels_by_op(a, stat), _kernels_by_op(b, stat)
    rows = []
    for name in sorted(set(a.ops) | set(b.ops)):
        a_calls, a_ms, a_time = _side(a, name, stat)
        b_calls, b_ms, b_time = _side(b, name, stat)
        status = _side_status(a_ms, b_ms, tolerance, min_delta_ms)
        kernels = tuple(ka.get(name, ())), tuple(kb.get(name, ()))
        (a_steps, a_peak, a_median), (b_steps, b_peak, b_median) = _spread(a, name), _spread(b, name)
        rows.append(
            SideRow(
                name, a_calls, b_calls, a_ms, b_ms, a_time, b_time, status, *kernels,
                a_steps, b_steps, a_peak, b_peak, b_median, a_median,
            )
        )  # fmt: skip
    rows = _renumbered(rows, tolerance, min_delta_ms)
    wall = _wall_row(a, b, tolerance, min_delta_ms, stat)
    rows += [wall] if wall is not None else []
    rows.sort(key=lambda r: (-abs(r.diff_ms), r.op))
    return rows


def _renumbered(rows: list[SideRow], tolerance: float, min_delta_ms: float) -> list[SideRow]:
    """An Inductor kernel only A has and one only B has that differ by their index in the graph
    alone, at the same calls: the same kernel, renumbered by a graph break elsewhere (compare.py
    says it as one change): one row, B's name, its times compared (as two rows, B's read `added`
    and made B regress by its whole time)."""
    gone = {(stem, r.a_calls): r for r in rows if r.status == "removed" and (stem := inductor_kernel_stem(r.op))}
    merged: dict[str, SideRow] = {}
    for r in rows:
        stem = inductor_kernel_stem(r.op) if r.status == "added" else None
        old = gone.pop((stem, r.b_calls), None) if stem else None
        if old is not None:
            status = _side_status(old.a_ms, r.b_ms, tolerance, min_delta_ms)
            merged[old.op] = merged[r.op] = _with_a_side(r, old, status)
    return [merged.get(r.op, r) for r in rows if merged.get(r.op, r).op == r.op]  # the pair once, as B's name


def _with_a_side(row: SideRow, a: SideRow, status: str) -> SideRow:
    """B's row of a renumbered kernel with A's side of the other name's row."""
    return replace(
        row, a_calls=a.a_calls, a_ms=a.a_ms, a_time=a.a_time, kernels_a=a.kernels_a, a_steps=a.a_steps,
        a_peak_ms=a.a_peak_ms, a_median_ms=a.a_median_ms, status=status, renumbered_from=a.op,
    )  # fmt: skip


def _wall_row(a: BaselineDoc, b: BaselineDoc, tolerance: float, min_delta_ms: float, stat: str) -> SideRow | None:
    """The `step wall` row: the steps' wall time outside the top-level ops (the Python between
    them), which the plugin's step wall verdict judges (a trial's 3 ms sleep a step failed its test
    and compared as `same`). Where both sides hold it and neither ran on a device, whose wall holds
    the wait for it."""
    if not a.outside_ms or not b.outside_ms or a.on_device or b.on_device:
        return None
    a_ms, b_ms = _stat(list(a.outside_ms), stat), _stat(list(b.outside_ms), stat)
    status = _side_status(a_ms, b_ms, tolerance, min_delta_ms)
    steps = (len(a.outside_ms), len(a.outside_ms)), (len(b.outside_ms), len(b.outside_ms))  # every step has one
    peaks = max(a.outside_ms), max(b.outside_ms)
    medians = median(b.outside_ms), median(a.outside_ms)
    return SideRow(STEP_WALL, 1.0, 1.0, a_ms, b_ms, "cpu", "cpu", status, (), (), *steps, *peaks, *medians)


def _side(doc: BaselineDoc, name: str, stat: str) -> tuple[float | None, float | None, str | None]:
    """One side of an op's row: calls per step, ms per step by `stat`, and which clock it is
    (all None when the op is not on this side)."""
    entry = doc.ops.get(name)
    if entry is None:
        return None, None, None
    samples = list(entry.time_samples)
    return median_calls(entry), _stat(samples, stat) if samples else 0.0, "device" if entry.on_device else "cpu"


def _spread(doc: BaselineDoc, name: str) -> tuple[tuple[int, int] | None, float | None, float | None]:
    """How an op's time spreads over the steps: (steps it ran in, steps), its time in the
    costliest step and its median over the steps; all None where it is not in the document."""
    entry = doc.ops.get(name)
    if entry is None:
        return None, None, None
    return (steps_run(entry), len(entry.calls_per_step)), step_cost_ms(entry), median(entry.time_samples or (0.0,))


def _side_status(a_ms: float | None, b_ms: float | None, tolerance: float, min_delta_ms: float) -> str:
    """added/removed on one side only; slower/faster beyond both the tolerance and the floor."""
    if a_ms is None:
        return "added"
    if b_ms is None:
        return "removed"
    delta = b_ms - a_ms
    if delta > min_delta_ms and delta > tolerance * a_ms:
        return "slower"
    if -delta > min_delta_ms and -delta > tolerance * a_ms:
        return "faster"
    return "same"


def shown_side_rows(rows: list[SideRow], top: int | None) -> list[SideRow]:
    """The first `top` rows, then those beyond that are slower, whose calls changed or that are
    on one side only (a trial's `--top 4` hid `aten::reshape 15 -> 16`, the one structure change;
    another's `--top 3` hid 3 of the 6 slower ops that made B regress)."""
    if top is None:
        return rows
    return rows[:top] + [r for r in rows[top:] if r.status in ("slower", "added", "removed") or r.calls_changed]


def b_regressed(
    rows: Iterable[SideRow],
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS,
    tolerance: float = DEFAULT_TOLERANCE,
    a_fastest_step_ms: float | None = None,
) -> list[SideRow]:
    """The rows that make B worse than A: slower ops, and added ops that cost (_added_costs).
    `a_fastest_step_ms` None (A has no step walls, or time is not judged): added ops by their
    median alone."""
    return [
        r
        for r in rows
        if r.status == "slower" or (r.status == "added" and _added_costs(r, min_delta_ms, tolerance, a_fastest_step_ms))
    ]


def _added_costs(row: SideRow, min_delta_ms: float, tolerance: float, a_fastest_step_ms: float | None) -> bool:
    """An op only B has costs more than the floor by its median over B's steps, whatever the
    stat (the minimum of an op that skipped one step is 0: a review's 1 ms op in 5 of 6 steps
    passed `--stat min`); one B ran in only some of its steps (its median can be 0), more than
    the floor and the tolerance of A's fastest step in its costliest step, as the plugin judges
    it (a trial's 8 ms matmul in 2 of 6 steps read `B not slower`)."""
    if (row.b_median_ms or 0.0) > min_delta_ms:
        return True
    if a_fastest_step_ms is None or row.b_steps is None or row.b_steps[0] == row.b_steps[1]:
        return False
    return (row.b_peak_ms or 0.0) > max(min_delta_ms, tolerance * a_fastest_step_ms)


@dataclass(frozen=True)
class MachineSpeed:
    """How many times slower B's machine ran a reference than A's: the median over the tests
    whose documents both hold it (baselines do, and traces opprof exported; other traces hold none)."""

    reference: str  # "dispatch", "matmul" or "small matmul"
    ratio: float
    tests: int


def machine_speed(pairs: Iterable[tuple[BaselineDoc, BaselineDoc]]) -> MachineSpeed | None:
    """The reference that moved most between the sides, where beyond a steady machine's own
    spread (STATE_NOISE) either way; None where none did or no test holds both sides' references."""
    pairs = list(pairs)
    moved = []
    for key, what in REFERENCES:
        ratios = [getattr(b, key) / getattr(a, key) for a, b in pairs if getattr(a, key) and getattr(b, key)]
        if ratios:
            moved.append(MachineSpeed(what, median(ratios), len(ratios)))
    moved = [m for m in moved if max(m.ratio, 1 / m.ratio) > STATE_NOISE]
    return max(moved, key=lambda m: max(m.ratio, 1 / m.ratio), default=None)
