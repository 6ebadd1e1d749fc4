"""Two measurements side by side, op by op (`opprof compare A B`): e.g. the same tests on two
devices. Time and calls, keyed by operator name (stable across GPUs and vendors), with each op's
kernels; the verdicts of a test against its baseline are compare.py's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median
from typing import Any

from .compare import DEFAULT_MIN_DELTA_MS, DEFAULT_TOLERANCE, REFERENCES, STATE_NOISE, STEP_WALL, median_calls
from .documents import BaselineDoc, KernelShare

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
            "a": {"calls_per_step": _n(self.a_calls), "ms_per_step": _r(self.a_ms), "time": self.a_time},
            "b": {"calls_per_step": _n(self.b_calls), "ms_per_step": _r(self.b_ms), "time": self.b_time},
            "diff_ms": _r(self.diff_ms),
            "ratio": float(f"{ratio:.4g}") if ratio is not None else None,  # 4 significant digits
            "calls_changed": self.calls_changed,
            "kernels": {
                side: [{"name": n, "calls_per_step": _n(c), "device_ms_per_step": _r(ms)} for n, c, ms in kernels]
                for side, kernels in (("a", self.kernels_a), ("b", self.kernels_b))
            },
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
        rows.append(
            SideRow(
                name,
                a_calls,
                b_calls,
                a_ms,
                b_ms,
                a_time,
                b_time,
                status,
                tuple(ka.get(name, ())),
                tuple(kb.get(name, ())),
            )
        )
    wall = _wall_row(a, b, tolerance, min_delta_ms, stat)
    rows += [wall] if wall is not None else []
    rows.sort(key=lambda r: (-abs(r.diff_ms), r.op))
    return rows


def _wall_row(a: BaselineDoc, b: BaselineDoc, tolerance: float, min_delta_ms: float, stat: str) -> SideRow | None:
    """The `step wall` row: the steps' wall time outside the top-level ops (the Python between
    them), which the plugin's step wall verdict judges (a trial's 3 ms sleep a step failed its test
    and compared as `same`). Where both sides hold it and neither ran on a device, whose wall holds
    the wait for it."""
    if not a.outside_ms or not b.outside_ms or a.on_device or b.on_device:
        return None
    a_ms, b_ms = _stat(list(a.outside_ms), stat), _stat(list(b.outside_ms), stat)
    return SideRow(STEP_WALL, 1.0, 1.0, a_ms, b_ms, "cpu", "cpu", _side_status(a_ms, b_ms, tolerance, min_delta_ms))


def _side(doc: BaselineDoc, name: str, stat: str) -> tuple[float | None, float | None, str | None]:
    """One side of an op's row: calls per step, ms per step by `stat`, and which clock it is
    (all None when the op is not on this side)."""
    entry = doc.ops.get(name)
    if entry is None:
        return None, None, None
    samples = list(entry.time_samples)
    return median_calls(entry), _stat(samples, stat) if samples else 0.0, "device" if entry.on_device else "cpu"


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
    """The first `top` rows, then those beyond whose calls changed or that are on one side only
    (a trial's `--top 4` hid `aten::reshape 15 -> 16`, the one structure change)."""
    if top is None:
        return rows
    return rows[:top] + [r for r in rows[top:] if r.calls_changed or r.status in ("added", "removed")]


def b_regressed(rows: Iterable[SideRow], min_delta_ms: float = DEFAULT_MIN_DELTA_MS) -> list[SideRow]:
    """The rows that make B worse than A: slower ops, and added ops costing more than the floor."""
    return [r for r in rows if r.status == "slower" or (r.status == "added" and (r.b_ms or 0.0) > min_delta_ms)]


@dataclass(frozen=True)
class MachineSpeed:
    """How many times slower B's machine ran a reference than A's: the median over the tests
    whose documents both hold it (baselines do; traces hold none)."""

    reference: str  # "dispatch" or "matmul"
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
