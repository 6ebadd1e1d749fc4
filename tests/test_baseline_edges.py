"""The baseline file's edges a mutation trial of `documents.py`, `baseline.py`, the write and keep
paths of `decide.py` and `opprof show` found unpinned: each test here fails with a one-line
change to the code it names (a comparison flipped, `and`/`or` swapped, a return or a raise
dropped). What they guard: a good file read as written, a bad one refused in one line naming
its value, a recording's file the next run can read, and no baseline lost or silently unwritten."""

from __future__ import annotations

import json
import os
from pathlib import Path

from builders import launch, memcpy, op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import (
    BaselineError,
    baseline_from_profile,
    baseline_path,
    case_clashes,
    dumps,
    read_baseline,
    scan_baseline_dir,
    shown_path,
    write_baseline,
)
from pytest_opprof.cli import main
from pytest_opprof.compare import compare
from pytest_opprof.decide import Further, Measurement, baseline_step, recorded, unrepeated, with_recorded_ranges
from pytest_opprof.documents import BaselineDoc
from pytest_opprof.verdicts import MIN_TIME_STEPS, Rule

NODE = "tests/test_mlp.py::test_fwd"
ENV = {"torch": "2.13.0", "cuda": None, "cpu_model": "x"}
COPY = "Memcpy HtoD (Pageable -> Device)"


def profile(addmm_us=(700,) * 8):
    """Steps of aten::linear around aten::addmm (`addmm_us` each)."""
    events, base = [], 0
    for i, d in enumerate(addmm_us):
        base += 10_000 + (addmm_us[i - 1] - 700 if i else 0)
        events += [
            step(i + 1, base, 9_300 + d),
            op("aten::linear", base + 10, d + 100),
            op("aten::addmm", base + 20, d),
        ]
    return analyze(events)


def doc(p=None):
    return baseline_from_profile(p or profile(), NODE, "cpu-x86_64", ENV)


def valid() -> dict:
    """A good baseline file's JSON, as the writer writes it."""
    return json.loads(dumps(doc().to_dict()))


def read(tmp_path: Path, data) -> BaselineDoc | None:
    path = tmp_path / "b.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return read_baseline(path, NODE)


def refused(tmp_path: Path, data) -> str:
    try:
        read(tmp_path, data)
    except BaselineError as exc:
        message = str(exc)
        assert "\n" not in message
        return message.replace(str(tmp_path / "b.json"), "<file>")
    raise AssertionError("the file was read")


def copies_profile(us=40):
    """Six steps, each an aten::copy_ that launches a host-to-device copy of 4096 bytes."""
    events = []
    for i in range(6):
        base = i * 1000
        events += [
            step(i + 1, base, 900),
            op("aten::copy_", base + 10, 100),
            launch(base + 20, corr=100 + i, name="cudaMemcpyAsync"),
            memcpy(COPY, base + 50, us, 4096, corr=100 + i),
        ]
    return analyze(events)


def test_a_copy_is_written_with_its_device_time_and_bytes_and_read_back_as_written(tmp_path):
    """Every GPU test's baseline has memory ops: the recording must write them (each step's device
    time in ms, the bytes of all its steps), the next run read them back and compare them, and `opprof show` show
    them. No test wrote and read back a baseline holding one."""
    written = baseline_from_profile(copies_profile(), NODE, "nvidia-h200", ENV)
    path = tmp_path / "nvidia-h200" / "tests" / "test_mlp.py" / "test_fwd.json"
    write_baseline(path, written, tmp_path)
    data = json.loads(path.read_text())
    assert data["memory_ops"] == {COPY: {"bytes": 6 * 4096, "calls_per_step": [1] * 6, "device_ms": [0.04] * 6}}
    again = read_baseline(path, NODE)
    assert again is not None and again.memory_ops[COPY].device_ms == (0.04,) * 6
    assert dumps(again.to_dict()) == path.read_text()  # byte for byte
    assert compare(again, again, Rule()).failing(Rule()) == []
    slower = baseline_from_profile(copies_profile(us=400), NODE, "nvidia-h200", ENV)
    # the copy's time is judged in the op that launched it (its device time)
    assert [(v.op, v.status) for v in compare(slower, again, Rule()).failing(Rule())] == [("aten::copy_", "regressed")]


def test_a_recorded_range_below_the_ops_fastest_step_is_what_a_recording_writes_and_reads(tmp_path):
    """A later range measurement that ran faster than the written one gives a range whose fastest
    lies below the written steps' fastest: the recording writes it and the next run must read it
    (a range that misses the op's own fastest step is refused)."""
    written, span = with_recorded_ranges([doc(), doc(profile((600,) * 8))])
    assert span == 2 and written.ops["aten::addmm"].recorded_range == (0.6, 0.7)
    again = read(tmp_path, json.loads(dumps(written.to_dict())))
    assert again is not None and again.ops["aten::addmm"].recorded_range == (0.6, 0.7)
    data = valid()
    data["ops"]["aten::addmm"]["recorded_range_ms"] = [0.75, 0.8]  # above its fastest step, 0.7
    assert "recorded_range_ms" in refused(tmp_path, data)


