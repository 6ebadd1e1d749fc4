"""The `opprof` command: analyze tables and JSON, exit codes, one-line errors."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter

import pytest
from builders import annotation, kernel, launch, memcpy, op, step, stepped
from conftest import SHARED_TRACES
from rawsums import independent_sums

from pytest_opprof.chrome import write_trace
from pytest_opprof.cli import main
from pytest_opprof.errors import empty_compare_side

SHARED_NAMES = sorted(p.name for p in SHARED_TRACES.glob("*.json.gz")) if SHARED_TRACES.is_dir() else []
NO_SHARED = pytest.param(
    "-", marks=pytest.mark.skip(reason=f"no shared Kineto traces at {SHARED_TRACES} (OPPROF_SHARED_TRACES=DIR)")
)


def shared(names: list[str]) -> list:
    """Parameters for the shared traces; in a plain clone one skip saying why (not pytest's
    "got empty parameter set")."""
    return names or [NO_SHARED]


@pytest.fixture
def small_trace(tmp_path):
    events = []
    for i in range(3):
        base = i * 1000
        events += [
            step(i + 1, base, 1000),
            op("aten::linear", base + 10, 300),
            op("aten::addmm", base + 20, 200),
            launch(base + 30, corr=i + 1),
            kernel("sgemm_128x64", base + 40, 150, corr=i + 1),
            op("aten::relu", base + 400, 50),
        ]
    path = tmp_path / "small.json"
    write_trace(path, events, {})
    return path


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_prints_ops_kernels_and_checks(capsys, small_trace):
    """`opprof analyze` prints the op table with per-step numbers, the kernels and the checks."""
    code, out, err = run_cli(capsys, "analyze", str(small_trace))
    assert code == 0 and err == ""
    assert "3 steps" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("aten::")}
    assert lines["aten::addmm"][1:5] == ["1", "0.200", "0.200", "0.150"]  # calls/step, cpu, self cpu, device
    assert "sgemm_128x64" in out and "launched by" in out
    assert "wall_time" in out


def test_analyze_json_is_the_profile_dict(capsys, small_trace):
    """--json prints Profile.to_dict() with per-step distributions."""
    code, out, _ = run_cli(capsys, "analyze", str(small_trace), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["schema"] == 1 and data["steps"] == 3
    addmm = next(o for o in data["ops"] if o["name"] == "aten::addmm")
    assert addmm["per_step"]["calls"]["samples"] == [1, 1, 1]
    assert addmm["device_ms"] == pytest.approx(0.45)
    assert data["kernels"][0]["op"] == "aten::addmm"
    # another's trace: where it came from, as far as its header says
    assert data["trace"] == {"cut_short": False, "device_key": "unknown", "nodeid": None, "outcome": None}


def test_analyze_json_names_the_test_and_outcome_of_a_trace_opprof_exported(capsys, tmp_path):
    """An exported trace's header carries its test, outcome and whether the test's exception cut
    the capture short, which `analyze --json` gives back (a mutation trial dropped the outcome
    from the header and no test noticed)."""
    from pytest_opprof.analysis import analyze

    path = tmp_path / "t.json.gz"
    profile = analyze([step(1, 0, 100), op("aten::mm", 10, 20)])
    env = {"torch": "2.13.0", "gpu_name": "NVIDIA H200"}
    profile.export_chrome_trace(path, "nvidia-h200", env, nodeid="tests/t.py::test_x", outcome="failed", cut_short=True)
    header = json.loads(gzip.decompress(path.read_bytes()))["opprof"]
    assert (header["device_key"], header["environment"]) == ("nvidia-h200", env)
    code, out, _ = run_cli(capsys, "analyze", str(path), "--json")
    assert code == 0
    assert json.loads(out)["trace"] == {
        "cut_short": True,
        "device_key": "nvidia-h200",
        "nodeid": "tests/t.py::test_x",
        "outcome": "failed",
    }


def test_top_limits_rows(capsys, small_trace):
    """--top N keeps the N costliest ops in tables and in JSON."""
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--json", "--top", "1")
    assert [o["name"] for o in json.loads(out)["ops"]] == ["aten::linear"]
    whole = json.loads(run_cli(capsys, "analyze", str(small_trace), "--json")[1])
    assert json.loads(out)["left_out"]["ops"] == len(whole["ops"]) - 1 > 0  # counted, as the tables' line
    assert json.loads(out)["left_out"]["kernels"] == max(0, len(whole["kernels"]) - 1)
    assert "left_out" not in whole
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--top", "2")
    assert sum(line.startswith("aten::") for line in out.splitlines()) == 2
    # a cut table says how many rows it left out (a trial could not tell a cut table from a whole one)
    whole = json.loads(run_cli(capsys, "analyze", str(small_trace), "--json")[1])
    assert f"\n({len(whole['ops']) - 2} more op)\n" in out  # aten::relu
    assert "more op" not in run_cli(capsys, "analyze", str(small_trace), "--top", str(len(whole["ops"])))[1]


def test_op_chooses_ops_and_the_kernels_launched_inside_them(capsys, small_trace):
    """--op keeps the ops it matches and the kernels launched inside them (addmm's kernel under
    aten::linear); the totals stay those of the whole trace."""
    _, whole, _ = run_cli(capsys, "analyze", str(small_trace), "--json")
    code, out, err = run_cli(capsys, "analyze", str(small_trace), "--json", "--op", "aten::linear")
    data, whole_data = json.loads(out), json.loads(whole)
    assert (code, err) == (0, "")
    assert [o["name"] for o in data["ops"]] == ["aten::linear"]
    assert [k["name"] for k in data["kernels"]] == ["sgemm_128x64"]
    assert data["device_ms"] == whole_data["device_ms"] == pytest.approx(0.45)
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--json", "--op", "aten::relu")
    assert [o["name"] for o in json.loads(out)["ops"]] == ["aten::relu"] and json.loads(out)["kernels"] == []


def test_op_keeps_no_kernel_row_holding_launches_from_outside_the_chosen_op(capsys, tmp_path):
    """Kernels of an op that ran only inside the chosen one are kept; those of an op that also ran
    outside it are not (aten::mm in linear and in backward: its kernel row holds both), so the
    kernels never add up to more than the chosen op's device time."""
    events = stepped(
        2,
        1000,
        lambda i, base: [
            op("aten::linear", base + 10, 300),
            op("aten::addmm", base + 20, 100),
            launch(base + 30, corr=10 * i + 1),
            kernel("gemm_a", base + 40, 50, corr=10 * i + 1),
            op("aten::mm", base + 150, 100),
            launch(base + 160, corr=10 * i + 2),
            kernel("gemm_b", base + 170, 50, corr=10 * i + 2),
            op("aten::mm", base + 500, 100),  # backward's, outside linear
            launch(base + 510, corr=10 * i + 3),
            kernel("gemm_b", base + 520, 200, corr=10 * i + 3),
        ],
    )
    path = tmp_path / "inside.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--op", "aten::linear")
    data = json.loads(out)
    assert [k["name"] for k in data["kernels"]] == ["gemm_a"]
    assert data["ops"][0]["device_ms"] == pytest.approx(0.2)  # both its kernels: 2 steps x (0.05 + 0.05)
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--op", "aten::linear", "--op", "aten::mm")
    assert sorted(k["name"] for k in json.loads(out)["kernels"]) == ["gemm_a", "gemm_b"]


