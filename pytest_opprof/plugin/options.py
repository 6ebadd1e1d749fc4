"""The plugin's options as pytest sees them: registered as flags and ini keys, read with where
each value came from (the command line, PYTEST_ADDOPTS, addopts, the ini file, `-o`), and the
checks of paths and ini keys made before any test runs. The values' parsers are settings.py's."""

from __future__ import annotations

import ast
import os
import shlex
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ..errors import toml_list_fix, unknown_ini_key
from ..layout import baseline_root, shown_path
from ..settings import (
    COMMA_LIST_PARSERS,
    OPTIONS,
    UPDATE_MODES,
    Option,
    Settings,
    bad_option,
    baseline_dir_problem,
    output_paths_problem,
)


def add_options(parser: pytest.Parser) -> None:
    """Every option of settings.OPTIONS as a flag and an ini key."""
    group = parser.getgroup("opprof", "operator-level performance assertions (pytest-opprof)")
    for option in OPTIONS:
        help_text = f"{option.help} [ini: {option.ini}]".replace("%", "%%")  # argparse formats help
        kind: dict[str, Any] = {"action": "store_true"} if option.metavar is None else {"metavar": option.metavar}
        if option.const is not None:
            kind["nargs"], kind["const"] = "?", option.const
        group.addoption(option.flag, default=None, dest=dest(option), help=help_text, **kind)
        add_ini(parser, option)


def add_ini(parser: pytest.Parser, option: Option) -> None:
    """pytest 9's native `[tool.pytest]` table checks types strictly: a key registered as a
    string refuses `opprof_top = 5`. Where pytest takes a union type (9.2+), a key whose value is
    a number or a switch is `str | <that type>`, and our parser judges the value and names the
    fix; ini files still give strings (str comes first). Older pytest: a string key, as before."""
    if option.native is not None:
        try:
            parser.addini(option.ini, help=option.help, type=str | option.native | _ALSO[option.native], default=None)  # type: ignore[arg-type]
            return
        except (ValueError, TypeError, AssertionError):  # this pytest has no union types
            pass
    parser.addini(option.ini, help=option.help, default=None)


# The TOML type a key of that native type is also given, for our parser to judge with the key's
# file and fix: a whole number written 5.0, a switch written 1 (an audit's `opprof_top = 5.0` read
# pytest's `expects one of string | int, got float`)
_ALSO: dict[type, type] = {int: float, bool: int, float: int}


def dest(option: Option) -> str:
    return option.flag.lstrip("-").replace("-", "_")


SWITCHES = ("enabled", "update_baseline")  # the flags that turn measuring on


def given(config: pytest.Config, option: Option) -> bool:
    """Given on the command line itself (an ini value, or a flag in its addopts or PYTEST_ADDOPTS,
    is a standing choice for --opprof runs: no line in every plain run)."""
    return config.getoption(dest(option)) is not None and _flag_source(config, option.flag) == "command line"


def read_option(config: pytest.Config, option: Option) -> tuple[object, str] | None:
    """The one helper every option goes through: CLI > ini > default."""
    value = config.getoption(dest(option))
    if value is not None:
        return value, _flag_source(config, option.flag)
    return _read_ini(config, option)


def _read_ini(config: pytest.Config, option: Option) -> tuple[object, str] | None:
    """An option's value in the ini file or an `-o` override, and which; None where unset."""
    with warnings.catch_warnings():
        # a TOML list under a string key (`opprof_top = [5]` in [tool.pytest.ini_options]): pytest
        # deprecates it with a warning that -W error made an INTERNALERROR; our parser judges it
        warnings.simplefilter("ignore", pytest.PytestDeprecationWarning)
        try:
            raw = config.getini(option.ini)
        except pytest.UsageError as exc:  # pytest 9's [tool.pytest] refused the value's TOML type
            raise pytest.UsageError(f"{exc}{_toml_fix(option, str(exc))}") from None
    overrides = config.getoption("override_ini", None) or []
    overridden = any(o.split("=", 1)[0] == option.ini for o in overrides)
    if raw is None or raw == [] or (raw == "" and not overridden and not _in_ini_file(config, option.ini)):
        return None  # unset; an empty value written down is judged as on the command line (`fail_on =`)
    if overridden:
        return raw, f"-o {option.ini}"
    return raw, config.inipath.name if config.inipath else "ini file"


