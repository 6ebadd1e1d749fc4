"""What each field of a trace file reads as, and what is refused: a device event's device and
stream, op inputs, our header's fields, thread ids, categories, number bounds. Each test here pins
a behaviour a mutation trial of the reader (trace.py, kineto.py, events.py) found no test held, or a
bug it found. Small hand-made Kineto JSON or write_trace'd events, read through the public reader."""

from __future__ import annotations

import codecs
import gzip
import json
from pathlib import Path

import pytest
from builders import op, step

from pytest_opprof import TraceError, load_trace
from pytest_opprof.chrome import write_trace
from pytest_opprof.events import LIST_LIMIT
from pytest_opprof.trace import read_trace, us_text_to_ns


def write_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def minimal_trace() -> dict:
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 3}
    return {"traceEvents": [event]}


def mm_with_kernel(kernel_args: dict) -> list[dict]:
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "0.000", "dur": "10.000",
         "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": "1.000",
         "dur": "1.000", "args": {"correlation": 5, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": "2.000", "dur": "5.000",
         "args": {"correlation": 5, "External id": 1, **kernel_args}},
    ]  # fmt: skip


@pytest.mark.parametrize("args", [{"device": [0], "stream": 7}, {"device": 0, "stream": {"id": 7}}, {"stream": None}])
def test_a_device_event_whose_device_or_stream_is_no_id_is_refused(tmp_path, args):
    """A kernel's `device` or `stream` that is neither a number nor a name is a one-line error,
    not a kernel read on device -1 (mutant: the raise in _ArgColumns.take dropped)."""
    path = write_json(tmp_path / "t.json", {"traceEvents": mm_with_kernel(args)})
    with pytest.raises(TraceError, match=r"complete event 2 \('gemm'\): device or stream .* is not a number or a name"):
        read_trace(path)


def test_a_device_event_reads_its_device_and_stream_from_its_args(tmp_path):
    """A string stream (`"stream 7"`) gets a stable id; an int device is taken as it is."""
    path = write_json(tmp_path / "t.json", {"traceEvents": mm_with_kernel({"device": 3, "stream": 9})})
    (gemm,) = [e for e in read_trace(path).events if e.name == "gemm"]
    assert (gemm.device, gemm.stream, gemm.pid, gemm.tid) == (3, 9, 0, 7)


@pytest.mark.parametrize("types", ["float", ["float", 3], None])
def test_an_ops_inputs_with_no_list_of_type_names_are_taken_as_not_recorded(tmp_path, types):
    """Input Dims that are shapes but an `Input type` that is not a list of names (hand-edited,
    another tool's): the op is read without inputs and without FLOPs, not a traceback (mutants of
    _inputs' second `return (), (), 0`)."""
    args = {"External id": 1, "Input Dims": [[2, 3], [3, 4]], "Input type": types, "flops": 48}
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": args}
    (mm,) = read_trace(write_json(tmp_path / "t.json", {"traceEvents": [event]})).events
    assert (mm.shapes, mm.dtypes, mm.flops) == ((), (), 0)


def _uneven_steps() -> list:
    events = []
    for s in range(3):  # 2, 2, then 1 call: the last step cut short
        events.append(step(s + 1, s * 100, 100))
        events += [op("aten::mm", s * 100 + 10 + 30 * k, 20) for k in range(2 if s < 2 else 1)]
    return events


def test_a_trace_exported_cut_in_its_last_step_reads_back_as_such(tmp_path):
    """Our header's `cut_in_step` (the test's exception ended the last step part way): the profile
    says so and the uneven last step is `not compared`, as the live capture judged it; without the
    header the same steps warn."""
    write_trace(tmp_path / "cut.json", _uneven_steps(), {"opprof": {"cut_in_step": True}})
    cut = load_trace(tmp_path / "cut.json")
    assert cut.cut_in_step is True
    (steps,) = [c for c in cut.checks if c.name == "step_events"]
    assert (steps.status, steps.message) == ("ok", "not compared: the test's exception ended step 3 part way")
    write_trace(tmp_path / "whole.json", _uneven_steps(), {"opprof": {"cut_in_step": "yes"}})  # only `true` is
    whole = load_trace(tmp_path / "whole.json")
    assert whole.cut_in_step is False
    assert [c.status for c in whole.checks if c.name == "step_events"] == ["warning"]


