"""Run settings: every option's parser, default and documentation, in one table. No pytest here.

The plugin reads each option through one helper (CLI > ini > default) and hands the raw value
with its source to `parse_settings`, which validates all of them when pytest starts.

Imported by every pytest run, --opprof or not (with the other modules tests/test_plugin.py lists
in INERT_MODULES): keep its imports to those modules and the standard library's light ones.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .device import valid_key
from .errors import SettingsError, closest_names, records_and_requires, shown_value
from .events import without_overload
from .files import is_stream, output_target, own_descriptor
from .layout import holds_json
from .opnames import profiler_spelling
from .rules import DEFAULT_FAIL_ON, DEFAULT_MIN_DELTA_MS, DEFAULT_TOLERANCE, KINDS, Rule

TRACE_MODES = ("failed", "all")
UPDATE_MODES = ("changed", "all")


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated run settings."""

    enabled: bool = False
    top: int = 10
    json_path: str | None = None
    csv_path: str | None = None
    html_path: str | None = None
    trace_dir: str | None = None
    trace: str = "failed"
    update_baseline: str | None = None  # None: compare only; "changed" or "all": write baselines
    baseline_dir: str | None = None  # None: .opprof at the rootdir
    tolerance: float = DEFAULT_TOLERANCE
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS
    fail_on: frozenset[str] = DEFAULT_FAIL_ON
    ignore_ops: tuple[str, ...] = ()
    device_key: str | None = None  # None: the pytest_opprof_device_key hook, else from the device facts
    strict: bool = False  # an inconclusive time check makes the test an error
    require_baseline: bool = False  # a measured test without a baseline file is an error
    update_from: str | None = None  # where update_baseline came from: command line, -o ..., the ini file
    # --opprof-baseline-dir / --opprof-device-key as given by the person running (the command line,
    # -o): a record command a message suggests repeats them, or it would record somewhere else
    location_flags: tuple[str, ...] = ()

    @property
    def measuring(self) -> bool:
        return self.enabled or self.update_baseline is not None


@dataclass
class RunState:
    """What one pytest run knows about opprof (lives in config.stash)."""

    settings: Settings
    device: dict[str, Any] = field(default_factory=dict)
    device_key: str | None = None
    key_source: str = "device"  # device | --opprof-device-key | pytest_opprof_device_key hook
    nvml: Any = None  # device.Nvml, opened only when torch uses an NVIDIA GPU
    gpu_handle: Any = None  # NVML handle of that GPU, for clock samples around captures
    carrying: int = 0  # collected tests that use the fixture or the marker
    records: list[Any] = field(default_factory=list)  # report.TestRecord, one per measured test
    spool: Any = None  # report.ReportSpool when --opprof-json/-csv/-html is on: the records' parts
    idle_outputs: tuple[str, ...] = ()  # output flags given on the command line without --opprof
    deselected: list[str] = field(default_factory=list)  # node ids -k, -m, --deselect, a sharder... left out
    left_out_measured: list[str] = field(default_factory=list)  # those of them carrying operator checks
    left_out: int = 0  # on the xdist controller, which collects nothing: how many a worker left out
    collected: list[Any] = field(default_factory=list)  # pytest.Item, each collected one, until the collection ends
    orphans: list[str] | None = None  # baseline files no collected test reads (None: not looked)
    # where there are orphans: the tests carrying operator checks, collected or left out, whose
    # baseline file is not there (its path as shown, the id it is named by): renamed from an orphan?
    without_baseline: list[tuple[str, str]] = field(default_factory=list)
    key_hooks: frozenset[str] = frozenset()  # the pytest_opprof_device_key implementations asked for the key
    trace_tag: str | None = None  # the xdist worker of `--dist each`, in its trace names (each runs every test)
    stopped_in: str | None = None  # the test a Ctrl-C or pytest.exit stopped the run in
    summarized: bool = False  # the terminal summary ran (and wrote the reports)
    ran_tests: bool = False  # the session reached its test loop (not --help, nor a start refused)
    exit_status: int | None = None  # the session's, as it finished
    profiler_left_by: str | None = None  # the test after which a torch profiler not opprof's still ran
    table_width: int | None = None  # the terminal's, where the summary goes to one (the controller's: xdist)


