"""A test's verdict lines in the terminal summary: what changed against its baseline, by kind,
with the verdict and its fix (one line a kind; inconclusive ones with why)."""

from __future__ import annotations

from collections import Counter

from .compare import EVERY_CHANGE, MAX_LISTED
from .decide import SPEED, TIMES_WRITTEN, lets_pass
from .errors import (
    NOT_FAILING,
    ONE_MEASUREMENT,
    RECORD_COMMAND,
)
from .excuses import QUIET_MACHINE_FIX
from .results import RECORDING
from .rules import DEFAULT_FAIL_ON, STRUCTURE, TIME, WORK
from .textout import shell_quote
from .timing import MOST_STEPS_WHY, PERIODIC_WHY, REST_WHY, range_span
from .units import count_of, first_three
from .verdicts import CHANGED, INCONCLUSIVE, Verdict, added_ms, largest_first

_MORE = "-v or --opprof-json lists them all"


def verdict_lines(
    verdicts: list[Verdict],
    verbose: bool = False,
    status: str | None = None,
    fails: frozenset[str] = DEFAULT_FAIL_ON,
    nodeid: str = "",
) -> list[str]:
    """One line per verdict kind (conclusive time and inconclusive time apart), or every
    verdict's message when `verbose`. `status`: what the baseline step did (kept, rewritten...),
    or `strict` where --opprof-strict made the test an error; `fails`: the verdict kinds that
    fail the test; `nodeid`: the test's, named in the command that records faster times."""
    time_fails = TIME in fails
    if verbose:  # a structure verdict's cut list in full; an op's work change led by its kind
        return [_recorded(_in_full(v), v, status, fails) for v in verdicts]
    groups: dict[str, list[Verdict]] = {}
    for v in verdicts:  # inconclusive apart by why: a trial's three ops read the first op's range
        key = f"inconclusive: {_why_kind(v)}" if v.status == INCONCLUSIVE else v.kind
        groups.setdefault(key, []).append(v)
    lines = []
    for key, group in groups.items():
        if key.startswith("inconclusive"):
            lines.append(_inconclusive_line(group, status, time_fails))
        elif key == TIME:
            lines.append(_time_line(group, status, time_fails, nodeid))
        elif len(group) == 1:  # a structure verdict says what it is; one op's work verdict gets the word
            lines.append(_recorded(group[0].titled, group[0], status, fails))
        else:
            line = f"{_changed_in(key, group)}: {group[0].message}; and {len(group) - 1} more ({_MORE})"
            lines.append(_recorded(line, group[0], status, fails))
    return lines


def _recorded(line: str, verdict: Verdict, status: str | None, fails: frozenset[str] = DEFAULT_FAIL_ON) -> str:
    """`recorded: structure changed: ...` where this run wrote the change into the baseline: the
    bare line, the one a failing comparison prints, read like a failure in a recording run; and,
    comparing, `...; does not fail this test` where --opprof-fail-on leaves its kind out (a
    passing test's `structure changed` line read like its failure)."""
    if verdict.kind not in (STRUCTURE, WORK) or verdict.status != CHANGED:
        return line
    if status in ("changed", "rewritten"):
        return f"recorded: {line}"
    compared = status in ("compared", "strict")  # strict: a compared test --opprof-strict made an error
    return f"{line}; {NOT_FAILING}" if lets_pass(verdict, fails, compared) else line


def _in_full(verdict: Verdict) -> str:
    """The verdict's line, a structure verdict's list of changes in full where its message cut it
    (` and 3 more (-v or --opprof-json lists every change)` became the 3: a training trial's -v
    line sent the reader to -v, then listed every change after it)."""
    cut = f" and {len(verdict.changes) - MAX_LISTED} more ({EVERY_CHANGE})"
    if len(verdict.changes) <= MAX_LISTED or cut not in verdict.titled:
        return verdict.titled
    return verdict.titled.replace(cut, ", " + ", ".join(c.text for c in verdict.changes[MAX_LISTED:]), 1)


def _changed_in(kind: str, group: list[Verdict]) -> str:
    """`work changed in 3 ops`, `... and its torch threads`: a verdict without an op is the test's."""
    ops = sum(1 for v in group if v.op)
    return f"{kind} changed in {count_of(ops, 'op')}" + (" and its torch threads" if ops < len(group) else "")


