"""assert_no_op and assert_op_count with dtype=: the calls whose inputs hold a tensor of a dtype
(an LLM trial's bf16 model could not say "no fp32 matmul" or "no bf16 upcast": torch's own casts
of integer counts run in any model with a mean). Unit tests on synthetic events, and the
fixture's through pytest --opprof."""

from __future__ import annotations

import pytest
from builders import op, step, stepped
from plugin_project import run

from pytest_opprof import assertions
from pytest_opprof.analysis import analyze
from pytest_opprof.dtypes import dtype_words, profiler_dtype, python_dtype
from pytest_opprof.errors import OpprofUsageError


class FakeDtype:
    """A torch.dtype as the assertions read one: by its name, without importing torch."""

    __module__ = "torch"

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


def casts() -> list:
    """One step: torch's own cast of a mean's integer count (long int), the model's bf16 matmul
    and an upcast of its bf16 output to float."""
    return [
        step(1, 0, 1000),
        op("aten::mean", 10, 100, shapes=((4, 4), ()), dtypes=("c10::BFloat16", "")),
        op("aten::_to_copy", 20, 30, shapes=((), ()), dtypes=("long int", "Scalar")),
        op("aten::mm", 200, 100, shapes=((4, 4), (4, 4)), dtypes=("c10::BFloat16", "c10::BFloat16")),
        op("aten::mm", 320, 100, shapes=((4, 4), (4, 4)), dtypes=("c10::BFloat16", "c10::BFloat16")),
        op("aten::to", 500, 60, shapes=((4, 4), ()), dtypes=("c10::BFloat16", "Scalar")),
        op("aten::_to_copy", 505, 50, shapes=((4, 4), ()), dtypes=("c10::BFloat16", "Scalar")),
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("torch.bfloat16", "c10::BFloat16"),
        ("bfloat16", "c10::BFloat16"),
        ("c10::BFloat16", "c10::BFloat16"),
        ("torch.float", "float"),
        ("float32", "float"),
        ("float", "float"),
        ("torch.half", "c10::Half"),
        ("torch.long", "long int"),
        ("int64", "long int"),
        ("torch.int", "int"),
        ("torch.float8_e4m3fn", "c10::Float8_e4m3fn"),
        ("bf16", None),
        ("torch.qint8", None),
        ("", None),
    ],
)
def test_a_dtype_is_named_as_the_profilers_inputs_name_it(given, expected):
    """torch's names and aliases, and the profiler's own, give the type name record_shapes writes."""
    assert profiler_dtype(given) == expected


def test_a_dtype_reads_back_as_python_spells_it():
    assert python_dtype("c10::BFloat16") == "torch.bfloat16"
    assert dtype_words("long int") == "long int (torch.int64)"
    assert dtype_words("TensorList") == "TensorList"


def test_no_op_with_a_dtype_counts_only_calls_on_that_dtype():
    """torch's cast of a long count is no bf16 upcast: only the call on a bf16 tensor is found,
    named with where it ran and on what; a torch dtype object is read by its name."""
    p = analyze(casts())
    assert assertions.no_op("aten::_to_copy", dtype="float16")(p) is None
    assert assertions.no_op("aten::_to_copy", dtype=FakeDtype("torch.bfloat16"))(p) == (
        "aten::_to_copy: expected no calls on c10::BFloat16 (torch.bfloat16) inputs, found aten::_to_copy "
        "(1/step, in aten::to; inputs c10::BFloat16[4,4])"
    )
    assert assertions.no_op("aten::_to_copy")(p).startswith("aten::_to_copy: expected no calls, found")
    assert assertions.no_op("aten::mm", dtype="float32")(p) is None


def test_op_count_with_a_dtype_counts_the_calls_on_it():
    """`no fp32 matmul` and `both matmuls in bf16`: counted in the step that recorded inputs."""
    p = analyze(casts())
    assert assertions.op_count("aten::mm", 2, dtype="bfloat16")(p) is None
    assert assertions.op_count("aten::mm", 0, dtype="torch.float32")(p) is None
    assert assertions.op_count("aten::mm", max=1, dtype="bfloat16")(p) == (
        "aten::mm: 2 calls/step on c10::BFloat16 (torch.bfloat16) inputs, expected at most 1 (in the steps "
        "that recorded inputs: 2; called from Python; inputs c10::BFloat16[4,4], c10::BFloat16[4,4])"
    )
    assert assertions.op_count("aten::mm", 2, dtype="float")(p) == (
        "aten::mm: 0 calls/step on float (torch.float32) inputs, expected 2 (in the steps that recorded inputs: 0)"
    )
    # a glob names each op it counted
    assert assertions.op_count("aten::*", 0, dtype="long")(p) == (
        "aten::*: 1 calls/step on long int (torch.int64) inputs, expected 0 (in the steps that recorded inputs: 1; "
        "in aten::mean; inputs long int[])"
    )


