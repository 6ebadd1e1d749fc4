"""The exception family users see, and the messages a person reads, built in one place: here, but
for the messages about ops asked for (opmessages.py) and about torch settings a test left changed
(leakmessages.py).

Tests import these formatters so they assert the real text.

Imported by every pytest run, --opprof or not (with the other modules tests/test_plugin.py lists
in INERT_MODULES): keep its imports to those modules and the standard library's light ones.
"""

from __future__ import annotations

import difflib
import json
import re
import reprlib
import shlex
import sys
import traceback
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from .textout import shell_quote
from .units import count_of, first_three


class OpprofError(Exception):
    """A problem a user can fix: bad input, a bad file, a profiler in the way."""


class TraceError(OpprofError):
    """A trace file that cannot be read as a Kineto/Chrome trace, or written."""


class TraceWriteError(TraceError):
    """A trace that could not be written where asked: `path` and the system's `reason` kept apart,
    so the plugin can say it in its own words."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(
            f"export_chrome_trace(): cannot write {path} ({reason}); give a file path (.json or .json.gz) "
            "in a writable folder"
        )
        self.path, self.reason = path, reason


class CaptureError(OpprofError):
    """A live capture that cannot start or finish."""


class BaselineError(OpprofError):
    """A baseline file that cannot be used; the message names the file and the fix."""


class SettingsError(OpprofError):
    """A bad option value; the plugin turns it into a pytest UsageError."""


class UnsafePathError(OpprofError):
    """A file we would write resolves outside the folder it belongs in."""


def cannot_write(path: object, exc: OSError) -> str:
    return (
        f"{path}: cannot write the baseline ({exc.strerror or exc}); make its folder writable "
        "or choose another with --opprof-baseline-dir"
    )


def outside_folder(path: object, inside: object, resolved: object) -> str:
    return (
        f"{path}: its folder resolves to {resolved}, outside {inside} (a symlink?); "
        "nothing was written: replace the symlink with a real folder"
    )


def symlink_outside(path: object, target: object, inside: object) -> str:
    return (
        f"{path}: a symlink to {target}, outside {inside}; nothing was read or written: "
        "replace the symlink with the baseline file itself"
    )


def lfs_trace(path: object) -> str:
    """A trace file that is a Git LFS pointer (a checkout without `git lfs pull`): not to export again."""
    return f"{path}: a Git LFS pointer, not the trace it stands for; fetch the file with git lfs pull"


def stale_trace_kept(path: object, reason: str) -> str:
    """A test's line (after `trace `) for an earlier run's trace of it that could not be removed."""
    return f"{path} is an earlier run's and could not be removed ({reason}): it is not this run's; delete it"


def lfs_compare_side(path: object) -> str:
    """A file given to `opprof compare` that is a Git LFS pointer: a baseline's or a trace's, the
    pointer does not say."""
    return f"{path}: a Git LFS pointer, not the baseline or trace it stands for; fetch the file with git lfs pull"


def unreadable_files(errors: list[str]) -> str:
    """One line for a folder's unreadable baseline files: the first's error, and how many more."""
    if len(errors) == 1:
        return errors[0]
    more = len(errors) - 1
    return f"{errors[0]} (and {more} more unreadable baseline file{'s' if more > 1 else ''}: opprof show on the folder names each)"


def bad_trace(path: object, reason: str) -> str:
    return f"{path}: {reason}; export it again with torch.profiler (export_chrome_trace)"


def bad_end_thread(path: object, i: int, name: str, value: str, why: str) -> str:
    """An op's `End thread` arg (opprof's traces write it) that is no thread of the trace's."""
    return (
        f"{path}: complete event {i} ({name}): 'End thread' is {value}, {why}; a hand edit? remove the arg, "
        "or write the trace again with opprof (--opprof-trace-dir, Profile.export_chrome_trace)"
    )


RUN_REPORT = "an opprof run report (--opprof-json)"
SHOW_OUTPUT = "`opprof show --json` output"
COMPARE_OUTPUT = "`opprof compare --json` output"
ANALYZE_OUTPUT = "`opprof analyze --json` output (a profile)"


def opprof_output(doc: object) -> str | None:
    """Which of opprof's own JSON outputs `doc` is, by its top-level keys (for the line refusing
    it where a trace or a baseline was wanted), or None: none of them."""
    if not isinstance(doc, dict):
        return None
    keys = set(doc)
    if "baselines" in keys and keys <= {"schema", "baselines", "unreadable"} and isinstance(doc["baselines"], list):
        return SHOW_OUTPUT
    if {"a", "b", "tests", "regressed"} <= keys:
        return COMPARE_OUTPUT
    if isinstance(doc.get("tests"), list):
        return RUN_REPORT
    if {"source", "steps", "checks"} <= keys and isinstance(doc.get("ops"), list):
        return ANALYZE_OUTPUT
    return None


OUTPUT_FIX = "no opprof command reads its own JSON output (it is for scripts)"
# Where an output handed to `opprof analyze` came from, and so what to give it instead.
OUTPUT_SOURCE = {
    ANALYZE_OUTPUT: "give the trace it was made from",
    SHOW_OUTPUT: "it lists baselines, which opprof show reads (.opprof/<device key>)",
    COMPARE_OUTPUT: "give one of the traces it compared (opprof show reads baselines)",
}


def record_if_intended(nodeid: str, everything: bool = False) -> str:
    """The fix of a structure or work change, or a slower time: record it, when it was the point.
    `everything`: a slower time alone, which only =all writes (a bare recording run keeps it)."""
    flag = "--opprof-update-baseline" + ("=all" if everything else "")
    return f"if the change is intended, record it: pytest {flag} {shell_quote(nodeid)} (and commit the file)"


def conflict_fix(nodeid: str | None = None, recording: bool = False) -> str:
    """The way out of a baseline file holding a merge conflict's markers. A merge committed (or
    only `git add`ed) leaves no sides to take: `git checkout --ours` does nothing there and the
    markers stay (a team trial followed that fix and was stuck); deleting the file works always.
    `nodeid`: the test's, in the command; `recording`: the command running is the one to rerun."""
    if recording:
        return (
            "resolve it: delete the file and run this command again (a recording never replaces a file it cannot read)"
        )
    test = shell_quote(nodeid) if nodeid is not None else "with the test's id"
    return (
        f"resolve it by recording the baseline again: delete the file and run pytest --opprof-update-baseline {test} "
        "(while the merge is not yet committed, git checkout --ours or --theirs on the file takes one side instead)"
    )


def structure_changed_alike(tests: int, changes: str, command: str) -> str:
    """The one line for tests whose structure changed alike (structurelines), with the command that
    records them all."""
    return (
        f"opprof: structure changed alike in {count_of(tests, 'test')}: {changes}; each test's line says where each "
        f"op ran and its inputs (-v); if the change is intended, record them: {command} (and commit the files)"
    )


def within_ranges_shared(tests: int, outcome: str, command: str) -> str:
    """The one line for tests whose every inconclusive time is within its ops' recorded ranges."""
    return (
        f"opprof: time inconclusive in {count_of(tests, 'test')}: each op's time is within the slowest of its "
        f"baseline's measurements of the same code on this machine and its tolerance; {outcome}; to judge moves "
        "this size, record them again where their times hold steadier (a dedicated runner, not a shared VM; -v: "
        f"each test's line with its ranges): {command}"
    )


def checks_alike(status: str, name: str, tests: int, named: str, message: str) -> str:
    """The one line for a check that reads the same in several tests."""
    return f"opprof: {status} {name} in {count_of(tests, 'test')} ({named}; -v: each test's line): {message}"


def calls_differ_in(tests: int, named: str) -> str:
    """opprof compare's last-line clause: the tests whose calls differ, which the default judges not."""
    return (
        f"; calls differ in {tests} ({named}), which --fail-on structure fails on, as the plugin's structure "
        "verdict does"
    )


GITHUB_COMMENT_CHARS = 65_536  # what a GitHub issue or pull-request comment holds
GITHUB_SUMMARY_BYTES = 1_048_576  # what a GitHub Actions step's summary file holds ($GITHUB_STEP_SUMMARY)


def markdown_too_long(chars: int, size: int) -> tuple[str, ...]:
    """The note for a --markdown output too long for where it is meant to go (a scale trial's
    comparison of 144 tests made a comment GitHub refuses)."""
    cut = "--top N and --op GLOB cut its tables (a compare's changed rows stay)"
    if size > GITHUB_SUMMARY_BYTES:
        return (f"the Markdown is {size:,} bytes, over the 1 MiB a GitHub job summary holds, and a comment's "
                f"{GITHUB_COMMENT_CHARS:,} characters: {cut}",)  # fmt: skip
    if chars > GITHUB_COMMENT_CHARS:
        return (f"the Markdown is {chars:,} characters, over the {GITHUB_COMMENT_CHARS:,} a GitHub comment holds "
                f"(a job summary holds 1 MiB): {cut}",)  # fmt: skip
    return ()