def _time_line(group: list[Verdict], status: str | None = None, time_fails: bool = True, nodeid: str = "") -> str:
    """Conclusive time verdicts, the slower first; comparing, how to record faster times (a
    recording run has done so, or kept them unconfirmed: a trial's =all run was told to record),
    and, where time fails no test, that they come from one measurement (none is confirmed then: a
    trial read an unconfirmed slowdown with no word of it). The command names the test: a bare one
    in a run of `-k` recorded the tests it had left out (a trial's)."""
    first, *others = sorted(group, key=lambda v: v.status != "regressed")  # slower ones first
    counts = Counter(SPEED[v.status] for v in others)
    more = f"; and {', '.join(f'{n} more {word}' for word, n in counts.items())} ({_MORE})" if others else ""
    faster = first.status == "improved" and status not in RECORDING
    test = f" {shell_quote(nodeid)}" if nodeid else ""
    keep = f"; {RECORD_COMMAND}{test} records the faster times" if faster else ""
    once = f"; {ONE_MEASUREMENT}" if not (time_fails or status in RECORDING) else ""
    return f"time: {first.message}{more}{keep}{once}"


def _why_kind(verdict: Verdict) -> str:
    """What an inconclusive verdict's lines are grouped by: its why, or `recorded range` for every
    op a recorded range made inconclusive, `most steps` for every op most of whose steps slowed
    (each its own numbers: one line names them all; a diagnosis trial's conv2d read four lines, one
    for each op of its call chain), `the rest of the step` for every op the rest of its step excused
    (an LLM trial's slower step read a line for each of its ops)."""
    if range_span(verdict.why):
        return "recorded range"
    for prefix in (MOST_STEPS_WHY, PERIODIC_WHY, REST_WHY):
        if (verdict.why or "").startswith(prefix):
            return prefix
    return verdict.why or ""


def _inconclusive_why(group: list[Verdict]) -> str:
    """The why of one line of inconclusive verdicts: theirs, or each op's recorded range."""
    if len(group) > 1 and range_span(group[0].why):
        spans = first_three([f"{v.op} {range_span(v.why)}" for v in group])
        return f"each is within the slowest of its baseline's measurements of the same code on this machine and its tolerance ({spans})"
    if len(group) > 1 and _why_kind(group[0]) in (MOST_STEPS_WHY, PERIODIC_WHY, REST_WHY):
        return f"{group[0].why} (the figures of {group[0].op}; -v or --opprof-json gives each op's)"
    return group[0].why or ""


def _op_moved(verdict: Verdict) -> str:
    """An inconclusive verdict's op, with its move where it got faster: the line's why alone (`the
    machine ran 1.69x faster ...`) read as a slowdown to a trial whose ops ran 24% faster."""
    base, new = verdict.base_ms, verdict.new_ms
    if base is None or new is None or not 0 <= new < base:
        return verdict.op or ""
    return f"{verdict.op} ({100 * (new - base) / base:+.0f}%, faster)"


def _inconclusive_line(group: list[Verdict], status: str | None = None, time_fails: bool = True) -> str:
    """The inconclusive time verdicts in one line, the largest move named first."""
    group = largest_first(group)
    ops = first_three([_op_moved(v) for v in group])
    fix = group[0].fix or QUIET_MACHINE_FIX
    if status in TIMES_WRITTEN:  # --opprof-update-baseline=all, or a structure, work or conclusive time change besides
        why = "as =all asks" if status == "rewritten" else "for the changes its other lines name"
        outcome = f"its baseline was {status} all the same, {why}, with these times"
        fix = _written_fix(group)
    elif status == "renumbered":
        outcome = "its baseline's times were kept (an inconclusive measurement never replaces one)"
    elif status in RECORDING:
        outcome = "its baseline was kept as it was (an inconclusive measurement never replaces one)"
    elif status == "strict":
        outcome = STRICT_OUTCOME
    else:
        outcome = SHARED_OUTCOME["compared" if time_fails else "reported"]
    return f"time inconclusive for {ops}: {_inconclusive_why(group)}; {outcome}; {fix}"


# What the tests a shared line names came to: by baseline status, or an error of --opprof-strict
SHARED_OUTCOME = {
    "compared": "neither passed nor failed (--opprof-strict makes this an error)",
    # time is not among the checks that fail (--opprof-fail-on): a trial's --opprof-strict did nothing
    "reported": "neither passed nor failed (time does not fail this test: --opprof-fail-on, or its marker's)",
    "kept": "their baselines were kept as they were (an inconclusive measurement never replaces one)",
    "strict": "--opprof-strict made each an error",
}


STRICT_OUTCOME = "--opprof-strict made the test an error"  # a test's own line, where it did


def _written_fix(group: list[Verdict]) -> str:
    """What to do once the file holds this run's times: nothing where the run was the quicker
    one (a trial's =all run was told to run =all again), else record on a quiet machine if
    what slowed it was load."""
    if all(added_ms(v) <= 0 for v in group):
        return "nothing more to do: the file now holds this quicker run's times"
    return (
        "its times are this run's, slower than the baseline's were: if the machine was loaded, record it "
        "again on a quiet machine (pytest --opprof-update-baseline=all with the test's id)"
    )
