"""Unit tests of the work verdicts (what each op computes, its inputs, FLOPs and copies) and of a run on another number of torch threads: hand-built profiles, no torch."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from baseline_docs import NODE, addmm_verdict, doc, mlp_profile, on_device, profile, threaded, walled
from builders import op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import (
    BaselineError,
    baseline_from_profile,
    baseline_path,
    dumps,
    orphan_baselines,
    read_baseline,
    write_baseline,
)
from pytest_opprof.compare import FULL_LEGEND, _flops_change, compare, work_changes
from pytest_opprof.documents import BaselineDoc, SignatureEntry, WorkEntry
from pytest_opprof.rules import ENVIRONMENT
from pytest_opprof.verdicts import STEP_WALL, STRUCTURE, TIME, WORK, Machine, Rule

# -- work verdicts -----------------------------------------------------------------------------


def test_a_doubled_layer_is_a_work_verdict_naming_flops_and_shapes():
    """2x the hidden size: work verdicts name the FLOPs ratio and the old -> new inputs; time is
    not judged for those ops (the work explains it); the verdict fails by default."""
    c = compare(doc(mlp_profile(2048)), doc(mlp_profile(1024)), Rule(), "b.json")
    by_op = {v.op: v for v in c.verdicts}
    assert {v.kind for v in c.verdicts} == {WORK}
    assert by_op["aten::addmm"].message == (
        "aten::addmm: 2x the FLOPs per step (67.1M -> 134.2M); inputs (float[1024], float[64,256], float[256,1024]) "
        "and (float[256], float[64,1024], float[1024,256]) -> (float[2048], float[64,256], float[256,2048]) "
        "and (float[256], float[64,2048], float[2048,256]) [b.json]"
    )
    assert by_op["aten::relu"].message == "aten::relu: inputs (float[64,1024]) -> (float[64,2048]) [b.json]"
    assert c.failing(Rule()) == list(c.verdicts) and not c.unchanged
    assert c.failing(Rule(fail_on=frozenset({TIME}))) == []


def test_flops_one_side_never_recorded_are_unknown_not_a_change():
    """A capture made without with_flops (a user's own profiler, its trace) has no FLOPs for any
    op: against one that has them, no `FLOPs per step 0 -> 134.2M` work verdict (a trial's
    `opprof compare --fail-on work` failed the same model so); inputs still count, and FLOPs
    recorded on both sides still do."""
    plain, counted = doc(mlp_profile(1024, with_flops=False)), doc(mlp_profile(1024))
    assert compare(plain, counted, Rule()).verdicts == () and compare(counted, plain, Rule()).verdicts == ()
    (wider,) = [
        v for v in compare(doc(mlp_profile(2048, with_flops=False)), counted, Rule()).verdicts if v.op == "aten::addmm"
    ]
    assert "FLOPs" not in wider.message and wider.message.startswith("aten::addmm: inputs (float[1024]")
    doubled = compare(doc(mlp_profile(2048)), counted, Rule()).verdicts
    assert [v.message[:39] for v in doubled if v.op == "aten::addmm"] == ["aten::addmm: 2x the FLOPs per step (67."]


def test_work_verdicts_put_the_costliest_op_first():
    """A trial's doubled LSTM led its failure with `aten::add` (0.4% of the step, first by name) and
    named the 79% `aten::mkldnn_rnn_layer` fifth: the costliest op of the baseline comes first."""

    def rnn(hidden):
        events = []
        for i in range(6):
            events.append(step(i + 1, i * 10_000, 10_000))
            events.append(op("aten::add", i * 10_000 + 10, 5, shapes=((hidden,), (hidden,)), dtypes=("float",) * 2))
            events.append(
                op("aten::mkldnn_rnn_layer", i * 10_000 + 100, 4000, shapes=((20, hidden),), dtypes=("float",))
            )
        return analyze(events)

    verdicts = compare(doc(rnn(256)), doc(rnn(128)), Rule()).verdicts
    assert [(v.kind, v.op) for v in verdicts] == [(WORK, "aten::mkldnn_rnn_layer"), (WORK, "aten::add")]


def test_work_verdicts_put_a_flops_change_before_a_costlier_caller_s_inputs():
    """A trial's wider transformer feed-forward led with the 13 inputs of the fused layer op that
    called `aten::addmm`, its `1.8x the FLOPs` second: ops whose FLOPs changed come first, each
    group the costliest first."""

    def layer(ff):
        events = []
        for i in range(6):
            base = i * 10_000
            events.append(step(i + 1, base, 10_000))
            events.append(
                op(
                    "aten::_transformer_encoder_layer_fwd",
                    base + 10,
                    5000,
                    shapes=((8, 64), (ff, 64)),
                    dtypes=("float",) * 2,
                )
            )
            events.append(
                op(
                    "aten::addmm",
                    base + 20,
                    3000,
                    shapes=((ff,), (64, 64), (64, ff)),
                    dtypes=("float",) * 3,
                    flops=64 * 64 * ff * 2,
                )
            )
            events.append(op("aten::relu", base + 4000, 900, shapes=((64, ff),), dtypes=("float",)))
        return analyze(events)

    verdicts = compare(doc(layer(1024)), doc(layer(512)), Rule()).verdicts
    assert [v.op for v in verdicts] == ["aten::addmm", "aten::_transformer_encoder_layer_fwd", "aten::relu"]
    assert verdicts[0].message.startswith("aten::addmm: 2x the FLOPs per step")


def test_a_flops_change_too_small_for_three_digits_is_given_in_more():
    """A trial's Linear 1000 -> 1001 read `1x the FLOPs per step (32.8M -> 32.8M)`, which says
    nothing changed: the ratio and the counts get the digits that show the change."""
    (verdict, *_) = compare(doc(mlp_profile(hidden=1001)), doc(mlp_profile(hidden=1000)), Rule()).verdicts
    assert verdict.message.startswith("aten::addmm: 1.001x the FLOPs per step (65.5M -> 65.6M); "), verdict.message
    assert _flops_change(32_768_000, 32_800_768) == "1.001x the FLOPs per step (32,768,000 -> 32,800,768)"
    assert _flops_change(6144, 6144.5) == "1.00008x the FLOPs per step (6,144 -> 6,144.5)"


def test_a_dtype_change_is_a_work_verdict_with_the_same_flops():
    """float -> double: same shapes and FLOPs, other input types."""
    (verdict, *_) = compare(doc(mlp_profile(dtype="double")), doc(mlp_profile()), Rule()).verdicts
    assert verdict.kind == WORK and "inputs (float[1024], " in verdict.message and "(double[1024], " in verdict.message
    assert "FLOPs" not in verdict.message


def test_a_work_change_on_other_threads_names_the_thread_count():
    """A scale trial ran its suite with OMP_NUM_THREADS=1 (the xdist note's advice) against
    baselines of 2 threads: reductions split otherwise, and 12 tests failed on `aten::zero_:
    inputs (...)` with no word of threads on their lines. Each work verdict names the counts."""
    one, two = threaded(doc(mlp_profile(dtype="double")), 1), threaded(doc(mlp_profile()), 2)
    ops = [v for v in compare(one, two, Rule()).verdicts if v.kind == WORK and v.op]
    assert ops and all(
        v.message.endswith(
            "; torch ran on 1 thread, the baseline on 2: a thread count changes how some ops split their work"
        )
        for v in ops
    )
    # the whole model's dtype change, said once on the first, before the thread clause ends it
    assert (
        "; the inputs of all 2 ops whose work changed went from float (torch.float32) to double (torch.float64); torch ran on 1"
        in ops[0].message
    )
    (verdict, *_) = compare(threaded(doc(mlp_profile(dtype="double")), 2), two, Rule()).verdicts
    assert "torch ran on" not in verdict.message


def test_unchanged_work_and_unrecorded_work_give_no_work_verdict():
    """Identical work is no verdict; a side without recorded inputs (schema 1, a trace) skips work."""
    assert compare(doc(mlp_profile()), doc(mlp_profile()), Rule()).verdicts == ()
    old = doc(mlp_profile())
    old = old.replace(ops={name: replace(entry, work=None) for name, entry in old.ops.items()})
    assert compare(doc(mlp_profile(2048)), old, Rule()).verdicts == ()


def test_work_changes_name_kernels_and_bytes():
    """On a GPU the kernels an op launched and the bytes its copies moved are work too."""
    old = WorkEntry((), 0, {"gemm_a": 1}, {"Memcpy HtoD": 4194304})
    new = WorkEntry((), 0, {"gemm_b": 1}, {"Memcpy HtoD": 8388608})
    assert work_changes(new, old) == [
        "kernels: gemm_a 1 -> 0, gemm_b 0 -> 1",
        "bytes per step: Memcpy HtoD 4.2M -> 8.4M",
    ]


def test_grad_mode_switched_as_an_op_ran_is_a_work_change():
    """A forgotten torch.no_grad() runs the same ops on the same inputs: a regression trial's
    passed 12 test runs of 12 on an MLP, a CNN and an attention block. The calls autograd
    recorded (grad mode on as they ran) going from none to some, or from some to none, is a work
    change of the op, saying which way; counts both sides record, or a side that did not say (a
    file written before), are none."""
    sig = (SignatureEntry([[4, 32]], ("float",), 2),)

    def entry(autograd):
        return WorkEntry(sig, 100.0, autograd_calls_per_step=autograd)

    assert work_changes(entry(2), entry(0)) == [
        "autograd records its calls now (0 -> 2/step): grad mode was on as it ran, off in the baseline (a forgotten "
        "torch.no_grad() or torch.inference_mode()?)"
    ]
    assert work_changes(entry(0), entry(1.5)) == [
        "autograd no longer records its calls (1.5 -> 0/step): grad mode was off as it ran, on in the baseline (a "
        "torch.no_grad() around it, or grad mode left off by an earlier test?)"
    ]
    for new, old in ((2, 1), (0, 0), (2, None), (None, 0)):
        assert work_changes(entry(new), entry(old)) == [], (new, old)


def test_the_calls_autograd_recorded_are_written_read_back_and_refused_when_bad(tmp_path):
    """A baseline holds each op's `autograd_calls_per_step` where its capture read it, round-trips
    it, reads a file without it as unsaid, and refuses a value that is no count."""
    data = doc(mlp_profile())
    entry = data.ops["aten::addmm"]
    graded = data.replace(
        ops={**data.ops, "aten::addmm": replace(entry, work=replace(entry.work, autograd_calls_per_step=1))}
    )
    path = tmp_path / "b.json"
    write_baseline(path, graded)
    assert json.loads(path.read_text())["ops"]["aten::addmm"]["work"]["autograd_calls_per_step"] == 1
    assert read_baseline(path, NODE) == graded
    assert "autograd_calls_per_step" not in json.dumps(data.to_dict())  # unread: not written
    path.write_text(path.read_text().replace('"autograd_calls_per_step": 1', '"autograd_calls_per_step": "yes"'))
    with pytest.raises(BaselineError) as info:
        read_baseline(path, NODE)
    assert str(info.value).startswith(
        f"{path}: op 'aten::addmm': 'work' has an autograd_calls_per_step that is no number"
    )


def test_work_recorded_in_the_baseline_document(tmp_path):
    """Schema 2 documents carry each op's signatures, FLOPs, kernels and bytes per step; they
    round-trip through the file."""
    data = doc(mlp_profile())
    addmm = data.to_dict()["ops"]["aten::addmm"]["work"]
    assert data.schema == 2
    assert addmm["flops_per_step"] == 2 * 2 * 64 * 256 * 1024
    assert {
        "shapes": [[1024], [64, 256], [256, 1024], [], []],
        "dtypes": ["float", "float", "float", "Scalar", "Scalar"],
        "calls_per_step": 1,
    } in addmm["signatures"]
    assert addmm["kernels"] == {} and addmm["bytes_per_step"] == {}
    path = tmp_path / "b.json"
    write_baseline(path, data)
    assert read_baseline(path, NODE) == data
    assert path.read_text() == dumps(data.to_dict())
    assert doc(profile()).ops["aten::addmm"].work is None  # no inputs recorded


@pytest.mark.parametrize(
    ("work", "reason"),
    [
        ("3", "'work' is not an object or null"),
        ('{"signatures": 1}', "has no list of signatures"),
        ('{"signatures": [], "flops_per_step": "x"}', "has no flops_per_step number >= 0"),
        (
            '{"signatures": [], "flops_per_step": -5, "kernels": {}, "bytes_per_step": {}}',
            "has no flops_per_step number",
        ),
        (
            '{"signatures": [], "flops_per_step": 1, "kernels": {}, "bytes_per_step": {"x": -1}}',
            "bytes_per_step object",
        ),
        ('{"signatures": [], "flops_per_step": 1, "kernels": [], "bytes_per_step": {}}', "has no kernels object"),
        (
            '{"signatures": [{"shapes": [5, null, "x"], "dtypes": [], "calls_per_step": 1}]}',
            "has no list of signatures",
        ),
        ('{"signatures": [{"shapes": [], "dtypes": [["float"]], "calls_per_step": 1}]}', "has no list of signatures"),
        ('{"signatures": [], "flops_per_step": 1' + "0" * 400 + ', "kernels": {}, "bytes_per_step": {}}', "flops"),
    ],
)
def test_a_bad_work_entry_is_an_error_naming_the_file(tmp_path, work, reason):
    """A hand-edited 'work' entry that is not what we write: BaselineError naming file and op."""
    data = doc(profile())
    text = dumps(data.to_dict()).replace('"work": null', f'"work": {work}', 1)
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        read_baseline(path, NODE)
    assert str(info.value).startswith(f"{path}: op 'aten::addmm': 'work' ")
    assert reason in str(info.value)


def test_schema_1_baselines_are_read_and_compared_on_structure_and_time(tmp_path):
    """An old baseline (no work) is no error: structure and time are compared."""
    data = doc(profile()).to_dict()
    data["schema"] = 1
    for entry in data["ops"].values():
        del entry["work"]
    path = tmp_path / "b.json"
    path.write_text(dumps(data))
    old = read_baseline(path, NODE)
    assert old.schema == 1 and old.to_dict() == data  # read and written back as it was
    c = compare(doc(mlp_profile(2048)), old, Rule())
    assert {v.kind for v in c.verdicts} == {STRUCTURE}


def test_signatures_that_differ_only_in_scalars_are_a_work_change_shown_in_full():
    """clamp(min=0) vs clamp(max=1): same tensors, scalars in other places: a work verdict whose
    inputs show every position, so the two sides read apart."""

    def clamp(dtypes):
        return analyze([step(1, 0, 100)] + [op("aten::clamp", 10, 50, shapes=((4, 4), (), ()), dtypes=dtypes)])

    old, new = doc(clamp(("float", "Scalar", ""))), doc(clamp(("float", "", "Scalar")))
    (verdict,) = compare(new, old, Rule()).verdicts
    assert verdict.message == (
        "aten::clamp: inputs (float[4,4], Scalar, -) -> (float[4,4], -, Scalar) (every input shown: `-` an optional "
        "one not given, `Scalar` a number, `ScalarList` a list of them)"
    )
    # the legend only where a side is shown in full (an LLM trial read `(ScalarList, ..., -, Scalar)` as noise)
    wider = doc(
        analyze([step(1, 0, 100), op("aten::clamp", 10, 50, shapes=((8, 4), (), ()), dtypes=("float", "Scalar", ""))])
    )
    (verdict,) = [v for v in compare(wider, old, Rule()).verdicts if v.kind == WORK]
    assert verdict.message == "aten::clamp: inputs (float[4,4]) -> (float[8,4])"

    def mm(*firsts):
        calls = [
            op("aten::mm", 10 + 100 * i, 50, shapes=(s, (4, 4)), dtypes=("float", "float"))
            for i, s in enumerate(firsts)
        ]
        return doc(analyze([step(1, 0, 1000), *calls]))

    # shown in full but with nothing left out of the short text: no legend (a review's)
    (verdict,) = compare(mm((4, 4), (8, 4), (8, 4)), mm((4, 4), (4, 4), (8, 4)), Rule()).verdicts
    assert (
        verdict.message.startswith("aten::mm: inputs (float[4,4], float[4,4]) x2")
        and "every input" not in verdict.message
    )


def test_a_compiled_graph_with_sizes_as_numbers_on_one_side_is_said_to_be_dynamic_there():
    """A compiled graph's inputs that differ only by sizes passed as numbers (SymInts): Dynamo
    compiled it dynamic on one side (automatic dynamic, after another shape in the process: a
    compile trial's test after an earlier test's other batch size), static alone under `-k`. Still
    a work change (another graph ran), said with its cause and fix; an eager op's extra number
    input is the code's own change, said as before."""

    def graph(name, with_size):
        shapes = ((128, 64), (128,), *([()] if with_size else []), (32, 64))
        dtypes = ("float", "float", *(["Scalar"] if with_size else []), "float")
        return doc(analyze([step(1, 0, 100), op(name, 10, 50, shapes=shapes, dtypes=dtypes)]))

    (verdict,) = compare(graph("CompiledFunction", False), graph("CompiledFunction", True), Rule()).verdicts
    assert verdict.kind == WORK and verdict.message.startswith(
        "CompiledFunction: inputs (float[128,64], float[128], Scalar, float[32,64]) -> (float[128,64], float[128], "
        "float[32,64]): the same tensors, with sizes passed as numbers (SymInts) in the baseline, not here: Dynamo "
        "compiled the graph with dynamic shapes on one side and static on the other."
    )
    assert "torch._dynamo.reset() in an autouse fixture" in verdict.message
    (verdict,) = compare(graph("CompiledFunction", True), graph("CompiledFunction", False), Rule()).verdicts
    assert "(SymInts) here, not in the baseline:" in verdict.message
    dynamic_both = doc(
        analyze(
            [
                step(1, 0, 100),
                op("CompiledFunction", 10, 50, shapes=((128, 64), (), ()), dtypes=("float", "Scalar", "Scalar")),
            ]
        )
    )
    dynamic_one = doc(
        analyze([step(1, 0, 100), op("CompiledFunction", 10, 50, shapes=((128, 64), ()), dtypes=("float", "Scalar"))])
    )
    (verdict,) = compare(dynamic_both, dynamic_one, Rule()).verdicts  # dynamic on both sides: the code's own change
    assert "SymInts" not in verdict.message
    (verdict,) = compare(graph("aten::add", False), graph("aten::add", True), Rule()).verdicts
    assert (
        verdict.message
        == "aten::add: inputs (float[128,64], float[128], Scalar, float[32,64]) -> (float[128,64], float[128], float[32,64])"
        + FULL_LEGEND
    )


def cat_doc(*lists, dim="Scalar", list_shapes=True):
    """A document of one aten::cat call per tensor list given (each a tuple of shapes), recorded
    with the shapes of lists of tensors (or, `list_shapes=False`, as a torch without structured input shapes and earlier
    pytest-opprof recorded them: `[]`)."""
    events = [step(1, 0, 1000)] + [
        op("aten::cat", 10 + 100 * i, 50, shapes=(shapes if list_shapes else (), ()), dtypes=("TensorList", dim))
        for i, shapes in enumerate(lists)
    ]
    return doc(analyze(events)).replace(list_shapes=list_shapes)


def test_tensor_list_inputs_are_work_and_their_shapes_compared():
    """torch.cat([x[:, :192], x[:, 192:]]) vs [:, :64]: the same output, FLOPs and slices' inputs;
    only the list's shapes tell the work apart. An empty list is a list like any other."""
    old, new = cat_doc(((64, 192), (64, 64))), cat_doc(((64, 64), (64, 192)))
    (verdict,) = compare(new, old, Rule()).verdicts
    assert verdict.kind == WORK and verdict.message == (
        "aten::cat: inputs (TensorList[[64,192],[64,64]]) -> (TensorList[[64,64],[64,192]])"
    )
    assert compare(old, old, Rule()).lists_unrecorded == ()
    with_empty = cat_doc((), ((64, 192), (64, 64))), cat_doc((), ((64, 64), (64, 192)))
    assert [v.kind for v in compare(*with_empty, Rule()).verdicts] == [WORK]  # not taken as unrecorded


def test_a_side_without_tensor_list_shapes_compares_those_inputs_as_unrecorded():
    """A baseline (or a capture) recorded without the shapes of lists of tensors (capture.list_shapes
    absent: an earlier pytest-opprof, a torch without structured input shapes): the lists are blanked on both sides, no false
    work verdict, and the comparison names the ops whose list shapes went unchecked, whichever side
    lacks them; a changed scalar still counts."""
    unrecorded, recorded = cat_doc(((64, 192), (64, 64)), list_shapes=False), cat_doc(((64, 64), (64, 192)))
    for pair in ((recorded, unrecorded), (unrecorded, recorded)):
        c = compare(*pair, Rule())
        assert c.verdicts == () and c.lists_unrecorded == ("aten::cat",)
    (verdict,) = compare(cat_doc(((64, 192), (64, 64)), dim=""), unrecorded, Rule()).verdicts
    assert verdict.message == "aten::cat: inputs (TensorList, Scalar) -> (TensorList, -)" + FULL_LEGEND


def test_capture_list_shapes_is_written_only_when_true_and_read_strictly(tmp_path):
    """capture.list_shapes: true in a file recorded with them; absent otherwise, so files written
    before it read back byte for byte; anything but a boolean is an error naming the field."""
    assert cat_doc(((1, 2),)).to_dict()["capture"]["list_shapes"] is True
    assert "list_shapes" not in cat_doc(((1, 2),), list_shapes=False).to_dict()["capture"]
    data = cat_doc(((1, 2),)).to_dict()
    data["capture"]["list_shapes"] = "yes"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match="'capture.list_shapes' is 'yes', not true or false"):
        read_baseline(path, NODE)


def test_parameter_ids_that_differ_only_by_separators_get_distinct_files(tmp_path):
    """Ids a::b and a.b (and a class method beside them) never share a baseline file."""
    paths = {
        baseline_path(tmp_path, "cpu", f"t.py::{name}")
        for name in ("test_x[a::b]", "test_x[a.b]", "TestA::test_x", "test_x[a_b]")
    }
    assert len(paths) == 4
    assert baseline_path(tmp_path, "cpu", "t.py::TestA::test_x").name == "TestA.test_x.json"  # unchanged names


def test_orphan_baselines_are_the_files_no_collected_test_reads(tmp_path):
    """In the folder of a test file collected whole, a file named after none of its tests (a
    renamed parameter, a removed test) is an orphan; files of a file whose tests a node id picked,
    and of files not collected, are not judged."""
    kept = ["t/test_a.py::test_x[con]", "t/test_a.py::TestB::test_y", "t/test_b.py::test_z"]
    gone = ["t/test_a.py::test_x[old]", "t/test_a.py::test_removed", "t/test_b.py::test_gone", "t/test_c.py::test_w"]
    for nodeid in kept + gone:
        path = baseline_path(tmp_path, "cpu", nodeid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    (baseline_path(tmp_path, "cpu", "t/test_a.py::x").parent / "notes.txt").write_text("not a baseline")
    collected = kept + ["t/test_b.py::test_new_without_baseline"]
    found = orphan_baselines(tmp_path, "cpu", collected, narrowed=["t/test_b.py"])
    assert found == sorted(baseline_path(tmp_path, "cpu", n) for n in gone[:2])
    assert orphan_baselines(tmp_path, "cpu", collected, narrowed=[]) == sorted(
        baseline_path(tmp_path, "cpu", n) for n in gone[:3]
    )
    assert orphan_baselines(tmp_path, "gpu", collected, narrowed=[]) == []  # another key's folder: none


def _share(calls, ms):
    return {"calls_per_step": [calls] * 8, "device_ms": [ms] * 8}


def _gemm(ops, by_op, calls=1):
    """An edit giving the document one kernel, 'gemm' (1 ms per step), with these ops and by_op."""
    kernel = {**_share(calls, 1), "ops": ops, "by_op": by_op}
    return lambda d: d.update(kernels={"gemm": kernel})


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda d: d["ops"]["aten::addmm"].update(cpu_ms=["0.001"] * 8),
            "op 'aten::addmm': 'cpu_ms' holds '0.001' at step 1: not a number >= 0 (below 1e30)",
        ),
        (  # a trial's missing key read as one of the wrong kind
            lambda d: d["ops"]["aten::addmm"].pop("cpu_ms"),
            "op 'aten::addmm': 'cpu_ms' is missing or null: a list of numbers >= 0, one per step",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(calls_per_step=["2"] * 8),
            "op 'aten::addmm': 'calls_per_step' holds '2' at step 1: not a whole number >= 0",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(cpu_ms=7),
            "op 'aten::addmm': 'cpu_ms' is 7, not a list of numbers >= 0, one per step",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(cpu_ms=[float("nan")] * 8),
            "op 'aten::addmm': 'cpu_ms' holds NaN at step 1",
        ),
        (lambda d: d.update(schema=True), "'schema' is true, not a schema this pytest-opprof reads (1, 2)"),
        (lambda d: d.update(wall_ms="fast"), "'wall_ms' is 'fast', not a list of numbers >= 0, one per step"),
        (lambda d: d.update(outside_ms=[-1] * 8), "'outside_ms' holds -1 at step 1: not a number >= 0"),
        (lambda d: d.update(outside_ms=[1] * 3), "'outside_ms' holds 3 values for 8 steps: one per step"),
        (lambda d: d.update(outside_ms=[99] * 8), "'outside_ms' is 99 in step 1, over its wall_ms, 10"),
        (
            lambda d: d.update(kernels={"gemm": {"calls_per_step": [1] * 8, "device_ms": "x"}}),
            "kernel 'gemm': 'device_ms' is 'x', not a list of numbers >= 0, one per step",
        ),
        (
            lambda d: d.update(memory_ops={"Memcpy": {"calls_per_step": [1], "device_ms": [1], "bytes": "4"}}),
            "'bytes' is '4'",
        ),
        (_gemm(["a"], {"b": {}}), "kernel 'gemm': 'by_op' names 'b', which is not in its 'ops'"),
        (
            lambda d: d["ops"].update({"aten::mm\n\x1b[31mEVIL": d["ops"]["aten::addmm"]}),
            "op 'aten::mm\\n\\x1b[31mEVIL': its name holds a control character or a bidirectional override, which no profile's "
            "name does (they write it as its escape, 'aten::mm\\\\n\\\\x1b[31mEVIL')",
        ),
        (
            lambda d: d.update(memory_ops={"Memcpy\u202e": {"calls_per_step": [1] * 8, "device_ms": [1] * 8}}),
            "memory op 'Memcpy\\u202e': its name holds a control character or a bidirectional override",
        ),
        (_gemm(["a\tb"], {}), "kernel 'gemm': its op 'a\\tb': its name holds a control character or a bidi"),
        (_gemm(["a"], {"a": 1}), "kernel 'gemm': 'by_op' is not an object of launching ops"),
        (
            _gemm(["a"], {"a": _share(1, -1)}),
            "kernel 'gemm': by_op 'a' 'device_ms' holds -1 at step 1: not a number >= 0",
        ),
        (_gemm(["a", "b"], {"a": _share(1, 0.5)}), "kernel 'gemm': 'by_op' has no share for 'b', one of its 'ops'"),
        (
            _gemm(["a", "b"], {"a": _share(4, 500), "b": _share(1, 0.5)}, calls=5),
            "kernel 'gemm': the 'by_op' shares of 'device_ms' add up to 500.5 in step 1, more than the kernel's own 1",
        ),
    ],
)
def test_hand_edited_values_of_the_wrong_type_are_errors_naming_the_file(tmp_path, edit, reason):
    """Strings where numbers belong, a number where a list belongs, NaN, a boolean schema: one
    BaselineError naming the file and the field (the test becomes an error), never a traceback
    from the comparison, and never a time check silently disabled by a NaN."""
    assert_edit_refused(tmp_path, edit, reason)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: d.update(wall_ms=None), "no 'wall_ms' (null): the steps' wall times, one per step"),
        (lambda d: d.pop("wall_ms"), "no 'wall_ms': the steps' wall times, one per step"),
        (lambda d: d.pop("capture"), "no 'capture': the capture's steps and source"),
        (lambda d: d.pop("environment"), "no 'environment': the machine and torch facts"),
        (lambda d: d["ops"]["aten::addmm"].pop("on_device"), "op 'aten::addmm': no 'on_device'"),
    ],
)
def test_fields_every_baseline_holds_are_required(tmp_path, edit, reason):
    """A hand edit that drops a field every recorded baseline holds is an error naming it: without
    `wall_ms` the step wall went unjudged and a step 4.5x slower passed in silence (a trial's find)."""
    assert_edit_refused(tmp_path, edit, reason)


