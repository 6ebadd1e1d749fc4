"""The `opprof show` and `opprof compare` tables: baselines, and two measurements side by side.
Reads documents and side-by-side rows; never measures, judges or writes."""

from __future__ import annotations

import statistics
from typing import Any

from .analysis import inputs_text
from .documents import BaselineDoc
from .errors import wait_share
from .sidebyside import shown_side_rows
from .tables import grid, inputs_table, short, some_steps_text, with_more_rows
from .textout import shell_quote
from .units import count_of, count_text, first_three, stored_decimals, stored_ms_text
from .verdicts import STEP_WALL


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def baseline_tables(path: str, doc: BaselineDoc, top: int | None = 20, inputs: bool = False) -> str:
    """One baseline file as a header and tables: ops, kernels, memory ops (all per step), and
    with `inputs` (`show --op`) the ops' input signatures."""
    parts = _baseline_header(path, doc)
    if doc.ops or not (doc.kernels or doc.memory_ops):  # `show --op` may choose kernels or copies only
        parts += ["", _baseline_op_table(doc, top)]
    signatures = [
        (name, inputs_text(sig.shapes, sig.dtypes), sig.calls_per_step)
        for name in doc.ops_by_time()
        if (work := doc.ops[name].work) is not None
        for sig in work.signatures
    ]
    tables = (_baseline_kernel_table(doc, top), _baseline_memory_table(doc, top))
    for table in (*tables, inputs_table(signatures, top) if inputs else ""):
        if table:
            parts += ["", table]
    return "\n".join(parts)


def _baseline_header(path: str, doc: BaselineDoc) -> list[str]:
    env = doc.environment
    names = {"torch": "torch", "cuda": "CUDA", "hip": "HIP", "driver": "driver", "cuda_driver": "CUDA driver"}
    software = ", ".join(f"{label} {env[k]}" for k, label in names.items() if env.get(k) is not None)
    hardware = env.get("gpu_name") or env.get("cpu_model")
    if hardware:
        software = f"{hardware}; {software}"
    cpu_ops = [count_of(doc.threads, "torch thread")] if doc.threads else []  # a team trial saw no word of them
    if isinstance(env.get("cpu_capability"), str):
        cpu_ops.append(f"{env['cpu_capability']} kernels")
    if cpu_ops:
        software = f"{software}; {', '.join(cpu_ops)}"
    walls = list(doc.wall_ms or [])
    wall = f", {stored_ms_text(_median(walls))} ms/step wall" if walls else ""
    if walls and doc.outside_ms:  # the time a step wall verdict is about
        wall += f" ({stored_ms_text(_median(list(doc.outside_ms)))} ms/step outside the ops)"
    which = f" (the test's capture {doc.number})" if (doc.number or 1) > 1 else ""
    lines = [
        f"{doc.nodeid}  [{path}]",
        f"device {doc.device_key}; {software or 'no software facts'}; {count_of(doc.steps, 'step')}{which}{wall}",
    ]
    if doc.recorded_wait:  # a reviewer read a file of 12 ms addmm, calm 0.14 ms, as any other
        lines.append(
            f"recorded while its threads waited for a CPU {wait_share(doc.recorded_wait)}: its CPU times may be "
            "inflated and hide slowdowns; record it again on a quiet machine, in the test's rootdir and with the "
            f"options it was recorded with: pytest --opprof-update-baseline=all {shell_quote(doc.nodeid)}"
        )
    if doc.unrepeated:  # what a later work change in them says too (capture.unrepeated)
        lines.append(
            f"recorded from a run() whose fn did other work from call to call in {first_three(list(doc.unrepeated))} "
            "(the data it reads, or state it keeps such as a growing cache): a later run's slowdown cannot be "
            "confirmed by measuring again, and warmup=, steps=, -k and the order of tests change what is measured"
        )
    return lines


