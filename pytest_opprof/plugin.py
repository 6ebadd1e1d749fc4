"""The pytest layer: options, the `opprof` marker and fixture, and the hooks. Glue only.

Without --opprof nothing here imports torch or starts a profiler.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from . import assertions
from .baseline import BaselineError, baseline_from_profile, baseline_path, read_baseline, write_baseline
from .compare import TIME, Machine, Rule, time_samples
from .decide import Measurement, decide
from .errors import closest_names, inert_summary, strict_inconclusive, untrusted_measurement
from .report import (
    TestResult,
    export_trace_path,
    format_junit_properties,
    format_problems,
    format_summary,
    run_report_json,
    write_json_atomic,
    xdist_noise_note,
)
from .settings import (
    OPTIONS,
    Option,
    Settings,
    SettingsError,
    parse_fail_on,
    parse_globs,
    parse_ms,
    parse_percentage,
    parse_settings,
)

MARKER = "opprof"
host_ns = time.perf_counter_ns  # the wall clock of the CPU-wait share (tests put a fake here)
# Per-test overrides of the run's comparison rule: keyword -> parser (raises ValueError).
MARKER_KEYWORDS: dict[str, Callable[[object], Any]] = {
    "tolerance": parse_percentage,
    "min_delta_ms": parse_ms,
    "ignore_ops": parse_globs,
    "fail_on": parse_fail_on,
}


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
    records: list[dict[str, Any]] = field(default_factory=list)  # one per measured test


RUN = pytest.StashKey[RunState]()


class _HookSpecs:
    @pytest.hookspec(firstresult=True)
    def pytest_opprof_device_key(self, config: pytest.Config, facts: dict[str, Any]) -> str | None:
        """Return the device key (the baseline folder) for this run, or None for the default.

        `facts` are the device facts (see `opprof show` or --opprof-json). Use it to share
        baselines between machines you know to be equal, or to split them by a fact the default
        key ignores. --opprof-device-key on the command line wins over this hook.
        """


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_HookSpecs)


TEST = pytest.StashKey["OpprofFixture"]()


# -- options ----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opprof", "operator-level performance assertions (pytest-opprof)")
    for option in OPTIONS:
        help_text = f"{option.help} [ini: {option.ini}]".replace("%", "%%")  # argparse formats help
        if option.metavar is None:
            group.addoption(option.flag, action="store_true", default=None, dest=_dest(option), help=help_text)
        elif option.const is not None:
            group.addoption(
                option.flag,
                nargs="?",
                const=option.const,
                default=None,
                dest=_dest(option),
                metavar=option.metavar,
                help=help_text,
            )
        else:
            group.addoption(option.flag, default=None, dest=_dest(option), metavar=option.metavar, help=help_text)
        parser.addini(option.ini, help=option.help, default=None)


def _dest(option: Option) -> str:
    return option.flag.lstrip("-").replace("-", "_")


def _read_option(config: pytest.Config, option: Option) -> tuple[object, str] | None:
    """The one helper every option goes through: CLI > ini > default."""
    value = config.getoption(_dest(option))
    if value is not None:
        return value, "command line"
    raw = config.getini(option.ini)
    if raw is None or raw == "" or raw == []:
        return None
    overrides = config.getoption("override_ini", None) or []
    if any(o.split("=", 1)[0] == option.ini for o in overrides):
        return raw, f"-o {option.ini}"
    return raw, config.inipath.name if config.inipath else "ini file"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: measure this test with pytest-opprof (the whole call is one step) when --opprof is on",
    )
    try:
        settings = parse_settings(lambda option: _read_option(config, option))
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = RunState(settings)
    if settings.measuring:
        _resolve_device(config, state)
    config.stash[RUN] = state
    if settings.measuring:
        config.pluginmanager.register(_RecordCollector(state), "opprof-records")


def _resolve_device(config: pytest.Config, state: RunState) -> None:
    """Device facts and the key: --opprof-device-key > pytest_opprof_device_key hook > facts."""
    from .device import Nvml, device_facts, device_key, valid_key

    state.nvml = Nvml()
    state.device, state.gpu_handle = device_facts(state.nvml)
    if state.settings.device_key:
        state.device_key, state.key_source = state.settings.device_key, "--opprof-device-key"
        return
    hooked = config.hook.pytest_opprof_device_key(config=config, facts=dict(state.device))
    if hooked is not None:
        if not isinstance(hooked, str) or not valid_key(hooked):
            raise pytest.UsageError(
                f"pytest_opprof_device_key returned {hooked!r}: expected a device key of lowercase letters, "
                "digits, '.', '_' or '-' (e.g. 'nvidia-a10'), or None for the default"
            )
        state.device_key, state.key_source = hooked, "pytest_opprof_device_key hook"
        return
    state.device_key = device_key(state.device)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(RUN, None)
    if state is not None and state.nvml is not None:
        state.nvml.close()


class _RecordCollector:
    """Collects each measured test's record from its report (from xdist workers too)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "opprof_record", None)
        if record is not None:
            self.state.records.append(record)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(RUN, None)
    if state is None or not state.settings.measuring:
        return ["opprof: off (pytest --opprof measures tests with the opprof fixture or marker)"]
    from .device import describe

    source = "" if state.key_source == "device" else f" (from {state.key_source})"
    return [
        f"opprof: device key {state.device_key}{source}; CPU ops always, CUDA when initialised",
        f"opprof: {describe(state.device)}",
    ]


