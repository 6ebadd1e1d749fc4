"""`opprof show` of baseline files and folders, `--op`/`--top` there, `--markdown` of show,
compare and analyze, and bad input to show and compare: exit 2, one line."""

from __future__ import annotations

import json
import os
from statistics import median

import pytest
from builders import kernel, launch, memcpy, op, step, stepped
from cli_docs import ENV, profile, run_cli, steps_with, two_folders, write_folder

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import MAX_BASELINE_BYTES, baseline_from_profile, baseline_path, write_baseline
from pytest_opprof.chrome import write_trace


@pytest.fixture
def folders(tmp_path):
    """Two device-key folders (cli_docs.two_folders)."""
    return two_folders(tmp_path)


# -- show ----------------------------------------------------------------------------------------


def test_show_of_a_trace_and_analyze_of_a_baseline_point_to_each_other(capsys, folders, tmp_path):
    """Each command handed the other's file says what the file is and which command reads it,
    never "delete it" (a trace opprof wrote, gzipped) or "export it again" (a baseline)."""
    from pytest_opprof.chrome import write_trace

    trace = tmp_path / "t.json.gz"
    write_trace(trace, steps_with([500] * 3), {})
    code, _, err = run_cli(capsys, "show", trace)
    assert code == 2
    assert f"{trace}: gzip-compressed, as traces are, not a baseline; opprof analyze reads traces" in err
    assert "delete" not in err
    baseline = folders[0] / "tests" / "test_m.py" / "test_mlp.json"
    code, _, err = run_cli(capsys, "analyze", baseline)
    assert code == 2 and f"{baseline}: an opprof baseline, not a trace; opprof show reads baselines" in err


def test_the_commands_own_json_outputs_are_named_when_read_back(capsys, folders, tmp_path):
    """`--json` output handed back to a command is named as what it is, with what to give
    instead, never called a broken baseline to fix or delete, nor a trace."""
    from pytest_opprof.chrome import write_trace

    trace = tmp_path / "t.json.gz"
    write_trace(trace, steps_with([500] * 3), {})
    made = {
        "analyze": (("analyze", trace, "--json"), "`opprof analyze --json` output (a profile)"),
        "show": (("show", folders[0], "--json"), "`opprof show --json` output"),
        "compare": (("compare", *folders, "--json"), "`opprof compare --json` output"),
    }
    instead = {
        "analyze": "give the trace it was made from",
        "show": "it lists baselines, which opprof show reads (.opprof/<device key>)",
        "compare": "give one of the traces it compared (opprof show reads baselines)",
    }
    as_baseline = "pass a baseline file or folder (.opprof/<device key>), and keep such files out of baseline folders"
    for name, (argv, what) in made.items():
        _, out, _ = run_cli(capsys, *argv)
        output = tmp_path / f"{name}.json"
        output.write_text(out)
        said = "no opprof command reads its own JSON output (it is for scripts)"
        code, _, err = run_cli(capsys, "analyze", output)
        assert (code, err) == (2, f"opprof: error: {output}: {what}, not a trace; {said}: {instead[name]}\n")
        for argv in (("show", output), ("compare", output, output)):
            code, _, err = run_cli(capsys, *argv)
            assert (code, err) == (2, f"opprof: error: {output}: {what}, not a baseline; {said}: {as_baseline}\n")


def test_show_file_and_folder(capsys, folders):
    a, _ = folders
    file = a / "tests" / "test_m.py" / "test_mlp.json"
    code, out, err = run_cli(capsys, "show", file)
    assert (code, err) == (0, "")
    assert out.startswith(f"tests/test_m.py::test_mlp  [{file}]")
    assert "device nvidia-tesla-t4; x; torch 2.13.0, CUDA 12.4, driver 550.54.15; 5 steps, 9.000 ms/step wall" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("aten::")}
    assert rows["aten::addmm"][1:] == ["1", "0.350", "0.350", "0.700", "device"]
    assert rows["aten::relu"][1:] == ["1", "0.050", "0.050", "0.050", "cpu"]
    assert ["op", "calls/step", "ms/step", "min", "cpu", "ms/step", "time"] in [
        line.split() for line in out.splitlines()
    ]
    assert "sm90_gemm" in out
    one = write_folder(a.parent / "one", "cpu", {"tests/test_m.py::test_one": profile(steps=1)})
    code, out, _ = run_cli(capsys, "show", one)
    assert code == 0 and "; 1 step, 9.000 ms/step wall" in out
    (second,) = one.rglob("*.json")  # a test's second capture: the header says which the file holds
    data = json.loads(second.read_text())
    data["capture"]["number"] = 2
    second.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "show", one)
    assert code == 0 and "; 1 step (the test's capture 2), 9.000 ms/step wall" in out
    code, out, _ = run_cli(capsys, "show", a)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines() if "  [" in line] == [
        "tests/test_m.py::test_mlp",
        "tests/test_m.py::test_old",
        "tests/test_m.py::test_small",
    ]
    data = json.loads(run_cli(capsys, "show", a, "--json")[1])
    assert data["schema"] == 1  # as analyze's and compare's: a script checks one key for all three
    assert [d["nodeid"] for d in data["baselines"]] == [
        "tests/test_m.py::test_mlp",
        "tests/test_m.py::test_old",
        "tests/test_m.py::test_small",
    ]
    assert median(data["baselines"][0]["ops"]["aten::addmm"]["device_ms"]) == 0.35


