"""What the plugin's modules share: the run's and the test's stash keys, which tests --opprof
measures, the marker's levels and rule, a test's baseline id, and messages made runnable where
pytest ran. Imported by every pytest run: nothing here imports the measuring modules."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..errors import more_bad_markers, runnable_here
from ..layout import reached_from
from ..rules import Rule
from ..settings import RunState, Settings, rule_for
from ..textout import os_text

if TYPE_CHECKING:
    from ..analysis.model import Check
    from ..fixture import OpprofFixture
    from ..report import TestResult
    from ..results import TestRecord
    from ..torchstate import TorchState  # noqa: F401 (SETTINGS_LEFT_BY's type)


MARKER = "opprof"
FIXTURE_MODULE = __package__  # where the `opprof` fixture is defined: the plugin package's __init__

BAD_MARKER = pytest.StashKey[str]()  # on an xdist worker: what makes the test err (its marker, a late key hook)

RUN = pytest.StashKey[RunState]()

TEST: pytest.StashKey[OpprofFixture] = pytest.StashKey()
IN_CALL = pytest.StashKey[bool]()  # the test's call is running: a call report made now is a subtest's


def markers_by_level(item: pytest.Item) -> list[tuple[str, list[pytest.Mark]]]:
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
    levels = markers_by_level(item)
    return levels[0][1][0] if levels else None


def first_of(problems: list[str]) -> list[str]:
    """The first 20 problems, and a count of the rest."""
    more = [more_bad_markers(len(problems) - 20)] if len(problems) > 20 else []
    return problems[:20] + more


def item_rule(item: pytest.Item, settings: Settings) -> Rule:
    """The run's rule, with the test's marker overrides."""
    marker = _opprof_marker(item)
    return rule_for(settings, marker.kwargs if marker is not None else None)


def runnable(config: pytest.Config, text: str) -> str:
    """The record commands `text` suggests, as the person who ran pytest can run them."""
    settings = config.stash[RUN].settings
    elsewhere = config.invocation_params.dir != config.rootpath
    return runnable_here(text, settings.location_flags, partial(typed_id, config) if elsewhere else None)


def typed_id(config: pytest.Config, nodeid: str) -> str:
    """A node id (relative to the rootdir) as a test id given in the folder pytest ran in."""
    path, sep, rest = nodeid.partition("::")
    return reached_from(config.rootpath / path, config.invocation_params.dir) + sep + rest


# the earlier test whose changed thread count this one ran on, the count before it and the count it left
SETTINGS_LEFT_BY = pytest.StashKey["tuple[tuple[str, TorchState, TorchState], ...]"]()  # (leakers, before, left)
CHECKS = pytest.StashKey["list[Check]"]()  # the run's checks of a test, beside its profile's (a thread leak...)


def add_check(item: pytest.Item, check: Check) -> None:
    item.stash.setdefault(CHECKS, []).append(check)


REPEAT_PARAM = "__pytest_repeat_step_number"  # pytest-repeat's parameter: `--count 3` runs test_x[1-3] ... [3-3]

_REPEAT_ID = re.compile(r"([\[-])(\d+)-(\d+)\]$")


def baseline_id(item: pytest.Item) -> str:
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


def carries(item: pytest.Item) -> bool:
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
        if getattr(func, "__module__", None) == FIXTURE_MODULE and getattr(func, "__name__", None) == "opprof":
            return True
        if "opprof" not in definition.argnames:
            return False
    return False


def is_measured(item: pytest.Item) -> bool:
    return carries(item) and item.config.stash[RUN].settings.measuring


def to_record(result: TestResult, state: RunState) -> TestRecord:
    """The test's record, with what the run's reports want of it."""
    settings = state.settings
    return result.to_record(
        settings.top,
        with_profile=settings.json_path is not None,
        with_csv=settings.csv_path is not None,
        html_dir=Path(settings.html_path).absolute().parent if settings.html_path else None,
        width=state.table_width,
    )