# -- collection: the marker --------------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[RUN]
    for item in items:
        marker = item.get_closest_marker(MARKER)
        if marker is not None:
            _validate_marker(item, marker)
        if marker is not None or "opprof" in getattr(item, "fixturenames", ()):
            state.carrying += 1


def _validate_marker(item: pytest.Item, marker: pytest.Mark) -> None:
    if marker.args:
        msg = f"{item.nodeid}: @pytest.mark.opprof takes keyword arguments only, got {marker.args!r}"
        raise pytest.UsageError(msg)
    for key, value in marker.kwargs.items():
        parse = MARKER_KEYWORDS.get(key)
        if parse is None:
            close = closest_names(key, MARKER_KEYWORDS)
            hint = f"; did you mean {close[0]}?" if close else f"; it takes: {', '.join(sorted(MARKER_KEYWORDS))}"
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.opprof got an unknown keyword {key!r}{hint}")
        try:
            parse(value)
        except ValueError as exc:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.opprof({key}={value!r}): expected {exc}") from None


def _rule_for(item: pytest.Item, settings: Settings) -> Rule:
    """The run's rule, with the test's marker overrides."""
    values: dict[str, Any] = {
        "tolerance": settings.tolerance,
        "min_delta_ms": settings.min_delta_ms,
        "ignore_ops": settings.ignore_ops,
        "fail_on": settings.fail_on,
    }
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        values.update({key: MARKER_KEYWORDS[key](value) for key, value in marker.kwargs.items()})
    return Rule(**values)


# -- the fixture -------------------------------------------------------------------------------


def _wait_of(host: list[tuple[int, int | None]]) -> float | None:
    """The CPU-wait share between the first and last host sample of a capture."""
    from .device import wait_share

    return wait_share(host[0], host[-1]) if len(host) >= 2 else None


class Remeasured(NamedTuple):
    """A confirmation measurement and the state of the machine during it."""

    profile: Any
    cpu_wait: float | None
    unreliable: str | None


