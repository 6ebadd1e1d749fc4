"""The --opprof-html report: one self-contained HTML file for the run (no network, no CDN).

Each test's section is made where its baseline rows are (the xdist worker, like its terminal
table); the controller puts the sections in one page.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .errors import CUT_SHORT, NOT_FAILING
from .files import write_output
from .tables import by_shown_time, of_step, profiler_cost_text, steps_differ
from .units import count_of, count_text

if TYPE_CHECKING:
    from .analysis import Check, Profile
    from .decide import BaselineResult
    from .verdicts import Verdict

TOP_BARS = 10

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d232a;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:0;word-break:break-all}
.meta{color:#555;margin:4px 0 10px} section{border:1px solid #d8dde3;border-radius:6px;padding:12px 16px;margin:14px 0}
.outcome{font-size:12px;padding:1px 6px;border-radius:3px;color:#fff;margin-left:6px}
.worker{font-size:12px;font-weight:normal;color:#555;margin-left:6px}
.passed{background:#2e7d32}.failed{background:#c62828}.error{background:#6a1b9a}.skipped{background:#777}.xfailed{background:#777}.xpassed{background:#ef6c00}.None{background:#777}
table{border-collapse:collapse;margin-top:8px} td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}
td:first-child,th:first-child{text-align:left;font-family:ui-monospace,monospace}
.bars div{display:flex;align-items:center;margin:2px 0}.bars span.name{width:320px;font-family:ui-monospace,monospace;
overflow:hidden;text-overflow:ellipsis;white-space:nowrap}.bars span.bar{background:#3f7fbf;height:12px;margin:0 8px}
.stack{display:flex;height:18px;width:600px;border:1px solid #ccc;margin:6px 0}.stack span{height:100%}
.compute{background:#3f7fbf}.comm{background:#e08a1e}.memory{background:#6aaa5a}.idle{background:#e3e3e3}
pre.failure{background:#fdecea;border-left:3px solid #c62828;padding:6px 10px;white-space:pre-wrap;margin:8px 0}
ul.verdicts{margin:6px 0;padding-left:20px} .legend span{margin-right:12px}.legend i{display:inline-block;width:10px;height:10px}.verdict{color:#c62828}#filter{margin:8px 0;padding:4px;width:320px}
"""

