"""Text as the OS gives and takes it: a C locale's file names, and output to a stream whose
encoding lacks a character (a trial: `PYTHONIOENCODING=ascii opprof compare` printed nothing and
exited 2 for the `…` of a cut op name; a C locale's `test_é.py` stopped the run with a traceback)."""

from __future__ import annotations

import io

from pytest_opprof.files import safe_name
from pytest_opprof.textout import file_bytes, fit_stream, os_bytes, os_text

C_LOCALE_NAME = "test_\udcc3\udca9.py"  # how Python reads the file test_é.py under LC_ALL=C PYTHONUTF8=0
LATIN1_NAME = "test_\udce9.py"  # a file whose name is latin-1's é, in any locale: no UTF-8


def stream(encoding: str, errors: str = "strict") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors=errors)


def test_a_c_locales_file_name_is_the_name_it_is():
    """The file's bytes, read as UTF-8; bytes that are no UTF-8 stay escapes, each name its own."""
    assert os_bytes(C_LOCALE_NAME) == "test_é.py".encode()
    assert os_text(C_LOCALE_NAME) == "test_é.py"
    assert os_text("tests/test_é.py::test_x[µ]") == "tests/test_é.py::test_x[µ]"  # real characters stay
    assert os_text(LATIN1_NAME) == "test_\\xe9.py"
    assert os_text("test_\udce8.py") == "test_\\xe8.py"  # a review: both read U+FFFD, one baseline for two files
    assert os_bytes("a\ud800b") == b"a\xed\xa0\x80b"  # a surrogate no file name gives: kept, no error


def test_a_file_name_read_under_a_c_locale_names_the_same_baseline_file():
    """The same file in both locales, so a baseline recorded under one is read under the other;
    two latin-1 names, two files."""
    assert safe_name(C_LOCALE_NAME) == safe_name("test_é.py")
    assert safe_name("test_é.py").startswith("test_e.py-")
    assert safe_name(LATIN1_NAME) != safe_name("test_\udce8.py")


def test_files_hold_valid_utf8_whatever_the_node_id():
    """A review's CSV report of a latin-1 file name was no UTF-8 (its raw byte written)."""
    assert file_bytes(C_LOCALE_NAME) == "test_é.py".encode()
    assert file_bytes(LATIN1_NAME) == b"test_\\xe9.py"
    assert file_bytes("a\ud800b") == b"a\\xed\\xa0\\x80b"
    assert file_bytes("plain …") == "plain …".encode()


def test_text_fits_a_stream_that_lacks_its_characters():
    """`...` for the tables' `…` only where the stream lacks it, backslash escapes for the rest."""
    cut = "aten::" + "x" * 63 + "\u2026  1  15.9"
    assert fit_stream(cut, stream("utf-8")) == cut
    assert fit_stream(cut, stream("ascii")) == "aten::" + "x" * 63 + "...  1  15.9"
    assert fit_stream("tests/test_é.py::test_x", stream("ascii")) == "tests/test_\\xe9.py::test_x"
    assert fit_stream("test_é.py \u2026", stream("latin-1")) == "test_é.py ..."  # latin-1 has é, not …
    assert fit_stream("前向 µs", stream("latin-1")) == "\\u524d\\u5411 µs"
    assert fit_stream(f"{LATIN1_NAME} \u2026", stream("utf-8")) == "test_\\udce9.py \u2026"  # UTF-8 has …
    assert fit_stream("x", io.StringIO()) == "x"  # a stream naming no encoding: UTF-8
    assert fit_stream("x", object()) == "x"


def test_a_c_locales_stream_gets_the_bytes_of_its_file_names():
    """A C locale's stdout (ASCII, `surrogateescape`) writes a file name's own bytes, as Python's
    own output of such a name does: the command printed with it can be pasted there."""
    out = stream("ascii", "surrogateescape")
    text = fit_stream("pytest 'tests/test_é.py::test_x' \u2026", out)
    out.write(text)
    out.flush()
    assert out.buffer.getvalue() == "pytest 'tests/test_é.py::test_x' \u2026".encode()
    assert fit_stream(C_LOCALE_NAME, out) == C_LOCALE_NAME


def test_a_suggested_command_quotes_a_test_id_as_the_users_shell_reads_it(monkeypatch):
    """POSIX shells get shlex's quotes; Windows gets double quotes, which cmd.exe and PowerShell
    both read (cmd.exe passed `'tests/test_m.py::test_a[x y]'` on with its quotes, and pytest
    said no such file: a cross-platform review), and a plain id stays bare."""
    from pytest_opprof import errors, textout

    spaced = "tests/test_m.py::test_a[x y]"
    assert textout.shell_quote(spaced) == "'tests/test_m.py::test_a[x y]'"
    assert textout.shell_quote("tests/test_m.py::test_a[1-2]") == "'tests/test_m.py::test_a[1-2]'"  # shlex: `[`
    monkeypatch.setattr(textout.os, "name", "nt")
    assert textout.shell_quote(spaced) == '"tests/test_m.py::test_a[x y]"'
    assert textout.shell_quote("tests/test_m.py::test_a[1-2]") == "tests/test_m.py::test_a[1-2]"
    assert textout.shell_quote('t.py::test_a[say "hi"]') == '"t.py::test_a[say \\"hi\\"]"'
    assert textout.shell_quote("") == '""'
    line = errors.record_if_intended(spaced)
    assert 'pytest --opprof-update-baseline "tests/test_m.py::test_a[x y]" (and commit' in line


def test_a_long_name_cut_for_a_trace_keeps_its_start_and_its_end():
    """A trace's flat name of a long node id: its first and last characters, the test's name and its hash."""
    from pytest_opprof.files import NAME_LIMIT

    nodeid = "tests/" + "d" * 150 + "/test_m.py::test_attention[float16-causal]"
    cut = safe_name(nodeid, keep_end=True)
    assert (
        cut.startswith("tests_dddd")
        and cut.endswith("d_test_m.py_test_attention[float16-causal]-" + cut[-8:])
        and "d...d" in cut
    )
    assert len(cut) == NAME_LIMIT + 9 and cut[-8:] == safe_name(nodeid)[-8:]  # the same hash
    assert safe_name("test_m.py::test_x", keep_end=True) == safe_name("test_m.py::test_x")