class OpprofFixture:
    """The `opprof` fixture: capture operators and assert on them.

    Three ways to capture; the latest finished capture wins:
    `run(fn, ...)`, `with capture():`, or nothing (the whole test call is one step, and
    assertions made in the body are checked when it returns).
    Without --opprof, `run` calls fn once and assertions do nothing.
    """

    def __init__(self, nodeid: str, enabled: bool, sampler: Callable[[], Any] | None = None) -> None:
        self.nodeid = nodeid
        self.enabled = enabled
        self._sampler = sampler  # GPU clock sample (device.ClockSample) or None
        self._clocks: list[Any] = []  # samples around the capture in progress
        self.clocks: list[dict[str, Any]] = []  # those of the latest finished capture
        self.unreliable: str | None = None  # why the GPU clocks make its times incomparable
        self._host: list[tuple[int, int | None]] = []  # (wall ns, CPU wait ns) around the capture
        self.cpu_wait: float | None = None  # share of the capture our threads waited for a CPU
        self._remeasure: Callable[[], Remeasured] | None = None  # measures run()'s fn again, for confirmation
        self._profile: Any = None
        self._whole_call: Any = None  # StepRecorder around the test call, until a capture of its own
        self._deferred: list[assertions.Check] = []
        self.errors: list[str] = []  # make the test an error: untrusted numbers, unusable baseline
        self.baseline: dict[str, Any] | None = None  # what the baseline step found and did

    @property
    def profile(self) -> Any:
        """The latest finished capture (a pytest_opprof.Profile), or None."""
        return self._profile

    # capture ----------------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], *args: Any, warmup: int = 3, steps: int = 10, **kwargs: Any) -> Any:
        """Profile `steps` calls of fn after `warmup` unprofiled ones; return fn's last result."""
        __tracebackhide__ = True
        if not self.enabled:
            return fn(*args, **kwargs)
        from .capture import run_steps, validate_run_args

        validate_run_args(fn, warmup, steps)
        self._drop_whole_call()
        self._clocks, self._host = [], []
        profile, result = run_steps(fn, args, kwargs, warmup, steps, probe=self._probe)
        self._finish(profile)
        self._remeasure = lambda: self._measure_again(fn, args, kwargs, warmup, steps)
        return result

    @property
    def can_measure_again(self) -> bool:
        """Whether the latest capture can be repeated (a run(), not a block or the whole call)."""
        return self._remeasure is not None

    def measure_again(self) -> Remeasured | None:
        """The latest run() once more, to confirm a suspected time change."""
        return self._remeasure() if self._remeasure is not None else None

    @contextmanager
    def capture(self) -> Iterator[None]:
        """Profile the block as one step."""
        if not self.enabled:
            yield
            return
        from .capture import StepRecorder

        self._drop_whole_call()
        self._clocks, self._host = [], []
        self._remeasure = None  # a block cannot be run again
        recorder = StepRecorder(self._probe)
        recorder.start()
        try:
            yield
        except BaseException:
            recorder.stop(keep=False)
            raise
        self._finish(recorder.stop())

    # assertions -------------------------------------------------------------------------------
    def assert_op_below(self, op: str, ms: float, per: str = "step", stat: str = "median") -> None:
        """Each op matching `op` takes at most `ms` ms per step (or per call), by `stat` over steps.
        Time is device time for ops that ran on a GPU, CPU time otherwise."""
        __tracebackhide__ = True
        if self.enabled:
            self._check(assertions.op_below(op, ms, per, stat))

    def assert_op_count(self, op: str, n: int | None = None, *, min: int | None = None, max: int | None = None) -> None:
        """Calls per step of the ops matching `op`: exactly `n` in every step, or within min/max."""
        __tracebackhide__ = True
        if self.enabled:
            self._check(assertions.op_count(op, n, min=min, max=max))

    def assert_no_op(self, op: str) -> None:
        """No op or memory op matching `op` ran (e.g. "aten::copy_", "Memcpy DtoH*")."""
        __tracebackhide__ = True
        if self.enabled:
            from .capture import is_known_op

            self._check(assertions.no_op(op, is_known_op))

    def assert_no_sync(self) -> None:
        """No host-device synchronisation: cuda/hip *Synchronize calls, aten::item,
        aten::_local_scalar_dense, device-to-host copies."""
        __tracebackhide__ = True
        if self.enabled:
            self._check(assertions.no_sync())

    def assert_total_below(self, ms: float, stat: str = "median") -> None:
        """The step's wall time is at most `ms` ms, by `stat` over steps."""
        __tracebackhide__ = True
        if self.enabled:
            self._check(assertions.total_below(ms, stat))

    # machinery --------------------------------------------------------------------------------
    def _check(self, check: assertions.Check) -> None:
        """Run a check now against the latest capture, or at the end of the test call when the
        whole call is being captured. Arguments were already validated by building `check`."""
        __tracebackhide__ = True
        if self._profile is None:
            if self._whole_call is None:
                pytest.fail("nothing was captured yet: call opprof.run(...) or use `with opprof.capture():` first")
            self._deferred.append(check)
            return
        if self.errors:
            return  # untrusted numbers: the test becomes an error instead of passing or failing
        message = check(self._profile)
        if message is not None:
            raise AssertionError(message)

    def _probe(self) -> None:
        self._sample(self._host, self._clocks)

    def _sample(self, host: list[tuple[int, int | None]], clocks: list[Any]) -> None:
        """Host time and CPU wait, and a GPU clock sample, just before or after a capture."""
        from .device import cpu_wait_ns

        host.append((host_ns(), cpu_wait_ns()))
        if self._sampler is not None:
            clocks.append(self._sampler())

    def _measure_again(self, fn: Callable[..., Any], args: Any, kwargs: Any, warmup: int, steps: int) -> Remeasured:
        """run()'s measurement once more, with its own CPU-wait share and GPU clock verdict (the
        report keeps the first one's)."""
        from .capture import run_steps
        from .device import unreliable_reason

        host: list[tuple[int, int | None]] = []
        clocks: list[Any] = []
        profile, _ = run_steps(fn, args, kwargs, warmup, steps, probe=lambda: self._sample(host, clocks))
        return Remeasured(profile, _wait_of(host), unreliable_reason(clocks))

    def _finish(self, profile: Any) -> None:
        from .device import unreliable_reason

        self._profile = profile
        self.clocks = [c.to_dict() for c in self._clocks if c is not None]
        self.unreliable = unreliable_reason(self._clocks)
        self.cpu_wait = _wait_of(self._host)
        trust = [f"{c.name}: {c.message}" for c in profile.errors]
        self.errors = [untrusted_measurement(trust)] if trust else []

    def _drop_whole_call(self) -> None:
        if self._whole_call is not None:
            self._whole_call.stop(keep=False)
            self._whole_call = None

    def _start_whole_call(self) -> None:
        from .capture import StepRecorder

        self._clocks, self._host = [], []
        self._whole_call = StepRecorder(self._probe)
        self._whole_call.start()

    def _end_whole_call(self, keep: bool) -> None:
        recorder, self._whole_call = self._whole_call, None
        if recorder is not None:
            profile = recorder.stop(keep=keep)
            if profile is not None:
                self._finish(profile)

    def _deferred_failures(self) -> list[str]:
        if self._profile is None or self.errors:
            return []
        return [m for check in self._deferred if (m := check(self._profile)) is not None]


