"""End to end: hostile paths and files (nothing written outside the tree; one line instead of a traceback), through pytest runs of a user project."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from plugin_project import deterministic_fixture, project_fixture, run  # noqa: F401 (fixtures: used by name)

from pytest_opprof import device  # noqa: E402

# -- hostile paths: nothing written outside the tree, one line instead of a traceback ----------


def test_a_symlinked_baseline_folder_never_sends_files_outside(project, tmp_path_factory):
    """A device-key folder that is a symlink to somewhere else: recording refuses with one line,
    the test is an error, and nothing is written there."""
    outside = tmp_path_factory.mktemp("outside")
    (project.path / ".opprof").mkdir()
    (project.path / ".opprof" / "cpu-x86_64").symlink_to(outside, target_is_directory=True)
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    result = run(project, "--opprof-update-baseline", "--opprof-device-key=cpu-x86_64")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*test_x.json: its folder resolves to {outside}*, outside *.opprof (a symlink?)*"])
    assert list(outside.rglob("*")) == []


def test_planted_symlinks_never_overwrite_a_file_outside(project, tmp_path_factory):
    """A repository that commits symlinks under `.opprof/` named like temporary files (every pid
    of the old `.<name>.<pid>.tmp` scheme near ours) pointing at a file outside: recording a new
    baseline and then rewriting it with `=all` (under xdist too) leave the outside file
    byte-identical and write a real file inside the tree."""
    outside = tmp_path_factory.mktemp("outside") / "precious.txt"
    outside.write_text("do not touch")
    folder = project.path / ".opprof" / "cpu-x86_64" / "test_x.py"
    folder.mkdir(parents=True)
    for pid in range(max(os.getpid() - 2000, 1), os.getpid() + 2000):
        (folder / f".test_x.json.{pid}.tmp").symlink_to(outside)
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    for update in ("--opprof-update-baseline", "--opprof-update-baseline=all"):
        result = run(project, update, "--opprof-device-key=cpu-x86_64", "-n", "2")
        result.assert_outcomes(passed=1)
        assert outside.read_text() == "do not touch"
        written = folder / "test_x.json"
        assert not written.is_symlink() and json.loads(written.read_text())["schema"] == 2
    result.stdout.fnmatch_lines(["opprof: baselines written: 1 rewritten*"])


def test_a_baseline_file_symlinked_outside_the_folder_is_an_error_and_left_alone(project, tmp_path_factory):
    """A baseline file that is a symlink to a file outside `.opprof/`: neither read nor
    replaced (=all replaced the link with a file before, silently): the test errs naming it."""
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (written,) = (project.path / ".opprof").rglob("test_x.json")
    outside = tmp_path_factory.mktemp("outside") / "test_x.json"
    outside.write_bytes(written.read_bytes())
    written.unlink()
    written.symlink_to(outside)
    for flag in ("--opprof", "--opprof-update-baseline=all"):
        result = run(project, flag)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            [f"*test_x.json: a symlink to {outside}, outside *.opprof; nothing was read or written*"]
        )
        assert written.is_symlink() and outside.read_bytes().startswith(b"{")


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_a_baseline_file_that_is_a_broken_symlink_is_an_error_and_left_alone(project, link):
    """A trial's baseline file made a symlink loop: the test failed with `RuntimeError: Symlink
    loop` and a traceback; a symlink to nothing passed as a test without a baseline. Each now
    errs with one line naming it, under every flag, and the link stays as it was."""
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (written,) = (project.path / ".opprof").rglob("test_x.json")
    written.unlink()
    if link == "loop":
        written.symlink_to("loopx")
        (written.parent / "loopx").symlink_to(written.name)
        line = "*test_x.json: a symlink loop (to loopx, which leads back); point it at the baseline file, or delete it"
    else:
        written.symlink_to("nothere.json")
        line = (
            "*test_x.json: a symlink to nothere.json, which does not exist; point it at the baseline file, or delete it"
        )
    for flag in ("--opprof", "--opprof-update-baseline", "--opprof-update-baseline=all"):
        result = run(project, flag)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines([line])
        assert "Traceback" not in result.stdout.str() and "RuntimeError" not in result.stdout.str()
        assert written.is_symlink() and not written.exists()


def test_a_baseline_that_cannot_be_written_is_an_error_naming_it(project, monkeypatch):
    """A disk that refuses the write (injected: no space left): the test is an error with one
    line naming the file, no traceback; no file appears."""
    from pytest_opprof import baseline

    def full_disk(path, data, inside=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(baseline, "write_atomic", full_disk)
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    result = run(project, "--opprof-update-baseline", "--opprof-device-key=cpu-x86_64")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*test_x.json: cannot write the baseline (No space left on device); make its folder writable*"]
    )
    assert not (project.path / ".opprof").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--opprof-json", "."], "--opprof-json: '.' is not a file path: it names a folder (from command line)"),
        (  # a CI trial's `out/` became a file named out, which an upload step of the folder missed
            ["-o", "opprof_csv=out/"],
            "--opprof-csv: 'out/' is not a file path: it ends in /, as a folder does; name a file in that folder "
            "(from -o opprof_csv)",
        ),
        (
            ["--opprof-trace-dir", "plain.txt"],
            "--opprof-trace-dir: 'plain.txt' is not a folder: plain.txt is a file*",
        ),
        (["--opprof-trace=all"], "--opprof-trace=all: no --opprof-trace-dir to write the traces to*"),
        (
            ["-o", "opprof_tolerance=0.2"],
            "--opprof-tolerance: '0.2' is not a percentage like 20%: a bare 0.2 is ambiguous*",
        ),
    ],
)
def test_bad_outputs_are_usage_errors_before_any_test_runs(pytester, args, message):
    """An output that cannot be written or a 100x-off number stops pytest at start, one line."""
    pytester.makepyfile("def test_x(): pass")
    (pytester.path / "plain.txt").write_text("x")
    result = run(pytester, "--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_outputs_that_become_unwritable_during_the_run_are_one_summary_line(project):
    """The test itself puts a file where the report's and the traces' folders should be (as a
    full disk or a cleanup job would): the run goes on, each output is one summary line, no
    traceback, and the exit code is the tests' own (1: one failed)."""
    project.makepyfile(
        """
        from pathlib import Path
        from conftest import infer
        def test_bad(opprof, mlp):
            Path("out").write_text("in the way")
            Path("traces").write_text("in the way")
            opprof.run(infer, *mlp, warmup=1, steps=2)
            opprof.assert_op_count("aten::addmm", 7)
        """
    )
    result = run(project, "--opprof", "--opprof-json", "out/r.json", "--opprof-trace-dir", "traces")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines(
        ["*::test_bad: trace traces/*test_bad-*.json.gz could not be written (*); give --opprof-trace-dir a folder *"]
    )
    result.stdout.fnmatch_lines(["opprof: --opprof-json: could not write out/r.json (*); give --opprof-json a path *"])
    assert (project.path / "out").read_text() == "in the way"


def test_an_earlier_runs_trace_that_cannot_be_removed_is_said_not_to_be_this_runs(project, monkeypatch):
    """A trial's read-only trace folder kept the trace of a test's earlier failure after the test
    passed, unsaid: an old file must never pass for this run's. The test's line and the JSON's
    `trace_error` name it; the run goes on."""
    project.makepyfile(
        """
        import os
        from conftest import infer
        def test_x(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=2)
            assert os.environ.get("FIXED"), "not yet"
        """
    )
    run(project, "--opprof", "--opprof-trace-dir=traces").assert_outcomes(failed=1)
    (old,) = (project.path / "traces").iterdir()
    real_unlink = Path.unlink

    def refused(self, *args, **kwargs):  # as a read-only folder refuses a user without root
        if self.parent.name == "traces":
            raise PermissionError(13, "Permission denied", str(self))
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", refused)
    monkeypatch.setenv("FIXED", "1")
    result = run(project, "--opprof", "--opprof-trace-dir=traces", "--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    line = f"traces/{old.name} is an earlier run's and could not be removed (Permission denied): it is not this run's; delete it"
    result.stdout.fnmatch_lines([f"*::test_x: trace {line}"])
    (test,) = json.loads((project.path / "r.json").read_text())["tests"]
    assert (test["trace"], test["trace_error"]) == (None, line)
    assert old.exists()


def test_a_path_after_the_update_flag_stays_a_path(project):
    """`pytest --opprof-update-baseline test_x.py` records the tests of test_x.py only, instead
    of refusing 'test_x.py' as the flag's value."""
    source = "from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    project.makepyfile(test_x=source, test_y=source.replace("test_x", "test_y"))
    result = run(project, "--opprof-update-baseline", "test_x.py")
    result.assert_outcomes(passed=1)
    assert [p.name for p in (project.path / ".opprof").rglob("*.json")] == ["test_x.json"]
    result = run(project, "--opprof-update-baseline", "test_x.py::test_x", "test_y.py")
    result.assert_outcomes(passed=2)


def test_a_profiler_of_the_tests_own_is_left_alone(pytester):
    """A test that runs its own torch.profiler: the whole-call capture steps aside (the test
    passes as without --opprof, the user's profiler keeps its events, opprof.run inside it is
    refused with one line); assertions left for the whole call make the test an error."""
    pytester.makepyfile(
        test_own="""
        import pytest
        import torch
        from pytest_opprof import CaptureError

        def profiled():
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                torch.ones(3).add(1)
            return p

        @pytest.mark.opprof
        def test_marker_only():
            assert len(profiled().events()) > 0

        def test_fixture_unused(opprof):
            assert len(profiled().events()) > 0

        def test_run_inside(opprof):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                with pytest.raises(CaptureError, match="a torch profiler is already running"):
                    opprof.run(lambda: torch.ones(3).add(1), steps=2)
                torch.ones(2).mul(2)
            assert len(p.events()) > 0

        def test_deferred(opprof):
            opprof.assert_op_count("aten::add", 1)
            assert len(profiled().events()) > 0
        """
    )
    result = run(pytester, "--opprof", "--opprof-json=r.json")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        ["opprof: the test started a profiler of its own*1 operator assertion could not be checked*"]
    )
    # Measured nothing, with no baseline expecting a measurement: a warning, in the summary and the JSON
    result.stdout.fnmatch_lines(
        ["test_own.py::test_marker_only: warning stepped_aside: the test started a profiler of its own (*), "
         "so the whole-call capture stepped aside and measured nothing; measure with opprof.run(...)*"]
    )  # fmt: skip
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert [c["name"] for c in tests["test_fixture_unused"]["checks"]] == ["stepped_aside"]


def test_a_profiler_an_earlier_test_left_running_is_named(pytester):
    """A debug `prof.start()` whose test failed before `prof.stop()` left the profiler on: each
    later measured test failed with `a torch profiler is already running ... stop the other
    profiler`, naming no profiler of theirs, and with a frame of the plugin's. Now one line says
    which test left it; a profiler started before the test by no test (a fixture) is said so."""
    pytester.makepyfile(
        test_leak="""
        import pytest, torch

        def test_a_debug():
            prof = torch.profiler.profile()
            prof.start()
            assert torch.ones(2).sum() == 3  # fails before prof.stop()

        def test_b(opprof):
            opprof.run(lambda: torch.ones(2) + 1, steps=2)

        def test_stops():  # the profiler test_a_debug left, stopped
            torch._C._autograd._disable_profiler()

        @pytest.fixture
        def profiled():
            with torch.profiler.profile():
                yield

        def test_c(profiled, opprof):
            torch.ones(2) + 1
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "opprof: a torch profiler was already running when this test began, left running by "
            "test_leak.py::test_a_debug, which started it and did not stop it; opprof cannot measure inside another "
            "profiler (torch runs one at a time): stop it where it starts (prof.stop() in a finally, or `with "
            "torch.profiler.profile():`)",
            "opprof: a torch profiler was already running when this test began, started before it (by a fixture or a "
            "conftest?); *",
        ]
    )
    assert "pytest_opprof/" not in result.stdout.str()


