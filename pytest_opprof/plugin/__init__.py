"""The pytest layer, the only package of pytest-opprof that imports pytest (DESIGN §2), and its
entry point: options, the run's configuration (the device and its key, the measuring set up), the
report header and the `opprof` fixture. Glue only; its other hooks are in the modules
`pytest_plugins` names (collection, a test's run and judgement, the summary), beside what they
share (`base`), the fixture's judgement (`judge`), the watchers (`watch`) and the options (`options`).

Without --opprof nothing here imports torch or starts a profiler, nor the measuring modules (the
analysis, captures, baselines, verdicts, reports): the functions that use them import them, so a
plain run pays for the options' modules only (tests/test_plugin.py, bench/inert_cost.py).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .. import hooks
from ..device import Nvml, describe, device_facts, former_key, gpus_like_first, resolve_key, use_worker_gpu
from ..errors import device_key_hook_raised, former_key_source, torch_not_importable, worker_gpus
from ..layout import baseline_root, reached_from, shown_path
from ..settings import OPTIONS, RunState, Settings, SettingsError, parse_settings, trace_dir_problem
from ..textout import terminal_columns
from .base import IN_CALL, MARKER, RUN, TEST
from .judge import new_fixture
from .options import (
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
from .watch import ProfilerLeaks, RecordCollector, SettingLeaks

if TYPE_CHECKING:  # the measuring modules, for annotations: imported where they run (the docstring)
    from ..fixture import OpprofFixture
    from ..runfiles import ReportSpool

# The plugin's other hooks, registered with this module (in this order). This module imports
# none of them: pytest would warn that it cannot rewrite their asserts (an editable install's run)
pytest_plugins = (
    f"{__name__}.collect",
    f"{__name__}.run",
    f"{__name__}.summary",
)

TORCH_NUMPY_WARNING = "Failed to initialize NumPy"
_PACKAGE = __name__.rpartition(".")[0]  # pytest_opprof


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


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
    state.table_width = _table_width(config)
    if settings.measuring:
        _start_measuring(config, state)
    config.stash[RUN] = state
    if reporting:
        everywhere = getattr(config.option, "dist", None) == "each"
        config.pluginmanager.register(RecordCollector(state, everywhere), "opprof-records")
    if settings.measuring:
        config.pluginmanager.register(SettingLeaks(), "opprof-setting-leaks")
        config.pluginmanager.register(ProfilerLeaks(state), "opprof-profiler-leaks")


def _table_width(config: pytest.Config) -> int | None:
    """The width the summary's tables fit: the terminal's where the run prints to one and pytest
    cuts its own long lines (not under -vv); None (names whole) for a CI log or a pipe. An xdist
    worker prints nothing: it takes the controller's."""
    if hasattr(config, "workerinput"):
        width = config.workerinput.get("opprof_table_width")
        return width if isinstance(width, int) else None
    if (getattr(config.option, "verbose", 0) or 0) >= 2:  # no such option: -p no:terminal
        return None
    return terminal_columns()


def _report_spool(settings: Settings) -> ReportSpool | None:
    """Where the measured tests' records wait for the JSON, CSV and HTML reports asked for."""
    from ..runfiles import ReportSpool

    if not (settings.json_path or settings.csv_path or settings.html_path):
        return None
    return ReportSpool(json=bool(settings.json_path), csv=bool(settings.csv_path), html=bool(settings.html_path))


def _start_measuring(config: pytest.Config, state: RunState) -> None:
    """What a measuring run sets up before any test: torch importable, its NumPy warning filtered,
    pytest's assert messages set aside from captures, Inductor's kernels profiled, the device and
    its key. A run without --opprof imports none of the measuring modules (nor torch)."""
    from ..capture import compiled_kernel_profiling, torch_import_problem

    # What each measured test uses, imported before the first one (its time and timeout), as the
    # profiler's first start is (pytest_runtestloop): an xdist worker's first test took ~70 ms more
    importlib.import_module("..fixture", __name__)
    importlib.import_module("..report", __name__)
    importlib.import_module("..results", __name__)
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
    (`amd-radeon-graphics-gfx90a`), a Windows x86-64 CPU `cpu-x86_64` (device.former_key): where
    only its former key's folder holds baselines, this run reads and writes that one, and the
    header says how to move them (an upgrade's run found none and was told to record them all anew)."""
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
        capture = sys.modules.get(f"{_PACKAGE}.capture")
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
    """The run's resources let go, after the reports plugin.summary writes first (tryfirst)."""
    state = config.stash.get(RUN, None)
    if state is not None and state.nvml is not None:
        state.nvml.close()
    if state is not None and state.spool is not None:
        state.spool.close()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(RUN, None)
    if state is not None:
        state.exit_status = int(exitstatus)


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
    if marked is not None and request.node.stash.get(IN_CALL, False):  # one fixture: its run() replaces
        return marked  # the whole call (a review's two fixtures left the baseline uncompared in silence);
    # not an earlier run's, which a plain run leaves in the stash (a rerun got it, its misuse passed)
    return new_fixture(request.node, request.config.stash[RUN])