def bad_option(flag: str, value: object, expected: str, source: str) -> str:
    shown = repr(value) if isinstance(value, str) else shown_value(value)  # a path typed in full stays whole
    return f"{flag}: {shown} is not {expected} (from {source}){_quoted_hint(value)}"


def _quoted_hint(value: object) -> str:
    """An ini value written in quotes (`opprof_tolerance = "20%"`): pytest.ini keeps them (an
    audit's line did not say so)."""
    text = value.strip() if isinstance(value, str) else ""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return f"; ini values take no quotes: write {text[1:-1]}"
    return ""


def _parse_bool(text: object) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("true or false")


def _parse_positive_int(text: object) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("a whole number >= 1") from None
    if value < 1:
        raise ValueError("a whole number >= 1")
    return value


def _parse_path(text: object) -> str:
    """A path with `~` and `$VARIABLE`s expanded, as pytest's own --junitxml expands them (an unset
    variable stays as written, as there)."""
    value = str(text).strip()
    if not value:
        raise ValueError("a path")
    return os.path.expanduser(os.path.expandvars(value))


def _parse_file_path(text: object) -> str:
    """A file to write at the end of the run: not a folder, not below a file."""
    value = _parse_path(text)
    path = Path(value)
    if path.is_dir():
        raise ValueError("a file path: it names a folder")
    if value.endswith(("/", os.sep)):  # Path drops the slash: `out/` would become a file named out
        raise ValueError(f"a file path: it ends in {value[-1]}, as a folder does; name a file in that folder")
    if blocked(path.parent):
        raise ValueError(f"a file path: {blocked(path.parent)} on its way is a file, not a folder")
    return value


def _parse_dir_path(text: object) -> str:
    """A folder to write into: not a file, not below a file."""
    value = _parse_path(text)
    if blocked(Path(value)):
        raise ValueError(f"a folder: {blocked(Path(value))} is a file")
    return value


def blocked(path: Path) -> Path | None:
    """The first existing non-folder on the way to `path`, None when the way is clear."""
    for part in [*reversed(path.parents), path]:
        if part.exists() and not part.is_dir():
            return part
    return None


def parse_percentage(text: object) -> float:
    """'20%' (or 20) -> 0.20. A bare number above 0 up to 1 (0.2, 1) is refused: it reads as a
    fraction and would be taken as 0.2%, 100x off (a bare 1: 1% or 100%?)."""
    if isinstance(text, bool):
        raise ValueError("a percentage like 20%")
    raw = str(text).strip()
    try:
        value = float(raw[:-1] if raw.endswith("%") else raw)
    except ValueError:
        raise ValueError("a percentage like 20%") from None
    if not 0 <= value < 10_000 or value != value:  # a limit 100x the time or more judges nothing
        raise ValueError("a percentage like 20%, from 0% to under 10000%")
    if not raw.endswith("%") and 0 < value <= 1:
        # a number from TOML or a marker: the fix must be a string there ("20%"), as `20%` is no value
        quote = "" if isinstance(text, str) else '"'
        raise ValueError(
            f"a percentage like 20%: a bare {raw} is ambiguous; write {quote}{value * 100:g}%{quote} or {quote}{raw}%{quote}"
        )
    return value / 100


def parse_ms(text: object) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError("a finite number of milliseconds >= 0") from None
    if not value >= 0 or value == float("inf"):  # 1e400 reads as inf: no limit at all
        raise ValueError("a finite number of milliseconds >= 0")
    return value


def _split(text: object) -> list[str]:
    if isinstance(text, (set, frozenset)):  # a marker's fail_on={"time"}: an audit was told `did you mean time?`
        text = sorted(text, key=str)
    items = text if isinstance(text, (list, tuple)) else str(text).replace("\n", ",").split(",")
    return [str(i).strip() for i in items if str(i).strip()]


def parse_fail_on(text: object) -> frozenset[str]:
    items = _split(text)
    if items == ["none"]:
        return frozenset()
    bad = [i for i in items if i not in KINDS]
    if bad or not items:
        raise ValueError(f"a comma list of {', '.join(KINDS)} (or none){_not_kinds(items, bad)}")
    return frozenset(items)


NONE_ALONE = "none stands alone (no verdict fails a test): give none or kinds, not both"