def refuse_shadowed_ini(config: pytest.Config) -> None:
    """An ini value that a flag overrides in this run is judged all the same: it holds in the next
    run without the flag (a contract trial's `opprof_top = many` passed beside `--opprof-top=3`);
    so is a flag's value in addopts or PYTEST_ADDOPTS that a later one overrides."""
    for option in OPTIONS:
        if config.getoption(dest(option)) is None:
            continue
        found = _read_ini(config, option)
        if found is None:
            continue
        raw, source = found
        try:
            option.parse(raw)
        except ValueError as exc:
            overridden = f"{option.ini} in {source}, which the command line overrides in this run only"
            raise pytest.UsageError(bad_option(option.flag, raw, str(exc), overridden)) from None
    standing = _standing_args(config)
    for option in OPTIONS:
        for raw, source in _standing_values(config, option, standing):
            try:
                option.parse(raw)
            except ValueError as exc:
                overridden = f"{source}, which a later {option.flag} overrides"
                raise pytest.UsageError(bad_option(option.flag, raw, str(exc), overridden)) from None


def _standing_args(config: pytest.Config) -> tuple[tuple[str, list[str]], ...]:
    """The arguments pytest adds before the command line's, with where they are written, in the
    order pytest reads them (the ini file's addopts, then PYTEST_ADDOPTS); read once per run."""
    standing = config.stash.get(_STANDING, None)
    if standing is None:
        standing = config.stash[_STANDING] = (
            (_addopts_source(config), list(config.getini("addopts"))),
            ("PYTEST_ADDOPTS", shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))),
        )
    return standing


_STANDING = pytest.StashKey[tuple[tuple[str, list[str]], ...]]()


def _standing_values(
    config: pytest.Config, option: Option, standing: tuple[tuple[str, list[str]], ...]
) -> list[tuple[str, str]]:
    """A flag's values in PYTEST_ADDOPTS and the ini file's addopts, with where each is: judged as
    the one that holds is, for the run without the later flag (a trial's `addopts = --opprof-top
    many` passed while its command line gave --opprof-top). `--flag=value` and `--flag value`; a
    flag whose value is optional (--opprof-update-baseline) takes the next argument as argparse
    does, unless it starts with `-` or names a test path (give_back_a_path_before_the_conftests)."""
    if option.metavar is None:
        return []
    found = []
    for source, args in standing:
        for arg, after in zip(args, [*args[1:], None]):
            if arg.startswith(f"{option.flag}="):
                found.append((arg.split("=", 1)[1], source))
            elif arg == option.flag and after is not None and _takes(option, config, after):
                found.append((after, source))
    return found


def _takes(option: Option, config: pytest.Config, after: str) -> bool:
    """Whether argparse reads `after` as the value of `option` given before it."""
    return option.const is None or not (after.startswith("-") or _names_a_path(config, after))


def _addopts_source(config: pytest.Config) -> str:
    """Where `addopts` comes from: `-o addopts=...`, else the ini file."""
    overrides = config.getoption("override_ini", None) or []
    if any(o.split("=", 1)[0].strip() == "addopts" for o in overrides):
        return "-o addopts"
    return f"addopts in {config.inipath.name if config.inipath else 'the ini file'}"


def _toml_fix(option: Option, refusal: str) -> str:
    """What to write instead of a TOML list pytest refused, for a key that takes a comma list."""
    if option.parse not in COMMA_LIST_PARSERS or "got list: " not in refusal:
        return ""
    try:
        items = ast.literal_eval(refusal.split("got list: ", 1)[1].strip())
    except (ValueError, SyntaxError):
        items = None
    return toml_list_fix(option.ini, [str(i) for i in items] if isinstance(items, list) else None)


