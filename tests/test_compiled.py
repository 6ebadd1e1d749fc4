"""torch.compile and CUDA graphs in the analysis and the gates, on events built to the shapes
torch 2.13 emits (checked against real CPU Inductor captures and the shared A100 Triton trace).
The real thing runs in tests/test_compiled_live.py."""

from __future__ import annotations

import dataclasses
import os

import pytest
from builders import annotation, kernel, launch, op, step
from conftest import SHARED_TRACES

from pytest_opprof.analysis import analyze
from pytest_opprof.assertions import (
    NOTHING_COMPILED,
    break_reason,
    compiled,
    kernel_below,
    kernel_count,
    no_graph_break,
    no_op,
    no_recompile,
    op_count,
)
from pytest_opprof.errors import OpprofUsageError
from pytest_opprof.events import GPU_ANNOTATION, Event

SHARED = SHARED_TRACES  # ../shared/traces, or OPPROF_SHARED_TRACES
HASH_A = "f64c4cs3fnasjgrltzfvuqmz2bixpamilzcm3rn3x2g32f327cnz"
HASH_B = "fkmyh3ucmqyhczvgvyfnj45l43tylrpxu5my57pxapjngujjx6mn"


def compiled_step(
    n: int, t0: float, frame: int = 0, compile_: int = 0, graph: str = HASH_A, number: int = 0
) -> list[Event]:
    """One step of a compiled MLP as Inductor on CPU runs it: lookup, region, graph call, an
    addmm that stayed an aten op and the fused gelu kernel (`number`: Inductor's process-wide
    graph number in the kernel's name)."""
    return [
        step(n, t0, 100),
        op("TorchDynamo Cache Lookup", t0 + 1, 2),
        op(f"Torch-Compiled Region: {frame}/{compile_}", t0 + 4, 90),
        op("Pregraph bytecode", t0 + 5, 1),
        op(f"## Call CompiledFxGraph {graph} ##", t0 + 10, 60),
        op("aten::addmm", t0 + 11, 30),
        op(f"graph_{number}_cpp_fused_gelu_0", t0 + 45, 10),
    ]


def test_inductor_cpu_kernels_lose_their_process_wide_graph_number():
    """`graph_2_cpp_fused_gelu_0` in a process that compiled two graphs before, `graph_0_...` in
    one that did not (another order, -k, xdist, a cold Inductor cache): one name, no verdict; a
    baseline written with the numbers reads under the stable names (two kernels of one name
    summed), and an assertion may still name the kernel as Inductor does."""
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import compare
    from pytest_opprof.documents import BaselineDoc
    from pytest_opprof.verdicts import Rule

    first = analyze([e for n in range(1, 6) for e in compiled_step(n, n * 200)])
    later = analyze([e for n in range(1, 6) for e in compiled_step(n, n * 200, number=2)])
    assert [o.name for o in later.ops] == [o.name for o in first.ops] and "cpp_fused_gelu_0" in {
        o.name for o in later.ops
    }
    docs = [baseline_from_profile(p, "t.py::test", "cpu", {}) for p in (first, later)]
    assert compare(docs[1], docs[0], Rule()).verdicts == ()
    old = docs[0].to_dict()
    entry = old["ops"].pop("cpp_fused_gelu_0")
    entry["recorded_range_ms"] = [min(entry["cpu_ms"]), 2 * min(entry["cpu_ms"])]
    old["ops"]["graph_0_cpp_fused_gelu_0"] = old["ops"]["graph_3_cpp_fused_gelu_0"] = entry
    merged = BaselineDoc.from_dict(old).ops["cpp_fused_gelu_0"]
    assert merged.calls_per_step == tuple(2 * c for c in entry["calls_per_step"]) and merged.work is None
    assert merged.recorded_range is None  # each name's range, not their sum's
    assert kernel_count("graph_7_cpp_fused_gelu_0", 1)(later) is None


def test_a_graph_call_written_as_an_annotation_is_an_op():
    """torch 2.13 writes `## Call CompiledFxGraph <hash> ##` as an annotation when the profiler
    records shapes (a single-step capture), and torch 2.9 always: a trial's `capture()` read it as
    a range, so one model gave two op sets and `assert_op_count('CompiledFxGraph', 1)` failed.
    Read as an op, with its self time and the kernels under it, as torch's cpu_op is."""

    def as_annotation(events: list[Event]) -> list[Event]:
        return [annotation(e.name, e.start_ns / 1000, e.dur_ns / 1000) if "##" in e.name else e for e in events]

    steps = [e for n in range(1, 4) for e in compiled_step(n, n * 200)]
    written_as_op, written_as_annotation = analyze(steps), analyze(as_annotation(steps))
    assert [(o.name, o.calls, o.self_cpu_ns) for o in written_as_annotation.ops] == [
        (o.name, o.calls, o.self_cpu_ns) for o in written_as_op.ops
    ]
    assert written_as_annotation.ranges == () and op_count("CompiledFxGraph", 1)(written_as_annotation) is None
    assert written_as_annotation.compiled.regions[0].graphs == (HASH_A,)


def test_a_baseline_recorded_before_graph_calls_were_ops_is_no_structure_change():
    """A baseline written before the graph call was read as an op in every capture lacks it (a
    single-step capture) or its work (run()'s signature step): a review's upgrade failed every
    such test as `+ CompiledFxGraph`. Neither is a change of the code: not compared, said once
    with the command that records them again; any other change still is one."""
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import compare
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.results import TestRecord
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.verdicts import Rule

    steps = [e for n in range(1, 4) for e in compiled_step(n, n * 200)]
    now = baseline_from_profile(analyze(steps), "t.py::test_c", "cpu", {})
    unread = [e for e in steps if "##" not in e.name]  # the old reader: a range, no op
    old = baseline_from_profile(analyze(unread), "t.py::test_c", "cpu", {})
    c = compare(now, old, Rule())
    assert c.verdicts == () and c.graph_call_unread
    assert not compare(now, now, Rule()).graph_call_unread
    shaped = [
        op(e.name, e.start_ns / 1000, e.dur_ns / 1000, shapes=((8, 64),), dtypes=("float",)) if "##" in e.name else e
        for e in steps
    ]
    with_work = baseline_from_profile(analyze(shaped), "t.py::test_c", "cpu", {})
    assert with_work.ops["CompiledFxGraph"].work is not None and now.ops["CompiledFxGraph"].work is None
    c = compare(with_work, now, Rule())  # run()'s signature step read the call as a range: no work recorded
    assert c.graph_call_unread and c.verdicts == () and "CompiledFxGraph" not in c.work_unrecorded
    changed = [e for e in steps if e.name != "aten::addmm"]
    (verdict,) = compare(baseline_from_profile(analyze(changed), "t.py::test_c", "cpu", {}), old, Rule()).verdicts
    assert verdict.message.startswith("structure changed: - aten::addmm") and "CompiledFxGraph" not in verdict.message
    unread = BaselineResult("b.json", "compared", graph_call_unread=True)
    record = TestRecord("t.py::test_c", "passed", None, (), None, (), None, 0.01, unread, "t.py::test_c [passed]")
    assert (
        "opprof: 1 baseline recorded before pytest-opprof read torch.compile's graph call (CompiledFxGraph) as an op "
        "in every capture: its calls and work were not compared; record them again: pytest "
        "--opprof-update-baseline=all t.py::test_c"
    ) in format_problems([record]).splitlines()


def test_regions_and_graph_calls_get_stable_names_with_their_ids_as_details():
    """The process-wide frame counter and the graph hash never reach an op name: a baseline
    recorded with frame 0 matches a run where the same model is frame 3."""
    first = analyze(compiled_step(1, 0, frame=0) + compiled_step(2, 200, frame=0))
    later = analyze(compiled_step(1, 0, frame=3, graph=HASH_B) + compiled_step(2, 200, frame=3, graph=HASH_B))
    names = {o.name for o in first.ops}
    assert {"Torch-Compiled Region", "CompiledFxGraph"} <= names
    assert not any(":" in n and n.startswith("Torch") or "##" in n for n in names)
    assert [(o.name, o.calls) for o in first.ops] == [(o.name, o.calls) for o in later.ops]
    regions = first.to_dict()["compiled"]["regions"]
    assert [(r["step"], r["frame"], r["compile"], r["graphs"], r["nested"], r["inside"]) for r in regions] == [
        (1, 0, 0, [HASH_A], False, None),
        (2, 0, 0, [HASH_A], False, None),
    ]
    assert later.compiled.regions[0].frame == 3 and later.compiled.regions[0].graphs == (HASH_B,)


