"""End to end: the reports (CSV, HTML, JSON, pipes, exported traces) and record_function ranges of pytest runs of a user project."""

from __future__ import annotations

import gzip
import json
import os

import pytest

torch = pytest.importorskip("torch")


from plugin_project import deterministic_fixture, project_fixture, run  # noqa: F401 (fixtures: used by name)

# -- CSV and HTML reports -----------------------------------------------------------------------

REPORT_TESTS = """
from conftest import infer
def test_a(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=5)
def test_b(opprof, mlp):
    opprof.run(infer, *mlp, warmup=1, steps=5)
    opprof.assert_op_count("aten::addmm", 3)
"""


def _csv_rows(path):
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_csv_report_has_a_row_per_test_and_op_with_the_baseline_columns(project, xdist):
    """--opprof-csv: every measured test's ops with the numbers of the terminal table (and of
    --opprof-json), the baseline's min and delta where there is one; the same under xdist."""
    project.makepyfile(test_r=REPORT_TESTS)
    run(project, "--opprof-update-baseline", "-k", "test_a").assert_outcomes(passed=1)
    result = run(project, "--opprof", "--opprof-csv", "out/r.csv", "--opprof-json", "r.json", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["opprof: wrote out/r.csv"])
    rows = _csv_rows(project.path / "out" / "r.csv")
    tests = json.loads((project.path / "r.json").read_text())["tests"]
    assert [r["test"] for r in rows] == sorted(r["test"] for r in rows)
    for test in tests:
        ops = test["profile"]["ops"]
        mine = [r for r in rows if r["test"] == test["nodeid"]]
        assert [r["op"] for r in mine] == [o["name"] for o in ops]
        for r, o in zip(mine, ops):
            assert float(r["calls_per_step"]) == o["per_step"]["calls"]["median"]
            assert float(r["cpu_ms_per_step"]) == pytest.approx(o["per_step"]["cpu_ms"]["median"])
            assert r["time"] == ("device" if o["on_device"] else "cpu")
    workers = {r["worker"] for r in rows}  # the xdist worker that ran each test's rows
    assert (workers and workers <= {"gw0", "gw1"}) if xdist else workers == {""}
    compared = [r for r in rows if r["test"].endswith("test_a")]
    assert all(float(r["baseline_min_ms_per_step"]) > 0 and r["delta_pct"] != "" for r in compared)
    assert {r["delta_pct"] for r in compared} == {"0.0"}  # the fake clock's times, in xdist's workers too
    assert all(r["baseline_min_ms_per_step"] == "" for r in rows if r["test"].endswith("test_b"))
    # each row says how its test ended (a trial's failed test read `ok` in every row)
    assert {r["outcome"] for r in compared} == {"passed"}
    assert {r["outcome"] for r in rows if r["test"].endswith("test_b")} == {"failed"}


def test_csv_report_has_a_row_for_each_test_without_ops_and_no_exponents(pytester, fake_clock):
    """A data-consumer trial's CSV-only dashboard never saw a test that erred with no op rows (a
    capture that ran no op) nor a skipped one: each has one row, `op` empty, with its outcome.
    Small times are positional (`0.000086`): a column mixing `8.6e-05` misordered under sort -n."""
    pytester.makepyfile(
        test_e="""
        import pytest, torch
        def test_ops(opprof):
            opprof.run(torch.ones, 2, warmup=1, steps=2)
        def test_no_op(opprof):
            opprof.run(lambda: None, warmup=1, steps=2)
        def test_skip(opprof):
            pytest.skip("not here")
        """
    )
    fake_clock.costs.update({"aten::ones": 86, "aten::empty": 0, "aten::fill_": 0})  # 8.6e-05 ms, as repr writes it
    run(pytester, "--opprof", "--opprof-csv=r.csv").assert_outcomes(passed=1, errors=1, skipped=1)
    rows = _csv_rows(pytester.path / "r.csv")
    assert {r["ms_per_step"] for r in rows if r["op"] == "aten::ones"} == {"0.000086"}
    opless = {r["test"]: r for r in rows if r["op"] == ""}
    assert sorted(opless) == ["test_e.py::test_no_op", "test_e.py::test_skip"]
    assert (opless["test_e.py::test_no_op"]["outcome"], opless["test_e.py::test_skip"]["outcome"]) == (
        "error",
        "skipped",
    )
    assert all(v == "" for r in opless.values() for k, v in r.items() if k not in ("test", "outcome"))
    assert {r["op"] for r in rows if r["test"] == "test_e.py::test_ops"} >= {"aten::ones"}
    assert not any("e-" in cell for r in rows for cell in r.values() if cell[:1].isdigit())