def test_show_op_keeps_the_chosen_ops_and_the_baselines_holding_one(capsys, folders, tmp_path):
    """`opprof show --op` shows the chosen ops and their kernels, and only the baselines holding one."""
    a, b = folders
    code, out, _ = run_cli(capsys, "show", b, "--op", "aten::clone")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines() if "  [" in line] == ["tests/test_m.py::test_mlp"]
    assert [line.split()[0] for line in out.splitlines() if line.startswith("aten::")] == ["aten::clone"]
    data = json.loads(run_cli(capsys, "show", a, "--json", "--op", "aten::addmm")[1])
    assert {d["nodeid"]: sorted(d["ops"]) for d in data["baselines"]} == {
        f"tests/test_m.py::{t}": ["aten::addmm"] for t in ("test_mlp", "test_old", "test_small")
    }
    assert all(list(d["kernels"]) == ["sm90_gemm"] for d in data["baselines"])


def test_show_top_keeps_the_ops_of_the_table_in_json_too(capsys, folders):
    """`show --json --top N` keeps the N ops the table lists first (it kept the first N names
    in alphabetical order); a tie goes to the op with more CPU time, the caller."""
    file = folders[0] / "tests" / "test_m.py" / "test_mlp.json"
    _, out, _ = run_cli(capsys, "show", file, "--top", "2")
    in_table = [line.split()[0] for line in out.splitlines() if line.startswith("aten::")]
    assert in_table == ["aten::linear", "aten::addmm"]  # both 0.35 device ms/step; linear's CPU time is larger
    assert "\n(1 more op)\n" in out  # aten::relu, left out: said
    data = json.loads(run_cli(capsys, "show", file, "--json", "--top", "2")[1])
    assert sorted(data["baselines"][0]["ops"]) == sorted(in_table)
    data = json.loads(run_cli(capsys, "show", file, "--json", "--top", "1")[1])
    assert list(data["baselines"][0]["ops"]) == ["aten::linear"]
    assert data["baselines"][0]["ops_left_out"] == 2  # said, as the table's line says it
    assert json.loads(run_cli(capsys, "show", file, "--json")[1])["baselines"][0]["ops_left_out"] == 0


def test_show_op_lists_a_chosen_ops_own_share_of_a_kernel_others_launch_too(capsys, tmp_path):
    """`show --op` narrows a kernel several ops launch to the chosen ones' launches (it showed the
    kernel's sum, 2.000 ms/step, under an op of 1.200)."""
    from test_baseline import shared_kernel_profile

    path = tmp_path / "b.json"
    write_baseline(path, baseline_from_profile(shared_kernel_profile(), "t.py::t", "gpu", ENV))
    _, out, _ = run_cli(capsys, "show", path, "--op", "record_param_comms")
    (row,) = [line.split() for line in out.splitlines() if line.startswith("ncclKernel")]
    assert row == ["ncclKernel", "record_param_comms", "4", "1.200"]
    data = json.loads(run_cli(capsys, "show", path, "--json", "--op", "record_param_comms", "--op", "aten::mm")[1])
    kernels = data["baselines"][0]["kernels"]
    assert kernels["ncclKernel"] == {"calls_per_step": [4] * 4, "device_ms": [1.2] * 4, "ops": ["record_param_comms"]}
    assert kernels["gemm"]["ops"] == ["aten::mm"]
    whole = json.loads(run_cli(capsys, "show", path, "--json", "--op", "ncclKernel")[1])["baselines"][0]
    assert whole["kernels"]["ncclKernel"]["calls_per_step"] == [5] * 4  # chosen by its own name: all of it


def test_show_memory_ops_by_time_within_top_and_without_an_empty_op_table(capsys, tmp_path):
    """`show`'s memory-op table is ordered by time and cut by --top like the others (it was in name
    order, whole); `--op` choosing copies alone prints no empty op table."""
    events = stepped(
        2,
        1000,
        lambda i, base: [
            op("aten::copy_", base + 10, 100),
            launch(base + 20, corr=10 * i + 1, name="cudaMemcpyAsync"),
            memcpy("Memcpy HtoD (Pageable -> Device)", base + 30, 5, 4096, corr=10 * i + 1),
            op("aten::to", base + 200, 100),
            launch(base + 210, corr=10 * i + 2, name="cudaMemcpyAsync"),
            memcpy("Memcpy DtoH (Device -> Pageable)", base + 220, 50, 4096, corr=10 * i + 2),
        ],
    )
    file = tmp_path / "m.json"
    write_baseline(file, baseline_from_profile(analyze(events), "t.py::t", "gpu", ENV))
    _, out, _ = run_cli(capsys, "show", file, "--top", "1")
    assert [line.split()[0] for line in out.splitlines() if line.startswith("Memcpy")] == ["Memcpy"]
    assert "DtoH" in out and "HtoD" not in out
    _, out, _ = run_cli(capsys, "show", file, "--op", "Memcpy*")
    assert "HtoD" in out and "DtoH" in out and "calls/step    ms/step" not in out


