"""The `opprof` command.

    opprof analyze TRACE [--json|--csv|--markdown] [--top N] [--op GLOB ...]
                                                 tables (or JSON, CSV) for a Kineto/Chrome trace
    opprof show PATH [--json|--markdown] [--top N] [--op GLOB ...]
                                                 a baseline file or folder as tables
    opprof mv FILE NODEID                        a renamed or moved test keeps its baseline
    opprof compare A B [--json|--markdown] [--tolerance PCT] [--min-delta-ms MS] [--stat median|min] [--top N]
                       [--op GLOB ...] [--fail-on KINDS]
                                                 two baseline folders, or two traces/baseline files
    --op GLOB (repeatable): only the ops (kernels, memory ops...) it matches

Exit codes: 0 fine, 1 a regression found (compare: B worse than A in a --fail-on kind, time by default), 2 bad
input (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from .analysis import Profile
from .baseline import (
    move_baseline,
)
from .clibase import (
    DEFAULT_TOP,
    EXIT_BAD_INPUT,
    Done,
    UsageError,
    check_selects,
    given_baseline,
    json_text,
    readable_baselines_at,
    untrusted,
)
from .comparecmd import COMPARE_FAIL_ON, run_compare
from .device import UNKNOWN_KEY, key_from_trace_metadata
from .documents import BaselineDoc
from .errors import (
    BaselineError,
    OpprofError,
    closest_names,
    csv_chose_no_op,
    markdown_too_long,
    moved_before_line,
    moved_line,
    mv_not_a_file,
    output_unwritable,
    unmoved_line,
)
from .events import printable_name
from .rules import DEFAULT_MIN_DELTA_MS, DEFAULT_TOLERANCE
from .runfiles import op_csv
from .settings import NONE_ALONE, parse_fail_on, parse_ms, parse_percentage
from .showtables import baseline_tables
from .tables import as_markdown, fitted_to, markdown_tables, profile_tables
from .textout import fit_stream, os_text, terminal_columns
from .trace import load_trace

_T = TypeVar("_T")


_INVALID_COMMAND = re.compile(r"argument COMMAND: invalid choice: '(.*)' \(choose from ")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, not argparse's usage block: scripts read our stderr.
        raise UsageError(f"{message}{self._meant(message)} (see {self.prog} --help)")

    def _meant(self, message: str) -> str:
        """`; did you mean compare?` for a mistyped command (a trial's `opprof comapre A B` got the
        list alone, where --fail-on and --op name the close value)."""
        typed = _INVALID_COMMAND.match(message)
        close = closest_names(typed.group(1), self._commands()) if typed else []
        return f"; did you mean {close[0]}?" if close else ""

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


class _AddKinds(argparse.Action):
    """--fail-on given again adds its kinds, as --op adds its globs (the last alone dropped a time
    regression without a word); the default stands until one is given."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        given = getattr(namespace, "_fail_on_given", False)
        if given and bool(getattr(namespace, self.dest)) != bool(values):  # as `none,time` in one value
            raise argparse.ArgumentError(self, f"{NONE_ALONE} (given as two --fail-on)")
        setattr(namespace, self.dest, getattr(namespace, self.dest) | values if given else values)
        namespace._fail_on_given = True


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
    named with a tab, as docs/bad-input.md says (a trial's was told it matched nothing, closest `a\tb`)."""
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
        action=_AddKinds,
        default=COMPARE_FAIL_ON,
        metavar="KINDS",
        help="which differences of B exit 1: a comma list of structure, work, time, environment, or none "
        "(default time; the plugin's --opprof-fail-on kinds; repeat it for more)",
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


def _analyze(args: argparse.Namespace) -> Done:
    whole = load_trace(args.trace)
    check_selects(args.op, whole.names(), args.trace, ANALYZE_NAMES)
    profile = whole.only(args.op) if args.op else whole
    if args.csv and args.op and not profile.ops:  # a header alone would read as "no such op"
        raise UsageError(csv_chose_no_op(args.op, args.trace))
    if args.json:
        data = {**profile.to_dict(), "trace": _trace_facts(whole)}
        if args.top is not None:  # as the tables show them, each counting what it left out; every check stays
            data["left_out"] = {key: max(0, len(data[key]) - args.top) for key in TOPPED}
            for key in TOPPED:
                data[key] = data[key][: args.top]
        out = json_text(data)
    elif args.csv:
        # in the tables' order; `\n` line ends, as the other outputs: a text stream writes its
        # platform's (csv's `\r\n` read `\r\r\n` from Windows' console, blank rows in Excel)
        out = op_csv(replace(profile, ops=profile.ops[: args.top])).replace("\r\n", "\n")
    else:
        out = profile_tables(profile, args.top or DEFAULT_TOP, whole if args.op else None) + "\n"
    broken = untrusted(whole)
    if broken:  # shown above with the rest; the exit code tells a script
        return Done(out, EXIT_BAD_INPUT, (f"{args.trace}: {broken}",))
    return Done(out)


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
        "device_key": key_from_trace_metadata(profile.metadata) or UNKNOWN_KEY,  # as opprof compare names it
        "nodeid": printable_name(nodeid) if isinstance(nodeid, str) else None,
        "outcome": outcome if isinstance(outcome, str) else None,
        "cut_short": profile.traced_cut_short,
    }


