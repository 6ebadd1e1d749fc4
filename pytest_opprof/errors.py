"""The exception family users see, and every message a person reads, built in one place.

Tests import these formatters so they assert the real text.
"""

from __future__ import annotations

from collections.abc import Iterable


class OpprofError(Exception):
    """A problem a user can fix: bad input, a bad file, a profiler in the way."""


class TraceError(OpprofError):
    """A trace file that cannot be read as a Kineto/Chrome trace."""


class CaptureError(OpprofError):
    """A live capture that cannot start or finish."""


def bad_trace(path: object, reason: str) -> str:
    return f"{path}: {reason}; export it again with torch.profiler (export_chrome_trace)"


def trace_not_found(path: object) -> str:
    return f"{path}: no such file; give the path of a .json or .json.gz trace"


def profiler_already_running() -> str:
    return (
        "a torch profiler is already running; opprof cannot start its own inside it: "
        "stop the other profiler, or pass its result to pytest_opprof.from_profiler()"
    )


def profiler_not_finished() -> str:
    return (
        "from_profiler() needs a finished torch.profiler.profile: "
        "call it after the `with profile(...)` block (or after prof.stop())"
    )


def bad_argument(name: str, value: object, expected: str) -> str:
    return f"{name}={value!r}: expected {expected}"


def closest_names(wanted: str, seen: Iterable[str], limit: int = 3) -> list[str]:
    """Names among `seen` that look most like `wanted` (for 'did you mean' hints)."""
    import difflib

    names = sorted(set(seen))
    close = difflib.get_close_matches(wanted, names, n=limit, cutoff=0.4)
    if not close:
        # Fall back to a shared suffix such as "mm" in "aten::bmm" vs "aten::addmm".
        tail = wanted.rsplit("::", 1)[-1].strip("*?[]")
        close = [n for n in names if tail and tail in n][:limit]
    return close