def _not_kinds(items: list[str], bad: list[str]) -> str:
    """Each item of a fail_on list that is no verdict kind, with the kind it looks like (a list of
    one: the kind alone, as the message names the value). Kinds run together by another separator
    (`structure work`, `structure;work`: an audit was told `did you mean structure?`, which drops
    work) are told the comma; `none` beside kinds, that it stands alone."""
    words = [word for item in items for word in re.split(r"[\s;|+/]+", item) if word]
    if "none" in (word.lower() for word in words) and len(words) > 1:
        return f"; {NONE_ALONE}"
    if bad and len(words) > len(items) and set(words) <= set(KINDS):
        return f"; separate the kinds with commas: {', '.join(dict.fromkeys(words))}"
    close = {item: closest_names(item, (*KINDS, "none") if len(items) == 1 else KINDS) for item in bad}
    if not bad or len(items) == 1:  # no item at all (`,`), or the one the message names
        return f"; did you mean {close[bad[0]][0]}?" if bad and close[bad[0]] else ""
    named = [f"{item!r} (did you mean {close[item][0]}?)" if close[item] else repr(item) for item in bad]
    return f"; not a kind: {', '.join(named)}"


def parse_globs(text: object) -> tuple[str, ...]:
    items = text if isinstance(text, (list, tuple)) else [text]
    if not all(isinstance(i, str) for i in items):
        raise ValueError('op globs: a text or a list of texts like ["aten::copy_", "aten::*mm"]')
    globs = tuple(_split(text))
    if not globs and any(items):  # `", ,"`, `[" "]`: a slip; "" (an unset variable) or [] ignore none
        raise ValueError("op globs: a comma list such as 'aten::copy_, aten::*mm' (it names none; empty ignores none)")
    for glob in globs:
        bare = without_overload(glob) or profiler_spelling(glob)
        if bare is not None:  # it would ignore nothing
            raise ValueError(f"op globs without overloads, as the profiler names ops: {bare!r}, not {glob!r}")
    return globs


def _parse_update(text: object) -> str | None:
    """'changed' or 'all'; in an ini file also true/false (1/0, yes/no, on/off). An empty value
    (`--opprof-update-baseline=` from an unset variable) is refused: it would record nothing."""
    value = str(text).strip().lower()
    if value in ("0", "false", "no", "off"):
        return None
    if value in ("1", "true", "yes", "on"):
        return "changed"
    if value not in UPDATE_MODES:
        close = closest_names(value, UPDATE_MODES)
        hint = f"; did you mean {close[0]}?" if close else _path_for_a_mode(str(text).strip())
        raise ValueError("'changed' (the default), 'all', or true/false" + hint)
    return value


def _path_for_a_mode(value: str) -> str:
    """The hint for a test path given where the recording mode goes (`--opprof-update-baseline
    tests/test_x.py`): an existing one is taken as a path before this; so it does not exist."""
    if not ("/" in value or os.sep in value or "::" in value or value.endswith(".py")):
        return ""
    path = value.split("::", 1)[0]
    missing = "" if Path(path).exists() else f" ({path} does not exist)"
    return f"; it looks like a test path{missing}: check it, and give the mode first: --opprof-update-baseline=changed {value}"


