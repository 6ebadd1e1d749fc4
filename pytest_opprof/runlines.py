"""The terminal summary's lines about the whole run: work that changed, lost records, baselines
written, kept or missing, loaded and leaking runs, unmatched ignores, paths too long for Windows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, TypeVar

from .decide import TIMES_WRITTEN, BaselineResult
from .errors import RECORD_COMMAND, TRACER_RAN, TRACER_RECORD_FIX, closest_names, repeats_disagreed, wait_share
from .leakmessages import LEAKS_JOINED, SCOPE_WORDS, settings_left_changed
from .opnames import is_glob, is_known_op
from .results import WRITTEN, TestRecord, file_test
from .textout import shell_quote
from .torchstate import TorchState, threads_only
from .units import count_of, first_three, id_order
from .verdicts import MIN_TIME_STEPS

if TYPE_CHECKING:
    from .analysis.model import Check

T = TypeVar("T")


def run_lines(
    records: list[TestRecord],
    recording: bool | str = False,
    looked_in: str | None = None,
    unjudged_globs: Collection[str] = (),
    verbose: bool = False,
) -> list[str]:
    """The run's lines (tests named three at a time, all with `verbose`): tests not judged on time,
    old baselines, then missing and written ones
    (and, when recording, the tests that were not recorded because they failed). `recording`: the
    run's mode (settings.UPDATE_MODES), or whether it records."""
    lines = []
    lines += _untimed_lines(records, bool(recording), verbose)
    # What the files read say of themselves, for those this run left as they were: a file it
    # wrote holds this run's times and work (an =all run was told to run =all again).
    standing = [r for r in records if r.baseline and r.baseline.status not in TIMES_WRITTEN]
    old = sum(1 for r in standing if r.baseline and r.baseline.schema == 1)
    if old:
        lines.append(
            f"opprof: {count_of(old, 'baseline')} of schema 1 (no work signatures, counts before "
            "torch's redispatch rule): compared on structure and time, and on work only where they hold it; "
            "pytest --opprof-update-baseline=all records them again as schema 2"
        )
    lines += (
        _work_lines(standing)
        + _dropped_lines(standing)
        + _graph_call_lines(standing)
        + _lists_lines(standing)
        + _loaded_lines(standing)
        + _recorded_loaded_lines(standing)
        + _baseline_lines(records, looked_in, verbose, recording)
        + _ignore_lines(records, unjudged_globs, verbose)
        + _thread_leak_lines(records)
    )
    lines += _grad_lines(records) if recording else []
    unrecorded = [r.nodeid for r in records if r.baseline is None and r.outcome in ("failed", "error")]
    if recording and unrecorded:
        lines.append(
            f"opprof: {count_of(len(unrecorded), 'test')} not recorded: {'it' if len(unrecorded) == 1 else 'they'} failed "
            f"or erred (a baseline records code that passes its own checks; files as they were): {first_three(unrecorded)}"
        )
    return lines


def _by_test(records: list[TestRecord], fact: Callable[[BaselineResult], T]) -> dict[str, T]:
    """Node id -> one fact of its baseline result, for the tests where it is set."""
    return {r.nodeid: value for r in records if r.baseline and (value := fact(r.baseline))}


def _work_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose baselines hold no work for ops this run recorded it of."""
    ops = _by_test(records, lambda b: b.work_unrecorded if b.schema != 1 else ())  # schema 1: its own line
    if not ops:
        return []
    return [
        f"opprof: the work (inputs, FLOPs) of {first_three(sorted({op for names in ops.values() for op in names}))} "
        f"was not compared in {count_of(len(ops), 'test')}: the baseline holds none of it (work null or missing: "
        "an edit, a merge); record those baselines again: "
        f"pytest --opprof-update-baseline=all {listed_ids(ops)}"
    ]


def _dropped_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose baselines lost kernel records when recorded (the device tracer
    dropped them): a recording keeps such a file where this run changed nothing it compares."""
    ids = _tests_of_files(records, lambda b: b.kernels_dropped[1] > 0)
    if not ids:
        return []
    return [
        f"opprof: {count_of(len(ids), 'baseline')} lost kernel records when recorded (the device tracer dropped "
        "them): the steps that lost some are left out of their ops' device times, and as many fewer kernels are "
        f"no work change; record them again where none are lost: pytest --opprof-update-baseline=all {listed_ids(ids)}"
    ]