def test_an_eager_profile_has_no_compiled_summary():
    """Nothing compiled ran: no `compiled` summary, and `null` in the JSON."""
    profile = analyze([step(1, 0, 10), op("aten::add", 1, 2)])
    assert profile.compiled is None and profile.to_dict()["compiled"] is None


def compilation_in_step_1() -> list[Event]:
    """Step 1 compiles (dynamo wraps hundreds of compiler ops), then runs the region; step 2 runs it."""
    return [
        step(1, 0, 5000),
        op("TorchDynamo Cache Lookup", 1, 2),
        op("dynamo", 5, 4000),
        annotation("dynamo_data: compile_id=0/1", 6, 1),
        op("entire_frame_compile", 10, 3900),
        op("PythonDispatchMode", 20, 100),
        op("prims::erf", 30, 50),
        op("aten::addmm", 200, 10),  # traced while compiling: not the model's step work
        op("Torch-Compiled Region: 0/1", 4100, 80),
        op("## Call CompiledFxGraph " + HASH_A + " ##", 4110, 50),
        op("aten::addmm", 4111, 30),
        *compiled_step(2, 6000, compile_=1)[0:],
    ]


def test_a_op_that_ran_only_in_a_compiling_step_is_inconclusive_not_slower():
    """A first call after a compilation runs through torch's dispatch wrappers (PythonDispatchMode,
    outside the compilation): a trial's test failed on its time, by test order. Where it ran only
    in a step torch.compile compiled in, it is inconclusive, with the warm-up as the fix; in
    another step it is judged; pooled with a confirmation, the steps keep their places."""
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import compare
    from pytest_opprof.decide import Measurement, calmer
    from pytest_opprof.timing import WARM_UP_FIX
    from pytest_opprof.verdicts import INCONCLUSIVE, REGRESSED, Machine, Rule

    def steps(wrapped_in: int) -> list[Event]:
        events = [e for n in range(1, 7) for e in compiled_step(n, n * 1000)]
        return events + [op("PythonDispatchMode", wrapped_in * 1000 + 10, 80, tid=2)]  # 80% of a step, in one

    base = baseline_from_profile(analyze([e for n in range(1, 7) for e in compiled_step(n, n * 1000)]), "t", "c", {})
    profile = analyze(steps(1))
    assert not profile.errors and profile.op("PythonDispatchMode").calls == 1
    cold = baseline_from_profile(profile, "t", "c", {})
    (verdict,) = compare(cold, base, Rule(), machine=Machine(compiled_in=(0,))).verdicts
    assert verdict.status == INCONCLUSIVE and verdict.op == "PythonDispatchMode" and verdict.fix == WARM_UP_FIX
    assert verdict.why.startswith("it ran only in step 1, where torch.compile compiled: a first call runs through")
    (verdict,) = compare(cold, base, Rule(), machine=Machine(compiled_in=(2,))).verdicts
    assert verdict.status == REGRESSED  # ran in step 1, compiled in step 3: judged
    pooled = calmer(Measurement(cold, Machine(compiled_in=(0,))), Measurement(cold, Machine(compiled_in=(1,))))
    assert pooled.compiled_in == (0, 7)


def test_a_compilation_in_the_steps_is_set_apart_and_said_in_one_line():
    """Compiler ops inside `dynamo` leave the op table; the compilation is a trust warning naming
    its id, step and time."""
    profile = analyze(compilation_in_step_1())
    names = {o.name for o in profile.ops}
    assert not names & {"dynamo", "entire_frame_compile", "PythonDispatchMode", "prims::erf"}
    assert profile.op("aten::addmm").calls == 2  # the compiled graph's, once per step
    assert [c.to_dict() for c in profile.compiled.compilations] == [{"step": 1, "compile_id": "0/1", "ms": 4.0}]
    (check,) = [c for c in profile.checks if c.name == "compilation"]
    assert check.status == "warning"
    assert check.message.startswith("torch.compile compiled inside the measured steps: 0/1 in step 1 (4.000 ms)")
    assert profile.compiled_in == (0,)  # by position, as a baseline's per-step lists hold steps
    assert "opprof.run(fn, warmup=1)" in check.message


def test_a_compilation_in_the_steps_is_not_blamed_on_the_profiler():
    """Steps that compiled take far longer than the unprofiled ones timed after them: the
    compilation warning says why, not an `overhead` warning blaming the profiler."""
    import importlib

    references = importlib.import_module("pytest_opprof.references")
    compiling = references.with_overhead(analyze(compilation_in_step_1()), [1_000, 1_000])
    assert compiling.overhead and compiling.overhead > 3
    assert "overhead" not in {c.name for c in compiling.checks}
    warm = references.with_overhead(analyze(compiled_step(1, 0) + compiled_step(2, 200)), [10, 10])
    assert "overhead" in {c.name for c in warm.checks}


def test_torch_26_marks_a_compilation_by_an_annotation_only_and_it_is_set_apart_too():
    """torch before 2.11 emits no `dynamo` op and no compile id: the compilation is the user
    annotation `_compile.compile_inner (dynamo_timed)` (checked on 2.6.0, 2.7.1 and 2.9.1); the
    ops under it leave the table all the same, and the warning says the id is unknown (`?`)."""
    events = [
        step(1, 0, 5000),
        op("TorchDynamo Cache Lookup", 1, 2),
        annotation("_compile.compile_inner (dynamo_timed)", 5, 4000),
        annotation("OutputGraph.call_user_compiler (dynamo_timed)", 100, 3000),
        op("aten::lift_fresh", 20, 100),
        op("aten::detach", 300, 50),
        op("aten::addmm", 400, 10),  # traced while compiling
        op("Torch-Compiled Region: 0/0", 4100, 80),
        op("aten::addmm", 4111, 30),
        op("graph_0_cpp_fused_gelu_0", 4150, 10),
        step(2, 6000, 100),
        op("TorchDynamo Cache Lookup", 6001, 2),
        op("Torch-Compiled Region: 0/0", 6004, 90),
        op("aten::addmm", 6011, 30),
        op("graph_0_cpp_fused_gelu_0", 6045, 10),
    ]
    profile = analyze(events)
    assert not {o.name for o in profile.ops} & {"aten::lift_fresh", "aten::detach"}
    assert profile.op("aten::addmm").calls == 2
    assert [c.to_dict() for c in profile.compiled.compilations] == [{"step": 1, "compile_id": "?", "ms": 4.0}]
    (check,) = [c for c in profile.checks if c.name == "compilation"]
    assert check.message.startswith("torch.compile compiled inside the measured steps: ? in step 1 (4.000 ms)")
    assert no_recompile()(profile).startswith("compiled inside the measured steps: ? in step 1 (4.0 ms)")


