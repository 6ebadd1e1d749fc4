"""The measurement model: Profile and its records (OpStats, KernelStats, OpWork, Check, ...).

Pure data and lookups; built by the analysis stages (stages.py), read by everything else.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..chrome import RECORDED_INPUTS, write_trace
from ..errors import OpprofUsageError, TraceError, TraceWriteError, bad_argument, not_a_path, shown_value
from ..events import Event, EventTable, freeze, printable_name, without_overload
from ..opnames import as_written, profiler_spelling
from ..tables import profile_tables
from ..units import count_text, ns_to_ms

SCHEMA = 1
STEP_NAME = re.compile(r"ProfilerStep#(\d{1,18})$")  # a longer number is no step of torch's
# The capture wraps its own step-boundary synchronisation in this annotation, so that the
# synchronisation it needs is not reported as the user's host-device sync.
OPPROF_SYNC_ANNOTATION = "opprof::step_sync"

OK, WARNING, ERROR = "ok", "warning", "error"
# Host-device synchronisation: runtime calls that block the host until the device is done, CPU
# ops, and device-to-host copies. (cudaStreamWaitEvent makes a stream wait on another, not the host.)
SYNC_RUNTIME_CALL = re.compile(r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchronize")
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")


# Inductor's C++ kernels, profiled as CPU ops (cpp_fused_gelu_0: the analysis drops the
# process-wide graph number of graph_0_cpp_fused_gelu_0).
INDUCTOR_CPU_KERNEL = re.compile(r"(?:graph_\d+_)?cpp_fused_\w+$")
# Its name as Inductor gives it: `graph_<N>_cpp_fused_*`, N counting the graphs compiled in the
# process (test order, -k, xdist and Inductor's cache decide it), so N is dropped from the name.
GRAPH_NUMBERED_KERNEL = re.compile(r"graph_\d+_(cpp_fused_\w+)$")


Interval = tuple[int, int]


def merged(intervals: Iterable[Interval], presorted: bool = False) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time (`presorted`: already by start)."""
    out: list[Interval] = []
    cur_start = cur_end = None
    for start, end in intervals if presorted else sorted(intervals):
        if cur_end is not None and start <= cur_end:
            if end > cur_end:
                cur_end = end
            continue
        if cur_end is not None:
            out.append((cur_start, cur_end))  # type: ignore[arg-type]
        cur_start, cur_end = start, end
    if cur_end is not None:
        out.append((cur_start, cur_end))  # type: ignore[arg-type]
    return out


def length(intervals: list[Interval]) -> int:
    """The time a merged interval list covers."""
    return sum(end - start for start, end in intervals)


def intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Of two merged interval lists, the time both cover."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def union_ns(intervals: Iterable[Interval]) -> int:
    """The length of the union of [start, end) intervals."""
    return length(merged(intervals))


@dataclass(frozen=True, slots=True)
class Dist:
    """The per-step distribution of one quantity (counts, or nanoseconds)."""

    samples: tuple[int, ...]

    @property
    def median(self) -> float:
        """The median over the steps (0 without samples)."""
        return statistics.median(self.samples) if self.samples else 0.0

    @property
    def min(self) -> int:
        """The smallest sample (0 without samples)."""
        return min(self.samples, default=0)

    @property
    def max(self) -> int:
        """The largest sample (0 without samples)."""
        return max(self.samples, default=0)

    @property
    def iqr(self) -> float:
        """The interquartile range (0 with fewer than 2 samples)."""
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q3 - q1

    @staticmethod
    def summed(dists: Iterable[Dist]) -> Dist:
        """Several quantities' distributions added step by step (the calls of the ops a glob matches)."""
        return Dist(tuple(map(sum, zip(*(d.samples for d in dists)))))

    def to_dict(self, scale: float = 1.0) -> dict[str, Any]:
        """median, min, max and the samples, each divided by `scale` (1e6: ns to ms)."""

        def conv(v: float) -> float:
            if scale != 1.0:
                return v / scale
            return int(v) if isinstance(v, float) and v.is_integer() else v  # counts stay whole: 577, not 577.0

        return {
            "median": conv(self.median),
            "min": conv(self.min),
            "max": conv(self.max),
            "samples": [conv(v) for v in self.samples],
        }


NO_TENSOR_INPUTS = "no tensor inputs"
_NOT_TENSORS = frozenset({"Scalar", "ScalarList", "TensorList", "GenericList", "Device", "Layout", "ScalarType"})


def _dims(shape: Any) -> str:
    return "[" + ",".join(_dims(d) if isinstance(d, tuple) else str(d) for d in shape) + "]"


def inputs_text(shapes: Any, dtypes: tuple[str, ...], full: bool = False) -> str:
    """`float[128,512], float[512,1024]`: tensors with their shapes, lists by kind; scalars and
    absent optional inputs left out (they are still part of the signature) unless `full`, which
    shows every position (`float[4,4], -, Scalar`)."""
    parts = []
    for i, dtype in enumerate(dtypes):
        shape = shapes[i] if i < len(shapes) else ()
        if not dtype or dtype == "Scalar":
            if full:
                parts.append(dtype or "-")
            continue
        parts.append(dtype if dtype in _NOT_TENSORS and not shape else f"{dtype}{_dims(shape)}")
    return ", ".join(parts) or NO_TENSOR_INPUTS


