"""Baselines under `.opprof/`: layout, schema, rounding, atomic read and write. No pytest, no torch.

One file per test: `<root>/<device key>/<test file path>/<test name[params]>.json`, JSON with
sorted keys, indent 2, a trailing newline, values to 4 significant digits, no timestamps, so a
re-recording of unchanged code gives no diff.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .analysis import Dist, OpStats, Profile
from .device import valid_key
from .documents import ENVIRONMENT_KEYS, BaselineDoc, FieldError
from .errors import (
    OUTPUT_FIX,
    BaselineError,
    conflict_fix,
    digits_past_limit,
    json_shown,
    mv_cannot_remove,
    mv_cannot_write,
    mv_in_the_way,
    mv_not_a_node_id,
    mv_unplaced,
    mv_unreadable,
    opprof_output,
    shown_value,
    symlink_outside,
    unreadable_files,
)
from .events import is_printable_name, printable_texts
from .files import NotReadable, broken_link, lfs_pointer, read_regular, safe_name, write_atomic, write_new
from .jsontext import json_text
from .layout import DEFAULT_BASELINE_DIR, baseline_root, holds_json, shown_path
from .textout import shell_quote
from .units import STORED_DIGITS, first_three

SCHEMA = 2  # 2 added each op's work (input signatures, FLOPs, kernels, copied bytes)
READABLE_SCHEMAS = (1, 2)  # a schema-1 file is compared on structure and time


UNUSABLE_FIX = "fix or delete it and run pytest --opprof-update-baseline"
UNUSABLE_WHILE_RECORDING_FIX = (
    "fix it, or delete it and run this command again: a recording never replaces a file it cannot read"
)


def stable_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The machine and torch facts a baseline records (ENVIRONMENT_KEYS), each None where absent;
    a text with a control character (a thread variable's value, an odd CPU model) written as its
    escape, as the reader wants it."""
    return printable_texts({key: facts.get(key) for key in ENVIRONMENT_KEYS})


def bad_baseline(path: Path | str, reason: str, fix: str = UNUSABLE_FIX) -> str:
    return f"{path}: {reason}; {fix}"


def round_sig(value: float, digits: int = STORED_DIGITS) -> float | int:
    """4 significant digits: small noise in the last digits does not show up as a diff."""
    if isinstance(value, int) and abs(value) < 10**digits:
        return value
    if value == 0:
        return 0
    return float(f"{value:.{digits}g}")