def test_a_fixtures_profiler_is_no_test_left_running_and_a_fixtures_capture_keeps_it(pytester):
    """A review: a module fixture's profiler, still running after an unmeasured test, was blamed
    on that test (`left running by test_first`); and a test whose capture a fixture took (its
    body is not captured) failed beside a profiler another fixture ran, where it had passed."""
    pytester.makepyfile(
        test_fix="""
        import pytest, torch

        @pytest.fixture(scope="module")
        def profiled_module():
            with torch.profiler.profile():
                yield

        def test_first(profiled_module):
            torch.ones(2) + 1

        def test_second(profiled_module, opprof):
            torch.ones(2) + 1
        """,
        test_gate="""
        import pytest, torch

        @pytest.fixture
        def measured(opprof):
            opprof.run(lambda: torch.ones(2) + 1, steps=2)
            return opprof

        @pytest.fixture
        def debug_profiler():
            with torch.profiler.profile():
                yield

        def test_gate(measured, debug_profiler):
            assert measured.profile.op("aten::add").calls == 2
        """,
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*opprof: a torch profiler was already running when this test began, started before it (by a fixture or a "
         "conftest?); *"]
    )  # fmt: skip
    assert "left running by" not in result.stdout.str()


def test_the_librarys_measure_and_capture_in_a_measured_test_step_the_whole_call_aside(pytester):
    """pytest_opprof.measure() or capture() in the body of a test with the fixture: a trial's was
    refused as `an opprof capture is already running: captures cannot nest`, though the test
    nested nothing (the capture running was the plugin's whole-call one). It steps aside for
    them as for a torch profiler of the test's own, and says so."""
    pytester.makepyfile(
        test_lib="""
        import torch
        from pytest_opprof import capture, measure

        def test_measure(opprof):
            profile = measure(lambda: torch.ones(4) + 1, warmup=1, steps=3)
            assert profile.op("aten::add").calls == 3

        def test_capture(opprof):
            with capture() as cap:
                torch.ones(4) + 1
            assert cap.profile.op("aten::add").calls == 1
        """
    )
    result = run(pytester, "--opprof")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["test_lib.py::test_measure: warning stepped_aside: the test started a profiler of its own (torch.profiler, "
         "or pytest_opprof's measure() or capture()), so the whole-call capture stepped aside and measured nothing*",
         "test_lib.py::test_capture: warning stepped_aside: *"]
    )  # fmt: skip