def test_a_trace_document_without_step_markers_has_no_wall(tmp_path):
    """The document of a trace without step markers (what `opprof compare` reads of a trace) has
    no wall time; only a baseline file must hold one."""
    data = doc(profile()).to_dict()
    data["wall_ms"] = None
    assert BaselineDoc.from_dict(data).wall_ms is None


def assert_edit_refused(tmp_path, edit, reason):
    """A recorded baseline, edited by `edit`, raises one BaselineError naming the file and
    `reason`; the file is left as it was."""
    data = doc(profile()).to_dict()
    edit(data)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(BaselineError) as info:
        read_baseline(path, NODE)
    assert str(info.value).startswith(f"{path}: ") and reason in str(info.value)
    assert len(str(info.value)) < 1000  # every value quoted is cut to a line's length
    assert path.read_bytes() == before


def test_a_control_character_in_a_fact_or_a_node_id_is_read_never_printed_raw(tmp_path):
    """A trial's hand-edited `torch` fact with an ESC was printed raw by `opprof show` and the
    run's summary; an older version wrote a thread variable's `2\\r` raw (a CRLF env file), and
    such a committed baseline must still read (a review). The fact is read as its escape; the
    node id is pytest's (which escapes its ids unless told not to) and is kept as it is."""
    data = doc(profile()).to_dict()
    data["environment"].update(torch="2.13\n\x1b[31mRED", thread_setup="2 cpus, OMP_NUM_THREADS=2\r")
    data["nodeid"] = NODE + "\x1b"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    read = read_baseline(path, NODE + "\x1b")
    assert read.environment["torch"] == "2.13\\n\\x1b[31mRED"
    assert read.environment["thread_setup"] == "2 cpus, OMP_NUM_THREADS=2\\r" and read.nodeid == NODE + "\x1b"