def _parse_trace_mode(text: object) -> str:
    value = str(text).strip().lower()
    if value not in TRACE_MODES:
        raise ValueError(" or ".join(repr(m) for m in TRACE_MODES))
    return value


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its flag, ini key, parser, and help text."""

    field: str
    flag: str
    ini: str
    parse: Callable[[object], Any]
    help: str
    metavar: str | None = None  # None: a switch (store_true)
    choices: tuple[str, ...] | None = None
    const: str | None = None  # the value of the flag given without one (nargs="?")
    native: type | None = None  # the TOML type `[tool.pytest]` may also give (int for opprof_top = 5)


def parse_device_key(text: object) -> str:
    """A device key names a folder under the baseline dir: lowercase letters, digits, . _ -"""
    key = str(text).strip()
    if not valid_key(key):
        raise ValueError(
            "a device key: a lowercase letter or digit, then lowercase letters, digits, '.', '_' or '-', "
            "at most 100 (e.g. nvidia-a10)"
        )
    return key


OPTIONS: tuple[Option, ...] = (
    Option(
        "enabled", "--opprof", "opprof", _parse_bool, "measure tests that use the opprof fixture or marker", native=bool
    ),
    Option(
        "top",
        "--opprof-top",
        "opprof_top",
        _parse_positive_int,
        "operators per test in the report (default 10)",
        "N",
        native=int,
    ),
    Option(
        "json_path",
        "--opprof-json",
        "opprof_json",
        _parse_file_path,
        "write the run's measurements as JSON to PATH",
        "PATH",
    ),
    Option(
        "csv_path",
        "--opprof-csv",
        "opprof_csv",
        _parse_file_path,
        "write every measured test's per-op table as CSV to PATH (for spreadsheets and monitoring)",
        "PATH",
    ),
    Option(
        "html_path",
        "--opprof-html",
        "opprof_html",
        _parse_file_path,
        "write the run as one self-contained HTML report to PATH (tables, top-op bars, device timeline)",
        "PATH",
    ),
    Option(
        "trace_dir",
        "--opprof-trace-dir",
        "opprof_trace_dir",
        _parse_dir_path,
        "write a Chrome/Perfetto trace per failing test (see --opprof-trace) under DIR",
        "DIR",
    ),
    Option(
        "trace",
        "--opprof-trace",
        "opprof_trace",
        _parse_trace_mode,
        "which tests get a trace in --opprof-trace-dir: failed (default) or all",
        "WHEN",
        TRACE_MODES,
    ),
    Option(
        "update_baseline",
        "--opprof-update-baseline",
        "opprof_update_baseline",
        _parse_update,
        "record baselines (implies --opprof): new and changed ones; =all rewrites every one",
        "WHICH",
        UPDATE_MODES,
        const="changed",
        native=bool,
    ),
    Option(
        "baseline_dir",
        "--opprof-baseline-dir",
        "opprof_baseline_dir",
        _parse_path,
        "where baselines live (default .opprof at the rootdir)",
        "DIR",
    ),
    Option(
        "tolerance",
        "--opprof-tolerance",
        "opprof_tolerance",
        parse_percentage,
        "how much slower than its baseline an op may get (default 20%)",
        "PCT",
        native=float,
    ),
    Option(
        "min_delta_ms",
        "--opprof-min-delta-ms",
        "opprof_min_delta_ms",
        parse_ms,
        "ignore time changes smaller than this many ms per step (default 0.05)",
        "MS",
        native=float,
    ),
    Option(
        "fail_on",
        "--opprof-fail-on",
        "opprof_fail_on",
        parse_fail_on,
        "which verdicts fail a test: structure,work,time (default), environment, or none",
        "KINDS",
    ),
    Option(
        "ignore_ops",
        "--opprof-ignore-ops",
        "opprof_ignore_ops",
        parse_globs,
        "comma list of op globs never compared with the baseline ('step wall': the steps' wall time)",
        "GLOBS",
    ),
    Option(
        "device_key",
        "--opprof-device-key",
        "opprof_device_key",
        parse_device_key,
        "the baseline folder under the baseline dir (default: from the device, e.g. nvidia-h200, cpu-x86_64)",
        "KEY",
    ),
    Option(
        "strict",
        "--opprof-strict",
        "opprof_strict",
        _parse_bool,
        "make an inconclusive time check (a loaded or throttled machine) an error instead of a summary line",
        native=bool,
    ),
    Option(
        "require_baseline",
        "--opprof-require-baseline",
        "opprof_require_baseline",
        _parse_bool,
        "make a measured test without a baseline an error (CI: a baseline not committed, a mistyped folder)",
        native=bool,
    ),
)


def standing(source: str | None) -> bool:
    """A value the project or the environment set (an ini file, its addopts, PYTEST_ADDOPTS), not
    the person running pytest (the command line, `-o`)."""
    return source is not None and source != "command line" and not source.startswith("-o ")


LOCATION_FIELDS = ("baseline_dir", "device_key")  # where a record command records


def _location_flags(values: dict[str, Any], sources: dict[str, str]) -> tuple[str, ...]:
    """The baseline location the person running chose (not a standing one, which the next run
    reads again), as the flags that choose it again: `--opprof-baseline-dir=DIR`, with `=` (a
    path after a space is refused: pytest would take it for a test path first)."""
    chosen = [o for o in OPTIONS if o.field in LOCATION_FIELDS and o.field in values and not standing(sources[o.field])]
    return tuple(f"{o.flag}={values[o.field]}" for o in chosen)


def parse_settings(lookup: Callable[[Option], tuple[object, str] | None]) -> Settings:
    """Build Settings from raw values. `lookup(option)` gives (raw value, source) or None for the
    default; a bad value raises SettingsError naming the flag, the value and its source."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        found = lookup(option)
        if found is None:
            continue
        raw, sources[option.field] = found
        try:
            values[option.field] = option.parse(raw)
        except ValueError as exc:
            raise SettingsError(bad_option(option.flag, raw, str(exc), sources[option.field])) from None
    located = _location_flags(values, sources)
    settings = Settings(**values, update_from=sources.get("update_baseline"), location_flags=located)
    if settings.update_baseline and settings.require_baseline and standing(settings.update_from):
        raise SettingsError(records_and_requires(sources["update_baseline"], sources["require_baseline"]))
    if settings.trace == "all" and not settings.trace_dir:
        msg = (
            f"--opprof-trace=all: no --opprof-trace-dir to write the traces to (from {sources['trace']}); "
            "add --opprof-trace-dir DIR"
        )
        raise SettingsError(msg)
    return settings