@pytest.mark.parametrize("name", shared(SHARED_NAMES))
def test_the_kernels_an_op_chooses_add_up_to_at_most_its_device_time(name):
    """On every shared trace, for every op: the kernels `--op` keeps for it add up to no more than
    its own device time (a trial found 75 of 162 ops above it when any op of a name that ran
    inside counted)."""
    from pytest_opprof.trace import load_trace as load

    profile = load(SHARED_TRACES / name)
    for op_stats in profile.ops:
        chosen = profile.only([op_stats.name])
        assert sum(k.device_ns for k in chosen.kernels) <= op_stats.device_ns + 1, op_stats.name


def test_op_choosing_runtime_calls_shows_them_and_the_header_counts_every_op(capsys, small_trace):
    """A runtime call chosen alone gets a table (the tables showed nothing but an empty op table);
    the header counts the trace's ops and how many were chosen."""
    code, out, _ = run_cli(capsys, "analyze", str(small_trace), "--op", "cudaLaunch*")
    assert code == 0
    assert "3 ops (0 chosen)" in out.splitlines()[0]
    assert "runtime call" in out and "cudaLaunchKernel" in out and "calls/step    cpu ms/step" not in out
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--op", "aten::relu")
    assert "3 ops (1 chosen)" in out.splitlines()[0] and "runtime call" not in out


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("aten::addmm.default", "--op aten::addmm.default: matches no op, kernel, memory op"),
        ("aten::addmm.default", "; closest: aten::addmm"),
        ("aten::addmm ", "--op 'aten::addmm ': matches no"),  # the space shows
        ("x" * 5000, "--op 'xxxxxxxx"),
    ],
)
def test_an_op_glob_matching_nothing_is_quoted_so_it_reads(capsys, small_trace, pattern, fragment):
    """A schema name gets its op as the closest name, spaces around a pattern show, and a long one
    is cut: the line stays one short line."""
    code, out, err = run_cli(capsys, "analyze", str(small_trace), "--op", pattern)
    assert (code, out) == (2, "")
    assert fragment in err and err.count("\n") == 1 and len(err) < 300


def test_op_naming_a_cuda_kernel_selects_that_kernel_alone(capsys, tmp_path):
    """`--op` given a kernel's C++ name: its pointers' `*` span no other kernel's name (`char*`
    matched `char**`), as in the assertions; a glob still spans them."""
    fill = "void k<float, Array<char*, 1> >(int, Array<char*, 1>)"
    other = fill.replace("<char*", "<char**", 1)
    events = [step(1, 0, 100), op("aten::fill_", 1, 10), launch(2, corr=1), kernel(fill, 20, 5, corr=1)]
    events += [op("aten::zero_", 30, 10), launch(31, corr=2), kernel(other, 50, 5, corr=2)]
    path = tmp_path / "pointers.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--op", fill)
    assert [k["name"] for k in json.loads(out)["kernels"]] == [fill]
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--op", "void k<float, *")
    assert sorted(k["name"] for k in json.loads(out)["kernels"]) == sorted([fill, other])


def test_an_op_glob_error_cuts_long_names_and_reads_a_cut_name(capsys, tmp_path):
    """The closest names an --op error offers are cut to 60 characters (a kernel's ran to 5,000);
    a name copied from a table, which ends in …, gets the glob to give instead."""
    long_name = "aten::" + "very_long_" * 30 + "op"
    events = stepped(2, 1000, lambda i, base: [op(long_name, base + 10, 300)])
    path = tmp_path / "long.json"
    write_trace(path, events, {})
    code, _, err = run_cli(capsys, "analyze", str(path), "--op", long_name + "x")
    assert code == 2 and len(err) < 300 and "closest: aten::very_long_very_long_" in err and "…" in err
    code, _, err = run_cli(capsys, "analyze", str(path), "--op", long_name[:59] + "…")
    assert code == 2
    assert err.rstrip().endswith(f"names ending in … are cut in the tables: give a glob such as '{long_name[:59]}*'")


def test_op_globs_add_up_and_may_choose_a_kernel_alone(capsys, small_trace):
    """Repeated --op globs choose what any of them matches; a kernel glob shows the kernel without
    an empty op table; --csv and --top apply to what was chosen."""
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--json", "--op", "aten::r*", "--op", "aten::addmm")
    assert [o["name"] for o in json.loads(out)["ops"]] == ["aten::addmm", "aten::relu"]
    code, out, _ = run_cli(capsys, "analyze", str(small_trace), "--op", "sgemm*")
    assert code == 0 and "3 ops (0 chosen)" in out.splitlines()[0]
    assert "sgemm_128x64" in out and "calls/step    cpu ms/step" not in out
    _, out, _ = run_cli(
        capsys, "analyze", str(small_trace), "--csv", "--op", "aten::relu", "--op", "aten::linear", "--top", "1"
    )
    assert [line.split(",")[0] for line in out.splitlines()[1:]] == ["aten::linear"]
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--csv", "--op", "aten::relu")
    assert [line.split(",")[0] for line in out.splitlines()[1:]] == ["aten::relu"]


@pytest.mark.parametrize("name", shared(["a100-alexnet.json.gz"] if "a100-alexnet.json.gz" in SHARED_NAMES else []))
def test_op_on_a_real_trace_keeps_the_kernels_that_make_its_device_time(capsys, name):
    """On the A100 AlexNet trace, aten::conv2d launches nothing itself: its kernels (cuDNN's,
    under aten::cudnn_convolution inside it) are kept, and add up to its device time."""
    _, out, _ = run_cli(capsys, "analyze", str(SHARED_TRACES / name), "--json", "--op", "aten::conv2d")
    data = json.loads(out)
    (conv,) = data["ops"]
    assert conv["name"] == "aten::conv2d" and conv["device_ms"] > 1
    assert {k["op"] for k in data["kernels"]} >= {"aten::cudnn_convolution"}
    assert sum(k["device_ms"] for k in data["kernels"]) == pytest.approx(conv["device_ms"], rel=0.01)
    assert not any(k["op"] == "aten::addmm" for k in data["kernels"])  # the classifier's, not in conv2d
    assert data["trace"]["device_key"] == "nvidia-a100-pg509-200"  # from its deviceProperties


