"""assert_no_op and assert_op_count with dtype=: the calls whose inputs hold a tensor of a dtype
(an LLM trial's bf16 model could not say "no fp32 matmul" or "no bf16 upcast": torch's own casts
of integer counts run in any model with a mean). Unit tests on synthetic events, and the
fixture's through pytest --opprof."""

from __future__ import annotations

import pytest
from builders import memcpy, op, step, stepped
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
        ("long", "long int"),  # clang's spelling of the same C++ type
        ("torch.int", "int"),
        ("torch.float8_e4m3fn", "c10::Float8_e4m3fn"),
        ("torch.float8_e8m0fnu", "c10::Float8_e8m0fnu"),  # a review's: refused before
        ("torch.qint8", "c10::qint8"),
        ("torch.int4", "c10::dummy_int1_7_t<4>"),
        ("bf16", None),
        ("torch.nope", None),
        ("", None),
    ],
)
def test_a_dtype_is_named_as_the_profilers_inputs_name_it(given, expected):
    """torch's names and aliases, and the profiler's own, give the type name record_shapes writes
    on Linux, first of the spellings compilers give it."""
    found = profiler_dtype(given)
    assert (found[0] if found else None) == expected


def test_every_compilers_spelling_of_an_integer_type_is_matched():
    """record_shapes names a C++ type as its compiler spells it: gcc's `long int` is clang's `long`
    and MSVC's `__int64`; an int64 asserted absent must not pass where the inputs say `long`."""
    assert {"long int", "long", "__int64"} <= set(profiler_dtype("torch.int64"))
    p = analyze([step(1, 0, 1000), op("aten::_to_copy", 20, 30, shapes=((4,),), dtypes=("long",))])
    assert assertions.no_op("aten::_to_copy", dtype="torch.int64")(p).startswith(
        "aten::_to_copy: expected no calls on long int (torch.int64) inputs, found aten::_to_copy"
    )


def test_a_dtype_reads_back_as_python_spells_it():
    """Messages give both names: as the inputs list it, and as a test writes it."""
    assert python_dtype("c10::BFloat16") == "torch.bfloat16"
    assert python_dtype("long") == "torch.int64"
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
    """`no fp32 matmul` and `both matmuls in bf16`: counted where inputs were recorded."""
    p = analyze(casts())
    assert assertions.op_count("aten::mm", 2, dtype="bfloat16")(p) is None
    assert assertions.op_count("aten::mm", 0, dtype="torch.float32")(p) is None
    assert assertions.op_count("aten::mm", max=1, dtype="bfloat16")(p) == (
        "aten::mm: 2 calls/step on c10::BFloat16 (torch.bfloat16) inputs, expected at most 1 (in the step that "
        "recorded inputs: 2; called from Python; inputs c10::BFloat16[4,4], c10::BFloat16[4,4])"
    )
    assert assertions.op_count("aten::mm", 2, dtype="float")(p) == (  # a trial's read no dtype its calls took
        "aten::mm: 0 calls/step on float (torch.float32) inputs, expected 2 (in the step that recorded inputs: 0; "
        "aten::mm ran 2/step on other dtypes, called from Python; inputs c10::BFloat16[4,4], c10::BFloat16[4,4])"
    )
    # a glob counts over the ops it matches, each named once
    assert assertions.op_count("aten::*", 0, dtype="long")(p) == (
        "aten::*: 1 calls/step on long int (torch.int64) inputs, expected 0 (in the step that recorded inputs: 1; "
        "in aten::mean; inputs long int[])"
    )


