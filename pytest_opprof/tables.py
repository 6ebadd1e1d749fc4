"""Text tables of one Profile (tabulate): ops, kernels, memory ops, checks.

Below the model: it reads a Profile's fields and imports nothing of ours at run time, so
`Profile.table()` can use it without an import cycle.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from .textout import ELLIPSIS
from .units import count_of, count_text, ms_text, share_text

if TYPE_CHECKING:  # for annotations only: the model imports this module
    from .analysis import Profile


_MARKDOWN: ContextVar[bool] = ContextVar("opprof_markdown_tables", default=False)
_WIDTH: ContextVar[int | None] = ContextVar("opprof_table_width", default=None)
NAME_FLOOR = 20  # a name column is cut no narrower: `aten::_scaled_dot_p…` still says which op
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~&])")  # what GitHub would read as markup in a name


TABLE_LINE = "\x1e"  # marks the lines of a table grid() made, for as_markdown (a path may start with `|`)


@contextmanager
def markdown_tables() -> Iterator[None]:
    """Tables made inside it are GitHub-flavoured Markdown (`opprof ... --markdown`): for a pull
    request's comment or a CI job's summary page."""
    token = _MARKDOWN.set(True)
    try:
        yield
    finally:
        _MARKDOWN.reset(token)


@contextmanager
def fitted_to(width: int | None) -> Iterator[None]:
    """Plain tables made inside it fit `width` columns where cutting their names can make them
    (an interactive terminal's width; None: as wide as their names)."""
    token = _WIDTH.set(width)
    try:
        yield
    finally:
        _WIDTH.reset(token)


def grid(rows: Sequence[Sequence[Any]], headers: Sequence[str], names: Sequence[int] = (0,)) -> str:
    """Rows under their headers: tabulate's plain columns, or inside markdown_tables() a GitHub
    table, its cells escaped (a kernel's `<float, 4>` would read as an HTML tag, a `|` end a
    cell), set apart by blank lines. Inside fitted_to(), the `names` columns (op, kernel names)
    are cut to fit the width (_fitted)."""
    if not _MARKDOWN.get():
        table = str(tabulate(rows, headers=headers, disable_numparse=True))
        width = _WIDTH.get()
        return table if width is None or not rows else _fitted(table, rows, headers, names, width)
    cells = [["" if cell is None else markdown_escaped(str(cell)) for cell in row] for row in rows]
    heads = [markdown_escaped(head) for head in headers]
    table = str(tabulate(cells, headers=heads, tablefmt="github", disable_numparse=True))
    return "\n" + "\n".join(TABLE_LINE + line for line in table.split("\n")) + "\n"


def _fitted(table: str, rows: Sequence[Sequence[Any]], headers: Sequence[str], names: Sequence[int], width: int) -> str:
    """The table with its name columns cut to `width`, no narrower than NAME_FLOOR: at their end,
    or in their middle where two names would read alike so (a review's flash and efficient
    attention ops both read `aten::_scaled_dot_pr…`). Left whole where cutting cannot make it
    fit, where names read alike either way, and where a name holds wide characters (a CJK range
    name: the terminal gives each two columns)."""
    over = _widest(table) - width
    if over <= 0 or any(_wide(row[i]) for row in rows for i in names if i < len(row)):
        return table
    cut = _cut_widths(rows, headers, names, over)
    if cut is None:
        return table
    for cutter in (short, _short_middle):
        shorter = [[_cut(cell, cut.get(i), cutter) for i, cell in enumerate(row)] for row in rows]
        if not _alike(rows, shorter, cut):
            return str(tabulate(shorter, headers=headers, disable_numparse=True))
    return table


def _alike(rows: Sequence[Sequence[Any]], shorter: list[list[Any]], columns: Iterable[int]) -> bool:
    """Whether two different names of a column read alike cut."""
    for i in columns:
        pairs = {(row[i], new[i]) for row, new in zip(rows, shorter) if i < len(row)}
        if len({new for _, new in pairs}) < len(pairs):
            return True
    return False


def _short_middle(name: str, width: int) -> str:
    """`aten::_scal…on_for_cpu`: the start and the end, where names differ."""
    head = (width - 1) // 2
    return name[:head] + ELLIPSIS + name[len(name) - (width - 1 - head) :]


def _wide(cell: Any) -> bool:
    return isinstance(cell, str) and any(unicodedata.east_asian_width(ch) in "WF" for ch in cell)


def _widest(table: str) -> int:
    return max(len(line) for line in table.split("\n"))


def _cut_widths(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], names: Sequence[int], over: int
) -> dict[int, int] | None:
    """The width each name column is cut to so the table loses `over` columns, the widest column
    cut first; None where cutting them all to the floor (or their headers) is not enough."""
    widths = {i: max((len(str(row[i])) for row in rows if i < len(row)), default=0) for i in names if i < len(headers)}
    floors = {i: max(NAME_FLOOR, len(headers[i])) for i in widths}
    if sum(max(0, widths[i] - floors[i]) for i in widths) < over:
        return None
    for _ in range(over):
        i = max(widths, key=lambda c: (widths[c] - floors[c], -c))
        widths[i] -= 1
    return widths


