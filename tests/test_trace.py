"""The trace reader: exact times, every bad-file case, and the real shared traces."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from builders import kernel, launch, memcpy, op, step
from conftest import SHARED_TRACES
from rawsums import independent_sums

from pytest_opprof import TraceError, load_trace
from pytest_opprof.analysis import analyze
from pytest_opprof.chrome import write_trace
from pytest_opprof.events import LIST_LIMIT
from pytest_opprof.trace import read_trace, us_text_to_ns

SHARED_NAMES = [
    "a100-alexnet.json.gz",
    "a100-triton-kernel.json.gz",
    "cpu-only.json.gz",
    "gpu-sampled-steps.json.gz",
    "mi250-minitoy-train.json.gz",
]


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        (1695835542514261, 1695835542514261000),  # old Kineto: integer us
        ("4203669604595.407", 4203669604595407),  # new Kineto: ns decimals
        ("1700000000000000.001", 1700000000000000001),  # beyond float64's resolution
        ("68.0", 68000),
        ("68.5", 68500),
        ("0.25", 250),
        ("1.2345", 1234),  # sub-ns digits round half-even
        ("1.2355", 1236),
        ("1e3", 1_000_000),
        ("1e-300", 0),  # far below a nanosecond
    ],
)
def test_microsecond_text_to_exact_nanoseconds(text, ns):
    """Timestamps keep their nanoseconds exactly, whatever their magnitude."""
    assert us_text_to_ns(text) == ns


def test_float64_would_lose_the_nanoseconds():
    """The reason for the text parsing: float64 cannot hold ns at 1.7e15 us."""
    assert round(float("1700000000000000.001") * 1000) != 1700000000000000001


def write_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def minimal_trace() -> dict:
    return {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": 10.5,
                "dur": 3,
                "args": {"External id": 1},
            }
        ]
    }


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"hello", "not valid JSON (line 1, column 1"),
        (b'{"traceEvents": [{"ph": "X", "name": "a"', "truncated JSON"),
        (b'{\n  "traceEvents": [\n    {"ph": "X", "name": "aten::mm', "truncated JSON (ends at line 3)"),  # mid-string
        (b"[1, 2,, 3]", "not valid JSON (line 1, column 7"),
        (b'{"foo": 1}', "not a Kineto/Chrome trace (no 'traceEvents')"),
        (b'{"schema": 2, "ops": {}}', "an opprof baseline, not a trace; opprof show reads baselines"),
        (b'{"schema": 1, "tests": []}', "an opprof run report (--opprof-json), not a trace; opprof analyze reads the"),
        (b'"a string"', "not a Kineto/Chrome trace"),
        (b'{"traceEvents": 3}', "'traceEvents' is not a list"),
        (b'{"traceEvents": [{"ph": "M", "name": "x"}, 7]}', "no complete ('ph': 'X') events"),
        (  # a trial's hand-made events without `cat` read as "nothing ran under the profiler"
            b'{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}, {"ph": "X", "cat": "x"}]}',
            "none of its 2 complete events has a category opprof reads ('cat': cpu_op, kernel, gpu_memcpy, ",
        ),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "dur": 1}]}', "complete event 0 ('a'): no 'ts'"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x"}]}',
            "complete event 0 ('a'): 'ts' 'x' is not a number",
        ),
        (b"\x80\x81 binary", "not text"),
        (  # a trial's: json keeps the last list, and the first's events were read as well
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}], '
            b'"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "b", "ts": 1, "dur": 1}]}',
            "complete events lie outside its 'traceEvents' list ('traceEvents' given twice, or events in the metadata)",
        ),
        (
            b'{"traceEvents": [], "deviceProperties": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}',
            "complete events lie outside its 'traceEvents' list",
        ),
    ],
)
def test_bad_trace_files_give_one_line_naming_the_file(tmp_path, content, reason):
    """Every unreadable trace is a TraceError of one line that names the file and the reason."""
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert reason in message
    assert "\n" not in message


def test_a_raw_control_character_in_a_name_is_read_as_its_escape(tmp_path):
    """torch 2.6's Kineto writes a record_function name's newline or tab raw inside the JSON
    string, which strict JSON refuses: a compat run found every such capture `not valid JSON`.
    The trace is read, the name written with its escapes, as any such name is."""
    trace = minimal_trace()
    trace["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": "fwd\nred\tx", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
    )
    text = json.dumps(trace).replace("fwd\\nred\\tx", "fwd\nred\tx")  # the characters themselves
    assert "fwd\nred\tx" in text
    path = tmp_path / "raw.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="Invalid control character"):
        json.loads(text)
    assert [r.name for r in load_trace(path).ranges] == ["fwd\\nred\\tx"]


def test_truncated_gzip_is_a_clear_error(tmp_path):
    """A gzip file cut short names the file and says so."""
    data = gzip.compress(json.dumps(minimal_trace()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: truncated or corrupt gzip data"):
        read_trace(path)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_git_lfs_pointer_is_named_with_how_to_fetch_the_file(tmp_path, name):
    """A checkout without `git lfs pull` holds the pointer: said as one, not as `not valid JSON`
    or `corrupt gzip` with the fix to export the trace again."""
    path = tmp_path / name
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 123456\n")
    with pytest.raises(TraceError) as raised:
        read_trace(path)
    assert (
        str(raised.value) == f"{path}: a Git LFS pointer, not the trace it stands for; fetch the file with git lfs pull"
    )


def test_missing_file_and_directory_are_clear_errors(tmp_path):
    """A missing path and a directory each get their own one-line reason."""
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "nope.json")
    with pytest.raises(TraceError, match="a folder, not a trace file; give one .json or .json.gz trace"):
        read_trace(tmp_path)


def test_gzip_is_detected_from_content_not_name(tmp_path):
    """A gzip-compressed trace named .json and a plain one named .json.gz both load."""
    doc = json.dumps(minimal_trace()).encode()
    (tmp_path / "a.json").write_bytes(gzip.compress(doc))
    (tmp_path / "b.json.gz").write_bytes(doc)
    assert read_trace(tmp_path / "a.json").events == read_trace(tmp_path / "b.json.gz").events


def test_a_bare_event_list_is_a_trace(tmp_path):
    """The Chrome trace format also allows a bare list of events."""
    path = write_json(tmp_path / "list.json", minimal_trace()["traceEvents"])
    (event,) = read_trace(path).events
    assert (event.name, event.start_ns, event.dur_ns) == ("aten::mm", 10_500, 3_000)


def test_write_then_read_gives_the_same_events_and_profile(tmp_path):
    """A written trace reads back to identical events and the same numbers."""
    events = [
        step(1, 1_700_000_000_000_000.001, 100),
        op("aten::mm", 1_700_000_000_000_010, 20, ext=5),
        launch(1_700_000_000_000_015, corr=9),
        kernel("gemm", 1_700_000_000_000_020, 7.5, corr=9, ext=5),
        memcpy("Memcpy DtoH (Device -> Pageable)", 1_700_000_000_000_030, 1, 64),
    ]
    for name in ("t.json", "t.json.gz"):
        write_trace(tmp_path / name, events, {"schemaVersion": 1})
        back = read_trace(tmp_path / name)
        assert back.events == events
        assert back.metadata == {"schemaVersion": 1}
        assert analyze(back.events) == analyze(events)


@pytest.mark.parametrize(("threads", "read"), [(4, 4), (1, 1), ("4", None), (0, None), (True, None), (10**9, None)])
def test_the_thread_count_an_exported_trace_carries_is_read_when_it_is_one(tmp_path, threads, read):
    """Our header's `threads` (the capture's torch threads) comes back with the profile; a value
    that is not a whole number of threads (hand-edited, another tool's) is left unknown."""
    events = [step(1, 0, 100), op("aten::mm", 10, 20)]
    write_trace(tmp_path / "t.json", events, {"opprof": {"threads": threads}})
    assert load_trace(tmp_path / "t.json").threads == read


def test_the_other_threads_of_a_capture_survive_its_export(tmp_path):
    """What `export_chrome_trace` writes of the other Python threads reads back as they were (a
    mutation trial dropped their CPU time from the header and no test noticed)."""
    from dataclasses import replace

    from pytest_opprof.analysis import analyze
    from pytest_opprof.analysis.model import OtherThread

    others = (OtherThread("worker", 2.5, 3, True), OtherThread("pool_1", None, 1, False))
    profile = replace(analyze([step(1, 0, 100), op("aten::mm", 10, 20)]), other_threads=others)
    profile.export_chrome_trace(tmp_path / "t.json.gz")
    assert load_trace(tmp_path / "t.json.gz").other_threads == others


def test_the_other_threads_an_exported_trace_names_are_read_where_well_formed(tmp_path):
    """Our header's `other_threads` (Python threads that ran during the capture, unrecorded)
    comes back with its warning; an entry of another shape (hand-edited) is left out, and a
    header of none gives no warning."""
    events = [step(1, 0, 100), op("aten::mm", 10, 20)]
    named = [{"name": 5}, "x", {"name": "neg", "cpu_ms": -1}, {"name": "nan", "cpu_ms": float("nan")}]
    named += [{"name": "pool_0", "cpu_ms": 1.5}, {"name": "helper", "cpu_ms": None}, {"name": "b", "cpu_ms": True}]
    named += [
        {"name": "w", "count": 0},
        {"name": "w", "given_work": "yes"},
        {"name": "w", "count": 3, "given_work": False},
        {"name": "idle", "cpu_ms": 0.0},  # a review's idle pool worker was dropped
        {"name": "long", "cpu_ms": 2e6},
        {"name": "many", "count": 10**7},
    ]
    write_trace(tmp_path / "t.json", events, {"opprof": {"other_threads": named}})
    profile = load_trace(tmp_path / "t.json")
    assert [(t.name, t.cpu_ms, t.count, t.given_work) for t in profile.other_threads] == [
        ("pool_0", 1.5, 1, True), ("helper", None, 1, True), ("w", None, 3, False),
        ("idle", 0.0, 1, True), ("long", 2e6, 1, True),
    ]  # fmt: skip
    (check,) = [c for c in profile.checks if c.name == "other_threads"]
    assert check.message.startswith("7 other Python threads ran during the capture (pool_0: 1.5 ms of CPU, helper: ")
    for value in ("pool_0", [], None, {"name": "t"}):
        write_trace(tmp_path / "u.json", events, {"opprof": {"other_threads": value}})
        assert not [c for c in load_trace(tmp_path / "u.json").checks if c.name == "other_threads"]


# -- the real traces in ../shared/traces ------------------------------------------------------


def trace_path(name: str) -> Path:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not present (../shared/traces is not in the repository)")
    return path


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_shared_trace_agrees_with_independent_sums(name):
    """Op call counts (torch's rule), kernel and memory-op counts, device ns and bytes equal the
    raw events' sums."""
    path = trace_path(name)
    expected = independent_sums(path)
    profile = load_trace(path)
    assert {o.name: o.calls for o in profile.ops} == dict(expected["cpu_ops_torch_rule"])
    kernel_calls: Counter = Counter()
    for k in profile.kernels:
        kernel_calls[k.name] += k.calls
    assert kernel_calls == expected["kernels"]
    assert sum(k.device_ns for k in profile.kernels) == expected["kernel_ns"]
    assert {m.name: m.calls for m in profile.memory_ops} == dict(expected["memory"])
    assert sum(m.device_ns for m in profile.memory_ops) == expected["memory_ns"]
    assert sum(m.bytes for m in profile.memory_ops) == expected["bytes"]
    assert profile.device_ns == expected["kernel_ns"] + expected["memory_ns"]
    assert profile.device_busy_ns <= profile.device_ns
    assert sum(o.self_device_ns for o in profile.ops) + profile.unattributed_device_ns == profile.device_ns
    assert not profile.errors, profile.errors


@pytest.mark.parametrize(
    ("name", "steps", "wall_known"),
    [
        ("a100-alexnet.json.gz", 1, False),
        ("gpu-sampled-steps.json.gz", 2, True),
        (
            "mi250-minitoy-train.json.gz",
            1,
            True,
        ),  # CPU-side #1 (#2: the loop's last prof.step(), nothing in it); the GPU-side twin of #1 is no step
        ("cpu-only.json.gz", 1, True),
    ],
)
def test_shared_trace_steps(name, steps, wall_known):
    """Steps come from CPU-side ProfilerStep#N annotations only."""
    profile = load_trace(trace_path(name))
    assert profile.steps == steps
    assert (profile.wall_ms is not None) == wall_known


def test_shared_traces_attribute_kernels_to_launching_ops():
    """On real traces the kernels land on the ops that launched them (correlation, then External id)."""
    mi250 = load_trace(trace_path("mi250-minitoy-train.json.gz"))
    assert {k.op for k in mi250.kernels if k.name.startswith("Cijk_Alik")} == {"aten::addmm"}
    assert mi250.unattributed_device_ns == 0
    alexnet = load_trace(trace_path("a100-alexnet.json.gz"))
    assert all(k.op for k in alexnet.kernels)
    assert alexnet.op("aten::cudnn_convolution").self_device_ns > 0
    triton = load_trace(trace_path("a100-triton-kernel.json.gz"))  # launched through cuLaunchKernel
    assert triton.kernels[0].op == "triton_poi_fused_add_cos_sin_0"


def test_shared_nanosecond_trace_keeps_nanoseconds():
    """A new-format trace's sub-microsecond digits survive into the events."""
    events = read_trace(trace_path("mi250-minitoy-train.json.gz")).events
    assert any(e.start_ns % 1000 for e in events)


def test_shared_trace_counts_follow_torchs_redispatch_rule():
    """Pinned: on the sampled-steps GPU trace, ops redispatching to their own name are one call
    (raw events: aten::mean 15, aten::div 36, aten::nan_to_num 16)."""
    profile = load_trace(trace_path("gpu-sampled-steps.json.gz"))
    counts = {
        name: profile.op(name).calls
        for name in ("aten::mean", "aten::div", "aten::nan_to_num", "aten::add", "aten::where")
    }
    assert counts == {"aten::mean": 8, "aten::div": 28, "aten::nan_to_num": 8, "aten::add": 7, "aten::where": 8}


@pytest.mark.parametrize("dims", ["[3, 4]", "[true]", '"x"', "[[1, null]]"])
def test_malformed_input_dims_are_taken_as_not_recorded(tmp_path, dims):
    """A trace whose "Input Dims" are not a list of shapes gives no work for that op, no crash."""
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1, '
        f'"args": {{"Input Dims": {dims}, "Input type": ["float"]}}}}]}}'
    )
    profile = load_trace(path)
    assert profile.op("aten::mm").work is None and profile.work_steps == 0