def quiet_tables(left_out: int, warned: int = 0) -> str:
    """The line for the tables pytest -qq leaves out (`warned`: of tests with a warning's line)."""
    one = left_out == 1
    own = f"no line of {'its' if one else 'their'} own"
    if warned:  # `but warnings (4 of them)` read as if all had some (a trial's)
        own = "no verdict or error to show (" + (
            "with a warning, above)" if one else f"{warned} of them with warnings, above)"
        )
    return (
        f"opprof: {count_of(left_out, 'measured test')} passed with {own}: "
        f"{'its table is' if one else 'their tables are'} left out under -qq (run with -q or without it to see "
        f"{'it' if one else 'them'}; --opprof-json and --opprof-html hold them always)"
    )


def record_on_this_setup(nodeid: str) -> str:
    """The fix of a test's own environment line (another CPU, torch, driver): only =all adopts it."""
    return (
        "where this is the setup from now on, record the baseline on it (a bare recording keeps the file): "
        f"pytest --opprof-update-baseline=all {shell_quote(nodeid)}"
    )


RECORD_COMMAND = "pytest --opprof-update-baseline"  # records new files and structure or work changes
_RECORD_COMMAND = re.compile(r"pytest --opprof-update-baseline(=all|=changed)?(?![\w-])")
_SHELL_WORD = re.compile(r"""[ \t]((?:'[^']*'|"[^"]*"|[^\s'"();,])+)""")  # `(... pytest ... id)`: not the `)`


def runnable_here(text: str, flags: Sequence[str], typed_id: Callable[[str], str] | None = None) -> str:
    """`text` with each record command it suggests (`pytest --opprof-update-baseline[=MODE]`
    and the test ids after it) as the person who ran pytest can run it: followed by the run's own
    --opprof-baseline-dir / --opprof-device-key (without them it would record under the default
    folder, which this run did not read), its ids as `typed_id` gives them (node ids are relative
    to the rootdir; pytest takes them relative to the folder it runs in)."""
    if not flags and typed_id is None:
        return text
    added = "".join(" " + shell_quote(f) for f in flags)
    parts, start = [], 0
    for command in _RECORD_COMMAND.finditer(text):
        parts.append(text[start : command.end()] + added)
        start = command.end()
        while typed_id is not None and (word := _SHELL_WORD.match(text, start)) and (test := _test_id(word[1])):
            parts.append(" " + shell_quote(typed_id(test)))
            start = word.end()
    return "".join(parts) + text[start:]


def _test_id(word: str) -> str | None:
    """The test id (or test file) a shell word of a record command gives, else None."""
    try:
        (unquoted,) = shlex.split(word)
    except ValueError:  # not one word (`test's`, an unclosed quote): the command ended before it
        return None
    return unquoted if "::" in unquoted or unquoted.endswith(".py") else None


# A recording run's word on a slower time it did not write
KEPT_SLOWER = (
    "baseline kept: --opprof-update-baseline never writes a slower time alone (it may be the machine's, "
    "and would hide later slowdowns)"
)


REPEATABLE_FIX = "make fn repeatable (cycle its data with itertools.cycle, or make its inputs outside fn)"
SAME_WORK_FIX = (
    "make each call of fn do the same work (pytest-opprof's docs/verdicts.md: Confirmation by more measurements)"
)
BAD_RANGE_FIX = (
    "delete the op's recorded_range_ms (its time is then judged without one), or delete the file and record "
    "the test again"
)
ONE_MEASUREMENT = "measured once, not confirmed: time does not fail this test (--opprof-fail-on, or its marker's)"
NOT_FAILING = "does not fail this test (--opprof-fail-on, or its marker's)"  # a structure or work change's line


def state_kept(ops: str | None = None) -> str:
    """The clause of a structure or work change in ops whose work differed from call to call of
    run()'s fn when the baseline was recorded (an LLM trial's decode step with a growing cache
    failed `work changed` on `warmup=3` -> `4` alone: its inputs are read after the steps)."""
    return (
        f"; when the baseline was recorded, run()'s fn did other work from call to call{f' in {ops}' if ops else ''} "
        "(the data it reads, or state it keeps such as a growing cache), so warmup=, steps=, -k and the order of "
        f"tests change what is measured; {SAME_WORK_FIX}"
    )


def unconfirmable(ops: str) -> str:
    """Why a slower time is inconclusive when every confirmation ran other work than the first."""
    return (
        f"each further measurement ran other work than the first (other ops, calls per step or inputs of {ops}): "
        "fn's work changes from call to call, so this one measurement's slowdown could not be confirmed"
    )


def capture_moved(kept: int, latest: int) -> str:
    """Why a slower time is inconclusive when the baseline holds another of the test's captures."""
    return (
        f"its baseline holds the test's capture {kept} and its latest is now capture {latest}: the test's "
        "captures changed since it was recorded, and run() confirms a slowdown only in the capture its "
        "baseline holds, so this one measurement's slowdown could not be confirmed"
    )


def compiled_regions_moved(old: float, new: float, old_text: str, new_text: str) -> str:
    """What a change in a compiled test's regions per step means (`old_text`, `new_text`: the
    counts as a structure verdict writes them)."""
    if not new:
        return "no compiled region ran: the code is no longer compiled (torch.compile gone, or Dynamo skipped it)"
    if not old:
        return "compiled regions ran where none did: the code is now compiled"
    if new > old:
        return (
            f"compiled regions {old_text} -> {new_text}/step: a graph break splits the compiled code, or another "
            "compiled model runs (assert_no_graph_break tells them apart)"
        )
    return f"compiled regions {old_text} -> {new_text}/step: fewer graph breaks, or less of it compiled"


def not_compiled_text(eager: int = 0, looked_up: int = 0) -> str:
    """torch.compile'd code that ran eagerly in the steps: `eager` of the `looked_up` calls Dynamo
    looked up its compiled code for (0 of 0: run() was given compiled code and no region ran)."""
    if eager and eager < looked_up:
        what = (
            f"{eager} of the {looked_up} calls of torch.compile'd code in the steps ran eagerly (Dynamo looked up "
            f"its compiled code {looked_up} times and ran {looked_up - eager} compiled regions), so part of the op "
            "table is eager code's"
        )
    else:
        what = (
            "a torch.compile'd model or function ran eagerly in the steps: no compiled region ran (Dynamo looked "
            "up its compiled code, or run() was given it), so the op table is eager code's"
        )
    return (
        f"{what}, and a baseline recorded from it too. Dynamo does so without a word for a function that hit its "
        "recompile limit earlier in the process (its cache is per function, shared by every torch.compile of it: a "
        "parametrized test compiling one model class at many sizes passes alone), and for one it skipped (a graph "
        "break inside a loop, a backend error under suppress_errors); TORCH_LOGS=recompiles,graph_breaks names "
        "which. For the limit: give each test its own compilation (torch._dynamo.reset() in an autouse fixture), "
        "or raise torch._dynamo.config.recompile_limit"
    )


def recompile_limit_hit_text(limit: str, compiled: int | None = None) -> str:
    """Dynamo hit its recompile limit (`limit`: its value as torch words it, or "") in a run that
    compiled `compiled` graphs: fewer than the limit, earlier code in the process compiled the frame
    (a parametrized test compiling one model class at 12 sizes passed alone and ran eagerly from its
    9th case on in the suite); else the run's own new shapes or values did."""
    value = f" ({limit})" if limit else ""
    said = f"Dynamo hit its recompile limit{value} in this run and ran the frame eagerly from then on"
    if compiled is not None and limit.isdigit() and compiled < int(limit):
        return (
            f"{said}, after this run compiled {count_of(compiled, 'graph')}: earlier tests or calls in this process "
            "compiled the same function (Dynamo's cache is per function, shared by every torch.compile of it), so "
            "the test measures compiled code alone and eager code after them, as a baseline recorded now does (-k, "
            "xdist and test order disagree); "
            "give each test its own compilation (torch._dynamo.reset() in an autouse fixture), or raise "
            "torch._dynamo.config.recompile_limit"
        )
    return (
        f"{said}: each new input shape or Python value compiled it anew; keep them fixed, mark the dimension "
        "dynamic (torch._dynamo.mark_dynamic), or raise torch._dynamo.config.recompile_limit"
    )


def recompiled_in_steps(steps: int | None, limit: str = "") -> str:
    """Why code compiled inside the measured steps: in the first only (`steps` None), a first
    call a warm-up takes; in several, new inputs, which no warm-up fixes. `limit`: the clause
    saying Dynamo hit its recompile limit, with its own fix, or empty."""
    guards = (
        "a new input shape, dtype or Python value that failed the guards of the compiled code "
        "(TORCH_LOGS=recompiles names the guard)"
    )
    if steps is None:
        return f"a first call (compile it in the warm-up: opprof.run(fn, warmup=1)), or {guards}{limit}"
    fix = limit or (
        "; keep the inputs' shapes and Python values fixed from call to call, or mark the dimension dynamic "
        "(torch._dynamo.mark_dynamic)"
    )
    return f"in {count_of(steps, 'step')}, not a first call: {guards}{fix}"