@pytest.mark.parametrize(
    "reference",
    [
        {"op": "aten::mm", "shapes": [[2, 3]], "dtypes": ["float"], "ns": None},
        {"op": "aten::mm", "shapes": [[2, 3]], "dtypes": ["float"], "ns": 0},
        {"op": 5, "shapes": [[2, 3]], "dtypes": ["float"], "ns": 100},
        {"op": "aten::mm", "shapes": "2x3", "dtypes": ["float"], "ns": 100},
    ],
)
def test_a_malformed_workload_reference_in_the_header_is_left_unknown(tmp_path, reference):
    """A hand-edited `workload_reference` is no reference (and no AssertionError traceback)."""
    write_trace(
        tmp_path / "t.json", [step(1, 0, 100), op("aten::mm", 10, 20)], {"opprof": {"workload_reference": reference}}
    )
    assert load_trace(tmp_path / "t.json").workload_reference is None


@pytest.mark.parametrize("steps", [-1, "2", 2.0, None, True])
def test_an_exported_work_header_needs_a_whole_number_of_work_steps(tmp_path, steps):
    """`work_steps` that is not an int >= 0 makes the `opprof.work` header malformed, said in one line."""
    header = {"work": {}, "work_steps": steps} if steps is not None else {"work": {}}
    write_trace(tmp_path / "t.json", [step(1, 0, 100), op("aten::mm", 10, 20)], {"opprof": header})
    with pytest.raises(TraceError, match=r"the 'opprof.work' header is malformed \(work_steps "):
        load_trace(tmp_path / "t.json")


def test_a_cpu_wait_of_zero_is_no_contention(tmp_path):
    """`cpu_wait: 0` (the threads never waited for a CPU) gives no contention warning, with or
    without other threads named."""
    events = [step(1, 0, 100), op("aten::mm", 10, 20)]
    others = [{"name": "pool_0", "cpu_ms": 5.0}]
    write_trace(tmp_path / "t.json", events, {"opprof": {"cpu_wait": 0, "overhead": "5.0", "other_threads": others}})
    checks = {c.name: c for c in load_trace(tmp_path / "t.json").checks}
    assert "contention" not in checks
    assert "while" not in checks["overhead"].message  # not blamed on other load


def test_from_profiler_reads_torchs_autograd_profiler():
    """torch.autograd.profiler.profile has no schedule: one that recorded nothing is a profile of no
    ops, and one with acc_events=True is read as any (mutants: the `None` of _schedule_run and
    _cycle_cleared_at for a profiler without a schedule, the `1` of _cycles_kept_last)."""
    torch = pytest.importorskip("torch")
    from pytest_opprof import from_profiler

    with torch.autograd.profiler.profile() as idle:
        pass
    assert from_profiler(idle).ops == ()
    with torch.autograd.profiler.profile(acc_events=True) as prof:
        torch.ones(3).add(1)
    profile = from_profiler(prof)
    assert profile.op("aten::add").calls == 1
    assert "cycles" not in {c.name for c in profile.checks}


@pytest.mark.parametrize(("text", "ns"), [("1.5e3", 1_500_000), ("2.5E2", 250_000), ("1.25e-1", 125)])
def test_a_decimal_with_an_exponent_is_read_exactly(text, ns):
    """A fraction and an exponent together (another tool's writer: `1.5e3`): exact, not refused
    (mutant: the exponent test of _decimal_text_to_ns inverted, `1.5e3` sent to the 3-decimals path)."""
    assert us_text_to_ns(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        "-9223372036854775.808",  # exactly -2**63 ns: beyond the int64 clock, as +2**63 is
        "0." + "0" * 70 + "1",  # 73 characters: past the 64 a number may have
    ],
)
def test_the_bounds_of_a_number_of_microseconds(text):
    with pytest.raises(ValueError):
        us_text_to_ns(text)
    assert us_text_to_ns("-9223372036854775.807") == -(2**63) + 1
    assert us_text_to_ns("0." + "0" * 60 + "1") == 0  # 63 characters: read