def test_top_keeps_the_same_ops_in_tables_json_and_csv(capsys, tmp_path, small_trace):
    """One order everywhere, median time per step first: aten::mul's one slow step (total 12 ms,
    median 1 ms) does not outrank aten::add's steady 3 ms in --json --top while the tables and
    CSV put add first (they disagreed); a tie goes to the op with more CPU time (the caller:
    linear and the addmm in it both show 0.15 device ms/step, and name order put addmm first)."""
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--top", "1", "--json")
    assert [o["name"] for o in json.loads(out)["ops"]] == ["aten::linear"]
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--top", "1", "--csv")
    assert [line.split(",")[0] for line in out.splitlines()[1:]] == ["aten::linear"]
    _, out, _ = run_cli(capsys, "analyze", str(small_trace), "--top", "1")
    assert [line.split()[0] for line in out.splitlines() if line.startswith("aten::")] == ["aten::linear"]
    events = stepped(
        3,
        20_000,
        lambda i, base: [
            op("aten::mul", base + 10, 10_000 if i == 2 else 1000),
            op("aten::add", base + 12_000, 3000),
            op("aten::linear", base + 16_000, 600),
            op("aten::addmm", base + 16_100, 400),
        ],
    )
    path = tmp_path / "order.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json")
    assert [o["name"] for o in json.loads(out)["ops"]] == ["aten::add", "aten::mul", "aten::linear", "aten::addmm"]
    for top in ("1", "3"):
        _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--top", top)
        in_json = [o["name"] for o in json.loads(out)["ops"]]
        _, out, _ = run_cli(capsys, "analyze", str(path), "--csv", "--top", top)
        in_csv = [line.split(",")[0] for line in out.splitlines()[1:]]
        _, out, _ = run_cli(capsys, "analyze", str(path), "--top", top)
        in_table = [line.split()[0] for line in out.splitlines() if line.startswith("aten::")]
        assert in_json == in_csv == in_table == ["aten::add", "aten::mul", "aten::linear"][: int(top)]


def test_ranges_come_in_the_tables_order_in_json(capsys, tmp_path):
    """Ranges are ordered as their table orders them, median per step first: a block that ran once
    in three steps does not outrank a steady one in --json --top 1 (it did)."""
    events = stepped(
        3,
        20_000,
        lambda i, base: [
            annotation("common", base + 10, 2000),
            *([annotation("rare", base + 3000, 9000)] if i == 0 else []),
        ],
    )
    path = tmp_path / "ranges.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--top", "1")
    assert [r["name"] for r in json.loads(out)["ranges"]] == ["common"]
    _, out, _ = run_cli(capsys, "analyze", str(path), "--top", "1")
    assert [line.split()[0] for line in out.splitlines() if line.startswith(("common ", "rare "))] == ["common"]


def test_top_limits_the_ranges_in_json_too(capsys, tmp_path):
    """`--json --top 1` keeps the costliest range as the tables do (it kept every range)."""
    events = stepped(
        2,
        1000,
        lambda i, base: [
            annotation("forward", base + 10, 500),
            op("aten::mm", base + 20, 400),
            annotation("loss", base + 600, 100),
            op("aten::sum", base + 610, 50),
        ],
    )
    path = tmp_path / "ranges.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--top", "1")
    assert [r["name"] for r in json.loads(out)["ranges"]] == ["forward"]


def test_top_limits_memory_ops_and_runtime_calls_but_never_checks(capsys, tmp_path):
    """A trial's `--top 2` showed all 5 memory-op rows (`--json`: memory_ops 5, runtime 3): every
    list is cut in the tables and the JSON alike, the checks never."""
    names = ("Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)", "Memcpy DtoD (Device -> Device)")
    events = stepped(
        2,
        1000,
        lambda i, base: [
            e
            for k, name in enumerate(names)
            for e in (
                op("aten::copy_", base + 10 + 100 * k, 50, ext=10 * i + k + 1),
                launch(
                    base + 20 + 100 * k,
                    10 * i + k + 1,
                    name=("cudaMemcpyAsync", "cudaStreamSynchronize", "cudaMemsetAsync")[k],
                ),
                memcpy(name, base + 30 + 100 * k, 20 + 10 * k, 4096, corr=10 * i + k + 1),
            )
        ],
    )
    path = tmp_path / "copies.json"
    write_trace(path, events, {})
    _, whole, _ = run_cli(capsys, "analyze", str(path), "--json")
    assert len(json.loads(whole)["memory_ops"]) == 3 and len(json.loads(whole)["runtime"]) == 3
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json", "--top", "1")
    data = json.loads(out)
    assert [len(data[key]) for key in ("memory_ops", "runtime")] == [1, 1]
    assert data["checks"] == json.loads(whole)["checks"]
    _, out, _ = run_cli(capsys, "analyze", str(path), "--top", "1")
    table = out.split("memory op")[1].split("\n\n")[0]
    assert sum(line.startswith("Memcpy") for line in table.splitlines()) == 1, table