ONE_SIDE_COMPILED = (
    " (compiled code ran on one side only, and calls ops otherwise: out= forms, decompositions; the structure "
    "change says which side)"
)


def sizes_as_numbers(here: bool) -> str:
    """A compiled graph's inputs that differ only by sizes passed as numbers, on this run's side
    (`here`) or the baseline's: Dynamo compiled it dynamic there (compare._sizes_as_numbers)."""
    side = "here, not in the baseline" if here else "in the baseline, not here"
    return (
        f": the same tensors, with sizes passed as numbers (SymInts) {side}: Dynamo compiled the graph with "
        "dynamic shapes on one side and static on the other. It compiles a function dynamic after it ran with "
        "another shape in the same process (automatic dynamic), as when an earlier test calls the same forward "
        "with another shape, so the graph follows which tests ran before it (-k, xdist, test order): give each "
        "test its own compilation (torch._dynamo.reset() in an autouse fixture), or fix the choice "
        "(torch.compile(..., dynamic=False), torch._dynamo.mark_dynamic), then record again"
    )


def ops_overrun(count: int, op: str, where: str, over: str, parent: str, scope: str = "op") -> str:
    """The `nesting` check's message: `count` ops end past the op (or `scope` step) they started
    in; `op` the one that ends furthest past its `parent`, by `over` (`0.917 ms`), `where` ` in
    step 1` or ""."""
    runs = f"runs past the end of the {scope} it" if count == 1 else f"run past the end of the {scope}s they"
    return (
        f"{count_of(count, 'op')} {runs} started in ({op}{where} ends {over} after {parent}): ops on one "
        f"thread nest{' in their step' if scope == 'step' else ''}, so a duration is broken; export the trace again"
    )


def steps_overlap(first: int, second: int, by: str, pairs: int) -> str:
    """The `steps` check's message where step annotations overlap."""
    more = f" ({count_of(pairs, 'step')} start before an earlier one ends)" if pairs > 1 else ""
    return f"ProfilerStep#{second} starts {by} before ProfilerStep#{first} ends{more}: {STEPS_FOLLOW}"


def step_marked_twice(number: int, times: int, numbers: int) -> str:
    """The `steps` check's message where a step number is marked more than once."""
    more = f" ({count_of(numbers, 'step number')} are)" if numbers > 1 else ""
    return f"ProfilerStep#{number} is marked {times} times{more}: {STEPS_FOLLOW}"


def shared_correlation(calls: int, ids: int, example: int) -> str:
    """The `correlation` check's message."""
    return (
        f"{calls} runtime calls share {count_of(ids, 'correlation id')} between them (e.g. {example}): "
        "CUDA's tracer gives each call its own, so this source merges several processes' traces or was edited; "
        "the device events of a shared id are attributed to one of its calls only; analyze one process's own trace"
    )


def device_before_launch(events: int, by: str) -> str:
    """The `clock` check's message."""
    return (
        f"{count_of(events, 'device event')} {'starts' if events == 1 else 'start'} before the runtime call that "
        f"launched {'it' if events == 1 else 'them'} (by up to {by}), which no device can: the tracer corrupted "
        "the records (CUPTI from CUDA 12.6 Update 2 to 13.0 does at a profiler session's start, "
        "pytorch/pytorch#192021; a CUPTI of CUDA 13.1 or later fixes it) or the device's clock is not aligned with "
        "the host's in this source; the queue (queue_ms) and the step each device event is counted in are off by as much"
    )


STEPS_FOLLOW = (
    "a profiler's steps follow one another on one thread, so this source merges several profilers' "
    "(ranks, processes) or was edited, and its steps and per-step numbers are wrong; analyze one profiler's own trace"
)


def gzip_bomb(ratio: int, size: int) -> str:
    """Why a gzip past `ratio` times its `size` bytes is not read."""
    return (
        f"decompresses to more than {ratio} times its {size:,} bytes, as no profiler trace does (they compress "
        "7-25x): a gzip bomb, not a trace (if it is one, gunzip it and give the .json)"
    )


def cut_short_trace(path: object) -> str:
    """`opprof compare` of a trace whose header says the test's exception cut its capture short."""
    return (
        f"{path}: a capture the test's exception cut short (its last step ran in part), never compared; "
        f"compare a trace of a run that finished (opprof analyze {path} shows this one)"
    )


def empty_compare_side(path: object) -> str:
    return (
        f"{path}: an empty file, neither a baseline nor a trace; give a baseline or a trace exported by torch.profiler"
    )


def markers_stacked(nodeid: str, count: int, where: str) -> str:
    """Two or more opprof markers on one node of a test: only one would be read."""
    return (
        f"{nodeid}: {count} @pytest.mark.opprof markers on its {where}: they do not add up, and only one would be "
        "read; merge them into one"
    )


def not_slower(moved_calls: list[str]) -> str:
    """`opprof compare`'s line for a test B did not regress on time; `moved_calls`: the ops whose
    calls differ (a trial read `B not worse` over a graph break)."""
    if not moved_calls:
        return "B not slower"
    return (
        f"B not slower; calls differ for {first_three(moved_calls)}: compare judges time, the plugin's structure "
        "verdict judges calls"
    )


def work_not_failing(kinds: str) -> str:
    """`opprof compare`'s words for a B whose work changed where --fail-on leaves work out."""
    return f"work changed, which does not fail here (--fail-on {kinds})"


def time_not_failing(kinds: str) -> str:
    """`opprof compare`'s words for a slower B where --fail-on leaves time out (`kinds`: as given)."""
    return f"time does not fail here (--fail-on {kinds})"


NAMES_THE_LINE = " (TORCH_LOGS=graph_breaks names the line)"  # after a graph-break reason without its line


RECORD_AGAIN_FIX = "record the baseline again: pytest --opprof-update-baseline with the test's id"


def capture_moved_compared(kept: int, latest: int, time_fails: bool) -> str:
    """A comparing run's line for a test whose baseline holds another of its captures (what that
    costs a time verdict, where time fails the test)."""
    cost = (
        ": a slowdown of this capture cannot be confirmed, so it would be inconclusive, not failed"
        if time_fails
        else ""
    )
    return (
        f"its baseline holds the test's capture {kept} and its latest is now capture {latest} (the test's "
        f"captures changed since it was recorded){cost}; {RECORD_AGAIN_FIX}"
    )


def capture_moved_written(kept: int | None, latest: int, times_kept: bool) -> str:
    """A recording run's line for a baseline written because it held another of the test's captures
    (`times_kept`: its number alone was written)."""
    how = "its number written, its times kept" if times_kept else "written with this run's measurement"
    if kept is None:
        return (
            f"its baseline now says which of the test's captures it holds, capture {latest} (capture.number; a file "
            f"from before numbers did not say): {how}, so that only that capture's run() is judged and confirmed"
        )
    return (
        f"its baseline held the test's capture {kept} and now holds capture {latest}, the test's latest (the "
        f"test's captures changed): {how}"
    )


def raised_confirming(changes: list[str]) -> str:
    """The note on fn's exception in a confirmation: the suspected time change it was confirming
    (a trial's +200% showed nowhere beside a data loader's StopIteration)."""
    return "opprof: the suspected change, neither confirmed nor passed: " + "; ".join(changes)


def other_work_measured(ops: str) -> str:
    """Further measurements of run()'s fn (confirmations, a recorded range's) ran other ops,
    calls or inputs than the first: fn's work changes from call to call; they were left out."""
    return (
        f"further measurements of run()'s fn ran other work than the first (other ops, calls per step or inputs "
        f"of {ops}): fn's work changes from call to call (state it keeps: an EMA update after some steps, a "
        "growing cache), so each such one was left out, neither confirming a time nor widening a recorded "
        f"range; {SAME_WORK_FIX}"
    )


def wait_share(wait: float, over: str = "them") -> str:
    """`50% of the capture`, `132% of the capture (summed over them)`: a CPU wait summed over
    threads may pass 100%, which reads as a typo unless said."""
    return f"{100 * wait:.0f}% of the capture{f' (summed over {over})' if wait > 1 else ''}"


def waited_for_cpu(wait: float) -> str:
    """How long the test's threads waited for a CPU in a capture (Linux schedstat, summed over threads)."""
    return f"the test's threads waited for a CPU {wait_share(wait)}"