def baseline_path(root: Path, device_key: str, nodeid: str, device_names: bool = True) -> Path:
    """`tests/test_mlp.py::TestX::test_fwd[a/b]` -> `root/<key>/tests/test_mlp.py/TestX.test_fwd[a_b]-<hash>.json`.
    `device_names=False`: the name as versions before 2026-12-05 gave it, a Windows device's kept
    (`Aux.test_loss.json`), which `opprof mv` moves to its name now."""
    file_part, _, name = nodeid.partition("::")
    parts = [safe_name(p) for p in file_part.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    # Class::method reads as Class.method (names cannot hold a dot); a parameter id is kept as
    # it is, so an id with "::" gets a hash and never meets an id with "." in its place.
    function, bracket, params = name.partition("[")
    return root.joinpath(
        safe_name(device_key),
        *parts,
        safe_name(function.replace("::", ".") + bracket + params or "module", device_names) + ".json",
    )


def case_clashes(files: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The tests of (baseline file, test id) pairs whose files differ only in letter case
    (`test_x[A]`, `test_x[a]`): one file on a case-insensitive file system (macOS, Windows), where
    one test's recording overwrites the other's baseline. Each group sorted, the groups by their first."""
    by_name: dict[str, dict[str, str]] = {}
    for path, nodeid in files:
        by_name.setdefault(path.casefold(), {})[path] = nodeid
    return sorted(sorted(group.values()) for group in by_name.values() if len(group) > 1)


def orphan_baselines(root: Path, device_key: str, collected: Iterable[str], narrowed: Iterable[str]) -> list[Path]:
    """The baseline files no test of this run's collection reads: in the folder of each test file
    collected whole (each of its tests collected or deselected; `narrowed` names the files a node
    id on the command line picked tests of), the files named after none of its tests. A renamed
    or removed test's baseline otherwise stays, and reads in review as one that is checked."""
    skip = set(narrowed)
    expected: dict[Path, set[Path]] = {}
    for nodeid in collected:
        if nodeid.partition("::")[0] not in skip:
            path = baseline_path(root, device_key, nodeid)
            expected.setdefault(path.parent, set()).add(path)
    found = [
        path
        for folder, paths in expected.items()
        if folder.is_dir()
        for path in folder.glob("*.json")
        if path not in paths and path.is_file() and not path.name.startswith(".")  # as read_baseline_dir
    ]
    return sorted(found)


def under_other_keys(root: Path, device_key: str, old: Path, new: Path) -> list[Path]:
    """The baseline `old` of this key's folder as the other device keys' folders hold it, where
    the file `new` would go is free there: a renamed test's files there go stale too (a team
    trial's CI key kept the old name's baseline, named by no line of the laptop's run)."""
    key_dir = root / safe_name(device_key)
    try:
        old_rel, new_rel = old.relative_to(key_dir), new.relative_to(key_dir)
        others = sorted(p for p in root.iterdir() if p.is_dir() and p != key_dir and not p.name.startswith("."))
    except (ValueError, OSError):
        return []
    return [o / old_rel for o in others if (o / old_rel).is_file() and not os.path.lexists(o / new_rel)]


HASHED_NAME = re.compile(r"-[0-9a-f]{8}$")  # a name safe_name had to change: its source cannot be told


def gone_test_files(root: Path, device_key: str, rootpath: Path, limit: int = 10_000) -> list[Path]:
    """The baseline files of test files that no longer exist under the rootdir (a test file
    moved or deleted: `git mv tests/test_conv.py tests/vision/` left its folder of baselines
    behind, read by no test and named by no line). Only folders whose every name safe_name kept
    as it was; at most `limit` entries of the key's folder are looked at."""
    key_dir = root / safe_name(device_key)
    found: list[Path] = []
    for n, folder in enumerate(key_dir.rglob("*.py")):
        if n >= limit:
            break
        parts = folder.relative_to(key_dir).parts
        if not folder.is_dir() or any(HASHED_NAME.search(part) for part in parts):
            continue
        if not rootpath.joinpath(*parts).exists():
            found += [f for f in folder.glob("*.json") if f.is_file() and not f.name.startswith(".")]
    return sorted(found)


def baseline_file(rootpath: Path, baseline_dir: str | None, device_key: str, nodeid: str) -> Path:
    """A test's baseline file under the baseline folder."""
    return baseline_path(baseline_root(rootpath, baseline_dir), device_key, nodeid)


def lookup_folder(root: Path, device_key: str, rootpath: Path) -> str:
    """Where this run looked for baselines, for the 'no baseline' line: the device key's folder,
    and when it does not exist, the keys the baseline folder does hold (a typo'd
    --opprof-baseline-dir, or baselines recorded on another device, would otherwise pass quietly)."""
    folder = root / device_key
    shown = shown_path(folder, rootpath)
    if folder.is_dir():
        return shown
    keys = _device_keys(root)
    held = f"; {shown_path(root, rootpath)} holds baselines of {first_three(keys)}" if keys else ""
    default = rootpath / DEFAULT_BASELINE_DIR
    if not keys and default.resolve() != root.resolve() and (found := _device_keys(default)):
        held = f"; {shown_path(default, rootpath)} holds baselines of {first_three(found)}: --opprof-baseline-dir mistyped?"
    elif not keys and (above := _baselines_above(rootpath)) is not None:
        held = (
            f"; {above[0]} holds baselines of {first_three(above[1])}: the rootdir moved? pytest takes it from an "
            "ini file (pytest.ini, pyproject.toml), else from the paths given: give the project one at its top"
        )
    return f"{shown} (no such folder{held})"


_LEVELS_UP = 4  # folders above the rootdir searched for a baseline folder recorded from there


def _baselines_above(rootpath: Path) -> tuple[Path, list[str]] | None:
    """The nearest baseline folder (`.opprof`) with device keys in a folder above the rootdir: a
    newcomer's project without an ini file recorded from its top and ran from `tests/`, whose
    rootdir then held no `.opprof` (the line said no such folder, and nothing of why)."""
    for folder in list(rootpath.resolve().parents)[:_LEVELS_UP]:
        keys = _device_keys(folder / DEFAULT_BASELINE_DIR)
        if keys:
            return folder / DEFAULT_BASELINE_DIR, keys
    return None


def _device_keys(root: Path) -> list[str]:
    """The device-key folders a baseline folder holds: folders named as a key may be, with a
    .json file in them (a trial's `opprof_baseline_dir = "/etc"` was said to hold baselines of
    its 80 folders)."""
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and valid_key(p.name))
    except OSError:
        return []
    return [p.name for p in folders if holds_json(p)]


def _samples(values: tuple[float, ...], scale: float) -> list[float | int]:
    return [round_sig(v / scale) for v in values]


def _per_step(dist: Dist) -> int | float:
    """A work figure per step: exact, and the same in every step of unchanged code."""
    value = dist.median
    return int(value) if value == int(value) else value


def _work_entry(op: OpStats, kernels: dict[str, dict[str, int | float]]) -> dict[str, Any] | None:
    if op.work is None:
        return None
    return {
        "signatures": [
            {
                "shapes": sig.to_dict()["shapes"],
                "dtypes": list(sig.dtypes),
                "calls_per_step": _per_step(sig.calls_per_step),
            }
            for sig in op.work.signatures
        ],
        "flops_per_step": _per_step(op.work.flops_per_step),
        "kernels": kernels.get(op.name, {}),
        "bytes_per_step": {name: _per_step(d) for name, d in op.work.bytes_per_step},
        **(
            {}
            if op.work.autograd_per_step is None
            else {"autograd_calls_per_step": _per_step(op.work.autograd_per_step)}
        ),
    }


def _kernels_by_launcher(profile: Profile) -> dict[str, dict[str, int | float]]:
    """Per op, the kernels it launched itself and their calls per step."""
    found: dict[str, dict[str, int | float]] = {}
    for k in profile.kernels:
        if k.op is not None:
            found.setdefault(k.op, {})[k.name] = _per_step(k.calls_per_step)
    return {op: dict(sorted(kernels.items())) for op, kernels in found.items()}


def baseline_from_profile(
    profile: Profile, nodeid: str, device_key: str, environment: dict[str, Any], number: int = 1
) -> BaselineDoc:
    """The baseline document for one measured test (also the form compare() reads); `number`:
    which of the test's captures the profile is (counted from 1)."""
    return BaselineDoc.from_dict(_document(profile, nodeid, device_key, environment, number))


def _document(
    profile: Profile, nodeid: str, device_key: str, environment: dict[str, Any], number: int = 1
) -> dict[str, Any]:
    """The document in its JSON form (rounded as files hold it)."""
    return {
        "schema": SCHEMA,
        "nodeid": nodeid,
        "device_key": device_key,
        "environment": stable_facts(environment),
        # BaselineDoc.to_dict writes threads only when known and list_shapes only when true
        "capture": {
            "steps": profile.steps,
            "source": profile.source,
            "threads": profile.threads,
            "list_shapes": profile.list_shapes,
            "number": number,
            "kernels_dropped": profile.kernels_dropped,  # written only when some were
        },
        "reference_ms": round_sig(profile.reference_ns / 1e6) if profile.reference_ns else None,
        "dispatch_reference_ms": (
            round_sig(profile.dispatch_reference_ns / 1e6) if profile.dispatch_reference_ns else None
        ),
        "small_reference_ms": round_sig(profile.small_reference_ns / 1e6) if profile.small_reference_ns else None,
        "workload_reference": _workload_entry(profile),  # BaselineDoc.to_dict writes it only when taken
        "wall_ms": _samples(tuple(s.wall_ns for s in profile.step_spans), 1e6) if profile.wall_known else None,
        # BaselineDoc.to_dict writes it only when known (a file written before it reads back the same)
        "outside_ms": _samples(profile.outside_ops_ns, 1e6) if profile.outside_ops_ns is not None else None,
        "events_per_step": _events_per_step(profile),
        "ops": _op_entries(profile),
        "kernels": _kernel_entries(profile),
        "memory_ops": _memory_entries(profile),
    }


def _op_entries(profile: Profile) -> dict[str, Any]:
    launched, lost = _kernels_by_launcher(profile), dict(profile.records_lost)
    return {
        op.name: {
            "calls_per_step": list(op.calls_per_step.samples),
            "cpu_ms": _samples(op.cpu_per_step.samples, 1e6),
            "device_ms": _samples(op.device_per_step.samples, 1e6),
            "on_device": op.on_device,
            "work": _work_entry(op, launched),
            **({"records_lost": list(lost[op.name])} if op.name in lost else {}),
        }
        for op in profile.ops
    }


def _kernel_entries(profile: Profile) -> dict[str, Any]:
    """Per kernel name, its launches and device time per step summed over the launching ops; and
    each op's share (`by_op`) where the sum is not one op's: launched by several, or also by none."""
    kernels: dict[str, Any] = {}
    shares: dict[str, dict[str, Any]] = {}
    unlaunched: set[str] = set()
    for k in profile.kernels:
        row = kernels.setdefault(
            k.name, {"calls_per_step": [0] * profile.steps, "device_ms": [0.0] * profile.steps, "ops": []}
        )
        row["calls_per_step"] = [a + b for a, b in zip(row["calls_per_step"], k.calls_per_step.samples)]
        row["device_ms"] = [a + b / 1e6 for a, b in zip(row["device_ms"], k.device_per_step.samples)]
        if k.op is None:
            unlaunched.add(k.name)
            continue
        if k.op not in row["ops"]:
            row["ops"].append(k.op)
        shares.setdefault(k.name, {})[k.op] = {
            "calls_per_step": list(k.calls_per_step.samples),
            "device_ms": _samples(k.device_per_step.samples, 1e6),
        }
    for name, row in kernels.items():
        row["device_ms"] = [round_sig(v) for v in row["device_ms"]]
        row["ops"].sort()
        by_op = shares.get(name, {})
        if len(by_op) > 1 or (by_op and name in unlaunched):
            row["by_op"] = dict(sorted(by_op.items()))
    return kernels


def _memory_entries(profile: Profile) -> dict[str, Any]:
    return {
        m.name: {
            "calls_per_step": list(m.calls_per_step.samples),
            "device_ms": _samples(m.device_per_step.samples, 1e6),
            "bytes": m.bytes,
        }
        for m in profile.memory_ops
    }


def _events_per_step(profile: Profile) -> list[int]:
    events = [0] * profile.steps
    for op in profile.ops:
        events = [a + b for a, b in zip(events, op.calls_per_step.samples)]
    return events


def _workload_entry(profile: Profile) -> dict[str, Any] | None:
    """The profile's workload reference as the file holds it: its JSON form, the time rounded."""
    ref = profile.workload_reference
    return {**ref.to_dict(), "ms": round_sig(ref.ns / 1e6)} if ref is not None else None


def dumps(data: dict[str, Any]) -> str:
    """The file's text: sorted keys, indent 2, and a list of numbers or texts (per-step samples,
    a shape, dtypes) on one line, so that a diff names the op a changed line belongs to (a CI
    trial's one-op change was 186 lines of bare numbers, one per line, none near its op)."""
    return json_text(data, ensure_ascii=False) + "\n"


def write_baseline(path: Path, doc: BaselineDoc, root: Path | None = None) -> None:
    """Write atomically: a temporary file beside it, then a rename; never outside `root`. Keys of
    the user's own in the file it replaces stay (with_own_keys)."""
    write_atomic(path, dumps(with_own_keys(doc.to_dict(), _old_data(path))), inside=root)


# The keys the schema names at a file's top and in an op's entry, written or not: one this version
# leaves out (an `outside_ms` it could not measure) is never carried over from the file it replaces.
SCHEMA_KEYS = frozenset(
    {
        "schema", "nodeid", "device_key", "environment", "capture", "reference_ms", "dispatch_reference_ms",
        "wall_ms", "events_per_step", "ops", "kernels", "memory_ops", "workload_reference", "outside_ms",
        "small_reference_ms",
    }
)  # fmt: skip
OP_KEYS = frozenset({"calls_per_step", "cpu_ms", "device_ms", "on_device", "work", "recorded_range_ms", "records_lost"})


def with_own_keys(data: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """`data`, a file's new form, with the keys of the user's own that the file it replaces held: at
    its top and in the entry of an op that still runs (a `"comment"`, which the docs invite: a
    rewrite dropped an upgrade trial's `"comment": "addmm budget agreed with perf team"` unsaid)."""
    if not old:
        return data
    found = {**data, **_own(old, SCHEMA_KEYS)}
    old_ops = old.get("ops")
    old_ops = old_ops if isinstance(old_ops, dict) else {}
    found["ops"] = {name: {**entry, **_own(old_ops.get(name), OP_KEYS)} for name, entry in data["ops"].items()}
    return found


def _own(entry: Any, known: frozenset[str]) -> dict[str, Any]:
    """The keys of an object the schema does not name (none where it is no object)."""
    return {k: v for k, v in entry.items() if k not in known} if isinstance(entry, dict) else {}


def _old_data(path: Path) -> dict[str, Any] | None:
    """The JSON object of the file a write replaces (read and accepted before), or None: no file,
    or one that does not read as an object."""
    try:
        data = json.loads(read_regular(path, MAX_BASELINE_BYTES).decode("utf-8-sig"))
    except (OSError, ValueError):  # no file yet; NotReadable, UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return data if isinstance(data, dict) else None


def file_bytes(path: Path) -> bytes | None:
    """A baseline file's bytes just before a write, to put back if the test errs after it (None:
    no file; the file was read and accepted already, so it is of a baseline's size)."""
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class Undo:
    """A baseline write to undo should the test still err: the file, its bytes before (None: there
    was none) and the baseline folder. As plain JSON it travels from an xdist worker, so that the
    controller undoes it when the worker dies in the test's teardown."""

    path: Path
    before: bytes | None
    root: Path | None

    def __call__(self) -> None:
        put_back(self.path, self.before, self.root)

    def to_dict(self) -> dict[str, Any]:
        before = base64.b64encode(self.before).decode() if self.before is not None else None
        return {"path": str(self.path), "before": before, "root": str(self.root) if self.root else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Undo:
        before = base64.b64decode(data["before"]) if data["before"] is not None else None
        return cls(Path(data["path"]), before, Path(data["root"]) if data["root"] else None)


def put_back(path: Path, before: bytes | None, root: Path | None = None) -> None:
    """Undo a baseline write: the file's bytes as they were, or no file (and none of the folders
    the write made, up to `root`) where there was none."""
    if before is not None:
        write_atomic(path, before, inside=root)
        return
    path.unlink(missing_ok=True)
    folder = path.parent
    while root is not None and folder != root and root in folder.parents:
        try:
            folder.rmdir()  # only an empty one
        except OSError:
            return
        folder = folder.parent


MAX_BASELINE_BYTES = 64 << 20  # a baseline is kilobytes; a larger file is refused, not read


def read_baseline(path: Path, nodeid: str | None = None, inside: Path | None = None) -> BaselineDoc | None:
    """The baseline at `path`, None when there is none. A file that cannot be used raises
    BaselineError naming it and the fix; the file is never touched. `inside`: a symlink to a
    file outside that folder is refused, not read (as the writer refuses to write through one)."""
    if path.is_symlink():
        _check_link(path, inside)
    text = _text(path)
    if text is None:
        return None
    data = _json(path, text)
    _check_kind(path, data)
    if nodeid is not None and isinstance(data.get("nodeid"), str) and data["nodeid"] != nodeid:
        fix = (
            f"if the test was moved or renamed and the file moved with it, keep it: opprof mv {_quoted(path)} "
            f"{_quoted(nodeid)}; else delete it and run pytest --opprof-update-baseline"
        )
        raise BaselineError(bad_baseline(path, f"belongs to {shown_value(data['nodeid'])}, not {nodeid!r}", fix))
    try:
        return BaselineDoc.from_file(data)
    except ValueError as exc:
        fix = exc.fix if isinstance(exc, FieldError) else UNUSABLE_FIX
        raise BaselineError(bad_baseline(path, str(exc), fix)) from None


def _quoted(text: Path | str) -> str:
    return shell_quote(str(text))


def _check_link(path: Path, inside: Path | None) -> None:
    """A baseline that is a symlink: to a file inside `inside` (when given) that exists. A loop
    raised RuntimeError from `resolve()` (a trial's test failed with a traceback), and a link to
    nothing read as no baseline at all."""
    problem = broken_link(path)
    if problem is not None:
        raise BaselineError(bad_baseline(path, problem, "point it at the baseline file, or delete it"))
    target = path.resolve()
    if inside is not None and inside.resolve() not in target.parents:
        raise BaselineError(symlink_outside(path, target, inside))


GZIP_MAGIC = b"\x1f\x8b"
TRACE_FIX = "opprof analyze reads traces; a baseline is recorded by pytest --opprof-update-baseline"
LFS_FIX = "fetch the file with git lfs pull, or keep the baseline folder out of Git LFS (baselines are small text)"
_SNIFF = 4096  # characters of a file that does not parse looked at for a trace's keys


def _text(path: Path) -> str | None:
    """The file's text (a UTF-8 byte order mark, as some editors add, is dropped); None when absent."""
    try:
        data = read_regular(path, MAX_BASELINE_BYTES)
    except FileNotFoundError:
        return None
    except NotReadable as exc:
        raise BaselineError(bad_baseline(path, str(exc))) from None
    except IsADirectoryError:
        raise BaselineError(
            bad_baseline(path, "a folder, not a baseline file", "rename or move that folder: its name is a baseline's")
        ) from None
    except NotADirectoryError:  # a file where one of its folders belongs: that file is the one to move
        blocker = next((folder for folder in path.parents if folder.is_file()), path.parent)
        reason = f"its folder {blocker.name} is a file, not a folder of baselines"
        raise BaselineError(bad_baseline(path, reason, "rename or move that file")) from None
    except OSError as exc:
        raise BaselineError(bad_baseline(path, f"cannot be read ({exc})")) from None
    if data.startswith(GZIP_MAGIC):
        raise BaselineError(bad_baseline(path, "gzip-compressed, as traces are, not a baseline", TRACE_FIX))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BaselineError(bad_baseline(path, f"cannot be read ({exc})")) from None


def _json(path: Path, text: str) -> Any:
    """The parsed JSON; a key given twice in one object (a merge resolved by hand) is refused:
    JSON readers keep one of them silently."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):
            twice = _first_repeated(key for key, _ in pairs)
            raise BaselineError(bad_baseline(path, f"the key {twice!r} appears twice in one object (a merge by hand?)"))
        return found

    if not text.strip():  # said as it is, not as `not valid JSON (line 1)` (a trial)
        raise BaselineError(bad_baseline(path, "an empty file, not a baseline"))
    if lfs_pointer(text):  # a trial's read `not valid JSON (line 1)`
        raise BaselineError(bad_baseline(path, "a Git LFS pointer, not the baseline it stands for", LFS_FIX))
    try:
        data = json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        if any(key in text[:_SNIFF] for key in ('"traceEvents"', '"schemaVersion"', '"deviceProperties"')):
            reason = f"a Kineto/Chrome trace (not valid JSON at line {exc.lineno}: cut short?), not a baseline"
            raise BaselineError(bad_baseline(path, reason, TRACE_FIX)) from None
        conflict = _conflict_line(text)
        if conflict:
            reason = f"holds a merge conflict's markers (<<<<<<< at line {conflict})"
            raise BaselineError(bad_baseline(path, reason, CONFLICT_FIX)) from None
        raise BaselineError(bad_baseline(path, f"not valid JSON (line {exc.lineno})")) from None
    except RecursionError:
        raise BaselineError(bad_baseline(path, "nested too deeply to be a baseline")) from None
    except ValueError as exc:  # an integer of thousands of digits
        raise BaselineError(bad_baseline(path, digits_past_limit(exc))) from None
    lone = _lone_surrogate(data) if _SURROGATE_ESCAPE.search(text) else None
    if lone is not None:
        reason = f"holds {lone!r}, the escape of half a character (a lone UTF-16 surrogate), which no text can hold"
        raise BaselineError(bad_baseline(path, reason))
    return data


# `\ud800` to `\udfff` in the file's text: a hand edit's (the writer writes characters, not escapes)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(data: Any) -> str | None:
    """A lone surrogate the parsed JSON holds (JSON reads a pair as the one character it is; a
    lone one is no character, and crashed the reports and xdist, which write text as UTF-8)."""
    found = re.search("[\ud800-\udfff]", json.dumps(data, ensure_ascii=False))
    return found.group() if found else None


CONFLICT_FIX = conflict_fix()  # the way out where the test is not known (`opprof show`)


def _conflict_line(text: str) -> int | None:
    """The line of a git merge conflict's first marker, or None."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("<<<<<<< ") or line == "<<<<<<<":
            return number
    return None


def _first_repeated(keys: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            return key
        seen.add(key)
    return None


def _check_kind(path: Path, data: Any) -> None:
    """A baseline of a schema this version reads; a trace or a run report says what it is."""
    events = data if isinstance(data, list) else []  # a trace may also be a bare list of events
    if (
        isinstance(data, dict)
        and "traceEvents" in data
        or (events and isinstance(events[0], dict) and "ph" in events[0])
    ):
        raise BaselineError(bad_baseline(path, "a Kineto/Chrome trace, not a baseline", TRACE_FIX))
    output = opprof_output(data)
    if output:
        raise BaselineError(
            bad_baseline(
                path,
                f"{output}, not a baseline",
                f"{OUTPUT_FIX}: pass a baseline file or folder (.opprof/<device key>), and keep such files out "
                "of baseline folders",
            )
        )
    if not isinstance(data, dict) or "schema" not in data:
        raise BaselineError(bad_baseline(path, "not an opprof baseline (no 'schema')"))
    _check_schema(path, data["schema"])


def _check_schema(path: Path, schema: Any) -> None:
    """A schema this version reads; a newer one says to upgrade (recording again cannot help:
    a file that cannot be read is never overwritten)."""
    readable = ", ".join(map(str, READABLE_SCHEMAS))
    if type(schema) is int and schema > max(READABLE_SCHEMAS):
        fix = "upgrade pytest-opprof, or delete it and run pytest --opprof-update-baseline"
        raise BaselineError(
            bad_baseline(path, f"baseline schema {schema} is newer than this pytest-opprof reads ({readable})", fix)
        )
    if type(schema) is not int or schema not in READABLE_SCHEMAS:
        raise BaselineError(
            bad_baseline(path, f"'schema' is {json_shown(schema)}, not a schema this pytest-opprof reads ({readable})")
        )


def read_baseline_dir(path: Path) -> list[tuple[Path, BaselineDoc]]:
    """Every baseline file under a folder (a device-key folder or the whole baseline dir),
    sorted by path. A file that cannot be used raises BaselineError naming it (and counting the
    others)."""
    found, unreadable = scan_baseline_dir(path)
    if unreadable:
        raise BaselineError(unreadable_files(unreadable))
    return found


def scan_baseline_dir(path: Path) -> tuple[list[tuple[Path, BaselineDoc]], list[str]]:
    """read_baseline_dir that reads past a file it cannot use: the readable files, and one line
    naming each other one (`opprof show` shows the rest of a folder where a merge conflict broke
    one file). A folder holding no baseline file at all raises BaselineError."""
    return _read_each(_baseline_files(path))


def _baseline_files(path: Path) -> list[Path]:
    """The baseline files under a folder, sorted; BaselineError for a folder without one."""
    if not path.is_dir():
        raise BaselineError(f"{path}: not a folder; pass a baseline folder such as .opprof/cpu-x86_64")
    # a folder named *.json is no baseline (its files are listed on their own)
    files = sorted(p for p in path.rglob("*.json") if not p.name.startswith(".") and not p.is_dir())
    if not files:
        if any(path.rglob("*.json.gz")):
            raise BaselineError(
                f"{path}: traces (*.json.gz), no baseline files; opprof compares traces one file against another "
                "(opprof compare A.json.gz B.json.gz), and shows one with opprof analyze"
            )
        raise BaselineError(
            f"{path}: no baseline files (*.json) under it; record some with pytest --opprof-update-baseline"
        )
    return files


def _read_each(files: list[Path]) -> tuple[list[tuple[Path, BaselineDoc]], list[str]]:
    """Each file read, or its one-line error: a folder's every broken file named at once, not the
    first alone (not one per run, fixed to meet the next)."""
    found, unreadable = [], []
    for file in files:
        try:
            data = read_baseline(file)
        except BaselineError as exc:
            unreadable.append(str(exc))
            continue
        assert data is not None  # it was just listed
        found.append((file, data))
    return found, unreadable


@dataclass(frozen=True, slots=True)
class Moved:
    """What move_baseline did: the file's old and new path, and the test it belonged to."""

    old: Path
    new: Path
    was: str  # the node id the file named before
    gone: bool = False  # FILE was not there, and `new` is the baseline of the node id already


def move_baseline(path: Path, nodeid: str) -> Moved:
    """The baseline at `path` made the baseline of test `nodeid`, for a test that was renamed or
    moved (`opprof mv`): its "nodeid" set and the file put where the plugin reads that test's
    baseline, in the same baseline and device-key folder. The new file is written whole, where
    nothing stands, before the old one goes; another test's file is never replaced. BaselineError
    names what stands in the way."""
    try:
        return _move(path, nodeid)
    except OSError as exc:  # a folder it may not read (`exists()` raised PermissionError)
        raise BaselineError(mv_unreadable(path, exc)) from None


def _move(path: Path, nodeid: str) -> Moved:
    doc = read_baseline(path)
    problem = _node_id_problem(nodeid)
    if doc is None:
        done = None if problem else _moved_before(path, nodeid)
        if done is None:
            raise BaselineError(
                bad_baseline(path, "no such file", "give the baseline file of the renamed or moved test")
            )
        return Moved(path, done, nodeid, gone=True)  # nothing to do
    if problem:
        raise BaselineError(mv_not_a_node_id(nodeid, problem))
    root = _baseline_root_of(path, doc, nodeid)
    new = baseline_path(root, str(doc.device_key), nodeid)
    in_place = _same_file(new, path) and not new.is_symlink()
    if in_place and doc.nodeid == nodeid:
        return Moved(path, path, doc.nodeid)  # nothing to do
    if not in_place:
        _refuse_in_the_way(new, path)
    data = _rekeyed(path, nodeid)
    try:
        write_atomic(new, data, inside=root) if in_place else write_new(new, data, inside=root)
    except FileExistsError:  # it came while we looked
        raise BaselineError(mv_in_the_way(new, _what_is_at(new))) from None
    except OSError as exc:  # a read-only folder, a file where a folder belongs: nothing moved
        raise BaselineError(mv_cannot_write(new, path, exc)) from None
    if not in_place:
        _remove_moved(path, new, root / safe_name(str(doc.device_key)))
    return Moved(path, path if in_place else new, doc.nodeid)


def _moved_before(path: Path, nodeid: str) -> Path | None:
    """For a FILE that is gone: the baseline of `nodeid` in a device-key folder above it, where one
    is there and names `nodeid` (the same `opprof mv` run again: a retrying script failed on its
    second run, `no such file`), else None. A file of another test, or of another key, is none."""
    for form in (path, path.absolute()):  # as given first: the line prints it as the user's
        for folder in form.parents:
            if not folder.name:
                continue
            found = baseline_path(folder.parent, folder.name, nodeid)
            if found.is_file() and not found.is_symlink():
                try:
                    doc = read_baseline(found)
                except BaselineError:  # FILE's `no such file` is the line (a trial's read as the other file's)
                    return None
                if doc is not None and doc.nodeid == nodeid and safe_name(str(doc.device_key)) == folder.name:
                    return found
    return None


def _node_id_problem(nodeid: str) -> str | None:
    file_part, sep, name = nodeid.partition("::")
    if not sep or not file_part or not name:
        return "not a test's node id (a file, `::`, then the test)"
    if not is_printable_name(nodeid):
        return "holds a control character"
    return None


def _baseline_root_of(path: Path, doc: BaselineDoc, nodeid: str) -> Path:
    """The baseline folder (`.opprof`) holding `path` where the plugin reads the baseline of the
    test the file names, or of `nodeid` (a file moved with its test): of the folders named as its
    device key around it, the one that gives that place (a test folder named as the key, `gpu`,
    nested the file one level deeper on each move when the nearest was taken)."""
    key = safe_name(str(doc.device_key)) if doc.device_key else None
    for form in (path, path.absolute(), path.resolve()):  # as given first: the paths it prints read as the user's
        for folder in (p for p in form.parents if key and p.name == key):
            if any(
                _same_file(baseline_path(folder.parent, str(doc.device_key), n, devices), path)
                for n in (doc.nodeid, nodeid)
                for devices in (True, False)
            ):
                return folder.parent
    raise BaselineError(mv_unplaced(path, doc.device_key, doc.nodeid, nodeid))


def _same_file(a: Path, b: Path) -> bool:
    if os.path.normpath(a.absolute()) == os.path.normpath(b.absolute()):
        return True
    return a.exists() and b.exists() and a.samefile(b)


def _refuse_in_the_way(new: Path, path: Path) -> None:
    """Anything at the new place (another test's baseline, a folder, a dangling link) stays; a
    FILE that is a link would leave the file it points to behind, read by no test."""
    if os.path.lexists(new):
        raise BaselineError(mv_in_the_way(new, _what_is_at(new)))
    if path.is_symlink():
        raise BaselineError(bad_baseline(path, "a symbolic link", "move the file it points to"))


def _what_is_at(path: Path) -> str:
    """What stands at a place: `the baseline of '...'`, a folder, a symbolic link, a file."""
    if path.is_symlink():
        return "a symbolic link"
    if path.is_dir():
        return "a folder"
    try:
        doc = read_baseline(path)
    except BaselineError:
        return "a file that is no readable baseline"
    return f"the baseline of {doc.nodeid!r}" if doc is not None else "nothing now"


def _rekeyed(path: Path, nodeid: str) -> bytes:
    """The file's bytes with its "nodeid" set: only that value replaced where it can be found
    (a byte order mark, CRLF endings and the layout stay, and Git sees a rename), else the
    document written again."""
    text = path.read_bytes().decode("utf-8")
    data = _json(path, text.lstrip("\ufeff"))
    wanted = {**data, "nodeid": nodeid}
    for found in re.finditer(r'"nodeid"\s*:\s*("(?:[^"\\]|\\.)*")', text):
        candidate = text[: found.start(1)] + json.dumps(nodeid, ensure_ascii=False) + text[found.end(1) :]
        with contextlib.suppress(ValueError):
            if json.loads(candidate.lstrip("\ufeff")) == wanted:
                return candidate.encode("utf-8")
    return dumps(wanted).encode("utf-8")


def _remove_moved(path: Path, new: Path, key_folder: Path) -> None:
    try:
        path.unlink()
    except OSError as exc:
        raise BaselineError(mv_cannot_remove(path, new, exc)) from None
    _drop_empty_folders(path.parent, key_folder)


def _drop_empty_folders(folder: Path, stop: Path) -> None:
    """The folders a moved file leaves empty, up to its device-key folder (Git keeps none)."""
    stop = stop.absolute()
    folder = folder.absolute()
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty (or not ours to remove)
            return
        folder = folder.parent
