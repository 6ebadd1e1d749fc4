"""What torch knows of operator names: whether a name asserted on is one torch has, and the
names it registers, for a typo's closest match. Read from torch only when called (the caller
has torch imported); a leaf, so the report can ask without the capture layer."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any


def _torch() -> Any:
    import torch

    return torch


COLLECTIVE_PREFIX = "c10d::"  # torch.distributed's collectives (c10d::allreduce_), launched on a process group
# the range each collective's op runs in on gloo's own threads, as torch 2.13 names them (a
# reduce-scatter runs as an all-reduce; a sparse all-reduce has its own): the op's time is its launch
GLOO_RANGES = {
    "c10d::allreduce_": ("gloo:all_reduce", "gloo:sparse_all_reduce"),
    "c10d::allreduce_coalesced_": ("gloo:all_reduce",),
    "c10d::reduce_scatter_": ("gloo:all_reduce",),
    "c10d::_reduce_scatter_base_": ("gloo:all_reduce",),
    "c10d::broadcast_": ("gloo:broadcast",),
    "c10d::reduce_": ("gloo:reduce",),
    "c10d::allgather_": ("gloo:all_gather",),
    "c10d::_allgather_base_": ("gloo:all_gather",),
    "c10d::alltoall_": ("gloo:all_to_all",),
    "c10d::alltoall_base_": ("gloo:all_to_all",),
    "c10d::gather_": ("gloo:gather",),
    "c10d::scatter_": ("gloo:scatter",),
    "c10d::barrier": ("gloo:barrier",),
}


def gloo_ranges_of(op: str) -> tuple[str, ...]:
    """The gloo ranges the collective of the c10d op `op` can run in (`c10d::allreduce_` ->
    `gloo:all_reduce`, `gloo:sparse_all_reduce`); () for another op."""
    return GLOO_RANGES.get(op, ())


AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "  # the engine's event around a backward node
_NODE_NAME = re.compile(r"(\w+Backward)(\d*)")
_NODE_LIKE = re.compile(r"\w+Backwards?\d*")  # a backward node's name, or a slip of one (`ToCopyBackwards0`)
_NODE_ANY_CASE = re.compile(r"\w+backwards?\d*", re.IGNORECASE)


_KERNEL_INDEX = re.compile(r"((?:cpp|triton)_\w*fused\w*?_)(\d+)$")  # Inductor numbers a graph's kernels


def inductor_kernel_stem(name: str) -> str | None:
    """An Inductor kernel's name without its index in the graph (`cpp_fused_add_relu_1` ->
    `cpp_fused_add_relu_`), which a graph break elsewhere renumbers; None for another name."""
    m = _KERNEL_INDEX.search(name)
    return m.group(1) if m else None


_GLOB = re.compile(r"[*?]|\[.*\]")  # a `[` with no `]` after it is a literal character, as fnmatch reads it


def is_glob(pattern: str) -> bool:
    """Whether a name asked for is a glob (`aten::*mm`, `aten::[ab]mm`), not an exact name."""
    return bool(_GLOB.search(pattern))


# a C++ pointer in a kernel's name (`Array<char*, 3>`, `(float const*, int)`): no wildcard
_POINTER = re.compile(r"(?<=[\w>)])\*+(?=[\s,>)&])")


def is_kernel_glob(pattern: str) -> bool:
    """is_glob for a kernel's name, whose C++ pointers are no wildcards: an exact CUDA name
    (`...Array<char*, 1>)`) asserted absent is checked for typos (a trial's doubled letter in one
    passed forever, taken for a glob). A `*` after a name, `>` or `)` and before a space, `,`,
    `>`, `)` or `&` is a pointer's; any other is a wildcard."""
    return is_glob(_POINTER.sub("", pattern))


def as_written(patterns: Iterable[str], names: Iterable[str]) -> tuple[str, ...]:
    """Each pattern that is one of `names` exactly, as a glob matching that name alone: a CUDA
    kernel's C++ name holds `*` (its pointers) that would also match the names they span
    (`Array<char*, 1>` matched `Array<char**, 1>`). Any other pattern is a glob as before (a
    review: `...CUDAFunctor_*>...` is a user's wildcard, however it looks)."""
    known = set(names)
    return tuple(_literal(p) if p in known and is_glob(p) else p for p in patterns)


def _literal(name: str) -> str:
    """A glob that matches `name` alone (fnmatch has no escape character: each special in [])."""
    return re.sub(r"([*?\[])", r"[\1]", name)


_PYTHON_SPELLING = re.compile(r"(?:torch\.)?(?:ops\.)?(aten|prim)\.(\w+)(?:\.\w+)?")  # torch.ops.aten.mm.default
_CPP_SPELLING = re.compile(r"at::(\w+)(?:\.\w+)?")  # at::mm, ATen's C++ namespace