@pytest.mark.parametrize("command", ["show", "compare"])
def test_an_op_glob_matching_nothing_exits_2_naming_the_closest(capsys, folders, command):
    """An --op that matches nothing is a typo: exit 2, one line, the closest names; never an empty table."""
    a, b = folders
    argv = [command, a, b] if command == "compare" else [command, a]
    code, out, err = run_cli(capsys, *argv, "--op", "aten::reluu")
    assert (code, out) == (2, "")
    what = "op" if command == "compare" else "op, kernel or memory op"  # compare judges ops alone
    assert err.count("\n") == 1 and f"--op aten::reluu: matches no {what} in" in err
    assert err.rstrip().endswith("closest: aten::relu")


def test_show_gives_a_baselines_recorded_ranges_a_column(capsys, folders):
    """`opprof show` gains a `recorded min range` column where a file holds ranges (`-` for an
    op without one); a file without ranges keeps the table as it was."""
    a, _ = folders
    file = a / "tests" / "test_m.py" / "test_mlp.json"
    code, out, _ = run_cli(capsys, "show", file)
    assert code == 0 and "min/step range (recorded)" not in out  # no ranges: the table as before
    data = json.loads(file.read_text())
    data["ops"]["aten::addmm"]["recorded_range_ms"] = [0.35, 0.7]
    file.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "show", file)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("aten::")}
    assert code == 0 and "min/step range (recorded)" in out
    assert (rows["aten::addmm"][-1], rows["aten::relu"][-1]) == ("0.350-0.700", "-")


def test_show_says_a_baseline_was_recorded_under_load(capsys, folders):
    """A CI trial's file held addmm at 12.37 ms (0.14 calm) with `capture.cpu_wait` 0.97, and
    `opprof show` printed it as any other: its header says so, with the command; a calm file's
    does not."""
    a, _ = folders
    file = a / "tests" / "test_m.py" / "test_mlp.json"
    assert "recorded while" not in run_cli(capsys, "show", file)[1]
    data = json.loads(file.read_text())
    data["capture"] = {**data.get("capture", {}), "cpu_wait": 0.97}
    file.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "show", file)
    assert code == 0 and out.splitlines()[2] == (
        "recorded while its threads waited for a CPU 97% of the capture: its CPU times may be inflated and hide "
        "slowdowns; record it again on a quiet machine, in the test's rootdir and with the options it was recorded with: "
        "pytest --opprof-update-baseline=all tests/test_m.py::test_mlp"
    )
    data["capture"]["cpu_wait"] = 0.0  # a calm one (only a hand edit writes it): nothing to say (a review)
    file.write_text(json.dumps(data))
    assert "recorded while" not in run_cli(capsys, "show", file)[1]


def test_show_gives_the_range_of_calls_per_step_where_steps_differ(capsys, folders):
    """A data trial's MoE file held 15, 13, 11, ... calls per step and `opprof show` read 13: the
    median, and the range beside it where steps made other counts."""
    a, _ = folders
    file = a / "tests" / "test_m.py" / "test_mlp.json"
    data = json.loads(file.read_text())
    calls = data["ops"]["aten::addmm"]["calls_per_step"]
    data["ops"]["aten::addmm"]["calls_per_step"] = [1] + [2] * (len(calls) - 2) + [5]
    file.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "show", file)
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("aten::")}
    assert code == 0 and rows["aten::addmm"].split()[1:3] == ["2", "(1-5)"]
    assert rows["aten::relu"].split()[1] == "1" and "(" not in rows["aten::relu"]


def test_show_says_a_baseline_was_recorded_from_a_fn_that_keeps_state(capsys, folders):
    """`capture.unrepeated` (the ops whose work varied in the recording's further measurements of
    run()'s fn): the header says what it means for later runs; a file without it says nothing."""
    a, _ = folders
    file = a / "tests" / "test_m.py" / "test_mlp.json"
    assert "other work from call to call" not in run_cli(capsys, "show", file)[1]
    data = json.loads(file.read_text())
    data["capture"] = {**data.get("capture", {}), "unrepeated": ["aten::cat", "aten::mm"]}
    file.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "show", file)
    assert code == 0 and out.splitlines()[2] == (
        "recorded from a run() whose fn did other work from call to call in aten::cat, aten::mm (the data it reads, "
        "or state it keeps such as a growing cache): a later run's slowdown cannot be confirmed by measuring again, "
        "and warmup=, steps=, -k and the order of tests change what is measured"
    )