@dataclass(frozen=True, slots=True)
class Signature:
    """One input signature of an op (shapes and types, from record_shapes) and its calls per step."""

    shapes: Any  # one shape per input: a tuple of ints, nested for a list of tensors
    dtypes: tuple[str, ...]
    calls_per_step: Dist
    callers: tuple[str, ...] = ()  # the ops around its first call, innermost first

    @property
    def text(self) -> str:
        """The inputs as text: `float[128,512], float[512,1024]`."""
        return inputs_text(self.shapes, self.dtypes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`signatures[]`)."""
        return {
            "shapes": _lists(self.shapes),
            "dtypes": list(self.dtypes),
            "calls": sum(self.calls_per_step.samples),
            "callers": list(self.callers),
        }


def _lists(value: Any) -> Any:
    return [_lists(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class OpWork:
    """What an op computed, as exact counts: its input signatures, FLOPs, the bytes its copies moved.

    Recorded with record_shapes and with_flops: in a separate untimed step of `run()`, in the
    single step of a one-step capture, in every step of a trace that has them."""

    signatures: tuple[Signature, ...]
    flops_per_step: Dist
    bytes_per_step: tuple[tuple[str, Dist], ...] = ()  # (memory op, bytes per step) launched by the op
    # its calls autograd recorded per step (grad mode on as they ran); None where the source does not say
    autograd_per_step: Dist | None = None

    @property
    def flops(self) -> int:
        """FLOPs over all the steps the work was recorded over."""
        return sum(self.flops_per_step.samples)

    def to_json(self) -> dict[str, Any]:
        """Everything, per step: what an exported trace carries for load_trace to restore."""
        return {
            "signatures": [
                {
                    "shapes": _lists(s.shapes),
                    "dtypes": list(s.dtypes),
                    "calls_per_step": list(s.calls_per_step.samples),
                    "callers": list(s.callers),
                }
                for s in self.signatures
            ],
            "flops_per_step": list(self.flops_per_step.samples),
            "bytes_per_step": {name: list(d.samples) for name, d in self.bytes_per_step},
            **({} if self.autograd_per_step is None else {"autograd_per_step": list(self.autograd_per_step.samples)}),
        }

    @classmethod
    def from_json(cls, data: Any) -> OpWork:
        """The inverse of to_json; ValueError (or a KeyError/TypeError) on anything else."""
        signatures = tuple(
            Signature(
                freeze(s["shapes"]),
                tuple(map(str, s["dtypes"])),
                Dist(_ints(s["calls_per_step"])),
                tuple(map(str, s.get("callers", ()))),
            )
            for s in data["signatures"]
        )
        copies = tuple((str(name), Dist(_ints(v))) for name, v in sorted(data["bytes_per_step"].items()))
        autograd = Dist(_ints(data["autograd_per_step"])) if "autograd_per_step" in data else None
        return cls(signatures, Dist(_ints(data["flops_per_step"])), copies, autograd)


def _ints(values: Any) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(type(v) is int for v in values):
        raise ValueError(f"{shown_value(values)} is not a list of integers")
    return tuple(values)


class _ShownTime:
    """The time an op's or a range's row shows and assertions check: device time when device
    work ran under it, CPU time otherwise."""

    __slots__ = ()
    cpu_ns: int
    device_ns: int
    device_per_step: Dist
    cpu_per_step: Dist

    @property
    def on_device(self) -> bool:
        """True when device work ran under it: its time is then device time."""
        return self.device_ns > 0

    @property
    def time_ns(self) -> int:
        """Device time when it ran on a device, CPU time otherwise (totals)."""
        return self.device_ns if self.on_device else self.cpu_ns

    @property
    def time_per_step(self) -> Dist:
        """Device time per step when it ran on a device, CPU time otherwise."""
        return self.device_per_step if self.on_device else self.cpu_per_step


@dataclass(frozen=True, slots=True)
class OpStats(_ShownTime):
    """One operator name: totals over the source and its per-step distributions."""

    name: str
    calls: int
    cpu_ns: int  # inclusive CPU time; a call nested in a call of the same name counts once
    self_cpu_ns: int
    device_ns: int  # device time of work launched under the op (inclusive)
    self_device_ns: int  # device time of work launched by the op itself
    calls_per_step: Dist
    cpu_per_step: Dist
    self_cpu_per_step: Dist
    device_per_step: Dist
    self_device_per_step: Dist
    work: OpWork | None = None  # None: inputs not recorded
    # Calls not nested in one of the same name (autocast's aten::linear calls aten::linear): the
    # calls the time is of, which a time per call divides by. None: every call (none nested).
    outer_calls: Dist | None = None

    @property
    def outer_calls_per_step(self) -> Dist:
        """Per step, the calls not nested in a call of the same name: the calls its time is of."""
        return self.outer_calls if self.outer_calls is not None else self.calls_per_step

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`ops[]`)."""
        return {
            "name": self.name,
            "calls": self.calls,
            "cpu_ms": ns_to_ms(self.cpu_ns),
            "self_cpu_ms": ns_to_ms(self.self_cpu_ns),
            "device_ms": ns_to_ms(self.device_ns),
            "self_device_ms": ns_to_ms(self.self_device_ns),
            "on_device": self.on_device,
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "outer_calls": self.outer_calls_per_step.to_dict(),
                "cpu_ms": self.cpu_per_step.to_dict(1e6),
                "self_cpu_ms": self.self_cpu_per_step.to_dict(1e6),
                "device_ms": self.device_per_step.to_dict(1e6),
                "self_device_ms": self.self_device_per_step.to_dict(1e6),
                "flops": self.work.flops_per_step.to_dict() if self.work else None,
                "autograd_calls": _autograd_of(self.work),
            },
            "flops": self.work.flops if self.work else None,
            "signatures": [sig.to_dict() for sig in self.work.signatures] if self.work else None,
        }


def _autograd_of(work: OpWork | None) -> dict[str, Any] | None:
    """The calls autograd recorded per step (OpWork.autograd_per_step), as JSON; None where unread."""
    return work.autograd_per_step.to_dict() if work is not None and work.autograd_per_step is not None else None


