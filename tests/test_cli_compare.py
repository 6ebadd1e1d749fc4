"""`opprof compare`: baseline folders made here, the shared A100 and MI250 traces as a real
cross-vendor pair, the side by side's rows and verdicts, `--fail-on`, exit codes. `opprof show`,
`--markdown` and bad input to either: test_cli_show.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from builders import kernel, launch, op, step, stepped
from cli_docs import ENV, profile, run_cli, steps_with, two_folders, write_folder

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import baseline_from_profile, baseline_path, write_baseline
from pytest_opprof.chrome import write_trace
from pytest_opprof.cli import main
from pytest_opprof.errors import NO_STEP_MARKERS, not_slower
from pytest_opprof.trace import load_trace


@pytest.fixture
def folders(tmp_path):
    """Two device-key folders (cli_docs.two_folders)."""
    return two_folders(tmp_path)


def test_compare_names_work_changes_of_one_device_and_leaves_two_devices_kernels_alone(tmp_path, capsys):
    """A trial's Linear of 64 -> 256 read `B not slower` with no word of the shapes the plugin
    failed: compare names each work change, a line each, and in --json. On two devices the
    kernels differ by design (every op would read changed): their names are left out there."""

    def shaped(n: int, kernel_name: str = "sm90_gemm"):
        events = []
        for i in range(5):
            base = i * 10_000
            events += [
                step(i + 1, base, 9_000),
                op("aten::addmm", base + 20, 700, shapes=((8, n), (n, n)), dtypes=("float", "float"), flops=16 * n * n),
                launch(base + 30, corr=i + 1),
                kernel(kernel_name, base + 40, 350, corr=i + 1),
            ]
        return analyze(events)

    root = tmp_path / ".opprof"
    a = write_folder(root, "t4", {"t.py::test_a": shaped(64), "t.py::test_k": shaped(64)})
    b = write_folder(root, "t4-b", {"t.py::test_a": shaped(256), "t.py::test_k": shaped(64, "ampere_sgemm")})
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0
    assert (
        "t.py::test_a: B not slower; work changed, which does not fail here (--fail-on time)\n"
        "work changed: aten::addmm: 16x the FLOPs per step (65.5k -> 1.0M); inputs " in out
    )
    assert "(float[8,64], float[64,64]) -> (float[8,256], float[256,256])" in out
    assert "t.py::test_k: B not slower\nop " in out  # two devices: another kernel is no work change
    same = write_folder(tmp_path / "same", "t4", {"t.py::test_k": shaped(64, "ampere_sgemm")})
    _, out, _ = run_cli(capsys, "compare", a, same)
    assert "work changed: aten::addmm: kernels: ampere_sgemm 0 -> 1, sm90_gemm 1 -> 0" in out
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    tests = {t["test"]: t for t in json.loads(out)["tests"]}
    assert tests["t.py::test_k"]["work_changes"] == []
    (change,) = tests["t.py::test_a"]["work_changes"]
    assert change.startswith("aten::addmm: 16x the FLOPs per step")


def test_compare_says_which_sides_files_hold_no_work_to_compare(tmp_path, capsys):
    """An upgrade trial's schema-1 side (no work in its files) against a side whose addmm took
    4x the inputs read `B not slower` and no word that the work went unread: a warning names the
    side without it, the op and the test, with the command that records them again."""
    from pytest_opprof.errors import work_not_compared, work_on_neither

    def shaped(n: int):
        events = []
        for i in range(5):
            base = i * 10_000
            events.append(step(i + 1, base, 9_000))
            events.append(
                op("aten::addmm", base + 20, 700, shapes=((8, n), (n, n)), dtypes=("float", "float"), flops=16 * n * n)
            )
        return analyze(events)

    root = tmp_path / ".opprof"
    old = write_folder(root, "cpu", {"t.py::test_a": shaped(64)})
    (path,) = (tmp_path / ".opprof" / "cpu").rglob("*.json")
    data = json.loads(path.read_text())
    del data["ops"]["aten::addmm"]["work"]  # as a schema-1 file, or an edit, holds it
    path.write_text(json.dumps(data))
    new = write_folder(tmp_path / "new", "cpu", {"t.py::test_a": shaped(256)})
    line = work_not_compared("A", False, ["aten::addmm"], ["t.py::test_a"])
    assert "(t.py::test_a): A's files hold none of it" in line and "--opprof-update-baseline=all" in line
    code, out, _ = run_cli(capsys, "compare", old, new)
    assert code == 0 and "work changed" not in out
    assert f"warning: {line}\n" in out
    _, out, _ = run_cli(capsys, "compare", new, old, "--json")
    assert work_not_compared("B", False, ["aten::addmm"], ["t.py::test_a"]) in json.loads(out)["warnings"]
    _, out, _ = run_cli(capsys, "compare", new, write_folder(tmp_path / "same", "cpu", {"t.py::test_a": shaped(256)}))
    assert "was not compared" not in out
    neither = work_on_neither(["aten::addmm"], ["t.py::test_a"])
    code, out, _ = run_cli(
        capsys, "compare", old, old, "--fail-on", "work"
    )  # two files without it: a trial's silent pass
    assert code == 0 and f"warning: {neither}\n" in out and "was not compared" not in out
    _, out, _ = run_cli(capsys, "compare", old, old)  # --fail-on time: the work is not what fails
    assert "neither side holds" not in out


# -- compare: baseline folders ----------------------------------------------------------------


def test_compare_folders_side_by_side_json(capsys, folders):
    a, b = folders
    code, out, err = run_cli(capsys, "compare", a, b, "--json")
    assert (code, err) == (1, "")
    data = json.loads(out)
    assert (data["a"]["device_key"], data["b"]["device_key"]) == ("nvidia-tesla-t4", "nvidia-a10")
    assert data["only_in_a"] == ["tests/test_m.py::test_old"]
    assert data["only_in_b"] == ["tests/test_m.py::test_new"]
    tests = {t["test"]: t for t in data["tests"]}
    assert set(tests) == {"tests/test_m.py::test_mlp", "tests/test_m.py::test_small"}
    assert tests["tests/test_m.py::test_small"]["regressed"] is False
    mlp = tests["tests/test_m.py::test_mlp"]
    assert mlp["regressed"] is True
    ops = {o["op"]: o for o in mlp["ops"]}
    # addmm ran on the device: device ms 0.35 -> 0.70 per step, ratio 2
    addmm = ops["aten::addmm"]
    steps = {"steps_run": 5, "steps": 5}
    assert addmm["a"] == {
        "calls_per_step": 1,
        "ms_per_step": 0.35,
        "median_ms": 0.35,
        "max_ms": 0.35,
        "time": "device",
        **steps,
    }
    assert addmm["b"] == {
        "calls_per_step": 1,
        "ms_per_step": 0.7,
        "median_ms": 0.7,
        "max_ms": 0.7,
        "time": "device",
        **steps,
    }
    assert addmm["ratio"] == 2.0 and addmm["diff_ms"] == 0.35 and addmm["status"] == "slower"
    # the kernels, named per architecture, under their launching op
    assert addmm["kernels"]["a"] == [{"name": "sm90_gemm", "calls_per_step": 1, "device_ms_per_step": 0.35}]
    assert addmm["kernels"]["b"] == [{"name": "ampere_sgemm", "calls_per_step": 1, "device_ms_per_step": 0.7}]
    clone = ops["aten::clone"]
    assert clone["status"] == "added" and clone["a"]["ms_per_step"] is None and clone["b"]["ms_per_step"] == 0.12
    assert clone["b"]["time"] == "cpu"
    assert ops["aten::relu"]["status"] == "same" and ops["aten::relu"]["ratio"] == 1.0
    # sorted by absolute difference, largest first
    diffs = [abs(o["diff_ms"]) for o in mlp["ops"]]
    assert diffs == sorted(diffs, reverse=True)


def test_compare_folders_tables(capsys, folders):
    a, b = folders
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 1
    assert f"A: {a} (nvidia-tesla-t4)" in out and f"B: {b} (nvidia-a10)" in out
    assert "tests/test_m.py::test_mlp: B regressed: 3 ops worse" in out  # addmm, linear slower; clone added
    section = out.split("tests/test_m.py::test_mlp: ")[1]
    ops_table, kernel_table = section.split("\n\n")[:2]
    rows = {line.split()[0]: line.split() for line in ops_table.splitlines() if line.startswith("aten::")}
    assert kernel_table.splitlines()[0].split() == [
        "op",
        "A",
        "kernels",
        "calls",
        "x",
        "ms/step",
        "B",
        "kernels",
        "calls",
        "x",
        "ms/step",
    ]
    assert kernel_table.splitlines()[2].split() == [
        "aten::addmm",
        "sm90_gemm",
        "1x",
        "0.350",
        "ampere_sgemm",
        "1x",
        "0.700",
    ]
    assert rows["aten::addmm"][1:] == ["1", "1", "0.350", "0.700", "2.00x", "+0.350", "device", "slower"]
    assert rows["aten::clone"][1:] == ["-", "1", "-", "0.120", "-", "+0.120", "cpu", "added"]
    assert "only in A (1): tests/test_m.py::test_old" in out
    assert "only in B (1): tests/test_m.py::test_new" in out
    # the last line names them: a scale trial's 1 of 400 sat 6,000 lines above it
    assert out.rstrip().endswith(
        "opprof compare: 1 of 2 compared tests regressed in B: tests/test_m.py::test_mlp; calls differ in 1 "
        "(tests/test_m.py::test_mlp), which --fail-on structure fails on, as the plugin's structure verdict does"
    )


def test_b_faster_or_equal_exits_0(capsys, folders):
    a, b = folders
    code, out, _ = run_cli(capsys, "compare", b, a, "--json")  # reversed: B is the faster one
    assert code == 0
    mlp = next(t for t in json.loads(out)["tests"] if t["test"].endswith("test_mlp"))
    statuses = {o["op"]: o["status"] for o in mlp["ops"]}
    assert statuses["aten::addmm"] == "faster" and statuses["aten::clone"] == "removed"
    assert run_cli(capsys, "compare", a, a)[0] == 0
    code, out, _ = run_cli(capsys, "compare", b, a)  # B removed the clone: no slower, but other calls
    assert code == 0
    assert f"tests/test_m.py::test_mlp: {not_slower(['aten::clone'])}\n" in out
    assert not_slower(["aten::clone"]).endswith("compare judges time, the plugin's structure verdict judges calls")
    assert "tests/test_m.py::test_small: B not slower\n" in out
    assert "other captures" not in out
    small = next(b.rglob("test_small.json"))  # B's file holds the test's second capture now
    data = json.loads(small.read_text())
    data["capture"]["number"] = 2
    small.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert (
        "warning: A and B hold other captures of 1 test (tests/test_m.py::test_small): the test's captures "
        "changed between the recordings, so their ops may be of other code"
    ) in out
    assert "other captures" in json.loads(run_cli(capsys, "compare", a, b, "--json")[1])["warnings"][-1]


def _run_into_a_closed_pipe(*argv, stderr_too=False):
    """The command run with a stdout whose reader has gone (`opprof compare A B | head` once head
    has read its lines; `stderr_too`: `2>&1 | head`): (exit code, stderr)."""
    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write fails, whatever the output's size
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_opprof", *map(str, argv)],
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr or ""


def _run_with_stdout_closed(*argv):
    """The command started with no stdout at all (`opprof ... >&-`): (exit code, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", *map(str, argv)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),
    )
    return done.returncode, done.stderr


