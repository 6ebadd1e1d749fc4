"""One line for the tests whose structure changed alike: a scale trial's one regression (an op added
to a model every test builds) failed 24 tests, and the summary printed each test's structure line
and its own record command, 48 lines and no one command for them all."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import RECORD_COMMAND, structure_changed_alike
from .results import TestRecord, file_test
from .rules import STRUCTURE
from .textout import shell_quote
from .units import count_text, id_order
from .verdicts import CHANGED, Change, Verdict

SHARED_STRUCTURE_TESTS = 3  # tests that share a line: two keep their own, richer lines (where each op ran)

_PREFIX = "structure changed: "


_Key = tuple[tuple[str, ...], str]


@dataclass(frozen=True)
class SharedStructure:
    """The run's lines for tests whose structure changed alike, and the changes each line stands
    for: (node id, its key) of every record a line says (under `--dist each` a worker whose record
    changed otherwise keeps its own lines)."""

    lines: tuple[str, ...] = ()
    members: frozenset[tuple[str, _Key]] = frozenset()

    def says(self, record: TestRecord) -> bool:
        """Whether a line stands for the record's structure line and record command."""
        verdict = _failing_structure(record) if self.members else None
        return verdict is not None and (record.nodeid, _key(verdict, record)) in self.members


def shared_structure(records: list[TestRecord], picked: bool = True) -> SharedStructure:
    """One line for each set of three tests or more whose structure verdicts fail them with the same
    changes (each op and its calls per step, before and after; not their inputs' shapes, which a
    parametrized test varies), and one command that records them all. A test counts once: a node id
    on several workers (`--dist each`), a pytest-repeat repeat (its baseline is the test's)."""
    alike: dict[_Key, dict[str, tuple[TestRecord, Verdict]]] = {}
    for record in records:
        verdict = _failing_structure(record)
        if verdict is not None:
            alike.setdefault(_key(verdict, record), {})[record.nodeid] = (record, verdict)
    lines: list[str] = []
    members: set[tuple[str, _Key]] = set()
    measured = [r.nodeid for r in records]
    for key, group in alike.items():
        if len({file_test(record) for record, _ in group.values()}) >= SHARED_STRUCTURE_TESTS:
            record, verdict = next(iter(group.values()))
            tests = len({file_test(r) for r, _ in group.values()})
            command = f"{RECORD_COMMAND} {record_ids(group, measured, picked)}"
            lines.append(structure_changed_alike(tests, _shown(verdict, _where(record)), command))
            members.update((nodeid, key) for nodeid in group)
    return SharedStructure(tuple(lines), frozenset(members))


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


def _where(record: TestRecord) -> str:
    """The ` [path]` a test's verdict message ends with."""
    return f" [{record.baseline.path}]" if record.baseline and record.baseline.path else ""


def _key(verdict: Verdict, record: TestRecord) -> _Key:
    """What tests changed alike share: each change's words with its calls per step (short_text:
    `+ aten::mul (1/step)` and `(2/step)` differ, as a depth parameter's do), and the message's
    other words (a compiled region's hint, a thread count's clause), whatever order their times
    listed them in."""
    rest = _without_where(verdict.message, _where(record))
    for change in verdict.changes:
        rest = rest.replace(change.text, "", 1)
    return tuple(sorted(short_text(c) for c in verdict.changes)), rest


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


def _shown(verdict: Verdict, where: str) -> str:
    """The verdict's words without its file and each change's test-only details."""
    shown = _without_where(verdict.message, where)
    for change in verdict.changes:
        shown = shown.replace(change.text, short_text(change), 1)
    return shown.removeprefix(_PREFIX)


def record_ids(ids: Iterable[str], measured: Iterable[str], picked: bool = True) -> str:
    """The tests as command-line arguments: a test function's id for all its parametrized cases,
    a file's for all its tests, where this run measured every test of the function or file and
    picked none (-k, a node id, ...: the tests left out would be recorded too). Every measured test
    stays a list of ids, which whole_run_commands makes the bare command."""
    ids, measured = sorted(set(ids), key=id_order), set(measured)
    if picked or set(ids) == measured:
        return " ".join(shell_quote(i) for i in ids)
    names = _covered(ids, measured, _function_of)
    names = _covered(names, {_function_of(i) or i for i in measured}, _file_of)
    return " ".join(shell_quote(i) for i in sorted(set(names), key=id_order))


def _function_of(nodeid: str) -> str | None:
    """A parametrized case's function id (`t.py::test_m[1-16]` -> `t.py::test_m`); None for
    another id. Its bracket is looked for after the path (a folder may be named `[gpu]`)."""
    path, sep, rest = nodeid.partition("::")
    at = rest.find("[")
    return f"{path}{sep}{rest[:at]}" if sep and at > 0 else None


def _file_of(nodeid: str) -> str | None:
    path, sep, _ = nodeid.partition("::")
    return path if sep else None


def _covered(ids: list[str], measured: set[str], parent_of: Callable[[str], str | None]) -> list[str]:
    """The ids, those whose parent's every measured id is among them replaced by the parent."""
    children: dict[str, set[str]] = {}
    for nodeid in measured:
        parent = parent_of(nodeid)
        if parent is not None:
            children.setdefault(parent, set()).add(nodeid)
    mine = set(ids)
    return [p if (p := parent_of(i)) is not None and children.get(p, set()) <= mine else i for i in ids]