def waited_for_cpu_up_to(wait: float) -> str:
    """`waited_for_cpu` of several tests at once, `wait` the largest of their waits."""
    return f"their threads waited for a CPU up to {wait_share(wait, 'threads')}"


SLOWED_THAN = {
    "replaced": "for the baseline it replaced",
    "measured": "in another measurement of the test",
    "run": "for the other baselines this run wrote",
}


def recorded_slowed(factor: float, than: str, command: str) -> str:
    """A baseline this run wrote from a measurement whose machine references ran `factor` times
    slower than `than`'s (decide.Slowed): other load its threads' CPU wait did not show."""
    return (
        f"baseline recorded while the machine ran its references {factor:.1f}x slower than "
        f"{SLOWED_THAN.get(than, than)} (other load, or a slow spell of the machine): its CPU times may be inflated "
        f"and hide later slowdowns; record it again on a quiet machine: {command}"
    )


SLOWED_THAN_SHARED = {
    "replaced": "for the baselines they replaced",
    "measured": "in other measurements of the tests",
    "run": "for the other baselines this run wrote",
}


def recorded_slowed_shared(count: int, factor: float, than: set[str], command: str) -> str:
    """`recorded_slowed` for several tests at once, `factor` the largest, `than` what each was slower than."""
    words = " or ".join(SLOWED_THAN_SHARED.get(what, what) for what in sorted(than))
    return (
        f"opprof: {count} baselines recorded while the machine ran their references up to {factor:.1f}x slower than "
        f"{words} (other load, or a slow spell of the machine): their CPU times may be inflated and hide later "
        f"slowdowns; record them again on a quiet machine: {command}"
    )


def written_later(position: int, first_slowed: float | None, first_wait: float | None) -> str:
    """A baseline written from a later measurement than the first, which ran under load: its
    references `first_slowed` times slower than the written one's, or its threads waited for a CPU."""
    if first_slowed is not None:
        return (
            f"baseline written from measurement {position}, whose references ran {first_slowed:.1f}x faster than the "
            "first's: the first ran under other load or a slow spell (the op table shows the first)"
        )
    return (
        f"baseline written from measurement {position}, the first whose threads did not wait "
        f"for a CPU: the first waited {wait_share(first_wait or 0.0)} (the op table shows the first)"
    )


def contended_capture(wait: float, busy: Sequence[str] = (), child_processes: int = 0) -> str:
    """The `contention` warning: other load on the machine during the capture, or `busy`: the
    test's own Python threads that used CPU in it (a trial's busy thread of its own test was
    called other load on the machine, and the fix a quiet machine), or its own child processes."""
    if child_processes:
        threads = f" and Python threads ({first_three(list(busy))})" if busy else ""
        return (
            f"{waited_for_cpu(wait)}: the test's own {child_processes} child process{'es' * (child_processes != 1)} "
            f"(DataLoader workers, ranks it started){threads}, or other load on the machine, inflated its CPU times; "
            "time assertions judge them as measured (a baseline time verdict is inconclusive where the wait can "
            "explain the slowdown); give them fewer CPUs than the machine has (num_workers), or rerun on a quiet machine"
        )
    if busy:
        return (
            f"{waited_for_cpu(wait)}: the test's own Python threads ({first_three(list(busy))}), or other load "
            "on the machine, inflated its CPU times; time assertions judge them as measured (a baseline time "
            "verdict is inconclusive where the wait can explain the slowdown); stop those threads before the "
            "capture, or rerun on a quiet machine"
        )
    return (
        f"{waited_for_cpu(wait)}: other load on the machine inflated its CPU times; time assertions judge "
        "them as measured (a baseline time verdict is inconclusive where the wait can explain the slowdown); "
        "rerun on a quiet machine"
    )


def two_machines(key_a: str, key_b: str) -> str:
    return f"A ran on {key_a}, B on {key_b}: the times compare two machines"


def two_softwares(a: str, b: str, differ: int, compared: int) -> str:
    """The software most tests that differ were recorded with on each side (empty: not recorded, as
    in a trace torch wrote), and how many differ."""
    where = "" if differ == compared else f" ({differ} of {compared} compared tests differ so)"
    if not a or not b:  # `A was recorded with unrecorded` (a trial)
        known, side, other = (b, "A", "B") if not a else (a, "B", "A")
        what = f"{side} names no torch version (a trace torch wrote names none), {other} was recorded with {known}"
    else:
        what = f"A was recorded with {a}, B with {b}"
    return f"{what}{where}: ops and their counts may differ by the software alone, and times by its build"


FORKED_FUNCTION = "<forked function>"  # torch's record of a task torch.jit.fork started
FORKED_TRACE = (
    f"; the trace ran TorchScript forks ({FORKED_FUNCTION}), whose forking functions torch ends on the thread that "
    "finished their work, after their caller went on, and a trace torch wrote does not say which ops those are: "
    "measure with opprof (pytest --opprof, or pytest_opprof.from_profiler(prof)), whose captures and traces say it"
)


def two_setups(a: str, b: str, differ: int, compared: int) -> str:
    """The setups of torch's CPU ops on each side (`2 torch threads, AVX512 kernels`) where they differ."""
    where = "" if differ == compared else f" ({differ} of {compared} compared tests differ so)"
    return (
        f"A ran torch's CPU ops on {a}, B on {b}{where}: their CPU times may differ by that alone (a comparing "
        "run reads an op's move that it explains as inconclusive)"
    )


def work_not_compared(side: str, trace: bool, ops: list[str], tests: list[str]) -> str:
    """`opprof compare`: the ops whose work one side recorded and the other holds none of (a
    schema-1 file, an edited one, a trace of a profiler without record_shapes): not compared."""
    why = (
        f"{side}'s trace holds no op inputs (a profiler made without record_shapes)"
        if trace
        else f"{side}'s files hold none of it (schema 1, or `work` null or missing: an edit, a merge); "
        "record them again with pytest --opprof-update-baseline=all"
    )
    return (
        f"the work (inputs, FLOPs) of {first_three(ops)} was not compared in {count_of(len(tests), 'test')} "
        f"({first_three(tests)}): {why}"
    )


def work_on_neither(ops: list[str], tests: list[str]) -> str:
    """`opprof compare --fail-on work`: ops whose work neither side holds, so judged on none of it."""
    return (
        f"neither side holds the work (inputs, FLOPs) of {first_three(ops)} in {count_of(len(tests), 'test')} "
        f"({first_three(tests)}): --fail-on work judged none of it (baselines of schema 1 or edited, traces of "
        "profilers made without record_shapes)"
    )


def output_unwritable(exc: Exception) -> str:
    """stdout refused the output (a full disk, a closed file): the exit code must not read as a verdict."""
    why = getattr(exc, "strerror", None) or exc
    return f"cannot write the output: {why}; send it where it can be written (> a file with room)"


NO_STEP_MARKERS = (
    "steps: no step markers (torch.profiler's ProfilerStep#N, which prof.step() writes): the whole trace "
    "reads as one step, so its calls and times per step are the whole capture's, against the other side's "
    "steps: shown, nothing judged (time, calls, work); compare traces that mark their steps (a profiler "
    "schedule with prof.step() after each step, or opprof's own)"
)


STEPLESS_NOT_JUDGED = "not judged: one side's trace marks no steps (its warning above)"  # a test's line


def single_step_tests(names: list[str], min_steps: int) -> str:
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"{len(names)} compared {'baseline holds' if len(names) == 1 else 'baselines hold'} under {min_steps} steps on "
        f"a side (a whole call, capture(), the marker, a short run()): {'its' if len(names) == 1 else 'their'} slower "
        "ops are shown, not judged, as the plugin never judges their times (an op only B has still counts, by its "
        f"median, as the plugin's structure verdict fails it): {shown}"
    )


def device_against_cpu(device_side: str) -> str:
    other = "B" if device_side == "A" else "A"
    return (
        f"{device_side}'s ops ran on a device, {other}'s on the CPU only: device times on one side, CPU times "
        "on the other"
    )


def machine_speed_differs(speed: str, reference: str, tests: int) -> str:
    """`speed`: excuses.speed_words of B's reference time over A's."""
    return (
        f"B's machine ran the {reference} reference {speed} than A's (median of {count_of(tests, 'test')}): "
        "CPU times differ by about that much with no change to the code (another machine, or load while one "
        "side recorded)"
    )


def no_category_read(complete: int) -> str:
    """A trace whose complete events are all of categories the reader skips (or have none)."""
    return (
        f"none of its {count_of(complete, 'complete event')} has a category opprof reads ('cat': cpu_op, "
        "kernel, gpu_memcpy, cuda_runtime, user_annotation...; missing, python_function or another): it "
        "records no operator"
    )


def other_captures(tests: list[str]) -> str:
    """`opprof compare` of baselines of one test that hold other captures of it (capture.number)."""
    return (
        f"A and B hold other captures of {count_of(len(tests), 'test')} ({first_three(tests)}): the test's captures "
        "changed between the recordings, so their ops may be of other code"
    )