def test_a_traces_lists_of_tensors_keep_their_shapes_up_to_the_limit(tmp_path):
    """Kineto's Input Dims hold each tensor's shape for a list of tensors: kept (the profile says
    so, as a baseline from it records), and a list of more than LIST_LIMIT tensors as `[]`."""
    few, many = [[4, 8], [4, 8]], [[4, 8]] * (LIST_LIMIT + 1)
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 2, "pid": 1, "tid": 1,
                     "args": {"Input Dims": [dims, []], "Input type": ["TensorList", "Scalar"]}}
                    for name, ts, dims in (("aten::cat", 1, few), ("aten::stack", 5, many))
                ]
            }
        )
    )  # fmt: skip
    profile = load_trace(path)
    assert profile.list_shapes
    assert profile.op("aten::cat").work.signatures[0].shapes == (((4, 8), (4, 8)), ())
    assert profile.op("aten::stack").work.signatures[0].shapes == ((), ())


def test_a_traces_sequence_numbers_say_which_ops_autograd_recorded(tmp_path):
    """torch writes an op's `Sequence number` where autograd recorded it (grad mode on as it ran):
    with the inputs recorded, each op's work says how many of its calls autograd recorded; an
    odd value is taken as none, and a trace without inputs says nothing of it."""
    path = tmp_path / "t.json"
    inputs = {"Input Dims": [[4, 4], [4, 4]], "Input type": ["float", "float"]}
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 2, "pid": 1, "tid": 1, "args": {**inputs, **extra}}
        for name, ts, extra in (
            ("aten::mm", 1, {"Sequence number": 7}),
            ("aten::mm", 5, {"Sequence number": "7"}),
            ("aten::add", 9, {}),
        )
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    profile = load_trace(path)
    assert profile.op("aten::mm").work.autograd_per_step.samples == (1,)
    assert profile.op("aten::add").work.autograd_per_step.samples == (0,)
    for event in events:
        event["args"] = {"Sequence number": 7}
    path.write_text(json.dumps({"traceEvents": events}))
    assert load_trace(path).op("aten::mm").work is None