def _baseline_op_table(doc: BaselineDoc, top: int | None) -> str:
    """Per op: calls, median and fastest step, CPU time, which time it is judged on, and the
    recorded range of its fastest step where the file holds ranges (pytest-opprof's docs/verdicts.md: Recorded ranges)."""
    ranged = any(op.recorded_range for op in doc.ops.values())
    rows = []
    for name in doc.ops_by_time()[:top]:
        op = doc.ops[name]
        times = list(op.time_samples) or [0]
        row = [
            short(name),
            _calls_cell(op.calls_per_step),
            stored_ms_text(_median(times)),
            stored_ms_text(min(times)),
            stored_ms_text(_median(list(op.cpu_ms or [0]))),
            "device" if op.on_device else "cpu",
        ]
        if ranged:
            span = op.recorded_range
            row.append(f"{stored_ms_text(span[0])}-{stored_ms_text(span[1])}" if span else "-")
        rows.append(row)
    headers = ["op", "calls/step", "ms/step", "min", "cpu ms/step", "time"] + (
        ["min/step range (recorded)"] if ranged else []
    )
    table = with_more_rows(grid(rows, headers), len(doc.ops), len(rows), "op")
    some = _some_steps_line(doc)
    return f"{table}\n{some}" if some else table


def _calls_cell(calls: tuple[float, ...]) -> str:
    """`13` or, where steps made other counts, `13 (11-15)`: the median and the range (a data
    trial's MoE file held 15, 13, 11, ... per step and read 13)."""
    counts = list(calls or [0])
    low, high = min(counts), max(counts)
    median = count_text(_median(counts))
    return median if low == high else f"{median} ({count_text(low)}-{count_text(high)})"


def _some_steps_line(doc: BaselineDoc) -> str | None:
    """The baseline's ops that ran in under half its steps (their medians per step are 0), with
    their time where they ran, as the test's tables say them (tables.some_steps_line)."""
    found = []
    for name, op in doc.ops.items():
        ran = [t for c, t in zip(op.calls_per_step, op.time_samples) if c]
        if ran and not _median(list(op.calls_per_step)):
            ms = _median(ran)
            found.append((ms, name, len(ran), stored_ms_text(ms), op.on_device))
    return some_steps_text(found, doc.steps)


def _baseline_kernel_table(doc: BaselineDoc, top: int | None) -> str:
    kernels = sorted(doc.kernels.items(), key=lambda item: (-_median(list(item[1].device_ms or [0])), item[0]))
    rows = [
        [
            short(name, 60),
            ", ".join(k.ops) or "-",
            count_text(_median(list(k.calls_per_step or [0]))),
            stored_ms_text(_median(list(k.device_ms or [0]))),
        ]
        for name, k in kernels[:top]
    ]
    headers = ["kernel", "launched by", "calls/step", "device ms/step"]
    table = grid(rows, headers, names=(0, 1))
    return with_more_rows(table, len(kernels), len(rows), "kernel") if rows else ""


def _baseline_memory_table(doc: BaselineDoc, top: int | None) -> str:
    """Per memory op, per step as the other columns: a file holds its bytes over all the steps
    (`1` call and 0.050 ms per step beside three steps' `12288` bytes read as one 12 KB copy)."""
    memory = sorted(doc.memory_ops.items(), key=lambda item: (-_median(list(item[1].device_ms or [0])), item[0]))
    rows = [
        [
            name,
            count_text(_median(list(m.calls_per_step or [0]))),
            stored_ms_text(_median(list(m.device_ms or [0]))),
            count_text(m.bytes / doc.steps) if doc.steps else m.bytes,
        ]
        for name, m in memory[:top]
    ]
    headers = ["memory op", "calls/step", "device ms/step", "bytes/step"]
    table = grid(rows, headers)
    return with_more_rows(table, len(memory), len(rows), "memory op") if rows else ""