def _graph_call_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose baselines predate graph calls read as ops in every capture."""
    ids = _tests_of_files(records, lambda b: b.graph_call_unread and b.status not in WRITTEN)
    if not ids:
        return []
    return [
        f"opprof: {count_of(len(ids), 'baseline')} recorded before pytest-opprof read torch.compile's graph call "
        "(CompiledFxGraph) as an op in every capture: its calls and work were not compared; record them again: "
        f"pytest --opprof-update-baseline=all {listed_ids(ids)}"
    ]


def _grad_lines(records: list[TestRecord]) -> list[str]:
    """For a recording run: one line for the files it kept that hold no autograd record (written by
    an earlier pytest-opprof), where a bare recording leaves them so and grad mode is not compared."""
    ids = list(_by_test(records, lambda b: b.grad_unrecorded and b.status not in TIMES_WRITTEN))
    if not ids:
        return []
    return [
        f"opprof: {count_of(len(ids), 'baseline')} kept {'holds' if len(ids) == 1 else 'hold'} no autograd record (written by an earlier pytest-opprof): "
        f"grad mode is not compared for {'it' if len(ids) == 1 else 'them'} (a forgotten torch.no_grad() is not "
        f"caught); =all records it: pytest --opprof-update-baseline=all {listed_ids(ids)}"
    ]


def _lists_lines(records: list[TestRecord]) -> list[str]:
    """One line for the tests whose list-of-tensors inputs were not compared on shapes."""
    ops = _by_test(records, lambda b: b.lists_unrecorded)
    if not ops:
        return []
    return [
        f"opprof: the shapes of tensor-list inputs ({first_three(sorted({op for names in ops.values() for op in names}))}) "
        f"were not compared in {count_of(len(ops), 'test')}: the baseline or this capture lacks them (a baseline "
        "from an earlier pytest-opprof, or a torch without structured input shapes); record those baselines "
        "again on a quiet machine: "
        f"pytest --opprof-update-baseline=all {listed_ids(ops)}"
    ]


def _untimed_lines(records: list[TestRecord], recording: bool, verbose: bool) -> list[str]:
    """The tests whose time was not judged: those measured in under MIN_TIME_STEPS steps, and
    those whose baseline alone holds too few (a bare recording run keeps it: =all records it)."""
    untimed = [(r.nodeid, r.baseline) for r in records if r.baseline and r.baseline.untimed]
    # a short baseline this run wrote holds this run's steps now: neither line
    short = list(dict.fromkeys(n for n, b in untimed if b.short_baseline and b.status not in WRITTEN))
    few = list(dict.fromkeys(n for n, b in untimed if not b.short_baseline))
    lines = []
    if few:
        lines.append(
            f"opprof: time not judged for {count_of(len(few), 'test')} with under {MIN_TIME_STEPS} steps "
            f"(a whole call, capture(), the marker, a short run()): {first_three(few, verbose)}; "
            "structure and work (where recorded) were checked; measure with opprof.run(fn, ..., steps=10) "
            "for a time check"
        )
    if short:
        kept = "; this recording run did not rewrite them" if recording else ""
        lines.append(
            f"opprof: time not judged for {count_of(len(short), 'test')} whose baseline holds under "
            f"{MIN_TIME_STEPS} steps (this run measured enough): {first_three(short, verbose)}{kept}; "
            f"record them again: pytest --opprof-update-baseline=all {listed_ids(short)}"
        )
    return lines


def listed_ids(nodeids: Iterable[str]) -> str:
    """The node ids as command-line arguments, each of them: a command cut at three with `...` ran
    three tests or none (a CI trial's fifteen). A command naming every test of a run that picked
    none becomes a bare one (whole_run_commands)."""
    return " ".join(shell_quote(i) for i in sorted(set(nodeids), key=id_order))


RECORD_ALL = f"{RECORD_COMMAND}=all"


def whole_run_commands(lines: list[str], records: list[TestRecord], picked: bool) -> list[str]:
    """A record command naming every measured test of a run that picked none (no -k, node id, ...)
    as the bare command, which records the same tests: fifteen ids made a line no one reads."""
    every = {r.nodeid for r in records}
    if picked or len(every) < 2:
        return lines
    commands = [(f"{command} {listed_ids(every)}", command) for command in (RECORD_ALL, RECORD_COMMAND)]
    for named, bare in commands:
        lines = [line.replace(named, bare) for line in lines]
    return lines


def _recorded_loaded_lines(records: list[TestRecord]) -> list[str]:
    """One line for the baselines read whose recording waited for a CPU (their capture.cpu_wait):
    a trial's recording beside CPU hogs said so once, and no later run did. A baseline whose
    references say it was recorded under load has that line (_loaded_lines), not this one too; a
    test whose time is not judged (under 5 steps) neither: its times judge nothing."""
    waited = _by_test(records, lambda b: 0.0 if b.under_load or b.untimed else b.recorded_wait or 0.0)
    if not waited:
        return []
    one = len(waited) == 1
    return [
        f"opprof: {count_of(len(waited), 'baseline')} recorded while {'its' if one else 'their'} threads waited for a "
        f"CPU {'' if one else 'up to '}{wait_share(max(waited.values()), 'them' if one else 'threads')} "
        f"(capture.cpu_wait): {'its' if one else 'their'} times may be inflated and hide slowdowns, and re-recording "
        f"keeps {'it' if one else 'them'}; record {'it' if one else 'them'} again on a quiet machine: "
        f"pytest --opprof-update-baseline=all {listed_ids(waited)}"
    ]


def _loaded_lines(records: list[TestRecord]) -> list[str]:
    """One line for the baselines recorded under load (excuses.recorded_under_load), with the
    command that records them again: re-recording keeps them (their times are inconclusive)."""
    loaded = _by_test(records, lambda b: 0.0 if b.untimed else b.under_load or 0.0)
    if not loaded:
        return []
    return [
        f"opprof: {count_of(len(loaded), 'baseline')} recorded under load (the same machine setup and torch ran "
        f"the references up to {max(loaded.values()):.1f}x slower than now): their inflated times hide slowdowns, "
        f"and re-recording keeps them; record them again on a quiet machine: pytest --opprof-update-baseline=all {listed_ids(loaded)}"
    ]


def _known_op(glob: str) -> bool:
    """Whether a glob is a plain aten/prim op name torch knows (is_known_op, given no ops that
    ran, takes any other namespace as known, unchecked; never True without torch)."""
    if is_glob(glob) or glob.partition("::")[0] not in ("aten", "prim"):
        return False
    try:
        return is_known_op(glob)
    except ImportError:
        return False


THREADS = "threads"  # the check on a test that ran on a thread count an earlier test left
SETTINGS = "settings"  # ... on other torch settings (the default dtype, grad mode, ...), the count maybe too
LEAK_CHECKS = (THREADS, SETTINGS)


def leak_check(leaker: str, before: TorchState, left: TorchState) -> Check:
    """The warning a test gets that ran on settings `leaker` left (`before` -> `left`)."""
    from .analysis.model import WARNING, Check

    message = settings_left_changed(leaker, before, left)
    return Check(THREADS if threads_only(before, left) else SETTINGS, WARNING, message)


def _thread_leak_lines(records: list[TestRecord]) -> list[str]:
    """A line per test (or fixture) that left torch's settings changed, naming the measured tests
    that ran on them (their `threads` and `settings` checks, one per test in the JSON, say the
    same; a review's leaker had two lines where a later test put part of its leak back)."""
    ran_on: dict[str, tuple[str, list[str]]] = {}  # the leaker -> its first victim's message, its victims
    for record in records:
        for check in record.checks:
            if check.name in LEAK_CHECKS:  # `<leaker> changed torch's ...`, `<leaker>, set up by ...`
                leaker = check.message.split(" changed torch's ")[0]
                ran_on.setdefault(leaker, (check.message, []))[1].append(record.nodeid)
    return [
        f"opprof: {message}; {_ran_on(message)}: {first_three(sorted(set(ids), key=ids.index))}"
        for message, ids in ran_on.values()
    ]


def _ran_on(message: str) -> str:
    """Who the tests named after a leak's line are to it."""
    if SCOPE_WORDS in message:
        return "measured on it without asking for it"
    return f"measured after {'them' if LEAKS_JOINED in message else 'it'}"


def _ignore_lines(records: list[TestRecord], unjudged: Collection[str] = (), verbose: bool = False) -> list[str]:
    """A line per ignore glob that matched no op in any compared test it applied to: a typo
    (`aten::matmull`) ignores nothing, and the changes it was meant to hide still fail. An op torch
    knows, with no close name among the ops run, is a precaution (an op only other hardware runs):
    said only with `verbose`, as a line on every run could not be silenced."""
    applied: dict[str, list[str]] = {}
    matched: set[str] = set()
    near: dict[str, set[str]] = {}  # each test's closest op: the run's is the closest of them
    for record in records:
        for ignore in record.baseline.ignores if record.baseline else ():
            applied.setdefault(ignore.glob, []).append(record.nodeid)
            if ignore.matched:
                matched.add(ignore.glob)
            elif ignore.near:
                near.setdefault(ignore.glob, set()).add(ignore.near)
    lines = []
    for glob, nodeids in applied.items():
        if glob in matched or glob in unjudged:
            continue
        where = nodeids[0] if len(nodeids) == 1 else f"the {count_of(len(nodeids), 'compared test')}"
        closest = closest_names(glob, sorted(near.get(glob, ())), limit=1)
        several = glob.split()
        if len(several) > 1 and all("::" in part for part in several):  # `aten::addmm aten::t`: two globs
            hint = f"write several as a comma list: {', '.join(several)}"
        elif closest:
            hint = f"did you mean {closest[0]}? use op names as the tables and opprof show list them"
        elif _known_op(glob):
            if not verbose:
                continue
            hint = "torch knows that op, but no test it applied to ran it (a precaution: said only with -v)"
        else:
            hint = "use op names as the tables and opprof show list them"
        lines.append(f"opprof: ignore glob {glob!r} matched no op in {where}: it ignores nothing; {hint}")
    return lines


def _unrecorded_line(records: list[TestRecord], n: int, verbose: bool, mode: bool | str) -> str:
    """The files a recording run did not write from throttled or traced measurements, and why:
    a Python tracer's (`--cov`) with the run that records them, in this run's `mode` (a bare
    recording of the whole suite under --cov was told `=all`, which rewrites every unchanged file)."""
    why: dict[str, list[str]] = {}
    for r in records:
        if r.baseline and r.baseline.unrecordable:
            why.setdefault(r.baseline.unrecordable, []).append(r.nodeid)
    traced = sorted(
        {file_test(r) for r in records if r.baseline and (r.baseline.unrecordable or "").startswith(TRACER_RAN)}
    )
    # several reasons: each with its tests (a break trial read `it ran ...; it ran ...` and could not tell whose)
    reasons = [
        f"{first_three(ids)}: {_their(reason, ids)}" if len(why) > 1 else _their(reason, ids)
        for reason, ids in why.items()
    ]
    line = f"opprof: {count_of(n, 'baseline')} not written: {'; '.join(reasons) or 'unreliable GPU clocks (see above)'}"
    if traced:  # the tests named (whole_run_commands makes a bare command of a run that picked none)
        command = RECORD_ALL if mode == "all" else RECORD_COMMAND
        line += f"; record {first_three(traced, verbose)} in a run without it: {command} {listed_ids(traced)} {TRACER_RECORD_FIX}"
    return line


def _their(reason: str, ids: list[str]) -> str:
    """A reason told of several tests in the plural (`3 baselines not written: they ran with ...`)."""
    return f"they {reason.removeprefix('it ')}" if len(ids) > 1 and reason.startswith("it ran ") else reason


def _baseline_lines(
    records: list[TestRecord], looked_in: str | None, verbose: bool = False, recording: bool | str = False
) -> list[str]:
    lines = []
    # One baseline file each: `--dist each` measures a test per worker, pytest-repeat's repeats share one.
    by_file: dict[str, str] = {}
    for record in records:
        if record.baseline and record.baseline.status == "missing":
            by_file.setdefault(record.baseline.path, file_test(record))
    missing = list(by_file.values())
    statuses = Counter(_file_statuses(records).values())
    if missing:  # their ids in the command: a bare one also records every other test's structure change
        lines.append(
            f"opprof: no baseline for {count_of(len(missing), 'test')} ({first_three(missing, verbose)})"
            f"{f' in {looked_in}' if looked_in else ''}; record {'it' if len(missing) == 1 else 'them'}: "
            f"{RECORD_COMMAND} {listed_ids(missing)}"
        )
    written = {k: statuses.get(k, 0) for k in WRITTEN}
    if statuses.get("unreliable"):
        lines.append(_unrecorded_line(records, statuses["unreliable"], verbose, recording))
    if any(written.values()) or statuses.get("kept"):
        changed = _tests_of_files(records, lambda b: b.status == "changed")
        files = _file_statuses(records)  # a file another record of the test wrote is not kept
        slower = _tests_of_files(records, lambda b: files.get(b.path) == "kept" and kept_slower(b))
        notes = {"changed": f" ({first_three(changed, verbose)})", "renumbered": " (capture.number alone, times kept)"}
        parts = [f"{v} {k}{notes.get(k, '')}" for k, v in written.items() if v]
        kept = statuses.get("kept", 0) - len(slower)
        lines.append(
            f"opprof: baselines written: {', '.join(parts) or 'none'}; "
            f"kept {kept} unchanged (no structure or work change, no conclusive time change; files untouched)"
            + (
                f"; kept {len(slower)} slower ({first_three(slower, verbose)}): never written without =all"
                if slower
                else ""
            )
        )
    return lines + _ranges_line(records) + _rewritten_by_repeats(records, verbose) + _long_path_lines(records)


WINDOWS_PATH_BUDGET = 200  # of Windows' 260 characters (MAX_PATH), leaving 60 for the checkout's folder


def _long_path_lines(records: list[TestRecord]) -> list[str]:
    """One line for the baseline files this run wrote whose paths in the repository run past
    WINDOWS_PATH_BUDGET characters: a Windows checkout of the repository (git's core.longpaths off,
    as it is by default there) fails on a path past 260 characters with its folder, every file of
    the checkout, not only the test's. A baseline folder outside the rootdir (an absolute path) is
    not the repository's."""
    written = {r.baseline.path for r in records if r.baseline and r.baseline.status in WRITTEN}
    outside = {p for p in written if PurePosixPath(p).is_absolute() or PureWindowsPath(p).is_absolute()}
    long = sorted((p for p in written - outside if len(p) > WINDOWS_PATH_BUDGET), key=lambda p: (-len(p), p))
    if not long:
        return []
    return [
        f"opprof: {count_of(len(long), 'baseline file')} written with a path over {WINDOWS_PATH_BUDGET} characters "
        f"(the longest {len(long[0])}: {long[0]}): a Windows checkout of the repository fails on paths past 260 "
        "characters with its folder (git's core.longpaths is off there by default); shorten the test's folders or "
        "its parameter ids (pytest.mark.parametrize(..., ids=...))"
    ]


def _rewritten_by_repeats(records: list[TestRecord], verbose: bool) -> list[str]:
    """Files that a test's repeats (pytest-repeat, reruns) changed more than once in one process,
    each finding the one before changed: a trial's `--count 3` recorded `aten::linear 2 -> 3`,
    then `3 -> 2`, and the summary said `1 changed`. Not `--dist each`'s workers (each writes
    the file it found) nor `=all`'s rewrites (no change found)."""
    writes: dict[tuple[str, str | None], list[tuple[str, str]]] = {}  # (file, worker) -> (test, status)
    for r in records:
        if r.baseline and r.baseline.status in ("new", "changed"):
            writes.setdefault((r.baseline.path, r.worker), []).append((r.nodeid, r.baseline.status))
    flaky = [
        (path, [test for test, _ in found])
        for (path, _), found in sorted(writes.items(), key=lambda item: item[0][0])
        if len(found) > 1 and any(status == "changed" for _, status in found)
    ]
    return [repeats_disagreed(path, tests, verbose) for path, tests in flaky]


def _ranges_line(records: list[TestRecord]) -> list[str]:
    """How the files of run() tests were written: with each op's range over several measurements
    (pytest-opprof's docs/verdicts.md: Recorded ranges)."""
    files = {r.baseline.path: r.baseline.recorded_from for r in records if r.baseline and r.baseline.status in WRITTEN}
    ranged = sorted(n for n in files.values() if n > 1)  # measurements used: 1 has no range
    if not ranged:
        return []
    over = f"{ranged[0]}" if ranged[0] == ranged[-1] else f"{ranged[0]}-{ranged[-1]}"
    return [
        f"opprof: {count_of(len(ranged), 'file')} written with the range of each op's time over {over} "
        "measurements: a later time within that range is inconclusive, not a failure (pytest-opprof's docs/verdicts.md: Recorded ranges)"
    ]


def kept_slower(baseline: BaselineResult) -> bool:
    """A recording run kept the file though the time was slower (only =all writes that):
    confirmed, or with no confirmation pooled (each on throttled GPU clocks), which was counted
    `unchanged (... no conclusive time change)` beside its `slower` line."""
    return baseline.slower


def _tests_of_files(records: list[TestRecord], which: Callable[[BaselineResult], bool]) -> list[str]:
    """The tests whose baseline file the run left as `which` says, one test a file."""
    found: dict[str, str] = {}
    for record in records:
        if record.baseline and which(record.baseline):
            found.setdefault(record.baseline.path, file_test(record))
    return list(found.values())


def _file_statuses(records: list[TestRecord]) -> dict[str, str]:
    """What the run did to each baseline file: a file `--dist each` records once per worker (the
    first writes it, the others find it unchanged) or pytest-repeat's repeats share counts once,
    as written if any record wrote it."""
    found: dict[str, str] = {}
    for baseline in (r.baseline for r in records if r.baseline):
        if baseline.path not in found or baseline.status in WRITTEN:
            found[baseline.path] = baseline.status
    return found
