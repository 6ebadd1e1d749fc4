"""One line for the tests whose structure changed alike: a scale trial's one regression (an op added
to a model every test builds) failed 24 tests, and the summary printed each test's structure line
and its own record command, 48 lines and no one command for them all."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import RECORD_COMMAND
from .results import TestRecord
from .rules import STRUCTURE
from .textout import shell_quote
from .units import count_of, count_text
from .verdicts import CHANGED, Change, Verdict

SHARED_STRUCTURE_TESTS = 3  # tests that share a line: two keep their own, richer lines (where each op ran)

_PREFIX = "structure changed: "


@dataclass(frozen=True)
class SharedStructure:
    """The run's lines for tests whose structure changed alike, and the tests whose structure line
    and record command they stand for."""

    lines: tuple[str, ...] = ()
    tests: frozenset[str] = frozenset()


def shared_structure(records: list[TestRecord], picked: bool = True) -> SharedStructure:
    """One line for each set of three tests or more whose structure verdicts fail them with the same
    changes (op, calls before and after; not their inputs' shapes, which a parametrized test varies),
    and one command that records them all. A test counts once (`--dist each` runs it on each worker)."""
    alike: dict[tuple[tuple[str, ...], str], list[tuple[str, Verdict]]] = {}
    for record in {r.nodeid: r for r in records}.values():
        verdict = _failing_structure(record)
        if verdict is not None:
            alike.setdefault(_key(verdict, record), []).append((record.nodeid, verdict))
    lines, said = [], set()
    measured = [r.nodeid for r in records]
    for group in alike.values():
        if len(group) >= SHARED_STRUCTURE_TESTS:
            ids = [nodeid for nodeid, _ in group]
            lines.append(_line(group[0][1], _where(group[0][0], records), ids, measured, picked))
            said.update(ids)
    return SharedStructure(tuple(lines), frozenset(said))


def _failing_structure(record: TestRecord) -> Verdict | None:
    """The structure verdict that fails a compared test, where its fix is to record it (not where
    settings another test left explain it: leak_fixes)."""
    baseline = record.baseline
    if baseline is None or baseline.status != "compared" or STRUCTURE not in baseline.fails:
        return None
    found = [v for v in baseline.verdicts if v.kind == STRUCTURE and v.status == CHANGED and v.changes]
    if not found or baseline.leak_fixes(baseline.verdicts):
        return None
    return found[0]


def _where(nodeid: str, records: list[TestRecord]) -> str:
    """The ` [path]` a test's verdict message ends with."""
    baseline = next(r.baseline for r in records if r.nodeid == nodeid)
    return f" [{baseline.path}]" if baseline and baseline.path else ""


def _key(verdict: Verdict, record: TestRecord) -> tuple[tuple[str, ...], str]:
    """What tests changed alike share: each change's op and counts, and the message's other words
    (a compiled region's hint, a thread count's clause), whatever order their times listed them in."""
    rest = _without_where(verdict.message, f" [{record.baseline.path}]" if record.baseline else "")
    for change in verdict.changes:
        rest = rest.replace(change.text, "", 1)
    return tuple(sorted(_head(c) for c in verdict.changes)), rest


def _without_where(message: str, where: str) -> str:
    return message[: -len(where)] if where and message.endswith(where) else message


def _head(change: Change) -> str:
    """A change's words before their details: `+ aten::mul`, `aten::copy_ 1 -> 3/step`."""
    for sign in ("+ ", "- ", ""):
        if change.text.startswith(sign + change.op):
            rest = change.text[len(sign + change.op) :]
            return sign + change.op + rest.split(" (")[0]
    return change.text.split(" (")[0]  # renumbered: `cpp_fused_add_0 -> cpp_fused_add_1 (...)`


def short_text(change: Change) -> str:
    """A change's words without what one test's measurement alone says (its inputs' shapes, where
    it ran): `+ aten::mul (1/step)`, `- aten::bmm (was 2/step)`, `aten::copy_ 1 -> 3/step`."""
    head = _head(change)
    if change.renumbered_from:
        return f"{head} (renumbered)"
    if not change.was and not change.now:
        return f"{head} (in some steps)"
    if head.startswith("+ ") and not change.was:
        return f"{head} ({count_text(change.now)}/step)"
    if head.startswith("- ") and not change.now:
        return f"{head} (was {count_text(change.was)}/step)"
    return head


def _line(verdict: Verdict, where: str, ids: list[str], measured: list[str], picked: bool) -> str:
    """`opprof: structure changed alike in 24 tests: + aten::mul (1/step), ...; ...record them: ...`."""
    shown = _without_where(verdict.message, where)
    for change in verdict.changes:
        shown = shown.replace(change.text, short_text(change), 1)
    shown = shown.removeprefix(_PREFIX)
    return (
        f"opprof: structure changed alike in {count_of(len(ids), 'test')}: {shown}; each test's line says where "
        "each op ran and its inputs (-v); if the change is intended, record them: "
        f"{RECORD_COMMAND} {record_ids(ids, measured, picked)} (and commit the files)"
    )


def record_ids(ids: Iterable[str], measured: Iterable[str], picked: bool = True) -> str:
    """The tests as command-line arguments: a test function's id for all its parametrized cases,
    a file's for all its tests, where this run measured every test of the function or file and
    picked none (-k, a node id, ...: the tests left out would be recorded too). Every measured test
    stays a list of ids, which whole_run_commands makes the bare command."""
    ids, measured = sorted(set(ids)), set(measured)
    if picked or set(ids) == measured:
        return " ".join(shell_quote(i) for i in ids)
    names = _covered(ids, measured, lambda i: i.split("[")[0] if "[" in i else None)
    names = _covered(names, {_function(i) for i in measured}, lambda i: i.split("::")[0] if "::" in i else None)
    return " ".join(shell_quote(i) for i in sorted(set(names)))


def _function(nodeid: str) -> str:
    return nodeid.split("[")[0] if "[" in nodeid else nodeid


def _covered(ids: list[str], measured: set[str], parent_of: Callable[[str], str | None]) -> list[str]:
    """The ids, those whose parent's every measured id is among them replaced by the parent."""
    mine = set(ids)
    out = []
    for nodeid in ids:
        parent = parent_of(nodeid)
        siblings = {m for m in measured if parent is not None and parent_of(m) == parent}
        out.append(parent if parent is not None and siblings <= mine else nodeid)
    return out