def _in_ini_file(config: pytest.Config, name: str) -> bool:
    """Whether the ini file sets `name` (to an empty value, say: getini gives "" either way on an
    older pytest). pytest 9 keeps the values in `_inicfg`; before, `inicfg` was not deprecated."""
    values = config.__dict__.get("_inicfg")
    if values is None:
        values = config.__dict__.get("inicfg") or {}
    return name in values


def _flag_source(config: pytest.Config, flag: str) -> str:
    """Where the value pytest parsed for a flag came from: the command line, or what pytest adds
    before it (an ini file's addopts, PYTEST_ADDOPTS): a standing choice the person running does
    not see. The last argument naming the flag holds, in pytest's order, up to a -h/--help, where
    pytest stops reading (`pytest --help --opprof-top 5` holds addopts' value)."""
    source = "command line"
    for where, args in (*_standing_args(config), ("command line", list(config.invocation_params.args))):
        for arg in args:
            if arg in ("-h", "--help"):
                return source
            if _names((arg,), flag):
                source = where
    return source


def _names(args: Iterable[str], flag: str) -> bool:
    """Whether the arguments give `flag` (`--opprof-trace` is not `--opprof-trace-dir`)."""
    return any(a == flag or a.startswith(f"{flag}=") for a in args)


def give_back_a_path_before_the_conftests(config: pytest.Config, args: list[str]) -> None:
    """`pytest --opprof-update-baseline tests/test_x.py`, seen before pytest loads the initial
    conftests: the path goes back to the arguments (the conftests of tests/ are loaded, not
    those of the default test paths), and the flag means "changed"."""
    namespace = config.known_args_namespace
    value = getattr(namespace, "opprof_update_baseline", None)
    if not _names_a_path(config, value):
        return
    for i, arg in enumerate(args[:-1]):
        if arg == "--opprof-update-baseline" and args[i + 1] == value:
            args[i] = "--opprof-update-baseline=changed"  # pytest parses these args again
            namespace.opprof_update_baseline = "changed"
            namespace.file_or_dir = [*(namespace.file_or_dir or []), value]
            return


def _names_a_path(config: pytest.Config, value: object) -> bool:
    """A value of --opprof-update-baseline that is no mode but an existing test path."""
    if not isinstance(value, str) or value.strip().lower() in (*UPDATE_MODES, "1", "0", "true", "false", "yes", "no"):
        return False
    return (config.invocation_params.dir / value.split("::")[0]).exists()


# The report files of pytest and its plugins, by flag and option name: opprof's must not take one
# (a trial's `--html=r.html --opprof-html=r.html` kept opprof's page under pytest-html's line).
OTHER_REPORTS = (
    ("--junitxml", "xmlpath"),
    ("--html", "htmlpath"),  # pytest-html
    ("--benchmark-json", "benchmark_json"),  # pytest-benchmark
    ("--report-log", "report_log"),  # pytest-reportlog
)


def other_reports(config: pytest.Config) -> dict[str, str]:
    """The report files pytest and its plugins write in this run, by their flag."""
    found = {}
    for flag, dest in OTHER_REPORTS:
        value = getattr(config.option, dest, None)
        value = getattr(value, "name", value)  # an open file: an argparse.FileType option
        if isinstance(value, (str, os.PathLike)) and os.fspath(value):
            found[flag] = os.fspath(value)
    return found


def refuse_bad_paths(config: pytest.Config, settings: Settings) -> None:
    """Where the run would read and write, checked together before any test runs. A plain run
    writes nothing: it judges the paths given (as it judges every value), not the default's."""
    folder = baseline_root(config.rootpath, settings.baseline_dir)
    if settings.measuring:
        problem = (
            spaced_path_outside(config)
            or _baseline_dir_problem(config, settings, folder)
            or output_paths_problem(settings, folder, other_reports(config))
        )
    else:
        problem = spaced_path_outside(config) or (
            settings.baseline_dir and _baseline_dir_problem(config, settings, folder)
        )
    if problem:
        raise pytest.UsageError(problem)