def test_no_recompile_fails_on_a_compilation_in_the_steps_and_on_alternating_compilations():
    """A compilation inside the steps, or a frame switching compilations between steps, fails the
    gate; a steady recompiled frame passes."""
    assert no_recompile()(analyze(compilation_in_step_1())) == (
        "compiled inside the measured steps: 0/1 in step 1 (4.0 ms); a first call (compile it in the warm-up: "
        "opprof.run(fn, warmup=1)), or a new input shape, dtype or Python value that failed the guards of the "
        "compiled code (TORCH_LOGS=recompiles names the guard)"
    )
    four = [
        e
        for k in range(1, 5)
        for e in (
            step(k, k * 10_000, 5000),
            op("dynamo", k * 10_000 + 5, 4000),
            annotation(f"dynamo_data: compile_id=0/{k}", k * 10_000 + 6, 1),
            op(f"Torch-Compiled Region: 0/{k}", k * 10_000 + 4100, 80),
        )
    ]
    # compiled in every step: new inputs each call, which no warm-up fixes (a compile trial was sent to one)
    assert "0/3 in step 3 (4.0 ms) and 1 more; in 4 steps, not a first call: a new input shape" in no_recompile()(
        analyze(four)
    )
    limited = dataclasses.replace(analyze(four), metadata={"recompile_limit_hit": 8})
    assert no_recompile()(analyze(four)).endswith(
        "(TORCH_LOGS=recompiles names the guard); keep the inputs' shapes and Python values fixed from call to call, "
        "or mark the dimension dynamic (torch._dynamo.mark_dynamic)"
    )
    assert no_recompile()(limited).endswith(
        "(TORCH_LOGS=recompiles names the guard); Dynamo hit its recompile limit (8) in this run and ran the frame "
        "eagerly from then on: each new input shape or Python value compiled it anew; keep them fixed, mark the "
        "dimension dynamic (torch._dynamo.mark_dynamic), or raise torch._dynamo.config.recompile_limit"
    )
    alternating = analyze(compiled_step(1, 0, compile_=0) + compiled_step(2, 200, compile_=1))
    assert no_recompile()(alternating) == (
        "frame 0 ran as different compilations from step to step (step 1: 0/0; step 2: 0/1): its guards fail for "
        "some inputs, so it was recompiled; keep input shapes fixed or mark the dimension dynamic"
    )
    steady = analyze(compiled_step(1, 0, compile_=1) + compiled_step(2, 200, compile_=1))
    assert no_recompile()(steady) is None


def test_two_compiled_instances_of_one_class_are_no_recompile():
    """Two instances of one module class compiled apart (an encoder and a decoder Block, regional
    compilation of repeated layers) share their code, so one frame runs as 0/0 and 0/1 in every
    step: no recompile (a trial's gate failed on it); a step that runs only one of them fails."""

    def both(n: int, t0: float) -> list[Event]:
        return [step(n, t0, 300)] + compiled_step(n, t0, compile_=0)[1:] + compiled_step(n, t0 + 150, compile_=1)[1:]

    assert no_recompile()(analyze(both(1, 0) + both(2, 400) + both(3, 800))) is None
    one_missing = analyze(both(1, 0) + compiled_step(2, 400, compile_=1))
    assert no_recompile()(one_missing).startswith(
        "frame 0 ran as different compilations from step to step (step 1: 0/0, 0/1; step 2: 0/1)"
    )


def graph_break_step(n: int, t0: float) -> list[Event]:
    """A graph break: the first region runs the eager code at the break and then the resumed
    frame, which Dynamo runs as another region nested inside the first."""
    return [
        step(n, t0, 200),
        op("TorchDynamo Cache Lookup", t0 + 1, 2),
        op("Torch-Compiled Region: 0/0", t0 + 4, 180),
        op(f"## Call CompiledFxGraph {HASH_A} ##", t0 + 10, 40),
        op("aten::sin", t0 + 60, 20),  # the eager code at the break
        op("TorchDynamo Cache Lookup", t0 + 90, 2),
        op("Torch-Compiled Region: 1/0", t0 + 95, 80),
        op(f"## Call CompiledFxGraph {HASH_B} ##", t0 + 100, 60),
        op("graph_1_cpp_fused_add_relu_0", t0 + 110, 10),
    ]


def test_no_graph_break_names_the_regions_and_torchs_reason():
    """A region resumed inside another is a graph break: the message names both compile ids, the
    step and torch's reason when known."""
    profile = analyze(graph_break_step(1, 0) + graph_break_step(2, 300))
    assert profile.op("Torch-Compiled Region").calls_per_step.samples == (2, 2)
    message = no_graph_break()(profile)
    assert message.startswith(
        "graph break: in step 1 Torch-Compiled Region 0/0 resumed its frame in Torch-Compiled Region 1/0; "
        "2 resumed regions in 2 steps; torch names the reason"
    )
    profile.metadata["graph_break_reasons"] = ["Call to `torch._dynamo.graph_break()`\n  Explanation: ...", "x"]
    assert no_graph_break()(profile).endswith(
        "; torch's reason: Call to `torch._dynamo.graph_break()`; x (TORCH_LOGS=graph_breaks names the line)"
    )
    profile.metadata["graph_break_reasons"] = [BRANCH_REASON]
    assert no_graph_break()(profile).endswith(f"; torch's reason: {break_reason(BRANCH_REASON)}")
    assert no_graph_break()(analyze(compiled_step(1, 0) + compiled_step(2, 200))) is None


def test_no_graph_break_fails_steps_run_eagerly_after_dynamos_recompile_limit():
    """A frame Dynamo gave up on (its recompile limit, hit in the measured steps) ran eagerly in
    the steps after the last compiled one: no region nested, so no break, yet no graph either (a
    compile trial's gate passed it). A step before the first compiled one or between compiled
    ones (an optimizer step every 2nd call), a limit hit before the steps, or no limit at all
    passes (a review's)."""

    def eager(n: int, t0: float) -> list[Event]:
        return [step(n, t0, 100), op("aten::addmm", t0 + 11, 30)]

    def limited(events: list[Event], in_steps: bool = True):
        profile = analyze(events)
        profile.metadata.update(recompile_limit_hit="8", limit_in_steps=in_steps)
        return profile

    tail = compiled_step(1, 0) + compiled_step(2, 200) + eager(3, 400) + eager(4, 600)
    assert no_graph_break()(analyze(tail)) is None
    assert no_graph_break()(limited(tail)) == (
        "in the last 2 of 4 steps (3, 4) no compiled region ran, after step 2 ran one: the model ran eagerly there; "
        "Dynamo hit its recompile limit (8) in this run and ran the frame eagerly from then on: each new input shape "
        "or Python value compiled it anew; keep them fixed, mark the dimension dynamic (torch._dynamo.mark_dynamic), "
        "or raise torch._dynamo.config.recompile_limit"
    )
    assert no_graph_break()(limited(tail, in_steps=False)) is None  # hit in the warm-up: all eager, or another frame
    first = eager(1, 0) + compiled_step(2, 200) + compiled_step(3, 400)
    between = compiled_step(1, 0) + eager(2, 200) + compiled_step(3, 400)
    assert no_graph_break()(limited(first)) is None and no_graph_break()(limited(between)) is None


BRANCH_REASON = """Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.

      The branch condition involves a tensor computed as follows:
        # File "/src/m.py", line 7, in f, code: if y.sum() > 0:
        gt = gt(sum_1, 0)

  Hint: For the common pattern `if tensor_cond: x = transform(x)` (e.g. clamping inf/nan values), consider making the code branchless. Operations like torch.clamp are no-ops.
  Hint: Use `torch.cond` to express dynamic control flow.

  Developer debug context: attempted to jump with TensorVariable()
"""
PRINT_REASON = """Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)
  Hint: Avoid calling builtin `print` with argument types ['str']. Consider using an equivalent alternative function/method to `print`.
  Hint: If"""


def test_torchs_graph_break_reason_is_one_line_with_its_explanation_line_and_first_hint():
    """torch 2.13's reasons (texts as its counters hold them): the title alone named no `print` (a
    trial); the explanation does, a data-dependent branch's text holds the line that broke, and the
    first sentence of the first hint says what to do. An older torch's one-line reason stays as it is."""
    assert break_reason(BRANCH_REASON) == (
        "Data-dependent branching: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo "
        "does not support tracing dynamic control flow; its condition computed at /src/m.py:7 in f: `if y.sum() > 0:`; "
        "hint: For the "
        "common pattern `if tensor_cond: x = transform(x)` (e.g. clamping inf/nan values), consider making the "
        "code branchless"
    )
    assert break_reason(PRINT_REASON) == (
        "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print` with argument "
        "types ['str'] (has_kwargs False); hint: Avoid calling builtin `print` with argument types ['str']"
    )
    old = "call_function BuiltinVariable(print) [ConstantVariable(str: 'hi')] {}"
    assert break_reason(old) == old and break_reason("") == ""