@pytest.mark.parametrize("name", shared(SHARED_NAMES))
def test_analyze_json_agrees_with_raw_event_sums(capsys, name):
    """On every shared trace, the JSON's counts, device ms and bytes equal the raw events' sums."""
    path = SHARED_TRACES / name
    expected = independent_sums(path)
    code, out, _ = run_cli(capsys, "analyze", str(path), "--json")
    data = json.loads(out)
    assert code == 0
    assert {o["name"]: o["calls"] for o in data["ops"]} == dict(expected["cpu_ops_torch_rule"])
    calls: Counter = Counter()
    for k in data["kernels"]:
        calls[k["name"]] += k["calls"]
    assert calls == expected["kernels"]
    assert round(sum(k["device_ms"] for k in data["kernels"]) * 1e6) == expected["kernel_ns"]
    assert {m["name"]: m["calls"] for m in data["memory_ops"]} == dict(expected["memory"])
    assert sum(m["bytes"] for m in data["memory_ops"]) == expected["bytes"]
    assert data["device_busy_ms"] <= data["device_ms"] + 1e-9
    assert all(c["status"] != "error" for c in data["checks"])


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["analyze", "missing.json"], "missing.json: no such file"),
        (["analyze", "{trace}", "--top", "0"], "argument --top: '0' is not a whole number >= 1"),
        (["analyze", "{trace}", "--top", "many"], "argument --top: 'many' is not a whole number"),
        (["analyze"], "the following arguments are required: TRACE"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["comapre", "a", "b"], "; did you mean compare? (see opprof --help)"),  # a trial's typo got the list alone
        (["analyse", "t.json"], "; did you mean analyze? (see opprof --help)"),
        (["analyze", "{bad}"], "not valid JSON"),
        (["analyze", ""], "argument TRACE: '' is an empty path; give a file (see"),  # was ".: a folder"
        (["mv", " ", "t.py::test_x"], "argument FILE: ' ' is an empty path; give a file (see"),
        (["show", " "], "argument PATH: ' ' is an empty path"),
        (["compare", "{trace}", ""], "argument B: '' is an empty path"),
        (["compare", "{trace}", "{empty}"], empty_compare_side("empty.json")),
        (["compare", "{empty}", "{trace}"], empty_compare_side("empty.json")),
        (["analyze", "{trace}", "--op", " "], "argument --op: ' ' is blank; give an op name or a glob"),
        (["analyze", "{trace}", "--op", "aten::lineer"], "--op aten::lineer: matches no op, kernel, memory op"),
        (["analyze", "{trace}", "--op", "aten::lineer"], "; closest: aten::linear"),
        (["analyze", "{trace}", "--op", "zzz*"], "give an exact name or a glob such as 'aten::*mm'"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, small_trace, argv, fragment):
    """Bad input exits 2 with one line on stderr naming the problem, and nothing on stdout."""
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    (tmp_path / "empty.json").write_text("")
    argv = [a.format(trace=small_trace, bad=bad, empty=tmp_path / "empty.json") for a in argv]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("opprof: error: ")
    assert fragment in err


def test_no_command_prints_help_and_exits_2(capsys):
    """`opprof` alone prints its help (listing analyze) on stderr, as usage errors go, and exits 2."""
    code, out, err = run_cli(capsys)
    assert code == 2 and out == "" and "analyze" in err


def test_compare_reads_a_trace_that_is_a_bare_list_of_events(capsys, tmp_path):
    """The Chrome trace format's other form, a JSON array of events, is a trace to compare as to
    analyze (compare said "a Kineto/Chrome trace, not a baseline" of it and exited 2)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5}]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"traceEvents": [{**events[0], "dur": 500}]}))
    code, out, _ = run_cli(capsys, "compare", str(bare), str(wrapped), "--json")
    assert code == 1  # B is worse: 0.005 -> 0.5 ms
    (row,) = json.loads(out)["tests"][0]["ops"]
    assert (row["op"], row["a"]["ms_per_step"], row["b"]["ms_per_step"], row["status"]) == (
        "aten::mm",
        0.005,
        0.5,
        "slower",
    )


def test_module_entry_point_runs(small_trace):
    """`python -m pytest_opprof analyze` works as the console script does."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_opprof", "analyze", str(small_trace), "--json"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"] == 3


@pytest.mark.parametrize("name", shared([n for n in SHARED_NAMES if not n.startswith("cpu")]))
def test_analyze_json_timeline_agrees_with_an_independent_sweep(capsys, name):
    """Busy, idle, compute, comm, memory, both overlaps and the queue of every shared GPU trace
    equal a sweep over the raw events (Decimal µs, no code of ours) within 0.5%."""
    from rawsums import independent_timeline

    path = SHARED_TRACES / name
    code, out, _ = run_cli(capsys, "analyze", str(path), "--json")
    got, want = json.loads(out)["timeline"], independent_timeline(path)
    assert code == 0
    for key in ("span_ms", "busy_ms", "compute_ms", "comm_ms", "memory_ms"):
        assert float(want[key]) == pytest.approx(got[key], rel=0.005, abs=1e-6), key
    for key in ("compute_comm_overlap_ms", "compute_memory_overlap_ms"):
        assert float(want[key]) == pytest.approx(got[key], rel=0.005, abs=1e-6), key
    assert got["idle_ms"] == pytest.approx(got["span_ms"] - got["busy_ms"], abs=1e-6)
    if want["queue_max_ms"] is not None:
        assert float(want["queue_max_ms"]) == pytest.approx(got["queue_ms"]["max"], rel=0.005)
        assert float(want["queue_median_ms"]) == pytest.approx(got["queue_ms"]["median"], rel=0.005)
    assert sum(s["kernels"] + s["memory_ops"] for s in got["streams"]) == len(
        [1 for k in json.loads(out)["kernels"] for _ in range(k["calls"])]
    ) + sum(m["calls"] for m in json.loads(out)["memory_ops"])


def test_analyze_csv_is_the_op_table_for_a_spreadsheet(capsys, small_trace):
    """`opprof analyze --csv`: a header and a row per op (every op; --top N the first N), the
    numbers of --json's per-step medians, in milliseconds."""
    import csv
    import io

    code, out, _ = run_cli(capsys, "analyze", str(small_trace), "--csv")
    assert code == 0
    assert "\r" not in out and out.endswith("\n")  # a text stream adds Windows' `\r` itself, once
    rows = list(csv.DictReader(io.StringIO(out)))
    _, data, _ = run_cli(capsys, "analyze", str(small_trace), "--json")
    ops = json.loads(data)["ops"]
    assert [r["op"] for r in rows] == [o["name"] for o in ops]
    for r, o in zip(rows, ops):
        assert float(r["ms_per_step"]) == pytest.approx(
            o["per_step"]["device_ms" if o["on_device"] else "cpu_ms"]["median"]
        )
        assert float(r["calls_per_step"]) == o["per_step"]["calls"]["median"]
    _, top, _ = run_cli(capsys, "analyze", str(small_trace), "--csv", "--top", "1")
    assert len(list(csv.DictReader(io.StringIO(top)))) == 1


def test_analyze_csv_refuses_an_op_glob_that_chose_only_kernels(capsys, small_trace):
    """The CSV holds ops: a glob that chose only a kernel would print a bare header, which reads
    as "no such op", while the table shows the kernel."""
    code, out, err = run_cli(capsys, "analyze", str(small_trace), "--csv", "--op", "sgemm*")
    assert code == 2 and out == ""
    assert err == (
        f"opprof: error: --op 'sgemm*' chose no op in {small_trace}, only kernels, copies, ranges or runtime calls, "
        "and the CSV holds one row per op: drop --csv (the tables show them) or use --json\n"
    )
    code, out, _ = run_cli(capsys, "analyze", str(small_trace), "--op", "sgemm*")
    assert code == 0 and "sgemm_128x64" in out
    code, out, _ = run_cli(capsys, "analyze", str(small_trace), "--csv", "--op", "aten::add*")
    assert code == 0 and out.splitlines()[1].startswith("aten::addmm,")