def _event(**fields):
    """One complete event; a field given as None is left out."""
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1, **fields}
    return json.dumps({"traceEvents": [{k: v for k, v in event.items() if v is not None}]})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a profiler trace"),
        (_event(name=["aten::mm"]), "complete event 0: 'name' is ['aten::mm'], not a text"),
        (_event(pid={"a": 1}), "a complete event's 'pid': {'a': 1} is not a number or a name"),
        (_event(ts=float("inf")), "complete event 0 ('aten::mm'): 'ts' inf is not a number of microseconds"),
        (_event(ts="Infinity"), "'Infinity' is not a number of microseconds"),
        (_event(ts="1e999990"), "'1e999990' microseconds is beyond any clock"),
        (_event(dur=1e300), "complete event 0 ('aten::mm'): 'dur' '1e+300' microseconds is beyond any clock"),
        # past the int64 nanoseconds torch keeps (a trial's 1e18 passed, every check ok), in both paths
        (
            _event(dur=1e18),
            "complete event 0 ('aten::mm'): 'dur' '1e+18' microseconds is beyond any clock (over 2**63 ns)",
        ),
        (_event(ts=10**16), "10000000000000000 microseconds is beyond any clock"),
        # each within them, their sum past (a trial's made a 25-hour step)
        (
            _event(ts=9.2e15, dur=9e13),
            "complete event 0 ('aten::mm'): its 'ts' + 'dur' ends beyond any clock (over 2**63 ns)",
        ),
        (_event(ts="9223372036854775.808"), "'9223372036854775.808' microseconds is beyond any clock"),
        # what float() and int() let by and a JSON number never holds (a trial's "1_000" read as 1000)
        (_event(dur="1_000"), "complete event 0 ('aten::mm'): 'dur' '1_000' is not a number of microseconds"),
        (_event(dur="1_000.000"), "'1_000.000' is not a number of microseconds"),
        (_event(dur=" 12 "), "' 12 ' is not a number of microseconds"),
        (_event(dur=" 12.000"), "' 12.000' is not a number of microseconds"),
        (_event(dur="\u0661\u0662"), "'\u0661\u0662' is not a number of microseconds"),
        (_event(dur="+5"), "'+5' is not a number of microseconds"),
        (_event(dur=".123"), "'.123' is not a number of microseconds"),  # a review: the fast path read 123 ns
        (_event(dur="-.123"), "'-.123' is not a number of microseconds"),
        (_event(ts={}), "complete event 0 ('aten::mm'): 'ts' {} is not a number of microseconds"),  # was a KeyError
        (_event(dur={"us": 2}), "{'us': 2} is not a number of microseconds"),
        (
            '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": ' + "9" * 5000 + "}]}",
            "a number JSON cannot hold (an integer of 5000 digits; Python reads at most 4300)",
        ),
        # fields of the wrong type a trial found read as 0 or dropped in silence
        (_event(dur=None), "complete event 0 ('aten::mm'): no 'dur'"),
        (_event(ph=5), "an event ('aten::mm'): 'ph' is 5, not a text"),  # a trial's: dropped in silence
        (_event(cat=["cpu_op"]), "an event ('aten::mm'): 'cat' is ['cpu_op'], not a text"),
        (_event(args=[1, 2]), "complete event 0 ('aten::mm'): 'args' is not an object"),
        (_event(cat="gpu_memcpy", args={"bytes": "abc"}), "'bytes' is 'abc', not a whole number"),
        (_event(cat="gpu_memcpy", args={"bytes": 1500.0}), "'bytes' is '1500.0', not a whole number"),
        (_event(cat="gpu_memcpy", args={"bytes": -5}), "'bytes' is -5, not a whole number"),
        (
            _event(cat="gpu_memcpy", args={"bytes": 10**30}),
            "'bytes' is " + str(10**30) + ", not a whole number below 2**63",
        ),
        (_event(cat="gpu_memcpy", args={"bytes": "9223372036854775808"}), "not a whole number below 2**63"),
        (_event(cat="kernel", args={"correlation": "x7"}), "'correlation' is 'x7', not a whole number"),
        (_event(args={"External id": [3]}), "'External id' is [3], not a whole number"),
        (_event(cat="kernel", args={"correlation": "²"}), "'correlation' is '²', not a whole number"),
    ],
)
def test_hostile_traces_are_one_line_errors(tmp_path, text, reason):
    """Deep nesting, names and ids of the wrong type, infinite or absurd numbers: a TraceError
    naming the file and what is wrong, quickly, never a traceback."""
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: ") and reason in str(info.value)