# -- the marker: per-test overrides of the run's rule -----------------------------------------

COMMA_LIST_PARSERS = (parse_globs, parse_fail_on)  # the options whose one string is a comma list

# keyword -> parser (raises ValueError naming what it expects)
MARKER_KEYWORDS: dict[str, Callable[[object], Any]] = {
    "tolerance": parse_percentage,
    "min_delta_ms": parse_ms,
    "ignore_ops": parse_globs,
    "fail_on": parse_fail_on,
}


def marker_problem(nodeid: str, args: tuple[object, ...], kwargs: Mapping[str, object]) -> str | None:
    """What is wrong with a test's @pytest.mark.opprof(...), in one line; None when nothing."""
    if args:
        return f"{nodeid}: @pytest.mark.opprof takes keyword arguments only, got {shown_value(args)}"
    for key, value in kwargs.items():
        parse = MARKER_KEYWORDS.get(key)
        if parse is None:
            close = closest_names(key, MARKER_KEYWORDS)
            hint = f"; did you mean {close[0]}?" if close else f"; it takes: {', '.join(sorted(MARKER_KEYWORDS))}"
            return f"{nodeid}: @pytest.mark.opprof got an unknown keyword {key!r}{hint}"
        try:
            parse(value)
        except ValueError as exc:
            return f"{nodeid}: @pytest.mark.opprof({key}={shown_value(value)}): expected {exc}"
    return None


def rule_for(settings: Settings, marker_kwargs: Mapping[str, object] | None = None) -> Rule:
    """The run's comparison rule, with a test's (validated) marker overrides."""
    values: dict[str, Any] = {
        "tolerance": settings.tolerance,
        "min_delta_ms": settings.min_delta_ms,
        "ignore_ops": settings.ignore_ops,
        "fail_on": settings.fail_on,
    }
    values.update({key: MARKER_KEYWORDS[key](value) for key, value in (marker_kwargs or {}).items()})
    return Rule(**values)


def baseline_dir_problem(root: Path, source_value: str, source: str) -> str | None:
    """What is wrong with the baseline folder as resolved against the rootdir (where it is used)."""
    found = blocked(root)
    if found is None:
        return None
    return (
        f"--opprof-baseline-dir: {source_value!r} is not a folder: {found} is a file (from {source}; as resolved "
        f"against the rootdir: {root}); name a folder, or move the file"
    )


REPORT_SUFFIX = {"--opprof-json": ".json", "--opprof-csv": ".csv", "--opprof-html": ".html"}
# How each report begins: an existing file that begins otherwise is someone's, not to overwrite.
REPORT_HEAD = {
    "--opprof-json": b'{\n  "device": {',
    "--opprof-csv": b"test,op,",
    "--opprof-html": b'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>pytest-opprof report</title>',
}


def _head(path: Path, size: int) -> bytes | None:
    """A file's first `size` bytes; None where it cannot be read."""
    try:
        with path.open("rb") as file:
            return file.read(size)
    except OSError:
        return None


def _earlier_report(path: Path, head: bytes) -> bool:
    """Whether an existing file is empty or begins as the report does (an earlier run's)."""
    found = _head(path, len(head))
    return found is None or not found or found == head  # unreadable: writing it says why, in one line