def test_the_share_of_a_step_uses_the_true_median_wall_for_an_even_step_count(capsys, tmp_path):
    """Steps of 2, 10, 2, 10 ms: the median wall is 6 ms (as the JSON's step_wall_ms), so a 0.3 ms
    op is 5.0% of a step in the table and the CSV, not 3.0% of the upper middle step (a trial)."""
    import csv
    import io

    events, start = [], 0
    for i, wall in enumerate([2000, 10000, 2000, 10000]):
        events += [step(i + 1, start, wall), op("aten::add", start + 10, 300)]
        start += wall
    path = tmp_path / "even.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json")
    assert json.loads(out)["step_wall_ms"]["median"] == pytest.approx(6.0)
    _, out, _ = run_cli(capsys, "analyze", str(path))
    assert "5.0%" in next(line for line in out.splitlines() if line.startswith("aten::add"))
    _, out, _ = run_cli(capsys, "analyze", str(path), "--csv")
    assert float(next(csv.DictReader(io.StringIO(out)))["of_step_pct"]) == pytest.approx(5.0)


def test_version_is_the_installed_distributions_and_the_readmes(capsys):
    """`opprof --version` prints the one version string: the package's, which pyproject reads
    (dynamic) and the installed distribution carries, and the README's install block shows."""
    from importlib.metadata import version
    from pathlib import Path

    import pytest_opprof

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    out = capsys.readouterr().out.strip()
    assert exit_.value.code == 0 and out == f"opprof {pytest_opprof.__version__}"
    assert version("pytest-opprof") == pytest_opprof.__version__
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    assert f"opprof --version                   # {out}\n" in readme


@pytest.fixture
def broken_trace(tmp_path):
    """A trace whose complete event has a negative duration: the `durations` check is an error."""
    path = tmp_path / "broken.json"
    write_trace(path, [step(1, 0, 1000), op("aten::mm", 10, 300), op("aten::relu", 400, -50)], {})
    return path


def test_analyze_of_an_untrusted_trace_shows_it_and_exits_2(capsys, broken_trace):
    """The tables and the failing check are printed as always, and the exit code (2, with one
    line on stderr naming the check) tells a script that the numbers cannot be trusted."""
    for extra in ([], ["--json"]):
        code, out, err = run_cli(capsys, "analyze", str(broken_trace), *extra)
        assert code == 2 and "aten::mm" in out
        assert err.startswith(f"opprof: error: {broken_trace}: the measurement cannot be trusted (durations: ")
        assert err.count("\n") == 1


def test_compare_refuses_an_untrusted_trace(capsys, small_trace, broken_trace):
    """A verdict against a broken trace would be meaningless (it read 'B not worse'): exit 2,
    one line naming the trace, the check and how to see it."""
    code, out, err = run_cli(capsys, "compare", str(small_trace), str(broken_trace))
    assert code == 2 and out == ""
    assert err.startswith(f"opprof: error: {broken_trace}: the measurement cannot be trusted (durations: ")
    assert err.rstrip().endswith(f"compare traces whose checks pass (opprof analyze {broken_trace} shows them)")


def test_a_trace_whose_op_outlasts_its_parent_is_untrusted_in_analyze_and_compare(capsys, tmp_path, small_trace):
    """One `dur` edited to outlast its parent (aten::addmm inside aten::linear, still finite and
    inside the step) read 0 ms for the ops it swallowed, every check `ok`, and `compare` said
    `B not slower`. Now both commands exit 2 naming the op and the check."""
    events = []
    for i in range(3):
        base = i * 1000
        addmm_us = 600 if i == 1 else 200
        events += [step(i + 1, base, 1000), op("aten::linear", base + 10, 300), op("aten::addmm", base + 20, addmm_us)]
        events += [op("aten::relu", base + 400, 50)]
    edited = tmp_path / "edited.json"
    write_trace(edited, events, {})
    code, _, err = run_cli(capsys, "analyze", str(edited))
    assert code == 2 and err.count("\n") == 1
    assert (
        "(nesting: 1 op runs past the end of the op it started in (aten::addmm in step 2 ends 0.310 ms after aten::linear)"
        in err
    )
    code, out, err = run_cli(capsys, "compare", str(small_trace), str(edited))
    assert code == 2 and out == "" and "nesting: 1 op runs past" in err


def test_a_torch_trace_of_torchscript_forks_is_refused_with_the_way_to_measure_it(capsys, tmp_path):
    """A trace torch wrote of a model that calls torch.jit.fork: each forking `forward` ends on the
    pool thread after its caller began the next step's, so the trace reads as broken durations,
    and the refusal said `export the trace again`, which writes the same. It now names the forks
    and the way that reads where each op ended; a trace without forks is told nothing of them."""
    events = []
    for i in range(3):
        base = i * 100
        events += [step(i + 1, base, 100), op("forward", base + 5, 140)]  # ends in the next step's forward
        events += [op("<forked function>", base + 10, 40, tid=2), op("aten::mm", base + 12, 30, tid=2)]
    trace = tmp_path / "forked.json"
    write_trace(trace, events, {})
    code, _, err = run_cli(capsys, "analyze", str(trace))
    assert code == 2 and err.count("\n") == 1 and "(nesting: 2 ops run past the end of the ops they started in" in err
    assert err.endswith(
        "; the trace ran TorchScript forks (<forked function>), whose forking functions torch ends on the thread "
        "that finished their work, after their caller went on, and a trace torch wrote does not say which ops "
        "those are: measure with opprof (pytest --opprof, or pytest_opprof.from_profiler(prof)), whose captures "
        "and traces say it\n"
    )
    code, _, err = run_cli(capsys, "compare", str(trace), str(trace))
    assert code == 2 and "a trace torch wrote does not say which ops those are" in err
    marked = tmp_path / "marked.json"  # as opprof writes it: each forward's end thread
    write_trace(marked, events, {}, end_threads={i: 2 for i, e in enumerate(events) if e.name == "forward"})
    assert run_cli(capsys, "analyze", str(marked))[0] == 0
    unforked = tmp_path / "unforked.json"
    write_trace(unforked, [e._replace(name="task") if e.name == "<forked function>" else e for e in events], {})
    code, _, err = run_cli(capsys, "analyze", str(unforked))
    assert code == 2 and "nesting: 2 ops run past" in err and "TorchScript" not in err