def test_the_exit_code_stands_when_the_reader_stops_reading(folders, tmp_path):
    """`opprof compare A B | head` under pipefail passed a regression: a broken pipe gave exit 0. The
    verdict's code stands (1 regressed, 0 not), with no traceback."""
    a, b = folders
    assert _run_into_a_closed_pipe("compare", a, b) == (1, "")
    assert _run_into_a_closed_pipe("compare", a, b, "--json") == (1, "")
    assert _run_into_a_closed_pipe("compare", b, a) == (0, "")
    trace = tmp_path / "t.json"
    write_trace(trace, [step(1, 0, 1000), op("aten::mm", 10, 300), op("aten::relu", 400, -50)], {})
    code, err = _run_into_a_closed_pipe("analyze", trace)  # untrusted: 2, and its line on stderr still
    assert code == 2 and err.startswith(f"opprof: error: {trace}: the measurement cannot be trusted (durations:")
    assert _run_into_a_closed_pipe("show", a) == (0, "")
    # with stderr gone too (`2>&1 | head`) the error line cannot be written; the code stands
    assert _run_into_a_closed_pipe("analyze", trace, stderr_too=True) == (2, "")
    assert _run_into_a_closed_pipe("compare", a, b, stderr_too=True) == (1, "")
    assert _run_into_a_closed_pipe("analyze", trace, "--top", "x", stderr_too=True)[0] == 2
    # no stdout at all (`>&-`) gave a traceback and exit 1
    assert _run_with_stdout_closed("compare", a, b) == (1, "")
    code, err = _run_with_stdout_closed("analyze", trace)
    assert code == 2 and err.startswith(f"opprof: error: {trace}: the measurement cannot be trusted")


class _FullDisk:
    """A stdout on a full disk."""

    def write(self, text):
        raise OSError(28, "No space left on device")

    def flush(self):
        pass


def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(capsys, monkeypatch, folders):
    """`opprof compare A B > /mnt/full/out` gave a traceback and exit 1, the code of a regression:
    one line saying why, and exit 2, as any bad input."""
    a, b = folders
    for argv in (["compare", a, b], ["compare", b, a, "--json"], ["show", a]):
        with monkeypatch.context() as patch:
            patch.setattr(sys, "stdout", _FullDisk())
            code = main([str(x) for x in argv])
        assert code == 2
        assert capsys.readouterr().err == (
            "opprof: error: cannot write the output: No space left on device; send it where it can be written "
            "(> a file with room)\n"
        )


def test_two_sides_with_no_test_in_common_are_an_error_not_a_pass(capsys, tmp_path):
    """An audit compared folders recorded from other rootdirs (`tests/test_m.py::x` vs
    `test_m.py::x`): `0 of 0 compared tests regressed in B`, exit 0, a CI step that checked
    nothing and passed. Exit 2, naming the pair that is one test; unrelated sides get the plain fix."""
    root = tmp_path / ".opprof"
    a = write_folder(root, "k1", {"tests/test_m.py::test_x": profile(700)})
    b = write_folder(root, "k2", {"test_m.py::test_x": profile(700)})
    code, out, err = run_cli(capsys, "compare", a, b)
    assert code == 2
    assert "no test is in both A and B" in out
    assert err == (
        f"opprof: error: no test is in both {a} and {b}, so nothing was compared; 'tests/test_m.py::test_x' in A is "
        "'test_m.py::test_x' in B: recorded from other rootdirs? record both sides from one rootdir (the folder of "
        "the project's ini file)\n"
    )
    c = write_folder(root, "k3", {"test_n.py::test_y": profile(700)})
    code, _, err = run_cli(capsys, "compare", a, c, "--json")
    assert code == 2
    assert err.endswith("nothing was compared; give two baseline folders of the same tests (.opprof/<device key>), "
                        "recorded from one rootdir\n")  # fmt: skip


def test_an_op_glob_that_chooses_no_op_of_the_tests_in_both_is_an_error(capsys, tmp_path):
    """A review: `--op aten::clone` where only a test that A alone holds ran it compared nothing,
    `0 of 0 compared tests regressed`, and exited 0."""
    root = tmp_path / ".opprof"
    a = write_folder(root, "k1", {"t.py::test_x": profile(700), "t.py::test_y": profile(700, extra=True)})
    b = write_folder(root, "k2", {"t.py::test_x": profile(700)})
    code, out, err = run_cli(capsys, "compare", a, b, "--op", "aten::clone")
    assert code == 2 and "no op matching --op (1): t.py::test_x" in out
    assert out.endswith("\nopprof compare: nothing compared\n")
    assert err == (
        "opprof: error: --op aten::clone matches no op of the 1 test in both, so nothing was compared; opprof show "
        "lists each side's ops\n"
    )


def test_tolerance_and_floor_decide_the_exit_code(capsys, folders):
    a, b = folders
    # +100% on addmm, +0.12 ms added clone: within a 150% tolerance and a 0.5 ms floor
    assert run_cli(capsys, "compare", a, b, "--tolerance", "150%", "--min-delta-ms", "0.5")[0] == 0
    assert run_cli(capsys, "compare", a, b, "--tolerance", "150%")[0] == 1  # the clone costs > 0.05 ms