def _cut(cell: Any, width: int | None, cutter: Callable[[str, int], str]) -> Any:
    return cutter(cell, width) if width is not None and isinstance(cell, str) and len(cell) > width else cell


def markdown_escaped(text: str) -> str:
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def as_markdown(text: str) -> str:
    """A command's text made under markdown_tables() as Markdown: its tables as they are, every
    other line escaped and ending in a hard line break (each line of the text its own line)."""
    return "\n".join(_markdown_line(line) for line in text.split("\n"))


def _markdown_line(line: str) -> str:
    if line.startswith(TABLE_LINE):  # a line of a table grid() made: as it is
        return line[len(TABLE_LINE) :]
    return _prose(line) if line.strip() else line


def _prose(line: str) -> str:
    """A line of text as a Markdown line of its own: escaped, its indent kept as no-break spaces (four
    spaces would start a code block), a leading `-`, `+`, `=` or `1.` not read as a list or a rule."""
    body = line.lstrip(" ")
    indent = "\u00a0" * (len(line) - len(body))
    body = markdown_escaped(body)
    body = re.sub(r"^([-+=])", r"\\\1", body)
    body = re.sub(r"^(\d+)([.)])", r"\1\\\2", body)
    return indent + body + "  "


def ms_cell(value: float) -> str:
    return ms_text(value)


def short(name: str, width: int = 70) -> str:
    if not name:  # a nameless event (torch writes none; a hand-made trace may): no blank cell
        return '""'
    return name if len(name) <= width else name[: width - 1] + ELLIPSIS


def with_more_rows(table: str, total: int, shown: int, noun: str) -> str:
    """The table, and under it `(3 more ops)` where `--top` left rows out (a trial's scripts and
    eyes could not tell a cut table from a whole one)."""
    left = total - shown
    return table + (f"\n({count_of(left, f'more {noun}')})" if left > 0 else "")


def of_step(ns: float, median_wall: float) -> str:
    """A time per step as a share of the median step's wall time: the `of step` column of every
    table ('' for a capture without step markers, which has no step to be a share of)."""
    return f"{100 * ns / median_wall:.1f}%" if median_wall else ""


def by_shown_time(ops: Any) -> list[Any]:
    """Ops by the median time per step the tables show (device time for ops that ran on a
    device, CPU time otherwise), largest first; ties by total CPU time (a caller before the op
    inside it), then name. The order of `Profile.ops`, so the tables, `--json` and `--csv` agree
    on which ops `--top N` keeps."""
    return sorted(ops, key=lambda o: (-o.time_per_step.median, -o.cpu_ns, o.name))


def ops_table(profile: Profile, top: int | None = 20) -> str:
    """Ops by time per step (device time for ops that ran on a device, else CPU), largest
    first, as the share column shows it: medians per step."""
    median_wall = profile.median_wall_ns
    rows = []
    for op in by_shown_time(profile.ops)[: top or None]:
        per = op.time_per_step
        share = of_step(per.median, median_wall)
        rows.append(
            [
                short(op.name),
                count_text(op.calls_per_step.median),
                ms_cell(op.cpu_per_step.median / 1e6),
                ms_cell(op.self_cpu_per_step.median / 1e6),
                ms_cell(op.device_per_step.median / 1e6) if op.on_device else "-",
                share,
            ]
        )
    headers = ["op", "calls/step", "cpu ms/step", "self cpu", "device ms/step", "of step"]
    return with_more_rows(grid(rows, headers), len(profile.ops), len(rows), "op")