def test_an_op_that_no_longer_runs_has_a_row_in_every_table(project, monkeypatch):
    """A vanished op (a sigmoid taken out) was in no table: the terminal's, the CSV's and the
    HTML's rows all read `ok` while the test failed on it (a trial). It gets a row of its own: 0
    calls, its baseline min, `removed` (`ignored` where an ignore glob matches it), also under
    --opprof-top."""
    project.makepyfile(
        test_v="""
        import os, torch
        from conftest import infer
        def step(model, x):
            y = infer(model, x)
            return y if os.environ.get("NO_SIGMOID") else torch.sigmoid(y)
        def test_v(opprof, mlp):
            opprof.run(step, *mlp, warmup=1, steps=5)
        """
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("NO_SIGMOID", "1")
    result = run(project, "--opprof", "--opprof-top=2", "--opprof-csv=r.csv", "--opprof-html=r.html")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*structure changed: - aten::sigmoid (was 1/step)*"])
    (row,) = [line.split() for line in result.stdout.lines if line.startswith("aten::sigmoid ")]
    assert (row[1], row[-1]) == ("0", "removed") and float(row[2]) > 0  # its baseline min
    (gone,) = [r for r in _csv_rows(project.path / "r.csv") if r["op"] == "aten::sigmoid"]
    assert (gone["calls_per_step"], gone["ms_per_step"], gone["verdict"], gone["outcome"]) == (
        "0",
        "",
        "removed",
        "failed",
    )
    assert float(gone["baseline_min_ms_per_step"]) > 0
    page = (project.path / "r.html").read_text()
    assert "<tr><td>aten::sigmoid</td><td>0</td>" in page and page.count('<td class="verdict">removed</td>') == 1
    run(project, "--opprof", "--opprof-ignore-ops=aten::sigmoid", "--opprof-csv=r.csv").assert_outcomes(passed=1)
    (gone,) = [r for r in _csv_rows(project.path / "r.csv") if r["op"] == "aten::sigmoid"]
    assert gone["verdict"] == "ignored"


def test_html_report_is_one_self_contained_page(project):
    """--opprof-html: one file, no external resource, a section per test with its op table,
    top-op bars and baseline columns, and a relative link to the test's trace."""
    project.makepyfile(test_r=REPORT_TESTS)
    run(project, "--opprof-update-baseline", "-k", "test_a").assert_outcomes(passed=1)
    result = run(project, "--opprof", "--opprof-html", "out/r.html", "--opprof-trace-dir", "traces")
    result.stdout.fnmatch_lines(["opprof: wrote out/r.html"])
    page = (project.path / "out" / "r.html").read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "http://" not in page and "https://" not in page and "<link" not in page and " src=" not in page
    assert page.count('<section class="test"') == 2
    assert 'data-nodeid="test_r.py::test_a"' in page and "baseline compared" in page
    (trace,) = (project.path / "traces").iterdir()
    assert f'href="../traces/{trace.name}"' in page
    assert '<span class="outcome failed">failed</span>' in page and "aten::addmm" in page
    # the terminal table's columns, `self` among them
    assert "<th>op</th><th>calls/step</th><th>ms/step</th><th>self</th><th>min</th><th>time</th>" in page


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_the_html_page_says_why_each_test_failed(project, xdist, monkeypatch):
    """A failed test's section shows pytest's reason (the assertion's message, the verdicts the
    test failed on) and lists every verdict; a trial saw 8 failed badges and no reason at all."""
    extra = """
        import os, torch
        from conftest import infer
        def step(model, x):
            y = infer(model, x)
            return torch.relu(y) if os.environ.get("EXTRA") else y
        def test_a(opprof, mlp):
            opprof.run(step, *mlp, warmup=1, steps=5)
        def test_b(opprof, mlp):
            opprof.run(infer, *mlp, warmup=1, steps=5)
            opprof.assert_op_count("aten::addmm", 3)
        """
    project.makepyfile(test_r=extra)
    run(project, "--opprof-update-baseline", "-k", "test_a").assert_outcomes(passed=1)
    monkeypatch.setenv("EXTRA", "1")
    run(project, "--opprof", "--opprof-html", "r.html", *xdist).assert_outcomes(failed=2)
    page = (project.path / "r.html").read_text()
    sections = {s.split('"', 1)[0]: s for s in page.split('<section class="test" data-nodeid="')[1:]}
    a, b = sections["test_r.py::test_a"], sections["test_r.py::test_b"]
    failure = a.split('<pre class="failure">Failed: structure changed: ', 1)[1].split("</pre>")[0]
    assert "aten::clamp_min 1 -&gt; 2/step" in failure and "aten::relu 1 -&gt; 2/step" in failure
    assert '<pre class="failure">AssertionError: aten::addmm: 2 calls/step, expected 3 (per step: 2, 2' in b
    # the verdicts the failure says already are not listed again (under xdist the workers time
    # for real: inconclusive time verdicts may be listed, each with its fix)
    assert "structure changed" not in a.split("</pre>", 1)[1] and "<li>" not in b


def test_bad_csv_and_html_paths_are_usage_errors(pytester):
    """A folder given as --opprof-csv or --opprof-html is a usage error at start."""
    pytester.makepyfile("def test_x(): pass")
    for flag in ("--opprof-csv", "--opprof-html"):
        result = run(pytester, "--opprof", flag, ".")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{flag}: '.' is not a file path: it names a folder (from command line)*"])


def test_no_stray_lines_from_torch_or_kineto_but_the_users_own_warnings_stay(pytester):
    """A measured run (in a subprocess: Kineto writes to the process's stderr, torch warns at
    import) shows no Kineto USDT/STAGE lines and no "Failed to initialize NumPy" warning, even
    in a failing test's captured stderr and with torch imported by the rootdir conftest; the
    user's own warning is still reported."""
    pytester.makeconftest("import torch\n")
    pytester.makepyfile(
        """
        import warnings
        import torch
        def test_fails(opprof):
            warnings.warn("the user's own warning", UserWarning, stacklevel=1)
            opprof.run(lambda: torch.ones(3) + 1, warmup=1, steps=2)
            opprof.assert_op_count("aten::add", 5)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--opprof", "-rA")
    result.assert_outcomes(failed=1)
    text = result.stdout.str() + result.stderr.str()
    assert "USDT:" not in text and "STAGE:" not in text and "profiler_start" not in text
    assert "Failed to initialize NumPy" not in text
    assert "the user's own warning" in text


@pytest.mark.parametrize(
    "how",
    [("-o", "opprof_update_baseline=true"), ("-o", "opprof=true"), ("ini", "opprof_update_baseline = all")],
    ids=["-o update", "-o opprof", "ini update"],
)
def test_the_numpy_warning_is_hidden_when_the_ini_or_o_turns_recording_on(pytester, how):
    """Recording (or measuring) turned on by the ini file or `-o`, not a flag: the NumPy warning
    of a rootdir conftest's `import torch` is hidden all the same (a trial's `-W error -o
    opprof_update_baseline=true` stopped at the conftest's import, rc 4; the flag ran)."""
    import importlib.util

    if importlib.util.find_spec("numpy") is not None:
        pytest.skip("numpy is installed: torch does not warn at import")
    pytester.makeconftest("import torch\n")
    pytester.makepyfile("import torch\ndef test_one(opprof):\n    opprof.run(torch.ones, 3, warmup=1, steps=2)\n")
    args = list(how)
    if how[0] == "ini":
        pytester.makeini(f"[pytest]\n{how[1]}\n")
        args = []
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert "Failed to initialize NumPy" not in result.stdout.str() + result.stderr.str()


def test_quiet_profiler_keeps_every_other_line_written_to_stderr(capfd):
    """Around a profiler start or stop only Kineto's USDT and STAGE lines, and its no-driver line
    of a CUDA build without a GPU, are dropped from stderr; torch's one-cycle warning is dropped
    too, and every other warning kept."""
    import os
    import warnings

    from pytest_opprof.capture import quiet_profiler

    lines = [
        b"USDT:2026-11-30 14:46:05 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n",
        b"ERROR: CUPTI could not be initialised\n",
        b"STAGE:2026-11-30 14:46:07 1:1 SyncActivityProfilerHandler.cpp:51] Completed Stage: Warm Up\n",
        b"ERROR:2026-11-30 15:56:10 13453:13453 DeviceProperties.cpp:48] gpuGetDeviceCount failed with code 35\n",
    ]
    torch_211 = (
        "Warning: Profiler clears events at the end of each cycle.Only events from the current cycle "
        "will be reported.To keep events across cycles, set acc_events=True."
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_profiler():
            for line in lines:
                os.write(2, line)
            warnings.warn(torch_211, UserWarning, stacklevel=1)
            warnings.warn("the user's own warning", UserWarning, stacklevel=1)
    assert capfd.readouterr().err == "ERROR: CUPTI could not be initialised\n"
    assert [str(w.message) for w in caught] == ["the user's own warning"]


def test_a_path_after_the_update_flag_is_a_path_before_the_conftests_load(project):
    """`--opprof-update-baseline sub/test_x.py`: pytest loads the conftest of sub/ at start (as
    for `pytest sub/test_x.py`), not those of the default test paths."""
    project.makeini("[pytest]\ntestpaths = other\n")
    project.mkdir("other").joinpath("conftest.py").write_text(
        "def pytest_configure(config):\n    open('other-conftest-loaded', 'w').close()\n"
    )
    sub = project.mkdir("sub")
    sub.joinpath("conftest.py").write_text(
        "def pytest_configure(config):\n    open('sub-conftest-loaded', 'w').close()\n"
    )
    sub.joinpath("test_x.py").write_text(
        "import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(2) + 1, steps=2)\n"
    )
    result = run(project, "--opprof-update-baseline", "sub/test_x.py")
    result.assert_outcomes(passed=1)
    assert (project.path / "sub-conftest-loaded").exists()
    assert not (project.path / "other-conftest-loaded").exists()
    # the same path also given to another flag before it: that flag keeps its value
    result = run(project, "--deselect", "sub/test_x.py", "--opprof-update-baseline", "sub/test_x.py")
    result.assert_outcomes(deselected=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--opprof-json", ".opprof/cpu/test_x.py/test_x.json"],
            "--opprof-json: '.opprof/cpu/test_x.py/test_x.json' is inside the device-key folder */.opprof/cpu of the "
            "baselines; write it elsewhere*",
        ),
        (
            ["--opprof-trace-dir", ".opprof/cpu/traces"],
            "--opprof-trace-dir: '.opprof/cpu/traces' is inside the device-key folder*",
        ),
        (  # a key folder itself: traces among the committed baselines (a trial's, from the ini too)
            ["--opprof-trace-dir", ".opprof/cpu/"],
            "--opprof-trace-dir: '.opprof/cpu/' is the device-key folder */.opprof/cpu of the baselines; write the "
            "traces elsewhere (--opprof-trace-dir=opprof-traces): they would sit among committed baselines",
        ),
        (  # any other folder in it (a trial's .opprof/traces was accepted)
            ["--opprof-trace-dir", ".opprof/traces"],
            "--opprof-trace-dir: '.opprof/traces' is inside the baseline folder */.opprof; write the traces elsewhere "
            "(--opprof-trace-dir=opprof-traces): they would sit among committed baselines",
        ),
        (  # the baseline folder itself
            ["--opprof-trace-dir", ".opprof"],
            "--opprof-trace-dir: '.opprof' is the baseline folder */.opprof; write the traces elsewhere *",
        ),
        (  # this run's key folder, before it holds a baseline
            ["--opprof-device-key", "ci-box", "--opprof-trace-dir", "./.opprof/ci-box"],
            "--opprof-trace-dir: './.opprof/ci-box' is the device-key folder */.opprof/ci-box of the baselines; *",
        ),
        (
            ["--opprof-json", ".opprof/r.json"],
            "--opprof-json: '.opprof/r.json' is inside the baseline folder */.opprof, where opprof show and compare "
            "read every .json as a baseline; write it elsewhere",
        ),
        (
            ["--junitxml", "out/r.xml", "--opprof-json", "out/r.xml"],
            "--opprof-json: 'out/r.xml' is also --junitxml's path, which it would overwrite; give each report its own file",
        ),
        (
            ["--opprof-json", "out/same", "--opprof-csv", "out/./same"],
            "--opprof-csv: 'out/./same' is also --opprof-json's path, which it would overwrite; give each report its own file",
        ),
    ],
)
def test_reports_that_would_replace_a_baseline_or_each_other_are_refused_at_start(pytester, args, message):
    """A report path inside the baseline folder (a committed baseline would be replaced) or
    shared by two reports is a usage error at start, one line; nothing runs or is written."""
    pytester.makepyfile("def test_x(opprof): pass")
    baseline = pytester.path / ".opprof" / "cpu" / "test_x.py" / "test_x.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text('{"committed": true}\n')
    result = run(pytester, "--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert baseline.read_text() == '{"committed": true}\n' and not (pytester.path / "out").exists()


OTHER_PLUGINS_CONFTEST = """
from pathlib import Path


def pytest_addoption(parser):  # as pytest-html and pytest-benchmark register their reports
    parser.addoption("--html", action="store", dest="htmlpath", default=None)
    parser.addoption("--benchmark-json", type=Path, default=None)
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--html", "r.html", "--opprof-html", "r.html"], "--opprof-html: 'r.html' is also --html's path"),
        (
            ["--benchmark-json", "b.json", "--opprof-json", "./b.json"],
            "--opprof-json: './b.json' is also --benchmark-json's path",
        ),
    ],
)
def test_a_report_another_plugin_writes_to_is_refused_at_start(pytester, args, message):
    """A trial's `--html=r.html --opprof-html=r.html` left opprof's page under pytest-html's
    `Generated html report` line, and `--benchmark-json` held opprof's JSON: refused as --junitxml's is."""
    pytester.makeconftest(OTHER_PLUGINS_CONFTEST)
    pytester.makepyfile("def test_x(opprof): pass")
    result = run(pytester, "--opprof", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}, which it would overwrite; give each report its own file"])
    assert run(pytester, "--opprof", *args[:2], "--opprof-html", "mine.html").ret != pytest.ExitCode.USAGE_ERROR


def test_reports_go_into_pipes_and_through_a_symlink_as_the_shell_would(project):
    """--opprof-json and --opprof-html into FIFOs are written into them (readers get the
    documents; the FIFOs stay FIFOs: /dev/stdout and /dev/null work the same way), a symlinked
    CSV path writes its target and the link stays a link. (Never tried on a real device here:
    a regression would replace it.)"""
    import os
    import stat
    import threading

    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, warmup=1, steps=2)\n"
    )
    got: dict[str, bytes] = {}
    readers = []
    for name in ("json", "html"):
        os.mkfifo(project.path / name)
        read = (lambda n: lambda: got.__setitem__(n, (project.path / n).read_bytes()))(name)
        readers.append(threading.Thread(target=read, daemon=True))  # daemon: a regression must not hang the run
        readers[-1].start()
    (project.path / "real.csv").write_text("test,op,calls_per_step\n")  # an earlier report
    (project.path / "link.csv").symlink_to("real.csv")
    result = run(project, "--opprof", "--opprof-json", "json", "--opprof-csv", "link.csv", "--opprof-html", "html")
    for reader in readers:
        reader.join(timeout=30)
    result.assert_outcomes(passed=1)
    assert json.loads(got["json"])["tests"][0]["nodeid"].endswith("test_x.py::test_x")
    assert got["html"].startswith(b"<!doctype html>")
    assert all(stat.S_ISFIFO((project.path / name).stat().st_mode) for name in ("json", "html"))
    assert (project.path / "link.csv").is_symlink() and (project.path / "real.csv").read_text().startswith("test,op,")
    result.stdout.fnmatch_lines(["opprof: wrote json", "opprof: wrote link.csv", "opprof: wrote html"])


def test_a_node_id_pytest_leaves_unescaped_is_recorded_and_shown_escaped(project, capsys):
    """With pytest's id escaping turned off, a test id holds a raw tab: a review's run failed
    with a traceback when the reader refused it. It records and compares; `opprof show` prints
    it escaped."""
    project.makeini("[pytest]\ndisable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n")
    project.makepyfile(
        test_x="""
        import pytest
        from conftest import infer

        @pytest.mark.parametrize("n", [1], ids=["tab\\there"])
        def test_x(opprof, mlp, n):
            opprof.run(infer, *mlp, steps=2)
        """
    )
    run(project, "--opprof-update-baseline").assert_outcomes(passed=1)
    result = run(project, "--opprof")
    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str()
    from pytest_opprof.cli import main

    capsys.readouterr()
    assert main(["show", str(project.path / ".opprof")]) == 0
    assert "test_x.py::test_x[tab\\there]" in capsys.readouterr().out


def test_a_report_at_a_symlink_loop_is_refused_and_the_links_left_alone(project):
    """A trial's `--opprof-json=l1` (l1 -> l2 -> l1) said `wrote l1` and replaced the link with a
    file; the shell's `>` fails there, and so does the run, before any test."""
    project.makepyfile(test_x="def test_x():\n    pass\n")
    (project.path / "l1").symlink_to("l2")
    (project.path / "l2").symlink_to("l1")
    result = run(project, "--opprof", "--opprof-json=l1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --opprof-json: 'l1': a symlink loop (to l2, which leads back); point the symlink at a file, or remove it"
        ]
    )
    assert (project.path / "l1").is_symlink() and os.readlink(project.path / "l1") == "l2"


def test_two_reports_may_share_a_pipe_but_not_a_file(tmp_path):
    """The start-up check of report paths: one FIFO (or device) may take two reports, one file
    may not; a report inside the baseline folder is refused."""
    import os

    from pytest_opprof.settings import Settings, output_paths_problem

    os.mkfifo(tmp_path / "pipe")
    shared = Settings(json_path=str(tmp_path / "pipe"), csv_path=str(tmp_path / "pipe"))
    assert output_paths_problem(shared, tmp_path / ".opprof") is None
    # /dev/fd/1 may be a log file or an unnamed pipe behind it: written through the descriptor, shareable
    own = Settings(json_path="/dev/fd/1", csv_path="/dev/fd/1")
    assert output_paths_problem(own, tmp_path / ".opprof") is None
    clash = Settings(json_path=str(tmp_path / "r"), csv_path=str(tmp_path / "r"))
    assert "is also --opprof-json's path" in (output_paths_problem(clash, tmp_path / ".opprof") or "")
    junit = output_paths_problem(
        Settings(json_path=str(tmp_path / "r.xml")), tmp_path / ".opprof", {"--junitxml": str(tmp_path / "r.xml")}
    )
    assert "is also --junitxml's path" in (junit or "")
    inside = Settings(html_path=str(tmp_path / ".opprof" / "cpu" / "r.html"))
    assert "inside the device-key folder" in (output_paths_problem(inside, tmp_path / ".opprof") or "")
    beside = Settings(html_path=str(tmp_path / "r.html"))  # --opprof-baseline-dir=. : reports beside the key folders
    assert output_paths_problem(beside, tmp_path) is None
    read_as_baseline = Settings(json_path=str(tmp_path / "r.json"))  # ... but not a .json: show would read it
    assert "where opprof show and compare read every .json" in (output_paths_problem(read_as_baseline, tmp_path) or "")


def test_recording_names_the_tests_it_did_not_record_because_they_failed(project):
    """--opprof-update-baseline skips a test that failed its own assertions (its file is kept,
    its JSON baseline is null) and says so in one line; a passing test is recorded."""
    project.makepyfile(test_r=REPORT_TESTS)  # test_a passes, test_b fails its count
    out = project.path / "r.json"
    result = run(project, "--opprof-update-baseline", f"--opprof-json={out}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "opprof: baselines written: 1 new; *",
            "opprof: 1 test not recorded: it failed or erred (a baseline records code that passes its own checks; "
            "files as they were): test_r.py::test_b",
        ]
    )
    assert [p.name for p in (project.path / ".opprof").rglob("*.json")] == ["test_a.json"]
    tests = {t["nodeid"]: t for t in json.loads(out.read_text())["tests"]}
    assert tests["test_r.py::test_b"]["baseline"] is None and tests["test_r.py::test_a"]["baseline"]
    assert "not recorded" not in run(project, "--opprof").stdout.str()  # only when recording