def test_compare_baseline_folders_recorded_by_pytest(pytester, fake_clock):
    """The real flow: two runs record under two device keys, the command compares them (the
    wider layer's addmm costs 4x on the fake clock)."""
    pytest.importorskip("torch")
    pytester.makepyfile(
        test_w="""
import os, torch
W = int(os.environ["W"])
def test_mlp(opprof):
    m = torch.nn.Sequential(torch.nn.Linear(256, W), torch.nn.ReLU(), torch.nn.Linear(W, 256)).eval()
    x = torch.randn(64, 256)
    with torch.no_grad():
        opprof.run(m, x, warmup=2, steps=5)
"""
    )
    for key, width, cost in (("box-a", "64", 50_000), ("box-b", "4096", 200_000)):
        os.environ["W"] = width
        fake_clock.costs["aten::addmm"] = cost
        try:
            pytester.runpytest("-p", "no:cacheprovider", "--opprof-update-baseline", f"--opprof-device-key={key}")
        finally:
            del os.environ["W"]
    root = pytester.path / ".opprof"
    proc = subprocess.run(
        # the per-step minimum: the steadiest statistic when the two recordings met different load
        [
            sys.executable,
            "-m",
            "pytest_opprof",
            "compare",
            str(root / "box-a"),
            str(root / "box-b"),
            "--json",
            "--stat",
            "min",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    (test,) = json.loads(proc.stdout)["tests"]
    assert test["test"] == "test_w.py::test_mlp"
    addmm = next(o for o in test["ops"] if o["op"] == "aten::addmm")
    assert addmm["status"] == "slower" and addmm["ratio"] > 2  # 64x the multiply-adds
    assert addmm["a"]["calls_per_step"] == addmm["b"]["calls_per_step"] == 2


# -- compare: traces -----------------------------------------------------------------------------


def test_compare_a100_and_mi250_traces(capsys, shared_traces):
    """A real cross-vendor pair: ratios equal those of each trace's own analysis."""
    a, b = shared_traces / "a100-alexnet.json.gz", shared_traces / "mi250-minitoy-train.json.gz"
    code, out, err = run_cli(capsys, "compare", a, b, "--json")
    data = json.loads(out)
    assert data["a"]["device_key"] == "nvidia-a100-pg509-200"
    assert data["b"]["device_key"] == "amd-radeon-graphics"
    (test,) = data["tests"]
    rows = {o["op"]: o for o in test["ops"]}
    pa, pb = load_trace(a), load_trace(b)
    ops_a, ops_b = {o.name: o for o in pa.ops}, {o.name: o for o in pb.ops}
    assert set(rows) == set(ops_a) | set(ops_b)
    common = set(ops_a) & set(ops_b)
    assert len(common) >= 5
    for name in common:
        ms_a = ops_a[name].time_per_step.median / 1e6
        ms_b = ops_b[name].time_per_step.median / 1e6
        assert rows[name]["a"]["ms_per_step"] == pytest.approx(ms_a, rel=1e-3, abs=1e-6), name
        assert rows[name]["b"]["ms_per_step"] == pytest.approx(ms_b, rel=1e-3, abs=1e-6), name
        assert rows[name]["a"]["time"] == ("device" if ops_a[name].on_device else "cpu")
        if ms_a > 1e-4 and ms_b > 0:
            assert rows[name]["ratio"] == pytest.approx(ms_b / ms_a, rel=2e-3), name
    for name in set(ops_b) - set(ops_a):
        assert rows[name]["status"] == "added"
    for name in set(ops_a) - set(ops_b):
        assert rows[name]["status"] == "removed"
    # kernels under their launching op, per vendor
    addmm_b = [k["name"] for k in rows["aten::addmm"]["kernels"]["b"]]
    assert any(name.startswith("Cijk_") for name in addmm_b)  # a ROCm GEMM kernel
    # the A100 trace marks no steps, the MI250's one: a whole capture against a step, nothing judged
    assert (code, test["regressed"], test["time_judged"]) == (0, False, False)
    assert f"A: {NO_STEP_MARKERS}" in data["warnings"]


def test_same_fields_and_units_for_gpu_and_cpu_traces(capsys, shared_traces):
    gpu = json.loads(
        run_cli(
            capsys, "compare", shared_traces / "a100-alexnet.json.gz", shared_traces / "a100-alexnet.json.gz", "--json"
        )[1]
    )
    cpu = json.loads(
        run_cli(capsys, "compare", shared_traces / "cpu-only.json.gz", shared_traces / "cpu-only.json.gz", "--json")[1]
    )
    assert gpu["unit"] == cpu["unit"]
    keys = {tuple(sorted(o)) for d in (gpu, cpu) for o in d["tests"][0]["ops"]}
    assert len(keys) == 1
    sides = {tuple(sorted(o[s])) for d in (gpu, cpu) for o in d["tests"][0]["ops"] for s in ("a", "b")}
    assert sides == {("calls_per_step", "max_ms", "median_ms", "ms_per_step", "steps", "steps_run", "time")}
    assert not gpu["regressed"] and all(o["status"] == "same" for o in gpu["tests"][0]["ops"])


def test_compare_written_traces_exact_ratio(capsys, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json.gz"
    write_trace(a, profile(700).events, {})
    write_trace(b, profile(2100).events, {})
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    assert code == 1
    ops = {o["op"]: o for o in json.loads(out)["tests"][0]["ops"]}
    assert ops["aten::addmm"]["ratio"] == 3.0
    assert ops["aten::addmm"]["a"]["ms_per_step"] == 0.35


def test_a_trace_without_step_markers_is_said_so_and_its_times_are_not_judged(capsys, tmp_path):
    """A torch.profiler trace of 5 calls made without prof.step() reads as one step of 5 calls: a
    trial's compare against opprof's trace of the same code read `B regressed` on every op, with
    `slower (calls)` rows and no word of the missing markers. Two such traces compare as two whole
    captures (test_compare_reads_a_trace_that_is_a_bare_list_of_events)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, steps_with([700] * 5), {})
    write_trace(b, [op("aten::mm", i * 10_000 + 10, 700) for i in range(5)], {})
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0
    assert f"warning: B: {NO_STEP_MARKERS}" in out.splitlines()
    assert out.splitlines()[-1] == "opprof compare: 0 of 1 compared test regressed in B"  # no `calls differ` either
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    assert json.loads(out)["tests"][0]["time_judged"] is False
    for fail_on in ("structure", "structure,work,time"):  # 1 -> 5 calls a step: the markers', nothing judged
        assert run_cli(capsys, "compare", a, b, f"--fail-on={fail_on}")[0] == 0
    added = [*steps_with([700] * 5), op("aten::relu", 45_000, 900)]  # an op only B has: not judged either
    write_trace(b, [e for e in added if not e.name.startswith("ProfilerStep")], {})
    assert run_cli(capsys, "compare", a, b)[0] == 0
    code, out, _ = run_cli(capsys, "compare", a, a)  # both marked: judged, no word
    assert code == 0 and "no step markers" not in out
    code, out, _ = run_cli(capsys, "compare", b, b)  # neither: two whole captures, compared as such
    assert code == 0 and "no step markers" not in out
    assert json.loads(run_cli(capsys, "compare", b, b, "--json")[1])["tests"][0]["time_judged"] is True


def test_compare_reads_an_out_of_range_machine_reference_in_a_trace_header_as_none(capsys, tmp_path):
    """A trace header's reference of 10**40 ns (hand-edited, or another tool's) is no reading: the
    comparison runs and exits by its verdict (a review's raised from the baseline document, exit 1,
    which says B regressed)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, profile(700).events, {"opprof": {"small_reference_ns": 140_000}})
    write_trace(b, profile(700).events, {"opprof": {"small_reference_ns": 10**40, "reference_ns": 10**40}})
    code, out, err = run_cli(capsys, "compare", a, b)
    assert code == 0 and "Traceback" not in err


def test_a_trace_without_flops_against_one_with_them_is_no_work_change(capsys, tmp_path):
    """A plain torch.profiler trace (record_shapes, no with_flops) against opprof's of the same
    model: FLOPs unknown on one side, not `0 -> 134.2M`: exit 0 under --fail-on work (a trial's
    exited 1). A wider layer still fails it by its inputs."""
    from baseline_docs import mlp_profile

    plain, counted, wider = tmp_path / "plain.json", tmp_path / "counted.json", tmp_path / "wider.json"
    write_trace(plain, mlp_profile(1024, with_flops=False).events, {})
    write_trace(counted, mlp_profile(1024).events, {})
    write_trace(wider, mlp_profile(2048, with_flops=False).events, {})
    code, out, _ = run_cli(capsys, "compare", plain, counted, "--fail-on", "work")
    assert code == 0 and "FLOPs" not in out and "0 of 1 compared test failed in B (--fail-on work)" in out
    code, out, _ = run_cli(capsys, "compare", counted, wider, "--fail-on", "work")
    assert code == 1 and "aten::addmm: inputs (float[1024]" in out and "FLOPs" not in out


def test_compare_reads_the_facts_an_exported_trace_carries_and_only_plain_ones(capsys, tmp_path):
    """A trace opprof exported holds the machine and torch facts in its header: compare names
    them as a baseline's; a hand-edited header's odd values (a list, a bool, a foreign key) are
    left unknown, never a traceback."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    facts = {"torch": "2.13.0+cpu", "cpu_model": True, "gpu_name": ["A10"], "thread_setup": "2 CPUs", "x": 1}
    write_trace(a, profile(700).events, {"opprof": {"environment": facts}})
    write_trace(b, profile(700).events, {"opprof": {"environment": "2.13"}})
    sides = json.loads(run_cli(capsys, "compare", a, b, "--json")[1])
    environment = sides["a"]["environment"]
    assert (environment["torch"], environment["thread_setup"]) == ("2.13.0+cpu", "2 CPUs")
    assert environment["cpu_model"] is None and environment["gpu_name"] is None and "x" not in environment
    assert set(sides["b"]["environment"].values()) == {None}


def test_compare_stat_min(capsys, tmp_path):
    root = tmp_path / ".opprof"
    a = write_folder(root, "a", {"t.py::t": analyze(steps_with([500, 900, 900]))})
    b = write_folder(root, "b", {"t.py::t": analyze(steps_with([500, 500, 500]))})
    by = {}
    for stat in ("median", "min"):
        data = json.loads(run_cli(capsys, "compare", a, b, "--json", "--stat", stat)[1])
        by[stat] = next(o for o in data["tests"][0]["ops"] if o["op"] == "aten::mm")["a"]["ms_per_step"]
    assert by == {"median": 0.9, "min": 0.5}


def test_compare_warns_of_ops_outside_the_steps_of_a_trace(capsys, tmp_path):
    """B's slow op lies outside every step: no per-step number holds it, so it compares as
    faster; the trace's outside_steps warning is said above the table and in the JSON."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, [*steps_with([500] * 3), *(op("aten::empty", i * 10_000 + 600, 1) for i in range(3))], {})
    write_trace(b, [*steps_with([500] * 3), op("aten::empty", 40_000, 2_500)], {})
    code, out, _ = run_cli(capsys, "compare", a, b)
    warning = "B: outside_steps: 1 of 4 CPU ops lie outside the ProfilerStep annotations"
    assert code == 0 and f"\nwarning: {warning}" in out and "warning: A:" not in out
    data = json.loads(run_cli(capsys, "compare", a, b, "--json")[1])
    assert [w.split(":", 2)[:2] for w in data["warnings"]] == [["B", " outside_steps"]]
    assert data["a"]["warnings"] == [] and data["b"]["warnings"] == [data["warnings"][0][3:]]


def test_compare_warns_of_two_machines_and_of_two_tests(capsys, folders):
    """Two device keys, one side on a device and the other on the CPU only (told from the ops,
    whatever the keys, also where a trace's key is unknown), and two baseline files of different
    tests: said, and the JSON names each side's test."""
    t4_mlp = folders[0] / "tests" / "test_m.py" / "test_mlp.json"
    t4_small = folders[0] / "tests" / "test_m.py" / "test_small.json"
    code, out, _ = run_cli(capsys, "compare", t4_mlp, t4_small, "--json")
    data = json.loads(out)
    assert data["warnings"] == [
        "A and B are baselines of two tests (tests/test_m.py::test_mlp, tests/test_m.py::test_small): "
        "their ops differ by what the tests run"
    ]
    assert [(t["in_a"], t["in_b"]) for t in data["tests"]] == [
        ("tests/test_m.py::test_mlp", "tests/test_m.py::test_small")
    ]
    _, out, _ = run_cli(capsys, "compare", *folders)
    assert "warning: A ran on nvidia-tesla-t4, B on nvidia-a10: the times compare two machines\n" in out
    on_cpu = analyze(steps_with([500] * 3))
    cpu = write_folder(folders[0].parent, "ci-pool", {"tests/test_m.py::test_mlp": on_cpu})
    _, out, _ = run_cli(capsys, "compare", folders[0], cpu)
    assert "warning: A ran on nvidia-tesla-t4, B on ci-pool: the times compare two machines\n" in out
    assert "warning: A's ops ran on a device, B's on the CPU only: device times on one side, CPU times" in out
    trace = folders[0].parent / "cpu.json"  # a torch CPU trace's header names no device: its key is unknown
    write_trace(trace, steps_with([500] * 3), {})
    _, out, _ = run_cli(capsys, "compare", trace, t4_mlp)
    assert "two machines" not in out
    assert "warning: B's ops ran on a device, A's on the CPU only: device times on one side, CPU times" in out
    _, out, _ = run_cli(capsys, "compare", t4_mlp, t4_mlp)
    assert "warning:" not in out
    # a trace opprof wrote of another test than the baseline's (a trial's read `B not slower` alone)
    of_small = folders[0].parent / "small.json"
    write_trace(of_small, steps_with([500] * 3), {"opprof": {"nodeid": "tests/test_m.py::test_small"}})
    _, out, _ = run_cli(capsys, "compare", of_small, t4_mlp)
    assert (
        "warning: A and B are a trace and a baseline of two tests (tests/test_m.py::test_small, "
        "tests/test_m.py::test_mlp): their ops differ by what the tests run\n" in out
    )
    assert "\ntests/test_m.py::test_small vs tests/test_m.py::test_mlp: " in out  # each side by its test
    _, out, _ = run_cli(capsys, "compare", t4_small, of_small)
    assert "two tests" not in out
    # one test on each side: named by it, not `tests/test_m.py::test_small vs small.json` (a trial's two traces)
    assert "\ntests/test_m.py::test_small: B " in out and " vs small.json" not in out
    again = folders[0].parent / "again.json"
    write_trace(again, steps_with([500] * 3), {"opprof": {"nodeid": "tests/test_m.py::test_small"}})
    data = json.loads(run_cli(capsys, "compare", of_small, again, "--json")[1])
    assert [(t["test"], t["in_a"], t["in_b"]) for t in data["tests"]] == [
        ("tests/test_m.py::test_small", "small.json", "again.json")
    ]


def test_compare_and_show_print_stored_times_to_the_digits_they_have(capsys, tmp_path):
    """Times compared are held to 4 significant digits: 145.0295 ms prints `145.0`, not
    `145.000`, which claims microseconds it does not have; small times keep 3 decimals."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, us in ((a, 145_029.5), (b, 29_951_779.0)):
        long_steps = [step(i + 1, i * 40_000_000, 39_000_000) for i in range(3)]
        write_trace(path, [*long_steps, *(op("aten::mm", i * 40_000_000 + 10, us) for i in range(3))], {})
    _, out, _ = run_cli(capsys, "compare", a, b)
    row = next(line.split() for line in out.splitlines() if line.startswith("aten::mm"))
    assert row[3:7] == ["145.0", "29950", "206.55x", "+29805"]
    root = tmp_path / ".opprof"
    folder = write_folder(root, "cpu-x86_64", {"t.py::t": analyze(steps_with([350.4, 350.4, 350.4]))})
    _, out, _ = run_cli(capsys, "show", folder)
    assert next(line.split() for line in out.splitlines() if line.startswith("aten::mm"))[2:5] == [
        "0.350",
        "0.350",
        "0.350",
    ]


# -- compare: --op, the step wall, torch upgrades, --top ----------------------------------------


def test_compare_op_judges_only_the_chosen_ops(capsys, folders):
    """--op limits the rows and the exit code to the chosen ops: B's 2x addmm fails a compare of
    aten::add*, not one of aten::relu; tests without a chosen op are named, not compared."""
    a, b = folders
    code, out, _ = run_cli(capsys, "compare", a, b, "--json", "--op", "aten::relu")
    data = json.loads(out)
    assert code == 0 and data["regressed"] is False and data["op_filter"] == ["aten::relu"]
    assert {t["test"]: [o["op"] for o in t["ops"]] for t in data["tests"]} == {
        "tests/test_m.py::test_mlp": ["aten::relu"],
        "tests/test_m.py::test_small": ["aten::relu"],
    }
    code, out, _ = run_cli(capsys, "compare", a, b, "--op", "aten::add*")
    assert code == 1 and "tests/test_m.py::test_mlp: B regressed: 1 op worse" in out
    assert "only ops matching aten::add*, with the kernels they launched" in out
    code, out, _ = run_cli(capsys, "compare", a, b, "--json", "--op", "aten::clone")
    data = json.loads(out)
    assert code == 1  # an op only B has, chosen, costs more than the floor
    assert [t["test"] for t in data["tests"]] == ["tests/test_m.py::test_mlp"]
    assert data["without_chosen_op"] == ["tests/test_m.py::test_small"]
    _, out, _ = run_cli(capsys, "compare", a, b, "--op", "aten::clone")
    assert "no op matching --op (1): tests/test_m.py::test_small" in out


def test_compare_op_of_a_kernel_name_names_the_ops_that_launched_it(capsys, folders):
    """compare judges ops: an --op that matches a kernel and no op exits 2 naming the ops to
    choose (it compared nothing and exited 0)."""
    a, b = folders
    code, out, err = run_cli(capsys, "compare", a, b, "--op", "sm90*")
    assert (code, out) == (2, "")
    assert "--op sm90*: matches kernels but no op in" in err
    assert err.rstrip().endswith("choose the ops that launched them (aten::addmm)")


def test_compare_lists_each_ops_own_share_of_a_kernel_several_ops_launched(capsys, tmp_path):
    """A kernel two ops launch is listed under each with that op's own calls and ms (it showed
    the kernel's sum under both, more than the op's own device time)."""
    from test_baseline import shared_kernel_profile

    path = tmp_path / "b.json"
    write_baseline(path, baseline_from_profile(shared_kernel_profile(), "t.py::t", "gpu", ENV))
    code, out, _ = run_cli(capsys, "compare", path, path, "--json")
    ops = {o["op"]: o for o in json.loads(out)["tests"][0]["ops"]}
    assert code == 0
    assert ops["record_param_comms"]["kernels"]["a"] == [
        {"name": "ncclKernel", "calls_per_step": 4, "device_ms_per_step": 1.2}
    ]
    assert ops["c10d::_allgather_base_"]["kernels"]["b"] == [
        {"name": "ncclKernel", "calls_per_step": 1, "device_ms_per_step": 0.8}
    ]
    for row in ops.values():
        assert sum(k["device_ms_per_step"] for k in row["kernels"]["a"]) <= row["a"]["ms_per_step"]


def test_console_script_compare_exit_code(tmp_path):
    """Through the installed `opprof` entry point (or python -m): the exit code reaches the shell."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, profile(700).events, {})
    write_trace(b, profile(1400).events, {})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "compare", str(a), str(b)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "a.json vs b.json: B regressed" in proc.stdout