def profiler_spelling(name: str) -> str | None:
    """The profiler's name of an op written as Python or C++ spell it, which no profile holds:
    `torch.ops.aten._to_copy.default`, `ops.aten._to_copy`, `aten._to_copy`, `at::_to_copy` ->
    `aten::_to_copy` (FX and Inductor graph dumps print the first: a trial's assert_no_op of it
    passed beside two calls a step). None for any other name."""
    python = _PYTHON_SPELLING.fullmatch(name.strip())
    if python:
        return f"{python.group(1)}::{python.group(2)}"
    cpp = _CPP_SPELLING.fullmatch(name.strip())
    return f"aten::{cpp.group(1)}" if cpp else None


def is_known_op(name: str, ran: Iterable[str] = ()) -> bool:
    """Whether torch knows an operator of this exact name ("aten::copy_"), or an autograd node
    of it ("ToCopyBackward0", with or without the engine's prefix). A name in another namespace
    is checked only where an op of that namespace `ran` (the capture's op names): else it cannot
    be (a record_function label, a library not loaded yet): True. A glob: whether it matches
    such an op (_known_glob)."""
    if is_glob(name):
        return _known_glob(name, ran)
    node = name.removeprefix(AUTOGRAD_PREFIX)
    if _NODE_LIKE.fullmatch(node):
        return _known_node(node)
    if _NODE_ANY_CASE.fullmatch(node):  # `ToCopybackward0`: a node's name in other letters only
        return node.lower() not in _node_names_lowered()
    if profiler_spelling(name) is not None:
        return False
    namespace, sep, op = name.partition("::")
    if not sep and re.match(r"(aten|prim)[:.]", name):  # `aten:addmm`, `aten.addmm`: the separator mistyped
        return False
    if sep and namespace not in ("aten", "prim") and namespace.strip().lower() in ("aten", "prim"):
        return False  # `ATEN::addmm`, `aten ::addmm`: the namespace mistyped
    if not sep:
        return True
    if namespace not in ("aten", "prim"):
        return _known_in_namespace(namespace, op, ran)
    torch = _torch()
    packet = getattr(getattr(torch.ops, namespace), op.split(".")[0], None)
    return packet is not None


def _known_in_namespace(namespace: str, op: str, ran: Iterable[str]) -> bool:
    """Whether an op of another namespace is known: where an op of that namespace ran (its library
    is loaded), torch registers one of this name, overloads aside (`onednn::qadd` has only named
    ones). A namespace none of whose ops ran cannot be checked: True (torch fills some as modules
    load: `prims::fma` comes with Inductor, and a review's order of tests decided); nor one torch
    registers no op in (`torch::autograd::AccumulateGrad` is an event, not a registered op).
    A trial's `assert_no_op("quantized::linear_dynamc")` passed beside the op it meant."""
    known = _checkable(namespace, ran)
    if not known:
        return not _namespace_slip(namespace, op.split(".")[0], ran)
    return op.split(".")[0] in known


def _namespace_slip(namespace: str, op: str, ran: Iterable[str]) -> bool:
    """Whether `namespace` is a slip for one where `op` exists: torch registers nothing in it, and
    it is a letter from a namespace whose `op` ran (not a digit: `mylib2` beside `mylib3`, versions
    of a library that share op names), or a letter left out of or added to aten's or prim's where
    torch has it (not one changed: `attn::softmax` is a label's). A trial's `assert_no_op("mylb::myop")`
    passed beside the mylib::myop that ran, and `atn::sin` beside aten::sin."""
    ran = list(ran)
    others = {name.partition("::")[0] for name in ran if name.partition("::")[2].split(".")[0] == op}
    others -= {namespace, "aten", "prim"}  # (theirs: a letter left out or added only, below)
    near = [other for other in others if _edits(namespace, other, 1) == 1 and not _digits_differ(namespace, other)]
    near += [ns for ns in ("aten", "prim") if _one_letter_more(namespace, ns) and op in _registered(ns)]
    return bool(near) and not _registered(namespace)


def _digits_differ(a: str, b: str) -> bool:
    """Whether two names differ in their digits (`fa2`, `fa3`): versions, not a slip."""
    return [c for c in a if c.isdigit()] != [c for c in b if c.isdigit()]


