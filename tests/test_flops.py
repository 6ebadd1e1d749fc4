"""FLOPs counted from recorded inputs (flops.py) are torch's with_flops numbers: the rule alone
(no torch), then against torch's own counts of the same calls, and the capture that uses them."""

from __future__ import annotations

import warnings

import pytest

from pytest_opprof.flops import COUNTED_OPS, torch_flops

CONV_ARGS = [None, None, None, [2, 2], [1, 1], [1, 1], 1]  # stride 2, padding 1, dilation 1, groups 1
CONV_TYPES = ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]


@pytest.mark.parametrize(
    "name, shapes, types, values, expected",
    [
        ("aten::mm", [[8, 16], [16, 4]], ["float", "float"], (), 2 * 8 * 16 * 4),
        ("aten::mm", [[0, 4], [4, 3]], ["float", "float"], (), 0),
        ("aten::mm", [[8, 0], [0, 3]], ["float", "float"], (), 0),
        ("aten::addmm", [[4], [3, 5], [5, 4], [], []], ["float"] * 3 + ["Scalar"] * 2, (), 2 * 3 * 5 * 4),
        ("aten::bmm", [[2, 8, 16], [2, 16, 4]], ["float", "float"], (), 2 * 8 * 16 * 4 * 2),
        ("aten::bmm", [[0, 8, 16], [0, 16, 4]], ["float", "float"], (), 0),
        ("aten::baddbmm", [[2, 8, 4], [2, 8, 16], [2, 16, 4], [], []], ["float"] * 3 + ["Scalar"] * 2, (), 2048),
        ("aten::conv2d", [[2, 3, 10, 10], [5, 3, 3, 3], [], [], [], [], []], CONV_TYPES, CONV_ARGS, 13500),
        (
            "aten::conv2d",
            [[2, 3, 10, 10], [5, 3, 3, 3], [], [], [], [], []],
            CONV_TYPES,
            [*CONV_ARGS[:4], None, *CONV_ARGS[5:]],
            0,
        ),
        ("aten::conv2d", [[3, 10, 10], [5, 3, 3, 3], [], [], [], [], []], CONV_TYPES, CONV_ARGS, 0),
        ("aten::conv2d", [[2, 3, 10, 10], [5, 3, 3, 3], [], [], [], [], []], CONV_TYPES, [*CONV_ARGS[:6], 0], 0),
        (
            "aten::conv2d",
            [[2, 3, 10, 10], [5, 3, 3, 3], [], [], [], [], []],
            CONV_TYPES,
            [*CONV_ARGS[:3], [0, 1], *CONV_ARGS[4:]],
            0,
        ),
        ("aten::mul", [[1, 16], [8, 16]], ["float", "float"], (), 16),  # the first input's elements
        ("aten::mul", [[], [4, 4]], ["float", "float"], (), 1),  # a 0-dim tensor first
        ("aten::mul", [[], []], ["", "long int"], (), 0),  # a nested tensor
        ("aten::add", [[8, 16], [16], []], ["float", "float", "Scalar"], (), 128),
        ("aten::add", [[[2], [3]], []], ["TensorList", "Scalar"], (), 0),
        ("aten::relu", [[8, 16]], ["float"], (), 0),
        ("aten::mm", [[8, 16]], ["float"], (), 0),  # fewer inputs than the op takes
        # an output height of -1 (a call that raises): torch's unsigned count wraps (a review's read -2160)
        (
            "aten::conv2d",
            [[1, 3, 1, 10], [5, 3, 3, 3], [], [], [], [], []],
            CONV_TYPES,
            [*CONV_ARGS[:3], [1, 1], [0, 0], [1, 1], 1],
            2**64 - 2160,
        ),
    ],
)
def test_the_rule_counts_as_torch_does(name, shapes, types, values, expected):
    assert torch_flops(name, shapes, types, values) == expected


def test_a_conv2d_of_groups_and_dilation_counts_its_output_size():
    """(10 - 2 x (3 - 1) - 1) / 1 + 1 = 6 rows and columns; 3 groups of 1 channel each."""
    shapes = [[2, 3, 10, 10], [6, 1, 3, 3], [], [], [], [], []]
    assert torch_flops("aten::conv2d", shapes, CONV_TYPES, [None, None, None, [1, 1], [0, 0], [2, 2], 3]) == 7776


