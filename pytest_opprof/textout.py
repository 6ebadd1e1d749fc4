"""Text as the operating system gives and takes it: a name Python read under a C locale without
UTF-8 mode (a file's UTF-8 bytes held as lone surrogates), and output to a stream that cannot
encode every character (`PYTHONIOENCODING=ascii`, a latin-1 locale, an old Windows console)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from typing import Any

ELLIPSIS = "\u2026"  # where the tables and error lines cut a long name (tables.short, errors._cut)
_SURROGATE = re.compile("[\ud800-\udfff]")  # a regex: every file we write passes by, traces of megabytes


def os_bytes(text: str) -> bytes:
    """The bytes a name came from: a C locale's lone surrogates back to the file's own bytes."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name gave: kept, so that two such names still differ
        return text.encode("utf-8", "surrogatepass")


def file_bytes(text: str) -> bytes:
    """Text as the files we write hold it: valid UTF-8 always, a node id as os_text gives it."""
    return os_text(text).encode("utf-8")


def os_text(text: str) -> str:
    """A name as the characters it is in every locale: `test_\\udcc3\\udca9.py` (a C locale's
    reading of test_é.py) -> `test_é.py`, so that its baseline is named and matched alike there.
    Bytes that are no UTF-8 (a latin-1 file name, `test_\\xe9.py`) stay as backslash escapes,
    each name its own (a review: decoded as U+FFFD, two such files shared one baseline)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return os_bytes(text).decode("utf-8", "backslashreplace")


def fit_stream(text: str, stream: Any) -> str:
    """`text` as `stream` can write it: as it is where the stream's encoding holds it; through a C
    locale's stream (errors `surrogateescape`) as its UTF-8 bytes, as the file names it prints
    are; else with `...` for the tables' ellipsis and backslash escapes for other characters
    (`\\xe9`), as Python writes them on stderr, never an error that loses the whole output."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "strict"
    try:
        text.encode(encoding, errors)
        return text
    except (UnicodeError, LookupError):
        pass
    if errors == "surrogateescape":
        try:
            return os_bytes(text).decode(encoding, "surrogateescape")
        except (UnicodeError, LookupError):
            pass
    try:
        ELLIPSIS.encode(encoding)
    except (UnicodeError, LookupError):
        text = text.replace(ELLIPSIS, "...")
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    except LookupError:
        return text.encode("ascii", "backslashreplace").decode("ascii")


MIN_COLUMNS = 40  # a width below it is a terminal that says none: 80, as pytest reads it


def terminal_columns(stream: Any = None) -> int | None:
    """The width of the interactive terminal `stream` (stdout) writes to, as pytest reads it
    (`COLUMNS`, else the terminal's own); None for a file, a pipe or a CI log, whose readers
    scroll or wrap and want names whole."""
    stream = sys.stdout if stream is None else stream
    try:
        interactive = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # a replaced stream without one, or closed
        return None
    if not interactive:
        return None
    columns = shutil.get_terminal_size(fallback=(80, 24)).columns
    return columns if columns >= MIN_COLUMNS else 80


_CMD_PLAIN = re.compile(r"[^\s\"'&|<>^()%!;,`$]+")  # what cmd.exe and PowerShell read as one plain word


def shell_quote(word: str) -> str:
    """A word of a command a message suggests, quoted as the user's shell reads it back: POSIX
    quoting where there is a POSIX shell; on Windows, double quotes (cmd.exe passes '...' on as
    it is: a review's suggested `pytest --opprof-update-baseline 'tests/test_m.py::test_a[x y]'`
    was told the file did not exist; PowerShell reads both)."""
    if os.name != "nt":
        return shlex.quote(word)
    if _CMD_PLAIN.fullmatch(word):
        return word
    return '"' + word.replace('"', '\\"') + '"'
