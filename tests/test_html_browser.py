"""The HTML report in a real headless browser (Debian's chromium): it loads with no console
error, its script runs, each test shows, and its filter works. Skipped where chromium is missing
(`.ci/run` installs it)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from builders import kernel, launch, op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.htmlreport import write_html_report
from pytest_opprof.report import TestResult
from pytest_opprof.runfiles import ReportSpool

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium (.ci/run does)")


def load(url: str) -> tuple[str, list[str]]:
    """The page's DOM after its scripts ran, and the console lines chromium logged."""
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return proc.stdout, console


def gpu_profile():
    events = []
    for n, t0 in ((1, 0), (2, 100)):
        events += [
            step(n, t0, 100),
            op("aten::mm", t0 + 1, 10),
            launch(t0 + 2, corr=n),
            kernel("gemm <x>", t0 + 20, 30, corr=n),
        ]
    return analyze(events)


@pytest.fixture
def page(tmp_path):
    spool = ReportSpool(json=False, html=True)
    for nodeid, outcome in (("tests/test_a.py::test_mm[<b>]", "passed"), ("tests/test_b.py::test_other", "failed")):
        result = TestResult(nodeid)
        result.profile, result.outcome = gpu_profile(), outcome
        spool.add(result.to_record(10, with_profile=False, html_dir=tmp_path))
    path = tmp_path / "report.html"
    write_html_report(path, {"gpu_name": "NVIDIA H200"}, "nvidia-h200", spool)
    spool.close()
    return path


def test_the_page_loads_without_console_errors_and_shows_every_test(page):
    """The page loads in chromium with no console line, its script runs, each test shows and markup
    in names is escaped."""
    dom, console = load(page.as_uri())
    assert console == []
    assert 'data-ready="1"' in dom  # its script ran to the end
    assert dom.count('class="test"') == 2 and "test_mm[&lt;b&gt;]" in dom  # escaped, not markup
    assert "aten::mm" in dom and 'class="stack"' in dom and "compute 0.060 ms" in dom


def test_the_filter_hides_the_other_tests(page):
    """Opened with #filter=TEXT, the page hides the tests whose node id does not contain TEXT."""
    dom, console = load(page.as_uri() + "#filter=test_other")
    assert console == []
    sections = dom.split('<section class="test"')[1:]
    hidden = {s.split('data-nodeid="')[1].split('"')[0]: " hidden" in s.split(">")[0] for s in sections}
    assert hidden == {"tests/test_a.py::test_mm[&lt;b&gt;]": True, "tests/test_b.py::test_other": False}


def test_a_filter_that_is_no_valid_escape_is_taken_as_typed(page):
    """`#filter=%` (or `50%`) is no valid URI escape: the filter takes the text as typed (the page
    threw `URIError: URI malformed` and its script stopped)."""
    dom, console = load(page.as_uri() + "#filter=test_o%")
    assert console == [] and 'data-ready="1"' in dom
    assert dom.count(" hidden") == 2  # no node id holds "test_o%"


def test_a_script_error_would_be_caught(tmp_path):
    """The check itself can fail: a page with a script error shows in the console lines."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><body><script>undefinedFn();</script></body></html>")
    _, console = load(bad.as_uri())
    assert any("Uncaught ReferenceError" in line for line in console)