def test_environment_texts_are_written_as_the_reader_reads_them():
    """A thread variable's value is the user's: a control character in it is written as its
    escape, so the baseline recorded is one the reader accepts."""
    from pytest_opprof.baseline import stable_facts

    facts = stable_facts({"torch": "2.13.0", "thread_setup": "2 cpus, OMP_NUM_THREADS=2\n", "cuda": None})
    assert facts["thread_setup"] == "2 cpus, OMP_NUM_THREADS=2\\n" and facts["cuda"] is None


def test_a_range_that_misses_the_ops_fastest_step_gets_its_own_fix_alone(tmp_path):
    """One fix, the range's own: a trial read two ("delete the op's recorded_range_ms; fix or
    delete it and run pytest --opprof-update-baseline")."""
    from pytest_opprof.baseline import UNUSABLE_FIX
    from pytest_opprof.errors import BAD_RANGE_FIX

    data = doc(profile()).to_dict()
    data["ops"]["aten::addmm"]["recorded_range_ms"] = [0.8, 2.0]
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as info:
        read_baseline(path, NODE)
    assert str(info.value).endswith(f"; {BAD_RANGE_FIX}") and UNUSABLE_FIX not in str(info.value)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        # found by a trial: each of these was read, and then compared, or crashed the run
        (lambda d: d["ops"]["aten::addmm"].update(calls_per_step=[]), "'calls_per_step' holds 0 values for 8 steps"),
        (
            lambda d: d["ops"]["aten::addmm"].update(calls_per_step=[-1] * 8),
            "op 'aten::addmm': 'calls_per_step' holds -1 at step 1: not a whole number >= 0",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(calls_per_step=[1.5] * 8),
            "'calls_per_step' holds 1.5 at step 1: not a whole",
        ),
        (  # the limit the message names is itself refused
            lambda d: d["ops"]["aten::addmm"].update(calls_per_step=[10**30] * 8),
            "'calls_per_step' holds 1000000000000000000000000000000 at step 1: not a whole number >= 0 (below 1e30)",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(cpu_ms=[1e30] * 8),
            "'cpu_ms' holds 1e+30 at step 1: not a number >= 0 (below 1e30)",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(cpu_ms=[-1.0] * 8),
            "'cpu_ms' holds -1.0 at step 1: not a number >= 0",
        ),
        (lambda d: d["ops"]["aten::addmm"].update(device_ms=[0.0] * 7), "'device_ms' holds 7 values for 8 steps"),
        (lambda d: d["capture"].update(steps="10"), "'capture.steps' is '10', not a whole number >= 1"),
        (lambda d: d["capture"].update(steps=-10), "'capture.steps' is -10, not a whole number >= 1"),
        (lambda d: d["capture"].update(steps=0), "'capture.steps' is 0, not a whole number >= 1"),
        (lambda d: d["capture"].update(steps=50), "'wall_ms' holds 8 values for 50 steps"),
        (lambda d: d.update(environment=[]), "'environment' is [], not an object"),
        (lambda d: d.update(device_key=5), "'device_key' is 5, not a text or null"),
        # a trial's hand edit: `opprof show` printed the key's ESC to the terminal
        (lambda d: d.update(device_key="cpu\u202e"), "'device_key' is 'cpu\\u202e': it holds a control character"),
        (lambda d: d["environment"].update(torch=2), "'environment.torch' is 2, not a text or null"),
        (lambda d: d["ops"].update({"": d["ops"]["aten::addmm"]}), "op '': an empty name, which no profile's op has"),
        (lambda d: d.update(nodeid=NODE + "\r"), f"belongs to {NODE + chr(13)!r}, not"),  # quoted escaped
        # a trial's 100,000-character node id was quoted whole, one line of 100 KB
        (lambda d: d.update(nodeid="t.py::" + "x" * 100_000), "belongs to 't.py::xxxxxxx"),
        (lambda d: d.update(schema=2.0), "'schema' is 2.0, not a schema this pytest-opprof reads (1, 2)"),
        (lambda d: d.update(events_per_step=[1] * 8 + [2]), "'events_per_step' holds 9 values for 8 steps"),
        (lambda d: d["ops"]["aten::addmm"].update(on_device="x"), "op 'aten::addmm': 'on_device' is 'x', not true"),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=[0.9, 0.7]),
            "op 'aten::addmm': 'recorded_range_ms' is [0.9, 0.7], not [fastest, slowest] (two numbers >= 0 in ms",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=[0.7]),
            "'recorded_range_ms' is [0.7], not [fastest",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms="0.7-0.9"),
            "'recorded_range_ms' is '0.7-0.9', not",
        ),
        # JSON's spelling, as in the file (a trial read `is None`)
        (lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=None), "'recorded_range_ms' is null, not [fastest"),
        (lambda d: d["ops"]["aten::addmm"].update(on_device=None), "'on_device' is null, not true or false"),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=[None, 1]),
            "'recorded_range_ms' is [null, 1], not",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=[True, 1]),
            "'recorded_range_ms' is [true, 1], not",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=[0.1, 0.6]),
            "op 'aten::addmm': 'recorded_range_ms' is [0.1, 0.6], which does not hold the op's own fastest step, 0.7 ms",
        ),
        (
            lambda d: d["ops"]["aten::addmm"].update(recorded_range_ms=[0.8, 2.0]),
            # one fix, the range's own (a trial read two: "delete the op's ...; fix or delete it and run ...")
            "does not hold the op's own fastest step, 0.7 ms (the range is of the measurements the file was recorded "
            "from, its own among them); delete the op's recorded_range_ms (its time is then judged without one), or "
            "delete the file and record the test again",
        ),
        (lambda d: d.update(capture="x"), "'capture' is 'x', not an object"),
        # a trial's `\ud800` escape, valid JSON: the HTML and JSON reports, xdist and `opprof show` crashed
        (lambda d: d["ops"].update({"aten::mm\ud800": d["ops"].pop("aten::addmm")}), "holds '\\ud800', the escape"),
        (lambda d: d.update(nodeid=NODE + "\udc00"), "holds '\\udc00', the escape of half a character"),
        (lambda d: d["environment"].update(torch="2.13\udbff"), "holds '\\udbff'"),
        (
            lambda d: (d.pop("capture"), d.update(events_per_step=[])),
            "'events_per_step' is empty and there is no 'capture",
        ),
    ],
)
def test_values_out_of_range_or_of_the_wrong_length_are_errors_naming_the_file(tmp_path, edit, reason):
    """Negative or fractional counts, negative times, per-step lists of another length than the
    steps, a step count that is not a whole number >= 1: one BaselineError naming the file and
    the field, never a verdict computed from them or an internal error; the file is untouched."""
    assert_edit_refused(tmp_path, edit, reason)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"schema": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply to be a baseline"),
        (
            '{"schema": 2, "x": 1' + "0" * 5000 + "}",
            "a number JSON cannot hold (an integer of 5001 digits; Python reads at most 4300)",
        ),
    ],
)
def test_a_baseline_json_cannot_hold_is_an_error_naming_the_file(tmp_path, text, reason):
    """Nesting deeper than Python's recursion limit and integers of thousands of digits: the
    baseline reader names the file (as the trace reader does), no traceback."""
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        read_baseline(path, NODE)
    assert str(info.value).startswith(f"{path}: {reason}")