def test_a_key_folder_holding_another_keys_file_names_that_file(capsys, folders):
    """A device-key folder holding a file of another key: its files are named, with the fix, not
    `<folder>/<key>`, which does not exist (a trial's `e.g. .opprof/cpu-x86_64/cpu-x86_64`)."""
    a, b = folders
    stray = next(a.rglob("test_old.json"))
    stray.write_text(stray.read_text().replace('"nvidia-tesla-t4"', '"nvidia-h100"'))
    code, _, err = run_cli(capsys, "compare", a, b)
    assert code == 2 and err.count("\n") == 1
    assert f"{a}: holds baselines of 2 device keys (nvidia-h100, nvidia-tesla-t4): nvidia-h100: {stray}; " in err
    assert "move or delete the others" in err and str(a / "nvidia-h100") not in err


def test_compare_and_show_name_the_setup_of_torchs_cpu_ops(capsys, tmp_path):
    """A team trial's recordings on 2 threads and on 1 (OMP_NUM_THREADS=1): `compare` said B
    regressed, its one warning blaming another machine or load, and `show` gave no thread count.
    Now a warning names each side's threads and CPU kernels, and `show` its file's."""
    cpu = {"torch": "2.13.0", "cuda": None, "cpu_model": "x", "cpu_capability": "AVX512"}
    sides = {"a": (2, cpu, 700.0), "b": (1, {**cpu, "cpu_capability": "AVX2"}, 1400.0)}
    for side, (threads, env, us) in sides.items():
        for nodeid in ("t.py::test_one", "t.py::test_two"):
            doc = baseline_from_profile(profile(us, steps=6), nodeid, "cpu-x86_64", env)
            write_baseline(baseline_path(tmp_path / side, "cpu-x86_64", nodeid), doc.replace(threads=threads))
    a, b = tmp_path / "a" / "cpu-x86_64", tmp_path / "b" / "cpu-x86_64"
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 1
    warning = (
        "A ran torch's CPU ops on 2 torch threads, AVX512 kernels, B on 1 torch thread, AVX2 kernels: their CPU "
        "times may differ by that alone (a comparing run reads an op's move that it explains as inconclusive)"
    )
    assert f"warning: {warning}\n" in out
    assert warning in json.loads(run_cli(capsys, "compare", a, b, "--json")[1])["warnings"]
    same = baseline_from_profile(profile(steps=6), "t.py::test_two", "cpu-x86_64", cpu).replace(threads=2)
    write_baseline(baseline_path(tmp_path / "b", "cpu-x86_64", "t.py::test_two"), same)
    _, out, _ = run_cli(capsys, "compare", a, b)
    assert "B on 1 torch thread, AVX2 kernels (1 of 2 compared tests differ so): their CPU" in out
    _, out, _ = run_cli(capsys, "show", b / "t.py" / "test_one.json")
    assert "device cpu-x86_64; x; torch 2.13.0; 1 torch thread, AVX2 kernels; 6 steps," in out
    unrecorded = baseline_from_profile(profile(steps=6), "t.py::test_two", "cpu-x86_64", {"torch": "2.13.0"})
    write_baseline(baseline_path(tmp_path / "b", "cpu-x86_64", "t.py::test_two"), unrecorded)  # an old file's
    _, out, _ = run_cli(capsys, "compare", a / "t.py" / "test_two.json", b / "t.py" / "test_two.json")
    assert "torch's CPU ops" not in out  # what one side did not record is not told apart


# -- --markdown ---------------------------------------------------------------------------------


def markdown_tables_of(out):
    """Each GitHub table in `out` as rows of cells (split on the pipes no backslash escapes)."""
    import re

    tables, current = [], None
    for line in out.split("\n"):
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            current.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
        else:
            current = None
    return tables


def test_compare_as_markdown_for_a_pull_request_comment(capsys, tmp_path):
    """GitHub tables whose cells keep their columns whatever the names hold (a kernel's template
    `<float, 4>` would read as an HTML tag and vanish, a `|` split a cell), prose lines escaped
    and each its own line, the same verdicts and exit code as the text."""
    name = "void gemm<float, 4>|v2"
    root = tmp_path / ".opprof"
    a = write_folder(root, "nvidia-tesla-t4", {"tests/test_m.py::test_mlp": profile(700, kernel_name=name)})
    b = write_folder(root, "nvidia-a10", {"tests/test_m.py::test_mlp": profile(1400, kernel_name=name)})
    code, out, _ = run_cli(capsys, "compare", a, b, "--markdown")
    text_code, text, _ = run_cli(capsys, "compare", a, b)
    assert code == text_code == 1
    tables = markdown_tables_of(out)
    assert len(tables) == 2  # the ops, the kernels under them
    for table in tables:
        assert set(table[1]) <= {"-" * len(c) for c in table[1]}  # the header's rule
        assert {len(row) for row in table} == {len(table[0])}  # no cell split or lost
    ops = {row[0]: row for row in tables[0][2:]}
    assert ops["aten::addmm"][1:] == ["1", "1", "0.350", "0.700", "2.00x", "+0.350", "device", "slower"]
    assert tables[1][2][1] == r"void gemm\<float, 4\>\|v2"
    assert "tests/test\\_m.py::test\\_mlp: B regressed: 2 ops worse  " in out.split("\n")
    assert out.rstrip().endswith("opprof compare: 1 of 1 compared test regressed in B")