def test_a_profiler_of_the_tests_own_does_not_switch_its_baseline_off_in_silence(pytester, monkeypatch):
    """A debug profiler left in a test that has a baseline: the whole call measured nothing, so the
    baseline (its only gate) went uncompared, and the test passed while the model changed. Now an
    error naming the file; likewise under --opprof-require-baseline without a file."""
    source = """
        import os
        import pytest
        import torch

        @pytest.mark.opprof
        def test_marker():
            x = torch.ones(4, 4)
            if os.environ.get("DEBUG_PROFILER"):
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
                    (x @ x) @ x
            else:
                x @ x
        """
    pytester.makepyfile(test_own=source)
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("DEBUG_PROFILER", "1")
    result = run(pytester, "--opprof")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*opprof: the test started a profiler of its own (*), so the whole-call capture stepped aside and "
         "measured nothing: its baseline .opprof/cpu-*/test_own.py/test_marker.json was not compared; *"]
    )  # fmt: skip
    run(pytester, "--opprof-update-baseline").assert_outcomes(passed=1)  # recording keeps the file: no error
    shutil.rmtree(pytester.path / ".opprof")
    run(pytester, "--opprof").assert_outcomes(passed=1)  # nothing expected a measurement
    run(pytester, "--opprof", "--opprof-require-baseline").assert_outcomes(errors=1)


