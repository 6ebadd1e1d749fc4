"""Unit tests of option parsing: precedence is the plugin's, values and messages are here."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_opprof.errors import runnable_here
from pytest_opprof.settings import OPTIONS, Settings, SettingsError, parse_fail_on, parse_settings


def lookup_from(values: dict[str, tuple[object, str]]):
    return lambda option: values.get(option.field)


def test_defaults_when_nothing_is_set():
    """No value anywhere gives the documented defaults."""
    assert parse_settings(lookup_from({})) == Settings(
        enabled=False, top=10, json_path=None, trace_dir=None, trace="failed"
    )


@pytest.mark.parametrize(
    ("field", "raw", "parsed"),
    [
        ("enabled", True, True),
        ("enabled", "yes", True),
        ("enabled", "0", False),
        ("top", "3", 3),
        ("json_path", " out.json ", "out.json"),
        ("trace", "ALL", "all"),
        # the edges a mutation trial found unpinned: a zero tolerance, bare or not, is no fraction
        ("tolerance", "0%", 0.0),
        ("tolerance", "0", 0.0),
        ("tolerance", 0, 0.0),
        ("tolerance", "9999%", 99.99),
        ("min_delta_ms", "0.5", 0.5),
        ("min_delta_ms", "0", 0.0),
        ("fail_on", "none", frozenset()),
        ("update_baseline", "1", "changed"),
        ("update_baseline", "yes", "changed"),
        ("update_baseline", "true", "changed"),
        ("update_baseline", "all", "all"),
        ("update_baseline", "no", None),
    ],
)
def test_values_parse(field, raw, parsed):
    """Each option parses its text form."""
    values = {field: (raw, "pytest.ini"), "trace_dir": ("traces", "pytest.ini")}
    assert getattr(parse_settings(lookup_from(values)), field) == parsed


def test_paths_expand_home_and_variables_as_junitxml_does(monkeypatch, tmp_path):
    """A report, trace or baseline path expands `~` and `$VAR` as pytest's --junitxml does (a
    trial's ini `opprof_json = $ARTS/opprof.json` made a folder named `$ARTS`); an unset
    variable stays as written, as there."""
    import os

    monkeypatch.setenv("ARTS", str(tmp_path / "arts"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPPROF_UNSET_VAR", raising=False)
    values = {
        "json_path": ("$ARTS/opprof.json", "pytest.ini"),
        "csv_path": ("${ARTS}/ops.csv", "pytest.ini"),
        "html_path": ("$OPPROF_UNSET_VAR/r.html", "pytest.ini"),
        "trace_dir": ("~/traces", "command line"),
        "baseline_dir": ("~/baselines", "pytest.ini"),
    }
    settings = parse_settings(lookup_from(values))
    assert settings.json_path == str(tmp_path / "arts" / "opprof.json")
    assert settings.csv_path == str(tmp_path / "arts" / "ops.csv")
    assert settings.html_path == "$OPPROF_UNSET_VAR/r.html"
    assert settings.trace_dir == str(tmp_path / "home" / "traces")
    assert settings.baseline_dir == os.path.join(str(tmp_path / "home"), "baselines")


def test_bad_value_names_flag_value_and_source():
    """A bad value raises one line naming the flag, the value, what was expected and the source."""
    with pytest.raises(SettingsError) as info:
        parse_settings(lookup_from({"top": ("fast", "pytest.ini")}))
    assert str(info.value) == "--opprof-top: 'fast' is not a whole number >= 1 (from pytest.ini)"


def test_every_option_has_flag_and_ini_twin():
    """Flags are --opprof-*, ini keys opprof_*, spelled alike."""
    for option in OPTIONS:
        assert option.flag.startswith("--opprof")
        assert option.ini == option.flag.lstrip("-").replace("-", "_")


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("x")
    return path


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"tolerance": ("0.2", "tox.ini")},
            "--opprof-tolerance: '0.2' is not a percentage like 20%: a bare 0.2 is ambiguous; write 20% or 0.2% (from tox.ini)",
        ),
        ({"tolerance": (0.5, "marker")}, 'a bare 0.5 is ambiguous; write "50%" or "0.5%"'),
        ({"tolerance": ("1", "command line")}, "a bare 1 is ambiguous; write 100% or 1%"),
        (
            {"trace": ("all", "pytest.ini")},
            "--opprof-trace=all: no --opprof-trace-dir to write the traces to (from pytest.ini); add --opprof-trace-dir DIR",
        ),
        ({"json_path": ("{dir}", "command line")}, "is not a file path: it names a folder (from command line)"),
        (
            {"json_path": ("{file}/r.json", "command line")},
            "is not a file path: {file} on its way is a file, not a folder",
        ),
        ({"trace_dir": ("{file}", "command line")}, "is not a folder: {file} is a file"),
    ],
)
def test_bad_output_paths_and_ambiguous_numbers_are_refused_at_start(tmp_path, a_file, values, message):
    """Values that would be 100x off, or outputs that cannot be written, fail when pytest starts
    with one line, before any test runs."""
    filled = {
        k: (str(v).format(dir=tmp_path, file=a_file) if isinstance(v, str) else v, src)
        for k, (v, src) in values.items()
    }
    with pytest.raises(SettingsError) as info:
        parse_settings(lookup_from(filled))
    assert message.format(file=a_file) in str(info.value)


@pytest.mark.parametrize("value", [None, 5, ["aten::mm", 3]])
def test_marker_ignore_ops_must_be_texts(value):
    """ignore_ops=None or 5 is refused, not read as the op named 'None'."""
    from pytest_opprof.settings import marker_problem

    problem = marker_problem("t.py::t", (), {"ignore_ops": value})
    assert problem.startswith(f"t.py::t: @pytest.mark.opprof(ignore_ops={value!r}): expected op globs")


def test_ignore_ops_that_name_no_glob_are_refused():
    """A trial's `--opprof-ignore-ops=", ,"` was accepted as ignoring nothing; an empty value (an
    unset variable) or an empty list still ignores none."""
    from pytest_opprof.settings import marker_problem

    with pytest.raises(SettingsError) as info:
        parse_settings(lookup_from({"ignore_ops": (", ,", "command line")}))
    assert str(info.value) == (
        "--opprof-ignore-ops: ', ,' is not op globs: a comma list such as 'aten::copy_, aten::*mm' (it names "
        "none; empty ignores none) (from command line)"
    )
    assert parse_settings(lookup_from({"ignore_ops": ("", "command line")})).ignore_ops == ()
    problem = marker_problem("t.py::t", (), {"ignore_ops": [" "]})
    assert problem and "expected op globs: a comma list such as" in problem
    assert marker_problem("t.py::t", (), {"ignore_ops": []}) is None


def test_ignore_ops_with_an_overload_name_is_refused():
    """`aten::add.Tensor` (torch's schema name) would ignore nothing: profiles name ops without
    their overload. Refused from the flag, the ini and the marker, naming the name to use."""
    from pytest_opprof.settings import marker_problem

    with pytest.raises(SettingsError) as info:
        parse_settings(lookup_from({"ignore_ops": ("aten::copy_, aten::add.Tensor", "command line")}))
    assert str(info.value) == (
        "--opprof-ignore-ops: 'aten::copy_, aten::add.Tensor' is not op globs without overloads, as the profiler "
        "names ops: 'aten::add', not 'aten::add.Tensor' (from command line)"
    )
    problem = marker_problem("t.py::t", (), {"ignore_ops": ["aten::mm.default"]})
    assert problem and problem.endswith(
        "expected op globs without overloads, as the profiler names ops: 'aten::mm', not 'aten::mm.default'"
    )
    problem = marker_problem("t.py::t", (), {"ignore_ops": ["torch.ops.aten.mm.default"]})  # a graph dump's name
    assert problem and problem.endswith(
        "expected op globs without overloads, as the profiler names ops: 'aten::mm', not 'torch.ops.aten.mm.default'"
    )


@pytest.mark.parametrize(
    ("values", "flags"),
    [
        ({"baseline_dir": ("perf", "command line")}, ("--opprof-baseline-dir=perf",)),
        ({"device_key": ("ci-a10", "-o opprof_device_key")}, ("--opprof-device-key=ci-a10",)),
        ({"baseline_dir": ("perf", "pytest.ini"), "device_key": ("k", "PYTEST_ADDOPTS")}, ()),
        (
            {"baseline_dir": ("~/b", "command line"), "device_key": ("k", "command line")},
            (f"--opprof-baseline-dir={Path.home() / 'b'}", "--opprof-device-key=k"),
        ),
    ],
)
def test_location_flags_are_the_ones_the_person_running_gave(values, flags):
    """Only a baseline location given on the command line or by -o is repeated in a suggested
    record command: an ini file or PYTEST_ADDOPTS is read again by the next run anyway."""
    assert parse_settings(lookup_from(values)).location_flags == flags


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "run pytest --opprof-update-baseline to record them",
            "run pytest --opprof-update-baseline -D 'a b' to record them",
        ),
        ("pytest --opprof-update-baseline=all t.py::x", "pytest --opprof-update-baseline=all -D 'a b' t.py::x"),
        (
            "x: pytest --opprof-update-baseline=changed; y: pytest --opprof-update-baseline",
            "x: pytest --opprof-update-baseline=changed -D 'a b'; y: pytest --opprof-update-baseline -D 'a b'",
        ),
        (
            "baseline kept: --opprof-update-baseline never writes",
            "baseline kept: --opprof-update-baseline never writes",
        ),
        ("pytest --opprof-update-baseline-x", "pytest --opprof-update-baseline-x"),
    ],
)
def test_with_location_adds_the_flags_after_each_record_command(text, expected):
    """Each `pytest --opprof-update-baseline[=MODE]` a message suggests gets the location flags
    (quoted), and nothing else in the text changes."""
    assert runnable_here(text, ("-D", "a b")) == expected
    assert runnable_here(text, ()) == text


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (",", "a comma list of structure, work, time, environment (or none)"),
        ("tme", "a comma list of structure, work, time, environment (or none); did you mean time?"),
        ("speed", "a comma list of structure, work, time, environment (or none)"),
        (
            "time,speed,wrk",
            "a comma list of structure, work, time, environment (or none); not a kind: 'speed', 'wrk' (did you mean work?)",
        ),
        # an audit's `structure work` was told `did you mean structure?`, which drops work
        ("structure work", "a comma list of structure, work, time, environment (or none); separate the kinds with "
         "commas: structure, work"),
        ("time, structure;work", "a comma list of structure, work, time, environment (or none); separate the kinds "
         "with commas: time, structure, work"),
        ("none,time", "a comma list of structure, work, time, environment (or none); none stands alone (no verdict "
         "fails a test): give none or kinds, not both"),
        # a review: the kinds beside the run-together ones were dropped from the fix
        ("structure,work time", "a comma list of structure, work, time, environment (or none); separate the kinds "
         "with commas: structure, work, time"),
        ("time none", "a comma list of structure, work, time, environment (or none); none stands alone (no verdict "
         "fails a test): give none or kinds, not both"),
        # a review: `None` (Python's spelling) got no hint where `TIME` got one; beside kinds, none's own rule
        ("None", "a comma list of structure, work, time, environment (or none); did you mean none?"),
        ("time,NONE", "a comma list of structure, work, time, environment (or none); none stands alone (no verdict "
         "fails a test): give none or kinds, not both"),
        ("time,nonee", "a comma list of structure, work, time, environment (or none); not a kind: 'nonee'"),
        ("structure work time environment", "a comma list of structure, work, time, environment (or none); "
         "separate the kinds with commas: structure, work, time, environment"),
    ],
)  # fmt: skip
def test_a_bad_fail_on_names_each_item_that_is_no_kind(value, hint):
    """Each item that is no verdict kind is named, with the kind it looks like: a trial's list of
    three had only its first slip named."""
    with pytest.raises(ValueError) as raised:
        parse_fail_on(value)
    assert str(raised.value) == hint


def test_an_ini_value_in_quotes_is_told_to_lose_them():
    """pytest.ini keeps quotes: an audit's `opprof_tolerance = "20%"` was refused as `'"20%"' is
    not a percentage like 20%`, which did not say why."""
    from pytest_opprof.settings import bad_option

    line = bad_option("--opprof-tolerance", '"20%"', "a percentage like 20%", "pytest.ini")
    assert line == (
        "--opprof-tolerance: '\"20%\"' is not a percentage like 20% (from pytest.ini); ini values take no quotes: "
        "write 20%"
    )
    assert "quotes" not in bad_option("--opprof-tolerance", "fast", "a percentage like 20%", "pytest.ini")


def test_a_fail_on_set_is_read_as_a_list():
    """A marker's `fail_on={"time"}`, a Python set, was read as its text and refused with
    `did you mean time?`."""
    assert parse_fail_on({"time", "work"}) == frozenset({"time", "work"})


def test_a_markers_keyword_replaces_the_runs_value_ignore_ops_included():
    """As docs/fixture.md says: a marker's ignore_ops is the test's whole list, not added to the run's."""
    from pytest_opprof.settings import rule_for

    run = Settings(ignore_ops=("aten::empty*",), tolerance=0.2)
    rule = rule_for(run, {"ignore_ops": ["aten::copy_"], "tolerance": "50%"})
    assert (rule.ignore_ops, rule.tolerance) == (("aten::copy_",), 0.5)
    assert rule_for(run).ignore_ops == ("aten::empty*",)


def test_a_test_id_inside_parentheses_is_given_as_typed_without_the_parenthesis():
    """A review: `(pytest --opprof-update-baseline=all t.py::x)` run from a subfolder became
    `'sub/t.py::x)'`, the parenthesis inside the id, which pytest could not find."""
    typed = lambda nodeid: "sub/" + nodeid  # noqa: E731
    text = (
        "record it (pytest --opprof-update-baseline=all t.py::x) or not; pytest --opprof-update-baseline t.py::y, then"
    )
    assert runnable_here(text, (), typed) == (
        "record it (pytest --opprof-update-baseline=all sub/t.py::x) or not; pytest --opprof-update-baseline "
        "sub/t.py::y, then"
    )


def test_a_record_command_at_a_lines_end_takes_no_id_from_the_next_line():
    """A newcomer trial: run from a subfolder, the summary's lines ran together and a command took
    the next line's `nodeid:` as a second id (`... test_a tests/t.py::test_b:`)."""
    typed = lambda nodeid: nodeid.removeprefix("tests/")  # noqa: E731
    text = "tests/t.py::a: record it, pytest --opprof-update-baseline=all tests/t.py::a\ntests/t.py::b: time ..."
    assert runnable_here(text, (), typed) == (
        "tests/t.py::a: record it, pytest --opprof-update-baseline=all t.py::a\ntests/t.py::b: time ..."
    )


def test_the_strict_error_gives_the_record_command_with_the_tests_id():
    """A newcomer trial's --opprof-strict error ended `... pytest --opprof-update-baseline=all with
    the test's id`, where the run's summary line named it."""
    from pytest_opprof.errors import strict_inconclusive
    from pytest_opprof.excuses import FASTER_FIX

    message = strict_inconclusive("t.py::test_x[a b]", "aten::mm: ...", FASTER_FIX)
    assert "pytest --opprof-update-baseline=all 't.py::test_x[a b]', or drop --opprof-strict" in message


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("tolerance", "10000%", "--opprof-tolerance: '10000%' is not a percentage like 20%, from 0% to under 10000%"),
        ("tolerance", "15000%", "--opprof-tolerance: '15000%' is not a percentage like 20%, from 0% to under 10000%"),
        ("tolerance", "abc", "--opprof-tolerance: 'abc' is not a percentage like 20% (from pytest.ini)"),
        ("update_baseline", "", "--opprof-update-baseline: '' is not 'changed' (the default), 'all', or true/false"),
        ("json_path", "out/", "--opprof-json: 'out/' is not a file path: it ends in /"),
        ("min_delta_ms", "-1", "--opprof-min-delta-ms: '-1' is not a finite number of milliseconds >= 0"),
    ],
)
def test_edge_values_are_refused_in_one_line(field, raw, message):
    """The bounds the documentation gives, held at their edges (a mutation trial's `<=` for `<` on
    10000% and a doubled bound passed every test), and a text that is no number refused in one line."""
    with pytest.raises(SettingsError) as raised:
        parse_settings(lookup_from({field: (raw, "pytest.ini")}))
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_the_quotes_hint_needs_quotes_at_both_ends():
    """The shortest quoted value gets the hint; a value opened but not closed does not (its fix,
    `write 20`, would be wrong)."""
    from pytest_opprof.settings import bad_option

    assert bad_option("--opprof-top", '"5"', "a whole number >= 1", "tox.ini").endswith(
        "; ini values take no quotes: write 5"
    )
    assert bad_option("--opprof-tolerance", '"20%', "a percentage like 20%", "tox.ini") == (
        "--opprof-tolerance: '\"20%' is not a percentage like 20% (from tox.ini)"
    )


def test_reports_may_share_a_pipe_and_an_unreadable_file_is_left_to_the_writing(tmp_path, monkeypatch):
    """Two reports into one FIFO are written into, never replaced: allowed, as /dev/null is. An
    existing file that cannot be read may be an earlier report: not refused here (its writing
    says why in one line), where a readable file that is no report is."""
    import os

    from pytest_opprof.settings import output_paths_problem

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    both = Settings(enabled=True, json_path=str(fifo), csv_path=str(fifo))
    assert output_paths_problem(both, tmp_path / ".opprof") is None
    notes = tmp_path / "notes.json"
    notes.write_text("my notes")
    alone = Settings(enabled=True, json_path=str(notes))
    assert "is an existing file, not an opprof report" in (output_paths_problem(alone, tmp_path / ".opprof") or "")
    opened = Path.open

    def unreadable(self, *args, **kwargs):
        if self == notes:
            raise PermissionError(13, "Permission denied")
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", unreadable)
    assert output_paths_problem(alone, tmp_path / ".opprof") is None