def two_tests(nodeid_a: str, nodeid_b: str, what: str = "baselines") -> str:
    return f"A and B are {what} of two tests ({nodeid_a}, {nodeid_b}): their ops differ by what the tests run"


def csv_chose_no_op(patterns: list[str], trace: object) -> str:
    return (
        f"--op {' '.join(map(repr, patterns))} chose no op in {trace}, only kernels, copies, ranges or runtime "
        "calls, and the CSV holds one row per op: drop --csv (the tables show them) or use --json"
    )


def baselines_under_rootdir(folder: str, rootdir: object) -> str:
    return (
        f"opprof: baseline paths ({folder}/...) are relative to the rootdir, {rootdir}, not to the folder pytest ran in"
    )


def trace_not_found(path: object) -> str:
    return f"{path}: no such file; give the path of a .json or .json.gz trace"


def captures_cannot_nest() -> str:
    return (
        "an opprof capture is already running: captures cannot nest (torch runs one profiler at a time); "
        "move this one out, or measure the inner code alone"
    )


def profiler_already_running() -> str:
    return (
        "a torch profiler is already running; opprof cannot start its own inside it: "
        "stop the other profiler, or pass its result to pytest_opprof.from_profiler()"
    )


def profiler_left_on(left_by: str | None) -> str:
    """A measured test that began while a torch profiler ran: one left on by `left_by` (the test
    after which it ran), or started before the test by code of its own (a fixture)."""
    where = (
        f"left running by {left_by}, which started it and did not stop it"
        if left_by
        else ("started before it (by a fixture or a conftest?)")
    )
    return (
        f"opprof: a torch profiler was already running when this test began, {where}; opprof cannot measure "
        "inside another profiler (torch runs one at a time): stop it where it starts (prof.stop() in a finally, "
        "or `with torch.profiler.profile():`)"
    )


def profiler_inside_capture() -> str:
    return (
        "a torch profiler started inside an opprof capture (opprof.run()'s or measure()'s fn, a `with "
        "opprof.capture():` block): torch runs one profiler at a time, and it would stop opprof's; take it "
        "out of the measured code, or profile with it alone and pass it to pytest_opprof.from_profiler()"
    )


SHOWN = 60  # characters of a value an error line quotes (a kernel's name runs to 1000)


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()  # keyword arguments only from Python 3.12
    short.maxlevel, short.maxdict, short.maxlist, short.maxtuple, short.maxset = 2, 4, 6, 6, 6
    short.maxstring, short.maxother = SHOWN, 4 * SHOWN  # shown_value cuts the end, not the middle
    return short


class _JsonRepr(reprlib.Repr):
    """reprlib's short repr, with JSON's null, true, false and NaN inside lists and objects too."""

    def repr_NoneType(self, value: None, level: int) -> str:  # noqa: N802 (reprlib's method names)
        return "null"

    def repr_bool(self, value: bool, level: int) -> str:
        return json.dumps(value)

    def repr_float(self, value: float, level: int) -> str:
        return json.dumps(value)  # NaN, Infinity as a JSON file spells them


def _json_repr() -> reprlib.Repr:
    short = _JsonRepr()
    short.maxlevel, short.maxdict, short.maxlist, short.maxtuple, short.maxset = 2, 4, 6, 6, 6
    short.maxstring, short.maxother = SHOWN, 4 * SHOWN
    return short


_REPR = _short_repr()
_JSON_REPR = _json_repr()
_DEFAULT_REPR = re.compile(r"<(?:[\w.<>]+\.)?(\w+) object at (0x[0-9a-fA-F]+)>")


def shown_value(value: object) -> str:
    """A name or value as an error line quotes it: on one line (a tensor's repr has many), cut to
    SHOWN characters, and never built whole (a list of 100,000 items is not spelt out first)."""
    shape = getattr(value, "shape", None) if type(value).__name__ in ("Tensor", "Parameter") else None
    if shape is not None:
        return f"<tensor of shape {tuple(shape)}>"
    try:
        text = repr(value) if isinstance(value, str) else " ".join(_REPR.repr(value).split())
    except Exception:  # a user object whose __repr__ raises
        text = f"<{type(value).__name__} object>"
    text = _DEFAULT_REPR.sub(r"<\1 object at \2>", text)  # <module.Class object ...>: the class is enough
    if len(text) <= SHOWN:
        return text
    return text[: SHOWN - 4] + ("...'" if text[0] in "'\"" else "...")


def json_shown(value: object) -> str:
    """A value read from a JSON file as an error line quotes it: null, true, false and NaN spelt
    as in the file, also inside a list or an object (a trial read `'recorded_range_ms' is None`,
    then `[None, 1]`); cut as shown_value cuts."""
    if isinstance(value, str):
        return shown_value(value)
    text = " ".join(_JSON_REPR.repr(value).split())
    return text if len(text) <= SHOWN else text[: SHOWN - 4] + "..."


def not_a_profiler(value: object) -> str:
    return f"from_profiler() takes a finished torch.profiler.profile, not {shown_value(value)}"


def profiler_cycle_cleared(step: int) -> str:
    return (
        f"from_profiler(): nothing left to read: the profiler's schedule ended its active cycle at prof.step() call {step} "
        "and began another, and torch clears a cycle's events when the next begins (acc_events keeps its "
        "averages, not the events); give the schedule repeat=1, or read each cycle with "
        "on_trace_ready=lambda p: profiles.append(from_profiler(p))"
    )


def profiler_recorded_nothing(steps: int) -> str:
    return (
        f"from_profiler(): the profiler recorded nothing: its schedule reached no active step in its {steps} "
        f"prof.step() call{'' if steps == 1 else 's'}; run more steps, or shorten the schedule's wait and warmup (or, if it is still "
        "running, call from_profiler after the `with profile(...)` block)"
    )


def profiler_never_stepped() -> str:
    return (
        "from_profiler(): the profiler recorded nothing: its schedule begins with wait or warmup steps and its loop "
        "called no prof.step(), so no active step came; call prof.step() at the end of each iteration (or, if the "
        "profiler never ran, use it as `with profile(...) as prof:` around the code)"
    )


def profiler_never_started() -> str:
    return (
        "from_profiler(): the profiler never started: use it as `with profile(...) as prof:` around the code "
        "(or call prof.start() before it and prof.stop() after), then call from_profiler(prof)"
    )


def profiler_not_finished() -> str:
    return (
        "from_profiler() needs a finished torch.profiler.profile: "
        "call it after the `with profile(...)` block (or after prof.stop())"
    )


def trace_already_saved(torch_version: str) -> str:
    return (
        f"from_profiler(): torch {torch_version} lets opprof read a capture only through its trace, which it "
        "writes once, and this profiler's trace was already written (by prof.export_chrome_trace(), an "
        "on_trace_ready handler or an earlier from_profiler); read that file with opprof.load_trace(path), "
        "or call from_profiler(prof) once and write the trace with Profile.export_chrome_trace(path)"
    )


def trace_not_written(reason: str) -> str:
    return f"from_profiler(): Kineto could not write the capture's trace to a temporary file: {reason}"


def not_a_path(call: str, value: object) -> str:
    return f"{call}: {shown_value(value)} is not a file path; give a str or pathlib.Path"


def device_key_hook_raised(exc: BaseException) -> str:
    """A pytest_opprof_device_key hook that raised: the exception, and the hook's line that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    hook = [f"{f.filename}:{f.lineno}" for f in frames if f.name == "pytest_opprof_device_key"]
    at = f" at {hook[-1]}" if hook else ""
    said = next(iter(str(exc).splitlines()), "")[: 2 * SHOWN]
    return (
        f"pytest_opprof_device_key raised {type(exc).__name__}: {said}{at}; fix the hook (a fact that cannot "
        "be read is None) or return None for the default key"
    )


def fn_expected(call: str) -> str:
    """What fn must be; `call`: the API called, `opprof.run` or `measure` (a library user has no fixture)."""
    name = call.rsplit(".", 1)[-1]
    return f"a callable (a model, a function): pass it and its arguments, {name}(fn, *args), not what a call of it returned"


def run_keyword_slip(given: str, meant: str, value: object, call: str = "opprof.run") -> str:
    """A keyword for run() (or measure()) that went to fn, which does not take it."""
    return (
        f"{given}={shown_value(value)}: fn takes no keyword {given!r}, and {call}() passes every keyword but "
        f"warmup= and steps= to fn; did you mean {meant}={shown_value(value)}?"
    )


def fn_keyword_taken(name: str, call: str = "opprof.run") -> str:
    """fn needs a parameter named like one of run()'s own keywords, which the call did not fill."""
    what = "profiled" if name == "steps" else "unprofiled warm-up"
    short = call.rsplit(".", 1)[-1]
    return (
        f"fn's parameter {name!r} has no value: opprof takes the keyword {name}= for itself (the number of {what} "
        f"calls); pass fn's own through a lambda: {short}(lambda: fn(..., {name}=...), {name}=...)"
    )