def test_the_baseline_dir_is_checked_where_it_is_used_against_the_rootdir(project, monkeypatch):
    """Run from a subfolder: --opprof-baseline-dir resolves against the rootdir, so a file in the
    way there is a usage error at start, and a file of that name in the current folder is not."""
    project.makeini("[pytest]\n")
    (project.path / "blk").write_text("a file")
    sub = project.path / "tests"
    sub.mkdir()
    (sub / "bl").write_text("a file here, not at the rootdir")
    (sub / "test_a.py").write_text(
        "from conftest import infer\ndef test_a(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    monkeypatch.chdir(sub)
    result = run(project, "--opprof", "--opprof-baseline-dir", "blk")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--opprof-baseline-dir: 'blk' is not a folder: */blk is a file (from command line; as resolved against "
            "the rootdir: */blk); name a folder, or move the file"
        ]
    )
    # a plain run judges the value given too (a contract trial's ini value passed until --opprof)
    project.makeini("[pytest]\nopprof_baseline_dir = blk\n")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--opprof-baseline-dir: 'blk' is not a folder: */blk is a file (from tox.ini; *"])
    project.makeini("[pytest]\n")
    result = run(project, "--opprof-update-baseline", "--opprof-baseline-dir", "bl/x")
    result.assert_outcomes(passed=1)
    assert list((project.path / "bl" / "x").rglob("test_a.json"))


def test_a_record_command_suggested_in_a_subfolder_names_the_tests_as_typed_there(project, monkeypatch):
    """Node ids are relative to the rootdir: run from `tests/`, the suggested `pytest
    --opprof-update-baseline tests/test_m.py::test_a` found no such file there (a trial). The ids
    in a record command are given as pytest takes them in the folder it ran in; run there, the
    commands record, and the next run passes."""
    project.makeini("[pytest]\n")
    sub = project.path / "tests"
    sub.mkdir()
    source = (
        "import os, torch\nfrom conftest import infer\n"
        "def step(model, x):\n    y = infer(model, x)\n    return torch.sigmoid(y) if os.environ.get('MORE') else y\n"
        "def test_a(opprof, mlp):\n    opprof.run(step, *mlp, warmup=1, steps=5)\n"
    )
    (sub / "test_m.py").write_text(source)
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    (sub / "test_n.py").write_text(source.replace("test_a", "test_b"))
    monkeypatch.setenv("MORE", "1")
    monkeypatch.chdir(sub)
    result = run(project, "--opprof", "--opprof-require-baseline")
    result.assert_outcomes(failed=1, errors=1)
    commands = [
        line.split(prefix, 1)[1].split(suffix, 1)[0]
        for line in result.stdout.lines
        for prefix, suffix in (("record it: ", " (and commit"), ("record it with ", " and commit"))
        if prefix in line
    ]
    assert sorted(set(commands)) == [
        "pytest --opprof-update-baseline test_m.py::test_a",
        "pytest --opprof-update-baseline test_n.py::test_b",
    ]
    for command in set(commands):
        run(project, *shlex.split(command)[1:]).assert_outcomes(passed=1)
    run(project, "--opprof", "--opprof-require-baseline").assert_outcomes(passed=2)


def test_the_observer_effect_is_in_the_report_and_far_above_the_usual_is_a_warning(project, fake_clock):
    """run() times unprofiled steps after the profiled ones: the header shows profiled/unprofiled
    (here the fake clock's 10 us unprofiled step against its profiled one), the JSON carries it,
    and above x3 it is a trust warning naming the fix."""
    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=3)\n"
    )
    fake_clock.unprofiled_ns = 10_000
    result = run(project, "--opprof", "--opprof-json", "r.json")
    result.assert_outcomes(passed=1)
    data = json.loads((project.path / "r.json").read_text())["tests"][0]
    overhead = data["profile"]["overhead"]
    wall_ms = data["profile"]["step_wall_ms"]["min"]
    assert overhead == pytest.approx(wall_ms / 0.01, rel=1e-3) and overhead > 3
    result.stdout.fnmatch_lines(
        [
            f"test_x.py::test_x [[]passed[]] (3 steps, *.* ms/step wall, profiler x{overhead:.2f})",
            f"test_x.py::test_x: warning overhead: profiled steps took x{overhead:.1f} the time of unprofiled ones*",
        ]
    )
    fake_clock.unprofiled_ns = int(wall_ms * 1e6)  # the profiler costs nothing
    result = run(project, "--opprof")
    assert "warning overhead" not in result.stdout.str()
    result.stdout.fnmatch_lines(["test_x.py::test_x [[]passed[]] (3 steps, *.* ms/step wall, profiler x1.00)"])
    fake_clock.unprofiled_ns = int(wall_ms * 1e6 * 10)  # a stall hit the unprofiled steps: x0.10 is no measure
    result = run(project, "--opprof", "--opprof-html=r.html")
    assert "profiler cost unknown (the unprofiled calls were disturbed: x0.10)" in (project.path / "r.html").read_text()
    result.stdout.fnmatch_lines(
        [
            "test_x.py::test_x [[]passed[]] (3 steps, *.* ms/step wall, profiler cost unknown (the unprofiled calls "
            "were disturbed: x0.10))"
        ]
    )


