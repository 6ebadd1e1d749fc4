"""Run settings: every option's parser, default and documentation, in one table. No pytest here.

The plugin reads each option through one helper (CLI > ini > default) and hands the raw value
with its source to `parse_settings`, which validates all of them when pytest starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import OpprofError


class SettingsError(OpprofError):
    """A bad option value; the plugin turns it into a pytest UsageError."""


TRACE_MODES = ("failed", "all")


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated run settings."""

    enabled: bool = False
    top: int = 10
    json_path: str | None = None
    trace_dir: str | None = None
    trace: str = "failed"


def bad_option(flag: str, value: object, expected: str, source: str) -> str:
    return f"{flag}: {value!r} is not {expected} (from {source})"


def _parse_bool(text: object) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("true or false")


def _parse_positive_int(text: object) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("a whole number >= 1") from None
    if value < 1:
        raise ValueError("a whole number >= 1")
    return value


def _parse_path(text: object) -> str:
    value = str(text).strip()
    if not value:
        raise ValueError("a path")
    return value


def _parse_trace_mode(text: object) -> str:
    value = str(text).strip().lower()
    if value not in TRACE_MODES:
        raise ValueError(" or ".join(repr(m) for m in TRACE_MODES))
    return value


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its flag, ini key, parser, and help text."""

    field: str
    flag: str
    ini: str
    parse: Callable[[object], Any]
    help: str
    metavar: str | None = None  # None: a switch (store_true)
    choices: tuple[str, ...] | None = None


OPTIONS: tuple[Option, ...] = (
    Option("enabled", "--opprof", "opprof", _parse_bool, "measure tests that use the opprof fixture or marker"),
    Option("top", "--opprof-top", "opprof_top", _parse_positive_int, "operators per test in the report (default 10)", "N"),
    Option(
        "json_path", "--opprof-json", "opprof_json", _parse_path, "write the run's measurements as JSON to PATH", "PATH"
    ),
    Option(
        "trace_dir",
        "--opprof-trace-dir",
        "opprof_trace_dir",
        _parse_path,
        "write a Chrome/Perfetto trace per failing test (see --opprof-trace) under DIR",
        "DIR",
    ),
    Option(
        "trace",
        "--opprof-trace",
        "opprof_trace",
        _parse_trace_mode,
        "which tests get a trace in --opprof-trace-dir: failed (default) or all",
        "WHEN",
        TRACE_MODES,
    ),
)


def parse_settings(lookup: Callable[[Option], tuple[object, str] | None]) -> Settings:
    """Build Settings from raw values. `lookup(option)` gives (raw value, source) or None for the
    default; a bad value raises SettingsError naming the flag, the value and its source."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        found = lookup(option)
        if found is None:
            continue
        raw, source = found
        try:
            values[option.field] = option.parse(raw)
        except ValueError as exc:
            raise SettingsError(bad_option(option.flag, raw, str(exc), source)) from None
    return Settings(**values)