def test_a_gzip_of_a_bare_event_list_is_a_trace(tmp_path):
    """The Chrome format's bare list of events, gzip-compressed: its first chunk opens with `[`
    (mutant: `[` dropped from the openings _check_json_text allows)."""
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    path = tmp_path / "list.json.gz"
    path.write_bytes(gzip.compress(json.dumps([event]).encode()))
    assert [e.name for e in read_trace(path).events] == ["aten::mm"]


@pytest.mark.parametrize(
    ("category", "kind"),
    [
        ("operator", "cpu_op"),
        ("cuda_driver", "runtime"),
        ("hip_runtime", "runtime"),
        ("privateuse1_runtime", "runtime"),
        ("privateuse1_driver", "runtime"),
        ("xpu_runtime", "runtime"),
        ("xpu_driver", "runtime"),
        ("mtia_runtime", "runtime"),
    ],
)
def test_each_category_kineto_writes_is_read_as_its_kind(tmp_path, category, kind):
    """Every category of the table reads as its kind: no real trace holds `hip_runtime`,
    `operator` or the xpu/mtia ones, and the Triton trace's one `cuda_driver` call was checked by
    nothing (mutants: each table entry emptied or dropped)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": category, "name": "call", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 5}},
    ]
    path = write_json(tmp_path / "t.json", {"traceEvents": events})
    assert [(e.name, e.kind) for e in read_trace(path).events] == [("aten::mm", "cpu_op"), ("call", kind)]


def test_a_list_of_exactly_list_limit_tensors_keeps_its_shapes(tmp_path):
    """A list of LIST_LIMIT tensors keeps each shape; one more and the list's shapes are `[]`."""

    def mm(n):
        dims = [[[2, 2]] * n, [2]]
        args = {"Input Dims": dims, "Input type": ["TensorList", "float"]}
        return {"ph": "X", "cat": "cpu_op", "name": "aten::cat", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": args}

    for n, shapes in ((LIST_LIMIT, (((2, 2),) * LIST_LIMIT, (2,))), (LIST_LIMIT + 1, ((), (2,)))):
        (event,) = read_trace(write_json(tmp_path / "t.json", {"traceEvents": [mm(n)]})).events
        assert event.shapes == shapes


def test_reading_a_trace_leaves_the_garbage_collector_as_it_found_it(tmp_path):
    """gc is paused while the events are built, and enabled again after (mutant: gc.enable()
    dropped from gc_paused: every later allocation of the process went uncollected)."""
    import gc

    path = write_json(tmp_path / "t.json", minimal_trace())
    assert gc.isenabled()
    load_trace(path)
    assert gc.isenabled()
    gc.disable()
    try:
        load_trace(path)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_machine_speed_references_an_exported_trace_carries_are_read(tmp_path):
    events = [step(1, 0, 100), op("aten::mm", 10, 20)]
    header = {"reference_ns": 1200, "dispatch_reference_ns": 300, "small_reference_ns": 140}
    write_trace(tmp_path / "t.json", events, {"opprof": header})
    profile = load_trace(tmp_path / "t.json")
    assert (profile.reference_ns, profile.dispatch_reference_ns, profile.small_reference_ns) == (1200, 300, 140)
    write_trace(tmp_path / "u.json", events, {"opprof": {"dispatch_reference_ns": 300}})
    profile = load_trace(tmp_path / "u.json")
    assert (profile.reference_ns, profile.dispatch_reference_ns, profile.small_reference_ns) == (None, 300, None)
    huge = {"reference_ns": 10**40, "dispatch_reference_ns": 300, "small_reference_ns": 10**15}  # no readings
    write_trace(tmp_path / "v.json", events, {"opprof": huge})
    profile = load_trace(tmp_path / "v.json")
    assert (profile.reference_ns, profile.dispatch_reference_ns, profile.small_reference_ns) == (None, 300, None)


@pytest.mark.parametrize(
    ("overhead", "read"), [("0", None), ("0.0", None), ("1e6", None), ("999999", 999999.0), ("2.5", 2.5)]
)
def test_the_overhead_an_exported_trace_carries_is_read_when_it_is_a_ratio(tmp_path, overhead, read):
    write_trace(tmp_path / "t.json", [step(1, 0, 100), op("aten::mm", 10, 20)], {"opprof": {"overhead": overhead}})
    assert load_trace(tmp_path / "t.json").overhead == read


def test_an_ops_single_flop_is_kept(tmp_path):
    args = {"Input Dims": [[1], [1]], "Input type": ["float", "float"], "flops": 1}
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": args}
    (mul,) = read_trace(write_json(tmp_path / "t.json", {"traceEvents": [event]})).events
    assert (mul.shapes, mul.flops) == (((1,), (1,)), 1)


@pytest.mark.parametrize(("tid", "text"), [(1, "1"), (1, 1), (-3, "-3")])
def test_a_thread_given_as_the_text_of_a_number_is_that_thread(tmp_path, tid, text):
    """`"tid": "1"` and `"tid": 1` are the same thread: the op nests in the step either way
    (mutants: the tid column left unconverted, `return int(value)` in _int_id)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": tid, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "1", "tid": text, "ts": 10, "dur": 20},
    ]
    trace = read_trace(write_json(tmp_path / "t.json", {"traceEvents": events}))
    assert [(e.pid, e.tid) for e in trace.events] == [(1, tid), (1, tid)]


def test_a_copy_launched_by_a_call_whose_size_is_no_whole_number_has_no_bytes(tmp_path):
    """ROCm: a copy without bytes takes its launching call's `size`; a size that is no whole
    number (hand-edited) is none, and the copy reads 0 bytes, not None (mutant: the `is not None`
    of _ArgColumns.take forced)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyAsync", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
         "args": {"correlation": 5, "size": "-4"}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "CopyHostToDevice", "pid": 0, "tid": 7, "ts": 2, "dur": 3,
         "args": {"correlation": 5, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyAsync", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
         "args": {"correlation": 6, "size": "2560"}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "CopyHostToDevice", "pid": 0, "tid": 7, "ts": 6, "dur": 3,
         "args": {"correlation": 6, "device": 0, "stream": 7}},
    ]  # fmt: skip
    trace = read_trace(write_json(tmp_path / "t.json", {"traceEvents": events}))
    assert [e.bytes for e in trace.events if e.kind == "memcpy"] == [0, 2560]