def test_cpu_against_gpu_names_both_times(capsys, tmp_path):
    """The same model on CPU (A) and on a GPU (B): the time column says which time each side is."""
    cpu_events = [e for e in profile(700).events if e.kind in ("cpu_op", "annotation")]
    a, b = tmp_path / "cpu.json", tmp_path / "gpu.json"
    write_trace(a, cpu_events, {})
    write_trace(b, profile(700).events, {})
    code, out, _ = run_cli(capsys, "compare", a, b)
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():  # the first table only: the kernel table repeats op names
        if line.startswith("aten::"):
            rows.setdefault(line.split()[0], line.split())
    assert rows["aten::addmm"][7] == "cpu/device"
    assert rows["aten::relu"][7] == "cpu"
    assert code == 0  # 0.70 ms of CPU time against 0.35 ms of device time: B faster


def test_compare_warns_when_the_machine_references_ran_at_other_speeds(capsys, tmp_path):
    """A newcomer's B was recorded while the machine ran 79x slower: every test `regressed` and
    nothing said the machine, which both baselines' references showed. The reference that moved
    most is named with its factor (the median over the tests), either way; within a steady
    machine's own spread, nothing is said."""
    from dataclasses import replace

    root = tmp_path / ".opprof"

    def folder(key, matmul, dispatch):
        for nodeid in ("t.py::a", "t.py::b", "t.py::c"):
            doc = baseline_from_profile(analyze(steps_with([500] * 3)), nodeid, key, ENV)
            write_baseline(
                baseline_path(root, key, nodeid), replace(doc, reference_ms=matmul, dispatch_reference_ms=dispatch)
            )
        return root / key

    a, b, c = folder("a", 0.1866, 0.40), folder("b", 14.81, 6.0), folder("c", 0.19, 0.41)
    _, out, _ = run_cli(capsys, "compare", a, b)
    assert (
        "warning: B's machine ran the matmul reference 79.37x slower than A's (median of 3 tests): CPU times "
        "differ by about that much with no change to the code (another machine, or load while one side recorded)"
    ) in out
    data = json.loads(run_cli(capsys, "compare", b, a, "--json")[1])
    assert [w for w in data["warnings"] if "reference" in w][0].startswith(
        "B's machine ran the matmul reference 79.37x faster than A's"
    )
    assert "reference" not in run_cli(capsys, "compare", a, c)[1]


def cpu_steps(outside_us, steps=6):
    """CPU-only steps: one 100 us matmul, then `outside_us` of Python before the step ends."""
    events = []
    for i in range(steps):
        base = i * 10_000
        events += [step(i + 1, base, 100 + outside_us), op("aten::mm", base, 100)]
    return events