def test_an_overhead_seen_under_load_does_not_blame_the_profiler(project, fake_clock, monkeypatch, tmp_path):
    """A loaded runner read `profiled steps took x620.5 the time of unprofiled ones: the profiler
    distorted the run`: where the test's threads waited for a CPU, the warning says the load may
    have slowed the profiled steps too (in the summary and the JSON); a calm run keeps the fix."""

    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=3)\n"
    )
    fake_clock.unprofiled_ns = 10_000
    monkeypatch.setattr(device, "cpu_wait_ns", lambda: fake_clock.now_ns // 2)  # half of every ns
    traces = tmp_path / "tr"
    result = run(
        project,
        "--opprof",
        f"--opprof-json={tmp_path / 'r.json'}",
        f"--opprof-trace-dir={traces}",
        "--opprof-trace=all",
        f"--opprof-html={tmp_path / 'r.html'}",
    )
    result.stdout.fnmatch_lines(
        [
            "test_x.py::test_x: warning overhead: profiled steps took x*.* the time of unprofiled ones (above x3) "
            "while the test's threads waited for a CPU 50% of the capture: other load may have slowed the profiled "
            "steps as much as the profiler did; rerun on a quiet machine to tell them apart"
        ]
    )
    assert "the profiler distorted the run" not in result.stdout.str()
    (check,) = [
        c for c in json.loads((tmp_path / "r.json").read_text())["tests"][0]["checks"] if c["name"] == "overhead"
    ]
    assert "other load may have slowed the profiled steps" in check["message"]
    (trace,) = traces.rglob("*.json.gz")  # its trace carries the wait: analyze judges it alike
    assert json.loads(gzip.decompress(trace.read_bytes()))["opprof"]["cpu_wait"] == pytest.approx(0.5, abs=0.01)
    shown = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "analyze", str(trace)], capture_output=True, text=True
    )
    assert re.search(
        r"overhead +profiled steps took x[\d.]+ the time of unprofiled ones \(above x3\) while", shown.stdout
    )
    assert "while the test's threads waited for a CPU 50% of the capture: other load may have" in shown.stdout
    # the contention warning itself, there and on the page (a trial's loaded failure said nothing of it)
    assert re.search(r"warning +contention +the test's threads waited for a CPU 50% of the capture", shown.stdout)
    page = (tmp_path / "r.html").read_text()
    assert "warning contention: the test&#x27;s threads waited for a CPU 50% of the capture" in page