@pytest.mark.parametrize(
    ("name", "bare"),
    [
        ("aten::mm.default", "aten::mm"),
        ("prim::TupleConstruct.default", "prim::TupleConstruct"),
        ("aten::mm", None),
        ("my::op.default", None),
        ("ProfilerStep#1", None),
    ],
)
def test_a_schema_name_is_told_from_the_profilers_name(name, bare):
    """aten and prim ops are named without their overload by the profiler: an ignore glob with one
    (`prim::TupleConstruct.default`) is refused, as it would ignore nothing (mutant: "prim" emptied
    in without_overload, and the glob taken in silence)."""
    from pytest_opprof.events import without_overload
    from pytest_opprof.settings import parse_globs

    assert without_overload(name) == bare
    if bare is not None:
        with pytest.raises(ValueError, match="op globs without overloads"):
            parse_globs(name)


def test_a_trace_the_system_will_not_read_is_one_line(tmp_path, monkeypatch):
    """An OSError other than a missing file or a folder (permission denied as a non-root user, an
    I/O error) names the file and the reason (mutant: that raise dropped: UnboundLocalError)."""
    import pytest_opprof.trace as trace_module

    def denied(path, limit):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(trace_module, "read_regular", denied)
    path = write_json(tmp_path / "t.json", minimal_trace())
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: cannot be read (Permission denied)")