def test_a_cpu_ops_lost_records_drop_none_of_its_steps_from_its_range(tmp_path):
    """Lost records excuse only a device time (kernels whose records CUPTI dropped); a CPU-timed
    op's steps all stand, so a range that misses its fastest step is refused."""
    data = valid()
    entry = data["ops"]["aten::addmm"]
    entry["cpu_ms"][0], entry["records_lost"], entry["recorded_range_ms"] = 0.1, [1] + [0] * 7, [0.7, 0.8]
    assert "recorded_range_ms" in refused(tmp_path, data)
    entry["recorded_range_ms"] = [0.1, 0.8]
    assert read(tmp_path, data) is not None


def test_the_machine_references_are_read_each_into_its_own_field(tmp_path):
    data = valid()
    data["reference_ms"], data["dispatch_reference_ms"] = 2.0, 0.05
    again = read(tmp_path, data)
    assert again is not None and (again.reference_ms, again.dispatch_reference_ms) == (2.0, 0.05)
    assert again.to_dict()["reference_ms"] == 2.0


def test_hand_edited_values_are_refused_naming_them(tmp_path):
    """A shape's dimension that is no whole number, a `kernels_dropped` that is no count, a
    negative step time: one line naming the value (not a traceback, not accepted)."""
    for dim in ("3", 3.5, None):
        data = valid()
        data["ops"]["aten::addmm"]["work"] = {
            "signatures": [{"shapes": [[2, dim]], "dtypes": ["float"], "calls_per_step": 1}],
            "flops_per_step": 0,
            "kernels": {},
            "bytes_per_step": {},
        }
        assert "shape" in refused(tmp_path, data), dim
    for value in ("3", 2.5, True):
        data = valid()
        data["capture"]["kernels_dropped"] = value
        assert "kernels_dropped" in refused(tmp_path, data), value
    data = valid()
    data["ops"]["aten::addmm"]["cpu_ms"][2] = -0.7
    message = refused(tmp_path, data)
    assert "-0.7" in message and "step 3" in message, message


def test_a_repeated_key_is_named(tmp_path):
    message = refused(tmp_path, '{"schema": 2, "nodeid": "a", "ops": {}, "ops": {}}')
    assert "'ops'" in message and "'schema'" not in message and "'nodeid'" not in message, message


def test_a_file_that_cannot_be_read_is_one_line(tmp_path, monkeypatch):
    """Without read permission (root reads any file, so the refusal is injected)."""
    path = tmp_path / "b.json"
    path.write_text(json.dumps(valid()))

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    try:
        read_baseline(path, NODE)
    except BaselineError as exc:
        assert "cannot be read" in str(exc) and "Permission denied" in str(exc)
    else:
        raise AssertionError("read")


def test_a_baseline_folder_outside_the_rootdir_is_shown_by_its_full_path(tmp_path):
    """`--opprof-baseline-dir /ci/baselines`: its files are named by their absolute path, and a
    corrupt one there is an error naming it."""
    root = tmp_path / "shared" / "baselines"
    path = baseline_path(root, "cpu-x86_64", NODE)
    shown = shown_path(path, tmp_path / "project")
    assert shown == str(path)
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    result = baseline_step(path, shown, NODE, Measurement(doc()), Rule(), None, None, root=root)
    assert result.error is not None and str(path) in result.error


def test_opprof_show_reads_one_file_and_refuses_a_folder_without_baselines(tmp_path, capsys):
    path = tmp_path / "test_fwd.json"
    path.write_text(json.dumps(valid()))
    assert main(["show", str(path)]) == 0
    assert "aten::addmm" in capsys.readouterr().out
    folder = tmp_path / ".opprof" / "cpu-x86_64"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("not a baseline")
    assert main(["show", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "opprof:" in err and "baseline" in err, err
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "t.json.gz").write_bytes(b"")
    assert main(["show", str(traces)]) == 2
    assert "opprof analyze" in capsys.readouterr().err  # a folder of traces: the command that shows one


def test_a_folders_broken_files_are_named_and_the_good_ones_read_as_themselves(tmp_path):
    for broken in ("a.json", "z.json"):  # before and after the good one
        folder = tmp_path / broken
        folder.mkdir()
        (folder / "m.json").write_text(json.dumps(valid()))
        (folder / broken).write_text("{ not json")
        found, unreadable = scan_baseline_dir(folder)
        assert [p.name for p, _ in found] == ["m.json"] and len(unreadable) == 1 and broken in unreadable[0]


def test_a_recording_that_cannot_write_its_file_is_an_error_not_a_new_baseline(tmp_path):
    """A key folder that is a symbolic link out of the baseline folder: the writer refuses it, and
    the test must say so (it read `new`, no file written)."""
    root, outside = tmp_path / ".opprof", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "cpu-x86_64")
    path = baseline_path(root, "cpu-x86_64", NODE)
    result = baseline_step(path, "b.json", NODE, Measurement(doc()), Rule(), "changed", None, root=root)
    assert result.status == "unwritable" and result.error, (result.status, result.error)
    assert not path.exists() and not list(outside.rglob("*.json"))