SOME_STEPS_LISTED = 3


def some_steps_line(profile: Profile) -> str | None:
    """The ops that ran in under half the steps, whose medians per step the tables show as 0:
    in how many steps, and their time there (the median over those steps), the costliest first.
    A diagnosis trial's matmul of 0.8 ms in 4 of 10 steps read `0 0.000` in every table."""
    found = [
        (ms, op.name, sum(1 for c in op.calls_per_step.samples if c), ms_text(ms), op.on_device)
        for op in profile.ops
        if op.calls and not op.calls_per_step.median and (ms := _time_where_ran(op)) is not None
    ]
    return some_steps_text(found, profile.steps)


def some_steps_text(found: list[tuple[float, str, int, str, bool]], steps: int) -> str | None:
    """The line of ops that ran in some steps only, each (ms there, name, steps it ran in, ms as
    shown, on a device), the costliest first; None for none (a test's tables, `opprof show`)."""
    if not found:
        return None
    found = sorted(found, key=lambda f: (-f[0], f[1]))
    listed = ", ".join(
        f"{name} in {ran} of {steps} steps ({shown} ms {'device' if device else 'cpu'} there)"
        for _, name, ran, shown, device in found[:SOME_STEPS_LISTED]
    )
    more = f" and {count_of(len(found) - SOME_STEPS_LISTED, 'more op')}" if len(found) > SOME_STEPS_LISTED else ""
    return f"ran in some steps only (their medians per step are 0): {listed}{more}"


def _time_where_ran(op: Any) -> float | None:
    """An op's median time (ms) over the steps it ran in; None where it ran in none (outside them)."""
    times = [t for c, t in zip(op.calls_per_step.samples, op.time_per_step.samples) if c]
    return statistics.median(times) / 1e6 if times else None


def ranges_table(profile: Profile, top: int | None = 20) -> str:
    """The capture's ranges (record_function blocks, annotations) by time per step: wall time on
    their thread, and the device time of the work launched inside them."""
    median_wall = profile.median_wall_ns
    rows = []
    for r in by_shown_time(profile.ranges)[: top or None]:
        share = of_step(r.time_per_step.median, median_wall)
        rows.append(
            [
                short(r.name),
                count_text(r.calls_per_step.median),
                ms_cell(r.cpu_per_step.median / 1e6),
                ms_cell(r.device_per_step.median / 1e6) if r.on_device else "-",
                share,
            ]
        )
    headers = ["range (record_function)", "calls/step", "cpu ms/step", "device ms/step", "of step"]
    table = grid(rows, headers)
    return with_more_rows(table, len(profile.ranges), len(rows), "range")


def kernels_table(profile: Profile, top: int | None = 20) -> str:
    rows = [
        [short(k.name, 60), k.op or "-", k.calls, ms_cell(k.device_ns / 1e6)] for k in profile.kernels[: top or None]
    ]
    table = grid(rows, ["kernel", "launched by", "calls", "device ms"], names=(0, 1))
    return with_more_rows(table, len(profile.kernels), len(rows), "kernel")


def graph_launches_table(profile: Profile, top: int | None = 20) -> str:
    rows = [
        [g.launch, g.op or "-", count_text(g.calls_per_step.median), count_text(g.kernels_per_step.median),
         ms_cell(g.device_per_step.median / 1e6)]
        for g in profile.graph_launches[: top or None]
    ]  # fmt: skip
    headers = ["graph replay", "launched in", "replays/step", "kernels/step", "device ms/step"]
    table = grid(rows, headers, names=(0, 1))
    return with_more_rows(table, len(profile.graph_launches), len(rows), "graph replay")