@dataclass(frozen=True, slots=True)
class RangeStats(_ShownTime):
    """One name of the capture's own ranges: `torch.profiler.record_function` blocks and the
    annotations torch and libraries add ("## forward ##", "Optimizer.step#SGD.step",
    "nccl:all_reduce"). Reported beside the ops, never compared with baselines: the ops inside a
    range are."""

    name: str
    calls: int
    cpu_ns: int  # wall time of the range on its thread; one nested in a range of the same name counts once
    device_ns: int  # device time of the work launched inside it (by runtime calls on its thread)
    calls_per_step: Dist
    cpu_per_step: Dist
    device_per_step: Dist
    outer_calls_per_step: Dist  # calls not nested in one of the same name: the calls the time is of

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`ranges[]`)."""
        return {
            "name": self.name,
            "calls": self.calls,
            "cpu_ms": ns_to_ms(self.cpu_ns),
            "device_ms": ns_to_ms(self.device_ns),
            "on_device": self.on_device,
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "outer_calls": self.outer_calls_per_step.to_dict(),
                "cpu_ms": self.cpu_per_step.to_dict(1e6),
                "device_ms": self.device_per_step.to_dict(1e6),
            },
        }


def validate_op(
    op: object, argument: str = "op", expected: str = 'an op name or glob such as "aten::addmm" or "aten::*mm"'
) -> str:
    """An op name or glob as the profiler names ops; OpprofUsageError naming `argument` otherwise."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if not isinstance(op, str) or not op.strip():
        raise OpprofUsageError(bad_argument(argument, op, expected))
    bare = without_overload(op)
    if bare is not None:  # aten::mm.default: never in a profile
        raise OpprofUsageError(
            bad_argument(argument, op, f"a name without its overload, as the profiler records it: {bare!r}")
        )
    spelled = profiler_spelling(op)
    if spelled is not None:  # torch.ops.aten.mm.default, at::mm: never in a profile, an absence passes forever
        raise OpprofUsageError(bad_argument(argument, op, f"the op's name as the profiler records it: {spelled!r}"))
    return op


def selected(name: str | None, patterns: Iterable[str]) -> bool:
    """`name` equals one of `patterns` or matches it as a glob (`opprof ... --op`)."""
    return name is not None and any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


def _op_name(name: object) -> str:
    """An exact op name asked of a profile (a trial's `profile.op(None)` raised TypeError from
    inside; `op("")` and `op("aten::mm.default")` returned None, which reads as "no such op",
    where `match` and the assertions refuse them)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    return validate_op(name, "name", 'an op name such as "aten::addmm"')


def validate_name(value: object, what: str, argument: str = "pattern", example: str = "") -> str:
    """A range, memory op or kernel name or glob: a text that is not blank; OpprofUsageError
    naming `argument` otherwise (`example`: ` such as "triton_*"`)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    if not isinstance(value, str) or not value.strip():
        raise OpprofUsageError(bad_argument(argument, value, f"a {what} name or glob{example}"))
    return value


# The matrix products a workload reference replays, with how many tensor inputs each takes; the
# types it replays them in; the most elements their inputs may hold (64 MiB of float32).
WORKLOAD_OPS = {"aten::addmm": 3, "aten::mm": 2, "aten::bmm": 2}
WORKLOAD_DTYPES = {"float": "float32", "double": "float64", "c10::BFloat16": "bfloat16", "c10::Half": "float16"}
WORKLOAD_ELEMENTS = 16 << 20


def workload_problem(op: Any, shapes: Any, dtypes: Any, where: str = "") -> str | None:
    """What makes these not a product a workload reference replays (None: they are one). Shared
    by the capture's choice, a baseline's reader and a trace header's; `where` prefixes the
    fields' names (`workload_reference.`)."""
    if op not in WORKLOAD_OPS:
        return f"'{where}op' is {op!r}, not one of {', '.join(WORKLOAD_OPS)}"
    n = WORKLOAD_OPS[op]
    if not isinstance(shapes, (list, tuple)) or len(shapes) != n or not all(_dims_ok(s) for s in shapes):
        return f"'{where}shapes' is {shown_value(shapes)}, not {n} shapes of whole numbers >= 0 for {op}"
    if not isinstance(dtypes, (list, tuple)) or len(dtypes) != n or not all(t in WORKLOAD_DTYPES for t in dtypes):
        return f"'{where}dtypes' is {shown_value(dtypes)}, not {n} of {', '.join(WORKLOAD_DTYPES)}"
    a, b = shapes[n - 2], shapes[n - 1]
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return f"'{where}shapes' is {shown_value(shapes)}: {list(a)} by {list(b)} is not a matrix product"
    if sum(math.prod(s) for s in shapes) > WORKLOAD_ELEMENTS:
        return f"'{where}shapes' is {shown_value(shapes)}: over {WORKLOAD_ELEMENTS:,} elements, more than a reference replays"
    return None


def _dims_ok(shape: Any) -> bool:
    return isinstance(shape, (list, tuple)) and all(type(d) is int and d >= 0 for d in shape)


@dataclass(frozen=True, slots=True)
class WorkloadReference:
    """The test's own costliest matrix product (aten::addmm, mm or bmm), replayed alone on new
    tensors of its recorded shapes and types, best of 8, outside the profiler: a machine
    reference in the test's own shapes, stored with baselines like the matmul and dispatch ones."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    ns: int

    @property
    def inputs(self) -> str:
        """The inputs as text: `float[1024], float[64,256], float[256,1024]`."""
        return inputs_text(self.shapes, self.dtypes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`workload_reference`, as baselines store it)."""
        return {"op": self.op, "shapes": _lists(self.shapes), "dtypes": list(self.dtypes), "ms": ns_to_ms(self.ns)}