def _one_letter_more(a: str, b: str) -> bool:
    """Whether one name is the other with one letter added (`atn`, `aten`; `atenn`)."""
    short, long = sorted((a, b), key=len)
    return len(long) == len(short) + 1 and any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _edits(a: str, b: str, most: int) -> int:
    """The edit distance of two short names (insertions, deletions, substitutions), or `most + 1`
    where it is over `most`."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return min(row[-1], most + 1)


def _checkable(namespace: str, ran: Iterable[str]) -> set[str]:
    """The ops a name in `namespace` is checked against: those torch registers there, for aten and
    prim always, for another namespace where an op of it `ran`; empty where it cannot be checked."""
    if namespace not in ("aten", "prim") and not any(name.startswith(f"{namespace}::") for name in ran):
        return set()
    return _registered(namespace)


def _registered(namespace: str) -> set[str]:
    """The ops torch registers in a namespace, bare and overloads folded: the dispatcher's and
    TorchScript's schemas (`prim::` ops are only there, and aten's `Int`); empty where it
    registers none there, or cannot say."""
    torch_c = _torch()._C
    prefix = f"{namespace}::"
    names = [*getattr(torch_c, "_dispatch_get_all_op_names", list)()]
    names += [schema.name for schema in getattr(torch_c, "_jit_get_all_schemas", list)()]
    return {name[len(prefix) :].split(".")[0] for name in names if name.startswith(prefix)}


def _known_glob(pattern: str, ran: Iterable[str]) -> bool:
    """Whether a glob with its namespace written out matches an op torch registers there (or one
    that `ran`): a contract trial's `assert_no_op("aten::copyy*")` passed forever, matching
    nothing. A glob without a namespace, or with a glob in it, may mean a kernel, a copy, a range
    or a backward node (`*copy*`, `Memcpy DtoH*`, `*Backward0`): True. Another namespace is
    checked where an op of it ran and torch registers ops in it, as _known_in_namespace says
    (`autograd::engine::evaluate_function: ToCopyBackward*` is an event's name: a review's was
    refused beside a backward pass). Case counts, as names match (fnmatchcase)."""
    namespace, sep, _ = pattern.partition("::")
    if not sep or is_glob(namespace):
        return True
    if namespace not in ("aten", "prim") and namespace.strip().lower() in ("aten", "prim"):
        return False  # `ATEN::*mm`: the namespace mistyped
    ran = list(ran)
    known = _checkable(namespace, ran)
    if not known:
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for name in [*(f"{namespace}::{op}" for op in known), *ran])


def _known_node(name: str) -> bool:
    """Whether a backward node name is torch's, or a custom autograd.Function's (`MyFnBackward`),
    where a typo would pass assert_no_op forever. torch registers each of its nodes (numbered,
    `ToCopyBackward0`, and its few unnumbered ones, `CopyBackwards`), so a numbered or `...Backwards`
    name it lacks is a slip (`AddmBackward0`, `ToCopyBackwards0`: a training trial's passed); so
    is an unnumbered one beside its numbered node (`ToCopyBackward`), or one that differs from a
    node by letter case only (`TocopyBackward0`). Any other `...Backward` may be the node of a
    Function not defined yet: True."""
    torch = _torch()
    functions = getattr(torch._C, "_functions", None)
    custom = _custom_nodes(torch)
    if functions is None or hasattr(functions, name) or name in custom:
        return True
    node = _NODE_NAME.fullmatch(name)
    if node is None or node.group(2):
        return False
    if name.lower() in _node_names_lowered():
        return False
    return not any(hasattr(functions, f"{node.group(1)}{n}") for n in range(4))


def _node_names_lowered() -> set[str]:
    """torch's backward nodes and the custom Functions' defined so far, in lower case."""
    torch = _torch()
    registered = dir(getattr(torch._C, "_functions", None))
    return {n.lower() for n in [*registered, *_custom_nodes(torch)] if _NODE_ANY_CASE.fullmatch(n)}


def _custom_nodes(torch: Any) -> set[str]:
    """The backward nodes of the autograd.Functions defined so far (`class Exp(Function)` runs
    as `ExpBackward`, beside torch's own `ExpBackward0`): never a typo."""
    base = getattr(getattr(torch.autograd, "function", None), "BackwardCFunction", None)
    found: set[str] = set()
    pending = list(base.__subclasses__()) if base is not None else []
    while pending:
        node = pending.pop()
        found.add(node.__name__)
        pending.extend(node.__subclasses__())
    return found


def known_op_names() -> list[str]:
    """The aten/prim operator names torch registers (overloads folded: `aten::add`) and its
    backward nodes (`ToCopyBackward0`): what a name is_known_op refuses may have meant."""
    torch = _torch()
    registered: list[str] = getattr(torch._C, "_dispatch_get_all_op_names", list)()
    names = {n.split(".")[0] for n in registered if n.startswith(("aten::", "prim::"))}
    names |= {n for n in dir(getattr(torch._C, "_functions", None)) if _NODE_LIKE.fullmatch(n)}
    return sorted(names | _custom_nodes(torch))
