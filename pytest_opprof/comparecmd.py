"""`opprof compare A B`: two baseline folders, baseline files or traces, op by op, side by side;
exit 1 where B differs in a --fail-on kind (time by default)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .baseline import (
    BaselineError,
    baseline_from_profile,
    stable_facts,
)
from .clibase import (
    DEFAULT_TOP,
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    Done,
    UsageError,
    baselines_at,
    check_chooses_ops,
    is_trace,
    json_text,
    missing_path,
    untrusted,
)
from .compare import exact_verdicts, work_unrecorded
from .device import UNKNOWN_KEY, key_from_trace_metadata
from .documents import BaselineDoc
from .errors import (
    NO_STEP_MARKERS,
    STEPLESS_NOT_JUDGED,
    calls_differ_in,
    cut_short_trace,
    device_against_cpu,
    empty_compare_side,
    lfs_compare_side,
    machine_speed_differs,
    not_slower,
    nothing_chosen,
    nothing_in_both,
    other_captures,
    single_step_tests,
    time_not_failing,
    two_machines,
    two_setups,
    two_softwares,
    two_tests,
    work_not_compared,
    work_not_failing,
    work_on_neither,
)
from .events import printable_name
from .excuses import speed_words
from .files import LFS_POINTER, lfs_pointer
from .rules import ENVIRONMENT, KINDS, STRUCTURE, TIME, WORK
from .showtables import kernels_under_ops_table, side_by_side_table
from .sidebyside import SideRow, b_regressed, machine_speed, shown_side_rows, side_by_side
from .trace import load_trace
from .units import count_of, first_three
from .verdicts import MIN_TIME_STEPS, STEP_WALL

# compare fails on time alone unless told otherwise: it is a side by side of two machines (DESIGN §9),
# whose ops and kernels may differ by design; --fail-on adds the plugin's structure and work verdicts
COMPARE_FAIL_ON = frozenset({TIME})
EVERY_CHANGE_HERE = "--json lists every change"  # the plugin's hint names its own flags


def _kinds_text(kinds: frozenset[str]) -> str:
    """`structure,work,time` (as --fail-on takes them, in the verdicts' order), `none`."""
    return ",".join(k for k in KINDS if k in kinds) or "none"


class _Side:
    """One side of a comparison: its baseline documents by test, and how to name it."""

    def __init__(
        self,
        path: Path,
        kind: str,
        docs: dict[str, BaselineDoc],
        device_key: str | None,
        warnings: tuple[str, ...] = (),
        test: str | None = None,
        stepless: bool = False,
    ) -> None:
        self.path, self.kind, self.docs, self.device_key = path, kind, docs, device_key
        self.warnings = warnings  # a trace's warning-level checks, as `name: message`
        self.test = test  # the test of a trace opprof exported (its header's node id) or of a baseline file
        self.stepless = stepless  # a trace without step markers: its whole capture is one step (two such compare alike)

    def to_dict(self) -> dict[str, Any]:
        environments = {json.dumps(d.environment, sort_keys=True) for d in self.docs.values()}
        return {
            "path": str(self.path),
            "kind": self.kind,
            "device_key": self.device_key,
            "environment": next(iter(self.docs.values())).environment if len(environments) == 1 else None,
            "warnings": list(self.warnings),
        }


def _lfs_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return lfs_pointer(f.read(len(LFS_POINTER)))
    except OSError:
        return False  # the reader names it


def _trace_environment(metadata: dict[str, Any]) -> dict[str, Any]:
    """The machine and torch facts a trace opprof exported carries in its header (none in
    another's): plain values of the keys a baseline records."""
    header = metadata.get("opprof")
    facts = header.get("environment") if isinstance(header, dict) else None
    if not isinstance(facts, dict):
        return {}
    plain = {k: v for k, v in facts.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
    return stable_facts(plain)


def _load_side(text: str) -> _Side:
    path = Path(text)
    if path.is_file() and path.stat().st_size == 0:  # neither kind: name both fixes
        raise UsageError(empty_compare_side(path))
    if path.is_file() and _lfs_file(path):  # a .json trace's pointer was named a baseline's
        raise UsageError(lfs_compare_side(path))
    if path.is_file() and is_trace(path):
        profile = load_trace(path)
        broken = untrusted(profile)
        if broken:
            raise UsageError(f"{path}: {broken}; compare traces whose checks pass (opprof analyze {path} shows them)")
        if profile.traced_cut_short:
            raise UsageError(cut_short_trace(path))
        key = key_from_trace_metadata(profile.metadata) or UNKNOWN_KEY
        doc = baseline_from_profile(profile, path.name, key, _trace_environment(profile.metadata))
        warned = tuple(f"{c.name}: {c.message}" for c in profile.warnings)
        header = profile.metadata.get("opprof")
        test = header.get("nodeid") if isinstance(header, dict) else None
        test = printable_name(test) if isinstance(test, str) else None
        return _Side(path, "trace", {path.name: doc}, key, warned, test, stepless=not profile.wall_known)
    found = baselines_at(path)
    if path.is_dir():
        keys = sorted({str(doc.device_key) for _, doc in found})
        if len(keys) > 1:
            raise BaselineError(_keys_mixed(path, found, keys))
        docs: dict[str, BaselineDoc] = {}
        files: dict[str, Path] = {}
        for file, doc in found:
            nodeid = doc.nodeid
            if nodeid in docs:
                raise BaselineError(_second_baseline(path, files[nodeid], file, nodeid))
            docs[nodeid], files[nodeid] = doc, file
        return _Side(path, "baselines", docs, keys[0])
    ((_, doc),) = found
    return _Side(path, "baseline", {doc.nodeid: doc}, doc.device_key, test=doc.nodeid)


def _keys_mixed(folder: Path, found: list[tuple[Path, BaselineDoc]], keys: list[str]) -> str:
    """A folder whose baselines name more than one device key: a baseline folder holding several
    key folders (pass one), or a key folder holding a file that names another key (a trial's
    edit read `e.g. .opprof/cpu-x86_64/cpu-x86_64`, a folder that does not exist)."""
    mixed = f"{folder}: holds baselines of {len(keys)} device keys ({', '.join(keys)})"
    if all((folder / key).is_dir() for key in keys):
        return f"{mixed}; pass one device-key folder, e.g. {folder / keys[0]}"
    first = {str(doc.device_key): file for file, doc in reversed(found)}
    files = "; ".join(f"{key}: {first[key]}" for key in keys)
    return f"{mixed}: {files}; a baseline belongs under the folder of the key it was recorded on (its device_key): move or delete the others"


def _second_baseline(folder: Path, first: Path, second: Path, nodeid: str) -> str:
    """Two files of one test under a folder: copies under two device-key folders (pass one of
    them), or a stray copy in one."""
    tops = {file.relative_to(folder).parts[0] for file in (first, second)}
    if len(tops) > 1:
        fix = f"pass one device-key folder, such as {folder / sorted(tops)[0]}"
    else:
        fix = f"delete the stray file (the other is {first})"
    return f"{second}: a second baseline of {nodeid!r} under {folder}; {fix}"


_Pair = tuple[str, tuple[str, str], BaselineDoc, BaselineDoc]  # shown name, (A's name, B's name), docs


def _pairs(a: _Side, b: _Side) -> tuple[list[_Pair], list[str], list[str]]:
    """(test, names, A doc, B doc) pairs, and the tests only A or only B has."""
    if a.kind != "baselines":  # one measurement on each side, whatever its name
        ((na, da),) = a.docs.items()
        ((nb, db),) = b.docs.items()
        # two traces opprof wrote of one test: named by the test (a trial's read `a.json.gz vs b.json.gz`);
        # of two tests, each side by its test where known (a trial's read `<trace file> vs <node id>`)
        shown = a.test if a.test and a.test == b.test else na if na == nb else f"{a.test or na} vs {b.test or nb}"
        return [(shown, (na, nb), da, db)], [], []
    common = sorted(set(a.docs) & set(b.docs))
    return (
        [(n, (n, n), a.docs[n], b.docs[n]) for n in common],
        sorted(set(a.docs) - set(b.docs)),
        sorted(set(b.docs) - set(a.docs)),
    )


def _worse_text(worse: list[SideRow]) -> str:
    """`2 ops worse`, `the step wall and 1 op worse`: the step wall is no op."""
    ops = sum(1 for r in worse if r.op != STEP_WALL)
    wall = any(r.op == STEP_WALL for r in worse)
    if not ops:
        return "the step wall worse (the time outside the ops)"
    return ("the step wall and " if wall else "") + f"{count_of(ops, 'op')} worse"


@dataclass(frozen=True)
class _Compared:
    """One test compared: its op rows A vs B and the ops B made worse."""

    name: str
    names: tuple[str, str]  # the test (or trace file) on each side
    rows: list[SideRow]
    worse: list[SideRow]
    untimed: bool = False  # a baseline of a single step (a whole call, capture(), the marker): time shown, not judged
    work: tuple[str, ...] = ()  # the plugin's work verdicts of B against A: shapes, FLOPs, kernels, bytes
    structure: tuple[str, ...] = ()  # each op B added, removed or calls otherwise (the plugin's structure verdict's)
    environment: tuple[str, ...] = ()  # what differs between the sides' machine setups (the plugin's verdict)
    structure_line: str = ""  # the structure verdict as the text shows it: the costliest changes, a count of the rest
    failed: tuple[str, ...] = ()  # the --fail-on kinds B differs in, in the verdicts' order: why it exits 1
    structure_ops: tuple[str, ...] = ()  # the ops of `structure`, in its order
    stepless: bool = False  # a side's whole trace against the other's steps: nothing judged

    def calls_moved(self) -> list[str]:
        """The ops whose calls differ (_calls_moved); none where a side marks no steps (its calls per
        step are the whole capture's)."""
        return [] if self.stepless else _calls_moved(self.rows, self.structure_ops)


@dataclass(frozen=True)
class _Outcome:
    """A whole comparison: both sides, the tests compared, and those left out."""

    a: _Side
    b: _Side
    results: list[_Compared]
    only_a: list[str]
    only_b: list[str]
    unchosen: list[str]  # tests in both holding no op that --op chose
    warnings: list[str]  # each side's trace warnings, and sides that differ in more than the code

    @property
    def regressed(self) -> bool:
        """B is slower somewhere (judged on time, whatever --fail-on)."""
        return any(r.worse for r in self.results)

    @property
    def failed(self) -> bool:
        """B differs in a kind --fail-on names: exit 1."""
        return any(r.failed for r in self.results)


def run_compare(args: argparse.Namespace) -> Done:
    _check_compare_paths(args.a, args.b)
    a, b = _load_side(args.a), _load_side(args.b)
    stepless = a.stepless != b.stepless  # one side's whole trace against the other's steps
    for side in (a, b):
        if stepless and side.stepless:  # a trial's 5 calls without markers read as 1 step: `slower (calls)`
            side.warnings += (NO_STEP_MARKERS,)
    pairs, only_a, only_b = _pairs(a, b)
    if args.op:
        check_chooses_ops(args.op, [*a.docs.values(), *b.docs.values()], f"{args.a} or {args.b}")
        pairs = [(name, names, da.only(args.op), db.only(args.op)) for name, names, da, db in pairs]
    kinds = (a.kind, b.kind)
    same_device = a.device_key == b.device_key
    compared = [_compared(name, names, da, db, args, kinds, same_device, stepless) for name, names, da, db in pairs]
    results = [r for r in compared if r.rows or not args.op]
    unchosen = [r.name for r in compared if not r.rows and args.op]
    untimed = [] if stepless else [r.name for r in results if r.untimed]  # (the side's own warning says why)
    outcome = _Outcome(a, b, results, only_a, only_b, unchosen, _compare_warnings(a, b, pairs, untimed, args.fail_on))
    out = json_text(_compare_json(args, outcome)) if args.json else "\n".join(_compare_text(args, outcome)) + "\n"
    if not pairs:  # nothing compared is no pass (an audit's CI step read `0 of 0 regressed`, exit 0)
        return Done(out, EXIT_BAD_INPUT, (nothing_in_both(args.a, args.b, _other_rootdir(only_a, only_b)),))
    if not results:  # --op chose no op of any test in both (a review's)
        return Done(out, EXIT_BAD_INPUT, (nothing_chosen(args.op, len(unchosen)),))
    return Done(out, EXIT_REGRESSION if outcome.failed else EXIT_OK)


def _other_rootdir(only_a: list[str], only_b: list[str]) -> tuple[str, str] | None:
    """A test of A and one of B that are the same test named from other rootdirs (`tests/test_m.py::x`
    and `test_m.py::x`), if any."""
    for a in only_a:
        for b in only_b:
            if a != b and (a.endswith("/" + b) or b.endswith("/" + a)):
                return a, b
    return None


def _compared(
    name: str,
    names: tuple[str, str],
    a: BaselineDoc,
    b: BaselineDoc,
    args: argparse.Namespace,
    kinds: tuple[str, str],
    same_device: bool,
    stepless: bool = False,
) -> _Compared:
    """One test's comparison; `stepless`: one side is a trace without step markers, whose calls and
    times per step are the whole capture's, against the other's steps: shown, nothing judged (a
    review's read `structure changed: aten::mm 1 -> 5/step` of the same code)."""
    rows = side_by_side(a, b, tolerance=args.tolerance, min_delta_ms=args.min_delta_ms, stat=args.stat)
    untimed = stepless or any(kind != "trace" and doc.steps < MIN_TIME_STEPS for kind, doc in zip(kinds, (a, b)))
    fastest = min(a.wall_ms) if a.wall_ms and not untimed else None  # an added op's costliest step: time
    worse = [] if stepless else b_regressed(rows, args.min_delta_ms, args.tolerance, fastest)
    if untimed:  # a single-step capture's time, shown and never judged, as the plugin never fails it
        worse = [r for r in worse if r.status != "slower"]
    verdicts = [] if stepless else exact_verdicts(b, a, kernels=same_device, every_change=EVERY_CHANGE_HERE)
    work = tuple(v.message for v in verdicts if v.kind == WORK)
    structured = [v for v in verdicts if v.kind == STRUCTURE]
    structure = tuple(c.text for v in structured for c in v.changes)
    line = "".join(v.message for v in structured)
    # a trace whose header names no device tells nothing of its machine: not judged on it (as the warnings)
    told = UNKNOWN_KEY not in (a.device_key, b.device_key)
    environment = tuple(v.why or "" for v in verdicts if v.kind == ENVIRONMENT and told)
    found = {STRUCTURE: structure, WORK: work, TIME: worse, ENVIRONMENT: environment}
    failed = tuple(kind for kind in KINDS if kind in args.fail_on and found[kind])
    ops = tuple(c.op for v in structured for c in v.changes if not c.renumbered_from)  # its calls held
    return _Compared(name, names, rows, worse, untimed, work, structure, environment, line, failed, ops, stepless)


def _compare_warnings(
    a: _Side, b: _Side, pairs: list[_Pair], untimed: list[str], fail_on: frozenset[str] = frozenset()
) -> list[str]:
    """What makes the comparison more than one of code: a side's trace warnings (ops outside
    the steps are in no per-step number), two machines, two tests."""
    found = [f"{label}: {warning}" for label, side in (("A", a), ("B", b)) for warning in side.warnings]
    keys = (a.device_key, b.device_key)
    if a.device_key != b.device_key and UNKNOWN_KEY not in keys:  # a trace's header may name no device
        found.append(two_machines(str(a.device_key), str(b.device_key)))
    on_device = [any(doc.on_device for doc in side.docs.values()) for side in (a, b)]
    if on_device[0] != on_device[1]:
        found.append(device_against_cpu("A" if on_device[0] else "B"))
    if a.test and b.test and a.test != b.test:  # a trace's file name cuts a long id: its header's
        kinds = {a.kind, b.kind}
        found.append(two_tests(a.test, b.test, f"{a.kind}s" if len(kinds) == 1 else "a trace and a baseline"))
    speed = machine_speed((da, db) for _, _, da, db in pairs)
    if speed:
        found.append(machine_speed_differs(speed_words(speed.ratio), speed.reference, speed.tests))
    softwares = [(_software(da), _software(db)) for _, _, da, db in pairs]
    differ = [(sa, sb) for sa, sb in softwares if sa != sb]
    if differ:  # a trial's torch upgrade compared with no word of it
        (a_software, b_software), _ = Counter(differ).most_common(1)[0]
        found.append(two_softwares(a_software, b_software, len(differ), len(pairs)))
    setups = [_setups(da, db) for _, _, da, db in pairs]
    differ_setup = [pair for pair in setups if pair is not None]
    if differ_setup:  # a team trial's 2 -> 1 threads read `B regressed`, the warning blaming load
        (a_setup, b_setup), _ = Counter(differ_setup).most_common(1)[0]
        found.append(two_setups(a_setup, b_setup, len(differ_setup), len(pairs)))
    moved = [name for name, _, da, db in pairs if None not in (da.number, db.number) and da.number != db.number]
    if moved:  # a review: two files of one test holding other captures of it compared in silence
        found.append(other_captures(moved))
    if untimed:
        found.append(single_step_tests(untimed, MIN_TIME_STEPS))
    return found + _work_not_compared(a, b, pairs) + (_work_on_neither(pairs) if WORK in fail_on else [])


def _work_not_compared(a: _Side, b: _Side, pairs: list[_Pair]) -> list[str]:
    """A line for each side that holds no work of ops the other recorded it of: the work verdicts
    read nothing there (an upgrade trial's schema-1 side read `B not slower` with a doubled input
    and no word that the work went unread)."""
    found = []
    for label, side, b_lacks in (("A", a, False), ("B", b, True)):
        # work_unrecorded(has, lacks): the ops `has` recorded the work of and `lacks` holds none of
        unread = {
            name: ops for name, _, da, db in pairs if (ops := work_unrecorded(*((da, db) if b_lacks else (db, da))))
        }
        if unread:
            names = sorted({op for ops in unread.values() for op in ops})
            found.append(work_not_compared(label, side.kind == "trace", names, sorted(unread)))
    return found


def _work_on_neither(pairs: list[_Pair]) -> list[str]:
    """Under --fail-on work: the ops neither side holds the work of, which it then judged none of
    (a trial's two schema-1 files passed `--fail-on work` in silence)."""
    unread = {
        name: ops
        for name, _, da, db in pairs
        if (
            ops := sorted(op for op in set(da.ops) & set(db.ops) if da.ops[op].work is None and db.ops[op].work is None)
        )
    }
    if not unread:
        return []
    return [work_on_neither(sorted({op for ops in unread.values() for op in ops}), sorted(unread))]


def _setups(a: BaselineDoc, b: BaselineDoc) -> tuple[str, str] | None:
    """What ran torch's CPU ops on each side where it differs (`2 torch threads, AVX512 kernels`
    against `1 torch thread, AVX512 kernels`): the facts both sides recorded; None where they agree."""
    facts = []
    if a.threads and b.threads:
        facts.append((count_of(a.threads, "torch thread"), count_of(b.threads, "torch thread")))
    capabilities = [doc.environment.get("cpu_capability") for doc in (a, b)]
    if all(isinstance(c, str) for c in capabilities):
        facts.append((f"{capabilities[0]} kernels", f"{capabilities[1]} kernels"))
    if all(x == y for x, y in facts):
        return None
    return ", ".join(x for x, _ in facts), ", ".join(y for _, y in facts)


def _software(doc: BaselineDoc) -> str:
    """`torch 2.13.0+cpu`, `torch 2.13.0, cuda 12.8`: what a document was recorded with."""
    facts = [(key, doc.environment.get(key)) for key in ("torch", "cuda", "hip")]
    return ", ".join(f"{key} {value}" for key, value in facts if value)


def _check_compare_paths(first: str, second: str) -> None:
    """Both exist and are both folders or both files (before reading anything: a folder can be large)."""
    for given in (first, second):
        if not Path(given).exists():
            raise UsageError(
                f"{given}: {missing_path(Path(given))}; give two baseline folders, or two traces or baseline files"
            )
        if not Path(given).is_file() and not Path(given).is_dir():
            raise UsageError(
                f"{given}: not a file or folder (a pipe or a device?); give two baseline folders, or two traces or "
                "baseline files"
            )
    dirs = [Path(p).is_dir() for p in (first, second)]
    if dirs[0] != dirs[1]:
        folder, other = (first, second) if dirs[0] else (second, first)
        raise UsageError(
            f"cannot compare the folder {folder} with the file {other}: "
            "give two baseline folders, or two traces / baseline files"
        )


def _compare_json(args: argparse.Namespace, outcome: _Outcome) -> dict[str, Any]:
    return {
        "schema": 1,
        "a": outcome.a.to_dict(),
        "b": outcome.b.to_dict(),
        "tolerance": args.tolerance,
        "min_delta_ms": args.min_delta_ms,
        "stat": args.stat,
        "fail_on": [k for k in KINDS if k in args.fail_on],
        "op_filter": args.op,
        "unit": "ms per step; device time for ops that ran on a device, else CPU time",
        "regressed": outcome.regressed,
        "failed": outcome.failed,
        "calls_differ": [r.name for r in outcome.results if r.calls_moved()],
        "tests": [_compared_json(r, args.top) for r in outcome.results],
        "warnings": outcome.warnings,
        "only_in_a": outcome.only_a,
        "only_in_b": outcome.only_b,
        "without_chosen_op": outcome.unchosen,
    }


def _compared_json(r: _Compared, top: int | None) -> dict[str, Any]:
    shown = shown_side_rows(r.rows, top)
    return {
        "test": r.name,
        "in_a": r.names[0],
        "in_b": r.names[1],
        "regressed": bool(r.worse),
        "time_judged": not r.untimed,
        "work_changes": list(r.work),
        "structure_changes": list(r.structure),
        "calls_differ": r.calls_moved(),
        "environment_changes": list(r.environment),
        "failed_on": list(r.failed),
        "ops": [row.to_dict() for row in shown],
        "ops_left_out": len(r.rows) - len(shown),
    }


def _not_slower(rows: Sequence[SideRow], structure_shown: bool = False, structure_ops: Sequence[str] = ()) -> str:
    """A test B did not regress on time; where its calls differ, said so (a trial read `B not
    worse` over a graph break: `Torch-Compiled Region 1 -> 2`, aten::addmm 2 -> 3), also where
    only the structure verdict sees it (1 -> 8 calls in the 3 of 10 steps an op ran in, whose
    medians per step are 0 on both sides), unless that verdict's line under it says so (--fail-on
    structure)."""
    return not_slower([] if structure_shown else _calls_moved(rows, structure_ops))


def _calls_moved(rows: Sequence[SideRow], structure_ops: Sequence[str]) -> list[str]:
    """The ops whose calls differ: rows added, removed or calls changed, then the structure
    verdict's other ops (not a renumbered kernel's, whose calls held)."""
    moved = [r.op for r in rows if r.calls_changed or r.status in ("added", "removed")]
    return moved + [op for op in structure_ops if op not in moved]


def _test_verdict(r: _Compared, fail_on: frozenset[str]) -> str:
    """A test's line: B regressed in time or not, and where time does not fail (--fail-on), said so;
    not slower, the kinds it failed on, or a work change that does not fail (a trial read `B not
    slower` over 1.58x the FLOPs, and a test that failed on structure read the same)."""
    if r.stepless:
        return STEPLESS_NOT_JUDGED
    if not r.worse:
        line = _not_slower(r.rows, STRUCTURE in fail_on and bool(r.structure), r.structure_ops)
        if r.failed:
            return f"{line}; failed on {', '.join(r.failed)}"
        return f"{line}; {work_not_failing(_kinds_text(fail_on))}" if r.work else line
    if TIME in fail_on:
        return f"B regressed: {_worse_text(r.worse)}"
    return f"B slower: {_worse_text(r.worse)}; {time_not_failing(_kinds_text(fail_on))}"


def _test_lines(r: _Compared, fail_on: frozenset[str]) -> list[str]:
    """The lines under a test's line: its structure (where --fail-on judges it) and work changes, its
    environment (where --fail-on judges it; else the warnings say it for all tests)."""
    structure = [r.structure_line] if STRUCTURE in fail_on and r.structure_line else []
    environment = [f"environment differs: {why}" for why in r.environment] if ENVIRONMENT in fail_on else []
    return [*structure, *_work_lines(r.work), *environment]


def _work_lines(work: tuple[str, ...], shown: int = 3) -> list[str]:
    """A test's work changes, a line each (a trial's Linear of 64 -> 256 read `B not slower`, no
    word of the shapes that the plugin failed), the first `shown` and a count of the others."""
    lines = [f"work changed: {change}" for change in work[:shown]]
    if len(work) > shown:
        lines.append(f"work changed for {count_of(len(work) - shown, 'more op')} (--json lists each)")
    return lines


def _compare_text(args: argparse.Namespace, outcome: _Outcome) -> list[str]:
    top = args.top or DEFAULT_TOP
    out = [
        f"A: {outcome.a.path} ({outcome.a.device_key})",
        f"B: {outcome.b.path} ({outcome.b.device_key})",
        f"ms/step by {args.stat} over steps (device time for ops that ran on a device, else CPU); "
        f"slower/faster beyond {100 * args.tolerance:g}% and {args.min_delta_ms:g} ms",
    ]
    if args.op:
        out.append(f"only ops matching {' or '.join(args.op)}, with the kernels they launched")
    out += [f"warning: {warning}" for warning in outcome.warnings]
    several = len(outcome.results) > 1
    for r in outcome.results:
        verdict = _test_verdict(r, args.fail_on)
        lines = _test_lines(r, args.fail_on)
        if several and not lines and _unchanged(r):  # its table would be rows of `same`: a line says it
            out += [
                "",
                f"{r.name}: {verdict}; every row of its table the same ({_rows_text(r.rows)}; --json lists them)",
            ]
            continue
        out += ["", f"{r.name}: {verdict}", *lines]
        out.append(side_by_side_table(r.rows, top, judged=not r.untimed))
        kernels = kernels_under_ops_table(r.rows, top)
        if kernels:
            out += ["", kernels]
    for label, tests in (("only in A", outcome.only_a), ("only in B", outcome.only_b)):
        if tests:
            out += ["", f"{label} ({len(tests)}): {', '.join(tests)}"]
    if outcome.unchosen:
        out += ["", f"no op matching --op ({len(outcome.unchosen)}): {', '.join(outcome.unchosen)}"]
    if not outcome.results and not outcome.unchosen:
        out += ["", "no test is in both A and B"]
    if not outcome.results:  # exit 2, with the error line: not `0 of 0 compared tests regressed` (a review's)
        return out + ["", "opprof compare: nothing compared"]
    return out + ["", _last_line(outcome.results, args.fail_on)]


def _rows_text(rows: Sequence[SideRow]) -> str:
    """`30 ops and the step wall`."""
    ops = count_of(sum(1 for row in rows if row.op != STEP_WALL), "op")
    return f"{ops} and the step wall" if any(row.op == STEP_WALL for row in rows) else ops


def _unchanged(r: _Compared) -> bool:
    """A test whose every row is `same` (calls and kernels too) and which changed in no other way: in a
    folder's comparison its table is left out (a diagnosis trial read two 20-row tables of
    `1.00x same` for tests whose files were identical, above the one that changed)."""
    return not (r.worse or r.work or r.structure or r.environment or r.failed) and all(
        row.status == "same" and not row.calls_changed and _launches(row.kernels_a) == _launches(row.kernels_b)
        for row in r.rows
    )


def _launches(kernels: tuple[tuple[str, float, float], ...]) -> list[tuple[str, float]]:
    """An op's kernels and their calls per step (a review's kernel swapped under a `same` op)."""
    return [(name, calls) for name, calls, _ in kernels]


def _calls_differ(results: list[_Compared]) -> str:
    """`; calls differ in 4 (...)`: the tests whose ops B calls otherwise, which the default judges
    not (a scale trial's 144 tests added ops each, above a last line of `0 of 144 regressed`)."""
    moved = [r.name for r in results if r.calls_moved()]
    if not moved:
        return ""
    return calls_differ_in(len(moved), first_three(moved))


def _last_line(results: list[_Compared], fail_on: frozenset[str]) -> str:
    """What B failed in: under the default (time) the tests it regressed in; under another --fail-on
    each failed test with the kinds it failed on (`tests/t.py::x (structure, work)`)."""
    compared = count_of(len(results), "compared test")
    if fail_on == COMPARE_FAIL_ON:
        worse = [r.name for r in results if r.worse]
        # named: a scale trial's 1 regression of 400 sat in 6,000 lines above a line that named none
        named = f": {first_three(worse)}" if worse and len(results) > 1 else ""
        return f"opprof compare: {len(worse)} of {compared} regressed in B{named}{_calls_differ(results)}"
    failed = [f"{r.name} ({', '.join(r.failed)})" for r in results if r.failed]
    named = f": {first_three(failed)}" if failed else ""
    return f"opprof compare: {len(failed)} of {compared} failed in B (--fail-on {_kinds_text(fail_on)}){named}"