@dataclass(frozen=True, slots=True)
class OtherThread:
    """A Python thread besides the capturing one that ran during a live capture: torch.profiler
    records the ops of the thread that started it only, so any this one ran are missing.
    `cpu_ms`: the CPU time it used in the capture (None: started in it and gone by its end, or
    the kernel does not say); `count`: the threads of that name (one started in each step);
    `given_work`: it surely ran the capture's work (started in it, or given a pool's work item
    in it), not only used CPU: an absence assertion cannot hold then."""

    name: str
    cpu_ms: float | None = None
    count: int = 1
    given_work: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (an exported trace's header `other_threads`)."""
        return {"name": self.name, "cpu_ms": self.cpu_ms, "count": self.count, "given_work": self.given_work}


@dataclass(frozen=True, slots=True)
class KernelStats:
    """One kernel name launched by one op (op None: no launching op found)."""

    name: str
    op: str | None
    calls: int
    device_ns: int
    calls_per_step: Dist
    device_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`kernels[]`)."""
        return {
            "name": self.name,
            "op": self.op,
            "calls": self.calls,
            "device_ms": ns_to_ms(self.device_ns),
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "device_ms": self.device_per_step.to_dict(1e6),
            },
        }


@dataclass(frozen=True, slots=True)
class MemoryOpStats:
    """One memcpy/memset kind ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)")."""

    name: str
    calls: int
    device_ns: int
    bytes: int
    calls_per_step: Dist
    device_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`memory_ops[]`)."""
        return {
            "name": self.name,
            "calls": self.calls,
            "device_ms": ns_to_ms(self.device_ns),
            "bytes": self.bytes,
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "device_ms": self.device_per_step.to_dict(1e6),
            },
        }


@dataclass(frozen=True, slots=True)
class RuntimeStats:
    """One runtime/driver call name (cudaLaunchKernel, hipMemcpyAsync, ...)."""

    name: str
    calls: int
    cpu_ns: int
    calls_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`runtime[]`)."""
        return {
            "name": self.name,
            "calls": self.calls,
            "cpu_ms": ns_to_ms(self.cpu_ns),
            "per_step": {"calls": self.calls_per_step.to_dict()},
        }


@dataclass(frozen=True, slots=True)
class GraphLaunchStats:
    """CUDA/HIP graph replays (cudaGraphLaunch) made under one op: one row with the kernels of
    the replays under it. Their device time also rolls up to that op and its callers."""

    op: str | None  # the op enclosing the launch call; None outside every op
    launch: str  # cudaGraphLaunch, hipGraphLaunch
    calls: int
    kernels: int  # kernel records of all replays
    device_ns: int
    calls_per_step: Dist
    kernels_per_step: Dist
    device_per_step: Dist

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`graph_launches[]`)."""
        return {
            "op": self.op,
            "launch": self.launch,
            "calls": self.calls,
            "kernels": self.kernels,
            "device_ms": ns_to_ms(self.device_ns),
            "per_step": {
                "calls": self.calls_per_step.to_dict(),
                "kernels": self.kernels_per_step.to_dict(),
                "device_ms": self.device_per_step.to_dict(1e6),
            },
        }


@dataclass(frozen=True, slots=True)
class RegionCall:
    """One run of a torch.compile'd frame ("Torch-Compiled Region: <frame>/<compile>")."""

    step: int  # the ProfilerStep number it ran in; -1 outside every step
    frame: int  # Dynamo's process-wide frame counter: depends on test order, never in a name
    compile: int  # 0 for the first compilation of the frame, N for its N-th recompilation
    graphs: tuple[str, ...]  # the FX graphs it called (Inductor's hashes)
    nested: bool  # ran inside another region: a graph break resumed the frame in a new one
    cpu_ns: int
    inside: str | None = None  # the compile id of the region it ran inside (when nested)

    @property
    def compile_id(self) -> str:
        """`<frame>/<compile>`, as torch names it."""
        return f"{self.frame}/{self.compile}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`compiled.regions[]`)."""
        return {
            "step": self.step,
            "frame": self.frame,
            "compile": self.compile,
            "graphs": list(self.graphs),
            "nested": self.nested,
            "inside": self.inside,
            "cpu_ms": ns_to_ms(self.cpu_ns),
        }


@dataclass(frozen=True, slots=True)
class Compilation:
    """A Dynamo compilation inside the capture (its ops are left out of the op table)."""

    step: int  # the ProfilerStep number; -1 outside every step
    compile_id: str  # "<frame>/<compile>", "?" when torch did not name it
    dur_ns: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`compiled.compilations[]`)."""
        return {"step": self.step, "compile_id": self.compile_id, "ms": ns_to_ms(self.dur_ns)}


@dataclass(frozen=True, slots=True)
class EagerOp:
    """An op that ran in the steps outside compiled code (outermost such op only)."""

    name: str
    calls: int
    cpu_ns: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`compiled.eager[]`)."""
        return {"name": self.name, "calls": self.calls, "cpu_ms": ns_to_ms(self.cpu_ns)}


