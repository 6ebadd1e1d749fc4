"""What the `opprof` commands share: their result and exit codes, usage errors, and the reading of
the paths given (baseline files and folders, traces told apart from them)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import jsontext
from .analysis import Profile
from .analysis.model import selected
from .baseline import (
    UNUSABLE_FIX,
    BaselineError,
    read_baseline,
    scan_baseline_dir,
)
from .documents import BaselineDoc
from .errors import FORKED_FUNCTION, FORKED_TRACE, unreadable_files
from .events import is_printable_name, printable_name
from .files import broken_link
from .opmessages import chooses_no_op, selects_nothing

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2


DEFAULT_TOP = 20


SNIFF_BYTES = 1 << 16


class UsageError(Exception):
    pass


def check_selects(patterns: list[str] | None, names: set[str], where: str, what: str) -> None:
    """Each --op pattern matches some name: one that matches nothing is a typo, not an empty table."""
    for pattern in patterns or ():
        if not any(selected(name, (pattern,)) for name in names):
            raise UsageError(selects_nothing(pattern, where, sorted(names), what))


def check_chooses_ops(patterns: list[str], docs: list[BaselineDoc], where: str) -> None:
    """compare judges ops: a pattern must match one (a kernel or copy alone compares nothing)."""
    ops = {name for doc in docs for name in doc.ops}
    for pattern in patterns:
        if any(selected(name, (pattern,)) for name in ops):
            continue
        kernels = [k for doc in docs for name, k in doc.kernels.items() if selected(name, (pattern,))]
        if kernels:
            raise UsageError(chooses_no_op(pattern, where, "kernels", sorted({o for k in kernels for o in k.ops})))
        if any(selected(name, (pattern,)) for doc in docs for name in doc.memory_ops):
            copiers = {
                op
                for doc in docs
                for op, entry in doc.ops.items()
                if entry.work and any(selected(m, (pattern,)) for m in entry.work.bytes_per_step)
            }
            raise UsageError(chooses_no_op(pattern, where, "memory ops", sorted(copiers)))
        raise UsageError(selects_nothing(pattern, where, sorted(ops), "op"))


def untrusted(profile: Profile) -> str | None:
    """Why a trace's numbers cannot be trusted (its error-level checks), or None."""
    errors = [f"{c.name}: {c.message}" for c in profile.checks if c.status == "error"]
    if not errors:
        return None
    forked = unmarked_forks(profile) and any(c.name in FORK_CHECKS for c in profile.checks if c.status == "error")
    return f"the measurement cannot be trusted ({'; '.join(errors)}){FORKED_TRACE if forked else ''}"


FORK_CHECKS = ("nesting", "wall_time")  # what an op whose end another thread recorded breaks


def unmarked_forks(profile: Profile) -> bool:
    """Whether the trace ran TorchScript forks and does not say where its ops ended (a trace torch
    wrote: opprof's own write the `End thread` such ops need)."""
    table = profile.event_table
    return any(op.name == FORKED_FUNCTION for op in profile.ops) and not (table is not None and table.end_threads)


def missing_path(path: Path) -> str:
    """Why a path does not exist: a symlink that leads nowhere says so (a trial's loop read as `no
    such file`)."""
    return broken_link(path) or "no such file or folder"


def baselines_at(path: Path) -> list[tuple[Path, BaselineDoc]]:
    """A baseline file, or every baseline under a folder; BaselineError names what is wrong."""
    found, unreadable = readable_baselines_at(path)
    if unreadable:
        raise BaselineError(unreadable_files(unreadable))
    return found


def readable_baselines_at(path: Path) -> tuple[list[tuple[Path, BaselineDoc]], list[str]]:
    """baselines_at reading past a folder's unreadable files: those come back as error lines."""
    if path.is_dir():
        found, unreadable = scan_baseline_dir(path)
        return [(p, printable_id(doc)) for p, doc in found], unreadable
    if not path.exists():
        raise BaselineError(f"{path}: {missing_path(path)}")
    if not path.is_file():
        raise BaselineError(f"{path}: not a file or folder (a pipe or a device?); give a baseline file or folder")
    data = given_baseline(path)
    return [(path, printable_id(data))], []


GIVEN_FIX = (
    "if it is a baseline, fix or delete it and run pytest --opprof-update-baseline; else give a baseline file or folder"
)


def given_baseline(path: Path) -> BaselineDoc:
    """A file given as a baseline: one that is none (a `package.json`) is not told to be deleted
    (an audit's `opprof show package.json` was)."""
    if path.suffix != ".json" and not is_trace(path):  # a test file: not to fix or delete as a baseline
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


def printable_id(doc: BaselineDoc) -> BaselineDoc:
    """The document with its node id as printable_name writes it: pytest's own ids are (it escapes
    them), but a hand edit's ESC reached the terminal through `opprof show` (a trial)."""
    return doc if is_printable_name(doc.nodeid) else replace(doc, nodeid=printable_name(doc.nodeid))


def is_trace(path: Path) -> bool:
    if path.name.endswith(".gz"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False  # read_baseline reports it
    if head.lstrip().startswith(b'{\n  "capture": {'):
        return False  # a baseline as we write it (sorted keys): its op names may look like trace keys
    if re.match(rb"\[\s*[{\]]", head.lstrip(b"\xef\xbb\xbf \t\r\n")):
        return True  # a bare list of events (the Chrome trace format's other form); `[pytest]` is an ini file
    return any(marker in head for marker in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"'))


@dataclass(frozen=True, slots=True)
class Done:
    """A command's result: what it prints, its exit code, and lines for stderr after the output:
    errors, then notes (what the output is fit for, as a Markdown too long for a comment)."""

    out: str
    code: int = EXIT_OK
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def json_text(data: Any) -> str:
    """A command's --json output (jsontext: indented, sorted keys, a series of plain values on one line)."""
    return jsontext.json_text(data) + "\n"
