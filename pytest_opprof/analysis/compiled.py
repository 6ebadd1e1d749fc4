"""torch.compile in a capture, as analysis stages: stable names, compilations set apart, and the
summary of regions, graph breaks and eager work that the compile gates read.

What torch 2.x emits (checked on 2.13, CPU Inductor and the shared A100 Triton trace):
`Torch-Compiled Region: <frame>/<compile>` wraps each run of a Dynamo frame (a graph break
resumes the frame in another region, nested inside the first); `## Call CompiledFxGraph <hash> ##`
spans a compiled graph's work; `dynamo` wraps a compilation (its `dynamo_data: compile_id=F/C`
annotation names it), with hundreds of compiler ops inside. The frame counter is process-wide
and the hash changes with any model edit, so both are kept as details, never in an op name.
Older torch (checked: 2.6, 2.7, 2.9) has no `dynamo` op and no CompiledFxGraph op (2.9 writes
it as an annotation): a compilation is the user annotation `_compile.compile_inner
(dynamo_timed)`, without a compile id.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..events import Event
from .model import GRAPH_NUMBERED_KERNEL, Compilation, Compiled, EagerOp, RegionCall

REGION = "Torch-Compiled Region"
FX_GRAPH = "CompiledFxGraph"
_REGION = re.compile(r"Torch-Compiled Region: (\d+)/(\d+)$")
_FX = re.compile(r"## Call CompiledFxGraph (\S+) ##$")
_PREFIXES = ("Torch-Compiled Region: ", "## Call CompiledFxGraph ", "graph_")

COMPILE_ROOT = "dynamo"
COMPILE_MARK = "dynamo_data: "
LEGACY_COMPILE_ROOT = "_compile.compile_inner (dynamo_timed)"  # torch < 2.11: an annotation
_COMPILE_ID = re.compile(r"compile_id=([^,\s]+)")
# Ops that are compiled code: everything under them ran as the compiled graph.
COMPILED_CODE = frozenset({FX_GRAPH, "CompiledFunction", "CompiledFunctionBackward"})
# Dynamo's and AOTAutograd's own steps around a compiled call: neither the model nor eager work.
MACHINERY = frozenset(
    {
        REGION,
        "TorchDynamo Cache Lookup",
        "Pregraph bytecode",
        "AOTDispatcher Runtime Wrapper Prologue",
        "AOTDispatcher Runtime Wrapper Epilogue",
    }
)


def is_graph_call(name: str) -> bool:
    """`## Call CompiledFxGraph <hash> ##`: a compiled graph's call. torch 2.13 writes it as an op,
    but as an annotation when the profiler records shapes (a single-step capture: a trial's
    `capture()` read it as a range), and torch 2.9 always as an annotation; it is read as an op."""
    return name.startswith(_PREFIXES[1]) and _FX.match(name) is not None


def stable_name(name: str) -> str:
    """`Torch-Compiled Region: 3/1` -> `Torch-Compiled Region`; `## Call CompiledFxGraph <hash> ##`
    -> `CompiledFxGraph`; `graph_2_cpp_fused_tanh_0` -> `cpp_fused_tanh_0`; any other name as it is."""
    if name.startswith(_PREFIXES[0]) and _REGION.match(name):
        return REGION
    if name.startswith(_PREFIXES[1]) and _FX.match(name):
        return FX_GRAPH
    if name.startswith(_PREFIXES[2]) and (kernel := GRAPH_NUMBERED_KERNEL.match(name)):
        return kernel.group(1)
    return name


@dataclass(frozen=True, slots=True)
class CompileSpan:
    pid: int
    tid: int
    start_ns: int
    end_ns: int
    compile_id: str


@dataclass(frozen=True, slots=True)
class CompileScan:
    """What the first stage found: whether compiled code ran or was compiled (the profile then
    gets a Compiled summary), and the compilations' spans."""

    present: bool
    spans: list[CompileSpan]