def test_a_dtype_count_of_an_op_called_inside_itself_says_so():
    """Under autocast aten::linear calls aten::linear (a review's: the dtype count dropped the clause
    the plain count gives), so a count of its calls on a dtype may hold both."""
    events = [
        step(1, 0, 1000),
        op("aten::linear", 10, 300, shapes=((4, 16), (16, 16)), dtypes=("float", "float")),
        op("aten::to", 12, 5, shapes=((4, 16),), dtypes=("float",)),  # autocast's casts: no mere redispatch
        op("aten::linear", 20, 200, shapes=((4, 16), (16, 16)), dtypes=("c10::BFloat16", "c10::BFloat16")),
        op("aten::relu", 400, 10, shapes=((4, 16),), dtypes=("c10::BFloat16",)),
    ]
    message = assertions.op_count("aten::linear", 0, dtype="float")(analyze(events))
    assert message.startswith(
        "aten::linear: 1 calls/step on float (torch.float32) inputs, expected 0 (in the step that recorded inputs: 1; 1 of "
        "them called inside aten::linear itself ("
    )
    # the same for assert_no_op (a trial's read as autocast off)
    absent = assertions.no_op("aten::linear", dtype="float")(analyze(events))
    assert absent.startswith(
        "aten::linear: expected no calls on float (torch.float32) inputs, found aten::linear (1/step, called from "
        "Python; inputs float[4,16], float[16,16]; 1 of them called inside aten::linear itself ("
    )


def test_an_op_whose_dtypes_cannot_be_told_is_never_a_pass():
    """Calls without recorded inputs (run()'s signature call did not run the op), other calls in the
    steps than there, or a list of tensors (the profiler gives no dtype for its tensors): each
    said with its own cause, never a pass; a glob is told to leave the op out."""

    def body(i, base):
        return [op("aten::relu", base + 10, 20)] + ([op("aten::_to_copy", base + 100, 50)] if i == 1 else [])

    signature = analyze([step(1, 0, 1000), op("aten::relu", 10, 20, shapes=((4, 4),), dtypes=("float",))])
    p = analyze(stepped(3, 1000, body)).with_work({o.name: o.work for o in signature.ops if o.work}, 1, False)
    message = assertions.no_op("aten::_to_copy", dtype="bfloat16")(p)
    assert message == (
        "aten::_to_copy: aten::_to_copy ran on inputs whose dtypes cannot be told (it did not run where inputs were "
        "recorded: run()'s one call of fn after the steps), so whether a call took c10::BFloat16 (torch.bfloat16) "
        "inputs cannot be either; assert on it without dtype="
    )
    assert assertions.op_count("aten::_to_copy", 0, dtype="bfloat16")(p) == message
    twice = analyze(
        stepped(3, 1000, lambda i, base: [op("aten::relu", base + 10, 20), op("aten::relu", base + 50, 20)])
    )
    twice = twice.with_work({o.name: o.work for o in signature.ops if o.work}, 1, False)
    assert "(it made 2 calls a step, 1 where inputs were recorded)" in assertions.no_op("aten::relu", dtype="half")(
        twice
    )
    cat = analyze(
        [step(1, 0, 1000), op("aten::cat", 10, 20, shapes=(((2, 2), (2, 2)), ()), dtypes=("TensorList", "Scalar"))]
    )
    assert assertions.no_op("aten::*", dtype="float")(cat).endswith(
        "(it took a list of tensors, whose dtypes the profiler does not give), so whether a call took float "
        "(torch.float32) inputs cannot be either; assert the ops you mean by name, one assertion each (a glob cannot "
        "leave one out), or without dtype="
    )


def test_a_dtype_on_a_memory_op_is_refused_saying_why():
    """A copy's bytes have no dtype: `assert_no_op("Memcpy DtoH*", dtype=...)` said the copy that ran
    was a near miss of itself (a review's); it names the op to assert on instead, as the assertion
    is made: a trial's passed on a CPU machine, where no copy ran, and was refused on a GPU. A glob
    that matches copies and ops too judges its ops (the copies have no dtype to take)."""
    refused = (
        "Memcpy DtoH*: it names memory copies, whose bytes have no dtype the profiler gives; assert on the op that "
        "makes the copy (aten::copy_, aten::_to_copy) with dtype=, or on the copy without it"
    )
    with pytest.raises(OpprofUsageError) as no_op:
        assertions.no_op("Memcpy DtoH*", dtype="float")
    with pytest.raises(OpprofUsageError) as count:
        assertions.op_count("Memcpy DtoH*", 1, dtype="float")
    assert str(no_op.value) == str(count.value) == refused
    p = analyze(
        [
            step(1, 0, 1000),
            op("aten::relu", 10, 100, shapes=((4,),), dtypes=("float",)),
            memcpy("Memcpy DtoH (Device -> Pageable)", 20, 50, 1024),
        ]
    )
    assert assertions.no_op("*", dtype="double")(p) is None  # the op took no double; the copy has no dtype
    assert assertions.no_op("*")(p).startswith("*: expected no calls, found aten::relu")