def test_compare_has_a_step_wall_row_judged_like_an_op(capsys, tmp_path):
    """A trial's 3 ms sleep a step failed its test on the step wall, and `opprof compare` of its
    traces and of its baselines said `B not worse`: the time outside the ops is a row of its own,
    judged like an op, for traces and baseline folders; never where a side ran on a device (the
    wall holds the wait for it), nor under --op (no op glob chooses it)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, cpu_steps(20), {})
    write_trace(b, cpu_steps(3_000), {})
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    assert code == 1
    (test,) = json.loads(out)["tests"]
    wall = next(r for r in test["ops"] if r["op"] == "step wall")
    assert (wall["a"]["ms_per_step"], wall["b"]["ms_per_step"], wall["status"]) == (0.02, 3.0, "slower")
    assert test["ops"][0]["op"] == "step wall"  # the largest move first
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert "B regressed: the step wall worse (the time outside the ops)" in out
    code, out, _ = run_cli(capsys, "compare", a, b, "--op", "aten::mm")
    assert code == 0 and "step wall" not in out
    root = tmp_path / ".opprof"
    fa = write_folder(root, "cpu-a", {"t.py::test_x": analyze(cpu_steps(20))})
    fb = write_folder(root, "cpu-b", {"t.py::test_x": analyze(cpu_steps(3_000))})
    code, out, _ = run_cli(capsys, "compare", fa, fb)
    assert code == 1 and "B regressed: the step wall worse" in out
    code, out, _ = run_cli(capsys, "compare", fa, fa)
    assert code == 0 and "step wall" in out  # the row is shown, `same`
    # labelled as what it holds: `opprof show` gives the whole step's wall beside it (an LLM trial's)
    (row,) = [line for line in out.splitlines() if line.startswith("step wall")]
    assert row.startswith("step wall (outside the ops)  ") and row.split()[-1] == "same", row
    ga = write_folder(root, "gpu-a", {"t.py::test_x": profile(700)})
    gb = write_folder(root, "gpu-b", {"t.py::test_x": profile(700)})
    code, out, _ = run_cli(capsys, "compare", ga, gb)
    assert "step wall" not in out


def test_a_side_that_does_not_name_its_torch_is_said_so(capsys, tmp_path):
    """A trial read `A was recorded with unrecorded, B with torch 2.13.0+cpu` (a trace torch wrote
    against a baseline): the side that names no torch is said not to."""
    root = tmp_path / ".opprof"
    for side, env in (("a", {"cuda": None}), ("b", {"torch": "2.13.0+cpu", "cuda": None})):
        write_baseline(
            baseline_path(root / side, "k", "t.py::test_x"), baseline_from_profile(profile(), "t.py::test_x", "k", env)
        )
    _, out, _ = run_cli(capsys, "compare", root / "a" / "k", root / "b" / "k")
    assert (
        "warning: A names no torch version (a trace torch wrote names none), B was recorded with torch 2.13.0+cpu: "
        "ops and their counts may differ by the software alone, and times by its build\n" in out
    )
    _, out, _ = run_cli(capsys, "compare", root / "b" / "k", root / "a" / "k")
    assert "warning: B names no torch version (a trace torch wrote names none), A was recorded with torch" in out
    assert "unrecorded" not in out


def test_compare_across_a_torch_upgrade_warns_judges_no_single_step_time_and_shows_call_changes(capsys, tmp_path):
    """A trial compared its baselines across a torch upgrade: no word of the two torches, an
    exit 1 on a single-step capture's time (which the plugin never judges), and `--top 4` hid
    the one structure change. Now: a warning naming both, the single-step test's time shown
    but not judged (exit 0 where nothing else is worse), and a row whose calls changed is
    listed beyond --top, in the text and the JSON."""
    root = tmp_path / ".opprof"
    old = {"torch": "2.11.0", "cuda": None}
    new = {"torch": "2.13.0", "cuda": None}
    single = {"t.py::test_once": (profile(300, steps=4), profile(900, steps=4))}  # a run(steps=4): not judged either
    a_dir, b_dir = root / "a", root / "b"
    for folder, env, which in ((a_dir, old, 0), (b_dir, new, 1)):
        for nodeid, pair in single.items():
            write_baseline(
                baseline_path(folder, "cpu-x86_64", nodeid),
                baseline_from_profile(pair[which], nodeid, "cpu-x86_64", env),
            )
    code, out, _ = run_cli(capsys, "compare", a_dir / "cpu-x86_64", b_dir / "cpu-x86_64")
    assert code == 0, out
    assert (
        "warning: A was recorded with torch 2.11.0, B with torch 2.13.0: ops and their counts may differ by the "
        "software alone, and times by its build\n" in out
    )
    assert (
        "warning: 1 compared baseline holds under 5 steps on a side (a whole call, capture(), the marker, a short "
        "run()): its slower ops are shown, not judged, as the plugin never judges their times (an op only B has "
        "still counts, by its median, as the plugin's structure verdict fails it): t.py::test_once\n" in out
    )
    assert "t.py::test_once: B not slower" in out and "aten::addmm" in out and "slower (not judged)" in out
    code, out, _ = run_cli(capsys, "compare", a_dir / "cpu-x86_64", b_dir / "cpu-x86_64", "--json")
    (test,) = json.loads(out)["tests"]
    assert (code, test["regressed"], test["time_judged"]) == (0, False, False)
    # an op only B has, costing 0.3 ms by its median: B regressed, in a test whose time is not judged (a
    # trial's read as a contradiction of the warning, which said its times are not judged)
    write_baseline(
        baseline_path(b_dir, "cpu-x86_64", "t.py::test_once"),
        baseline_from_profile(profile(300, extra=True, steps=4), "t.py::test_once", "cpu-x86_64", new),
    )
    code, out, _ = run_cli(capsys, "compare", a_dir / "cpu-x86_64", b_dir / "cpu-x86_64")
    assert code == 1 and "t.py::test_once: B regressed: 1 op worse" in out and "an op only B has still counts" in out
    # a call-count change with little time stays listed beyond --top
    nodeid = "t.py::test_many"
    for folder, extra in ((a_dir, False), (b_dir, True)):
        write_baseline(
            baseline_path(folder, "cpu-x86_64", nodeid),
            baseline_from_profile(profile(700, extra=extra, steps=6), nodeid, "cpu-x86_64", ENV),
        )
    _, out, _ = run_cli(capsys, "compare", a_dir / "cpu-x86_64", b_dir / "cpu-x86_64", "--top", "1")
    table = out.split("t.py::test_many:")[1]
    assert "aten::clone" in table and "added" in table, table
    code, out, _ = run_cli(capsys, "compare", a_dir / "cpu-x86_64", b_dir / "cpu-x86_64", "--top", "1", "--json")
    many = next(t for t in json.loads(out)["tests"] if t["test"] == nodeid)
    assert "aten::clone" in [row["op"] for row in many["ops"]]

    # test_many was recorded with the same software on both sides: the warning counts the tests that differ
    assert (
        "A was recorded with torch 2.11.0, B with torch 2.13.0 (1 of 2 compared tests differ so): ops and their "
        "counts may differ by the software alone, and times by its build"
    ) in json.loads(out)["warnings"]


def many_ops(us, slow=None, sometimes=0, matmul_us=8_000, wall_us=16_500, steps=6, between_us=0, marked=True):
    """CPU steps of `wall_us`: 8 ops `aten::op<i>` of `us` each; `slow`: (op index, us) for one;
    `sometimes`: an aten::matmul of `matmul_us` in that many of the steps (the first ones);
    `between_us`: an aten::sort of that long after each step, outside it; `marked`: step markers."""
    events = []
    for i in range(steps):
        base = i * 100_000
        events += [step(i + 1, base, wall_us)] if marked else []
        events += [op("aten::sort", base + 50_000, between_us)] if between_us else []
        for j in range(8):
            events.append(op(f"aten::op{j}", base + 10 + j * 1000, slow[1] if slow and slow[0] == j else us))
        if i < sometimes:
            events.append(op("aten::matmul", base + 8_000, matmul_us))
    return events


def test_compare_top_keeps_the_slower_rows_and_counts_those_left_out(capsys, tmp_path):
    """A trial's `--top 3` hid 3 of the 6 slower ops that made B regress, in the text and the
    JSON, and at the default top 20 faster rows hid the one slower op: slower rows are listed
    beyond --top whatever their time, and the text counts the rows left out (the JSON too)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, many_ops(900, slow=(7, 100)), {})
    write_trace(b, many_ops(400, slow=(7, 300), wall_us=13_200), {})  # 7 ops 2x faster by 0.5 ms, op7 3x slower
    code, out, _ = run_cli(capsys, "compare", a, b, "--top", "3")
    assert code == 1 and "B regressed: 1 op worse" in out
    table = out.split("B regressed")[1]
    assert "aten::op7" in table and "slower" in table, table
    assert "(5 more rows, each within the tolerance or faster: --top shows more)" in table, table  # 7 ops, step wall
    code, out, _ = run_cli(capsys, "compare", a, b, "--top", "3", "--json")
    (test,) = json.loads(out)["tests"]
    assert [r["op"] for r in test["ops"] if r["status"] == "slower"] == ["aten::op7"]
    assert (len(test["ops"]), test["ops_left_out"]) == (4, 5)
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    assert json.loads(out)["tests"][0]["ops_left_out"] == 0 and len(json.loads(out)["tests"][0]["ops"]) == 9
    assert "more rows" not in run_cli(capsys, "compare", a, b)[1]


def test_compare_judges_an_op_b_ran_in_only_some_steps_by_its_costliest_step(capsys, tmp_path):
    """A trial's B ran an 8 ms aten::matmul in 2 of 6 steps: its median over steps is 0, and
    compare said `B not slower`, exit 0, with 0.000 ms for it. An op only B has that ran in some
    of its steps is judged as the plugin judges it, by its costliest step against the floor and
    the tolerance of A's fastest step; the row says in how many steps and how long at most, the
    JSON each side's `steps_run`, `steps` and `max_ms`."""
    a, b, once = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "once.json"
    write_trace(a, many_ops(100), {})
    write_trace(b, many_ops(100, sometimes=2), {})
    code, out, _ = run_cli(capsys, "compare", a, b, "--op", "aten::m*")
    assert code == 1 and "B regressed: 1 op worse" in out
    assert "added (in 2 of 6 steps, up to 8.000 ms)" in out
    (row,) = json.loads(run_cli(capsys, "compare", a, b, "--op", "aten::m*", "--json")[1])["tests"][0]["ops"]
    assert (row["status"], row["b"]["ms_per_step"], row["b"]["max_ms"]) == ("added", 0.0, 8.0)
    assert (row["b"]["steps_run"], row["b"]["steps"], row["a"]["steps_run"]) == (2, 6, None)
    code, out, _ = run_cli(capsys, "compare", b, a)
    assert code == 0 and "removed (was in 2 of 6 steps, up to 8.000 ms)" in out
    # within 20% of A's 16.5 ms step (3.3 ms) in its one step: not worse (a background thread's op can land so)
    write_trace(once, many_ops(100, sometimes=1, matmul_us=3_000), {})
    code, out, _ = run_cli(capsys, "compare", a, once, "--op", "aten::m*")
    assert code == 0 and "added (in 1 of 6 steps, up to 3.000 ms)" in out
    write_trace(once, many_ops(100, sometimes=1, matmul_us=3_600), {})
    assert run_cli(capsys, "compare", a, once, "--op", "aten::m*")[0] == 1
    assert run_cli(capsys, "compare", a, once, "--op", "aten::m*", "--tolerance", "25")[0] == 0  # 4.125 ms