def bad_argument(name: str, value: object, expected: str) -> str:
    return f"{name}={shown_value(value)}: expected {expected}"


def looks_mistyped(a: str, b: str) -> bool:
    """Whether a is b with a slip of the keyboard: a letter doubled or dropped beside its twin
    (`gelu_mull` for `gelu_mul`), or two neighbours swapped (`geul` for `gelu`). Other one-letter
    differences name other kernels often enough (`relu`/`gelu`, `sin`/`sinh`, `lt`/`gt`), and
    digits number siblings (`_0`, `_1`): neither counts."""
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        ) and not (a[diff[0]] + a[diff[1]]).isdigit()
    long, short = (a, b) if len(a) == len(b) + 1 else (b, a) if len(b) == len(a) + 1 else ("", "")
    if not long:
        return False
    i = next((i for i, (x, y) in enumerate(zip(long, short)) if x != y), len(short))
    doubled = (i > 0 and long[i] == long[i - 1]) or (i + 1 < len(long) and long[i] == long[i + 1])
    return long[:i] + long[i + 1 :] == short and doubled and not long[i].isdigit()


_NAMESPACE_SLIP = re.compile(r"^\w+[:.](?=\w)")  # aten: or aten. for aten::


def _namespace(name: str) -> str | None:
    """`aten` of `aten::mm`; None for a name without `::`."""
    return name.split("::", 1)[0].lower() if "::" in name else None


def closest_names(wanted: str, seen: Iterable[str], limit: int = 3) -> list[str]:
    """Names among `seen` that look like `wanted` (for 'did you mean' hints), closest first.
    Compared without the namespace, so "aten::matmull" finds "aten::matmul", not "aten::t"; a
    namespace mistyped as "aten:" or "aten." counts as one ("aten:mm" finds "aten::mm"). A name
    that is the initials of one's words comes first ("aten::sdpa" finds
    aten::scaled_dot_product_attention: an LLM trial's was offered nothing), a public op before a
    private one (`_`) and without its in-place twin (`op_`)."""

    def bare(name: str) -> str:
        return name.rsplit("::", 1)[-1].lower() if "::" in name else _NAMESPACE_SLIP.sub("", name).lower()

    target = bare(wanted).strip("*?[]")
    space = _namespace(wanted)
    scored = []
    for name in dict.fromkeys(seen):
        ratio = difflib.SequenceMatcher(None, target, bare(name)).ratio()
        if _abbreviates(target, bare(name)) and (not space or _namespace(name) in (None, space)):
            scored.append((0, bare(name).startswith("_"), -ratio, name))
            continue
        # in another namespace only a closer likeness (a trial's prim::Nope was offered aten::ne)
        least = 0.8 if space and _namespace(name) not in (None, space) else 0.6
        if ratio >= least or (len(target) >= 3 and target in bare(name)):
            scored.append((1, False, -ratio, name))
    ranked = [(group, name) for group, _, _, name in sorted(scored)]
    names = {name for _, name in ranked}
    return [name for group, name in ranked if group or name[:-1] not in names or not name.endswith("_")][:limit]


def _abbreviates(short: str, name: str) -> bool:
    """Whether `short`, 3 letters or more (`ne`, `le` are ops of their own), is the initials of
    `name`'s words: sdpa of scaled_dot_product_attention."""
    words = [w for w in name.split("_") if w]
    return len(short) >= 3 and len(words) >= 2 and "_" not in short and short == "".join(w[0] for w in words)


class OpprofUsageError(OpprofError):
    """A bad argument to an opprof call (negative ms, steps < 1, an unknown stat...)."""


def shown_name(name: str) -> str:
    """A name as a message shows it: as it is, or quoted with escapes when it holds a character
    that does not show (`'aten::mm\\u200b'`: else it would read like the op it is not), or starts
    or ends with a space (`' aten::mm'`)."""
    return name if name.isprintable() and name == name.strip() else repr(name)


def not_events(value: object) -> str:
    """analyze() given something other than events: a path, a profiler, None."""
    return (
        f"analyze(): events={shown_value(value)} is not a list of pytest_opprof.Event records; read a trace file with "
        "load_trace(path), a finished torch profiler with from_profiler(prof)"
    )


def bad_event(index: int, problem: str) -> str:
    """analyze() given an event it cannot read."""
    return f"analyze(): events[{index}]: {problem}; build each as Event(kind, name, start_ns, dur_ns, ...)"


def torch_missing(problem: str) -> str:
    """The library's measure() or capture() where torch cannot be imported (a release trial's
    raised a bare ModuleNotFoundError)."""
    return f"torch cannot be imported here ({problem}); install torch in this environment to measure"


def torch_not_importable(problem: str) -> str:
    """--opprof where torch cannot be imported: each measured test would end in a traceback."""
    return f"--opprof: torch cannot be imported here ({problem}); install torch in this environment, or run without --opprof"


def more_bad_markers(count: int) -> str:
    return f"... and {count} more bad markers"


def steps_not_compared(step: int) -> str:
    return f"not compared: the test's exception ended step {step} part way"


COMPILED_IN_STEPS = (
    "torch.compile compiled inside its measured steps (warning compilation): the change may be what compiled before "
    "this test (test order, -k), not the code's; warm it up with the inputs the steps use, then judge it again"
)  # a test trial's whole-call test of a shared compiled model failed only where it ran first


def baseline_required(nodeid: str, path: str) -> str:
    return (
        f"opprof: --opprof-require-baseline: {nodeid} has no baseline ({path} does not exist); record it with "
        f"pytest --opprof-update-baseline {shell_quote(nodeid)} and commit it, or check --opprof-baseline-dir and the device key"
    )


def strict_inconclusive(nodeid: str, message: str, fix: str) -> str:
    return (
        f"opprof: --opprof-strict: a time check of {nodeid} was inconclusive, which strict mode makes an error: "
        f"{message}; {with_its_id(fix, nodeid)}, or drop --opprof-strict to report it as a summary line"
    )


_ITS_ID = re.compile(r"(pytest --opprof-update-baseline(?:=all|=changed)?) with the test's id")


def with_its_id(text: str, nodeid: str) -> str:
    """`text` with the record command a fix gives as `... with the test's id` (the JSON's fix, one
    text for every test) written out for the test: a trial had to type the id in."""
    return _ITS_ID.sub(lambda found: f"{found[1]} {shell_quote(nodeid)}", text)


def stepped_aside(assertions: int) -> str:
    return (
        f"opprof: the test started a profiler of its own ({OWN_PROFILERS}), so the whole-call capture stepped "
        f"aside and its {assertions} operator assertion{'s' if assertions != 1 else ''} could not be checked; "
        "measure with opprof.run(...) or `with opprof.capture():` outside your profiler"
    )


OWN_PROFILERS = "torch.profiler, or pytest_opprof's measure() or capture()"


def stepped_aside_unmeasured(baseline: str | None) -> str:
    """A test whose own profiler made the whole-call capture step aside, with no assertion to say
    so; `baseline`: the file that went uncompared (None: no baseline expected a measurement)."""
    lost = f": its baseline {baseline} was not compared" if baseline else ""
    return (
        f"the test started a profiler of its own ({OWN_PROFILERS}), so the whole-call capture stepped aside and "
        f"measured nothing{lost}; measure with opprof.run(...) or `with opprof.capture():` outside your "
        "profiler, or remove the profiler"
    )


def key_hook_loaded_late(where: str, key: str, conftest: bool) -> str:
    """A device-key hook that came after the key was chosen: in a conftest pytest loaded only while
    collecting (`conftest`), or in a plugin registered after opprof's configure."""
    why = (
        "pytest loads that conftest.py only when it collects its folder, so the key would depend on the paths given"
        if conftest
        else "it was registered after opprof's pytest_configure, which asks for the key"
    )
    return (
        f"opprof: the pytest_opprof_device_key hook in {where} came after opprof chose the device key ({key}): "
        f"{why}; put the hook in the rootdir's conftest.py (or an installed plugin)"
    )


def unknown_ini_key(key: str, where: str, known: Iterable[str]) -> str:
    """An `opprof*` key in the ini file (or `-o`) that no option of this version reads."""
    close = closest_names(key, known, limit=1)
    hint = f"did you mean {close[0]}?" if close else "pytest --help lists the opprof_* ini options"
    return f"{key} ({where}): no pytest-opprof option has that name, so it would be ignored; {hint}"