def test_a_baseline_without_a_node_id_is_an_error_where_no_node_id_is_expected(tmp_path):
    """`opprof show` reads without an expected node id: a file without one is refused, not
    shown as the test `None`."""
    data = doc(profile()).to_dict()
    del data["nodeid"]
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as info:
        read_baseline(path)
    assert "no 'nodeid': the test's node id; fix or delete it" in str(info.value)


# -- torch threads: the same work on another number of threads --------------------------------


def test_threads_changed_by_the_test_are_a_work_verdict_and_its_cpu_times_are_not_judged():
    """The same machine setup on both sides and the capture ran on 1 thread, not 2: the project
    set them (the test, the code it calls, a conftest, an earlier test). A work change: it fails by
    default on any machine, it is worth a new baseline, and the CPU times it moved are not judged
    on time (the same slowdown on equal threads is a time regression); device times still are."""
    base = threaded(doc(profile(linear=False)), 2)
    slow = threaded(doc(profile(addmm_us=(1400,) * 8, linear=False)), 1)
    c = compare(slow, base, Rule(), path="b.json")
    (verdict,) = c.verdicts
    assert (verdict.kind, verdict.status, verdict.op) == (WORK, "changed", None)
    assert verdict.message == (
        "torch threads 2 -> 1 on the same machine setup (2 cpus): torch.set_num_threads in the test, "
        "the code it calls, a conftest or an earlier test; CPU times not compared [b.json]"
    )
    assert c.failing(Rule()) == [verdict] and c.changes == [verdict]
    assert addmm_verdict(threaded(doc(profile(addmm_us=(1400,) * 8)), 2), threaded(doc(profile()), 2)).status == (
        "regressed"
    )
    device_base = on_device(threaded(doc(profile(linear=False)), 2))
    device_slow = on_device(threaded(doc(profile(addmm_us=(1400,) * 8, linear=False)), 1))
    assert [v.kind for v in compare(device_slow, device_base, Rule()).verdicts] == [WORK, TIME]