def test_op_names_that_do_not_print_are_shown_by_their_escapes(capsys, tmp_path, small_trace):
    """A trace's op named `aten::mm<newline>FAKE LINE ok<ESC>[31m` printed a forged table row and
    coloured the terminal, in `analyze` and `compare`: names are read with such characters
    written as escapes, so each row stays one line and no ESC reaches the terminal."""
    events = []
    for i in range(3):
        base = i * 1000
        events += [step(i + 1, base, 1000), op("aten::linear", base + 10, 300), op("aten::relu", base + 400, 50)]
        events += [op("aten::mm\nFAKE LINE ok\x1b[31mRED", base + 500, 20)]
        events += [op("aten::bmm\ud800", base + 600, 20)]  # a lone surrogate: no UTF-8 output takes it
    forged = tmp_path / "forged.json"
    write_trace(forged, events, {})
    for argv in (["analyze", str(forged)], ["compare", str(small_trace), str(forged)]):
        code, out, err = run_cli(capsys, *argv)
        assert "\x1b" not in out + err and "FAKE" not in "".join(line[:4] for line in out.splitlines())
        assert "aten::mm\\nFAKE LINE ok\\x1b[31mRED" in out, argv
        assert "aten::bmm\\ud800" in out and (out + err).encode()
    code, out, _ = run_cli(capsys, "analyze", str(forged), "--json", "--op", "aten::mm*")
    assert code == 0 and [o["name"] for o in json.loads(out)["ops"]] == ["aten::mm\\nFAKE LINE ok\\x1b[31mRED"]
    # the name as the code wrote it, a real newline and ESC, finds it too (a trial's real tab did not)
    for argv in (["analyze", str(forged)], ["compare", str(forged), str(forged)]):
        code, out, _ = run_cli(capsys, *argv, "--json", "--op", "aten::mm\nFAKE LINE ok\x1b[31mRED")
        data = json.loads(out)
        names = [o["name"] for o in data["ops"]] if "ops" in data else [o["op"] for o in data["tests"][0]["ops"]]
        assert code == 0 and names == ["aten::mm\\nFAKE LINE ok\\x1b[31mRED"], argv


def test_a_nameless_op_shows_as_empty_quotes_in_the_tables(capsys, tmp_path):
    """A hand-made trace's op named "" printed a row with a blank name cell; the tables show it
    as `""`, the JSON keeps its name as it is."""
    events = []
    for i in range(2):
        base = i * 1000
        events += [step(i + 1, base, 1000), op("", base + 10, 300), op("aten::mm", base + 400, 50)]
    blank = tmp_path / "blank.json"
    write_trace(blank, events, {})
    code, out, _ = run_cli(capsys, "analyze", str(blank))
    assert code == 0 and any(line.startswith('""  ') for line in out.splitlines()), out
    code, out, _ = run_cli(capsys, "analyze", str(blank), "--json")
    assert sorted(o["name"] for o in json.loads(out)["ops"]) == ["", "aten::mm"]


def test_a_path_with_a_newline_or_an_esc_stays_on_the_error_line(capsys, tmp_path):
    """A file named `evil<newline><ESC>[31mname.json` broke the one-line error in two and
    coloured the terminal: the error line writes such characters as their escapes."""
    evil = tmp_path / "evil\n\x1b[31mname.json"
    evil.write_text("")
    for command in ("analyze", "show"):
        code, out, err = run_cli(capsys, command, str(evil))
        assert code == 2 and out == "" and err.count("\n") == 1 and "\x1b" not in err
        assert "evil\\n\\x1b[31mname.json: " in err


def test_a_trace_without_steps_gives_host_bound_time_as_a_share_of_its_host_span(capsys, tmp_path):
    """No ProfilerStep markers: one implicit step, the span of the host events; the timeline line
    says so instead of "of the steps" (a trial read `100% of the steps` on a trace with none)."""
    events = [op("aten::mm", 0, 100), launch(10, corr=1), kernel("gemm", 20, 10, corr=1), op("aten::add", 200, 100)]
    path = tmp_path / "nosteps.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path))
    assert "idle while the host ran ops 63% of the host span (no step markers)" in out  # 190 of 300 us
    assert "of the steps" not in out


def test_a_kernel_of_0_us_is_a_device_event_in_the_header(capsys, tmp_path):
    """The header said `no device events` while the kernel table listed a kernel of 0 us and the
    events check counted it."""
    path = tmp_path / "z.json"
    write_trace(path, [step(1, 0, 10), op("aten::mm", 1, 5), launch(2, corr=1), kernel("k", 3, 0, corr=1)], {})
    code, out, _ = run_cli(capsys, "analyze", str(path))
    assert code == 0 and "no device events" not in out
    assert out.startswith(f"{path}: 1 step, 0.010 ms wall (0.005 ms outside the ops), 1 op, device 0.000 ms (busy ")
    write_trace(path, [step(1, 0, 10), op("aten::mm", 1, 5)], {})
    assert ", no device events\n" in run_cli(capsys, "analyze", str(path))[1]


def test_the_header_gives_the_wall_per_step_as_a_test_line_does(capsys, tmp_path):
    """A newcomer read `opprof analyze`'s summed wall (`3 steps, 0.070 ms wall`) against the test
    line's `0.020 ms/step wall`: the median step first, the sum beside it, then the time outside the ops
    (a step wall verdict's figure: a diagnosis trial found it in --json only); device time is summed."""
    path = tmp_path / "steps.json"
    steps = [step(1, 0, 20), step(2, 20, 20), step(3, 40, 30), op("aten::add", 41, 5), op("aten::add", 21, 5)]
    write_trace(path, [*steps, op("aten::mm", 1, 5), launch(2, corr=1), kernel("k", 3, 4, corr=1)], {})
    out = run_cli(capsys, "analyze", str(path))[1]
    assert out.startswith(
        f"{path}: 3 steps, 0.020 ms/step wall (median; 0.070 ms in all; 0.015 ms/step outside the ops), 2 ops, "
        "device 0.004 ms in all ("
    )


def test_queue_quantiles_between_two_nanoseconds_print_without_float_noise(capsys, tmp_path):
    """A p90 interpolated between ns values (18659.1 ns on the MI250 trace) prints 0.0186591, not
    0.018659099999999998."""
    events = [step(1, 0, 1000)]
    for i, delay_ns in enumerate([10_000, 18_000, 18_659, 18_660, 18_661, 18_662, 18_663, 18_664, 18_665, 18_666]):
        events += [launch(10 * i, corr=i + 1), kernel("k", 10 * i + delay_ns / 1000, 1, corr=i + 1)]
    path = tmp_path / "q.json"
    write_trace(path, events, {})
    _, out, _ = run_cli(capsys, "analyze", str(path), "--json")
    queue = json.loads(out)["timeline"]["queue_ms"]
    assert queue["p90"] != round(queue["p90"], 6)  # between two ns: 10 steps interpolate a tenth
    assert all(len(repr(v).split(".")[1]) <= 9 for v in queue.values())  # to the ps, no 0.0186...9998