def test_a_markdown_too_long_for_a_comment_says_so_on_stderr(capsys, tmp_path):
    """A scale trial's comparison of 144 tests made a Markdown GitHub refuses as a comment: a note
    on stderr says its size, where it fits and what cuts it; the output and exit code are the same."""
    from pytest_opprof.errors import markdown_too_long

    root = tmp_path / ".opprof"
    ids = [f"tests/test_m.py::test_mlp[{i}]" for i in range(150)]
    a = write_folder(root, "nvidia-tesla-t4", {nodeid: profile(700) for nodeid in ids})
    b = write_folder(root, "nvidia-a10", {nodeid: profile(1400) for nodeid in ids})
    code, out, err = run_cli(capsys, "compare", a, b, "--markdown")
    assert code == 1 and len(out) > 65_536
    assert err == (
        f"opprof: note: the Markdown is {len(out):,} characters, over the 65,536 a GitHub comment "
        "holds (a job summary holds 1 MiB): --top N and --op GLOB cut its tables (a compare's changed rows stay)\n"
    )
    code, out, err = run_cli(capsys, "compare", a, b, "--markdown", "--op", "aten::relu")
    assert (code, err) == (0, "") and len(out) < 65_536
    assert run_cli(capsys, "compare", a, b)[2] == ""  # the text has no such limit
    (big,) = markdown_too_long(2_000_000, 2_000_000)
    assert big.startswith("the Markdown is 2,000,000 bytes, over the 1 MiB a GitHub job summary holds")


def test_show_and_analyze_as_markdown(capsys, tmp_path, folders):
    a, _ = folders
    code, out, _ = run_cli(capsys, "show", a, "--markdown")
    assert code == 0 and len(markdown_tables_of(out)) >= 3  # each baseline's ops table at least
    assert all(row[0] for t in markdown_tables_of(out) for row in t)
    trace = tmp_path / "t.json"
    events = []
    for i in range(3):
        events += [step(i + 1, i * 1000, 900), op("aten::mm", i * 1000 + 10, 500)]
    write_trace(trace, events, {})
    code, out, _ = run_cli(capsys, "analyze", trace, "--markdown")
    assert code == 0
    (ops, *_), checks = markdown_tables_of(out), markdown_tables_of(out)[-1]
    assert ops[0][:2] == ["op", "calls/step"] and ops[2][0] == "aten::mm"
    assert checks[0] == ["check", "name", "message"]


@pytest.mark.parametrize(
    "argv",
    [
        ("compare", "A", "B", "--markdown", "--json"),
        ("show", "A", "--json", "--markdown"),
        ("analyze", "T", "--csv", "--markdown"),
    ],
)
def test_markdown_beside_json_or_csv_is_one_line_and_exit_2(capsys, folders, small_trace_path, argv):
    a, b = folders
    given = {"A": a, "B": b, "T": small_trace_path}
    code, out, err = run_cli(capsys, *(given.get(x, x) for x in argv))
    assert code == 2 and out == "" and err.count("\n") == 1 and "not allowed with argument" in err


@pytest.fixture
def small_trace_path(tmp_path):
    path = tmp_path / "small.json"
    write_trace(path, [step(1, 0, 900), op("aten::mm", 10, 500)], {})
    return path


def test_markdown_keeps_each_line_of_text_as_written():
    """Indents, a leading dash, number or `=` would read as a code block, a list or a rule."""
    from pytest_opprof.tables import as_markdown, grid, markdown_tables

    with markdown_tables():
        table = grid([["a&lt;b"]], ["op"])
    text = f"    indented\n- dash\n12. item\n=== x\n|a*b*.json: 1 step\n{table}\nplain *x* <y> &copy;"
    assert as_markdown(text).split("\n") == [
        "\u00a0" * 4 + "indented  ",
        "\\- dash  ",
        "12\\. item  ",
        "\\=== x  ",
        "\\|a\\*b\\*.json: 1 step  ",  # a path starting with `|` is no table (a review's)
        "",
        "| op      |",
        "|---------|",
        "| a\\&lt;b |",  # an entity's `&` escaped: the name as it is, not `a<b`
        "",
        "plain \\*x\\* \\<y\\> \\&copy;  ",
    ]


# -- bad input: exit 2, one line -------------------------------------------------------------


