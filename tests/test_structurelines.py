"""The one line for tests whose structure changed alike (structurelines): which tests share it,
what it says, and the command that records them."""

from __future__ import annotations

from pytest_opprof.analysis import Check
from pytest_opprof.decide import BaselineResult
from pytest_opprof.results import TestRecord
from pytest_opprof.runlines import listed_ids
from pytest_opprof.structurelines import record_ids, short_text
from pytest_opprof.summarylines import format_problems
from pytest_opprof.units import id_order
from pytest_opprof.verdicts import Change, Verdict


def _changes(shape: str, extra: bool = False) -> tuple[Change, ...]:
    """The changes compare makes of an added `* 2 + 1`: inputs' shapes in each test's words."""
    changes = [
        Change(
            "aten::mul", 0.0, 1.0, 0.01, f"+ aten::mul (1/step, called from Python; inputs float[{shape}], long int[])"
        ),
        Change("aten::copy_", 1.0, 3.0, 0.004, "aten::copy_ 1 -> 3/step (2/step inside a, 1/step outside every range)"),
        Change("aten::bmm", 2.0, 0.0, 0.002, "- aten::bmm (was 2/step)"),
    ]
    if extra:
        changes.append(Change("aten::add", 0.0, 1.0, 0.001, "+ aten::add (1/step, called from Python)"))
    return tuple(changes)


def _failed(nodeid: str, changes: tuple[Change, ...], status: str = "compared", fails=None) -> TestRecord:
    path = f".opprof/cpu/{nodeid.replace('::', '/')}.json"
    texts = ", ".join(c.text for c in changes)
    verdict = Verdict("structure", "changed", f"structure changed: {texts} [{path}]", changes=changes)
    baseline = BaselineResult(path, status, verdicts=(verdict,), **({"fails": fails} if fails else {}))
    return TestRecord(
        nodeid, "failed", None, (Check("events", "ok", "3 CPU ops"),), None, (), None, 0.01, baseline, nodeid
    )  # fmt: skip


def test_tests_whose_structure_changed_alike_share_one_line_and_one_command():
    """Three tests or more whose structure changed by the same ops and counts (their inputs' shapes
    and the order their times listed them in differ) share one line: the changes without one test's
    details, and one command; their own structure and record lines are left out (-v keeps them, and
    the line: a CI log of -v was back to one command a test, a trial's)."""
    ids = [f"t.py::test_m[{n}]" for n in (1, 2, 4)]
    records = [_failed(nodeid, _changes(f"{n},16")) for n, nodeid in zip((1, 2, 4), ids, strict=True)]
    records[1] = _failed(ids[1], tuple(reversed(_changes("2,16"))))
    lines = format_problems(records).splitlines()
    assert lines == [
        "opprof: structure changed alike in 3 tests: + aten::mul (1/step), aten::copy_ 1 -> 3/step, - aten::bmm "
        "(was 2/step); each test's line says where each op ran and its inputs (-v); if the change is intended, "
        "record them: pytest --opprof-update-baseline 't.py::test_m[1]' 't.py::test_m[2]' 't.py::test_m[4]' "
        "(and commit the files)"
    ]
    every = format_problems(records, verbose=True).splitlines()  # each test's lines, and the one command
    assert sum("inputs float[" in line for line in every) == 3 and sum("record it:" in line for line in every) == 3
    assert every[-1] == lines[0]


def test_tests_that_changed_otherwise_keep_their_own_lines():
    """Another change (an op more), two tests alike, a structure change that does not fail the test
    (--opprof-fail-on), or a recording run's: each keeps its own lines."""
    alike = [_failed(f"t.py::a{i}", _changes("1")) for i in range(3)]
    other = _failed("t.py::b", _changes("1", extra=True))
    lines = format_problems([*alike, other]).splitlines()
    assert lines[0].startswith("t.py::b: structure changed: + aten::mul (1/step, called from Python; inputs")
    assert lines[1].startswith("t.py::b: if the change is intended, record it:")
    assert lines[2].startswith("opprof: structure changed alike in 3 tests:") and len(lines) == 3
    for records in (alike[:2], [_failed(f"t.py::a{i}", _changes("1"), fails=("time",)) for i in range(3)]):
        assert "alike" not in format_problems(records)
    written = [_failed(f"t.py::a{i}", _changes("1"), status="changed") for i in range(3)]
    assert "alike" not in format_problems(written, recording=True)


def test_the_command_names_a_function_or_file_for_all_its_cases_in_a_run_that_picked_none():
    """A run that picked no tests records a parametrized function's every case by its id, a file's
    every test by its path; a case of the function outside the group keeps the ids; a run that
    picked some (-k: the cases left out would be recorded too) names each; every test measured is
    the bare command (whole_run_commands)."""
    cases = [f"t.py::test_m[{i}]" for i in range(3)]
    others = ["u.py::test_a", "u.py::TestC::test_b[x y]"]
    measured = [*cases, *others, "t.py::test_n", "v.py::test_z"]
    assert record_ids([*cases, *others], measured, picked=False) == "t.py::test_m u.py"
    assert record_ids([*cases, *others, "t.py::test_n"], measured, picked=False) == "t.py u.py"
    assert (
        record_ids([*cases[:2], others[0]], measured, picked=False)
        == "'t.py::test_m[0]' 't.py::test_m[1]' u.py::test_a"
    )
    assert record_ids([*cases, *others], measured, picked=True) == " ".join(
        ["'t.py::test_m[0]'", "'t.py::test_m[1]'", "'t.py::test_m[2]'", "'u.py::TestC::test_b[x y]'", "u.py::test_a"]
    )
    records = [_failed(nodeid, _changes("1")) for nodeid in cases]
    assert format_problems(records, picked=False).endswith(
        "record them: pytest --opprof-update-baseline (and commit the files)"
    )
    many = [*records, _failed("t.py::test_n", _changes("1", extra=True))]
    assert "record them: pytest --opprof-update-baseline t.py::test_m (and" in format_problems(many, picked=False)


