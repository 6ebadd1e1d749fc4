"""A baseline document as typed records: what a baseline file holds, what compare() reads.

`BaselineDoc.from_dict` validates (a ValueError names what is wrong; baseline.py adds the file)
and `to_dict` gives back the JSON form, so a file read and written again is byte-identical.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from .analysis import MAX_THREADS
from .analysis.compiled import stable_name
from .analysis.model import selected, workload_problem
from .errors import BAD_RANGE_FIX
from .errors import json_shown as _shown
from .events import is_printable_name, printable_name, printable_texts
from .opnames import as_written
from .units import count_of

# Beyond any count, FLOPs, bytes or ms per step; keeps ratios finite. An int, compared exactly:
# the float 1e30 is a little more than 10**30, which a trial's counts of 10**30 passed below.
_LARGEST = 10**30
MAX_CAPTURES = 1_000_000  # capture.number: past any test's captures


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < _LARGEST


def _amount(value: Any) -> bool:
    """A count, FLOPs, bytes or milliseconds: a number >= 0."""
    return _number(value) and value >= 0


def _per_step(value: Any, what: str, steps: int, whole: bool = False) -> tuple[float, ...]:
    """A list of one amount (a whole number with `whole`) per step. `what` names the list."""
    ok = isinstance(value, list) and all(_amount(v) and (not whole or v == int(v)) for v in value)
    if not ok:
        kind = "whole numbers >= 0" if whole else "numbers >= 0"
        if value is None:  # a trial's missing key read as one of the wrong kind
            raise ValueError(f"{what} is missing or null: a list of {kind}, one per step")
        if not isinstance(value, list):
            raise ValueError(f"{what} is {_shown(value)}, not a list of {kind}, one per step")
        step, bad = next((i, v) for i, v in enumerate(value) if not (_amount(v) and (not whole or v == int(v))))
        one = "a whole number >= 0" if whole else "a number >= 0"
        raise ValueError(f"{what} holds {_shown(bad)} at step {step + 1}: not {one} (below 1e30)")
    if len(value) != steps:
        raise ValueError(f"{what} holds {count_of(len(value), 'value')} for {count_of(steps, 'step')}: one per step")
    return tuple(value)


def _shape_ok(shape: Any) -> bool:
    """A shape: a list of integers, or of shapes (a list of tensors)."""
    return isinstance(shape, list) and all(
        (isinstance(d, int) and not isinstance(d, bool)) or _shape_ok(d) for d in shape
    )


@dataclass(frozen=True, slots=True)
class SignatureEntry:
    """One input signature of an op and its calls per step."""

    shapes: list[Any]  # as JSON gives them: one list per input (nested for a list of tensors)
    dtypes: tuple[str, ...]
    calls_per_step: float

    def to_dict(self) -> dict[str, Any]:
        return {"shapes": self.shapes, "dtypes": list(self.dtypes), "calls_per_step": self.calls_per_step}

    @classmethod
    def from_dict(cls, data: Any) -> SignatureEntry:
        ok = (
            isinstance(data, dict)
            and isinstance(data.get("shapes"), list)
            and all(_shape_ok(s) for s in data["shapes"])
            and isinstance(data.get("dtypes"), list)
            and all(isinstance(t, str) for t in data["dtypes"])
            and _amount(data.get("calls_per_step"))
        )
        if not ok:
            msg = "has no list of signatures, each with shapes (lists of integers), dtypes (texts) and calls_per_step"
            raise ValueError(msg)
        return cls(data["shapes"], tuple(data["dtypes"]), data["calls_per_step"])


@dataclass(frozen=True, slots=True)
class WorkEntry:
    """An op's work per step: input signatures, FLOPs, kernels it launched, bytes it copied."""

    signatures: tuple[SignatureEntry, ...]
    flops_per_step: float
    kernels: dict[str, float] = field(default_factory=dict)
    bytes_per_step: dict[str, float] = field(default_factory=dict)
    # its calls autograd recorded per step (grad mode on as they ran); None in files written before
    autograd_calls_per_step: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "signatures": [s.to_dict() for s in self.signatures],
            "flops_per_step": self.flops_per_step,
            "kernels": dict(self.kernels),
            "bytes_per_step": dict(self.bytes_per_step),
            **(
                {}
                if self.autograd_calls_per_step is None
                else {"autograd_calls_per_step": self.autograd_calls_per_step}
            ),
        }

    @classmethod
    def from_dict(cls, data: Any) -> WorkEntry:
        if not isinstance(data, dict):
            raise ValueError("is not an object or null")
        sigs = data.get("signatures")
        if not isinstance(sigs, list):
            raise ValueError(
                "has no list of signatures, each with shapes (lists of integers), dtypes (texts) and calls_per_step"
            )
        signatures = tuple(SignatureEntry.from_dict(s) for s in sigs)
        if not _amount(data.get("flops_per_step")):
            raise ValueError("has no flops_per_step number >= 0")
        tables = []
        for key in ("kernels", "bytes_per_step"):
            table = data.get(key)
            if not isinstance(table, dict) or not all(_amount(v) for v in table.values()):
                raise ValueError(f"has no {key} object of numbers >= 0")
            tables.append(dict(table))
        autograd = data.get("autograd_calls_per_step")
        if "autograd_calls_per_step" in data and not _amount(autograd):
            raise ValueError("has an autograd_calls_per_step that is no number >= 0")
        return cls(signatures, data["flops_per_step"], tables[0], tables[1], autograd)