def test_a_report_path_after_a_space_outside_the_project_is_refused(pytester, tmp_path_factory):
    """`--opprof-json /elsewhere/r.json` with a space, the file existing: pytest took it for a
    test path when it chose the rootdir (before it knew the option) and moved the rootdir, so
    baselines would be looked for and written elsewhere. Refused with the fix; `=` works, and so
    does the space when the rootdir did not move."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_x="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
    )
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "r.json"
    elsewhere.touch()  # an existing path (empty: an earlier report may be replaced)
    result = run(pytester, "--opprof", "--opprof-json", str(elsewhere))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --opprof-json {elsewhere}: write --opprof-json={elsewhere} (with '='): before it knows this option*"]
    )
    run(pytester, "--opprof", f"--opprof-json={elsewhere}").assert_outcomes(passed=1)
    run(pytester, "--opprof", "--opprof-json", "inside.json").assert_outcomes(passed=1)  # not an existing path
    # With a test path, pytest finds the project's ini from it: the rootdir did not move, no refusal
    run(pytester, "test_x.py", "--opprof", "--opprof-json", str(elsewhere)).assert_outcomes(passed=1)


@pytest.mark.parametrize("flag", ["--opprof-json", "--opprof-csv", "--opprof-html"])
def test_a_report_path_naming_a_file_that_is_no_report_is_refused_and_the_file_kept(pytester, flag):
    """`pytest --opprof --opprof-json tests/test_model.py`, the report's path forgotten: the test
    file was overwritten with JSON (a trial's real test file), as `requirements.txt` or a
    `package.json` would be. An existing file is replaced only when it is an earlier report."""
    source = "import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
    written = {
        "test_x.py": pytester.makepyfile(test_x=source),
        "requirements.txt": pytester.makefile(".txt", requirements="torch==2.13.0"),
        "package.json": pytester.makefile(".json", package='{"name": "x"}'),
    }
    before = {name: path.read_text() for name, path in written.items()}
    suffix = {"--opprof-json": ".json", "--opprof-csv": ".csv", "--opprof-html": ".html"}[flag]
    for target in written:
        result = run(pytester, "--opprof", flag, target)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: {flag}: '{target}' is an existing file, not an opprof report, *({flag}=report{suffix})"]
        )
    assert {name: path.read_text() for name, path in written.items()} == before
    for _ in range(2):  # an earlier report of its own is replaced, run after run
        run(pytester, "--opprof", f"{flag}=report{suffix}").assert_outcomes(passed=1)
    # another kind of report is kept too, and named as one (a trial's JSON report given to --opprof-csv)
    other = "--opprof-csv" if flag == "--opprof-json" else "--opprof-json"
    result = run(pytester, "--opprof", f"{other}=report{suffix}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {other}: 'report{suffix}' is an existing file, an opprof report of another kind ({flag}'s), *"]
    )
    (pytester.path / f"empty{suffix}").touch()
    run(pytester, "--opprof", f"{flag}=empty{suffix}").assert_outcomes(passed=1)


def test_the_report_heads_the_guard_knows_are_how_the_reports_begin(tmp_path):
    """The guard above tells an earlier report by its first bytes: they must be the writers'."""
    from pytest_opprof.htmlreport import page_head
    from pytest_opprof.runfiles import CSV_HEADER_LINE, ReportSpool, write_run_report
    from pytest_opprof.settings import REPORT_HEAD

    spool = ReportSpool()
    write_run_report(tmp_path / "r.json", {"torch": "2.13.0"}, "cpu-x86_64", spool)
    spool.close()
    assert (tmp_path / "r.json").read_bytes().startswith(REPORT_HEAD["--opprof-json"])
    assert CSV_HEADER_LINE.encode().startswith(REPORT_HEAD["--opprof-csv"])
    assert page_head({}, None, 0).encode().startswith(REPORT_HEAD["--opprof-html"])


def test_a_path_after_a_space_that_hides_the_ini_turning_opprof_on_is_refused(pytester, tmp_path_factory):
    """`opprof = true` in the ini, no --opprof on the command line: the moved rootdir meant the ini
    was never read, and the run went by unmeasured with exit 0 (a trial's CI line, failing test
    passing). Refused as when --opprof is given."""
    pytester.makeini("[pytest]\nopprof = true\n")
    pytester.makepyfile(
        test_x="import torch\ndef test_x(opprof):\n    opprof.run(lambda: torch.ones(3) + 1, steps=2)\n"
        "    opprof.assert_op_count('aten::add', 5)\n"
    )
    artifacts = tmp_path_factory.mktemp("artifacts")
    result = run(pytester, "--opprof-trace-dir", str(artifacts))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --opprof-trace-dir {artifacts}: write --opprof-trace-dir={artifacts} *"])
    run(pytester, f"--opprof-trace-dir={artifacts}").assert_outcomes(failed=1)  # measured: the ini was read


def test_a_pipe_nobody_reads_is_one_summary_line_not_a_hang(project):
    """--opprof-json into a FIFO with no reader would block the run at its end for ever (CI
    jobs hang): one line says so, the run ends with the tests' own exit code."""
    import os

    project.makepyfile(
        test_x="from conftest import infer\ndef test_x(opprof, mlp):\n    opprof.run(infer, *mlp, steps=2)\n"
    )
    os.mkfifo(project.path / "pipe")
    result = run(project, "--opprof", "--opprof-json=pipe")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["opprof: --opprof-json: could not write pipe (no process reads this pipe); *"])