def test_bad_input_exits_2_with_one_line(capsys, folders, tmp_path):
    a, b = folders
    code, _, err = run_cli(capsys, "compare", b.parent, b)
    assert code == 2 and "holds baselines of 2 device keys (nvidia-a10, nvidia-tesla-t4); pass one" in err
    import shutil

    shutil.copytree(a, tmp_path / "mixed" / "nvidia-a10")  # copied by hand: the files still say their own key
    shutil.copytree(a, tmp_path / "mixed" / "nvidia-a10-copy")
    code, _, err = run_cli(capsys, "compare", tmp_path / "mixed", tmp_path / "mixed")
    assert code == 2 and "a second baseline of 'tests/test_m.py::test_" in err
    assert f"pass one device-key folder, such as {tmp_path / 'mixed' / 'nvidia-a10'}" in err
    stray = tmp_path / "mixed" / "nvidia-a10"
    shutil.copy(stray / "tests" / "test_m.py" / "test_mlp.json", stray / "tests" / "copy.json")  # a stray copy
    code, _, err = run_cli(capsys, "compare", stray, stray)
    assert code == 2 and "a second baseline of 'tests/test_m.py::test_mlp'" in err and "delete the stray file" in err
    corrupt = a / "tests" / "test_m.py" / "test_small.json"
    before = corrupt.read_bytes()[:-20]
    corrupt.write_bytes(before)
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    fifo = tmp_path / "pipe.json"  # reading it would hang: refused before any read
    os.mkfifo(fifo)
    traces = tmp_path / "traces"  # a --opprof-trace-dir folder
    traces.mkdir()
    (traces / "t.json.gz").write_bytes(b"")
    test_file = tmp_path / "test_m.py"  # a trial's `opprof show tests/test_basic.py` was told to delete it
    test_file.write_text("import torch\n")
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:  # sparse: refused by its size, never read
        f.truncate(MAX_BASELINE_BYTES + 1)
    loop = tmp_path / "loop1"  # a trial's loop read `no such file or folder`
    loop.symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("gone.json")
    cases = [
        (("show", loop), "loop1: a symlink loop (to loop2, which leads back)"),
        (("compare", loop, b), "loop1: a symlink loop (to loop2, which leads back); give two baseline folders"),
        (("show", dangling), "dangling.json: a symlink to gone.json, which does not exist"),
        (("compare", a, b), f"{corrupt}: not valid JSON"),
        (("show", tmp_path / "nope"), "nope: no such file or folder"),
        (("show", test_file), "test_m.py: no baseline (baselines are .json files); give a baseline file or folder"),
        (
            ("show", empty),
            "empty: no baseline files (*.json) under it; record some with pytest --opprof-update-baseline",
        ),
        (("compare", b, other), "cannot compare the folder"),
        (("compare", b, tmp_path / "nope"), "nope: no such file or folder; give two baseline folders"),
        (("compare", other, other), "other.json: not an opprof baseline (no 'schema')"),
        (("compare", b, b, "--tolerance", "fast"), "argument --tolerance: 'fast' is not a percentage like 20%"),
        (
            ("compare", b, b, "--min-delta-ms", "-1"),
            "argument --min-delta-ms: '-1' is not a finite number of milliseconds",
        ),
        (("compare", b, b, "--stat", "mean"), "argument --stat: invalid choice: 'mean'"),
        (("compare", b), "the following arguments are required: B"),
        (("show", fifo), "pipe.json: not a file or folder (a pipe or a device?); give a baseline file or folder"),
        (("compare", fifo, fifo), "pipe.json: not a file or folder (a pipe or a device?); give two baseline folders"),
        (
            ("show", "/dev/zero"),
            "/dev/zero: not a file or folder (a pipe or a device?); give a baseline file or folder",
        ),
        (("show", huge), f"huge.json: larger than {MAX_BASELINE_BYTES:,} bytes"),
        (("compare", traces, traces), "traces: traces (*.json.gz), no baseline files; opprof compares traces one"),
    ]
    for argv, expected in cases:
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, argv
        assert out == "" and err.count("\n") == 1 and err.startswith("opprof: error: "), (argv, err)
        assert expected in err, (argv, err)
    assert corrupt.read_bytes() == before  # left as it was