@dataclass(frozen=True, slots=True)
class OpEntry:
    """One op: calls and CPU and device ms per step, whether its time is device time, its work."""

    calls_per_step: tuple[float, ...]
    cpu_ms: tuple[float, ...]
    device_ms: tuple[float, ...]
    on_device: bool = False
    work: WorkEntry | None = None
    has_work_key: bool = True  # False for a schema-1 entry (written without 'work')
    # the fastest and the slowest of its per-step minima over the measurements its baseline was
    # recorded from (None: recorded from one, or before this was kept): how far this machine
    # moved its time with the code unchanged
    recorded_range: tuple[float, float] | None = None
    # per step, the kernel launches under it whose records the tracer dropped (`records_lost`,
    # written only where some were): its device time there is short, its kernel counts low
    records_lost: tuple[float, ...] = ()

    @property
    def time_samples(self) -> tuple[float, ...]:
        """Per-step time: device ms if the op ran on a device, else CPU ms."""
        return self.device_ms if self.on_device else self.cpu_ms

    @property
    def judged_samples(self) -> tuple[float, ...]:
        """The per-step times a verdict may read: a device time of a step that lost kernel
        records is short, and left out (the minimum would be that step's)."""
        if not self.on_device or not any(self.records_lost):
            return self.time_samples
        return tuple(ms for ms, lost in zip(self.time_samples, self.lost_in_steps()) if not lost)

    def lost_in_steps(self) -> tuple[float, ...]:
        """records_lost, one per step (0s where none were lost)."""
        steps = len(self.calls_per_step)
        return (self.records_lost + (0,) * steps)[:steps]

    @property
    def lost_per_step(self) -> float:
        """Its lost kernel records in a step, as its kernel counts are read: their median."""
        return statistics.median(self.records_lost) if self.records_lost else 0

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "calls_per_step": list(self.calls_per_step),
            "cpu_ms": list(self.cpu_ms),
            "device_ms": list(self.device_ms),
            "on_device": self.on_device,
        }
        if self.has_work_key:
            found["work"] = self.work.to_dict() if self.work else None
        if self.recorded_range is not None:
            found["recorded_range_ms"] = list(self.recorded_range)
        if any(self.records_lost):
            found["records_lost"] = list(self.records_lost)
        return found

    @classmethod
    def from_dict(cls, name: str, data: Any, steps: int) -> OpEntry:
        if not isinstance(data, dict):
            raise ValueError(f"op {name!r} lacks calls_per_step/cpu_ms/device_ms lists")
        lists = [
            _per_step(data.get(k), f"op {name!r}: '{k}'", steps, whole=k == "calls_per_step")
            for k in ("calls_per_step", "cpu_ms", "device_ms")
        ]
        work = None
        if data.get("work") is not None:
            try:
                work = WorkEntry.from_dict(data["work"])
            except ValueError as exc:
                raise ValueError(f"op {name!r}: 'work' {exc}") from None
        on_device = data.get("on_device", False)
        if not isinstance(on_device, bool):
            raise ValueError(f"op {name!r}: 'on_device' is {_shown(on_device)}, not true or false")
        lost = data.get("records_lost")
        lost = _per_step(lost, f"op {name!r}: 'records_lost'", steps, whole=True) if lost is not None else ()
        entry = cls(lists[0], lists[1], lists[2], on_device, work, "work" in data, records_lost=lost)
        if "recorded_range_ms" not in data:
            return entry
        return replace(entry, recorded_range=_recorded_range(name, data["recorded_range_ms"], entry.judged_samples))