def test_a_measured_test_file_outside_the_rootdir_is_refused_at_start(pytester):
    """pytest gives tests in files outside the rootdir node ids without the file (`::test_x`): a
    trial's two such files shared one baseline, each compared with the other's. Refused at start
    under --opprof, one line a file; a plain run (no baselines) runs them."""
    root = pytester.mkdir("proj")
    (root / "pytest.ini").write_text("[pytest]\n")
    for name in ("a", "b"):
        folder = pytester.mkdir(f"other_{name}")
        (folder / f"test_{name}.py").write_text(
            "import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(2) + 1, steps=2)\n"
        )
    args = ("--rootdir", str(root), "-c", str(root / "pytest.ini"), "other_a/test_a.py", "other_b/test_b.py")
    result = run(pytester, "--opprof-update-baseline", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: opprof: */other_a/test_a.py lies outside the rootdir */proj: its tests' node ids (*) are no "
            "paths under the rootdir, so their baselines would be shared with other tests of that name *",
            "opprof: */other_b/test_b.py lies outside the rootdir *",
        ]
    )
    assert not list(pytester.path.rglob("*.json"))
    run(pytester, *args).assert_outcomes(passed=2)
    run(pytester, "--opprof", "-k", "nothing", *args).assert_outcomes(deselected=2)  # judged after -k
    # a test file linked into the rootdir (a Bazel runfiles tree) has a node id under it: measured
    (root / "tests").mkdir()
    (root / "tests" / "test_link.py").symlink_to(pytester.path / "other_a" / "test_a.py")
    linked = ("--rootdir", str(root), "-c", str(root / "pytest.ini"), str(root / "tests" / "test_link.py"))
    run(pytester, "--opprof-update-baseline", *linked).assert_outcomes(passed=1)
    assert list((root / ".opprof").rglob("tests/test_link.py/test_x.json"))