def test_a_break_in_a_file_under_the_working_directory_is_named_from_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reason = f'generic_jump TensorVariable()\n# File "{tmp_path / "pkg" / "m.py"}", line 7, in f, code: if y:'
    assert break_reason(reason) == f"generic_jump TensorVariable(); at {os.path.join('pkg', 'm.py')}:7 in f: `if y:`"
    elsewhere = 'r\n# File "/elsewhere/m.py", line 7, in f'
    assert break_reason(elsewhere) == "r; at /elsewhere/m.py:7 in f"


def test_the_graph_break_message_names_the_broken_step_whatever_the_event_order():
    """Trace events need not come in start order: the message still names step 2, where the
    break is, and the region it resumed in."""
    events = compiled_step(1, 0) + graph_break_step(2, 200) + compiled_step(3, 500)
    message = no_graph_break()(analyze(list(reversed(events))))
    assert message.startswith(
        "graph break: in step 2 Torch-Compiled Region 0/0 resumed its frame in Torch-Compiled Region 1/0; 1 resumed regions in 3 steps"
    )


def test_two_compiled_models_in_one_step_are_not_a_graph_break():
    """Two top-level regions (two compiled models called in turn) are no graph break."""
    events = compiled_step(1, 0)
    events += [op("TorchDynamo Cache Lookup", 96, 1), op("Torch-Compiled Region: 1/0", 97, 2)]
    events[0] = step(1, 0, 100)
    assert no_graph_break()(analyze(events)) is None