def _baseline_dir_problem(config: pytest.Config, settings: Settings, folder: Path) -> str | None:
    """baseline_dir_problem, naming where the value came from (resolved against the rootdir)."""
    found = read_option(config, next(o for o in OPTIONS if o.field == "baseline_dir"))
    return baseline_dir_problem(folder, settings.baseline_dir or ".opprof", found[1] if found else "the default")


PATH_FLAGS = ("--opprof-json", "--opprof-csv", "--opprof-html", "--opprof-trace-dir", "--opprof-baseline-dir")


def spaced_path_outside(config: pytest.Config) -> str | None:
    """`--opprof-json /elsewhere/r.json` (a space, not `=`) naming an existing path outside the
    current folder: pytest reads the arguments for the rootdir before plugins' options are known
    and takes it for a test path. Refused when that moved the ini file (and so the rootdir and
    .opprof/) away from the one above the current folder; a rootdir it did not move passes."""
    args = [str(a) for a in config.invocation_params.args]
    here = config.invocation_params.dir.resolve()
    if config.option.rootdir or config.option.inifilename:  # chosen explicitly
        return None
    spaced = [(f, v) for f, v in zip(args, args[1:]) if f in PATH_FLAGS and _outside(Path(here, v).resolve(), here)]
    expected = _ini_above(here) if spaced else None
    if not spaced or config.inipath == expected:
        return None
    flag, value = spaced[0]
    return (
        f"{flag} {value}: write {flag}={value} (with '='): before it knows this option, pytest takes an "
        f"existing path after a space for a test path when it picks the rootdir (it picked {config.rootpath}, "
        f"not the folder of {expected or 'the current folder'}), which decides where .opprof/ and the ini file are"
    )


def _outside(where: Path, here: Path) -> bool:
    """An existing path that is not the current folder or below it."""
    return where.exists() and where != here and here not in where.parents


_INI_FILES = (
    ("pytest.ini", ""),
    (".pytest.ini", ""),
    ("pyproject.toml", "[tool.pytest"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


def _ini_above(folder: Path) -> Path | None:
    """The pytest configuration file pytest would find from `folder` upwards (its names and the
    section each needs), or None."""
    for candidate in (folder, *folder.parents):
        for name, section in _INI_FILES:
            path = candidate / name
            if path.is_file() and (not section or section in path.read_text(encoding="utf-8", errors="replace")):
                return path
    return None


def refuse_unknown_ini_keys(config: pytest.Config) -> None:
    """An `opprof*` ini key or `-o` override no option reads is a typo of one that does
    (`opprof_tolerence`): pytest only warns of it (of an `-o` one, before pytest 9, not even
    that), and the run would go on with the default. `--help` and `--version` still answer."""
    if getattr(config.option, "help", False) or getattr(config.option, "version", False):
        return
    known = [option.ini for option in OPTIONS]
    overrides = getattr(config.known_args_namespace, "override_ini", None) or ()
    given = {text.split("=", 1)[0].strip() for text in overrides}
    in_ini = getattr(config, "_get_unknown_ini_keys", lambda: ())()  # pytest's list, as --strict-config reads it
    ours = sorted(key for key in {*in_ini, *given} if key.lower().startswith(("opprof", "oprof")) and key not in known)
    if ours:
        ini = shown_path(config.inipath, config.rootpath) if config.inipath else "the ini file"
        places = {key: "given with -o" if key in given else f"in {ini}" for key in ours}
        raise pytest.UsageError("\n".join(unknown_ini_key(key, places[key], known) for key in ours))


def ini_on(config: pytest.Config) -> bool:
    """Whether the ini file or an `-o` override turns measuring on (`opprof = true`), or recording
    (`opprof_update_baseline = all`), before the options are parsed (the early NumPy filter)."""
    try:
        measure = str(config.getini("opprof")).strip().lower() in ("1", "true", "yes", "on")
        update = str(config.getini("opprof_update_baseline") or "").strip().lower()
    except (ValueError, pytest.UsageError):  # a bad value: pytest_configure says so
        return False
    return measure or update not in ("", "0", "false", "no", "off", "none")