def _diff_decimals(a_ms: float | None, b_ms: float | None) -> int:
    """A difference of two stored times is as precise as the coarser of them."""
    return min(stored_decimals(ms) for ms in (a_ms, b_ms) if ms is not None) if (a_ms, b_ms) != (None, None) else 3


def _diff_text(diff_ms: float, decimals: int) -> str:
    """`+0.120`, `-0.001`; a difference below the shown precision is `0.000`, never `-0.000`."""
    text = f"{diff_ms:+.{decimals}f}"
    return text if float(text) != 0 else f"{0:.{decimals}f}"


def side_by_side_table(rows: list[Any], top: int | None = 20, judged: bool = True) -> str:
    """`opprof compare`: ops of A and B side by side, largest absolute difference first; beyond
    `top`, the rows that are slower, whose calls changed or that are on one side only (a trial's
    `--top 4` hid `aten::reshape 15 -> 16`), and a line counting the rows left out. Not `judged`
    (a baseline of under 5 steps): a slower row says so."""
    table = []
    shown = shown_side_rows(rows, top)
    for r in shown:
        ratio = r.ratio
        table.append(
            [
                short(WALL_ROW if r.op == STEP_WALL else r.op, 60),
                "-" if r.a_calls is None else count_text(r.a_calls),
                "-" if r.b_calls is None else count_text(r.b_calls),
                "-" if r.a_ms is None else stored_ms_text(r.a_ms),
                "-" if r.b_ms is None else stored_ms_text(r.b_ms),
                f"{ratio:.2f}x" if ratio is not None else "-",
                _diff_text(r.diff_ms, _diff_decimals(r.a_ms, r.b_ms)),
                "/".join(dict.fromkeys(t for t in (r.a_time, r.b_time) if t)),  # cpu, device or cpu/device
                _side_status_cell(r, judged),
            ]
        )
    headers = ["op", "A calls/step", "B calls/step", "A ms/step", "B ms/step", "B/A", "diff ms", "time", "status"]
    text = grid(table, headers)
    left_out = len(rows) - len(shown)
    return text + (
        f"\n({count_of(left_out, 'more row')}, each within the tolerance or faster: --top shows more)"
        if left_out
        else ""
    )


# the step wall row's label: its time is outside the ops (an LLM trial read the total step wall
# `opprof show` gives, 18.11 ms, beside this row's 7.040); --json keeps the name `step wall`
WALL_ROW = f"{STEP_WALL} (outside the ops)"


def _side_status_cell(row: Any, judged: bool) -> str:
    """`slower`, `same (calls)`, `added (in 2 of 6 steps)`, `slower (not judged)`."""
    notes = ["calls"] if row.calls_changed else []
    notes += [f"renumbered: A's {row.renumbered_from}"] if row.renumbered_from else []
    notes += [row.in_some_steps] if row.in_some_steps else []
    notes += [row.judged_by_median] if row.judged_by_median else []
    notes += ["not judged"] if row.status == "slower" and not judged else []
    return row.status + (f" ({', '.join(notes)})" if notes else "")


def kernels_under_ops_table(rows: list[Any], top: int | None = 20, per_op: int = 3) -> str:
    """Kernels are named per architecture: listed under the op that launched them, A beside B."""
    table = []
    for r in rows[:top]:
        if not r.kernels_a and not r.kernels_b:
            continue
        for i in range(min(per_op, max(len(r.kernels_a), len(r.kernels_b)))):
            cells = []
            for kernels in (r.kernels_a, r.kernels_b):
                if i < len(kernels):
                    name, calls, ms = kernels[i]
                    cells += [short(name, 48), f"{count_text(calls)}x {stored_ms_text(ms)}"]
                else:
                    cells += ["", ""]
            table.append([short(r.op, 40) if i == 0 else "", *cells])
    if not table:
        return ""
    headers = ["op", "A kernels", "calls x ms/step", "B kernels", "calls x ms/step"]
    return grid(table, headers, names=(0, 1, 3))