RANGE_TESTS = """
import torch
from conftest import infer

def blocks(model, x):
    with torch.profiler.record_function("encoder"):
        y = infer(model, x)
    with torch.profiler.record_function("head"):
        return torch.relu(y)

def test_ranges_pass(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_range_below("encoder", ms=1000)
    opprof.assert_range_below("*", ms=1000, per="call", stat="max")

def test_range_over(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_range_below("head", ms=0.000001)

def test_op_assertion_on_a_range(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_op_count("encoder", 1)

def test_range_typo(opprof, mlp):
    opprof.run(blocks, *mlp, warmup=1, steps=3)
    opprof.assert_range_below("encodr", ms=1)
"""


def test_record_function_ranges_are_reported_and_asserted(project):
    """A test's record_function blocks: a range table under its op table, `ranges` in the JSON and
    the HTML, assert_range_below on their time, and an op assertion given a range's name says so
    (it said "no op of that name ran", as if the block had not run)."""
    project.makepyfile(test_r=RANGE_TESTS)
    result = run(project, "--opprof", "--opprof-json", "r.json", "--opprof-html", "r.html")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "E * head: 0.* ms/step > limit 0.000001 ms (median of 3 steps; *",
            "E * encoder: a range (a record_function block or annotation), not an op; "
            "assert_range_below('encoder', ...) checks it",
            "E * encodr: no range of that name ran in the measured code; closest: encoder",
            "test_r.py::test_ranges_pass [[]passed] *",
            "range (record_function)*calls/step*cpu ms/step*device ms/step*of step",
            "encoder *1 *0.* -*",
        ]
    )
    tests = {t["nodeid"]: t for t in json.loads((project.path / "r.json").read_text())["tests"]}
    ranges = {r["name"]: r for r in tests["test_r.py::test_ranges_pass"]["profile"]["ranges"]}
    assert set(ranges) == {"encoder", "head"}
    assert ranges["encoder"]["per_step"]["calls"]["samples"] == [1, 1, 1] and ranges["encoder"]["cpu_ms"] > 0
    assert not ranges["encoder"]["on_device"] and ranges["encoder"]["device_ms"] == 0
    page = (project.path / "r.html").read_text()
    assert page.count('<table class="ranges">') == 4 and "<td>encoder</td><td>1</td>" in page