def test_an_op_whose_dtypes_were_not_recorded_is_never_a_pass():
    """Calls without recorded inputs (a run() signature step that did not run the op) and a list
    of tensors (the profiler gives no dtype for its tensors) cannot be told apart by dtype: said."""

    def body(i, base):
        return [op("aten::relu", base + 10, 20)] + ([op("aten::_to_copy", base + 100, 50)] if i == 1 else [])

    signature = analyze([step(1, 0, 1000), op("aten::relu", 10, 20, shapes=((4, 4),), dtypes=("float",))])
    p = analyze(stepped(3, 1000, body)).with_work({o.name: o.work for o in signature.ops if o.work}, 1, False)
    message = assertions.no_op("aten::_to_copy", dtype="bfloat16")(p)
    assert message.startswith(
        "aten::_to_copy: aten::_to_copy ran, but the dtypes of its inputs were not recorded (it did not run in the "
        "call that recorded inputs, or took a list of tensors, whose dtypes the profiler does not give), so whether "
        "a call took c10::BFloat16 (torch.bfloat16) inputs cannot be told; assert on it without dtype="
    )
    assert assertions.op_count("aten::_to_copy", 0, dtype="bfloat16")(p) == message
    cat = analyze(
        [step(1, 0, 1000), op("aten::cat", 10, 20, shapes=(((2, 2), (2, 2)), ()), dtypes=("TensorList", "Scalar"))]
    )
    assert "dtypes of its inputs were not recorded" in assertions.no_op("aten::cat", dtype="float")(cat)


def test_an_op_that_did_not_run_is_judged_as_without_a_dtype():
    """No call at all: the absence checks of a plain assert_no_op (a typo of a name torch does not
    know fails), and a count of calls on a dtype of an op that never ran says it did not run."""
    p = analyze(casts())
    assert assertions.no_op("aten::relu", dtype="float")(p) is None
    typo = assertions.no_op("aten::_to_copyy", is_known=lambda name: False, dtype="float")(p)
    assert typo.startswith("aten::_to_copyy: not an operator torch knows")
    assert assertions.op_count("aten::relu", 1, dtype="float")(p).startswith("aten::relu: no op of that name ran")


@pytest.mark.parametrize("value", ["bf16", 3, "torch.qint8", FakeDtype("torch.qint8")])
def test_a_bad_dtype_is_a_usage_error_at_once(value):
    with pytest.raises(OpprofUsageError, match=r"^dtype=.*: not a tensor dtype torch has; pass one such as "):
        assertions.no_op("aten::mm", dtype=value)
    with pytest.raises(OpprofUsageError, match=r"^dtype=.*: not a tensor dtype torch has"):
        assertions.op_count("aten::mm", 1, dtype=value)


DTYPE_TESTS = """
import torch


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_bf16(opprof):
    model, x = Norm().to(torch.bfloat16), torch.randn(4, 16, dtype=torch.bfloat16)
    opprof.run(model, x, warmup=1, steps=3)
    opprof.assert_op_count("aten::addmm", 1, dtype=torch.bfloat16)
    opprof.assert_op_count("aten::addmm", 0, dtype=torch.float32)


def test_fp32_by_mistake(opprof):
    model, x = Norm(), torch.randn(4, 16)
    opprof.run(model, x, warmup=1, steps=3)
    opprof.assert_op_count("aten::addmm", 0, dtype=torch.float32)


def test_upcast(opprof):
    x = torch.randn(4, 16, dtype=torch.half)
    (x @ x.T).float()
    opprof.assert_no_op("aten::_to_copy", dtype=torch.float16)


def test_bad_dtype(opprof):
    opprof.assert_no_op("aten::mm", dtype="bf16")
"""


def test_the_fixtures_assertions_take_a_dtype(pytester):
    """Through pytest --opprof: a torch dtype object, a whole-call capture's own inputs, and a bad
    dtype refused with or without --opprof."""
    pytester.makepyfile(test_dtypes=DTYPE_TESTS)
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "E *AssertionError: aten::addmm: 1 calls/step on float (torch.float32) inputs, expected 0 (in the steps "
            "that recorded inputs: 1; in aten::linear; inputs float[[]16], float[[]4,16], float[[]16,16])",
            "*test_dtypes.py:*: aten::_to_copy: expected no calls on c10::Half (torch.float16) inputs, found "
            "aten::_to_copy (1/step, in aten::to; inputs c10::Half[[]4,4]*",
        ]
    )
    result.stdout.fnmatch_lines(["E *OpprofUsageError: dtype='bf16': not a tensor dtype torch has*"])
    plain = run(pytester)
    plain.assert_outcomes(passed=3, failed=1)
    plain.stdout.fnmatch_lines(["*OpprofUsageError: dtype='bf16': not a tensor dtype torch has*"])
