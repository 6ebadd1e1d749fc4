"""Files we write: one atomic writer and one file-name sanitiser for baselines, traces, reports."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import sys
import unicodedata
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from .errors import UnsafePathError, outside_folder
from .textout import file_bytes, os_bytes, os_text

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+\[\]-]+")
NAME_LIMIT = 100
# Names Windows keeps for devices, in any case and with any extension: a unittest class `Aux`
# gave a trial's baseline `Aux.test_loss.json`, which no checkout on Windows can hold
_WINDOWS_DEVICE = re.compile(r"(?i:con|prn|aux|nul|com[0-9]|lpt[0-9])")


def write_atomic(path: Path, data: str | bytes, inside: Path | None = None) -> None:
    """Write `path` whole or not at all (see write_atomic_chunks)."""
    write_atomic_chunks(path, [data], inside)


def write_atomic_chunks(path: Path, chunks: Iterable[str | bytes], inside: Path | None = None) -> None:
    """Write `path` whole or not at all, piece by piece (a document never whole in memory): a
    uniquely named temporary file beside it, created exclusively (two writers never share one, a
    planted symlink is never followed), then a rename (which replaces a symlink at `path`, never
    what it points to); the temporary file is removed if anything fails. `inside`: refuse a
    `path` whose folder resolves outside that folder (a symlinked folder in a repository must
    not send files elsewhere), checked before any folder is made."""
    tmp = _temporary_beside(path, inside)
    try:
        with open(tmp, "xb") as f:
            _write_chunks(f, chunks)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _temporary_beside(path: Path, inside: Path | None) -> Path:
    """A unique temporary name beside `path`, its folder made, once that folder is checked to lie
    inside `inside` (when given: checked before any folder is made)."""
    if inside is not None:
        folder, root = path.parent.resolve(), inside.resolve()
        if folder != root and root not in folder.parents:
            raise UnsafePathError(outside_folder(path, inside, folder))
    _make_folder(path.parent)
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def write_new(path: Path, data: bytes, inside: Path | None = None) -> None:
    """Write `path` whole, where nothing is: a temporary file beside it, then a hard link in its
    place, which fails (FileExistsError) where anything stands there, a dangling symlink too,
    even one made a moment ago; never replaced (`opprof mv` must lose no baseline). A file
    system without hard links gets an exclusive create instead."""
    tmp = _temporary_beside(path, inside)
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links here (some network and FAT file systems)
            with open(path, "xb") as f:
                f.write(data)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _make_folder(folder: Path) -> None:
    """mkdir -p, saying which file is in the way (mkdir says only "File exists")."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        in_the_way = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
        raise NotADirectoryError(errno.ENOTDIR, f"{in_the_way} is a file, not a folder") from None


def _write_chunks(f: BinaryIO, chunks: Iterable[str | bytes]) -> None:
    for chunk in chunks:
        f.write(file_bytes(chunk) if isinstance(chunk, str) else chunk)