def asked_late_unmeasured(baseline: str | None) -> str:
    """A test that asked for the fixture in its body (`request.getfixturevalue("opprof")`) and
    captured nothing: the whole call is measured only for a test that names the fixture."""
    lost = f": its baseline {baseline} was not compared" if baseline else ""
    return (
        "the test asked for the opprof fixture in its body (request.getfixturevalue) and captured nothing, "
        f"so nothing was measured{lost}; name opprof in the test's arguments (then the whole call is "
        "measured), or measure with opprof.run(...) or `with opprof.capture():`"
    )


def subtests_failed(count: int, unittest: bool = False) -> str:
    """Why a test whose subtests failed failed: pytest's own words, which it gives after our hooks;
    for a unittest test's `subTest`, which pytest reports passed beside its SUBFAILED lines, that."""
    words = f"contains {count} failed subtest{'s' if count > 1 else ''}"
    return f"{words} (pytest reports a unittest test passed beside its SUBFAILED lines)" if unittest else words


def outside_rootdir(path: str, rootdir: str, nodeid: str) -> str:
    """A measured test in a file outside the rootdir: its baseline would not be its own."""
    return (
        f"opprof: {path} lies outside the rootdir {rootdir}: its tests' node ids ({nodeid!r}) are no paths "
        "under the rootdir, so their baselines would be shared with other tests of that name (or land outside "
        "the baseline folder); run pytest with --rootdir (or the ini file) at a folder above every test file"
    )


def toml_list_fix(key: str, items: list[str] | None) -> str:
    """The line to write for a TOML list pytest 9's `[tool.pytest]` refused under a comma-list key."""
    joined = ", ".join(items) if items is not None else "a, b"
    return f"; write the list as one comma-separated string: {key} = {json.dumps(joined)}"


def former_key_source(root: str, former: str, key: str) -> str:
    """The header's `(from ...)` for a run that kept a device's former key (an AMD GPU's, a Windows CPU's)."""
    if key.startswith("cpu-"):
        return (
            f"{root}/{former}, which holds baselines under this CPU's former key; its key is {key} now, Windows' "
            f"AMD64 and Linux's and macOS's x86_64 being one kind of CPU: git mv {root}/{former} {root}/{key}"
        )
    return (
        f"{root}/{former}, which holds AMD baselines under this GPU's former key; its key is {key} now, which keeps "
        f"AMD GPUs torch names alike apart: where they were recorded on this GPU's kind, git mv {root}/{former} {root}/{key}"
    )


def worker_gpus(gpus: int, name: str) -> str:
    """The header's line under xdist where the controller sees several GPUs of GPU 0's model."""
    return (
        f"opprof: {gpus} GPUs named {name}: each xdist worker measures on one of them (worker gwN on the Nth, "
        "wrapping around), unless CUDA_VISIBLE_DEVICES per worker, or torch.cuda.set_device in a conftest, chose first"
    )


def inert_summary(count: int) -> str:
    tests = "test carries" if count == 1 else "tests carry"
    return f"opprof: {count} {tests} operator checks, not measured; run pytest --opprof to measure them"


def assertion_inside_capture(inside: str = "`with opprof.capture():`") -> str:
    after = "run()" if inside.startswith("opprof.run()") else "the block"
    return f"an assertion inside {inside} would check a capture that has not ended (or an earlier one); assert after {after}"


def profiler_off_thread(thread: str) -> str:
    """A torch profiler started on a thread of the test's while the whole-call capture runs."""
    return (
        f"a torch profiler started on thread {shown_name(thread)} while opprof captured the test call on the "
        "test's own: torch runs one profiler at a time, and stopping opprof's from another thread would leave "
        "it running into the tests after; start the profiler (or measure()) on the test's thread"
    )


def fn_missing(call: str, as_keyword: bool) -> str:
    """A profiling call without the function to profile (`as_keyword`: it was given as fn=)."""
    keyword = (
        " (a keyword fn= goes to that function, as every keyword but warmup= and steps= does)" if as_keyword else ""
    )
    return (
        f"{call}() takes the function to profile as its first argument, positionally{keyword}: "
        f"{call}(model, x, warmup=3, steps=10) profiles model(x)"
    )


def nothing_chosen(globs: list[str], tests: int) -> str:
    """`opprof compare --op` whose globs match no op of the tests in both sides: an error, not a pass."""
    return (
        f"--op {' '.join(globs)} matches no op of the {count_of(tests, 'test')} in both, so nothing was compared; "
        "opprof show lists each side's ops"
    )


def nothing_in_both(a: object, b: object, same: tuple[str, str] | None) -> str:
    """`opprof compare` of two sides with no test in common: an error, not a pass."""
    if same is not None:
        why = (
            f"{same[0]!r} in A is {same[1]!r} in B: recorded from other rootdirs? record both sides from one "
            "rootdir (the folder of the project's ini file)"
        )
    else:
        why = "give two baseline folders of the same tests (.opprof/<device key>), recorded from one rootdir"
    return f"no test is in both {a} and {b}, so nothing was compared; {why}"


def report_unwritten(flag: str, path: object, reason: str) -> str:
    """A report asked for that could not be written at the run's end (the tests' outcomes stand)."""
    return f"opprof: {flag}: could not write {path} ({reason}); give {flag} a path you can write"


def bad_call(
    what: str, takes: str, wrong: str, given: dict[str, object], close: list[str], in_ms: float | None = None
) -> str:
    """A call of an assertion method whose arguments do not fit it (`wrong`: Python's reason, or
    the keyword it does not take, with the parameters that look like it; `in_ms`: its value in
    ms where it named another time unit)."""
    if wrong not in given:
        return f"{what}: {wrong} (it takes {takes})"
    value = shown_value(given[wrong])
    hint = f"; did you mean {close[0]}={value}?" if close else ""
    if in_ms is not None:
        hint = f"; did you mean ms={in_ms:g} ({wrong}={value})?"
    return f"{what} takes no keyword {shown_value(wrong)}{hint} (it takes {takes})"


def capture_off_thread(what: str, thread: str) -> str:
    """A run() or capture() called from a thread of the test's, not the test's own."""
    return (
        f"{what} called from thread {shown_name(thread)}, not the test's own: opprof's profiler runs on the "
        "test's thread, and a capture begun on another would leave it running into the tests after; "
        f"call {what} in the test's body"
    )


# -- measurements no baseline is written from ---------------------------------------------

TRACER_RAN = "a Python tracer ran"
TRACER_RECORD_FIX = "--no-cov (with pytest-cov; without a debugger)"  # after the record command and its tests


def unrecordable_gpu(reason: str) -> str:
    return f"unreliable GPU clocks ({reason})"


def traced_budget(tracer: str) -> str:
    """A failing time budget's clause: a Python tracer ran in its capture."""
    return (
        f"a Python tracer ({tracer}) ran in the capture, which slows the Python between the ops and inside them "
        "(a hook, a custom op, an autograd Function): measure without coverage or a debugger for a time budget"
    )


def unrecordable_tracer(tracer: str) -> str:
    """A measurement under a Python tracer: it slows the Python between the ops (the step wall) and
    inside them (a hook, a custom op)."""
    return f"{TRACER_RAN} ({tracer}): it slows the Python between the ops and inside them"


# -- opprof mv ------------------------------------------------------------------------------


def mv_not_a_node_id(nodeid: str, problem: str) -> str:
    return f"{nodeid!r}: {problem}; give the test's node id as pytest prints it (tests/test_x.py::test_y)"


def mv_in_the_way(new: Path | str, what: str) -> str:
    """The new test's place holds something: never replaced."""
    return f"{new}: {what} is there already; move or delete it first if the moved baseline should take its place"


def mv_unplaced(path: Path | str, key: str | None, was: str, nodeid: str) -> str:
    return (
        f"{path}: not where the plugin reads the baseline of {was!r} nor of {nodeid!r} in a folder of its device "
        f"key ({key}); move it into place by hand, or record the test again"
    )


def mv_cannot_write(new: Path | str, path: Path | str, exc: OSError) -> str:
    return f"{new}: cannot be written ({exc.strerror or exc}); {path} is as it was"


def mv_cannot_remove(path: Path | str, new: Path | str, exc: OSError) -> str:
    return f"{path}: written to {new}, but cannot be removed ({exc.strerror or exc}); delete it"


def mv_unreadable(path: Path | str, exc: OSError) -> str:
    return f"{path}: cannot be moved ({exc.strerror or exc}: {exc.filename}); nothing was changed"


def moved_line(old: Path | str, new: Path | str, nodeid: str, was: str) -> str:
    """`opprof mv`'s line: what moved, and the Git step that keeps both sides of it."""
    where = f"{old} -> {new}" if str(old) != str(new) else f"{new} (where it was)"
    both = (
        f"git add -A -- {shell_quote(str(old))} {shell_quote(str(new))}"
        if str(old) != str(new)
        else f"git add -- {shell_quote(str(new))}"
    )
    return f"opprof mv: {where}: the baseline of {nodeid!r} now (was {was!r}); commit it: {both}"