def test_mv_takes_a_node_id_typed_with_windows_separators_or_a_leading_dot(tmp_path, capsys, monkeypatch):
    """`opprof mv FILE .\\tests\\test_b.py::test_new` (PowerShell's tab completion) put the file in
    the right place but wrote the id as typed, which the next run refused as another test's (a
    cross-platform review): the file part is written as pytest names it, `tests/test_b.py`."""
    from pytest_opprof.analysis import analyze
    from pytest_opprof.baseline import baseline_from_profile, baseline_path, write_baseline

    monkeypatch.chdir(tmp_path)
    old = baseline_path(tmp_path / ".opprof", "cpu-x86_64", "tests/test_a.py::test_old")
    profile = analyze(stepped(5, 1000, lambda i, base: [op("aten::mm", base + 1, 100)]))
    write_baseline(old, baseline_from_profile(profile, "tests/test_a.py::test_old", "cpu-x86_64", {}))
    given = ".opprof/cpu-x86_64/tests/test_a.py/test_old.json"
    code, out, err = run_cli(capsys, "mv", given, ".\\tests\\test_b.py::test_new[a\\b]")
    assert (code, err) == (0, "")
    new = tmp_path / ".opprof/cpu-x86_64/tests/test_b.py"
    (moved,) = new.iterdir()
    assert json.loads(moved.read_text())["nodeid"] == "tests/test_b.py::test_new[a\\b]"  # the id's own `\\` stays
    code, out, err = run_cli(capsys, "mv", str(moved), "./tests/test_c.py::test_new")
    assert (code, err) == (0, "")
    assert json.loads(next((tmp_path / ".opprof/cpu-x86_64/tests/test_c.py").iterdir()).read_text())["nodeid"] == (
        "tests/test_c.py::test_new"
    )


def test_mv_of_a_folder_a_device_or_a_gone_file_beside_a_broken_one_names_the_file_given(tmp_path, capsys, monkeypatch):
    """A trial's `opprof mv / NODEID` was told to rename `/`, `/dev/null` to delete it; a gone FILE
    whose NODEID's baseline is broken read as that file's error alone. Each says what FILE is and
    asks for the baseline file, exit 2, nothing touched."""
    from pytest_opprof.baseline import baseline_path
    from pytest_opprof.errors import mv_not_a_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".opprof").mkdir()
    for given, what in (("/", "a folder"), (".opprof", "a folder"), ("/dev/null", "a device or a pipe")):
        code, out, err = run_cli(capsys, "mv", given, "tests/test_a.py::test_x")
        assert (code, out, err) == (2, "", f"opprof: error: {mv_not_a_file(given, what)}\n")
    broken = baseline_path(tmp_path / ".opprof", "cpu-x86_64", "tests/test_a.py::test_new")
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    gone = ".opprof/cpu-x86_64/tests/test_a.py/test_old.json"
    code, _, err = run_cli(capsys, "mv", gone, "tests/test_a.py::test_new")
    assert code == 2 and err.startswith(f"opprof: error: {gone}: no such file")
    assert broken.read_text() == "{not json"


def test_mv_keeps_a_renamed_tests_baseline_in_one_command(tmp_path, capsys, monkeypatch):
    """`opprof mv FILE NODEID`: one line saying what moved and the Git step that keeps both sides
    (a review: `commit the change` left the new file untracked under `git commit -a`), exit 0;
    run again, on either file, nothing to do; bad input exits 2 with one line on stderr, the file as it was."""
    from pytest_opprof.analysis import analyze
    from pytest_opprof.baseline import baseline_from_profile, baseline_path, write_baseline
    from pytest_opprof.errors import moved_before_line, moved_line, mv_not_a_node_id, unmoved_line

    monkeypatch.chdir(tmp_path)
    old = baseline_path(tmp_path / ".opprof", "cpu-x86_64", "tests/test_a.py::test_old")
    profile = analyze(stepped(5, 1000, lambda i, base: [op("aten::mm", base + 1, 100)]))
    write_baseline(old, baseline_from_profile(profile, "tests/test_a.py::test_old", "cpu-x86_64", {}))
    given, new = ".opprof/cpu-x86_64/tests/test_a.py/test_old.json", ".opprof/cpu-x86_64/tests/test_b.py/test_new.json"
    code, out, err = run_cli(capsys, "mv", given, "tests/test_b.py::test_new")
    assert (code, err) == (0, "")
    assert out == moved_line(given, new, "tests/test_b.py::test_new", "tests/test_a.py::test_old") + "\n"
    assert out.endswith(f"; commit it: git add -A -- {given} {new}\n")
    assert json.loads((tmp_path / new).read_text())["nodeid"] == "tests/test_b.py::test_new"
    code, out, _ = run_cli(capsys, "mv", new, "tests/test_b.py::test_new")
    assert (code, out) == (0, unmoved_line(new, "tests/test_b.py::test_new") + "\n")
    code, out, err = run_cli(capsys, "mv", given, "tests/test_b.py::test_new")  # the same command again
    assert (code, out, err) == (0, moved_before_line(given, new, "tests/test_b.py::test_new") + "\n", "")
    assert out.startswith(f"opprof mv: {given}: no such file, and {new} is the baseline of ")
    code, out, err = run_cli(capsys, "mv", given, "tests/test_b.py::test_other")  # gone, and no such move made
    assert (code, out) == (2, "")
    assert err.startswith(f"opprof: error: {given}: no such file")
    code, out, _ = run_cli(capsys, "mv", str(tmp_path / new), "tests/test_c.py::test_new")  # absolute: both paths so
    assert (
        out
        == moved_line(
            tmp_path / new,
            tmp_path / ".opprof/cpu-x86_64/tests/test_c.py/test_new.json",
            "tests/test_c.py::test_new",
            "tests/test_b.py::test_new",
        )
        + "\n"
    )
    new = ".opprof/cpu-x86_64/tests/test_c.py/test_new.json"
    code, out, err = run_cli(capsys, "mv", new, "test_new")
    assert (code, out) == (2, "")
    assert (
        err
        == f"opprof: error: {mv_not_a_node_id('test_new', 'not a test' + chr(39) + 's node id (a file, `::`, then the test)')}\n"
    )
    code, _, err = run_cli(capsys, "mv", new)
    assert code == 2 and err.startswith("opprof: error: ") and "NODEID" in err