def test_a_structure_change_on_other_threads_names_the_thread_count():
    """A verdict trial's one-thread training step failed first on `structure changed: aten::as_strided
    58 -> 56/step, ...` (reductions split otherwise), the cause a line later: the structure verdict
    names the thread count too."""
    base = threaded(doc(profile(linear=False)), 2)
    one = threaded(doc(profile(linear=False, extra_ops=("aten::select",))), 1)
    (structure, threads) = compare(one, base, Rule()).verdicts
    assert structure.kind == STRUCTURE and threads.kind == WORK
    assert structure.message == (
        "structure changed: + aten::select (1/step); torch ran on 1 thread, the baseline on 2: a thread count "
        "changes how some ops split their work"
    )
    assert (
        "torch ran on"
        not in compare(threaded(doc(profile(linear=False, extra_ops=("aten::select",))), 2), base, Rule())
        .verdicts[0]
        .message
    )


def test_threads_on_another_machine_setup_are_environment_and_make_cpu_times_inconclusive():
    """Another setup (more CPUs, OMP_NUM_THREADS): an environment verdict, not failing;
    a CPU time moved either way is inconclusive with the reason and its own fix (the machine
    references ran on those threads too, so they cannot judge it)."""
    base = threaded(doc(profile()).replace(reference_ms=0.4), 2, setup="2 cpus")
    for addmm_us, direction in (((1400,) * 8, "slower"), ((300,) * 8, "faster")):
        new = threaded(doc(profile(addmm_us=addmm_us)).replace(reference_ms=0.4), 4, setup="4 cpus")
        c = compare(new, base, Rule())
        environment = next(v for v in c.verdicts if v.kind == ENVIRONMENT)
        assert "torch threads 2 -> 4 (another machine setup: 2 cpus -> 4 cpus)" in environment.message
        addmm = addmm_verdict(new, base)
        assert addmm.status == "inconclusive" and f", {direction}; inconclusive: " in addmm.message
        assert addmm.why == "torch ran on 4 threads, the baseline on 2"
        assert addmm.fix.startswith("record the baseline on the machine that checks it")
        assert c.failing(Rule()) == [] and c.unchanged
    one = threaded(doc(profile(addmm_us=(1400,) * 8)), 1, setup="2 cpus, OMP_NUM_THREADS=1")
    assert addmm_verdict(one, base).why == "torch ran on 1 thread, the baseline on 2"
    contended = addmm_verdict(doc(profile(addmm_us=(1400,) * 8)), doc(profile()), Machine(cpu_wait=0.5))
    assert contended.fix.startswith("rerun on a quiet machine")