def test_a_file_that_is_no_baseline_is_not_told_to_be_deleted(capsys, tmp_path):
    """An audit's `opprof show pytest.ini` (its `[pytest]` read as a trace's list of events),
    `opprof mv test_m.py ...` and `opprof show package.json` were each told `fix or delete it`."""
    (tmp_path / "test_m.py").write_text("import torch\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    (tmp_path / "package.json").write_text('{"name": "x"}')
    cases = [
        (("mv", "test_m.py", "test_m.py::test_z"), "test_m.py: no baseline (baselines are .json files); give a "),
        (("show", "pytest.ini"), "pytest.ini: no baseline (baselines are .json files); give a baseline file or folder"),
        (
            ("show", "package.json"),
            "package.json: not an opprof baseline (no 'schema'); if it is a baseline, fix or delete it and run pytest "
            "--opprof-update-baseline; else give a baseline file or folder",
        ),
    ]
    for argv, expected in cases:
        code, out, err = run_cli(capsys, *[str(tmp_path / a) if i == 1 else a for i, a in enumerate(argv)])
        assert code == 2 and out == "" and expected in err, (argv, err)
    assert (tmp_path / "test_m.py").read_text() == "import torch\n"


def test_show_of_a_folder_shows_its_readable_files_and_names_every_other_one(capsys, folders):
    """A merge conflict in one file, a newer schema in another: `show` of the folder shows the
    third and names both, one line each, exit 2 (it stopped at the first, showing nothing);
    `compare` refuses the folder, naming the first and counting the rest."""
    a, b = folders
    conflict = a / "tests" / "test_m.py" / "test_mlp.json"
    conflict.write_text("<<<<<<< HEAD\n")
    newer = a / "tests" / "test_m.py" / "test_small.json"
    newer.write_text('{"schema": 99}')
    code, out, err = run_cli(capsys, "show", a)
    assert code == 2
    assert [line.split()[0] for line in out.splitlines() if "  [" in line] == ["tests/test_m.py::test_old"]
    assert err.splitlines() == [
        f"opprof: error: {conflict}: holds a merge conflict's markers (<<<<<<< at line 1); "
        "resolve it by recording the baseline again: delete the file and run pytest --opprof-update-baseline "
        "with the test's id (while the merge is not yet committed, git checkout --ours or --theirs on the file "
        "takes one side instead)",
        f"opprof: error: {newer}: baseline schema 99 is newer than this pytest-opprof reads (1, 2); "
        "upgrade pytest-opprof, or delete it and run pytest --opprof-update-baseline",
    ]
    code, out, err2 = run_cli(capsys, "show", a, "--json")
    data = json.loads(out)
    assert code == 2 and err2 == err
    assert [d["nodeid"] for d in data["baselines"]] == ["tests/test_m.py::test_old"]
    assert data["unreadable"] == [line.removeprefix("opprof: error: ") for line in err.splitlines()]
    assert json.loads(run_cli(capsys, "show", b, "--json")[1])["unreadable"] == []
    (a / "tests" / "test_m.py" / "test_old.json").write_text("")
    code, out, err = run_cli(capsys, "show", a, "--json")  # none readable: JSON still, every file named
    assert code == 2 and json.loads(out)["baselines"] == [] and len(err.splitlines()) == 3
    code, out, err = run_cli(capsys, "show", a)
    assert code == 2 and out == "" and len(err.splitlines()) == 3
    code, out, err = run_cli(capsys, "compare", a, b)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"opprof: error: {conflict}: holds a merge conflict's markers")
    assert err.endswith("(and 2 more unreadable baseline files: opprof show on the folder names each)\n")


@pytest.mark.parametrize("name", ["side.json", "side.json.gz"])
def test_compare_of_an_empty_or_lfs_pointer_file_names_both_kinds(capsys, tmp_path, name):
    """A single file given to compare may be a baseline or a trace: an empty one, or a Git LFS
    pointer (a .json trace's was named a baseline's, with the fix to keep baselines out of LFS)."""
    side = tmp_path / name
    other = tmp_path / "b.json"
    write_trace(other, profile(700).events, {})
    side.write_text("")
    code, out, err = run_cli(capsys, "compare", side, other)
    assert (code, out) == (2, "")
    assert err == (
        f"opprof: error: {side}: an empty file, neither a baseline nor a trace; give a baseline or a trace "
        "exported by torch.profiler\n"
    )
    side.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 123456\n")
    code, out, err = run_cli(capsys, "compare", other, side)
    assert (code, out) == (2, "")
    assert err == (
        f"opprof: error: {side}: a Git LFS pointer, not the baseline or trace it stands for; "
        "fetch the file with git lfs pull\n"
    )


def test_a_baseline_with_an_op_named_like_a_trace_key_is_read_as_a_baseline(capsys, tmp_path):
    """A baseline whose op is called `deviceProperties` (any name may be an op) is still a
    baseline file to `opprof compare`, not sniffed as a trace."""
    events = [step(1, 0, 100), op("deviceProperties", 10, 50)]
    for name in ("a.json", "b.json"):
        write_baseline(tmp_path / name, baseline_from_profile(analyze(events), "t.py::t", "cpu-x86_64", ENV))
    code, out, _ = run_cli(capsys, "compare", tmp_path / "a.json", tmp_path / "b.json", "--json")
    assert code == 0 and json.loads(out)["a"]["kind"] == "baseline"