def host_ahead(kernel_start_us: float = 1040) -> list:
    """torch's own profiler example on a GPU-bound model, `for ...: model(x); prof.step()`: the
    host launches each step's 4 kernels in 0.3 ms and goes on; the GPU runs them for 4 ms."""
    events, gpu = [], kernel_start_us
    for i in range(3):
        t = 1000 + i * 300
        events += [step(i + 1, t, 300), op("aten::addmm", t + 10, 250)]
        for k in range(4):
            corr = 100 + 10 * i + k
            events += [launch(t + 20 + 50 * k, corr=corr), kernel("gemm", gpu, 1000, corr=corr)]
            gpu += 1000
    return events


def test_a_trace_of_a_loop_whose_host_runs_ahead_of_the_gpu_is_read_not_refused(capsys, tmp_path):
    """A user's loop need not wait for the GPU at each step's end: its device work is held to the
    time from its step's start to that work's end, not to the host's 0.3 ms (a review's trace
    erred `wall_time`, `units or attribution are broken`, exit 2). opprof's own steps wait for the
    device, and there the host's step is still the bound."""
    write_trace(tmp_path / "ahead.json", host_ahead(), {})
    code, out, err = run_cli(capsys, "analyze", str(tmp_path / "ahead.json"), "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 0 and checks["wall_time"]["status"] == "ok", (err, checks["wall_time"])
    assert "the device ran the work of 3 of 3 steps past their ends" in checks["wall_time"]["message"]
    assert json.loads(out)["device_busy_ms"] == 12.0
    from pytest_opprof.analysis import analyze

    own = {c.name: c for c in analyze(host_ahead()).checks}  # as a capture of opprof's reads its steps
    assert (
        own["wall_time"].status == "error"
        and "device 0: device busy 4.000 ms in a 0.300 ms step" in own["wall_time"].message
    )
    # a user's trace whose kernel ran before the step that launched it is still broken
    write_trace(tmp_path / "broken.json", host_ahead(kernel_start_us=-5000), {})
    code, out, err = run_cli(capsys, "analyze", str(tmp_path / "broken.json"))
    assert code == 2 and "wall_time" in err + out


def _device_steps():
    """test_timeline's two device steps, with a range around their first 60 us, a CUDA graph
    replay and a CPU-only op in a CPU-only range in each."""
    from test_timeline import two_steps

    events = two_steps()
    for n, t0 in ((1, 0), (2, 100)):
        events += [
            annotation("encoder", t0 + 1, 60),
            op("CUDAGraph.replay", t0 + 61, 5),
            launch(t0 + 62, corr=100 + n, name="cudaGraphLaunch", dur_us=3),
            kernel("k_graph", t0 + 86, 3, corr=100 + n),
            annotation("postprocess", t0 + 69, 4),
            op("aten::view", t0 + 70, 2),
        ]
    return events


def test_analyze_prints_every_table_as_it_reads(capsys, tmp_path):
    """The whole text of `opprof analyze` of a device trace, table by table (a mutation trial
    changed a header, the `-` of a CPU op's device time, the blank line between two tables, the
    timeline line, and no test noticed); with `--op`, the chosen runtime calls' table too."""
    path = tmp_path / "t.json"
    write_trace(path, _device_steps(), {})
    code, out, _ = run_cli(capsys, "analyze", str(path))
    assert code == 0
    assert (
        out
        == f"""{path}: 2 steps, 0.100 ms/step wall (median; 0.200 ms in all; 0.041 ms/step outside the ops), 6 ops, device 0.186 ms in all (busy 0.140 ms, not attributed to an op 0.000 ms)
timeline: device busy 80% of 0.176 ms; idle while the host ran ops 30% of the steps; compute/memory overlap 0.026 ms; compute/comm overlap 0.010 ms; queue median 0.022 ms; launch-bound: aten::add (kernel 0.0100 < launch 0.0200 ms)

op                calls/step    cpu ms/step    self cpu    device ms/step    of step
----------------  ------------  -------------  ----------  ----------------  ---------
aten::mm          1             0.010          0.010       0.040             40.0%
aten::copy_       1             0.008          0.008       0.030             30.0%
aten::add         1             0.025          0.025       0.010             10.0%
nccl:all_reduce   1             0.009          0.009       0.010             10.0%
CUDAGraph.replay  1             0.005          0.005       0.003             3.0%
aten::view        1             0.002          0.002       -                 2.0%

range (record_function)    calls/step    cpu ms/step    device ms/step    of step
-------------------------  ------------  -------------  ----------------  ---------
encoder                    1             0.060          0.090             90.0%
postprocess                1             0.004          -                 4.0%

kernel                launched by       calls    device ms
--------------------  ----------------  -------  -----------
gemm                  aten::mm          2        0.080
ncclKernel_AllReduce  nccl:all_reduce   2        0.020
vectorized_add        aten::add         2        0.020
k_graph               CUDAGraph.replay  2        0.006

graph replay     launched in       replays/step    kernels/step    device ms/step
---------------  ----------------  --------------  --------------  ----------------
cudaGraphLaunch  CUDAGraph.replay  1               1               0.003

memory op                         calls    device ms    bytes
--------------------------------  -------  -----------  -------
Memcpy HtoD (Pageable -> Device)  2        0.060        8192

check    name           message
-------  -------------  ------------------------------------------------
ok       events         12 CPU ops, 10 device events
ok       device_events  10 device events for 10 launches
ok       step_events    6 CPU ops in each of 2 steps
ok       wall_time      CPU and device time within each step's wall time
"""
    )
    code, out, _ = run_cli(capsys, "analyze", str(path), "--op", "cudaLaunch*", "--op", "aten::mm")
    assert code == 0
    tables = out.split("\n\n")
    assert (
        tables[0]
        .splitlines()[0]
        .endswith("6 ops (1 chosen), device 0.186 ms in all (busy 0.140 ms, not attributed to an op 0.000 ms)")
    )
    assert tables[1:4] == [
        "op        calls/step    cpu ms/step    self cpu    device ms/step    of step\n"
        "--------  ------------  -------------  ----------  ----------------  ---------\n"
        "aten::mm  1             0.010          0.010       0.040             40.0%",
        "kernel    launched by    calls    device ms\n"
        "--------  -------------  -------  -----------\n"
        "gemm      aten::mm       2        0.080",
        "runtime call      calls    cpu ms\n----------------  -------  --------\ncudaLaunchKernel  6        0.048",
    ]