@pytest.fixture
def opprof(request: pytest.FixtureRequest) -> OpprofFixture:
    """Capture the operators of the code under test and assert on them (see OpprofFixture)."""
    state = request.config.stash[RUN]
    fixture = OpprofFixture(request.node.nodeid, state.settings.measuring, _clock_sampler(state))
    request.node.stash[TEST] = fixture
    return fixture


def _clock_sampler(state: RunState) -> Callable[[], Any] | None:
    """Samples the clocks of the GPU torch uses, when NVML can see it."""
    nvml, handle = state.nvml, state.gpu_handle
    if nvml is None or handle is None:
        return None
    return lambda: nvml.clock_sample(handle)


# -- running a test ----------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    state = item.config.stash[RUN]
    if not state.settings.measuring:
        return (yield)
    fixture = item.stash.get(TEST, None)
    if fixture is None:
        if item.get_closest_marker(MARKER) is None:
            return (yield)
        fixture = item.stash[TEST] = OpprofFixture(item.nodeid, True, _clock_sampler(state))
    fixture._start_whole_call()
    try:
        result = yield
    except BaseException:
        fixture._end_whole_call(keep=False)
        raise
    fixture._end_whole_call(keep=True)
    failures = fixture._deferred_failures()
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
    failing = _baseline_step(item, fixture, state)
    if failing:
        pytest.fail("\n".join(failing), pytrace=False)
    return result