def compiled_line(profile: Profile) -> str | None:
    """`torch.compile: 2 regions/step (frames 0, 1), 1 resumed after a graph break, ...`."""
    c = profile.compiled
    if c is None:
        return None
    in_steps = [r for r in c.regions if r.step >= 0]
    steps = max(profile.steps, 1)
    frames = ", ".join(sorted({r.compile_id for r in in_steps}))
    per_step = len(in_steps) / steps
    parts = [
        f"torch.compile: {count_text(per_step)} {'region' if per_step == 1 else 'regions'}/step ({frames or 'none'})"
    ]
    if resumed := sum(1 for r in in_steps if r.nested):
        parts.append(f"{count_text(resumed / steps)}/step resumed after a graph break")
    if inside := [x for x in c.compilations if x.step >= 0]:
        parts.append(f"{len(inside)} compilations inside the steps")
    parts.append(f"eager {share_text(c.eager_share)} of the work (against compiled code)")
    return "; ".join(parts)


def steps_or_span(profile: Profile) -> str:
    """What a share of "the steps" is of: a trace without step markers has one implicit step, the
    span of its host events (its wall time is not known)."""
    return "the steps" if profile.wall_known else "the host span (no step markers)"


def timeline_line(profile: Profile) -> str | None:
    """`device busy 62% of 1.20 ms; idle while the host ran ops 30% of the steps; compute/memory
    overlap 0.020 ms; queue median 0.010 ms; launch-bound: aten::add (kernel 0.002 < launch 0.005 ms)`."""
    t = profile.timeline
    if t is None or not t.total.span_ns:
        return None
    total = t.total
    parts = [f"device busy {share_text(total.busy_ns / total.span_ns)} of {total.span_ns / 1e6:.3f} ms"]
    if t.host_bound_share is not None:
        parts.append(f"idle while the host ran ops {share_text(t.host_bound_share)} of {steps_or_span(profile)}")
    if total.compute_memory_overlap_ns:
        parts.append(f"compute/memory overlap {total.compute_memory_overlap_ns / 1e6:.3f} ms")
    if total.compute_comm_overlap_ns:
        parts.append(f"compute/comm overlap {total.compute_comm_overlap_ns / 1e6:.3f} ms")
    if total.queue is not None:
        parts.append(f"queue median {total.queue[0] / 1e6:.3f} ms")
    if t.launch_bound:
        shown = ", ".join(
            f"{b.op} (kernel {b.kernel_ns / 1e6:.4f} < launch {b.launch_ns / 1e6:.4f} ms)" for b in t.launch_bound[:3]
        )
        more = f" and {len(t.launch_bound) - 3} more" if len(t.launch_bound) > 3 else ""
        parts.append(f"launch-bound: {shown}{more}")
    return "timeline: " + "; ".join(parts)


def memory_table(profile: Profile, top: int | None = 20) -> str:
    rows = [[m.name, m.calls, ms_cell(m.device_ns / 1e6), m.bytes] for m in profile.memory_ops[: top or None]]
    table = grid(rows, ["memory op", "calls", "device ms", "bytes"])
    return with_more_rows(table, len(profile.memory_ops), len(rows), "memory op")


def runtime_table(profile: Profile, top: int | None = 20) -> str:
    """Runtime and driver calls (cudaLaunchKernel, hipMemcpyAsync...) and their CPU time."""
    rows = [[short(r.name, 60), r.calls, ms_cell(r.cpu_ns / 1e6)] for r in profile.runtime[: top or None]]
    table = grid(rows, ["runtime call", "calls", "cpu ms"])
    return with_more_rows(table, len(profile.runtime), len(rows), "runtime call")


def checks_table(profile: Profile) -> str:
    rows = [[c.status, c.name, c.message] for c in profile.checks]
    return grid(rows, ["check", "name", "message"], names=())  # a message is not cut: its fix is in it


def _wall_words(profile: Profile) -> str:
    """`0.570 ms/step wall (median; 5.700 ms in all; 0.021 ms/step outside the ops)`: per step, as
    a test's line gives it (a newcomer read `opprof analyze`'s summed wall against the test line's
    ms/step), and the time between the ops, which a step wall verdict is about (a diagnosis trial
    found it in `--json` only)."""
    inputs = ", times include recording inputs" if profile.times_include_inputs else ""
    if profile.wall_ms is None:
        return f"no wall time (no step markers){inputs}"
    outside = profile.outside_ops_ns
    between = (
        f"{statistics.median(outside) / 1e6:.3f} ms{'/step' if len(outside) > 1 else ''} outside the ops"
        if outside
        else ""
    )
    if profile.steps <= 1:
        return f"{profile.wall_ms:.3f} ms wall{f' ({between})' if between else ''}{inputs}"
    return f"{profile.median_wall_ns / 1e6:.3f} ms/step wall (median; {profile.wall_ms:.3f} ms in all{f'; {between}' if between else ''}){inputs}"