def test_another_thread_count_explains_a_move_only_up_to_its_reach():
    """A trial's baseline recorded with OMP_NUM_THREADS=1 excused a 50x slower addmm on 2 threads,
    in every later run (a plain recording keeps the file). 1 -> 2 threads explains an op up to x5
    either way (OP_SLACK times the ratio): x2 is inconclusive, x50 fails saying so."""
    base = threaded(doc(profile()).replace(reference_ms=0.4, dispatch_reference_ms=0.4), 1, "2 cpus, OMP_NUM_THREADS=1")

    def on_two(addmm_us: float):
        return threaded(doc(profile(addmm_us=(addmm_us,) * 8)).replace(reference_ms=0.25, dispatch_reference_ms=0.4), 2)

    assert addmm_verdict(on_two(1400), base).why == "torch ran on 2 threads, the baseline on 1"
    assert addmm_verdict(on_two(140), base).why == "torch ran on 2 threads, the baseline on 1"  # x5 faster
    fifty = addmm_verdict(on_two(35_000), base)
    assert fifty.status == "regressed"
    assert "; torch ran on 2 threads, the baseline on 1: that explains up to x5.00, not x50.00)" in fifty.message
    assert addmm_verdict(on_two(100), base).status == "improved"  # x7 faster: more than the threads explain
    # the Python between the ops runs on one thread either way: the threads explain no slower wall (a review)
    old_wall = walled(base, 10.0)
    new_wall = threaded(walled(doc(profile()), 25.0).replace(reference_ms=0.25, dispatch_reference_ms=0.4), 2)
    (wall,) = [v for v in compare(new_wall, old_wall, Rule()).verdicts if v.op == STEP_WALL]
    assert wall.status == "regressed" and "torch ran on" not in wall.message