@dataclass(frozen=True, slots=True)
class Compiled:
    """What torch.compile did in a capture: the regions that ran, compilations inside it, and
    the work in the steps that ran eagerly, outside compiled code."""

    regions: tuple[RegionCall, ...]
    compilations: tuple[Compilation, ...]
    eager: tuple[EagerOp, ...]  # most CPU time first
    compiled_cpu_ns: int  # CPU time at the top of compiled code (FX graph calls, ...) in the steps
    eager_cpu_ns: int  # CPU time of the eager ops above

    @property
    def eager_share(self) -> float:
        """The eager ops' share of the work in the steps: their CPU time against that of the
        compiled code at its top (Dynamo's own steps, the Python between, left out: a trial read
        it as a share of the steps' CPU time, which it was called)."""
        total = self.compiled_cpu_ns + self.eager_cpu_ns
        return self.eager_cpu_ns / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`compiled`)."""
        return {
            "regions": [r.to_dict() for r in self.regions],
            "compilations": [c.to_dict() for c in self.compilations],
            "eager": [e.to_dict() for e in self.eager],
            "compiled_cpu_ms": ns_to_ms(self.compiled_cpu_ns),
            "eager_cpu_ms": ns_to_ms(self.eager_cpu_ns),
        }


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel name as the kernel assertions see it: a device kernel (summed over the ops
    that launched it) or an Inductor CPU kernel (cpp_fused_*, timed on the CPU)."""

    name: str
    on_device: bool
    calls_per_step: Dist
    time_per_step: Dist


@dataclass(frozen=True, slots=True)
class TimelineFigures:
    """How the device spent a capture or one step (integer ns; queue in ns as floats)."""

    span_ns: int  # first device start to last device end
    busy_ns: int  # union of every device interval
    compute_ns: int  # union of kernels that are not communication
    comm_ns: int  # union of communication kernels (names with nccl or rccl)
    memory_ns: int  # union of memcpy and memset
    compute_comm_overlap_ns: int
    compute_memory_overlap_ns: int
    queue: tuple[float, float, int] | None  # kernel start - its launch call's start: median, p90, max

    @property
    def idle_ns(self) -> int:
        """span_ns - busy_ns."""
        return self.span_ns - self.busy_ns

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, in milliseconds."""
        return {
            "span_ms": ns_to_ms(self.span_ns),
            "busy_ms": ns_to_ms(self.busy_ns),
            "idle_ms": ns_to_ms(self.idle_ns),
            "compute_ms": ns_to_ms(self.compute_ns),
            "comm_ms": ns_to_ms(self.comm_ns),
            "memory_ms": ns_to_ms(self.memory_ns),
            "compute_comm_overlap_ms": ns_to_ms(self.compute_comm_overlap_ns),
            "compute_memory_overlap_ms": ns_to_ms(self.compute_memory_overlap_ns),
            "queue_ms": (
                # median and p90 may fall between two ns values: rounded to the ps, no float noise
                {
                    "median": round(self.queue[0] / 1e6, 9),
                    "p90": round(self.queue[1] / 1e6, 9),
                    "max": ns_to_ms(self.queue[2]),
                }
                if self.queue
                else None
            ),
        }


@dataclass(frozen=True, slots=True)
class StreamStats:
    device: int
    stream: int
    busy_ns: int
    kernels: int
    memory_ops: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`timeline.streams[]`)."""
        return {
            "device": self.device,
            "stream": self.stream,
            "busy_ms": ns_to_ms(self.busy_ns),
            "kernels": self.kernels,
            "memory_ops": self.memory_ops,
        }