def scan_compilation(
    names: Sequence[str], starts: Sequence[int], durs: Sequence[int], pids: Sequence[int], tids: Sequence[int],
    marks: list[Event],
) -> tuple[CompileScan, list[bool] | None, list[str] | None]:  # fmt: skip
    """Stage: which ops to keep (None: all; compiler ops inside a compilation go) and the ops'
    stable names (None: unchanged). Costs one set() of the names when nothing was compiled.
    `marks`: the compile annotations (`dynamo_data: ...`, and older torch's compile root)."""
    distinct = set(names)
    renamed = {n: new for n in distinct if n.startswith(_PREFIXES) and (new := stable_name(n)) != n}
    legacy = [m for m in marks if m.name == LEGACY_COMPILE_ROOT]
    if not renamed and COMPILE_ROOT not in distinct and not legacy:
        return CompileScan(False, []), None, None
    spans = _compile_spans(names, starts, durs, pids, tids, marks) if COMPILE_ROOT in distinct else []
    spans = _outermost(spans + [CompileSpan(m.pid, m.tid, m.start_ns, m.start_ns + m.dur_ns, "?") for m in legacy])
    keep = outside_spans(spans, starts, durs, pids, tids) if spans else None
    new_names = [renamed.get(n, n) for n in names] if renamed else None
    return CompileScan(True, spans), keep, new_names


def _compile_spans(
    names: Sequence[str], starts: Sequence[int], durs: Sequence[int], pids: Sequence[int], tids: Sequence[int],
    marks: list[Event],
) -> list[CompileSpan]:  # fmt: skip
    spans = []
    for i, name in enumerate(names):
        if name == COMPILE_ROOT:
            start, end = starts[i], starts[i] + durs[i]
            ids = [
                found.group(1)
                for m in marks
                if m.pid == pids[i] and m.tid == tids[i] and start <= m.start_ns <= end
                if (found := _COMPILE_ID.search(m.name))
            ]
            spans.append(CompileSpan(pids[i], tids[i], start, end, ids[0] if ids else "?"))
    return spans


def _outermost(spans: list[CompileSpan]) -> list[CompileSpan]:
    spans.sort(key=lambda s: (s.pid, s.tid, s.start_ns, -s.end_ns))
    kept: list[CompileSpan] = []
    for s in spans:
        last = kept[-1] if kept else None
        if last and (last.pid, last.tid) == (s.pid, s.tid) and s.end_ns <= last.end_ns:
            continue  # a nested compilation (a frame compiled while compiling another)
        kept.append(s)
    return kept


def outside_spans(
    spans: list[CompileSpan], starts: Sequence[int], durs: Sequence[int], pids: Sequence[int], tids: Sequence[int]
) -> list[bool]:
    """Per event (columns), whether it lies outside every compilation on its thread."""
    by_thread: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for s in spans:  # sorted, non-overlapping per thread
        begins, ends = by_thread.setdefault((s.pid, s.tid), ([], []))
        begins.append(s.start_ns)
        ends.append(s.end_ns)
    keep = []
    for start, dur, pid, tid in zip(starts, durs, pids, tids):
        found = by_thread.get((pid, tid))
        if found is None:
            keep.append(True)
            continue
        k = bisect_right(found[0], start) - 1
        keep.append(not (k >= 0 and start + dur <= found[1][k]))
    return keep


@dataclass(frozen=True, slots=True)
class OpView:
    """The analysed ops as the summary reads them (after nesting and torch's counting rule)."""

    names: list[str]
    raw_names: list[str]  # as the source named them (region and graph ids inside)
    parent: list[int]
    op_step: list[int]  # step index, -1 outside every step
    durs: list[int]
    starts: list[int]


def summarize_compiled(
    ops: OpView, step_numbers: list[int], spans: list[CompileSpan], step_of: Callable[[int], int]
) -> Compiled:
    """Stage: the regions that ran (with their graphs and whether a graph break nested them),
    the compilations, and the outermost ops of the steps that ran outside compiled code."""
    regions = _regions(ops, step_numbers)
    compilations = tuple(
        Compilation(_number(step_of(s.start_ns), step_numbers), s.compile_id, s.end_ns - s.start_ns) for s in spans
    )
    eager, compiled_ns = _eager(ops, any(r.graphs for r in regions))
    eager_ops = tuple(sorted(eager, key=lambda e: (-e.cpu_ns, e.name)))
    return Compiled(regions, compilations, eager_ops, compiled_ns, sum(e.cpu_ns for e in eager_ops))


def _number(step: int, step_numbers: list[int]) -> int:
    return step_numbers[step] if step >= 0 else -1