def is_stream(path: Path) -> bool:
    """Whether `path` (symlinks followed) is a pipe, a device or a socket: written into, never
    replaced (/dev/stdout, /dev/null, a FIFO)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def write_output(path: Path, chunks: Iterable[str | bytes]) -> None:
    """A report at a path the user named, written as the shell's `>` would: through this
    process's own descriptor (/dev/stdout, /dev/fd/N), into a pipe or a device as it is (a FIFO,
    /dev/null), a file through a symlink to its target; a file is written whole or not at all
    (write_atomic_chunks), never the symlink replaced by a file."""
    fd = own_descriptor(path)
    if fd is not None:  # /dev/stdout redirected to a log: written at its place in it, not replaced
        for stream in (sys.stdout, sys.stderr):  # what was printed before comes before
            with contextlib.suppress(Exception):
                stream.flush()
        with os.fdopen(os.dup(fd), "wb") as f:
            _write_chunks(f, chunks)
        return
    if is_stream(path):
        with _open_stream(path) as f:
            _write_chunks(f, chunks)
        return
    write_atomic_chunks(output_target(path), chunks)


def output_target(path: Path) -> Path:
    """The file a report at `path` goes to: through symlinks to their target, as the shell's `>`
    (a link to a file not there yet makes it). A link that cannot be followed raises OSError, as
    the shell fails (realpath gave a loop's link itself back, and the report replaced it: a trial)."""
    problem = broken_link(path, dangling_ok=True)
    if problem is not None:
        raise OSError(errno.ELOOP, problem, str(path))
    return Path(os.path.realpath(path))


def broken_link(path: Path, dangling_ok: bool = False) -> str | None:
    """Why a symlink cannot be followed, in an error line's words; None for no symlink, or one
    that leads to something (`dangling_ok`: or to nothing yet)."""
    if not os.path.islink(path):
        return None
    try:
        Path(path).resolve(strict=True)
    except FileNotFoundError:
        return None if dangling_ok else f"a symlink to {os.readlink(path)}, which does not exist"
    except RuntimeError:  # a loop, before Python 3.13
        return f"a symlink loop (to {os.readlink(path)}, which leads back)"
    except OSError as exc:  # a loop from 3.13 on; a link through a file (ENOTDIR)
        if exc.errno == errno.ELOOP:
            return f"a symlink loop (to {os.readlink(path)}, which leads back)"
        return f"a symlink to {os.readlink(path)}, which cannot be followed ({exc.strerror})"
    return None


_OWN_FD = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
_STD_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def own_descriptor(path: Path) -> int | None:
    """The file descriptor of this process that `path` names (/dev/stdout, /dev/fd/3,
    /proc/self/fd/1), or None: what it points to (a log file, a terminal, a pipe) is written
    through that descriptor, never opened anew (which would truncate a log) or replaced."""
    text = os.path.normpath(os.path.abspath(path))
    if text in _STD_NAMES:
        return _STD_NAMES[text]
    found = _OWN_FD.match(text)
    return int(found.group(1)) if found else None


def _open_stream(path: Path) -> BinaryIO:
    """A pipe with no process reading it would block the run at its end for ever (as the shell
    does): refused at once (OSError, so the caller's "could not write" line names it)."""
    if stat.S_ISFIFO(path.stat().st_mode):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise OSError(exc.errno, "no process reads this pipe") from None
            raise
        os.set_blocking(fd, True)
        return os.fdopen(fd, "wb")
    return open(path, "wb")


class NotReadable(ValueError):
    """A path that must not be read whole: a pipe or device (a read would hang or never end) or
    a file over the reader's size limit. Its text says which, for the caller's message."""


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Raises FileNotFoundError,
    IsADirectoryError or another OSError as reading does, and NotReadable before reading a pipe,
    a device or a larger file."""
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(21, "Is a directory", str(path))
    if not stat.S_ISREG(info.st_mode):
        raise NotReadable("not a regular file (a pipe or a device?)")
    if info.st_size > limit:
        raise NotReadable(f"larger than {limit:,} bytes")
    return path.read_bytes()


def safe_name(text: str, device_names: bool = False, keep_end: bool = False) -> str:
    """One path component made file-system safe: readable where it can be, unique always (a
    short hash of the original whenever it had to change or was longer than NAME_LIMIT). With
    `device_names`, for a file's name, a name Windows keeps for a device is changed too (a folder
    of that name cannot be checked out there at all: its files' names are left as they were).
    A long name keeps its start; with `keep_end` (a trace's flat name of a node id) its start and
    its end, the test's name and parameters (a trial's kept only a long folder's name)."""
    raw = os_bytes(text)  # a C locale's reading of a file name: hashed and named as the UTF-8 locale's
    text = os_text(text)
    normal = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    safe = _UNSAFE.sub("_", normal).strip("._") or "_"
    head, dot, rest = safe.partition(".")
    if device_names and _WINDOWS_DEVICE.fullmatch(head):  # `Aux.test_loss.json`: Windows opens AUX, whatever follows
        safe = f"{head}_{dot}{rest}"
    if safe != text or len(safe) > NAME_LIMIT:
        digest = hashlib.sha1(raw).hexdigest()[:8]
        safe = f"{_ends(safe) if keep_end else safe[:NAME_LIMIT]}-{digest}"
    return safe


KEPT_START = 30  # of a long name cut in its middle: the top folder or the file


def _ends(safe: str) -> str:
    """`tests_dddd...test_models.py__test_attn[long-param]`: NAME_LIMIT characters at most."""
    if len(safe) <= NAME_LIMIT:
        return safe
    return f"{safe[:KEPT_START]}...{safe[-(NAME_LIMIT - KEPT_START - 3) :]}"


LFS_POINTER = "version https://git-lfs.github.com/spec/"  # how a Git LFS pointer file opens


def lfs_pointer(head: str | bytes | bytearray) -> bool:
    """Whether a file's first bytes are a Git LFS pointer's: the checkout holds the pointer, not
    the file (LFS not installed, `git lfs pull` not run, a CI checkout without `lfs: true`)."""
    text = head[: len(LFS_POINTER)]
    return (text.decode("latin-1") if isinstance(text, (bytes, bytearray)) else text) == LFS_POINTER