def test_an_added_op_is_judged_by_its_median_whatever_the_stat_and_by_a_step_only_where_time_is(capsys, tmp_path):
    """A review: under `--stat min` a 1 ms op B added in 5 of 6 steps passed (its minimum is 0);
    a 2 ms op in 1 of 3 steps of baselines under 5 steps exited 1 though the warning said their
    times are not judged (the plugin judges none); against a trace without step markers the
    costliest step was held to the floor alone; an op between the steps read `in 0 of 6 steps,
    up to 0.000 ms`. Now: an added op costs by its median over B's steps; its costliest step
    counts only where time is judged and A has step walls; one outside the steps says so."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(a, many_ops(100, wall_us=9_000), {})
    write_trace(b, many_ops(100, wall_us=9_000, sometimes=5, matmul_us=1_000), {})
    for stat in ("median", "min"):
        assert run_cli(capsys, "compare", a, b, "--stat", stat)[0] == 1, stat
    # the row says the figure it was judged by where its column shows another (a trial's read 0.030 ms)
    code, out, _ = run_cli(capsys, "compare", a, b, "--stat", "min")
    row = next(line for line in out.splitlines() if line.startswith("aten::") and "added" in line)
    assert row.split()[4] == "0.000" and row.endswith("added (in 5 of 6 steps, up to 1.000 ms, median 1.000 ms)")
    (added,) = [
        o
        for o in json.loads(run_cli(capsys, "compare", a, b, "--stat", "min", "--json")[1])["tests"][0]["ops"]
        if o["status"] == "added"
    ]
    assert (added["b"]["ms_per_step"], added["b"]["median_ms"]) == (0.0, 1.0)
    _, out, _ = run_cli(capsys, "compare", a, b)
    assert "added (in 5 of 6 steps, up to 1.000 ms)" in out and "median 1.000" not in out  # the column is the median
    root = tmp_path / ".opprof"
    short = {"t.py::test_x": analyze(many_ops(100, steps=3))}
    fa = write_folder(root / "a", "cpu", short)
    fb = write_folder(
        root / "b", "cpu", {"t.py::test_x": analyze(many_ops(100, steps=3, sometimes=1, matmul_us=2_000))}
    )
    code, out, _ = run_cli(capsys, "compare", fa, fb)
    assert code == 0 and "added (in 1 of 3 steps, up to 2.000 ms)" in out and "shown, not judged" in out
    unmarked = tmp_path / "unmarked.json"
    write_trace(unmarked, many_ops(100, marked=False), {})
    write_trace(b, many_ops(100, sometimes=1, matmul_us=1_000), {})
    assert run_cli(capsys, "compare", unmarked, b, "--op", "aten::m*")[0] == 0  # no step of A to hold it to
    assert run_cli(capsys, "compare", a, b, "--op", "aten::m*")[0] == 0  # 1 ms within 20% of A's 9 ms step
    write_trace(b, many_ops(100, between_us=2_500), {})
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert "added (outside the steps)" in out and "0 of 6" not in out
    (wall,) = [
        r
        for r in json.loads(run_cli(capsys, "compare", a, a, "--json")[1])["tests"][0]["ops"]
        if r["op"] == "step wall"
    ]
    assert (wall["a"]["steps_run"], wall["a"]["steps"], wall["b"]["max_ms"]) == (
        6,
        6,
        8.2,
    )  # 9 ms steps, 0.8 ms of them in ops


# -- compare --fail-on ----------------------------------------------------------------------------


def mm_steps(n=64, cast=False, slow=1.0):
    """5 CPU steps of aten::mm on (8, n) x (n, n) inputs (700 us x `slow`), and with `cast` an
    aten::to of 10 us per step (below the 0.05 ms floor: a structure change, no time one)."""

    def body(i, base):
        mm = op("aten::mm", base + 10, 700 * slow, shapes=((8, n), (n, n)), dtypes=("float", "float"), flops=16 * n * n)
        return [mm, op("aten::to", base + 2000, 10)] if cast else [mm]

    return analyze(stepped(5, 9_000, body))


@pytest.fixture
def kinds(tmp_path):
    """A and B of one device key: in B test_cast adds a cheap op (structure), test_wide widens its
    inputs (work), test_slow doubles its time (time), test_same is the same."""
    names = ("t.py::test_cast", "t.py::test_same", "t.py::test_slow", "t.py::test_wide")
    a = write_folder(tmp_path / "a", "cpu-x86_64", {name: mm_steps() for name in names})
    changed = {
        "t.py::test_cast": mm_steps(cast=True),
        "t.py::test_slow": mm_steps(slow=2),
        "t.py::test_wide": mm_steps(128),
    }
    b = write_folder(tmp_path / "b", "cpu-x86_64", {name: changed.get(name, mm_steps()) for name in names})
    return a, b


CALLS_DIFFER = (  # the default judges time; a scale trial's 144 tests added ops above `0 of 144 regressed`
    "; calls differ in 1 (t.py::test_cast), which --fail-on structure fails on, as the plugin's structure verdict does"
)


@pytest.mark.parametrize(
    ("fail_on", "code", "last"),
    [
        (None, 1, "opprof compare: 1 of 4 compared tests regressed in B: t.py::test_slow" + CALLS_DIFFER),
        ("time", 1, "opprof compare: 1 of 4 compared tests regressed in B: t.py::test_slow" + CALLS_DIFFER),
        (
            "structure",
            1,
            "opprof compare: 1 of 4 compared tests failed in B (--fail-on structure): t.py::test_cast (structure)",
        ),
        ("work", 1, "opprof compare: 1 of 4 compared tests failed in B (--fail-on work): t.py::test_wide (work)"),
        (
            "time, work,structure",
            1,
            "opprof compare: 3 of 4 compared tests failed in B (--fail-on structure,work,time): "
            "t.py::test_cast (structure), t.py::test_slow (time), t.py::test_wide (work)",
        ),
        ("none", 0, "opprof compare: 0 of 4 compared tests failed in B (--fail-on none)"),
    ],
)
def test_fail_on_chooses_the_kinds_that_exit_1_and_the_last_line_names_them(capsys, kinds, fail_on, code, last):
    """--fail-on takes the plugin's kinds as a comma list: B's structure, work or time change exits 1
    where it is named, and the last line says which tests failed on which kinds; the default (time)
    keeps its exit code and its last line."""
    a, b = kinds
    argv = ("compare", a, b) if fail_on is None else ("compare", a, b, "--fail-on", fail_on)
    got, out, err = run_cli(capsys, *argv)
    assert (got, err) == (code, "")
    assert out.rstrip().splitlines()[-1] == last


def test_fail_on_structure_or_work_fails_what_the_default_passes(capsys, kinds):
    """A structure or a work change alone exits 0 by default (compare judges time) and 1 under
    --fail-on naming it; the test's line then shows the plugin's structure verdict."""
    a, b = kinds
    for test, kind in (("test_cast", "structure"), ("test_wide", "work")):
        pair = [next(side.rglob(f"{test}.json")) for side in (a, b)]
        assert run_cli(capsys, "compare", *pair)[0] == 0, test
        code, out, _ = run_cli(capsys, "compare", *pair, "--fail-on", kind)
        assert code == 1, test
        assert out.rstrip().endswith(f"failed in B (--fail-on {kind}): t.py::{test} ({kind})")
    code, out, _ = run_cli(capsys, "compare", a, b, "--fail-on", "structure")
    # a test that failed on structure says so on its line (it read `B not slower` over the change)
    assert "t.py::test_cast: B not slower; failed on structure\nstructure changed: + aten::to (1/step)\n" in out
    assert "t.py::test_wide: B not slower; work changed, which does not fail here (--fail-on structure)\n" in out
    assert "t.py::test_slow: B slower: 1 op worse; time does not fail here (--fail-on structure)\n" in out


def test_fail_on_in_json_says_what_failed_and_why(capsys, kinds):
    """--json gives the kinds (`fail_on`), whether B failed on them (`failed`), and per test the
    kinds it failed on with each kind's changes; `regressed` stays the time judgement."""
    a, b = kinds
    code, out, _ = run_cli(capsys, "compare", a, b, "--json", "--fail-on", "work,structure")
    assert code == 1
    data = json.loads(out)
    assert (data["fail_on"], data["failed"], data["regressed"]) == (["structure", "work"], True, True)
    tests = {t["test"]: t for t in data["tests"]}
    assert {name: t["failed_on"] for name, t in tests.items()} == {
        "t.py::test_cast": ["structure"],
        "t.py::test_same": [],
        "t.py::test_slow": [],
        "t.py::test_wide": ["work"],
    }
    assert tests["t.py::test_cast"]["structure_changes"] == [
        "+ aten::to (1/step)"
    ]  # each change, as work_changes: no prefix
    (change,) = tests["t.py::test_wide"]["work_changes"]
    assert change.startswith("aten::mm: 4x the FLOPs per step")
    assert tests["t.py::test_slow"]["regressed"] is True
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    data = json.loads(out)
    assert (code, data["fail_on"], data["failed"]) == (1, ["time"], True)
    assert [t["failed_on"] for t in data["tests"]] == [[], [], ["time"], []]
    # the last line's count of tests whose calls differ, as a script reads it (a trial's)
    assert data["calls_differ"] == ["t.py::test_cast"]
    assert [t["calls_differ"] for t in data["tests"]] == [["aten::to"], [], [], []]


def test_fail_on_environment_fails_two_device_keys(capsys, folders):
    """--fail-on environment exits 1 where the sides' machine setups differ, a line per test saying
    what; two GPUs' kernel names are still no work change."""
    a, b = folders
    code, out, _ = run_cli(capsys, "compare", a, b, "--fail-on", "environment,work", "--op", "aten::relu")
    assert code == 1
    changed = "environment differs: device nvidia-tesla-t4 -> nvidia-a10"
    assert f"tests/test_m.py::test_small: B not slower; failed on environment\n{changed}\n" in out
    assert "work changed" not in out  # sm90_gemm vs ampere_sgemm: each GPU launches its own
    assert out.rstrip().endswith(
        "(--fail-on work,environment): tests/test_m.py::test_mlp (environment), tests/test_m.py::test_small (environment)"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            "strucure",
            "argument --fail-on: 'strucure' is not a comma list of structure, work, time, environment (or none); "
            "did you mean structure? (see opprof compare --help)",
        ),
        (
            "structure work",
            "'structure work' is not a comma list of structure, work, time, environment (or none); separate the kinds with commas: structure, work",
        ),
        ("none,time", "none stands alone (no verdict fails a test): give none or kinds, not both"),
        ("None", "'None' is not a comma list of structure, work, time, environment (or none); did you mean none?"),
        ("", "argument --fail-on: '' is not a comma list of structure, work, time, environment (or none) (see"),
    ],
)
def test_a_bad_fail_on_is_one_line_and_exit_2(capsys, kinds, value, expected):
    """A --fail-on value that is no list of kinds is refused in one line naming it and the fix, as
    the plugin's --opprof-fail-on is, before anything is read."""
    a, b = kinds
    code, out, err = run_cli(capsys, "compare", a, b, "--fail-on", value)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("opprof: error: ") and expected in err, err