class FieldError(ValueError):
    """A wrong field of a baseline file with a fix of its own, said instead of "fix or delete it"."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def _recorded_range(name: str, value: Any, timed: tuple[float, ...]) -> tuple[float, float]:
    """`recorded_range_ms`: [fastest, slowest] per-step minimum, in ms, holding the op's own
    fastest step. Its width is not checked: the slowest has no bound (a slow spell read x3, an
    xdist worker's busy neighbour x100), and a hand-edited [0, 1000], which makes any slowdown of
    the op inconclusive, is no more refused than a hand-edited time: the file's review shows both."""
    what = f"op {name!r}: 'recorded_range_ms' is {_shown(value)}"
    if not (isinstance(value, list) and len(value) == 2 and all(_amount(v) for v in value) and value[0] <= value[1]):
        raise ValueError(f"{what}, not [fastest, slowest] (two numbers >= 0 in ms, the first no larger)")
    if timed and not value[0] <= min(timed) <= value[1]:
        raise FieldError(
            f"{what}, which does not hold the op's own fastest step, {min(timed)} ms (the range is of the "
            "measurements the file was recorded from, its own among them)",
            BAD_RANGE_FIX,
        )
    return (value[0], value[1])


@dataclass(frozen=True, slots=True)
class KernelShare:
    """One launching op's launches of a kernel, per step."""

    calls_per_step: tuple[float, ...]
    device_ms: tuple[float, ...]

    def __add__(self, other: KernelShare) -> KernelShare:
        """Two ops' shares of one document's kernel, step by step."""
        return KernelShare(
            tuple(map(sum, zip(self.calls_per_step, other.calls_per_step))),
            tuple(map(sum, zip(self.device_ms, other.device_ms))),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"calls_per_step": list(self.calls_per_step), "device_ms": list(self.device_ms)}


@dataclass(frozen=True, slots=True)
class KernelEntry:
    calls_per_step: tuple[float, ...]
    device_ms: tuple[float, ...]
    ops: tuple[str, ...] = ()  # the ops that launched it
    # each op's share, written only where the sums are not one op's (several ops launched it, or
    # some launches had no op); empty in baselines written before it existed
    by_op: dict[str, KernelShare] = field(default_factory=dict)

    def shares(self) -> dict[str, KernelShare]:
        """Each launching op's calls and device ms per step (as far as the document knows them:
        the sums for each of several ops in a baseline written before `by_op`)."""
        if self.by_op:
            return dict(self.by_op)
        return {op: KernelShare(self.calls_per_step, self.device_ms) for op in self.ops}

    def launched_by(self, chosen: set[str] | dict[str, Any]) -> KernelEntry | None:
        """This kernel as far as `chosen` ops launched it: their shares summed, None when they
        launched none. Whole where one op launched all of it, and in a baseline written before
        `by_op` (it knows no shares)."""
        ops = tuple(op for op in self.ops if op in chosen)
        if not ops:
            return None
        if not self.by_op:
            return self
        total = self.by_op[ops[0]]
        for op in ops[1:]:
            total = total + self.by_op[op]
        chosen_shares = {op: self.by_op[op] for op in ops} if len(ops) > 1 else {}
        return KernelEntry(total.calls_per_step, total.device_ms, ops, chosen_shares)

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "calls_per_step": list(self.calls_per_step),
            "device_ms": list(self.device_ms),
            "ops": list(self.ops),
        }
        if self.by_op:
            found["by_op"] = {op: share.to_dict() for op, share in self.by_op.items()}
        return found

    @classmethod
    def from_dict(cls, name: str, data: Any, steps: int) -> KernelEntry:
        if not isinstance(data, dict):
            raise ValueError(f"kernel {name!r} lacks calls_per_step/device_ms lists")
        ops = data.get("ops") or []
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            raise ValueError(f"kernel {name!r}: 'ops' is not a list of op names")
        _printable_keys(dict.fromkeys(ops), f"kernel {name!r}: its op")
        calls = _per_step(data.get("calls_per_step"), f"kernel {name!r}: 'calls_per_step'", steps, whole=True)
        device = _per_step(data.get("device_ms"), f"kernel {name!r}: 'device_ms'", steps)
        shares = _kernel_shares(name, data.get("by_op", {}), ops, steps)
        _check_shares(name, shares, ops, KernelShare(calls, device))
        return cls(calls, device, tuple(ops), shares)