def earlier_reports(settings: Settings, flags: Iterable[str]) -> list[Path]:
    """The report files among `flags` that hold an earlier run's report of their kind (a plain
    file beginning as the report does, never a link, a stream or someone's file): a run that
    measures nothing removes them, or a dashboard would read an earlier run's as this one's."""
    paths = dict(_outputs(settings))
    found = []
    for flag in flags:
        value = paths.get(flag) if flag in REPORT_HEAD else None
        if not value:
            continue
        path = Path(value)
        if not path.is_symlink() and path.is_file() and _head(path, len(REPORT_HEAD[flag])) == REPORT_HEAD[flag]:
            found.append(path)
    return found


def _not_a_report(flag: str, value: str, path: Path) -> str:
    """An existing file a report would overwrite: another kind of opprof report, or someone's."""
    other = next((f for f, head in REPORT_HEAD.items() if f != flag and _earlier_report(path, head)), None)
    what = f"an opprof report of another kind ({other}'s)" if other else "not an opprof report"
    return (
        f"{flag}: {value!r} is an existing file, {what}, which the report would overwrite (a test path "
        f"after a report flag?); give the report a file of its own ({flag}=report{REPORT_SUFFIX[flag]})"
    )


def trace_dir_problem(settings: Settings, baseline_folder: Path, device_key: str | None) -> str | None:
    """A trace folder that is the baseline folder itself, one of its device-key folders (this
    run's, its key known once the device is, or another holding baselines), or any other folder
    in it (`.opprof/traces`: a trial's was accepted, as the JSON report is not). Traces would sit
    among committed baselines (output_paths_problem refuses folders inside a key folder)."""
    if not settings.trace_dir:
        return None
    folder = Path(os.path.realpath(baseline_folder))
    where = Path(os.path.realpath(settings.trace_dir))
    if where == folder:
        what = f"the baseline folder {where}"
    elif where.parent == folder and (where.name == device_key or holds_json(where)):
        what = f"the device-key folder {where} of the baselines"
    elif folder in where.parents:
        what = f"inside the baseline folder {folder}"
    else:
        return None
    return (
        f"--opprof-trace-dir: {settings.trace_dir!r} is {what}; write the traces elsewhere "
        "(--opprof-trace-dir=opprof-traces): they would sit among committed baselines"
    )


def _outputs(settings: Settings) -> list[tuple[str, str | None]]:
    """Where the run writes, by flag: the reports and the trace folder."""
    return [
        ("--opprof-json", settings.json_path),
        ("--opprof-csv", settings.csv_path),
        ("--opprof-html", settings.html_path),
        ("--opprof-trace-dir", settings.trace_dir),
    ]


def output_paths_problem(
    settings: Settings, baseline_folder: Path, others: Mapping[str, str] | None = None
) -> str | None:
    """What is wrong with where the reports go, taken together: two reports at one file (the
    second would replace the first; `others`: the reports of pytest and its plugins by their flag,
    `--junitxml`, `--html`...), a report or the trace folder inside a device-key folder of the
    baseline folder (it could replace a baseline), or the JSON report anywhere in the baseline
    folder (`opprof show` and `opprof compare` read every .json there as a baseline). Pipes and
    devices (/dev/null) may be shared."""
    folder = Path(os.path.realpath(baseline_folder))
    taken: dict[Path, str] = {Path(os.path.realpath(path)): flag for flag, path in (others or {}).items()}
    for flag, value in _outputs(settings):
        if not value or own_descriptor(Path(value)) is not None or is_stream(Path(value)):
            continue  # written into, never replaced: /dev/stdout (a log or a pipe behind it), a FIFO
        try:
            where = output_target(Path(value))
        except OSError as exc:
            return f"{flag}: {value!r}: {exc.strerror}; point the symlink at a file, or remove it"
        if folder in where.parents and len(where.relative_to(folder).parts) >= 2:
            key = folder / where.relative_to(folder).parts[0]
            return f"{flag}: {value!r} is inside the device-key folder {key} of the baselines; write it elsewhere (a report there could replace a committed baseline)"
        if folder in where.parents and where.suffix == ".json":
            return f"{flag}: {value!r} is inside the baseline folder {folder}, where opprof show and compare read every .json as a baseline; write it elsewhere"
        if where in taken:
            return f"{flag}: {value!r} is also {taken[where]}'s path, which it would overwrite; give each report its own file"
        if flag in REPORT_HEAD and where.is_file() and not _earlier_report(where, REPORT_HEAD[flag]):
            return _not_a_report(flag, value, where)
        taken[where] = flag
    return None