def test_a_kept_baseline_says_the_test_ran_slower(tmp_path):
    """A recording (=changed) keeps the file of a test x3 slower, and says so (the summary's `kept
    1 slower ... never written without =all`); a comparing run too."""
    path = tmp_path / "b.json"
    write_baseline(path, doc(), tmp_path)
    slow = Measurement(doc(profile((2100,) * 8)))
    for update in ("changed", None):
        assert baseline_step(path, "b.json", NODE, slow, Rule(), update, None, root=tmp_path).slower, update


def test_a_run_too_short_for_time_blames_itself_not_its_baseline(tmp_path):
    path = tmp_path / "b.json"
    write_baseline(path, doc(), tmp_path)
    short = Measurement(doc(profile((700,) * 3)))
    result = baseline_step(path, "b.json", NODE, short, Rule(), None, None, root=tmp_path)
    assert result.untimed and not result.short_baseline


def test_a_recording_of_the_fewest_steps_judged_takes_its_range():
    """A capture of exactly MIN_TIME_STEPS steps is judged on time, so its recording measures again."""
    taken = []

    def remeasure():
        taken.append(1)
        return Measurement(doc(profile((900,) * MIN_TIME_STEPS)))

    written = recorded(Measurement(doc(profile((700,) * MIN_TIME_STEPS))), Further(remeasure))
    assert taken and written.doc.ops["aten::addmm"].recorded_range == (0.7, 0.9)
    once = recorded(Measurement(doc()), Further(None))  # none further possible: recorded from the one
    assert (once.span, once.position, once.doc.ops["aten::addmm"].recorded_range) == (1, 1, None)


def test_a_one_off_op_a_further_measurement_did_not_run_is_no_error():
    """An op in under half the steps (a first-call setup) may not run again: the measurements ran
    the same work."""
    data = valid()
    calls = [1] + [0] * 7
    data["ops"]["aten::clone"] = {
        "calls_per_step": calls,
        "cpu_ms": [0.01] + [0] * 7,
        "device_ms": [0] * 8,
        "on_device": False,
        "work": {
            "signatures": [{"shapes": [[4, 4]], "dtypes": ["float"], "calls_per_step": 0}],
            "flops_per_step": 0,
            "kernels": {},
            "bytes_per_step": {},
        },
    }
    data["events_per_step"] = [e + c for e, c in zip(data["events_per_step"], calls)]
    first = BaselineDoc.from_file(json.loads(dumps(data)))
    assert unrepeated(first, doc()) == ()


def test_only_keeps_the_chosen_ops_kernels_with_its_share():
    """`opprof show/compare --op`: a kernel several ops launched, with the chosen op's share; another
    op's kernel left out."""
    data = valid()
    data["kernels"] = {
        "k_shared": {
            "calls_per_step": [2] * 8,
            "device_ms": [0.2] * 8,
            "ops": ["aten::addmm", "aten::linear"],
            "by_op": {
                "aten::addmm": {"calls_per_step": [1] * 8, "device_ms": [0.1] * 8},
                "aten::linear": {"calls_per_step": [1] * 8, "device_ms": [0.1] * 8},
            },
        },
        "k_linear": {"calls_per_step": [1] * 8, "device_ms": [0.05] * 8, "ops": ["aten::linear"]},
    }
    chosen = BaselineDoc.from_file(data).only(("aten::addmm",))
    assert {n: (k.calls_per_step[0], k.device_ms[0], k.ops) for n, k in chosen.kernels.items()} == {
        "k_shared": (1, 0.1, ("aten::addmm",))
    }


def test_tests_whose_files_differ_in_more_than_case_do_not_clash():
    files = [(".opprof/k/t.py/test_x.json", "t.py::test_x"), (".opprof/k/t.py/test_y.json", "t.py::test_y")]
    assert case_clashes(files) == []
    clash = [(".opprof/k/t.py/test_x[A].json", "t.py::test_x[A]"), (".opprof/k/t.py/test_x[a].json", "t.py::test_x[a]")]
    assert case_clashes(clash) == [["t.py::test_x[A]", "t.py::test_x[a]"]]


def test_a_comparing_run_that_is_only_faster_measures_nothing_again():
    """A speed-up fails nothing: a comparing run does not pay for confirmations (up to three more
    runs of the test's fn, with pauses) to confirm it."""
    from pytest_opprof.decide import decide

    taken = []

    def remeasure():
        taken.append(1)
        return Measurement(doc())

    outcome = decide(Measurement(doc()), doc(profile((2100,) * 8)), Rule(), None, remeasure)
    assert {v.status for v in outcome.comparison.verdicts} == {"improved"}
    assert taken == [] and not outcome.remeasured