ROUNDING = 1e-3  # shares and sums are each rounded to 4 significant digits: their sum may pass the sum's


def _check_shares(name: str, shares: dict[str, KernelShare], ops: list[str], total: KernelShare) -> None:
    """Shares that hold each launching op and, per step, add up to no more than the kernel's sums."""
    if not shares:
        return
    missing = [op for op in ops if op not in shares]
    if missing:
        raise ValueError(f"kernel {name!r}: 'by_op' has no share for {missing[0]!r}, one of its 'ops'")
    for what in ("calls_per_step", "device_ms"):
        summed = [sum(step) for step in zip(*(getattr(share, what) for share in shares.values()))]
        for step, (got, limit) in enumerate(zip(summed, getattr(total, what))):
            if got > limit * (1 + ROUNDING) + 1e-9:
                raise ValueError(
                    f"kernel {name!r}: the 'by_op' shares of '{what}' add up to {got:g} in step {step + 1}, "
                    f"more than the kernel's own {limit:g}"
                )


def _kernel_shares(name: str, data: Any, ops: list[str], steps: int) -> dict[str, KernelShare]:
    """A kernel's `by_op`: per launching op (one of its `ops`), calls and device ms per step."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"kernel {name!r}: 'by_op' is not an object of launching ops")
    strays = sorted(set(data) - set(ops))
    if strays:
        raise ValueError(f"kernel {name!r}: 'by_op' names {strays[0]!r}, which is not in its 'ops'")
    return {
        op: KernelShare(
            _per_step(v.get("calls_per_step"), f"kernel {name!r}: by_op {op!r} 'calls_per_step'", steps, whole=True),
            _per_step(v.get("device_ms"), f"kernel {name!r}: by_op {op!r} 'device_ms'", steps),
        )
        for op, v in data.items()
    }


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    calls_per_step: tuple[float, ...]
    device_ms: tuple[float, ...]
    bytes: float = 0

    def to_dict(self) -> dict[str, Any]:
        return {"calls_per_step": list(self.calls_per_step), "device_ms": list(self.device_ms), "bytes": self.bytes}

    @classmethod
    def from_dict(cls, name: str, data: Any, steps: int) -> MemoryEntry:
        if not isinstance(data, dict):
            raise ValueError(f"memory op {name!r} lacks calls_per_step/device_ms lists")
        size = data.get("bytes", 0)
        if not _amount(size):
            raise ValueError(f"memory op {name!r}: 'bytes' is {_shown(size)}, not a number >= 0")
        calls = _per_step(data.get("calls_per_step"), f"memory op {name!r}: 'calls_per_step'", steps, whole=True)
        return cls(calls, _per_step(data.get("device_ms"), f"memory op {name!r}: 'device_ms'", steps), size)


@dataclass(frozen=True, slots=True)
class WorkloadEntry:
    """A baseline's workload reference: the product replayed alone, on what, and its best time."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    ms: float

    def same_product(self, other: WorkloadEntry) -> bool:
        return (self.op, self.shapes, self.dtypes) == (other.op, other.shapes, other.dtypes)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": [list(s) for s in self.shapes], "dtypes": list(self.dtypes), "ms": self.ms}

    @classmethod
    def from_dict(cls, data: Any) -> WorkloadEntry:
        """ValueError names what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"'workload_reference' is {_shown(data)}, not an object or null")
        missing = [key for key in ("op", "shapes", "dtypes", "ms") if key not in data]
        if missing:
            raise ValueError(f"'workload_reference' has no {missing[0]!r}")
        op, shapes, dtypes = data["op"], data["shapes"], data["dtypes"]
        ms: Any = data["ms"]
        problem = workload_problem(op, shapes, dtypes, "workload_reference.")
        if problem:
            raise ValueError(problem)
        if not _number(ms) or ms <= 0:
            raise ValueError(f"'workload_reference.ms' is {_shown(ms)}, not a positive number (below 1e30)")
        return cls(op, tuple(tuple(s) for s in shapes), tuple(dtypes), float(ms))


@dataclass(frozen=True)
class BaselineDoc:
    """One test's measurement as a baseline file holds it (also a fresh measurement to compare)."""

    schema: int
    nodeid: str
    device_key: str | None
    environment: dict[str, Any]
    steps: int  # capture.steps
    source: str | None  # capture.source
    threads: int | None  # capture.threads: torch's intra-op threads (None: unknown, not written)
    reference_ms: float | None
    dispatch_reference_ms: float | None
    wall_ms: tuple[float, ...] | None
    events_per_step: tuple[float, ...]
    ops: dict[str, OpEntry]
    kernels: dict[str, KernelEntry]
    memory_ops: dict[str, MemoryEntry]
    list_shapes: bool = False  # capture.list_shapes: its work holds lists of tensors' shapes (absent: `[]`)
    workload_reference: WorkloadEntry | None = None  # run() on CPU: its costliest product replayed alone
    outside_ms: tuple[float, ...] | None = None  # per step, the wall outside the top-level ops (the Python between)
    # capture.number: which of the test's captures it is, counted from 1 (None: a file from before
    # numbers were written, or a trace): run() judges early only that capture
    number: int | None = None
    # capture.cpu_wait: the share of the written measurement its threads waited for a CPU, where
    # over the contention limit (None: under it, or unknown): a baseline recorded under load
    recorded_wait: float | None = None
    # capture.kernels_dropped: kernel launches its capture holds no kernel record of (the tracer
    # dropped them: its kernels and device times are short); 0 where none were, or unknown
    kernels_dropped: int = 0
    # the small matmul reference (None: a file written before it was taken, or unknown)
    small_reference_ms: float | None = None
    # capture.unrepeated: ops whose calls or inputs differed in the recording's further measurements
    # of run()'s fn (state fn keeps: a growing cache); () where none did, or unknown
    unrepeated: tuple[str, ...] = ()

    def replace(self, **changes: Any) -> BaselineDoc:
        return replace(self, **changes)

    @property
    def on_device(self) -> bool:
        """Whether any of its work ran on a device (kernels, copies, an op timed on the device)."""
        return bool(self.kernels or self.memory_ops or any(op.on_device for op in self.ops.values()))

    def only(self, patterns: tuple[str, ...]) -> BaselineDoc:
        """This document with only the ops, kernels and memory ops whose name matches one of
        `patterns` (exact or glob), plus a matched op's own launches of other kernels (a
        document holds no op tree: an op's kernels are those it launched itself)."""
        patterns = as_written(patterns, self.names())
        ops = {name: op for name, op in self.ops.items() if selected(name, patterns)}
        kernels = {n: k if selected(n, patterns) else k.launched_by(ops) for n, k in self.kernels.items()}
        return replace(
            self,
            ops=ops,
            kernels={n: k for n, k in kernels.items() if k is not None},
            memory_ops={n: m for n, m in self.memory_ops.items() if selected(n, patterns)},
            outside_ms=None,  # the steps' time outside every op: chosen by no op glob
        )

    def ops_by_time(self) -> list[str]:
        """Op names as `opprof show` lists them, by the rule of `tables.by_shown_time`: median time
        per step largest first, then total CPU time (a caller before the op inside it), then
        name; what `--top` keeps."""

        def median(values: tuple[float, ...]) -> float:
            return statistics.median(values) if values else 0.0

        return sorted(self.ops, key=lambda n: (-median(self.ops[n].time_samples), -sum(self.ops[n].cpu_ms), n))

    def names(self) -> set[str]:
        """Every op, kernel and memory op name (what `only` selects from)."""
        return {*self.ops, *self.kernels, *self.memory_ops}

    def to_dict(self) -> dict[str, Any]:
        """The file's form; `workload_reference` only when taken and `outside_ms` only when known
        (a file written before they existed reads back the same)."""
        found = {
            "schema": self.schema,
            "nodeid": self.nodeid,
            "device_key": self.device_key,
            "environment": dict(self.environment),
            "capture": self._capture(),
            "reference_ms": self.reference_ms,
            "dispatch_reference_ms": self.dispatch_reference_ms,
            "wall_ms": list(self.wall_ms) if self.wall_ms is not None else None,
            "events_per_step": list(self.events_per_step),
            "ops": {name: op.to_dict() for name, op in self.ops.items()},
            "kernels": {name: k.to_dict() for name, k in self.kernels.items()},
            "memory_ops": {name: m.to_dict() for name, m in self.memory_ops.items()},
        }
        if self.workload_reference is not None:
            found["workload_reference"] = self.workload_reference.to_dict()
        if self.outside_ms is not None:
            found["outside_ms"] = list(self.outside_ms)
        if self.small_reference_ms is not None:
            found["small_reference_ms"] = self.small_reference_ms
        return found

    def _capture(self) -> dict[str, Any]:
        """capture.threads and capture.number only when known, capture.list_shapes, kernels_dropped and
        unrepeated only when true or some: a file written before they existed reads back the same."""
        found: dict[str, Any] = {"steps": self.steps, "source": self.source}
        if self.number is not None:
            found["number"] = self.number
        if self.threads is not None:
            found["threads"] = self.threads
        if self.list_shapes:
            found["list_shapes"] = True
        if self.recorded_wait is not None:
            found["cpu_wait"] = self.recorded_wait
        if self.kernels_dropped:
            found["kernels_dropped"] = self.kernels_dropped
        if self.unrepeated:
            found["unrepeated"] = list(self.unrepeated)
        return found

    @classmethod
    def from_file(cls, data: dict[str, Any]) -> BaselineDoc:
        """A baseline file's document: as from_dict, and the fields every file pytest-opprof
        wrote holds must be there. Without them a check would be off in silence: a file without
        `wall_ms` let a step 4.5x slower pass (a trial's hand edit)."""
        doc = cls.from_dict(data)
        for key in _RECORDED:
            if data.get(key) is None:
                raise ValueError(f"no {key!r}{' (null)' if key in data else ''}: {_RECORDED[key]}")
        for name, op in data["ops"].items():
            if "on_device" not in op:
                raise ValueError(f"op {name!r}: no 'on_device' (true when its time is device time)")
        return doc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaselineDoc:
        """A validated document; ValueError says what is wrong (the schema is checked by the reader)."""
        for key, kind in (("ops", dict), ("memory_ops", dict), ("kernels", dict), ("events_per_step", list)):
            if not isinstance(data.get(key), kind):
                wanted = "an object" if kind is dict else "a list"
                found = "missing" if key not in data else f"{_shown(data[key])}, not {wanted}"
                raise ValueError(f"'{key}' is {found} ({wanted} of the file's {key.replace('_', ' ')})")
        for key, what in (("ops", "op"), ("kernels", "kernel"), ("memory_ops", "memory op")):
            _printable_keys(data[key], what)
        references = [_reference(data, key) for key in ("reference_ms", "dispatch_reference_ms")]
        nodeid, device_key, environment = _identity(data)
        found = data.get("capture", {})
        if not isinstance(found, dict):
            raise ValueError(f"'capture' is {_shown(found)}, not an object")
        capture: dict[str, Any] = found
        steps = _steps(capture, data["events_per_step"])
        wall, outside = data.get("wall_ms"), data.get("outside_ms")
        return cls(
            data["schema"],
            nodeid,
            device_key,
            environment,
            steps,
            capture.get("source"),
            _threads(capture.get("threads")),
            references[0],
            references[1],
            _per_step(wall, "'wall_ms'", steps) if wall is not None else None,
            _per_step(data["events_per_step"], "'events_per_step'", steps, whole=True),
            _stable_ops({str(name): OpEntry.from_dict(name, op, steps) for name, op in data["ops"].items()}),
            {str(name): KernelEntry.from_dict(name, k, steps) for name, k in data["kernels"].items()},
            {str(name): MemoryEntry.from_dict(name, m, steps) for name, m in data["memory_ops"].items()},
            _flag(capture, "list_shapes"),
            WorkloadEntry.from_dict(data["workload_reference"]) if data.get("workload_reference") is not None else None,
            # without a wall (a file missing it is refused by from_file, naming the wall) no time outside the ops
            _outside(outside, wall, steps) if outside is not None and wall is not None else None,
            _capture_number(capture.get("number")),
            _capture_wait(capture.get("cpu_wait")),
            _kernels_dropped(capture.get("kernels_dropped")),
            _reference(data, "small_reference_ms"),
            _unrepeated(capture.get("unrepeated")),
        )