_SCRIPT = """
function applyFilter(wanted) {
  wanted = wanted.toLowerCase();
  document.querySelectorAll("section.test").forEach(function (section) {
    section.hidden = wanted !== "" && section.dataset.nodeid.toLowerCase().indexOf(wanted) < 0;
  });
}
var box = document.getElementById("filter");
box.addEventListener("input", function (event) { applyFilter(event.target.value); });
if (location.hash.indexOf("#filter=") === 0) {
  var wanted = location.hash.slice(8);
  try { wanted = decodeURIComponent(wanted); } catch (e) { /* a bare "%" (50%): the text as typed */ }
  box.value = wanted;
  applyFilter(box.value);
}
document.body.dataset.ready = "1";
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def _trace_href(trace_path: str, html_dir: Path | None) -> str:
    """The link to a test's trace: relative to the page, percent-encoded (a parametrized id's
    `[a#b]`: `#` began the link's fragment); a `file:` URI where no relative path reaches it (the
    trace folder on another drive than the page's, on Windows: relpath raised, and the run ended
    in an INTERNALERROR without its reports)."""
    try:
        href = os.path.relpath(trace_path, html_dir) if html_dir is not None else trace_path
    except ValueError:
        return Path(trace_path).absolute().as_uri()
    return quote(Path(href).as_posix())


def test_section(
    nodeid: str,
    outcome: str | None,
    profile: Profile | None,
    baseline: BaselineResult | None,
    trace_path: str | None,
    html_dir: Path | None,
    failure: str | None = None,
    cut_short: bool = False,
    extra_checks: tuple[Check, ...] = (),
    worker: str | None = None,
) -> str:
    """One test's section: why it failed, its numbers, a bar chart of its top ops, its device
    timeline as a stacked bar, its op table with the baseline's columns, and a link to its trace.
    A test without a profile (skipped, or ended before it captured anything) gets its outcome and why."""
    on = f' <span class="worker">on {_e(worker)}</span>' if worker else ""  # `--dist each`: each worker's run
    head = (
        f'<section class="test" data-nodeid="{_e(nodeid)}"><h2>{_e(nodeid)}'
        f'<span class="outcome {_e(outcome)}">{_e(outcome)}</span>{on}</h2>'
    )
    if profile is None:
        return f'{head}{_failure(failure)}<div class="meta">{NO_PROFILE}</div></section>\n'
    parts = [
        head,
        _failure(failure),
        f'<div class="meta">{_e(_meta(profile, baseline, failure, cut_short, extra_checks))}</div>',
        _verdicts(baseline, failure),
        _bars(profile),
        _timeline(profile),
        _ops_table(profile, baseline),
        _ranges_table(profile),
    ]
    if trace_path:
        href = _trace_href(trace_path, html_dir)
        parts.append(f'<p><a href="{_e(href)}">Perfetto / chrome://tracing trace</a> ({_e(trace_path)})</p>')
    return "".join(parts) + "</section>\n"


FAILURE_LINES = 30
NO_PROFILE = "nothing measured: the test was skipped, or ended before its capture recorded anything"


def _failure(message: str | None) -> str:
    """Why the test failed or erred, as pytest said it (its first 30 lines)."""
    if not message:
        return ""
    lines = message.rstrip().splitlines()
    more = f"\n... {len(lines) - FAILURE_LINES} more lines in pytest's output" if len(lines) > FAILURE_LINES else ""
    return f'<pre class="failure">{_e(chr(10).join(lines[:FAILURE_LINES]) + more)}</pre>'


def _verdicts(baseline: BaselineResult | None, failure: str | None) -> str:
    """The verdicts against the baseline that the failure above does not already say (those that
    did not fail the test: inconclusive, improved, environment; the terminal shows the first of
    each kind, the page and --opprof-json all of them), each with its fix."""
    said = failure or ""
    shown = [v for v in baseline.verdicts if v.message not in said] if baseline is not None else []
    items = "".join(f"<li>{_e(_verdict_text(v, baseline))}</li>" for v in shown if baseline is not None)
    return f'<ul class="verdicts">{items}</ul>' if items else ""


def _verdict_text(verdict: Verdict, baseline: BaselineResult) -> str:
    """A verdict's message led by its kind (an op's work change names only the op, as the
    terminal's one-op line does not), its fix, and whether it let the test pass (--opprof-fail-on)."""
    message = verdict.titled
    passing = f"; {NOT_FAILING}" if baseline.lets_pass(verdict) else ""
    return message + passing + (f"; {verdict.fix}" if verdict.fix else "")


def _meta(
    profile: Profile,
    baseline: BaselineResult | None,
    failure: str | None = None,
    cut_short: bool = False,
    extra_checks: tuple[Check, ...] = (),
) -> str:
    """The section's one line of facts: steps, wall, profiler cost, baseline, and the checks not
    ok (the capture's and the run's of the test: contention, threads...)."""
    bits = [count_of(profile.steps, "step"), *([CUT_SHORT] if cut_short else [])]
    if profile.wall_ms is not None and profile.steps:
        bits.append(f"{profile.median_wall_ns / 1e6:.3f} ms/step wall (median)")
    if profile.overhead is not None:
        bits.append(profiler_cost_text(profile.overhead, steps_differ(profile)))
    if baseline is not None:
        bits.append(f"baseline {baseline.status}")
    said = failure or ""  # a trust error the failure above says already is not said twice
    checks = (*profile.checks, *extra_checks)
    bits += [f"{c.status} {c.name}: {c.message}" for c in checks if c.status != "ok" and c.message not in said]
    return "; ".join(bits)


def _bars(profile: Profile) -> str:
    ops = by_shown_time(profile.ops)[:TOP_BARS]
    top = max((o.time_per_step.median for o in ops), default=0)
    if not top:
        return ""
    rows = "".join(
        f'<div><span class="name" title="{_e(o.name)}">{_e(o.name)}</span>'
        f'<span class="bar" style="width:{300 * o.time_per_step.median / top:.0f}px"></span>'
        f"{_ms(o.time_per_step.median)} ms/step</div>"
        for o in ops
    )
    return f'<div class="bars">{rows}</div>'


