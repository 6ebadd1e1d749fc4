"""Unit tests of option parsing: precedence is the plugin's, values and messages are here."""

from __future__ import annotations

import pytest

from pytest_opprof.settings import OPTIONS, Settings, SettingsError, parse_settings


def lookup_from(values: dict[str, tuple[object, str]]):
    return lambda option: values.get(option.field)


def test_defaults_when_nothing_is_set():
    """No value anywhere gives the documented defaults."""
    assert parse_settings(lookup_from({})) == Settings(
        enabled=False, top=10, json_path=None, trace_dir=None, trace="failed"
    )


@pytest.mark.parametrize(
    ("field", "raw", "parsed"),
    [
        ("enabled", True, True),
        ("enabled", "yes", True),
        ("enabled", "0", False),
        ("top", "3", 3),
        ("json_path", " out.json ", "out.json"),
        ("trace", "ALL", "all"),
    ],
)
def test_values_parse(field, raw, parsed):
    """Each option parses its text form."""
    assert getattr(parse_settings(lookup_from({field: (raw, "pytest.ini")})), field) == parsed


def test_bad_value_names_flag_value_and_source():
    """A bad value raises one line naming the flag, the value, what was expected and the source."""
    with pytest.raises(SettingsError) as info:
        parse_settings(lookup_from({"top": ("fast", "pytest.ini")}))
    assert str(info.value) == "--opprof-top: 'fast' is not a whole number >= 1 (from pytest.ini)"


def test_every_option_has_flag_and_ini_twin():
    """Flags are --opprof-*, ini keys opprof_*, spelled alike."""
    for option in OPTIONS:
        assert option.flag.startswith("--opprof")
        assert option.ini == option.flag.lstrip("-").replace("-", "_")