def test_assert_compiled_names_the_eager_work():
    """The code at a graph break ran eagerly: named with its share of the CPU time; without regions
    every gate says nothing compiled ran."""
    broken = analyze(graph_break_step(1, 0) + graph_break_step(2, 300))
    assert compiled()(broken).startswith(
        "17% of the steps' work ran eagerly, outside compiled code (eager ops' CPU time against the compiled code's; "
        "Dynamo's own steps aside): aten::sin (1/step, 0.020 ms/step); "
    )
    assert compiled()(analyze(compiled_step(1, 0) + compiled_step(2, 200))) is None
    assert compiled()(analyze(compiled_step(1, 0)[1:])) is None  # no step marked: the capture is step 0
    scaled = [e._replace(start_ns=e.start_ns * 1000, dur_ns=e.dur_ns * 1000) for e in graph_break_step(1, 0)]
    big = [e._replace(dur_ns=e.dur_ns // 1000) if e.name == "aten::sin" else e for e in scaled]  # 1/1000 of before
    assert compiled()(analyze(big)).startswith("<1% of the steps' work ran eagerly")  # never "0%" in a failure
    eager_only = analyze([step(1, 0, 10), op("aten::add", 1, 2)])
    for gate in (compiled(), no_graph_break(), no_recompile()):
        assert gate(eager_only).startswith("no torch.compile'd region ran in the measured steps")


def test_a_compiled_training_step_has_no_eager_work():
    """autograd's evaluate_function around CompiledFunctionBackward holds compiled code, and
    autograd's own bookkeeping (AccumulateGrad, the backward seed) is not the model's eager work."""
    events = [
        step(1, 0, 100),
        op("autograd::engine::evaluate_function: CompiledFunctionBackward", 1, 50, tid=2),
        op("CompiledFunctionBackward", 2, 45, tid=2),
        op(f"## Call CompiledFxGraph {HASH_A} ##", 3, 40, tid=2),
        op("aten::mm", 4, 30, tid=2),
        op("TorchDynamo Cache Lookup", 60, 1),
        op("Torch-Compiled Region: 0/0", 62, 30),
        op("CompiledFunction", 63, 25),
        op(f"## Call CompiledFxGraph {HASH_B} ##", 64, 20),
        # a training step: the gradient seed of loss.backward(), gradients accumulated into leaves
        op("aten::ones_like", 93, 2),
        op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 55, 10, tid=2),
        op("torch::autograd::AccumulateGrad", 56, 8, tid=2),
        op("aten::detach", 57, 2, tid=2),
    ]
    assert analyze(events).compiled.eager == ()
    eager_seed = [
        e for e in events if not e.name.startswith(("autograd::engine::evaluate_function: Compiled", "Compiled"))
    ]
    assert [e.name for e in analyze(eager_seed).compiled.eager] == ["aten::ones_like"]  # no compiled backward: eager


def test_an_op_fused_away_is_named_with_the_kernel_that_ran_it():
    """An op Inductor fused into a kernel: count and no-op assertions name the kernel; an op absent
    from compiled code says compile decomposes."""
    profile = analyze(compiled_step(1, 0) + compiled_step(2, 200))
    assert op_count("aten::gelu", 1)(profile) == (
        "aten::gelu: no op of that name ran: aten::gelu ran inside compiled code, fused into "
        "cpp_fused_gelu_0; count them with assert_kernel_count"
    )
    assert no_op("aten::gelu")(profile) == (
        "aten::gelu: did not run as an op, but its work did: aten::gelu ran inside compiled code, "
        "fused into cpp_fused_gelu_0"
    )
    assert op_count("aten::gelu", 0)(profile) == op_count("aten::gelu", 1)(profile)  # as assert_no_op: the work ran
    assert no_op("aten::relu")(profile) is None
    message = op_count("aten::relu", 1)(profile)
    assert message.startswith("aten::relu: no op of that name ran in the measured code")
    assert message.endswith("; compiled code ran here, which decomposes and fuses ops: assert on its kernels instead")
    # a slip of letter case beside an op that ran: not "assert on its kernels" (a review's)
    assert op_count("ATen::AddMM", 1, is_known=lambda name: True)(profile).endswith(
        "(names match exactly: letter case, spaces and the `aten::` namespace count); did you mean aten::addmm?"
    )
    # a typo is a typo, as a plain run says: a trial's aten::addm read "assert on its kernels instead"
    typo = op_count("aten::addm", 2, is_known=lambda name: name != "aten::addm", known_names=lambda: ["aten::addmm"])
    assert typo(profile) == "aten::addm: not an operator torch knows; did you mean aten::addmm?"


def test_kernel_assertions_on_cpu_inductor_kernels():
    """Inductor's C++ kernels (CPU ops named cpp_fused_*) are kernels for the kernel assertions, timed on the CPU."""
    profile = analyze(compiled_step(1, 0) + compiled_step(2, 200))
    assert kernel_count("*cpp_fused_gelu*", 1)(profile) is None
    assert kernel_count("*cpp_fused*", 2)(profile) == (
        "*cpp_fused*: 1 launches/step, expected 2 (per step: 1, 1; kernels cpp_fused_gelu_0)"
    )
    assert kernel_below("graph_0_cpp_fused_gelu_0", ms=0.01)(profile) is None
    assert kernel_below("graph_0_cpp_fused_gelu_0", ms=0.005)(profile) == (
        "cpp_fused_gelu_0: 0.010 ms/step > limit 0.0050 ms (median of 2 steps; min 0.010, max 0.010)"
    )
    assert kernel_count("triton_*", 0)(profile) is None
    assert kernel_count("triton_*", min=1)(profile) == (
        "triton_*: no kernel of that name ran in the measured code; the kernels were cpp_fused_gelu_0"
    )


def test_a_kernel_assertion_where_nothing_compiled_ran_says_so():
    """A model Dynamo gave up on (its recompile limit) ran eagerly: no kernels on CPU, and the line
    says no compiled region ran, as the gates do (it said only that no kernels ran). With a
    compiled region that launched none, the CPU hint stays."""
    eager = analyze([step(1, 0, 100), op("aten::gelu", 10, 20), step(2, 200, 100), op("aten::gelu", 210, 20)])
    assert kernel_count("*fused*gelu*", 1)(eager) == (
        f"*fused*gelu*: no kernel of that name ran in the measured code; no kernels ran, and {NOTHING_COMPILED}"
    )
    region_only = analyze([step(1, 0, 100), op("Torch-Compiled Region: 0/0", 5, 50), op("aten::addmm", 10, 20)])
    assert kernel_count("*fused*gelu*", 1)(region_only).endswith(
        "no kernels ran (on CPU only compiled code has kernels: Inductor's cpp_fused_*)"
    )


def test_a_kernel_asserted_absent_one_typo_from_one_that_ran_fails():
    """assert_kernel_count(typo, 0) while the kernel it mistypes ran would pass forever (a trial's
    `cpp_fused_gelu_mull_0`): a doubled or swapped letter fails naming the kernel; another kernel's
    name one letter away (`relu` for `gelu`), a numbered sibling, a glob and a name far from any
    kernel are taken as written."""
    profile = analyze(compiled_step(1, 0) + compiled_step(2, 200))
    assert kernel_count("cpp_fused_gellu_0", 0)(profile) == (
        "cpp_fused_gellu_0: no kernel of that name ran, but cpp_fused_gelu_0 did: a typo of it would pass forever; "
        "name the kernel as it ran (for another kernel that must not run, write a glob such as 'cpp_fused_gellu_0*')"
    )
    assert kernel_count("cpp_fused_geul_0", max=0)(profile).startswith("cpp_fused_geul_0: no kernel of that name ran")
    assert kernel_count("cpp_fused_relu_0", 0)(profile) is None  # another op's kernel that must not run
    assert kernel_count("cpp_fused_gelu_mul_0", max=0)(profile) is None  # far from any kernel
    assert kernel_count("cpp_fused_gelu_1", 0)(profile) is None  # a numbered sibling
    assert kernel_count("cpp_fused_gellu_0*", 0)(profile) is None


def gpu_step(n: int, t0: float) -> list[Event]:
    """A compiled step on a GPU: a Triton kernel launched through cuLaunchKernel under its CPU
    event, the graph call also as a GPU annotation over the kernel (not device work)."""
    return [
        step(n, t0, 100),
        op("Torch-Compiled Region: 0/0", t0 + 2, 90),
        op(f"## Call CompiledFxGraph {HASH_A} ##", t0 + 5, 80),
        op("triton_poi_fused_add_relu_0", t0 + 10, 20),
        launch(t0 + 12, corr=n * 10, name="cuLaunchKernel"),
        op("aten::mm", t0 + 40, 20),
        launch(t0 + 42, corr=n * 10 + 1),
        kernel("triton_poi_fused_add_relu_0", t0 + 50, 4, corr=n * 10),
        kernel("sm90_xmma_gemm", t0 + 55, 6, corr=n * 10 + 1),
        Event(GPU_ANNOTATION, f"## Call CompiledFxGraph {HASH_A} ##", int((t0 + 50) * 1000), 11_000, 0, 7, 0, 7),
    ]


def test_device_time_under_a_region_rolls_up_once_and_the_gpu_annotation_is_not_summed():
    """A Triton kernel's time reaches its CPU event, the graph call and the region once; the graph
    call's GPU annotation is not device work."""
    profile = analyze(gpu_step(1, 0) + gpu_step(2, 200))
    region = profile.op("Torch-Compiled Region")
    assert region.device_per_step.samples == (10_000, 10_000)
    assert profile.device_ns == 20_000
    assert profile.op("triton_poi_fused_add_relu_0").self_device_per_step.samples == (4_000, 4_000)
    assert kernel_count("triton_*", 1)(profile) is None
    assert kernel_below("sm90_*", ms=0.005)(profile).startswith("sm90_xmma_gemm: 0.0060 ms/step > limit 0.0050 ms")
    assert kernel_below("sm90_*", ms=0.006, per="call")(profile) is None


@pytest.mark.parametrize("launch_name", ["cudaGraphLaunch", "cudaGraphLaunch_ptsz", "hipGraphLaunch_spt"])
def test_a_cuda_graph_replay_is_its_own_row_with_its_kernels(launch_name):
    """One cudaGraphLaunch, three kernels sharing its correlation id and no CPU op each: a row
    for the replay (under the op around the launch), the kernels under that op. The launch's
    per-thread default stream names (`_ptsz`, HIP's `_spt`) are graph launches too."""
    events = []
    for n, t0 in ((1, 0), (2, 200)):
        events += [
            step(n, t0, 100),
            op("CUDAGraph.replay", t0 + 1, 20),
            launch(t0 + 2, corr=n, name=launch_name, dur_us=5),
            kernel("k_a", t0 + 30, 3, corr=n),
            kernel("k_b", t0 + 34, 3, corr=n),
            kernel("k_c", t0 + 38, 4, corr=n),
        ]
    profile = analyze(events)
    (graph,) = profile.graph_launches
    assert (graph.op, graph.launch, graph.calls, graph.kernels, graph.device_ns) == (
        "CUDAGraph.replay",
        launch_name,
        2,
        6,
        20_000,
    )
    assert graph.kernels_per_step.samples == (3, 3)
    assert {k.name: k.op for k in profile.kernels} == {
        "k_a": "CUDAGraph.replay",
        "k_b": "CUDAGraph.replay",
        "k_c": "CUDAGraph.replay",
    }
    assert profile.op("CUDAGraph.replay").device_per_step.samples == (10_000, 10_000)
    assert profile.to_dict()["graph_launches"][0]["kernels"] == 6
    assert not [c for c in profile.checks if c.name == "kernel_records"]


def test_a_launch_without_its_kernel_record_is_a_trust_warning():
    """A kernel launch whose correlation id no kernel carries: the tracer dropped it, a trust warning."""
    events = gpu_step(1, 0) + [launch(80, corr=99)]
    (check,) = [c for c in analyze(events).checks if c.name == "kernel_records"]
    assert check.status == "warning"
    assert check.message.startswith("1 of 3 kernel launches have no kernel record (cudaLaunchKernel x1)")
    assert check.message.endswith("profile fewer steps or raise the tracer's buffer size")


def test_a_captures_first_launches_without_records_name_cuptis_session_start_bug():
    """The capture's first launches alone without kernel records: CUPTI 12.6u2-13.0 loses a growing
    number of them at each profiler session's start (pytorch#192021, which a desk review expects on
    the H200's CUDA 13.0); the warning names that likely cause and the fix. A lost launch later in
    the capture keeps the buffer advice, and so does a ROCm capture (not CUPTI; found by a review)."""
    early = gpu_step(1, 0) + [launch(1, corr=97), launch(2, corr=98)]
    (check,) = [c for c in analyze(early).checks if c.name == "kernel_records"]
    assert check.message.startswith("2 of 4 kernel launches have no kernel record (cudaLaunchKernel x2)")
    assert "they are the capture's first 2, likely CUPTI's bug: from CUDA 12.6 Update 2 to 13.0" in check.message
    assert "pytorch/pytorch#192021" in check.message and "CUPTI of CUDA 13.1 or later" in check.message
    late = gpu_step(1, 0) + [launch(80, corr=99)]
    (check,) = [c for c in analyze(late).checks if c.name == "kernel_records"]
    assert "192021" not in check.message
    rocm = gpu_step(1, 0) + [launch(1, corr=97, name="hipLaunchKernel")]  # not CUPTI: ROCm's tracer
    (check,) = [c for c in analyze(rocm).checks if c.name == "kernel_records"]
    assert "192021" not in check.message and check.message.endswith("raise the tracer's buffer size")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: kernel_count("", 1), "kernel=''"),
        (lambda: kernel_count("k"), "n=None"),
        (lambda: kernel_count("k", 1, min=0), "either n or min=/max=, not both"),
        (lambda: kernel_count("k", min=3, max=1), "at most max=1"),
        (lambda: kernel_count("k", -1), "a whole number >= 0"),
        (lambda: kernel_below("k", ms=-1), "ms=-1"),
        (lambda: kernel_below("k", ms=1, per="launch"), "per='launch'"),
        (lambda: kernel_below(None, ms=1), "kernel=None"),
    ],
)
def test_kernel_assertion_arguments_are_checked_at_once(make, message):
    """Bad kernel-assertion arguments raise OpprofUsageError naming the argument when the assertion is made."""
    with pytest.raises(OpprofUsageError, match=message.replace("(", r"\(").replace("[", r"\[")):
        make()