def test_package_test_files_outside_the_rootdir_are_refused_at_start(pytester):
    """Test files of packages outside the rootdir get node ids from their package's parent: a
    trial's `../a/test_same.py` and `../b/test_same.py` were both `test_same.py::test_x`, and
    shared one baseline (each later run failed one of them). Refused at start, by the file's path."""
    root = pytester.mkdir("proj")
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, layers in (("a", 1), ("b", 2)):
        folder = pytester.path / "other" / name
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "test_same.py").write_text(
            "import torch\n"
            "def test_x(opprof):\n"
            f"    m = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range({layers})])\n"
            "    opprof.run(m, torch.ones(2, 4), steps=2)\n"
        )
    args = ("--rootdir", str(root), "-c", str(root / "pytest.ini"), "other/a", "other/b")
    result = run(pytester, "--opprof-update-baseline", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: opprof: */other/a/test_same.py lies outside the rootdir */proj: its tests' node ids "
            "('test_same.py::test_x') are no paths under the rootdir*",
            "opprof: */other/b/test_same.py lies outside the rootdir *",
        ]
    )
    assert not list(pytester.path.rglob("*.json"))


# -- locales and encodings: a C locale's file names, a terminal that lacks a character ---------

RANGED = """
import torch
def test_ranged(opprof):
    m = torch.nn.Linear(8, 8)
    def step():
        with torch.profiler.record_function("a_very_long_record_function_range_name_that_exceeds_seventy_characters_by_far"):
            m(torch.randn(2, 8))
    opprof.run(step, warmup=1, steps=3)
"""


def test_an_ascii_terminal_gets_each_line_of_the_tables_with_dots_for_a_cut_name(pytester, monkeypatch):
    """A trial's `PYTHONIOENCODING=ascii pytest --opprof` printed a test's tables as one line of
    literal `\\n`s (pytest escapes a whole write holding a character the stream lacks: the `…` of a
    cut name): each line is written alone, the `…` as `...`."""
    pytester.makepyfile(test_r=RANGED)
    monkeypatch.setenv("PYTHONIOENCODING", "ascii")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "\\n" not in out and "\\u2026" not in out
    result.stdout.re_match_lines([r"a_very_long_record_function_range_name_that_exceeds_seventy_character\.\.\.  +1  "])
    result.stdout.re_match_lines([r"^op +calls/step +ms/step"])


