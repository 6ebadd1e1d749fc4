"""Tables fit an interactive terminal's width by cutting their name columns; a CI log, a file or
a pipe gets the names whole."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from baseline_docs import doc, profile

from pytest_opprof import cli
from pytest_opprof.baseline import write_baseline
from pytest_opprof.tables import NAME_FLOOR, fitted_to, grid, markdown_tables
from pytest_opprof.textout import terminal_columns

LONG = "aten::_scaled_dot_product_flash_attention_for_cpu"
HEADERS = ["op", "calls/step", "ms/step", "time"]
ROWS = [[LONG, "1", "0.058", "cpu"], ["aten::add", "6", "0.013", "cpu"]]


def widest(text: str) -> int:
    return max(len(line) for line in text.split("\n"))


def test_a_table_wider_than_the_terminal_cuts_its_long_names_to_fit():
    """Its name column is cut with `…` to the terminal's width exactly; short names stay as they are."""
    whole = grid(ROWS, HEADERS)
    with fitted_to(60):
        fitted = grid(ROWS, HEADERS)
    assert widest(whole) > 60 and widest(fitted) == 60
    assert "aten::_scaled_dot_product_…  1" in fitted  # cut to fit exactly, the short name as it is
    assert "aten::add " in fitted and "0.058" in fitted


def test_a_table_that_fits_or_cannot_fit_keeps_its_names_whole():
    """Nothing to cut where it fits; nothing cut where cutting to the floor would not stop the wrap."""
    with fitted_to(200):
        assert grid(ROWS, HEADERS) == grid(ROWS, HEADERS, names=())
    with fitted_to(30):  # the numbers alone take more than 30 - NAME_FLOOR: cutting would not stop the wrap
        assert LONG in grid(ROWS, HEADERS)


def test_names_are_cut_no_narrower_than_the_floor():
    """NAME_FLOOR characters at least, the ellipsis among them."""
    rows = [[LONG, "x" * 40]]
    with fitted_to(NAME_FLOOR + 2 + 40):
        text = grid(rows, ["op", "message"])
    assert text.split("\n")[2] == LONG[: NAME_FLOOR - 1] + "…  " + "x" * 40


def test_only_the_name_columns_are_cut_the_widest_first():
    """Of a kernel table's two name columns the wider is cut first; a check's message never."""
    kernel, launcher = "void gemm_kernel<float, 128, 64, 8, true>(Params)", "aten::_addmm_activation"
    rows = [[kernel, launcher, "3", "0.100"]]
    headers = ["kernel", "launched by", "calls", "device ms"]
    with fitted_to(widest(grid(rows, headers)) - 10):
        text = grid(rows, headers, names=(0, 1))
    assert launcher in text and kernel[: len(kernel) - 11] + "…  " in text  # the kernel, wider, is cut first
    with fitted_to(60):
        message = grid([["warning", "events", "x" * 70]], ["check", "name", "message"], names=())
    assert "x" * 70 in message  # a check's message is never cut: its fix is in it


def test_names_that_would_read_alike_are_cut_in_the_middle_or_left_whole():
    """Cut at their end, the flash and efficient attention ops both read `aten::_scaled_dot_pr…` (a
    review's): cut in the middle they read apart; names alike either way, or with wide characters
    (two columns each on a terminal), leave the table whole."""
    efficient = "aten::_scaled_dot_product_efficient_attention"
    with fitted_to(60):
        text = grid([*ROWS, [efficient, "1", "0.020", "cpu"]], HEADERS)
    assert "aten::_scaled…ntion_for_cpu  1" in text and "aten::_scaled…ent_attention  1" in text
    alike = [[LONG + "_x", "1"], [LONG + "_y", "1"], [LONG[:-1] + "v_x", "1"]]
    with fitted_to(30):
        assert grid(alike, ["op", "calls/step"]) == grid(alike, ["op", "calls/step"], names=())
        assert "範囲" * 20 in grid([["範囲" * 20, "1"]], ["range", "calls"])