def profile_tables(profile: Profile, top: int | None = 20, whole: Profile | None = None) -> str:
    """Every table for one profile, with a one-line header. `whole`: the measurement `profile`
    was chosen from (`opprof analyze --op`): the header counts its ops, and the runtime calls
    chosen get a table of their own."""
    wall, in_all = _wall_words(profile), " in all" if profile.steps > 1 else ""
    device = (
        f", device {profile.device_ns / 1e6:.3f} ms{in_all} (busy {profile.device_busy_ms:.3f} ms, "
        f"not attributed to an op {profile.unattributed_device_ns / 1e6:.3f} ms)"
        if profile.device_ns or profile.kernels or profile.memory_ops  # events of 0 us are events
        else ", no device events"
    )
    ops = count_of(len(profile.ops), "op")
    if whole is not None:
        ops = f"{count_of(len(whole.ops), 'op')} ({len(profile.ops)} chosen)"
    cut = ", cut short by the test's exception" if profile.traced_cut_short else ""
    parts = [f"{profile.source}: {count_of(profile.steps, 'step')}{cut}, {wall}, {ops}{device}"]
    for line in (compiled_line(profile), timeline_line(profile)):
        if line:
            parts.append(line)
    runtime = whole is not None and bool(profile.runtime)
    if profile.ops or not (
        profile.ranges or profile.kernels or profile.memory_ops or runtime
    ):  # `--op` may choose none
        parts += ["", ops_table(profile, top)]
        if some := some_steps_line(profile):
            parts.append(some)
    if profile.ranges:
        parts += ["", ranges_table(profile, top)]
    if profile.kernels:
        parts += ["", kernels_table(profile, top)]
    if profile.graph_launches:
        parts += ["", graph_launches_table(profile, top)]
    if profile.memory_ops:
        parts += ["", memory_table(profile, top)]
    if runtime:
        parts += ["", runtime_table(profile, top)]
    chosen = [(o.name, sig.text, sig.calls_per_step.median) for o in profile.ops if o.work for sig in o.work.signatures]
    if whole is not None and chosen:
        parts += ["", inputs_table(chosen, top)]
    parts += ["", checks_table(profile)]
    return "\n".join(parts)


def inputs_table(rows: Sequence[tuple[str, str, float]], top: int | None = 20) -> str:
    """The chosen ops' input signatures (`opprof show/analyze --op`), each with its calls per
    step: an op's bfloat16 calls apart from its float ones (a training trial found its tables
    gave one row for both, and no dtype)."""
    shown = rows[:top] if top is not None else rows
    table = grid(
        [[name, inputs, count_text(calls)] for name, inputs, calls in shown], ["op", "inputs", "calls/step"], names=(0,)
    )
    return with_more_rows(table, len(rows), len(shown), "signature") if shown else ""


DISTURBED_BELOW = 0.5  # profiled steps twice as fast as unprofiled ones: the unprofiled timing was disturbed


def profiler_cost_text(overhead: float, steps_differ: bool = False) -> str:
    """What profiling cost a step (best profiled / best unprofiled), or why it is unknown: below
    DISTURBED_BELOW the unprofiled calls were the disturbed ones (a trial read `x0.02` as a figure);
    where the steps did other work (`steps_differ`: the step_events warning), the fastest step and
    the unprofiled calls ran other data (a data trial's cycled batches read `profiler x0.52`)."""
    if steps_differ:
        return f"profiler cost unknown (the steps did other work: x{overhead:.2f})"
    if overhead < DISTURBED_BELOW:
        return f"profiler cost unknown (the unprofiled calls were disturbed: x{overhead:.2f})"
    return f"profiler x{overhead:.2f}"


def steps_differ(profile: Profile) -> bool:
    """Whether the capture's steps ran other ops or counts (its step_events check warned)."""
    return any(c.name == "step_events" and c.status == "warning" for c in profile.checks)
