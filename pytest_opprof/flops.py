"""An op's FLOPs from its recorded inputs, as torch.profiler's `with_flops` counts them.

opprof's one-step captures (the whole test call, `with opprof.capture():`) record the ops' inputs
without torch's `with_flops`: torch computes those FLOPs while the op runs, reading its inputs'
sizes, and on the fake tensors torch.export and torch.compile trace with that read fixes a dynamic
dimension to the size it has (a trial's export with `Dim("b")` failed only under --opprof:
`Constraints violated (b)!`; a model compiled with dynamic shapes compiled a graph per input size).
The counts here are torch's own rule, the same numbers for the same inputs (tests/test_flops.py
checks them against torch's), from what record_shapes keeps: each input's shape, its type name
and, for a scalar or a list, its value. Pure: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# The type names record_shapes gives an input that is no tensor (or a nested one: ""); torch
# counts no FLOPs for an op whose counted input is one.
_NOT_A_TENSOR = frozenset({"", "Scalar", "ScalarList", "GenericList", "TensorList", "None"})

# The ops torch counts, and the inputs that must be tensors for it to count them.
_TENSOR_INPUTS = {
    "aten::mm": (0, 1),
    "aten::addmm": (0, 1, 2),
    "aten::bmm": (0, 1),
    "aten::baddbmm": (0, 1, 2),
    "aten::conv2d": (0, 1),
    "aten::mul": (0,),
    "aten::add": (0,),
}
_CONV2D_INPUTS = 7  # input, weight, bias, stride, padding, dilation, groups

COUNTED_OPS = frozenset(_TENSOR_INPUTS)


def torch_flops(name: str, shapes: Sequence[Any], types: Sequence[str], values: Sequence[Any] = ()) -> int:
    """The FLOPs torch's profiler gives one call of op `name` with these inputs (0 for an op it does
    not count, or inputs it cannot count: a nested tensor, a conv2d padding given as a string).
    `values`: the inputs' recorded values (torch's concrete inputs), read for conv2d only. As torch's
    unsigned 64-bit count: a conv2d whose output would be empty (a call that raises, in a test of
    that error) wraps as torch's does, not negative (a review's failed the document's check)."""
    return _counted(name, shapes, types, values) % _UINT64


_UINT64 = 1 << 64


def _counted(name: str, shapes: Sequence[Any], types: Sequence[str], values: Sequence[Any]) -> int:
    indexes = _TENSOR_INPUTS.get(name)
    if indexes is None or len(shapes) < max(indexes) + 1 or len(types) < len(shapes):
        return 0
    if any(types[i] in _NOT_A_TENSOR for i in indexes):
        return 0
    sizes = [tuple(shapes[i]) for i in indexes]
    if not all(isinstance(d, int) for size in sizes for d in size):  # a list's shapes: no tensor's size
        return 0
    if name in ("aten::mul", "aten::add"):
        return math.prod(sizes[0])  # the first input's elements, whatever the other broadcasts to
    if name == "aten::conv2d":
        return _conv2d(sizes[0], sizes[1], values) if len(shapes) >= _CONV2D_INPUTS else 0
    first, second = (sizes[1], sizes[2]) if name in ("aten::addmm", "aten::baddbmm") else (sizes[0], sizes[1])
    return _matmul(first, second, batched=name in ("aten::bmm", "aten::baddbmm"))


def _matmul(first: tuple[int, ...], second: tuple[int, ...], batched: bool) -> int:
    """2 x the products of a (batched) matrix product: the first's elements over its last (and, batched,
    its first) dimension, times the second's elements."""
    if not first or not first[-1] or (batched and not first[0]):
        return 0
    flops = math.prod(first) // first[-1]
    if batched:
        flops //= first[0]
    return 2 * flops * math.prod(second)


def _conv2d(image: tuple[int, ...], kernel: tuple[int, ...], values: Sequence[Any]) -> int:
    """2 x the products of a 2-D convolution from its input's and kernel's sizes, its stride,
    padding, dilation and groups; 0 where any of them is not as torch counts it."""
    if len(values) < _CONV2D_INPUTS or len(image) != 4 or len(kernel) != 4:
        return 0
    stride, padding, dilation, groups = values[3:_CONV2D_INPUTS]
    if not (_pair(stride) and _pair(padding) and _pair(dilation)) or not _whole(groups) or not groups:
        return 0
    if stride[0] * stride[1] == 0:
        return 0
    batch, channels, height, width = image
    out_channels, _, kernel_h, kernel_w = kernel
    out_h = _divided(height + 2 * padding[0] - dilation[0] * (kernel_h - 1) - 1, stride[0]) + 1
    out_w = _divided(width + 2 * padding[1] - dilation[1] * (kernel_w - 1) - 1, stride[1]) + 1
    # unsigned 64-bit, as torch's: the product wraps before the division by the groups
    return (2 * batch * out_h * out_w * kernel_h * kernel_w * channels * out_channels) % _UINT64 // groups


def _pair(value: Any) -> bool:
    """Two whole numbers, as a conv2d's stride, padding and dilation are recorded."""
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(_whole(v) for v in value)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _divided(numerator: int, denominator: int) -> int:
    """Integer division that rounds toward zero, as C++'s of int64 does (torch's count is then made
    unsigned: torch_flops)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator >= 0) else -quotient
