"""The plugin at collection: the markers checked, a key hook loaded too late, tests outside the
rootdir refused, the tests carrying operator checks counted, the orphan baselines found (and
taken from xdist's workers)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import hypothesis_test, key_hook_loaded_late, markers_stacked, outside_rootdir
from ..layout import baseline_root, shown_path
from ..settings import RunState, marker_problem
from ..textout import os_text
from .base import BAD_MARKER, RUN, baseline_id, carries, first_of, markers_by_level

if TYPE_CHECKING:
    pass


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[RUN]
    late_hook = _late_key_hook(config, state)
    if late_hook and not hasattr(config, "workerinput"):
        raise pytest.UsageError(late_hook)
    problems = []
    for item in items:
        problem = _markers_problem(item)
        if late_hook and carries(item):  # an xdist worker cannot stop the run: each measured test errs
            problem = late_hook
        if problem and hasattr(config, "workerinput"):  # an xdist worker cannot stop the run: the test errs
            item.stash[BAD_MARKER] = problem
        elif problem:
            problems.append(problem)
    if problems:  # every bad marker at once, not one per run
        raise pytest.UsageError("\n".join(first_of(problems)))
    for item in items:  # under --opprof: without it, run() calls fn once, as DESIGN has it
        if state.settings.measuring and carries(item) and _is_hypothesis_test(item):
            item.stash[BAD_MARKER] = hypothesis_test(item.nodeid)


def _is_hypothesis_test(item: pytest.Item) -> bool:
    """A hypothesis `@given` test (its pytest plugin's marker, or the attribute @given sets)."""
    return (
        item.get_closest_marker("hypothesis") is not None
        or getattr(getattr(item, "obj", None), "is_hypothesis_test", False) is True
    )


def _markers_problem(item: pytest.Item) -> str | None:
    """What is wrong with the test's opprof markers: each is checked, also those not read (a
    trial's typo in a marker stacked above another passed); two on one level do not add up."""
    for where, marks in markers_by_level(item):
        if len(marks) > 1:
            return markers_stacked(item.nodeid, len(marks), where)
        problem = marker_problem(item.nodeid, marks[0].args, marks[0].kwargs)
        if problem:
            return problem
    return None


def pytest_deselected(items: list[pytest.Item]) -> None:
    state = items[0].config.stash.get(RUN, None) if items else None
    if state is not None and state.settings.measuring:
        _left_out(state, items)


def _dropped_unsaid(state: RunState, items: list[pytest.Item]) -> None:
    """The tests collected that are neither in the run's items nor deselected: left out too."""
    kept, said = {id(item) for item in items}, set(state.deselected)
    _left_out(state, [i for i in state.collected if id(i) not in kept and baseline_id(i) not in said])
    state.collected = []


def _left_out(state: RunState, items: list[pytest.Item]) -> None:
    """Tests collected and left out of the run (-k, a sharding plugin): their baselines are no
    orphans, and a run that left out some is no whole run."""
    state.deselected.extend(baseline_id(item) for item in items)
    state.left_out_measured.extend(baseline_id(item) for item in items if carries(item))


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test collected, under --opprof: one a plugin then takes out of the items without
    saying so (pytest-shard, a conftest's `items[:] = ...`) is left out all the same (a sharding
    trial's shards called each other's baselines orphans, offering `rm` for them)."""
    state = item.config.stash.get(RUN, None)
    if state is not None and state.settings.measuring:
        state.collected.append(item)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests carrying operator checks, and the baseline files no collected test reads (on an
    xdist worker, sent to the controller)."""
    config = session.config
    state = config.stash.get(RUN, None)
    if state is not None:  # the tests that will run (-k, -m and --deselect have left out theirs)
        state.carrying = sum(1 for item in session.items if carries(item))
        _refuse_outside_rootdir(config, state, session.items)
        if hasattr(config, "workeroutput"):  # every worker collects every test: the controller takes one count
            config.workeroutput["opprof_carrying"] = state.carrying
        _dropped_unsaid(state, session.items)
    if state is None or not state.settings.measuring or config.option.collectonly or state.device_key is None:
        return
    if config.getoption("lf", False):  # --lf drops the passed tests of a file without deselecting them
        return
    from ..baseline import baseline_path, gone_test_files, orphan_baselines

    root = baseline_root(config.rootpath, state.settings.baseline_dir)
    collected = [baseline_id(item) for item in session.items] + state.deselected
    found = orphan_baselines(root, state.device_key, collected, _narrowed(config))
    found = sorted({*found, *gone_test_files(root, state.device_key, config.rootpath)})
    state.orphans = [shown_path(path, config.rootpath) for path in found]
    if found:  # a test of this collection that ran not, or not yet, may be one renamed from them
        measured = [baseline_id(item) for item in session.items if carries(item)] + state.left_out_measured
        paths = {nodeid: baseline_path(root, state.device_key, nodeid) for nodeid in measured}
        state.without_baseline = [
            (shown_path(path, config.rootpath), nodeid) for nodeid, path in paths.items() if not path.exists()
        ]
    if hasattr(config, "workeroutput"):
        config.workeroutput["opprof_orphans"] = state.orphans
        config.workeroutput["opprof_without_baseline"] = state.without_baseline
        config.workeroutput["opprof_left_out"] = len(state.deselected)


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
    """Tells each xdist worker whether it runs under `--dist each` (its own option says `no`), and
    which thread variables the controller set itself (pytest-env's `env`: the worker inherits them,
    and its own start would call them the shell's, whose fix `env -u` cannot undo them)."""
    from ..device import THREAD_VARIABLES, set_in_process

    node.workerinput["opprof_each"] = getattr(node.config.option, "dist", None) == "each"
    node.workerinput["opprof_env_set_inside"] = list(set_in_process(THREAD_VARIABLES))
    state = node.config.stash.get(RUN, None)
    node.workerinput["opprof_table_width"] = state.table_width if state is not None else None


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist's controller collects nothing: it takes a worker's orphan baselines and its count of
    the tests carrying operator checks (a plain `-n 2` run's summary line)."""
    state = node.config.stash.get(RUN, None)
    output = getattr(node, "workeroutput", {})
    found = output.get("opprof_orphans")
    if state is not None and found is not None and state.orphans is None:  # each worker collects every test
        state.orphans = list(found)
        state.without_baseline = [(path, nodeid) for path, nodeid in output.get("opprof_without_baseline", [])]
        state.left_out = output.get("opprof_left_out", 0)
    if state is not None and isinstance(output.get("opprof_carrying"), int):
        state.carrying = max(state.carrying, output["opprof_carrying"])


def _refuse_outside_rootdir(config: pytest.Config, state: RunState, items: list[pytest.Item]) -> None:
    """Measured tests whose node ids name no file under the rootdir (a file outside it: pytest
    names its tests `::test_x`, one baseline for every test of that name): a usage error at start,
    one line a file; on an xdist worker, which cannot stop the run, each such test errs."""
    if not state.settings.measuring:
        return
    problems: dict[Path, str] = {}
    for item in items:
        if carries(item) and _outside_rootdir(item.nodeid, item.path, config.rootpath):
            problem = outside_rootdir(str(item.path), str(config.rootpath), item.nodeid)
            problems.setdefault(item.path, problem)
            if hasattr(config, "workerinput"):
                item.stash[BAD_MARKER] = problem
    if problems and not hasattr(config, "workerinput"):
        raise pytest.UsageError("\n".join(first_of(list(problems.values()))))


def _outside_rootdir(nodeid: str, path: Path, rootpath: Path) -> bool:
    """A node id whose file part is empty (`::test_x`) or climbs out of the rootdir (`../t.py::x`),
    or a file outside it: a package's test file there gets an id from its package's parent
    (`test_same.py::test_x` for both `../a/test_same.py` and `../b/test_same.py`, in a trial).
    A file linked into the rootdir is under it (its path is the link's)."""
    file = nodeid.split("::", 1)[0]
    if file == "" or file == ".." or file.startswith("../"):
        return True
    return not path.is_relative_to(rootpath) and not path.resolve().is_relative_to(rootpath.resolve())