def unmoved_line(path: Path | str, nodeid: str) -> str:
    return f"opprof mv: {path} is the baseline of {nodeid!r} already; nothing changed"


def mv_not_a_file(path: Path | str, what: str) -> str:
    """`opprof mv` given a folder or a device for FILE (a trial's `opprof mv / NODEID` was told to
    rename `/`, and `/dev/null` to delete it)."""
    return f"{path}: {what}, not a baseline file; give the baseline file (.json) of the renamed or moved test"


def moved_before_line(given: Path | str, path: Path | str, nodeid: str) -> str:
    """`opprof mv` of a FILE that is gone, where NODEID's baseline is there: run again (a review:
    a mistyped FILE read `nothing changed` without the FILE named)."""
    return (
        f"opprof mv: {given}: no such file, and {path} is the baseline of {nodeid!r} already (moved by an "
        "earlier opprof mv?); nothing changed"
    )


def repeats_disagreed(path: str, tests: list[str], verbose: bool = False) -> str:
    """One baseline file that several runs of its test changed in one recording run."""
    return (
        f"opprof: {path} was written {len(tests)} times in this run ({first_three(tests, verbose)}), each run "
        "finding the one before changed: the test does not run alike each time (its calls or inputs vary), so "
        "the file holds whichever ran last and later runs fail by chance; make it run alike each time"
    )


def benchmark_rounds() -> str:
    """A whole-call capture of a test that used pytest-benchmark's `benchmark` fixture."""
    return (
        "pytest-benchmark's benchmark fixture ran in the test's whole-call capture: it runs its function as many "
        "rounds as its timing picks, so the ops' calls per step change from run to run (a trial's aten::addmm "
        "6580 -> 8520/step failed as a structure change), and the profiler slows each round it times; measure "
        "the function with opprof.run(fn, ...), or give benchmark fixed rounds (benchmark.pedantic(fn, rounds=N, "
        "iterations=1))"
    )


def hypothesis_test(nodeid: str) -> str:
    """A hypothesis `@given` test that carries opprof."""
    return (
        f"{nodeid}: a hypothesis @given test runs its body once per drawn example, so opprof would measure, "
        "compare and record whichever example ran last (a trial's baseline of one drawn shape failed every later "
        "run, which drew another); measure fixed inputs in a test of its own"
    )


def capture_after_call(what: str, nodeid: str) -> str:
    """A run() or capture() in a fixture's teardown, after the test's call ended."""
    return (
        f"{what} in the teardown of {nodeid}: a test's capture is judged, recorded and reported when its call "
        "ends, so one made after it would count for nothing; measure before the fixture's `yield`, or in the test body"
    )


def assertions_before_capture(made: list[str], replaced_by: str) -> str:
    """Assertions made during the whole-call capture, before a capture of the test's own."""
    return (
        f"{count_of(len(made), 'assertion')} made before {replaced_by} ({first_three(made)}) had no capture of "
        f"the code before to check: the whole-call capture ends where {replaced_by} starts, and the assertion "
        f"would check the code after; assert after it, or measure the code above with `with opprof.capture():`"
    )


def records_and_requires(update_from: str, require_from: str) -> str:
    """--opprof-require-baseline with a recording the project or the environment set."""
    return (
        f"--opprof-require-baseline (from {require_from}) checks that the baselines exist, and "
        f"--opprof-update-baseline (from {update_from}) records them: this run would compare nothing; remove "
        f"the recording from {update_from}, and pass --opprof-update-baseline on the command line when you mean "
        "to record"
    )


def recording_by_setting(source: str) -> str:
    """Baselines recorded because the project or the environment says so, not the command line."""
    return (
        f"opprof: recording baselines, as {source} says (--opprof-update-baseline): this run compared nothing, "
        f"and so does every run while {source} says it; remove it, and pass --opprof-update-baseline on the "
        "command line when you mean to record"
    )


def idle_outputs(flags: Iterable[str], removed: Sequence[str] = (), kept: Sequence[str] = ()) -> str:
    """opprof's flags given without --opprof: nothing is measured, so nothing is checked or written
    (a CI command missing --opprof passed every regression, its gates given and idle); `removed`:
    the earlier reports at their paths, which a dashboard would have read as this run's (a
    scripting trial's); `kept`: those that could not be removed, each with why."""
    gone = f"; the earlier {_reports(removed)} removed: not this run's" if removed else ""
    stays = f"; the earlier {_reports(kept)} could not be removed: not this run's" if kept else ""
    return (
        f"opprof: {', '.join(flags)} without --opprof: nothing measured, checked or written{gone}{stays}; add --opprof"
    )


def _reports(paths: Sequence[str]) -> str:
    return ("report " if len(paths) == 1 else "reports ") + ", ".join(paths)


NO_CPU_WAIT = (
    "opprof: this system does not say how long threads waited for a CPU (Linux's /proc/<pid>/task/*/schedstat): "
    "contention cannot excuse a slower time here, nor mark a baseline recorded under load; record baselines "
    "on a quiet machine, and gate times where a quiet one runs them"
)


COLLECT_ONLY = "opprof: --collect-only ran no test: no report written (an earlier run's files stay as they were)"


def run_stopped(nodeid: str, measured: int, reports: bool) -> str:
    """The run's first line where a Ctrl-C or pytest.exit stopped it in a test."""
    held = f"; the reports hold {'them' if measured != 1 else 'it'}" if reports and measured else ""
    return (
        f"opprof: the run stopped in {nodeid} (Ctrl-C or pytest.exit): {count_of(measured, 'measured test')} "
        f"got that far{held}, and the tests after it did not run"
    )


NOTHING_MEASURED = (
    "opprof: no test was measured (none ran that uses the opprof fixture or marker); "
    "the reports asked for are written all the same, empty"
)


def case_clash_line(nodeids: list[str]) -> str:
    """Tests whose baseline files differ only in letter case (baseline.case_clashes)."""
    return (
        f"opprof: the baseline files of {' and '.join(nodeids)} differ only in letter case: on a case-insensitive "
        "file system (macOS, Windows) they are one file, and one test's recording overwrites the other's "
        "baseline; rename one of the tests (or its parametrize id)"
    )


def orphans_line(
    paths: list[str],
    every: bool = False,
    here: list[str] | None = None,
    paired: Collection[str] = (),
    partial: bool = False,
) -> str:
    """Baseline files no collected test reads (their tests renamed, moved or removed, or their
    test file gone); `every` (-v) names all; `here`: the same paths as the folder pytest ran in
    reaches them, for the command (`rm`, not `git rm`: a file never committed would stop it);
    `paired`: those a test without a baseline may be (renames.renamed_pairs), left out of the `rm`,
    whose own lines keep them (a trial's moved file got `rm` and `git mv` for the same files);
    `partial`: the run collected or ran part of the suite (a shard, -k, test paths), whose tests
    moved elsewhere it cannot pair (a sharding trial's two shards gave `rm` and `opprof mv`)."""
    head = (
        f"opprof: {count_of(len(paths), 'baseline file')} in the folders of the collected test files, or of test "
        f"files that no longer exist, {'is' if len(paths) == 1 else 'are'} read by no test (renamed, moved or "
        f"removed tests?): {first_three(paths, every)}; "
    )
    if partial:
        head += "this run picked some of the tests: a test moved to a file it did not collect is paired only by a run that does; "
    shown = here if here is not None else paths
    lone = [shell_quote(shown[i]) for i, path in enumerate(paths) if path not in paired]
    delete = f"delete them (and commit the deletion): rm -- {' '.join(lone)}"
    if len(lone) == len(paths):
        return f"{head}if those tests are gone, {delete}"
    if not lone:
        one = len(paths) == 1
        alone = " ".join(shell_quote(p) for p in shown)
        return (
            f"{head}{'it' if one else 'each'} may be the baseline of a test below that had none (renamed or moved: "
            f"its line keeps it); if not, delete {'it' if one else 'them'} (and commit the deletion): rm -- {alone}"
        )
    return (
        f"{head}{len(paths) - len(lone)} of them may be the baselines of tests below that had none (renamed or "
        f"moved: their lines keep them); if the tests of the other {len(lone)} are gone, delete those (and commit "
        f"the deletion): rm -- {' '.join(lone)}"
    )


# A test's profile when its exception ended the capture (the terminal table's header, the HTML page)
CUT_SHORT = "cut short by the test's exception, not compared with the baseline"


def digits_past_limit(exc: ValueError) -> str:
    """Why json.loads refused an integer of thousands of digits, in the same words on every Python
    (3.10 and 3.11 word their own message differently)."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    found = re.search(r"value has (\d+) digits", str(exc))
    digits = f"{int(found.group(1))} digits" if found else f"over {limit} digits"
    return f"a number JSON cannot hold (an integer of {digits}; Python reads at most {limit})"