@pytest.mark.skipif(
    not (SHARED / "a100-triton-kernel.json.gz").exists(),
    reason=f"no shared Kineto traces at {SHARED} (OPPROF_SHARED_TRACES=DIR)",
)
def test_the_shared_triton_trace():
    """A100, one Triton kernel through cuLaunchKernel: attributed to its CPU event, under the
    region (stable name), counted once; the kernel gates see it."""
    from pytest_opprof.trace import load_trace

    profile = load_trace(SHARED / "a100-triton-kernel.json.gz")
    (k,) = profile.kernels
    assert (k.name, k.op, k.calls) == ("triton_poi_fused_add_cos_sin_0", "triton_poi_fused_add_cos_sin_0", 1)
    assert profile.op("Torch-Compiled Region").device_ns == k.device_ns == profile.device_ns
    assert [(r.frame, r.compile, r.nested) for r in profile.compiled.regions] == [(0, 0, False)]
    assert kernel_count("triton_*", 1)(profile) is None
    assert op_count("aten::sin", 1)(profile).startswith(
        "aten::sin: no op of that name ran: aten::sin ran inside compiled code, fused into triton_poi_fused_add_cos_sin_0"
    )


def test_the_tables_show_the_compiled_summary_and_graph_replays():
    """The text tables carry the torch.compile line and a row per graph replay."""
    text = analyze(graph_break_step(1, 0) + graph_break_step(2, 300)).table()
    assert (
        "torch.compile: 2 regions/step (0/0, 1/0); 1/step resumed after a graph break; eager 17% of the work (against compiled code)"
        in text
    )
    assert "torch.compile: 1 region/step (0/0)" in analyze(compiled_step(1, 0) + compiled_step(2, 200)).table()
    events = [step(1, 0, 100), op("CUDAGraph.replay", 1, 20), launch(2, corr=1, name="cudaGraphLaunch")]
    events += [kernel("k_a", 30, 3, corr=1), kernel("k_b", 34, 3, corr=1)]
    rows = [line.split() for line in analyze(events).table().splitlines() if line.startswith("cudaGraphLaunch")]
    assert rows == [["cudaGraphLaunch", "CUDAGraph.replay", "1", "2", "0.006"]]


def test_exported_and_reloaded_traces_keep_the_compiled_details(tmp_path):
    """An exported trace keeps torch's own names; reading it back gives the same stable names
    and region details."""
    from pytest_opprof.trace import load_trace

    profile = analyze(graph_break_step(1, 0) + graph_break_step(2, 300))
    profile.export_chrome_trace(str(tmp_path / "t.json.gz"))
    again = load_trace(tmp_path / "t.json.gz")
    assert [(o.name, o.calls) for o in again.ops] == [(o.name, o.calls) for o in profile.ops]
    assert again.compiled.regions == profile.compiled.regions


def test_a_lost_fusion_is_a_structure_verdict():
    """The same compiled model, but Inductor no longer fuses gelu: an eager aten::gelu appears
    and the fused kernel is gone. Frame numbers and graph hashes differ and do not matter."""
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import compare
    from pytest_opprof.verdicts import Rule

    def lost(n: int, t0: float) -> list[Event]:
        events = compiled_step(n, t0, frame=5, graph=HASH_B)
        return [*events[:-1], op("aten::gelu", t0 + 45, 10)]

    def doc(p):
        return baseline_from_profile(p, "t.py::test", "cpu", {})

    fused = analyze([e for n in range(1, 6) for e in compiled_step(n, n * 200)])
    same = analyze([e for n in range(1, 6) for e in compiled_step(n, n * 200, frame=9, graph=HASH_B)])
    unfused = analyze([e for n in range(1, 6) for e in lost(n, n * 200)])
    assert compare(doc(same), doc(fused), Rule()).verdicts == ()
    (verdict,) = compare(doc(unfused), doc(fused), Rule()).verdicts
    assert verdict.kind == "structure"
    assert "+ aten::gelu" in verdict.message and "- cpp_fused_gelu_0" in verdict.message


def test_a_structure_change_of_the_compiled_regions_says_what_it_means():
    """A graph break, compiled code gone, or newly compiled: the structure verdict says it in words
    beside the op counts (a trial read `Torch-Compiled Region 1 -> 2/step` and worked it out)."""
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import compare
    from pytest_opprof.verdicts import Rule

    def doc(events):
        return baseline_from_profile(analyze(events), "t.py::t", "cpu-x86_64", {})

    clean = doc(compiled_step(1, 0) + compiled_step(2, 200))
    broken = doc(graph_break_step(1, 0) + graph_break_step(2, 300))
    eager = doc([step(1, 0, 100), op("aten::sin", 10, 5), step(2, 200, 100), op("aten::sin", 210, 5)])

    def said(current, baseline):
        (verdict,) = [v for v in compare(current, baseline, Rule()).verdicts if v.kind == "structure"]
        return verdict.message

    # the cause first, then the ops (a compile trial's sat at the end of a 1,000-character line)
    assert said(broken, clean).startswith(
        "structure changed: compiled regions 1 -> 2/step: a graph break splits the compiled code, or another "
        "compiled model runs (assert_no_graph_break tells them apart); the ops: "
    )
    assert said(clean, broken).startswith(
        "structure changed: compiled regions 2 -> 1/step: fewer graph breaks, or less of it compiled; the ops: "
    )
    assert said(eager, clean).startswith("structure changed: no compiled region ran: the code is no longer compiled")
    assert said(clean, eager).startswith(
        "structure changed: compiled regions ran where none did: the code is now compiled; the ops: "
    )
    ignoring = compare(broken, clean, Rule(ignore_ops=("Torch-Compiled Region",))).verdicts
    assert not any("graph break" in v.message for v in ignoring)


def test_a_kernel_renumbered_in_its_graph_is_said_as_one_change():
    """A graph break makes a kernel the first of the resumed graph, its index 1 -> 0: one change
    said once (a compile trial read `- cpp_fused_add_relu_1 ..., + cpp_fused_add_relu_0 ...`), both
    one change in the verdict's changes (the JSON's, `-v`'s every change, `opprof compare`); another index at other calls, or another kernel, is not paired."""
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import compare
    from pytest_opprof.verdicts import Rule

    def doc(*names):
        events = [step(1, 0, 100)] + [op(name, 10 + 10 * i, 5) for i, name in enumerate(names)]
        return baseline_from_profile(analyze(events), "t.py::t", "cpu-x86_64", {})

    before = doc("cpp_fused_gelu_0", "cpp_fused_add_relu_1")
    (verdict,) = compare(doc("cpp_fused_gelu_0", "aten::sin", "cpp_fused_add_relu_0"), before, Rule()).verdicts
    assert (
        verdict.message.count("cpp_fused_add_relu_1 -> cpp_fused_add_relu_0 (1/step: the same kernel, renumbered") == 1
    )
    assert "- cpp_fused_add_relu_1" not in verdict.message and "+ aten::sin" in verdict.message
    renamed = next(c for c in verdict.changes if c.op == "cpp_fused_add_relu_0")
    assert len(verdict.changes) == 2 and (renamed.was, renamed.now, renamed.renumbered_from) == (
        1,
        1,
        "cpp_fused_add_relu_1",
    )  # one change: counted and listed once
    (verdict,) = compare(doc("cpp_fused_gelu_0", "cpp_fused_mul_0"), before, Rule()).verdicts
    assert "- cpp_fused_add_relu_1" in verdict.message and "+ cpp_fused_mul_0" in verdict.message
    twice = doc("cpp_fused_gelu_0", "cpp_fused_add_relu_0", "cpp_fused_add_relu_0")
    (verdict,) = compare(twice, before, Rule()).verdicts
    assert "renumbered" not in verdict.message  # 1 call, then 2: not the same kernel's