def test_an_op_that_did_not_run_is_judged_as_without_a_dtype():
    """No call at all: the absence checks of a plain assert_no_op (a typo of a name torch does not
    know fails), and a count of calls on a dtype of an op that never ran says it did not run."""
    p = analyze(casts())
    assert assertions.no_op("aten::relu", dtype="float")(p) is None
    typo = assertions.no_op("aten::_to_copyy", is_known=lambda name: False, dtype="float")(p)
    assert typo.startswith("aten::_to_copyy: not an operator torch knows")
    assert assertions.op_count("aten::relu", 1, dtype="float")(p).startswith("aten::relu: no op of that name ran")


@pytest.mark.parametrize("value", ["bf16", 3, "torch.nope", FakeDtype("torch.nope")])
def test_a_bad_dtype_is_a_usage_error_at_once(value):
    """Any dtype= opprof cannot find in the profiler's inputs: refused when the assertion is made."""
    wanted = r"^dtype=.*: not a dtype opprof can find in the profiler's inputs; pass a torch dtype \(torch.bfloat16\)"
    with pytest.raises(OpprofUsageError, match=wanted):
        assertions.no_op("aten::mm", dtype=value)
    with pytest.raises(OpprofUsageError, match=wanted):
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
            "E *AssertionError: aten::addmm: 1 calls/step on float (torch.float32) inputs, expected 0 (in the step "
            "that recorded inputs: 1; in aten::linear; inputs float[[]16], float[[]4,16], float[[]16,16])",
            "*test_dtypes.py:*: aten::_to_copy: expected no calls on c10::Half (torch.float16) inputs, found "
            "aten::_to_copy (1/step, in aten::to; inputs c10::Half[[]4,4]*",
        ]
    )
    result.stdout.fnmatch_lines(["E *OpprofUsageError: dtype='bf16': not a dtype opprof can find in the profiler's*"])
    plain = run(pytester)
    plain.assert_outcomes(passed=3, failed=1)
    plain.stdout.fnmatch_lines(["*OpprofUsageError: dtype='bf16': not a dtype opprof can find*"])
    for out in (result.stdout.str(), plain.stdout.str()):  # the test's line, not opprof's source (a trial's)
        assert "test_dtypes.py:" in out.split("test_bad_dtype", 1)[1] and "assertions.py" not in out


def test_a_quantized_ops_packed_weights_are_unread_never_a_pass():
    """A dynamically quantized Linear's op takes its int8 weight packed, which the profiler records
    with no dtype: a trial's assert_no_op("quantized::linear_dynamic", dtype=torch.qint8) passed.
    Its dtypes cannot be told (a failure saying why); its float input is read as any other."""
    p = analyze(
        [
            step(1, 0, 1000),
            op("quantized::linear_dynamic", 10, 100, shapes=((16, 64), (), ()), dtypes=("float", "", "Scalar")),
        ]
    )
    absent = assertions.no_op("quantized::linear_dynamic", dtype="qint8")(p)
    assert absent == (
        "quantized::linear_dynamic: quantized::linear_dynamic ran on inputs whose dtypes cannot be told (it took "
        "packed weights, whose dtype the profiler does not give), so whether a call took c10::qint8 (torch.qint8) "
        "inputs cannot be either; assert on it without dtype="
    )
    assert assertions.op_count("quantized::linear_dynamic", 1, dtype="qint8")(p) == absent
    assert assertions.op_count("quantized::linear_dynamic", 1, dtype="float")(p) is None
    none = analyze([step(1, 0, 1000), op("aten::linear", 10, 100, shapes=((4, 8), (), ()), dtypes=("float", "", ""))])
    assert assertions.no_op("aten::linear", dtype="qint8")(none) is None  # an aten op's "": a None (no bias)