def test_another_thread_setup_names_the_part_that_differs_and_its_fix_the_baselines_values():
    """A trial ran with MKL_NUM_THREADS=1 OMP_NUM_THREADS=2 against a baseline of neither: the
    line read `2 cpus -> 2 cpus, OMP_NUM_THREADS=2, MKL_NUM_THREADS=1` and its fix said to set
    OMP_NUM_THREADS, already set. Each part that differs is named, the fix the baseline's values."""
    base = threaded(doc(profile()).replace(reference_ms=0.4), 2, setup="2 cpus")
    new = threaded(
        doc(profile(addmm_us=(1400,) * 8)).replace(reference_ms=0.4), 1,
        setup="2 cpus, OMP_NUM_THREADS=2, MKL_NUM_THREADS=1",
    )  # fmt: skip
    environment = next(v for v in compare(new, base, Rule()).verdicts if v.kind == ENVIRONMENT)
    assert environment.why == (
        "torch threads 2 -> 1 (another machine setup: OMP_NUM_THREADS unset -> 2, MKL_NUM_THREADS unset -> 1)"
    )
    assert addmm_verdict(new, base).fix == (
        "record the baseline on the machine that checks it (--opprof-update-baseline=all there), or run with the "
        "baseline's thread variables: env -u OMP_NUM_THREADS -u MKL_NUM_THREADS pytest ..."
    )
    more = threaded(doc(profile(addmm_us=(300,) * 8)).replace(reference_ms=0.4), 4, setup="4 cpus, 2 cores")
    environment = next(v for v in compare(more, base, Rule()).verdicts if v.kind == ENVIRONMENT)
    assert environment.why == "torch threads 2 -> 4 (another machine setup: 2 cpus -> 4 cpus)"  # 2 cores each
    smt = threaded(doc(profile()).replace(reference_ms=0.4), 1, setup="2 cpus, 1 core")  # a review's `? core`
    assert next(v for v in compare(smt, base, Rule()).verdicts if v.kind == ENVIRONMENT).why == (
        "torch threads 2 -> 1 (another machine setup: 2 cores -> 1 core)"
    )
    assert addmm_verdict(more, base).fix.endswith("or set OMP_NUM_THREADS=2 (the baseline's count)")
    set_there = threaded(doc(profile()).replace(reference_ms=0.4), 2, setup="2 cpus, MKL_NUM_THREADS=2")
    assert addmm_verdict(new, set_there).fix.endswith(
        "thread variables: env -u OMP_NUM_THREADS MKL_NUM_THREADS=2 pytest ..."
    )
    # the variables differ and so do the CPUs: the baseline's variables alone would give another
    # count here (`env -u OMP_NUM_THREADS` on 4 cpus: 4 threads, not the baseline's 2)
    wide = threaded(doc(profile(addmm_us=(300,) * 8)).replace(reference_ms=0.4), 1, setup="4 cpus, OMP_NUM_THREADS=1")
    assert addmm_verdict(wide, base).fix.endswith(
        "or run with the baseline's thread count: env OMP_NUM_THREADS=2 pytest ..."
    )
    both = threaded(
        doc(profile(addmm_us=(300,) * 8)).replace(reference_ms=0.4), 1, setup="4 cpus, MKL_NUM_THREADS=1"
    )  # fmt: skip
    assert addmm_verdict(both, base).fix.endswith("thread count: env -u MKL_NUM_THREADS OMP_NUM_THREADS=2 pytest ...")


def test_a_thread_variable_set_inside_pytest_is_fixed_where_it_is_set_not_by_the_shells_env():
    """pytest-env's `env = ["OMP_NUM_THREADS=1"]` sets the variable inside the pytest process: a
    trial's fix `env -u OMP_NUM_THREADS pytest ...` ran on the same 1 thread. The fix says where
    it is set instead."""
    from pytest_opprof.excuses import threads_fix

    base = threaded(doc(profile()).replace(reference_ms=0.4), 2, setup="2 cpus")
    new = threaded(doc(profile(addmm_us=(1400,) * 8)).replace(reference_ms=0.4), 1, setup="2 cpus, OMP_NUM_THREADS=1")
    assert threads_fix(new, base).endswith("env -u OMP_NUM_THREADS pytest ...")  # set by the shell: it can unset it
    assert threads_fix(new, base, ("OMP_NUM_THREADS",)) == (
        "record the baseline on the machine that checks it (--opprof-update-baseline=all there), or run with the "
        "baseline's thread variables (unset OMP_NUM_THREADS): OMP_NUM_THREADS is set inside the pytest process "
        "(pytest-env's env ini key, a conftest or a plugin), where the shell's env cannot change it: change it there"
    )


def test_unknown_threads_on_either_side_compare_as_before():
    """A baseline from before threads were recorded (or from a trace): no thread verdict, and
    the machine references judge as they did."""
    base = doc(profile())
    assert base.threads is None
    slow = threaded(doc(profile(addmm_us=(1400,) * 8)), 1)
    assert {(v.kind, v.status) for v in compare(slow, base, Rule()).verdicts} == {(TIME, "regressed")}
    same_setup_unknown = threaded(doc(profile(addmm_us=(1400,) * 8)), 1, setup=None)
    c = compare(same_setup_unknown, threaded(doc(profile()), 2, setup=None), Rule())
    assert {v.kind for v in c.verdicts} == {ENVIRONMENT, TIME} and c.failing(Rule()) == []


def test_threads_are_written_in_the_capture_object_only_when_known(tmp_path):
    """capture.threads holds the capture's thread count and environment.thread_setup what sets
    the machine's default; a document without threads (older file, a trace) reads and writes back without
    the key, byte for byte."""
    known = threaded(doc(profile()), 1)
    data = known.to_dict()
    assert data["capture"]["threads"] == 1 and data["environment"]["thread_setup"] == "2 cpus"
    path = tmp_path / "b.json"
    write_baseline(path, known)
    assert read_baseline(path, NODE).threads == 1
    old = doc(profile()).to_dict()
    assert "threads" not in old["capture"]
    path.write_text(dumps(old))
    before = path.read_bytes()
    write_baseline(path, read_baseline(path, NODE))
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("threads", "reason"),
    [
        ("2", "'capture.threads' is '2', not a whole number of threads (1 to 65536) or null"),
        (0, "'capture.threads' is 0, not"),
        (-1, "'capture.threads' is -1, not"),
        (True, "'capture.threads' is true, not"),
        (2.0, "'capture.threads' is 2.0, not"),
        (10**6, "'capture.threads' is 1000000, not"),
    ],
)
def test_a_hand_edited_thread_count_is_an_error_naming_the_file(tmp_path, threads, reason):
    """capture.threads that is not a whole number of threads: one error naming file and field."""
    assert_edit_refused(tmp_path, lambda d: d["capture"].update(threads=threads), reason)


@pytest.mark.parametrize(
    ("wait", "reason"),
    [
        ("0.5", "'capture.cpu_wait' is '0.5', not a share of the capture (0 to 1000) or null"),
        (-0.1, "'capture.cpu_wait' is -0.1, not"),
        (True, "'capture.cpu_wait' is true, not"),
        (1e9, "'capture.cpu_wait' is 1000000000.0, not"),
    ],
)
def test_a_hand_edited_cpu_wait_is_an_error_naming_the_file(tmp_path, wait, reason):
    """capture.cpu_wait (a baseline recorded under load) that is not a share: one error naming it."""
    assert_edit_refused(tmp_path, lambda d: d["capture"].update(cpu_wait=wait), reason)


def test_a_baseline_recorded_under_load_holds_its_wait_and_one_recorded_calm_none(tmp_path):
    """The written measurement's CPU wait is kept where it was contended (a later run names the
    baseline), as capture.cpu_wait; a calm one writes no key (files as before)."""
    from pytest_opprof.decide import Measurement, decide
    from pytest_opprof.verdicts import Machine, Rule

    loaded = decide(Measurement(doc(profile()), Machine(cpu_wait=1.2712)), None, Rule(), "changed").write
    assert loaded.recorded_wait == 1.271 and loaded.to_dict()["capture"]["cpu_wait"] == 1.271  # 4 significant digits
    path = tmp_path / "b.json"
    write_baseline(path, loaded)
    assert read_baseline(path, NODE).recorded_wait == 1.271
    calm = decide(Measurement(doc(profile()), Machine(cpu_wait=0.05)), None, Rule(), "changed").write
    assert calm.recorded_wait is None and "cpu_wait" not in calm.to_dict()["capture"]