def test_markdown_tables_are_never_cut():
    """--markdown is for a page that scrolls: names whole."""
    with fitted_to(40), markdown_tables():
        assert "flash\\_attention\\_for\\_cpu" in grid(ROWS, HEADERS)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_width_is_read_where_output_goes_to_a_terminal(monkeypatch):
    """COLUMNS where stdout is a terminal, as pytest reads it; None for a file, a pipe or a stream without isatty."""
    monkeypatch.setenv("COLUMNS", "97")
    assert terminal_columns(Terminal()) == 97
    assert terminal_columns(io.StringIO()) is None  # a file, a pipe, a CI log
    assert terminal_columns(object()) is None  # a replaced stream without isatty
    monkeypatch.setenv("COLUMNS", "12")
    assert terminal_columns(Terminal()) == 80  # as pytest reads a terminal too narrow to be one


def baseline_with_long_names(tmp_path: Path) -> Path:
    """A baseline file as the plugin writes one, of a step with an op of a long name."""
    path = tmp_path / "test_attn.json"
    write_baseline(path, doc(profile(extra_ops=(LONG,))))
    return path


def test_opprof_show_fits_the_terminal_and_writes_names_whole_to_a_pipe(monkeypatch, capsys, tmp_path):
    """The command's tables through its real entry point: cut on a terminal, whole into a pipe."""
    path = baseline_with_long_names(tmp_path)
    assert cli.main(["show", str(path)]) == 0
    piped = capsys.readouterr().out
    assert LONG in piped and widest(piped) > 80
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["show", str(path)]) == 0
    shown = sys.stdout.getvalue()
    table = [line for line in shown.split("\n") if line.startswith(("op ", "---", "aten::"))]
    assert table and max(map(len, table)) <= 80 and LONG not in shown and LONG[:15] in shown


ATTENTION_TEST = """
import torch
import torch.nn.functional as F

def test_attn(opprof):
    q = torch.randn(1, 2, 8, 8)
    opprof.run(lambda: F.scaled_dot_product_attention(q, q, q), warmup=1, steps=3)
"""


def on_terminal(args: list[str], cwd: Path, columns: int) -> str:
    """What `python -m pytest ARGS` prints to a terminal (a pseudo-terminal) `columns` wide."""
    import pty

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env["COLUMNS"] = str(columns)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=no", *args],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(master, chunks), daemon=True)
    reader.start()
    try:
        proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
        reader.join(timeout=30)
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def _drain(fd: int, chunks: list[bytes]) -> None:
    """Reads the terminal until the child has closed it (EIO), or it ends."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        chunks.append(chunk)


def op_table(text: str) -> list[str]:
    """The op table's lines: its header, its rule and its rows of aten ops."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("op "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(("---", "aten::"))), None)
    return lines[start:end]


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal: POSIX")
@pytest.mark.parametrize("extra", [[], ["-n", "1"]], ids=["in-process", "xdist worker"])
def test_the_summary_fits_the_terminal_it_prints_to(pytester, extra):
    """Under xdist the worker makes the tables, for the controller's terminal."""
    pytester.makepyfile(test_attn=ATTENTION_TEST)
    table = op_table(on_terminal(["-q", "--opprof", *extra], pytester.path, 80))
    assert max(map(len, table)) <= 80
    assert any(line.startswith("aten::scaled_dot_pro") and "…" in line for line in table)


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal: POSIX")
def test_a_ci_log_and_a_very_verbose_run_keep_the_names_whole(pytester):
    """Not a terminal (a CI log), or -vv on one, as pytest keeps its own lines whole there."""
    pytester.makepyfile(test_attn=ATTENTION_TEST)
    piped = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--opprof")
    assert any(line.startswith("aten::scaled_dot_product_attention ") for line in op_table(piped.stdout.str()))
    verbose = op_table(on_terminal(["-vv", "--opprof"], pytester.path, 80))
    assert any(line.startswith("aten::scaled_dot_product_attention ") for line in verbose)