def _calls(torch):
    """Calls of every op torch counts, in the forms a model makes them."""
    F = torch.nn.functional
    torch.manual_seed(0)
    img, w = torch.randn(2, 3, 10, 10), torch.randn(5, 3, 3, 3)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    x3, y3 = torch.randn(2, 8, 16), torch.randn(2, 16, 4)
    yield lambda: torch.mm(a, b)
    yield lambda: torch.addmm(torch.randn(4), a, b, beta=0.5)
    yield lambda: torch.bmm(x3, y3)
    yield lambda: torch.baddbmm(torch.randn(2, 8, 4), x3, y3)
    yield lambda: torch.randn(2, 3, 16) @ b  # a matmul that folds its batch into an mm
    yield lambda: torch.nn.Linear(16, 4)(a)
    yield lambda: F.conv2d(img, w, stride=2, padding=1)
    yield lambda: F.conv2d(img, torch.randn(6, 1, 3, 3), groups=3, dilation=2)
    yield lambda: F.conv2d(img, w, padding="same")
    yield lambda: F.conv2d(torch.randn(3, 10, 10), w)  # unbatched
    yield lambda: torch.nn.Conv2d(3, 5, (3, 1), stride=(2, 1), bias=False)(img)
    yield lambda: torch.mm(torch.randn(0, 4), torch.randn(4, 3))
    yield lambda: torch.randn(1, 16) * a
    yield lambda: torch.tensor(2.0) * a
    yield lambda: a * 3
    yield lambda: torch.ones(4, 4, dtype=torch.int64).add(1)
    yield lambda: torch.randn(2, 3).add(torch.randn(3), alpha=2)
    yield lambda: torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)]) * 2
    yield lambda: torch.randn(4, 4, dtype=torch.bfloat16) + 1
    yield lambda: F.conv2d(torch.randn(1, 3, 1, 10), w)  # raises: its output would have no rows
    yield lambda: F.conv2d(torch.randn(1, 6, 1, 10), torch.randn(6, 2, 3, 3), groups=3)  # raises, in groups


def test_the_counts_are_torchs_own_for_the_same_calls():
    """One profile with torch's with_flops: each op event's FLOPs counted from its inputs equal
    torch's, in both ways opprof reads a capture (its events, and Kineto's trace: torch < 2.12)."""
    torch = pytest.importorskip("torch")
    from pytest_opprof.kineto import _flops_by_id, table_from_kineto

    def profiled(with_flops: bool):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nested tensors are a prototype; torch warns it cannot count some
            with torch.profiler.profile(record_shapes=True, with_flops=with_flops) as prof:
                for call in _calls(torch):
                    try:
                        call()
                    except RuntimeError:  # the conv2d of an empty output, as a test of that error calls it
                        pass
        return prof.profiler.kineto_results.events()

    events = profiled(with_flops=True)
    theirs = table_from_kineto(events, with_shapes=True)
    ours = table_from_kineto(events, with_shapes=True, own_flops=True)
    counted = [(name, f) for name, f in zip(theirs.name, theirs.flops) if name in COUNTED_OPS]
    assert {name for name, _ in counted} == COUNTED_OPS  # every op torch counts was called
    assert sum(f > 0 for _, f in counted) >= 15 and any(f == 0 for _, f in counted)
    assert any(f >= 2**63 for _, f in counted)  # the raising conv2d's wrapped count
    assert list(zip(ours.name, ours.flops)) == list(zip(theirs.name, theirs.flops))
    assert _flops_by_id(events, own_flops=True) == _flops_by_id(events, own_flops=False)
    # as opprof's one-step captures record (no with_flops): the same inputs, so the same counts
    plain = table_from_kineto(profiled(with_flops=False), with_shapes=True, own_flops=True)
    assert [(n, f) for n, f in zip(plain.name, plain.flops) if n in COUNTED_OPS] == counted
