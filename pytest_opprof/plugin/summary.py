"""The plugin at the end of the run: the terminal summary's lines (tables, orphans, renames,
where the run stopped) and the JSON, CSV and HTML reports, also where pytest printed no summary."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..device import usable_cpus
from ..errors import (
    COLLECT_ONLY,
    NO_CPU_WAIT,
    NOTHING_MEASURED,
    baselines_under_rootdir,
    case_clash_line,
    idle_outputs,
    inert_summary,
    orphans_line,
    recording_by_setting,
    report_unwritten,
    run_stopped,
)
from ..layout import baseline_root, reached_from, shown_path
from ..settings import RunState, earlier_reports, standing
from ..textout import fit_stream
from .base import RUN, runnable, typed_id


@pytest.hookimpl(tryfirst=True)  # before the plugin package's closes the spool
def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(RUN, None)
    if state is not None and not hasattr(config, "workerinput"):
        _write_unsummarized(config, state)


def _write_unsummarized(config: pytest.Config, state: RunState) -> None:
    """Reports of a run whose terminal summary never ran: without pytest's terminal plugin (`-p
    no:terminal`: an audit's CI run uploaded none, exit 0) or ended by an exit code pytest
    summarizes not (`pytest.exit(..., returncode=3)`, a review's). Written all the same, where the
    tests ran (not `--help`, nor a start a conftest refused: a review's earlier report was
    replaced by an empty one) and did not end in an internal error (a hook's exception: the
    report would look whole); one that could not be is said on stderr."""
    if state.summarized or state.spool is None or not state.ran_tests:
        return
    internal = state.exit_status == pytest.ExitCode.INTERNAL_ERROR and state.stopped_in is None
    if internal or state.exit_status == pytest.ExitCode.USAGE_ERROR:
        return
    _write_outputs(config, state, lambda line: print(line, file=sys.stderr), quiet=True)


def _under_other_keys(config: pytest.Config, state: RunState) -> Callable[[str, str], list[tuple[str, str]]]:
    """For a renamed test's new and old baseline paths (shown, from the rootdir): the other device
    keys whose folders hold its old baseline, and that file's path."""
    from ..baseline import under_other_keys

    root = baseline_root(config.rootpath, state.settings.baseline_dir)

    def elsewhere(new: str, old: str) -> list[tuple[str, str]]:
        found = under_other_keys(root, state.device_key or "", config.rootpath / old, config.rootpath / new)
        return [(path.relative_to(root).parts[0], shown_path(path, config.rootpath)) for path in found]

    return elsewhere


PICKING_OPTIONS = ("keyword", "markexpr", "deselect", "lf", "stepwise", "ignore", "ignore_glob")  # -k, -m, ...


def picked_some(config: pytest.Config, state: RunState | None = None) -> bool:
    """Whether the run picked some of the project's tests: -k, -m, --deselect, --lf, --sw,
    --ignore, a node id, test paths that do not cover the testpaths (the rootdir without them), or
    a plugin that left collected tests out (pytest-split, a sharder: a sharding trial's shard was
    told to record with a bare command that recorded every other shard's change). Known on the
    xdist controller too, which collects nothing."""
    if any(getattr(config.option, name, None) for name in PICKING_OPTIONS):
        return True
    if state is not None and (state.deselected or state.left_out):
        return True
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False  # the testpaths, or the current folder: the whole project as it is run
    if any("::" in str(arg) for arg in config.args):
        return True
    given = [(config.invocation_params.dir / str(arg)).resolve() for arg in config.args]
    whole = [path.resolve() for path in _testpaths(config)]
    return not all(any(g == w or g in w.parents for g in given) for w in whole)


def _testpaths(config: pytest.Config) -> list[Path]:
    """What a plain `pytest` would collect: the testpaths (globs expanded) or the rootdir."""
    found: list[Path] = []
    for pattern in config.getini("testpaths") or []:
        found += (
            sorted(config.rootpath.glob(pattern)) if any(c in pattern for c in "*?[") else [config.rootpath / pattern]
        )
    return found or [config.rootpath]


def _looked_in(config: pytest.Config, state: RunState) -> str | None:
    """The device key's baseline folder, for the 'no baseline' line (None when no test lacked one)."""
    from ..baseline import lookup_folder

    if state.device_key is None or not any(r.baseline_status == "missing" for r in state.records):
        return None
    return lookup_folder(baseline_root(config.rootpath, state.settings.baseline_dir), state.device_key, config.rootpath)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(RUN, None)
    if state is None or hasattr(config, "workerinput"):  # xdist workers report to the controller
        return
    state.summarized = True
    if not state.settings.measuring:
        _inert_lines(terminalreporter, state, config.option.collectonly)
        return
    lines = _records_lines(config, state) + _orphans_lines(config, state)
    if state.settings.update_baseline and standing(state.settings.update_from):
        lines.append(recording_by_setting(state.settings.update_from or ""))
    if state.records and _cpu_wait_unknown():
        lines.append(NO_CPU_WAIT)
    # Reports are written also when nothing was measured: an earlier run's would pass for this one's;
    # not by --collect-only, which runs nothing (a CI trial's report was replaced by an empty one)
    reports = state.spool is not None and not config.option.collectonly
    lines = _run_end_lines(config, state, reports) + lines
    if state.spool is not None and config.option.collectonly:
        lines.append(COLLECT_ONLY)
    if not lines and not reports:
        return
    terminalreporter.write_sep("=", "opprof")
    say = _writer(terminalreporter)
    for line in lines:
        say(runnable(config, line))
    if reports:
        _write_outputs(config, state, say)
    note = _rootdir_note(config, state, lines)
    if note:
        say(note)


def _cpu_wait_unknown() -> bool:
    """Whether this system keeps no per-thread CPU wait (macOS, Windows: no /proc), which the
    contention check and the under-load marking of baselines read (a review: silent there)."""
    from ..device import cpu_wait_known

    return not cpu_wait_known()


def _writer(terminalreporter: Any) -> Callable[[str], None]:
    """Writes text a line at a time, as the terminal's stream can hold it: pytest escapes a whole
    write holding one character its encoding lacks (an ASCII stdout printed a test's tables as one
    line of `\\n`s for the ellipsis of a cut name)."""
    stream = getattr(getattr(terminalreporter, "_tw", None), "_file", None) or sys.stdout

    def say(text: str) -> None:
        for line in text.split("\n"):
            terminalreporter.write_line(fit_stream(line, stream))

    return say


def _inert_lines(terminalreporter: Any, state: RunState, collect_only: bool) -> None:
    """A run without --opprof: what it carries that only a measuring run would use. An earlier
    report at a given path is removed, but by --collect-only, which leaves the files as they were
    (as with --opprof: a review's run removed it)."""
    say = _writer(terminalreporter)
    if state.carrying:
        say(inert_summary(state.carrying))
    if state.idle_outputs:
        removed = ([], []) if collect_only else _remove_earlier_reports(state)
        say(idle_outputs(state.idle_outputs, *removed))


def _remove_earlier_reports(state: RunState) -> tuple[list[str], list[str]]:
    """The report files given to a run that measured nothing, holding an earlier run's report:
    removed (shown as given), and those that could not be (with why)."""
    removed, kept = [], []
    for path in earlier_reports(state.settings, state.idle_outputs):
        try:
            path.unlink()
        except OSError as exc:
            kept.append(f"{path} ({exc.strerror or exc})")
        else:
            removed.append(str(path))
    return removed, kept


def _records_lines(config: pytest.Config, state: RunState) -> list[str]:
    """The measured tests' tables and lines, and the baseline files whose names clash by case."""
    from ..baseline import case_clashes
    from ..summarylines import summary_lines

    # a bare record command would record tests this run did not measure: those it picked out, or
    # those after a stop (-x, --maxfail, Ctrl-C) (a review's -x run was told to record them all)
    picked = picked_some(config, state) or bool(getattr(config.option, "maxfail", 0)) or state.stopped_in is not None
    lines = (
        summary_lines(
            state.records,
            config.option.verbose > 0,
            getattr(config.option, "numprocesses", None),
            state.settings.update_baseline or False,
            _looked_in(config, state),
            state.settings.ignore_ops if picked else (),  # may match in the tests left out
            state.settings.strict,
            picked,
            (state.device.get("torch_threads"), usable_cpus()),
            quiet=config.option.verbose < -1,  # -qq: -q keeps them (the README's first run shows one)
        )  # fmt: skip
        if state.records
        else []
    )
    return lines + [
        case_clash_line(group)
        for group in case_clashes((r.baseline.path, r.nodeid) for r in state.records if r.baseline)
    ]


def _orphans_lines(config: pytest.Config, state: RunState) -> list[str]:
    """The baseline files no collected test reads, and the tests that look renamed from them."""
    from ..renames import left_out_line, left_out_pairs, renamed_lines, renamed_pairs

    if not state.orphans:
        return []

    def reached(path: str) -> str:  # as the folder pytest ran in reaches it, for the commands
        return reached_from(config.rootpath / path, config.invocation_params.dir)

    pairs = renamed_pairs(state.records, state.orphans, state.without_baseline)
    taken = {path for _, new, old in pairs for path in (new, old)}
    maybe = left_out_pairs(state.records, state.orphans, state.without_baseline, taken)
    paired = {old for _, _, old in pairs + maybe}
    line = orphans_line(
        state.orphans,
        config.option.verbose > 0,
        [reached(p) for p in state.orphans],
        paired,
        picked_some(config, state),
    )
    recorded = {r.baseline.path for r in state.records if r.baseline and r.baseline.status == "new"}
    left_out = sorted(left_out_line(nodeid, old, reached) for nodeid, _, old in maybe)
    return [line, *renamed_lines(pairs, reached, _under_other_keys(config, state), recorded), *left_out]


def _run_end_lines(config: pytest.Config, state: RunState, reports: bool) -> list[str]:
    """The line that goes first where the run stopped early, or measured nothing but writes reports
    (none under --collect-only)."""
    if state.spool is not None and config.option.collectonly:
        return []
    if state.stopped_in is not None:  # not "no test was measured": the run ended before its end
        return [run_stopped(typed_id(config, state.stopped_in), len(state.records), reports)]
    if reports and not state.records:
        return [NOTHING_MEASURED]
    return []


def _rootdir_note(config: pytest.Config, state: RunState, lines: list[str]) -> str | None:
    """Where pytest ran outside its rootdir and a line showed a baseline path (`.opprof/...`),
    which reads as the folder pytest ran in: say whose it is (not for an absolute folder)."""
    root = baseline_root(config.rootpath, state.settings.baseline_dir)
    if config.invocation_params.dir == config.rootpath or not root.is_relative_to(config.rootpath):
        return None
    folder = shown_path(root, config.rootpath)
    if not any(folder in line for line in lines):
        return None
    return baselines_under_rootdir(folder, config.rootpath)


def _write_outputs(config: pytest.Config, state: RunState, say: Callable[[str], None], quiet: bool = False) -> None:
    """--opprof-json, -csv and -html, each written whole or not at all, each said in one line
    (`quiet`: only a report that could not be written)."""
    from ..htmlreport import write_html_report
    from ..runfiles import write_csv_report, write_run_report

    settings, spool = state.settings, state.spool
    outputs = [
        (
            "--opprof-json",
            settings.json_path,
            lambda path: write_run_report(
                path,
                state.device,
                state.device_key,
                spool,
                state.orphans or [],
                str(config.rootpath),
                state.stopped_in,
                picked_some(config, state),
            ),
        ),
        ("--opprof-csv", settings.csv_path, lambda path: write_csv_report(path, spool)),
        (
            "--opprof-html",
            settings.html_path,
            lambda path: write_html_report(path, state.device, state.device_key, spool),
        ),
    ]
    for flag, where, write in outputs:
        if where:
            try:
                write(Path(where))
            except OSError as exc:
                say(report_unwritten(flag, where, exc.strerror or str(exc)))
            else:
                if not quiet:
                    say(f"opprof: wrote {where}")