def test_an_exported_trace_names_its_test_and_compare_warns_of_two(project, capsys):
    """A trial's six long parametrized ids gave six files named alike but for a hash, and
    `opprof compare` of two unrelated traces said nothing: the header carries the node id and
    the outcome, and comparing traces of two tests says so."""
    from pytest_opprof.cli import main

    project.makepyfile(
        test_t="""
        import pytest
        from conftest import infer

        @pytest.mark.parametrize("n", [1, 2])
        def test_x(opprof, mlp, n):
            opprof.run(infer, *mlp, warmup=1, steps=2)
        """
    )
    run(project, "--opprof", "--opprof-trace-dir=tr", "--opprof-trace=all").assert_outcomes(passed=2)
    traces = sorted((project.path / "tr").glob("*.json.gz"))
    headers = [json.loads(gzip.decompress(t.read_bytes()))["opprof"] for t in traces]
    assert sorted((h["nodeid"], h["outcome"]) for h in headers) == [
        ("test_t.py::test_x[1]", "passed"),
        ("test_t.py::test_x[2]", "passed"),
    ]
    capsys.readouterr()
    main(["compare", str(traces[0]), str(traces[1])])
    out = capsys.readouterr().out
    assert "warning: A and B are traces of two tests (test_t.py::test_x[" in out