def test_a_c_locales_non_ascii_test_file_has_the_baseline_of_the_utf8_locale(pytester, monkeypatch):
    """A trial's `LC_ALL=C PYTHONUTF8=0 pytest --opprof` of tests/test_é.py stopped at collection
    with a traceback (the file name's bytes read as lone surrogates, hashed as UTF-8 text): it
    records, and checks, the baseline files and node ids the UTF-8 locale does, and writes its JSON
    report; a test picked by its node id leaves the other's baseline alone (a review: called an
    orphan), and `opprof mv` takes the id as typed there (a review: "a control character")."""
    pytester.makepyfile(
        **{"test_é": "from test_r import test_ranged as test_x, test_ranged as test_y\n", "test_r": RANGED}
    )
    c_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
    for name, value in c_locale.items():
        monkeypatch.setenv(name, value)
    flags = ("-p", "no:cacheprovider", "--opprof-fail-on=structure,work")
    pytester.runpytest_subprocess(*flags, "test_é.py", "--opprof-update-baseline").assert_outcomes(passed=2)
    x, y = sorted((pytester.path / ".opprof").rglob("test_*.json"))
    assert x.parent.name.startswith("test_e.py-") and (x.name, y.name) == ("test_x.json", "test_y.json")
    assert json.loads(x.read_text(encoding="utf-8"))["nodeid"] == "test_é.py::test_x"
    picked = pytester.runpytest_subprocess(*flags, "test_é.py::test_x", "--opprof", "--opprof-json=r.json")
    picked.assert_outcomes(passed=1)
    assert "read by no test" not in picked.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert report["tests"][0]["nodeid"] == "test_é.py::test_x"
    moved = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "mv", str(y), "test_é.py::test_z"], capture_output=True, text=True
    )
    assert moved.returncode == 0, moved.stderr
    (z,) = (pytester.path / ".opprof").rglob("test_z.json")
    assert json.loads(z.read_text(encoding="utf-8"))["nodeid"] == "test_é.py::test_z"
    for name in c_locale:
        monkeypatch.delenv(name)
    utf8 = pytester.runpytest_subprocess(*flags, "test_é.py::test_x", "--opprof", "--opprof-require-baseline")
    utf8.assert_outcomes(passed=1)
    assert sorted((pytester.path / ".opprof").rglob("*.json")) == [x, z]


def test_two_test_files_named_by_bytes_that_are_no_utf8_have_a_baseline_each(pytester):
    """A review's `test_\\xe9.py` and `test_\\xe8.py` (latin-1 names, no UTF-8 in any locale)
    shared one baseline, `test_\\ufffd.py`, each judged against the other's: each keeps its own,
    named by the escape of its byte, and the CSV report is UTF-8."""
    for byte in (b"\xe9", b"\xe8"):
        (pytester.path / os.fsdecode(b"test_" + byte + b".py")).write_text("from test_r import test_ranged as test_x\n")
    pytester.makepyfile(test_r=RANGED)
    names = [os.fsdecode(b"test_\xe9.py"), os.fsdecode(b"test_\xe8.py")]
    run = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        *names,
        "--opprof-update-baseline",
        "--opprof-csv=r.csv",
    ]
    done = subprocess.run(run, cwd=pytester.path, capture_output=True)  # bytes: pytester's text reading refuses them
    out = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, out
    assert "baselines written: 2 new" in out
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((pytester.path / ".opprof").rglob("*.json"))]
    assert sorted(d["nodeid"] for d in docs) == ["test_\\xe8.py::test_x", "test_\\xe9.py::test_x"]
    assert "test_\\xe9.py::test_x" in (pytester.path / "r.csv").read_bytes().decode("utf-8")