def _baseline_step(item: pytest.Item, fixture: OpprofFixture, state: RunState) -> list[str]:
    """Compare with the test's baseline, or record it; return the failing verdicts' messages."""
    profile = fixture.profile
    if profile is None or fixture.errors or state.device_key is None:
        return []
    settings = state.settings
    rootpath = item.config.rootpath
    root = Path(settings.baseline_dir) if settings.baseline_dir else rootpath / ".opprof"
    path = baseline_path(root if root.is_absolute() else rootpath / root, state.device_key, item.nodeid)
    shown = _relative(path, rootpath)
    try:
        old = read_baseline(path, item.nodeid)
    except BaselineError as exc:
        fixture.errors.append(f"opprof: {exc}")
        fixture.baseline = {"path": shown, "status": "unusable", "verdicts": []}
        return []
    current = Measurement(
        baseline_from_profile(profile, item.nodeid, state.device_key, state.device),
        Machine(fixture.cpu_wait, fixture.unreliable),
    )

    def remeasure() -> Measurement | None:
        again = fixture.measure_again()
        if again is None or again.profile.errors:
            return None
        doc = baseline_from_profile(again.profile, item.nodeid, state.device_key, state.device)
        return Measurement(doc, Machine(again.cpu_wait, again.unreliable))

    rule = _rule_for(item, settings)
    outcome = decide(
        current, old, rule, settings.update_baseline, remeasure if fixture.can_measure_again else None, shown
    )
    if outcome.write is not None:
        write_baseline(path, outcome.write)
    fixture.baseline = {
        "path": shown,
        "status": outcome.status,
        "remeasured": outcome.remeasured,
        "untimed": outcome.comparison.untimed if old is not None else None,
        "schema": outcome.old_schema,
        "verdicts": [v.to_dict() for v in outcome.comparison.verdicts],
        "rows": {
            name: [min(samples), op["calls_per_step"]]
            for name, op in (old or {}).get("ops", {}).items()
            if (samples := time_samples(op))
        },
    }
    inconclusive = outcome.comparison.inconclusive
    if settings.strict and inconclusive and not settings.update_baseline and TIME in rule.fail_on:
        fixture.errors.append(strict_inconclusive(item.nodeid, inconclusive[0].message))
    if settings.update_baseline:
        return []
    return [v.message for v in outcome.comparison.failing(rule)]


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    fixture = item.stash.get(TEST, None)
    if fixture is None or not fixture.enabled:
        return report
    if call.when == "call" and report.passed and fixture.errors:
        # Untrusted numbers or an unusable baseline are neither a pass nor a fail: an error.
        report.outcome = "failed"
        report.longrepr = "\n".join(fixture.errors)
        report.opprof_untrusted = True
    result = item.stash.setdefault(_RESULT, TestResult(item.nodeid))
    result.record_phase(call.when, "error" if getattr(report, "opprof_untrusted", False) else report.outcome)
    if call.when == "call" and fixture.profile is not None:
        result.profile = fixture.profile
        result.clocks, result.unreliable = fixture.clocks, fixture.unreliable
        result.cpu_wait = fixture.cpu_wait
        item.user_properties.extend(format_junit_properties(fixture.profile, item.config.stash[RUN].settings.top))
    if call.when == "teardown":
        result.baseline = fixture.baseline
        _finish_test(item, report, result)
    return report


_RESULT = pytest.StashKey[TestResult]()


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, Any] | None:
    if getattr(report, "opprof_untrusted", False):
        return "error", "E", ("ERROR", {"red": True})
    return None


def _finish_test(item: pytest.Item, report: pytest.TestReport, result: TestResult) -> None:
    settings = item.config.stash[RUN].settings
    if result.profile is not None and settings.trace_dir:
        if settings.trace == "all" or result.outcome in ("failed", "error"):
            path = export_trace_path(Path(settings.trace_dir), result.nodeid)
            result.profile.export_chrome_trace(str(path))
            result.trace_path = str(path)
    # The record rides on the teardown report, so that the xdist controller receives it too.
    report.opprof_record = result.to_record(settings.top, with_profile=settings.json_path is not None)


# -- the end of the run ------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(RUN, None)
    if state is None or hasattr(config, "workerinput"):  # xdist workers report to the controller
        return
    if not state.settings.measuring:
        if state.carrying:
            terminalreporter.write_line(inert_summary(state.carrying))
        return
    if not state.records:
        return
    terminalreporter.write_sep("=", "opprof")
    terminalreporter.write_line(format_summary(state.records))
    problems = format_problems(state.records, verbose=config.option.verbose > 0)
    if problems:
        terminalreporter.write_line(problems)
    workers = getattr(config.option, "numprocesses", None)
    if workers:
        terminalreporter.write_line(xdist_noise_note(workers))
    if state.settings.json_path:
        write_json_atomic(
            Path(state.settings.json_path), run_report_json(state.records, state.device, state.device_key)
        )
        terminalreporter.write_line(f"opprof: wrote {state.settings.json_path}")
