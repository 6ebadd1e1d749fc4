"""The `opprof` command.

    opprof analyze TRACE [--json|--csv|--markdown] [--top N]  tables (or JSON, CSV) for a Kineto/Chrome trace
    opprof show PATH [--json|--markdown] [--top N]          a baseline file or folder as tables
    opprof mv FILE NODEID                        a renamed or moved test keeps its baseline
    opprof compare A B [--json|--markdown] [--tolerance PCT] [--min-delta-ms MS] [--stat median|min] [--top N]
                       [--fail-on KINDS]         two baseline folders, or two traces/baseline files
    each also takes --op GLOB (repeatable): only the ops (kernels, memory ops...) it matches

Exit codes: 0 fine, 1 a regression found (compare: B worse than A in a --fail-on kind, time by default), 2 bad
input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from .analysis import Profile
from .analysis.model import selected
from .baseline import (
    UNUSABLE_FIX,
    BaselineError,
    baseline_from_profile,
    move_baseline,
    read_baseline,
    scan_baseline_dir,
    stable_facts,
)
from .compare import side_by_side_verdicts
from .device import key_from_trace_metadata
from .documents import BaselineDoc
from .errors import (
    FORKED_FUNCTION,
    FORKED_TRACE,
    OpprofError,
    chooses_no_op,
    csv_chose_no_op,
    cut_short_trace,
    device_against_cpu,
    empty_compare_side,
    lfs_compare_side,
    machine_speed_differs,
    moved_line,
    not_slower,
    nothing_chosen,
    nothing_in_both,
    other_captures,
    output_unwritable,
    selects_nothing,
    single_step_tests,
    time_not_failing,
    two_machines,
    two_setups,
    two_softwares,
    two_tests,
    unmoved_line,
    unreadable_files,
)
from .events import is_printable_name, printable_name
from .excuses import speed_words
from .files import LFS_POINTER, broken_link, lfs_pointer
from .runfiles import op_csv
from .settings import parse_fail_on, parse_ms, parse_percentage
from .showtables import baseline_tables, kernels_under_ops_table, side_by_side_table
from .sidebyside import SideRow, b_regressed, machine_speed, shown_side_rows, side_by_side
from .tables import as_markdown, markdown_tables, profile_tables
from .trace import load_trace
from .units import count_of, first_three
from .verdicts import (
    DEFAULT_MIN_DELTA_MS,
    DEFAULT_TOLERANCE,
    ENVIRONMENT,
    KINDS,
    MIN_TIME_STEPS,
    STEP_WALL,
    STRUCTURE,
    TIME,
    WORK,
)

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
_T = TypeVar("_T")
DEFAULT_TOP = 20
# compare fails on time alone unless told otherwise: it is a side by side of two machines (DESIGN §9),
# whose ops and kernels may differ by design; --fail-on adds the plugin's structure and work verdicts
COMPARE_FAIL_ON = frozenset({TIME})
_SNIFF_BYTES = 1 << 16


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, not argparse's usage block: scripts read our stderr.
        raise _UsageError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """Extra arguments are the command's: its help is the one to see (an audit's `opprof show
        a b c` was sent to `opprof --help`, a missing one to `opprof show --help`)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._commands().get(getattr(parsed, "command", None) or "", self)
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        found = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(found[0].choices) if found else {}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def _read_by(parse: Callable[[str], _T]) -> Callable[[str], _T]:
    """An argparse type from one of the plugin's option parsers (settings.py): the same values, and
    its ValueError as argparse's one-line error naming the value."""

    def read(text: str) -> _T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r} is not {exc}") from None

    return read


_percentage = _read_by(parse_percentage)
_milliseconds = _read_by(parse_ms)
_fail_on = _read_by(parse_fail_on)  # --opprof-fail-on's kinds, comma list and hints


def _kinds_text(kinds: frozenset[str]) -> str:
    """`structure,work,time` (as --fail-on takes them, in the verdicts' order), `none`."""
    return ",".join(k for k in KINDS if k in kinds) or "none"