def test_an_ops_work_beside_compiled_code_on_one_side_only_says_so():
    """Compiled code calls ops otherwise (`addmm` with an `out=` tensor): with the compile removed,
    a compile trial's `aten::addmm` work change read as a change of its own beside the structure's
    `no compiled region ran`; it now says why. Where both sides ran compiled code, as before."""
    from dataclasses import replace

    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.compare import ONE_SIDE_COMPILED, compare
    from pytest_opprof.verdicts import Rule

    three, four = ((16, 64), (64, 128), (128,)), ((128,), (16, 64), (64, 128), (16, 128))

    def doc(compiled, shapes):
        events = [step(1, 0, 100)]
        events += [op("Torch-Compiled Region: 0/0", 5, 80)] if compiled else []
        events += [op("aten::addmm", 10, 50, shapes=shapes, dtypes=("float",) * len(shapes))]
        return baseline_from_profile(analyze(events), "t.py::t", "cpu-x86_64", {})

    work = [v for v in compare(doc(False, three), doc(True, four), Rule()).verdicts if v.kind == "work"]
    assert [v.message.endswith(ONE_SIDE_COMPILED) for v in work] == [True]
    work = [v for v in compare(doc(True, three), doc(True, four), Rule()).verdicts if v.kind == "work"]
    assert [v.message.endswith(ONE_SIDE_COMPILED) for v in work] == [False]

    def grad(d, calls):  # autograd recorded the op's calls (grad mode on), or not
        entry = d.ops["aten::addmm"]
        return d.replace(
            ops={**d.ops, "aten::addmm": replace(entry, work=replace(entry.work, autograd_calls_per_step=calls))}
        )

    # inside compiled code autograd records the graph's call, not its ops: no forgotten no_grad() (a trial's line said one)
    verdicts = compare(grad(doc(False, three), 1), grad(doc(True, three), 0), Rule()).verdicts
    assert [v.kind for v in verdicts] == ["structure"]
    (work,) = [v for v in compare(grad(doc(True, three), 1), grad(doc(True, three), 0), Rule()).verdicts]
    assert "autograd records its calls now" in work.message
    # the regions ignored (--opprof-ignore-ops): no structure change to point to, the work said as ever
    ignoring = Rule(ignore_ops=("Torch-Compiled Region",))
    (work,) = compare(grad(doc(False, three), 1), grad(doc(True, three), 0), ignoring).verdicts
    assert "autograd records its calls now" in work.message and ONE_SIDE_COMPILED not in work.message


def test_compiled_code_whose_kernels_went_unprofiled_is_warned_of():
    """A library trial's model compiled before measure() (Inductor's kernel profiling off) read
    only `CompiledFxGraph`, every check ok: the check warns where graphs ran with no kernel of
    theirs shown, and is quiet where a fused kernel shows or no graph ran."""
    from pytest_opprof.analysis.checks import unprofiled_kernels_check

    unprofiled = analyze([e for n in range(1, 3) for e in compiled_step(n, n * 200) if "cpp_fused" not in e.name])
    check = unprofiled_kernels_check(unprofiled)
    assert check is not None and check.name == "compiled_kernels" and check.status == "warning"
    assert check.message.startswith(
        "compiled code ran (CompiledFxGraph x2) and no kernel of Inductor's shows: it was compiled without "
        "Inductor's kernel profiling, their time then in CompiledFxGraph's self time (50% of its time), or it has "
        "none (a graph of library calls only, one matmul say); to show them, set "
        "torch._inductor.config.cpp.enable_kernel_profile = True before compiling"
    )
    assert unprofiled_kernels_check(analyze([e for n in range(1, 3) for e in compiled_step(n, n * 200)])) is None
    assert unprofiled_kernels_check(analyze([op("aten::addmm", 0, 10)])) is None


# -- the summary's edges (mutation trial F: each of these changed a summary and no test noticed) --


def test_a_graph_break_is_seen_when_the_broken_region_is_the_captures_first_op():
    """A step whose first op is the compiled region (no cache lookup recorded before it): the
    region resumed inside it after a graph break is nested, and says which region it ran in."""
    events = [
        step(1, 0, 100),
        op("Torch-Compiled Region: 0/0", 1, 90),
        op(f"## Call CompiledFxGraph {HASH_A} ##", 5, 30),
        op("Torch-Compiled Region: 1/0", 40, 40),
        op(f"## Call CompiledFxGraph {HASH_B} ##", 45, 30),
    ]
    profile = analyze(events)
    outer, inner = profile.compiled.regions
    assert (outer.nested, outer.inside, inner.nested, inner.inside) == (False, None, True, "0/0")
    assert no_graph_break()(profile) is not None


def test_compiled_code_counts_once_at_its_top_whatever_its_index():
    """CompiledFunction, the capture's first op, calls the graph (and an aten::detach beside it):
    its time is the compiled code's, the graph's inside it not counted again, the detach no eager
    work."""
    events = [
        step(1, 0, 100),
        op("CompiledFunction", 1, 50),
        op("aten::detach", 2, 1),
        op(f"## Call CompiledFxGraph {HASH_A} ##", 5, 40),
        op("aten::relu", 60, 10),
    ]
    summary = analyze(events).compiled
    assert summary.compiled_cpu_ns == 50_000
    assert [(e.name, e.calls, e.cpu_ns) for e in summary.eager] == [("aten::relu", 1, 10_000)]


def test_an_aot_wrapper_op_beside_the_graph_call_is_compiled_code_not_eager_work():
    """A compiled forward under autograd: the region calls CompiledFunction, which runs an
    aten::detach beside the graph call. Neither is eager work; the compiled code's time is
    CompiledFunction's, counted once."""
    events = [
        step(1, 0, 100),
        op("Torch-Compiled Region: 0/0", 1, 95),
        op("CompiledFunction", 5, 85),
        op("aten::detach", 6, 1),
        op(f"## Call CompiledFxGraph {HASH_A} ##", 10, 70),
        op("aten::addmm", 11, 30),
    ]
    summary = analyze(events).compiled
    assert summary.eager == () and summary.compiled_cpu_ns == 85_000


def test_eager_ops_are_the_outermost_in_the_steps_only():
    """Before the steps: a setup op and a compilation (step -1, as the JSON says it). In the step,
    after the compiled region: aten::linear calling aten::addmm is one eager op, the outer one;
    most CPU time first."""
    events = [
        op("aten::empty", 0, 5),
        op("dynamo", 10, 400),
        annotation("dynamo_data: compile_id=0/0", 11, 1),
        op("entire_frame_compile", 12, 300),
        *compiled_step(1, 500),
        op("aten::linear", 595, 3),
        op("aten::addmm", 596, 1),
        op("aten::abs", 598, 1),
    ]
    summary = analyze(events).compiled
    assert [c.to_dict() for c in summary.compilations] == [{"step": -1, "compile_id": "0/0", "ms": 0.4}]
    assert [(e.name, e.calls, e.cpu_ns) for e in summary.eager] == [("aten::linear", 1, 3_000), ("aten::abs", 1, 1_000)]


def test_a_frame_compiled_while_compiling_another_is_one_compilation():
    """Dynamo compiling a frame inside another's compilation: one compilation, the outer (after
    another compilation in the same step, which stays one)."""
    events = [
        step(1, 0, 5000),
        op("dynamo", 1, 3),
        annotation("dynamo_data: compile_id=2/0", 1.5, 1),
        op("dynamo", 5, 4000),
        annotation("dynamo_data: compile_id=0/0", 6, 1),
        op("dynamo", 3005, 1000),  # ends with the outer one, as a trace in whole microseconds may
        annotation("dynamo_data: compile_id=1/0", 3006, 1),
        *compiled_step(2, 6000)[0:],
    ]
    assert [c.compile_id for c in analyze(events).compiled.compilations] == ["2/0", "0/0"]


def test_a_region_named_without_its_ids_reads_as_frame_minus_one():
    """A hand-written trace's bare `Torch-Compiled Region` (no `<frame>/<compile>`): read, its
    ids unknown (-1/-1), no traceback."""
    events = [step(1, 0, 100), op("Torch-Compiled Region", 1, 90), op(f"## Call CompiledFxGraph {HASH_A} ##", 5, 10)]
    profile = analyze(events)
    (region,) = profile.compiled.regions
    assert (region.frame, region.compile, region.compile_id) == (-1, -1, "-1/-1")