def _timeline(profile: Profile) -> str:
    """Compute, then the communication and memory work not under compute, then idle: parts of
    the span that do not overlap (communication and memory may overlap each other: rarely)."""
    t = profile.timeline
    if t is None or not t.total.span_ns:
        return ""
    f = t.total
    kinds = [
        ("compute", f.compute_ns),
        ("comm", f.comm_ns - f.compute_comm_overlap_ns),
        ("memory", f.memory_ns - f.compute_memory_overlap_ns),
        ("idle", f.idle_ns),
    ]
    total = sum(ns for _, ns in kinds) or 1
    stack = "".join(
        f'<span class="{k}" style="width:{100 * ns / total:.2f}%" title="{k} {_ms(ns)} ms"></span>'
        for k, ns in kinds
        if ns
    )
    legend = "".join(f'<span><i class="{k}"></i> {k} {_ms(ns)} ms</span>' for k, ns in kinds)
    return f'<div class="stack">{stack}</div><div class="legend">{legend} (span {_ms(f.span_ns)} ms)</div>'


def _ops_table(profile: Profile, baseline: BaselineResult | None) -> str:
    if not profile.ops:
        return ""
    median_wall = profile.median_wall_ns
    compared = baseline is not None and baseline.compared
    head = "<tr><th>op</th><th>calls/step</th><th>ms/step</th><th>self</th><th>min</th><th>time</th><th>of step</th>"
    head += "<th>baseline min</th><th>delta</th><th>verdict</th></tr>"
    rows = []
    for op in by_shown_time(profile.ops):
        per = op.time_per_step
        own = op.self_device_per_step if op.on_device else op.self_cpu_per_step  # as the terminal's `self`
        share = of_step(per.median, median_wall)
        cells = [
            op.name, count_text(op.calls_per_step.median), _ms(per.median), _ms(own.median), _ms(per.min),
            "device" if op.on_device else "cpu", share,
        ]  # fmt: skip
        verdict = ""
        if baseline is not None and compared:
            row = baseline.op_row(op.name, op.calls_per_step.median, per.min / 1e6, op.on_device)
            cells += [
                f"{row.base_min_ms:.3f}" if row.base_min_ms is not None else "new",
                f"{row.delta_pct:+.0f}%" if row.delta_pct is not None else "",
            ]
            verdict = row.verdict
        else:
            cells += ["", ""]
        rows.append(_row(cells, verdict))
    if baseline is not None and compared:  # the baseline's ops that did not run
        for name, row in baseline.removed_rows({op.name for op in profile.ops}):
            cells = [name, "0", "", "", "", "", "", f"{row.base_min_ms or 0.0:.3f}", ""]
            rows.append(_row(cells, row.verdict))
    return f"<table>{head}{''.join(rows)}</table>"


def _row(cells: list[str], verdict: str) -> str:
    return "<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + f'<td class="verdict">{_e(verdict)}</td></tr>'


def _ranges_table(profile: Profile) -> str:
    """The test's ranges (record_function blocks): calls, CPU and device ms per step (medians)."""
    if not profile.ranges:
        return ""
    median_wall = profile.median_wall_ns
    rows = "".join(
        f"<tr><td>{_e(r.name)}</td><td>{count_text(r.calls_per_step.median)}</td><td>{_ms(r.cpu_per_step.median)}</td>"
        f"<td>{_ms(r.device_per_step.median) if r.on_device else '-'}</td>"
        f"<td>{of_step(r.time_per_step.median, median_wall)}</td></tr>"
        for r in by_shown_time(profile.ranges)
    )
    head = (
        "<tr><th>range (record_function)</th><th>calls/step</th><th>cpu ms/step</th><th>device ms/step</th>"
        "<th>of step</th></tr>"
    )
    return f'<table class="ranges">{head}{rows}</table>'


def page_head(device: dict[str, Any], device_key: str | None, tests: int) -> str:
    facts = ", ".join(f"{k}: {v}" for k, v in sorted(device.items()) if v not in (None, "", [], {}))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>pytest-opprof report</title><style>{_STYLE}</style></head><body>\n"
        f"<h1>pytest-opprof: {tests} measured tests</h1>"
        f'<div class="meta">device key {_e(device_key)}; {_e(facts)}</div>'
        '<input id="filter" type="search" placeholder="filter tests by node id (or open the page with #filter=TEXT)">\n'
    )


PAGE_TAIL = f"<script>{_SCRIPT}</script></body></html>\n"


def write_html_report(path: Path, device: dict[str, Any], device_key: str | None, spool: Any) -> None:
    """The page, streamed from the spool's test sections (sorted by node id)."""
    sections: Iterable[str] = spool.html_sections()
    write_output(path, [page_head(device, device_key, spool.count_html), *sections, PAGE_TAIL])