def test_fail_on_environment_does_not_judge_a_trace_that_names_no_device(capsys, tmp_path):
    """An opprof-exported trace (device key cpu-x86_64) beside a plain torch.profiler one whose header
    names no device (key `unknown`): nothing is known of the plain one's machine, so no environment
    verdict, as the warnings say none."""
    events = [step(1, 0, 1000), op("aten::mm", 10, 300)]
    named, plain = tmp_path / "named.json", tmp_path / "plain.json"
    write_trace(named, events, {"opprof": {"device_key": "cpu-x86_64"}})
    write_trace(plain, events, {})
    for a, b in ((named, plain), (plain, named)):
        code, out, _ = run_cli(capsys, "compare", a, b, "--fail-on", "environment", "--json")
        data = json.loads(out)
        assert code == 0 and not data["failed"] and data["tests"][0]["environment_changes"] == [], out


def test_fail_on_structure_lists_every_change_in_json_and_points_there(capsys, tmp_path):
    """A text line names the costliest changes and counts the rest, pointing to `--json`, which lists
    each (the plugin's `-v or --opprof-json` are no flags of compare's: a review's 180 changes were
    out of reach)."""

    def steps(extra):
        events = []
        for i in range(6):
            base = i * 10_000
            events += [step(i + 1, base, 9_000), op("aten::mm", base + 10, 500)]
            events += [op(f"aten::x{j}", base + 1000 + 100 * j, 20 + j) for j in range(extra)]
        return analyze(events)

    root = tmp_path / ".opprof"
    a = write_folder(root, "cpu-a", {"t.py::test_m": steps(0)})
    b = write_folder(root, "cpu-b", {"t.py::test_m": steps(15)})
    code, out, _ = run_cli(capsys, "compare", a, b, "--fail-on", "structure")
    (line,) = [x for x in out.split("\n") if x.startswith("structure changed: ")]
    assert code == 1 and line.endswith("more (--json lists every change)") and "-v" not in line, line
    code, out, _ = run_cli(capsys, "compare", a, b, "--fail-on", "structure", "--json")
    changes = json.loads(out)["tests"][0]["structure_changes"]
    assert sorted(changes) == sorted(f"+ aten::x{j} (1/step)" for j in range(15))


def test_fail_on_given_twice_judges_both(capsys, kinds):
    """`--fail-on time --fail-on work` is both, as `--op` adds up (the last one alone dropped a time
    regression without a word)."""
    a, b = kinds
    code, out, _ = run_cli(capsys, "compare", a, b, "--fail-on", "time", "--fail-on", "work", "--json")
    data = json.loads(out)
    assert code == 1 and data["fail_on"] == ["work", "time"]
    assert {t["test"]: t["failed_on"] for t in data["tests"]}["t.py::test_slow"] == ["time"]


@pytest.mark.parametrize("given", [("none", "time"), ("work", "none")])
def test_fail_on_none_beside_kinds_given_twice_is_refused(capsys, kinds, given):
    """`--fail-on none --fail-on time` is refused as `none,time` is: which one was meant is not
    known (the kinds alone had been judged without a word)."""
    a, b = kinds
    code, out, err = run_cli(capsys, "compare", a, b, "--fail-on", given[0], "--fail-on", given[1])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "argument --fail-on: none stands alone (no verdict fails a test): " in err, err
    assert "give none or kinds, not both (given as two --fail-on)" in err, err


# -- the side by side's edges (mutation trial F: each of these changed an output and no test noticed) --