def test_show_prints_a_gpu_baselines_header_and_tables_as_they_read(capsys, tmp_path):
    """The whole text of `opprof show` of a GPU baseline (a mutation trial changed the header's
    `CUDA driver`, a table's header, the blank line between tables, and no test noticed); its
    memory ops by step as its other columns (their bytes read as the three steps' together)."""
    events = stepped(
        3,
        10_000,
        lambda i, base: [
            op("aten::addmm", base + 20, 700, shapes=((8, 64), (64, 64)), dtypes=("float", "float"), flops=65536),
            launch(base + 30, corr=10 * i + 1),
            kernel("sm90_gemm", base + 40, 350, corr=10 * i + 1),
            op("aten::copy_", base + 1000, 100),
            launch(base + 1010, corr=10 * i + 2, name="cudaMemcpyAsync"),
            memcpy("Memcpy HtoD (Pageable -> Device)", base + 1020, 50, 4096, corr=10 * i + 2),
            op("aten::relu", base + 2000, 50),
        ],
    )
    file = tmp_path / "test_mlp.json"
    env = {**ENV, "cuda_driver": "12.4", "gpu_name": "NVIDIA H200"}
    write_baseline(file, baseline_from_profile(analyze(events), "tests/test_m.py::test_mlp", "nvidia-h200", env))
    code, out, _ = run_cli(capsys, "show", file)
    assert code == 0
    assert (
        out
        == f"""tests/test_m.py::test_mlp  [{file}]
device nvidia-h200; NVIDIA H200; torch 2.13.0, CUDA 12.4, driver 550.54.15, CUDA driver 12.4; 3 steps, 10.00 ms/step wall (9.150 ms/step outside the ops)

op           calls/step    ms/step    min    cpu ms/step    time
-----------  ------------  ---------  -----  -------------  ------
aten::addmm  1             0.350      0.350  0.700          device
aten::copy_  1             0.050      0.050  0.100          device
aten::relu   1             0.050      0.050  0.050          cpu

kernel     launched by    calls/step    device ms/step
---------  -------------  ------------  ----------------
sm90_gemm  aten::addmm    1             0.350

memory op                         calls/step    device ms/step    bytes/step
--------------------------------  ------------  ----------------  ------------
Memcpy HtoD (Pageable -> Device)  1             0.050             4096
"""
    )


def test_show_says_the_time_of_an_op_that_ran_in_some_steps_only(capsys, tmp_path):
    """A break trial's baseline of an op in 2 of 5 steps showed `0 0.000 ... 0.000-0.000` with no
    word of its time there; its line under the op table says it, as the test's tables do."""

    def body(i, base):
        found = [op("aten::addmm", base + 10, 700)]
        return found + ([op("aten::mm", base + 1000, 300)] if i in (1, 3) else [])

    folder = write_folder(tmp_path, "k", {"t.py::test_some": analyze(stepped(5, 10_000, body))})
    code, out, _ = run_cli(capsys, "show", folder)
    assert code == 0
    assert "ran in some steps only (their medians per step are 0): aten::mm in 2 of 5 steps (0.300 ms cpu there)" in (
        out.splitlines()
    )
    every = write_folder(
        tmp_path / "e", "k", {"t.py::test_every": analyze(stepped(5, 10_000, lambda i, b: body(1, b)))}
    )
    assert "some steps" not in run_cli(capsys, "show", every)[1]


def mixed_precision_steps(steps=3):
    """Steps of one aten::mm on bfloat16 inputs, twice, and on float inputs, once (autocast's
    casts left out): one op, two signatures."""
    events = []
    for i in range(steps):
        base = i * 10_000
        events += [step(i + 1, base, 1_000)]
        events += [
            op("aten::mm", base + 10 + 100 * k, 50, shapes=((64, 128), (128, 64)), dtypes=("c10::BFloat16",) * 2)
            for k in range(2)
        ]
        events += [op("aten::mm", base + 400, 80, shapes=((64, 64), (64, 10)), dtypes=("float", "float"))]
        events += [op("aten::relu", base + 600, 10, shapes=((64, 64),), dtypes=("float",))]
    return events


def test_show_and_analyze_op_list_the_chosen_ops_inputs_with_their_calls(capsys, tmp_path):
    """A training trial's tables gave an op's bfloat16 and float calls one row, no dtype: under
    --op, `opprof show` of a baseline and `opprof analyze` of a trace list the chosen ops' input
    signatures with their calls per step; without --op, no such table."""
    trace = tmp_path / "t.json"
    write_trace(trace, mixed_precision_steps(), {})
    folder = write_folder(tmp_path / ".opprof", "cpu-x", {"t.py::test_mixed": analyze(mixed_precision_steps())})
    for command, path in (("show", folder), ("analyze", trace)):
        code, out, _ = run_cli(capsys, command, path, "--op", "aten::mm")
        assert code == 0
        rows = [line.split() for line in out.splitlines() if line.startswith("aten::mm ") and "[" in line]
        assert rows == [
            ["aten::mm", "c10::BFloat16[64,128],", "c10::BFloat16[128,64]", "2"],
            ["aten::mm", "float[64,64],", "float[64,10]", "1"],
        ], out
        assert "aten::relu" not in out
        code, out, _ = run_cli(capsys, command, path)
        assert code == 0 and "calls/step\n" not in out.replace(" ", "")  # no table ending in calls/step