@dataclass(frozen=True, slots=True)
class LaunchBound:
    """An op whose kernels (median) are shorter than the calls that launch them (median)."""

    op: str
    kernels: int
    kernel_ns: float
    launch_ns: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`timeline.launch_bound[]`)."""
        return {
            "op": self.op,
            "kernels": self.kernels,
            "kernel_ms": self.kernel_ns / 1e6,
            "launch_ms": self.launch_ns / 1e6,
        }


@dataclass(frozen=True, slots=True)
class Timeline:
    """The device's timeline over the capture: figures for the whole and per step, streams,
    the device idle while the host ran ops, and launch-bound ops."""

    total: TimelineFigures
    streams: tuple[StreamStats, ...]
    per_step: tuple[TimelineFigures, ...]
    host_bound_ns: int  # in the steps: host running ops while no device worked
    host_bound_share: float | None  # of the steps' wall time; None without device events
    launch_bound: tuple[LaunchBound, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`timeline`): the capture's figures, streams, per step, host- and launch-bound."""
        return {
            **self.total.to_dict(),
            "streams": [s.to_dict() for s in self.streams],
            "per_step": [f.to_dict() for f in self.per_step],
            "host_bound_ms": ns_to_ms(self.host_bound_ns),
            "host_bound_pct": round(self.host_bound_share * 100, 2) if self.host_bound_share is not None else None,
            "launch_bound": [b.to_dict() for b in self.launch_bound],
        }


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one trust check on a measurement."""

    name: str
    status: str  # ok | warning | error
    message: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form: name, status, message."""
        return {"name": self.name, "status": self.status, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Check:
        """The inverse of to_dict."""
        return cls(data["name"], data["status"], data["message"])


@dataclass(frozen=True, slots=True)
class StepSpan:
    number: int  # N of ProfilerStep#N; 0 for a source without step markers
    start_ns: int
    end_ns: int

    @property
    def wall_ns(self) -> int:
        """The step's wall time."""
        return self.end_ns - self.start_ns


MAX_THREADS = 1 << 16  # a thread count read from a file beyond this is not one


@dataclass(frozen=True)
class Profile:
    """The analysed measurement: what `opprof.profile`, `measure()` and `load_trace()` return."""

    source: str
    step_spans: tuple[StepSpan, ...]
    wall_known: bool  # False for a trace without step markers: its span is not a wall time
    ops: tuple[OpStats, ...]
    kernels: tuple[KernelStats, ...]
    memory_ops: tuple[MemoryOpStats, ...]
    runtime: tuple[RuntimeStats, ...]
    device_ns: int
    device_busy_ns: int
    unattributed_device_ns: int
    outside_step_ops: int
    checks: tuple[Check, ...]
    metadata: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    event_table: EventTable | None = field(default=None, repr=False, compare=False)
    # Best time of a fixed CPU workload around a live capture (machine speed); None for traces.
    reference_ns: int | None = field(default=None, compare=False)
    # Best time of 100 one-element ops around it (dispatch speed: a core shared with another tenant).
    dispatch_reference_ns: int | None = field(default=None, compare=False)
    # Best time of 20 small products around it (a spell that slows small products alone).
    small_reference_ns: int | None = field(default=None, compare=False)
    # Steps the ops' work (input signatures, FLOPs) was recorded over: 0 when not recorded.
    work_steps: int = field(default=0, compare=False)
    # Op names and parent indices of the analysed ops, for naming an op's callers in messages.
    op_tree: tuple[list[str], list[int]] = field(default=((), ()), repr=False, compare=False)  # type: ignore[assignment]
    # torch.compile: regions, compilations and eager work; None when nothing compiled ran.
    compiled: Compiled | None = None
    graph_launches: tuple[GraphLaunchStats, ...] = ()
    timeline: Timeline | None = field(default=None, compare=False)
    # run(): best profiled step wall time / best unprofiled one (the observer effect); None otherwise
    overhead: float | None = field(default=None, compare=False)
    # The fewest torch intra-op threads a live capture ran on (capture.ThreadWatch); None for a
    # trace unless we exported it
    threads: int | None = field(default=None, compare=False)
    # The ops' work holds the shapes of lists of tensors (torch.cat's inputs, up to LIST_LIMIT
    # tensors): a trace's Input Dims and torch 2.13's live captures do; `[]` otherwise
    list_shapes: bool = field(default=False, compare=False)
    ranges: tuple[RangeStats, ...] = ()  # record_function blocks and other annotations, by name
    # run() on CPU: the test's costliest matrix product replayed alone (a machine reference)
    workload_reference: WorkloadReference | None = field(default=None, compare=False)
    # Per step: its wall time outside the top-level ops of the thread that marks it (the Python
    # between the ops); None without step markers, or with steps marked on several threads
    outside_ops_ns: tuple[int, ...] | None = None
    # The test's exception ended the capture inside its last step (a partial step, whose
    # differences from the others are not compared); a trace exported so says it in its header
    cut_in_step: bool = field(default=False, compare=False)
    # Read with the stray-step rule (analyze's `stray_step`: a user's profiler or its trace, whose
    # last empty step is no step); a trace exported so says it, and reads back with the same steps
    stray_step: bool = field(default=False, compare=False)
    # Kernel launches with no kernel record (the kernel_records warning): the tracer dropped them
    kernels_dropped: int = field(default=0, compare=False)
    # Per op (each op enclosing such a launch, as device time rolls up), those launches in each
    # step: the op's device time in those steps is short, and its kernel counts low
    records_lost: tuple[tuple[str, tuple[int, ...]], ...] = field(default=(), compare=False)
    # Python threads besides the capturing one that ran during a live capture (their ops are not
    # recorded: the `other_threads` warning); a trace exported so says it in its header
    other_threads: tuple[OtherThread, ...] = field(default=(), compare=False)

    @property
    def traced_cut_short(self) -> bool:
        """Whether the trace this profile was read from says the test's exception cut its capture
        short (the header's `cut_short`, which export_chrome_trace writes)."""
        header = self.metadata.get("opprof")
        return isinstance(header, dict) and header.get("cut_short") is True

    def with_work(self, work: dict[str, OpWork], steps: int, list_shapes: bool) -> Profile:
        """This profile with its ops' work taken from `work` (recorded over `steps` other steps:
        the untimed signature step of a run, or an exported trace's header)."""
        ops = tuple(replace(op, work=work.get(op.name)) for op in self.ops)
        return replace(self, ops=ops, work_steps=steps, list_shapes=list_shapes)

    def only(self, patterns: Iterable[str]) -> Profile:
        """This profile with only the ops, kernels, memory ops, ranges and runtime calls whose
        name matches one of `patterns` (exact or glob), plus the kernels and graph replays a
        matched op launched, or an op that ran only inside matched ones. Totals, timeline and
        checks stay those of the whole measurement."""
        names = (x.name for rows in (self.ops, self.kernels, self.memory_ops, self.runtime, self.ranges) for x in rows)
        patterns = as_written((printable_name(p) for p in patterns), names)
        ops = tuple(op for op in self.ops if selected(op.name, patterns))
        kept = {op.name for op in ops}
        kept |= self._ran_inside(kept)  # conv2d's kernels are launched by the cudnn_convolution in it
        return replace(
            self,
            ops=ops,
            kernels=tuple(k for k in self.kernels if k.op in kept or selected(k.name, patterns)),
            memory_ops=tuple(m for m in self.memory_ops if selected(m.name, patterns)),
            runtime=tuple(r for r in self.runtime if selected(r.name, patterns)),
            ranges=tuple(r for r in self.ranges if selected(r.name, patterns)),
            graph_launches=tuple(g for g in self.graph_launches if g.op in kept),
        )

    def _ran_inside(self, outer: set[str]) -> set[str]:
        """The names of ops that ran inside an op named in `outer` in every one of their calls:
        their kernel rows then hold no launch from outside it (aten::mm runs in linear and in
        backward: its kernels are not all linear's)."""
        names, parent = self.op_tree
        inside: set[str] = set()
        outside: set[str] = set()
        for i, name in enumerate(names):
            j = parent[i]
            while j >= 0 and names[j] not in outer:
                j = parent[j]
            (inside if j >= 0 else outside).add(name)
        return inside - outside

    def names(self) -> set[str]:
        """Every op, kernel, memory op, range and runtime call name (what `only` selects from)."""
        rows: Iterable[Any] = (*self.ops, *self.kernels, *self.memory_ops, *self.ranges, *self.runtime)
        return {row.name for row in rows}

    def callers(self, name: str, depth: int = 2) -> tuple[str, ...]:
        """The names of the ops that called the first `name` op, innermost first."""
        names, parent = self.op_tree
        try:
            i = names.index(name)
        except ValueError:
            _op_name(name)  # none such: a name the profiler never writes says so
            return ()
        found: list[str] = []
        while len(found) < depth and (i := parent[i]) >= 0:
            found.append(names[i])
        return tuple(found)

    @property
    def events(self) -> list[Event]:
        """The analysed events (built on demand: the analysis reads columns)."""
        return self.event_table.to_events() if self.event_table is not None else []

    # -- numbers -----------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        """The number of steps."""
        return len(self.step_spans)

    @property
    def median_wall_ns(self) -> float:
        """The median step wall time (the mean of the middle two for an even step count, as the
        JSON's `step_wall_ms.median`), 0 when unknown (a trace without step markers)."""
        walls = [s.wall_ns for s in self.step_spans] if self.wall_known else []
        return float(statistics.median(walls)) if walls else 0.0

    @property
    def compiled_in(self) -> tuple[int, ...]:
        """The steps torch.compile compiled in, by position (0: the first step)."""
        if self.compiled is None:
            return ()
        position = {span.number: i for i, span in enumerate(self.step_spans)}
        return tuple(sorted({position[c.step] for c in self.compiled.compilations if c.step in position}))

    @property
    def wall_ms(self) -> float | None:
        """Summed wall time of the steps; None for a trace without step markers."""
        if not self.wall_known:
            return None
        return ns_to_ms(sum(s.wall_ns for s in self.step_spans))

    @property
    def device_busy_ms(self) -> float:
        """Time any device was busy (per device, summed), in ms."""
        return ns_to_ms(self.device_busy_ns)

    @property
    def errors(self) -> list[Check]:
        """The trust checks that failed: the measurement cannot be trusted."""
        return [c for c in self.checks if c.status == ERROR]

    @property
    def warnings(self) -> list[Check]:
        """The trust checks that warn."""
        return [c for c in self.checks if c.status == WARNING]

    # -- lookup ------------------------------------------------------------------------------
    # A name or pattern asked for is read as the profile names things (printable_name): a
    # range named with a tab is found by that name, its escape too.
    def op(self, name: str) -> OpStats | None:
        """The op of exactly this name, or None."""
        shown = printable_name(name) if isinstance(name, str) else name
        for op in self.ops:
            if op.name == shown:
                return op
        _op_name(name)  # none such: a name the profiler never writes says so (one a trace holds is found)
        return None

    def match(self, pattern: str) -> list[OpStats]:
        """Ops whose name equals `pattern` or matches it as a glob ("aten::*mm")."""
        pattern = printable_name(validate_op(pattern))
        exact = self.op(pattern)
        if exact is not None:
            return [exact]
        return [op for op in self.ops if fnmatch.fnmatchcase(op.name, pattern)]

    def match_ranges(self, pattern: str) -> list[RangeStats]:
        """Ranges whose name equals `pattern` or matches it as a glob ("## forward*")."""
        pattern = printable_name(validate_name(pattern, "range"))
        return [r for r in self.ranges if r.name == pattern or fnmatch.fnmatchcase(r.name, pattern)]

    def match_memory_ops(self, pattern: str) -> list[MemoryOpStats]:
        """Memory ops whose name equals `pattern` or matches it as a glob ("Memcpy DtoH*")."""
        pattern = printable_name(validate_name(pattern, "memory op"))
        return [m for m in self.memory_ops if m.name == pattern or fnmatch.fnmatchcase(m.name, pattern)]

    def kernel_rows(self) -> list[KernelRow]:
        """Every kernel by name: device kernels (summed over their launching ops) and Inductor
        CPU kernels (ops named cpp_fused_*, whose time is CPU time)."""
        device: dict[str, list[KernelStats]] = {}
        for k in self.kernels:
            device.setdefault(k.name, []).append(k)
        rows = [
            KernelRow(name, True, Dist.summed(k.calls_per_step for k in ks), Dist.summed(k.device_per_step for k in ks))
            for name, ks in device.items()
        ]
        rows += [
            KernelRow(op.name, False, op.calls_per_step, op.cpu_per_step)
            for op in self.ops
            if INDUCTOR_CPU_KERNEL.match(op.name) and op.name not in device
        ]
        return rows

    def match_kernels(self, pattern: str) -> list[KernelRow]:
        """Kernels (device kernels and Inductor CPU kernels) whose name equals or glob-matches
        `pattern` (the name of a kernel that ran matches that kernel alone, its C++ pointers'
        `*` no wildcards: opnames.as_written); an Inductor CPU kernel's name as Inductor gives
        it (`graph_0_cpp_fused_gelu_0`) matches its stable name (`cpp_fused_gelu_0`)."""
        pattern = printable_name(validate_name(pattern, "kernel"))
        numbered = GRAPH_NUMBERED_KERNEL.match(pattern)
        pattern = numbered.group(1) if numbered else pattern
        rows = self.kernel_rows()
        (pattern,) = as_written((pattern,), (k.name for k in rows))  # a name that ran: its pointers no wildcards
        return [k for k in rows if k.name == pattern or fnmatch.fnmatchcase(k.name, pattern)]

    # -- output ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (also what `opprof analyze --json` prints)."""
        return {
            "schema": SCHEMA,
            "source": self.source,
            "steps": self.steps,
            "wall_ms": self.wall_ms,
            "step_wall_ms": Dist(tuple(s.wall_ns for s in self.step_spans)).to_dict(1e6) if self.wall_known else None,
            "outside_ops_ms": Dist(self.outside_ops_ns).to_dict(1e6) if self.outside_ops_ns is not None else None,
            "ops": [o.to_dict() for o in self.ops],
            "kernels": [k.to_dict() for k in self.kernels],
            "memory_ops": [m.to_dict() for m in self.memory_ops],
            "ranges": [r.to_dict() for r in self.ranges],
            "runtime": [r.to_dict() for r in self.runtime],
            "device_ms": ns_to_ms(self.device_ns),
            "device_busy_ms": ns_to_ms(self.device_busy_ns),
            "unattributed_device_ms": ns_to_ms(self.unattributed_device_ns),
            "outside_step_ops": self.outside_step_ops,
            "reference_ms": ns_to_ms(self.reference_ns) if self.reference_ns else None,
            "dispatch_reference_ms": ns_to_ms(self.dispatch_reference_ns) if self.dispatch_reference_ns else None,
            "small_reference_ms": ns_to_ms(self.small_reference_ns) if self.small_reference_ns else None,
            "workload_reference": self.workload_reference.to_dict() if self.workload_reference else None,
            "work_steps": self.work_steps,
            "times_include_inputs": self.times_include_inputs,
            "compiled": self.compiled.to_dict() if self.compiled else None,
            "graph_launches": [g.to_dict() for g in self.graph_launches],
            "timeline": self.timeline.to_dict() if self.timeline else None,
            "overhead": self.overhead,
            "threads": self.threads,
            "checks": [c.to_dict() for c in self.checks],
        }

    @property
    def recorded_nothing(self) -> bool:
        """No op, kernel, memory op or range: the capture recorded no event at all."""
        return not (self.ops or self.kernels or self.memory_ops or self.ranges)

    @property
    def times_include_inputs(self) -> bool:
        """Whether the timed steps recorded the ops' inputs too (record_shapes: a one-step capture,
        a user's profiler so made), so their times hold that cost; measure()/run() record them in
        a step apart."""
        return self.event_table is not None and self.event_table.has_shapes

    def table(self, top: int | None = 20) -> str:
        """The ops, kernels, memory ops and checks as text tables; `top`: the N costliest rows of
        each table (None: all)."""
        if top is not None and (type(top) is not int or top < 1):
            raise OpprofUsageError(bad_argument("top", top, "a whole number of rows >= 1, or None for all"))
        return profile_tables(self, top=top)

    def _recorded_inputs(self) -> dict[str, dict[str, Any]]:
        """By op name, its RECORDED_INPUTS arg for the trace: the input signatures it had in the
        step that recorded them (a run()'s untimed signature step: its timed steps record none,
        and a diagnosis trial's Perfetto showed no op's inputs), the most frequent first, with
        their calls in that step."""
        if not self.work_steps:
            return {}
        found = {}
        for op in self.ops:
            if op.work is None or not op.work.signatures:
                continue
            shown = [
                f"{sig.text} (x{count_text(sum(sig.calls_per_step.samples) / self.work_steps)})"
                for sig in op.work.signatures[:3]
            ]
            more = len(op.work.signatures) - len(shown)
            found[op.name] = {RECORDED_INPUTS: "; ".join(shown) + (f"; and {more} more" if more > 0 else "")}
        return found

    def export_chrome_trace(
        self,
        path: str | os.PathLike[str],
        device_key: str | None = None,
        environment: dict[str, Any] | None = None,
        cpu_wait: float | None = None,
        nodeid: str | None = None,
        outcome: str | None = None,
        cut_short: bool = False,
    ) -> None:
        """Write the captured events as a Chrome/Perfetto trace (.json or .json.gz); `device_key`
        and `environment` (the plugin's: torch, CPU, GPU) go into its header, so `opprof compare`
        names the trace's machine; `cpu_wait`, the share of the capture the threads waited for a
        CPU (the plugin's), so a reader of the trace knows other load was seen; `nodeid` and
        `outcome`, the test it is of and how it ended (the file name cuts a long id); `cut_short`,
        whether the test's exception ended the capture (its last step partial: never compared)."""
        opprof = {
            "device_key": device_key,
            "environment": dict(environment) if environment else None,
            "cpu_wait": cpu_wait,
            "nodeid": nodeid,
            "outcome": outcome,
            "cut_short": cut_short,
            "cut_in_step": self.cut_in_step,
            "stray_step": self.stray_step,
            "other_threads": [t.to_dict() for t in self.other_threads],
            "source": self.source,
            "reference_ns": self.reference_ns,
            "dispatch_reference_ns": self.dispatch_reference_ns,
            "small_reference_ns": self.small_reference_ns,
            "overhead": self.overhead,
            "threads": self.threads,
            "list_shapes": self.list_shapes,
            "workload_reference": (
                {**self.workload_reference.to_dict(), "ns": self.workload_reference.ns}
                if self.workload_reference
                else None
            ),
            # The work of a run() comes from its untimed signature step, not from these events.
            "work_steps": self.work_steps,
            "work": {op.name: op.work.to_json() for op in self.ops if op.work is not None},
        }
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise TraceError(not_a_path("export_chrome_trace()", path))
        if os.path.isdir(path):
            raise TraceWriteError(path, "a folder")
        try:
            ends = self.event_table.end_threads if self.event_table is not None else None
            write_trace(
                path,
                self.events,
                {"schemaVersion": 1, "opprof": opprof},
                relative=True,
                end_threads=ends,
                op_args=self._recorded_inputs(),
            )
        except OSError as exc:  # the temporary file's name would only confuse: name the path asked for
            raise TraceWriteError(path, exc.strerror or str(exc)) from None


# --------------------------------------------------------------------------------------------
# the analysis