def _some_steps(steps=5, in_steps=5, extra_names=(), addmm_calls=1):
    """Steps of aten::addmm; aten::relu in the first `in_steps` only; one 1 us op per extra name."""
    events = []
    for i in range(steps):
        base = i * 10_000
        events.append(step(i + 1, base, 9_000))
        events += [op("aten::addmm", base + 20 + 800 * k, 700 // addmm_calls) for k in range(addmm_calls)]
        if i < in_steps:
            events.append(op("aten::relu", base + 1000, 50))
        events += [op(name, base + 2000 + 10 * j, 1) for j, name in enumerate(extra_names)]
    return analyze(events)


def test_a_single_step_baseline_on_either_side_is_shown_not_judged(capsys, tmp_path):
    """B's baseline of one step (a whole call, capture()): its slower op is shown, not judged, as on
    A's side: exit 0 with the warning."""
    a = write_folder(tmp_path / "a", "k", {"t.py::test": profile(700)})
    b = write_folder(tmp_path / "b", "k", {"t.py::test": profile(2100, steps=1)})
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0 and "1 compared baseline holds under" in out and "opprof compare: 0 of 1 compared test" in out


def test_the_side_by_sides_rows_say_each_sides_steps_and_keep_every_change_under_top(capsys, tmp_path):
    """An op both sides ran, A in 3 of its 5 steps, B in 4: `A in 3 of 5 steps, B in 4 of 5 steps`;
    --top 1 still shows the op only A has and the one only B has, and the JSON flags calls that
    changed and names its floor."""
    a = write_folder(tmp_path / "a", "k", {"t.py::test": _some_steps(in_steps=3, extra_names=("aten::gone",))})
    b = write_folder(
        tmp_path / "b", "k", {"t.py::test": _some_steps(in_steps=4, extra_names=("aten::new",), addmm_calls=2)}
    )
    out = run_cli(capsys, "compare", a, b)[1]
    assert "same (A in 3 of 5 steps, B in 4 of 5 steps)" in out
    assert "B not slower; calls differ for aten::gone, aten::new, aten::addmm: compare judges time" in out
    shown = [
        line.split()[0] for line in run_cli(capsys, "compare", a, b, "--top", "1")[1].splitlines() if " cpu " in line
    ]
    assert {"aten::gone", "aten::new"} <= set(shown) and "aten::relu" not in shown  # every change, no same row
    data = json.loads(run_cli(capsys, "compare", a, b, "--json", "--min-delta-ms", "0.2")[1])
    assert data["min_delta_ms"] == 0.2 and data["tolerance"] == 0.2
    rows = {r["op"]: r for r in data["tests"][0]["ops"]}
    assert rows["aten::addmm"]["calls_changed"] is True and rows["aten::relu"]["calls_changed"] is False


def test_the_step_walls_row_gives_each_sides_costliest_step(capsys, tmp_path):
    """The `step wall` row's max_ms is each side's costliest step outside the ops."""
    waits = [[100, 900, 100, 100, 100], [100, 100, 100, 1500, 100]]

    def walled(rest):
        events = []
        for i, r in enumerate(rest):
            base = i * 10_000
            events += [step(i + 1, base, 700 + r), op("aten::addmm", base, 700)]
        return analyze(events)

    a = write_folder(tmp_path / "a", "k", {"t.py::test": walled(waits[0])})
    b = write_folder(tmp_path / "b", "k", {"t.py::test": walled(waits[1])})
    rows = {r["op"]: r for r in json.loads(run_cli(capsys, "compare", a, b, "--json")[1])["tests"][0]["ops"]}
    assert (rows["step wall"]["a"]["max_ms"], rows["step wall"]["b"]["max_ms"]) == (0.9, 1.5)


def test_three_work_changes_are_listed_with_no_more_line_and_a_fourth_is_counted(capsys, tmp_path):
    """A test's work lines: up to 3, then `work changed for N more ops`."""

    def shaped(n, ops):
        events = []
        for i in range(5):
            base = i * 10_000
            events.append(step(i + 1, base, 9_000))
            events += [
                op(name, base + 10 + 100 * j, 50, shapes=((n,),), dtypes=("float",)) for j, name in enumerate(ops)
            ]
        return analyze(events)

    three, four = ["aten::a", "aten::b", "aten::c"], ["aten::a", "aten::b", "aten::c", "aten::d"]
    for ops, more in ((three, None), (four, "work changed for 1 more op (--json lists each)")):
        a = write_folder(tmp_path / f"a{len(ops)}", "k", {"t.py::test": shaped(4, ops)})
        b = write_folder(tmp_path / f"b{len(ops)}", "k", {"t.py::test": shaped(8, ops)})
        out = run_cli(capsys, "compare", a, b)[1]
        assert out.count("work changed: ") == 3
        assert (more in out) if more else "more ops" not in out


def test_a_file_and_a_folder_are_named_for_what_each_is_in_either_order(capsys, tmp_path, folders):
    """`compare FILE FOLDER` names the folder as the folder and the file as the file."""
    file = tmp_path / "t.json"
    write_trace(file, profile(700).events, {})
    code, _, err = run_cli(capsys, "compare", file, folders[0])
    assert code == 2 and f"cannot compare the folder {folders[0]} with the file {file}" in err


def test_a_trace_against_a_baseline_warns_of_a_side_and_of_nothing_more(capsys, tmp_path, folders):
    """A's trace with ops outside its steps: its warning says `A:`; a plain trace holds no capture
    number, so no `other captures` warning; the lines end with the tally, no `no test is in both`."""
    trace = tmp_path / "a.json"
    write_trace(trace, [*profile(700).events, op("aten::zeros", 60_000, 5)], {})
    baseline = next(folders[0].rglob("test_mlp.json"))
    code, out, _ = run_cli(capsys, "compare", trace, baseline)
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert any(line.startswith("warning: A: ") for line in warnings)
    assert not any("other captures" in line for line in warnings)
    assert "no test is in both A and B" not in out


def test_an_op_faster_within_the_tolerance_is_the_same(capsys, tmp_path):
    """addmm's kernel 0.700 -> 0.630 ms a step (10% faster, past the 0.05 ms floor, within the 20%
    tolerance): `same`; 0.700 -> 0.350: `faster`."""
    a = write_folder(tmp_path / "a", "k", {"t.py::test": profile(1400)})
    for b_us, status in ((1260, "same"), (700, "faster")):
        b = write_folder(tmp_path / f"b{b_us}", "k", {"t.py::test": profile(b_us)})
        rows = {r["op"]: r for r in json.loads(run_cli(capsys, "compare", a, b, "--json")[1])["tests"][0]["ops"]}
        assert rows["aten::addmm"]["status"] == status


def test_the_verdict_line_names_the_step_wall_and_min_marks_only_added_ops_by_their_median(capsys, tmp_path):
    """B's addmm 3x slower and 2 ms more a step outside the ops: `B regressed: the step wall and
    1 op worse`. Under --stat min only an op B added carries `median ... ms` (its cost is judged
    by it); an op both ran shows its minimum alone."""

    def run(addmm_us, rest_us, extra=False):
        events = []
        for i in range(5):
            base = i * 20_000
            events += [step(i + 1, base, addmm_us + rest_us + i * 10), op("aten::addmm", base, addmm_us + i * 10)]
            if extra:
                events.append(op("aten::clone", base + addmm_us + i * 10, 100 + 50 * i))
        return analyze(events)

    a = write_folder(tmp_path / "a", "k", {"t.py::test": run(700, 1000)})
    b = write_folder(tmp_path / "b", "k", {"t.py::test": run(2100, 3000, extra=True)})
    out = run_cli(capsys, "compare", a, b)[1]
    assert "t.py::test: B regressed: the step wall and 2 ops worse" in out
    out = run_cli(capsys, "compare", a, b, "--stat", "min")[1]
    marked = [line.split()[0] for line in out.splitlines() if "median " in line and " ms" in line]
    assert marked == ["aten::clone"]


def test_an_op_b_added_in_every_step_is_judged_by_its_median_not_its_costliest_step(capsys, tmp_path):
    """An aten::clone only B has, in every step: 0.010 ms in four and 0.400 ms in one. Its median is
    under the 0.05 ms floor: not a regression, whatever its costliest step (that rule is for an op
    that ran in some steps only, whose median can be 0); in 2 of 5 steps at 0.400 ms it is one."""

    def run(clone_us=()):
        events = []
        for i in range(5):
            base = i * 20_000
            events += [step(i + 1, base, 1000), op("aten::addmm", base, 700)]
            if i < len(clone_us) and clone_us[i]:
                events.append(op("aten::clone", base + 750, clone_us[i]))
        return analyze(events)

    a = write_folder(tmp_path / "a", "k", {"t.py::test": run()})
    every = write_folder(tmp_path / "every", "k", {"t.py::test": run((10, 10, 10, 10, 400))})
    some = write_folder(tmp_path / "some", "k", {"t.py::test": run((0, 0, 0, 400, 400))})
    code, out, _ = run_cli(capsys, "compare", a, every)
    assert code == 0 and "t.py::test: B not slower; calls differ for aten::clone" in out
    code, out, _ = run_cli(capsys, "compare", a, some)
    assert code == 1 and "t.py::test: B regressed: 1 op worse" in out


def test_a_stdout_that_cannot_encode_a_character_keeps_the_output_and_the_exit_code(tmp_path):
    """A trial's `PYTHONIOENCODING=ascii opprof compare A B` of a regression printed nothing and
    exited 2 ("cannot write the output ... > a file with room") for the `…` of a cut op name, where
    UTF-8 exits 1: the output comes with `...` and `\\xe9`, and the exit code is the command's."""
    long_name = "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionForCpuBackward0"

    def steps(us):
        return analyze([e for i in range(5) for e in (step(i + 1, i * 10_000, 9_000), op(long_name, i * 10_000, us))])

    root = tmp_path / ".opprof"
    nodeid = "tests/test_é.py::test_sdpa"
    a = write_folder(root, "box-a", {nodeid: steps(700)})
    b = write_folder(root, "box-b", {nodeid: steps(2_800)})
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "compare", a, b], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    assert "\nautograd::engine::evaluate_function: ScaledDotProductFlashA...  1  " in proc.stdout
    assert "\ntests/test_\\xe9.py::test_sdpa: B regressed: 1 op worse\n" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "opprof compare: 1 of 1 compared test regressed in B"
    utf8 = subprocess.run([sys.executable, "-m", "pytest_opprof", "compare", a, b], capture_output=True, env=os.environ)
    assert utf8.returncode == 1 and "test_é.py::test_sdpa".encode() in utf8.stdout


def test_kernels_b_has_and_a_has_not_sit_under_bs_column(capsys, tmp_path):
    """An op that launches one kernel on A and two on B: B's second kernel stands in B's column,
    A's cells blank beside it (a mutation trial shifted it into A's)."""

    def launched(kernels):
        events = []
        for i in range(3):
            base = i * 10_000
            events += [step(i + 1, base, 9_000), op("aten::addmm", base + 20, 700)]
            for j, name in enumerate(kernels):
                events += [
                    launch(base + 30 + j, corr=10 * i + j + 1),
                    kernel(name, base + 100 + 200 * j, 100, corr=10 * i + j + 1),
                ]
        return analyze(events)

    root = tmp_path / ".opprof"
    a = write_folder(root, "box-a", {"t.py::test_k": launched(["gemm_a"])})
    b = write_folder(root, "box-b", {"t.py::test_k": launched(["gemm_b", "splitk_reduce_b"])})
    _, out, _ = run_cli(capsys, "compare", a, b)
    table = next(part for part in out.split("\n\n") if part.startswith("op  ") and "A kernels" in part)
    header, _, first, second = table.splitlines()
    assert first.split() == ["aten::addmm", "gemm_a", "1x", "0.100", "gemm_b", "1x", "0.100"]
    assert second.split() == ["splitk_reduce_b", "1x", "0.100"]
    assert second.index("splitk_reduce_b") == header.index("B kernels")


def test_a_folders_unchanged_test_is_one_line_without_its_table(capsys, tmp_path):
    """A diagnosis trial's folder comparison printed two 20-row tables of `1.00x same` for tests
    whose files were identical, above the one that changed. In a folder's comparison such a test
    is one line; the changed test keeps its table, and a comparison of one test always has it."""
    a = write_folder(tmp_path / "a", "k", {"t.py::test_same": profile(300), "t.py::test_slow": profile(700)})
    b = write_folder(tmp_path / "b", "k", {"t.py::test_same": profile(300), "t.py::test_slow": profile(2100)})
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 1
    lines = out.splitlines()
    assert "t.py::test_same: B not slower; every row of its table the same (3 ops; --json lists them)" in lines
    assert sum(line.startswith("aten::relu ") for line in lines) == 1  # test_slow's table only
    assert next(line for line in lines if line.startswith("t.py::test_slow: B regressed"))
    one = [baseline_path(root, "k", "t.py::test_same") for root in (tmp_path / "a", tmp_path / "b")]
    code, out, _ = run_cli(capsys, "compare", *one)
    assert code == 0 and "every row" not in out and any(line.startswith("aten::relu ") for line in out.splitlines())
    # another kernel under a `same` op is a change (a review's): its table stays, with the kernels
    a = write_folder(tmp_path / "c", "k", {"t.py::test_same": profile(300), "t.py::test_slow": profile(700)})
    b = write_folder(
        tmp_path / "d",
        "k",
        {"t.py::test_same": profile(300, kernel_name="ampere_other"), "t.py::test_slow": profile(700)},
    )
    out = run_cli(capsys, "compare", a, b)[1]
    assert (
        "t.py::test_same: B not slower\n" in out
        and "ampere_other" in out
        and "every row" not in out.split("t.py::test_slow")[0]
    )


def test_an_op_making_more_calls_in_the_steps_it_ran_is_not_folded_and_named(capsys, tmp_path):
    """A trial's op in 2 of 5 steps made 8 calls there instead of 1: both medians 0, so its row
    read `same` and the folder's comparison folded the test into one line. The structure verdict
    sees it: the table stays, and the test's line names the op."""

    def some(calls):
        events = []
        for i in range(5):
            events += [step(i + 1, i * 10_000, 9_000), op("aten::addmm", i * 10_000 + 20, 700)]
            if i in (1, 3):
                events += [op("aten::mm", i * 10_000 + 1000 + 20 * k, 10) for k in range(calls)]
        return analyze(events)

    a = write_folder(tmp_path / "a", "k", {"t.py::test_some": some(1), "t.py::test_same": profile(300)})
    b = write_folder(tmp_path / "b", "k", {"t.py::test_some": some(8), "t.py::test_same": profile(300)})
    out = run_cli(capsys, "compare", a, b)[1]
    assert (
        "t.py::test_some: B not slower; calls differ for aten::mm: compare judges time, the plugin's structure "
        "verdict judges calls" in out.splitlines()
    )
    assert any(line.startswith("aten::mm ") for line in out.splitlines())
    assert "t.py::test_same: B not slower; every row of its table the same" in out


def kernel_steps(kernel_name, us=300, steps=6):
    """CPU steps of a compiled graph: an Inductor kernel of `us`, then a relu."""
    events = []
    for i in range(steps):
        base = i * 10_000
        events += [step(i + 1, base, 1_000), op(kernel_name, base + 10, us), op("aten::relu", base + 500, 20)]
    return events


def test_compare_reads_a_renumbered_inductor_kernel_as_one_row(capsys, tmp_path):
    """A graph break elsewhere renumbers a kernel in its graph (`cpp_fused_add_relu_1` ->
    `_0`): one row of B's name, its times compared, not `removed` beside an `added` that made B
    regress by its whole 0.3 ms; a slower renumbered kernel still regresses B; another kernel
    (another stem, or other calls) stays two rows."""
    a, b, slow, other = (tmp_path / f"{n}.json" for n in ("a", "b", "slow", "other"))
    write_trace(a, kernel_steps("cpp_fused_add_relu_1"), {})
    write_trace(b, kernel_steps("cpp_fused_add_relu_0"), {})
    write_trace(slow, kernel_steps("cpp_fused_add_relu_0", us=900), {})
    write_trace(other, kernel_steps("cpp_fused_mul_0"), {})
    code, out, _ = run_cli(capsys, "compare", a, b, "--json")
    (test,) = json.loads(out)["tests"]
    (row,) = [r for r in test["ops"] if r["op"].startswith("cpp_fused")]
    assert (code, row["op"], row["status"], row["renumbered_from"]) == (
        0,
        "cpp_fused_add_relu_0",
        "same",
        a_name := "cpp_fused_add_relu_1",
    )
    assert (row["a"]["ms_per_step"], row["b"]["ms_per_step"]) == (0.3, 0.3)
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0 and f"same (renumbered: A's {a_name})" in out and "added" not in out
    assert "calls differ" not in out  # its calls held: the structure's renumbered change is no calls change
    code, out, _ = run_cli(capsys, "compare", a, slow)
    assert code == 1 and "slower (renumbered: A's cpp_fused_add_relu_1)" in out
    code, out, _ = run_cli(capsys, "compare", a, other, "--json")
    statuses = {r["op"]: r["status"] for r in json.loads(out)["tests"][0]["ops"]}
    assert code == 1 and statuses["cpp_fused_add_relu_1"] == "removed" and statuses["cpp_fused_mul_0"] == "added"