def _printable_keys(entries: dict[str, Any], what: str) -> None:
    """Names as profiles give them: printable (a newline or an ESC is written as its escape, `\\n`),
    so a hand-edited name cannot forge a verdict line or colour the terminal."""
    if "" in entries:  # a trial's verdict line read `-  (was 2/step)`
        raise ValueError(f"{what} '': an empty name, which no profile's op has")
    odd = next((name for name in entries if not is_printable_name(name)), None)
    if odd is not None:
        raise ValueError(
            f"{what} {odd!r}: its name holds a control character or a bidirectional override, which no profile's name does "
            f"(they write it as its escape, {printable_name(odd)!r})"
        )


def _outside(value: Any, wall: Any, steps: int) -> tuple[float, ...]:
    """The per-step time outside the ops: a list like `wall_ms`'s, none over its step's wall."""
    outside = _per_step(value, "'outside_ms'", steps)
    walls = _per_step(wall, "'wall_ms'", steps)
    over = next((i for i, (o, w) in enumerate(zip(outside, walls)) if o > w), None)
    if over is not None:
        raise ValueError(f"'outside_ms' is {outside[over]} in step {over + 1}, over its wall_ms, {walls[over]}")
    return outside


_RECORDED = {  # what every baseline file holds (a document of a trace without step markers has no wall)
    "environment": "the machine and torch facts",
    "capture": "the capture's steps and source",
    "wall_ms": "the steps' wall times, one per step",
}