def _regions(ops: OpView, step_numbers: list[int]) -> tuple[RegionCall, ...]:
    names, parent = ops.names, ops.parent

    def enclosing_region(i: int) -> int:
        j = parent[i]
        while j >= 0 and names[j] != REGION:
            j = parent[j]
        return j

    def compile_id(i: int) -> tuple[int, int]:
        found = _REGION.match(ops.raw_names[i])
        return (int(found.group(1)), int(found.group(2))) if found else (-1, -1)

    graphs: dict[int, list[str]] = {}
    for i, name in enumerate(names):
        if name == FX_GRAPH:
            found = _FX.match(ops.raw_names[i])
            graphs.setdefault(enclosing_region(i), []).append(found.group(1) if found else "?")
    regions = []
    # in start order, as they ran: a merged or hand-edited trace may list them otherwise
    for i in sorted((i for i, name in enumerate(names) if name == REGION), key=ops.starts.__getitem__):
        frame, compile_ = compile_id(i)
        outer = enclosing_region(i)
        inside = "{}/{}".format(*compile_id(outer)) if outer >= 0 else None
        step = _number(ops.op_step[i], step_numbers)
        regions.append(RegionCall(step, frame, compile_, tuple(graphs.get(i, ())), outer >= 0, ops.durs[i], inside))
    return tuple(regions)


def _eager(ops: OpView, has_graphs: bool) -> tuple[list[EagerOp], int]:
    """Outermost ops in the steps that are neither compiled code, nor Dynamo's or autograd's
    bookkeeping, nor a wrapper around compiled code (autograd's evaluate_function around
    CompiledFunctionBackward). Without Inductor's graph calls (another backend), a region's body
    is the compiled code."""
    names, parent = ops.names, ops.parent
    code = COMPILED_CODE if has_graphs else COMPILED_CODE | {REGION}
    inside, wrapper = _compiled_and_wrappers(names, parent, code, _bookkeeping(names))
    eager: dict[str, list[int]] = {}
    compiled_ns = 0
    for i, name in enumerate(names):
        if ops.op_step[i] < 0:
            continue
        p = parent[i]
        if name in code and not (p >= 0 and inside[p]):
            compiled_ns += ops.durs[i]
        elif not (inside[i] or wrapper[i] or name in MACHINERY) and (p < 0 or wrapper[p] or names[p] in MACHINERY):
            acc = eager.setdefault(name, [0, 0])
            acc[0] += 1
            acc[1] += ops.durs[i]
    return [EagerOp(name, calls, ns) for name, (calls, ns) in eager.items()], compiled_ns


# Autograd's own work around a compiled training step: accumulating the gradients of leaf
# tensors (any subtree), and the gradient seed of `loss.backward()` when a compiled backward ran.
_ACCUMULATE_GRAD = (
    "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
    "torch::autograd::AccumulateGrad",
)
_BACKWARD_SEED = "aten::ones_like"


def _bookkeeping(names: list[str]) -> frozenset[str]:
    found = set(_ACCUMULATE_GRAD)
    if "CompiledFunctionBackward" in names:
        found.add(_BACKWARD_SEED)
    return frozenset(found)


def _compiled_and_wrappers(
    names: list[str], parent: list[int], code: frozenset[str], bookkeeping: frozenset[str]
) -> tuple[list[bool], list[bool]]:
    """Per op: whether it ran inside compiled code (or autograd's bookkeeping: not eager
    either), and whether it wraps compiled code."""
    n = len(names)
    inside = [False] * n
    wrapper = [False] * n
    for i in _parents_first(parent):
        p = parent[i]
        inside[i] = names[i] in code or names[i] in bookkeeping or (p >= 0 and inside[p])
    for i in range(n):
        if names[i] in code:
            j = parent[i]
            while j >= 0 and not wrapper[j]:
                wrapper[j] = True
                j = parent[j]
    return inside, wrapper


def _parents_first(parent: list[int]) -> list[int]:
    """Op indices ordered so that every op comes after its parent."""
    depth = [0] * len(parent)
    for i in range(len(parent)):
        d, j = 0, parent[i]
        while j >= 0:
            d, j = d + 1, parent[j]
        depth[i] = d
    return sorted(range(len(parent)), key=depth.__getitem__)