# -- show -----------------------------------------------------------------------------------------

SHOW_SCHEMA = 1  # of `opprof show --json`'s own layout (each baseline inside keeps its file's schema)


def _show(args: argparse.Namespace) -> Done:
    """The tables (or JSON) of every readable baseline; a folder's unreadable files are named after
    them, one line each, and exit 2."""
    found, unreadable = readable_baselines_at(Path(args.path))
    if found:
        done = _show_found(args, found, unreadable)
    else:
        done = Done(json_text({"schema": SHOW_SCHEMA, "baselines": [], "unreadable": unreadable}) if args.json else "")
    if unreadable:
        return replace(done, code=EXIT_BAD_INPUT, errors=tuple(unreadable))
    return done


def _show_found(args: argparse.Namespace, found: list[tuple[Path, BaselineDoc]], unreadable: list[str]) -> Done:
    if args.op:
        check_selects(args.op, {n for _, doc in found for n in doc.names()}, args.path, DOC_NAMES)
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
        return Done(json_text({"schema": SHOW_SCHEMA, "baselines": docs, "unreadable": unreadable}))
    tables = (baseline_tables(str(path), doc, args.top or DEFAULT_TOP, inputs=bool(args.op)) for path, doc in found)
    return Done("\n\n".join(tables) + "\n")


# -- main -----------------------------------------------------------------------------------------


def _emit(done: Done) -> int:
    """Writes a command's output, then its error line. The exit code stays the command's where the
    reader stops reading (`opprof compare A B | head` under pipefail passed a regression as 0) or
    stdout is closed (`>&-`); an output that cannot be written (a full disk) is an error of its
    own, in one line."""
    try:
        if sys.stdout is not None:  # None: started with stdout closed
            sys.stdout.write(fit_stream(done.out, sys.stdout))  # an ASCII stdout: `...`, `\\xe9`
            sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    except (OSError, ValueError) as exc:  # ValueError: a file closed under us
        _quiet_stdout()
        _say(f"opprof: error: {output_unwritable(exc)}")
        return EXIT_BAD_INPUT
    for error in done.errors:
        _say(f"opprof: error: {printable_name(error)}")
    for note in done.notes:
        _say(f"opprof: note: {note}")
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


def _move(args: argparse.Namespace) -> Done:
    """`opprof mv FILE NODEID`: the renamed or moved test keeps its baseline in one step (a
    newcomer had to `git mv` the file and hand-edit its "nodeid")."""
    file = Path(args.file)
    if file.is_file():
        given_baseline(file)  # not a baseline: said before anything moves
    elif os.path.lexists(file) and not file.is_symlink():  # `/`, `.opprof`, /dev/null: not to rename or delete
        raise BaselineError(mv_not_a_file(file, "a folder" if file.is_dir() else "a device or a pipe"))
    nodeid = _as_pytest_names_it(os_text(args.nodeid))  # typed in a C locale: the id the plugin names the test by
    moved = move_baseline(Path(args.file), nodeid)
    if moved.gone:  # the same command again: FILE named, a mistyped one is seen
        return Done(moved_before_line(moved.old, moved.new, nodeid) + "\n")
    if moved.was == nodeid and moved.new == moved.old:
        return Done(unmoved_line(moved.new, nodeid) + "\n")
    new = _as_given(moved.new, moved.old) if moved.new != moved.old else moved.old
    return Done(moved_line(moved.old, new, nodeid, moved.was) + "\n")


def _as_pytest_names_it(typed: str) -> str:
    r"""A node id as pytest writes it, whatever way its file part was typed: `/` for a Windows `\`
    (a tab-completed `.\tests\test_a.py` went to the right file, which then named the test
    otherwise than pytest and was refused as another test's), without a leading `./`."""
    file, sep, rest = typed.partition("::")
    file = file.replace("\\", "/")
    while file.startswith("./"):
        file = file[2:]
    return file + sep + rest


def _as_given(path: Path, given: Path) -> Path:
    """`path` in the form FILE was given in: absolute for an absolute FILE (a review's line read
    `/abs/old -> h4/proj/new`), else relative to the working folder where it lies under it."""
    if given.is_absolute():
        return path.absolute()
    with suppress(ValueError):
        return path.absolute().relative_to(Path.cwd())
    return path


_COMMANDS = {"analyze": _analyze, "show": _show, "compare": run_compare, "mv": _move}


def _run(args: argparse.Namespace) -> Done:
    """The command's result; with --markdown, its text as Markdown (its tables made as such);
    else its tables fit the terminal it prints to (names cut), and a file or pipe gets them whole."""
    if not getattr(args, "markdown", False):
        with fitted_to(terminal_columns()):
            return _COMMANDS[args.command](args)
    with markdown_tables():
        done = _COMMANDS[args.command](args)
    out = as_markdown(done.out)
    return replace(done, out=out, notes=(*done.notes, *markdown_too_long(len(out), len(out.encode()))))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:  # usage on stderr, as for any usage error: stdout stays for results
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        done = _run(args)
    except (UsageError, OpprofError) as exc:  # one line: a path's newline or ESC written as its escape
        _say(f"opprof: error: {printable_name(str(exc))}")
        return EXIT_BAD_INPUT
    return _emit(done)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