def _stable_ops(ops: dict[str, OpEntry]) -> dict[str, OpEntry]:
    """The ops under the names the analysis gives them now: a baseline recorded before Inductor's
    C++ kernels lost their process-wide graph number (`graph_2_cpp_fused_tanh_0`) reads as if
    recorded after (`cpp_fused_tanh_0`; two kernels of one name summed, their work unrecorded)."""
    found: dict[str, OpEntry] = {}
    for name, entry in ops.items():
        key = stable_name(name)
        if key in found:
            old = found[key]
            entry = replace(
                old,
                calls_per_step=tuple(map(sum, zip(old.calls_per_step, entry.calls_per_step))),
                cpu_ms=tuple(map(sum, zip(old.cpu_ms, entry.cpu_ms))),
                device_ms=tuple(map(sum, zip(old.device_ms, entry.device_ms))),
                on_device=old.on_device or entry.on_device,
                work=None,
                recorded_range=None,  # each name's range, not their sum's
            )
        found[key] = entry
    return found


# The stable facts a baseline records; volatile ones (clocks, temperature) would make a diff
# of every re-recording.
ENVIRONMENT_KEYS = (
    "torch",
    "cuda",
    "hip",
    "gpu_name",
    "gpu_capability",
    "driver",
    "cuda_driver",
    "cpu_model",
    "cpu_capability",  # the vector instructions of torch's CPU kernels (AVX512, AVX2, DEFAULT)
    "thread_setup",  # what sets torch's default: tells a machine's thread count from a project's (compare.py)
)
# The environment facts opprof has always written as texts (or null), those it records; an older
# file's `torch_threads` was a number, and a fact this version does not know is left as it is.
TEXT_FACTS = frozenset(ENVIRONMENT_KEYS)