def test_a_compiled_backward_is_compiled_code_with_what_runs_beside_its_graph():
    """A compiled training step: autograd's evaluate_function runs CompiledFunctionBackward, which
    runs an aten::detach beside the backward graph's call: no eager work, and the compiled code's
    time is CompiledFunction's and CompiledFunctionBackward's."""
    events = [
        step(1, 0, 300),
        op("Torch-Compiled Region: 0/0", 1, 95),
        op("CompiledFunction", 5, 85),
        op(f"## Call CompiledFxGraph {HASH_A} ##", 10, 70),
        op("autograd::engine::evaluate_function: CompiledFunctionBackward", 100, 150),
        op("CompiledFunctionBackward", 105, 140),
        op("aten::detach", 106, 2),
        op(f"## Call CompiledFxGraph {HASH_B} ##", 110, 120),
    ]
    summary = analyze(events).compiled
    assert summary.eager == () and summary.compiled_cpu_ns == 225_000


def test_the_summary_reads_the_same_from_events_listed_out_of_order():
    """A merged or hand-edited trace may list a step's events in any order (a child before its
    parent): the same regions (in the order they ran), compiled time and eager ops as in order."""

    def compiled_forward(n: int, t0: float) -> list[Event]:  # the prologue's detach is compiled code's
        return [
            step(n, t0, 100),
            op(f"Torch-Compiled Region: 0/{n - 1}", t0 + 1, 95),
            op("CompiledFunction", t0 + 5, 85),
            op("AOTDispatcher Runtime Wrapper Prologue", t0 + 6, 3),
            op("aten::detach", t0 + 7, 1),
            op(f"## Call CompiledFxGraph {HASH_A} ##", t0 + 10, 70),
            op("aten::addmm", t0 + 11, 30),
        ]

    events = [*compiled_forward(1, 200), *compiled_forward(2, 400), op("aten::abs", 497, 2)]
    ordered, shuffled = analyze(events).compiled, analyze(events[::-1]).compiled
    assert shuffled == ordered
    assert [r.compile_id for r in ordered.regions] == ["0/0", "0/1"]
    assert ordered.compiled_cpu_ns == 170_000 and [e.name for e in ordered.eager] == ["aten::abs"]


def test_an_eager_op_that_is_the_captures_first_op_counts_once_not_with_its_children():
    """The step begins with an eager aten::linear (the capture's first op) calling aten::addmm:
    one eager op, the outer one."""
    events = [
        step(1, 0, 200),
        op("aten::linear", 1, 20),
        op("aten::addmm", 2, 15),
        *compiled_step(2, 100)[1:],
    ]
    eager = analyze(events).compiled.eager
    assert [(e.name, e.cpu_ns) for e in eager] == [("aten::linear", 20_000)]


def test_a_compilation_on_one_thread_leaves_another_threads_ops_in_the_table():
    """Thread 1 compiles during step 1 while thread 2 runs its ops (a DataLoader thread, say): the
    compiler ops leave the table, thread 2's stay, each of its calls counted."""
    events = [
        *compilation_in_step_1(),
        op("aten::copy_", 50, 20, tid=2),
        op("aten::copy_", 3000, 20, tid=2),
        op("aten::copy_", 6050, 20, tid=2),
    ]
    profile = analyze(events)
    assert profile.op("aten::copy_").calls == 3 and profile.op("prims::erf") is None


def test_eager_work_beside_a_compiled_backward_under_autograds_node_is_eager():
    """autograd's evaluate_function runs CompiledFunctionBackward and then, beside it, an eager
    aten::add_ (a gradient summed into its input buffer): the add_ is eager work; the node that
    wraps compiled code is not."""
    events = [
        step(1, 0, 300),
        op("autograd::engine::evaluate_function: CompiledFunctionBackward", 100, 150),
        op("CompiledFunctionBackward", 105, 100),
        op(f"## Call CompiledFxGraph {HASH_B} ##", 110, 80),
        op("aten::add_", 210, 20),
    ]
    assert [(e.name, e.cpu_ns) for e in analyze(events).compiled.eager] == [("aten::add_", 20_000)]


def test_dynamos_and_aots_own_steps_around_a_graph_call_are_no_eager_work():
    """Inside the region, beside the graph call: the cache lookup, the pregraph bytecode and the
    AOT dispatcher's prologue and epilogue: none is eager work."""
    events = [
        step(1, 0, 100),
        op("Torch-Compiled Region: 0/0", 1, 95),
        op("TorchDynamo Cache Lookup", 2, 1),
        op("Pregraph bytecode", 4, 1),
        op("AOTDispatcher Runtime Wrapper Prologue", 6, 3),
        op(f"## Call CompiledFxGraph {HASH_A} ##", 10, 70),
        op("AOTDispatcher Runtime Wrapper Epilogue", 85, 3),
    ]
    summary = analyze(events).compiled
    assert summary.eager == () and summary.compiled_cpu_ns == 70_000


def test_an_assertion_on_a_compiled_graph_names_where_it_ran_without_a_traceback():
    """assert_op_count on `CompiledFxGraph` (a stable name: the trace holds the hashed one) fails
    with its callers, where the ranges around its calls cannot be looked up by that name."""
    message = op_count("CompiledFxGraph", 2)(analyze(compiled_step(1, 0) + compiled_step(2, 200)))
    assert message == "CompiledFxGraph: 1 calls/step, expected 2 (per step: 1, 1; in Torch-Compiled Region)"


def test_a_structure_change_beside_a_compilation_in_the_steps_points_to_it():
    """A test-order trial: a whole-call test of a shared compiled model failed `structure changed`
    only where it ran before the test that warmed the model, and its line did not point to the
    `compilation` warning, which names test order. It now does; without the warning, no such line."""
    from pytest_opprof.analysis import Check
    from pytest_opprof.decide import BaselineResult
    from pytest_opprof.errors import COMPILED_IN_STEPS
    from pytest_opprof.results import TestRecord
    from pytest_opprof.summarylines import format_problems
    from pytest_opprof.verdicts import Verdict

    structure = Verdict("structure", "changed", "structure changed: aten::addmm 2 -> 4/step")
    compared = BaselineResult("b.json", "compared", verdicts=(structure,))
    compiled = (Check("compilation", "warning", "torch.compile compiled inside the measured steps: ..."),)
    for checks, said in ((compiled, True), ((), False)):
        record = TestRecord(
            "t.py::test_w", "failed", None, checks, None, (), None, 0.01, compared, "t.py::test_w [failed]"
        )
        assert (f"t.py::test_w: {COMPILED_IN_STEPS}" in format_problems([record]).splitlines()) is said


def test_dynamos_cache_lookup_without_a_compiled_region_is_a_not_compiled_warning():
    """Dynamo looked up its compiled code in the steps and no compiled region ran: the model ran
    eagerly (a lambda around a compiled model whose forward had used up the recompile limit in
    earlier tests: a trial's, without a word); with a region, or no lookup, no warning."""

    def steps(region: bool, lookup: bool = True) -> list[Event]:
        events = []
        for i in range(3):
            base = i * 1000
            events.append(step(i + 1, base, 900))
            if lookup:
                events.append(op("TorchDynamo Cache Lookup", base + 10, 20))
            if region:
                events.append(op("Torch-Compiled Region: 0/0", base + 40, 500))
            events.append(op("aten::addmm", base + 50, 300))
        return events

    (check,) = [c for c in analyze(steps(region=False)).checks if c.name == "not_compiled"]
    assert check.status == "warning"
    assert check.message.startswith("a torch.compile'd model or function ran eagerly in the steps: no compiled")
    for found in (analyze(steps(region=True)), analyze(steps(region=False, lookup=False))):
        assert "not_compiled" not in {c.name for c in found.checks}
    # two lookups a step and one region: one call ran eagerly (a cached shape and one new past the limit)
    half = [e for e in steps(region=True)] + [op("TorchDynamo Cache Lookup", i * 1000 + 600, 20) for i in range(3)]
    (check,) = [c for c in analyze(half).checks if c.name == "not_compiled"]
    assert check.message.startswith(
        "3 of the 6 calls of torch.compile'd code in the steps ran eagerly (Dynamo looked up"
    )
