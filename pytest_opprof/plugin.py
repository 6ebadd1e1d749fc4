"""The pytest layer: options, the `opprof` marker and fixture, and the hooks. Glue only.

Without --opprof nothing here imports torch or starts a profiler, nor the measuring modules (the
analysis, captures, baselines, verdicts, reports): the functions that use them import them, so a
plain run pays for the options' modules only (tests/test_plugin.py, bench/inert_cost.py).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
import warnings
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from functools import partial, wraps
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from . import hooks
from .device import (
    Nvml,
    describe,
    device_facts,
    former_key,
    gpus_like_first,
    resolve_key,
    usable_cpus,
    use_worker_gpu,
)
from .errors import (
    COLLECT_ONLY,
    NO_CPU_WAIT,
    NOTHING_MEASURED,
    asked_late_unmeasured,
    baselines_under_rootdir,
    case_clash_line,
    device_key_hook_raised,
    former_key_source,
    hypothesis_test,
    idle_outputs,
    inert_summary,
    key_hook_loaded_late,
    markers_stacked,
    more_bad_markers,
    orphans_line,
    outside_rootdir,
    profiler_left_on,
    recording_by_setting,
    report_unwritten,
    run_stopped,
    runnable_here,
    stepped_aside_unmeasured,
    subtests_failed,
    threads_left_changed,
    torch_not_importable,
    worker_gpus,
)
from .layout import baseline_root, reached_from, shown_path
from .pluginoptions import (
    SWITCHES,
    add_options,
    give_back_a_path_before_the_conftests,
    given,
    ini_on,
    read_option,
    refuse_bad_paths,
    refuse_shadowed_ini,
    refuse_unknown_ini_keys,
)
from .rules import Rule
from .settings import (
    OPTIONS,
    RunState,
    Settings,
    SettingsError,
    marker_problem,
    parse_settings,
    rule_for,
    standing,
    trace_dir_problem,
)
from .textout import fit_stream, os_text

if TYPE_CHECKING:  # the measuring modules, for annotations: imported where they run (the docstring)
    from .analysis.model import Check
    from .baseline import Undo
    from .decide import Judged, Measurement
    from .fixture import OpprofFixture, Remeasured
    from .report import TestResult
    from .results import TestRecord
    from .runfiles import ReportSpool

MARKER = "opprof"
BAD_MARKER = pytest.StashKey[str]()  # on an xdist worker: what makes the test err (its marker, a late key hook)
TORCH_NUMPY_WARNING = "Failed to initialize NumPy"


RUN = pytest.StashKey[RunState]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


TEST = pytest.StashKey["OpprofFixture"]()


# -- options (read in pluginoptions.py) -------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """A rootdir conftest that imports torch does so before pytest_configure: the NumPy warning
    filter (see pytest_configure) must be in place before, when the run measures."""
    give_back_a_path_before_the_conftests(early_config, args)
    flags = ("--opprof", "--opprof-update-baseline")
    if any(a in flags or a.startswith("--opprof-update-baseline=") for a in args) or ini_on(early_config):
        warnings.filterwarnings("ignore", message=TORCH_NUMPY_WARNING, category=UserWarning)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: measure this test with pytest-opprof (the whole call is one step) when --opprof is on",
    )
    refuse_unknown_ini_keys(config)
    config.add_cleanup(_assertion_messages_aside())  # every run: the library's capture() too
    try:
        settings = parse_settings(lambda option: read_option(config, option))
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None
    refuse_shadowed_ini(config)
    refuse_bad_paths(config, settings)  # also in a plain run: the ini that turns opprof on may be the one not read
    # The controller reports (xdist workers only send their records there): it alone collects.
    reporting = settings.measuring and not hasattr(config, "workerinput")
    idle = () if settings.measuring else tuple(o.flag for o in OPTIONS if o.field not in SWITCHES and given(config, o))
    spool = _report_spool(settings) if reporting else None
    state = RunState(settings, spool=spool, idle_outputs=idle, trace_tag=_each_worker(config))
    if settings.measuring:
        _start_measuring(config, state)
    config.stash[RUN] = state
    if reporting:
        everywhere = getattr(config.option, "dist", None) == "each"
        config.pluginmanager.register(_RecordCollector(state, everywhere), "opprof-records")
    if settings.measuring:
        config.pluginmanager.register(_ThreadLeaks(), "opprof-thread-leaks")
        config.pluginmanager.register(_ProfilerLeaks(state), "opprof-profiler-leaks")


def _report_spool(settings: Settings) -> ReportSpool | None:
    """Where the measured tests' records wait for the JSON, CSV and HTML reports asked for."""
    from .runfiles import ReportSpool

    if not (settings.json_path or settings.csv_path or settings.html_path):
        return None
    return ReportSpool(json=bool(settings.json_path), csv=bool(settings.csv_path), html=bool(settings.html_path))


def _start_measuring(config: pytest.Config, state: RunState) -> None:
    """What a measuring run sets up before any test: torch importable, its NumPy warning filtered,
    pytest's assert messages set aside from captures, Inductor's kernels profiled, the device and
    its key. A run without --opprof imports none of the measuring modules (nor torch)."""
    from .capture import compiled_kernel_profiling, torch_import_problem

    # What each measured test uses, imported before the first one (its time and timeout), as the
    # profiler's first start is (pytest_runtestloop): an xdist worker's first test took ~70 ms more
    importlib.import_module(f"{__package__}.fixture")
    importlib.import_module(f"{__package__}.report")
    importlib.import_module(f"{__package__}.results")
    with warnings.catch_warnings():  # the NumPy warning, as for the device facts below
        warnings.filterwarnings("ignore", message=TORCH_NUMPY_WARNING, category=UserWarning)
        problem = torch_import_problem()
    if problem:  # else each measured test would end in a traceback
        raise pytest.UsageError(torch_not_importable(problem))
    # torch installed without numpy warns at import ("Failed to initialize NumPy"): not the
    # user's doing and not ours to show; their own warnings stay as they are.
    config.addinivalue_line("filterwarnings", f"ignore:{TORCH_NUMPY_WARNING}:UserWarning")
    # Before any model compiles, for the session: Inductor's C++ kernels then show. Restored at
    # the end (an in-process pytest run, pytester's, must not leave it on for its host).
    profiling = ExitStack()
    profiling.enter_context(compiled_kernel_profiling())
    config.add_cleanup(profiling.close)  # also run when configure fails
    with warnings.catch_warnings():  # our import of torch (for the device facts) may be the first
        warnings.filterwarnings("ignore", message=TORCH_NUMPY_WARNING, category=UserWarning)
        _resolve_device(config, state)
    settings = state.settings
    traces = trace_dir_problem(settings, baseline_root(config.rootpath, settings.baseline_dir), state.device_key)
    if traces:
        raise pytest.UsageError(traces)


def _each_worker(config: pytest.Config) -> str | None:
    """The xdist worker's id under `--dist each`, where every worker runs every test: its traces
    are named apart, or one worker's would overwrite (or, passing, remove) another's."""
    worker_input = getattr(config, "workerinput", {})
    return worker_input.get("workerid") if worker_input.get("opprof_each") else None