def test_the_capture_number_is_written_and_a_file_without_one_reads_back_the_same(tmp_path):
    """capture.number says which of the test's captures the file holds (run() judges only that one
    early), from 1; a file written before numbers has no key: it reads as None (unknown) and writes
    back byte for byte."""
    first = baseline_from_profile(profile(), NODE, "cpu-x86_64", {})
    assert first.number == 1 and first.to_dict()["capture"]["number"] == 1
    second = baseline_from_profile(profile(), NODE, "cpu-x86_64", {}, 2)
    assert second.number == 2 and second.to_dict()["capture"]["number"] == 2
    path = tmp_path / "b.json"
    write_baseline(path, second)
    assert read_baseline(path, NODE).number == 2
    old = first.to_dict()
    del old["capture"]["number"]
    path.write_text(dumps(old))
    before = path.read_bytes()
    assert read_baseline(path, NODE).number is None
    write_baseline(path, read_baseline(path, NODE))
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        ("2", "'capture.number' is '2', not which of the test's captures it holds (1 to 1000000) or null"),
        (0, "'capture.number' is 0, not"),
        (True, "'capture.number' is true, not"),
        (2.0, "'capture.number' is 2.0, not"),
        (10**7, "'capture.number' is 10000000, not"),
    ],
)
def test_a_hand_edited_capture_number_is_an_error_naming_the_file(tmp_path, number, reason):
    """capture.number that is not a capture's number: one error naming file and field."""
    assert_edit_refused(tmp_path, lambda d: d["capture"].update(number=number), reason)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("aten::mm", "'capture.unrepeated' is 'aten::mm', not a list of op names or null"),
        ([1], "'capture.unrepeated' is [1], not a list of op names or null"),
        ([""], "'capture.unrepeated' is [''], not"),
        (["aten::mm\x1b[31m"], "'capture.unrepeated' is "),
    ],
)
def test_a_hand_edited_unrepeated_list_is_an_error_naming_the_file(tmp_path, value, reason):
    """capture.unrepeated that is not a list of op names: one error naming file and field."""
    assert_edit_refused(tmp_path, lambda d: d["capture"].update(unrepeated=value), reason)


def test_the_ops_that_varied_when_recorded_are_kept_and_said_by_a_later_change():
    """capture.unrepeated (the ops whose work varied in the recording's further measurements of
    run()'s fn) is written only where some did, read back, and a later structure or work change in
    one of them says fn keeps state (an LLM trial's growing cache failed on `warmup=` alone)."""
    base = doc(mlp_profile(steps=6))
    assert "unrepeated" not in base.to_dict()["capture"]
    varied = base.replace(unrepeated=("aten::addmm",))
    assert varied.to_dict()["capture"]["unrepeated"] == ["aten::addmm"]
    assert BaselineDoc.from_dict(json.loads(json.dumps(varied.to_dict()))).unrepeated == ("aten::addmm",)
    wider = doc(mlp_profile(hidden=2048, steps=6))
    clause = "when the baseline was recorded, run()'s fn did other work from call to call"
    (work,) = [v for v in compare(wider, varied, Rule()).verdicts if v.kind == "work" and v.op == "aten::addmm"]
    assert clause + " in aten::addmm (the data it reads, or state it keeps such as a growing cache)" in work.message
    assert work.message.endswith("Confirmation by more measurements)")  # no file given: nothing after it
    assert clause in compare(varied, wider, Rule()).verdicts[0].message  # either side's (opprof compare A B)
    assert all(clause not in v.message for v in compare(wider, base, Rule()).verdicts)
    fewer = base.replace(ops={**base.ops, "aten::addmm": replace(base.ops["aten::addmm"], calls_per_step=(1.0,) * 6)})
    (structure,) = [v for v in compare(fewer, varied, Rule()).verdicts if v.kind == "structure"]
    assert f"; {clause} in aten::addmm (the data it reads, or state it keeps" in structure.message


def test_autocast_removed_is_named_only_where_both_sides_hold_the_ops_work():
    """Casts gone and bf16 inputs on the baseline's side only: `autocast removed`; a baseline that
    holds no work (schema 1, `work` null, a trace without record_shapes) says nothing of types,
    so no clause (a review's: it read as `none in the baseline: autocast added`)."""
    from pytest_opprof.compare import CAST_OPS

    assert "aten::to" in CAST_OPS
    bf16, plain = doc(mlp_profile(dtype="c10::BFloat16", steps=6)), doc(mlp_profile(steps=6))
    to = {"aten::to": replace(bf16.ops["aten::addmm"], work=None, calls_per_step=(2.0,) * 6)}
    baseline = bf16.replace(ops={**bf16.ops, **to})
    (structure,) = [v for v in compare(plain, baseline, Rule()).verdicts if v.kind == "structure"]
    assert structure.message.startswith(
        "structure changed: the baseline's ops took c10::BFloat16 (torch.bfloat16) inputs, none here: the model "
        "or its inputs in another dtype now (model.to(...), a cast), or autocast removed (its casts and "
        "re-dispatched calls, an op called inside itself, were in these counts); the ops: "
    )
    assert "- aten::to (was 2/step)" in structure.message
    (structure,) = [v for v in compare(baseline, plain, Rule()).verdicts if v.kind == "structure"]
    assert (
        "structure changed: the ops take c10::BFloat16 (torch.bfloat16) inputs here, none in the baseline: the "
        "model or its inputs cast to it now (model.to(...), a cast), or autocast added"
    ) in structure.message
    workless = plain.replace(ops={name: replace(e, work=None) for name, e in plain.ops.items()})
    (structure,) = [v for v in compare(baseline, workless, Rule()).verdicts if v.kind == "structure"]
    assert "autocast" not in structure.message


def counts_doc(counts):
    """A document of steps making counts[i] calls of aten::linear in step i (and one aten::relu)."""
    events = []
    for i, n in enumerate(counts):
        base = i * 1000
        events.append(step(i + 1, base, 1000))
        events += [op("aten::linear", base + 10 + 20 * k, 10) for k in range(n)]
        events.append(op("aten::relu", base + 900, 10))
    return doc(analyze(events))


def test_per_step_counts_the_median_hides_are_a_structure_change():
    """A data trial's early exit never taken any more (aten::linear 14, 14, 2 -> 14 every step)
    kept its median and passed structure and work: a count one side made in 2 steps or more and the
    other in none, past x2 of every count there, is a structure change; counts near the other
    side's (a window moved by -k or warmup=) are not."""
    (verdict,) = [v for v in compare(counts_doc([14] * 9), counts_doc([14, 14, 2] * 3), Rule()).verdicts]
    assert verdict.kind == STRUCTURE and verdict.message == (
        "structure changed: aten::linear per step 14, 14, 2, 14, 14, 2, ... -> 14, 14, 14, 14, 14, 14, ... "
        "(2/step in 3 of 9 baseline steps, in no step now; the median 14 the same)"
    )
    (verdict,) = compare(counts_doc([14, 14, 40] * 3), counts_doc([14] * 9), Rule()).verdicts
    assert "(40/step in 3 of 9 steps now, in no baseline step; the median 14 the same)" in verdict.message
    assert not compare(counts_doc([14, 2, 14] * 3), counts_doc([14, 14, 2] * 3), Rule()).verdicts  # shifted
    assert not compare(counts_doc([4, 4, 4, 2, 2]), counts_doc([4, 4, 4, 3, 3]), Rule()).verdicts  # near: x1.5
    assert not compare(counts_doc([14] * 8 + [2]), counts_doc([14] * 9), Rule()).verdicts  # in one step only