@pytest.mark.parametrize(
    "field",
    ['"dur": 2.' + "5" * 100_000, '"ts": "' + "x" * 200_000 + '"', '"pid": [' + "1," * 50_000 + "1]"],
)
def test_a_huge_value_is_cut_in_the_error_line(tmp_path, field):
    """A trial's 100,000-digit duration made a 100,160-byte error line, a CI log's flood."""
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, ' + field + "}]}")
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert len(str(info.value)) < len(str(path)) + 250 and "..." in str(info.value)


def test_pipes_and_decompression_bombs_are_refused(tmp_path, monkeypatch):
    """A FIFO is refused without reading (it would hang); a gzip that decompresses beyond the
    cap is refused before it fills memory."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(fifo)
    from pytest_opprof import trace

    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", 10_000)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 100_000))
    with pytest.raises(TraceError, match="decompresses to more than 10,000 bytes"):
        read_trace(bomb)


def test_a_gzip_of_blanks_past_100_times_its_size_is_refused_early(tmp_path, monkeypatch):
    """Blanks are JSON text, so a 4.6 MB gzip of 1 GiB of spaces before a valid trace was read
    whole (9 s, 2.1 GB). Past the floor, a gzip decompressing to over 100 times its size is
    refused there (no trace compresses past 25x); memory stays near that size. A trace
    compressing as traces do is read with no floor at all."""
    import tracemalloc
    import zlib

    from pytest_opprof import trace

    monkeypatch.setattr(trace, "BOMB_FLOOR", 16 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(b'{"traceEvents": [')] + [packer.compress(b" " * (1 << 20)) for _ in range(256)]
    bomb = tmp_path / "blanks.json.gz"
    bomb.write_bytes(b"".join([*parts, packer.flush(), gzip.compress(b"]}")]))
    tracemalloc.start()
    try:
        with pytest.raises(
            TraceError,
            match=r"blanks.json.gz: decompresses to more than 100 times its [0-9,]+ bytes, .*a gzip bomb, not a trace \(if it is one, gunzip it and give the .json\)",
        ):
            read_trace(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (256 << 20) // 3, peak  # read whole before: 256 MiB and its joined copy
    monkeypatch.setattr(trace, "BOMB_FLOOR", 0)
    events = [step(i + 1, i * 100, 100) for i in range(50)] + [op("aten::mm", i * 100 + 5, 50) for i in range(50)]
    plain = tmp_path / "plain.json.gz"
    write_trace(plain, events, {})
    assert len(read_trace(plain).table) == 100


def test_a_gzip_of_zeros_is_refused_at_its_first_chunk(tmp_path):
    """A small gzip of 64 MiB of zeros (or of a JSON head followed by zeros) is refused as not
    JSON after one chunk: memory stays at one chunk, not the decompressed size (tracemalloc)."""
    import tracemalloc
    import zlib

    from pytest_opprof import trace

    def bomb(head: bytes, zeros: int) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
        parts = [packer.compress(head)]
        block = bytes(1 << 20)
        parts += [packer.compress(block) for _ in range(zeros >> 20)]
        return b"".join([*parts, packer.flush()])

    for name, head in [("zeros.json.gz", b""), ("headed.json.gz", b'{"traceEvents": [')]:
        path = tmp_path / name
        path.write_bytes(bomb(head, 64 << 20))
        assert path.stat().st_size < 1 << 20
        tracemalloc.start()
        try:
            with pytest.raises(TraceError, match=f"{name}: not a JSON trace inside the gzip"):
                read_trace(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 * trace._GUNZIP_CHUNK, peak


def test_a_trace_of_a_profiler_that_recorded_nothing_reads_as_empty(tmp_path):
    """torch 2.11 writes Kineto's session span (`cat` "Trace", "PyTorch Profiler (0)") even
    where the profiler recorded nothing: an empty trace, not one "with no category opprof reads"
    (which broke from_profiler's "a cycle torch cleared" message on torch 2.11). A span beside
    events of unread categories is still refused."""
    from pytest_opprof.trace import read_trace

    span = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 1, "dur": 5, "pid": 1, "tid": 1}
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"traceEvents": [span]}))
    assert read_trace(path).table.name == []
    path.write_text(json.dumps({"traceEvents": [span, {**span, "cat": "x", "name": "mine"}]}))
    with pytest.raises(
        TraceError,
        match=r"none of its 1 complete event has a category opprof reads .*: it records no operator; export it again with "
        r"torch.profiler \(export_chrome_trace\)$",
    ):
        read_trace(path)


def test_ids_written_as_digits_link_like_numbers(tmp_path):
    """A runtime call whose correlation is the text "7" launches the kernel of correlation 7: the
    kernel's time lands on its op (a trial found it left unattributed in silence)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10, "pid": 1, "tid": 1,
         "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 2, "pid": 1, "tid": 1,
         "args": {"correlation": "7", "External id": "3"}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 4, "dur": 5, "pid": 0, "tid": 7,
         "args": {"correlation": 7, "External id": 3, "device": 0, "stream": 7}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    profile = load_trace(path)
    assert profile.op("aten::mm").device_ns == 5000 and profile.kernels[0].op == "aten::mm"


@pytest.fixture
def small_profile():
    from pytest_opprof.analysis import analyze
    from pytest_opprof.events import EventTable

    events = [step(1, 0, 100), op("aten::mm", 10, 50), op("aten::add", 70, 10)]
    return analyze(EventTable.from_events(events), source="hand-built")


@pytest.mark.parametrize("value", [None, 3, b"t.json", ""])
def test_load_trace_and_export_name_a_path_that_is_not_one(value, tmp_path, small_profile):
    """load_trace(None/3/bytes/"") and export_chrome_trace of the same: one line naming the value
    (were pathlib TypeErrors, or "." read as a folder)."""
    with pytest.raises(TraceError, match=r"^load_trace\(\): .* is not a file path; give a str or pathlib.Path$"):
        load_trace(value)
    with pytest.raises(TraceError, match=r"^export_chrome_trace\(\): .* is not a file path"):
        small_profile.export_chrome_trace(value)


def test_export_to_a_folder_or_an_unwritable_place_names_the_path_asked_for(tmp_path, small_profile):
    """A folder, or a folder that does not exist under a file: the path given and the reason, not
    the temporary file's name beside it (a trial saw `'/tmp/.x.123.tmp' -> '/tmp/x'`)."""
    from pytest_opprof.errors import TraceWriteError

    with pytest.raises(TraceWriteError) as caught:
        small_profile.export_chrome_trace(tmp_path)
    assert str(caught.value) == (
        f"export_chrome_trace(): cannot write {tmp_path} (a folder); give a file path (.json or .json.gz) "
        "in a writable folder"
    )
    (tmp_path / "file").write_text("x")
    with pytest.raises(
        TraceWriteError, match=r"cannot write .*file/t\.json \(.*/file is a file, not a folder\)"
    ) as caught:
        small_profile.export_chrome_trace(tmp_path / "file" / "t.json")
    assert ".tmp" not in str(caught.value) and not list(tmp_path.glob(".*"))
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("top", [0, -1, True, "3", 3.5])
def test_a_table_of_a_bad_top_is_refused(small_profile, top):
    """Profile.table(top=) takes a whole number >= 1 or None: -1 dropped the last row in silence,
    0 printed everything, '3' raised a slice TypeError."""
    from pytest_opprof.errors import OpprofUsageError

    with pytest.raises(OpprofUsageError, match=r"^top=.*: expected a whole number of rows >= 1, or None for all$"):
        small_profile.table(top=top)
    assert small_profile.table(top=1).count("aten::") == 1


def test_an_exported_trace_names_its_tracks_and_draws_launch_arrows(tmp_path):
    """Perfetto reads the export with named tracks (the host process and threads, `GPU 0` and its
    streams) and an "ac2g" arrow from each launch to the first device work it launched; the
    reader ignores both, so the export reads back as the same profile (a trial found all 4,810
    events of an export plain "X" slices)."""
    from pytest_opprof.analysis import analyze
    from pytest_opprof.events import GPU_ANNOTATION, SYNC, Event, EventTable

    events = [
        step(1, 0, 100),
        op("aten::mm", 10, 40),
        launch(12, corr=5),
        kernel("gemm", 30, 20, corr=5, stream=7),
        op("aten::copy_", 60, 30),
        launch(62, corr=6, name="cudaMemcpyAsync"),
        memcpy("Memcpy DtoH (Device -> Pageable)", 70, 5, 4096, corr=6, stream=9),
        # on the GPU's process too, as Kineto writes them: a sync record and an annotation's twin
        Event(GPU_ANNOTATION, "ProfilerStep#1", 0, 100_000, 0, 7),
        Event(SYNC, "Stream Sync", 80_000, 1_000, 0, -1),
    ]
    profile = analyze(EventTable.from_events(events), source="hand-built")
    path = tmp_path / "t.json"
    profile.export_chrome_trace(path)
    records = json.loads(path.read_text())["traceEvents"]
    meta = [(r["name"], r["pid"], r["tid"]) for r in records if r["ph"] == "M"]
    assert len(meta) == len(set(meta))  # one name per track (a trial saw pid 0 named host and GPU 0)
    names = {(r["name"], r["pid"], r["tid"]): r["args"] for r in records if r["ph"] == "M"}
    assert names[("thread_name", 0, -1)] == {"name": "stream -1"}
    assert names[("process_name", 100, 0)] == {"name": "host (pid 100)"}
    assert names[("thread_name", 100, 1)] == {"name": "thread 1"}
    assert names[("process_name", 0, 0)] == {"name": "GPU 0"}
    assert names[("thread_name", 0, 7)] == {"name": "stream 7"} and names[("thread_name", 0, 9)] == {"name": "stream 9"}
    flows = sorted((r["id"], r["ph"], r["pid"], r["tid"], r["ts"]) for r in records if r["ph"] in "sf")
    assert flows == [(5, "f", 0, 7, 30.0), (5, "s", 100, 1, 12.0), (6, "f", 0, 9, 70.0), (6, "s", 100, 1, 62.0)]
    assert all(r["cat"] == "ac2g" and r.get("bp", "e") == "e" for r in records if r["ph"] in "sf")
    again = load_trace(path).to_dict()
    assert {**again, "source": None} == {**profile.to_dict(), "source": None}


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_a_shared_trace_exported_again_reads_back_as_the_same_profile(shared_traces, tmp_path, name):
    """load_trace, export_chrome_trace, load_trace: the same steps, numbers and checks. The MI250
    trace's loop ends in an empty ProfilerStep#2 (a stray prof.step()), no step as read; the export
    wrote it back as one (2 steps, a step_events warning) until its header said how it was read."""
    first = load_trace(shared_traces / name)
    first.export_chrome_trace(tmp_path / "again.json.gz")
    again = load_trace(tmp_path / "again.json.gz")
    assert again.stray_step is first.stray_step is True
    assert {**again.to_dict(), "source": None} == {**first.to_dict(), "source": None}


def test_an_export_writes_times_from_a_base_that_doubles_keep_exact(tmp_path):
    """Epoch microseconds (1796190588632019.176) lose their nanoseconds in a reader's doubles (a
    trial's Perfetto saw 55 of 10,420 events end after their parent): an export writes times from
    the first event's whole microsecond, that instant in `baseTimeNanoseconds` as torch writes it,
    and reads back as the same profile."""
    epoch = 1_796_190_588_632_019_176  # ns
    events = [
        step(1, 0, 100),
        op("aten::linear", 10, 50),
        op("aten::addmm", 10.001, 49.998),  # inside its parent by a nanosecond each side
    ]
    moved = [e._replace(start_ns=e.start_ns + epoch) for e in events]
    profile = analyze(moved)
    path = tmp_path / "t.json"
    profile.export_chrome_trace(path)
    data = json.loads(path.read_text())  # floats, as Perfetto and chrome://tracing read them
    assert data["baseTimeNanoseconds"] == epoch // 1000 * 1000
    slices = {r["name"]: r for r in data["traceEvents"] if r["ph"] == "X"}
    linear, addmm = slices["aten::linear"], slices["aten::addmm"]
    assert linear["ts"] < addmm["ts"] and addmm["ts"] + addmm["dur"] < linear["ts"] + linear["dur"]
    back = load_trace(path)
    assert [(o.name, o.cpu_ns, o.self_cpu_ns) for o in back.ops] == [
        (o.name, o.cpu_ns, o.self_cpu_ns) for o in profile.ops
    ]


def test_an_ops_end_on_another_thread_survives_the_trace_opprof_writes(tmp_path):
    """A capture's ops whose end another thread recorded (a TorchScript fork's `forward`) are
    written with their `End thread` arg and read back as such: `opprof analyze` of the test's
    trace refused what the test passed (`nesting`). A bad value is one line naming it."""
    from pytest_opprof.events import EventTable

    events = [
        step(1, 0, 100),
        op("forward", 10, 120),
        op("aten::linear", 20, 30),
        step(2, 110, 100),
        op("forward", 120, 60),
        op("<forked function>", 15, 30, tid=3),
    ]
    table = EventTable.from_events(events)
    table.end_threads = {1: 3}
    path = tmp_path / "t.json"
    analyze(table).export_chrome_trace(path)
    back = read_trace(path)
    assert back.table.end_threads == {1: 3}
    assert load_trace(path).errors == []
    written = json.loads(path.read_text())["traceEvents"]
    assert [e["args"].get("End thread") for e in written if e.get("name") == "forward"] == [3, None]
    plain = tmp_path / "plain.json"
    write_trace(plain, events, {})
    assert [c.name for c in load_trace(plain).errors] == ["nesting"]  # a trace that does not say it
    doc = json.loads(path.read_text())
    next(e for e in doc["traceEvents"] if e.get("name") == "forward")["args"]["End thread"] = "3"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert str(caught.value).startswith(f"{path}: complete event 1 ('forward'): 'End thread' is '3', not a thread id; ")
    assert str(caught.value).endswith(
        "remove the arg, or write the trace again with opprof (--opprof-trace-dir, Profile.export_chrome_trace)"
    )
    # a thread with no event: taken on trust it would exempt a corrupt duration from the nesting checks
    next(e for e in doc["traceEvents"] if e.get("name") == "forward")["args"]["End thread"] = 999
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert "complete event 1 ('forward'): 'End thread' is 999, a thread with no event in this trace; " in str(
        caught.value
    )


def test_a_users_last_empty_step_is_dropped_though_the_gpu_still_runs_an_earlier_steps_kernel(tmp_path):
    """A scheduled torch.profiler's loop ends in a stray ProfilerStep#3 with nothing on the host;
    the host ran ahead, so step 2's kernel runs inside it. What started in a step is read on the
    host: 2 steps of one addmm, not 3 of (1, 1, 0) with a step_events warning (a review's)."""
    events = []
    for i in range(2):
        t = 1000 + i * 300
        events += [step(i + 1, t, 300), op("aten::addmm", t + 10, 250), launch(t + 20, corr=10 + i)]
        events.append(kernel("gemm", 1040 + i * 570, 570, corr=10 + i))  # step 2's: 1610-2180
    events.append(step(3, 1600, 30))  # the loop's last prof.step(): nothing on the host
    write_trace(tmp_path / "t.json", events, {"schemaVersion": 1})
    profile = load_trace(tmp_path / "t.json")
    assert profile.steps == 2 and profile.op("aten::addmm").calls_per_step.samples == (1, 1)
    assert "step_events" not in {c.name for c in profile.checks if c.status != "ok"}
    # a source of device events alone still keeps a last step its kernels started in
    alone = [e for e in events if e.kind == "kernel" or e.name.startswith("ProfilerStep")]
    assert analyze(alone, stray_step=True).steps == 3