def _resolve_device(config: pytest.Config, state: RunState) -> None:
    """Device facts and the key: --opprof-device-key > pytest_opprof_device_key hook > facts. An
    xdist worker first takes a GPU of its own where several are visible (device.use_worker_gpu)."""
    if hasattr(config, "workerinput"):
        use_worker_gpu(config.workerinput.get("workerid", ""))
    state.nvml = Nvml()
    state.device, state.gpu_handle = device_facts(state.nvml)
    hooked = None
    if not state.settings.device_key:
        state.key_hooks = _key_hooks(config)
        try:
            hooked = config.hook.pytest_opprof_device_key(config=config, facts=dict(state.device))
        except Exception as exc:  # the user's hook: one line naming what it raised and where
            raise pytest.UsageError(device_key_hook_raised(exc)) from None
    try:
        state.device_key, state.key_source = resolve_key(
            state.settings.device_key, hooked, state.device, _key_hooks_at(config) if hooked is not None else ""
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    _keep_former_key(config, state)


def _keep_former_key(config: pytest.Config, state: RunState) -> None:
    """An AMD GPU torch names without a model number is keyed by its architecture now
    (`amd-radeon-graphics-gfx90a`): where only its former key's folder holds baselines, this run
    reads and writes that one, and the header says how to move them (an upgrade's run found none
    and was told to record them all anew)."""
    former = former_key(state.device_key or "") if state.key_source == "device" else None
    root = baseline_root(config.rootpath, state.settings.baseline_dir)
    if former is None or (root / str(state.device_key)).is_dir() or not (root / former).is_dir():
        return
    state.key_source = former_key_source(shown_path(root, config.rootpath), former, str(state.device_key))
    state.device_key = former


def _key_hooks_at(config: pytest.Config) -> str:
    """Where the device-key hooks are defined (`conftest.py:3`, from the folder pytest ran in), for
    the line that refuses a key one returned (an audit's named no file)."""
    places = []
    for impl in config.hook.pytest_opprof_device_key.get_hookimpls():
        code = getattr(impl.function, "__code__", None)
        if code is not None:
            places.append(f"{reached_from(Path(code.co_filename), config.invocation_params.dir)}:{code.co_firstlineno}")
    return " or ".join(places)


def _key_hooks(config: pytest.Config) -> frozenset[str]:
    return frozenset(impl.plugin_name for impl in config.hook.pytest_opprof_device_key.get_hookimpls())


def _late_key_hook(config: pytest.Config, state: RunState) -> str | None:
    """Why the device key cannot stand: a conftest holding the key hook was loaded while collecting,
    after the key was chosen without it (`pytest` vs `pytest tests/gpu` would pick two keys)."""
    if not state.settings.measuring or state.settings.device_key or state.device_key is None:
        return None
    late = [
        impl.plugin
        for impl in config.hook.pytest_opprof_device_key.get_hookimpls()
        if impl.plugin_name not in state.key_hooks
    ]
    if not late:
        return None
    plugin = late[0]
    module = plugin if inspect.ismodule(plugin) else inspect.getmodule(type(plugin))
    file = getattr(module, "__file__", None)
    where = shown_path(Path(file), config.rootpath) if file else getattr(module, "__name__", type(plugin).__name__)
    conftest = inspect.ismodule(plugin) and Path(file or "").name == "conftest.py"
    return key_hook_loaded_late(where, state.device_key, conftest)


# pytest's helpers that make a failing assert's message (its rewritten code calls them in the
# test), and the one that runs the pytest_assertion_pass hooks (enable_assertion_pass_hook)
_ASSERTION_HELPERS = (
    "_saferepr",
    "_format_assertmsg",
    "_format_explanation",
    "_call_reprcompare",
    "_format_boolop",
    "_call_assertion_pass",
)


def _aside(helper: Callable[..., Any]) -> Callable[..., Any]:
    """`helper`, run set aside from a one-step capture when one records (capture.call_aside). In
    every run, also without --opprof, where a test may use the library's `capture()`: a capture
    module not imported yet has no capture recording, and is not imported for it."""

    @wraps(helper)
    def aside(*args: Any, **kwargs: Any) -> Any:
        capture = sys.modules.get(f"{__package__}.capture")
        if capture is None:
            return helper(*args, **kwargs)
        return capture.call_aside(helper, *args, **kwargs)

    aside.__dict__["_opprof_aside"] = True
    return aside


def _assertion_messages_aside() -> Callable[[], None]:
    """Run pytest's assert-message helpers set aside from a one-step capture (the marker's whole
    call, a capture() block): a trial's failing `assert y.sum() > 1e9` reported the 535
    `aten::item` calls of the tensor's repr in the message. Returns the undo."""
    from _pytest.assertion import rewrite

    saved = {}
    for name in _ASSERTION_HELPERS:
        helper = getattr(rewrite, name, None)
        if callable(helper) and not getattr(helper, "_opprof_aside", False):
            wrapped = _aside(helper)
            saved[name] = (helper, wrapped)
            setattr(rewrite, name, wrapped)

    def undo() -> None:
        for name, (helper, wrapped) in saved.items():
            if getattr(rewrite, name, None) is wrapped:  # not what another plugin put there since
                setattr(rewrite, name, helper)

    return undo


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(RUN, None)
    if state is not None and not hasattr(config, "workerinput"):
        _write_unsummarized(config, state)
    if state is not None and state.nvml is not None:
        state.nvml.close()
    if state is not None and state.spool is not None:
        state.spool.close()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(RUN, None)
    if state is not None:
        state.exit_status = int(exitstatus)


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


class _RecordCollector:
    """Collects each measured test's record from its report (from xdist workers too)."""

    def __init__(self, state: RunState, everywhere: bool = False) -> None:
        self.state = state
        self.everywhere = everywhere  # `--dist each`: a crashed test's record names its worker
        self.index: dict[tuple[str, str | None], int] = {}  # (nodeid, xdist worker) -> place in state.records
        self.running: set[tuple[str, str | None]] = set()  # measured tests whose xdist worker has not sent their record
        self.undo: dict[tuple[str, str | None], Undo] = {}  # their baseline writes, while they may still err

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A worker of `--dist each` runs every test: each is a measurement of its own.
        from .baseline import Undo
        from .results import TestRecord

        key = (report.nodeid, getattr(report, "worker_id", None))
        if getattr(report, "opprof_measured", False):
            self.running.add(key)
        elif report.when == "???":  # xdist's report of a worker that died
            self._crashed(report)
        undo = getattr(report, "opprof_undo", None)
        if undo is not None:
            self.undo[key] = Undo.from_dict(json.loads(undo))
        record = getattr(report, "opprof_record", None)
        if record is not None:
            self.running.discard(key)
            self.undo.pop(key, None)
            self.add(TestRecord.from_dict(json.loads(record)))

    def _crashed(self, report: pytest.TestReport) -> None:
        """A measured test whose xdist worker died while running it (a segfault, the OOM killer)
        sends no record: its line in the reports says so, with pytest's word, as a failure. A
        baseline file it wrote goes back as it was, as when a test errs in its teardown."""
        from .report import TestResult

        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)
        key = (report.nodeid, worker)
        if key not in self.running:
            return
        self.running.discard(key)
        failure = str(report.longrepr)
        undo = self.undo.pop(key, None)
        if undo is not None:
            try:
                undo()
            except OSError as exc:
                failure += f"; its baseline {undo.path} stays as this run wrote it ({exc.strerror or exc})"
        result = TestResult(report.nodeid, "failed", failure=failure, worker=worker, everywhere=self.everywhere)
        self.add(_to_record(result, self.state.settings))

    def add(self, found: TestRecord) -> None:
        spool, records = self.state.spool, self.state.records
        key = (found.nodeid, found.worker)  # the worker's id is the report's
        place = self.index.get(key)
        if place is not None:  # run again in this session (pytest-rerunfailures...): the last run stands
            found = found.after(records[place])
        kept = spool.add(found) if spool is not None else found
        if place is None:
            self.index[key] = len(records)
            records.append(kept)
        else:
            records[place] = kept