def test_a_changes_short_words_leave_out_what_one_test_alone_says():
    """The shared line's words for a change: its op and calls per step, not its inputs or places
    (a label with ` (` in its name kept whole)."""
    assert [short_text(c) for c in _changes("1,16", extra=True)] == [
        "+ aten::mul (1/step)", "aten::copy_ 1 -> 3/step", "- aten::bmm (was 2/step)", "+ aten::add (1/step)",
    ]  # fmt: skip
    sometimes = Change(
        "aten::mm", 0.0, 0.0, 0.85, "+ aten::mm (in 2 of 10 steps, up to 0.850 ms a step, called from Python)"
    )
    renumbered = Change(
        "cpp_fused_0", 1.0, 1.0, 0.1, "cpp_fused_1 -> cpp_fused_0 (1/step: the same kernel, renumbered)", "cpp_fused_1"
    )
    label = Change("block (x)", 0.0, 2.0, 0.1, "+ block (x) (2/step, called from Python)")
    assert [short_text(c) for c in (sometimes, renumbered, label)] == [
        "+ aten::mm (in some steps)", "cpp_fused_1 -> cpp_fused_0 (renumbered)", "+ block (x) (2/step)",
    ]  # fmt: skip


def test_the_same_ops_at_other_calls_per_step_do_not_share_a_line():
    """A depth parameter adds an op once per layer: `+ aten::mul (1/step)`, `(2/step)`, `(4/step)`
    are three changes, each test's own (a review's: they read as one line of the first's counts)."""
    records = []
    for i, calls in enumerate((1.0, 2.0, 4.0)):
        change = Change("aten::mul", 0.0, calls, 0.01, f"+ aten::mul ({calls:g}/step, called from Python)")
        records.append(_failed(f"t.py::test_d[{i}]", (change,)))
    sometimes = Change("aten::mul", 0.0, 0.0, 0.01, "+ aten::mul (in 2 of 10 steps, up to 0.010 ms a step)")
    records.append(_failed("t.py::test_e", (sometimes,)))
    assert "alike" not in format_problems(records)


def test_a_worker_whose_record_changed_otherwise_keeps_its_own_lines():
    """Under --dist each a test runs on every worker: a group stands for the records whose change
    it names, and another worker's record of the same test that changed otherwise keeps its lines."""
    alike = [_failed(f"t.py::a{i}", _changes("1")) for i in range(3)]
    other = TestRecord(**{**_failed("t.py::a0", _changes("1", extra=True)).__dict__, "worker": "gw1"})
    lines = format_problems([*alike, other]).splitlines()
    assert any(line.startswith("t.py::a0: structure changed: ") and "aten::add" in line for line in lines)
    assert any(line.startswith("opprof: structure changed alike in 3 tests:") for line in lines)


def test_repeats_of_one_test_are_one_test():
    """pytest-repeat's `--count 3` runs one test three times, its baseline the test's: no line
    for `3 tests`."""
    from dataclasses import replace

    records = [_failed(f"t.py::test_x[{i}-3]", _changes("1")) for i in (1, 2, 3)]
    records = [replace(r, baseline=replace(r.baseline, nodeid="t.py::test_x")) for r in records]
    assert "alike" not in format_problems(records)


def test_a_folder_named_with_brackets_is_no_parametrized_case():
    """`tests/[gpu]/a.py::t1` is no case of a function `tests/`: collapsing it there recorded a
    measured test outside the group (a review's)."""
    ids = ["tests/[gpu]/a.py::t1", "tests/[gpu]/a.py::t2", "tests/[gpu]/b.py::t3"]
    measured = [*ids, "tests/cpu/c.py::t4"]
    assert record_ids(ids, measured, picked=False) == "'tests/[gpu]/a.py' 'tests/[gpu]/b.py'"
    cases = ["t.py::test_p[a::b]", "t.py::test_p[c]"]
    assert record_ids(cases, [*cases, "t.py::test_q"], picked=False) == "t.py::test_p"


def test_commands_list_a_parametrized_tests_cases_in_their_numbers_order():
    """`[64]` before `[128]`, as a person lists the cases (string order put `[128]` first), in the
    structure line's command and in every other command that lists ids (listed_ids)."""
    cases = ["t.py::test_m[128-x]", "t.py::test_m[8-x]", "t.py::test_m[64-x]", "t.py::test_m[64-a]"]
    expected = "'t.py::test_m[8-x]' 't.py::test_m[64-a]' 't.py::test_m[64-x]' 't.py::test_m[128-x]'"
    assert record_ids(cases, [*cases, "t.py::test_n"], picked=True) == expected
    assert listed_ids(cases) == expected
    assert sorted(["test_b2", "test_a10", "test_a9", "test_a"], key=id_order) == [
        "test_a",
        "test_a9",
        "test_a10",
        "test_b2",
    ]
    assert listed_ids(["t[v01]", "t[v001]", "t[v1]"]) == listed_ids(
        ["t[v1]", "t[v01]", "t[v001]"]
    )  # whatever came first
    assert listed_ids(["t[v1]", "t[v01]", "t[v001]"]) == "'t[v001]' 't[v01]' 't[v1]'"