def test_an_events_kind_says_whether_it_is_device_work():
    """Event.is_device (public: Event is exported), unused by the reader itself."""
    from builders import kernel, launch, memcpy

    assert [e.is_device for e in (op("aten::mm", 0, 1), launch(0, 1), kernel("k", 0, 1), memcpy("m", 0, 1, 8))] == [
        False, False, True, True,
    ]  # fmt: skip


def test_a_utf8_byte_order_mark_is_read_gzipped_or_not(tmp_path):
    """A trace re-saved by a tool that writes a BOM: read as the same trace, compressed or not
    (the gzip's first chunk was refused as `not a JSON trace inside the gzip`)."""
    raw = codecs.BOM_UTF8 + json.dumps(minimal_trace()).encode()
    (tmp_path / "bom.json").write_bytes(raw)
    (tmp_path / "bom.json.gz").write_bytes(gzip.compress(raw))
    for name in ("bom.json", "bom.json.gz"):
        assert [e.name for e in read_trace(tmp_path / name).events] == ["aten::mm"]


def test_a_named_thread_is_never_a_numbered_one(tmp_path):
    """Names get negative ids: one no number of the trace is (`"tid": "main"` had become -2, and
    merged with a thread numbered -2); the same name is one id across pid, tid and stream."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": "main", "ts": 0, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": -2, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": -3, "ts": 20, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "d", "pid": 1, "tid": "main", "ts": 30, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 40, "dur": 5,
         "args": {"device": 0, "stream": "main"}},
    ]  # fmt: skip
    trace = read_trace(write_json(tmp_path / "t.json", {"traceEvents": events}))
    tids = {e.name: e.tid for e in trace.events}
    assert tids["a"] == tids["d"] not in (-1, -2, -3)
    assert (tids["b"], tids["c"]) == (-2, -3)
    (kernel,) = [e for e in trace.events if e.name == "k"]
    assert kernel.stream == tids["a"]


@pytest.mark.parametrize(("written", "read"), [("1.0", 1), ("7.000", 7), ("2e1", 20), ("-3.0", -3)])
def test_a_whole_number_written_as_a_decimal_is_that_thread(tmp_path, written, read):
    """`"tid": 1.0` (another tool's writer) is thread 1, not a name of its own."""
    text = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 0, "ts": 0,
                                        "dur": 5}]}).replace('"tid": 0', f'"tid": {written}')  # fmt: skip
    (tmp_path / "t.json").write_text(text)
    assert [e.tid for e in read_trace(tmp_path / "t.json").events] == [read]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tid", "1.5", r"a complete event's 'tid': 1.5 is not a whole number below 2\*\*63 nor a name"),
        ("stream", "1.5", r"device or stream 1.5 is not a whole number below 2\*\*63 nor a name"),
        ("tid", "1e30", r"a complete event's 'tid': 1e30 is not a whole number below 2\*\*63 nor a name"),
    ],
)
def test_a_fraction_is_no_thread_nor_stream(tmp_path, field, value, message):
    """A fraction (or a number past int64) as a thread or stream id names the field and the value
    (it was taken as a name)."""
    events = mm_with_kernel({"device": 0, "stream": 0})
    text = json.dumps({"traceEvents": events})
    text = (
        text.replace('"tid": 7', f'"tid": {value}')
        if field == "tid"
        else text.replace('"stream": 0', f'"stream": {value}')
    )
    (tmp_path / "t.json").write_text(text)
    with pytest.raises(TraceError, match=message):
        read_trace(tmp_path / "t.json")


@pytest.mark.parametrize("given", [1, 0, "true"])
def test_an_other_threads_given_work_is_true_or_false(tmp_path, given):
    """Our header's `given_work` is JSON true or false; a 1 or 0 (hand-edited) makes the entry none."""
    threads = [
        {"name": "pool_0", "cpu_ms": 5.0, "given_work": given},
        {"name": "pool_1", "cpu_ms": 5.0, "given_work": False},
    ]
    write_trace(tmp_path / "t.json", [step(1, 0, 100), op("aten::mm", 10, 20)], {"opprof": {"other_threads": threads}})
    assert [(t.name, t.given_work) for t in load_trace(tmp_path / "t.json").other_threads] == [("pool_1", False)]