def _identity(data: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """The test's node id, the device key and the environment facts, checked."""
    nodeid, key, environment = data.get("nodeid"), data.get("device_key"), data.get("environment", {})
    if "nodeid" not in data:
        raise ValueError("no 'nodeid': the test's node id")
    if not isinstance(nodeid, str) or not nodeid:
        raise ValueError(f"'nodeid' is {_shown(nodeid)}, not the test's node id")
    if key is not None and not isinstance(key, str):
        raise ValueError(f"'device_key' is {_shown(key)}, not a text or null")
    if not isinstance(environment, dict):
        raise ValueError(f"'environment' is {_shown(environment)}, not an object")
    odd = next(
        ((k, v) for k, v in environment.items() if k in TEXT_FACTS and not isinstance(v, (str, type(None)))), None
    )
    if odd is not None:  # a trial's `"torch": 2` was read
        raise ValueError(f"'environment.{odd[0]}' is {_shown(odd[1])}, not a text or null")
    if key is not None and not is_printable_name(key):  # a trial's edited key printed an ESC to the terminal
        raise ValueError(
            f"'device_key' is {_shown(key)}: it holds a control character or a bidirectional override, "
            "which no device key has"
        )
    # A fact's control character is read as its escape, as the writer now writes it (an older
    # version wrote a thread variable's `2\r` raw); the node id is pytest's, kept as it is.
    return nodeid, key, printable_texts(environment)


def _steps(capture: dict[str, Any], events_per_step: Any) -> int:
    """The captured steps: capture.steps (a whole number >= 1), else one per events_per_step."""
    if "steps" not in capture:
        if not events_per_step:
            raise ValueError("'events_per_step' is empty and there is no 'capture.steps': no step was recorded")
        return len(events_per_step)
    steps = capture["steps"]
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"'capture.steps' is {_shown(steps)}, not a whole number >= 1")
    return steps