class _ThreadLeaks:
    """Finds a test whose call changed torch's thread count and left it so, and marks the measured
    tests that then ran on that count (order-dependent times). Fixtures that set the count and put
    it back (any scope) act outside the calls: they are no leak."""

    def __init__(self) -> None:
        self.leak: tuple[str, int, int] | None = None  # (nodeid, count before its call, count left)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True  # a failure outside the test's code (hypothesis's health check) shows no frame of ours
        from .analysis.model import WARNING, Check
        from .capture import torch_threads

        start = torch_threads()
        if self.leak is not None and start == self.leak[1]:
            self.leak = None  # put back since (a fixture's teardown, a later test)
        if self.leak is not None and start == self.leak[2] and _measured(item):
            _add_check(item, Check("threads", WARNING, threads_left_changed(*self.leak)))
        try:
            return (yield)
        finally:
            end = torch_threads()
            if start is not None and end is not None and end != start:
                self.leak = (item.nodeid, start, end)


class _ProfilerLeaks:
    """Finds a test whose call started a torch profiler and left it running (a debug `prof.start()`
    whose test failed before `prof.stop()`): a later measured test names it. A profiler a fixture
    started (any scope) runs before the call: no test's (a review's first version blamed the test
    after which a module fixture's profiler still ran)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True
        from .capture import profiler_left_running

        before = profiler_left_running()
        if not before:  # stopped since (a fixture's teardown): no longer blamed
            self.state.profiler_left_by = None
        try:
            return (yield)
        finally:
            after = profiler_left_running()
            if before != after:  # started by this call (blamed), or stopped by it (no longer)
                self.state.profiler_left_by = item.nodeid if after else None


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(RUN, None)
    if state is None or not state.settings.measuring:
        return ["opprof: off (pytest --opprof measures tests with the opprof fixture or marker)"]
    source = "" if state.key_source == "device" else f" (from {state.key_source})"
    gpus = state.device.get("gpu_count") or 0
    alike = gpus_like_first() if gpus > 1 and getattr(config.option, "numprocesses", None) else 0
    spread = [worker_gpus(alike, str(state.device.get("gpu_name")))] if alike > 1 else []
    return [
        f"opprof: device key {state.device_key}{source}; CPU ops always, CUDA when initialised",
        f"opprof: {describe(state.device)}",
        *spread,
    ]


# -- collection: the marker --------------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[RUN]
    late_hook = _late_key_hook(config, state)
    if late_hook and not hasattr(config, "workerinput"):
        raise pytest.UsageError(late_hook)
    problems = []
    for item in items:
        problem = _markers_problem(item)
        if late_hook and _carries(item):  # an xdist worker cannot stop the run: each measured test errs
            problem = late_hook
        if problem and hasattr(config, "workerinput"):  # an xdist worker cannot stop the run: the test errs
            item.stash[BAD_MARKER] = problem
        elif problem:
            problems.append(problem)
    if problems:  # every bad marker at once, not one per run
        raise pytest.UsageError("\n".join(_first_of(problems)))
    for item in items:  # under --opprof: without it, run() calls fn once, as DESIGN has it
        if state.settings.measuring and _carries(item) and _is_hypothesis_test(item):
            item.stash[BAD_MARKER] = hypothesis_test(item.nodeid)


def _is_hypothesis_test(item: pytest.Item) -> bool:
    """A hypothesis `@given` test (its pytest plugin's marker, or the attribute @given sets)."""
    return (
        item.get_closest_marker("hypothesis") is not None
        or getattr(getattr(item, "obj", None), "is_hypothesis_test", False) is True
    )


def _markers_by_level(item: pytest.Item) -> list[tuple[str, list[pytest.Mark]]]:
    """The test's opprof markers, the closest level first: its parameter set's (`pytest.param(...,
    marks=...)`), its function's, then each class and module around it."""
    callspec = getattr(item, "callspec", None)
    param_marks = [m for m in (callspec.marks if callspec is not None else ()) if m.name == MARKER]
    params = {id(m) for m in param_marks}
    levels = [("parameter set", param_marks)]
    for node in reversed(item.listchain()):
        own = [m for m in node.own_markers if m.name == MARKER and id(m) not in params]
        where = "function" if node is item else f"{type(node).__name__.lower()} {node.name}"
        levels.append((where, own))
    return [(where, marks) for where, marks in levels if marks]


def _opprof_marker(item: pytest.Item) -> pytest.Mark | None:
    """The marker whose overrides the test takes: the closest (a parameter set's before the
    function's: a trial's `pytest.param(..., marks=pytest.mark.opprof(fail_on="none"))` was
    dropped for the function's)."""
    levels = _markers_by_level(item)
    return levels[0][1][0] if levels else None


def _markers_problem(item: pytest.Item) -> str | None:
    """What is wrong with the test's opprof markers: each is checked, also those not read (a
    trial's typo in a marker stacked above another passed); two on one level do not add up."""
    for where, marks in _markers_by_level(item):
        if len(marks) > 1:
            return markers_stacked(item.nodeid, len(marks), where)
        problem = marker_problem(item.nodeid, marks[0].args, marks[0].kwargs)
        if problem:
            return problem
    return None


def _first_of(problems: list[str]) -> list[str]:
    """The first 20 problems, and a count of the rest."""
    more = [more_bad_markers(len(problems) - 20)] if len(problems) > 20 else []
    return problems[:20] + more


def pytest_deselected(items: list[pytest.Item]) -> None:
    state = items[0].config.stash.get(RUN, None) if items else None
    if state is not None:
        state.deselected.extend(_baseline_id(item) for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests carrying operator checks, and the baseline files no collected test reads (on an
    xdist worker, sent to the controller)."""
    config = session.config
    state = config.stash.get(RUN, None)
    if state is not None:  # the tests that will run (-k, -m and --deselect have left out theirs)
        state.carrying = sum(1 for item in session.items if _carries(item))
        _refuse_outside_rootdir(config, state, session.items)
        if hasattr(config, "workeroutput"):  # every worker collects every test: the controller takes one count
            config.workeroutput["opprof_carrying"] = state.carrying
    if state is None or not state.settings.measuring or config.option.collectonly or state.device_key is None:
        return
    if config.getoption("lf", False):  # --lf drops the passed tests of a file without deselecting them
        return
    from .baseline import gone_test_files, orphan_baselines

    root = baseline_root(config.rootpath, state.settings.baseline_dir)
    collected = [_baseline_id(item) for item in session.items] + state.deselected
    found = orphan_baselines(root, state.device_key, collected, _narrowed(config))
    found = sorted({*found, *gone_test_files(root, state.device_key, config.rootpath)})
    state.orphans = [shown_path(path, config.rootpath) for path in found]
    if hasattr(config, "workeroutput"):
        config.workeroutput["opprof_orphans"] = state.orphans


def _under_other_keys(config: pytest.Config, state: RunState) -> Callable[[str, str], list[tuple[str, str]]]:
    """For a renamed test's new and old baseline paths (shown, from the rootdir): the other device
    keys whose folders hold its old baseline, and that file's path."""
    from .baseline import under_other_keys

    root = baseline_root(config.rootpath, state.settings.baseline_dir)

    def elsewhere(new: str, old: str) -> list[tuple[str, str]]:
        found = under_other_keys(root, state.device_key or "", config.rootpath / old, config.rootpath / new)
        return [(path.relative_to(root).parts[0], shown_path(path, config.rootpath)) for path in found]

    return elsewhere


PICKING_OPTIONS = ("keyword", "markexpr", "deselect", "lf", "stepwise", "ignore", "ignore_glob")  # -k, -m, ...


def _picked_some(config: pytest.Config) -> bool:
    """Whether the run picked some of the project's tests: -k, -m, --deselect, --lf, --sw,
    --ignore, a node id, or test paths that do not cover the testpaths (the rootdir without them).
    Known on the xdist controller too, which collects nothing."""
    if any(getattr(config.option, name, None) for name in PICKING_OPTIONS):
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


def _narrowed(config: pytest.Config) -> list[str]:
    """The test files a node id on the command line picked tests of (`tests/test_a.py::test_x`),
    as node ids name them (os_text: a C locale's file name as the collected ids hold it)."""
    found = []
    for arg in config.args:
        file_part, picked, _ = arg.partition("::")
        if picked:
            path = (config.invocation_params.dir / file_part).resolve()
            found.append(
                os_text(
                    path.relative_to(config.rootpath).as_posix() if path.is_relative_to(config.rootpath) else file_part
                )
            )
    return found


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tells each xdist worker whether it runs under `--dist each` (its own option says `no`)."""
    node.workerinput["opprof_each"] = getattr(node.config.option, "dist", None) == "each"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist's controller collects nothing: it takes a worker's orphan baselines and its count of
    the tests carrying operator checks (a plain `-n 2` run's summary line)."""
    state = node.config.stash.get(RUN, None)
    output = getattr(node, "workeroutput", {})
    found = output.get("opprof_orphans")
    if state is not None and found is not None and state.orphans is None:
        state.orphans = list(found)
    if state is not None and isinstance(output.get("opprof_carrying"), int):
        state.carrying = max(state.carrying, output["opprof_carrying"])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # An item that runs again (a rerun plugin) keeps its user_properties: an earlier run's figures go.
    item.user_properties[:] = [p for p in item.user_properties if not str(p[0]).startswith("opprof.")]
    problem = item.stash.get(BAD_MARKER, None)
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Before the fixtures' teardowns: the test's capture is taken; a capture now is refused."""
    fixture = item.stash.get(TEST, None)
    if fixture is not None:
        fixture.call_ended = True


def _rule_for(item: pytest.Item, settings: Settings) -> Rule:
    """The run's rule, with the test's marker overrides."""
    marker = _opprof_marker(item)
    return rule_for(settings, marker.kwargs if marker is not None else None)


# -- the fixture -------------------------------------------------------------------------------


@pytest.fixture
def opprof(request: pytest.FixtureRequest) -> OpprofFixture:
    """Operator-level performance assertions (pytest-opprof; measures only under --opprof).

    opprof.run(fn, *args, warmup=3, steps=10) profiles steps of fn (or `with opprof.capture():`,
    or the whole test call); then assert_op_below(op, ms=), assert_op_share_below(op, pct),
    assert_op_count(op, n),
    assert_no_op(op), assert_no_sync(), assert_total_below(ms=), assert_kernel_count(kernel, n),
    assert_kernel_below(kernel, ms=), assert_range_below(name, ms=), assert_no_graph_break(),
    assert_no_recompile(), assert_compiled(), assert_overlap(), assert_device_busy_above(pct),
    assert_no_launch_bound(). opprof.profile is the Profile. Without --opprof, run() calls fn
    once and the assertions only check their arguments."""
    marked = request.node.stash.get(TEST, None)  # the marker's, asked for late (request.getfixturevalue)
    if marked is not None and request.node.stash.get(_IN_CALL, False):  # one fixture: its run() replaces
        return marked  # the whole call (a review's two fixtures left the baseline uncompared in silence);
    # not an earlier run's, which a plain run leaves in the stash (a rerun got it, its misuse passed)
    return _new_fixture(request.node, request.config.stash[RUN])


def _new_fixture(item: pytest.Item, state: RunState) -> OpprofFixture:
    """The test's fixture object, as the fixture or the marker makes it; kept in the item's stash."""
    from .decide import RANGE_MEASUREMENTS
    from .fixture import OpprofFixture

    fixture = OpprofFixture(item.nodeid, state.settings.measuring, _clock_sampler(state), pytest.fail)
    if state.settings.update_baseline:  # its run() takes the recorded ranges' measurements in the test's context
        fixture.measure_ahead = RANGE_MEASUREMENTS
        fixture.ranges_wanted = partial(_ranges_wanted, item, fixture, state)  # asked in run() only
    elif state.settings.measuring:  # and, comparing, a suspected time's confirmations
        fixture.judge_in_run = partial(_judge_in_run, item, fixture, state)
    fixture.pauses_idle = hasattr(item.config, "workerinput")  # other xdist workers measure beside it
    fixture.asked_by = _asked_by(item)
    item.stash[TEST] = fixture
    return fixture


def _asked_by(item: pytest.Item) -> str | None:
    """The fixture that asked for opprof where the test's own arguments do not (an autouse one),
    read from pytest's fixture info (None where the test asks, or that info is not there)."""
    info = getattr(item, "_fixtureinfo", None)
    own, defs = getattr(info, "argnames", None), getattr(info, "name2fixturedefs", None)
    if own is None or defs is None or "opprof" in own:
        return None
    return next((name for name, found in defs.items() if any("opprof" in d.argnames for d in found)), None)


def _ranges_wanted(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> bool:
    """Recording: whether run() takes the recorded ranges' measurements (decide.ranges_serve): not
    for an unusable file, nor for one the first measurement keeps as it is."""
    from .decide import ranges_serve

    if state.device_key is None or not state.settings.update_baseline:
        return True
    nodeid, (path, shown, root) = _baseline_id(item), _baseline_place(item, state)
    current = _measurement(fixture, nodeid, state, fixture.captures)
    return ranges_serve(
        path, shown, nodeid, current, _rule_for(item, state.settings), state.settings.update_baseline, root
    )


def _clock_sampler(state: RunState) -> Callable[[], Any] | None:
    """Samples the clocks of the GPU torch uses, when NVML can see it."""
    nvml, handle = state.nvml, state.gpu_handle
    if nvml is None or handle is None:
        return None
    return lambda: nvml.clock_sample(handle)


# -- running a test ----------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """torch's first profiler start, paid before the tests (on each xdist worker) when one of
    them is measured: not in the first measured test's time, nor under its timeout."""
    state = session.config.stash.get(RUN, None)
    if state is None or not state.settings.measuring or session.config.option.collectonly:
        return
    from .capture import warm_profiler

    state.ran_tests = True
    if any(_carries(item) for item in session.items):
        warm_profiler()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    state = item.config.stash[RUN]
    if not state.settings.measuring:
        return (yield)
    from .capture import profiler_left_running

    fixture = item.stash.get(TEST, None)
    if fixture is None and item.get_closest_marker(MARKER) is not None:
        fixture = _new_fixture(item, state)
    if (
        fixture is not None and not fixture.captures and profiler_left_running()
    ):  # before the whole call: not the test's
        pytest.fail(profiler_left_on(state.profiler_left_by), pytrace=False)
    if fixture is None:
        with _calling(item):
            result = yield
        late = item.stash.get(TEST, None)  # the test asked for it in its body: request.getfixturevalue("opprof")
        if late is not None and _call_passed(item):
            if late.profile is None and not late.error_messages:
                _measured_nothing(item, late, state, asked_late_unmeasured, "unmeasured")
            _judge_call(item, late, state)
        return result
    if fixture.captures:  # a fixture of the test measured: its capture is the test's, and the body's
        fixture.body_uncaptured = True
        with _calling(item):
            result = yield  # ops are not captured (the review's numerics check after a fixture's gate
        if _call_passed(item):  # became the test's baseline); a run() in the body measures
            _judge_call(item, fixture, state)
        return result
    fixture.start_whole_call()
    try:
        with _calling(item):
            result = yield
    except BaseException as exc:
        fixture.end_whole_call(raised=exc)
        raise
    fixture.end_whole_call(raised=_unittest_outcome(item))
    if _call_passed(item):
        _judge_call(item, fixture, state)
    return result


_IN_CALL = pytest.StashKey[bool]()  # the test's call is running: a call report made now is a subtest's
_SUBTESTS_FAILED = pytest.StashKey[int]()  # the call's failed subtests: the test fails at its end


@contextmanager
def _calling(item: pytest.Item) -> Iterator[None]:
    item.stash[_IN_CALL], item.stash[_SUBTESTS_FAILED] = True, 0
    try:
        yield
    finally:
        item.stash[_IN_CALL] = False


def _unittest_outcome(item: pytest.Item) -> BaseException | None:
    """What ended a unittest TestCase's test, which raises nothing to pytest_runtest_call: pytest's
    unittest plugin keeps its failure, skip or expected failure on the item (`_excinfo`) until the
    call's report (a trial's failing TestCase test was recorded, its skipped ones erred as empty)."""
    kept = getattr(item, "_excinfo", None)
    return kept[0].value if isinstance(kept, list) and kept else None


UNITTEST_XFAILED = "_pytest.outcomes.XFailed"  # the short summary of an xfail() without a reason
UNITTEST_XFAIL_WHY = "failed as @unittest.expectedFailure expects (unittest hands pytest no exception to name)"


def _is_unittest(item: pytest.Item) -> bool:
    """A unittest.TestCase's test (pytest's TestCaseFunction), told by its class, not its attributes."""
    return any(cls.__name__ == "TestCaseFunction" for cls in type(item).__mro__)


def _call_passed(item: pytest.Item) -> bool:
    """The call raised nothing, and fails at its end for no failed subtest (pytest's `subtests`,
    unittest's `subTest`) and no unittest outcome: its assertions and baseline are judged (a
    trial's test with a failed subtest was recorded)."""
    return not item.stash.get(_SUBTESTS_FAILED, 0) and _unittest_outcome(item) is None


def _judge_call(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> None:
    """After a call that passed: the assertions deferred to its end, then the baseline's verdicts."""
    failures = fixture.deferred_failures()
    if failures:
        _fail(item, failures)
    if fixture.stepped_aside and not fixture.error_messages:
        _measured_nothing(item, fixture, state, stepped_aside_unmeasured, "stepped_aside")
    failing = _baseline_step(item, fixture, state)
    if failing:
        _fail(item, failing)


def _fail(item: pytest.Item, messages: list[str]) -> None:
    pytest.fail(_runnable(item.config, "\n".join(messages)), pytrace=False)


def _runnable(config: pytest.Config, text: str) -> str:
    """The record commands `text` suggests, as the person who ran pytest can run them."""
    settings = config.stash[RUN].settings
    elsewhere = config.invocation_params.dir != config.rootpath
    return runnable_here(text, settings.location_flags, partial(_typed_id, config) if elsewhere else None)


def _typed_id(config: pytest.Config, nodeid: str) -> str:
    """A node id (relative to the rootdir) as a test id given in the folder pytest ran in."""
    path, sep, rest = nodeid.partition("::")
    return reached_from(config.rootpath / path, config.invocation_params.dir) + sep + rest


def _measured_nothing(
    item: pytest.Item, fixture: OpprofFixture, state: RunState, why: Callable[[str | None], str], check: str
) -> None:
    """A measured test that measured nothing (the whole-call capture stepped aside for the test's
    own profiler, or the test asked for the fixture too late for it), with no assertion left to say
    so: an error when a baseline (or --opprof-require-baseline) expected a measurement, which would
    otherwise go uncompared in silence; else a warning check named `check`. `why(baseline)`: the line."""
    from .analysis.model import WARNING, Check

    settings = state.settings
    path, shown, _ = _baseline_place(item, state)
    comparing = not settings.update_baseline
    if comparing and state.device_key is not None and (path.is_file() or settings.require_baseline):
        fixture.error_messages.append(f"opprof: {why(shown)}")
    else:
        _add_check(item, Check(check, WARNING, why(None)))


def _baseline_place(item: pytest.Item, state: RunState) -> tuple[Path, str, Path]:
    """The test's baseline file, that path as the run's lines show it (relative to the rootdir),
    and the baseline folder it is read and written inside."""
    from .baseline import baseline_file

    settings, rootpath = state.settings, item.config.rootpath
    path = baseline_file(rootpath, settings.baseline_dir, state.device_key or "", _baseline_id(item))
    return path, shown_path(path, rootpath), baseline_root(rootpath, settings.baseline_dir)


def _measurement(measured: Any, nodeid: str, state: RunState, number: int) -> Measurement:
    """A capture (the fixture, or a Remeasured) as its baseline document and the machine's state;
    `number`: which of the test's captures it is (or measures again)."""
    from .baseline import baseline_from_profile
    from .decide import Measurement
    from .verdicts import Machine

    doc = baseline_from_profile(measured.profile, nodeid, state.device_key or "", state.device, number)
    machine = Machine(
        measured.cpu_wait, measured.unreliable, measured.python_tracer, measured.cpu_waited_ms,
        measured.profile.compiled_in,
    )  # fmt: skip
    return Measurement(doc, machine)


def _remeasured(again: Any, nodeid: str, state: RunState, number: int) -> Measurement | None:
    """A further measurement for `decide`: None past the last, or for one with trust errors."""
    return None if again is None or again.profile.errors else _measurement(again, nodeid, state, number)


def _judge_in_run(
    item: pytest.Item, fixture: OpprofFixture, state: RunState, again: Callable[[], Remeasured | None]
) -> None:
    """Comparing: judge run()'s measurement against the test's baseline before run() returns,
    calling `again` for each confirmation a suspected time asks, so that fn runs in the test's own
    context (after the body, a file it opened around run() was closed). The baseline step, after
    the body, gives this decision while run()'s capture is still the latest."""
    from .decide import judged_early

    if state.device_key is None:
        return
    nodeid, (path, shown, root) = _baseline_id(item), _baseline_place(item, state)
    current = _measurement(fixture, nodeid, state, fixture.captures)
    remeasure = lambda: _remeasured(again(), nodeid, state, fixture.captures)  # noqa: E731
    judged = judged_early(path, shown, nodeid, current, _rule_for(item, state.settings), remeasure, root)
    item.stash[_JUDGED] = RunJudged(fixture.captures, current, judged)  # judged None: no usable baseline


@dataclass(frozen=True, slots=True)
class RunJudged:
    """A capture (by its number among the test's), its measurement and, where run() judged it,
    the decision (not the profile: a later capture would leave it held until teardown)."""

    capture: int
    current: Measurement
    judged: Judged | None


_JUDGED = pytest.StashKey[RunJudged]()


def _baseline_step(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> list[str]:
    """Compare with the test's baseline, or record it; return the failing verdicts' messages."""
    from .baseline import Undo, file_bytes
    from .decide import baseline_step
    from .results import WRITTEN, format_junit_verdicts

    profile = fixture.profile
    if profile is None or fixture.error_messages or state.device_key is None:
        return []
    settings, nodeid = state.settings, _baseline_id(item)
    path, shown, root = _baseline_place(item, state)

    def remeasure() -> Measurement | None:  # recording: the ranges' measurements run() took
        return _remeasured(fixture.next_measurement(), nodeid, state, fixture.captures)

    rule = _rule_for(item, settings)
    early = item.stash.get(_JUDGED, None)
    if early is None or early.capture != fixture.captures:  # none, or a later capture replaced it
        early = RunJudged(fixture.captures, _measurement(fixture, nodeid, state, fixture.captures), None)

    def keep_undo() -> None:  # put the file back should the test still err (in its teardown)
        item.stash[_UNDO] = Undo(path, file_bytes(path), root)

    result = baseline_step(
        path, shown, nodeid, early.current, rule, settings.update_baseline,
        # comparing, run() took the confirmations (none where the baseline holds another capture)
        remeasure if fixture.can_measure_again and settings.update_baseline else None, root, keep_undo, early.judged,
    )  # fmt: skip
    if result.status not in WRITTEN and _UNDO in item.stash:  # the write failed: nothing to put back
        del item.stash[_UNDO]
    fixture.baseline = result
    item.user_properties.extend(format_junit_verdicts(result))
    fixture.error_messages.extend(
        result.error_messages(nodeid, rule, settings.strict, bool(settings.update_baseline), settings.require_baseline)
    )
    return [] if settings.update_baseline else result.failing(rule, nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "call" and item.stash.get(_IN_CALL, False):  # a subtest's, made during the call
        if report.failed:
            item.stash[_SUBTESTS_FAILED] = item.stash.get(_SUBTESTS_FAILED, 0) + 1
        return report  # the call's own report comes at its end, once
    fixture = item.stash.get(TEST, None)
    if fixture is None and call.when == "setup" and not report.passed and _measured(item):
        _ended_at_setup(item, report)
    if call.when == "setup" and report.passed and hasattr(item.config, "workerinput") and _measured(item):
        report.opprof_measured = True  # the controller: a crash is a measured test's
    if fixture is None or not fixture.enabled:
        return report
    if call.when == "call" and report.passed and fixture.error_messages:
        # Untrusted numbers or an unusable baseline are neither a pass nor a fail: an error.
        report.outcome = "failed"
        report.longrepr = UntrustedRepr(_runnable(item.config, "\n".join(fixture.error_messages)))
        report.opprof_untrusted = True
        # junitxml writes a call's error as a <failure>: a property tells a dashboard it is an error
        item.user_properties.append(("opprof.outcome", "error"))
    from .report import TestResult

    result = item.stash.setdefault(_RESULT, TestResult(item.nodeid))
    outcome, failure = _outcome_word(report), _failure_message(report)
    if outcome == "xfailed" and _is_unittest(item) and failure == UNITTEST_XFAILED:
        failure = UNITTEST_XFAIL_WHY  # pytest's xfail of an expectedFailure, which carries no message
    if call.when == "call" and outcome == "passed" and (failed := item.stash.get(_SUBTESTS_FAILED, 0)):
        # pytest fails it after this hook (its `subtests` fixture); a unittest test it reports passed
        outcome, failure = "failed", subtests_failed(failed, unittest=_is_unittest(item))
    result.record_phase(call.when, outcome, failure if outcome not in ("passed", "xpassed") else None)
    if call.when == "call":
        _take_profile(item, call, report, fixture, result)
        if _UNDO in item.stash and outcome in ("failed", "error", "xfailed"):  # failed after its call passed
            _put_back(item.stash[_UNDO], fixture)
            del item.stash[_UNDO]
        if _UNDO in item.stash and hasattr(item.config, "workerinput"):  # the controller undoes it if this worker dies
            report.opprof_undo = json.dumps(item.stash[_UNDO].to_dict())
    if call.when == "teardown":
        undo = item.stash.get(_UNDO, None)
        if undo is not None and report.failed:
            _put_back(undo, fixture)
        result.baseline = fixture.baseline
        _finish_test(item, report, result)
        # Items live for the whole session: let the test's events and profile go now.
        del item.stash[_RESULT], item.stash[TEST]
        fixture._release()  # the plugin owns the fixture's life
        if undo is not None:
            del item.stash[_UNDO]
        if _JUDGED in item.stash:
            del item.stash[_JUDGED]
    return report


_RESULT = pytest.StashKey["TestResult"]()
_TRACED = pytest.StashKey[bool]()  # this item wrote a trace in this session
_CHECKS = pytest.StashKey["list[Check]"]()  # the run's checks of a test, beside its profile's (a thread leak...)


def _add_check(item: pytest.Item, check: Check) -> None:
    item.stash.setdefault(_CHECKS, []).append(check)


def _take_profile(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    report: pytest.TestReport,
    fixture: OpprofFixture,
    result: TestResult,
) -> None:
    """The call's profile for the reports: the latest finished capture, or, when the test failed
    by the exception that ended a capture, that capture as far as it went (its timeline)."""
    from .analysis.checks import contention_check
    from .results import format_junit_properties

    ended = report.failed or _outcome_word(report) == "xfailed"  # an xfail's capture as far as it went too
    cut_short = fixture.cut_short(call.excinfo.value) if ended and call.excinfo is not None else None
    if cut_short is not None:
        result.profile, result.cut_short = cut_short, True
        item.user_properties.append(("opprof.cut_short", "true"))
    elif fixture.profile is not None:
        result.profile = fixture.profile
        result.clocks, result.unreliable = fixture.clocks, fixture.unreliable
        result.cpu_wait = fixture.cpu_wait
        if contended := contention_check(fixture.cpu_wait, fixture.profile.other_threads, fixture.child_processes):
            _add_check(item, contended)
    if result.profile is not None:
        result.captures = fixture.captures
        item.user_properties.extend(format_junit_properties(result.profile, item.config.stash[RUN].settings.top))
        worker = getattr(item.config, "workerinput", {}).get("workerid")
        if worker is not None:  # `--dist each` lists a test once per worker: the JSON and CSV say which, so does this
            item.user_properties.append(("opprof.worker", worker))


_UNDO = pytest.StashKey["Undo"]()  # puts the baseline file this test wrote back as it was


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """A run stopped (pytest.exit, Ctrl-C) after the test's file was written and before its
    teardown finished gives no teardown report: the file goes back as it was here (a trial's
    `pytest.exit` in a fixture's teardown left it rewritten, and no line said so)."""
    try:
        return (yield)
    except BaseException as exc:
        undo = item.stash.get(_UNDO, None)
        fixture = item.stash.get(TEST, None)
        if undo is not None:
            del item.stash[_UNDO]
            with suppress(OSError):  # the run is stopping: its own exception is the one to show
                undo()
                if fixture is not None:
                    fixture.baseline = None  # not recorded: the file is as it was
        if isinstance(exc, (KeyboardInterrupt, pytest.exit.Exception)):
            _stopped_in(item)
        raise


def _stopped_in(item: pytest.Item) -> None:
    """A run stopped in a test (Ctrl-C, pytest.exit): the summary and the JSON say where, and a
    test whose call had ended is recorded as it ended, as pytest's own summary counts it (a trial's
    stop in a fixture's teardown left a failed test out of every report, which then read `no test
    was measured`). Not on an xdist worker: its controller reports."""
    state = item.config.stash.get(RUN, None)
    if state is None or not state.settings.measuring or hasattr(item.config, "workerinput"):
        return
    state.stopped_in = state.stopped_in or item.nodeid
    result, fixture = item.stash.get(_RESULT, None), item.stash.get(TEST, None)
    collector = item.config.pluginmanager.get_plugin("opprof-records")
    if result is None or fixture is None or result.outcome is None or collector is None:
        return  # its call never ended: it has no outcome to report
    result.baseline = fixture.baseline
    collector.add(_finished(item, result)[0])


def _put_back(undo: Undo, fixture: OpprofFixture) -> None:
    """A test that errs in its teardown after its baseline was written is not recorded: the file
    goes back as it was (a baseline records code that passes its own checks). So is one whose
    call a plugin failed in its report after the call passed (pytest-check's soft assertions: a
    trial's failing test was recorded)."""
    try:
        undo()
    except OSError:  # the file stays written, and the summary counts it so
        return
    fixture.baseline = None


REPEAT_PARAM = "__pytest_repeat_step_number"  # pytest-repeat's parameter: `--count 3` runs test_x[1-3] ... [3-3]
_REPEAT_ID = re.compile(r"([\[-])(\d+)-(\d+)\]$")


def _baseline_id(item: pytest.Item) -> str:
    """The node id the test's baseline is named by and holds: a repeat of pytest-repeat's
    (`test_x[1-3]`, `test_p[a-2-3]`, its id last) is the test it repeats, so all repeats are
    judged against, and record, the one baseline, which no repeat can call an orphan."""
    nodeid = os_text(item.nodeid)  # test_é.py read under a C locale: its baseline is the UTF-8 locale's
    callspec = getattr(item, "callspec", None)
    if callspec is None or REPEAT_PARAM not in callspec.params:
        return nodeid
    found = _REPEAT_ID.search(nodeid)
    if found is None or int(found[2]) != callspec.params[REPEAT_PARAM] + 1:
        return nodeid  # not the id pytest-repeat gives: judged as it is named
    return nodeid[: found.start()] + ("" if found[1] == "[" else "]")


def _refuse_outside_rootdir(config: pytest.Config, state: RunState, items: list[pytest.Item]) -> None:
    """Measured tests whose node ids name no file under the rootdir (a file outside it: pytest
    names its tests `::test_x`, one baseline for every test of that name): a usage error at start,
    one line a file; on an xdist worker, which cannot stop the run, each such test errs."""
    if not state.settings.measuring:
        return
    problems: dict[Path, str] = {}
    for item in items:
        if _carries(item) and _outside_rootdir(item.nodeid, item.path, config.rootpath):
            problem = outside_rootdir(str(item.path), str(config.rootpath), item.nodeid)
            problems.setdefault(item.path, problem)
            if hasattr(config, "workerinput"):
                item.stash[BAD_MARKER] = problem
    if problems and not hasattr(config, "workerinput"):
        raise pytest.UsageError("\n".join(_first_of(list(problems.values()))))


def _outside_rootdir(nodeid: str, path: Path, rootpath: Path) -> bool:
    """A node id whose file part is empty (`::test_x`) or climbs out of the rootdir (`../t.py::x`),
    or a file outside it: a package's test file there gets an id from its package's parent
    (`test_same.py::test_x` for both `../a/test_same.py` and `../b/test_same.py`, in a trial).
    A file linked into the rootdir is under it (its path is the link's)."""
    file = nodeid.split("::", 1)[0]
    if file == "" or file == ".." or file.startswith("../"):
        return True
    return not path.is_relative_to(rootpath) and not path.resolve().is_relative_to(rootpath.resolve())


def _carries(item: pytest.Item) -> bool:
    """A test --opprof measures: it has the marker or uses the fixture."""
    return item.get_closest_marker(MARKER) is not None or _uses_our_fixture(item)


def _uses_our_fixture(item: pytest.Item) -> bool:
    """Whether the test's `opprof` is this plugin's fixture, or a fixture of the test's that
    requests it (a wrapper): not one of its own by that name, nor a parametrize argument."""
    if "opprof" not in getattr(item, "fixturenames", ()):
        return False
    info = getattr(item, "_fixtureinfo", None)
    chain = info.name2fixturedefs.get("opprof") if info is not None else None
    if not chain:
        return True  # an item pytest gives no fixture definitions for: taken by its name
    for definition in reversed(chain):  # the closest first; a wrapper asks for the one above it
        func = definition.func
        if getattr(func, "__module__", None) == __name__ and getattr(func, "__name__", None) == "opprof":
            return True
        if "opprof" not in definition.argnames:
            return False
    return False


def _measured(item: pytest.Item) -> bool:
    return _carries(item) and item.config.stash[RUN].settings.measuring


def _outcome_word(report: pytest.TestReport) -> str:
    """A phase's outcome for our reports: pytest's, with an untrusted measurement an error and
    an xfail test's run `xfailed` or `xpassed` (pytest reports an expected failure as skipped)."""
    if getattr(report, "opprof_untrusted", False):
        return "error"
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed" if report.passed else report.outcome
    return report.outcome


def _ended_at_setup(item: pytest.Item, report: pytest.TestReport) -> None:
    """A measured test that a skip marker skipped, or a fixture failed, before the opprof fixture
    existed still has its line in the reports, as one that ended while running has."""
    from .report import TestResult

    result = TestResult(item.nodeid)
    outcome = "error" if report.failed else _outcome_word(report)
    result.record_phase("setup", outcome, _failure_message(report) if outcome == "error" else None)
    _finish_test(item, report, result)


def _failure_message(report: pytest.TestReport) -> str | None:
    """Why a phase failed, as pytest's short summary says it: the exception's message (an
    assertion's, or the verdicts opprof failed the test with), else the report's text."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return message if isinstance(message, str) and message else (report.longreprtext or None)


class UntrustedRepr:
    """The long report of an untrusted measurement: its text, and the `reprcrash` through which
    pytest 8's short summary shows the reason (pytest 9 shows a plain string's too)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = SimpleNamespace(message=text)

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:  # what xdist carries to its controller, and JUnit XML writes
        return self.text


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # xdist carries a report's long repr to its controller as text: an untrusted one gets back the
    # reprcrash through which pytest 8's short summary names the reason.
    if getattr(report, "opprof_untrusted", False) and isinstance(report.longrepr, str):
        report.longrepr = UntrustedRepr(report.longrepr)  # type: ignore[assignment]  # read duck-typed


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, Any] | None:
    if getattr(report, "opprof_untrusted", False):
        # A plain word, red from the failed outcome: pytest < 8.3's short summary printed a
        # (word, markup) pair as a tuple.
        return "error", "E", "ERROR"
    return None


def _finish_test(item: pytest.Item, report: pytest.TestReport, result: TestResult) -> None:
    from .results import format_junit_checks

    record, checks = _finished(item, result)
    # junitxml reads the teardown report's properties: the test's own checks beside its profile's
    report.user_properties.extend(format_junit_checks(checks))
    # The record rides on the teardown report, so that the xdist controller receives it too.
    # As compact JSON text: xdist carries it, and pytest keeps every report until the end of the
    # run (as dicts, 500 tests' profiles held ~75 MB).
    report.opprof_record = json.dumps(record.to_dict(), separators=(",", ":"))  # type: ignore[attr-defined]


def _finished(item: pytest.Item, result: TestResult) -> tuple[TestRecord, list[Check]]:
    """The test's record, its trace written, and the run's checks of it."""
    from .baseline import stable_facts

    state = item.config.stash[RUN]
    settings = state.settings
    result.worker = getattr(item.config, "workerinput", {}).get("workerid")
    result.everywhere = state.trace_tag is not None
    checks: list[Check] = item.stash.get(_CHECKS, [])
    result.extra_checks = tuple(checks)
    item.stash[_CHECKS] = []
    traced = item.stash.get(_TRACED, False)  # by an earlier run of this item (a rerun plugin's): it stays
    result.export_trace(
        settings.trace_dir, settings.trace == "all", state.device_key,
        keep=traced, tag=state.trace_tag, environment=stable_facts(state.device),
    )  # fmt: skip
    item.stash[_TRACED] = traced or result.trace_path is not None
    return _to_record(result, settings), checks


def _to_record(result: TestResult, settings: Settings) -> TestRecord:
    """The test's record, with what the run's reports want of it."""
    return result.to_record(
        settings.top,
        with_profile=settings.json_path is not None,
        with_csv=settings.csv_path is not None,
        html_dir=Path(settings.html_path).absolute().parent if settings.html_path else None,
    )


# -- the end of the run ------------------------------------------------------------------------


def _looked_in(config: pytest.Config, state: RunState) -> str | None:
    """The device key's baseline folder, for the 'no baseline' line (None when no test lacked one)."""
    from .baseline import lookup_folder

    if state.device_key is None or not any(r.baseline_status == "missing" for r in state.records):
        return None
    return lookup_folder(baseline_root(config.rootpath, state.settings.baseline_dir), state.device_key, config.rootpath)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(RUN, None)
    if state is None or hasattr(config, "workerinput"):  # xdist workers report to the controller
        return
    state.summarized = True
    if not state.settings.measuring:
        _inert_lines(terminalreporter, state)
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
        say(_runnable(config, line))
    if reports:
        _write_outputs(config, state, say)
    note = _rootdir_note(config, state, lines)
    if note:
        say(note)


def _cpu_wait_unknown() -> bool:
    """Whether this system keeps no per-thread CPU wait (macOS, Windows: no /proc), which the
    contention check and the under-load marking of baselines read (a review: silent there)."""
    from .device import cpu_wait_known

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


def _inert_lines(terminalreporter: Any, state: RunState) -> None:
    """A run without --opprof: what it carries that only a measuring run would use."""
    say = _writer(terminalreporter)
    if state.carrying:
        say(inert_summary(state.carrying))
    if state.idle_outputs:
        say(idle_outputs(state.idle_outputs))


def _records_lines(config: pytest.Config, state: RunState) -> list[str]:
    """The measured tests' tables and lines, and the baseline files whose names clash by case."""
    from .baseline import case_clashes
    from .report import summary_lines

    # a bare record command would record tests this run did not measure: those it picked out, or
    # those after a stop (-x, --maxfail, Ctrl-C) (a review's -x run was told to record them all)
    picked = _picked_some(config) or bool(getattr(config.option, "maxfail", 0)) or state.stopped_in is not None
    lines = (
        summary_lines(
            state.records,
            config.option.verbose > 0,
            getattr(config.option, "numprocesses", None),
            bool(state.settings.update_baseline),
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
    from .renames import renamed_lines, renamed_pairs

    if not state.orphans:
        return []

    def reached(path: str) -> str:  # as the folder pytest ran in reaches it, for the commands
        return reached_from(config.rootpath / path, config.invocation_params.dir)

    pairs = renamed_pairs(state.records, state.orphans)
    paired = {old for _, _, old in pairs}
    line = orphans_line(state.orphans, config.option.verbose > 0, [reached(p) for p in state.orphans], paired)
    return [line, *renamed_lines(pairs, reached, _under_other_keys(config, state))]


def _run_end_lines(config: pytest.Config, state: RunState, reports: bool) -> list[str]:
    """The line that goes first where the run stopped early, or measured nothing but writes reports
    (none under --collect-only)."""
    if state.spool is not None and config.option.collectonly:
        return []
    if state.stopped_in is not None:  # not "no test was measured": the run ended before its end
        return [run_stopped(_typed_id(config, state.stopped_in), len(state.records), reports)]
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
    from .htmlreport import write_html_report
    from .runfiles import write_csv_report, write_run_report

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