def _path(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is an empty path; give a file or folder")
    return text


def _file(text: str) -> str:
    """A path that must name a file (a trace, the baseline `opprof mv` moves)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is an empty path; give a file")
    return text


def _add_top(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--top",
        type=_positive_int,
        default=None,
        metavar="N",
        help=f"rows per table (default {DEFAULT_TOP}); with --json, keep the first N {what} (default all)",
    )


def _op_pattern(text: str) -> str:
    """An --op glob, read as the names it matches are (printable_name): `$'a\tb'` finds the op
    named with a tab, as the README says (a trial's was told it matched nothing, closest `a\tb`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is blank; give an op name or a glob such as 'aten::*mm'")
    return printable_name(text)


def _add_op(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--op",
        action="append",
        type=_op_pattern,
        default=None,
        metavar="GLOB",
        help=f"only {what} whose name is GLOB or matches it ('aten::*mm'); repeat it for more",
    )


def _check_selects(patterns: list[str] | None, names: set[str], where: str, what: str) -> None:
    """Each --op pattern matches some name: one that matches nothing is a typo, not an empty table."""
    for pattern in patterns or ():
        if not any(selected(name, (pattern,)) for name in names):
            raise _UsageError(selects_nothing(pattern, where, sorted(names), what))


def _check_chooses_ops(patterns: list[str], docs: list[BaselineDoc], where: str) -> None:
    """compare judges ops: a pattern must match one (a kernel or copy alone compares nothing)."""
    ops = {name for doc in docs for name in doc.ops}
    for pattern in patterns:
        if any(selected(name, (pattern,)) for name in ops):
            continue
        kernels = [k for doc in docs for name, k in doc.kernels.items() if selected(name, (pattern,))]
        if kernels:
            raise _UsageError(chooses_no_op(pattern, where, "kernels", sorted({o for k in kernels for o in k.ops})))
        if any(selected(name, (pattern,)) for doc in docs for name in doc.memory_ops):
            copiers = {
                op
                for doc in docs
                for op, entry in doc.ops.items()
                if entry.work and any(selected(m, (pattern,)) for m in entry.work.bytes_per_step)
            }
            raise _UsageError(chooses_no_op(pattern, where, "memory ops", sorted(copiers)))
        raise _UsageError(selects_nothing(pattern, where, sorted(ops), "op"))


def _version() -> str:
    from . import __version__  # the package's own, whether installed or run from a checkout

    return __version__


def _add_markdown(group: Any) -> None:
    group.add_argument(
        "--markdown",
        action="store_true",
        help="print the tables as GitHub-flavoured Markdown (a pull request comment, $GITHUB_STEP_SUMMARY)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="opprof", description="Operator-level profiles of PyTorch traces and baselines.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    analyze = sub.add_parser("analyze", help="tables (or JSON) for a Kineto/Chrome trace (.json, .json.gz)")
    analyze.add_argument("trace", type=_file, metavar="TRACE", help="a trace written by torch.profiler")
    output = analyze.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print Profile.to_dict() as JSON instead of tables")
    output.add_argument("--csv", action="store_true", help="print the per-op table as CSV (every op unless --top)")
    _add_markdown(output)
    _add_top(analyze, "rows of each list but the checks")
    _add_op(analyze, "the ops, kernels, memory ops, ranges and runtime calls (and the kernels of a chosen op)")

    show = sub.add_parser("show", help="a baseline file or folder (.opprof/<device key>/...) as tables")
    show.add_argument("path", type=_path, metavar="PATH", help="a baseline .json file, or a folder of them")
    shown = show.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the baselines as one JSON document")
    _add_markdown(shown)
    _add_top(show, "ops per baseline")
    _add_op(show, "the ops, kernels and memory ops (and the kernels of a chosen op), and baselines holding one")

    compare = sub.add_parser(
        "compare",
        help="two baseline folders (e.g. two device keys) or two traces, op by op; exit 1 when B is worse (--fail-on)",
    )
    compare.add_argument("a", type=_path, metavar="A", help="baseline folder, baseline file or trace: the reference")
    compare.add_argument("b", type=_path, metavar="B", help="the same kind as A: what is compared with it")
    compared = compare.add_mutually_exclusive_group()
    compared.add_argument("--json", action="store_true", help="print the comparison as JSON")
    _add_markdown(compared)
    compare.add_argument(
        "--tolerance",
        type=_percentage,
        default=DEFAULT_TOLERANCE,
        metavar="PCT",
        help=f"B may be this much slower per op before it counts as a regression (default {100 * DEFAULT_TOLERANCE:.0f}%%)",
    )
    compare.add_argument(
        "--min-delta-ms",
        type=_milliseconds,
        default=DEFAULT_MIN_DELTA_MS,
        metavar="MS",
        help=f"ignore differences smaller than this many ms per step (default {DEFAULT_MIN_DELTA_MS})",
    )
    compare.add_argument(
        "--stat",
        choices=("median", "min"),
        default="median",
        help="per-step statistic of each side (default median)",
    )
    compare.add_argument(
        "--fail-on",
        type=_fail_on,
        default=COMPARE_FAIL_ON,
        metavar="KINDS",
        help="which differences of B exit 1: a comma list of structure, work, time, environment, or none "
        "(default time; the plugin's --opprof-fail-on kinds)",
    )
    _add_top(compare, "ops per test")
    _add_op(compare, "the ops (with their kernels) compared and judged, and tests holding one")

    move = sub.add_parser("mv", help="make a baseline file the baseline of a renamed or moved test")
    move.add_argument("file", type=_file, metavar="FILE", help="the baseline .json file of the renamed or moved test")
    move.add_argument("nodeid", metavar="NODEID", help="the test's node id now, as pytest prints it")
    return parser


# -- analyze ------------------------------------------------------------------------------------


ANALYZE_NAMES = "op, kernel, memory op, range or runtime call"
DOC_NAMES = "op, kernel or memory op"


TOPPED = ("ops", "ranges", "kernels", "memory_ops", "runtime", "graph_launches")  # what --top cuts


def _analyze(args: argparse.Namespace) -> _Done:
    whole = load_trace(args.trace)
    _check_selects(args.op, whole.names(), args.trace, ANALYZE_NAMES)
    profile = whole.only(args.op) if args.op else whole
    if args.csv and args.op and not profile.ops:  # a header alone would read as "no such op"
        raise _UsageError(csv_chose_no_op(args.op, args.trace))
    if args.json:
        data = {**profile.to_dict(), "trace": _trace_facts(whole)}
        if args.top is not None:  # as the tables show them, each counting what it left out; every check stays
            data["left_out"] = {key: max(0, len(data[key]) - args.top) for key in TOPPED}
            for key in TOPPED:
                data[key] = data[key][: args.top]
        out = _json_text(data)
    elif args.csv:
        out = op_csv(replace(profile, ops=profile.ops[: args.top]))  # in the tables' order
    else:
        out = profile_tables(profile, args.top or DEFAULT_TOP, whole if args.op else None) + "\n"
    broken = _untrusted(whole)
    if broken:  # shown above with the rest; the exit code tells a script
        return _Done(out, EXIT_BAD_INPUT, (f"{args.trace}: {broken}",))
    return _Done(out)


def _trace_facts(profile: Profile) -> dict[str, Any]:
    """What a trace's header says of where it came from, for a script (the text heads its tables
    with it; a dashboard took a partial step's trace for a whole one): the device key (opprof's
    header, else the first GPU's `deviceProperties`, else null), and of a trace opprof exported,
    its test's node id and outcome and whether the test's exception cut it short (null, null,
    false for another's)."""
    header = profile.metadata.get("opprof")
    header = header if isinstance(header, dict) else {}
    nodeid, outcome = header.get("nodeid"), header.get("outcome")
    return {
        "device_key": key_from_trace_metadata(profile.metadata),
        "nodeid": printable_name(nodeid) if isinstance(nodeid, str) else None,
        "outcome": outcome if isinstance(outcome, str) else None,
        "cut_short": profile.traced_cut_short,
    }


def _untrusted(profile: Profile) -> str | None:
    """Why a trace's numbers cannot be trusted (its error-level checks), or None."""
    errors = [f"{c.name}: {c.message}" for c in profile.checks if c.status == "error"]
    if not errors:
        return None
    forked = _unmarked_forks(profile) and any(c.name in FORK_CHECKS for c in profile.checks if c.status == "error")
    return f"the measurement cannot be trusted ({'; '.join(errors)}){FORKED_TRACE if forked else ''}"


FORK_CHECKS = ("nesting", "wall_time")  # what an op whose end another thread recorded breaks


def _unmarked_forks(profile: Profile) -> bool:
    """Whether the trace ran TorchScript forks and does not say where its ops ended (a trace torch
    wrote: opprof's own write the `End thread` such ops need)."""
    table = profile.event_table
    return any(op.name == FORKED_FUNCTION for op in profile.ops) and not (table is not None and table.end_threads)


# -- show -----------------------------------------------------------------------------------------


def _missing(path: Path) -> str:
    """Why a path does not exist: a symlink that leads nowhere says so (a trial's loop read as `no
    such file`)."""
    return broken_link(path) or "no such file or folder"


def _baselines_at(path: Path) -> list[tuple[Path, BaselineDoc]]:
    """A baseline file, or every baseline under a folder; BaselineError names what is wrong."""
    found, unreadable = _readable_baselines_at(path)
    if unreadable:
        raise BaselineError(unreadable_files(unreadable))
    return found


def _readable_baselines_at(path: Path) -> tuple[list[tuple[Path, BaselineDoc]], list[str]]:
    """_baselines_at reading past a folder's unreadable files: those come back as error lines."""
    if path.is_dir():
        found, unreadable = scan_baseline_dir(path)
        return [(p, _printable_id(doc)) for p, doc in found], unreadable
    if not path.exists():
        raise BaselineError(f"{path}: {_missing(path)}")
    if not path.is_file():
        raise BaselineError(f"{path}: not a file or folder (a pipe or a device?); give a baseline file or folder")
    data = _given_baseline(path)
    return [(path, _printable_id(data))], []


GIVEN_FIX = (
    "if it is a baseline, fix or delete it and run pytest --opprof-update-baseline; else give a baseline file or folder"
)


def _given_baseline(path: Path) -> BaselineDoc:
    """A file given as a baseline: one that is none (a `package.json`) is not told to be deleted
    (an audit's `opprof show package.json` was)."""
    if path.suffix != ".json" and not _is_trace(path):  # a test file: not to fix or delete as a baseline
        raise BaselineError(f"{path}: no baseline (baselines are .json files); give a baseline file or folder")
    try:
        data = read_baseline(path)
    except BaselineError as exc:
        message = str(exc)
        raise BaselineError(
            message.removesuffix(UNUSABLE_FIX) + GIVEN_FIX if message.endswith(UNUSABLE_FIX) else message
        ) from None
    assert data is not None
    return data


def _printable_id(doc: BaselineDoc) -> BaselineDoc:
    """The document with its node id as printable_name writes it: pytest's own ids are (it escapes
    them), but a hand edit's ESC reached the terminal through `opprof show` (a trial)."""
    return doc if is_printable_name(doc.nodeid) else replace(doc, nodeid=printable_name(doc.nodeid))


def _show(args: argparse.Namespace) -> _Done:
    """The tables (or JSON) of every readable baseline; a folder's unreadable files are named after
    them, one line each, and exit 2."""
    found, unreadable = _readable_baselines_at(Path(args.path))
    if found:
        done = _show_found(args, found, unreadable)
    else:
        done = _Done(_json_text({"baselines": [], "unreadable": unreadable}) if args.json else "")
    if unreadable:
        return replace(done, code=EXIT_BAD_INPUT, errors=tuple(unreadable))
    return done


def _show_found(args: argparse.Namespace, found: list[tuple[Path, BaselineDoc]], unreadable: list[str]) -> _Done:
    if args.op:
        _check_selects(args.op, {n for _, doc in found for n in doc.names()}, args.path, DOC_NAMES)
        found = [(path, doc.only(args.op)) for path, doc in found]
        found = [(path, doc) for path, doc in found if doc.names()]
    if args.json:
        docs = []
        for path, found_doc in found:
            doc = dict(found_doc.to_dict(), path=str(path))
            if args.top is not None:  # the ops the table shows
                doc["ops"] = {name: doc["ops"][name] for name in found_doc.ops_by_time()[: args.top]}
            doc["ops_left_out"] = len(found_doc.ops) - len(doc["ops"])
            docs.append(doc)
        return _Done(_json_text({"baselines": docs, "unreadable": unreadable}))
    return _Done("\n\n".join(baseline_tables(str(path), doc, args.top or DEFAULT_TOP) for path, doc in found) + "\n")


# -- compare --------------------------------------------------------------------------------------


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
    ) -> None:
        self.path, self.kind, self.docs, self.device_key = path, kind, docs, device_key
        self.warnings = warnings  # a trace's warning-level checks, as `name: message`
        self.test = test  # the test of a trace opprof exported (its header's node id) or of a baseline file

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


def _is_trace(path: Path) -> bool:
    if path.name.endswith(".gz"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return False  # read_baseline reports it
    if head.lstrip().startswith(b'{\n  "capture": {'):
        return False  # a baseline as we write it (sorted keys): its op names may look like trace keys
    if re.match(rb"\[\s*[{\]]", head.lstrip(b"\xef\xbb\xbf \t\r\n")):
        return True  # a bare list of events (the Chrome trace format's other form); `[pytest]` is an ini file
    return any(marker in head for marker in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"'))


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
        raise _UsageError(empty_compare_side(path))
    if path.is_file() and _lfs_file(path):  # a .json trace's pointer was named a baseline's
        raise _UsageError(lfs_compare_side(path))
    if path.is_file() and _is_trace(path):
        profile = load_trace(path)
        broken = _untrusted(profile)
        if broken:
            raise _UsageError(f"{path}: {broken}; compare traces whose checks pass (opprof analyze {path} shows them)")
        if profile.traced_cut_short:
            raise _UsageError(cut_short_trace(path))
        key = key_from_trace_metadata(profile.metadata) or "unknown"
        doc = baseline_from_profile(profile, path.name, key, _trace_environment(profile.metadata))
        warned = tuple(f"{c.name}: {c.message}" for c in profile.warnings)
        header = profile.metadata.get("opprof")
        test = header.get("nodeid") if isinstance(header, dict) else None
        test = printable_name(test) if isinstance(test, str) else None
        return _Side(path, "trace", {path.name: doc}, key, warned, test)
    found = _baselines_at(path)
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
        # two traces opprof wrote of one test: named by the test (a trial's read `a.json.gz vs b.json.gz`)
        shown = a.test if a.test and a.test == b.test else na if na == nb else f"{na} vs {nb}"
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
    structure: tuple[str, ...] = ()  # the plugin's structure verdict of B against A (ops added, removed, recounted)
    environment: tuple[str, ...] = ()  # what differs between the sides' machine setups (the plugin's verdict)
    failed: tuple[str, ...] = ()  # the --fail-on kinds B differs in, in the verdicts' order: why it exits 1


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


def _compare(args: argparse.Namespace) -> _Done:
    _check_compare_paths(args.a, args.b)
    a, b = _load_side(args.a), _load_side(args.b)
    pairs, only_a, only_b = _pairs(a, b)
    if args.op:
        _check_chooses_ops(args.op, [*a.docs.values(), *b.docs.values()], f"{args.a} or {args.b}")
        pairs = [(name, names, da.only(args.op), db.only(args.op)) for name, names, da, db in pairs]
    kinds = (a.kind, b.kind)
    same_device = a.device_key == b.device_key
    compared = [_compared(name, names, da, db, args, kinds, same_device) for name, names, da, db in pairs]
    results = [r for r in compared if r.rows or not args.op]
    unchosen = [r.name for r in compared if not r.rows and args.op]
    untimed = [r.name for r in results if r.untimed]
    outcome = _Outcome(a, b, results, only_a, only_b, unchosen, _compare_warnings(a, b, pairs, untimed))
    out = _json_text(_compare_json(args, outcome)) if args.json else "\n".join(_compare_text(args, outcome)) + "\n"
    if not pairs:  # nothing compared is no pass (an audit's CI step read `0 of 0 regressed`, exit 0)
        return _Done(out, EXIT_BAD_INPUT, (nothing_in_both(args.a, args.b, _other_rootdir(only_a, only_b)),))
    if not results:  # --op chose no op of any test in both (a review's)
        return _Done(out, EXIT_BAD_INPUT, (nothing_chosen(args.op, len(unchosen)),))
    return _Done(out, EXIT_REGRESSION if outcome.failed else EXIT_OK)


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
) -> _Compared:
    rows = side_by_side(a, b, tolerance=args.tolerance, min_delta_ms=args.min_delta_ms, stat=args.stat)
    untimed = any(kind != "trace" and doc.steps < MIN_TIME_STEPS for kind, doc in zip(kinds, (a, b)))
    fastest = min(a.wall_ms) if a.wall_ms and not untimed else None  # an added op's costliest step: time
    worse = b_regressed(rows, args.min_delta_ms, args.tolerance, fastest)
    if untimed:  # a single-step capture's time, shown and never judged, as the plugin never fails it
        worse = [r for r in worse if r.status != "slower"]
    verdicts = side_by_side_verdicts(b, a, kernels=same_device)
    work = tuple(v.message for v in verdicts if v.kind == WORK)
    structure = tuple(v.message for v in verdicts if v.kind == STRUCTURE)
    # a trace whose header names no device tells nothing of its machine: not judged on it (as the warnings)
    told = "unknown" not in (a.device_key, b.device_key)
    environment = tuple(f"environment differs: {v.why}" for v in verdicts if v.kind == ENVIRONMENT and told)
    found = {STRUCTURE: structure, WORK: work, TIME: worse, ENVIRONMENT: environment}
    failed = tuple(kind for kind in KINDS if kind in args.fail_on and found[kind])
    return _Compared(name, names, rows, worse, untimed, work, structure, environment, failed)


def _compare_warnings(a: _Side, b: _Side, pairs: list[_Pair], untimed: list[str]) -> list[str]:
    """What makes the comparison more than one of code: a side's trace warnings (ops outside
    the steps are in no per-step number), two machines, two tests."""
    found = [f"{label}: {warning}" for label, side in (("A", a), ("B", b)) for warning in side.warnings]
    keys = (a.device_key, b.device_key)
    if a.device_key != b.device_key and "unknown" not in keys:  # a trace's header may name no device
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
    return found


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
            raise _UsageError(
                f"{given}: {_missing(Path(given))}; give two baseline folders, or two traces or baseline files"
            )
        if not Path(given).is_file() and not Path(given).is_dir():
            raise _UsageError(
                f"{given}: not a file or folder (a pipe or a device?); give two baseline folders, or two traces or "
                "baseline files"
            )
    dirs = [Path(p).is_dir() for p in (first, second)]
    if dirs[0] != dirs[1]:
        folder, other = (first, second) if dirs[0] else (second, first)
        raise _UsageError(
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
        "environment_changes": list(r.environment),
        "failed_on": list(r.failed),
        "ops": [row.to_dict() for row in shown],
        "ops_left_out": len(r.rows) - len(shown),
    }


def _not_slower(rows: Sequence[SideRow], structure_shown: bool = False) -> str:
    """A test B did not regress on time; where its calls differ, said so (a trial read `B not
    worse` over a graph break: `Torch-Compiled Region 1 -> 2`, aten::addmm 2 -> 3), unless the
    structure verdict's line under it says so (--fail-on structure)."""
    if structure_shown:
        return not_slower([])
    return not_slower([r.op for r in rows if r.calls_changed or r.status in ("added", "removed")])


def _test_verdict(r: _Compared, fail_on: frozenset[str]) -> str:
    """A test's line: B regressed in time or not, and where time does not fail (--fail-on), said so."""
    if not r.worse:
        return _not_slower(r.rows, STRUCTURE in fail_on and bool(r.structure))
    if TIME in fail_on:
        return f"B regressed: {_worse_text(r.worse)}"
    return f"B slower: {_worse_text(r.worse)}; {time_not_failing(_kinds_text(fail_on))}"


def _test_lines(r: _Compared, fail_on: frozenset[str]) -> list[str]:
    """The lines under a test's line: its structure (where --fail-on judges it) and work changes, its
    environment (where --fail-on judges it; else the warnings say it for all tests)."""
    structure = list(r.structure) if STRUCTURE in fail_on else []
    environment = list(r.environment) if ENVIRONMENT in fail_on else []
    return [*structure, *_work_lines(r.work), *environment]


def _work_lines(work: tuple[str, ...], shown: int = 3) -> list[str]:
    """A test's work changes, a line each (a trial's Linear of 64 -> 256 read `B not slower`, no
    word of the shapes that the plugin failed), the first `shown` and a count of the others."""
    lines = [f"work changed: {change}" for change in work[:shown]]
    if len(work) > shown:
        lines.append(f"work changed for {len(work) - shown} more ops (--json lists each)")
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
    for r in outcome.results:
        verdict = _test_verdict(r, args.fail_on)
        out += ["", f"{r.name}: {verdict}", *_test_lines(r, args.fail_on)]
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


def _last_line(results: list[_Compared], fail_on: frozenset[str]) -> str:
    """What B failed in: under the default (time) the tests it regressed in; under another --fail-on
    each failed test with the kinds it failed on (`tests/t.py::x (structure, work)`)."""
    compared = count_of(len(results), "compared test")
    if fail_on == COMPARE_FAIL_ON:
        worse = [r.name for r in results if r.worse]
        # named: a scale trial's 1 regression of 400 sat in 6,000 lines above a line that named none
        named = f": {first_three(worse)}" if worse and len(results) > 1 else ""
        return f"opprof compare: {len(worse)} of {compared} regressed in B{named}"
    failed = [f"{r.name} ({', '.join(r.failed)})" for r in results if r.failed]
    named = f": {first_three(failed)}" if failed else ""
    return f"opprof compare: {len(failed)} of {compared} failed in B (--fail-on {_kinds_text(fail_on)}){named}"


# -- main -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Done:
    """A command's result: what it prints, its exit code, and a line for stderr after the output."""

    out: str
    code: int = EXIT_OK
    errors: tuple[str, ...] = ()


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _emit(done: _Done) -> int:
    """Writes a command's output, then its error line. The exit code stays the command's where the
    reader stops reading (`opprof compare A B | head` under pipefail passed a regression as 0) or
    stdout is closed (`>&-`); an output that cannot be written (a full disk) is an error of its
    own, in one line."""
    try:
        if sys.stdout is not None:  # None: started with stdout closed
            sys.stdout.write(done.out)
            sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    except (OSError, ValueError) as exc:  # ValueError: a file closed under us
        _quiet_stdout()
        _say(f"opprof: error: {output_unwritable(exc)}")
        return EXIT_BAD_INPUT
    for error in done.errors:
        _say(f"opprof: error: {printable_name(error)}")
    return done.code


def _say(line: str) -> None:
    """A line on stderr, if it can be written: a reader gone from it too (`2>&1 | head`) must not
    turn the exit code into a traceback's 1."""
    if sys.stderr is not None:  # print(file=None) would write to stdout
        with suppress(OSError, ValueError):
            print(line, file=sys.stderr)


def _quiet_stdout() -> None:
    """Points stdout at the null device, so the interpreter's last flush of what could not be
    written raises nothing more (Python's own advice for SIGPIPE)."""
    with suppress(OSError, ValueError, AttributeError):  # a stdout without a file (a test's capture)
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


# -- mv ------------------------------------------------------------------------------------------


def _move(args: argparse.Namespace) -> _Done:
    """`opprof mv FILE NODEID`: the renamed or moved test keeps its baseline in one step (a
    newcomer had to `git mv` the file and hand-edit its "nodeid")."""
    if Path(args.file).is_file():
        _given_baseline(Path(args.file))  # not a baseline: said before anything moves
    moved = move_baseline(Path(args.file), args.nodeid)
    if moved.was == args.nodeid and moved.new == moved.old:
        return _Done(unmoved_line(moved.new, args.nodeid) + "\n")
    new = _as_given(moved.new, moved.old) if moved.new != moved.old else moved.old
    return _Done(moved_line(moved.old, new, args.nodeid, moved.was) + "\n")


def _as_given(path: Path, given: Path) -> Path:
    """`path` in the form FILE was given in: absolute for an absolute FILE (a review's line read
    `/abs/old -> h4/proj/new`), else relative to the working folder where it lies under it."""
    if given.is_absolute():
        return path.absolute()
    with suppress(ValueError):
        return path.absolute().relative_to(Path.cwd())
    return path


_COMMANDS = {"analyze": _analyze, "show": _show, "compare": _compare, "mv": _move}


def _run(args: argparse.Namespace) -> _Done:
    """The command's result; with --markdown, its text as Markdown (its tables made as such)."""
    if not getattr(args, "markdown", False):
        return _COMMANDS[args.command](args)
    with markdown_tables():
        done = _COMMANDS[args.command](args)
    return replace(done, out=as_markdown(done.out))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:  # usage on stderr, as for any usage error: stdout stays for results
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        done = _run(args)
    except (_UsageError, OpprofError) as exc:  # one line: a path's newline or ESC written as its escape
        _say(f"opprof: error: {printable_name(str(exc))}")
        return EXIT_BAD_INPUT
    return _emit(done)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