def _flag(capture: dict[str, Any], key: str) -> bool:
    """A capture flag: absent (false) or a JSON boolean."""
    value = capture.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"'capture.{key}' is {_shown(value)}, not true or false")
    return value


def _threads(value: Any) -> int | None:
    """capture.threads: absent or null (unknown), else a whole number of threads."""
    return _counted(value, "threads", "a whole number of threads", MAX_THREADS)


def _counted(value: Any, key: str, what: str, most: int) -> int | None:
    """A capture field counted from 1 (`what`, up to `most`), or absent or null: unknown."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= most):
        raise ValueError(f"'capture.{key}' is {_shown(value)}, not {what} (1 to {most}) or null")
    return value


def _capture_number(value: Any) -> int | None:
    """capture.number: absent or null (unknown: a file from before numbers), else which of the
    test's captures the document holds, counted from 1."""
    return _counted(value, "number", "which of the test's captures it holds", MAX_CAPTURES)


MAX_LAUNCHES = 1 << 40  # kernel launches of one capture: far past any


def _kernels_dropped(value: Any) -> int:
    """capture.kernels_dropped: absent or null (none, or a file from before it was written), else
    how many kernel launches the capture holds no kernel record of."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LAUNCHES):
        raise ValueError(
            f"'capture.kernels_dropped' is {_shown(value)}, not a count of kernel launches (0 to {MAX_LAUNCHES}) or null"
        )
    return value or 0


def _unrepeated(value: Any) -> tuple[str, ...]:
    """capture.unrepeated: absent or null (none, or unknown), else the op names whose work differed
    from call to call of run()'s fn when the file was recorded."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(n, str) and n and is_printable_name(n) for n in value):
        raise ValueError(f"'capture.unrepeated' is {_shown(value)}, not a list of op names or null")
    return tuple(dict.fromkeys(value))


MAX_WAIT = 1000.0  # a capture's CPU wait share, summed over its threads: far past any machine's


def _capture_wait(value: Any) -> float | None:
    """capture.cpu_wait: absent or null (not recorded under load, or unknown), else the share of
    the capture its threads waited for a CPU, summed over them (so over 1 can be)."""
    if value is not None and (not _number(value) or not 0 <= value <= MAX_WAIT):
        raise ValueError(
            f"'capture.cpu_wait' is {_shown(value)}, not a share of the capture (0 to {MAX_WAIT:g}) or null"
        )
    return None if value is None else float(value)


def _reference(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is not None and (not _number(value) or value <= 0):
        raise ValueError(f"'{key}' is {_shown(value)}, not a positive number (below 1e30) or null")
    return value
